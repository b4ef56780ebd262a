//! Keys, egress and redaction through `autotool serve`, end to end: a confined tool declares a
//! key, reaches a fake API on the host's loopback through its egress proxy, and the key it
//! echoes back arrives redacted in every form; a request to a host outside the key's allowlist
//! is refused with the reason and recorded; a key the user lacks is named with the command to
//! add it; a host that cannot ask for consent gets no tool holding the key.
//!
//! No way back into autotool: a tool holding a key whose list names the port still never
//! reaches a running `serve --transport http`, nor the host-side proxy of another serve's
//! unconfined tool; the same port, once it is not autotool's, is reached (the control).

use super::super::network::{Catcher, LEAK_VALUE, allow, create_deliver, deliver};
use super::{finish, protocol_only, start, strict};
use autotool_tests::serve::{Sandbox, Serve, ServeHome, Server};
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;

/// A value with a space, a slash and an `@`, so its URL-encoded and raw forms differ.
pub(super) const SECRET: &str = "s3cr3t-v@lue/with spaces";

/// A fake API on 127.0.0.1 that echoes the query string and the Authorization header back.
pub(super) fn fake_api() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(16) {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            let _ = reader.read_line(&mut request_line);
            let mut auth = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.strip_prefix("Authorization: ") {
                    auth = v.trim().to_string();
                }
            }
            let body = format!("line={} auth={auth}", request_line.trim());
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.flush();
            let mut rest = Vec::new();
            let _ = reader.read_to_end(&mut rest);
        }
    });
    port
}

pub(super) const TOOL: &str = r#"import json, os, urllib.parse, urllib.request
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

REQUIRED_ENV = ["FAKE_API_KEY"]
mcp = MCPServer("fake")

@mcp.tool()
def echo() -> str:
    key = os.environ.get("FAKE_API_KEY", "")
    url = os.environ["FAKE_API_BASE"] + "/echo?" + urllib.parse.urlencode({"key": key})
    req = urllib.request.Request(url, headers={"Authorization": key})
    answer = urllib.request.urlopen(req, timeout=10).read().decode()
    return json.dumps({"answer": answer, "raw": key})

@mcp.tool()
def leak_in_error() -> str:
    raise ToolError("upstream rejected " + os.environ.get("FAKE_API_KEY", ""))

@mcp.tool()
def leak_in_traceback() -> str:
    key = os.environ.get("FAKE_API_KEY", "")
    raise RuntimeError("unexpected " + key + " " + urllib.parse.quote(key) + " " + json.dumps({"k": key}))

@mcp.tool()
def elsewhere() -> str:
    try:
        return urllib.request.urlopen("http://other.example.org/x", timeout=10).read().decode()
    except Exception as e:
        return "refused: " + str(e)

if __name__ == "__main__":
    mcp.run()
"#;

