//! The runtime `serve` builds, built by a detached `autotool runtime install`: a host that starts
//! a `serve` per call and kills it after (LangChain's stateless mode) would otherwise kill the
//! build with it, and the next `serve` would start over.
//!
//! - The build is this binary's `autotool runtime install`, in a process group of its own
//!   (a client killing `serve`'s group does not reach it), stdin null, its output (the plain
//!   progress lines `runtime install` prints) in `$AUTOTOOL_HOME/logs/runtime-build.log`. It
//!   takes the runtime's lock (`runtime.lock`) like any build, keeps the step bounds of any
//!   build, and exits when the build ends.
//! - `serve` follows that log for the progress a held call shows; a lock held by another
//!   process (a build an earlier `serve` started, or `runtime install` in a terminal) is a build
//!   under way: it is followed and waited for, never started over.
//! - Where the build cannot be started (this process is not `autotool`, as in a test harness,
//!   or spawning fails) it runs in this process, as before.

use super::build::{self, LOCK_BOUND};
use super::{Cancel, Event, Progress, Python, RUNTIME_REQUIREMENTS};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The log of the detached build, in `$AUTOTOOL_HOME/logs/`.
pub const LOG_NAME: &str = "runtime-build.log";

/// Test-only: set to `in-process` to build the runtime inside `serve` (killed with it), as
/// autotool did before builds were detached; tests compare the two.
pub const IN_PROCESS_ENV: &str = "AUTOTOOL_TEST_RUNTIME_IN_PROCESS";

/// The runtime at `dir` made ready as `serve` does it: found ready, or waited for while another
/// process builds it, or built by a detached `autotool runtime install` whose log (`log`) is
/// followed; in this process when that cannot be started.
pub fn ensure(
    dir: &Path,
    log: &Path,
    progress: &mut dyn Progress,
    cancel: &Cancel,
) -> Result<Python, String> {
    let detach = super::override_dir().is_none()
        && std::env::var_os(IN_PROCESS_ENV).is_none_or(|v| v != "in-process")
        && super::ready(dir, &RUNTIME_REQUIREMENTS).is_none();
    if detach {
        if build::is_building(dir) {
            progress.event(Event::Waiting {
                dir: dir.to_path_buf(),
            });
            follow(log, progress, cancel, || !build::is_building(dir))?;
        } else {
            match spawn(log) {
                Ok(mut child) => {
                    progress.event(Event::Detail(format!(
                        "note: building in a detached `autotool runtime install` (pid {}); its log is {}",
                        child.id(),
                        log.display()
                    )));
                    let mut status = None;
                    follow(log, progress, cancel, || {
                        status = child.try_wait().unwrap_or(None);
                        status.is_some()
                    })?;
                    if let Some(status) = status.filter(|s| !s.success()) {
                        return Err(format!(
                            "`autotool runtime install` ended with {status}: {}",
                            last_line(log).unwrap_or_else(|| format!("see {}", log.display()))
                        ));
                    }
                }
                Err(e) => progress.event(Event::Detail(format!(
                    "note: could not start a detached build ({e}); building in this process"
                ))),
            }
        }
    }
    super::ensure_runtime_until(dir, progress, cancel).map_err(|e| e.to_string())
}

/// `autotool runtime install`, detached, its output in `log` (emptied first).
fn spawn(log: &Path) -> std::io::Result<Child> {
    let exe = std::env::current_exe()?;
    if exe.file_name().is_none_or(|n| n != "autotool") {
        return Err(std::io::Error::other(format!(
            "{} is not autotool",
            exe.display()
        )));
    }
    if let Some(parent) = log.parent() {
        std::fs::create_dir_all(parent)?;
    }
    // Appending: a second build that raced this one (it waits on the lock) never writes
    // over this one's lines.
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    out.set_len(0)?;
    let err = out.try_clone()?;
    let mut cmd = Command::new(exe);
    // A `serve --home` passes its home on, as the variable it stands for.
    if let Some(home) = crate::home::overridden() {
        cmd.env("AUTOTOOL_HOME", home);
    }
    cmd.args(["runtime", "install"])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
}

/// Pass the lines `log` gains to `progress` until `done` (then once more), at most
/// [`LOCK_BOUND`]; `Err` when `cancel` is set (the build goes on) or the bound passed.
fn follow(
    log: &Path,
    progress: &mut dyn Progress,
    cancel: &Cancel,
    mut done: impl FnMut() -> bool,
) -> Result<(), String> {
    let t0 = Instant::now();
    let mut at = 0u64;
    let mut partial = String::new();
    loop {
        let finished = done();
        read_new(log, &mut at, &mut partial, progress);
        if finished {
            return Ok(());
        }
        if cancel.is_cancelled() {
            return Err("stopped".into());
        }
        if t0.elapsed() > LOCK_BOUND {
            return Err(format!(
                "the build in another process did not end within {} minutes (its log: {})",
                LOCK_BOUND.as_secs() / 60,
                log.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The complete lines `log` gained past `at`, as events.
fn read_new(log: &Path, at: &mut u64, partial: &mut String, progress: &mut dyn Progress) {
    let Ok(mut file) = std::fs::File::open(log) else {
        return;
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len < *at {
        // Emptied for a new build.
        *at = 0;
        partial.clear();
    }
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(*at)).is_err() || file.read_to_end(&mut bytes).is_err() {
        return;
    }
    *at += bytes.len() as u64;
    partial.push_str(&String::from_utf8_lossy(&bytes));
    while let Some(end) = partial.find('\n') {
        let line: String = partial.drain(..=end).collect();
        if let Some(event) = parse(line.trim_end()) {
            progress.event(event);
        }
    }
}

/// A line `runtime install` printed, as the event it was.
fn parse(line: &str) -> Option<Event> {
    if line.trim().is_empty() {
        return None;
    }
    if let Some(rest) = line.strip_prefix("autotool: [")
        && let Some((nums, what)) = rest.split_once("] ")
        && let Some((n, of)) = nums.split_once('/')
        && let (Ok(n), Ok(of)) = (n.parse(), of.parse())
    {
        return Some(Event::Step {
            n,
            of,
            what: what.to_string(),
        });
    }
    let line = line.strip_prefix("autotool: ").unwrap_or(line);
    Some(Event::Detail(line.trim().to_string()))
}

/// The last line of `log` that says something.
fn last_line(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_lines_runtime_install_prints_are_read_back_as_its_events() {
        let step = Event::Step {
            n: 2,
            of: 3,
            what: "installing mcp".into(),
        };
        assert_eq!(parse(&super::super::plain_line(&step)), Some(step));
        assert_eq!(
            parse("  Resolved 30 packages"),
            Some(Event::Detail("Resolved 30 packages".into()))
        );
        assert_eq!(parse("  "), None);
    }

    #[test]
    fn a_followed_log_yields_each_complete_line_once_and_starts_over_when_emptied() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join(LOG_NAME);
        let mut seen: Vec<u8> = Vec::new();
        let (mut at, mut partial) = (0, String::new());
        std::fs::write(&log, "autotool: [1/2] getting uv\n  half").unwrap();
        read_new(&log, &mut at, &mut partial, &mut seen);
        std::fs::write(&log, "autotool: [1/2] getting uv\n  half a line\n").unwrap();
        read_new(&log, &mut at, &mut partial, &mut seen);
        std::fs::write(&log, "autotool: [1/2] again\n").unwrap();
        read_new(&log, &mut at, &mut partial, &mut seen);
        assert_eq!(
            String::from_utf8(seen).unwrap(),
            "autotool: [1/2] getting uv\n  half a line\nautotool: [1/2] again\n"
        );
    }
}
