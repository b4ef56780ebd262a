//! The launch policy of one tool process and the plan it turns into.
//!
//! The supervisor builds a [`LaunchPolicy`], serialises it as JSON and hands it to
//! `autotool-launcher` on a file descriptor. The launcher calls [`LaunchPolicy::plan`], a pure
//! function, and performs the resulting [`Plan`] in order. Keeping every decision here means the
//! whole sandbox layout is checked by comparing plans in unit tests, without privileges.
//!
//! A tool that declared packages gets its layer (a flat site-packages, as `uv pip install
//! --target` makes it) mounted read-only with exec at [`PACKAGES_MOUNT`], next to the runtime,
//! and runs `python -I -B -c` [`bootstrap`] instead of `python -I -B /tool/tool.py`: `-I` ignores
//! `PYTHONPATH`, so the layer is appended to `sys.path` by the bootstrap, after the runtime's own
//! packages. Like the runtime, the layer's host directory may live anywhere (a home under `/tmp`
//! included): it is only the source of a mount at a fixed place. It may not overlap the tool's
//! own directory, which stays noexec.
//!
//! Directories of the user's a tool was granted ([`UserDir`], from its `READ_DIRS` and
//! `WRITE_DIRS`) appear at their own host path, after everything the sandbox mounts itself:
//! read-only, or read-write for a write grant, always nosuid, nodev and noexec, with Landlock
//! rules to match. Each carries the device and inode granted; the launcher opens the path
//! without following any symlink and refuses a directory that is no longer that one. Which
//! directories may be granted at all is [`crate::dirs`]'s decision.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// Where the tool's own directory appears inside the sandbox (read-only, noexec).
pub const TOOL_MOUNT: &str = "/tool";
/// Where the tool runtime (the virtual environment tools run on) appears inside the sandbox,
/// read-only with exec, wherever it lives on the host: a home under `/tmp`, or any other place
/// the sandbox builds itself, works as well as one under `/home`.
pub const RUNTIME_MOUNT: &str = "/runtime";
/// Where a tool's packages layer appears inside the sandbox, read-only with exec (compiled
/// extensions are mapped executable), wherever it lives on the host.
pub const PACKAGES_MOUNT: &str = "/packages";
/// The tool's private home inside the sandbox (tmpfs, noexec).
pub const HOME_MOUNT: &str = "/home/tool";
/// The tool's private temporary directory inside the sandbox (tmpfs, noexec).
pub const TMP_MOUNT: &str = "/tmp";
/// The user and group id the tool runs as inside its user namespace.
pub const TOOL_ID: u32 = 1000;
/// The lowest Landlock ABI that gives every right the sandbox relies on: filesystem rights
/// including truncate and device ioctls, TCP connect/bind rules, and the abstract-unix-socket and
/// signal scopes (ABI 6, Linux 6.12).
pub const MIN_LANDLOCK_ABI: u8 = 6;
/// Device nodes visible in the sandbox's `/dev`.
pub const DEV_NODES: [&str; 4] = ["null", "zero", "random", "urandom"];
/// Host-wide files of `/proc` a tool has no use for, hidden behind an empty read-only file
/// where the kernel has them (paths below `/proc`; docs/sandbox.md says why each, and what
/// stays visible). The masked paths of container runtimes (runc, crun, Docker: `kcore`,
/// `keys`, `latency_stats`, `timer_list`, `timer_stats`, `sched_debug`, `interrupts`), and:
/// the kernel's layout (`kallsyms`, `modules`, `config.gz`, `vmallocinfo`, `kpage*`), what
/// the rest of the machine is doing (`softirqs`, `schedstat`, `key-users`, `locks`,
/// `diskstats`, `kmsg`), the allocator's state (`buddyinfo`, `pagetypeinfo`, `slabinfo`,
/// `zoneinfo`), the hardware and its layout (`iomem`, `ioports`, `mtrr`, `consoles`,
/// `partitions`, `swaps`, `mdstat`), the boot command line and configuration (`cmdline`,
/// `bootconfig`), the identity of this boot (`sys/kernel/random/boot_id`) and a control
/// (`sysrq-trigger`). Files only root may read are masked too: a mode is a kernel's choice.
pub const PROC_MASKED_FILES: [&str; 35] = [
    "kallsyms",
    "modules",
    "config.gz",
    "kcore",
    "vmallocinfo",
    "kpagecount",
    "kpageflags",
    "kpagecgroup",
    "interrupts",
    "softirqs",
    "timer_list",
    "sched_debug",
    "schedstat",
    "latency_stats",
    "timer_stats",
    "keys",
    "key-users",
    "locks",
    "diskstats",
    "kmsg",
    "buddyinfo",
    "pagetypeinfo",
    "slabinfo",
    "zoneinfo",
    "iomem",
    "ioports",
    "mtrr",
    "consoles",
    "partitions",
    "swaps",
    "mdstat",
    "cmdline",
    "bootconfig",
    "sys/kernel/random/boot_id",
    "sysrq-trigger",
];
/// Directories of `/proc` describing the host's hardware and its pressure, hidden behind an
/// empty read-only tmpfs where the kernel has them: `acpi`, `asound` and `scsi` (masked by
/// container runtimes), the device lists of `bus` and `driver`, `irq` (interrupt lines and
/// their CPUs), `fs` (each host file system by its device) and `pressure` (host-wide stall
/// figures).
pub const PROC_MASKED_DIRS: [&str; 8] = [
    "acpi", "asound", "scsi", "bus", "driver", "irq", "fs", "pressure",
];
/// Port the egress listener binds inside the tool's network namespace (127.0.0.1 and ::1).
pub const DEFAULT_EGRESS_PORT: u16 = 3128;

