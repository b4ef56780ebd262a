//! `autotool doctor`: what this machine offers the sandbox, whether a tool can run right now,
//! and the fix for each missing piece.
//!
//! It agrees with `serve` by construction: the sandbox checks are the ones `serve` refuses to
//! start on ([`confinement`]), and the trial launch verifies a small tool through
//! [`crate::verify::verify`], the gate every created tool passes, on the runtime `serve` would
//! use (`$AUTOTOOL_RUNTIME` or `$AUTOTOOL_HOME/runtime`), with the launcher, limits and launch
//! policy `serve` would give it. Where the runtime is not built yet, the trial runs on a bare
//! environment made beside it, so its place is tried all the same.
//!
//! A FAIL means tools cannot run (exit 1); a warning (an agent app whose config cannot be
//! read, a runtime still to be built, no keychain) does not (exit 0).
//!
//! The launcher's probe is cached ([`probe_cached`]) under the identity of everything it
//! depends on, so `serve` pays for it once per launcher, boot and confinement of its own, not
//! on every start.

mod hosts;
#[cfg(feature = "own-model")]
mod model;
mod probe_cache;
mod trial;

use hosts::host_checks;
pub use probe_cache::{probe_cache_path, probe_cached};
use trial::*;

use crate::tool::launcher::{self, Probe};
use crate::tool::runtime;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    fn new(name: &'static str, status: Status, detail: impl Into<String>) -> Self {
        Check {
            name,
            status,
            detail: detail.into(),
            fix: None,
        }
    }
    fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub checks: Vec<Check>,
}

impl Report {
    /// The worst status of any check.
    pub fn worst(&self) -> Status {
        self.checks
            .iter()
            .map(|c| c.status)
            .max()
            .unwrap_or(Status::Ok)
    }

    /// Human-readable form.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for c in &self.checks {
            let mark = match c.status {
                Status::Ok => "ok  ",
                Status::Warn => "warn",
                Status::Fail => "FAIL",
            };
            out.push_str(&format!("[{mark}] {}: {}\n", c.name, c.detail));
            if let Some(fix) = &c.fix {
                out.push_str(&format!("       fix: {fix}\n"));
            }
        }
        out.push_str(match self.worst() {
            Status::Fail => "\nTools cannot run on this machine until the FAIL lines are fixed.\n",
            Status::Warn => "\nTools can run; the warnings above are worth a look.\n",
            Status::Ok => "\nTools can run on this machine.\n",
        });
        out
    }
}

