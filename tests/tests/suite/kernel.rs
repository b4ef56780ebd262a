//! Kernel interfaces a tool has no business with: keyrings, ptrace, namespaces, mount,
//! io_uring, `/proc` of its own processes, the environment, descriptors (what it can learn of
//! the host through `/proc` and the mount table is `host_view`).

use super::{assert_blocked, assert_escaped, attack, attack_on, builder, check_attack, skip};
use autotool_tests::Mode;
use serde_json::{Value, json};
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn keyctl_add_key_fails() {
    if skip() {
        return;
    }
    check_attack("add_key", json!({}));
}

#[test]
fn io_uring_fails() {
    if skip() {
        return;
    }
    if std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled").is_ok_and(|v| v.trim() == "2")
    {
        autotool_tests::print_skip(
            "io_uring_fails",
            "io_uring is disabled on this host, no control possible",
        );
        return;
    }
    check_attack("io_uring", json!({}));
}

#[test]
fn ptrace_fails() {
    if skip() {
        return;
    }
    // A sibling the control can attach to (the confined tool cannot even see it).
    let mut sibling = Command::new("sleep")
        .arg("60")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let args = json!({"pid": sibling.id()});
    let confined = attack(Mode::Confined, "ptrace_attack", args.clone());
    let control = attack(Mode::Control, "ptrace_attack", args);
    let _ = sibling.kill();
    let _ = sibling.wait();
    assert_blocked(&confined, "ptrace");
    assert_escaped(&control, "ptrace");
}

#[test]
fn unshare_user_namespace_fails() {
    if skip() {
        return;
    }
    check_attack_needing_userns("unshare_user", json!({}));
}

#[test]
fn mount_fails() {
    if skip() {
        return;
    }
    check_attack_needing_userns("mount_tmpfs", json!({}));
}

/// The control of these attacks needs user namespaces: on a machine without them (the launcher
/// then runs on its file capabilities) only the confined side can be checked; the control is
/// shown by the runs on machines that have them.
fn check_attack_needing_userns(function: &str, args: Value) {
    if autotool_tests::capabilities_mode() {
        let confined = attack(Mode::Confined, function, args);
        assert_blocked(&confined, function);
        autotool_tests::print_skip(
            &format!("{function} control"),
            "needs user namespaces, which are switched off here (capabilities mode)",
        );
        return;
    }
    check_attack(function, args);
}

#[test]
fn proc_status_shows_hardening() {
    if skip() {
        return;
    }
    let confined = attack(Mode::Confined, "proc_status", json!({}));
    for field in ["NoNewPrivs=1", "CapEff=0000000000000000", "Seccomp=2"] {
        assert!(
            confined.contains(field),
            "confined /proc/self/status: {confined}"
        );
    }
    assert_blocked(&confined, "/proc/self/status");
    assert_escaped(
        &attack(Mode::Control, "proc_status", json!({})),
        "/proc/self/status",
    );
}

#[test]
fn proc_shows_only_the_tools_own_processes() {
    if skip() {
        return;
    }
    let confined = attack(Mode::Confined, "list_processes", json!({}));
    assert_blocked(&confined, "list /proc");
    let seen: Value = serde_json::from_str(confined.trim_start_matches("BLOCKED: ")).unwrap();
    // The launcher's own init is PID 1 of the tool's namespace, and the tool its only child:
    // nothing else exists there to see.
    assert_eq!(seen["pids"], json!([1, 2]), "{seen}");
    assert_eq!(seen["count"], 2, "{seen}");
    assert_eq!(
        seen["own"], 2,
        "the tool is PID 2, its init's child: {seen}"
    );
    assert_eq!(seen["ppid"], 1, "{seen}");
    assert!(
        seen["init"]
            .as_str()
            .is_some_and(|init| init.contains("autotool-launcher")),
        "PID 1 is not the launcher's init: {seen}"
    );
    let control = attack(Mode::Control, "list_processes", json!({}));
    assert_escaped(&control, "list /proc");
}

#[test]
fn parent_environment_is_not_inherited() {
    if skip() {
        return;
    }
    const NAME: &str = "AUTOTOOL_TEST_PARENT_SECRET";
    let secret = super::marker("ENV");
    for mode in [Mode::Confined, Mode::Control] {
        let mut tool = builder()
            .with_parent_env(NAME, &secret)
            .start(mode)
            .unwrap();
        let verdict = attack_on(&mut tool, "find_env", json!({"name": NAME}));
        match mode {
            Mode::Confined => {
                assert_blocked(&verdict, "find the parent's variable");
                assert!(!verdict.contains(&secret));
            }
            Mode::Control => assert_escaped(&verdict, "find the parent's variable"),
        }
    }
}