/// Everything the launcher needs to confine and start one tool process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchPolicy {
    /// Host directory holding the tool; mounted read-only and noexec at [`TOOL_MOUNT`].
    pub tool_dir: PathBuf,
    /// File name of the tool's entry point inside `tool_dir` (a plain name, no slashes).
    pub tool_file: String,
    /// Absolute path of the interpreter. It must resolve (inside the sandbox) to an ELF binary,
    /// never a script or shim; it is executed directly, never looked up on `PATH`.
    pub interpreter: PathBuf,
    /// Arguments placed between the interpreter and the tool file.
    #[serde(default = "default_interpreter_args")]
    pub interpreter_args: Vec<String>,
    /// Host directories mounted read-only *with* exec at the same path: the parts of the Python
    /// installation outside the system directories (a base prefix under `/opt`, say).
    #[serde(default)]
    pub runtime_dirs: Vec<PathBuf>,
    /// Host directory of the tool runtime (a virtual environment), mounted read-only with exec
    /// at [`RUNTIME_MOUNT`] whatever its host path. An `interpreter` below it is executed at the
    /// same place below [`RUNTIME_MOUNT`], so the environment is found there.
    #[serde(default)]
    pub runtime: Option<PathBuf>,
    /// Host directory of the tool's packages layer (a flat site-packages), mounted read-only
    /// with exec at [`PACKAGES_MOUNT`] whatever its host path. When set, the tool runs through
    /// [`bootstrap`], which puts [`PACKAGES_MOUNT`] on `sys.path` after the runtime's packages.
    #[serde(default)]
    pub packages: Option<PathBuf>,
    /// System directories mounted read-only with exec at the same path when they exist.
    #[serde(default = "default_system_dirs")]
    pub system_dirs: Vec<PathBuf>,
    /// Individual files of `/etc` made visible read-only when they exist. `/etc` itself is never
    /// mounted whole (it holds `shadow`, keys and host configuration).
    #[serde(default = "default_etc_files")]
    pub etc_files: Vec<PathBuf>,
    /// The tool's environment, exactly. Nothing is inherited.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Resource limits.
    #[serde(default)]
    pub limits: Limits,
    /// Descriptors (besides stdin, stdout and stderr) kept open for the tool.
    #[serde(default)]
    pub keep_fds: Vec<i32>,
    /// The egress listener: bound inside the tool's network namespace and passed to the parent.
    #[serde(default)]
    pub egress: Option<Egress>,
    /// The tool's channel to the other tools it declares in `USES`: a stream socket the
    /// supervisor serves, inherited at this descriptor and left open in the tool at the same
    /// number (like [`LaunchPolicy::keep_fds`]). When set, the tool runs through [`program`],
    /// which gives it the module `autotool_uses` ([`USES_MODULE`]).
    #[serde(default)]
    pub uses_fd: Option<i32>,
    /// Directories of the user's the tool was granted, each shown at its own path (read-only,
    /// or read-write for a write grant; always noexec). A policy holding any is never forked
    /// from a template ([`LaunchPolicy::fork_mismatch`]).
    #[serde(default)]
    pub user_dirs: Vec<UserDir>,
    /// A program of the packages layer run instead of the tool file (an npm server's script,
    /// run by node): argv is the interpreter, its arguments, [`PACKAGES_MOUNT`]`/entry` and
    /// `args`, with no Python bootstrap. Needs `packages`; never forked from a template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer_program: Option<LayerProgram>,
    /// Lowest Landlock ABI accepted; a kernel below it is an error, never a downgrade.
    #[serde(default = "default_landlock_abi")]
    pub min_landlock_abi: u8,
    /// Host name inside the UTS namespace.
    #[serde(default = "default_hostname")]
    pub hostname: String,
}

/// A program inside the packages layer, run by the interpreter in place of the tool file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerProgram {
    /// Its path relative to the layer (`node_modules/pkg/dist/index.js`): plain components, no
    /// `.` or `..`.
    pub entry: PathBuf,
    /// The arguments it is started with, after its path.
    #[serde(default)]
    pub args: Vec<String>,
}

/// A directory of the user's granted to a tool (`READ_DIRS` or `WRITE_DIRS`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserDir {
    /// The canonical host path (symlinks and `..` resolved once, when it was granted); also
    /// where the directory appears inside the sandbox.
    pub path: PathBuf,
    /// Read-write (create, write, rename and remove files and directories below it) rather
    /// than read-only.
    pub write: bool,
    /// Device of the directory that was granted (`st_dev`).
    pub dev: u64,
    /// Inode of the directory that was granted (`st_ino`): the launcher refuses a path that
    /// now names another directory.
    pub ino: u64,
    /// Where the tool's code names it below its home, when it was declared so (`~/notes` is
    /// `notes`): a symbolic link at that place in the tool's private home points at `path`, so
    /// `os.path.expanduser("~/notes")` finds the grant. Relative, without `.` or `..`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home_link: Option<PathBuf>,
}

/// Where the egress listener goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Egress {
    /// A unix socket (inherited descriptor) on which the launcher sends the listening sockets
    /// with `SCM_RIGHTS`: first the 127.0.0.1 one, then the ::1 one.
    pub report_fd: i32,
    /// Port bound on 127.0.0.1 and ::1 inside the namespace; the only TCP port the tool may
    /// connect to.
    #[serde(default = "default_egress_port")]
    pub port: u16,
}

