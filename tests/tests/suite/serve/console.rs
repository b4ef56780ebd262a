//! `autotool console` end to end, with the real binary:
//! - no confined tool reaches it, with its secret or without, though the user allowed the
//!   tool's key to that very loopback port; the control: once the console is gone, the same
//!   port is reached;
//! - in a real browser (Debian's chromium, headless, over WebDriver): the library page says a
//!   tool waits for consent, the consent page asks, a click and a confirmation approve it, and
//!   the tool's call then succeeds through `serve` holding the key. Screenshots of the consent
//!   and library pages go to `$AUTOTOOL_SCREENSHOTS` (the README's come from there), else to
//!   a temporary directory;
//! - `serve --transport http --console` mounts it under `/console/` on serve's own listener,
//!   with a session of its own: its URL in a 0600 file (and `autotool console --url`), never in
//!   serve's log (which names the mount without the secret), the page
//!   with its secret and cookie; serve's bearer token does not open it, its cookie does not open
//!   `/mcp`, and `/mcp` still answers with the token.

use super::super::network::{Catcher, deliver};
use super::keys::{
    SECRET, TOOL, assert_own_listener, attacker, fake_api, http_port, remove_records,
};
use super::{finish, protocol_only, start, strict};
use autotool_tests::browser::{self, Browser, Console};
use autotool_tests::serve::ServeHome;
use serde_json::json;
use std::path::PathBuf;

#[test]
fn no_tool_reaches_the_console_with_or_without_its_secret() {
    let Some(serve) = strict() else { return };
    // The user's console, on another home, and a tool whose key the user allowed to its port.
    let console_home = ServeHome::new().unwrap();
    let console = Console::start(console_home.path(), &[]).unwrap();
    let port = console.port;
    let (_home, mut server) = attacker(serve, port);

    let with_secret = console.url.clone();
    assert!(with_secret.contains("/?s="), "{with_secret}");
    let approve = format!(
        "http://127.0.0.1:{port}/action?action=approve&tool=deliver&key=LEAK_API_KEY&{}",
        with_secret.split_once('?').unwrap().1
    );
    for url in [
        with_secret.as_str(),
        &format!("http://127.0.0.1:{port}/"),
        &format!("http://localhost:{port}/consent"),
        &approve,
    ] {
        assert_own_listener(&deliver(&mut server, url), "autotool console");
    }
    // Without its record, the socket itself gives it away: an autotool process holds it.
    assert!(
        remove_records(port) > 0,
        "the console left no record of {port}"
    );
    let held = format!(
        "a socket held by an autotool process (pid {})",
        console.pid()
    );
    assert_own_listener(&deliver(&mut server, &with_secret), &held);

    // The control: the console gone, the same port, allowed the same way, is reached.
    drop(console);
    let catcher = Catcher::bind_freed("127.0.0.1", port);
    assert_eq!(
        deliver(&mut server, &format!("http://127.0.0.1:{port}/")),
        "ARRIVED: arrived"
    );
    assert_eq!(catcher.arrived().len(), 1);
    finish(server);
}

/// Where the screenshots go: `$AUTOTOOL_SCREENSHOTS`, else a temporary directory (removed with
/// the returned guard).
fn screenshots() -> (PathBuf, Option<tempfile::TempDir>) {
    match std::env::var_os("AUTOTOOL_SCREENSHOTS").filter(|v| !v.is_empty()) {
        Some(dir) => (PathBuf::from(dir), None),
        None => {
            let tmp = tempfile::Builder::new()
                .prefix("autotool-console-shots-")
                .tempdir()
                .unwrap();
            (tmp.path().to_path_buf(), Some(tmp))
        }
    }
}

/// `path` holds a PNG image.
#[track_caller]
fn assert_png(path: &std::path::Path) {
    let bytes = std::fs::read(path).unwrap();
    assert!(
        bytes.len() > 1000 && bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is no screenshot ({} bytes)",
        path.display(),
        bytes.len()
    );
}

