//! A mounted tool misbehaving mid-call: exiting, hanging past the call timeout, writing garbage
//! onto the JSON-RPC channel, flooding stderr, returning too much. Each is an error result (or
//! a truncated one) for that call only; the next call works, in a restarted process where the
//! old one had to go, and the server stays responsive throughout.

use super::{HEALTHY, assert_serves, create_healthy, finish, instance, listed, start, strict};
use autotool_tests::serve::{Serve, ServeHome, Server};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// `--call-timeout`, in seconds.
const CALL_TIMEOUT: u64 = 2;
/// `--max-output-bytes`.
const MAX_OUTPUT: usize = 65536;

fn serve(strict: Serve) -> Serve {
    strict
        .call_timeout(CALL_TIMEOUT)
        .max_output_bytes(MAX_OUTPUT)
}

/// Counts of the calls made, to check the ledger against.
#[derive(Debug, Default)]
struct Tally {
    calls: u64,
    failures: u64,
}

impl Tally {
    fn call(
        &mut self,
        server: &mut Server,
        function: &str,
        args: Value,
    ) -> autotool_tests::serve::CallResult {
        let r = server
            .call_result(&format!("{HEALTHY}__{function}"), args)
            .unwrap_or_else(|e| panic!("{function}: {e:#}"));
        self.calls += 1;
        if r.is_error {
            self.failures += 1;
        }
        r
    }

    fn instance(&mut self, server: &mut Server) -> String {
        self.calls += 1;
        instance(server)
    }

    fn serves(&mut self, server: &mut Server, after: &str) {
        self.calls += 1;
        assert_serves(server, true, after);
    }
}

