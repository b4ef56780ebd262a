//! CONNECT: the tunnel's target, the TLS hello's server name held to it, then the splice.

use super::dial::open;
use super::splice::splice;
use super::{ALERT_UNRECOGNIZED_NAME, LINGER, Stop, answer, bad_host, check_allowed, raw_target};
use crate::egress::head::Head;
use crate::egress::tls::{self, Hello};
use crate::egress::{EgressEvent, Refusal, State, TunnelRefusal};
use autotool_policy::hosts::{self, Host};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The `host:port` of a CONNECT request, canonical; the port is required.
pub(super) fn connect_target(head: &Head) -> Result<(Host, u16), Stop> {
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
pub(super) fn check_hello(host: &Host, hello: Hello) -> Result<(), Option<TunnelRefusal>> {
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

pub(super) async fn connect(
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
