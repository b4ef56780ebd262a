//! `autotool console` as a security boundary, against the real server on loopback and a real
//! home: each guard with a control showing the same request passes without the fault:
//! - the secret is traded for an `HttpOnly`, `SameSite=Strict` cookie; nothing answers
//!   without one (a wrong secret, another port's cookie); the browser is sent on to the page
//!   asked for (the control), never to another site (`//host`, `/\host`, `/%5Chost`, …);
//! - a `Host` other than 127.0.0.1:PORT / localhost:PORT (DNS rebinding) and a foreign `Origin`
//!   are refused, cookie or not;
//! - a change is only a POST of a form with the session's CSRF token (a GET, a POST without
//!   it, a JSON POST change nothing), and it is written to the event log as the console's;
//!   pin and unpin the same way, the pin shown on the tool and library pages and the API;
//! - no CORS header on any answer, a preflight refused, a strict CSP everywhere;
//! - what a tool wrote (name, description, errors, events) is escaped and cut;
//! - no page and no API answer holds a stored key value, raw, URL-encoded or JSON-escaped,
//!   though the tool's record holds it in every form;
//! - `autotool console` prints its URL, secret included, on stdout alone: stderr, which logs
//!   keep, names the address without the secret (the control: the URL on stdout holds it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use autotool::credentials::{KeyStore, Target};
use autotool::home::Home;
use autotool::ledger::{CallKind, CallRecord, Event};
use autotool::registry::{FunctionSpec, Manifest, Registry};
use autotool_policy::names::{KeyName, ToolName};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

/// A value with characters every encoding changes: `/`, space, `"`, `&`, `+`, `%`, `é`.
const VALUE: &str = "sk-c0ns0le/\"va lue\"&+%é";
const KEY: &str = "CONSOLE_API_KEY";

