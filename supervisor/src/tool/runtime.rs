//! The Python runtime tools run on: the real interpreter binary (never a shim), the
//! directories the sandbox must mount for it, and the runtime autotool builds itself.
//!
//! - [`resolve`], [`open_runtime`]: an interpreter and what mounting it takes. A virtual
//!   environment is mounted at [`autotool_policy::launch::RUNTIME_MOUNT`] inside the sandbox
//!   wherever it lives on the host ([`Python::venv`]), so an `AUTOTOOL_HOME` under `/tmp` works
//!   like one under `/home`; a base installation outside the system directories is mounted at
//!   its own path ([`Python::runtime_dirs`]).
//! - [`ensure_runtime`], [`ensure_venv`], [`rebuild_venv`]: `$AUTOTOOL_HOME/runtime`, built with
//!   `uv` (pinned, fetched from PyPI the first time) or, where uv cannot be had, with pip; see
//!   [`build`]. Progress goes to a [`Progress`] as [`Event`]s.
//! - [`status`]: what is at the runtime's place now, for `autotool runtime status` and `doctor`.
//! - [`prepare`]: the runtime made ready in the background while `serve` already answers, with
//!   calls that need it held for a bounded time.
//! - [`detach`]: that build in a detached `autotool runtime install`, so it outlives a `serve`
//!   that is killed.

pub mod build;
pub mod detach;
pub mod prepare;

pub use build::{Cancel, Installer};
pub use prepare::{Preparer, State};

use autotool_policy::LaunchPolicy;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A resolved interpreter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Python {
    /// The interpreter's host path: inside a virtual environment, its `bin/python3` (so the
    /// environment is found), always a path whose final target is an ELF binary.
    pub interpreter: PathBuf,
    /// Directories to mount read-only with exec at their own paths (a base prefix outside the
    /// system directories), beyond the system ones.
    pub runtime_dirs: Vec<PathBuf>,
    /// The virtual environment the interpreter belongs to, if any: mounted read-only with exec
    /// at [`autotool_policy::launch::RUNTIME_MOUNT`] whatever its host path.
    pub venv: Option<PathBuf>,
    /// `major.minor`.
    pub version: String,
}

impl Python {
    /// The launch policy of a tool at `tool_dir/tool_file` on this interpreter, every other
    /// setting at its default: the one place the runtime's mounts are decided.
    pub fn launch_policy(&self, tool_dir: &Path, tool_file: impl Into<String>) -> LaunchPolicy {
        let mut policy = LaunchPolicy::new(
            tool_dir,
            tool_file,
            &self.interpreter,
            self.runtime_dirs.clone(),
        );
        policy.runtime = self.venv.clone();
        policy
    }

    /// The first directory this interpreter needs mounted at its own path that the sandbox
    /// reserves (`/tmp`, `/etc`, …), and that directory: tools cannot run confined on it.
    pub fn unmountable(&self) -> Option<(&Path, &'static str)> {
        self.runtime_dirs.iter().find_map(|d| {
            autotool_policy::launch::reserved_by(d).map(|reserved| (d.as_path(), reserved))
        })
    }
}

/// Why no usable interpreter was found, or the runtime could not be built.
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
    #[error(
        "creating the tool runtime at {dir:?} was stopped before it finished (nothing was left behind)"
    )]
    Cancelled { dir: PathBuf },
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
    // A virtual environment (its prefix is not its base's) holding the interpreter is mounted
    // at the runtime's fixed place; everything else the interpreter needs at its own path.
    let venv = (prefix != base && exe.starts_with(&prefix)).then(|| prefix.clone());
    let mut runtime_dirs: Vec<PathBuf> = Vec::new();
    let real_dir = real.parent().and_then(Path::parent).map(Path::to_path_buf);
    let candidates = match &venv {
        Some(_) => vec![Some(base), real_dir],
        None => vec![Some(prefix), Some(base), real_dir],
    };
    for dir in candidates.into_iter().flatten() {
        let covered = SYSTEM.iter().any(|s| dir.starts_with(s))
            || venv.as_ref().is_some_and(|v| dir.starts_with(v))
            || runtime_dirs.iter().any(|d| dir.starts_with(d));
        if !covered {
            runtime_dirs.retain(|d| !d.starts_with(&dir));
            runtime_dirs.push(dir);
        }
    }
    Ok(Python {
        interpreter: exe,
        runtime_dirs,
        venv,
        version,
    })
}

