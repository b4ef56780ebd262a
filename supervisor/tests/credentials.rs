//! The key store and `autotool keys`: sources and their order, the opt-in file, allowlists,
//! values that never show, and the real Secret Service under `dbus-run-session`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use autotool::credentials::{
    CredError, EnvSource, KeyStore, Keychain, MemoryKeychain, OsKeychain, Secret, Source, Target,
};
use autotool::home::Home;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const FILE: Target = Target::File {
    reason: "the test opted in",
};

/// Values that break naive formats: `=`, spaces, newlines, NUL, bytes that are not UTF-8.
fn odd_values() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("EQUALS_KEY", b"a=b==c=".to_vec()),
        ("SPACES_KEY", b"  lead and trail  ".to_vec()),
        ("NEWLINES_KEY", b"line1\nline2\r\n\n".to_vec()),
        ("BINARY_KEY", b"\x00\xff\xfe\x80 bin \x00".to_vec()),
        ("UNICODE_KEY", "ünïcødé 🔑 #comment".as_bytes().to_vec()),
        ("HASH_KEY", b"# not a comment".to_vec()),
        ("BIG_KEY", (0..64 * 1024).map(|i| (i % 251) as u8).collect()),
    ]
}

fn store(dir: &Path, env: EnvSource, keychain: Arc<dyn Keychain>) -> KeyStore {
    KeyStore::with_parts(&Home::at(dir.join("home")), env, keychain)
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn file_store_round_trips_odd_values_in_a_0600_file() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(
        dir.path(),
        EnvSource::default(),
        Arc::new(MemoryKeychain::unavailable()),
    );
    for (name, value) in odd_values() {
        let added = s.add(name, &value, FILE).unwrap();
        assert_eq!(added.stored_in, Source::File);
    }
    for (name, value) in odd_values() {
        let (got, source) = s.get(name).unwrap().unwrap();
        assert_eq!(got.expose(), value.as_slice(), "{name}");
        assert_eq!(source, Source::File);
    }
    assert_eq!(mode(&s.credentials_path()), 0o600);
    assert_eq!(mode(&dir.path().join("home")), 0o700);
    // A second store (another process) reads the same.
    let again = store(
        dir.path(),
        EnvSource::default(),
        Arc::new(MemoryKeychain::unavailable()),
    );
    let names: Vec<String> = again.list().unwrap().into_iter().map(|k| k.name).collect();
    assert_eq!(names.len(), odd_values().len());
    // Replacing keeps one entry.
    s.add("EQUALS_KEY", b"new=value", FILE).unwrap();
    assert_eq!(
        s.get("EQUALS_KEY").unwrap().unwrap().0.expose(),
        b"new=value"
    );
    assert_eq!(s.list().unwrap().len(), odd_values().len());
    // No file in the way of the keychain was made.
    assert!(!s.keychain_index_path().exists());
}

#[test]
fn keychain_holds_values_and_the_index_only_names() {
    let dir = tempfile::tempdir().unwrap();
    let keychain = Arc::new(MemoryKeychain::new());
    let s = store(dir.path(), EnvSource::default(), keychain.clone());
    for (name, value) in odd_values() {
        assert_eq!(
            s.add(name, &value, Target::Keychain).unwrap().stored_in,
            Source::Keychain
        );
    }
    for (name, value) in odd_values() {
        let (got, source) = s.get(name).unwrap().unwrap();
        assert_eq!((got.expose(), source), (value.as_slice(), Source::Keychain));
        assert_eq!(
            keychain.get(name).unwrap().unwrap().expose(),
            value.as_slice()
        );
    }
    let index = std::fs::read(s.keychain_index_path()).unwrap();
    assert_eq!(mode(&s.keychain_index_path()), 0o600);
    for (name, value) in odd_values() {
        let index = String::from_utf8_lossy(&index);
        assert!(index.contains(name));
        assert!(
            !index.contains(&*String::from_utf8_lossy(&value[..4])),
            "{index}"
        );
    }
    assert!(!s.credentials_path().exists());
}

