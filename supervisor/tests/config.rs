//! `autotool config` and `serve` reading the same settings: each layer over the next, the JSON
//! shape, bad values in every layer refused by both with one message, unknown and malformed
//! files, and `serve` running with what the file says. A home that is a file, or that is not
//! made yet, as `config`, `serve`, `tools` and `doctor` see it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use autotool::client::{ConnectOptions, connect};
mod common;
use common::text;
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn binary() -> std::path::PathBuf {
    std::env::var_os("AUTOTOOL_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_autotool").into())
}

/// `autotool ARGS` on `home`, with only the `AUTOTOOL_*` variables in `env` (none inherited),
/// stdin closed; killed if it has not exited within 60 s.
fn run(home: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = Command::new(binary());
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("AUTOTOOL_") {
            command.env_remove(name);
        }
    }
    let mut child = command
        .args(args)
        .env("AUTOTOOL_HOME", home)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("autotool {args:?} did not exit within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn home_with(file: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), file).unwrap();
    home
}

/// `autotool config --json`, succeeding.
fn json(home: &Path, env: &[(&str, &str)]) -> Value {
    let out = run(home, env, &["config", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn setting<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {doc}"))
}

fn value_layer_where(doc: &Value, name: &str) -> (String, String, Value) {
    let s = setting(doc, name);
    (
        s["value"].as_str().unwrap().to_string(),
        s["layer"].as_str().unwrap().to_string(),
        s["where"].clone(),
    )
}

const FILE: &str = "call_timeout = 5\nidle_timeout = \"2m\"\n\n[lifecycle]\npromote_after = 2\n";

#[test]
fn each_layer_wins_over_the_next() {
    let home = home_with(FILE);
    let file = home.path().join("config.toml").display().to_string();

    let doc = json(home.path(), &[]);
    assert_eq!(
        value_layer_where(&doc, "call_timeout"),
        ("5s".into(), "file".into(), json!(format!("{file}:1")))
    );
    assert_eq!(
        value_layer_where(&doc, "lifecycle.promote_after"),
        ("2".into(), "file".into(), json!(format!("{file}:5")))
    );
    assert_eq!(
        value_layer_where(&doc, "list_limit"),
        ("40".into(), "default".into(), Value::Null)
    );

    let env = [
        ("AUTOTOOL_CALL_TIMEOUT", "7"),
        ("AUTOTOOL_LIFECYCLE_PROMOTE_AFTER", "9"),
        ("AUTOTOOL_LIST_LIMIT", "12"),
    ];
    let doc = json(home.path(), &env);
    assert_eq!(
        value_layer_where(&doc, "call_timeout"),
        ("7s".into(), "env".into(), json!("AUTOTOOL_CALL_TIMEOUT"))
    );
    assert_eq!(
        setting(&doc, "call_timeout")["overrides"],
        json!([format!("{file}:1")])
    );
    assert_eq!(
        value_layer_where(&doc, "lifecycle.promote_after").0,
        "9".to_string()
    );
    assert_eq!(
        value_layer_where(&doc, "list_limit"),
        ("12".into(), "env".into(), json!("AUTOTOOL_LIST_LIMIT"))
    );
    // Untouched by the environment, still from the file.
    assert_eq!(
        value_layer_where(&doc, "idle_timeout"),
        ("120s".into(), "file".into(), json!(format!("{file}:2")))
    );

    // The human table says the same.
    let out = run(home.path(), &env, &["config"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let row = |name: &str| -> Vec<String> {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        row("call_timeout"),
        ["call_timeout", "7s", "env", "AUTOTOOL_CALL_TIMEOUT"]
    );
    assert_eq!(
        row("idle_timeout"),
        ["idle_timeout", "120s", "file", &format!("{file}:2")]
    );
    assert_eq!(
        row("max_code_bytes"),
        ["max_code_bytes", "256KiB", "default"]
    );
    assert!(
        text.contains(&format!(
            "note: call_timeout: AUTOTOOL_CALL_TIMEOUT overrides {file}:1"
        )),
        "{text}"
    );
}

#[test]
fn the_json_names_every_layer_of_every_setting() {
    let home = tempfile::tempdir().unwrap();
    let doc = json(home.path(), &[]);
    let file = home.path().join("config.toml");
    assert_eq!(doc["file"], json!({"path": file, "exists": false}));
    let settings = doc["settings"].as_array().unwrap();
    assert_eq!(settings.len(), autotool::config::SETTINGS.len());
    for s in settings {
        let keys: Vec<&str> = s.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "default",
                "description",
                "env",
                "flag",
                "key",
                "layer",
                "name",
                "note",
                "overrides",
                "value",
                "where"
            ],
            "{s}"
        );
        assert!(s["env"].as_str().unwrap().starts_with("AUTOTOOL_"), "{s}");
    }
    assert_eq!(
        setting(&doc, "sandbox"),
        &json!({
            "name": "sandbox",
            "value": "strict",
            "layer": "default",
            "where": null,
            "overrides": [],
            "note": null,
            "default": "strict",
            "flag": "--sandbox",
            "env": "AUTOTOOL_SANDBOX",
            "key": "sandbox",
            "description": "`strict` confines every tool through the launcher; `off` runs \
                            tools as plain subprocesses (inside a container or VM)",
        })
    );
    assert_eq!(
        value_layer_where(&doc, "home"),
        (
            home.path().display().to_string(),
            "env".into(),
            json!("AUTOTOOL_HOME")
        )
    );
    assert_eq!(setting(&doc, "home")["key"], Value::Null);
}

#[test]
fn get_prints_one_value() {
    let home = home_with("[limits]\nmemory_bytes = 1073741824\n");
    let out = run(
        home.path(),
        &[],
        &["config", "--get", "limits.memory_bytes"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "1GiB\n");
    let out = run(home.path(), &[], &["config", "--get", "memory"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no setting is called \"memory\"; the settings are: sandbox,"),
        "{}",
        stderr(&out)
    );
}

/// The problem `config` reports, which `serve` must report in the same words.
fn refused(home: &Path, env: &[(&str, &str)], serve_args: &[&str]) -> String {
    let config = run(home, env, &["config"]);
    assert!(!config.status.success(), "config accepted it");
    let config_err = stderr(&config);
    let problem = config_err
        .strip_prefix("autotool config: ")
        .unwrap_or_else(|| panic!("{config_err}"))
        .to_string();
    let mut args = vec!["serve", "--sandbox", "off"];
    args.extend_from_slice(serve_args);
    let serve = run(home, env, &args);
    assert!(!serve.status.success(), "serve started");
    assert_eq!(stderr(&serve), format!("autotool serve: {problem}"));
    problem
}

#[test]
fn a_bad_value_in_each_layer_is_refused_by_config_and_serve_alike() {
    // The environment.
    let home = tempfile::tempdir().unwrap();
    let problem = refused(home.path(), &[("AUTOTOOL_IDLE_TIMEOUT", "soon")], &[]);
    assert_eq!(
        problem,
        "idle_timeout = \"soon\" (env, AUTOTOOL_IDLE_TIMEOUT) is not a duration: give whole \
         seconds (60) or a number and a unit (500ms, 30s, 10m, 1h)\n"
    );

    // The file, also where the environment overrides it.
    let home = home_with("\n[lifecycle]\nquarantine_rate = 2\n");
    let env = [("AUTOTOOL_LIFECYCLE_QUARANTINE_RATE", "0.3")];
    let problem = refused(home.path(), &env, &[]);
    let file = home.path().join("config.toml").display().to_string();
    assert_eq!(
        problem,
        format!(
            "lifecycle.quarantine_rate = \"2\" (file, {file}:3) is out of range: give a \
             fraction above 0 and at most 1, such as 0.5\n"
        )
    );

    // A flag (serve's only): refused before anything starts.
    let home = tempfile::tempdir().unwrap();
    let out = run(
        home.path(),
        &[],
        &["serve", "--sandbox", "off", "--max-output-bytes", "12"],
    );
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        "autotool serve: max_output_bytes = \"12\" (flag, --max-output-bytes) is too small: \
         the least is 1KiB\n"
    );

    // Several at once are all named.
    let home = home_with("sandbox = \"of\"\n");
    let problem = refused(home.path(), &[("AUTOTOOL_CREDENTIALS", "vault")], &[]);
    assert!(
        problem.starts_with("2 problems with the settings:\n- sandbox = \"of\" (file, "),
        "{problem}"
    );
    assert!(
        problem.contains("- credentials = \"vault\" (env, AUTOTOOL_CREDENTIALS)"),
        "{problem}"
    );
}

#[test]
fn unknown_keys_and_malformed_files_are_refused() {
    let home = home_with("call_timout = 5\n");
    let problem = refused(home.path(), &[], &[]);
    let file = home.path().join("config.toml").display().to_string();
    assert!(
        problem.starts_with(&format!(
            "{file}:1: unknown setting `call_timout` (did you mean `call_timeout`?). The file \
             may set: sandbox, consent, call_timeout, idle_timeout,"
        )),
        "{problem}"
    );

    let home = home_with("list_limit = 10\nsandbox = off\n");
    let problem = refused(home.path(), &[], &[]);
    let file = home.path().join("config.toml").display().to_string();
    assert!(
        problem.starts_with(&format!("{file}, line 2, column 11: not valid TOML: ")),
        "{problem}"
    );
    assert!(problem.contains("Fix that line"), "{problem}");
}

#[test]
fn a_home_that_is_a_file_is_named_not_a_config_toml_inside_it() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::write(&home, "").unwrap();
    let problem = refused(&home, &[], &[]);
    assert_eq!(
        problem,
        format!(
            "the autotool home {home:?} is a file, not a directory; move that file away, or \
             set AUTOTOOL_HOME (or --home) to a directory (the default is ~/.autotool)\n"
        )
    );
    for args in [&["tools", "list"][..], &["doctor"]] {
        let out = run(&home, &[], args);
        assert!(!out.status.success(), "{args:?}");
        let said = format!("{}{}", stdout(&out), stderr(&out));
        assert!(
            said.contains("is a file, not a directory"),
            "{args:?}: {said}"
        );
        assert!(!said.contains("config.toml"), "{args:?}: {said}");
    }
}

#[test]
fn doctor_on_a_home_not_made_yet_only_looks_and_says_so() {
    // HOME is the test's directory too, so nothing of this machine's user is read or written.
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("fresh");
    let launcher = std::env::var("AUTOTOOL_LAUNCHER").ok().or_else(|| {
        let beside = binary().with_file_name("autotool-launcher");
        beside
            .exists()
            .then(|| beside.to_string_lossy().into_owned())
    });
    let mut env = vec![("HOME", dir.path().to_str().unwrap())];
    if let Some(l) = &launcher {
        env.push(("AUTOTOOL_LAUNCHER", l));
    }
    let out = run(&home, &env, &["doctor", "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
    let check = |name: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
    };
    let home_line = check("home").unwrap();
    assert_eq!(home_line["status"], "ok", "{home_line}");
    assert!(
        home_line["detail"]
            .as_str()
            .unwrap()
            .contains("does not exist yet"),
        "{home_line}"
    );
    // The trial launch, where this machine can confine, ran without the home.
    match launcher {
        Some(_) if check("launcher").is_some_and(|c| c["status"] == "ok") => {
            let trial = check("trial launch").unwrap();
            assert_eq!(trial["status"], "ok", "{trial}");
        }
        _ => eprintln!("no launcher to try: only the home's absence is checked"),
    }
    assert!(!home.exists(), "doctor made the home");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "doctor left {left:?} in HOME");
}

#[test]
fn a_typo_in_autotool_sandbox_is_still_strict() {
    let home = tempfile::tempdir().unwrap();
    let env = [("AUTOTOOL_SANDBOX", "typo")];
    let out = run(home.path(), &env, &["config", "--get", "sandbox"]);
    assert_eq!(stdout(&out), "strict\n", "{}", stderr(&out));

    // `serve` confines, so with no launcher to confine with it refuses to start, saying why; the
    // control, an explicit `off`, starts (and ends when the closed stdin ends the session).
    let no_launcher = ("AUTOTOOL_LAUNCHER", "/nonexistent/autotool-launcher");
    let out = run(home.path(), &[env[0], no_launcher], &["serve"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("\"typo\" is not off, 0, false or no, so the sandbox stays strict"),
        "{err}"
    );
    assert!(err.contains("tools cannot be confined"), "{err}");
    let out = run(
        home.path(),
        &[("AUTOTOOL_SANDBOX", "off"), no_launcher],
        &["serve"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn serve_confines_with_the_launcher_the_file_names() {
    let home = home_with("launcher = \"/nonexistent/from-config-toml\"\n");
    let out = run(home.path(), &[], &["config", "--get", "launcher"]);
    assert_eq!(stdout(&out), "/nonexistent/from-config-toml\n");
    let out = run(home.path(), &[], &["serve"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("/nonexistent/from-config-toml"), "{err}");
    assert!(err.contains("tools cannot be confined"), "{err}");
}

/// `create_tool` with `code_bytes` of code, on a `serve --sandbox off` of `home`: the error
/// text (the size check comes before any Python runs).
async fn create_too_big(home: &Path, env: &[(&str, &str)], code_bytes: usize) -> String {
    let mut vars = vec![("AUTOTOOL_HOME".to_string(), home.display().to_string())];
    // Unset (empty counts as unset) whatever this process's environment says.
    vars.push(("AUTOTOOL_MAX_CODE_BYTES".into(), String::new()));
    vars.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let client = connect(ConnectOptions {
        binary: Some(binary()),
        args: vec!["serve".into(), "--sandbox".into(), "off".into()],
        env: vars,
        quiet: true,
        ..Default::default()
    })
    .await
    .unwrap();
    let code = format!("# {}\n", "x".repeat(code_bytes));
    let args = json!({"name": "big", "code": code});
    let result = client
        .call_tool("create_tool", args.as_object().cloned().unwrap())
        .await
        .unwrap();
    client.close().await.unwrap();
    assert_eq!(result.is_error, Some(true));
    text(&result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_runs_with_the_file_and_the_environment_over_it() {
    let home = home_with("max_code_bytes = \"1KiB\"\n");
    let out = run(home.path(), &[], &["config", "--get", "max_code_bytes"]);
    assert_eq!(stdout(&out), "1KiB\n");

    let err = create_too_big(home.path(), &[], 2000).await;
    assert!(err.contains("autotool accepts at most 1024 bytes"), "{err}");
    let err = create_too_big(home.path(), &[("AUTOTOOL_MAX_CODE_BYTES", "4KiB")], 5000).await;
    assert!(err.contains("autotool accepts at most 4096 bytes"), "{err}");
}
