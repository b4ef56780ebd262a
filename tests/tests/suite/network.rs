//! Network, judged on the host side: listeners the test binds must see nothing from a confined
//! tool, and everything from the control. The only way out is the egress listener the launcher
//! binds inside the tool's namespace and hands over.
//!
//! Through `autotool serve`'s egress proxy, the host's loopback is a host like any other: a tool
//! holding a key allowed to one API cannot deliver it to a listener on 127.0.0.1 or ::1 (a
//! local forward proxy, an SSH SOCKS tunnel, a Docker API), until the user allows that port
//! (the control); a tool holding no key reaches only the ports of `*_API_BASE` overrides.

use super::serve::{finish, start as start_serve, strict};
use super::{
    assert_blocked, assert_escaped, attack, attack_on, builder, check_attack, marker, skip, start,
};
use autotool_tests::serve::{ServeHome, Server};
use autotool_tests::{Mode, host};
use serde_json::json;
use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the host side waits for something to arrive after the tool's attempt returned.
const GRACE: Duration = Duration::from_millis(500);

#[test]
fn tcp_to_a_host_listener_never_arrives() {
    if skip() {
        return;
    }
    for host_addr in ["127.0.0.1", "::1"] {
        let Ok(listener) = TcpListener::bind((host_addr, 0)) else {
            eprintln!("note: cannot bind {host_addr} on this host, not testing it");
            continue;
        };
        let port = listener.local_addr().unwrap().port();
        for mode in [Mode::Confined, Mode::Control] {
            let payload = marker("TCP");
            let args = json!({"host": host_addr, "port": port, "payload": payload});
            let verdict = attack(mode, "tcp_connect", args);
            let arrived = host::tcp_arrival(&listener, GRACE).unwrap();
            match mode {
                Mode::Confined => {
                    assert_blocked(&verdict, &format!("tcp to {host_addr}:{port}"));
                    assert_eq!(arrived, None, "a connection reached the host");
                }
                Mode::Control => {
                    assert_escaped(&verdict, &format!("tcp to {host_addr}:{port}"));
                    assert_eq!(arrived, Some(payload.into_bytes()));
                }
            }
        }
    }
}

#[test]
fn udp_to_a_host_socket_never_arrives() {
    if skip() {
        return;
    }
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = socket.local_addr().unwrap().port();
    for mode in [Mode::Confined, Mode::Control] {
        let payload = marker("UDP");
        let args = json!({"host": "127.0.0.1", "port": port, "payload": payload});
        let verdict = attack(mode, "udp_send", args);
        let arrived = host::udp_arrival(&socket, GRACE).unwrap();
        match mode {
            // Sending may "succeed" into the tool's empty namespace: only arrival counts.
            Mode::Confined => assert_eq!(arrived, None, "a datagram reached the host ({verdict})"),
            Mode::Control => assert_eq!(arrived, Some(payload.into_bytes()), "{verdict}"),
        }
    }
}

#[test]
fn unix_pathname_socket_is_unreachable() {
    if skip() {
        return;
    }
    let dir = host::scratch_dir("autotool-sock-").unwrap();
    let path = dir.path().join("host.sock");
    let listener = UnixListener::bind(&path).unwrap();
    for mode in [Mode::Confined, Mode::Control] {
        let payload = marker("UNIX");
        let args = json!({"path": path, "payload": payload});
        let verdict = attack(mode, "unix_connect", args);
        let arrived = host::unix_arrival(&listener, GRACE).unwrap();
        match mode {
            Mode::Confined => {
                assert_blocked(&verdict, "connect to a host unix socket");
                assert_eq!(arrived, None, "a connection reached the host");
            }
            Mode::Control => {
                assert_escaped(&verdict, "connect to a host unix socket");
                assert_eq!(arrived, Some(payload.into_bytes()));
            }
        }
    }
}