#[test]
fn misbehaving_calls_fail_alone_and_the_next_call_works() {
    let Some(strict) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve(strict), &home);
    create_healthy(&mut server);
    let mut t = Tally::default();
    let first = t.instance(&mut server);

    // A function that exits mid-call: an error result naming the exit and carrying stderr.
    let r = t.call(&mut server, "crash", json!({"status": 3}));
    assert!(
        r.is_error,
        "os._exit(3) mid-call was not an error: {}",
        r.text
    );
    assert!(r.text.contains("exit status 3"), "{}", r.text);
    assert!(
        r.text.contains("crash: exiting with 3"),
        "no stderr: {}",
        r.text
    );
    assert!(r.elapsed < Duration::from_secs(5), "took {:?}", r.elapsed);
    let second = t.instance(&mut server);
    assert_ne!(
        first, second,
        "the call after the crash reached the same process?"
    );
    t.serves(&mut server, "a crash mid-call");

    // A function that sleeps past --call-timeout 2: an error in about 2 s; meanwhile the
    // server answers other requests at once; then the process is replaced.
    let nap = server
        .start_request(
            "tools/call",
            json!({"name": "healthy__nap", "arguments": {"seconds": 20}}),
        )
        .unwrap();
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    let listed_during = server.tool_names().unwrap();
    assert!(listed_during.iter().any(|n| n == "healthy__nap"));
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "tools/list waited for the hanging call: {:?}",
        started.elapsed()
    );
    let answer = server.wait_answer(nap, Duration::from_secs(10)).unwrap();
    let took = started.elapsed();
    t.calls += 1;
    t.failures += 1;
    let text = answer.to_string();
    assert_eq!(
        answer.pointer("/result/isError"),
        Some(&json!(true)),
        "{text}"
    );
    assert!(
        text.contains(&format!("no answer within {CALL_TIMEOUT} s")),
        "does not name the timeout: {text}"
    );
    assert!(
        took >= Duration::from_millis(1800) && took < Duration::from_secs(5),
        "the 2 s call timeout fired after {took:?}"
    );
    let third = t.instance(&mut server);
    assert_ne!(second, third, "the timed-out process kept serving");
    t.serves(&mut server, "a call past the timeout");

    // Garbage on the JSON-RPC channel itself, mid-call: that call fails, quoting it.
    let r = t.call(&mut server, "garble", json!({}));
    assert!(
        r.is_error,
        "garbage on the channel was not an error: {}",
        r.text
    );
    assert!(r.text.contains("broke the MCP protocol"), "{}", r.text);
    assert!(
        r.text.contains("garbage mid-call"),
        "does not quote it: {}",
        r.text
    );
    let fourth = t.instance(&mut server);
    assert_ne!(
        third, fourth,
        "the process that broke the protocol kept serving"
    );
    t.serves(&mut server, "garbage on stdout mid-call");

    // 20 MiB on stderr during a call: the call answers, quickly, in the same process.
    let log = home.path().join("logs/serve.log");
    let log_before = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    let stderr_before = server.stderr_bytes();
    let r = t.call(&mut server, "flood", json!({"megabytes": 20}));
    assert!(!r.is_error, "{}", r.text);
    assert_eq!(r.text, format!("flooded {} bytes", 20 << 20));
    assert!(r.elapsed < Duration::from_secs(10), "took {:?}", r.elapsed);
    assert_eq!(
        t.instance(&mut server),
        fourth,
        "the flood restarted the process"
    );
    t.serves(&mut server, "a stderr flood");
    let log_after = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    assert!(
        log_after - log_before < 1 << 20,
        "the flood went into serve.log: it grew by {} bytes",
        log_after - log_before
    );
    let relayed = server.stderr_bytes() - stderr_before;
    assert!(
        relayed < 1 << 20,
        "the flood went onto the server's stderr: {relayed} bytes"
    );

    // A failing function's traceback reaches the caller…
    let r = t.call(&mut server, "flood_then_fail", json!({"megabytes": 0}));
    assert!(r.is_error, "{}", r.text);
    assert!(
        r.text
            .contains("RuntimeError: failed after flooding stderr"),
        "the traceback is missing: {}",
        r.text
    );
    // …and after a 20 MiB flood the error result stays within the output cap.
    let r = t.call(&mut server, "flood_then_fail", json!({"megabytes": 20}));
    assert!(
        r.is_error,
        "{}",
        r.text.chars().take(500).collect::<String>()
    );
    assert!(r.text.contains("Error executing tool flood_then_fail"));
    assert!(
        r.text.len() <= MAX_OUTPUT + 200,
        "an error result of {} bytes, over the {MAX_OUTPUT} cap",
        r.text.len()
    );
    t.serves(&mut server, "a stderr flood before an error");

    // A 2 MB result under --max-output-bytes 65536: cut, with a note, the structured copy
    // dropped, and the answer line itself small.
    let r = t.call(&mut server, "big", json!({"size": 2_000_000}));
    assert!(
        !r.is_error,
        "{}",
        r.text.chars().take(500).collect::<String>()
    );
    assert!(r.text.starts_with("AAAA"));
    assert!(
        !r.text.contains("END"),
        "the end of the 2 MB result got through"
    );
    let note = r
        .text
        .find("[output truncated: ")
        .unwrap_or_else(|| panic!("no truncation note in {} bytes", r.text.len()));
    assert!(note <= MAX_OUTPUT + 1, "{note} bytes before the note");
    assert!(
        r.text[note..].contains(&format!("{MAX_OUTPUT}")),
        "the note does not name the cap: {}",
        &r.text[note..]
    );
    assert!(
        r.structured.is_none(),
        "the 2 MB structured content got through"
    );
    let line = server.stdout_lines().last().map(String::len).unwrap_or(0);
    assert!(line < 4 * MAX_OUTPUT, "the answer line is {line} bytes");
    // A result just under the cap is whole.
    let r = t.call(&mut server, "big", json!({"size": 60_000}));
    assert!(!r.is_error && r.text.len() == 60_000 && r.text.ends_with("END"));
    assert!(!r.text.contains("[output truncated"));
    t.serves(&mut server, "a 2 MB result");

    // The ledger saw every call and every failure.
    let entry = listed(&home, HEALTHY);
    assert_eq!(entry["calls"], json!(t.calls), "{entry}");
    assert_eq!(entry["failures"], json!(t.failures), "{entry}");
    assert!(
        entry["last_error"].as_str().is_some_and(|e| !e.is_empty()),
        "{entry}"
    );
    finish(server);
}

/// A function that logs a lot to stderr and then fails: its traceback, at the end of stderr, is
/// the part the caller needs to fix it, so it must survive the output cap; the head of the
/// stderr block is what may go. With `--max-output-bytes 16384` and 1 MiB of stderr before the
/// exception, the result is "Error executing tool flood_then_fail", then 16 KiB of the flood, then
/// the truncation note: the traceback is cut.
#[test]
fn a_flood_before_an_error_keeps_the_traceback() {
    let Some(strict) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let mut server = start(&strict.max_output_bytes(16384), &home);
    create_healthy(&mut server);
    let r = server
        .call_result("healthy__flood_then_fail", json!({"megabytes": 1}))
        .unwrap();
    assert!(r.is_error);
    let tail: String = r
        .text
        .chars()
        .rev()
        .take(200)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    assert!(
        r.text
            .contains("RuntimeError: failed after flooding stderr"),
        "the traceback was cut from the {}-byte error result, which ends: {tail}",
        r.text.len()
    );
    finish(server);
}
