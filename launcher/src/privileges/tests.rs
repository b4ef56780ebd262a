//! Unit tests of the privilege stage through the recording [`crate::sys::Sys`]: what is asked
//! of the kernel, in which order, and that nothing is left.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::sys::{Op, Recorder};
use caps::Capability::{CAP_CHOWN, CAP_NET_ADMIN, CAP_SETPCAP, CAP_SYS_ADMIN};

/// A kernel that knows four capabilities, and a process holding all four.
fn small_root() -> Recorder {
    let mut rec = Recorder::root();
    let four = [CAP_CHOWN, CAP_NET_ADMIN, CAP_SYS_ADMIN, CAP_SETPCAP];
    rec.supported = four.to_vec();
    rec.caps.clear();
    for set in [
        CapSet::Bounding,
        CapSet::Permitted,
        CapSet::Effective,
        CapSet::Inheritable,
        CapSet::Ambient,
    ] {
        rec = rec.with_caps(set, &four);
    }
    rec
}

#[test]
fn every_set_is_emptied_the_bounding_set_first() {
    for mode in [Mode::UserNamespace, Mode::FileCapabilities] {
        let mut rec = small_root();
        drop_capabilities(&mut rec, mode).unwrap();
        assert_eq!(
            rec.ops,
            [
                // While CAP_SETPCAP is still effective.
                Op::CapDrop(CapSet::Bounding, CAP_CHOWN),
                Op::CapDrop(CapSet::Bounding, CAP_NET_ADMIN),
                Op::CapDrop(CapSet::Bounding, CAP_SYS_ADMIN),
                Op::CapDrop(CapSet::Bounding, CAP_SETPCAP),
                Op::CapClear(CapSet::Ambient),
                Op::CapClear(CapSet::Inheritable),
                Op::CapClear(CapSet::Effective),
                Op::CapClear(CapSet::Permitted),
            ]
        );
        for set in [
            CapSet::Bounding,
            CapSet::Ambient,
            CapSet::Inheritable,
            CapSet::Effective,
            CapSet::Permitted,
        ] {
            assert!(rec.caps_in(set).is_empty(), "{mode:?}: {set:?} left");
        }
    }
}

#[test]
fn a_failed_drop_names_what_failed_and_stops() {
    let mut rec = small_root().fail_when(
        |op| *op == Op::CapDrop(CapSet::Bounding, CAP_SYS_ADMIN),
        libc::EPERM,
    );
    let err = drop_capabilities(&mut rec, Mode::UserNamespace).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("CAP_SYS_ADMIN"), "{text}");
    assert!(text.contains("bounding"), "{text}");
    assert_eq!(
        rec.ops.last(),
        Some(&Op::CapDrop(CapSet::Bounding, CAP_SYS_ADMIN))
    );
    // Still permitted: nothing was cleared after the failure.
    assert!(!rec.caps_in(CapSet::Permitted).is_empty());
}

#[test]
fn a_failed_clear_is_an_error() {
    let mut rec = small_root().fail_when(|op| *op == Op::CapClear(CapSet::Permitted), libc::EPERM);
    let err = drop_capabilities(&mut rec, Mode::FileCapabilities).unwrap_err();
    assert!(
        matches!(err, LaunchError::DropCaps(ref m) if m.contains("Permitted")),
        "{err}"
    );
}

#[test]
fn no_new_privs_and_mdwe_are_single_prctls_with_their_own_errors() {
    let mut rec = Recorder::default();
    set_no_new_privs(&mut rec).unwrap();
    refuse_exec_gain(&mut rec).unwrap();
    assert_eq!(
        rec.ops,
        [
            Op::Prctl(Prctl::NoNewPrivs),
            Op::Prctl(Prctl::RefuseExecGain)
        ]
    );

    let mut rec = Recorder::default().fail_when(|_| true, libc::EINVAL);
    assert!(matches!(
        set_no_new_privs(&mut rec),
        Err(LaunchError::NoNewPrivs(_))
    ));
    let err = refuse_exec_gain(&mut rec).unwrap_err();
    assert!(matches!(err, LaunchError::Mdwe(_)));
    assert!(err.hint().unwrap().contains("6.3"), "{:?}", err.hint());
}

#[test]
fn build_capabilities_need_all_three_permitted() {
    assert!(!has_build_capabilities(&mut Recorder::default()));
    let two = Recorder::default().with_caps(CapSet::Permitted, &[CAP_SYS_ADMIN, CAP_NET_ADMIN]);
    assert!(!has_build_capabilities(&mut { two }));
    let three = Recorder::default().with_caps(CapSet::Permitted, &BUILD_CAPABILITIES);
    assert!(has_build_capabilities(&mut { three }));
    // Effective alone (not permitted) is not holding them.
    let effective = Recorder::default().with_caps(CapSet::Effective, &BUILD_CAPABILITIES);
    assert!(!has_build_capabilities(&mut { effective }));
}

#[test]
fn raising_needs_them_permitted() {
    let mut rec = Recorder::default().with_caps(CapSet::Permitted, &BUILD_CAPABILITIES);
    raise_build_capabilities(&mut rec).unwrap();
    let mut effective = BUILD_CAPABILITIES.to_vec();
    effective.sort_by_key(Capability::index);
    assert_eq!(rec.caps_in(CapSet::Effective), effective);

    let mut rec = Recorder::default().with_caps(CapSet::Permitted, &[CAP_SYS_ADMIN]);
    let err = raise_build_capabilities(&mut rec).unwrap_err();
    assert!(err.to_string().contains("CAP_NET_ADMIN"), "{err}");
}
