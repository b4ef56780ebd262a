//! The four ways of starting the same tool process: bare, through `autotool-launcher`, through
//! bubblewrap with comparable settings, and forked from a template.
//!
//! Every variant runs the same interpreter with the same arguments and the same environment (the
//! one `autotool_policy::launch::tool_environment` gives a tool with no keys and no egress), so
//! the differences measured are what the confinement costs.

use anyhow::{Context, Result, bail};
use autotool_policy::LaunchPolicy;
use autotool_policy::launch::{HOME_MOUNT, TMP_MOUNT, TOOL_MOUNT, tool_environment};
use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use std::collections::BTreeMap;
use std::io::{PipeReader, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The flag through which `autotool-launcher` is told which inherited descriptor carries the
/// policy (JSON, read to end of file).
pub const LAUNCHER_POLICY_FD_FLAG: &str = "--policy-fd";

/// One way of starting a tool process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Variant {
    /// The interpreter started directly, unconfined.
    Bare,
    /// Through `autotool-launcher`, with a default launch policy passed on a descriptor.
    Launcher,
    /// Through `bwrap` with settings comparable to the launcher's.
    Bwrap,
    /// Forked from a template (`autotool-launcher --template`) that imported the SDK once; the
    /// child confines itself as the launcher would before the tool's code runs.
    Fork,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::Bare => "bare",
            Variant::Launcher => "launcher",
            Variant::Bwrap => "bwrap",
            Variant::Fork => "fork",
        }
    }
}

/// What is started: `interpreter interpreter_args… <tool_dir>/<tool_file>`.
#[derive(Debug, Clone)]
pub struct Workload {
    pub tool_file: &'static str,
    pub interpreter_args: Vec<String>,
}

/// Host paths shared by every variant.
#[derive(Debug)]
pub struct Setup {
    /// The Python runtime (a virtual environment); its `bin/python3` is the interpreter.
    pub runtime: PathBuf,
    /// Directories the interpreter needs besides the system ones: the runtime and, when the
    /// runtime's interpreter resolves outside the system directories, that interpreter's prefix.
    pub runtime_dirs: Vec<PathBuf>,
    /// The directory holding the bench's tools.
    pub tool_dir: PathBuf,
    pub launcher: Option<PathBuf>,
    pub bwrap: Option<PathBuf>,
    /// The fork variant's template, and the copy of the bench's tools it can see.
    pub fork: Option<Fork>,
}

/// A running template and the directory (below the one it shares) holding the bench's tools.
#[derive(Debug)]
pub struct Fork {
    pub template: autotool_tests::template::Template,
    pub tool_dir: tempfile::TempDir,
}

impl Setup {
    pub fn interpreter(&self) -> PathBuf {
        self.runtime.join("bin/python3")
    }

    /// The environment every variant gives the tool, exactly.
    pub fn environment(&self) -> BTreeMap<String, String> {
        tool_environment(&BTreeMap::new(), &BTreeMap::new(), None)
    }

    /// The launch policy of `work` for `variant`: the fork variant's tool directory is the copy
    /// its template can see.
    pub fn policy_for(&self, variant: Variant, work: &Workload) -> LaunchPolicy {
        let mut policy = self.policy(work);
        if let (Variant::Fork, Some(fork)) = (variant, &self.fork) {
            policy.tool_dir = fork.tool_dir.path().to_path_buf();
        }
        policy
    }

    /// The launch policy for `work`: every default, as the supervisor would send it.
    pub fn policy(&self, work: &Workload) -> LaunchPolicy {
        let mut policy = LaunchPolicy::new(
            &self.tool_dir,
            work.tool_file,
            self.interpreter(),
            self.runtime_dirs.clone(),
        );
        policy.interpreter_args = work.interpreter_args.clone();
        policy.env = self.environment();
        policy
    }
}

/// Directories the runtime's interpreter needs: the runtime itself, plus the prefix of the binary
/// it resolves to when that lies outside the system directories (a venv made from a Python under
/// `/opt` or a home directory).
pub fn runtime_dirs(runtime: &Path) -> Result<Vec<PathBuf>> {
    let interpreter = runtime.join("bin/python3");
    let real = interpreter.canonicalize().with_context(|| {
        format!(
            "no Python runtime at {}: create it with `sudo .ci/test` or point \
             AUTOTOOL_TEST_RUNTIME (or --runtime) at a venv that has `mcp` installed",
            runtime.display()
        )
    })?;
    let mut dirs = vec![runtime.to_path_buf()];
    let system = ["/usr", "/lib", "/lib64", "/bin", "/sbin"];
    if !system.iter().any(|s| real.starts_with(s)) && !real.starts_with(runtime) {
        // <prefix>/bin/python3.x → <prefix>
        if let Some(prefix) = real.parent().and_then(Path::parent) {
            dirs.push(prefix.to_path_buf());
        }
    }
    Ok(dirs)
}

/// A command ready to spawn, and the descriptor it must inherit (kept open until it is spawned).
#[derive(Debug)]
pub struct Prepared {
    pub command: Command,
    pub inherited: Option<PipeReader>,
}

