//! Network, judged on the host side: listeners the test binds must see nothing from a confined
//! tool, and everything from the control. The only way out is the egress listener the launcher
//! binds inside the tool's namespace and hands over.

use super::{
    assert_blocked, assert_escaped, attack, attack_on, builder, check_attack, marker, skip, start,
};
use autotool_tests::{Mode, host};
use serde_json::json;
use std::net::{TcpListener, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::time::Duration;

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