/// Resource limits of one tool process (and its threads).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Address space, bytes (`RLIMIT_AS`).
    pub memory_bytes: u64,
    /// Threads of the tool's user inside its namespace (`RLIMIT_NPROC`).
    pub threads: u64,
    /// Open descriptors (`RLIMIT_NOFILE`).
    pub open_files: u64,
    /// Largest file the tool may write (`RLIMIT_FSIZE`).
    pub file_size_bytes: u64,
    /// CPU seconds over the process's life (`RLIMIT_CPU`); the supervisor restarts a tool that
    /// hits it.
    pub cpu_seconds: u64,
    /// Size of each private tmpfs (`/tmp` and the home directory).
    pub tmp_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 2 << 30,
            threads: 64,
            open_files: 256,
            file_size_bytes: 64 << 20,
            cpu_seconds: 3600,
            tmp_bytes: 64 << 20,
        }
    }
}

/// The system directories a policy mounts by default (read-only, with exec, where they exist).
pub const SYSTEM_DIRS: [&str; 7] = [
    "/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin",
];

fn default_interpreter_args() -> Vec<String> {
    vec!["-I".into(), "-B".into()]
}
fn default_system_dirs() -> Vec<PathBuf> {
    SYSTEM_DIRS.iter().map(PathBuf::from).collect()
}
fn default_etc_files() -> Vec<PathBuf> {
    [
        "/etc/ld.so.cache",
        "/etc/ld.so.conf",
        "/etc/localtime",
        "/etc/nsswitch.conf",
        "/etc/protocols",
        "/etc/services",
        "/etc/mime.types",
        "/etc/ssl/certs",
        "/etc/ssl/openssl.cnf",
        "/etc/ca-certificates.conf",
        "/etc/pki/tls/certs",
        "/etc/alternatives",
    ]
    .iter()
    .map(PathBuf::from)
    .collect()
}
fn default_landlock_abi() -> u8 {
    MIN_LANDLOCK_ABI
}
fn default_hostname() -> String {
    "autotool".into()
}
fn default_egress_port() -> u16 {
    DEFAULT_EGRESS_PORT
}

/// Why a policy cannot be planned.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    #[error("{what} must be an absolute path without `..`: {path:?}")]
    NotAbsolute { what: &'static str, path: PathBuf },
    #[error("the runtime must be a directory below `/`, not {0:?}")]
    RuntimeRoot(PathBuf),
    #[error("the packages layer must be a directory below `/`, not {0:?}")]
    PackagesRoot(PathBuf),
    #[error(
        "the packages layer {packages:?} overlaps the tool directory {tool_dir:?}, which must stay \
         noexec: install the layer in its own directory"
    )]
    PackagesInToolDir {
        packages: PathBuf,
        tool_dir: PathBuf,
    },
    #[error("tool_file must be a plain file name: {0:?}")]
    ToolFile(String),
    #[error("{what} {path:?} would hide a directory the sandbox reserves ({reserved})")]
    Reserved {
        what: &'static str,
        path: PathBuf,
        reserved: &'static str,
    },
    #[error("environment variable name {0:?} is empty or contains `=` or NUL")]
    EnvName(String),
    #[error("environment variable {0} holds a NUL byte")]
    EnvValue(String),
    #[error("limit {0} must be greater than zero")]
    ZeroLimit(&'static str),
    #[error("descriptor {0} cannot be kept: 0-2 are stdio, and the egress report socket is closed")]
    KeepFd(i32),
    #[error("egress report descriptor {0} must be above 2 (0-2 are the tool's stdio)")]
    ReportFd(i32),
    #[error(
        "uses descriptor {0} must be above 2 and differ from the egress report socket and the \
         kept descriptors"
    )]
    UsesFd(i32),
    #[error(
        "the layer program {0:?} must be a relative path of plain names inside the packages \
         layer, and its arguments free of NUL bytes"
    )]
    LayerProgram(PathBuf),
    #[error("a layer program needs a packages layer to run from, and runs without a uses channel")]
    LayerProgramAlone,
    #[error("interpreter argument {0:?} holds a NUL byte")]
    InterpreterArg(String),
    #[error(
        "min_landlock_abi {0} is below {MIN_LANDLOCK_ABI}, the lowest ABI the sandbox is built on"
    )]
    LandlockAbi(u8),
    #[error("hostname {0:?} is not a valid host name")]
    Hostname(String),
    #[error("egress port must not be 0")]
    EgressPort,
    #[error("the granted directory {path:?} {why}")]
    UserDir { path: PathBuf, why: String },
    #[error("policy is not valid JSON for a launch policy: {0}")]
    Json(String),
}

/// Filesystem rights a Landlock rule grants beneath a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum FsAccess {
    /// Read files and directories.
    Read,
    /// Read and execute (system and runtime directories).
    ReadExec,
    /// Read, write, create, rename and remove, never execute (the private tmpfs).
    ReadWrite,
    /// Read and write an existing device file, with its ioctls (`/dev/null`, …).
    Device,
    /// Read, write, create, rename and remove files and directories, never execute, and make
    /// no symlink, device node, fifo or socket: a directory the user granted for writing.
    UserWrite,
}

/// One Landlock rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathRule {
    pub path: PathBuf,
    pub access: FsAccess,
}

