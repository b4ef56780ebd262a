//! Resource bombs: each is stopped by its limit and the host stays healthy. No controls here:
//! unconfined these would hurt the host; instead each test checks that the limit it set is what
//! stopped the attack.

use super::{attack_on, builder, skip};
use autotool_tests::{Mode, host};
use serde_json::json;
use std::time::{Duration, Instant};

/// The number in a verdict like `BLOCKED: MemoryError after 504 MiB`.
fn count_after(verdict: &str) -> u64 {
    let rest = verdict
        .split(" after ")
        .nth(1)
        .unwrap_or_else(|| panic!("no count in {verdict:?}"));
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn memory_bomb_is_contained() {
    if skip() {
        return;
    }
    const LIMIT_MIB: u64 = 512;
    let mut b = builder();
    b.policy_mut().limits.memory_bytes = LIMIT_MIB << 20;
    let mut tool = b.start(Mode::Confined).unwrap();
    let verdict = attack_on(
        &mut tool,
        "memory_bomb",
        json!({"chunk_mib": 8, "cap_mib": 4096}),
    );
    assert!(verdict.starts_with("BLOCKED: MemoryError"), "{verdict}");
    assert!(count_after(&verdict) < LIMIT_MIB, "{verdict}");
    assert!(host::can_spawn());
}

#[test]
fn thread_bomb_is_contained() {
    if skip() {
        return;
    }
    const THREADS: u64 = 32;
    let mut b = builder();
    b.policy_mut().limits.threads = THREADS;
    let mut tool = b.start(Mode::Confined).unwrap();
    let verdict = attack_on(&mut tool, "thread_bomb", json!({"cap": 1000}));
    assert!(verdict.starts_with("BLOCKED:"), "{verdict}");
    // Under a user namespace the limit counts the tool's own threads. With the launcher's file
    // capabilities it counts every task of the invoking user (the launcher adds those it finds
    // at launch), so only the bomb's cap of 1000 bounds the count from outside.
    let bound = if autotool_tests::capabilities_mode() {
        1000
    } else {
        THREADS
    };
    assert!(count_after(&verdict) < bound, "{verdict}");
    // The tool still runs threads after the bomb.
    let threads = attack_on(&mut tool, "start_threads", json!({"count": 4}));
    assert!(threads.starts_with("WORKS:"), "{threads}");
    assert!(host::can_spawn());
}

#[test]
fn descriptor_bomb_is_contained() {
    if skip() {
        return;
    }
    const FILES: u64 = 64;
    let mut b = builder();
    b.policy_mut().limits.open_files = FILES;
    let mut tool = b.start(Mode::Confined).unwrap();
    let verdict = attack_on(&mut tool, "fd_bomb", json!({}));
    assert!(verdict.starts_with("BLOCKED: EMFILE"), "{verdict}");
    assert!(count_after(&verdict) < FILES, "{verdict}");
}

#[test]
fn cpu_spin_is_killed() {
    if skip() {
        return;
    }
    let mut b = builder();
    b.policy_mut().limits.cpu_seconds = 2;
    let mut tool = b.start(Mode::Confined).unwrap();
    let started = Instant::now();
    let outcome = tool.call_text("cpu_spin", json!({"seconds": 25.0}));
    assert!(outcome.is_err(), "the spin finished: {outcome:?}");
    let status = tool.wait_exit(Duration::from_secs(10)).unwrap();
    let elapsed = started.elapsed();
    let status = status.expect("the launcher is still running after the tool hit its CPU limit");
    // The launcher reports a tool killed by signal N as 128+N: SIGXCPU at the soft limit, or
    // SIGKILL at the hard one.
    let sigxcpu = 128 + 24;
    let sigkill = 128 + 9;
    assert!(
        matches!(status.code(), Some(c) if c == sigxcpu || c == sigkill),
        "expected death by SIGXCPU or SIGKILL, got {status}: {}",
        tool.stderr()
    );
    assert!(elapsed < Duration::from_secs(15), "took {elapsed:?}");
    assert!(host::can_spawn());
}
