//! A mounted tool misbehaving mid-call: exiting, hanging past the call timeout, writing garbage
//! onto the JSON-RPC channel, flooding stderr, returning too much. Each is an error result (or
//! a truncated one) for that call only; the next call works, in a restarted process where the
//! old one had to go, and the server stays responsive throughout.
//!
//! Then a tool written to attack autotool through its MCP link (`link_attacks.py`, holding a
//! key): a flood of log notifications carrying the key's value, pings with ids of 8 MiB while
//! it stops reading its stdin, requests to the supervisor (ping, roots, sampling,
//! elicitation), an answer far over the cap, a function that blocks so autotool's writes
//! block. Each is stopped by the tool link, with nothing of it in `serve.log` or on stderr and
//! serve's memory bounded, while another tool keeps answering. Each has a control: the same
//! function, confined the same way, spoken to by the suite's raw client, delivers the attack
//! in full (the sandbox does not stop it; only the link does). What an unguarded client (rmcp
//! with its default handler, as autotool had) makes of each is shown in the supervisor's
//! `tests/toollink.rs` and `tests/toollink_memory.rs`.

use super::{HEALTHY, assert_serves, create_healthy, finish, instance, listed, start, strict};
use autotool_tests::serve::{Serve, ServeHome, Server};
use autotool_tests::{Mode, ToolBuilder, ToolProcess};
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

    // A 2 MB result under --max-output-bytes 65536: far more than an answer may be (twice the
    // cap, for text and structuredContent, plus 64 KiB of framing), so the tool link stops the
    // tool, and says the answer was too large.
    let before = t.instance(&mut server);
    let r = t.call(&mut server, "big", json!({"size": 2_000_000}));
    assert!(
        r.is_error,
        "a 2 MB answer was taken: {} bytes",
        r.text.len()
    );
    assert!(r.text.contains("answer was too large"), "{}", r.text);
    assert!(r.text.contains("max_output_bytes"), "{}", r.text);
    assert!(!r.text.contains("AAAA"), "the answer itself got through");
    assert!(r.elapsed < Duration::from_secs(10), "took {:?}", r.elapsed);
    assert_ne!(
        t.instance(&mut server),
        before,
        "the tool that answered 2 MB kept running"
    );
    // An 80 KB result: over the cap but within what an answer may carry, so it is cut, with a
    // note, the structured copy dropped, and the answer line itself small.
    let r = t.call(&mut server, "big", json!({"size": 80_000}));
    assert!(
        !r.is_error,
        "{}",
        r.text.chars().take(500).collect::<String>()
    );
    assert!(r.text.starts_with("AAAA"));
    assert!(
        !r.text.contains("END"),
        "the end of the 80 KB result got through"
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
    assert!(r.structured.is_none(), "the structured copy got through");
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

// ---------------------------------------------------------------------------------------------
// A tool written to attack through its MCP link.

/// The attacking fixture and the name it is created under.
const LINK_FILE: &str = "link_attacks.py";
const LINK: &str = "link_attacks";
/// The key it holds, which it tries to get into serve's logs.
const LINK_KEY: &str = "lk-escape-3b9f27c1e8d4-link-value";
/// How much serve may grow, at its peak, for one attacking call.
const ATTACK_BUDGET_KIB: u64 = 16 << 10;

/// A server with the key in its environment, granted without asking.
fn attacked(strict: Serve) -> Serve {
    strict
        .call_timeout(60)
        .arg("--dangerously-allow-all-tools")
        .env("LINK_API_KEY", LINK_KEY)
}

/// A server under attack: the healthy tool and the attacking one created, the attacker warm;
/// and the attacker's instance id.
fn attacked_server(strict: Serve) -> (ServeHome, Server, String) {
    let home = ServeHome::new().unwrap();
    let mut server = start(&attacked(strict), &home);
    create_healthy(&mut server);
    create_link(&mut server);
    let first = link_instance(&mut server);
    (home, server, first)
}

/// Create the attacking tool (quick verification: its functions misbehave on purpose).
fn create_link(server: &mut Server) {
    let code = autotool_tests::serve::fixture(LINK_FILE).unwrap();
    let created = server
        .call_result(
            "create_tool",
            json!({
                "name": LINK,
                "code": code,
                "smoke_test": {"function": "add", "arguments": {"a": 1, "b": 2}},
                "verify": "quick",
            }),
        )
        .unwrap();
    assert!(
        !created.is_error,
        "creating {LINK} failed: {}{}",
        created.text,
        server.context()
    );
}

/// Call an attacking function through `run_tool` with `force`, so a tool quarantined by its
/// failures is still called.
fn attack(
    server: &mut Server,
    function: &str,
    arguments: Value,
) -> autotool_tests::serve::CallResult {
    server
        .call_result(
            "run_tool",
            json!({"tool": LINK, "function": function, "arguments": arguments, "force": true}),
        )
        .unwrap_or_else(|e| panic!("{function}: {e:#}"))
}

fn link_instance(server: &mut Server) -> String {
    let r = attack(server, "instance", json!({}));
    assert!(!r.is_error, "{}", r.text);
    r.text
        .lines()
        .find(|l| l.len() == 32)
        .unwrap_or_default()
        .to_string()
}

/// The attacking tool confined as serve would confine it, spoken to by the suite's raw client:
/// the control, with no tool link in between.
fn raw_link_tool() -> ToolProcess {
    let code = autotool_tests::serve::fixture(LINK_FILE).unwrap();
    let mut builder = ToolBuilder::new(autotool_tests::ATTACK_TOOL)
        .unwrap()
        .with_file(LINK_FILE, code.as_bytes())
        .unwrap();
    builder.policy_mut().tool_file = LINK_FILE.to_string();
    builder
        .policy_mut()
        .env
        .insert("LINK_API_KEY".into(), LINK_KEY.into());
    builder.start(Mode::Confined).unwrap()
}

/// `VmRSS` and `VmHWM` (peak) of `pid`, in KiB.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn log_size(home: &ServeHome) -> u64 {
    std::fs::metadata(home.path().join("logs/serve.log")).map_or(0, |m| m.len())
}

