//! Unit tests of the process plumbing: the status relayed, dying with the parent, the life line.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::sys::{Op, Recorder};

const ARM: Op = Op::Prctl(Prctl::ParentDeathSignal(libc::SIGKILL));

#[test]
fn the_relayed_status_is_the_exit_code_or_128_plus_the_signal() {
    assert_eq!(exit_code(0).unwrap(), 0);
    assert_eq!(exit_code(3 << 8).unwrap(), 3);
    assert_eq!(exit_code(125 << 8).unwrap(), 125);
    assert_eq!(exit_code(libc::SIGKILL).unwrap(), 137);
    assert_eq!(exit_code(libc::SIGSYS).unwrap(), 128 + 31);
    assert_eq!(exit_code(libc::SIGXCPU).unwrap(), 128 + 24);
    // A core-dump flag does not change the signal.
    assert_eq!(exit_code(libc::SIGSEGV | 0x80).unwrap(), 139);
    // A stopped child is not an end.
    let stopped = (libc::SIGSTOP << 8) | 0x7f;
    assert!(matches!(exit_code(stopped), Err(LaunchError::Child(s)) if s == stopped));
}

#[test]
fn dying_with_the_parent_arms_the_signal_and_remembers_the_parent() {
    let mut rec = Recorder::default();
    rec.parent_pid = 777;
    assert_eq!(die_with_parent(&mut rec).unwrap(), 777);
    assert_eq!(rec.ops, [ARM]);
    // After a credential change: armed again, and a new parent (we were reparented) refused.
    recheck_parent(&mut rec, 777).unwrap();
    rec.parent_pid = 1;
    assert!(matches!(
        recheck_parent(&mut rec, 777),
        Err(LaunchError::ParentGone)
    ));
    assert_eq!(rec.ops, [ARM, ARM, ARM]);
}

#[test]
fn the_life_line_holds_while_the_launcher_lives_and_breaks_when_it_dies() {
    let mut life = LifeLine::new().unwrap();
    let outer = life.outer_end().unwrap();
    let mut rec = Recorder::default();
    life.arm(&mut rec).unwrap();
    // Armed twice is fine (after a credential change).
    life.arm(&mut rec).unwrap();
    assert_eq!(rec.ops, [ARM, ARM]);
    drop(outer);
    assert!(matches!(life.arm(&mut rec), Err(LaunchError::ParentGone)));
    // The signal is armed before the pipe is looked at: no window where neither holds.
    assert_eq!(rec.ops, [ARM, ARM, ARM]);
}

#[test]
fn a_session_failure_is_named() {
    let mut rec = Recorder::default().fail_when(|op| *op == Op::Setsid, libc::EPERM);
    assert!(matches!(new_session(&mut rec), Err(LaunchError::Setsid(_))));
}
