//! The launcher's own behaviour around the tool: refusing to start rather than downgrading,
//! refusing bad policies, and never leaving a tool behind its parent.

use super::{builder, skip};
use autotool_tests::{Mode, host, probe::SETUP_FAILED};
use std::time::{Duration, Instant};

/// What the attack tool prints to stderr once it runs.
const STARTED: &str = "attack_tool: started";

#[test]
fn missing_landlock_abi_refuses_to_start() {
    if skip() {
        return;
    }
    let mut b = builder();
    b.policy_mut().min_landlock_abi = 99;
    let mut tool = b.spawn(Mode::Confined).unwrap();
    let status = tool
        .wait_exit(Duration::from_secs(10))
        .unwrap()
        .expect("the launcher did not exit");
    let stderr = tool.stderr();
    assert_eq!(status.code(), Some(SETUP_FAILED), "{status}: {stderr}");
    assert!(stderr.starts_with("autotool-launcher:"), "{stderr}");
    assert!(
        stderr.contains("Landlock"),
        "does not name Landlock: {stderr}"
    );
    assert!(
        stderr.contains("99"),
        "does not name the ABI asked for: {stderr}"
    );
    assert!(!stderr.contains(STARTED), "the tool ran: {stderr}");
    assert!(tool.drain_stdout(Duration::from_millis(200)).is_empty());
}

#[test]
fn invalid_policy_is_refused() {
    if skip() {
        return;
    }
    for bad in [
        &b"{not json"[..],
        br#"{"tool_dir": "relative", "tool_file": "x.py", "interpreter": "/usr/bin/python3"}"#,
    ] {
        let mut tool = builder()
            .with_raw_policy(bad)
            .spawn(Mode::Confined)
            .unwrap();
        let status = tool
            .wait_exit(Duration::from_secs(10))
            .unwrap()
            .expect("the launcher did not exit");
        let stderr = tool.stderr();
        assert_eq!(status.code(), Some(SETUP_FAILED), "{status}: {stderr}");
        assert!(stderr.starts_with("autotool-launcher:"), "{stderr}");
        assert!(!stderr.contains(STARTED), "the tool ran: {stderr}");
    }
}

#[test]
fn tool_exits_when_its_client_goes_away() {
    if skip() {
        return;
    }
    let mut tool = builder().start(Mode::Confined).unwrap();
    assert!(tool.stderr().contains(STARTED));
    tool.close_stdin();
    let status = tool
        .wait_exit(Duration::from_secs(10))
        .unwrap()
        .expect("the launcher is still running after stdin closed");
    assert!(status.success(), "{status}: {}", tool.stderr());
}

#[test]
fn killing_the_parent_kills_the_tool() {
    if skip() {
        return;
    }
    for mode in [Mode::Confined, Mode::Control] {
        // `sh` stays the parent (the `; :` keeps it from exec'ing its last command).
        let tool = builder()
            .with_wrapper(&["sh", "-c", "\"$@\"; :", "sh"])
            .start(mode)
            .unwrap();
        let parent = tool.pid();
        let family = host::descendants(parent);
        let python: Vec<u32> = family
            .iter()
            .copied()
            .filter(|&p| host::cmdline(p).contains(autotool_tests::ATTACK_TOOL))
            .collect();
        assert!(
            !python.is_empty(),
            "no tool process under {parent}: {family:?}"
        );
        let pid = rustix::process::Pid::from_raw(i32::try_from(parent).unwrap()).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while family.iter().any(|&p| host::is_alive(p)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let survivors: Vec<u32> = family
            .iter()
            .copied()
            .filter(|&p| host::is_alive(p))
            .collect();
        match mode {
            Mode::Confined => assert!(
                survivors.is_empty(),
                "still alive 5 s after their parent died: {:?}",
                survivors
                    .iter()
                    .map(|&p| (p, host::cmdline(p)))
                    .collect::<Vec<_>>()
            ),
            // Unconfined, the orphan lives on (dropping `tool` kills its process group).
            Mode::Control => assert!(
                python.iter().all(|&p| host::is_alive(p)),
                "the control tool died with its parent: the test proves nothing"
            ),
        }
    }
}
