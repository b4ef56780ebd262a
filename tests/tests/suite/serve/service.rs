//! One supervisor for every host: `autotool serve --transport http` on the home's unix socket,
//! with hosts reaching it through `autotool connect` (the stdio bridge) in both eras; tools,
//! list changes and consent questions cross the bridge; the systemd unit `autotool service
//! install` writes passes `systemd-analyze verify`.

use super::keys::{SECRET, TOOL, fake_api};
use super::{HEALTHY_FILE, finish, strict};
use autotool_tests::serve::{Serve, ServeHome, Server, fixture};
use serde_json::{Value, json};
use std::ffi::OsStr;
use std::path::Path;
use std::time::{Duration, Instant};

/// The service on `home`'s socket (strict), once it answers.
fn service(serve: Serve, home: &ServeHome) -> Server {
    let socket = home.path().join("service.sock");
    let server = serve
        .arg("--transport")
        .arg("http")
        .arg("--listen")
        .arg(&format!("unix:{}", socket.display()))
        .start(home)
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(
            Instant::now() < deadline,
            "the service never answered on {}: {}",
            socket.display(),
            server.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    server
}

/// A host spawning `autotool connect` on `home`.
fn bridge(home: &ServeHome) -> Server {
    Serve::new(autotool_tests::serve::Sandbox::Strict)
        .instead(&["connect"])
        .start(home)
        .unwrap()
}

fn meta(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "autotool-tests", "version": "0"},
    })
}