fn read_sysctl(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The fix for missing unprivileged user namespaces, specific to what switched them off.
fn userns_fix() -> String {
    let mut fixes = Vec::new();
    if read_sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1")
    {
        fixes.push("sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0".to_string());
    }
    if read_sysctl("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        fixes.push("sudo sysctl -w kernel.unprivileged_userns_clone=1".to_string());
    }
    if read_sysctl("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        fixes.push("sudo sysctl -w user.max_user_namespaces=15000".to_string());
    }
    let mut s = String::from(
        "run `autotool setup --launcher` (installs the launcher with file capabilities)",
    );
    if !fixes.is_empty() {
        s.push_str(&format!(
            ", or enable user namespaces: {}",
            fixes.join(" && ")
        ));
    }
    s
}

fn kernel_checks(p: &Probe, launcher: &Path, out: &mut Vec<Check>) {
    let need = p.required_landlock_abi;
    out.push(match p.landlock_abi {
        Some(abi) if abi >= i32::from(need) => {
            Check::new("landlock", Status::Ok, format!("ABI {abi} (needs {need})"))
        }
        Some(abi) => Check::new(
            "landlock",
            Status::Fail,
            format!("ABI {abi}, the sandbox needs ABI {need} (Linux 6.12+)"),
        )
        .fix("upgrade the kernel to Linux 6.12 or newer"),
        None => Check::new(
            "landlock",
            Status::Fail,
            format!(
                "not available ({})",
                p.landlock_error.as_deref().unwrap_or("unknown")
            ),
        )
        .fix("boot with `landlock` in the `lsm=` kernel parameter (CONFIG_SECURITY_LANDLOCK=y)"),
    });
    out.push(if p.seccomp_filter {
        Check::new("seccomp", Status::Ok, "filters available")
    } else {
        Check::new("seccomp", Status::Fail, "seccomp filters unavailable")
            .fix("use a kernel built with CONFIG_SECCOMP_FILTER=y")
    });
    out.push(if p.mdwe {
        Check::new(
            "mdwe",
            Status::Ok,
            "PR_SET_MDWE available (no executable-memory gain)",
        )
    } else {
        Check::new("mdwe", Status::Fail, "PR_SET_MDWE unavailable").fix("use Linux 6.3 or newer")
    });
    let userns = &p.user_namespace;
    out.push(if userns.ok {
        Check::new(
            "user namespaces",
            Status::Ok,
            "unprivileged user namespaces work",
        )
    } else if p.file_capabilities {
        Check::new(
            "user namespaces",
            Status::Ok,
            format!(
                "unavailable ({}); {} holds file capabilities and builds the sandbox with them",
                userns.error.as_deref().unwrap_or("refused"),
                launcher.display()
            ),
        )
    } else {
        Check::new(
            "user namespaces",
            Status::Fail,
            format!(
                "unavailable ({}) and the launcher holds no file capabilities",
                userns.error.as_deref().unwrap_or("refused")
            ),
        )
        .fix(userns_fix())
    });
    let failed: Vec<String> = p
        .namespaces
        .iter()
        .filter(|(_, o)| !o.ok)
        .map(|(n, o)| format!("{n} ({})", o.error.as_deref().unwrap_or("refused")))
        .collect();
    let names: Vec<&str> = p.namespaces.keys().map(String::as_str).collect();
    out.push(if failed.is_empty() {
        Check::new("namespaces", Status::Ok, names.join(", "))
    } else {
        Check::new(
            "namespaces",
            Status::Fail,
            format!("cannot create: {}", failed.join(", ")),
        )
        .fix(userns_fix())
    });
    out.push(if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        Check::new("cgroups", Status::Ok, "cgroup v2; each tool gets its own cgroup namespace")
    } else {
        Check::new(
            "cgroups",
            Status::Warn,
            "no cgroup v2 hierarchy at /sys/fs/cgroup; limits rely on resource limits (rlimits) alone",
        )
    });
}

/// The tool runtime (present, or built when first needed), and what the trial runs on.
fn runtime_check() -> (Check, Option<TrialOn>) {
    let home = match crate::home::Home::from_env() {
        Ok(h) => h,
        Err(e) => return (Check::new("runtime", Status::Fail, e.to_string()), None),
    };
    let dir = home.runtime_dir();
    match runtime::existing_runtime(&dir) {
        Some(Ok(p)) => {
            let check = Check::new(
                "runtime",
                Status::Ok,
                format!(
                    "{} (Python {}; {})",
                    p.interpreter.display(),
                    p.version,
                    runtime::RUNTIME_REQUIREMENTS.join(", ")
                ),
            );
            (check, Some(TrialOn::Runtime(p)))
        }
        Some(Err(e)) => (
            Check::new("runtime", Status::Fail, e.to_string())
                .fix("unset AUTOTOOL_RUNTIME, or point it at a venv with the pinned packages"),
            None,
        ),
        None => {
            let check = Check::new(
                "runtime",
                Status::Warn,
                format!(
                    "not built yet at {}; serve builds it in the background when it starts \
                     (a few seconds), or build it now",
                    dir.display()
                ),
            )
            .fix("autotool runtime install");
            // The trial's environment goes where the runtime will be, so a home whose place
            // the sandbox could not mount is caught now. Doctor only looks: a home that does
            // not exist yet is not made for it, and the trial runs in a temporary directory.
            let beside = if home.root().is_dir() {
                home.root().to_path_buf()
            } else {
                std::env::temp_dir()
            };
            (check, Some(TrialOn::Bare(beside)))
        }
    }
}

