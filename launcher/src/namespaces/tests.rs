//! Unit tests of the namespace stage through the recording [`crate::sys::Sys`]: which way the
//! sandbox is built for whom, what the id-map helper writes, how ids are switched, and how each
//! failure is reported.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::sys::{Op, Recorder};
use autotool_policy::LaunchPolicy;
use caps::Capability::{self, CAP_NET_ADMIN, CAP_SETPCAP, CAP_SYS_ADMIN};

fn plan() -> Plan {
    LaunchPolicy::new("/srv/tools/t", "t.py", "/usr/bin/python3", vec![])
        .plan()
        .unwrap()
}

/// A raw wait status for a normal exit with `code`.
fn exited(code: i32) -> i32 {
    code << 8
}

/// The pid the recorder's first fork returns.
const HELPER: i32 = 5001;

fn raise_build() -> Vec<Op> {
    [CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_SETPCAP]
        .into_iter()
        .map(|c| Op::CapRaise(CapSet::Effective, c))
        .collect()
}

fn with_build_caps(rec: Recorder) -> Recorder {
    rec.with_caps(CapSet::Permitted, &BUILD)
}

const BUILD: [Capability; 3] = [CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_SETPCAP];

fn is_user_ns(op: &Op) -> bool {
    *op == Op::Unshare(libc::CLONE_NEWUSER)
}

#[test]
fn an_unprivileged_user_gets_a_user_namespace_then_the_others() {
    let mut rec = Recorder::default();
    rec.waits.push_back((HELPER, exited(0)));
    let entered = enter(&mut rec, &plan()).unwrap();
    assert_eq!(
        entered,
        Entered {
            mode: Mode::UserNamespace,
            was_root: false
        }
    );
    assert_eq!(
        rec.ops,
        [
            Op::Fork,
            Op::Unshare(libc::CLONE_NEWUSER),
            Op::Wait(HELPER),
            Op::Unshare(OTHER_NAMESPACES),
        ]
    );
}

#[test]
fn the_other_namespaces_are_network_mount_pid_ipc_uts_and_cgroup() {
    assert_eq!(
        OTHER_NAMESPACES,
        libc::CLONE_NEWNET
            | libc::CLONE_NEWNS
            | libc::CLONE_NEWPID
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWUTS
            | libc::CLONE_NEWCGROUP
    );
    assert_eq!(OTHER_NAMESPACES & libc::CLONE_NEWUSER, 0);
}

#[test]
fn file_capabilities_replace_the_user_namespace_for_a_user() {
    let mut rec = with_build_caps(Recorder::default());
    let entered = enter(&mut rec, &plan()).unwrap();
    assert_eq!(entered.mode, Mode::FileCapabilities);
    assert!(!entered.was_root);
    let mut expected = raise_build();
    expected.push(Op::Unshare(OTHER_NAMESPACES));
    // No helper, no user namespace: such a binary is not dumpable, no helper could map it.
    assert_eq!(rec.ops, expected);
    let mut build = BUILD.to_vec();
    build.sort_by_key(Capability::index);
    assert_eq!(rec.caps_in(CapSet::Effective), build);
}

#[test]
fn root_prefers_a_user_namespace_to_its_capabilities() {
    let mut rec = Recorder::root();
    rec.waits.push_back((HELPER, exited(0)));
    let entered = enter(&mut rec, &plan()).unwrap();
    assert_eq!(
        entered,
        Entered {
            mode: Mode::UserNamespace,
            was_root: true
        }
    );
    assert!(rec.ops.iter().any(is_user_ns));
    assert!(!rec.ops.iter().any(|op| matches!(op, Op::CapRaise(..))));
}

#[test]
fn without_user_namespaces_the_capabilities_are_the_fallback() {
    let mut rec = Recorder::root().fail_when(is_user_ns, libc::EPERM);
    rec.waits.push_back((HELPER, exited(2)));
    let entered = enter(&mut rec, &plan()).unwrap();
    assert_eq!(entered.mode, Mode::FileCapabilities);
    assert!(entered.was_root);
    let mut expected = vec![
        Op::Fork,
        Op::Unshare(libc::CLONE_NEWUSER),
        // The helper is told to give up (end of file) and reaped before going on.
        Op::Wait(HELPER),
    ];
    expected.extend(raise_build());
    expected.push(Op::Unshare(OTHER_NAMESPACES));
    assert_eq!(rec.ops, expected);
}