fn log_text(home: &ServeHome) -> String {
    std::fs::read_to_string(home.path().join("logs/serve.log")).unwrap_or_default()
}

#[test]
fn a_log_flood_carrying_the_key_reaches_neither_serve_log_nor_stderr() {
    let Some(strict) = strict() else { return };

    // Control: confined, the tool delivers 8 MiB of notifications, each with the raw value, to
    // whoever reads its stdout.
    let mut raw = raw_link_tool();
    let sent = raw
        .call_text("log_flood", json!({"megabytes": 8, "after": true}))
        .unwrap();
    assert!(sent.starts_with("sending "), "{sent}");
    let lines = raw.drain_stdout(Duration::from_secs(5));
    let bytes: usize = lines.iter().map(String::len).sum();
    let carrying = lines.iter().filter(|l| l.contains(LINK_KEY)).count();
    assert!(bytes >= 8 << 20, "the control got only {bytes} bytes");
    assert!(
        carrying == lines.len() && carrying > 0,
        "{carrying} of {} lines carry the key",
        lines.len()
    );
    drop(raw);

    let (home, mut server, first) = attacked_server(strict);
    let (log_before, stderr_before) = (log_size(&home), server.stderr_bytes());

    let r = attack(&mut server, "log_flood", json!({"megabytes": 64}));
    assert!(r.is_error, "64 MiB of notifications were taken: {}", r.text);
    assert!(
        r.text.contains("flooded autotool with notifications"),
        "{}",
        r.text
    );
    assert!(r.elapsed < Duration::from_secs(20), "took {:?}", r.elapsed);
    assert_serves(&mut server, true, "a log flood from another tool");
    assert_ne!(
        link_instance(&mut server),
        first,
        "the flooding tool kept running"
    );

    let log_grew = log_size(&home) - log_before;
    let stderr_grew = server.stderr_bytes() - stderr_before;
    assert!(log_grew < 64 << 10, "serve.log grew by {log_grew} bytes");
    assert!(
        stderr_grew < 64 << 10,
        "serve's stderr grew by {stderr_grew} bytes"
    );
    // The log file holds every line stderr got.
    let log = log_text(&home);
    assert!(!log.contains(LINK_KEY), "the key is in serve.log");
    assert!(
        !log.contains("the key is"),
        "a notification is in serve.log"
    );
    assert!(!server.stderr().contains(LINK_KEY), "the key is on stderr");
    finish(server);
}

