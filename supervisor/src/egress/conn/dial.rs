//! Resolving and dialling: every address of a name checked before it is dialled, the loopback
//! only where allowed and never onto a listener of autotool's own.

use super::{MAX_ADDRESSES, Stop, answer};
use crate::egress::{Refusal, State, loopback_class};
use autotool_policy::hosts::{self, ForbiddenAddress, Host, LOCALHOST};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Resolve `host`, check every address, and connect to the first checked address that answers.
pub(super) async fn open(state: &State, host: &Host, port: u16) -> Result<TcpStream, Stop> {
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
    let checked = match crate::egress::own::lookup(port) {
        Ok(crate::egress::own::Lookup::Known(owner)) => Ok(owner),
        Ok(crate::egress::own::Lookup::Unknown(inodes)) => {
            tokio::task::spawn_blocking(move || crate::egress::own::walk(&inodes))
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