#[test]
fn neither_user_namespaces_nor_capabilities_is_an_error_with_the_fix() {
    let mut rec = Recorder::default().fail_when(is_user_ns, libc::EPERM);
    rec.waits.push_back((HELPER, exited(2)));
    let err = enter(&mut rec, &plan()).unwrap_err();
    let LaunchError::UserNamespace(ref source) = err else {
        panic!("expected UserNamespace, got {err:?}");
    };
    assert_eq!(source.raw_os_error(), Some(libc::EPERM));
    let hint = err.hint().unwrap();
    assert!(hint.contains("user namespaces"), "{hint}");
    assert!(hint.contains("autotool setup --launcher"), "{hint}");
    // Nothing more was made, and the helper did not outlive the attempt.
    assert_eq!(rec.ops.last(), Some(&Op::Wait(HELPER)));
    assert!(!rec.ops.contains(&Op::Unshare(OTHER_NAMESPACES)));
}

#[test]
fn a_helper_that_failed_to_write_the_maps_is_an_error() {
    for status in [exited(1), libc::SIGKILL] {
        let mut rec = Recorder::default();
        rec.waits.push_back((HELPER, status));
        match enter(&mut rec, &plan()) {
            Err(LaunchError::IdMap { what, .. }) => assert_eq!(what, "helper failed"),
            other => panic!("status {status}: expected IdMap, got {other:?}"),
        }
        assert!(!rec.ops.contains(&Op::Unshare(OTHER_NAMESPACES)));
    }
}

#[test]
fn failing_to_make_the_other_namespaces_is_an_error() {
    let mut rec =
        Recorder::default().fail_when(|op| *op == Op::Unshare(OTHER_NAMESPACES), libc::ENOSPC);
    rec.waits.push_back((HELPER, exited(0)));
    match enter(&mut rec, &plan()) {
        Err(LaunchError::Namespaces(e)) => assert_eq!(e.raw_os_error(), Some(libc::ENOSPC)),
        other => panic!("expected Namespaces, got {other:?}"),
    }
}

#[test]
fn the_tool_maps_to_the_invoking_user_or_to_nobody_for_root() {
    let mut user = Recorder::default();
    (user.euid, user.egid) = (1234, 567);
    assert_eq!(outside_ids(&mut user), (1234, 567));
    assert_eq!(outside_ids(&mut Recorder::root()), (NOBODY, NOBODY));
}

fn maps(root: bool, outer: u32) -> IdMaps {
    IdMaps {
        pid: 4242,
        root,
        uid: 1000,
        gid: 1000,
        outer_uid: outer,
        outer_gid: outer,
        identity_root: false,
    }
}

#[test]
fn a_template_started_by_root_maps_root_and_nobody_to_themselves() {
    let mut rec = Recorder::root();
    let m = IdMaps {
        identity_root: true,
        ..maps(true, NOBODY)
    };
    assert_eq!(id_map_helper(&mut rec, &mut &b"u"[..], &m), 0);
    let identity = format!("0 0 1\n{NOBODY} {NOBODY} 1\n");
    assert_eq!(
        rec.ops,
        vec![id_map("uid_map", &identity), id_map("gid_map", &identity)]
    );
}

fn id_map(file: &'static str, contents: &str) -> Op {
    Op::IdMap {
        pid: 4242,
        file,
        contents: contents.into(),
    }
}

#[test]
fn the_helper_denies_setgroups_then_maps_one_id_for_a_user() {
    let mut rec = Recorder::default();
    assert_eq!(
        id_map_helper(&mut rec, &mut &b"u"[..], &maps(false, 1234)),
        0
    );
    assert_eq!(
        rec.ops,
        [
            id_map("setgroups", "deny"),
            id_map("uid_map", "1000 1234 1\n"),
            id_map("gid_map", "1000 1234 1\n"),
        ]
    );
}

#[test]
fn the_helper_maps_roots_tool_to_nobody() {
    let mut rec = Recorder::default();
    assert_eq!(
        id_map_helper(&mut rec, &mut &b"u"[..], &maps(true, NOBODY)),
        0
    );
    assert_eq!(
        rec.ops,
        [
            id_map("uid_map", "1000 65534 1\n"),
            id_map("gid_map", "1000 65534 1\n"),
        ]
    );
}

