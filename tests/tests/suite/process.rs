//! New processes and exec: a confined tool may run threads but never another program.

use super::{assert_blocked, attack, check_attack, marker, skip, start};
use autotool_tests::Mode;
use serde_json::json;

#[test]
fn subprocess_run_fails() {
    if skip() {
        return;
    }
    check_attack("run_subprocess", json!({}));
}

#[test]
fn os_system_fails() {
    if skip() {
        return;
    }
    check_attack("run_os_system", json!({}));
}

#[test]
fn posix_spawn_fails() {
    if skip() {
        return;
    }
    check_attack("run_posix_spawn", json!({}));
}

#[test]
fn fork_fails() {
    if skip() {
        return;
    }
    check_attack("run_fork", json!({}));
}

#[test]
fn exec_of_a_shell_fails() {
    if skip() {
        return;
    }
    let marker = marker("EXEC");
    let confined = attack(Mode::Confined, "exec_shell", json!({"marker": marker}));
    assert_blocked(&confined, "execv /bin/sh");
    // In the control the shell replaces the tool: the call never gets an answer, and the shell
    // leaves the marker on stderr.
    let mut control = start(Mode::Control);
    let outcome = control.call_text("exec_shell", json!({"marker": marker}));
    assert!(
        outcome.is_err(),
        "CONTROL exec: the tool answered: {outcome:?}"
    );
    let stderr = control.stderr();
    assert!(
        stderr.contains(&format!("{marker}: exec'd /bin/sh")),
        "CONTROL exec: no sign of the shell on stderr: {stderr}"
    );
}

#[test]
fn threads_work() {
    if skip() {
        return;
    }
    for mode in [Mode::Confined, Mode::Control] {
        let verdict = attack(mode, "start_threads", json!({"count": 8}));
        assert!(
            verdict.starts_with("WORKS: 8 threads joined"),
            "{mode:?}: {verdict}"
        );
    }
}

#[test]
fn raw_clone_syscalls_fail() {
    if skip() {
        return;
    }
    check_attack("raw_clone", json!({}));
}