struct Running {
    _dir: tempfile::TempDir,
    home: Home,
    port: u16,
    secret: String,
    stop: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// An answer: status, headers (lowercase names), body.
#[derive(Debug)]
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

/// One request over a fresh connection, exactly as given.
fn raw(port: u16, request: &str) -> Answer {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut bytes = Vec::new();
    s.read_to_end(&mut bytes).unwrap();
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

impl Running {
    fn cookie(&self) -> String {
        format!("autotool_console_{}={}", self.port, self.secret)
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A GET as the signed-in browser sends it.
    fn get(&self, path: &str) -> Answer {
        raw(
            self.port,
            &format!(
                "GET {path} HTTP/1.1\r\nHost: {}\r\nCookie: {}\r\nConnection: close\r\n\r\n",
                self.host(),
                self.cookie()
            ),
        )
    }

    /// A form POST to /action as the signed-in browser sends it.
    fn post(&self, form: &str) -> Answer {
        raw(
            self.port,
            &format!(
                "POST /action HTTP/1.1\r\nHost: {}\r\nCookie: {}\r\nOrigin: http://{}\r\n\
                 Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{form}",
                self.host(),
                self.cookie(),
                self.host(),
                form.len()
            ),
        )
    }

    /// The CSRF token, as the confirmation page carries it.
    fn csrf(&self) -> String {
        let page = self.get("/confirm?action=rehab&tool=weather").body;
        let at = page.find("name=\"csrf\" value=\"").unwrap() + 19;
        page[at..at + 64].to_string()
    }

    fn registry(&self) -> Registry {
        Registry::open(&self.home).unwrap()
    }
}

fn function(name: &str, description: &str) -> FunctionSpec {
    FunctionSpec {
        name: name.to_string(),
        title: None,
        description: Some(description.to_string()),
        input_schema: serde_json::json!({"type": "object"})
            .as_object()
            .unwrap()
            .clone(),
        output_schema: None,
        annotations: None,
    }
}

/// A home whose key store holds [`VALUE`] (in the credentials file), and a tool `weather`
/// whose record is hostile: markup in its description, the value in every form in its
/// description, errors, events and a pending question.
fn home_with_a_hostile_tool() -> (tempfile::TempDir, Home) {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::at(dir.path().join("home"));
    let keys = KeyStore::open(&home);
    keys.add(KEY, VALUE.as_bytes(), Target::File { reason: "test" })
        .unwrap();
    keys.allow(KEY, &["api.example.com".into(), "other.example.com".into()])
        .unwrap();
    let registry = Registry::open(&home).unwrap();
    // What a tool can echo: the value raw, URL-encoded and JSON-escaped (the forms the
    // redactor knows).
    let forms = &forms()[..4];
    let description = format!(
        "<script>alert(1)</script><img src=x onerror=alert(2)> {} {}",
        forms.join(" "),
        "long ".repeat(400)
    );
    let staged = registry
        .stage(&ToolName::parse("weather").unwrap(), "x = 1\n")
        .unwrap();
    registry
        .commit(
            staged,
            Manifest {
                description,
                required_env: vec![KeyName::parse(KEY).unwrap()],
                functions: vec![function("forecast", "<b>bold</b>")],
                packages: None,
                uses: Vec::new(),
                reach: Default::default(),
            },
        )
        .unwrap();
    for (i, form) in forms.iter().enumerate() {
        registry
            .record_call(&CallRecord {
                tool: "weather".into(),
                version: 1,
                function: "forecast".into(),
                started_at: SystemTime::now(),
                duration: Duration::from_millis(5 + i as u64),
                outcome: CallKind::Failure,
                error: Some(format!("upstream said <i>{form}</i>")),
            })
            .unwrap();
        registry
            .ledger()
            .event(
                Some("weather"),
                Event::EgressDenied,
                &format!("refused <u>{form}</u>"),
            )
            .unwrap();
    }
    registry
        .ledger()
        .set_pending(&autotool::ledger::PendingConsent {
            tool: "weather".into(),
            code_hash: registry.get("weather").unwrap().unwrap().code_hash,
            declared: vec![KEY.into()],
            packages: None,
            reach: None,
            asked_at: autotool::ledger::now_ms(),
        })
        .unwrap();
    (dir, home)
}

/// [`VALUE`] raw, URL-encoded (both spaces), JSON-escaped and HTML-escaped.
fn forms() -> Vec<String> {
    let json = serde_json::to_string(VALUE).unwrap();
    vec![
        VALUE.to_string(),
        autotool::console::html::url_part(VALUE),
        form_urlencoded::byte_serialize(VALUE.as_bytes()).collect(),
        json.trim_matches('"').to_string(),
        autotool::console::html::escape(VALUE),
    ]
}

fn start() -> Running {
    let (dir, home) = home_with_a_hostile_tool();
    let stop = CancellationToken::new();
    let (tx, rx) = std::sync::mpsc::channel();
    let thread = {
        let (home, stop) = (home.clone(), stop.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(autotool::console::serve(home, 0, stop, |url| {
                tx.send(url.to_string()).unwrap();
            }))
            .unwrap();
        })
    };
    let url = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    let rest = url.strip_prefix("http://127.0.0.1:").unwrap();
    let (port, secret) = rest.split_once("/?s=").unwrap();
    assert_eq!(secret.len(), 64, "{url}");
    Running {
        _dir: dir,
        home,
        port: port.parse().unwrap(),
        secret: secret.to_string(),
        stop,
        thread: Some(thread),
    }
}

#[test]
fn the_secret_is_traded_for_a_strict_cookie_and_nothing_answers_without_it() {
    let c = start();
    let plain = |path: &str, extra: &str| {
        raw(
            c.port,
            &format!(
                "GET {path} HTTP/1.1\r\nHost: {}\r\n{extra}Connection: close\r\n\r\n",
                c.host()
            ),
        )
    };
    // No secret, a wrong one, another port's cookie, a cookie one character short: refused.
    for (path, extra) in [
        ("/".to_string(), String::new()),
        ("/api/library".to_string(), String::new()),
        (format!("/?s={}0", c.secret), String::new()),
        (
            "/".to_string(),
            format!("Cookie: autotool_console_{}={}\r\n", c.port + 1, c.secret),
        ),
        (
            "/".to_string(),
            format!("Cookie: autotool_console_{}={}\r\n", c.port, &c.secret[1..]),
        ),
    ] {
        let a = plain(&path, &extra);
        assert_eq!(a.status, 401, "{path} {extra}: {a:?}");
        assert!(!a.body.contains("weather"), "{}", a.body);
    }
    // The secret: a cookie, HttpOnly and SameSite=Strict, and the page again without it.
    let a = plain(&format!("/tool/weather?s={}", c.secret), "");
    assert_eq!(a.status, 303);
    assert_eq!(a.header("location"), Some("/tool/weather"));
    let cookie = a.header("set-cookie").unwrap();
    assert_eq!(
        cookie,
        format!(
            "autotool_console_{}={}; Path=/; HttpOnly; SameSite=Strict",
            c.port, c.secret
        )
    );
    // A path that would leave the site goes to the library instead, in every spelling a
    // browser reads as another site (`/\\host` is `//host` to a browser; the server takes a
    // backslash in the request line as it is).
    for away in [
        "//evil.example/",
        "/\\evil.example",
        "/\\\\evil.example",
        "/%5Cevil.example",
        "/%5C%5Cevil.example",
        "/%2F%2Fevil.example",
        "/%252F%252Fevil.example",
        "/%09/evil.example",
    ] {
        let a = plain(&format!("{away}?s={}", c.secret), "");
        assert_eq!(a.status, 303, "{away}");
        assert_eq!(a.header("location"), Some("/"), "{away}");
    }
    // The cookie opens the pages.
    let a = plain("/", &format!("Cookie: {}\r\n", c.cookie()));
    assert_eq!(a.status, 200);
    assert!(a.body.contains("/tool/weather"), "{}", a.body);
}

#[test]
fn a_foreign_host_or_origin_is_refused_cookie_or_not() {
    let c = start();
    let with = |host: &str, origin: Option<&str>| {
        raw(
            c.port,
            &format!(
                "GET /api/library HTTP/1.1\r\nHost: {host}\r\nCookie: {}\r\n{}Connection: close\r\n\r\n",
                c.cookie(),
                origin
                    .map(|o| format!("Origin: {o}\r\n"))
                    .unwrap_or_default()
            ),
        )
    };
    // The control: the same request with this console's own names passes.
    for host in [c.host(), format!("localhost:{}", c.port)] {
        assert_eq!(with(&host, None).status, 200, "{host}");
    }
    assert_eq!(
        with(&c.host(), Some(&format!("http://localhost:{}", c.port))).status,
        200
    );
    // A rebound name, another port, no port: refused before anything is read.
    for host in [
        format!("attacker.example:{}", c.port),
        format!("127.0.0.1:{}", c.port + 1),
        "127.0.0.1".to_string(),
    ] {
        let a = with(&host, None);
        assert_eq!(a.status, 421, "{host}: {a:?}");
        assert!(!a.body.contains("weather"), "{}", a.body);
    }
    for origin in ["http://attacker.example", "null", "http://127.0.0.1:1"] {
        let a = with(&c.host(), Some(origin));
        assert_eq!(a.status, 403, "{origin}");
        assert!(!a.body.contains("weather"), "{}", a.body);
    }
    // A request without Host at all.
    let a = raw(
        c.port,
        &format!(
            "GET / HTTP/1.0\r\nCookie: {}\r\nConnection: close\r\n\r\n",
            c.cookie()
        ),
    );
    assert_eq!(a.status, 421, "{a:?}");
}

#[test]
fn a_change_is_only_a_post_with_the_token_and_is_logged_as_the_console_s() {
    let c = start();
    let state = || c.registry().get("weather").unwrap().unwrap().state.as_str();
    assert_eq!(state(), "probation");
    // A GET of the action, the confirmation page, a POST without the token, with a wrong
    // token, as JSON: nothing changes.
    assert_ne!(
        c.get("/action?action=retire&tool=weather").status,
        200,
        "a GET of /action"
    );
    assert_eq!(c.get("/confirm?action=retire&tool=weather").status, 200);
    assert_eq!(c.post("action=retire&tool=weather").status, 403);
    assert_eq!(
        c.post(&format!(
            "action=retire&tool=weather&csrf={}",
            "0".repeat(64)
        ))
        .status,
        403
    );
    let token = c.csrf();
    let json = format!("{{\"action\":\"retire\",\"tool\":\"weather\",\"csrf\":\"{token}\"}}");
    let a = raw(
        c.port,
        &format!(
            "POST /action HTTP/1.1\r\nHost: {}\r\nCookie: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{json}",
            c.host(),
            c.cookie(),
            json.len()
        ),
    );
    assert_eq!(a.status, 403);
    // A POST with the token but from another origin.
    let form = format!("action=retire&tool=weather&csrf={token}");
    let a = raw(
        c.port,
        &format!(
            "POST /action HTTP/1.1\r\nHost: {}\r\nCookie: {}\r\nOrigin: http://attacker.example\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{form}",
            c.host(),
            c.cookie(),
            form.len()
        ),
    );
    assert_eq!(a.status, 403);
    assert_eq!(state(), "probation");
    // The control: the form with the token retires it, and the log says the console did.
    let a = c.post(&form);
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(a.body.contains("is now retired"), "{}", a.body);
    assert_eq!(state(), "retired");
    let events = c.registry().ledger().events(Some("weather"), 50).unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.kind == Event::StateChanged && e.detail.contains("by the user (console)")),
        "{events:?}"
    );

