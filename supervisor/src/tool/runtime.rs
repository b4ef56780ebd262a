//! The Python runtime tools run on: the real interpreter binary (never a shim) and the
//! directories the sandbox must mount for it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A resolved interpreter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Python {
    /// Path to exec inside the sandbox: inside a virtual environment, its `bin/python3` (so the
    /// environment is found), always a path whose final target is an ELF binary.
    pub interpreter: PathBuf,
    /// Directories to mount read-only with exec (prefix, base prefix), beyond the system ones.
    pub runtime_dirs: Vec<PathBuf>,
    /// `major.minor`.
    pub version: String,
}

/// Why no usable interpreter was found.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(
        "no Python interpreter found ({0}); install python3 (3.10 or newer) or set AUTOTOOL_PYTHON"
    )]
    NotFound(String),
    #[error("{path:?} did not describe itself: {why}")]
    Query { path: PathBuf, why: String },
    #[error("Python {found} at {path:?} is too old; tools need 3.10 or newer")]
    TooOld { path: PathBuf, found: String },
    #[error(
        "{path:?} is not an ELF binary, so it cannot run in the sandbox; point AUTOTOOL_PYTHON at the real interpreter"
    )]
    NotElf { path: PathBuf },
    #[error(
        "AUTOTOOL_RUNTIME={path:?} is not a usable tool runtime: {why}; point it at a virtual environment holding {}, or unset it to let autotool create its own",
        RUNTIME_REQUIREMENTS.join(" ")
    )]
    Override { path: PathBuf, why: String },
    #[error("creating the tool runtime at {dir:?} failed while {step}: {why}")]
    Create {
        dir: PathBuf,
        step: &'static str,
        why: String,
    },
}

/// Directories the launcher mounts anyway; a prefix below them needs no mount of its own.
const SYSTEM: [&str; 4] = ["/usr", "/lib", "/lib64", "/bin"];

const QUERY: &str = "import json, sys; print(json.dumps([sys.executable, sys.prefix, \
                     sys.base_prefix, list(sys.version_info[:2])]))";

fn is_elf(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == b"\x7fELF"
}

