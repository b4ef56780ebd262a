//! Pure data and decisions shared by the supervisor and the launcher.
//!
//! This crate is responsible for *what* a confined tool process may see and do, never for doing it:
//! it performs no system calls. [`launch`] holds the launch policy the supervisor hands to
//! `autotool-launcher` and the pure function that turns it into a [`launch::Plan`] (mounts,
//! Landlock rules, limits, environment, argv) which the launcher then carries out step by step;
//! [`dirs`] which directories of the user's a tool may be granted at all (`READ_DIRS`,
//! `WRITE_DIRS`), and why one is refused.
//! [`hosts`] holds what the egress proxy decides: canonical hosts, allowlist entries, whether a
//! tool may reach a target, and which addresses are never dialled. [`consent`] holds when a
//! tool version may hold a key on an earlier approval and when the user is asked again.
//! [`lifecycle`] holds a tool version's states and the rules that move it by its health;
//! [`names`] the names of tools, functions and keys, each with its one rule; [`search`] how
//! `search_tools` ranks tools; [`listing`] which tools `tools/list` shows when
//! the library is larger than hosts handle well. [`packages`] holds which package requirements a
//! tool may declare, the hash-pinned lock they resolve to, and how that lock is named to the user.
//! [`fork`] holds the request that asks a tool template to fork a tool (no part of the policy).
//! [`uses`] holds which tools may call which (`USES`): no cycle, no chain deeper than a bound.
//! [`reach`] holds a tool's declared reach (`REQUIRED_HOSTS`, `READ_DIRS`, `WRITE_DIRS`) and what
//! of it is granted or still to be asked. [`added`] holds where an added MCP server comes from
//! (`pypi:…`, `npm:…`) and how a value is written into the file that starts it.

pub mod added;
pub mod consent;
pub mod dirs;
pub mod fork;
pub mod hosts;
pub mod launch;
pub mod lifecycle;
pub mod listing;
pub mod names;
pub mod packages;
pub mod reach;
pub mod search;
pub mod uses;

pub use launch::{
    Egress, FsAccess, LaunchPolicy, LayerProgram, Limits, Mount, PathRule, Plan, PolicyError,
    Rlimit, RlimitResource, UserDir,
};
