//! Unit tests of the resolver: the layers as data in, the settings and their provenance out.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::units::rate;
use super::*;
use crate::tool::process::SandboxMode;
use std::time::Duration;

const HOME: &str = "/home/u/.autotool";

fn inputs(flags: &[(&str, &str)], env: &[(&str, &str)], file: Option<&str>) -> Inputs {
    Inputs {
        flags: flags
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        home: PathBuf::from(HOME),
        file: file.map_or(FileText::Absent, |t| FileText::Text(t.to_string())),
    }
}

fn ok(flags: &[(&str, &str)], env: &[(&str, &str)], file: Option<&str>) -> Config {
    resolve(&inputs(flags, env, file)).unwrap()
}

fn problems(flags: &[(&str, &str)], env: &[(&str, &str)], file: Option<&str>) -> Vec<Problem> {
    resolve(&inputs(flags, env, file)).unwrap_err().0
}

fn at(config: &Config, name: &str) -> (String, Layer, Option<String>) {
    let e = config.get(name).unwrap();
    (e.value.clone(), e.layer, e.source.clone())
}

const FILE: &str = "/home/u/.autotool/config.toml";

#[test]
fn nothing_given_is_settings_default_from_the_default_layer() {
    let config = ok(&[], &[], None);
    assert_eq!(
        format!("{:?}", config.settings()),
        format!("{:?}", Settings::default())
    );
    assert_eq!(config.settings().list_limit, 40);
    assert!(config.entries.iter().all(|e| e.layer == Layer::Default));
    assert_eq!(config.entries.len(), SETTINGS.len());
    assert!(!config.file_exists);
    assert_eq!(config.file, PathBuf::from(FILE));
}

#[test]
fn every_setting_is_named_once_and_every_default_reads_back() {
    let mut names: Vec<&str> = SETTINGS.iter().map(|s| s.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), SETTINGS.len());
    let defaults = Values::defaults(Path::new(HOME));
    for s in SETTINGS {
        assert!(s.env.starts_with("AUTOTOOL_"), "{}", s.name);
        if let Some(key) = s.key {
            assert_eq!(key, s.name);
        }
        // The default, given back through each layer, is the same value.
        let text = s.show(&defaults);
        let mut layers = vec![Layer::Env];
        if s.key.is_some() {
            layers.push(Layer::File);
        }
        for layer in layers {
            let mut v = Values::defaults(Path::new(HOME));
            let note = (s.apply)(&mut v, &text, layer);
            assert!(note.is_ok(), "{} {layer}: {note:?}", s.name);
            assert_eq!(s.show(&v), text, "{} {layer}", s.name);
        }
    }
}

#[test]
fn flag_beats_env_beats_file_beats_default() {
    let file = "call_timeout = 5\nidle_timeout = \"2m\"\nmax_output_bytes = \"64KiB\"\n";
    let env = [
        ("AUTOTOOL_CALL_TIMEOUT", "7"),
        ("AUTOTOOL_IDLE_TIMEOUT", "90"),
    ];
    let flags = [("call_timeout", "9")];

    let c = ok(&[], &[], Some(file));
    assert_eq!(
        at(&c, "call_timeout"),
        ("5s".into(), Layer::File, Some(format!("{FILE}:1")))
    );
    assert_eq!(
        at(&c, "idle_timeout"),
        ("120s".into(), Layer::File, Some(format!("{FILE}:2")))
    );
    assert_eq!(c.settings().max_output_bytes, 64 << 10);

    let c = ok(&[], &env, Some(file));
    assert_eq!(
        at(&c, "call_timeout"),
        (
            "7s".into(),
            Layer::Env,
            Some("AUTOTOOL_CALL_TIMEOUT".into())
        )
    );
    assert_eq!(
        c.get("call_timeout").unwrap().overrides,
        vec![format!("{FILE}:1")]
    );
    assert_eq!(c.settings().idle_timeout, Duration::from_secs(90));
    assert_eq!(at(&c, "max_output_bytes").1, Layer::File);

    let c = ok(&flags, &env, Some(file));
    assert_eq!(
        at(&c, "call_timeout"),
        ("9s".into(), Layer::Flag, Some("--call-timeout".into()))
    );
    assert_eq!(
        c.get("call_timeout").unwrap().overrides,
        vec![format!("{FILE}:1"), "AUTOTOOL_CALL_TIMEOUT".into()]
    );
    assert_eq!(c.settings().call_timeout, Duration::from_secs(9));
    assert_eq!(at(&c, "idle_timeout").1, Layer::Env);
    assert_eq!(at(&c, "list_limit"), ("40".into(), Layer::Default, None));
}