#[test]
fn environment_wins_over_keychain_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let keychain: Arc<dyn Keychain> = Arc::new(MemoryKeychain::new());
    let plain = store(dir.path(), EnvSource::default(), keychain.clone());
    plain.add("SERVICE_TOKEN", b"from-file", FILE).unwrap();
    plain.add("OTHER_TOKEN", b"from-file", FILE).unwrap();
    plain
        .add("OTHER_TOKEN", b"from-keychain", Target::Keychain)
        .unwrap();
    // The keychain took over OTHER_TOKEN and removed the file's copy.
    assert_eq!(
        plain.get("OTHER_TOKEN").unwrap().unwrap(),
        (Secret::new("from-keychain"), Source::Keychain)
    );

    let env = EnvSource::from_pairs([
        ("SERVICE_TOKEN", "from-env"),
        ("OTHER_TOKEN", "from-env-too"),
    ]);
    let s = store(dir.path(), env, keychain);
    assert_eq!(
        s.get("SERVICE_TOKEN").unwrap().unwrap(),
        (Secret::new("from-env"), Source::Env)
    );
    assert_eq!(
        s.get("OTHER_TOKEN").unwrap().unwrap(),
        (Secret::new("from-env-too"), Source::Env)
    );
    let list = s.list().unwrap();
    let service = list.iter().find(|k| k.name == "SERVICE_TOKEN").unwrap();
    assert_eq!(service.source, Some(Source::Env));
    assert_eq!(service.shadowed, vec![Source::File]);
    // Adding where the environment wins says so.
    let added = s.add("SERVICE_TOKEN", b"newer-file", FILE).unwrap();
    assert_eq!(added.shadowed_by.map(|s| s.0), Some(Source::Env));
    // The redactor learns every value, shadowed ones too.
    let (values, errors) = s.known_values();
    assert!(errors.is_empty(), "{errors:?}");
    let has = |v: &[u8]| values.iter().any(|(_, s)| s.expose() == v);
    assert!(has(b"from-env") && has(b"newer-file") && has(b"from-keychain"));
    let redactor = autotool::redact::Redactor::new(&values).unwrap();
    assert_eq!(
        redactor.redact("from-env newer-file from-keychain"),
        "[REDACTED:SERVICE_TOKEN] [REDACTED:SERVICE_TOKEN] [REDACTED:OTHER_TOKEN]"
    );
}

#[test]
fn only_key_like_environment_variables_are_keys() {
    let dir = tempfile::tempdir().unwrap();
    let keychain: Arc<dyn Keychain> = Arc::new(MemoryKeychain::new());
    store(dir.path(), EnvSource::default(), keychain.clone())
        .allow("PLAIN_NAME", &["api.example.com".to_owned()])
        .unwrap();
    let env = EnvSource::from_pairs([
        ("PATH", "/usr/bin"),
        ("HOME", "/root"),
        ("GITHUB_TOKEN", "ghp_abcdefgh"),
        ("TAVILY_API_KEY", "tvly-12345678"),
        ("MONKEY", "not a key: KEY is not a whole word"),
        ("LISTED_THING", "named in AUTOTOOL_KEYS"),
        ("PLAIN_NAME", "has an allowlist"),
        ("AUTOTOOL_KEYS", "LISTED_THING, OTHER"),
        ("AUTOTOOL_SECRET", "autotool's own"),
        ("EMPTY_TOKEN", ""),
        ("lower_token", "not a key name"),
    ]);
    let s = store(dir.path(), env, keychain);
    let names: Vec<String> = s.list().unwrap().into_iter().map(|k| k.name).collect();
    assert_eq!(
        names,
        [
            "GITHUB_TOKEN",
            "LISTED_THING",
            "PLAIN_NAME",
            "TAVILY_API_KEY"
        ]
    );
    assert!(s.get("PATH").unwrap().is_none());
    assert!(s.get("MONKEY").unwrap().is_none());
    assert_eq!(
        s.get("LISTED_THING").unwrap().map(|v| v.1),
        Some(Source::Env)
    );
    assert!(matches!(
        s.get("lower_token"),
        Err(CredError::InvalidName(_))
    ));
}

