//! The launcher's privileged and process-changing system calls, behind one trait: [`RealSys`]
//! performs them, [`Recorder`] writes them down (and answers queries from a small model of the
//! process), so the logic of the namespace, mount, limit, privilege and init stages is
//! unit-tested without privileges. The real thing is tested end to end by the escape suite.
//!
//! What stays outside the trait, on purpose: the calls whose only logic is the call itself and
//! that the escape suite checks directly (Landlock, seccomp, the network namespace's sockets,
//! closing descriptors, exec).

mod real;
mod recorder;

pub use real::RealSys;
pub use recorder::Recorder;

use autotool_policy::RlimitResource;
use caps::Capability;
use std::collections::HashSet;
use std::io;
use std::path::Path;

/// Mount attributes set with `mount_setattr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Attrs {
    pub read_only: bool,
    pub noexec: bool,
    pub nosuid: bool,
    pub nodev: bool,
}

/// A kernel filesystem to mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fs {
    Tmpfs { size_bytes: u64, mode: u32 },
    Proc,
}

/// A capability set of the calling thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CapSet {
    Bounding,
    Ambient,
    Inheritable,
    Effective,
    Permitted,
}

/// A set of capabilities.
pub type Caps = HashSet<Capability>;

/// The `prctl` options the launcher sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prctl {
    /// `PR_SET_NO_NEW_PRIVS`.
    NoNewPrivs,
    /// `PR_SET_MDWE` with `PR_MDWE_REFUSE_EXEC_GAIN`.
    RefuseExecGain,
    /// `PR_SET_KEEPCAPS`: keep the permitted set across the switch away from uid 0.
    KeepCaps,
    /// `PR_SET_PDEATHSIG`: the signal this process gets when its parent dies.
    ParentDeathSignal(i32),
    /// `PR_SET_DUMPABLE` 0: no core dumps, and `/proc/<pid>` and ptrace closed to the same user.
    NotDumpable,
}

/// Result of [`Sys::fork`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forked {
    Parent(i32),
    Child,
}

/// One call that changes something; what [`Recorder`] records. Queries (ids, capability
/// reads) are answered, not recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    MakePrivate,
    Mount {
        fs: Fs,
        target: String,
        attrs: Attrs,
    },
    MkdirAll(String),
    CreateFile {
        path: String,
        contents: String,
    },
    Symlink {
        target: String,
        link: String,
    },
    Bind {
        source: String,
        target: String,
    },
    /// A bind of the source alone, without the mounts below it.
    BindOne {
        source: String,
        target: String,
    },
    Overlay {
        source: String,
        target: String,
        attrs: Attrs,
    },
    SetAttrs {
        target: String,
        attrs: Attrs,
        recursive: bool,
    },
    PivotRoot(String),
    /// `unshare` with these `CLONE_NEW*` flags.
    Unshare(i32),
    /// A write of `/proc/<pid>/<file>` (`setgroups`, `uid_map`, `gid_map`).
    IdMap {
        pid: i32,
        file: &'static str,
        contents: String,
    },
    /// `setgroups(0, NULL)`.
    ClearGroups,
    /// `setresgid(gid, gid, gid)`.
    SetGid(u32),
    /// `setresuid(uid, uid, uid)`.
    SetUid(u32),
    Prctl(Prctl),
    CapRaise(CapSet, Capability),
    CapDrop(CapSet, Capability),
    CapClear(CapSet),
    /// Set a whole capability set; the capabilities sorted by number.
    CapSetTo(CapSet, Vec<Capability>),
    Rlimit(RlimitResource, u64),
    Setsid,
    Fork,
    /// `waitpid(pid, 0)`.
    Wait(i32),
    /// `waitpid(-1, 0)`.
    WaitAny,
    Kill(i32, i32),
    /// Close every descriptor but these.
    CloseFds(Vec<i32>),
}