/// One step of building the sandbox's filesystem. Targets are paths inside the new root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mount {
    /// A host directory or file, bound recursively, read-only, nosuid and nodev; `exec` decides
    /// noexec. Skipped when `optional` and the source does not exist. The launcher may copy a
    /// small regular file without exec into the root instead of binding it: once the root is
    /// sealed the tool sees the same read-only file.
    Bind {
        source: PathBuf,
        target: PathBuf,
        exec: bool,
        optional: bool,
    },
    /// A host directory shown at `target` without its host path: a read-only overlay whose
    /// layers are the directory, named through a descriptor, and the empty mount point. A bind
    /// would put the source's path on its file system (a user's home among it) in the tool's
    /// `mountinfo`; the overlay's entry names only `overlay` and descriptors. Required;
    /// nosuid and nodev; `exec` decides noexec.
    Layer {
        source: PathBuf,
        target: PathBuf,
        exec: bool,
    },
    /// A private size-limited tmpfs, writable, nosuid, nodev and noexec.
    Tmpfs {
        target: PathBuf,
        size_bytes: u64,
        mode: u32,
    },
    /// A fresh procfs of the tool's PID namespace, read-only (nothing under it, `/proc/sys`
    /// included, can be written).
    Proc { target: PathBuf },
    /// A fresh procfs, writable: only a template's root (a procfs mounted read-only is
    /// read-only in every later view, and the template's children write their user namespaces'
    /// id maps through it; each child mounts its own read-only `/proc`).
    WritableProc { target: PathBuf },
    /// Hide the file at `target` behind an empty, read-only view of the host's `/dev/null`
    /// (reads find nothing), when the kernel has that file.
    MaskFile { target: PathBuf },
    /// Hide the directory at `target` behind an empty read-only tmpfs, when the kernel has it.
    MaskDir { target: PathBuf },
    /// A minimal `/dev`: a tmpfs holding the listed host device nodes bound in, plus the usual
    /// `fd`, `stdin`, `stdout`, `stderr` links.
    Dev { target: PathBuf, nodes: Vec<String> },
    /// A small file the launcher writes (passwd, group, hosts), read-only once the root is sealed.
    File { target: PathBuf, contents: String },
    /// A symbolic link, recreated inside the root when the host has one at the same place (for
    /// example `/bin -> usr/bin` on merged-/usr systems).
    HostSymlink { path: PathBuf },
    /// A symbolic link at `path` (inside the tool's private home) to `target` (a directory of
    /// the user's granted to the tool, bound at its own path): where the tool's code looks for
    /// it when it names it below `~`.
    Link { path: PathBuf, target: PathBuf },
    /// A directory of the user's the tool was granted, bound at its own path from a descriptor
    /// opened without following any symlink, and only when that descriptor is the directory
    /// granted (`dev`, `ino`); not recursive (mounts below it stay out), read-only unless
    /// `write`, always nosuid, nodev and noexec.
    UserDir {
        path: PathBuf,
        write: bool,
        dev: u64,
        ino: u64,
    },
}

/// A resource limit to set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RlimitResource {
    AddressSpace,
    Threads,
    OpenFiles,
    FileSize,
    Cpu,
    Core,
}

/// A resource limit, soft and hard set alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rlimit {
    pub resource: RlimitResource,
    pub value: u64,
}

/// What the launcher performs, in order: the pure result of a [`LaunchPolicy`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub hostname: String,
    /// Filesystem steps, in order, below a fresh tmpfs root that is made read-only afterwards.
    pub mounts: Vec<Mount>,
    /// Landlock rules; every filesystem right is handled, so anything not listed is denied.
    pub landlock: Vec<PathRule>,
    /// TCP ports the tool may connect to (only the egress listener).
    pub connect_ports: Vec<u16>,
    pub min_landlock_abi: u8,
    pub rlimits: Vec<Rlimit>,
    /// The environment, exactly.
    pub env: Vec<(String, String)>,
    pub keep_fds: Vec<i32>,
    pub egress: Option<Egress>,
    /// Path executed (inside the root) and the full argv, argv\[0\] included.
    pub exec_path: PathBuf,
    pub argv: Vec<String>,
    pub working_dir: PathBuf,
    pub uid: u32,
    pub gid: u32,
}

/// Places the sandbox builds itself. A user's home (`/home/alice/.autotool/runtime`) is not
/// among them: only the tool's own home is.
const RESERVED: [&str; 7] = [
    "/proc",
    "/dev",
    TMP_MOUNT,
    TOOL_MOUNT,
    HOME_MOUNT,
    RUNTIME_MOUNT,
    PACKAGES_MOUNT,
];

/// The directory the sandbox reserves that `path` is, contains or lies inside (`/etc` among
/// them), if any: such a host path cannot be mounted at its own place inside the sandbox.
pub fn reserved_by(path: &Path) -> Option<&'static str> {
    RESERVED
        .iter()
        .copied()
        .chain(["/etc"])
        .find(|r| path.starts_with(r) || Path::new(r).starts_with(path))
}

fn check_abs(what: &'static str, path: &Path) -> Result<(), PolicyError> {
    let ok = path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if ok {
        Ok(())
    } else {
        Err(PolicyError::NotAbsolute {
            what,
            path: path.to_path_buf(),
        })
    }
}

/// Refuse a mount target that is, contains or lies inside a reserved directory, or is `/`.
fn check_not_reserved(what: &'static str, path: &Path) -> Result<(), PolicyError> {
    match reserved_by(path) {
        Some(reserved) => Err(PolicyError::Reserved {
            what,
            path: path.to_path_buf(),
            reserved,
        }),
        None => Ok(()),
    }
}