/// Whether the home is a place only the user can change (`serve` refuses one that is not):
/// owned by the user, below no directory others may write without the sticky bit.
fn home_check(home: &crate::home::Home) -> Check {
    match home.check_place() {
        Ok(()) if !home.root().exists() => Check::new(
            "home",
            Status::Ok,
            format!(
                "{} does not exist yet (doctor only looks); `autotool setup`, `serve` or \
                 `runtime install` creates it, 0700, in a place only you (and root) can change",
                home.root().display()
            ),
        ),
        Ok(()) => Check::new(
            "home",
            Status::Ok,
            format!(
                "{}: only you (and root) can change it or the directories above it",
                home.root().display()
            ),
        ),
        Err(e) => Check::new("home", Status::Fail, e.to_string()).fix(
            "set AUTOTOOL_HOME to a directory of your own below directories only you or root can write (the default ~/.autotool)",
        ),
    }
}

/// Whether the OS keychain takes a key: `keys add` stores there; without it keys come from the
/// environment or the opt-in file. A key is stored, read back and removed (a Secret Service
/// whose default collection is locked answers, but refuses to store).
fn keychain_check(home: &crate::home::Home) -> Check {
    let store = crate::credentials::KeyStore::open(home);
    keychain_verdict(store.probe_keychain_store())
}

fn keychain_verdict(probed: Result<(), crate::credentials::CredError>) -> Check {
    match probed {
        Ok(()) => Check::new(
            "keychain",
            Status::Ok,
            "the OS keychain (Secret Service) stores keys (a test entry was stored and removed)",
        ),
        Err(e @ crate::credentials::CredError::KeychainLocked { .. }) => Check::new(
            "keychain",
            Status::Warn,
            "it answers but refuses to store a key (locked): `autotool keys add` would fail; keys \
             can come only from serve's environment or the opt-in file",
        )
        .fix(e.to_string()),
        Err(e) => Check::new(
            "keychain",
            Status::Warn,
            "not usable: keys can come only from serve's environment or the opt-in file",
        )
        .fix(e.to_string()),
    }
}

/// The service: optional; a warning when installed but not answering (hosts that reach it
/// through `autotool connect` get no tools; hosts running `serve` themselves are unaffected).
fn service_check(home: &crate::home::Home) -> Check {
    match crate::cmd::service::status(home) {
        Err(e) => Check::new("service", Status::Warn, e.to_string()),
        Ok(s) if s.answering => Check::new(
            "service",
            Status::Ok,
            format!(
                "answering on {} (systemd: {})",
                s.socket.display(),
                s.systemd
            ),
        ),
        Ok(s) if s.installed => Check::new(
            "service",
            Status::Warn,
            format!(
                "installed ({}) but not answering on {} (systemd: {})",
                s.unit.display(),
                s.socket.display(),
                s.systemd
            ),
        )
        .fix("systemctl --user restart autotool.service; journalctl --user -u autotool.service"),
        Ok(_) => Check::new(
            "service",
            Status::Ok,
            "not installed (optional: `autotool service install` runs one supervisor for every host)",
        ),
    }
}

/// Everything `autotool doctor` reports: the checks of [`run`], then the keychain, the service
/// and the agent apps.
///
/// `config` is what `autotool config` resolves: its launcher and limits are the ones checked
/// and tried, and its problems are a failed check of their own.
pub fn run_all(config: &Result<crate::config::Config, crate::config::Problems>) -> Report {
    let settings = match config {
        Ok(c) => c.settings(),
        Err(_) => crate::library::Settings::default(),
    };
    let mut report = run(&settings);
    report.checks.insert(0, config_check(config));
    match crate::home::Home::from_env() {
        Ok(home) => {
            report.checks.push(home_check(&home));
            report.checks.push(keychain_check(&home));
            report.checks.push(service_check(&home));
            #[cfg(feature = "own-model")]
            report.checks.push(model::model_check(&home));
            host_checks(&home, &mut report.checks);
        }
        Err(e) => report
            .checks
            .push(Check::new("home", Status::Fail, e.to_string())),
    }
    report
}