#[test]
fn no_keychain_and_no_opt_in_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(
        dir.path(),
        EnvSource::default(),
        Arc::new(MemoryKeychain::unavailable()),
    );
    let err = s
        .add("SOME_TOKEN", b"value-1234", Target::Keychain)
        .unwrap_err();
    let msg = err.to_string();
    for hint in [
        "dbus-run-session",
        "gnome-keyring-daemon",
        "--file",
        "AUTOTOOL_CREDENTIALS=file",
    ] {
        assert!(msg.contains(hint), "{msg}");
    }
    assert!(!msg.contains("value-1234"));
    // Nothing was written anywhere: no silent fallback.
    assert!(!s.credentials_path().exists());
    assert!(s.list().unwrap().is_empty());
}

#[test]
fn choosing_the_file_needs_an_explicit_opt_in() {
    assert_eq!(Target::choose(false, None).unwrap(), Target::Keychain);
    assert_eq!(
        Target::choose(false, Some("keychain")).unwrap(),
        Target::Keychain
    );
    assert!(matches!(
        Target::choose(true, None).unwrap(),
        Target::File { .. }
    ));
    assert!(matches!(
        Target::choose(false, Some("file")).unwrap(),
        Target::File { .. }
    ));
    assert!(matches!(
        Target::choose(false, Some("plaintext")),
        Err(CredError::BadSetting(_))
    ));
}

#[test]
fn remove_clears_both_stores_and_keeps_the_allowlist() {
    let dir = tempfile::tempdir().unwrap();
    let keychain = Arc::new(MemoryKeychain::new());
    let s = store(dir.path(), EnvSource::default(), keychain.clone());
    s.add("GONE_TOKEN", b"value-1234", Target::Keychain)
        .unwrap();
    s.allow("GONE_TOKEN", &["api.example.com".to_owned()])
        .unwrap();
    let removed = s.remove("GONE_TOKEN").unwrap();
    assert_eq!(removed.removed_from, vec![Source::Keychain]);
    assert!(keychain.get("GONE_TOKEN").unwrap().is_none());
    assert!(s.get("GONE_TOKEN").unwrap().is_none());
    let list = s.list().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].source, None);
    assert_eq!(
        list[0].allowed_hosts.as_deref(),
        Some(&["api.example.com".to_owned()][..])
    );
    assert!(s.remove("GONE_TOKEN").unwrap().removed_from.is_empty());
}

#[test]
fn allowlists_are_kept_in_canonical_form_in_a_0600_file() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(
        dir.path(),
        EnvSource::default(),
        Arc::new(MemoryKeychain::new()),
    );
    assert_eq!(s.allowlist("TAVILY_API_KEY").unwrap(), None);
    let hosts: Vec<String> = [
        "API.Tavily.com.",
        "*.tavily.com",
        "localhost:8443",
        "*.tavily.com",
    ]
    .map(String::from)
    .to_vec();
    let stored = s.allow("TAVILY_API_KEY", &hosts).unwrap();
    assert_eq!(stored, ["api.tavily.com", "*.tavily.com", "localhost:8443"]);
    assert_eq!(s.allowlist("TAVILY_API_KEY").unwrap().unwrap(), stored);
    assert_eq!(mode(&s.allowlists_path()), 0o600);
    // Every spelling of the loopback is one entry, always with its port.
    let loopback: Vec<String> = ["127.0.0.1:8080", "[::1]:8080", "LOCALHOST.:8080"]
        .map(String::from)
        .to_vec();
    assert_eq!(
        s.allow("TAVILY_API_KEY", &loopback).unwrap(),
        ["localhost:8080"]
    );
    for portless in ["localhost", "127.0.0.1", "[::1]"] {
        let err = s
            .allow("TAVILY_API_KEY", &[portless.to_owned()])
            .unwrap_err();
        assert!(
            err.to_string().contains("localhost:8080"),
            "{portless}: {err}"
        );
    }
    s.allow("TAVILY_API_KEY", &[]).unwrap();
    assert_eq!(s.allowlist("TAVILY_API_KEY").unwrap(), None);
    for bad in [
        "",
        "two words",
        "https://x.com/",
        "user@x.com",
        "a\nb",
        "a@b",
        "x.*.com",
        "*.10.0.0.1",
        "host:0",
        "a..b",
    ] {
        assert!(
            matches!(
                s.allow("TAVILY_API_KEY", &[bad.to_owned()]),
                Err(CredError::BadHost(_))
            ),
            "{bad:?}"
        );
    }
    assert!(matches!(
        s.allow("tavily", &[]),
        Err(CredError::InvalidName(_))
    ));
}