// ---------------------------------------------------------------------------------------------
// The runtime autotool creates: `$AUTOTOOL_HOME/runtime`, a virtual environment on the machine's
// `python3` holding the tool SDK, the HTTP client tools use and the linter the verifier runs.

/// What a tool runtime holds, pinned: the versions tools are written and tested against (the
/// same pins as the test runtime of `.ci/test`).
pub const RUNTIME_REQUIREMENTS: [&str; 3] = ["mcp==2.3.0", "httpx2==2.16.2", "ruff==0.17.6"];

/// The file, inside a runtime, that lists what was installed in it. Written last: a runtime
/// without it (or listing something else) is never used.
pub const RUNTIME_STAMP: &str = "autotool-runtime.txt";

/// What a build reports as it goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A build of the runtime at `dir` begins.
    Started { dir: PathBuf },
    /// Step `n` of `of` begins.
    Step { n: u8, of: u8, what: String },
    /// A line of a step's own output (uv, pip), or a note about it.
    Detail(String),
    /// Another autotool process is building it; this one waits.
    Waiting { dir: PathBuf },
    /// The runtime at `dir` is ready: built now in `secs` seconds with `installer`, or (`None`)
    /// found ready after waiting for another process.
    Ready {
        dir: PathBuf,
        built: Option<(f64, Installer)>,
    },
}

/// Where a build's [`Event`]s go. Every [`Write`] takes them as plain lines (`autotool: …`),
/// for a log, a pipe or a test.
pub trait Progress {
    fn event(&mut self, event: Event);
}

impl<W: Write + ?Sized> Progress for W {
    fn event(&mut self, event: Event) {
        let _ = writeln!(self, "{}", plain_line(&event));
    }
}

/// The plain-text form of one event.
pub fn plain_line(event: &Event) -> String {
    match event {
        Event::Started { dir } => format!(
            "autotool: creating the Python runtime for tools at {} (the first time only; a few seconds)",
            dir.display()
        ),
        Event::Step { n, of, what } => format!("autotool: [{n}/{of}] {what}"),
        Event::Detail(line) => format!("  {line}"),
        Event::Waiting { dir } => format!(
            "autotool: waiting for another autotool process to finish creating the tool runtime at {}",
            dir.display()
        ),
        Event::Ready {
            dir,
            built: Some((secs, installer)),
        } => format!(
            "autotool: the tool runtime is ready at {} ({secs:.1} s, built with {installer})",
            dir.display()
        ),
        Event::Ready { dir, built: None } => {
            format!("autotool: the tool runtime at {} is ready", dir.display())
        }
    }
}

/// The Python runtime tools run on, creating it the first time it is needed.
///
/// First match wins:
/// 1. `$AUTOTOOL_RUNTIME`, an existing virtual environment, used as it is (tests and CI point it
///    at a prebuilt one); nothing is created.
/// 2. `runtime_dir`, when it holds a runtime whose stamp lists exactly [`RUNTIME_REQUIREMENTS`]
///    and whose interpreter still works.
/// 3. Otherwise a new runtime is built and put in place of whatever was at `runtime_dir`; see
///    [`ensure_venv`].
///
/// This blocks for as long as creation takes (seconds with uv, longer with pip): call it from a
/// blocking thread.
pub fn ensure_runtime(
    runtime_dir: &Path,
    progress: &mut dyn Progress,
) -> Result<Python, RuntimeError> {
    ensure_runtime_until(runtime_dir, progress, &Cancel::default())
}

/// [`ensure_runtime`], stopped (and cleaned up) when `cancel` is set.
pub fn ensure_runtime_until(
    runtime_dir: &Path,
    progress: &mut dyn Progress,
    cancel: &Cancel,
) -> Result<Python, RuntimeError> {
    match override_dir() {
        Some(venv) => open_runtime(&venv),
        None => build::ensure(runtime_dir, &RUNTIME_REQUIREMENTS, false, progress, cancel),
    }
}