impl LaunchPolicy {
    /// A policy with every default for a tool at `tool_dir/tool_file`, run by `interpreter`
    /// whose runtime lives under `runtime_dirs`.
    pub fn new(
        tool_dir: impl Into<PathBuf>,
        tool_file: impl Into<String>,
        interpreter: impl Into<PathBuf>,
        runtime_dirs: Vec<PathBuf>,
    ) -> Self {
        LaunchPolicy {
            tool_dir: tool_dir.into(),
            tool_file: tool_file.into(),
            interpreter: interpreter.into(),
            interpreter_args: default_interpreter_args(),
            runtime_dirs,
            runtime: None,
            packages: None,
            system_dirs: default_system_dirs(),
            etc_files: default_etc_files(),
            env: BTreeMap::new(),
            limits: Limits::default(),
            keep_fds: Vec::new(),
            egress: None,
            uses_fd: None,
            user_dirs: Vec::new(),
            layer_program: None,
            min_landlock_abi: MIN_LANDLOCK_ABI,
            hostname: default_hostname(),
        }
    }

    /// Parse a policy sent by the supervisor.
    pub fn from_json(bytes: &[u8]) -> Result<Self, PolicyError> {
        serde_json::from_slice(bytes).map_err(|e| PolicyError::Json(e.to_string()))
    }