#[test]
fn cli_allow_stores_hosts_in_canonical_form_and_refuses_an_invalid_one_whole() {
    let dir = tempfile::tempdir().unwrap();
    let out = keys(
        dir.path(),
        &[
            "allow",
            "API_TOKEN",
            "API.Example.COM.",
            "*.Example.org",
            "api.example.com",
        ],
        b"",
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("api.example.com, *.example.org."),
        "{}",
        text(&out.stdout)
    );
    let s = KeyStore::with_parts(
        &Home::at(dir.path().join("autotool")),
        EnvSource::default(),
        Arc::new(MemoryKeychain::unavailable()),
    );
    assert_eq!(
        s.allowlist("API_TOKEN").unwrap().unwrap(),
        ["api.example.com", "*.example.org"]
    );

    // One invalid host refuses the whole command: the list on disk is the one before it.
    let before = std::fs::read(s.allowlists_path()).unwrap();
    let out = keys(
        dir.path(),
        &["allow", "API_TOKEN", "other.example.com", "a@b"],
        b"",
        &[],
    );
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("\"a@b\""), "{err}");
    assert!(err.contains("`@`"), "{err}");
    assert!(err.contains("Nothing was stored"), "{err}");
    assert_eq!(std::fs::read(s.allowlists_path()).unwrap(), before);
    let out = keys(dir.path(), &["allow", "NEW_TOKEN", "a@b"], b"", &[]);
    assert!(!out.status.success());
    assert_eq!(s.allowlist("NEW_TOKEN").unwrap(), None);
}

#[test]
fn the_stamp_changes_with_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(
        dir.path(),
        EnvSource::default(),
        Arc::new(MemoryKeychain::new()),
    );
    let mut stamps = vec![s.stamp()];
    s.add("A_TOKEN", b"value-1234", Target::Keychain).unwrap();
    stamps.push(s.stamp());
    s.add("B_TOKEN", b"value-5678", FILE).unwrap();
    stamps.push(s.stamp());
    s.allow("A_TOKEN", &["x.example".to_owned()]).unwrap();
    stamps.push(s.stamp());
    s.add("B_TOKEN", b"value-9999", FILE).unwrap();
    stamps.push(s.stamp());
    for pair in stamps.windows(2) {
        assert_ne!(pair[0], pair[1]);
    }
    assert_eq!(s.stamp(), *stamps.last().unwrap());
}

#[test]
fn values_are_checked_and_never_printed() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(
        dir.path(),
        EnvSource::default(),
        Arc::new(MemoryKeychain::new()),
    );
    assert!(matches!(
        s.add("A_TOKEN", b"", FILE),
        Err(CredError::EmptyValue { .. })
    ));
    assert!(matches!(
        s.add("A_TOKEN", b"abc", FILE),
        Err(CredError::ValueTooShort { .. })
    ));
    assert!(matches!(
        s.add("bad-name", b"value-1234", FILE),
        Err(CredError::InvalidName(_))
    ));
    let secret = Secret::new("hunter2-secret");
    assert_eq!(format!("{secret:?}"), "Secret(14 bytes)");
    let env = EnvSource::from_pairs([("X_TOKEN", "env-secret-value")]);
    assert!(!format!("{env:?}").contains("env-secret-value"));
}

// ---------------------------------------------------------------------------------------------
// The command line

const BIN: &str = env!("CARGO_BIN_EXE_autotool");