/// Whether the settings resolve (`serve` refuses to start when they do not).
fn config_check(config: &Result<crate::config::Config, crate::config::Problems>) -> Check {
    match config {
        Ok(c) if c.file_exists => Check::new(
            "config",
            Status::Ok,
            format!("settings read from {}", c.file.display()),
        ),
        Ok(c) => Check::new(
            "config",
            Status::Ok,
            format!("no {} (defaults and environment)", c.file.display()),
        ),
        Err(problems) => Check::new("config", Status::Fail, problems.to_string())
            .fix("correct each setting named; `autotool config` checks them again"),
    }
}

/// The sandbox checks `serve` refuses to start on in strict mode: the launcher (`launcher`,
/// else the one [`launcher::locate`] finds) and what its probe says this machine offers. With
/// `cache`, the probe comes from there when nothing it depends on has changed
/// ([`probe_cached`]).
pub fn confinement(launcher: Option<&Path>, cache: Option<&Path>) -> Report {
    let mut checks = Vec::new();
    let found = match launcher {
        Some(p) => Ok(p.to_path_buf()),
        None => launcher::locate(),
    };
    let launcher = match found {
        Ok(p) => p,
        Err(e) => {
            checks.push(
                Check::new("launcher", Status::Fail, e.to_string())
                    .fix("cargo build --release -p autotool-launcher"),
            );
            return Report { checks };
        }
    };
    let probe = match cache {
        Some(cache) => probe_cached(&launcher, cache),
        None => launcher::probe(&launcher),
    };
    let probe = match probe {
        Ok(p) => p,
        Err(e) => {
            checks.push(Check::new("launcher", Status::Fail, e.to_string()));
            return Report { checks };
        }
    };
    let mut launcher_check = Check::new(
        "launcher",
        Status::Ok,
        format!(
            "{} (version {}{})",
            launcher.display(),
            probe.launcher_version,
            if probe.file_capabilities {
                ", file capabilities"
            } else {
                ""
            }
        ),
    );
    if probe.launcher_version != env!("CARGO_PKG_VERSION") {
        launcher_check.status = Status::Warn;
        launcher_check.detail.push_str(&format!(
            "; autotool is version {}",
            env!("CARGO_PKG_VERSION")
        ));
        launcher_check = launcher_check.fix("reinstall it: autotool setup --launcher");
    }
    checks.push(launcher_check);
    kernel_checks(&probe, &launcher, &mut checks);
    checks.push(template_check(&probe));
    Report { checks }
}

/// Whether `serve` can fork tools from a template (`fork_tools`): it needs user namespaces and
/// the native library the launcher carries, handed to the template in a sealed memory file.
fn template_check(probe: &Probe) -> Check {
    const NAME: &str = "fast starts";
    const SLOW: &str =
        "tools start through the launcher (a first call takes about 0.9 s instead of 0.06 s)";
    if !probe.user_namespace.ok {
        return Check::new(
            NAME,
            Status::Ok,
            "tools start through the launcher: a tool template needs user namespaces",
        );
    }
    match &probe.native {
        Some(native) if native.ok => Check::new(
            NAME,
            Status::Ok,
            "tools are forked from a template (with the native library the launcher carries)",
        ),
        Some(native) => Check::new(
            NAME,
            Status::Warn,
            format!(
                "{SLOW}: the launcher cannot hand its template its native library: {}",
                native.error.as_deref().unwrap_or("no reason given")
            ),
        )
        .fix("rebuild the launcher (`cargo build --release -p autotool-launcher`); inside a container, allow memfd_create to it"),
        None => Check::new(
            NAME,
            Status::Warn,
            format!("{SLOW}: this launcher is older than autotool and does not say whether it carries its native library"),
        )
        .fix("rebuild the launcher (`cargo build --release -p autotool-launcher`), and reinstall it with `autotool setup --launcher` if it was installed"),
    }
}

