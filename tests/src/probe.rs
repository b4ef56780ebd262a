//! Whether this machine can confine a tool at all, and the `SKIP` gate built on it.
//!
//! The probe runs a trivial `python3 -c` through the launcher once per test binary. When the
//! launcher refuses to start (exit 125: the kernel lacks a feature, user namespaces are off…)
//! the privileged tests print `SKIP <test>: <why>` and return; in CI (`CI=true`), or with
//! `AUTOTOOL_REQUIRE_CONFINEMENT=1`, that skip is a failure instead. A missing launcher or
//! Python runtime, or a probe that fails any other way, is always a failure: it says nothing
//! about the machine.

use crate::tool::{Mode, ToolBuilder};
use crate::{ATTACK_TOOL, TIMEOUT};
use std::sync::OnceLock;

/// The launcher's exit code for "could not set up the sandbox".
pub const SETUP_FAILED: i32 = 125;

const PROBE_OUTPUT: &str = "autotool-probe-ok";

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Probe {
    Available,
    /// The launcher refused (exit 125) with this message.
    Unavailable(String),
    /// The test setup itself is broken.
    Broken(String),
}

fn probe() -> &'static Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(run_probe)
}

fn run_probe() -> Probe {
    let mut builder = match ToolBuilder::new(ATTACK_TOOL) {
        Ok(b) => b,
        Err(e) => return Probe::Broken(format!("{e:#}")),
    };
    builder.policy_mut().interpreter_args = [
        "-I",
        "-B",
        "-c",
        &format!("import sys; sys.stdout.write('{PROBE_OUTPUT}\\n')"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut tool = match builder.spawn(Mode::Confined) {
        Ok(t) => t,
        Err(e) => return Probe::Broken(format!("{e:#}")),
    };
    tool.close_stdin();
    let status = match tool.wait_exit(TIMEOUT) {
        Ok(Some(status)) => status,
        Ok(None) => {
            return Probe::Broken(format!(
                "the launcher probe did not finish within {TIMEOUT:?}"
            ));
        }
        Err(e) => return Probe::Broken(format!("{e:#}")),
    };
    let stdout = tool.drain_stdout(std::time::Duration::from_secs(2));
    let stderr = tool.stderr();
    if status.code() == Some(SETUP_FAILED) {
        return Probe::Unavailable(stderr.trim().to_string());
    }
    if status.success() && stdout.iter().any(|l| l == PROBE_OUTPUT) {
        return Probe::Available;
    }
    Probe::Broken(format!(
        "the launcher probe (`python3 -c` through autotool-launcher) failed: {status}, \
         stdout {stdout:?}, stderr:\n{stderr}"
    ))
}

/// `Ok` when tools can be confined here, else why not.
pub fn confinement_available() -> Result<(), String> {
    match probe() {
        Probe::Available => Ok(()),
        Probe::Unavailable(why) | Probe::Broken(why) => Err(why.clone()),
    }
}

/// Print `SKIP <test>: <why>` on the real stderr, past the test harness's output capture, so
/// a skip is visible in every run.
pub fn print_skip(test: &str, why: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "SKIP {test}: {why}");
}

/// Whether a machine that cannot confine is a failure rather than a skip:
/// `AUTOTOOL_REQUIRE_CONFINEMENT` when set (anything but empty or `0` means yes), else whether
/// `CI` is `true` or `1`.
pub fn confinement_required() -> bool {
    let yes = |v: &str| !v.is_empty() && v != "0" && v != "false";
    match std::env::var("AUTOTOOL_REQUIRE_CONFINEMENT") {
        Ok(v) => yes(&v),
        Err(_) => std::env::var("CI").is_ok_and(|v| v == "true" || v == "1"),
    }
}

/// `true` (after printing `SKIP <test>: <why>` to stderr) when the test must be skipped
/// because this machine cannot confine. Panics when the test setup is broken, or when
/// [`confinement_required`] and confinement is unavailable.
pub fn skip_unless_confined(test: &str) -> bool {
    match probe() {
        Probe::Available => false,
        Probe::Unavailable(why) => {
            if confinement_required() {
                panic!(
                    "{test}: confinement is required here (AUTOTOOL_REQUIRE_CONFINEMENT, or CI) \
                     but the launcher cannot confine: {why}"
                );
            }
            print_skip(test, why);
            true
        }
        Probe::Broken(why) => panic!("{test}: {why}"),
    }
}

/// Whether the launcher under test builds sandboxes with its file capabilities because user
/// namespaces are unavailable (the machines `autotool setup --launcher` is for). Asked of the
/// launcher itself (`--probe`). There the tool keeps the invoking user's id, and the thread
/// limit counts every task of that user.
pub fn capabilities_mode() -> bool {
    static MODE: OnceLock<bool> = OnceLock::new();
    *MODE.get_or_init(|| {
        let Ok(launcher) = crate::locate::launcher() else {
            return false;
        };
        let Ok(out) = std::process::Command::new(launcher).arg("--probe").output() else {
            return false;
        };
        let Ok(report) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else {
            return false;
        };
        report["file_capabilities"] == true && report["user_namespace"]["ok"] == false
    })
}