#[test]
fn sections_and_dotted_keys_set_limits_and_lifecycle() {
    let file = "list_limit = 12\n\n[limits]\nmemory_bytes = \"1GiB\"\nthreads = 32\n\n\
                [lifecycle]\npromote_after = 2\nquarantine_rate = 0.25\n";
    let c = ok(&[], &[("AUTOTOOL_LIFECYCLE_WINDOW", "8")], Some(file));
    let s = c.settings();
    assert_eq!(s.list_limit, 12);
    assert_eq!(s.limits.memory_bytes, 1 << 30);
    assert_eq!(s.limits.threads, 32);
    assert_eq!(s.lifecycle.promote_after, 2);
    assert_eq!(s.lifecycle.quarantine_rate, 0.25);
    assert_eq!(s.lifecycle.window, 8);
    assert_eq!(
        at(&c, "limits.memory_bytes"),
        ("1GiB".into(), Layer::File, Some(format!("{FILE}:4")))
    );
    assert_eq!(
        at(&c, "lifecycle.quarantine_rate").2,
        Some(format!("{FILE}:9"))
    );

    let dotted = "limits.open_files = 512\nlifecycle.quarantine_consecutive = 4\n";
    let s = ok(&[], &[], Some(dotted)).settings();
    assert_eq!(s.limits.open_files, 512);
    assert_eq!(s.lifecycle.quarantine_consecutive, 4);
}

#[test]
fn sandbox_keeps_its_rule_in_flag_and_env_and_is_checked_in_the_file() {
    for off in ["off", "0", "false", "no", " OFF "] {
        let c = ok(&[], &[("AUTOTOOL_SANDBOX", off)], None);
        assert_eq!(c.settings().sandbox, SandboxMode::Off, "{off:?}");
    }
    // A typo from the environment or the flag is strict, with a note saying so.
    let c = ok(
        &[],
        &[("AUTOTOOL_SANDBOX", "typo")],
        Some("sandbox = \"off\""),
    );
    assert_eq!(c.settings().sandbox, SandboxMode::Strict);
    assert_eq!(at(&c, "sandbox").1, Layer::Env);
    assert_eq!(
        c.notes(),
        vec!["sandbox: \"typo\" is not off, 0, false or no, so the sandbox stays strict"]
    );
    let c = ok(&[("sandbox", "of")], &[("AUTOTOOL_SANDBOX", "off")], None);
    assert_eq!(c.settings().sandbox, SandboxMode::Strict);
    // The flag beats the environment either way.
    let c = ok(
        &[("sandbox", "off")],
        &[("AUTOTOOL_SANDBOX", "strict")],
        None,
    );
    assert_eq!(c.settings().sandbox, SandboxMode::Off);
    assert!(c.notes().is_empty());
    // In the file: a boolean works, a typo is a problem.
    let c = ok(&[], &[], Some("sandbox = false"));
    assert_eq!(c.settings().sandbox, SandboxMode::Off);
    let p = problems(&[], &[], Some("sandbox = \"of\""));
    assert!(
        matches!(
            &p[..],
            [Problem::Value {
                setting: "sandbox",
                layer: Layer::File,
                ..
            }]
        ),
        "{p:?}"
    );
}

#[test]
fn consent_grants_only_on_the_exact_word() {
    let c = ok(&[], &[("AUTOTOOL_CONSENT", "dangerously-allow-all")], None);
    assert!(c.settings().allow_all_keys);
    let c = ok(&[], &[("AUTOTOOL_CONSENT", "yes")], None);
    assert!(!c.settings().allow_all_keys);
    assert_eq!(c.notes().len(), 1);
    let c = ok(
        &[("consent", "dangerously-allow-all")],
        &[],
        Some("consent = \"ask\""),
    );
    assert!(c.settings().allow_all_keys);
    assert_eq!(
        at(&c, "consent"),
        (
            "dangerously-allow-all".into(),
            Layer::Flag,
            Some("--dangerously-allow-all-tools".into())
        )
    );
    let p = problems(&[], &[], Some("consent = \"yes\""));
    assert!(
        matches!(
            &p[..],
            [Problem::Value {
                setting: "consent",
                ..
            }]
        ),
        "{p:?}"
    );
}

