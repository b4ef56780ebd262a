//! The record from the command line, against real temp homes and the real binary: `autotool
//! events` (who caused each decision and through what, redacted, filtered, followed), `tools
//! rollback` (back to a trusted version, the baseline kept), `tools pin` / `unpin` (the current
//! version held against every new one until unpinned, and who did what) and `tools logs` (a
//! tool's stderr, redacted, escaped and bounded).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use autotool::home::Home;
use autotool::ledger::{Actor, Event, State};
use autotool::registry::{FunctionSpec, Manifest, Registry};
use autotool_policy::names::ToolName;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A key value the CLI holds (from its environment), which must never be printed.
const KEY: &str = "DEMO_API_KEY";
const VALUE: &str = "sk-demo-7c1e55aa90b3f2d4";

fn temp_home() -> (tempfile::TempDir, Home) {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::at(dir.path().join("home"));
    (dir, home)
}

fn code(tag: &str) -> String {
    format!("from mcp.server.mcpserver import MCPServer\n# {tag}\nmcp = MCPServer('t')\n")
}

fn create(reg: &Registry, name: &str, tag: &str) -> u32 {
    try_create(reg, name, tag).unwrap()
}

fn try_create(
    reg: &Registry,
    name: &str,
    tag: &str,
) -> Result<u32, autotool::registry::RegistryError> {
    let staged = reg
        .stage(&ToolName::parse(name).unwrap(), &code(tag))
        .unwrap();
    let function: FunctionSpec = serde_json::from_value(json!({
        "name": "run", "input_schema": {"type": "object"}
    }))
    .unwrap();
    reg.commit(
        staged,
        Manifest {
            description: "a test tool".into(),
            required_env: Vec::new(),
            functions: vec![function],
            packages: None,
            uses: Vec::new(),
            reach: Default::default(),
        },
    )
    .map(|v| v.version)
}

