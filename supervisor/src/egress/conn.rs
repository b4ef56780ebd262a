//! One connection from a tool: its request, the decision, the upstream connection, the splice.

use super::head::{Head, HeadError, read_head};
use super::tls::{self, Hello};
use super::{EgressEvent, Refusal, State, TunnelRefusal, loopback_class};
use autotool_policy::hosts::{self, Decision, ForbiddenAddress, Host, HostError, LOCALHOST};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, TryAcquireError};
use tokio::time::Instant;

/// Splice buffer per direction.
const BUFFER: usize = 64 << 10;
/// Most addresses of one name tried.
const MAX_ADDRESSES: usize = 8;
/// How long an answer that ends a connection may take to write, and how long the rest of the
/// request is then drained so the close does not reset the answer away.
const LINGER: Duration = Duration::from_secs(1);
/// A TLS fatal `unrecognized_name` alert: what the tool's TLS library reports when its tunnel
/// is closed over the server name.
const ALERT_UNRECOGNIZED_NAME: [u8; 7] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x70];

/// How a request ends when it goes no further.
enum Stop {
    /// Answer with this status and message.
    Answer {
        status: u16,
        title: &'static str,
        message: String,
    },
    /// Refused: a `403` and an audit event.
    Refused { target: String, refusal: Refusal },
    /// Just close.
    Close,
}

fn answer(status: u16, title: &'static str, message: impl Into<String>) -> Stop {
    Stop::Answer {
        status,
        title,
        message: message.into(),
    }
}

/// Serve one accepted connection, holding `slot` (an accepted-connection permit) throughout.
pub(super) async fn serve(mut client: TcpStream, state: Arc<State>, slot: OwnedSemaphorePermit) {
    let _slot = slot;
    let limits = state.config.limits;
    // A free slot is taken at once; only a connection that has to queue arms the timer.
    let free = match state.active.clone().try_acquire_owned() {
        Ok(permit) => Some(permit),
        Err(TryAcquireError::Closed) => return,
        Err(TryAcquireError::NoPermits) => None,
    };
    let _active = match free {
        Some(permit) => permit,
        None => match tokio::time::timeout(limits.queue_wait, state.active.clone().acquire_owned())
            .await
        {
            Ok(Ok(permit)) => permit,
            Ok(Err(_)) => return,
            Err(_) => {
                let message = format!(
                    "{} already has {} connections open through autotool's egress proxy, the most \
                 it may; close some (or reuse them) and try again.",
                    state.tool(),
                    limits.max_connections
                );
                finish(
                    &mut client,
                    &state,
                    answer(503, "Service Unavailable", message),
                )
                .await;
                return;
            }
        },
    };
    let _ = client.set_nodelay(true);
    let mut buf = Vec::with_capacity(2048);
    let read = tokio::time::timeout(
        limits.head_timeout,
        read_head(&mut client, &mut buf, limits.max_head_bytes),
    )
    .await;
    let (head, used) = match read {
        Ok(Ok(head)) => head,
        Ok(Err(HeadError::TooLarge)) => {
            let message = format!(
                "the request head is larger than the {} bytes autotool's egress proxy accepts",
                limits.max_head_bytes
            );
            finish(
                &mut client,
                &state,
                answer(431, "Request Header Fields Too Large", message),
            )
            .await;
            return;
        }
        Ok(Err(HeadError::Malformed(what))) => {
            finish(&mut client, &state, answer(400, "Bad Request", what)).await;
            return;
        }
        Ok(Err(HeadError::Closed | HeadError::Io)) => return,
        Err(_) => {
            let message = format!(
                "no complete request head within {} s",
                limits.head_timeout.as_secs()
            );
            finish(&mut client, &state, answer(408, "Request Timeout", message)).await;
            return;
        }
    };
    let rest = buf.split_off(used);
    let outcome = if head.method == "CONNECT" {
        connect(&mut client, &state, &head, rest).await
    } else {
        forward(&mut client, &state, &head, rest).await
    };
    if let Err(stop) = outcome {
        finish(&mut client, &state, stop).await;
    }
}

/// Answer (or just close), emitting the event for a refusal.
async fn finish(client: &mut TcpStream, state: &State, stop: Stop) {
    let (status, title, message) = match stop {
        Stop::Close => return,
        Stop::Answer {
            status,
            title,
            message,
        } => (status, title, message),
        Stop::Refused { target, refusal } => {
            let event = EgressEvent {
                tool: state.tool(),
                target,
                refusal,
            };
            let message = event.to_string();
            state.emit(event);
            (403, "Forbidden", message)
        }
    };
    let reason = reason_phrase(&message, title);
    let body = format!("{message}\n");
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(LINGER, async {
        client.write_all(response.as_bytes()).await?;
        client.shutdown().await?;
        // Drain what the tool still sends, so closing does not reset the answer away.
        let mut sink = [0u8; 4096];
        while client.read(&mut sink).await? > 0 {}
        Ok::<_, io::Error>(())
    })
    .await;
}