/// Resolve `candidate`, else `$AUTOTOOL_PYTHON`, else `python3` on `PATH`. A shim (pyenv, asdf)
/// is run once, outside any sandbox, only to ask where the real interpreter is; tool code never
/// runs here.
pub fn resolve(candidate: Option<&Path>) -> Result<Python, RuntimeError> {
    let program: PathBuf = candidate
        .map(Path::to_path_buf)
        .or_else(|| {
            std::env::var_os("AUTOTOOL_PYTHON")
                .filter(|p| !p.is_empty())
                .map(PathBuf::from)
        })
        .unwrap_or_else(|| PathBuf::from("python3"));
    let out = Command::new(&program)
        .args(["-I", "-c", QUERY])
        .output()
        .map_err(|e| RuntimeError::NotFound(format!("{}: {e}", program.display())))?;
    if !out.status.success() {
        return Err(RuntimeError::Query {
            path: program,
            why: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let (exe, prefix, base, ver): (PathBuf, PathBuf, PathBuf, Vec<u32>) =
        serde_json::from_slice(&out.stdout).map_err(|e| RuntimeError::Query {
            path: program.clone(),
            why: e.to_string(),
        })?;
    let version = format!(
        "{}.{}",
        ver.first().copied().unwrap_or(0),
        ver.get(1).copied().unwrap_or(0)
    );
    if ver.as_slice() < [3, 10].as_slice() {
        return Err(RuntimeError::TooOld {
            path: exe,
            found: version,
        });
    }
    let real = std::fs::canonicalize(&exe).unwrap_or_else(|_| exe.clone());
    if !is_elf(&real) {
        return Err(RuntimeError::NotElf { path: real });
    }
    let mut runtime_dirs: Vec<PathBuf> = Vec::new();
    let real_dir = real.parent().and_then(Path::parent).map(Path::to_path_buf);
    for dir in [Some(prefix), Some(base), real_dir].into_iter().flatten() {
        let covered = SYSTEM.iter().any(|s| dir.starts_with(s))
            || runtime_dirs.iter().any(|d| dir.starts_with(d));
        if !covered {
            runtime_dirs.retain(|d| !d.starts_with(&dir));
            runtime_dirs.push(dir);
        }
    }
    Ok(Python {
        interpreter: exe,
        runtime_dirs,
        version,
    })
}

// ---------------------------------------------------------------------------------------------
// The runtime autotool creates: `$AUTOTOOL_HOME/runtime`, a virtual environment on the machine's
// `python3` holding the tool SDK, the HTTP client tools use and the linter the verifier runs.

/// What a tool runtime holds, pinned: the versions tools are written and tested against.
pub const RUNTIME_REQUIREMENTS: [&str; 3] = ["mcp==2.3.0", "httpx2==2.16.2", "ruff==0.17.6"];

/// The file, inside a runtime, that lists what was installed in it. Written last: a runtime
/// without it (or listing something else) is never used.
pub const RUNTIME_STAMP: &str = "autotool-runtime.txt";

/// Bound on `python -m venv`.
const VENV_BOUND: Duration = Duration::from_secs(120);
/// Bound on `pip install` (downloads included).
const PIP_BOUND: Duration = Duration::from_secs(15 * 60);
/// How long a creator waits for another process that is creating the same runtime.
const LOCK_BOUND: Duration = Duration::from_secs(20 * 60);

/// The Python runtime tools run on, creating it the first time it is needed.
///
/// First match wins:
/// 1. `$AUTOTOOL_RUNTIME`, an existing virtual environment, used as it is (tests and CI point it
///    at a prebuilt one); nothing is created.
/// 2. `runtime_dir`, when it holds a runtime whose stamp lists exactly [`RUNTIME_REQUIREMENTS`]
///    and whose interpreter still works.
/// 3. Otherwise a new runtime is built and put in place of whatever was at `runtime_dir`; see
///    [`ensure_venv`]. Progress lines go to `progress` (stderr, in the server).
///
/// This blocks for as long as creation takes (a minute or more, mostly downloads): call it from
/// a blocking thread.
pub fn ensure_runtime(
    runtime_dir: &Path,
    progress: &mut dyn Write,
) -> Result<Python, RuntimeError> {
    match std::env::var_os("AUTOTOOL_RUNTIME") {
        Some(venv) if !venv.is_empty() => open_runtime(Path::new(&venv)),
        _ => ensure_venv(runtime_dir, &RUNTIME_REQUIREMENTS, progress),
    }
}

/// An existing runtime, as it is: its `bin/python3`, which must have `bin/ruff` beside it.
/// Errors name the directory as `AUTOTOOL_RUNTIME`'s value.
pub fn open_runtime(venv: &Path) -> Result<Python, RuntimeError> {
    let fail = |why: String| RuntimeError::Override {
        path: venv.to_path_buf(),
        why,
    };
    let interpreter = venv.join("bin/python3");
    if !interpreter.exists() {
        return Err(fail(format!("{} does not exist", interpreter.display())));
    }
    let python = resolve(Some(&interpreter)).map_err(|e| fail(e.to_string()))?;
    let ruff = ruff(&python);
    if !ruff.is_file() {
        return Err(fail(format!(
            "{} does not exist (the verifier lints tools with it)",
            ruff.display()
        )));
    }
    Ok(python)
}

/// The runtime's `ruff`, beside its interpreter.
pub fn ruff(python: &Python) -> PathBuf {
    python
        .interpreter
        .parent()
        .map(|bin| bin.join("ruff"))
        .unwrap_or_else(|| PathBuf::from("ruff"))
}

/// A virtual environment at `dir` holding exactly `requirements` (pip requirement specifiers),
/// reused when its stamp says so and its interpreter works, else built anew.
///
/// How it is built, so that a half-made runtime is never used:
/// - An exclusive `flock` on `<dir>.lock` (beside `dir`) is held while checking and building;
///   a second process waits for it (saying so on `progress`) and then finds the runtime ready.
///   Leftovers of a creator that was killed are removed once the lock is held.
/// - The machine's `python3` (≥ 3.10, as [`resolve`] finds it, `$AUTOTOOL_PYTHON` first) is
///   resolved to the real interpreter binary, so the environment never points at a shim.
/// - `python -m venv` and `pip install --disable-pip-version-check` run in a temporary
///   directory beside `dir`, each bounded in time, with pip's progress lines passed on. The stamp
///   is written last; the temporary path is rewritten to `dir` in the environment's scripts; every
///   directory is made 0755 and every file world-readable (a confined tool may run as another
///   user, `nobody` under a root supervisor); then the directory is renamed to `dir`. A runtime
///   already at `dir` is moved aside first and removed afterwards.
pub fn ensure_venv(
    dir: &Path,
    requirements: &[&str],
    progress: &mut dyn Write,
) -> Result<Python, RuntimeError> {
    if let Some(python) = ready(dir, requirements) {
        return Ok(python);
    }
    let dir = std::path::absolute(dir).map_err(|e| create_error(dir, "locating it", &e))?;
    let (parent, name) = match (dir.parent(), dir.file_name()) {
        (Some(p), Some(n)) => (p.to_path_buf(), n.to_string_lossy().into_owned()),
        _ => {
            return Err(RuntimeError::Create {
                dir,
                step: "locating it",
                why: "it has no parent directory".into(),
            });
        }
    };
    std::fs::create_dir_all(&parent)
        .map_err(|e| create_error(&dir, "creating its parent directory", &e))?;
    let _lock = lock(&parent.join(format!("{name}.lock")), &dir, progress)?;
    if let Some(python) = ready(&dir, requirements) {
        let _ = writeln!(
            progress,
            "autotool: the tool runtime at {} is ready",
            dir.display()
        );
        return Ok(python);
    }
    remove_leftovers(&parent, &name);
    build(&dir, &parent, &name, requirements, progress)
}

/// The tool runtime in use, if it exists already: `$AUTOTOOL_RUNTIME`, else the one at
/// `runtime_dir` with the pinned requirements. `None` when it is still to be created.
pub fn existing_runtime(runtime_dir: &Path) -> Option<Result<Python, RuntimeError>> {
    match std::env::var_os("AUTOTOOL_RUNTIME") {
        Some(venv) if !venv.is_empty() => Some(open_runtime(Path::new(&venv))),
        _ => ready(runtime_dir, &RUNTIME_REQUIREMENTS).map(Ok),
    }
}

/// The runtime at `dir`, if its stamp lists exactly `requirements` and its interpreter works.
fn ready(dir: &Path, requirements: &[&str]) -> Option<Python> {
    let stamp = std::fs::read_to_string(dir.join(RUNTIME_STAMP)).ok()?;
    let mut listed: Vec<&str> = stamp
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let mut wanted = requirements.to_vec();
    listed.sort_unstable();
    wanted.sort_unstable();
    if listed != wanted {
        return None;
    }
    resolve(Some(&dir.join("bin/python3"))).ok()
}

fn create_error(dir: &Path, step: &'static str, e: &dyn std::fmt::Display) -> RuntimeError {
    RuntimeError::Create {
        dir: dir.to_path_buf(),
        step,
        why: e.to_string(),
    }
}

/// Hold an exclusive lock on `path`, waiting at most [`LOCK_BOUND`]. Released when the file
/// closes (also when the process dies).
fn lock(path: &Path, dir: &Path, progress: &mut dyn Write) -> Result<std::fs::File, RuntimeError> {
    use rustix::fs::{FlockOperation, flock};
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| create_error(dir, "opening its lock file", &e))?;
    let t0 = Instant::now();
    let mut said = false;
    loop {
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(file),
            Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR) => {}
            Err(e) => return Err(create_error(dir, "locking it", &e)),
        }
        if t0.elapsed() > LOCK_BOUND {
            return Err(RuntimeError::Create {
                dir: dir.to_path_buf(),
                step: "waiting for another autotool process creating it",
                why: format!(
                    "{} was still locked after {} minutes; if no autotool process is running, delete that file",
                    path.display(),
                    LOCK_BOUND.as_secs() / 60
                ),
            });
        }
        if !said {
            let _ = writeln!(
                progress,
                "autotool: waiting for another autotool process to finish creating the tool runtime at {}",
                dir.display()
            );
            said = true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn build_prefix(name: &str) -> String {
    format!(".{name}-build-")
}

fn stale_prefix(name: &str) -> String {
    format!(".{name}-stale-")
}

/// Remove what a killed creator left beside the runtime (called with the lock held, so nobody
/// is using them).
fn remove_leftovers(parent: &Path, name: &str) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let prefixes = [build_prefix(name), stale_prefix(name)];
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let file_name = file_name.to_string_lossy();
        if prefixes.iter().any(|p| file_name.starts_with(p.as_str())) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn build(
    dir: &Path,
    parent: &Path,
    name: &str,
    requirements: &[&str],
    progress: &mut dyn Write,
) -> Result<Python, RuntimeError> {
    let t0 = Instant::now();
    let _ = writeln!(
        progress,
        "autotool: creating the Python runtime for tools at {} (first use; this takes a minute)",
        dir.display()
    );
    let base = resolve(None)?;
    // `sys.executable` of a pyenv shim's interpreter is already the real binary; canonicalising
    // also removes any symlink chain, so the environment's `python3` points at the ELF itself.
    let real = std::fs::canonicalize(&base.interpreter).unwrap_or(base.interpreter.clone());
    let _ = writeln!(
        progress,
        "autotool: using Python {} at {}",
        base.version,
        real.display()
    );
    let tmp = tempfile::Builder::new()
        .prefix(&build_prefix(name))
        .tempdir_in(parent)
        .map_err(|e| create_error(dir, "making a temporary directory beside it", &e))?;
    let staging = tmp.path().to_path_buf();

    let mut venv = Command::new(&real);
    // The prompt would otherwise be the build directory's name.
    venv.args(["-I", "-m", "venv", "--prompt", "autotool-runtime"]);
    if requirements.is_empty() {
        venv.arg("--without-pip");
    }
    venv.arg(&staging);
    run_step(venv, "running `python -m venv`", VENV_BOUND, dir, progress)
        .map_err(|e| with_venv_hint(e, &base.version))?;

    if !requirements.is_empty() {
        let _ = writeln!(progress, "autotool: installing {}", requirements.join(" "));
        let mut pip = Command::new(staging.join("bin/python3"));
        pip.args([
            "-I",
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            "--progress-bar",
            "off",
        ])
        .args(requirements)
        // These would send the packages somewhere else than the environment.
        .env_remove("PIP_USER")
        .env_remove("PIP_TARGET")
        .env_remove("PIP_PREFIX")
        .env_remove("PIP_REQUIRE_VIRTUALENV");
        run_step(pip, "running `pip install`", PIP_BOUND, dir, progress).map_err(|e| match e {
            RuntimeError::Create { dir, step, why } => RuntimeError::Create {
                dir,
                step,
                why: format!(
                    "{why}\n(pip needs to reach PyPI, or the index in PIP_INDEX_URL; check the network and run again)"
                ),
            },
            other => other,
        })?;
    }

    let stamp = format!(
        "# The tool runtime autotool created from Python {} at {}; it is used only while this\n# file lists exactly the requirements autotool pins.\n{}\n",
        base.version,
        real.display(),
        requirements.join("\n")
    );
    std::fs::write(staging.join(RUNTIME_STAMP), stamp)
        .map_err(|e| create_error(dir, "writing its stamp", &e))?;
    relocate(&staging, dir).map_err(|e| create_error(dir, "rewriting its scripts", &e))?;
    open_up(&staging).map_err(|e| create_error(dir, "making it readable to other users", &e))?;

    // Put it in place. The lock is held, so only a runtime left by an older autotool (or one
    // that stopped working) can be there.
    let staging = tmp.keep();
    let stale = parent.join(format!("{}{}", stale_prefix(name), std::process::id()));
    let moved_aside = match std::fs::rename(dir, &stale) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(create_error(dir, "moving the old runtime aside", &e));
        }
    };
    if let Err(e) = std::fs::rename(&staging, dir) {
        let _ = std::fs::remove_dir_all(&staging);
        if moved_aside {
            let _ = std::fs::rename(&stale, dir);
        }
        return Err(create_error(dir, "putting the new runtime in place", &e));
    }
    if moved_aside {
        let _ = std::fs::remove_dir_all(&stale);
    }
    let python = resolve(Some(&dir.join("bin/python3")))?;
    let _ = writeln!(
        progress,
        "autotool: the tool runtime is ready ({:.0} s)",
        t0.elapsed().as_secs_f64()
    );
    Ok(python)
}

fn with_venv_hint(e: RuntimeError, version: &str) -> RuntimeError {
    match e {
        RuntimeError::Create { dir, step, why } if why.contains("ensurepip") => {
            RuntimeError::Create {
                dir,
                step,
                why: format!(
                    "{why}\n(this Python lacks the venv module's pip bootstrap: on Debian or Ubuntu, `sudo apt install python{version}-venv` or `python3-venv`)"
                ),
            }
        }
        other => other,
    }
}

/// Run one creation step within `bound`, passing its stdout lines on to `progress` and keeping
/// the end of its stderr for the error.
fn run_step(
    mut cmd: Command,
    step: &'static str,
    bound: Duration,
    dir: &Path,
    progress: &mut dyn Write,
) -> Result<(), RuntimeError> {
    use std::io::{BufRead, BufReader, Read};
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| create_error(dir, step, &e))?;
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    if let Some(out) = child.stdout.take() {
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    let stderr = child.stderr.take().map(|mut err| {
        std::thread::spawn(move || {
            let mut all = Vec::new();
            let _ = err.read_to_end(&mut all);
            let text = String::from_utf8_lossy(&all).into_owned();
            let cut = text.len().saturating_sub(8 << 10);
            let cut = (cut..text.len())
                .find(|&i| text.is_char_boundary(i))
                .unwrap_or(text.len());
            text[cut..].trim().to_string()
        })
    });
    let deadline = Instant::now() + bound;
    let mut timed_out = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let line = line.trim_end();
                if !line.is_empty() {
                    let _ = writeln!(progress, "  {line}");
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                timed_out = true;
                let _ = child.kill();
                break;
            }
        }
    }
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                timed_out = true;
                let _ = child.kill();
                break child.wait().ok();
            }
            Err(_) => break None,
        }
    };
    let stderr = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
    if timed_out {
        return Err(RuntimeError::Create {
            dir: dir.to_path_buf(),
            step,
            why: format!("it took longer than {} s and was stopped", bound.as_secs()),
        });
    }
    match status {
        Some(s) if s.success() => Ok(()),
        other => Err(RuntimeError::Create {
            dir: dir.to_path_buf(),
            step,
            why: format!(
                "it failed ({}){}",
                other.map_or("no exit status".to_string(), |s| s.to_string()),
                if stderr.is_empty() {
                    String::new()
                } else {
                    format!(":\n{stderr}")
                }
            ),
        }),
    }
}