/// A host object to bind: its original path (for messages and recording) and an `O_PATH`
/// descriptor opened before any namespace existed.
#[derive(Debug)]
pub struct Source<'a> {
    pub path: &'a Path,
    pub fd: i32,
}

/// The launcher's system calls. Each returns the OS error unchanged; the stages turn it into a
/// [`crate::LaunchError`] naming the step.
pub trait Sys {
    // Mounts.
    fn make_private(&mut self) -> io::Result<()>;
    fn mount(&mut self, fs: &Fs, target: &Path, attrs: Attrs) -> io::Result<()>;
    fn mkdir_all(&mut self, path: &Path) -> io::Result<()>;
    fn create_file(&mut self, path: &Path, contents: &[u8]) -> io::Result<()>;
    fn symlink(&mut self, target: &Path, link: &Path) -> io::Result<()>;
    fn bind(&mut self, source: &Source<'_>, target: &Path) -> io::Result<()>;
    /// Bind `source` alone: mounts below it stay out (and, in a user namespace, a source with
    /// mounts below it is refused by the kernel rather than shown without them).
    fn bind_one(&mut self, source: &Source<'_>, target: &Path) -> io::Result<()>;
    /// A read-only overlay at `target` (an empty directory) whose layers are the directory
    /// `source` and `target` itself, both named by descriptor: the mount table then shows no
    /// host path.
    fn overlay(&mut self, source: &Source<'_>, target: &Path, attrs: Attrs) -> io::Result<()>;
    fn set_attrs(&mut self, target: &Path, attrs: Attrs, recursive: bool) -> io::Result<()>;
    fn pivot_root(&mut self, new_root: &Path) -> io::Result<()>;

    // Identity (queries).
    fn euid(&mut self) -> u32;
    fn egid(&mut self) -> u32;
    fn uid(&mut self) -> u32;
    fn pid(&mut self) -> i32;
    fn parent_pid(&mut self) -> i32;

    // Namespaces and ids.
    fn unshare(&mut self, flags: i32) -> io::Result<()>;
    fn write_id_map(&mut self, pid: i32, file: &'static str, contents: &str) -> io::Result<()>;
    fn clear_groups(&mut self) -> io::Result<()>;
    fn set_gid(&mut self, gid: u32) -> io::Result<()>;
    fn set_uid(&mut self, uid: u32) -> io::Result<()>;

    // Process attributes and capabilities.
    fn prctl(&mut self, option: Prctl) -> io::Result<()>;
    fn caps_read(&mut self, set: CapSet) -> io::Result<Caps>;
    fn caps_raise(&mut self, set: CapSet, cap: Capability) -> io::Result<()>;
    fn caps_drop(&mut self, set: CapSet, cap: Capability) -> io::Result<()>;
    fn caps_clear(&mut self, set: CapSet) -> io::Result<()>;
    fn caps_set(&mut self, set: CapSet, caps: &Caps) -> io::Result<()>;
    /// Every capability this kernel knows (for emptying the bounding set).
    fn caps_supported(&mut self) -> Vec<Capability>;
    fn set_rlimit(&mut self, resource: RlimitResource, value: u64) -> io::Result<()>;

    // Processes.
    fn setsid(&mut self) -> io::Result<()>;
    /// Fork. Sound only in a single-threaded process, which the launcher is.
    fn fork(&mut self) -> io::Result<Forked>;
    /// Wait for `pid` (retrying on `EINTR`); the raw wait status.
    fn wait(&mut self, pid: i32) -> io::Result<i32>;
    /// Wait for any child (retrying on `EINTR`); its pid and raw wait status.
    fn wait_any(&mut self) -> io::Result<(i32, i32)>;
    fn kill(&mut self, pid: i32, signal: i32) -> io::Result<()>;
    /// Close every descriptor of this process but `keep` (stdio included, unless kept).
    fn close_fds(&mut self, keep: &[i32]) -> io::Result<()>;
}