/// Build the command that starts `work` as `variant`. For the launcher this writes the policy
/// into a fresh pipe whose read end the child inherits, as the supervisor does.
pub fn prepare(setup: &Setup, variant: Variant, work: &Workload) -> Result<Prepared> {
    match variant {
        Variant::Bare => {
            let mut command = Command::new(setup.interpreter());
            command
                .args(&work.interpreter_args)
                .arg(setup.tool_dir.join(work.tool_file))
                .current_dir(&setup.tool_dir)
                .env_clear()
                .envs(setup.environment());
            Ok(Prepared {
                command,
                inherited: None,
            })
        }
        Variant::Launcher => {
            let Some(launcher) = &setup.launcher else {
                bail!("no launcher binary given")
            };
            let json = setup.policy(work).to_json();
            let (reader, mut writer) = std::io::pipe().context("pipe for the launch policy")?;
            // The policy is a few kilobytes, well inside a pipe's buffer: writing it all before
            // the launcher starts cannot block.
            writer.write_all(&json).context("write the launch policy")?;
            drop(writer);
            fcntl(&reader, FcntlArg::F_SETFD(FdFlag::empty()))
                .context("let the launcher inherit the policy descriptor")?;
            let mut command = Command::new(launcher);
            command
                .arg(LAUNCHER_POLICY_FD_FLAG)
                .arg(reader.as_raw_fd().to_string())
                .env_clear();
            Ok(Prepared {
                command,
                inherited: Some(reader),
            })
        }
        Variant::Fork => bail!("a forked tool is not started by a command"),
        Variant::Bwrap => {
            let Some(bwrap) = &setup.bwrap else {
                bail!("bubblewrap is not installed (apt-get install bubblewrap)")
            };
            let mut command = Command::new(bwrap);
            command.args(bwrap_args(setup, work)).env_clear();
            Ok(Prepared {
                command,
                inherited: None,
            })
        }
    }
}

/// bubblewrap's arguments for a sandbox comparable to the launcher's default policy: every
/// namespace, a fresh root with the system and runtime directories read-only, the same `/etc`
/// files, the tool directory at the same place, private `/tmp` and home, fresh `/proc` and
/// `/dev`, a new session, and exactly the same environment. (bubblewrap sets no Landlock,
/// seccomp filter or resource limits here: the launcher does more.)
pub fn bwrap_args(setup: &Setup, work: &Workload) -> Vec<String> {
    let mut a: Vec<String> = ["--unshare-all", "--die-with-parent", "--new-session"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut push = |items: &[&str]| a.extend(items.iter().map(|s| s.to_string()));
    push(&["--ro-bind", "/usr", "/usr"]);
    for dir in ["/lib", "/lib64", "/bin", "/sbin"] {
        let path = Path::new(dir);
        match std::fs::read_link(path) {
            Ok(target) => push(&["--symlink", &target.to_string_lossy(), dir]),
            Err(_) if path.is_dir() => push(&["--ro-bind", dir, dir]),
            Err(_) => {}
        }
    }
    for dir in &setup.runtime_dirs {
        let d = dir.to_string_lossy();
        push(&["--ro-bind", &d, &d]);
    }
    let policy = setup.policy(work);
    for file in &policy.etc_files {
        let f = file.to_string_lossy();
        push(&["--ro-bind-try", &f, &f]);
    }
    push(&[
        "--ro-bind",
        &setup.tool_dir.to_string_lossy(),
        TOOL_MOUNT,
        "--tmpfs",
        TMP_MOUNT,
        "--tmpfs",
        HOME_MOUNT,
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--chdir",
        TOOL_MOUNT,
        "--clearenv",
    ]);
    for (k, v) in setup.environment() {
        push(&["--setenv", &k, &v]);
    }
    push(&["--", &setup.interpreter().to_string_lossy()]);
    a.extend(work.interpreter_args.iter().cloned());
    a.push(format!("{TOOL_MOUNT}/{}", work.tool_file));
    a
}

/// The first executable called `name` on `PATH`.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Start the fork variant's template with `launcher` on the bench's runtime, and copy the
/// bench's tools where it can see them.
pub fn start_fork(launcher: &Path, runtime: &Path, runtime_dirs: &[PathBuf]) -> Result<Fork> {
    use autotool_tests::template;
    let root = template::tools_root()?;
    let mut policy = LaunchPolicy::new(
        root,
        "template",
        runtime.join("bin/python3"),
        runtime_dirs.to_vec(),
    );
    policy.env = tool_environment(&BTreeMap::new(), &BTreeMap::new(), None);
    let template = template::start_template_at(launcher, &policy, root)?;
    let tool_dir = template::tool_dir()?;
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools");
    for entry in std::fs::read_dir(&tools).with_context(|| format!("reading {tools:?}"))? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            std::fs::copy(entry.path(), tool_dir.path().join(entry.file_name()))?;
        }
    }
    Ok(Fork { template, tool_dir })
}