/// Rewrite the build directory's path to `dir` in the environment's small text files (script
/// shebangs, `activate*`, `pyvenv.cfg`), so they work once it is renamed.
fn relocate(staging: &Path, dir: &Path) -> std::io::Result<()> {
    let from = staging.as_os_str().as_encoded_bytes();
    let to = dir.as_os_str().as_encoded_bytes();
    let mut files: Vec<PathBuf> = vec![staging.join("pyvenv.cfg")];
    for entry in std::fs::read_dir(staging.join("bin"))? {
        files.push(entry?.path());
    }
    for path in files {
        let meta = std::fs::symlink_metadata(&path)?;
        if !meta.is_file() || meta.len() > 1 << 20 {
            continue;
        }
        let bytes = std::fs::read(&path)?;
        if !bytes.windows(from.len()).any(|w| w == from) {
            continue;
        }
        let mut out = Vec::with_capacity(bytes.len());
        let mut rest = bytes.as_slice();
        while let Some(i) = rest.windows(from.len()).position(|w| w == from) {
            out.extend_from_slice(&rest[..i]);
            out.extend_from_slice(to);
            rest = &rest[i + from.len()..];
        }
        out.extend_from_slice(rest);
        std::fs::write(&path, out)?;
    }
    Ok(())
}

/// Directories 0755; files readable by all, and executable by all when their owner may run
/// them. Symlinks are left alone.
fn open_up(root: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path)?;
        let mode = meta.permissions().mode() & 0o7777;
        if meta.is_dir() {
            if mode != 0o755 {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
            }
            for entry in std::fs::read_dir(&path)? {
                stack.push(entry?.path());
            }
        } else if meta.is_file() {
            let exec = if mode & 0o100 != 0 { 0o111 } else { 0 };
            let wanted = (mode | 0o444 | exec) & 0o755;
            if wanted != mode {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(wanted))?;
            }
        }
    }
    Ok(())
}