#[test]
fn abstract_unix_socket_is_unreachable() {
    if skip() {
        return;
    }
    let name = marker("abstract");
    let address = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = UnixListener::bind_addr(&address).unwrap();
    for mode in [Mode::Confined, Mode::Control] {
        let payload = marker("ABSTRACT");
        let args = json!({"path": name, "payload": payload, "abstract": true});
        let verdict = attack(mode, "unix_connect", args);
        let arrived = host::unix_arrival(&listener, GRACE).unwrap();
        match mode {
            Mode::Confined => {
                assert_blocked(&verdict, "connect to a host abstract socket");
                assert_eq!(arrived, None, "a connection reached the host");
            }
            Mode::Control => {
                assert_escaped(&verdict, "connect to a host abstract socket");
                assert_eq!(arrived, Some(payload.into_bytes()));
            }
        }
    }
}

#[test]
fn own_loopback_server_is_refused() {
    if skip() {
        return;
    }
    // Inside its namespace the tool may only connect to the egress port.
    check_attack("tcp_loopback_server", json!({}));
}

#[test]
fn unneeded_socket_families_fail() {
    if skip() {
        return;
    }
    let root = host::euid() == 0;
    // (family, type, protocol, whether an unprivileged control can open it)
    let cases = [
        ("AF_NETLINK", "SOCK_RAW", 0, true),
        ("AF_UNIX", "SOCK_DGRAM", 0, true),
        ("AF_VSOCK", "SOCK_STREAM", 0, true),
        ("AF_ALG", "SOCK_SEQPACKET", 0, true),
        ("AF_PACKET", "SOCK_RAW", 0, false),
        ("AF_INET", "SOCK_RAW", 1, false),
        ("AF_INET6", "SOCK_RAW", 58, false),
        // IPv4 and IPv6 with a protocol other than TCP or UDP: MPTCP (which Landlock's TCP
        // rules do not cover), UDP-Lite, SCTP, ICMP ping sockets.
        ("AF_INET", "SOCK_STREAM", 262, true),
        ("AF_INET6", "SOCK_STREAM", 262, true),
        ("AF_INET", "SOCK_DGRAM", 136, true),
        ("AF_INET6", "SOCK_DGRAM", 136, true),
        ("AF_INET", "SOCK_STREAM", 132, true),
        ("AF_INET", "SOCK_SEQPACKET", 132, true),
        // Ping sockets need the group in net.ipv4.ping_group_range, root's included.
        ("AF_INET", "SOCK_DGRAM", 1, false),
    ];
    let mut confined = start(Mode::Confined);
    let mut control = start(Mode::Control);
    for (family, kind, protocol, unprivileged) in cases {
        let args = json!({"family": family, "kind": kind, "protocol": protocol});
        let what = format!("socket({family}, {kind}, {protocol})");
        assert_blocked(
            &attack_on(&mut confined, "open_socket", args.clone()),
            &what,
        );
        let verdict = attack_on(&mut control, "open_socket", args);
        if verdict.contains("Address family not supported") {
            eprintln!("note: the host kernel has no {family}: no control for it");
        } else if verdict.contains("Protocol not supported")
            || verdict.contains("Socket type not supported")
        {
            eprintln!("note: the host kernel has no protocol {protocol}: no control for {what}");
        } else if (root && protocol != 1) || unprivileged {
            assert_escaped(&verdict, &what);
        }
    }
    // TCP and UDP still open confined, by protocol 0 or by number (as getaddrinfo gives them).
    for (family, kind, protocol) in [
        ("AF_INET", "SOCK_STREAM", 0),
        ("AF_INET", "SOCK_STREAM", 6),
        ("AF_INET6", "SOCK_STREAM", 6),
        ("AF_INET", "SOCK_DGRAM", 17),
        ("AF_INET6", "SOCK_DGRAM", 0),
    ] {
        let args = json!({"family": family, "kind": kind, "protocol": protocol});
        let verdict = attack_on(&mut confined, "open_socket", args);
        assert!(
            verdict.starts_with("ESCAPED: opened"),
            "socket({family}, {kind}, {protocol}) must work confined: {verdict}"
        );
    }
}