#[test]
fn bad_values_name_setting_layer_and_problem_in_every_layer() {
    let p = problems(&[("call_timeout", "soon")], &[], None);
    assert_eq!(
        p[0].to_string(),
        "call_timeout = \"soon\" (flag, --call-timeout) is not a duration: give whole seconds \
         (60) or a number and a unit (500ms, 30s, 10m, 1h)"
    );
    let p = problems(&[], &[("AUTOTOOL_LIST_LIMIT", "-1")], None);
    assert_eq!(
        p[0].to_string(),
        "list_limit = \"-1\" (env, AUTOTOOL_LIST_LIMIT) is not a whole number"
    );
    // 0 is allowed: no limit.
    assert_eq!(
        ok(&[], &[("AUTOTOOL_LIST_LIMIT", "0")], None)
            .settings()
            .list_limit,
        0
    );
    let p = problems(&[], &[], Some("\n[limits]\nmemory_bytes = \"2 GB\"\n"));
    assert_eq!(
        p[0].to_string(),
        format!(
            "limits.memory_bytes = \"2 GB\" (file, {FILE}:3) has an unknown unit `gb`: give \
             bytes (262144) or a number and a unit (256KiB, 64MiB, 2GiB)"
        )
    );
    // A value a stronger layer overrides is still checked, and every problem is reported.
    let p = problems(
        &[("call_timeout", "5")],
        &[("AUTOTOOL_LIFECYCLE_QUARANTINE_RATE", "1.5")],
        Some("call_timeout = -1\npoll_interval = \"1ms\"\nlauncher = \"bin/launcher\"\n"),
    );
    let named: Vec<(&str, Layer)> = p
        .iter()
        .map(|p| match p {
            Problem::Value { setting, layer, .. } => (*setting, *layer),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        named,
        vec![
            ("call_timeout", Layer::File),
            ("poll_interval", Layer::File),
            ("launcher", Layer::File),
            ("lifecycle.quarantine_rate", Layer::Env),
        ]
    );
    let shown = Problems(p).to_string();
    assert!(
        shown.starts_with("4 problems with the settings:\n- "),
        "{shown}"
    );
    // The wrong kind of TOML value.
    let p = problems(&[], &[], Some("idle_timeout = [1, 2]"));
    assert_eq!(
        p[0].to_string(),
        format!("idle_timeout = \"[1, 2]\" (file, {FILE}:1) is a list: give a number or a string")
    );
}

#[test]
fn unknown_keys_are_named_with_the_known_ones() {
    let p = problems(
        &[],
        &[],
        Some("call_timout = 5\n[limits]\ncpu = 1\n[extra]\n"),
    );
    let keys: Vec<&str> = p
        .iter()
        .map(|p| match p {
            Problem::UnknownKey { key, .. } => key.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(keys, ["call_timout", "limits.cpu", "extra"]);
    let first = p[0].to_string();
    assert!(
        first.starts_with(&format!(
            "{FILE}:1: unknown setting `call_timout` (did you mean `call_timeout`?). The file \
             may set: sandbox, consent, call_timeout,"
        )),
        "{first}"
    );
    assert!(first.contains("lifecycle.window"), "{first}");
    assert!(!first.contains(", home"), "{first}");
    // A key without its section is pointed at it.
    let p = problems(&[], &[], Some("memory_bytes = 1"));
    assert!(
        p[0].to_string()
            .contains("(did you mean `limits.memory_bytes`?)"),
        "{}",
        p[0]
    );
}

#[test]
fn environment_only_settings_are_refused_in_the_file() {
    let p = problems(&[], &[], Some("runtime = \"/opt/venv\"\nhome = \"/x\""));
    assert_eq!(
        p[0].to_string(),
        format!(
            "{FILE}:1: `runtime` is read from the environment only (commands that do not read \
             this file use it too); remove it and set AUTOTOOL_RUNTIME instead"
        )
    );
    assert!(matches!(
        &p[1],
        Problem::EnvOnly {
            env: "AUTOTOOL_HOME",
            ..
        }
    ));
    let c = ok(
        &[],
        &[
            ("AUTOTOOL_RUNTIME", "/opt/venv"),
            ("AUTOTOOL_CREDENTIALS", "File"),
            ("AUTOTOOL_KEYS", "MY_SERVICE, bad-name"),
        ],
        None,
    );
    assert_eq!(at(&c, "runtime").0, "/opt/venv");
    assert_eq!(at(&c, "credentials").0, "file");
    assert_eq!(at(&c, "key_names").0, "MY_SERVICE");
    assert_eq!(
        c.notes(),
        vec!["key_names: bad-name ignored: not key names (upper-case letters, digits and `_`)"]
    );
    assert_eq!(
        at(&ok(&[], &[], None), "runtime").0,
        "/home/u/.autotool/runtime"
    );
    let p = problems(&[], &[("AUTOTOOL_CREDENTIALS", "vault")], None);
    assert!(matches!(
        &p[..],
        [Problem::Value {
            setting: "credentials",
            ..
        }]
    ));
}

#[test]
fn a_malformed_file_names_its_line_and_the_fix() {
    let p = problems(&[], &[], Some("call_timeout = 5\nsandbox = off\n"));
    match &p[..] {
        [Problem::Malformed { path, line: 2, .. }] => assert_eq!(path, FILE),
        other => panic!("{other:?}"),
    }
    let shown = p[0].to_string();
    assert!(
        shown.starts_with(&format!("{FILE}, line 2, column 11: not valid TOML: ")),
        "{shown}"
    );
    assert!(shown.contains("text in double quotes"), "{shown}");
    // A duplicate key is malformed too.
    let p = problems(&[], &[], Some("list_limit = 1\nlist_limit = 2\n"));
    assert!(
        matches!(&p[..], [Problem::Malformed { line: 2, .. }]),
        "{p:?}"
    );
    let p = resolve(&Inputs {
        file: FileText::Unreadable("permission denied".into()),
        ..inputs(&[], &[], None)
    })
    .unwrap_err();
    assert_eq!(
        p.to_string(),
        format!(
            "cannot read {FILE}: permission denied; fix it, or move it away to use the defaults"
        )
    );
}

#[test]
fn empty_environment_values_count_as_unset() {
    let c = ok(
        &[],
        &[("AUTOTOOL_CALL_TIMEOUT", ""), ("AUTOTOOL_LAUNCHER", "")],
        Some("call_timeout = 3"),
    );
    assert_eq!(at(&c, "call_timeout").1, Layer::File);
    assert_eq!(at(&c, "launcher"), ("auto".into(), Layer::Default, None));
}

#[test]
fn durations_and_sizes_read_units_and_show_canonically() {
    let second = Duration::from_secs(1);
    assert_eq!(duration("60", second), Ok(Duration::from_secs(60)));
    assert_eq!(duration(" 2 m", second), Ok(Duration::from_secs(120)));
    assert_eq!(duration("1h", second), Ok(Duration::from_secs(3600)));
    assert_eq!(duration("1500ms", second), Ok(Duration::from_millis(1500)));
    assert_eq!(
        duration("0", second),
        Err(ValueError::TooShort { least: "1s".into() })
    );
    assert_eq!(
        duration("0", second).unwrap_err().to_string(),
        "is too short: the least is 1s"
    );
    assert!(duration("1.5s", second).is_err());
    assert!(duration("99999999999999999h", second).is_err());
    assert_eq!(show_duration(Duration::from_millis(1500)), "1500ms");
    assert_eq!(show_duration(Duration::from_secs(600)), "600s");

    assert_eq!(bytes("1024", 1), Ok(1024));
    assert_eq!(bytes("256KiB", 1), Ok(256 << 10));
    assert_eq!(bytes("64 mib", 1), Ok(64 << 20));
    assert_eq!(bytes("2G", 1), Ok(2 << 30));
    assert_eq!(
        bytes("100", 1024),
        Err(ValueError::TooSmall {
            least: "1KiB".into()
        })
    );
    assert_eq!(
        bytes("100", 1024).unwrap_err().to_string(),
        "is too small: the least is 1KiB"
    );
    assert_eq!(show_bytes(2 << 30), "2GiB");
    assert_eq!(show_bytes(1536), "1536");
    assert_eq!(show_bytes(3 << 20), "3MiB");

    assert!(rate("0").is_err());
    assert!(rate("NaN").is_err());
    assert_eq!(rate("1"), Ok(1.0));
}

#[test]
fn render_and_json_show_every_setting_with_its_layer() {
    let c = ok(
        &[],
        &[
            ("AUTOTOOL_IDLE_TIMEOUT", "30"),
            ("AUTOTOOL_SANDBOX", "maybe"),
        ],
        Some("call_timeout = 5\n"),
    );
    let mut out = Vec::new();
    render(&c, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], format!("config file: {FILE} (read)"));
    let row = |name: &str| {
        lines
            .iter()
            .find(|l| l.split_whitespace().next() == Some(name))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .unwrap()
    };
    assert_eq!(
        row("call_timeout"),
        ["call_timeout", "5s", "file", &format!("{FILE}:1")]
    );
    assert_eq!(
        row("idle_timeout"),
        ["idle_timeout", "30s", "env", "AUTOTOOL_IDLE_TIMEOUT"]
    );
    assert_eq!(row("list_limit"), ["list_limit", "40", "default"]);
    assert!(text.contains(
        "note: sandbox: \"maybe\" is not off, 0, false or no, so the sandbox stays strict"
    ));

    let json = to_json(&c);
    assert_eq!(json["file"]["path"], FILE);
    assert_eq!(json["file"]["exists"], true);
    let settings = json["settings"].as_array().unwrap();
    assert_eq!(settings.len(), SETTINGS.len());
    assert_eq!(
        settings[2],
        serde_json::json!({
            "name": "call_timeout",
            "value": "5s",
            "layer": "file",
            "where": format!("{FILE}:1"),
            "overrides": [],
            "note": null,
            "default": "60s",
            "flag": "--call-timeout",
            "env": "AUTOTOOL_CALL_TIMEOUT",
            "key": "call_timeout",
            "description": "wall-clock bound on one tool call",
        })
    );
}

#[test]
fn only_a_bad_flag_is_a_wrong_command_line() {
    let bad = |flags: &[(&str, &str)], env: &[(&str, &str)]| {
        Problems(problems(flags, env, None)).from_command_line()
    };
    assert!(bad(&[("call_timeout", "abc")], &[]));
    assert!(bad(
        &[("call_timeout", "abc")],
        &[("AUTOTOOL_LIST_LIMIT", "-1")]
    ));
    assert!(!bad(&[], &[("AUTOTOOL_CALL_TIMEOUT", "abc")]));
}

#[test]
fn synthesize_candidates_is_one_to_four_and_defaults_to_two() {
    let c = ok(&[], &[], None);
    assert_eq!(
        at(&c, "synthesize_candidates"),
        ("2".into(), Layer::Default, None)
    );
    let c = ok(
        &[],
        &[("AUTOTOOL_SYNTHESIZE_CANDIDATES", "1")],
        Some("synthesize_candidates = 4\n"),
    );
    assert_eq!(c.settings().synthesize_candidates, 1);
    assert_eq!(at(&c, "synthesize_candidates").1, Layer::Env);
    assert_eq!(
        ok(&[], &[], Some("synthesize_candidates = 4\n"))
            .settings()
            .synthesize_candidates,
        4
    );
    let p = problems(&[], &[("AUTOTOOL_SYNTHESIZE_CANDIDATES", "5")], None);
    assert_eq!(
        p[0].to_string(),
        "synthesize_candidates = \"5\" (env, AUTOTOOL_SYNTHESIZE_CANDIDATES) is too large: the \
         most is 4"
    );
    let p = problems(&[], &[], Some("synthesize_candidates = 0\n"));
    assert!(
        p[0].to_string().contains("is too small: the least is 1"),
        "{}",
        p[0]
    );
}