/// The Python a runtime is built on: found, recent, and mountable in the sandbox.
fn python_check() -> Check {
    match runtime::resolve(None) {
        Ok(python) => {
            let mounted = if python.runtime_dirs.is_empty() {
                String::new()
            } else {
                format!(
                    ", mounted: {}",
                    python
                        .runtime_dirs
                        .iter()
                        .map(|d| d.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            let detail = format!(
                "{} (Python {}{mounted})",
                python.interpreter.display(),
                python.version
            );
            match python.unmountable() {
                None => Check::new("python", Status::Ok, detail),
                Some((dir, reserved)) => Check::new(
                    "python",
                    Status::Fail,
                    format!(
                        "{detail}: {} lies below {reserved}, which the sandbox builds itself, so \
                         tools cannot run on this Python",
                        dir.display()
                    ),
                )
                .fix("set AUTOTOOL_PYTHON to a Python elsewhere (for example /usr/bin/python3), then `autotool runtime rebuild`"),
            }
        }
        Err(e) => Check::new("python", Status::Fail, e.to_string())
            .fix("sudo apt-get install python3 python3-venv (3.10 or newer)"),
    }
}

/// The checks that say whether a tool can run here as `serve` (with `settings`) would run it:
/// [`confinement`], the runtime, the Python it is built on, and a trial tool verified on it.
pub fn run(settings: &crate::library::Settings) -> Report {
    let mut report = confinement(settings.launcher.as_deref(), None);
    if report.worst() == Status::Fail {
        return report;
    }
    let (runtime, trial_on) = runtime_check();
    report.checks.push(runtime);
    let python = python_check();
    let python_ok = python.status != Status::Fail;
    report.checks.push(python);
    match trial_on {
        Some(on @ TrialOn::Runtime(_)) => report.checks.push(trial_launch(on, settings)),
        Some(on @ TrialOn::Bare(_)) if python_ok => report.checks.push(trial_launch(on, settings)),
        _ => {}
    }
    report
}

/// `autotool doctor [--json]`: the report on stdout; exit 1 when tools cannot run (a FAIL
/// line), 0 otherwise (warnings or not).
pub fn main(json: bool, out: &mut dyn std::io::Write) -> std::process::ExitCode {
    let config = crate::config::Inputs::from_process(Default::default())
        .and_then(|inputs| crate::config::resolve(&inputs));
    let report = run_all(&config);
    let text = if json {
        serde_json::to_string_pretty(&report).unwrap_or_default() + "\n"
    } else {
        report.render()
    };
    let _ = out.write_all(text.as_bytes());
    if report.worst() == Status::Fail {
        std::process::ExitCode::FAILURE
    } else {
        std::process::ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::{Keychain, MemoryKeychain};

    #[test]
    fn a_keychain_that_answers_but_will_not_store_is_a_warning_naming_the_lock() {
        let ok = keychain_verdict(MemoryKeychain::new().probe_store().map_err(Into::into));
        assert_eq!(ok.status, Status::Ok, "{}", ok.detail);
        let locked = keychain_verdict(MemoryKeychain::locked().probe_store().map_err(Into::into));
        assert_eq!(locked.status, Status::Warn);
        assert!(
            locked.detail.contains("refuses to store"),
            "{}",
            locked.detail
        );
        assert!(
            locked.fix.as_deref().is_some_and(|f| f.contains("unlock")),
            "{:?}",
            locked.fix
        );
    }
}
