//! Getting uv (autotool's own pinned copy, fetched with pip the first time, or
//! `$AUTOTOOL_UV`; either must be a file only this user or root can change), and running one
//! bounded, cancellable step of a build with its output passed on as progress.

use super::*;

/// Events kept back, to be passed on or dropped once it is known which.
pub(super) struct Holding<'a>(pub(super) &'a mut Vec<Event>);

impl Progress for Holding<'_> {
    fn event(&mut self, event: Event) {
        self.0.push(event);
    }
}

pub(super) enum GetUv {
    Failed(String),
    Cancelled,
}

/// Where autotool keeps its own uv: a cache, shared by every autotool home of the user.
/// The user cache directory is used only when it is private ([`crate::home::private_dir`]);
/// else the copy goes into `parent` (the autotool home, whose place was checked).
pub(super) fn uv_home(parent: &Path) -> PathBuf {
    match crate::home::user_cache_dir().filter(|c| crate::home::private_dir(c).is_ok()) {
        Some(c) => c.join(format!("uv-{UV_VERSION}")),
        None => parent.join(format!(".uv-{UV_VERSION}")),
    }
}

/// Whether `uv --version` of `path` works (and names `want`, when given).
pub(super) fn uv_works(path: &Path, want: Option<&str>) -> Result<(), String> {
    let out = Command::new(path)
        .arg("--version")
        .output()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let said = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("`{} --version` failed", path.display()));
    }
    match want {
        Some(v) if !said.starts_with(&format!("uv {v}")) => {
            Err(format!("{} is {}, not uv {v}", path.display(), said.trim()))
        }
        _ => Ok(()),
    }
}

/// Prints where the pip wheel this Python ships for `ensurepip` is, or nothing: pip runs
/// straight from that wheel, so no environment has to be made for it.
pub(super) const FIND_PIP_WHEEL: &str = "import glob, os\n\
found = []\n\
try:\n    import ensurepip\n    d = os.path.join(os.path.dirname(ensurepip.__file__), '_bundled')\n    found += sorted(glob.glob(os.path.join(d, 'pip-*.whl')))\n\
except Exception:\n    pass\n\
found += sorted(glob.glob('/usr/share/python-wheels/pip-*.whl'))\n\
print(found[-1] if found else '')\n";

/// The pip wheel `python` ships for `ensurepip` (or Debian's), found by [`FIND_PIP_WHEEL`].
pub(super) fn pip_wheel(python: &Path) -> Option<String> {
    Command::new(python)
        .env_clear()
        .args(["-I", "-c", FIND_PIP_WHEEL])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|w| !w.is_empty())
}

/// autotool's uv: `$AUTOTOOL_UV`, else its own pinned copy, fetched with pip the first time.
pub(super) fn get_uv(
    python: &Path,
    parent: &Path,
    private: &Private,
    progress: &mut dyn Progress,
    cancel: &Cancel,
) -> Result<PathBuf, GetUv> {
    if let Some(given) = std::env::var_os("AUTOTOOL_UV").filter(|v| !v.is_empty()) {
        let given = PathBuf::from(given);
        crate::home::check_owned(&given)
            .map_err(|e| GetUv::Failed(format!("AUTOTOOL_UV: autotool will not run {e}")))?;
        uv_works(&given, None).map_err(|why| GetUv::Failed(format!("AUTOTOOL_UV: {why}")))?;
        progress.event(Event::Detail(format!(
            "uv from AUTOTOOL_UV: {}",
            given.display()
        )));
        return Ok(given);
    }
    let home = uv_home(parent);
    let bin = home.join("bin/uv");
    if bin.is_file()
        && crate::home::check_owned(&bin).is_ok()
        && uv_works(&bin, Some(UV_VERSION)).is_ok()
    {
        progress.event(Event::Detail(format!(
            "uv {UV_VERSION} at {}",
            bin.display()
        )));
        return Ok(bin);
    }
    let holder = home.parent().unwrap_or(parent).to_path_buf();
    std::fs::create_dir_all(&holder)
        .map_err(|e| GetUv::Failed(format!("cannot create {}: {e}", holder.display())))?;
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".uv-{UV_VERSION}-"))
        .tempdir_in(&holder)
        .map_err(|e| GetUv::Failed(format!("cannot write in {}: {e}", holder.display())))?;
    let source = Source::current();
    let wheel = pip_wheel(python);
    let from: Vec<std::ffi::OsString> = match &wheel {
        Some(w) => {
            progress.event(Event::Detail(format!(
                "fetching {UV_REQUIREMENT} from {} with pip from {w}",
                source.describe()
            )));
            vec![format!("{w}/pip").into()]
        }
        None => {
            progress.event(Event::Detail(format!(
                "fetching {UV_REQUIREMENT} from {} with `python -m pip`",
                source.describe()
            )));
            vec!["-m".into(), "pip".into()]
        }
    };
    let mut pip = pip_install(python, &from, private, &source);
    pip.args(["--no-deps", "--no-warn-script-location", "--target"])
        .arg(tmp.path())
        .arg(UV_REQUIREMENT);
    match run_step(pip, UV_FETCH_BOUND, progress, cancel) {
        Ok(()) => {}
        Err(StepError::Cancelled) => return Err(GetUv::Cancelled),
        Err(StepError::Failed(why)) => {
            let why = why.lines().last().unwrap_or("pip failed").to_string();
            return Err(GetUv::Failed(match wheel {
                Some(_) => format!("pip could not install {UV_REQUIREMENT}: {why}"),
                None => format!(
                    "this Python has no pip to fetch {UV_REQUIREMENT} with ({why}); on Debian or \
                     Ubuntu `sudo apt install python3-venv` brings one"
                ),
            }));
        }
    }
    uv_works(&tmp.path().join("bin/uv"), Some(UV_VERSION)).map_err(GetUv::Failed)?;
    let fetched = tmp.keep();
    if let Err(e) = std::fs::rename(&fetched, &home) {
        let _ = std::fs::remove_dir_all(&fetched);
        // Another process put one in place first: use it.
        if uv_works(&bin, Some(UV_VERSION)).is_err() {
            return Err(GetUv::Failed(format!(
                "cannot put uv in place at {}: {e}",
                home.display()
            )));
        }
    }
    Ok(bin)
}

