//! Building the tool runtime: a virtual environment holding the pinned requirements, made
//! with `uv` and, where uv cannot be had, with pip.
//!
//! How, so that a half-made runtime is never used and never left behind:
//! - An exclusive `flock` on `<dir>.lock` (beside `dir`) is held while checking and building; a
//!   second process waits for it (saying so) and then finds the runtime ready. Leftovers of a
//!   creator that was killed are removed once the lock is held.
//! - The machine's `python3` (≥ 3.10, `$AUTOTOOL_PYTHON` first, as [`super::resolve`] finds it)
//!   is resolved to the real interpreter binary, so the environment never points at a shim.
//! - uv: `$AUTOTOOL_UV`, else autotool's own copy of the pinned [`UV_REQUIREMENT`], kept in
//!   `${XDG_CACHE_HOME:-~/.cache}/autotool/uv-<version>` and fetched the first time by running
//!   pip (the wheel the Python ships for `ensurepip`, or its `pip` module) with `--target`: no
//!   virtual environment is needed for it. uv and pip read nothing but what autotool decides
//!   (see `isolate`): no configuration file, no build from source, their caches in `cache/`
//!   and their working directories in `work/` beside `dir` (0700, checked), the index the
//!   user's own settings name.
//! - `uv venv` and `uv pip install --compile-bytecode --link-mode copy` (or `python -m venv`
//!   and `pip install`) run in a temporary directory beside `dir`, each bounded in time, their
//!   output passed on as [`Event::Detail`]s, and stopped (the directory removed) on [`Cancel`].
//! - The stamp ([`super::RUNTIME_STAMP`]) is written last; the temporary path is rewritten to
//!   `dir` in the environment's scripts; every directory is made 0755 and every file
//!   world-readable (a confined tool may run as another user, `nobody` under a root
//!   supervisor); then the directory is renamed to `dir`. A runtime already at `dir` is moved
//!   aside first and removed afterwards.

mod isolate;
mod steps;

pub(crate) use isolate::{Private, pip_command, pip_install, uv_command};

use super::{Event, Progress, Python, RuntimeError, resolve};
use crate::index::Source;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use steps::*;

/// The uv autotool fetches for itself: a PyPI package carrying the binary.
pub const UV_VERSION: &str = "0.13.9";
/// [`UV_VERSION`] as a pip requirement.
pub const UV_REQUIREMENT: &str = "uv==0.13.9";

/// Bound on creating the environment (`uv venv`, `python -m venv`).
const VENV_BOUND: Duration = Duration::from_secs(120);
/// Bound on fetching uv itself.
const UV_FETCH_BOUND: Duration = Duration::from_secs(5 * 60);
/// Bound on installing the requirements (downloads included).
const INSTALL_BOUND: Duration = Duration::from_secs(15 * 60);
/// How long a creator waits for another process that is creating the same runtime.
pub(super) const LOCK_BOUND: Duration = Duration::from_secs(20 * 60);

/// What built a runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Installer {
    /// uv, at this version.
    Uv(String),
    /// pip, because uv could not be had.
    Pip,
    /// Nothing was installed (no requirements): `python -m venv` alone.
    Venv,
}

impl std::fmt::Display for Installer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Installer::Uv(v) => write!(f, "uv {v}"),
            Installer::Pip => f.write_str("pip"),
            Installer::Venv => f.write_str("python -m venv"),
        }
    }
}

/// Set to stop a build: its running step is killed and its temporary directory removed.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

fn create_error(dir: &Path, step: &'static str, e: &dyn std::fmt::Display) -> RuntimeError {
    RuntimeError::Create {
        dir: dir.to_path_buf(),
        step,
        why: e.to_string(),
    }
}

/// autotool's uv for work beside the runtime (installing tools' packages): `$AUTOTOOL_UV`, else
/// its own pinned copy, fetched the first time with `python`'s pip. `parent` is where the copy
/// goes when the user has no cache directory.
pub(crate) fn uv(python: &Path, parent: &Path, private: &Private) -> Result<PathBuf, String> {
    let mut said: Vec<u8> = Vec::new();
    match get_uv(python, parent, private, &mut said, &Cancel::default()) {
        Ok(uv) => Ok(uv),
        Err(GetUv::Failed(why)) => Err(why),
        Err(GetUv::Cancelled) => Err("stopped".into()),
    }
}

/// How to run pip with `python` (a runtime's interpreter): from the pip wheel its Python ships
/// for `ensurepip` (or Debian's `/usr/share/python-wheels`), else its own `pip` module.
pub(crate) fn pip_for(python: &Path) -> Vec<std::ffi::OsString> {
    match pip_wheel(python) {
        Some(w) => vec![format!("{w}/pip").into()],
        None => vec!["-m".into(), "pip".into()],
    }
}