#[test]
fn mptcp_cannot_go_around_landlocks_tcp_rules() {
    if skip() {
        return;
    }
    // Confined: no MPTCP socket at all, so no listener or connection Landlock does not see.
    let confined = attack(Mode::Confined, "mptcp_past_landlock", json!({}));
    assert_blocked(&confined, "MPTCP loopback round trip");
    assert!(
        confined.contains(r#""mptcp": "PermissionError"#),
        "refused for another reason: {confined}"
    );
    // Control: the tool restricts itself with Landlock's TCP rules as the launcher does; plain
    // TCP is refused, MPTCP goes through.
    let control = attack(
        Mode::Control,
        "mptcp_past_landlock",
        json!({"apply_landlock": true}),
    );
    if control.contains("Protocol not supported") || control.contains("Protocol not available") {
        autotool_tests::print_skip(
            "mptcp_cannot_go_around_landlocks_tcp_rules control",
            &format!("MPTCP is not enabled on this host (net.mptcp.enabled): {control}"),
        );
        return;
    }
    assert_escaped(&control, "MPTCP past Landlock");
    assert!(
        control.contains(r#""landlock": "applied""#)
            && control.contains(r#""tcp": "PermissionError"#),
        "CONTROL: Landlock did not refuse plain TCP, so the control shows nothing: {control}"
    );
}

#[test]
fn egress_listener_receives_the_tools_connections() {
    if skip() {
        return;
    }
    // Confined only: the listener lives in the tool's own network namespace.
    let port = autotool_policy::launch::DEFAULT_EGRESS_PORT;
    let mut tool = builder().with_egress(port).start(Mode::Confined).unwrap();
    for (addr, v6) in [("127.0.0.1", false), ("::1", true)] {
        let payload = marker("EGRESS");
        let verdict = attack_on(
            &mut tool,
            "tcp_connect",
            json!({"host": addr, "port": port, "payload": payload}),
        );
        assert!(
            verdict.starts_with("ESCAPED:"),
            "connect to egress {addr}: {verdict}"
        );
        let listeners = tool.egress().unwrap();
        let listener = if v6 { &listeners.v6 } else { &listeners.v4 };
        let arrived = host::tcp_arrival(listener, Duration::from_secs(5)).unwrap();
        assert_eq!(arrived, Some(payload.into_bytes()), "egress {addr}");
    }
    // The proxy variables point at it, and any other port is still refused.
    let other = attack_on(
        &mut tool,
        "tcp_connect",
        json!({"host": "127.0.0.1", "port": port + 1, "payload": "x"}),
    );
    assert_blocked(&other, "connect to a non-egress port");
}

// ---------------------------------------------------------------------------------------------
// The host's loopback through the egress proxy of `autotool serve`

/// The value the delivering tool holds: a space, a slash and an `@`, as keys.rs's.
pub(super) const LEAK_VALUE: &str = "l3ak-v@lue/with spaces";

/// A listener on the host's loopback that keeps what arrives and answers `200 arrived`.
pub(super) struct Catcher {
    pub port: u16,
    got: Arc<Mutex<Vec<String>>>,
}

impl Catcher {
    /// Listen on `addr`:`port` (0: any); `None` when this host cannot (no IPv6, say).
    pub fn bind(addr: &str, port: u16) -> Option<Catcher> {
        let listener = TcpListener::bind((addr, port)).ok()?;
        let port = listener.local_addr().ok()?.port();
        let got = Arc::new(Mutex::new(Vec::new()));
        let sink = got.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().take(32) {
                let Ok(mut stream) = stream else { continue };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                sink.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&seen).into_owned());
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\narrived",
                );
            }
        });
        Some(Catcher { port, got })
    }

    /// [`Catcher::bind`] on a port another process just left: retried for a few seconds.
    pub fn bind_freed(addr: &str, port: u16) -> Catcher {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(c) = Catcher::bind(addr, port) {
                return c;
            }
            assert!(Instant::now() < deadline, "port {port} was never freed");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What arrived so far, one entry per connection.
    pub fn arrived(&self) -> Vec<String> {
        self.got.lock().unwrap().clone()
    }
}