/// The message as a reason phrase: clients quote it in their errors. Printable ASCII only.
fn reason_phrase(message: &str, fallback: &str) -> String {
    let phrase: String = message
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .take(1024)
        .collect();
    if phrase.trim().is_empty() {
        fallback.to_owned()
    } else {
        phrase
    }
}

/// A target that did not parse, as it may appear in an event: escaped and bounded.
fn raw_target(target: &str) -> String {
    format!("{:?}", target.chars().take(300).collect::<String>())
}

fn bad_host(target: &str, e: HostError) -> Stop {
    Stop::Refused {
        target: raw_target(target),
        refusal: Refusal::BadHost(e),
    }
}

/// `decide` against the lists as they are now, as a `Stop` when refused.
fn check_allowed(state: &State, host: &Host, port: u16) -> Result<(), Stop> {
    // Borrowed only for the decision: the lists are read for every new connection, and never
    // held across an await.
    let lists = state.config.lists.borrow();
    match hosts::decide(host, port, &lists, &state.config.api_base_ports) {
        Decision::Allow => Ok(()),
        Decision::Deny(denial) => Err(Stop::Refused {
            target: host.with_port(port),
            refusal: Refusal::NotAllowed(Box::new(denial)),
        }),
    }
}

// ---------------------------------------------------------------------------------------------
// Resolving and dialling