fn names(list: &Value) -> Vec<String> {
    list["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn hosts_of_both_eras_share_one_service_through_connect() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let port = fake_api();
    let service = service(
        serve
            .env("FAKE_API_KEY", SECRET)
            .env("FAKE_API_BASE", &format!("http://localhost:{port}")),
        &home,
    );

    // Host A: the older era, able to ask its user.
    let mut a = bridge(&home);
    a.initialize_with(json!({"elicitation": {"form": {}}}))
        .unwrap();
    let created = a
        .call_result(
            "create_tool",
            json!({"name": "healthy", "code": fixture(HEALTHY_FILE).unwrap(), "verify": "quick"}),
        )
        .unwrap();
    assert!(!created.is_error, "{}{}", created.text, service.stderr());

    // Host B: 2026-07-28, no handshake; it sees A's tool and calls it.
    let mut b = bridge(&home);
    let list = b
        .request_ok("tools/list", json!({"_meta": meta(json!({}))}))
        .unwrap();
    assert!(names(&list).contains(&"healthy__add".to_string()), "{list}");
    let sum = b
        .call_modern(
            "healthy__add",
            json!({"a": 2, "b": 40}),
            json!({}),
            json!({}),
        )
        .unwrap()
        .unwrap();
    assert_eq!(sum["content"][0]["text"], "42", "{sum}");

    // B creates a tool: A hears of it across the bridge.
    let r = b
        .call_modern(
            "create_tool",
            json!({"name": "second", "code": fixture(HEALTHY_FILE).unwrap(), "verify": "quick"}),
            json!({}),
            json!({}),
        )
        .unwrap()
        .unwrap();
    assert_ne!(r["isError"], true, "{r}");
    let heard = a.collect(Duration::from_secs(3)).unwrap();
    assert!(
        heard
            .iter()
            .any(|m| m["method"] == "notifications/tools/list_changed"),
        "A was not told of B's tool: {heard:?}"
    );

    // A consent question travels to A and its answer back.
    let (outcome, asked) = a
        .call_answering(
            "create_tool",
            json!({"name": "fake", "code": TOOL}),
            |_| json!({"action": "accept", "content": {"allow": true}}),
        )
        .unwrap();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let created = outcome.unwrap();
    assert!(!created.is_error, "{}", created.text);
    let echoed = a.call_text("fake__echo", json!({})).unwrap();
    assert!(echoed.contains("[REDACTED:FAKE_API_KEY]"), "{echoed}");
    assert!(!echoed.contains("s3cr3t"), "{echoed}");

    finish(a);
    finish(b);
    drop(service);
}

#[test]
fn connect_without_a_service_says_how_to_start_one() {
    let home = ServeHome::new().unwrap();
    let (status, out, err) = home.cli(&["connect"]).unwrap();
    assert!(!status.success(), "{out}{err}");
    assert!(err.contains("autotool service install"), "{err}");
    assert!(out.is_empty(), "connect wrote to stdout: {out}");
}

#[test]
fn the_service_unit_is_written_once_and_verifies() {
    let home = ServeHome::new().unwrap();
    let config = tempfile::tempdir().unwrap();
    let runtime_dir = tempfile::tempdir().unwrap();
    let env: [(&str, &OsStr); 2] = [
        ("XDG_CONFIG_HOME", config.path().as_os_str()),
        ("XDG_RUNTIME_DIR", runtime_dir.path().as_os_str()),
    ];
    let (status, out, err) = home
        .cli_with(&["service", "install", "--no-start"], &env)
        .unwrap();
    assert!(status.success(), "{out}{err}");
    let unit = config.path().join("systemd/user/autotool.service");
    let text = std::fs::read_to_string(&unit).unwrap();
    let socket = home.path().join("service.sock");
    assert!(text.contains("\"--transport\" \"http\""), "{text}");
    // On 127.0.0.1 it mounts the console (`autotool console --url` gives its URL).
    assert!(text.contains("\"--console\"\n"), "{text}");
    assert!(
        text.contains(&format!("\"unix:{}\"", socket.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!("AUTOTOOL_HOME={}", home.path().display())),
        "{text}"
    );
    // The token the service will want exists, private.
    let token = home.path().join("service-token");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&token).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    // Twice: nothing changes.
    let (status, out, _) = home
        .cli_with(&["service", "install", "--no-start"], &env)
        .unwrap();
    assert!(status.success());
    assert!(out.contains("unchanged"), "{out}");
    assert_eq!(std::fs::read_to_string(&unit).unwrap(), text);

    verify_unit(&unit, runtime_dir.path());
    // Control: the same check finds a broken unit.
    let broken = config.path().join("systemd/user/broken.service");
    std::fs::write(
        &broken,
        text.replace("ExecStart=\"", "ExecStart=\"does-not-exist-"),
    )
    .unwrap();
    assert!(
        !unit_complaints(&broken, runtime_dir.path())
            .unwrap_or_else(|| "skipped".into())
            .is_empty(),
        "systemd-analyze did not notice a broken unit"
    );
    std::fs::remove_file(&broken).unwrap();

    // Not running: status says so and exits non-zero.
    let (status, out, _) = home.cli_with(&["service", "status"], &env).unwrap();
    assert!(!status.success());
    assert!(
        out.contains("installed") && out.contains("not answering"),
        "{out}"
    );
    // doctor warns about an installed service that does not answer, with the fix; tools can
    // still run (serve does not need the service), so it is no FAIL and the exit stays 0.
    let (status, out, _) = home.cli_with(&["doctor", "--json"], &env).unwrap();
    assert!(status.success(), "{out}");
    let report: Value = serde_json::from_str(&out).unwrap();
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "service")
        .cloned()
        .unwrap_or_default();
    assert_eq!(check["status"], "warn", "{check}");
    assert!(
        check["fix"]
            .as_str()
            .unwrap_or("")
            .contains("systemctl --user"),
        "{check}"
    );
    let (status, out, err) = home.cli_with(&["service", "uninstall"], &env).unwrap();
    assert!(status.success(), "{out}{err}");
    assert!(!unit.exists());
    let (_, out, _) = home.cli_with(&["doctor", "--json"], &env).unwrap();
    assert!(out.contains("not installed (optional"), "{out}");
}

/// What `systemd-analyze verify --user` says about `unit` on stderr (it exits 0 even on a bad
/// unit, so the text is what counts); `None` when it is not installed (a failure under CI).
fn unit_complaints(unit: &Path, runtime_dir: &Path) -> Option<String> {
    match std::process::Command::new("systemd-analyze")
        .args(["verify", "--user"])
        .arg(unit)
        .env("XDG_RUNTIME_DIR", runtime_dir)
        .output()
    {
        Ok(out) => Some(String::from_utf8_lossy(&out.stderr).trim().to_string()),
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "systemd-analyze is missing in CI: {e}"
            );
            println!("SKIP systemd-analyze verify: {e} (install Debian's systemd package)");
            None
        }
    }
}

fn verify_unit(unit: &Path, runtime_dir: &Path) {
    if let Some(stderr) = unit_complaints(unit, runtime_dir) {
        assert!(
            stderr.is_empty(),
            "systemd-analyze verify complained about the unit:\n{stderr}\n{}",
            std::fs::read_to_string(unit).unwrap_or_default()
        );
    }
}