    /// Serialise for the launcher.
    pub fn to_json(&self) -> Vec<u8> {
        // A policy holds only strings, numbers and paths: serialising it cannot fail, but a
        // path that is not UTF-8 would, so fall back to an empty document the launcher rejects.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Why a tool with this policy cannot be forked from a template started with `template`
    /// sharing `shares` (read-only, at their own paths), or `None` when it can: the same
    /// interpreter, arguments, runtime and system view (the template has imported from
    /// them), and a tool directory and package layer the template can see. A uses channel
    /// (`uses_fd`) is no obstacle: the template hands it to its child like the report socket.
    ///
    /// A tool granted directories of the user's is never forked: the template's mount namespace
    /// does not hold them, and must not (every tool forked from it would inherit them), so such
    /// a tool starts through the launcher, which mounts them in the tool's own namespace.
    pub fn fork_mismatch(&self, template: &LaunchPolicy, shares: &[PathBuf]) -> Option<String> {
        if self.layer_program.is_some() {
            return Some(
                "it runs a program of its package layer (an npm server on node), which no \
                 template has loaded"
                    .into(),
            );
        }
        if !self.user_dirs.is_empty() {
            return Some(
                "it was granted directories of the user's, which only a tool started by the \
                 launcher gets (in its own mount namespace)"
                    .into(),
            );
        }
        let same = [
            ("interpreter", self.interpreter == template.interpreter),
            (
                "interpreter arguments",
                self.interpreter_args == template.interpreter_args,
            ),
            ("runtime", self.runtime == template.runtime),
            (
                "runtime directories",
                self.runtime_dirs == template.runtime_dirs,
            ),
            (
                "system directories",
                self.system_dirs == template.system_dirs,
            ),
            ("/etc files", self.etc_files == template.etc_files),
        ];
        if let Some((what, _)) = same.iter().find(|(_, same)| !same) {
            return Some(format!("its {what} differ from the template's"));
        }
        let shared = |p: &Path| shares.iter().any(|s| p.starts_with(s) && p != s);
        if !shared(&self.tool_dir) {
            return Some(format!(
                "its directory {:?} is not below a directory the template shares",
                self.tool_dir
            ));
        }
        match &self.packages {
            Some(p) if !shared(p) && template.packages.as_ref() != Some(p) => Some(format!(
                "its package layer {p:?} is not below a directory the template shares"
            )),
            _ => None,
        }
    }

    /// The interpreter's path inside the sandbox: below [`RUNTIME_MOUNT`] when it lies in the
    /// runtime, else its own path.
    pub fn exec_path(&self) -> PathBuf {
        match &self.runtime {
            Some(runtime) => match self.interpreter.strip_prefix(runtime) {
                Ok(rest) => Path::new(RUNTIME_MOUNT).join(rest),
                Err(_) => self.interpreter.clone(),
            },
            None => self.interpreter.clone(),
        }
    }

    /// The user's directories, checked and sorted by path (a parent before what it holds):
    /// each absolute without `..`, not `/`, listed once, and clear of every place the sandbox
    /// mounts itself (its own directories, `/etc`, the system and runtime directories, the
    /// tool's directory, runtime and packages layer), neither inside one nor holding one.
    fn check_user_dirs(&self) -> Result<Vec<&UserDir>, PolicyError> {
        let refuse = |path: &Path, why: String| PolicyError::UserDir {
            path: path.to_path_buf(),
            why,
        };
        let overlap = |a: &Path, b: &Path| a.starts_with(b) || b.starts_with(a);
        let mut dirs: Vec<&UserDir> = self.user_dirs.iter().collect();
        dirs.sort_by(|a, b| a.path.cmp(&b.path));
        for (i, dir) in dirs.iter().enumerate() {
            let path = dir.path.as_path();
            check_abs("user dir", path)?;
            if path.parent().is_none() {
                return Err(refuse(path, "is the host's root".into()));
            }
            check_not_reserved("user dir", path)?;
            if i > 0 && dirs[i - 1].path == dir.path {
                return Err(refuse(path, "is listed twice".into()));
            }
            if let Some(link) = &dir.home_link {
                let plain = link
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)));
                if !plain || link.as_os_str().is_empty() {
                    return Err(refuse(
                        path,
                        format!("its place below the home {link:?} is not a plain relative path"),
                    ));
                }
                let taken = dirs
                    .iter()
                    .filter(|d| d.path != dir.path)
                    .any(|d| d.home_link.as_ref() == Some(link));
                if taken {
                    return Err(refuse(
                        path,
                        format!("its place below the home {link:?} is another grant's"),
                    ));
                }
            }
            let mounted = self
                .system_dirs
                .iter()
                .map(|d| (d, "system directory"))
                .chain(self.runtime_dirs.iter().map(|d| (d, "runtime directory")));
            for (other, what) in mounted {
                if overlap(path, other) {
                    return Err(refuse(
                        path,
                        format!("overlaps the {what} {other:?}, which the sandbox mounts itself"),
                    ));
                }
            }
            let own = std::iter::once((&self.tool_dir, "the tool's own directory"))
                .chain(self.runtime.iter().map(|r| (r, "the tool runtime")))
                .chain(
                    self.packages
                        .iter()
                        .map(|p| (p, "the tool's packages layer")),
                );
            for (other, what) in own {
                if overlap(path, other) {
                    return Err(refuse(path, format!("overlaps {what} {other:?}")));
                }
            }
        }
        Ok(dirs)
    }

    /// Check the policy and turn it into the launcher's plan. Pure: no file is looked at.
    pub fn plan(&self) -> Result<Plan, PolicyError> {
        check_abs("tool_dir", &self.tool_dir)?;
        check_abs("interpreter", &self.interpreter)?;
        if self.tool_file.is_empty()
            || self.tool_file.contains('/')
            || self.tool_file.contains('\0')
            || self.tool_file == "."
            || self.tool_file == ".."
        {
            return Err(PolicyError::ToolFile(self.tool_file.clone()));
        }
        if let Some(arg) = self.interpreter_args.iter().find(|a| a.contains('\0')) {
            return Err(PolicyError::InterpreterArg(arg.clone()));
        }
        for dir in &self.runtime_dirs {
            check_abs("runtime dir", dir)?;
            check_not_reserved("runtime dir", dir)?;
        }
        for dir in &self.system_dirs {
            check_abs("system dir", dir)?;
            check_not_reserved("system dir", dir)?;
        }
        if let Some(runtime) = &self.runtime {
            // The host path may be anywhere: it is only the source of the mount.
            check_abs("runtime", runtime)?;
            if runtime.parent().is_none() {
                return Err(PolicyError::RuntimeRoot(runtime.clone()));
            }
        }
        if let Some(packages) = &self.packages {
            // Like the runtime, the host path may be anywhere: it is only the source of the mount.
            check_abs("packages", packages)?;
            if packages.parent().is_none() {
                return Err(PolicyError::PackagesRoot(packages.clone()));
            }
            if packages.starts_with(&self.tool_dir) || self.tool_dir.starts_with(packages) {
                return Err(PolicyError::PackagesInToolDir {
                    packages: packages.clone(),
                    tool_dir: self.tool_dir.clone(),
                });
            }
        }
        for file in &self.etc_files {
            check_abs("etc file", file)?;
            if !file.starts_with("/etc") || file == Path::new("/etc") {
                return Err(PolicyError::Reserved {
                    what: "etc file",
                    path: file.clone(),
                    reserved: "/etc (only entries below it may be listed)",
                });
            }
            for synthesized in ["/etc/passwd", "/etc/group", "/etc/hosts"] {
                if file.starts_with(synthesized) {
                    return Err(PolicyError::Reserved {
                        what: "etc file",
                        path: file.clone(),
                        reserved: synthesized,
                    });
                }
            }
        }
        for (k, v) in &self.env {
            if k.is_empty() || k.contains('=') || k.contains('\0') {
                return Err(PolicyError::EnvName(k.clone()));
            }
            if v.contains('\0') {
                return Err(PolicyError::EnvValue(k.clone()));
            }
        }
        let l = &self.limits;
        for (name, v) in [
            ("memory_bytes", l.memory_bytes),
            ("threads", l.threads),
            ("open_files", l.open_files),
            ("file_size_bytes", l.file_size_bytes),
            ("cpu_seconds", l.cpu_seconds),
            ("tmp_bytes", l.tmp_bytes),
        ] {
            if v == 0 {
                return Err(PolicyError::ZeroLimit(name));
            }
        }
        for &fd in &self.keep_fds {
            if fd <= 2 || self.egress.as_ref().is_some_and(|e| e.report_fd == fd) {
                return Err(PolicyError::KeepFd(fd));
            }
        }
        if self.min_landlock_abi < MIN_LANDLOCK_ABI {
            return Err(PolicyError::LandlockAbi(self.min_landlock_abi));
        }
        let host_ok = !self.hostname.is_empty()
            && self.hostname.len() <= 64
            && self
                .hostname
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
        if !host_ok {
            return Err(PolicyError::Hostname(self.hostname.clone()));
        }
        if let Some(e) = &self.egress {
            if e.port == 0 {
                return Err(PolicyError::EgressPort);
            }
            if e.report_fd <= 2 {
                return Err(PolicyError::ReportFd(e.report_fd));
            }
        }
        if let Some(fd) = self.uses_fd {
            let taken = self.egress.as_ref().is_some_and(|e| e.report_fd == fd)
                || self.keep_fds.contains(&fd);
            if fd <= 2 || taken {
                return Err(PolicyError::UsesFd(fd));
            }
        }

        if let Some(program) = &self.layer_program {
            let plain = !program.entry.as_os_str().is_empty()
                && program
                    .entry
                    .components()
                    .all(|c| matches!(c, Component::Normal(_)))
                && !program.entry.as_os_str().as_encoded_bytes().contains(&0)
                && !program.args.iter().any(|a| a.contains('\0'));
            if !plain {
                return Err(PolicyError::LayerProgram(program.entry.clone()));
            }
            if self.packages.is_none() || self.uses_fd.is_some() {
                return Err(PolicyError::LayerProgramAlone);
            }
        }
        let user_dirs = self.check_user_dirs()?;

        let mut mounts = Vec::new();
        let mut landlock = Vec::new();
        for dir in &self.system_dirs {
            mounts.push(Mount::HostSymlink { path: dir.clone() });
            mounts.push(Mount::Bind {
                source: dir.clone(),
                target: dir.clone(),
                exec: true,
                optional: true,
            });
            landlock.push(PathRule {
                path: dir.clone(),
                access: FsAccess::ReadExec,
            });
        }
        for dir in &self.runtime_dirs {
            mounts.push(Mount::Bind {
                source: dir.clone(),
                target: dir.clone(),
                exec: true,
                optional: false,
            });
            landlock.push(PathRule {
                path: dir.clone(),
                access: FsAccess::ReadExec,
            });
        }
        if let Some(runtime) = &self.runtime {
            mounts.push(Mount::Layer {
                source: runtime.clone(),
                target: RUNTIME_MOUNT.into(),
                exec: true,
            });
            landlock.push(PathRule {
                path: RUNTIME_MOUNT.into(),
                access: FsAccess::ReadExec,
            });
        }
        if let Some(packages) = &self.packages {
            mounts.push(Mount::Layer {
                source: packages.clone(),
                target: PACKAGES_MOUNT.into(),
                exec: true,
            });
            landlock.push(PathRule {
                path: PACKAGES_MOUNT.into(),
                access: FsAccess::ReadExec,
            });
        }
        for file in &self.etc_files {
            mounts.push(Mount::Bind {
                source: file.clone(),
                target: file.clone(),
                exec: false,
                optional: true,
            });
        }
        mounts.push(Mount::File {
            target: "/etc/passwd".into(),
            contents: format!(
                "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n\
                 tool:x:{TOOL_ID}:{TOOL_ID}:autotool tool:{HOME_MOUNT}:/usr/sbin/nologin\n\
                 nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
            ),
        });
        mounts.push(Mount::File {
            target: "/etc/group".into(),
            contents: format!("root:x:0:\ntool:x:{TOOL_ID}:\nnogroup:x:65534:\n"),
        });
        mounts.push(Mount::File {
            target: "/etc/hosts".into(),
            contents: format!(
                "127.0.0.1\tlocalhost {h}\n::1\tlocalhost ip6-localhost ip6-loopback\n",
                h = self.hostname
            ),
        });
        landlock.push(PathRule {
            path: "/etc".into(),
            access: FsAccess::Read,
        });
        mounts.push(Mount::Layer {
            source: self.tool_dir.clone(),
            target: TOOL_MOUNT.into(),
            exec: false,
        });
        landlock.push(PathRule {
            path: TOOL_MOUNT.into(),
            access: FsAccess::Read,
        });
        for target in [TMP_MOUNT, HOME_MOUNT] {
            mounts.push(Mount::Tmpfs {
                target: target.into(),
                size_bytes: l.tmp_bytes,
                mode: if target == TMP_MOUNT { 0o1777 } else { 0o700 },
            });
            landlock.push(PathRule {
                path: target.into(),
                access: FsAccess::ReadWrite,
            });
        }
        mounts.push(Mount::Proc {
            target: "/proc".into(),
        });
        for file in PROC_MASKED_FILES {
            mounts.push(Mount::MaskFile {
                target: Path::new("/proc").join(file),
            });
        }
        for dir in PROC_MASKED_DIRS {
            mounts.push(Mount::MaskDir {
                target: Path::new("/proc").join(dir),
            });
        }
        landlock.push(PathRule {
            path: "/proc".into(),
            access: FsAccess::Read,
        });
        mounts.push(Mount::Dev {
            target: "/dev".into(),
            nodes: DEV_NODES.iter().map(|s| s.to_string()).collect(),
        });
        landlock.push(PathRule {
            path: "/dev".into(),
            access: FsAccess::Read,
        });
        for node in DEV_NODES {
            landlock.push(PathRule {
                path: Path::new("/dev").join(node),
                access: FsAccess::Device,
            });
        }
        // The user's directories last, parents before what lies inside them: nothing the
        // sandbox mounts itself can cover them, and a directory granted inside another is
        // mounted on top of it.
        let links: Vec<&Path> = user_dirs
            .iter()
            .filter_map(|d| d.home_link.as_deref())
            .collect();
        for dir in &user_dirs {
            mounts.push(Mount::UserDir {
                path: dir.path.clone(),
                write: dir.write,
                dev: dir.dev,
                ino: dir.ino,
            });
            // A link inside another one's place is reached through that one (which leads to
            // the outer grant, where this directory is mounted at its own path).
            if let Some(link) = &dir.home_link
                && !links
                    .iter()
                    .any(|l| *l != link.as_path() && link.starts_with(l))
            {
                mounts.push(Mount::Link {
                    path: Path::new(HOME_MOUNT).join(link),
                    target: dir.path.clone(),
                });
            }
            landlock.push(PathRule {
                path: dir.path.clone(),
                access: if dir.write {
                    FsAccess::UserWrite
                } else {
                    FsAccess::Read
                },
            });
        }

        let rlimits = vec![
            Rlimit {
                resource: RlimitResource::AddressSpace,
                value: l.memory_bytes,
            },
            Rlimit {
                resource: RlimitResource::Threads,
                value: l.threads,
            },
            Rlimit {
                resource: RlimitResource::OpenFiles,
                value: l.open_files,
            },
            Rlimit {
                resource: RlimitResource::FileSize,
                value: l.file_size_bytes,
            },
            Rlimit {
                resource: RlimitResource::Cpu,
                value: l.cpu_seconds,
            },
            Rlimit {
                resource: RlimitResource::Core,
                value: 0,
            },
        ];

        let tool_path = Path::new(TOOL_MOUNT).join(&self.tool_file);
        let exec_path = self.exec_path();
        let mut argv = vec![exec_path.to_string_lossy().into_owned()];
        argv.extend(self.interpreter_args.iter().cloned());
        match &self.layer_program {
            Some(layer_program) => {
                let entry = Path::new(PACKAGES_MOUNT).join(&layer_program.entry);
                argv.push(entry.to_string_lossy().into_owned());
                argv.extend(layer_program.args.iter().cloned());
            }
            None => {
                let packages = self.packages.as_ref().map(|_| PACKAGES_MOUNT);
                if let Some(program) = program(packages, self.uses_fd.is_some()) {
                    argv.push("-c".into());
                    argv.push(program);
                }
                argv.push(tool_path.to_string_lossy().into_owned());
            }
        }

        let mut keep_fds = self.keep_fds.clone();
        keep_fds.extend(self.uses_fd);
        keep_fds.sort_unstable();
        keep_fds.dedup();

        Ok(Plan {
            hostname: self.hostname.clone(),
            mounts,
            landlock,
            connect_ports: self.egress.iter().map(|e| e.port).collect(),
            min_landlock_abi: self.min_landlock_abi,
            rlimits,
            env: self
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            keep_fds,
            egress: self.egress.clone(),
            exec_path,
            argv,
            working_dir: TOOL_MOUNT.into(),
            uid: TOOL_ID,
            gid: TOOL_ID,
        })
    }
}

