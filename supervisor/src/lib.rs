//! The autotool supervisor: the `autotool` binary and library.
//!
//! Layout (grows with the MCP server, consent, credentials, redaction, egress proxy, verifier
//! and ledger):
//! - [`launcher`]: finding `autotool-launcher`, its probe, confined spawns;
//! - [`runtime`]: the Python interpreter tools run on;
//! - [`doctor`]: what the machine offers and how to fix what it lacks;
//! - [`setup`]: installing the launcher with file capabilities;
//! - [`toolproc`]: one running tool process (confined through the launcher, or unconfined with
//!   `--sandbox off`), spoken to as an MCP client.
//!
//! The supervisor never confines anything itself: every tool process is started through the
//! launcher.
#![deny(clippy::print_stdout)]

pub mod doctor;
pub mod launcher;
pub mod runtime;
pub mod setup;
pub mod toolproc;
