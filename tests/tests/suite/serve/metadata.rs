//! A tool's own metadata, attacked: a confined tool reads its key at import and puts it into
//! its function's title, description, a parameter's default, title, description and examples,
//! its output's description and its annotations (`render_metadata.py`); another names a
//! parameter with its key (`render_parameter.py`). After `create_tool` and calls, no file under
//! `$AUTOTOOL_HOME` (manifest, database, WAL, logs), no answer to the host and no output of
//! `autotool tools list/show/baseline` (text and `--json`) holds the key in any form
//! ([`super::render::forms`]). The control: the same tools, confined the same way, spoken to by
//! the suite's raw client, list the key in every one of those places.
//!
//! And a value stored before it became a key: `tools show` redacts it on the way out once the
//! key is known (its control: the same command without the key prints it).

use super::render::{forms, found_in, leak_in, raw};
use super::{EXIT_BOUND, start, strict};
use autotool_tests::serve::{ServeHome, fixture};
use serde_json::{Value, json};
use std::path::Path;

const META: &str = "render_metadata.py";
const PARAM: &str = "render_parameter.py";
const KEY: &str = "mk5b2d8e4f6a0c9f3e1a7c";
const PARAM_KEY: &str = "pk0c9f3e1a7c5b2d8e4f6a";

/// Every file under `dir` (symlinks not followed), with its bytes.
fn files(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            files(&path, out);
        } else if kind.is_file() {
            out.push((path.display().to_string(), std::fs::read(&path).unwrap()));
        }
    }
}

/// Every file under the home that holds a form of `key`, with the form.
fn files_holding(home: &ServeHome, key: &str) -> (usize, Vec<String>) {
    let forms = forms(key);
    let mut all = Vec::new();
    files(home.path(), &mut all);
    let found = all
        .iter()
        .filter_map(|(path, bytes)| found_in(bytes, &forms).map(|f| format!("{path}: {f}")))
        .collect();
    (all.len(), found)
}

/// The `tools` outputs a user (or an agent with a shell) can print, each with its command line.
fn cli_outputs(home: &ServeHome, env: &[(&str, &std::ffi::OsStr)]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for args in [
        vec!["tools", "list"],
        vec!["tools", "list", "--json"],
        vec!["tools", "show", "meta"],
        vec!["tools", "show", "meta", "--json"],
        vec!["tools", "show", "param"],
        vec!["tools", "baseline", "meta", "--json"],
    ] {
        let (status, stdout, stderr) = home.cli_with(&args, env).unwrap();
        let shown = args.join(" ");
        assert!(
            status.success() || args.contains(&"param"),
            "{shown}: {stderr}"
        );
        out.push((shown, format!("{stdout}\n{stderr}")));
    }
    out
}