/// The `-c` program a tool with packages runs: `dir` appended to `sys.path` (after the runtime's
/// own site-packages, so a layer never shadows the runtime's `mcp`), then the tool run as
/// `__main__` with `sys.argv` as if started directly. `dir` is written as a JSON string, which
/// Python reads as the same string literal whatever the path holds (quotes, backslashes,
/// newlines, any Unicode), so the supervisor may pass a host path too (`--sandbox off`).
pub fn bootstrap(dir: &str) -> String {
    let dir = serde_json::Value::String(dir.to_string());
    format!(
        "import runpy, sys; sys.argv.pop(0); sys.path.append({dir}); \
         runpy.run_path(sys.argv[0], run_name='__main__')"
    )
}

/// The module a tool that declares `USES` imports as `autotool_uses`: `call(name, **arguments)`
/// over the descriptor named by [`USES_FD_VARIABLE`].
pub const USES_MODULE: &str = include_str!("launch/uses.py");
/// The variable naming the descriptor of a tool's uses channel.
pub const USES_FD_VARIABLE: &str = "AUTOTOOL_USES_FD";

/// The `-c` program a tool runs through, when it needs one: with `packages`, [`bootstrap`]
/// (the layer appended to `sys.path`); with `uses`, also the module `autotool_uses`
/// ([`USES_MODULE`]) put in `sys.modules` before the tool's code runs, so nothing is written
/// anywhere and the runtime stays as it is. `None`: the tool runs directly.
pub fn program(packages: Option<&str>, uses: bool) -> Option<String> {
    match (packages, uses) {
        (None, false) => None,
        (Some(dir), false) => Some(bootstrap(dir)),
        (packages, true) => {
            let source = serde_json::Value::String(USES_MODULE.to_string());
            let path = packages
                .map(|dir| {
                    let dir = serde_json::Value::String(dir.to_string());
                    format!("sys.path.append({dir}); ")
                })
                .unwrap_or_default();
            Some(format!(
                "import runpy, sys, types; sys.argv.pop(0); {path}\
                 m = types.ModuleType('autotool_uses'); \
                 exec(compile({source}, '<autotool_uses>', 'exec'), m.__dict__); \
                 sys.modules['autotool_uses'] = m; del m; \
                 runpy.run_path(sys.argv[0], run_name='__main__')"
            ))
        }
    }
}

