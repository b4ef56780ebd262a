//! `autotool doctor`: what this machine offers the sandbox, whether a tool can be launched right
//! now, and the fix for each missing piece.

use crate::tool::launcher::{self, Probe};
use crate::tool::runtime;
use autotool_policy::LaunchPolicy;
use serde::Serialize;
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

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
            Status::Fail => {
                "\nautotool cannot confine tools on this machine until the FAIL lines are fixed.\n"
            }
            Status::Warn => "\nTools can be confined; the warnings above are worth a look.\n",
            Status::Ok => "\nTools can be confined on this machine.\n",
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

/// Launch a trivial tool through the launcher and check it answered.
fn trial_launch(launcher: &Path, python: &runtime::Python) -> Check {
    let run = || -> Result<Duration, String> {
        let dir = tempfile::Builder::new()
            .prefix("autotool-doctor-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        std::fs::write(dir.path().join("tool.py"), "print('autotool-doctor-ok')\n")
            .map_err(|e| e.to_string())?;
        let mut perms = std::fs::metadata(dir.path())
            .map_err(|e| e.to_string())?
            .permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(dir.path(), perms).map_err(|e| e.to_string())?;
        let mut policy = LaunchPolicy::new(
            dir.path(),
            "tool.py",
            &python.interpreter,
            python.runtime_dirs.clone(),
        );
        policy.env = autotool_policy::launch::tool_environment(
            &Default::default(),
            &Default::default(),
            None,
        );
        let start = Instant::now();
        let mut child =
            launcher::spawn(launcher, &policy, Vec::new()).map_err(|e| e.to_string())?;
        drop(child.stdin.take());
        let deadline = start + Duration::from_secs(20);
        let status = loop {
            if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err("the trial tool did not finish within 20 s".into());
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let elapsed = start.elapsed();
        let mut stdout = String::new();
        let mut stderr = String::new();
        if let Some(mut s) = child.stdout.take() {
            let _ = s.read_to_string(&mut stdout);
        }
        if let Some(mut s) = child.stderr.take() {
            let _ = s.read_to_string(&mut stderr);
        }
        if status.success() && stdout.trim() == "autotool-doctor-ok" {
            Ok(elapsed)
        } else {
            Err(format!("{status}; {}", stderr.trim()))
        }
    };
    match run() {
        Ok(t) => Check::new(
            "trial launch",
            Status::Ok,
            format!("a confined tool ran and answered in {} ms", t.as_millis()),
        ),
        Err(e) => Check::new("trial launch", Status::Fail, format!("failed: {e}"))
            .fix("fix the FAIL lines above; `autotool-launcher` printed the reason"),
    }
}

/// The tool runtime: present, or created the first time a tool needs it.
fn runtime_check() -> Check {
    let home = match crate::home::Home::from_env() {
        Ok(h) => h,
        Err(e) => return Check::new("runtime", Status::Fail, e.to_string()),
    };
    let dir = home.runtime_dir();
    match runtime::existing_runtime(&dir) {
        Some(Ok(p)) => Check::new(
            "runtime",
            Status::Ok,
            format!(
                "{} (Python {}; {})",
                p.interpreter.display(),
                p.version,
                runtime::RUNTIME_REQUIREMENTS.join(", ")
            ),
        ),
        Some(Err(e)) => Check::new("runtime", Status::Fail, e.to_string())
            .fix("unset AUTOTOOL_RUNTIME, or point it at a venv with the pinned packages"),
        None => Check::new(
            "runtime",
            Status::Warn,
            format!(
                "not created yet at {}; autotool creates it the first time a tool is needed \
                 (a venv with {}, from PyPI)",
                dir.display(),
                runtime::RUNTIME_REQUIREMENTS.join(", ")
            ),
        ),
    }
}

/// Whether the OS keychain answers: `keys add` stores there; without it keys come from the
/// environment or the opt-in file.
fn keychain_check(home: &crate::home::Home) -> Check {
    let store = crate::credentials::KeyStore::open(home);
    match store.probe_keychain() {
        Ok(()) => Check::new(
            "keychain",
            Status::Ok,
            "the OS keychain (Secret Service) answers",
        ),
        Err(e) => Check::new(
            "keychain",
            Status::Warn,
            "not reachable: keys can come only from serve's environment or the opt-in file",
        )
        .fix(e.to_string()),
    }
}

/// The service: optional; broken when installed but not answering.
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
            Status::Fail,
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

/// Which agent apps are here and whether each runs autotool: a found app without an autotool
/// entry is a warning (the fix is `autotool setup`); an unreadable config is broken.
fn host_checks(checks: &mut Vec<Check>) {
    use crate::host_apps::{App, Entry, HostEnv, Plan, plan};
    let (env, entry) = match (HostEnv::from_process(), Entry::current()) {
        (Ok(env), Ok(entry)) => (env, entry),
        (Err(e), _) | (_, Err(e)) => {
            checks.push(Check::new("hosts", Status::Warn, e.to_string()));
            return;
        }
    };
    let mut found = 0;
    for app in App::ALL {
        let check = match plan(app, &env, &entry, false) {
            Plan::NotFound { .. } => continue,
            Plan::Present { config, runs, same } => Check::new(
                "host",
                Status::Ok,
                format!(
                    "{}: registered in {} ({runs}{})",
                    app.title(),
                    env.show(&config),
                    if same {
                        ""
                    } else {
                        "; another autotool than this one"
                    }
                ),
            ),
            Plan::Change { config, .. } => Check::new(
                "host",
                Status::Warn,
                format!(
                    "{}: found, autotool not registered in {}",
                    app.title(),
                    env.show(&config)
                ),
            )
            .fix(format!("autotool setup --app {}", app.id())),
            Plan::Unreadable { config, why } => Check::new(
                "host",
                Status::Fail,
                format!(
                    "{}: {} cannot be used: {why}",
                    app.title(),
                    env.show(&config)
                ),
            )
            .fix(format!(
                "repair {} (autotool setup leaves it alone until then)",
                env.show(&config)
            )),
        };
        found += 1;
        checks.push(check);
    }
    if found == 0 {
        checks.push(
            Check::new(
                "hosts",
                Status::Warn,
                "no agent app found (Claude Code, Codex, Cursor, Claude Desktop, OpenClaw)",
            )
            .fix("install one, then run autotool setup"),
        );
    }
}

/// Everything `autotool doctor` reports: the sandbox checks of [`run`], then the keychain, the
/// service and the agent apps.
///
/// `config` is what `autotool config` resolves: its launcher is the one checked, and its
/// problems are a failed check of their own.
pub fn run_all(config: &Result<crate::config::Config, crate::config::Problems>) -> Report {
    let launcher = match config {
        Ok(c) => c.values.serve.launcher.clone(),
        Err(_) => None,
    };
    let mut report = run(launcher.as_deref());
    report.checks.insert(0, config_check(config));
    match crate::home::Home::from_env() {
        Ok(home) => {
            report.checks.push(keychain_check(&home));
            report.checks.push(service_check(&home));
            host_checks(&mut report.checks);
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

/// The sandbox checks: what `serve` needs to confine tools (it refuses to start on a FAIL),
/// with `launcher`, else the one [`launcher::locate`] finds.
pub fn run(launcher: Option<&Path>) -> Report {
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
    let probe = match launcher::probe(&launcher) {
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
    checks.push(runtime_check());
    match runtime::resolve(None) {
        Ok(python) => {
            checks.push(Check::new(
                "python",
                Status::Ok,
                format!(
                    "{} (Python {}{})",
                    python.interpreter.display(),
                    python.version,
                    if python.runtime_dirs.is_empty() {
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
                    }
                ),
            ));
            checks.push(trial_launch(&launcher, &python));
        }
        Err(e) => checks.push(
            Check::new("python", Status::Fail, e.to_string())
                .fix("sudo apt-get install python3 python3-venv (3.10 or newer)"),
        ),
    }
    Report { checks }
}

/// `autotool doctor [--json]`: the report on stdout; a failing exit when tools cannot be
/// confined.
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