#[test]
fn a_key_computed_into_metadata_is_in_no_file_and_no_output() {
    let Some(serve) = strict() else { return };
    // Controls: confined, the tools list the key in every place named above.
    let mut control = raw(META, "META_API_KEY", KEY);
    control.initialize().unwrap();
    let listed = control.request("tools/list", json!({})).unwrap();
    assert!(
        listed.to_string().matches(KEY).count() >= 7,
        "control: {listed}"
    );
    drop(control);
    let mut control = raw(PARAM, "PARAM_API_KEY", PARAM_KEY);
    control.initialize().unwrap();
    let listed = control.request("tools/list", json!({})).unwrap();
    assert!(
        listed["tools"][0]["inputSchema"]["properties"]
            .get(PARAM_KEY)
            .is_some(),
        "control: {listed}"
    );
    drop(control);

    let home = ServeHome::new().unwrap();
    let serve = serve
        .arg("--dangerously-allow-all-tools")
        .env("META_API_KEY", KEY)
        .env("PARAM_API_KEY", PARAM_KEY);
    let mut server = start(&serve, &home);
    let created = server
        .call_result(
            "create_tool",
            json!({"name": "meta", "code": fixture(META).unwrap(), "verify": "quick",
                   "smoke_test": {"function": "lookup", "arguments": {}}}),
        )
        .unwrap();
    assert!(!created.is_error, "{}{}", created.text, server.context());
    assert!(
        created
            .text
            .contains("Looks a word up with the key [REDACTED:META_API_KEY]"),
        "{}",
        created.text
    );
    let refused = server
        .call_result(
            "create_tool",
            json!({"name": "param", "code": fixture(PARAM).unwrap(), "verify": "quick"}),
        )
        .unwrap();
    assert!(refused.is_error, "{}", refused.text);
    assert!(
        refused
            .text
            .contains("has a parameter named \"[REDACTED:PARAM_API_KEY]\""),
        "{}",
        refused.text
    );
    // Calls by name and through run_tool (rows in the ledger), the tool list and a search.
    let mut answers = vec![json!(created.text), json!(refused.text)];
    for (name, arguments) in [
        ("meta__lookup", json!({})),
        ("meta__lookup", json!({"word": "tea"})),
        (
            "run_tool",
            json!({"tool": "meta", "function": "lookup", "arguments": {}}),
        ),
        ("search_tools", json!({"query": "look a word up"})),
    ] {
        let got = server
            .request("tools/call", json!({"name": name, "arguments": arguments}))
            .unwrap()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        answers.push(got);
    }
    answers.push(server.request_ok("tools/list", json!({})).unwrap());
    for got in &answers {
        for key in [KEY, PARAM_KEY] {
            assert_eq!(leak_in(got, key), None, "{got}");
        }
    }
    let listed = answers.last().unwrap().to_string();
    assert!(listed.contains("meta__lookup"), "{listed}");
    assert!(listed.contains("[REDACTED:META_API_KEY]"), "{listed}");

    // Every file of the home while the server runs (the WAL holds the newest rows), and after it
    // stopped; every `tools` output, with and without the keys in the environment (without
    // them the CLI cannot redact: what it prints is what was stored).
    let check_files = |when: &str| {
        for key in [KEY, PARAM_KEY] {
            let (count, holding) = files_holding(&home, key);
            assert!(count >= 4, "{when}: only {count} files under the home");
            assert!(holding.is_empty(), "{when}: {holding:#?}");
        }
    };
    check_files("while serving");
    let keys = [
        ("META_API_KEY", std::ffi::OsStr::new(KEY)),
        ("PARAM_API_KEY", std::ffi::OsStr::new(PARAM_KEY)),
    ];
    for env in [&keys[..], &[]] {
        for (shown, output) in cli_outputs(&home, env) {
            for key in [KEY, PARAM_KEY] {
                let got = Value::String(output.clone());
                assert_eq!(leak_in(&got, key), None, "{shown}: {output}");
            }
            if shown == "tools show meta" {
                assert!(output.contains("[REDACTED:META_API_KEY]"), "{output}");
            }
        }
    }
    let (status, log) = server.finish(EXIT_BOUND).unwrap();
    assert!(status.success(), "{log}");
    assert_eq!(leak_in(&Value::String(log), KEY), None);
    check_files("after serve exited");
}

/// A value in a tool's description before any key held it: stored as it was (it was no key
/// then), and redacted by `tools show` once a key holds it.
#[test]
fn a_value_stored_before_it_became_a_key_is_redacted_on_the_way_out() {
    let Some(serve) = strict() else { return };
    const LATER: &str = "lt7c1e9a3f5b0d2e8a4c6f";
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve, &home);
    let code = fixture(super::HEALTHY_FILE).unwrap();
    let created = server
        .call_result(
            "create_tool",
            json!({"name": "later", "code": code, "verify": "quick",
                   "description": format!("catalogue {LATER}")}),
        )
        .unwrap();
    assert!(!created.is_error, "{}", created.text);
    drop(server);
    // Control: with no key holding it, `tools show` prints the stored value.
    for args in [
        &["tools", "show", "later"][..],
        &["tools", "show", "later", "--json"],
    ] {
        let (_, stdout, stderr) = home.cli(args).unwrap();
        assert!(stdout.contains(LATER), "control {args:?}: {stdout}{stderr}");
        let (status, stdout, stderr) = home
            .cli_with(args, &[("LATER_API_KEY", std::ffi::OsStr::new(LATER))])
            .unwrap();
        assert!(status.success(), "{stderr}");
        assert!(!stdout.contains(LATER), "{args:?}: {stdout}");
        assert!(
            stdout.contains("[REDACTED:LATER_API_KEY]"),
            "{args:?}: {stdout}"
        );
        if args.contains(&"--json") {
            let _: Value = serde_json::from_str(&stdout).unwrap();
        }
    }
}