/// `autotool keys ARGS` with `stdin` piped in, in a clean environment with no keychain
/// reachable (unless `extra` says otherwise).
fn keys(home: &Path, args: &[&str], stdin: &[u8], extra: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.arg("keys")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("AUTOTOOL_HOME", home.join("autotool"))
        .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus")
        .envs(extra.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    // A command that refuses its arguments exits without reading: writing may then fail with
    // a broken pipe, which is not the test's business.
    let written = child.stdin.take().unwrap().write_all(stdin);
    assert!(
        written.is_ok()
            || written
                .as_ref()
                .is_err_and(|e| e.kind() == io::ErrorKind::BrokenPipe),
        "{written:?}"
    );
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn cli_file_round_trip_never_prints_a_value() {
    let dir = tempfile::tempdir().unwrap();
    let value = "s3cr3t value=with spaces";
    let opt_in = [("AUTOTOOL_CREDENTIALS", "file")];
    let out = keys(
        dir.path(),
        &["add", "CLI_TOKEN"],
        format!("{value}\n").as_bytes(),
        &opt_in,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(said.contains("AUTOTOOL_CREDENTIALS=file"), "{said}");
    assert!(said.contains("0600"), "{said}");

    let out = keys(
        dir.path(),
        &["allow", "CLI_TOKEN", "api.example.com", "*.example.org"],
        b"",
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));

    let list = keys(dir.path(), &["list"], b"", &[]);
    let json = keys(dir.path(), &["list", "--json"], b"", &[]);
    for out in [&list, &json] {
        assert!(out.status.success(), "{}", text(&out.stderr));
        let all = text(&out.stdout) + &text(&out.stderr);
        assert!(all.contains("CLI_TOKEN"), "{all}");
        assert!(all.contains("api.example.com"), "{all}");
        for piece in ["s3cr3t", "with spaces", "czNjcjN0"] {
            assert!(!all.contains(piece), "{all}");
        }
    }
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["keys"][0]["name"], "CLI_TOKEN");
    assert_eq!(doc["keys"][0]["source"], "file");
    assert_eq!(
        doc["keys"][0]["allowed_hosts"],
        serde_json::json!(["api.example.com", "*.example.org"])
    );
    assert!(text(&list.stdout).contains("file"));

    // The value round-trips exactly: one trailing newline dropped, nothing else.
    let s = KeyStore::with_parts(
        &Home::at(dir.path().join("autotool")),
        EnvSource::default(),
        Arc::new(MemoryKeychain::unavailable()),
    );
    assert_eq!(
        s.get("CLI_TOKEN").unwrap().unwrap().0.expose(),
        value.as_bytes()
    );

    let out = keys(dir.path(), &["remove", "CLI_TOKEN"], b"", &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("Removed CLI_TOKEN from the file"));
    assert!(s.get("CLI_TOKEN").unwrap().is_none());
}

#[test]
fn cli_add_with_file_flag_and_binary_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let value = b"\x00bin\xffary=\n\nvalue";
    let out = keys(dir.path(), &["add", "BIN_TOKEN", "--file"], value, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("--file"));
    let s = KeyStore::with_parts(
        &Home::at(dir.path().join("autotool")),
        EnvSource::default(),
        Arc::new(MemoryKeychain::unavailable()),
    );
    assert_eq!(s.get("BIN_TOKEN").unwrap().unwrap().0.expose(), value);
    assert_eq!(mode(&s.credentials_path()), 0o600);
}

#[test]
fn cli_without_a_keychain_or_opt_in_explains_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = keys(dir.path(), &["add", "NOPE_TOKEN"], b"value-123456", &[]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    for hint in ["no OS keychain is reachable", "dbus-run-session", "--file"] {
        assert!(err.contains(hint), "{err}");
    }
    assert!(!err.contains("value-123456"));
    assert!(!dir.path().join("autotool/credentials").exists());
}

#[test]
fn cli_never_takes_a_value_as_an_argument() {
    let dir = tempfile::tempdir().unwrap();
    let out = keys(
        dir.path(),
        &["add", "ARG_TOKEN", "value-on-argv"],
        b"",
        &[("AUTOTOOL_CREDENTIALS", "file")],
    );
    assert!(!out.status.success());
    assert!(!dir.path().join("autotool/credentials").exists());
    let out = keys(dir.path(), &["add", "lower"], b"value-1234", &[]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("not a key name"));
}

// ---------------------------------------------------------------------------------------------
// The real Secret Service: GNOME Keyring, unlocked, in a private D-Bus session