/// The delivering tool (`tests/tools/serve/deliver.py`), holding `LEAK_API_KEY` or (`keyed`
/// false) no key.
pub(super) fn deliver_code(keyed: bool) -> String {
    let code = autotool_tests::serve::fixture("deliver.py").unwrap();
    if keyed {
        code
    } else {
        code.replace("REQUIRED_ENV = [\"LEAK_API_KEY\"]", "REQUIRED_ENV = []")
    }
}

/// Create the delivering tool as `deliver` (quick verification: no probes).
pub(super) fn create_deliver(server: &mut Server, keyed: bool) {
    let created = server
        .call_result(
            "create_tool",
            json!({"name": "deliver", "code": deliver_code(keyed), "verify": "quick"}),
        )
        .unwrap();
    assert!(
        !created.is_error,
        "creating the delivering tool: {}{}",
        created.text,
        server.context()
    );
}

/// The tool's attempt to send its key to `url`.
pub(super) fn deliver(server: &mut Server, url: &str) -> String {
    let answer = server
        .call_text("deliver__deliver", json!({"url": url}))
        .unwrap_or_else(|e| panic!("deliver {url}: {e:#}"));
    eprintln!("deliver {url}: {answer}");
    answer
}

/// [`deliver`] until it no longer gets the 403 of a port not allowed (serve rereads allowlists
/// within its poll interval, 0.5 s), for at most 10 s.
pub(super) fn deliver_once_allowed(server: &mut Server, url: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = deliver(server, url);
        if !answer.contains("is reachable only when the user allowed it")
            || Instant::now() > deadline
        {
            return answer;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `autotool keys allow KEY ENTRIES…` on `home`, which must succeed.
pub(super) fn allow(home: &ServeHome, key: &str, entries: &[&str]) {
    let mut args = vec!["keys", "allow", key];
    args.extend_from_slice(entries);
    let (status, out, err) = home.cli(&args).unwrap();
    assert!(status.success(), "keys allow {entries:?}: {out}{err}");
}

#[test]
fn a_key_allowed_to_one_api_never_reaches_a_loopback_listener() {
    let Some(serve) = strict() else { return };
    let serve = serve
        .arg("--dangerously-allow-all-tools")
        .env("LEAK_API_KEY", LEAK_VALUE);
    for (addr, in_url) in [("127.0.0.1", "127.0.0.1"), ("::1", "[::1]")] {
        let Some(catcher) = Catcher::bind(addr, 0) else {
            eprintln!("note: cannot bind {addr} on this host, not testing it");
            continue;
        };
        let port = catcher.port;
        let home = ServeHome::new().unwrap();
        allow(&home, "LEAK_API_KEY", &["api.example.com"]);
        let mut server = start_serve(&serve, &home);
        create_deliver(&mut server, true);
        let url = format!("http://{in_url}:{port}/collect");

        let refused = deliver(&mut server, &url);
        assert!(
            refused.starts_with("REFUSED:") && refused.contains("403"),
            "{addr}: {refused}"
        );
        assert!(
            refused.contains(&format!("may not reach localhost:{port}"))
                && refused.contains(&format!(
                    "autotool keys allow LEAK_API_KEY api.example.com localhost:{port}"
                )),
            "{addr}: the refusal says how to allow it: {refused}"
        );
        assert!(
            catcher.arrived().is_empty(),
            "{addr}: the key arrived: {:?}",
            catcher.arrived()
        );

        // The control: once the user allows that port (in any spelling), the same attempt
        // arrives, key and all: the path was real.
        allow(
            &home,
            "LEAK_API_KEY",
            &["api.example.com", &format!("{in_url}:{port}")],
        );
        let arrived = deliver_once_allowed(&mut server, &url);
        assert_eq!(arrived, "ARRIVED: arrived", "{addr}");
        let got = catcher.arrived();
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].contains(&format!("X-Leak: {LEAK_VALUE}")), "{got:?}");
        finish(server);
    }
}

