//! Absolute-form HTTP: the request re-written for the upstream (hop-by-hop fields dropped, the
//! body framed as it was sent) and the answer relayed back.

use super::chunked::Chunked;
use super::dial::open;
use super::splice::{Activity, pump};
use super::{BUFFER, Stop, answer, bad_host, check_allowed, raw_target};
use crate::egress::State;
use crate::egress::head::Head;
use autotool_policy::hosts::{self, Host};
use std::io;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

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
pub(super) struct Forward {
    pub(super) host: Host,
    pub(super) port: u16,
    body: Body,
    pub(super) out: Vec<u8>,
}

/// Where an absolute-form request goes, and what is sent there; refused (`400`, or a target
/// that is not a host) as a `Stop`. Pure, so what reaches the allowlist check is what is dialled.
pub(super) fn plan_forward(head: &Head) -> Result<Forward, Stop> {
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

pub(super) async fn forward(
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