/// The runtime at `dir` with `requirements`: reused when ready (unless `force`), else built.
pub(super) fn ensure(
    dir: &Path,
    requirements: &[&str],
    force: bool,
    progress: &mut dyn Progress,
    cancel: &Cancel,
) -> Result<Python, RuntimeError> {
    if !force && let Some(python) = super::ready(dir, requirements) {
        return Ok(python);
    }
    let dir = std::path::absolute(dir).map_err(|e| create_error(dir, "locating it", &e))?;
    let (parent, name) = split(&dir)?;
    std::fs::create_dir_all(&parent)
        .map_err(|e| create_error(&dir, "creating its parent directory", &e))?;
    let (_lock, waited) = lock(&parent.join(format!("{name}.lock")), &dir, progress, cancel)?;
    // A runtime another process finished while this one waited is used as it is, even when
    // asked to rebuild: that build is the rebuild.
    if (!force || waited)
        && let Some(python) = super::ready(&dir, requirements)
    {
        progress.event(Event::Ready {
            dir: dir.clone(),
            built: None,
        });
        return Ok(python);
    }
    remove_leftovers(&parent, &name);
    let builder = Builder {
        dir: &dir,
        parent: &parent,
        name: &name,
        requirements,
        cancel,
    };
    builder.build(progress)
}

fn split(dir: &Path) -> Result<(PathBuf, String), RuntimeError> {
    match (dir.parent(), dir.file_name()) {
        (Some(p), Some(n)) => Ok((p.to_path_buf(), n.to_string_lossy().into_owned())),
        _ => Err(RuntimeError::Create {
            dir: dir.to_path_buf(),
            step: "locating it",
            why: "it has no parent directory".into(),
        }),
    }
}

/// Hold an exclusive lock on `path`, waiting at most [`LOCK_BOUND`]; also says whether it had
/// to wait. Released when the file closes (also when the process dies).
fn lock(
    path: &Path,
    dir: &Path,
    progress: &mut dyn Progress,
    cancel: &Cancel,
) -> Result<(std::fs::File, bool), RuntimeError> {
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
            Ok(()) => return Ok((file, said)),
            Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR) => {}
            Err(e) => return Err(create_error(dir, "locking it", &e)),
        }
        if cancel.is_cancelled() {
            return Err(RuntimeError::Cancelled {
                dir: dir.to_path_buf(),
            });
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
            progress.event(Event::Waiting {
                dir: dir.to_path_buf(),
            });
            said = true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether another process holds the build lock of the runtime at `dir` now.
pub(super) fn is_building(dir: &Path) -> bool {
    use rustix::fs::{FlockOperation, flock};
    let Ok((parent, name)) = split(dir) else {
        return false;
    };
    let Ok(file) = std::fs::File::open(parent.join(format!("{name}.lock"))) else {
        return false;
    };
    match flock(&file, FlockOperation::NonBlockingLockShared) {
        Ok(()) => false,
        Err(e) => e == rustix::io::Errno::WOULDBLOCK,
    }
}

fn build_prefix(name: &str) -> String {
    format!(".{name}-build-")
}

fn stale_prefix(name: &str) -> String {
    format!(".{name}-stale-")
}

/// What killed builds left beside the runtime at `dir`.
pub(super) fn leftovers(dir: &Path) -> Vec<PathBuf> {
    let Ok((parent, name)) = split(dir) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(&parent) else {
        return Vec::new();
    };
    let prefixes = [build_prefix(&name), stale_prefix(&name)];
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            prefixes.iter().any(|p| n.starts_with(p.as_str()))
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

/// Remove what a killed creator left beside the runtime (called with the lock held, so nobody
/// is using them).
fn remove_leftovers(parent: &Path, name: &str) {
    for path in leftovers(&parent.join(name)) {
        let _ = std::fs::remove_dir_all(path);
    }
}

/// One build, with the lock held.
struct Builder<'a> {
    dir: &'a Path,
    parent: &'a Path,
    name: &'a str,
    requirements: &'a [&'a str],
    cancel: &'a Cancel,
}