#[test]
fn pings_with_huge_ids_while_not_reading_stdin_stop_the_tool_and_cost_serve_little() {
    let Some(strict) = strict() else { return };

    // Control: confined, the tool delivers pings whose ids are 8 MiB each.
    let mut raw = raw_link_tool();
    raw.call_text(
        "ping_flood",
        json!({"count": 4, "id_mib": 8, "after": true}),
    )
    .unwrap();
    let lines = raw.drain_stdout(Duration::from_secs(5));
    let pings: Vec<&String> = lines
        .iter()
        .filter(|l| l.len() > 8 << 20 && l.contains("\"method\": \"ping\""))
        .collect();
    assert_eq!(pings.len(), 4, "the control got {} huge pings", pings.len());
    drop(raw);

    let (home, mut server, first) = attacked_server(strict);
    let (rss_before, peak_before) = memory(server.pid());

    // The tool blocks its event loop (so nothing reads its stdin) and sends 30 pings of 8 MiB;
    // meanwhile the healthy tool answers.
    let id = server
        .start_request(
            "tools/call",
            json!({"name": "run_tool", "arguments": {"tool": LINK, "function": "ping_flood",
                "arguments": {"count": 30, "id_mib": 8, "hold": 20}, "force": true}}),
        )
        .unwrap();
    let started = Instant::now();
    assert_eq!(
        server
            .call_text("healthy__add", json!({"a": 2, "b": 40}))
            .unwrap(),
        "42"
    );
    let answer = server.wait_answer(id, Duration::from_secs(30)).unwrap();
    let took = started.elapsed();
    let text = answer.to_string();
    assert_eq!(
        answer.pointer("/result/isError"),
        Some(&json!(true)),
        "{text}"
    );
    assert!(text.contains("id is longer than 128 bytes"), "{text}");
    assert!(took < Duration::from_secs(15), "stopped after {took:?}");
    assert_serves(&mut server, true, "pings with huge ids from another tool");
    assert_ne!(
        link_instance(&mut server),
        first,
        "the pinging tool kept running"
    );

    std::thread::sleep(Duration::from_millis(500));
    let (rss_after, peak_after) = memory(server.pid());
    eprintln!("serve: RSS {rss_before} → {rss_after} KiB, peak {peak_before} → {peak_after} KiB");
    assert!(
        peak_after.saturating_sub(peak_before) <= ATTACK_BUDGET_KIB,
        "serve's peak grew by {} KiB",
        peak_after - peak_before
    );
    assert!(
        rss_after.saturating_sub(rss_before) <= ATTACK_BUDGET_KIB,
        "serve holds {} KiB more after the attack",
        rss_after - rss_before
    );
    assert!(
        !log_text(&home).contains("iiiiiiii"),
        "an id is in serve.log"
    );
    finish(server);
}

