//! A tool called concurrently runs in more than one process: two slow calls at once run side by
//! side in two processes; with `tool_processes = 1` (the control) both run in the one process.
//! Every process of the pool is stopped when idle, as a tool's one process is.
//!
//! Nothing here is timed: each call reports which process ran it (an id drawn when the process
//! started) and the wall-clock marks of its start and end, and the tests compare those.

use super::{finish, start, strict};
use autotool_tests::serve::{ServeHome, Server};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const NAPPER: &str = "napper";
/// Long enough for a second confined process to start well before the first call ends.
const NAP_SECONDS: f64 = 8.0;

/// One call's report.
#[derive(Debug)]
struct Nap {
    instance: String,
    start: f64,
    end: f64,
}

fn create_napper(server: &mut Server) {
    let code = autotool_tests::serve::fixture("napper.py").unwrap();
    let created = server
        .call_result(
            "create_tool",
            json!({
                "name": NAPPER,
                "code": code,
                "description": "sleeps, then says which process slept and when",
                "smoke_test": {"function": "nap", "arguments": {"seconds": 0}},
                "verify": "quick",
            }),
        )
        .unwrap();
    assert!(
        !created.is_error,
        "creating the napper failed: {}{}",
        created.text,
        server.context()
    );
}

/// A call's report, from its text.
fn report(text: &str) -> Nap {
    let report: Value =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("not a report ({e}): {text}"));
    Nap {
        instance: report["instance"].as_str().unwrap().to_string(),
        start: report["start"].as_f64().unwrap(),
        end: report["end"].as_f64().unwrap(),
    }
}

/// A `nap(0)` call on its own.
fn nap_alone(server: &mut Server) -> Nap {
    report(
        &server
            .call_text("napper__nap", json!({"seconds": 0}))
            .unwrap(),
    )
}

/// Two `nap` calls sent at once, and their reports.
fn two_naps(server: &mut Server) -> (Nap, Nap) {
    let ids: Vec<u64> = (0..2)
        .map(|_| {
            server
                .start_request(
                    "tools/call",
                    json!({"name": "napper__nap", "arguments": {"seconds": NAP_SECONDS}}),
                )
                .unwrap()
        })
        .collect();
    let mut naps = ids.into_iter().map(|id| {
        let answer = server.wait_answer(id, Duration::from_secs(90)).unwrap();
        assert_eq!(
            answer.pointer("/result/isError"),
            Some(&json!(false)),
            "{answer}"
        );
        let text = answer
            .pointer("/result/content/0/text")
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no text in {answer}"));
        report(text)
    });
    let a = naps.next().unwrap();
    let b = naps.next().unwrap();
    (a, b)
}

/// Whether the machine has the cores for two processes of one tool (the pool's bound is at
/// most the number of cores); prints why not.
fn two_cores() -> bool {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    if cores < 2 {
        eprintln!("SKIP: one core here; a tool's pool is bounded by the cores");
    }
    cores >= 2
}

#[test]
fn two_concurrent_calls_run_side_by_side_in_two_processes() {
    let Some(serve) = strict() else { return };
    if !two_cores() {
        return;
    }
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve.env("AUTOTOOL_TOOL_PROCESSES", "2"), &home);
    create_napper(&mut server);
    let first = nap_alone(&mut server);
    let (a, b) = two_naps(&mut server);
    assert_ne!(
        a.instance, b.instance,
        "both calls ran in one process: {a:?} {b:?}"
    );
    // Side by side: each began before the other ended.
    assert!(
        a.start < b.end && b.start < a.end,
        "the calls did not overlap: {a:?} {b:?}"
    );
    // One of them ran in the process verification started; once the burst is over, a call
    // that comes alone goes back to it, the oldest.
    assert!(
        [&a.instance, &b.instance].contains(&&first.instance),
        "neither call ran in the first process {first:?}: {a:?} {b:?}"
    );
    assert_eq!(nap_alone(&mut server).instance, first.instance);
    let stderr = finish(server);
    assert!(
        stderr.contains("processes=2"),
        "serve did not log a second process: {stderr}"
    );
}

#[test]
fn with_one_process_per_tool_concurrent_calls_share_it() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve.env("AUTOTOOL_TOOL_PROCESSES", "1"), &home);
    create_napper(&mut server);
    let (a, b) = two_naps(&mut server);
    assert_eq!(
        a.instance, b.instance,
        "with tool_processes = 1 a second process ran: {a:?} {b:?}"
    );
    let stderr = finish(server);
    assert!(
        !stderr.contains("processes=2"),
        "serve logged a second process: {stderr}"
    );
}

#[test]
fn every_process_of_a_pool_is_stopped_when_idle() {
    let Some(serve) = strict() else { return };
    if !two_cores() {
        return;
    }
    let home = ServeHome::new().unwrap();
    let mut server = start(
        &serve.env("AUTOTOOL_TOOL_PROCESSES", "2").idle_timeout(1),
        &home,
    );
    create_napper(&mut server);
    let (a, b) = two_naps(&mut server);
    assert_ne!(a.instance, b.instance, "one process ran both: {a:?} {b:?}");
    // The reaper looks every 5 s; both are idle after 1 s and each is stopped on its own.
    let deadline = Instant::now() + Duration::from_secs(30);
    while server
        .stderr()
        .matches("stopping idle tool process")
        .count()
        < 2
    {
        assert!(
            Instant::now() < deadline,
            "the pool's processes were not both stopped when idle{}",
            server.context()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let left: Vec<u32> = server
        .tool_processes()
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert!(
        super::still_alive(&left, Duration::from_secs(10)).is_empty(),
        "tool processes outlived the idle stop: {left:?}"
    );
    // The next call starts one again.
    let c = nap_alone(&mut server);
    assert!(
        c.instance != a.instance && c.instance != b.instance,
        "{c:?}"
    );
    finish(server);
}