impl Builder<'_> {
    fn build(&self, progress: &mut dyn Progress) -> Result<Python, RuntimeError> {
        let t0 = Instant::now();
        let dir = self.dir;
        progress.event(Event::Started {
            dir: dir.to_path_buf(),
        });
        let of = if self.requirements.is_empty() { 3 } else { 5 };
        let mut step = 0u8;
        let mut next = |progress: &mut dyn Progress, what: String| {
            step += 1;
            progress.event(Event::Step { n: step, of, what });
        };

        next(progress, "finding Python".into());
        let base = resolve(None)?;
        // `sys.executable` of a pyenv shim's interpreter is already the real binary;
        // canonicalising also removes any symlink chain, so the environment's `python3` points
        // at the ELF itself.
        let real = std::fs::canonicalize(&base.interpreter).unwrap_or(base.interpreter.clone());
        progress.event(Event::Detail(format!(
            "Python {} at {}",
            base.version,
            real.display()
        )));
        if let Some((path, reserved)) = base.unmountable() {
            progress.event(Event::Detail(format!(
                "note: this Python lives in {} (below {reserved}, which the sandbox builds \
                 itself), so confined tools cannot run on it; set AUTOTOOL_PYTHON to a Python \
                 elsewhere (for example /usr/bin/python3)",
                path.display()
            )));
        }

        // uv and pip read nothing but what is decided here (see `isolate`): their cache and
        // working directories are these, the index is the user's own.
        let private = Private::in_home(self.parent)
            .map_err(|e| create_error(dir, "preparing its private directories", &e))?;
        let source = Source::current();
        let uv = if self.requirements.is_empty() {
            None
        } else {
            next(progress, format!("getting uv {UV_VERSION}"));
            match get_uv(&real, self.parent, &private, progress, self.cancel) {
                Ok(uv) => Some(uv),
                Err(GetUv::Cancelled) => {
                    return Err(RuntimeError::Cancelled {
                        dir: dir.to_path_buf(),
                    });
                }
                Err(GetUv::Failed(why)) => {
                    progress.event(Event::Detail(format!(
                        "uv could not be had ({why}); building with pip instead, which is \
                         slower (about 20 s)"
                    )));
                    tracing::warn!("uv could not be had ({why}); the runtime is built with pip");
                    None
                }
            }
        };
        let installer = match (&uv, self.requirements.is_empty()) {
            (_, true) => Installer::Venv,
            (Some(_), false) => Installer::Uv(UV_VERSION.into()),
            (None, false) => Installer::Pip,
        };

        let tmp = tempfile::Builder::new()
            .prefix(&build_prefix(self.name))
            .tempdir_in(self.parent)
            .map_err(|e| create_error(dir, "making a temporary directory beside it", &e))?;
        let staging = tmp.path().to_path_buf();

        next(progress, "creating the environment".into());
        match &uv {
            Some(uv) => {
                let mut venv = uv_command(uv, &private.work, &private, &source);
                venv.args(["venv", "--quiet", "--no-project", "--python"])
                    .arg(&real)
                    .args(["--prompt", "autotool-runtime"])
                    .arg(&staging);
                self.run(venv, "running `uv venv`", VENV_BOUND, progress)?;
            }
            None => {
                let mut venv = Command::new(&real);
                venv.env_clear()
                    .env("PATH", "/usr/bin:/bin")
                    .current_dir(&private.work);
                // The prompt would otherwise be the build directory's name.
                venv.args(["-I", "-m", "venv", "--prompt", "autotool-runtime"]);
                if self.requirements.is_empty() {
                    venv.arg("--without-pip");
                }
                venv.arg(&staging);
                self.run(venv, "running `python -m venv`", VENV_BOUND, progress)
                    .map_err(|e| with_venv_hint(e, &base.version))?;
            }
        }

        if !self.requirements.is_empty() {
            next(
                progress,
                format!("installing {}", self.requirements.join(" ")),
            );
            match &uv {
                Some(uv) => {
                    let install = |offline: bool| {
                        let mut c = uv_command(uv, &private.work, &private, &source);
                        c.args(["pip", "install", "--no-progress", "--no-build", "--python"])
                            .arg(staging.join("bin/python3"))
                            // Bytecode now: the sandbox's mounts are read-only, so a tool could
                            // never write it, and would compile the SDK at every start.
                            // Copies, not hard links into uv's cache: the modes set below
                            // must not reach the cache's files.
                            .args(["--compile-bytecode", "--link-mode", "copy"])
                            .args(self.requirements);
                        if offline {
                            c.arg("--offline");
                        }
                        c
                    };
                    // From uv's cache alone first (a second home, a rebuild: no network at
                    // all); what that attempt says is kept back unless it is the answer.
                    let mut held: Vec<Event> = Vec::new();
                    let mut hold = Holding(&mut held);
                    match run_step(install(true), INSTALL_BOUND, &mut hold, self.cancel) {
                        Ok(()) => {
                            for e in held {
                                progress.event(e);
                            }
                        }
                        Err(StepError::Cancelled) => {
                            return Err(RuntimeError::Cancelled {
                                dir: dir.to_path_buf(),
                            });
                        }
                        Err(StepError::Failed(_)) => {
                            progress.event(Event::Detail(
                                "not all of it is in uv's cache: downloading".into(),
                            ));
                            self.run(
                                install(false),
                                "running `uv pip install`",
                                INSTALL_BOUND,
                                progress,
                            )
                            .map_err(|e| with_index_hint(e, &installer))?;
                        }
                    }
                }
                None => {
                    let mut c = pip_install(
                        &staging.join("bin/python3"),
                        &["-m".into(), "pip".into()],
                        &private,
                        &source,
                    );
                    c.args(self.requirements);
                    self.run(c, "running `pip install`", INSTALL_BOUND, progress)
                        .map_err(|e| with_index_hint(e, &installer))?;
                }
            }
        }

        next(progress, "checking it and putting it in place".into());
        let stamp = format!(
            "# The tool runtime autotool created from Python {} at {}; it is used only while this\n\
             # file lists exactly the requirements autotool pins.\n\
             # built with {installer}\n{}\n",
            base.version,
            real.display(),
            self.requirements.join("\n")
        );
        std::fs::write(staging.join(super::RUNTIME_STAMP), stamp)
            .map_err(|e| create_error(dir, "writing its stamp", &e))?;
        relocate(&staging, dir).map_err(|e| create_error(dir, "rewriting its scripts", &e))?;
        open_up(&staging)
            .map_err(|e| create_error(dir, "making it readable to other users", &e))?;
        if self.cancel.is_cancelled() {
            return Err(RuntimeError::Cancelled {
                dir: dir.to_path_buf(),
            });
        }

        // Put it in place. The lock is held, so only a runtime left by an older autotool (or
        // one being rebuilt) can be there.
        let staging = tmp.keep();
        let stale = self
            .parent
            .join(format!("{}{}", stale_prefix(self.name), std::process::id()));
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
        let python = resolve(Some(&dir.join("bin/python3")))?;
        progress.event(Event::Ready {
            dir: dir.to_path_buf(),
            built: Some((t0.elapsed().as_secs_f64(), installer)),
        });
        // The new runtime is in use from here; the old one goes after (removing thousands of
        // files takes a second or more on a busy disk).
        if moved_aside {
            let _ = std::fs::remove_dir_all(&stale);
        }
        Ok(python)
    }

    fn run(
        &self,
        cmd: Command,
        step: &'static str,
        bound: Duration,
        progress: &mut dyn Progress,
    ) -> Result<(), RuntimeError> {
        run_step(cmd, bound, progress, self.cancel).map_err(|e| match e {
            StepError::Cancelled => RuntimeError::Cancelled {
                dir: self.dir.to_path_buf(),
            },
            StepError::Failed(why) => RuntimeError::Create {
                dir: self.dir.to_path_buf(),
                step,
                why,
            },
        })
    }
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