#[test]
fn requests_to_autotool_are_refused_counted_and_the_tool_stopped() {
    let Some(strict) = strict() else { return };

    // Control: confined, the tool's requests reach whoever reads its stdout.
    let mut raw = raw_link_tool();
    let methods = ["sampling/createMessage", "roots/list", "elicitation/create"];
    raw.call_text("requests_raw", json!({"methods": methods, "after": true}))
        .unwrap();
    let lines = raw.drain_stdout(Duration::from_secs(3));
    for method in methods {
        assert!(
            lines
                .iter()
                .any(|l| l.contains(&format!("\"method\": \"{method}\"")) && l.contains("\"id\"")),
            "the control got no {method} request: {lines:?}"
        );
    }
    drop(raw);

    // One process per tool: the function that blocks and the writes after it must meet in the
    // same process (with more, the writes would go to another one, which reads them).
    let (_home, mut server, first) = attacked_server(strict.env("AUTOTOOL_TOOL_PROCESSES", "1"));

    // Through the SDK, as a tool would ask: each refused, the tool told so.
    for kind in ["sampling", "roots", "elicitation", "ping"] {
        let r = attack(&mut server, "ask", json!({"kind": kind}));
        assert!(!r.is_error, "{kind}: {}", r.text);
        assert!(
            r.text.contains("refused: ")
                && r.text.contains("autotool serves no requests from tools"),
            "{kind}: {}",
            r.text
        );
    }
    // The fifth is past the budget: the tool is stopped as abusive.
    let r = attack(&mut server, "ask", json!({"kind": "roots"}));
    assert!(r.is_error, "{}", r.text);
    assert!(r.text.contains("stopped as abusive"), "{}", r.text);
    assert!(r.text.contains("sampling/createMessage"), "{}", r.text);
    assert_ne!(
        link_instance(&mut server),
        first,
        "the abusive tool kept running"
    );
    // Many at once, with no wait for answers: stopped the same way.
    let r = attack(
        &mut server,
        "requests_raw",
        json!({"methods": ["ping", "ping", "roots/list", "roots/list", "ping", "ping"]}),
    );
    assert!(
        r.is_error && r.text.contains("stopped as abusive"),
        "{}",
        r.text
    );
    assert_serves(&mut server, true, "requests from another tool");
    // None of it reached the host.
    for line in server.stdout_lines() {
        for method in ["sampling/createMessage", "roots/list", "elicitation/create"] {
            assert!(
                !line.contains(&format!("\"method\":\"{method}\"")),
                "the host got {method}: {line}"
            );
        }
    }

    // A function that blocks its event loop while autotool writes to it: the second large
    // message stays in the pipe, and the tool is stopped for not reading. (The process is
    // started first, so that the block reaches it before the messages do.)
    link_instance(&mut server);
    let blocked = server
        .start_request(
            "tools/call",
            json!({"name": "run_tool", "arguments": {"tool": LINK, "function": "block",
                "arguments": {"seconds": 40}, "force": true}}),
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let text = "m".repeat(1 << 20);
    let first_write = server
        .start_request(
            "tools/call",
            json!({"name": "run_tool", "arguments": {"tool": LINK, "function": "measure",
                "arguments": {"text": text}, "force": true}}),
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let r = attack(&mut server, "measure", json!({"text": text}));
    let took = started.elapsed();
    assert!(
        r.is_error,
        "{}",
        r.text.chars().take(300).collect::<String>()
    );
    assert!(r.text.contains("stopped reading its stdin"), "{}", r.text);
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(15),
        "stopped after {took:?}"
    );
    for id in [blocked, first_write] {
        let answer = server.wait_answer(id, Duration::from_secs(10)).unwrap();
        assert_eq!(
            answer.pointer("/result/isError"),
            Some(&json!(true)),
            "{answer}"
        );
    }
    assert_serves(&mut server, true, "a tool that stopped reading its stdin");
    finish(server);
}

#[test]
fn an_answer_far_over_the_cap_stops_the_tool_with_a_clear_message() {
    let Some(strict) = strict() else { return };

    // Control: confined, the tool answers 2 MB to whoever reads it.
    let mut raw = raw_link_tool();
    let answer = raw.call_text("big", json!({"size": 2_000_000})).unwrap();
    assert_eq!(answer.len(), 2_000_000);
    drop(raw);

    let home = ServeHome::new().unwrap();
    let mut server = start(&attacked(strict).max_output_bytes(MAX_OUTPUT), &home);
    create_link(&mut server);
    let first = link_instance(&mut server);
    let r = attack(&mut server, "big", json!({"size": 2_000_000}));
    assert!(r.is_error, "a 2 MB answer was taken");
    assert!(r.text.contains("answer was too large"), "{}", r.text);
    assert!(r.text.contains("max_output_bytes"), "{}", r.text);
    assert!(r.text.contains("Return less"), "{}", r.text);
    assert!(!r.text.contains("print diagnostics"), "{}", r.text);
    assert!(!r.text.contains("AAAA"), "the answer itself got through");
    assert_ne!(link_instance(&mut server), first, "the tool kept running");
    finish(server);
}