/// `$AUTOTOOL_RUNTIME`, when set and not empty.
pub fn override_dir() -> Option<PathBuf> {
    std::env::var_os("AUTOTOOL_RUNTIME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
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
    // Both run outside the sandbox (the interpreter is asked its version, ruff lints): neither
    // may be a file another user could change.
    crate::home::check_owned(&interpreter)
        .map_err(|e| fail(format!("autotool will not run {e}")))?;
    let python = resolve(Some(&interpreter)).map_err(|e| fail(e.to_string()))?;
    let ruff = ruff(&python);
    if ruff.is_file()
        && let Err(e) = crate::home::check_owned(&ruff)
    {
        return Err(fail(format!("autotool will not run {e}")));
    }
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
/// reused when its stamp says so and its interpreter works, else built anew; see [`build`] for
/// how, and why a half-made runtime is never used.
pub fn ensure_venv(
    dir: &Path,
    requirements: &[&str],
    progress: &mut dyn Progress,
) -> Result<Python, RuntimeError> {
    build::ensure(dir, requirements, false, progress, &Cancel::default())
}

/// Build the runtime at `dir` anew even when it is ready (`autotool runtime rebuild`); the one
/// in place stays usable until the new one replaces it.
pub fn rebuild_venv(
    dir: &Path,
    requirements: &[&str],
    progress: &mut dyn Progress,
    cancel: &Cancel,
) -> Result<Python, RuntimeError> {
    build::ensure(dir, requirements, true, progress, cancel)
}

/// The tool runtime in use, if it exists already: `$AUTOTOOL_RUNTIME`, else the one at
/// `runtime_dir` with the pinned requirements. `None` when it is still to be created.
pub fn existing_runtime(runtime_dir: &Path) -> Option<Result<Python, RuntimeError>> {
    match override_dir() {
        Some(venv) => Some(open_runtime(&venv)),
        None => ready(runtime_dir, &RUNTIME_REQUIREMENTS).map(Ok),
    }
}

/// The requirements a stamp lists (comments and blank lines left out), sorted.
fn stamp_requirements(stamp: &str) -> Vec<&str> {
    let mut listed: Vec<&str> = stamp
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    listed.sort_unstable();
    listed
}

/// The runtime at `dir`, if its stamp lists exactly `requirements` and its interpreter works.
fn ready(dir: &Path, requirements: &[&str]) -> Option<Python> {
    let stamp = std::fs::read_to_string(dir.join(RUNTIME_STAMP)).ok()?;
    let mut wanted = requirements.to_vec();
    wanted.sort_unstable();
    if stamp_requirements(&stamp) != wanted {
        return None;
    }
    resolve(Some(&dir.join("bin/python3"))).ok()
}

/// What is at the runtime's place now.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Status {
    /// Where autotool keeps its runtime.
    pub dir: PathBuf,
    /// `$AUTOTOOL_RUNTIME`, when it is set: then that runtime is used and nothing is built.
    pub overridden_by: Option<PathBuf>,
    /// `ready`, `missing`, `stale` (built for other pins, or its interpreter no longer works)
    /// or `broken` (`$AUTOTOOL_RUNTIME` is not usable).
    pub state: &'static str,
    /// Why it is not ready, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Its interpreter and Python version, when it has a working one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interpreter: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub python_version: Option<String>,
    /// What its stamp lists (the pins it was built for), and how it was built.
    pub requirements: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub built_with: Option<String>,
    /// Another process is building it right now.
    pub building: bool,
    /// What a build that was killed left beside it (removed by the next build).
    pub leftovers: Vec<PathBuf>,
}

/// What is at `dir` (and in `$AUTOTOOL_RUNTIME`) now. Runs the interpreter once to check it;
/// changes nothing.
pub fn status(dir: &Path) -> Status {
    let mut s = Status {
        dir: dir.to_path_buf(),
        overridden_by: None,
        state: "missing",
        why: None,
        interpreter: None,
        python_version: None,
        requirements: Vec::new(),
        built_with: None,
        building: build::is_building(dir),
        leftovers: build::leftovers(dir),
    };
    if let Some(venv) = override_dir() {
        s.overridden_by = Some(venv.clone());
        match open_runtime(&venv) {
            Ok(p) => {
                s.state = "ready";
                s.interpreter = Some(p.interpreter);
                s.python_version = Some(p.version);
            }
            Err(e) => {
                s.state = "broken";
                s.why = Some(e.to_string());
            }
        }
        return s;
    }
    let Ok(stamp) = std::fs::read_to_string(dir.join(RUNTIME_STAMP)) else {
        s.why = Some(format!("{} holds no finished runtime", dir.display()));
        return s;
    };
    s.requirements = stamp_requirements(&stamp)
        .into_iter()
        .map(String::from)
        .collect();
    s.built_with = stamp
        .lines()
        .find_map(|l| l.strip_prefix("# built with "))
        .map(|w| w.trim().to_string());
    let mut wanted = RUNTIME_REQUIREMENTS.to_vec();
    wanted.sort_unstable();
    match resolve(Some(&dir.join("bin/python3"))) {
        Ok(p) => {
            s.interpreter = Some(p.interpreter);
            s.python_version = Some(p.version);
            if stamp_requirements(&stamp) == wanted {
                s.state = "ready";
            } else {
                s.state = "stale";
                s.why = Some(format!(
                    "it was built for {}, this autotool pins {}",
                    s.requirements.join(" "),
                    RUNTIME_REQUIREMENTS.join(" ")
                ));
            }
        }
        Err(e) => {
            s.state = "stale";
            s.why = Some(format!("its interpreter no longer works: {e}"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_venv_is_mounted_at_the_fixed_place_and_its_base_at_its_own() {
        let python = Python {
            interpreter: "/tmp/h/.autotool/runtime/bin/python3".into(),
            runtime_dirs: vec!["/opt/python3.12".into()],
            venv: Some("/tmp/h/.autotool/runtime".into()),
            version: "3.12".into(),
        };
        let policy = python.launch_policy(Path::new("/srv/t"), "tool.py");
        assert_eq!(policy.runtime, python.venv);
        assert_eq!(policy.runtime_dirs, python.runtime_dirs);
        let plan = policy.plan().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(plan.exec_path, PathBuf::from("/runtime/bin/python3"));
        assert_eq!(python.unmountable(), None);
    }

    #[test]
    fn a_base_python_under_a_reserved_directory_is_named() {
        let python = Python {
            interpreter: "/tmp/h/.autotool/runtime/bin/python3".into(),
            runtime_dirs: vec!["/tmp/h/.pyenv/versions/3.12.1".into()],
            venv: Some("/tmp/h/.autotool/runtime".into()),
            version: "3.12".into(),
        };
        assert_eq!(
            python.unmountable(),
            Some((Path::new("/tmp/h/.pyenv/versions/3.12.1"), "/tmp"))
        );
    }

    #[test]
    fn the_runtime_pins_are_the_test_runtimes() {
        // `.ci/test` builds the runtime every test runs tools on from its PY_REQUIREMENTS: the
        // runtime users get must be the one that is tested.
        let ci = include_str!("../../../.ci/test");
        let line = ci
            .lines()
            .find(|l| l.starts_with("PY_REQUIREMENTS=("))
            .unwrap();
        let pins: Vec<&str> = line
            .trim_start_matches("PY_REQUIREMENTS=(")
            .trim_end_matches(')')
            .split_whitespace()
            .collect();
        assert_eq!(pins, RUNTIME_REQUIREMENTS);
    }

    #[test]
    fn plain_lines_say_each_event() {
        let mut out = Vec::new();
        let dir = PathBuf::from("/h/runtime");
        for e in [
            Event::Started { dir: dir.clone() },
            Event::Step {
                n: 2,
                of: 5,
                what: "getting uv".into(),
            },
            Event::Detail("Resolved 30 packages".into()),
            Event::Ready {
                dir: dir.clone(),
                built: Some((2.5, Installer::Uv("0.13.9".into()))),
            },
        ] {
            out.event(e);
        }
        assert_eq!(
            String::from_utf8_lossy(&out),
            "autotool: creating the Python runtime for tools at /h/runtime (the first time only; a few seconds)\n\
             autotool: [2/5] getting uv\n  Resolved 30 packages\n\
             autotool: the tool runtime is ready at /h/runtime (2.5 s, built with uv 0.13.9)\n"
        );
    }
}