fn with_index_hint(e: RuntimeError, installer: &Installer) -> RuntimeError {
    match e {
        RuntimeError::Create { dir, step, why } => {
            let hint = match installer {
                Installer::Uv(_) => {
                    "uv needs to reach PyPI, or the index the user's settings name (UV_DEFAULT_INDEX, PIP_INDEX_URL, their own uv.toml or pip.conf)"
                }
                _ => {
                    "pip needs to reach PyPI, or the index the user's settings name (PIP_INDEX_URL, their own pip.conf)"
                }
            };
            RuntimeError::Create {
                dir,
                step,
                why: format!("{why}\n({hint}; check the network and run again)"),
            }
        }
        other => other,
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_step_is_stopped_and_reported_when_cancelled() {
        let cancel = Cancel::default();
        let c2 = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            c2.cancel();
        });
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo started; exec sleep 30"]);
        let mut out = Vec::new();
        let t0 = Instant::now();
        let got = run_step(cmd, Duration::from_secs(60), &mut out, &cancel);
        assert!(matches!(got, Err(StepError::Cancelled)));
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        assert_eq!(String::from_utf8_lossy(&out), "  started\n");
    }

    #[test]
    fn a_failing_step_says_how_and_ends_with_its_stderr() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo out; echo 'no index' >&2; exit 3"]);
        let mut out = Vec::new();
        match run_step(cmd, Duration::from_secs(60), &mut out, &Cancel::default()) {
            Err(StepError::Failed(why)) => {
                assert!(why.starts_with("it failed (exit status: 3)"), "{why}");
                assert!(why.ends_with(":\nno index"), "{why}");
            }
            _ => panic!("the step did not fail"),
        }
        let said = String::from_utf8_lossy(&out);
        assert!(
            said.contains("  out\n") && said.contains("  no index\n"),
            "{said}"
        );
    }

    #[test]
    fn a_step_over_its_bound_is_stopped() {
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let t0 = Instant::now();
        match run_step(
            cmd,
            Duration::from_millis(300),
            &mut Vec::new(),
            &Cancel::default(),
        ) {
            Err(StepError::Failed(why)) => assert!(why.contains("longer than"), "{why}"),
            _ => panic!("the step was not stopped"),
        }
        assert!(t0.elapsed() < Duration::from_secs(5));
    }
}
