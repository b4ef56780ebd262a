//! Several `autotool serve` processes (one per host app) sharing one `AUTOTOOL_HOME`, each
//! driven by the Python SDK (`python/driver.py`):
//! - a tool created through one is mounted in the others within 2 s, and their hosts hear of
//!   it in their era (a legacy notification; a 2026-07-28 subscription event);
//! - two serves creating the same name at once both succeed, as versions 1 and 2, and both then
//!   run version 2;
//! - a serve killed with `kill -9` in the middle of a create (during the tool's smoke test)
//!   leaves a registry the survivor, a freshly started serve and `autotool tools list --json`
//!   agree on, with no half tool in it; the name can be created again.

use autotool_integration::procfs;
use autotool_integration::python::{Driver, Era, is_list_change};
use autotool_integration::{Checks, Need, TestHome, setup};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// How soon another serve must mount a created tool (issue 3).
const PROPAGATION: Duration = Duration::from_secs(2);
const START: Duration = Duration::from_secs(60);
const CREATE: Duration = Duration::from_secs(90);

fn create(d: &mut Driver, name: &str, source: &str, extra: Value) -> (Instant, Value) {
    let mut cmd = json!({"op": "create", "name": name, "source": source});
    if let (Some(o), Some(e)) = (cmd.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    d.cmd(cmd, CREATE).unwrap()
}

/// Poll `d`'s tools/list until it holds `name` or `deadline` passes; when it first did.
fn listed_by(d: &mut Driver, name: &str, deadline: Instant) -> Option<Instant> {
    loop {
        let names = d.list().unwrap_or_default();
        if names.iter().any(|n| n == name) {
            return Some(Instant::now());
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Tool names (the part before `__`) of the mounted functions in a tools/list.
fn mounted_tools(names: &[String]) -> BTreeSet<String> {
    names
        .iter()
        .filter_map(|n| n.split_once("__").map(|(t, _)| t.to_string()))
        .collect()
}

/// Tool names in `autotool tools list --json`: an array of tools, or an object holding one
/// under `tools`, each with a `name`.
fn cli_tools(v: &Value) -> Option<BTreeSet<String>> {
    let list = v
        .as_array()
        .or_else(|| v.get("tools").and_then(Value::as_array))?;
    list.iter()
        .map(|t| t.get("name").and_then(Value::as_str).map(str::to_string))
        .collect()
}

#[test]
fn two_serves_share_a_home_and_hear_of_each_others_tools() {
    let test = "two_serves_share_a_home_and_hear_of_each_others_tools";
    let Some(setup) = setup(test, &[Need::Serve, Need::PythonSdk]) else {
        return;
    };
    let mut c = Checks::new();
    let home = TestHome::new(&setup).unwrap();
    let mut creator = Driver::start(&home, "creator", Era::Legacy, START).unwrap();
    let mut legacy = Driver::start(&home, "legacy host", Era::Legacy, START).unwrap();
    let mut modern = Driver::start(&home, "modern host", Era::Modern, START).unwrap();
    c.check(
        modern.ready["protocol_version"] == "2026-07-28"
            && modern.ready["listen"]["toolsListChanged"] == true,
        "the modern host negotiated 2026-07-28 and its tools subscription was honoured",
        &modern.ready,
    );
    let pids: BTreeSet<_> = [&creator, &legacy, &modern]
        .iter()
        .filter_map(|d| d.server_pid())
        .collect();
    c.check(
        pids.len() == 3,
        "three distinct serve processes",
        format!("{pids:?}"),
    );

    let (created_at, created) = create(&mut creator, "adder", "ADD_V1", json!({}));
    c.check(
        created["result"]["is_error"] == false,
        "create_tool adder through the first serve",
        &created,
    );

    for (label, host) in [("legacy", &mut legacy), ("modern", &mut modern)] {
        let heard = host
            .wait_event(created_at + Duration::from_secs(10), |v| {
                is_list_change(v) && (label == "legacy" || v["event"] == "subscription")
            })
            .unwrap();
        let after = heard
            .as_ref()
            .map(|(at, _)| at.saturating_duration_since(created_at));
        eprintln!(
            "{test}: the {label} host heard of the change {after:?} after create_tool returned"
        );
        c.check(
            after.is_some_and(|d| d <= PROPAGATION),
            &format!("the {label} host hears of the new tool within {PROPAGATION:?}"),
            format!("{heard:?} after {after:?}; events {:?}", host.events),
        );
        let seen = listed_by(host, "adder__add", created_at + PROPAGATION);
        c.check(
            seen.is_some(),
            &format!("the {label} host's serve lists adder__add within {PROPAGATION:?}"),
            format!("{:?}", host.list().ok()),
        );
        let call = host.call("adder__add", json!({"a": 2, "b": 3})).unwrap();
        c.check(
            call["is_error"] == false && call["structured"] == json!({"result": 5}),
            &format!("the {label} host's serve runs the tool it did not create"),
            &call,
        );
    }
    // 2026-07-28: nothing outside the subscription.
    let untagged: Vec<&Value> = modern
        .events
        .iter()
        .map(|(_, v)| v)
        .filter(|v| v["event"] == "notification" && v["subscription_id"].is_null())
        .collect();
    c.check(
        untagged.is_empty(),
        "the modern host gets no list_changed outside its subscription",
        format!("{untagged:?}"),
    );

    let stderrs = format!(
        "creator stderr:\n{}\nlegacy host stderr:\n{}\nmodern host stderr:\n{}",
        creator.stderr(),
        legacy.stderr(),
        modern.stderr()
    );
    for d in [creator, legacy, modern] {
        let name = d.name.clone();
        if let Err(e) = d.close(Duration::from_secs(15)) {
            c.check(false, &format!("{name} closes cleanly"), e);
        }
    }
    c.finish(test, || format!("{stderrs}\n{}", home.log_tail(20_000)));
}

#[test]
fn concurrent_creates_of_one_name_from_two_serves_both_land() {
    let test = "concurrent_creates_of_one_name_from_two_serves_both_land";
    let Some(setup) = setup(test, &[Need::Serve, Need::PythonSdk]) else {
        return;
    };
    let mut c = Checks::new();
    let home = TestHome::new(&setup).unwrap();
    let mut a = Driver::start(&home, "host a", Era::Legacy, START).unwrap();
    let mut b = Driver::start(&home, "host b", Era::Modern, START).unwrap();

    // The same name, different code, at the same moment: ADD_V1 answers a + b, ADD_V2 a + b + 1000.
    let id_a = a
        .send(json!({"op": "create", "name": "twin", "source": "ADD_V1"}))
        .unwrap();
    let id_b = b
        .send(json!({"op": "create", "name": "twin", "source": "ADD_V2"}))
        .unwrap();
    let (done_a, ra) = a.reply(id_a, CREATE).unwrap();
    let (done_b, rb) = b.reply(id_b, CREATE).unwrap();
    let (ra, rb) = (&ra["result"], &rb["result"]);
    c.check(
        ra["is_error"] == false && rb["is_error"] == false,
        "both concurrent creates succeed",
        format!("a: {ra}\nb: {rb}"),
    );
    let (va, vb) = (
        ra["structured"]["version"].as_u64(),
        rb["structured"]["version"].as_u64(),
    );
    let mut versions = [va, vb];
    versions.sort();
    c.check(
        versions == [Some(1), Some(2)],
        "they become versions 1 and 2 of twin",
        format!("a: {va:?}, b: {vb:?}"),
    );
    // Version 2 is the current one, whichever host wrote it.
    let current = if vb == Some(2) { 1005 } else { 5 };
    let last = done_a.max(done_b);
    for (label, host) in [("a", &mut a), ("b", &mut b)] {
        let deadline = last + PROPAGATION;
        let mut got = Value::Null;
        while Instant::now() < deadline {
            got = host.call("twin__add", json!({"a": 2, "b": 3})).unwrap();
            if got["structured"]["result"] == current {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        c.check(
            got["structured"]["result"] == current,
            &format!("serve {label} runs version 2 within {PROPAGATION:?} (2 + 3 = {current})"),
            &got,
        );
    }
    let cli = home
        .cli(&["tools", "list", "--json"], Duration::from_secs(30))
        .unwrap();
    let cli_names = serde_json::from_str(cli.1.trim())
        .ok()
        .as_ref()
        .and_then(cli_tools);
    c.check(
        cli_names == Some(["twin".to_string()].into()),
        "`autotool tools list --json` holds twin once",
        &cli.1,
    );
    let stderrs = format!(
        "host a stderr:\n{}\nhost b stderr:\n{}\ntools dir: {:?}",
        a.stderr(),
        b.stderr(),
        home.tool_files()
    );
    for d in [a, b] {
        let name = d.name.clone();
        if let Err(e) = d.close(Duration::from_secs(15)) {
            c.check(false, &format!("{name} closes cleanly"), e);
        }
    }
    c.finish(test, || format!("{stderrs}\n{}", home.log_tail(20_000)));
}

#[test]
fn kill_9_mid_create_leaves_a_registry_every_serve_agrees_on() {
    let test = "kill_9_mid_create_leaves_a_registry_every_serve_agrees_on";
    let Some(setup) = setup(test, &[Need::Serve, Need::PythonSdk]) else {
        return;
    };
    let mut c = Checks::new();
    let home = TestHome::new(&setup).unwrap();
    let mut victim = Driver::start(&home, "victim", Era::Legacy, START).unwrap();
    let mut survivor = Driver::start(&home, "survivor", Era::Legacy, START).unwrap();

    // Something in the registry before the crash.
    let (_, created) = create(&mut victim, "adder", "ADD_V1", json!({}));
    assert_eq!(
        created["result"]["is_error"], false,
        "create adder: {created}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    assert!(
        listed_by(&mut survivor, "adder__add", deadline).is_some(),
        "the survivor never mounted adder"
    );

    // A create whose smoke test sleeps 8 s; kill -9 the serve while it runs.
    let serve_pid = victim.server_pid().expect("the victim's serve pid");
    let id = victim
        .send(json!({
            "op": "create", "name": "slowpoke", "source": "SLOW_PING",
            "preamble": "SLOW_PING_PREAMBLE",
            "smoke_test": {"function": "ping", "arguments": {"delay": 8}},
        }))
        .unwrap();
    let sent = Instant::now();
    let mut tool_pids = Vec::new();
    while sent.elapsed() < Duration::from_secs(60) {
        // A tool started through its launcher runs `python … tool.py`. One forked from serve's
        // template keeps the template's command line (which names `--template` too, in its
        // script), so it is told apart by its parent: each of its processes (waiter, init,
        // tool) is a Python's child, while the template's own Python is its launcher's.
        tool_pids = procfs::descendants(serve_pid)
            .into_iter()
            .filter(|p| {
                let cmd = procfs::cmdline(*p);
                cmd.contains("python")
                    && (cmd.contains("tool.py")
                        || procfs::parent(*p)
                            .is_some_and(|q| procfs::cmdline(q).contains("python")))
            })
            .collect();
        if !tool_pids.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !tool_pids.is_empty(),
        "no tool process appeared under the victim's serve (pid {serve_pid}) within 60 s: {:?}",
        procfs::descendants(serve_pid)
            .iter()
            .map(|p| procfs::cmdline(*p))
            .collect::<Vec<_>>()
    );
    let tree: Vec<(u32, String)> = procfs::descendants(serve_pid)
        .into_iter()
        .map(|p| (p, procfs::cmdline(p)))
        .collect();
    // The tool starts (~0.5 s), is listed, then sleeps 8 s in its smoke test: kill in there.
    std::thread::sleep(Duration::from_secs(2));
    let before_kill = victim.drain_pending_reply(id);
    c.check(
        before_kill.is_none(),
        "the slow create was still running when the serve was killed",
        format!("{before_kill:?}"),
    );
    autotool_integration::child::kill9(serve_pid).unwrap();
    let killed_at = Instant::now();
    eprintln!(
        "{test}: killed serve {serve_pid} {:.1}s into create_tool slowpoke; its processes: {tree:?}",
        sent.elapsed().as_secs_f64()
    );

    // The victim's host sees its call fail, not hang.
    let reply = victim.reply(id, Duration::from_secs(20));
    c.check(
        reply
            .as_ref()
            .is_ok_and(|(_, v)| v["result"]["kind"] != "result"),
        "the victim's host gets an error for the interrupted create",
        format!("{reply:?}"),
    );
    // The orphaned tool process does not linger (its sleep is 8 s).
    let gone_by = Instant::now() + Duration::from_secs(15);
    while tool_pids.iter().any(|p| procfs::alive(*p)) && Instant::now() < gone_by {
        std::thread::sleep(Duration::from_millis(100));
    }
    let lingering: Vec<(u32, String)> = tool_pids
        .iter()
        .filter(|p| procfs::alive(**p))
        .map(|p| (*p, procfs::cmdline(*p)))
        .collect();
    c.check(
        lingering.is_empty(),
        "the killed serve's tool process exits (within 15 s)",
        format!("{lingering:?}"),
    );
    eprintln!(
        "{test}: the orphaned tool process was gone {:.1}s after the kill",
        killed_at.elapsed().as_secs_f64()
    );

    eprintln!(
        "{test}: the tools directory after the kill: {:?}",
        home.tool_files()
    );

    // Give the survivor a poll interval to notice anything, then compare three views.
    std::thread::sleep(PROPAGATION);
    let mut fresh = Driver::start(&home, "fresh", Era::Legacy, START).unwrap();
    let survivor_names = survivor.list().unwrap_or_default();
    let fresh_names = fresh.list().unwrap_or_default();
    let cli = home
        .cli(&["tools", "list", "--json"], Duration::from_secs(30))
        .unwrap();
    let cli_json: Value = serde_json::from_str(cli.1.trim()).unwrap_or(Value::Null);
    let cli_names = cli_tools(&cli_json);
    let want: BTreeSet<String> = ["adder".to_string()].into();
    c.check(
        mounted_tools(&survivor_names) == want,
        "the survivor lists exactly adder's functions (no slowpoke)",
        format!("{survivor_names:?}"),
    );
    c.check(
        survivor_names == fresh_names,
        "a freshly started serve lists exactly what the survivor lists",
        format!("survivor {survivor_names:?}, fresh {fresh_names:?}"),
    );
    c.check(
        cli.0 == Some(0) && cli_names.as_ref() == Some(&want),
        "`autotool tools list --json` holds exactly adder",
        format!(
            "exit {:?}, names {cli_names:?}\nstdout:\n{}\nstderr:\n{}",
            cli.0, cli.1, cli.2
        ),
    );
    let survivor_call = survivor
        .call("adder__add", json!({"a": 1, "b": 1}))
        .unwrap();
    c.check(
        survivor_call["structured"] == json!({"result": 2}),
        "the survivor still runs adder",
        &survivor_call,
    );

    // The name is not wedged: create it again (quickly this time) through the fresh serve.
    let (again_at, again) = create(
        &mut fresh,
        "slowpoke",
        "SLOW_PING",
        json!({"preamble": "SLOW_PING_PREAMBLE", "smoke_test": {"function": "ping", "arguments": {"delay": 0}}}),
    );
    c.check(
        again["result"]["is_error"] == false,
        "slowpoke can be created again after the crash",
        &again,
    );
    eprintln!(
        "{test}: slowpoke re-created as version {}",
        again["result"]["structured"]["version"]
    );
    let seen = listed_by(&mut survivor, "slowpoke__ping", again_at + PROPAGATION);
    c.check(
        seen.is_some(),
        "the survivor mounts the re-created slowpoke within 2 s",
        format!("{:?}", survivor.list().ok()),
    );
    let pong = survivor.call("slowpoke__ping", json!({})).unwrap();
    c.check(pong["text"] == "pong", "the survivor runs slowpoke", &pong);
    let cli = home
        .cli(&["tools", "list", "--json"], Duration::from_secs(30))
        .unwrap();
    let cli_names = serde_json::from_str(cli.1.trim())
        .ok()
        .as_ref()
        .and_then(cli_tools);
    let want: BTreeSet<String> = ["adder".to_string(), "slowpoke".to_string()].into();
    c.check(
        cli_names.as_ref() == Some(&want),
        "`autotool tools list --json` then holds adder and slowpoke",
        format!("{cli_names:?}\n{}", cli.1),
    );

    let files = home.tool_files();
    let stderrs = format!(
        "victim stderr:\n{}\nsurvivor stderr:\n{}\nfresh stderr:\n{}\ntools dir: {files:?}",
        victim.stderr(),
        survivor.stderr(),
        fresh.stderr()
    );
    drop(victim);
    for d in [survivor, fresh] {
        let name = d.name.clone();
        if let Err(e) = d.close(Duration::from_secs(15)) {
            c.check(false, &format!("{name} closes cleanly"), e);
        }
    }
    c.finish(test, || format!("{stderrs}\n{}", home.log_tail(30_000)));
}