/// Resolve `host`, check every address, and connect to the first checked address that answers.
async fn open(state: &State, host: &Host, port: u16) -> Result<TcpStream, Stop> {
    let limits = state.config.limits;
    let deadline = Instant::now() + limits.connect_timeout;
    // Spelled out only when something goes wrong.
    let target = || host.with_port(port);
    let addrs: Vec<IpAddr> = match host {
        Host::Name(name) if name == LOCALHOST => vec![
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ],
        Host::Name(name) => {
            let resolved =
                tokio::time::timeout_at(deadline, state.config.resolver.resolve(name, port)).await;
            match resolved {
                Err(_) => {
                    return Err(answer(
                        504,
                        "Gateway Timeout",
                        format!(
                            "resolving {name} took longer than {} s",
                            limits.connect_timeout.as_secs()
                        ),
                    ));
                }
                Ok(Err(e)) => {
                    return Err(answer(
                        502,
                        "Bad Gateway",
                        format!("{name} could not be resolved: {e}"),
                    ));
                }
                Ok(Ok(addrs)) if addrs.is_empty() => {
                    return Err(answer(
                        502,
                        "Bad Gateway",
                        format!("{name} has no addresses"),
                    ));
                }
                Ok(Ok(mut addrs)) => {
                    addrs.dedup();
                    addrs
                }
            }
        }
        Host::V4(a) => vec![IpAddr::V4(*a)],
        Host::V6(a) => vec![IpAddr::V6(*a)],
    };
    // Every address is checked before any is dialled: a name that resolves to one internal
    // address among public ones is refused whole.
    for &addr in &addrs {
        match hosts::check_address(host, addr) {
            Ok(()) => {}
            Err(ForbiddenAddress::Loopback) if state.config.loopback_names => {}
            Err(class) => {
                return Err(Stop::Refused {
                    target: target(),
                    refusal: Refusal::Address { addr, class },
                });
            }
        }
    }
    if addrs.iter().any(|&a| loopback_class(a))
        && let Some(what) = state.known_owner(port)
    {
        return Err(Stop::Refused {
            target: target(),
            refusal: Refusal::OwnListener { port, what },
        });
    }
    let mut failures = Vec::new();
    for &addr in addrs.iter().take(MAX_ADDRESSES) {
        let sockaddr = SocketAddr::new(addr, port);
        match tokio::time::timeout_at(deadline, state.config.dialer.dial(sockaddr)).await {
            Ok(Ok(stream)) => {
                if loopback_class(addr) {
                    check_listener(state, port, target()).await?;
                }
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Ok(Err(e)) => failures.push(format!("{sockaddr}: {e}")),
            Err(_) => {
                return Err(answer(
                    504,
                    "Gateway Timeout",
                    format!(
                        "connecting to {} took longer than {} s",
                        target(),
                        limits.connect_timeout.as_secs()
                    ),
                ));
            }
        }
    }
    Err(answer(
        502,
        "Bad Gateway",
        format!(
            "could not connect to {} ({})",
            target(),
            failures.join("; ")
        ),
    ))
}

/// Connected to `port` on the host's loopback, before a byte goes through: the socket that
/// accepted must not be held by an autotool process. Skipped for the `*_API_BASE` ports, which
/// the user named as APIs (the records still apply to them).
async fn check_listener(state: &State, port: u16, target: String) -> Result<(), Stop> {
    if state.config.api_base_ports.contains(port) {
        return Ok(());
    }
    // The kernel's answer comes at once; only a listener never seen before needs the walk of
    // `/proc`, on the blocking pool.
    let checked = match super::own::lookup(port) {
        Ok(super::own::Lookup::Known(owner)) => Ok(owner),
        Ok(super::own::Lookup::Unknown(inodes)) => {
            tokio::task::spawn_blocking(move || super::own::walk(&inodes))
                .await
                .map_err(|e| io::Error::other(e.to_string()))
        }
        Err(e) => Err(e),
    };
    let refusal = match checked {
        Ok(None) => return Ok(()),
        Ok(Some(what)) => Refusal::OwnListener { port, what },
        Err(e) => Refusal::Unchecked {
            port,
            why: e.to_string(),
        },
    };
    Err(Stop::Refused { target, refusal })
}

// ---------------------------------------------------------------------------------------------
// CONNECT

/// The `host:port` of a CONNECT request, canonical; the port is required.
fn connect_target(head: &Head) -> Result<(Host, u16), Stop> {
    match hosts::parse_authority(&head.target) {
        Ok((host, Some(port))) => Ok((host, port)),
        Ok((_, None)) => Err(answer(
            400,
            "Bad Request",
            format!("CONNECT needs host:port, got {}", raw_target(&head.target)),
        )),
        Err(e) => Err(bad_host(&head.target, e)),
    }
}

/// Whether the first bytes of a tunnel opened to `host` may go on: a ClientHello whose SNI
/// names `host`, or no SNI when `host` is an address or the loopback (whose port was allowed
/// to get this far). `Err(None)`: no whole ClientHello came.
fn check_hello(host: &Host, hello: Hello) -> Result<(), Option<TunnelRefusal>> {
    match hello {
        Hello::Incomplete => Err(None),
        Hello::Sni(name) => match hosts::canonical_host(&name) {
            Ok(named) if named == *host => Ok(()),
            _ => Err(Some(TunnelRefusal::OtherName(name))),
        },
        // An address has no server name (RFC 6066); neither needs the host's own loopback.
        Hello::NoSni if matches!(host, Host::V4(_) | Host::V6(_)) || host.is_localhost() => Ok(()),
        Hello::NoSni => Err(Some(TunnelRefusal::NoName)),
        Hello::Encrypted => Err(Some(TunnelRefusal::Encrypted)),
        Hello::NotTls => Err(Some(TunnelRefusal::NotTls)),
        Hello::Malformed(what) => Err(Some(TunnelRefusal::Malformed(what))),
    }
}

async fn connect(
    client: &mut TcpStream,
    state: &State,
    head: &Head,
    rest: Vec<u8>,
) -> Result<(), Stop> {
    let (host, port) = connect_target(head)?;
    check_allowed(state, &host, port)?;
    let mut upstream = open(state, &host, port).await?;
    client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await
        .map_err(|_| Stop::Close)?;

    let limits = state.config.limits;
    let mut hello = rest;
    let read_hello = async {
        loop {
            match tls::parse_client_hello(&hello) {
                Hello::Incomplete if hello.len() <= 2 * tls::MAX_HELLO => {}
                Hello::Incomplete => return Hello::Malformed("the ClientHello is too large"),
                parsed => return parsed,
            }
            // Straight into `hello`: no zeroed chunk, no copy.
            hello.reserve(4096);
            match client.read_buf(&mut hello).await {
                Ok(0) | Err(_) => return Hello::Incomplete,
                Ok(_) => {}
            }
        }
    };
    let parsed = tokio::time::timeout(limits.head_timeout, read_hello)
        .await
        .unwrap_or(Hello::Incomplete);
    let refusal = match check_hello(&host, parsed) {
        // Closed or timed out before a whole ClientHello: nothing to check, nothing to say.
        Err(None) => return Err(Stop::Close),
        Ok(()) => None,
        Err(why) => why,
    };
    if let Some(why) = refusal {
        if !matches!(why, TunnelRefusal::NotTls) {
            let _ = tokio::time::timeout(LINGER, client.write_all(&ALERT_UNRECOGNIZED_NAME)).await;
        }
        state.emit(EgressEvent {
            tool: state.tool(),
            target: host.with_port(port),
            refusal: Refusal::Tunnel(why),
        });
        return Err(Stop::Close);
    }
    upstream.write_all(&hello).await.map_err(|_| Stop::Close)?;
    splice(client, &mut upstream, limits.idle_timeout).await;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Absolute-form HTTP

/// Header fields that belong to one hop and are not forwarded (`Connection` also names more).
const HOP_BY_HOP: [&str; 7] = [
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "upgrade",
];

/// How the request body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    None,
    Length(u64),
    Chunked,
}

/// An absolute-form request as it goes upstream: the target the proxy checks and dials, how
/// its body is framed, and the head sent (origin-form, `Host` naming the same target).
struct Forward {
    host: Host,
    port: u16,
    body: Body,
    out: Vec<u8>,
}

/// Where an absolute-form request goes, and what is sent there; refused (`400`, or a target
/// that is not a host) as a `Stop`. Pure, so what reaches the allowlist check is what is dialled.
fn plan_forward(head: &Head) -> Result<Forward, Stop> {
    let target = head.target.as_str();
    let Some(after_scheme) = strip_prefix_ignore_case(target, "http://") else {
        let message = if strip_prefix_ignore_case(target, "https://").is_some() {
            "send https:// requests through a CONNECT tunnel (any HTTP client does so when \
             HTTPS_PROXY is set)"
                .to_owned()
        } else if head.method == "CONNECT" || target.starts_with('/') || target == "*" {
            "this is autotool's egress proxy: send `CONNECT host:port` or an absolute-form \
             request (`GET http://host/path`)"
                .to_owned()
        } else {
            format!("unsupported request target {}", raw_target(target))
        };
        return Err(answer(400, "Bad Request", message));
    };
    let end = after_scheme
        .find(['/', '?', '#'])
        .unwrap_or(after_scheme.len());
    let (authority, path) = after_scheme.split_at(end);
    let path = path.split('#').next().unwrap_or_default();
    let path = match path.chars().next() {
        None => "/".to_owned(),
        Some('?') => format!("/{path}"),
        Some(_) => path.to_owned(),
    };
    let (host, port) = match hosts::parse_authority(authority) {
        Ok((host, port)) => (host, port.unwrap_or(80)),
        Err(e) => return Err(bad_host(authority, e)),
    };
    // The Host field must name the same host and port as the request target.
    let host_fields: Vec<&[u8]> = head.values("host").collect();
    match host_fields.as_slice() {
        [] => {}
        [value] => {
            let named = std::str::from_utf8(value)
                .ok()
                .and_then(|v| hosts::parse_authority(v.trim()).ok())
                .map(|(h, p)| (h, p.unwrap_or(80)));
            if named.as_ref() != Some(&(host.clone(), port)) {
                return Err(answer(
                    400,
                    "Bad Request",
                    format!(
                        "the Host field ({}) does not name the request's target ({})",
                        raw_target(&String::from_utf8_lossy(value)),
                        host.with_port(port)
                    ),
                ));
            }
        }
        _ => return Err(answer(400, "Bad Request", "more than one Host field")),
    }
    let body = body_framing(head)?;

    let connection_tokens: Vec<String> = head
        .values("connection")
        .flat_map(|v| v.split(|&b| b == b','))
        .map(|t| String::from_utf8_lossy(t).trim().to_ascii_lowercase())
        .collect();
    let mut out = format!("{} {path} HTTP/1.{}\r\n", head.method, head.minor_version).into_bytes();
    if host_fields.is_empty() {
        out.extend_from_slice(format!("Host: {authority}\r\n").as_bytes());
    }
    for (name, value) in &head.headers {
        let lower = name.to_ascii_lowercase();
        let essential = matches!(
            lower.as_str(),
            "host" | "content-length" | "transfer-encoding"
        );
        if HOP_BY_HOP.contains(&lower.as_str())
            || (!essential && connection_tokens.contains(&lower))
        {
            continue;
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Forward {
        host,
        port,
        body,
        out,
    })
}

async fn forward(
    client: &mut TcpStream,
    state: &State,
    head: &Head,
    rest: Vec<u8>,
) -> Result<(), Stop> {
    let Forward {
        host,
        port,
        body,
        out,
    } = plan_forward(head)?;
    check_allowed(state, &host, port)?;
    let mut upstream = open(state, &host, port).await?;
    if upstream.write_all(&out).await.is_err() {
        return Err(answer(
            502,
            "Bad Gateway",
            format!("{} closed the connection", host.with_port(port)),
        ));
    }
    let activity = Activity::new();
    let (mut client_read, mut client_write) = client.split();
    let (mut upstream_read, mut upstream_write) = upstream.split();
    // The answer flows until the upstream ends it; the exchange is over then, whatever the
    // client does (the request went with `Connection: close`). The client's side: exactly the
    // body goes upstream, nothing after it, and the client's end is passed on, so an upstream
    // that waits for its peer to close (a lingering close) finishes too.
    let exchange = async {
        let to_client = pump(&mut upstream_read, &mut client_write, &activity);
        let from_client = async {
            send_body(&mut client_read, &mut upstream_write, body, rest, &activity).await?;
            discard_until_end(&mut client_read).await;
            upstream_write.shutdown().await
        };
        tokio::pin!(to_client, from_client);
        tokio::select! {
            _ = &mut to_client => {}
            sent = &mut from_client => {
                if sent.is_ok() {
                    let _ = to_client.await;
                }
            }
        }
    };
    tokio::select! {
        _ = exchange => {}
        () = activity.idle(state.config.limits.idle_timeout) => {}
    }
    Ok(())
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// The request's body framing; ambiguous framing (the stuff of request smuggling) is refused.
fn body_framing(head: &Head) -> Result<Body, Stop> {
    let bad = |what: &str| answer(400, "Bad Request", what.to_owned());
    let codings: Vec<&[u8]> = head.values("transfer-encoding").collect();
    let lengths: Vec<&[u8]> = head.values("content-length").collect();
    if !codings.is_empty() {
        if !lengths.is_empty() {
            return Err(bad("both Transfer-Encoding and Content-Length"));
        }
        return match codings.as_slice() {
            [coding] if coding.trim_ascii().eq_ignore_ascii_case(b"chunked") => Ok(Body::Chunked),
            _ => Err(bad("a Transfer-Encoding other than `chunked`")),
        };
    }
    let mut length = None;
    for value in lengths {
        let parsed = std::str::from_utf8(value)
            .ok()
            .map(str::trim)
            .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|v| v.parse::<u64>().ok());
        match (parsed, length) {
            (None, _) => return Err(bad("an invalid Content-Length")),
            (Some(n), Some(m)) if n != m => return Err(bad("conflicting Content-Length fields")),
            (Some(n), _) => length = Some(n),
        }
    }
    Ok(length.map_or(Body::None, Body::Length))
}

/// Send exactly the request's body upstream (what came with the head first), and nothing after
/// it: a second request on the same connection never reaches this upstream unchecked.
async fn send_body<R, W>(
    client: &mut R,
    upstream: &mut W,
    body: Body,
    mut pending: Vec<u8>,
    activity: &Activity,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut chunked = Chunked::default();
    let mut remaining = match body {
        Body::None => return Ok(()),
        Body::Length(n) => n,
        Body::Chunked => u64::MAX,
    };
    let mut buf = Vec::with_capacity(BUFFER);
    loop {
        let take = match body {
            Body::Chunked => chunked
                .feed(&pending)
                .map_err(|what| io::Error::new(io::ErrorKind::InvalidData, what))?,
            _ => None,
        };
        let n = match (body, take) {
            (Body::Chunked, Some(end)) => end,
            (Body::Chunked, None) => pending.len(),
            _ => pending
                .len()
                .min(usize::try_from(remaining).unwrap_or(usize::MAX)),
        };
        upstream.write_all(&pending[..n]).await?;
        if let Body::Length(_) = body {
            remaining -= n as u64;
        }
        if take.is_some() || remaining == 0 {
            return Ok(());
        }
        buf.clear();
        if client.read_buf(&mut buf).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        activity.touch();
        std::mem::swap(&mut pending, &mut buf);
    }
}

/// Read and drop what the client sends after its request, until it ends its side (or fails).
async fn discard_until_end<R: AsyncRead + Unpin>(client: &mut R) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = client.read(&mut buf).await {
        if n == 0 {
            return;
        }
    }
}

/// Where a chunked body ends, found by following its framing byte by byte.
#[derive(Debug, Default)]
struct Chunked {
    state: ChunkState,
    line: usize,
    size: u64,
    size_digits: usize,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    /// Hex digits of a chunk size.
    #[default]
    Size,
    /// A chunk extension, up to the end of the size line.
    Extension,
    /// The LF ending a size line.
    SizeLf,
    /// Chunk data still to pass.
    Data,
    /// The CR, then LF, after chunk data.
    DataCr,
    DataLf,
    /// Trailer fields after the last chunk: at the start of a line.
    TrailerLineStart,
    /// Inside a trailer line.
    TrailerLine,
    /// The LF ending a trailer line (or the final empty line when `line == 0`).
    TrailerLf,
}

/// Longest chunk-size or trailer line accepted.
const MAX_CHUNK_LINE: usize = 4096;

impl Chunked {
    /// Follow `data`; `Some(n)` when the body ends after its first `n` bytes.
    fn feed(&mut self, data: &[u8]) -> Result<Option<usize>, &'static str> {
        let mut i = 0;
        while i < data.len() {
            let b = data[i];
            match self.state {
                ChunkState::Data => {
                    let n = usize::try_from(self.size)
                        .unwrap_or(usize::MAX)
                        .min(data.len() - i);
                    self.size -= n as u64;
                    i += n;
                    if self.size == 0 {
                        self.state = ChunkState::DataCr;
                    }
                    continue;
                }
                ChunkState::Size => match (b as char).to_digit(16) {
                    Some(d) => {
                        self.size_digits += 1;
                        if self.size_digits > 15 {
                            return Err("a chunk size too large");
                        }
                        self.size = self.size * 16 + u64::from(d);
                    }
                    None if self.size_digits == 0 => return Err("a chunk without a size"),
                    None if b == b'\r' => self.state = ChunkState::SizeLf,
                    None if b == b';' || b == b' ' || b == b'\t' => {
                        self.state = ChunkState::Extension
                    }
                    None => return Err("a malformed chunk size"),
                },
                ChunkState::Extension => {
                    self.line += 1;
                    if self.line > MAX_CHUNK_LINE {
                        return Err("a chunk extension too long");
                    }
                    if b == b'\r' {
                        self.state = ChunkState::SizeLf;
                    }
                }
                ChunkState::SizeLf => {
                    if b != b'\n' {
                        return Err("a chunk size line without CRLF");
                    }
                    self.line = 0;
                    self.size_digits = 0;
                    self.state = if self.size == 0 {
                        ChunkState::TrailerLineStart
                    } else {
                        ChunkState::Data
                    };
                }
                ChunkState::DataCr => {
                    if b != b'\r' {
                        return Err("chunk data longer than its size");
                    }
                    self.state = ChunkState::DataLf;
                }
                ChunkState::DataLf => {
                    if b != b'\n' {
                        return Err("chunk data without CRLF");
                    }
                    self.state = ChunkState::Size;
                }
                ChunkState::TrailerLineStart => {
                    self.line = 0;
                    self.state = if b == b'\r' {
                        ChunkState::TrailerLf
                    } else {
                        self.line = 1;
                        ChunkState::TrailerLine
                    };
                }
                ChunkState::TrailerLine => {
                    self.line += 1;
                    if self.line > MAX_CHUNK_LINE {
                        return Err("a trailer field too long");
                    }
                    if b == b'\r' {
                        self.state = ChunkState::TrailerLf;
                    }
                }
                ChunkState::TrailerLf => {
                    if b != b'\n' {
                        return Err("a trailer line without CRLF");
                    }
                    if self.line == 0 {
                        return Ok(Some(i + 1));
                    }
                    self.state = ChunkState::TrailerLineStart;
                }
            }
            i += 1;
        }
        Ok(None)
    }
}

