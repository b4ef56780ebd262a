//! Unit tests of the limit stage through the recording [`crate::sys::Sys`].

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::sys::{Op, Recorder};
use autotool_policy::{LaunchPolicy, Limits};

fn rlimits() -> Vec<Rlimit> {
    let mut policy = LaunchPolicy::new("/srv/tools/t", "t.py", "/usr/bin/python3", vec![]);
    policy.limits = Limits {
        memory_bytes: 1 << 30,
        threads: 32,
        open_files: 128,
        file_size_bytes: 16 << 20,
        cpu_seconds: 600,
        tmp_bytes: 1 << 20,
    };
    policy.plan().unwrap().rlimits
}

#[test]
fn every_limit_is_set_once_in_the_plans_order() {
    let mut rec = Recorder::default();
    apply(&mut rec, &rlimits(), 0).unwrap();
    assert_eq!(
        rec.ops,
        [
            Op::Rlimit(RlimitResource::AddressSpace, 1 << 30),
            Op::Rlimit(RlimitResource::Threads, 32),
            Op::Rlimit(RlimitResource::OpenFiles, 128),
            Op::Rlimit(RlimitResource::FileSize, 16 << 20),
            Op::Rlimit(RlimitResource::Cpu, 600),
            Op::Rlimit(RlimitResource::Core, 0),
        ]
    );
}

#[test]
fn tasks_sharing_the_tools_user_widen_only_the_thread_limit() {
    let mut rec = Recorder::default();
    // The init, and (without a user namespace) 40 tasks of the invoking user.
    apply(&mut rec, &rlimits(), 41).unwrap();
    assert!(
        rec.ops
            .contains(&Op::Rlimit(RlimitResource::Threads, 32 + 41))
    );
    assert!(
        rec.ops
            .contains(&Op::Rlimit(RlimitResource::OpenFiles, 128))
    );
    assert!(
        rec.ops
            .contains(&Op::Rlimit(RlimitResource::AddressSpace, 1 << 30))
    );

    let mut rec = Recorder::default();
    let huge = [Rlimit {
        resource: RlimitResource::Threads,
        value: u64::MAX - 1,
    }];
    apply(&mut rec, &huge, 5).unwrap();
    assert_eq!(rec.ops, [Op::Rlimit(RlimitResource::Threads, u64::MAX)]);
}

#[test]
fn a_refused_limit_is_named_and_stops_the_stage() {
    let mut rec = Recorder::default().fail_when(
        |op| matches!(op, Op::Rlimit(RlimitResource::Threads, _)),
        libc::EPERM,
    );
    match apply(&mut rec, &rlimits(), 1) {
        Err(LaunchError::Rlimit { what, source }) => {
            assert_eq!(what, "RLIMIT_NPROC (threads)");
            assert_eq!(source.raw_os_error(), Some(libc::EPERM));
        }
        other => panic!("expected Rlimit, got {other:?}"),
    }
    assert_eq!(
        rec.ops.last(),
        Some(&Op::Rlimit(RlimitResource::Threads, 33))
    );
}