    // Approving the pending question is `tools approve`'s, via the console.
    assert!(c.get("/consent").body.contains("Approve CONSOLE_API_KEY"));
    let a = c.post(&format!(
        "action=approve&tool=weather&key={KEY}&csrf={token}"
    ));
    assert!(a.body.contains("approved"), "{}", a.body);
    let approvals = c.registry().ledger().approvals("weather").unwrap();
    assert_eq!(approvals.len(), 1);
    assert_eq!(approvals[0].via, "console");
    assert!(
        c.get("/consent")
            .body
            .contains("No tool is waiting for consent")
    );

    // A host allowed and disallowed: the key store changes, and the log says who.
    let a = c.post(&format!(
        "action=allow&key={KEY}&host=third.example.com&csrf={token}"
    ));
    assert_eq!(a.status, 200, "{}", a.body);
    let keys = KeyStore::open(&c.home);
    assert_eq!(
        keys.allowlist(KEY).unwrap().unwrap(),
        ["api.example.com", "other.example.com", "third.example.com"]
    );
    c.post(&format!(
        "action=disallow&key={KEY}&host=api.example.com&csrf={token}"
    ));
    c.post(&format!(
        "action=disallow&key={KEY}&host=other.example.com&csrf={token}"
    ));
    // The last host is never taken off: that would let the key go anywhere.
    let a = c.post(&format!(
        "action=disallow&key={KEY}&host=third.example.com&csrf={token}"
    ));
    assert_eq!(a.status, 400);
    assert!(a.body.contains("any host"), "{}", a.body);
    assert_eq!(keys.allowlist(KEY).unwrap().unwrap(), ["third.example.com"]);
    let all = c.registry().ledger().events(None, 50).unwrap();
    let changes: Vec<&str> = all
        .iter()
        .filter(|e| e.kind == Event::AllowlistChanged)
        .map(|e| e.detail.as_str())
        .collect();
    assert_eq!(changes.len(), 3, "{changes:?}");
    assert!(
        changes.iter().all(|d| d.contains("(console)")),
        "{changes:?}"
    );