/// The environment of a tool process: exactly the approved keys, the OS basics, `*_API_BASE`
/// overrides and the proxy variables pointing at the in-namespace listener (`NO_PROXY` empty).
/// `keys` are the declared and approved credentials; `api_bases` the `*_API_BASE` variables the
/// supervisor passes through.
pub fn tool_environment(
    keys: &BTreeMap<String, String>,
    api_bases: &BTreeMap<String, String>,
    egress_port: Option<u16>,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for (k, v) in [
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("HOME", HOME_MOUNT),
        ("TMPDIR", TMP_MOUNT),
        ("LANG", "C.UTF-8"),
        ("LC_ALL", "C.UTF-8"),
        ("PYTHONUTF8", "1"),
        ("PYTHONDONTWRITEBYTECODE", "1"),
        ("SSL_CERT_DIR", "/etc/ssl/certs"),
        ("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt"),
        ("USER", "tool"),
        ("LOGNAME", "tool"),
    ] {
        env.insert(k.to_string(), v.to_string());
    }
    for (k, v) in api_bases {
        if k.ends_with("_API_BASE") {
            env.insert(k.clone(), v.clone());
        }
    }
    if let Some(port) = egress_port {
        let url = format!("http://127.0.0.1:{port}");
        for k in [
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "https_proxy",
            "all_proxy",
        ] {
            env.insert(k.to_string(), url.clone());
        }
        env.insert("NO_PROXY".into(), String::new());
        env.insert("no_proxy".into(), String::new());
    }
    // Keys last: a key can never be shadowed by a basic of the same name, and never shadows one
    // either (the supervisor refuses such key names before they reach here).
    for (k, v) in keys {
        env.entry(k.clone()).or_insert_with(|| v.clone());
    }
    env
}

#[cfg(test)]
mod tests;
