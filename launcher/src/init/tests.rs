//! Unit tests of the tool's init through the recording [`crate::sys::Sys`]: the order of its
//! life (not dumpable and armed before anything, the root before the tool, hardened after the
//! fork), the status it relays, and how it fails closed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::sys::{CapSet, Op, Recorder};
use autotool_policy::LaunchPolicy;
use std::os::fd::OwnedFd;

/// The pid the recorder's first fork returns: the tool.
const TOOL: i32 = 5001;

fn plan() -> Plan {
    LaunchPolicy::new(
        "/srv/tools/weather",
        "weather.py",
        "/opt/python/bin/python3",
        vec!["/opt/python".into()],
    )
    .plan()
    .unwrap()
}

fn host() -> HostSources {
    HostSources::fake(
        &["/usr", "/opt/python", "/srv/tools/weather"],
        &["/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"],
        &[],
    )
}

/// A life line whose outer end stays open (the launcher lives) while the returned end is held.
fn life() -> (LifeLine, OwnedFd) {
    let life = LifeLine::new().unwrap();
    let outer = life.outer_end().unwrap();
    (life, outer)
}

/// The init in a fresh user namespace: every capability, as after the id switch.
fn init_sys() -> Recorder {
    let mut rec = Recorder::default();
    let all = rec.supported.clone();
    for set in [CapSet::Bounding, CapSet::Permitted, CapSet::Effective] {
        rec = rec.with_caps(set, &all);
    }
    rec
}

fn never_the_tool(_: &mut dyn Sys) -> Result<(), LaunchError> {
    panic!("the recorder's fork returns the parent's side: the tool branch never runs here")
}

fn run_init(rec: &mut Recorder, life: &mut LifeLine) -> i32 {
    let role = run(
        rec,
        &plan(),
        &host(),
        life,
        Mode::UserNamespace,
        never_the_tool,
    );
    match role {
        Role::Init(code) => code,
        Role::Tool => panic!("the recorder's fork never returns the tool's side"),
    }
}

fn position(ops: &[Op], what: &str, pred: impl Fn(&Op) -> bool) -> usize {
    ops.iter()
        .position(pred)
        .unwrap_or_else(|| panic!("no {what} in {ops:#?}"))
}

const ARM: Op = Op::Prctl(Prctl::ParentDeathSignal(libc::SIGKILL));

#[test]
fn the_init_builds_the_root_forks_the_tool_hardens_and_relays_its_status() {
    let (mut life, _outer) = life();
    let mut rec = init_sys();
    rec.waits.push_back((TOOL, 7 << 8));
    assert_eq!(run_init(&mut rec, &mut life), 7);
    let ops = &rec.ops;
    // Not dumpable and armed against the launcher's death before anything else.
    assert_eq!(ops[..2], [Op::Prctl(Prctl::NotDumpable), ARM]);
    let proc = position(ops, "the /proc mount", |op| {
        matches!(
            op,
            Op::Mount {
                fs: crate::sys::Fs::Proc,
                ..
            }
        )
    });
    let pivot = position(ops, "pivot_root", |op| matches!(op, Op::PivotRoot(_)));
    let fork = position(ops, "the fork", |op| *op == Op::Fork);
    let close = position(ops, "closing", |op| matches!(op, Op::CloseFds(_)));
    let first_drop = position(ops, "a capability drop", |op| matches!(op, Op::CapDrop(..)));
    let rearm = ops.iter().rposition(|op| *op == ARM).unwrap();
    let wait = position(ops, "the wait", |op| *op == Op::WaitAny);
    // /proc is mounted by the init itself, inside the PID namespace, before the tool exists.
    assert!(2 < proc && proc < pivot && pivot < fork, "{ops:#?}");
    assert!(fork < close && close < first_drop && first_drop < rearm && rearm < wait);
    assert_eq!(wait, ops.len() - 1);
    // It keeps stderr and the life line, nothing else (stdin and stdout are the tool's).
    let mut kept = vec![2, life.read_fd()];
    kept.sort_unstable();
    assert_eq!(ops[close], Op::CloseFds(kept));
    // And holds no capability while it waits.
    for set in [CapSet::Bounding, CapSet::Permitted, CapSet::Effective] {
        assert!(rec.caps_in(set).is_empty(), "{set:?}");
    }
}