    // Revoke, rehab and remove, each logged.
    c.post(&format!(
        "action=revoke&tool=weather&key={KEY}&csrf={token}"
    ));
    assert!(
        c.registry()
            .ledger()
            .approvals("weather")
            .unwrap()
            .is_empty()
    );
    c.post(&format!("action=rehab&tool=weather&csrf={token}"));
    assert_eq!(state(), "probation");
    let a = c.post(&format!("action=remove&tool=weather&csrf={token}"));
    assert!(a.body.contains("Removed weather"), "{}", a.body);
    let events = c.registry().ledger().events(Some("weather"), 50).unwrap();
    for (kind, said) in [
        (Event::ConsentRevoked, "(console)"),
        (Event::Removed, "removed by the user (console)"),
        (Event::ConsentGranted, "via console"),
    ] {
        assert!(
            events
                .iter()
                .any(|e| e.kind == kind && e.detail.contains(said)),
            "no {kind} saying {said}: {events:?}"
        );
    }
}

#[test]
fn pin_and_unpin_are_confirmed_posts_with_the_token_and_show_everywhere() {
    let c = start();
    let pinned = || c.registry().ledger().pin_of("weather").unwrap();
    // The tool page offers Pin, through its confirmation page.
    let page = c.get("/tool/weather").body;
    assert!(
        page.contains("href=\"/confirm?action=pin&amp;tool=weather\""),
        "{page}"
    );
    assert!(!page.contains("action=unpin"), "{page}");
    let confirm = c.get("/confirm?action=pin&tool=weather").body;
    assert!(
        confirm.contains("Pin weather? Nothing replaces"),
        "{confirm}"
    );
    assert_eq!(pinned(), None, "the confirmation page pinned it");
    // Without the token, with a wrong one, as a GET: refused, nothing pinned.
    assert_eq!(c.post("action=pin&tool=weather").status, 403);
    assert_eq!(
        c.post(&format!("action=pin&tool=weather&csrf={}", "0".repeat(64)))
            .status,
        403
    );
    assert_ne!(c.get("/action?action=pin&tool=weather").status, 200);
    assert_eq!(pinned(), None);
    // The control: the form with the token pins it, as the console.
    let token = c.csrf();
    let a = c.post(&format!("action=pin&tool=weather&csrf={token}"));
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(a.body.contains("weather v1 is pinned"), "{}", a.body);
    assert_eq!(pinned().unwrap().by, "console");
    // Shown on the tool page (with Unpin instead of Pin), the library page and the API.
    let page = c.get("/tool/weather").body;
    assert!(page.contains("Pinned: pinned by console at "), "{page}");
    assert!(
        page.contains("href=\"/confirm?action=unpin&amp;tool=weather\"")
            && !page.contains("action=pin&amp;"),
        "{page}"
    );
    assert!(c.get("/").body.contains("pinned by console"));
    let rows: serde_json::Value = serde_json::from_str(&c.get("/api/library").body).unwrap();
    assert_eq!(rows[0]["pinned"]["by"], "console", "{rows}");
    // Unpin: refused without the token, done with it.
    assert_eq!(c.post("action=unpin&tool=weather").status, 403);
    assert!(pinned().is_some());
    let a = c.post(&format!("action=unpin&tool=weather&csrf={token}"));
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(a.body.contains("weather is unpinned"), "{}", a.body);
    assert_eq!(pinned(), None);
    let rows: serde_json::Value = serde_json::from_str(&c.get("/api/library").body).unwrap();
    assert!(rows[0]["pinned"].is_null(), "{rows}");
    // The log names the console for both.
    let events = c.registry().ledger().events(Some("weather"), 50).unwrap();
    for kind in [Event::Pinned, Event::Unpinned] {
        let e = events.iter().find(|e| e.kind == kind);
        let e = e.unwrap_or_else(|| panic!("no {kind} event: {events:?}"));
        assert_eq!(
            (e.actor.as_str(), e.surface.as_str()),
            ("console", "console")
        );
    }
}