fn autotool(home: &Home, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_autotool"))
        .args(args)
        .env("AUTOTOOL_HOME", home.root())
        .env(KEY, VALUE)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json_lines(out: &Output) -> Vec<Value> {
    stdout(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn events_say_who_caused_each_decision_redacted_and_filtered() {
    let (_t, home) = temp_home();
    let reg = Registry::open(&home).unwrap();
    create(&reg, "weather", "v1");
    create(&reg, "other", "o1");
    // A refusal a host's call caused, whose detail carries text the tool sent (a key value,
    // a terminal escape, a flood).
    reg.ledger()
        .event_by(
            Some("weather"),
            Event::EgressDenied,
            &format!(
                "sent {VALUE} to evil.example \u{1b}[2J{}",
                "x".repeat(10_000)
            ),
            &Actor::host(Some("claude-code"), "stdio"),
        )
        .unwrap();
    let out = autotool(&home, &["tools", "retire", "weather"]);
    assert!(out.status.success(), "{out:?}");

    let out = autotool(&home, &["events", "--json"]);
    assert!(out.status.success(), "{out:?}");
    assert!(!stdout(&out).contains(VALUE), "a key value was printed");
    let events = json_lines(&out);
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["created", "created", "egress_denied", "state_changed"],
        "{events:#?}"
    );
    let refused = &events[2];
    assert_eq!(refused["actor"], "host:claude-code");
    assert_eq!(refused["surface"], "stdio");
    let detail = refused["detail"].as_str().unwrap();
    assert!(detail.contains(&format!("[REDACTED:{KEY}]")), "{detail}");
    assert!(detail.chars().count() <= 2001, "{}", detail.len());
    let retired = &events[3];
    assert_eq!(retired["actor"], "cli");
    assert_eq!(retired["surface"], "cli");
    assert!(retired["detail"].as_str().unwrap().contains("retired"));
    // Each version's provenance names its creator.
    assert_eq!(
        reg.ledger().created_by("weather", 1).unwrap(),
        Some(Actor::new("autotool", ""))
    );

    // Text: one line each, escaped and cut; filtered by tool and time.
    let out = autotool(&home, &["events", "--tool", "weather"]);
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(!text.contains('\u{1b}') && !text.contains(VALUE), "{text}");
    assert!(text.contains("host:claude-code via stdio"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() < 400), "{text}");
    let out = autotool(&home, &["events", "--json", "--since", "2999-01-01"]);
    assert!(out.status.success() && stdout(&out).is_empty(), "{out:?}");
    let out = autotool(&home, &["events", "--json", "--since", "10m"]);
    assert_eq!(json_lines(&out).len(), 4);
    let out = autotool(&home, &["events", "--since", "someday"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

#[test]
fn events_follow_prints_new_decisions_as_they_are_made() {
    let (_t, home) = temp_home();
    let reg = Registry::open(&home).unwrap();
    create(&reg, "weather", "v1");
    let mut child = Command::new(env!("CARGO_BIN_EXE_autotool"))
        .args(["events", "--json", "--follow", "--since", "1h"])
        .env("AUTOTOOL_HOME", home.root())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (lines, seen) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    let first: Value =
        serde_json::from_str(&seen.recv_timeout(Duration::from_secs(10)).unwrap()).unwrap();
    assert_eq!(first["kind"], "created");
    let out = autotool(&home, &["tools", "retire", "weather"]);
    assert!(out.status.success(), "{out:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut followed = None;
    while Instant::now() < deadline {
        if let Ok(line) = seen.recv_timeout(Duration::from_millis(200)) {
            followed = Some(serde_json::from_str::<Value>(&line).unwrap());
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let followed = followed.expect("--follow printed nothing new after a retire");
    assert_eq!(followed["kind"], "state_changed", "{followed}");
    assert_eq!(followed["actor"], "cli", "{followed}");
}

#[test]
fn rollback_goes_back_to_a_trusted_version_and_keeps_the_baseline() {
    let (_t, home) = temp_home();
    let reg = Registry::open(&home).unwrap();
    create(&reg, "weather", "v1");
    // v1 met a smoke test; promoted, it joins the baseline.
    let met: autotool::verify::Obligation = serde_json::from_value(json!({
        "function": "run", "check": "smoke_test", "arguments": {"city": "Paris"},
        "answer": "sunny", "exact": true, "since_version": 1
    }))
    .unwrap();
    reg.ledger().record_met("weather", 1, &[met]).unwrap();
    reg.ledger()
        .set_state("weather", 1, State::Active, "5 successful calls in a row")
        .unwrap();
    create(&reg, "weather", "v2");
    create(&reg, "weather", "v3");
    let baseline = || {
        stdout(&autotool(
            &home,
            &["tools", "baseline", "weather", "--json"],
        ))
    };
    let before = baseline();
    assert!(before.contains("Paris"), "{before}");

    // Only a version that was trusted can be gone back to.
    let out = autotool(&home, &["tools", "rollback", "weather", "2"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("never trusted"),
        "{out:?}"
    );
    let out = autotool(&home, &["tools", "rollback", "weather", "9"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("has no version 9"),
        "{out:?}"
    );

    // Without VERSION: the newest trusted one before the current.
    let out = autotool(&home, &["tools", "rollback", "weather"]);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout(&out).contains("back at v1"), "{}", stdout(&out));
    let current = reg.get("weather").unwrap().unwrap();
    assert_eq!((current.version, current.state), (1, State::Active));
    assert_eq!(baseline(), before, "the baseline changed");
    let out = autotool(&home, &["events", "--json", "--tool", "weather"]);
    let rolled = json_lines(&out)
        .into_iter()
        .find(|e| e["kind"] == "rolled_back")
        .expect("no rolled_back event");
    assert_eq!(rolled["actor"], "cli");
    assert!(
        rolled["detail"]
            .as_str()
            .unwrap()
            .contains("from version 3 back to version 1")
    );

    // Back at its only trusted version there is nothing older to go to.
    let out = autotool(&home, &["tools", "rollback", "weather"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no earlier trusted"),
        "{out:?}"
    );
    // A trusted version whose file no longer holds its code is refused.
    let v3 = reg.get_version("weather", 3).unwrap().unwrap();
    reg.ledger()
        .set_state("weather", 3, State::Active, "x")
        .unwrap();
    std::fs::write(reg.file_of(&v3), "changed").unwrap();
    let out = autotool(&home, &["tools", "rollback", "weather", "3"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no longer holds the code"),
        "{out:?}"
    );
    assert_eq!(reg.get("weather").unwrap().unwrap().version, 1);
}

#[test]
fn a_pin_holds_the_current_version_until_unpinned_and_the_log_says_who() {
    let (_t, home) = temp_home();
    let reg = Registry::open(&home).unwrap();
    create(&reg, "weather", "v1");
    let out = autotool(&home, &["tools", "pin", "weather"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout(&out).contains("weather v1 is pinned"),
        "{}",
        stdout(&out)
    );
    let pin = reg.ledger().pin_of("weather").unwrap().unwrap();
    assert_eq!(pin.by, "cli");
    // Pinning again changes nothing; an unknown tool is refused.
    let out = autotool(&home, &["tools", "pin", "weather"]);
    assert!(
        stdout(&out).contains("was already pinned by cli"),
        "{out:?}"
    );
    assert_eq!(reg.ledger().pin_of("weather").unwrap(), Some(pin.clone()));
    let out = autotool(&home, &["tools", "pin", "nobody"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no tool named \"nobody\""),
        "{out:?}"
    );

    // Shown by `tools list` and `tools show`, text and JSON.
    let list: Value =
        serde_json::from_str(&stdout(&autotool(&home, &["tools", "list", "--json"]))).unwrap();
    assert_eq!(list[0]["pinned"]["by"], "cli", "{list}");
    assert!(list[0]["pinned"]["at"].as_str().unwrap().ends_with('Z'));
    let text = stdout(&autotool(&home, &["tools", "list"]));
    assert!(
        text.contains("(1 version, probation, pinned by cli)"),
        "{text}"
    );
    let show = stdout(&autotool(&home, &["tools", "show", "weather"]));
    assert!(
        show.contains("pinned by cli at ") && show.contains("`autotool tools unpin weather`"),
        "{show}"
    );
    let show: Value = serde_json::from_str(&stdout(&autotool(
        &home,
        &["tools", "show", "weather", "--json"],
    )))
    .unwrap();
    assert_eq!(show["pinned"]["by"], "cli", "{show}");

    // A new version is refused at commit (under the write lock), naming the pin and the way
    // out; the same code and description again is not a replacement.
    let refused = try_create(&reg, "weather", "v2").unwrap_err().to_string();
    assert!(
        refused.contains("weather is pinned by the user (pinned by cli at ")
            && refused.contains("`autotool tools unpin weather`"),
        "{refused}"
    );
    assert_eq!(reg.get("weather").unwrap().unwrap().version, 1);
    assert_eq!(create(&reg, "weather", "v1"), 2);

    // The library's prepare path refuses it before anything runs, and records who tried, once
    // per code and pin.
    let library =
        autotool::library::Library::new(autotool::library::Settings::default(), home.clone())
            .unwrap();
    let request = |tag: &str| autotool::library::CreateRequest {
        name: ToolName::parse("weather").unwrap(),
        code: code(tag),
        description: "a test tool".into(),
        smoke_test: None,
        thoroughness: Default::default(),
    };
    let host = Actor::host(Some("claude-code"), "stdio");
    for _ in 0..2 {
        let e = autotool::ledger::actor::sync_scope(host.clone(), || {
            library.prepare(request("v2")).unwrap_err()
        });
        assert!(
            matches!(e, autotool::library::CreateError::PinHeld(_)),
            "{e}"
        );
        assert!(
            e.to_string().contains("autotool tools unpin weather"),
            "{e}"
        );
    }
    assert!(library.prepare(request("v1")).is_ok());

    // A rollback is the user's own: allowed while pinned, and the pin then holds that version.
    reg.ledger()
        .set_state("weather", 1, State::Active, "5 successful calls in a row")
        .unwrap();
    let out = autotool(&home, &["tools", "rollback", "weather", "1"]);
    assert!(out.status.success(), "{out:?}");
    assert!(reg.ledger().pin_of("weather").unwrap().is_some());

    // Unpinned: the same new version is accepted (the control).
    let out = autotool(&home, &["tools", "unpin", "weather"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout(&out).contains("weather is unpinned (it was pinned by cli at "),
        "{}",
        stdout(&out)
    );
    let out = autotool(&home, &["tools", "unpin", "weather"]);
    assert!(stdout(&out).contains("was not pinned"), "{out:?}");
    assert!(library.prepare(request("v2")).is_ok());
    assert_eq!(create(&reg, "weather", "v2"), 3);

    // The log: who pinned, who was refused, who unpinned.
    let out = autotool(&home, &["events", "--json", "--tool", "weather"]);
    let events = json_lines(&out);
    let of = |kind: &str| -> Vec<&Value> { events.iter().filter(|e| e["kind"] == kind).collect() };
    let pinned = of("pinned");
    assert_eq!(pinned.len(), 1, "{events:#?}");
    assert_eq!(pinned[0]["actor"], "cli");
    assert!(
        pinned[0]["detail"]
            .as_str()
            .unwrap()
            .contains("version 1 pinned by the user (cli)")
    );
    let held = of("pin_held");
    assert_eq!(held.len(), 1, "once per code and pin: {events:#?}");
    assert_eq!(held[0]["actor"], "host:claude-code");
    assert_eq!(held[0]["surface"], "stdio");
    assert!(
        held[0]["detail"]
            .as_str()
            .unwrap()
            .contains("refused: version 2 is pinned by cli"),
        "{held:?}"
    );
    let unpinned = of("unpinned");
    assert_eq!(unpinned.len(), 1, "{events:#?}");
    assert_eq!(unpinned[0]["actor"], "cli");

    // Removing drops the pin with the tool: created again, nothing holds it.
    autotool(&home, &["tools", "pin", "weather"]);
    let out = autotool(&home, &["tools", "remove", "weather"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(reg.ledger().pin_of("weather").unwrap(), None);
    let out = autotool(&home, &["tools", "pin", "weather"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("weather was removed"),
        "{out:?}"
    );
    assert_eq!(create(&reg, "weather", "v4"), 4);
}

#[test]
fn logs_print_a_tools_stderr_redacted_escaped_and_bounded() {
    let (_t, home) = temp_home();
    let reg = Registry::open(&home).unwrap();
    create(&reg, "weather", "v1");
    let out = autotool(&home, &["tools", "logs", "weather"]);
    assert!(stdout(&out).contains("nothing to stderr yet"), "{out:?}");
    let path = home.tool_log("weather");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut older = path.clone().into_os_string();
    older.push(".1");
    std::fs::write(&older, "the oldest line\n".repeat(100)).unwrap();
    std::fs::write(
        &path,
        format!("Traceback: key {VALUE} refused\n\u{1b}]0;title\u{7}bell\nthe newest line\n"),
    )
    .unwrap();
    let out = autotool(&home, &["tools", "logs", "weather"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text.contains("the oldest line") && text.ends_with("the newest line\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!("[REDACTED:{KEY}]")) && !text.contains(VALUE),
        "{text}"
    );
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "{text}"
    );
    // Bounded: only the newest bytes, from a line start.
    let out = autotool(&home, &["tools", "logs", "weather", "--bytes", "20"]);
    assert_eq!(stdout(&out), "the newest line\n");
    let out = autotool(&home, &["tools", "logs", "nosuch"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}