#[test]
fn a_click_in_the_browser_approves_a_pending_consent_and_the_call_then_succeeds() {
    let (chromium, driver) = match browser::probe() {
        Ok(found) => found,
        Err(why) if browser::required() => panic!("no browser on a machine that needs one: {why}"),
        Err(why) => {
            autotool_tests::print_skip("console browser test", &why);
            return;
        }
    };
    if autotool_tests::capabilities_mode() {
        // There every tool keeps this user's id, and its thread limit counts every task of the
        // user, counted at its launch: chromium's hundred threads, started beside the suite's
        // tools, would use up theirs. The root and user-namespace runs cover the browser.
        autotool_tests::print_skip(
            "console browser test",
            "capabilities mode: chromium's threads would count against every running tool's \
             thread limit (same user id)",
        );
        return;
    }
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let api = fake_api();
    let serve = serve
        .env("FAKE_API_KEY", SECRET)
        .env("FAKE_API_BASE", &format!("http://localhost:{api}"));
    // A host that cannot ask: the question waits for the user.
    let mut server = start(&serve, &home);
    let args = json!({"name": "fake", "code": TOOL});
    let r = server.call_result("create_tool", args.clone()).unwrap();
    assert!(r.is_error, "{}", r.text);
    assert!(
        r.text.contains("autotool tools approve fake FAKE_API_KEY"),
        "{}",
        r.text
    );

    let console = Console::start(home.path(), &[("FAKE_API_KEY", SECRET)]).unwrap();
    let b = Browser::start(&chromium, &driver).unwrap();
    // The printed URL: the secret is traded for the cookie and leaves the address bar.
    b.go(&console.url).unwrap();
    let here = b.url().unwrap();
    assert_eq!(here, format!("http://127.0.0.1:{}/", console.port));
    let library = b.source().unwrap();
    assert!(
        library.contains("1 tool is waiting for consent"),
        "{library}"
    );

    b.click("p.notice a").unwrap();
    let consent = b.source_with("Allow fake to use FAKE_API_KEY?").unwrap();
    assert!(
        consent.contains("Allow fake to use FAKE_API_KEY?"),
        "{consent}"
    );
    assert!(!consent.contains("s3cr3t"), "{consent}");
    let (shots, _keep) = screenshots();
    b.screenshot(&shots.join("console-consent.png")).unwrap();
    assert_png(&shots.join("console-consent.png"));

    b.click("a.button").unwrap();
    let confirm = b.source_with("id=\"confirm\"").unwrap();
    assert!(confirm.contains("Confirm"), "{confirm}");
    b.click("button#confirm").unwrap();
    let done = b
        .source_with("approved: `fake` may use FAKE_API_KEY")
        .unwrap();
    assert!(
        done.contains("approved: `fake` may use FAKE_API_KEY"),
        "{done}"
    );

    // The tool is created and its call succeeds, holding the key, through serve.
    let r = server.call_result("create_tool", args).unwrap();
    assert!(!r.is_error, "{}", r.text);
    let echoed = server.call_text("fake__echo", json!({})).unwrap();
    assert!(echoed.contains("line=GET /echo?key="), "{echoed}");
    assert!(echoed.contains("[REDACTED:FAKE_API_KEY]"), "{echoed}");

    // The library shows it, and the consent page has nothing left to ask.
    b.go(&format!("http://127.0.0.1:{}/consent", console.port))
        .unwrap();
    assert!(
        b.source_with("No tool is waiting for consent")
            .unwrap()
            .contains("No tool is waiting for consent")
    );
    b.click("nav a[href=\"/\"]").unwrap();
    let library = b.source_with("href=\"/tool/fake\"").unwrap();
    assert!(library.contains("href=\"/tool/fake\""), "{library}");
    assert!(library.contains("100% of"), "{library}");
    b.screenshot(&shots.join("console-library.png")).unwrap();
    assert_png(&shots.join("console-library.png"));
    b.click("a[href=\"/tool/fake\"]").unwrap();
    let tool = b.source_with("FAKE_API_KEY via console").unwrap();
    assert!(tool.contains("FAKE_API_KEY via console"), "{tool}");
    assert!(!tool.contains("s3cr3t"), "{tool}");
    drop(b);
    finish(server);

    // The event log says the console granted it.
    let (_, shown, _) = home.cli(&["tools", "show", "fake", "--json"]).unwrap();
    assert!(
        shown.contains("FAKE_API_KEY granted via console"),
        "{shown}"
    );
}

