//! Text from outside drives no terminal, through the real binary: a tool's description as a
//! publisher or a model wrote it (escape sequences that set the title, erase the line, conceal
//! text; a right-to-left override; a line that passes for the report's own), an event quoting a
//! registry, an error quoting what the user typed. Each printed by `tools list`, `tools show`,
//! `events` (text and JSON) and an error; none reaches the terminal as a control character.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use autotool::home::Home;
use autotool::ledger::Event;
use autotool::registry::{FunctionSpec, Manifest, Registry};
use autotool_policy::names::ToolName;
use serde_json::{Value, json};
use std::process::{Command, Output};

/// What a hostile registry or model puts in a description.
const HOSTILE: &str = "Weather\u{1b}]0;pwned\u{7}\u{1b}[2K\u{1b}[8m concealed\u{1b}[0m\rforged \
                       \u{202e}txt.exe\u{9b}31m\nkeys: none\napprovals: API_KEY via cli";

fn autotool(home: &Home, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_autotool"))
        .args(args)
        .env("AUTOTOOL_HOME", home.root())
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

/// Whether `bytes` hold anything a terminal would act on or hide text with.
fn drives_terminal(bytes: &[u8]) -> bool {
    String::from_utf8_lossy(bytes)
        .chars()
        .any(|c| c != '\n' && c != '\t' && autotool::terminal::is_unsafe(c))
}

#[test]
fn outside_text_is_printed_as_data() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::at(dir.path().join("home"));
    let reg = Registry::open(&home).unwrap();
    let staged = reg
        .stage(
            &ToolName::parse("weather").unwrap(),
            "from mcp.server.mcpserver import MCPServer\nmcp = MCPServer('t')\n",
        )
        .unwrap();
    let function: FunctionSpec = serde_json::from_value(json!({
        "name": "run", "description": HOSTILE, "input_schema": {"type": "object"}
    }))
    .unwrap();
    reg.commit(
        staged,
        Manifest {
            description: HOSTILE.into(),
            required_env: Vec::new(),
            functions: vec![function],
            packages: None,
            uses: Vec::new(),
            reach: Default::default(),
        },
    )
    .unwrap();
    reg.event(
        Some("weather"),
        Event::PullRefused,
        &format!("oci://r/t: the artifact's type is {HOSTILE}"),
    )
    .unwrap();
    // Control: the description is kept as given, controls and all.
    let stored = reg.get("weather").unwrap().unwrap().description;
    assert!(drives_terminal(stored.as_bytes()), "{stored:?}");

    for args in [
        &["tools", "list"][..],
        &["tools", "show", "weather"],
        &["events"],
        &["tools", "list", "--json"],
        &["tools", "show", "weather", "--json"],
        &["events", "--json"],
    ] {
        let out = autotool(&home, args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        assert!(!drives_terminal(&out.stdout), "{args:?}: {out:?}");
        assert!(!drives_terminal(&out.stderr), "{args:?}: {out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        // Escaped where it stood (in `events --json`, the stored escape escaped once more).
        assert!(text.contains(r"\u001b]0;pwned"), "{args:?}: {text}");
        // No line of the description passes for one of the report's own.
        assert!(
            !text.lines().any(|l| l.starts_with("keys: none")),
            "{args:?}: {text}"
        );
    }
    // JSON stays valid and means the same: the escapes are JSON's own.
    let out = autotool(&home, &["tools", "list", "--json"]);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list[0]["description"], HOSTILE);
    let show = String::from_utf8_lossy(&autotool(&home, &["tools", "show", "weather"]).stdout)
        .into_owned();
    assert!(show.contains("\n  keys: none\n"), "{show}");

    // An error quoting what it was given.
    let out = autotool(&home, &["tools", "show", "nobody\u{1b}[2J\u{1b}]0;x\u{7}"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(!drives_terminal(&out.stderr), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nobody"),
        "{out:?}"
    );
}

/// Run `args` with standard output a pipe whose reader is gone.
fn into_closed_pipe(home: &Home, args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    Command::new(env!("CARGO_BIN_EXE_autotool"))
        .args(args)
        .env("AUTOTOOL_HOME", home.root())
        .env_remove("RUST_LOG")
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn output_into_a_closed_pipe_is_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::at(dir.path().join("home"));
    Registry::open(&home).unwrap();
    for args in [
        &["tools", "list"][..],
        &["tools", "list", "--json"],
        &["keys", "list"],
        &["events"],
        &["config"],
        &["doctor", "--json"],
    ] {
        let out = into_closed_pipe(&home, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !stderr.contains("Broken pipe"),
            "autotool {args:?} into a closed pipe: {:?}\n{stderr}",
            out.status
        );
    }
    // Control: the same commands print when the pipe is read.
    let read = autotool(&home, &["tools", "list"]);
    assert!(read.status.success() && !read.stdout.is_empty());
}