#[test]
fn no_cors_and_a_strict_csp_on_every_answer() {
    let c = start();
    let preflight = raw(
        c.port,
        &format!(
            "OPTIONS /action HTTP/1.1\r\nHost: {}\r\nOrigin: http://attacker.example\r\n\
             Access-Control-Request-Method: POST\r\nConnection: close\r\n\r\n",
            c.host()
        ),
    );
    assert_ne!(preflight.status, 200);
    let options = raw(
        c.port,
        &format!(
            "OPTIONS / HTTP/1.1\r\nHost: {}\r\nCookie: {}\r\nConnection: close\r\n\r\n",
            c.host(),
            c.cookie()
        ),
    );
    assert_eq!(options.status, 405);
    let answers = [
        preflight,
        options,
        c.get("/"),
        c.get("/api/library"),
        c.get("/nope"),
        c.post("action=remove"),
        raw(
            c.port,
            "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ),
    ];
    for a in &answers {
        assert!(
            a.headers
                .iter()
                .all(|(k, _)| !k.starts_with("access-control-")),
            "{a:?}"
        );
        assert_eq!(
            a.header("content-security-policy"),
            Some(autotool::console::guard::CSP),
            "{a:?}"
        );
        assert_eq!(a.header("x-content-type-options"), Some("nosniff"));
    }
    assert!(autotool::console::guard::CSP.starts_with("default-src 'none'"));
    // No script anywhere, and no inline style the CSP would have to allow.
    for path in ["/", "/tool/weather", "/keys", "/consent"] {
        let body = c.get(path).body;
        assert!(!body.contains("<script"), "{path}");
        assert!(!body.contains("style="), "{path}");
    }
}

#[test]
fn what_a_tool_wrote_is_escaped_and_cut() {
    let c = start();
    for path in ["/", "/tool/weather", "/consent"] {
        let body = c.get(path).body;
        assert!(!body.contains("<script>alert"), "{path}: {body}");
        assert!(!body.contains("<img src=x"), "{path}");
        assert!(
            !body.contains("<u>") && !body.contains("<i>upstream"),
            "{path}"
        );
        // The control: the text is there, escaped.
        if path != "/consent" {
            assert!(body.contains("&lt;script&gt;alert(1)"), "{path}: {body}");
        }
        // The description is 2,000+ characters; no page shows it whole.
        assert!(!body.contains(&"long ".repeat(100)), "{path}");
    }
    let api = c.get("/api/library").body;
    let rows: serde_json::Value = serde_json::from_str(&api).unwrap();
    let description = rows[0]["description"].as_str().unwrap();
    assert!(description.chars().count() <= 301, "{description}");
}

#[test]
fn no_page_or_answer_holds_a_key_value_in_any_form() {
    let c = start();
    // The control: the tool's record does hold it, in every form.
    let record = c.registry().get("weather").unwrap().unwrap().description;
    for form in &forms()[..4] {
        assert!(record.contains(form.as_str()), "the fixture lost {form:?}");
    }
    let token = c.csrf();
    let mut answers = Vec::new();
    for path in [
        "/",
        "/api/library",
        "/tool/weather",
        "/keys",
        "/consent",
        "/confirm?action=approve&tool=weather&key=CONSOLE_API_KEY",
        "/confirm?action=disallow&key=CONSOLE_API_KEY&host=api.example.com",
        "/assets/console.css",
        "/tool/nobody",
    ] {
        answers.push((path.to_string(), c.get(path)));
    }
    answers.push((
        "bad action".into(),
        c.post(&format!(
            "action=allow&key={KEY}&host=%20bad%20&csrf={token}"
        )),
    ));
    answers.push((
        "approve".into(),
        c.post(&format!(
            "action=approve&tool=weather&key={KEY}&csrf={token}"
        )),
    ));
    answers.push(("tool after".into(), c.get("/tool/weather")));
    for (what, a) in &answers {
        assert!(a.status != 0, "{what}");
        let all = format!("{:?}{}", a.headers, a.body);
        for form in forms() {
            assert!(
                !all.contains(&form),
                "{what} shows the value as {form:?}: {all}"
            );
        }
        // The full value's tail, the part any form of it keeps as it is.
        assert!(!all.contains("c0ns0le"), "{what}: {all}");
    }
    // The redaction marks are there instead.
    assert!(answers[2].1.body.contains("[REDACTED:CONSOLE_API_KEY]"));
}

/// A child process killed when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_console_command_prints_its_secret_on_stdout_only() {
    let home = tempfile::tempdir().unwrap();
    let mut child = Child(
        std::process::Command::new(env!("CARGO_BIN_EXE_autotool"))
            .args(["console", "--no-open"])
            .env("AUTOTOOL_HOME", home.path())
            // Every log line on: none of them may carry the secret either.
            .env("AUTOTOOL_LOG", "trace")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(Duration::from_secs(60)).unwrap();
    // The control: the URL on stdout carries the secret.
    let url = line.trim();
    let (address, secret) = url.split_once("?s=").unwrap();
    assert_eq!(secret.len(), 64, "{url}");
    let port: u16 = address
        .strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.strip_suffix('/'))
        .unwrap()
        .parse()
        .unwrap();
    // Used, as a browser would: the secret traded for the cookie, a page read with it.
    let a = raw(
        port,
        &format!(
            "GET /tool/x?s={secret} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
        ),
    );
    assert_eq!(a.status, 303, "{a:?}");
    let a = raw(
        port,
        &format!(
            "GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: autotool_console_{port}={secret}\r\n\
             Connection: close\r\n\r\n"
        ),
    );
    assert_eq!(a.status, 200, "{a:?}");
    let mut stderr = child.0.stderr.take().unwrap();
    let _ = child.0.kill();
    let _ = child.0.wait();
    let mut said = String::new();
    stderr.read_to_string(&mut said).unwrap();
    assert!(
        said.contains(&format!("serving on {address} ")),
        "stderr: {said}"
    );
    assert!(!said.contains(secret), "stderr holds the secret: {said}");
}
