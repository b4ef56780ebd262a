//! `autotool serve --transport http`: the service many hosts share.
//! - The official Python SDK (`python/driver.py` over the SDK's streamable HTTP client, with the
//!   service token) as two hosts at once, one per era: each lists, creates and calls; a tool
//!   created through one is listed to the other and the other hears of it; a slow call from one
//!   host does not hold up a call from the other; SIGTERM stops the serve within seconds with
//!   both still connected, and no tool process outlives it.
//! - Raw requests: no token or a wrong one is 401; a foreign `Host` or `Origin` is 403 even with
//!   the token (each beside its control, the same request that succeeds); 2026-07-28 requests
//!   get empty prompt and resource lists with cache hints, and `initialize` is 404/-32601.
//! - `--listen 0.0.0.0:0` without `--allow-remote`, `--no-auth` with it, and `--no-auth` on a
//!   loopback TCP port are refused.
//! - `--listen unix:PATH`: a socket of mode 0600 that serves MCP with the token, and is removed
//!   on SIGTERM.

use autotool_integration::http::{self, HttpServe, Target};
use autotool_integration::python::{Driver, Era, is_list_change};
use autotool_integration::{Checks, Need, TestHome, procfs, setup};
use serde_json::{Value, json};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::time::{Duration, Instant};

const START: Duration = Duration::from_secs(60);
const CREATE: Duration = Duration::from_secs(90);
/// How long a stopped serve may take to exit.
const STOP: Duration = Duration::from_secs(5);
/// How long the slow call sleeps.
const SLOW: f64 = 2.0;

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "autotool-http-test", "version": "0"}}})
}

/// The headers of a 2026-07-28 request over HTTP besides the token: the protocol version and
/// the method (SEP-2243; rmcp refuses a request without them, -32020).
fn modern_headers<'a>(bearer: &'a str, method: &'a str) -> [(&'a str, &'a str); 3] {
    [
        ("Authorization", bearer),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
    ]
}

