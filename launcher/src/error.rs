//! The launcher's errors: one variant per confinement step, each with a hint where a user can act.

use std::io;
use std::path::PathBuf;

/// Why the launcher refused or failed to start the tool.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("usage: autotool-launcher --policy-fd N ({0})")]
    Usage(String),
    #[error("reading the launch policy from descriptor {fd}: {source}")]
    ReadPolicy { fd: i32, source: io::Error },
    #[error("invalid launch policy: {0}")]
    Policy(#[from] autotool_policy::PolicyError),
    #[error("the template's start request does not match the policy: {0}")]
    ForkRequest(String),
    #[error("Landlock is not available on this kernel ({0})")]
    LandlockMissing(io::Error),
    #[error("Landlock ABI {need} is required, this kernel offers ABI {have}")]
    LandlockAbi { have: i32, need: u8 },
    #[error("seccomp filters are not available on this kernel")]
    SeccompMissing,
    #[error("opening {path:?} to mount it in the sandbox: {source}")]
    OpenSource { path: PathBuf, source: io::Error },
    #[error(
        "the directory {path:?} changed since it was granted ({why}); the tool was not started"
    )]
    UserDirChanged { path: PathBuf, why: &'static str },
    #[error("opening the granted directory {path:?}: {source}")]
    UserDirOpen { path: PathBuf, source: io::Error },
    #[error("mounting the granted directory {path:?} ({step}): {source}")]
    UserDirMount {
        path: PathBuf,
        step: &'static str,
        source: io::Error,
    },
    #[error("creating the user namespace: {0}")]
    UserNamespace(io::Error),
    #[error("creating namespaces (network, mount, PID, IPC, UTS, cgroup): {0}")]
    Namespaces(io::Error),
    #[error("writing the user namespace's id maps ({what}): {source}")]
    IdMap {
        what: &'static str,
        source: io::Error,
    },
    #[error("switching to the tool's user and group ids: {0}")]
    SetIds(io::Error),
    #[error("setting the host name: {0}")]
    Hostname(io::Error),
    #[error("bringing up the loopback interface: {0}")]
    Loopback(io::Error),
    #[error("binding the egress listener on {addr}: {source}")]
    EgressBind { addr: String, source: io::Error },
    #[error("sending the egress listener to the parent: {0}")]
    EgressSend(io::Error),
    #[error("making the mount tree private: {0}")]
    MountPrivate(io::Error),
    #[error("mount step `{step}` at {target:?}: {source}")]
    Mount {
        step: &'static str,
        target: PathBuf,
        source: io::Error,
    },
    #[error(
        "mounting {target:?} as a read-only overlay of {path:?} (the sandbox shows host \
         directories under no host path, which needs overlayfs: a kernel with \
         CONFIG_OVERLAY_FS, `modprobe overlay`): {source}"
    )]
    Overlay {
        path: PathBuf,
        target: PathBuf,
        source: io::Error,
    },
    #[error("pivot_root into the new root: {0}")]
    PivotRoot(io::Error),
    #[error("setting resource limit {what}: {source}")]
    Rlimit {
        what: &'static str,
        source: io::Error,
    },
    #[error("starting a new session: {0}")]
    Setsid(io::Error),
    #[error("closing inherited descriptors: {0}")]
    CloseFds(io::Error),
    #[error("changing to the working directory {path:?}: {source}")]
    Chdir { path: PathBuf, source: io::Error },
    #[error("setting no_new_privs: {0}")]
    NoNewPrivs(io::Error),
    #[error("refusing executable-memory gain (PR_SET_MDWE): {0}")]
    Mdwe(io::Error),
    #[error("dropping capabilities: {0}")]
    DropCaps(String),
    #[error("applying the Landlock ruleset: {0}")]
    LandlockRestrict(String),
    #[error("building the seccomp filter: {0}")]
    SeccompBuild(String),
    #[error("installing the seccomp filter: {0}")]
    SeccompInstall(io::Error),
    #[error("parent-death signal: {0}")]
    ParentDeath(io::Error),
    #[error("the launcher's parent exited before the tool started")]
    ParentGone,
    #[error("the interpreter {path:?} {why}")]
    Interpreter { path: PathBuf, why: String },
    #[error("exec of {path:?}: {source}")]
    Exec { path: PathBuf, source: io::Error },
    #[error("the sandboxed child failed before exec (status {0})")]
    Child(i32),
    #[error(
        "a template process needs a user namespace (started with file capabilities, tools start \
         the launcher's way instead)"
    )]
    TemplateUserNamespace,
    #[error("template: {0}")]
    Template(String),
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        source: io::Error,
    },
}

impl LaunchError {
    /// What the user can do about it, where there is something.
    pub fn hint(&self) -> Option<String> {
        match self {
            LaunchError::LandlockMissing(_) | LaunchError::LandlockAbi { .. } => Some(
                "run a kernel with Landlock ABI 6 or newer (Linux 6.12+) and `landlock` in the \
                 `lsm=` boot parameter; `autotool doctor` shows what this machine offers; only \
                 `--sandbox off` runs tools without it"
                    .into(),
            ),
            LaunchError::SeccompMissing => Some(
                "run a kernel built with CONFIG_SECCOMP_FILTER; `autotool doctor` shows what this \
                 machine offers"
                    .into(),
            ),
            LaunchError::UserNamespace(_) | LaunchError::IdMap { .. } => Some(
                "enable unprivileged user namespaces (`sudo sysctl -w \
                 kernel.apparmor_restrict_unprivileged_userns=0` on Ubuntu 23.10+, \
                 `sudo sysctl -w user.max_user_namespaces=15000` or \
                 `kernel.unprivileged_userns_clone=1` elsewhere), or install the launcher with \
                 file capabilities: `autotool setup --launcher`"
                    .into(),
            ),
            LaunchError::Namespaces(_) | LaunchError::Mount { .. } | LaunchError::PivotRoot(_) => {
                Some(
                    "the launcher needs user namespaces or its file capabilities to build the \
                     sandbox; `autotool doctor` names what is missing"
                        .into(),
                )
            }
            LaunchError::UserDirChanged { .. } => Some(
                "if you moved or replaced the directory yourself, grant it to the tool again \
                 (a grant holds the directory as it was, by device and inode); if you did not, \
                 look at what is at that path now before granting anything"
                    .into(),
            ),
            LaunchError::UserDirOpen { .. } => Some(
                "the user running autotool must be able to reach the directory; check its \
                 permissions and those of its parents"
                    .into(),
            ),
            LaunchError::UserDirMount { source, .. }
                if source.raw_os_error() == Some(libc::EINVAL) =>
            {
                Some(
                    "a directory with other file systems mounted below it cannot be shown \
                     without them: grant the directories below it instead"
                        .into(),
                )
            }
            LaunchError::UserDirMount { .. } => Some(
                "the launcher needs user namespaces or its file capabilities to build the \
                 sandbox; `autotool doctor` names what is missing"
                    .into(),
            ),
            LaunchError::Mdwe(_) => {
                Some("run Linux 6.3 or newer (PR_SET_MDWE); `autotool doctor` shows more".into())
            }
            LaunchError::Interpreter { .. } => Some(
                "point the runtime at a real Python interpreter binary (not a pyenv or asdf shim); \
                 `autotool doctor` shows the runtime in use"
                    .into(),
            ),
            _ => None,
        }
    }
}

/// The last OS error as an `io::Error`.
pub(crate) fn last() -> io::Error {
    io::Error::last_os_error()
}
