//! The record through `autotool serve`, end to end: what a host did is attributed to it (its
//! client name, its transport) in the event log and in each version's provenance; the agent
//! reads a tool's record with `tool_info`, and the sandbox as measured (confined: no route out,
//! no host files; with `--sandbox off`, the control, both); serve's instructions say it; a
//! tool's stderr is kept redacted and bounded for `tools logs`; `tools verify` verifies again.

use super::{HEALTHY, create_healthy, finish, start, strict};
use autotool_tests::serve::{Sandbox, Serve, ServeHome, Server};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// `tool_info {name}` as JSON.
fn info(server: &mut Server, name: &str) -> Value {
    let r = server
        .call_result("tool_info", json!({"name": name}))
        .unwrap();
    assert!(!r.is_error, "{}", r.text);
    r.structured
        .clone()
        .unwrap_or_else(|| panic!("no structuredContent: {}", r.text))
}

/// `tool_info`'s sandbox measurement, once serve has made it.
fn measured(server: &mut Server) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let m = info(server, HEALTHY)["sandbox"]["measurement"].clone();
        if m["measured"] == true {
            return m["reach"].clone();
        }
        assert!(Instant::now() < deadline, "never measured: {m}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn events(home: &ServeHome, tool: &str) -> Vec<Value> {
    let (status, out, err) = home.cli(&["events", "--json", "--tool", tool]).unwrap();
    assert!(status.success(), "{err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn the_host_is_named_and_the_agent_reads_the_record_and_the_measured_sandbox() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve, &home);
    create_healthy(&mut server);

    // Who created it: the host, by the client name it gave, on stdio.
    let created = events(&home, HEALTHY);
    let made = created
        .iter()
        .find(|e| e["kind"] == "created")
        .unwrap_or_else(|| panic!("{created:#?}"));
    assert_eq!(made["actor"], "host:autotool-tests", "{made}");
    assert_eq!(made["surface"], "stdio", "{made}");
    let (_, shown, _) = home.cli(&["tools", "show", HEALTHY, "--json"]).unwrap();
    let shown: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(
        shown["versions"][0]["created_by"],
        json!({"actor": "host:autotool-tests", "surface": "stdio"})
    );

    // A crash: its stderr is kept for `tools logs`, and tool_info shows the failure.
    let r = server
        .call_result("healthy__crash", json!({"status": 3}))
        .unwrap();
    assert!(r.is_error, "{}", r.text);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (status, logs, err) = home.cli(&["tools", "logs", HEALTHY]).unwrap();
        assert!(status.success(), "{err}");
        if logs.contains("crash: exiting with 3") {
            break;
        }
        assert!(Instant::now() < deadline, "tools logs: {logs}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let record = info(&mut server, HEALTHY);
    assert_eq!(record["state"], "probation", "{record}");
    assert_eq!(
        record["versions"][0]["created_by"]["actor"],
        "host:autotool-tests"
    );
    let failure = &record["recent_failures"][0];
    assert_eq!(failure["function"], "crash", "{record}");
    assert!(record["verdicts"].is_array() && record["obligations"].is_array());
    assert_eq!(record["keys"], json!([]), "{record}");
    assert!(
        record["sandbox"]["idle"].as_str().unwrap().contains("120s"),
        "{record}"
    );

    // Measured, confined: no route out, no host files, the proxy its only way.
    let reach = measured(&mut server);
    assert_eq!(reach["sandbox"], "strict", "{reach}");
    assert_eq!(reach["route_out"], false, "{reach}");
    assert_eq!(reach["host_files"], false, "{reach}");
    assert_eq!(reach["egress_proxy"], true, "{reach}");
    assert_eq!(reach["writes_own_code"], false, "{reach}");

    // A flood of stderr is kept bounded on disk.
    server
        .call_text("healthy__flood", json!({"megabytes": 1}))
        .unwrap();
    let log = home.path().join("logs/tools/healthy.log");
    let kept = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0)
        + std::fs::metadata(log.with_extension("log.1"))
            .map(|m| m.len())
            .unwrap_or(0);
    assert!(
        kept > 0 && kept <= 2 * (256 << 10) + (64 << 10),
        "{kept} bytes kept"
    );

    // Verified again on request, from the command line: an event by the user.
    let (status, out, err) = home.cli(&["tools", "verify", HEALTHY]).unwrap();
    assert!(status.success(), "{out}{err}");
    assert!(out.contains("passed verification again"), "{out}");
    let again = events(&home, HEALTHY)
        .into_iter()
        .find(|e| e["kind"] == "verified" && e["actor"] == "cli")
        .unwrap_or_else(|| panic!("no verified event by the cli"));
    assert!(
        again["detail"]
            .as_str()
            .unwrap()
            .contains("again on request")
    );
    finish(server);

    // The next serve tells a host at once what was measured, in its instructions.
    let mut next = serve.start(&home).unwrap();
    let init = next.initialize().unwrap();
    let said = init["instructions"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        said.contains("no direct route to the internet")
            && said.contains("cannot see the host's files"),
        "{said}"
    );
    assert!(said.contains("tool_info"), "{said}");
    finish(next);
}

/// The control: unconfined, the same probe finds a route out and the host's files, so the
/// confined answer above is the sandbox's doing, not a probe that cannot see.
#[test]
fn unconfined_the_measurement_finds_the_way_out() {
    let home = ServeHome::new().unwrap();
    let mut server = start(&Serve::new(Sandbox::Off), &home);
    create_healthy(&mut server);
    let reach = measured(&mut server);
    assert_eq!(reach["sandbox"], "off", "{reach}");
    assert_eq!(reach["host_files"], true, "{reach}");
    assert_eq!(reach["writes_own_code"], true, "{reach}");
    // A route out exists where the machine has one (a default route); a machine without one
    // cannot show the control, and says so.
    let routes = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
    if routes
        .lines()
        .skip(1)
        .any(|l| l.split_whitespace().nth(1) == Some("00000000"))
    {
        assert_eq!(reach["route_out"], true, "{reach}");
    } else {
        eprintln!("no default route on this machine: the route_out control is not shown");
    }
    let r = server
        .call_result("tool_info", json!({"name": "nosuch"}))
        .unwrap();
    assert!(r.is_error && r.text.contains("no tool named"), "{}", r.text);
    finish(server);
}