#[test]
fn a_key_reaches_only_allowed_hosts_and_never_the_model() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let port = fake_api();
    let (status, out, err) = home
        .cli(&["keys", "allow", "FAKE_API_KEY", "api.example.com"])
        .unwrap();
    assert!(status.success(), "{out}{err}");
    let serve = serve
        .arg("--dangerously-allow-all-tools")
        .env("FAKE_API_KEY", SECRET)
        .env("FAKE_API_BASE", &format!("http://localhost:{port}"));
    let mut server = start(&serve, &home);
    let created = server
        .call_result("create_tool", json!({"name": "fake", "code": TOOL}))
        .unwrap();
    assert!(!created.is_error, "{}{}", created.text, server.context());
    assert!(created.text.contains("FAKE_API_KEY"), "{}", created.text);

    let echoed = server.call_text("fake__echo", json!({})).unwrap();
    // The call reached the API with the key (the answer carries it in URL-encoded form in the
    // query and raw in the header), and every form came back redacted.
    assert!(echoed.contains("line=GET /echo?key="), "{echoed}");
    assert!(
        !echoed.contains("s3cr3t"),
        "the key reached the model: {echoed}"
    );
    assert!(
        echoed.matches("[REDACTED:FAKE_API_KEY]").count() >= 3,
        "raw, URL-encoded and JSON forms should all be redacted: {echoed}"
    );
    let error = server
        .call_result("fake__leak_in_error", json!({}))
        .unwrap();
    assert!(error.is_error);
    assert!(!error.text.contains("s3cr3t"), "{}", error.text);
    assert!(
        error.text.contains("[REDACTED:FAKE_API_KEY]"),
        "{}",
        error.text
    );

    // An unexpected exception: the traceback on stderr reaches the agent, every form redacted.
    let traceback = server
        .call_result("fake__leak_in_traceback", json!({}))
        .unwrap();
    assert!(traceback.is_error);
    assert!(traceback.text.contains("Traceback"), "{}", traceback.text);
    assert!(!traceback.text.contains("s3cr3t"), "{}", traceback.text);
    assert!(
        traceback.text.matches("[REDACTED:FAKE_API_KEY]").count() >= 3,
        "{}",
        traceback.text
    );
    // A verification failure's log (an import that raises with the key) is redacted too.
    let broken = TOOL.replace(
        "mcp = MCPServer(\"fake\")",
        "raise SystemExit('cannot start with ' + os.environ.get('FAKE_API_KEY', ''))\nmcp = MCPServer(\"fake\")",
    );
    assert_ne!(broken, TOOL);
    let failed = server
        .call_result(
            "create_tool",
            json!({"name": "fake_broken", "code": broken}),
        )
        .unwrap();
    assert!(failed.is_error, "{}", failed.text);
    assert!(!failed.text.contains("s3cr3t"), "{}", failed.text);
    assert!(
        failed.text.contains("[REDACTED:FAKE_API_KEY]"),
        "{}",
        failed.text
    );

    let refused = server.call_text("fake__elsewhere", json!({})).unwrap();
    assert!(
        refused.contains("403")
            && refused.contains("FAKE_API_KEY")
            && refused.contains("other.example.org")
            && refused.contains("autotool keys allow FAKE_API_KEY"),
        "{refused}"
    );
    let stderr = server.stderr();
    finish(server);
    assert!(
        !stderr.contains("s3cr3t"),
        "the key reached the log: {stderr}"
    );
    let (_, shown, _) = home.cli(&["tools", "show", "fake"]).unwrap();
    assert!(shown.contains("egress_denied"), "{shown}");
    // Nothing at rest holds the value.
    for entry in walk(home.path()) {
        if let Ok(bytes) = std::fs::read(&entry) {
            let text = String::from_utf8_lossy(&bytes);
            assert!(
                !text.contains("s3cr3t"),
                "{} holds the key",
                entry.display()
            );
        }
    }
}

#[test]
fn keys_are_named_but_not_granted_without_consent() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let port = fake_api();
    let serve = serve
        .env("FAKE_API_KEY", SECRET)
        .env("FAKE_API_BASE", &format!("http://localhost:{port}"));
    let mut server = start(&serve, &home);
    let list = server.request_ok("tools/list", json!({})).unwrap();
    let create = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "create_tool")
        .unwrap()
        .clone();
    assert!(
        create["description"]
            .as_str()
            .unwrap()
            .contains("FAKE_API_KEY"),
        "the agent is not offered the key names"
    );
    // This host declared no elicitation: it cannot ask, so nothing is created and the agent
    // is told what the user can run.
    let created = server
        .call_result("create_tool", json!({"name": "fake", "code": TOOL}))
        .unwrap();
    assert!(created.is_error, "{}", created.text);
    assert!(
        created
            .text
            .contains("`autotool tools approve fake FAKE_API_KEY`"),
        "{}",
        created.text
    );
    assert!(!created.text.contains("s3cr3t"), "{}", created.text);
    assert!(
        !server
            .tool_names()
            .unwrap()
            .iter()
            .any(|n| n == "fake__echo"),
        "the tool was mounted without consent"
    );
    finish(server);

    // A key the user does not have: the agent is told what the user must run.
    let home = ServeHome::new().unwrap();
    let mut server = start(
        &strict().unwrap().arg("--dangerously-allow-all-tools"),
        &home,
    );
    let created = server
        .call_result(
            "create_tool",
            json!({"name": "needy", "code": TOOL.replace("FAKE_API_KEY", "MISSING_API_KEY")}),
        )
        .unwrap();
    assert!(
        created.text.contains("autotool keys add MISSING_API_KEY"),
        "{}",
        created.text
    );
    finish(server);
}

pub(super) fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                out.extend(walk(&p));
            } else if p.is_file() {
                out.push(p);
            }
        }
    }
    out
}