#[test]
fn a_tool_holding_no_key_reaches_only_the_api_base_ports_on_the_loopback() {
    let Some(serve) = strict() else { return };
    let api = Catcher::bind("127.0.0.1", 0).unwrap();
    let other = Catcher::bind("127.0.0.1", 0).unwrap();
    let home = ServeHome::new().unwrap();
    let with_base = |port: u16| {
        serve
            .clone()
            .env("NOKEY_API_BASE", &format!("http://localhost:{port}/v1"))
    };
    let mut server = start_serve(&with_base(api.port), &home);
    create_deliver(&mut server, false);
    let arrived = deliver(&mut server, &format!("http://localhost:{}/v1/x", api.port));
    assert_eq!(arrived, "ARRIVED: arrived");
    assert_eq!(api.arrived().len(), 1);

    let refused = deliver(&mut server, &format!("http://127.0.0.1:{}/", other.port));
    assert!(
        refused.starts_with("REFUSED:") && refused.contains("403"),
        "{refused}"
    );
    assert!(
        refused.contains(&format!("LOCAL_API_BASE=http://localhost:{}", other.port))
            && !refused.contains("keys allow"),
        "a tool holding no key can only be pointed at the port: {refused}"
    );
    assert!(other.arrived().is_empty(), "{:?}", other.arrived());
    finish(server);

    // The control: the same tool, with that port as serve's api base, reaches it.
    let mut server = start_serve(&with_base(other.port), &home);
    let arrived = deliver(&mut server, &format!("http://127.0.0.1:{}/", other.port));
    assert_eq!(arrived, "ARRIVED: arrived");
    assert_eq!(other.arrived().len(), 1);
    finish(server);
}

#[test]
fn a_keyless_tool_reaches_only_the_hosts_it_declared_and_its_refusals_are_shown() {
    let Some(serve) = strict() else { return };
    let declared = Catcher::bind("127.0.0.1", 0).unwrap();
    let other = Catcher::bind("127.0.0.1", 0).unwrap();
    let home = ServeHome::new().unwrap();
    // `--dangerously-allow-all-tools` grants declared reach as it grants declared keys.
    let mut server = start_serve(&serve.arg("--dangerously-allow-all-tools"), &home);
    let code = deliver_code(false).replace(
        "REQUIRED_ENV = []",
        &format!(
            "REQUIRED_ENV = []\nREQUIRED_HOSTS = [\"localhost:{}\"]",
            declared.port
        ),
    );
    let created = server
        .call_result(
            "create_tool",
            json!({"name": "deliver", "code": code, "verify": "quick"}),
        )
        .unwrap();
    assert!(!created.is_error, "{}{}", created.text, server.context());

    // The control: the host it declared answers.
    let arrived = deliver(
        &mut server,
        &format!("http://localhost:{}/x", declared.port),
    );
    assert_eq!(arrived, "ARRIVED: arrived");
    assert_eq!(declared.arrived().len(), 1);

    // The attack: posting its argument anywhere else.
    let refused = deliver(
        &mut server,
        &format!("http://127.0.0.1:{}/collect", other.port),
    );
    assert!(
        refused.starts_with("REFUSED:") && refused.contains("403"),
        "{refused}"
    );
    assert!(
        refused.contains("declares in REQUIRED_HOSTS"),
        "the refusal says what the tool may reach: {refused}"
    );
    assert!(other.arrived().is_empty(), "{:?}", other.arrived());
    finish(server);

    // The refusal is on record and shown, with the tool, the host and the port.
    let (status, out, err) = home.cli(&["tools", "show", "deliver"]).unwrap();
    assert!(status.success(), "{out}{err}");
    assert!(
        out.contains(&format!("localhost:{}  declared", declared.port)),
        "{out}"
    );
    let refusals = out.split("refused lately:").nth(1).unwrap_or_default();
    assert!(refusals.contains(&format!(":{}", other.port)), "{out}");
    let (status, out, err) = home.cli(&["tools", "show", "deliver", "--json"]).unwrap();
    assert!(status.success(), "{out}{err}");
    let shown: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        shown["reach"]["refused"][0]["target"],
        format!("127.0.0.1:{}", other.port),
        "{out}"
    );
}