pub(super) enum StepError {
    Failed(String),
    Cancelled,
}

/// Run one step within `bound`, passing every line it prints on as [`Event::Detail`] and
/// keeping the end of its stderr for the error; killed when `cancel` is set.
pub(super) fn run_step(
    mut cmd: Command,
    bound: Duration,
    progress: &mut dyn Progress,
    cancel: &Cancel,
) -> Result<(), StepError> {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| StepError::Failed(e.to_string()))?;
    // (from stderr, line)
    let (tx, rx) = std::sync::mpsc::channel::<(bool, String)>();
    let mut readers = Vec::new();
    for (is_err, pipe) in [
        (
            false,
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
        ),
        (
            true,
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
        ),
    ] {
        let Some(pipe) = pipe else { continue };
        let tx = tx.clone();
        readers.push(std::thread::spawn(move || {
            for line in BufReader::new(pipe).split(b'\n') {
                let Ok(line) = line else { break };
                let line = String::from_utf8_lossy(&line).trim_end().to_string();
                if tx.send((is_err, line)).is_err() {
                    break;
                }
            }
        }));
    }
    drop(tx);
    let deadline = Instant::now() + bound;
    let mut stderr_tail: std::collections::VecDeque<String> = Default::default();
    let mut tail_bytes = 0usize;
    let mut stopped: Option<StepError> = None;
    loop {
        if cancel.is_cancelled() {
            stopped = Some(StepError::Cancelled);
            break;
        }
        if Instant::now() >= deadline {
            stopped = Some(StepError::Failed(format!(
                "it took longer than {} s and was stopped",
                bound.as_secs()
            )));
            break;
        }
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok((is_err, line)) => {
                if line.trim().is_empty() {
                    continue;
                }
                if is_err {
                    tail_bytes += line.len();
                    stderr_tail.push_back(line.clone());
                    while tail_bytes > 8 << 10 {
                        match stderr_tail.pop_front() {
                            Some(l) => tail_bytes -= l.len(),
                            None => break,
                        }
                    }
                }
                progress.event(Event::Detail(line.trim().to_string()));
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    if stopped.is_some() {
        let _ = child.kill();
    }
    // Both pipes are closed: the process is gone or about to be; wait for it within what is
    // left of the bound (a child that closed its pipes but lingers is killed).
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline && !cancel.is_cancelled() => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Ok(None) => {
                let _ = child.kill();
                if stopped.is_none() {
                    stopped = Some(if cancel.is_cancelled() {
                        StepError::Cancelled
                    } else {
                        StepError::Failed(format!(
                            "it took longer than {} s and was stopped",
                            bound.as_secs()
                        ))
                    });
                }
                break child.wait().ok();
            }
            Err(_) => break None,
        }
    };
    for r in readers {
        let _ = r.join();
    }
    if let Some(stop) = stopped {
        return Err(stop);
    }
    match status {
        Some(s) if s.success() => Ok(()),
        other => {
            let tail: Vec<String> = stderr_tail.into_iter().collect();
            let tail = tail.join("\n");
            Err(StepError::Failed(format!(
                "it failed ({}){}",
                other.map_or("no exit status".to_string(), |s| s.to_string()),
                if tail.is_empty() {
                    String::new()
                } else {
                    format!(":\n{tail}")
                }
            )))
        }
    }
}