#[test]
fn the_init_reaps_every_child_and_relays_the_tools_death_by_signal() {
    let (mut life, _outer) = life();
    let mut rec = init_sys();
    // An orphan the kernel handed to the init is reaped on the way; the tool died of SIGKILL.
    rec.waits.push_back((TOOL + 40, 0));
    rec.waits.push_back((TOOL, libc::SIGKILL));
    assert_eq!(run_init(&mut rec, &mut life), 128 + libc::SIGKILL);
    assert_eq!(rec.ops.iter().filter(|op| **op == Op::WaitAny).count(), 2);
}

#[test]
fn an_init_whose_launcher_is_gone_builds_nothing() {
    // The outer end is dropped at once: the launcher died before the init armed its signal.
    let mut life = LifeLine::new().unwrap();
    let mut rec = init_sys();
    assert_eq!(
        run_init(&mut rec, &mut life),
        i32::from(crate::LAUNCHER_FAILED)
    );
    assert_eq!(rec.ops, [Op::Prctl(Prctl::NotDumpable), ARM]);
}

#[test]
fn an_init_that_cannot_arm_its_signal_builds_nothing() {
    let (mut life, _outer) = life();
    let mut rec = init_sys().fail_when(|op| *op == ARM, libc::EINVAL);
    assert_eq!(
        run_init(&mut rec, &mut life),
        i32::from(crate::LAUNCHER_FAILED)
    );
    assert_eq!(rec.ops.last(), Some(&ARM));
    assert!(!rec.ops.contains(&Op::Fork));
}

#[test]
fn a_failed_mount_stops_the_init_before_the_tool_exists() {
    let (mut life, _outer) = life();
    let mut rec = init_sys().fail_when(
        |op| {
            matches!(
                op,
                Op::Mount {
                    fs: crate::sys::Fs::Proc,
                    ..
                }
            )
        },
        libc::EPERM,
    );
    assert_eq!(
        run_init(&mut rec, &mut life),
        i32::from(crate::LAUNCHER_FAILED)
    );
    assert!(!rec.ops.contains(&Op::Fork));
    assert!(!rec.ops.iter().any(|op| matches!(op, Op::PivotRoot(_))));
}

#[test]
fn an_init_that_cannot_harden_kills_the_tool_and_fails() {
    for failing in [Op::CloseFds(Vec::new()), Op::CapClear(CapSet::Permitted)] {
        let (mut life, _outer) = life();
        let kind = std::mem::discriminant(&failing);
        let mut rec = init_sys().fail_when(
            move |op| {
                std::mem::discriminant(op) == kind
                    && (matches!(op, Op::CloseFds(_)) || *op == Op::CapClear(CapSet::Permitted))
            },
            libc::EPERM,
        );
        assert_eq!(
            run_init(&mut rec, &mut life),
            i32::from(crate::LAUNCHER_FAILED)
        );
        assert_eq!(
            rec.ops.last(),
            Some(&Op::Kill(TOOL, libc::SIGKILL)),
            "{failing:?}"
        );
        assert!(!rec.ops.contains(&Op::WaitAny));
    }
}

#[test]
fn an_init_that_loses_its_children_fails() {
    let (mut life, _outer) = life();
    let mut rec = init_sys();
    // No wait status scripted: waitpid answers ECHILD.
    assert_eq!(
        run_init(&mut rec, &mut life),
        i32::from(crate::LAUNCHER_FAILED)
    );
    assert_eq!(rec.ops.last(), Some(&Op::WaitAny));
}