// ---------------------------------------------------------------------------------------------
// Splicing

/// When anything last moved on a connection, for the idle timeout.
struct Activity {
    start: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Activity {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// Returns once nothing has moved for `limit`.
    async fn idle(&self, limit: Duration) {
        loop {
            let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let deadline = self.start + last + limit;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }
}

/// Copy `from` to `to` until `from` ends, then end `to`'s direction (half-close).
async fn pump<R, W>(from: &mut R, to: &mut W, activity: &Activity) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    // Filled through `read_buf`, so the buffer is never zeroed: a new connection costs an
    // allocation, not a 64 KiB memset per direction.
    let mut buf = Vec::with_capacity(BUFFER);
    loop {
        buf.clear();
        let n = from.read_buf(&mut buf).await?;
        if n == 0 {
            return to.shutdown().await;
        }
        activity.touch();
        to.write_all(&buf).await?;
    }
}

/// Both directions until both have ended, either fails, or the connection is idle too long.
async fn splice(a: &mut TcpStream, b: &mut TcpStream, idle: Duration) {
    let activity = Activity::new();
    let (mut a_read, mut a_write) = a.split();
    let (mut b_read, mut b_write) = b.split();
    let both = async {
        tokio::try_join!(
            pump(&mut a_read, &mut b_write, &activity),
            pump(&mut b_read, &mut a_write, &activity),
        )
    };
    tokio::select! {
        _ = both => {}
        () = activity.idle(idle) => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn chunked_bodies_end_where_their_framing_says() {
        let body = b"4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\nX-Trailer: t\r\n\r\nGET http://next/ HTTP/1.1\r\n";
        let end = body.len() - "GET http://next/ HTTP/1.1\r\n".len();
        assert_eq!(Chunked::default().feed(body), Ok(Some(end)));
        // Fed one byte at a time, the end is found at the same place.
        let mut c = Chunked::default();
        for (i, b) in body.iter().enumerate() {
            if let Some(n) = c.feed(std::slice::from_ref(b)).unwrap() {
                assert_eq!((i, n), (end - 1, 1));
                break;
            }
        }
        assert_eq!(Chunked::default().feed(b"0\r\n\r\n"), Ok(Some(5)));
        assert_eq!(Chunked::default().feed(b"a\r\n0123456789"), Ok(None));
        assert!(Chunked::default().feed(b"zz\r\n").is_err());
        assert!(Chunked::default().feed(b"2\r\nabc\r\n").is_err());
        assert!(Chunked::default().feed(b"ffffffffffffffff1\r\n").is_err());
    }

    #[test]
    fn reason_phrases_are_printable_ascii() {
        assert_eq!(reason_phrase("a\r\nb é", "Forbidden"), "a??b ?");
        assert_eq!(reason_phrase("", "Forbidden"), "Forbidden");
    }

    mod props {
        use super::*;
        use crate::egress::head;
        use autotool_policy::hosts::{ApiBasePorts, KeyAllowlist, KeyLists};
        use proptest::collection::vec;
        use proptest::prelude::*;

        const ALLOWED: &str = "api.allowed.test";

        /// What the tool's key may reach: one name, on 443, 80 and 8443.
        fn allowed(host: &Host, port: u16) -> bool {
            let lists = KeyLists::new("t").with_key(
                KeyAllowlist::parse("K", Some(&[ALLOWED, "api.allowed.test:8443"][..])).unwrap(),
            );
            hosts::decide(host, port, &lists, &ApiBasePorts::default()).is_allowed()
        }

        /// Pieces of request targets and Host values: the allowed name among its look-alikes
        /// and the characters that split authorities, hide user information or smuggle paths.
        fn piece() -> impl Strategy<Value = String> {
            prop_oneof![
                4 => prop::sample::select(vec![
                    ALLOWED, "API.Allowed.TEST.", "evil.test", "api.allowed.test.evil.test",
                    "evil.test@", "@evil.test", ":", ":443", ":8443", ":80", ":0", "[", "]",
                    "::1", "127.0.0.1", "%2e", "%40", "/", "\\", "#", "?", ".", "..", "http://",
                    "https://", "HTTP://", "*", "ｅｖｉｌ.test", "api。allowed。test", "xn--",
                    "0x7f.1", "\u{0}", "\t",
                ])
                .prop_map(String::from),
                1 => "[ -~]{0,3}",
            ]
        }

        fn text() -> impl Strategy<Value = String> {
            vec(piece(), 0..8).prop_map(|p| p.concat())
        }

        /// A host part: mostly spellings of the allowed name, with look-alikes glued on.
        fn host_part() -> impl Strategy<Value = String> {
            let name = prop::sample::select(vec![
                ALLOWED,
                "API.Allowed.TEST.",
                "api.allowed.test.",
                "evil.test",
                "api.allowed.test.evil.test",
                "ａｐｉ.allowed.test",
                "api。allowed。test",
            ]);
            (name, vec(piece(), 0..2), any::<bool>()).prop_map(|(name, glue, before)| {
                if before {
                    format!("{}{name}", glue.concat())
                } else {
                    format!("{name}{}", glue.concat())
                }
            })
        }

        fn port_part() -> impl Strategy<Value = String> {
            prop::sample::select(vec!["", ":443", ":8443", ":80", ":22", ":0", ":", ":4443x"])
                .prop_map(String::from)
        }

        /// A request head, CONNECT or absolute-form, its target and `Host` fields built from
        /// those parts, and some bytes after it.
        fn request() -> impl Strategy<Value = Vec<u8>> {
            let method = prop::sample::select(vec!["CONNECT", "GET", "POST"]);
            let scheme = prop::sample::select(vec!["http://", "HTTP://", "https://", "", "http:/"]);
            let path = vec(
                prop::sample::select(vec!["/", "/x", "?q=1", "#f", "@evil.test", "/@evil.test"]),
                0..3,
            )
            .prop_map(|p| p.concat());
            let authority = || (host_part(), port_part()).prop_map(|(h, p)| h + &p);
            let host_field = prop_oneof![
                2 => Just(None),
                2 => Just(Some(String::new())),
                1 => authority().prop_map(Some),
            ];
            let other = vec(
                (
                    prop::sample::select(vec!["Host", "Content-Length", "Connection", "X-Other"]),
                    text(),
                ),
                0..2,
            );
            (
                method,
                scheme,
                authority(),
                path,
                host_field,
                other,
                vec(any::<u8>(), 0..16),
            )
                .prop_map(
                    |(method, scheme, authority, path, host_field, other, after)| {
                        let target = if method == "CONNECT" {
                            authority.clone()
                        } else {
                            format!("{scheme}{authority}{path}")
                        };
                        let mut bytes = format!("{method} {target} HTTP/1.1\r\n").into_bytes();
                        match host_field {
                            Some(v) if v.is_empty() => {
                                bytes.extend_from_slice(format!("Host: {authority}\r\n").as_bytes())
                            }
                            Some(v) => bytes.extend_from_slice(format!("Host: {v}\r\n").as_bytes()),
                            None => {}
                        }
                        for (name, value) in other {
                            bytes.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
                        }
                        bytes.extend_from_slice(b"\r\n");
                        bytes.extend_from_slice(&after);
                        bytes
                    },
                )
        }

        /// The request head that goes upstream: its target and its `Host` fields.
        fn sent(out: &[u8]) -> (String, Vec<String>) {
            let mut fields = [httparse::EMPTY_HEADER; 128];
            let mut req = httparse::Request::new(&mut fields);
            let status = req.parse(out).expect("the proxy sends a valid head");
            assert!(status.is_complete());
            let hosts = req
                .headers
                .iter()
                .filter(|h| h.name.eq_ignore_ascii_case("host"))
                .map(|h| String::from_utf8_lossy(h.value).into_owned())
                .collect();
            (req.path.unwrap_or_default().to_owned(), hosts)
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2048))]

            /// Whatever request a tool writes, what passes the allowlist is the one allowed
            /// host, and for absolute-form requests that is also what the head sent upstream
            /// names: origin-form, one `Host` naming the checked target.
            #[test]
            fn no_request_reaches_a_host_the_allowlist_refuses(bytes in request()) {
                let Ok(Some((head, _))) = head::parse(&bytes) else { return Ok(()) };
                if head.method == "CONNECT" {
                    if let Ok((host, port)) = connect_target(&head)
                        && allowed(&host, port)
                    {
                        prop_assert_eq!(host, Host::Name(ALLOWED.into()));
                    }
                } else if let Ok(plan) = plan_forward(&head)
                    && allowed(&plan.host, plan.port)
                {
                    prop_assert_eq!(&plan.host, &Host::Name(ALLOWED.into()));
                    let (path, named) = sent(&plan.out);
                    prop_assert!(path.starts_with('/'), "{}", path);
                    prop_assert_eq!(named.len(), 1, "{:?}", named);
                    let (host, port) = hosts::parse_authority(named[0].trim()).unwrap();
                    prop_assert_eq!((host, port.unwrap_or(80)), (plan.host.clone(), plan.port));
                }
            }

            /// Arbitrary bytes through the whole path (head, target, plan) never panic.
            #[test]
            fn arbitrary_requests_never_panic(bytes in vec(any::<u8>(), 0..1024)) {
                if let Ok(Some((head, _))) = head::parse(&bytes) {
                    let _ = connect_target(&head);
                    let _ = plan_forward(&head);
                }
            }

            /// A tunnel goes on only when its ClientHello names the host the tunnel was checked
            /// for (one canonical host, however the SNI spells it), or names none for an address
            /// or the loopback.
            #[test]
            fn a_tunnel_goes_on_only_to_the_host_its_hello_names(
                target in prop_oneof![host_part(), text()],
                sni in prop::option::of(prop_oneof![host_part(), text()]),
            ) {
                let Ok(host) = hosts::canonical_host(&target) else { return Ok(()) };
                let hello = match &sni {
                    Some(name) if !name.is_empty() => Hello::Sni(name.clone()),
                    _ => Hello::NoSni,
                };
                if check_hello(&host, hello.clone()).is_ok() {
                    match hello {
                        Hello::Sni(name) => {
                            prop_assert_eq!(hosts::canonical_host(&name), Ok(host));
                        }
                        _ => prop_assert!(host.ip().is_some() || host.is_localhost()),
                    }
                }
            }
        }
    }
}