/// The TCP port a `serve --transport http` says it listens on.
pub(super) fn http_port(server: &mut Server) -> u16 {
    let deadline = std::time::Instant::now() + autotool_tests::TIMEOUT;
    loop {
        let stderr = server.stderr();
        if let Some(port) = stderr
            .split("autotool serve listening on http://127.0.0.1:")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .and_then(|p| p.parse().ok())
        {
            return port;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "serve --transport http never said where it listens{}",
            server.context()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The attempt got the proxy's 403 for one of autotool's own listeners, saying it is `what`.
#[track_caller]
pub(super) fn assert_own_listener(answer: &str, what: &str) {
    assert!(
        answer.starts_with("REFUSED:")
            && answer.contains("403")
            && answer.contains(&format!("loopback is {what}"))
            && answer.contains("one of autotool's own listeners"),
        "{answer}"
    );
}

/// Remove every record of `port` from the directories autotool keeps them in; how many.
pub(super) fn remove_records(port: u16) -> usize {
    let mut dirs = vec![std::path::PathBuf::from(format!(
        "/tmp/autotool-{}",
        autotool_tests::host::euid()
    ))];
    if let Some(xdg) = std::env::var_os("XDG_RUNTIME_DIR") {
        dirs.push(std::path::PathBuf::from(xdg).join("autotool"));
    }
    let prefix = format!("listener-{port}-");
    let mut removed = 0;
    for dir in dirs {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry.file_name().to_string_lossy().starts_with(&prefix)
                && std::fs::remove_file(entry.path()).is_ok()
            {
                removed += 1;
            }
        }
    }
    removed
}

/// A strict serve on a fresh home whose tool `deliver` holds `LEAK_API_KEY`, allowed to
/// api.example.com and `localhost:PORT`.
pub(super) fn attacker(serve: Serve, port: u16) -> (ServeHome, Server) {
    let home = ServeHome::new().unwrap();
    allow(
        &home,
        "LEAK_API_KEY",
        &["api.example.com", &format!("localhost:{port}")],
    );
    let serve = serve
        .arg("--dangerously-allow-all-tools")
        .env("LEAK_API_KEY", LEAK_VALUE);
    let mut server = start(&serve, &home);
    create_deliver(&mut server, true);
    (home, server)
}

#[test]
fn no_tool_reaches_the_loopback_port_of_a_serve_over_http_even_when_allowed() {
    let Some(serve) = strict() else { return };
    // Another autotool on this machine: the HTTP transport, with its token, on its own home.
    let other_home = ServeHome::new().unwrap();
    let mut http = protocol_only()
        .arg("--transport")
        .arg("http")
        .arg("--listen")
        .arg("127.0.0.1:0")
        .start(&other_home)
        .unwrap();
    let port = http_port(&mut http);
    let (_home, mut server) = attacker(serve, port);
    let url = format!("http://127.0.0.1:{port}/mcp");

    assert_own_listener(
        &deliver(&mut server, &url),
        "autotool serve --transport http",
    );
    // Without its record (removed here), the listening socket itself gives it away: an
    // autotool process holds it.
    let removed = remove_records(port);
    assert!(
        removed > 0,
        "serve --transport http left no record of port {port}"
    );
    let held = format!("a socket held by an autotool process (pid {})", http.pid());
    assert_own_listener(&deliver(&mut server, &url), &held);

    // The control: the same port, allowed the same way, once it is no longer autotool's (the
    // serve killed, its record left behind, stale), is reached.
    drop(http);
    let catcher = Catcher::bind_freed("127.0.0.1", port);
    let arrived = deliver(&mut server, &url);
    assert_eq!(arrived, "ARRIVED: arrived");
    let got = catcher.arrived();
    assert!(got.len() == 1 && got[0].contains(LEAK_VALUE), "{got:?}");
    finish(server);
}

#[test]
fn no_tool_reaches_the_loopback_proxy_of_another_serve_s_unconfined_tool() {
    let Some(serve) = strict() else { return };
    // Another serve with --sandbox off: its tool's proxy listens on the host's loopback.
    let other_home = ServeHome::new().unwrap();
    let mut unconfined = start(&Serve::new(Sandbox::Off), &other_home);
    create_deliver(&mut unconfined, false);
    let proxy = unconfined
        .call_text("deliver__proxy", serde_json::json!({}))
        .unwrap();
    let port: u16 = proxy
        .strip_prefix("http://127.0.0.1:")
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .unwrap_or_else(|| panic!("not a proxy on the host's loopback: {proxy:?}"));
    let (_home, mut server) = attacker(serve, port);
    let url = format!("http://127.0.0.1:{port}/");

    let what = "the egress proxy of the unconfined tool deliver";
    assert_own_listener(&deliver(&mut server, &url), what);

    // The control: that serve gone, the same port is an ordinary listener, and is reached.
    drop(unconfined);
    let catcher = Catcher::bind_freed("127.0.0.1", port);
    let arrived = deliver(&mut server, &url);
    assert_eq!(arrived, "ARRIVED: arrived");
    assert_eq!(catcher.arrived().len(), 1);
    finish(server);
}
