//! Where autotool listens: the addresses `serve --transport http` takes ([`Listen`]) and where
//! the service's unit file is ([`service_unit_path`]), read by the serve that listens and by the
//! egress proxy that must never let a tool reach it; what every HTTP server of autotool (`serve
//! --transport http`, `autotool console`) shares: one connection served until a stop, and a
//! secret compared in constant time.

use http::{Request, Response};
use hyper::body::Incoming;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

/// The body of every answer autotool's HTTP servers write.
pub type Body = http_body_util::combinators::BoxBody<bytes::Bytes, Infallible>;

/// The path MCP is served on.
pub const MCP_PATH: &str = "/mcp";

/// The service unit's file name.
pub const UNIT: &str = "autotool.service";

/// Why an address given to `--listen` is not one to listen on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListenError {
    #[error("`unix:` needs a path: unix:/run/user/1000/autotool.sock")]
    NoPath,
    #[error("{given:?}: the port is not a number")]
    Port { given: String },
    #[error(
        "{given:?} is not an address to listen on: use 127.0.0.1:PORT, [::1]:PORT or unix:PATH"
    )]
    NotAnAddress { given: String },
}

/// Why the service's unit file has no place: no directory to put it in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("neither XDG_CONFIG_HOME nor HOME is set")]
pub struct NoConfigDir;

/// Where to listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Tcp(a) => write!(f, "http://{a}{MCP_PATH}"),
            Listen::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

impl Listen {
    /// `127.0.0.1:8765`, `[::1]:8765`, `localhost:8765` or `unix:/path/to.sock`.
    pub fn parse(s: &str) -> Result<Listen, ListenError> {
        if let Some(path) = s.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(ListenError::NoPath);
            }
            return Ok(Listen::Unix(PathBuf::from(path)));
        }
        if let Some(port) = s.strip_prefix("localhost:") {
            let port: u16 = port
                .parse()
                .map_err(|_| ListenError::Port { given: s.into() })?;
            return Ok(Listen::Tcp(SocketAddr::from(([127, 0, 0, 1], port))));
        }
        s.parse::<SocketAddr>()
            .map(Listen::Tcp)
            .map_err(|_| ListenError::NotAnAddress { given: s.into() })
    }

    /// Loopback or a unix socket: reachable from this machine only.
    pub fn is_local(&self) -> bool {
        match self {
            Listen::Tcp(a) => a.ip().is_loopback(),
            Listen::Unix(_) => true,
        }
    }
}

/// `$XDG_CONFIG_HOME/systemd/user/autotool.service` (default `~/.config/…`).
pub fn service_unit_path() -> Result<PathBuf, NoConfigDir> {
    let config = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .ok_or(NoConfigDir)?;
            PathBuf::from(home).join(".config")
        }
    };
    Ok(config.join("systemd").join("user").join(UNIT))
}

/// Whether `given` equals `expected`, in time that does not depend on where they differ.
pub fn same(given: &[u8], expected: &[u8]) -> bool {
    if given.len() != expected.len() {
        return false;
    }
    given
        .iter()
        .zip(expected)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

/// Serve one accepted connection (HTTP/1.1, keep-alive) on its own task until it ends or
/// `stop` is cancelled (then shut down gracefully, for at most 2 s).
pub fn spawn_connection<I, S>(io: I, service: S, stop: CancellationToken)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: hyper::service::Service<Request<Incoming>, Response = Response<Body>, Error = Infallible>
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    tokio::spawn(async move {
        let conn = hyper::server::conn::http1::Builder::new()
            .keep_alive(true)
            .serve_connection(io, service);
        tokio::pin!(conn);
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!("HTTP connection ended: {e}");
                }
            }
            () = stop.cancelled() => {
                conn.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(std::time::Duration::from_secs(2), conn).await;
            }
        }
    });
}