/// An answer: status, headers (lowercase names), body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One request to `127.0.0.1:port` over a fresh connection: `head` (method and path), `extra`
/// header lines, `body`. Read until the server closes or goes quiet for 3 s.
fn request(port: u16, head: &str, extra: &str, body: &str) -> Answer {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(3)))
        .unwrap();
    write!(
        s,
        "{head} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{extra}Content-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 8192];
    while let Ok(n) = s.read(&mut chunk) {
        if n == 0 {
            break;
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_string(),
    }
}

#[test]
fn serve_http_mounts_the_console_under_its_path_with_a_session_of_its_own() {
    let home = ServeHome::new().unwrap();
    let mut http = protocol_only()
        .arg("--transport")
        .arg("http")
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--console")
        .start(&home)
        .unwrap();
    let port = http_port(&mut http);

    // The URL, its secret included, is in a file only this user reads, and `console --url`.
    let file = home.path().join("console-url");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    let url = std::fs::read_to_string(&file).unwrap().trim().to_string();
    let prefix = format!("http://127.0.0.1:{port}/console/?s=");
    let secret = url.strip_prefix(&prefix).unwrap_or_else(|| panic!("{url}"));
    assert_eq!(secret.len(), 64, "{url}");
    let (status, out, err) = home.cli(&["console", "--url"]).unwrap();
    assert!(status.success(), "{out}{err}");
    assert_eq!(out.trim(), url);
    let token = std::fs::read_to_string(home.path().join("service-token"))
        .unwrap()
        .trim()
        .to_string();
    assert_ne!(token, secret, "the console's secret is serve's token");
    let cookie = format!("Cookie: autotool_console_{port}={secret}\r\n");
    let bearer = format!("Authorization: Bearer {token}\r\n");

    // The page loads with the secret: a cookie kept to the console's path, the page again
    // without the secret, its links under /console/, the console's CSP.
    let a = request(port, &format!("GET /console/?s={secret}"), "", "");
    assert_eq!(a.status, 303, "{}", a.body);
    assert_eq!(a.header("location"), Some("/console/"));
    assert_eq!(
        a.header("set-cookie"),
        Some(
            format!("autotool_console_{port}={secret}; Path=/console; HttpOnly; SameSite=Strict")
                .as_str()
        )
    );
    let a = request(port, "GET /console/", &cookie, "");
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(a.body.contains("<h1>Library</h1>"), "{}", a.body);
    assert!(
        a.body.contains("href=\"/console/consent\"")
            && a.body.contains("href=\"/console/assets/console.css\""),
        "{}",
        a.body
    );
    assert!(!a.body.contains("href=\"/consent\""), "{}", a.body);
    assert!(
        a.header("content-security-policy")
            .unwrap_or("")
            .starts_with("default-src 'none'"),
        "{:?}",
        a.headers
    );
    assert_eq!(
        request(port, "GET /console/assets/console.css", &cookie, "").status,
        200
    );

    // Serve's bearer token opens nothing of the console: not as a header, not as its secret.
    for (head, extra) in [
        ("GET /console/".to_string(), bearer.clone()),
        ("GET /console/api/library".to_string(), bearer.clone()),
        (format!("GET /console/?s={token}"), String::new()),
    ] {
        let a = request(port, &head, &extra, "");
        assert_eq!(a.status, 401, "{head}: {}", a.body);
        assert!(!a.body.contains("Library</h1>"), "{}", a.body);
        assert!(a.header("set-cookie").is_none(), "{head}");
    }
    // The console's own guards hold: a state change without its CSRF token, a foreign Origin.
    let a = request(
        port,
        "POST /console/action",
        &format!("{cookie}Content-Type: application/x-www-form-urlencoded\r\n"),
        "action=retire&tool=x",
    );
    assert_eq!(a.status, 403, "{}", a.body);
    let a = request(
        port,
        "GET /console/",
        &format!("{cookie}Origin: http://attacker.example\r\n"),
        "",
    );
    assert_eq!(a.status, 403, "{}", a.body);

    // The console's cookie does not open /mcp; its token does.
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "autotool-tests", "version": "0"},
        },
    })
    .to_string();
    let mcp_headers = "Content-Type: application/json\r\n\
                       Accept: application/json, text/event-stream\r\n";
    let a = request(
        port,
        "POST /mcp",
        &format!("{cookie}{mcp_headers}"),
        &initialize,
    );
    assert_eq!(a.status, 401, "{}", a.body);
    assert!(!a.body.contains("serverInfo"), "{}", a.body);
    let a = request(
        port,
        "POST /mcp",
        &format!("{bearer}{mcp_headers}"),
        &initialize,
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(a.body.contains("serverInfo"), "{}", a.body);

    // Stopped, serve takes its URL back: a secret that opens nothing any more is not left.
    let stopped = std::process::Command::new("kill")
        .args(["-TERM", &http.pid().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while file.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "console-url outlived serve{}",
            http.context()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (status, _, err) = home.cli(&["console", "--url"]).unwrap();
    assert!(!status.success());
    assert!(err.contains("no running"), "{err}");
    // Serve's log names where the console is mounted (the control), never its secret.
    let logged = std::fs::read_to_string(home.path().join("logs").join("serve.log"))
        .unwrap_or_default()
        + &http.stderr();
    assert!(
        logged.contains(&format!(
            "the console is mounted at http://127.0.0.1:{port}/console/"
        )),
        "{logged}"
    );
    assert!(
        !logged.contains(secret),
        "the log holds the console's secret"
    );
}