fn modern(id: i64, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "autotool-http-test", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn names(d: &mut Driver) -> Vec<String> {
    d.list().unwrap_or_default()
}

fn create(d: &mut Driver, name: &str, source: &str, extra: Value) -> Value {
    let mut cmd = json!({"op": "create", "name": name, "source": source});
    if let (Some(o), Some(e)) = (cmd.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    d.cmd(cmd, CREATE).unwrap().1["result"].clone()
}

fn ok(v: &Value) -> bool {
    v["kind"] == "result" && v["is_error"] == false
}

/// SIGTERM `serve` and wait for it: its exit status, and how long it took.
fn stop(serve: &mut HttpServe) -> (Option<std::process::ExitStatus>, Duration) {
    let t = Instant::now();
    serve.terminate().unwrap();
    let status = serve.child.wait_exit(STOP).unwrap();
    (status, t.elapsed())
}

#[test]
fn http_python_sdk_hosts_of_both_eras_share_one_serve() {
    let test = "http_python_sdk_hosts_of_both_eras_share_one_serve";
    let Some(setup) = setup(test, &[Need::Serve, Need::PythonSdk]) else {
        return;
    };
    let mut c = Checks::new();
    let home = TestHome::new(&setup).unwrap();
    let mut serve = HttpServe::start(&home, "127.0.0.1:0", &[], START).unwrap();
    let url = serve.url();
    let token_file = home.path().join("service-token");
    let mode = std::fs::metadata(&token_file).map(|m| m.permissions().mode() & 0o777);
    c.check(
        mode.as_ref().is_ok_and(|m| *m == 0o600),
        "the first start made $AUTOTOOL_HOME/service-token, mode 0600",
        format!("{mode:?}"),
    );

    // The SDK without the token: no session (the SDK reports only "Server returned an error
    // response"; the raw-request test sees the 401 itself).
    let refused = Driver::connect(&home, "host without token", Era::Legacy, &url, None, START);
    c.check(
        refused.is_err(),
        "an SDK host without the token cannot open a session",
        match &refused {
            Ok(d) => format!("connected: {}", d.ready),
            Err(e) => format!("{e:#}"),
        },
    );
    drop(refused);

    let mut legacy = Driver::connect(
        &home,
        "legacy host",
        Era::Legacy,
        &url,
        Some(&token_file),
        START,
    )
    .unwrap();
    let mut modern = Driver::connect(
        &home,
        "modern host",
        Era::Modern,
        &url,
        Some(&token_file),
        START,
    )
    .unwrap();
    c.check(
        legacy.ready["protocol_version"] == "2025-11-25"
            && legacy.ready["server_info"]["name"] == "autotool",
        "the legacy host initialized at 2025-11-25 over HTTP",
        &legacy.ready,
    );
    c.check(
        modern.ready["protocol_version"] == "2026-07-28"
            && modern.ready["listen"]["toolsListChanged"] == true,
        "the modern host discovered 2026-07-28 over HTTP and its tools subscription was honoured",
        &modern.ready,
    );
    for (label, host) in [("legacy", &mut legacy), ("modern", &mut modern)] {
        let listed = names(host);
        c.check(
            listed == ["create_tool", "run_tool", "search_tools", "tool_info"],
            &format!("the {label} host lists create_tool, run_tool and search_tools"),
            format!("{listed:?}"),
        );
    }

    // The legacy host creates and calls; the modern host sees it and hears of it.
    let created_at = Instant::now();
    let created = create(&mut legacy, "adder", "ADD_V1", json!({}));
    c.check(
        ok(&created) && created["structured"]["version"] == 1,
        "the legacy host creates adder (version 1)",
        &created,
    );
    let sum = legacy.call("adder__add", json!({"a": 2, "b": 3})).unwrap();
    c.check(
        ok(&sum) && sum["structured"] == json!({"result": 5}),
        "the legacy host calls adder__add(2, 3) = 5",
        &sum,
    );
    let heard = modern
        .wait_event(created_at + CREATE, |v| {
            is_list_change(v) && v["event"] == "subscription"
        })
        .unwrap();
    c.check(
        heard.is_some(),
        "the modern host hears of the legacy host's tool on its subscriptions/listen stream",
        format!("{:?}", modern.events),
    );
    let listed = names(&mut modern);
    c.check(
        listed.iter().any(|n| n == "adder__add"),
        "the modern host lists the tool the legacy host created",
        format!("{listed:?}"),
    );

    // The modern host creates and calls; the legacy host sees it and hears of it.
    let created_at = Instant::now();
    let slow = create(
        &mut modern,
        "slow",
        "SLOW_PING",
        json!({"preamble": "SLOW_PING_PREAMBLE"}),
    );
    c.check(ok(&slow), "the modern host creates slow", &slow);
    let pong = modern.call("slow__ping", json!({})).unwrap();
    c.check(
        ok(&pong) && pong["text"] == "pong",
        "the modern host calls slow__ping() = pong",
        &pong,
    );
    let via = modern
        .call(
            "run_tool",
            json!({"tool": "adder", "function": "add", "arguments": {"a": 40, "b": 2}}),
        )
        .unwrap();
    c.check(
        ok(&via) && via["structured"] == json!({"result": 42}),
        "the modern host calls the legacy host's adder through run_tool: 42",
        &via,
    );
    let heard = legacy
        .wait_event(created_at + CREATE, |v| {
            is_list_change(v) && v["event"] == "notification"
        })
        .unwrap();
    c.check(
        heard.is_some(),
        "the legacy host hears of the modern host's tool (notifications/tools/list_changed)",
        format!("{:?}", legacy.events),
    );
    let listed = names(&mut legacy);
    c.check(
        listed
            == [
                "adder__add",
                "create_tool",
                "run_tool",
                "search_tools",
                "slow__ping",
                "tool_info",
            ],
        "the legacy host lists both tools, sorted",
        format!("{listed:?}"),
    );

    // A slow call from one host does not hold up a call from the other: the fast one returns
    // while the slow one is still pending.
    let slow_sent = Instant::now();
    let slow_id = legacy
        .send(json!({"op": "call", "name": "slow__ping", "arguments": {"delay": SLOW}}))
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let fast_sent = Instant::now();
    let (fast_at, fast) = modern
        .cmd(
            json!({"op": "call", "name": "slow__ping", "arguments": {"delay": 0}}),
            CREATE,
        )
        .unwrap();
    let pending_then = legacy.drain_pending_reply(slow_id).is_none();
    let (slow_at, slow_reply) = legacy.reply(slow_id, CREATE).unwrap();
    let fast_took = fast_at.saturating_duration_since(fast_sent);
    let slow_took = slow_at.saturating_duration_since(slow_sent);
    eprintln!(
        "{test}: the fast call took {:.2}s while the slow one ({SLOW}s) took {:.2}s",
        fast_took.as_secs_f64(),
        slow_took.as_secs_f64()
    );
    c.check(
        ok(&fast["result"]) && ok(&slow_reply["result"]),
        "both calls succeed",
        format!("fast {fast}\nslow {slow_reply}"),
    );
    c.check(
        pending_then && fast_at < slow_at,
        "the modern host's fast call returns while the legacy host's slow call is pending",
        format!("fast took {fast_took:?}, slow took {slow_took:?}"),
    );
    c.check(
        fast_took < Duration::from_secs_f64(SLOW * 0.75)
            && slow_took >= Duration::from_secs_f64(SLOW * 0.95),
        &format!("the fast call takes well under {SLOW}s; the slow one at least its sleep"),
        format!("fast took {fast_took:?}, slow took {slow_took:?}"),
    );

    // SIGTERM with both hosts still connected (the legacy one holds an event stream open).
    let tool_processes = procfs::descendants(serve.child.pid());
    let (status, took) = stop(&mut serve);
    c.check(
        status.is_some_and(|s| s.success()),
        &format!("SIGTERM stops the serve within {STOP:?}, exit status 0"),
        format!("{status:?} after {took:?}"),
    );
    let deadline = Instant::now() + STOP;
    let mut left = tool_processes.clone();
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left.retain(|p| procfs::alive(*p));
    }
    c.check(
        !tool_processes.is_empty() && left.is_empty(),
        "no tool process outlives the serve",
        format!(
            "still alive: {:?} of {tool_processes:?}",
            left.iter().map(|p| procfs::cmdline(*p)).collect::<Vec<_>>()
        ),
    );
    let refused = match &serve.target {
        Target::Tcp(a) => std::net::TcpStream::connect_timeout(a, Duration::from_secs(2)).is_err(),
        Target::Unix(_) => true,
    };
    c.check(refused, "nothing listens on the port any more", &url);

    let stderrs = format!(
        "legacy host stderr:\n{}\nmodern host stderr:\n{}\nserve stderr:\n{}",
        legacy.stderr(),
        modern.stderr(),
        serve.child.final_stderr()
    );
    drop(legacy);
    drop(modern);
    c.finish(test, || format!("{stderrs}\n{}", home.log_tail(20_000)));
}

#[test]
fn http_refuses_missing_and_wrong_tokens_foreign_hosts_and_origins() {
    let test = "http_refuses_missing_and_wrong_tokens_foreign_hosts_and_origins";
    let Some(setup) = setup(test, &[Need::Serve, Need::PythonSdk]) else {
        return;
    };
    let mut c = Checks::new();
    let home = TestHome::new(&setup).unwrap();
    let mut serve = HttpServe::start(&home, "127.0.0.1:0", &[], START).unwrap();
    let token = http::token(home.path()).unwrap();
    let bearer = format!("Bearer {token}");
    let port = match &serve.target {
        Target::Tcp(a) => a.port(),
        Target::Unix(_) => 0,
    };
    let mut transcript = Vec::new();
    let mut post = |label: &str, headers: &[(&str, &str)], body: &Value| {
        let r = serve.post(headers, body).unwrap();
        transcript.push(format!("{label}: {r}"));
        r
    };

    // Controls: the same request with the token, from this machine, succeeds.
    let good = post("token", &[("Authorization", &bearer)], &initialize());
    c.check(
        good.status == 200 && good.reply(1)["result"]["serverInfo"]["name"] == "autotool",
        "control: initialize with the token succeeds",
        &good,
    );
    // The end of that session: 200, as the Python SDK (and the spec's "may respond") expect;
    // rmcp answers 202, which the SDK reports as a failure on every close.
    let session = good
        .header("mcp-session-id")
        .unwrap_or_default()
        .to_string();
    let ended = serve
        .delete(&[("Authorization", &bearer), ("Mcp-Session-Id", &session)])
        .unwrap();
    c.check(
        !session.is_empty() && ended.status == 200,
        "DELETE of a session is answered 200",
        &ended,
    );
    let local_origin = format!("http://localhost:{port}");
    let good_origin = post(
        "token, local Origin",
        &[("Authorization", &bearer), ("Origin", &local_origin)],
        &initialize(),
    );
    c.check(
        good_origin.status == 200,
        "control: with the token and a loopback Origin it succeeds",
        &good_origin,
    );

    // No token, a wrong one, another scheme: 401, saying where the token is.
    let none = post("no token", &[], &initialize());
    c.check(
        none.status == 401
            && none
                .header("www-authenticate")
                .is_some_and(|v| v.starts_with("Bearer"))
            && none.body.contains("service-token"),
        "without a token: 401, WWW-Authenticate: Bearer, naming the token file",
        &none,
    );
    let mut wrong = token.clone().into_bytes();
    if let Some(b) = wrong.last_mut() {
        *b = if *b == b'0' { b'1' } else { b'0' };
    }
    let wrong = format!("Bearer {}", String::from_utf8_lossy(&wrong));
    let longer = format!("{bearer}0");
    let basic = format!("Basic {token}");
    for (label, value) in [
        ("a wrong token of the same length", wrong.as_str()),
        ("the token with a byte more", longer.as_str()),
        ("the token under the Basic scheme", basic.as_str()),
    ] {
        let r = post(label, &[("Authorization", value)], &initialize());
        c.check(r.status == 401, &format!("{label}: 401"), &r);
    }

    // DNS rebinding: a foreign Host or Origin is refused even with the token.
    for host in ["evil.example", &format!("evil.example:{port}")] {
        let r = post(
            "token, foreign Host",
            &[("Authorization", &bearer), ("Host", host)],
            &initialize(),
        );
        c.check(
            r.status == 403,
            &format!("Host: {host} with the token: 403"),
            &r,
        );
    }
    for origin in ["http://evil.example", "https://evil.example:443"] {
        let r = post(
            "token, foreign Origin",
            &[("Authorization", &bearer), ("Origin", origin)],
            &initialize(),
        );
        c.check(
            r.status == 403,
            &format!("Origin: {origin} with the token: 403"),
            &r,
        );
    }

    // 2026-07-28, stateless: empty prompt and resource lists with cache hints; no initialize.
    for (id, method, key) in [
        (2, "prompts/list", "prompts"),
        (3, "resources/list", "resources"),
        (4, "resources/templates/list", "resourceTemplates"),
    ] {
        let r = post(
            method,
            &modern_headers(&bearer, method),
            &modern(id, method, json!({})),
        );
        let result = &r.reply(id)["result"];
        c.check(
            r.status == 200
                && result[key].as_array().is_some_and(Vec::is_empty)
                && result["ttlMs"].is_u64()
                && result["cacheScope"].is_string(),
            &format!("2026-07-28 {method}: empty {key}, with ttlMs and cacheScope"),
            &r,
        );
    }
    let init = post(
        "2026 initialize",
        &modern_headers(&bearer, "initialize"),
        &modern(5, "initialize", json!({})),
    );
    c.check(
        init.status == 404 && init.reply(5)["error"]["code"] == -32601,
        "2026-07-28 initialize: HTTP 404 with -32601 (the method was removed)",
        &init,
    );
    let elsewhere = http::request(
        &serve.target,
        "GET",
        "/other",
        &[("Authorization", &bearer)],
        None,
        Duration::from_secs(10),
    )
    .unwrap();
    c.check(
        elsewhere.status == 404 && elsewhere.body.contains("/mcp"),
        "another path: 404 naming /mcp",
        &elsewhere,
    );

    let (status, took) = stop(&mut serve);
    c.check(
        status.is_some_and(|s| s.success()),
        "SIGTERM stops the serve",
        format!("{status:?} after {took:?}"),
    );
    c.finish(test, || {
        format!(
            "{}\nserve stderr:\n{}",
            transcript.join("\n"),
            serve.child.final_stderr()
        )
    });
}

#[test]
fn http_refuses_remote_listening_without_allow_remote_and_no_auth_with_it() {
    let test = "http_refuses_remote_listening_without_allow_remote_and_no_auth_with_it";
    let Some(setup) = setup(test, &[Need::Serve, Need::PythonSdk]) else {
        return;
    };
    let mut c = Checks::new();
    let home = TestHome::new(&setup).unwrap();
    for (listen, args, wants) in [
        (
            "0.0.0.0:0",
            &[][..],
            &["refusing to listen on", "--allow-remote"][..],
        ),
        (
            "[::]:0",
            &[][..],
            &["refusing to listen on", "--allow-remote"][..],
        ),
        (
            "127.0.0.1:0",
            &["--no-auth", "--allow-remote"][..],
            &["--no-auth is refused on"][..],
        ),
        (
            "0.0.0.0:0",
            &["--no-auth", "--allow-remote"][..],
            &["--no-auth"][..],
        ),
        // Without the token only on a unix socket: never on TCP, loopback included.
        (
            "127.0.0.1:0",
            &["--no-auth"][..],
            &["--no-auth is refused on", "unix:PATH"][..],
        ),
    ] {
        let what = format!("--listen {listen} {}", args.join(" "));
        let (status, stderr) = http::refused(&home, listen, args, START).unwrap();
        c.check(
            status.is_some_and(|s| !s.success()),
            &format!("{what}: refused with a non-zero exit"),
            format!("{status:?}; stderr: {stderr}"),
        );
        c.check(
            wants.iter().all(|w| stderr.contains(w)) && !stderr.contains("listening on"),
            &format!("{what}: the message says why ({wants:?}) and nothing listened"),
            &stderr,
        );
    }
    c.finish(test, String::new);
}

#[test]
fn http_unix_socket_is_private_and_serves_mcp_with_the_token() {
    let test = "http_unix_socket_is_private_and_serves_mcp_with_the_token";
    let Some(setup) = setup(test, &[Need::Serve, Need::PythonSdk]) else {
        return;
    };
    let mut c = Checks::new();
    let home = TestHome::new(&setup).unwrap();
    let socket = home.path().join("run/autotool.sock");
    let listen = format!("unix:{}", socket.display());
    let mut serve = HttpServe::start(&home, &listen, &[], START).unwrap();
    c.check(
        serve.target == Target::Unix(socket.clone()),
        "the serve says it listens on the socket",
        format!("{:?}", serve.target),
    );
    let meta = std::fs::metadata(&socket);
    c.check(
        meta.as_ref()
            .is_ok_and(|m| m.file_type().is_socket() && m.permissions().mode() & 0o777 == 0o600),
        "the socket is a socket of mode 0600",
        format!(
            "{:?}",
            meta.map(|m| (m.file_type().is_socket(), m.permissions().mode() & 0o777))
        ),
    );
    let token = http::token(home.path()).unwrap();
    let bearer = format!("Bearer {token}");
    let good = serve
        .post(&[("Authorization", &bearer)], &initialize())
        .unwrap();
    c.check(
        good.status == 200 && good.reply(1)["result"]["serverInfo"]["name"] == "autotool",
        "initialize over the socket with the token succeeds",
        &good,
    );
    let list = serve
        .post(
            &modern_headers(&bearer, "tools/list"),
            &modern(2, "tools/list", json!({})),
        )
        .unwrap();
    let reply = list.reply(2);
    let listed: Vec<&str> = reply["result"]["tools"]
        .as_array()
        .map(|a| a.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    c.check(
        listed == ["create_tool", "run_tool", "search_tools", "tool_info"],
        "2026-07-28 tools/list over the socket",
        &list,
    );
    let none = serve.post(&[], &initialize()).unwrap();
    c.check(
        none.status == 401,
        "without the token the socket answers 401 too",
        &none,
    );

    let (status, took) = stop(&mut serve);
    c.check(
        status.is_some_and(|s| s.success()),
        &format!("SIGTERM stops the serve within {STOP:?}"),
        format!("{status:?} after {took:?}"),
    );
    c.check(
        !socket.exists(),
        "the socket file is removed when the serve stops",
        socket.display(),
    );
    c.finish(test, || {
        format!("serve stderr:\n{}", serve.child.final_stderr())
    });
}