#[test]
fn environment_and_identity_are_the_policys() {
    if skip() {
        return;
    }
    let mut tool = builder().start(Mode::Confined).unwrap();
    let verdict = attack_on(&mut tool, "identity", json!({}));
    let seen: Value = serde_json::from_str(verdict.trim_start_matches("WORKS: ")).unwrap();
    let expected: serde_json::Map<String, Value> = tool
        .policy()
        .env
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    assert_eq!(seen["env"], Value::Object(expected), "environment");
    assert_eq!(seen["hostname"], "autotool");
    // Under a user namespace the tool is the policy's id; with the launcher's file capabilities
    // (no user namespaces) it keeps the invoking user's ids.
    let (uid, gid) = if autotool_tests::capabilities_mode() {
        (
            rustix::process::getuid().as_raw(),
            rustix::process::getgid().as_raw(),
        )
    } else {
        (
            autotool_policy::launch::TOOL_ID,
            autotool_policy::launch::TOOL_ID,
        )
    };
    assert_eq!(seen["uid"], uid);
    assert_eq!(seen["gid"], gid);
    assert_eq!(seen["cwd"], "/tool");
    // setsid: the tool leads its own session.
    assert_eq!(seen["sid"], seen["pid"], "{seen}");
}

#[test]
fn inherited_descriptors_are_closed_unless_kept() {
    if skip() {
        return;
    }
    const LEAKED: i32 = 77;
    const KEPT: i32 = 78;
    let secret = super::marker("FD");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("inherited");
    std::fs::write(&path, &secret).unwrap();
    let open = || OwnedFd::from(std::fs::File::open(&path).unwrap());
    for mode in [Mode::Confined, Mode::Control] {
        let mut b = builder()
            .with_inherited_fd(open(), LEAKED)
            .with_inherited_fd(open(), KEPT);
        b.policy_mut().keep_fds = vec![KEPT];
        let mut tool = b.start(mode).unwrap();
        let leaked = attack_on(&mut tool, "read_fd", json!({"fd": LEAKED}));
        match mode {
            Mode::Confined => assert_blocked(&leaked, "read an inherited descriptor"),
            Mode::Control => {
                assert_escaped(&leaked, "read an inherited descriptor");
                assert!(leaked.contains(&secret), "{leaked}");
            }
        }
        // A descriptor the policy keeps does reach the tool.
        let kept = attack_on(&mut tool, "read_fd", json!({"fd": KEPT}));
        assert!(kept.contains(&secret), "{mode:?}: kept fd {KEPT}: {kept}");
    }
}

#[test]
fn proc_is_read_only() {
    if skip() {
        return;
    }
    // Harmless to the host: it only makes the (control) tool itself a likelier OOM victim.
    check_attack(
        "write_file",
        json!({"path": "/proc/self/oom_score_adj", "content": "500"}),
    );
}

#[test]
fn kernel_attack_surface_syscalls_fail() {
    if skip() {
        return;
    }
    let root = autotool_tests::host::euid() == 0;
    for name in ["bpf", "perf_event_open", "userfaultfd", "open_by_handle_at"] {
        let args = json!({"name": name});
        assert_blocked(
            &attack(Mode::Confined, "kernel_syscall", args.clone()),
            name,
        );
        // bpf and perf_event_open are usually closed to unprivileged users by sysctls, and
        // open_by_handle_at needs CAP_DAC_READ_SEARCH, so their controls only prove something as
        // root; userfaultfd (user-mode only) works for anyone.
        if root || name == "userfaultfd" {
            assert_escaped(&attack(Mode::Control, "kernel_syscall", args), name);
        }
    }
}

#[test]
fn terminal_injection_fails() {
    if skip() {
        return;
    }
    for mode in [Mode::Confined, Mode::Control] {
        let mut tool = builder().with_terminal_stderr().start(mode).unwrap();
        let verdict = attack_on(&mut tool, "terminal_injection", json!({}));
        match mode {
            Mode::Confined => {
                assert_blocked(&verdict, "TIOCSTI");
                assert!(
                    verdict.contains("TIOCSTI"),
                    "the tool saw no terminal: {verdict}"
                );
            }
            // TIOCSTI on a terminal that is not the caller's controlling one needs
            // CAP_SYS_ADMIN (and dev.tty.legacy_tiocsti=1): only root's control shows it.
            Mode::Control if autotool_tests::host::euid() == 0 => {
                if std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti")
                    .is_ok_and(|v| v.trim() == "0")
                {
                    continue;
                }
                assert_escaped(&verdict, "TIOCSTI");
            }
            Mode::Control => {}
        }
    }
}

#[test]
fn x32_syscalls_never_reach_the_kernel() {
    if skip() {
        return;
    }
    // The launcher kills a tool that uses another architecture's syscall numbers; returning
    // an error would be safe too. Only an answer from the kernel would be an escape.
    let mut tool = builder().start(Mode::Confined).unwrap();
    match tool.call_text("x32_syscall", json!({})) {
        Ok(verdict) => assert_blocked(&verdict, "x32 syscall"),
        Err(_) => {
            let status = tool.wait_exit(Duration::from_secs(10)).unwrap();
            let sigsys = 128 + 31;
            assert_eq!(
                status.and_then(|s| s.code()),
                Some(sigsys),
                "the tool died, but not of SIGSYS: {}",
                tool.stderr()
            );
        }
    }
    // Most kernels lack the x32 ABI, where the control only sees ENOSYS: then it proves
    // nothing and is not asserted.
    let control = attack(Mode::Control, "x32_syscall", json!({}));
    if !control.contains("ENOSYS") {
        assert_escaped(&control, "x32 syscall");
    }
}
