//! One connection from a tool: its request, the decision, the upstream connection, the splice.
//!
//! Layout: the request head is read and answered here; `tunnel` follows a CONNECT, `forward` an
//! absolute-form HTTP request (its chunked bodies followed by `chunked`); both reach the
//! upstream through `dial`, which checks every address, and end in `splice`.

mod chunked;
mod dial;
mod forward;
mod splice;
#[cfg(test)]
mod tests;
mod tunnel;

use forward::forward;
use tunnel::connect;

use super::head::{HeadError, read_head};
use super::{EgressEvent, Refusal, State};
use autotool_policy::hosts::{self, Decision, Host, HostError};
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, TryAcquireError};

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