const HELPER_VAR: &str = "AUTOTOOL_TEST_KEYCHAIN_HELPER";
const SS_NAME: &str = "SECRET_SERVICE_TEST_KEY";
/// Odd bytes on purpose: `=`, spaces, an inner newline, NUL, not UTF-8.
const SS_VALUE: &[u8] = b"ss=value with spaces\nsecond line\x00\xff end";

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// Runs inside the D-Bus session started by `secret_service_round_trip`; does nothing (and
/// passes) anywhere else.
#[test]
fn keychain_helper_in_dbus_session() {
    let Ok(mode) = std::env::var(HELPER_VAR) else {
        return;
    };
    let store = KeyStore::open(&Home::from_env().unwrap());
    match mode.as_str() {
        "present" => {
            let (value, source) = store.get(SS_NAME).unwrap().unwrap();
            assert_eq!(source, Source::Keychain);
            assert_eq!(value.expose(), SS_VALUE);
            assert_eq!(OsKeychain.get(SS_NAME).unwrap().unwrap().expose(), SS_VALUE);
        }
        "absent" => {
            assert!(OsKeychain.get(SS_NAME).unwrap().is_none());
            assert!(store.get(SS_NAME).unwrap().is_none());
        }
        other => panic!("unknown helper mode {other}"),
    }
}

#[test]
fn secret_service_round_trip() {
    let missing: Vec<&str> = ["dbus-run-session", "gnome-keyring-daemon"]
        .into_iter()
        .filter(|p| !on_path(p))
        .collect();
    if !missing.is_empty() {
        println!(
            "SKIP secret_service_round_trip: {} not installed (Debian: apt-get install \
             dbus-daemon gnome-keyring)",
            missing.join(" and ")
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let runtime = root.join("run");
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    let value_file = root.join("value");
    // A trailing newline, which `keys add` drops.
    std::fs::write(&value_file, [SS_VALUE, b"\n"].concat()).unwrap();
    let test_exe = std::env::current_exe().unwrap();
    let script = r#"
        set -e
        echo -n autotool-test | gnome-keyring-daemon --unlock --components=secrets >/dev/null
        "$AUTOTOOL" keys add SECRET_SERVICE_TEST_KEY < "$VALUE_FILE" > "$OUT/add.txt"
        "$AUTOTOOL" keys list --json > "$OUT/list.json"
        "$AUTOTOOL" keys list > "$OUT/list.txt"
        AUTOTOOL_TEST_KEYCHAIN_HELPER=present "$TEST_EXE" --exact keychain_helper_in_dbus_session \
            --test-threads=1 --nocapture > "$OUT/present.txt" 2>&1
        "$AUTOTOOL" keys remove SECRET_SERVICE_TEST_KEY > "$OUT/remove.txt"
        AUTOTOOL_TEST_KEYCHAIN_HELPER=absent "$TEST_EXE" --exact keychain_helper_in_dbus_session \
            --test-threads=1 --nocapture > "$OUT/absent.txt" 2>&1
    "#;
    let mut child = Command::new("dbus-run-session")
        .args(["--", "sh", "-c", script])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", root)
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("AUTOTOOL_HOME", root.join("autotool"))
        .env("AUTOTOOL", BIN)
        .env("TEST_EXE", &test_exe)
        .env("VALUE_FILE", &value_file)
        .env("OUT", root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let pgid = child.id();
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            // The session and everything in it, by its process group.
            if let Some(pid) = rustix::process::Pid::from_raw(pgid as i32) {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
            let _ = child.wait();
            panic!("the Secret Service session did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = child.wait_with_output().unwrap();
    let read = |name: &str| std::fs::read_to_string(root.join(name)).unwrap_or_default();
    let report = format!(
        "stdout: {}\nstderr: {}\nadd: {}\nlist: {}\npresent: {}\nremove: {}\nabsent: {}",
        text(&output.stdout),
        text(&output.stderr),
        read("add.txt"),
        read("list.json"),
        read("present.txt"),
        read("remove.txt"),
        read("absent.txt"),
    );
    assert!(status.success(), "{report}");
    assert!(read("add.txt").contains("OS keychain"), "{report}");
    let list: serde_json::Value = serde_json::from_str(&read("list.json")).unwrap();
    assert_eq!(list["keys"][0]["name"], SS_NAME, "{report}");
    assert_eq!(list["keys"][0]["source"], "keychain", "{report}");
    assert!(read("present.txt").contains("1 passed"), "{report}");
    assert!(read("remove.txt").contains("keychain"), "{report}");
    assert!(read("absent.txt").contains("1 passed"), "{report}");
    for out in ["add.txt", "list.json", "list.txt", "remove.txt"] {
        assert!(!read(out).contains("ss=value"), "{out}: {report}");
    }
    // Nothing went to the file.
    assert!(!root.join("autotool/credentials").exists());
}