#[test]
fn the_helper_writes_nothing_unless_told_to() {
    for word in [&b""[..], b"x"] {
        let mut rec = Recorder::default();
        assert_eq!(
            id_map_helper(&mut rec, &mut &word[..], &maps(false, 1234)),
            2
        );
        assert!(rec.ops.is_empty(), "{word:?}: {:?}", rec.ops);
    }
}

#[test]
fn the_helper_reports_a_failed_write() {
    let mut rec = Recorder::default().fail_when(
        |op| {
            matches!(
                op,
                Op::IdMap {
                    file: "uid_map",
                    ..
                }
            )
        },
        libc::EPERM,
    );
    assert_eq!(
        id_map_helper(&mut rec, &mut &b"u"[..], &maps(false, 1234)),
        1
    );
    // It stopped at the failure: no gid map after a failed uid map.
    assert_eq!(rec.ops.last(), Some(&id_map("uid_map", "1000 1234 1\n")));
}

fn entered(mode: Mode, was_root: bool) -> Entered {
    Entered { mode, was_root }
}

/// A process inside a fresh user namespace: every capability permitted, none effective yet.
fn in_user_namespace(rec: Recorder) -> Recorder {
    let all: Vec<Capability> = rec.supported.clone();
    rec.with_caps(CapSet::Permitted, &all)
}

#[test]
fn in_a_user_namespace_the_tool_user_keeps_the_capabilities_to_build_with() {
    let mut rec = in_user_namespace(Recorder::default());
    let permitted = rec.caps_in(CapSet::Permitted);
    become_tool_user(&mut rec, &plan(), entered(Mode::UserNamespace, false)).unwrap();
    assert_eq!(
        rec.ops,
        [
            Op::SetGid(1000),
            Op::Prctl(Prctl::KeepCaps),
            Op::SetUid(1000),
            Op::CapSetTo(CapSet::Effective, permitted.clone()),
        ]
    );
    assert_eq!(rec.caps_in(CapSet::Effective), permitted);
    assert_eq!((rec.uid, rec.egid), (1000, 1000));
}

#[test]
fn root_drops_its_groups_before_becoming_the_tool() {
    let mut rec = in_user_namespace(Recorder::root());
    become_tool_user(&mut rec, &plan(), entered(Mode::UserNamespace, true)).unwrap();
    assert_eq!(
        rec.ops[..4],
        [
            Op::ClearGroups,
            Op::SetGid(1000),
            Op::Prctl(Prctl::KeepCaps),
            Op::SetUid(1000),
        ]
    );
}

#[test]
fn with_file_capabilities_root_becomes_nobody_and_raises_them_again() {
    let mut rec = Recorder::root();
    become_tool_user(&mut rec, &plan(), entered(Mode::FileCapabilities, true)).unwrap();
    let mut expected = vec![
        Op::ClearGroups,
        Op::SetGid(NOBODY),
        Op::Prctl(Prctl::KeepCaps),
        Op::SetUid(NOBODY),
        Op::CapSetTo(CapSet::Effective, rec.caps_in(CapSet::Permitted)),
    ];
    expected.extend(raise_build());
    assert_eq!(rec.ops, expected);
    assert_eq!(rec.uid, NOBODY);
}

#[test]
fn with_file_capabilities_a_user_keeps_its_ids() {
    let mut rec = with_build_caps(Recorder::default());
    become_tool_user(&mut rec, &plan(), entered(Mode::FileCapabilities, false)).unwrap();
    assert!(rec.ops.is_empty(), "{:?}", rec.ops);
}

#[test]
fn a_failed_id_switch_stops_there() {
    let mut rec = in_user_namespace(Recorder::default())
        .fail_when(|op| matches!(op, Op::SetUid(_)), libc::EPERM);
    match become_tool_user(&mut rec, &plan(), entered(Mode::UserNamespace, false)) {
        Err(LaunchError::SetIds(e)) => assert_eq!(e.raw_os_error(), Some(libc::EPERM)),
        other => panic!("expected SetIds, got {other:?}"),
    }
    assert_eq!(rec.ops.last(), Some(&Op::SetUid(1000)));
    assert!(rec.caps_in(CapSet::Effective).is_empty());
}
