//! `autotool serve --transport http`: the same MCP server over streamable HTTP, for the service
//! (one supervisor, many hosts) and for clients that only speak HTTP.
//!
//! - rmcp's streamable HTTP service, both eras: legacy sessions on, so hosts of the 2025
//!   revisions keep elicitation (consent) and list-change notifications; 2026-07-28 requests are
//!   served statelessly, as that revision wants. One [`crate::library::Library`] is shared by every session, so a
//!   tool created through one host is mounted for all, and calls from different hosts run in
//!   parallel.
//! - Where: `--listen 127.0.0.1:PORT`, `[::1]:PORT`, or `unix:PATH`. Only loopback unless
//!   `--allow-remote`; a unix socket is made 0600.
//! - Who: a bearer token, `$AUTOTOOL_HOME/service-token` (0600, made at first start), required
//!   on every request unless `--no-auth`, which is accepted on unix sockets only (0600: only
//!   this user reaches them) and never on TCP: any local process can open a loopback port, a
//!   local proxy or tunnel included. Compared in constant time.
//! - Every TCP port is registered as one of autotool's own listeners (`egress`'s record), so
//!   no tool of any autotool process on the machine reaches it through its proxy.
//! - DNS rebinding: the `Host` field must name a loopback host (or the address listened on);
//!   a request carrying an `Origin` must come from a loopback origin. Both are rmcp's checks,
//!   configured here; with `--allow-remote` the `Host` check is off and the token carries it.
//! - `--console`: the console ([`crate::console::Mounted`]) under `/console/` on the first
//!   loopback TCP listener, before the token check and apart from it: it keeps a session of its
//!   own (the token does not open it; its cookie does not open `/mcp`), with its own Host,
//!   Origin, CSRF and CSP checks. Its URL goes to `$AUTOTOOL_HOME/console-url` (0600) while
//!   serve runs. Refused without a loopback TCP listener and with `--allow-remote`.

use crate::library::Library;
use crate::mcp::Rendered;
use crate::mcp::handler::Surface;
use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tower_service::Service;

/// The path MCP is served on.
pub use crate::listen::MCP_PATH;

pub use crate::listen::Listen;

/// Why `serve --transport http` did not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("nothing to listen on")]
    NothingToListenOn,
    #[error(
        "refusing to listen on {at}: it is not a loopback address. Use 127.0.0.1 or ::1, or \
         pass --allow-remote to serve other machines (the token is then required)"
    )]
    Remote { at: String },
    #[error(
        "--no-auth is refused on {at}: on a TCP port any process of this machine, a local proxy \
         or tunnel included, could drive autotool without the token. Keep the token (it is \
         made in $AUTOTOOL_HOME/service-token), or serve without one on a unix socket only \
         this user can open: --listen unix:PATH --no-auth"
    )]
    NoAuthOnTcp { at: String },
    #[error("--no-auth is never accepted with --allow-remote")]
    NoAuthRemote,
    #[error(
        "--console needs a loopback TCP listener (--listen 127.0.0.1:PORT): a browser reaches \
         the console there"
    )]
    ConsoleNeedsLoopback,
    #[error(
        "--console is refused with --allow-remote: the console is for this machine only (run \
         `autotool console` on it)"
    )]
    ConsoleRemote,
    #[error("cannot mount the console: {0}")]
    Console(#[from] crate::console::ConsoleError),
    /// The reason is in the message, not a `source` too: the error chain would say it twice.
    #[error("cannot listen on {at}: {why}")]
    Listen { at: String, why: std::io::Error },
    /// The token file, the socket's directory or its mode.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// How `serve --transport http` was told to run.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Every address to listen on (the service listens on loopback TCP for HTTP hosts and on
    /// a unix socket for `autotool connect`).
    pub listen: Vec<Listen>,
    /// Require the bearer token (the default).
    pub auth: bool,
    /// Listen on addresses other than loopback.
    pub allow_remote: bool,
    /// Mount the console under `/console/` on the first loopback TCP listener.
    pub console: bool,
}

impl HttpOptions {
    /// Refuse combinations that would open the server to others.
    pub fn check(&self) -> Result<(), HttpError> {
        if self.listen.is_empty() {
            return Err(HttpError::NothingToListenOn);
        }
        if let Some(remote) = self.listen.iter().find(|l| !l.is_local())
            && !self.allow_remote
        {
            return Err(HttpError::Remote {
                at: remote.to_string(),
            });
        }
        if !self.auth
            && let Some(tcp) = self.listen.iter().find(|l| matches!(l, Listen::Tcp(_)))
        {
            return Err(HttpError::NoAuthOnTcp {
                at: tcp.to_string(),
            });
        }
        if !self.auth && self.allow_remote {
            return Err(HttpError::NoAuthRemote);
        }
        if self.console && self.allow_remote {
            return Err(HttpError::ConsoleRemote);
        }
        if self.console && self.console_port().is_none() {
            return Err(HttpError::ConsoleNeedsLoopback);
        }
        Ok(())
    }

    /// The listener the console is mounted on: the first loopback TCP one (its port may be 0
    /// until bound).
    fn console_port(&self) -> Option<usize> {
        self.listen
            .iter()
            .position(|l| matches!(l, Listen::Tcp(a) if a.ip().is_loopback()))
    }
}

/// `$AUTOTOOL_HOME/service.sock`: where the service listens for `autotool connect`.
pub fn service_socket(home: &crate::home::Home) -> PathBuf {
    home.root().join("service.sock")
}

/// `$AUTOTOOL_HOME/service-token`.
pub fn token_path(home: &crate::home::Home) -> PathBuf {
    home.root().join("service-token")
}

/// The service token, made (32 random bytes, hex, mode 0600) when there is none.
pub fn ensure_token(home: &crate::home::Home) -> std::io::Result<String> {
    let path = token_path(home);
    match std::fs::read_to_string(&path) {
        Ok(t) if !t.trim().is_empty() => {
            let mode = std::fs::metadata(&path)?.permissions().mode();
            if mode & 0o077 != 0 {
                return Err(std::io::Error::other(format!(
                    "{} is readable by others (mode {:o}); run `chmod 600 {}`",
                    path.display(),
                    mode & 0o777,
                    path.display()
                )));
            }
            return Ok(t.trim().to_string());
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let token = crate::consent::hex(&crate::consent::random_bytes::<32>()?);
    crate::home::write_private(&path, token.as_bytes())?;
    Ok(token)
}

/// Whether the request carries `Authorization: Bearer <token>`.
fn authorized<B>(req: &Request<B>, token: &str) -> bool {
    req.headers()
        .get_all(header::AUTHORIZATION)
        .iter()
        .any(|v| {
            let v = v.as_bytes();
            v.len() > 7
                && v[..7].eq_ignore_ascii_case(b"bearer ")
                && crate::listen::same(v[7..].trim_ascii(), token.as_bytes())
        })
}

use crate::listen::Body;

fn plain(status: StatusCode, text: String) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(text)).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn unauthorized(token_file: &Path) -> Response<Body> {
    let mut r = plain(StatusCode::UNAUTHORIZED, unauthorized_text(token_file));
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer realm=\"autotool\""),
    );
    r
}

/// What a client without the token is told: what to send, and where the token is. The token
/// itself is never in it.
fn unauthorized_text(token_file: &Path) -> String {
    let file = token_file.display();
    format!(
        "autotool: every request to this server must carry the header `Authorization: Bearer \
         <token>` (the initialize POST, the event stream's GET and every request after them). \
         The token is the content of {file} on the machine autotool runs on, readable only by \
         the user it runs as: for example `Authorization: Bearer $(cat {file})`, or in an app's \
         MCP config a header entry \"Authorization\": \"Bearer <the token>\". An app that speaks \
         MCP over stdio needs no token: give it the command `autotool connect`, which reads it.\n"
    )
}

fn rmcp_config(options: &HttpOptions, stop: CancellationToken) -> StreamableHttpServerConfig {
    let mut config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(true)
        .with_cancellation_token(stop)
        .with_allowed_origins([
            "http://localhost:*",
            "http://127.0.0.1:*",
            "http://[::1]:*",
            "https://localhost:*",
        ])
        .enforce_origin_validation();
    if options.allow_remote {
        config = config.disable_allowed_hosts();
    } else {
        let mut hosts = vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "::1".to_string(),
            "[::1]".to_string(),
        ];
        for l in &options.listen {
            if let Listen::Tcp(a) = l {
                hosts.push(a.ip().to_string());
            }
        }
        config = config.with_allowed_hosts(hosts);
    }
    config
}

/// Who a request authenticated as: what a consent question asked over HTTP is bound to, with
/// the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Principal {
    /// It carried the service token.
    Token,
    /// The server runs without the token (`--no-auth`, a 0600 unix socket only).
    Unauthenticated,
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Principal::Token => "token",
            Principal::Unauthenticated => "no-auth",
        })
    }
}

/// The answer to a DELETE that ended a session: 200 rather than rmcp's 202, which the Python
/// SDK (accepting 200 and 204) reports as "Session termination failed" on every close. Other
/// answers (404 for an unknown session, 405) pass as they are.
fn session_ended<B>(mut response: Response<B>) -> Response<B> {
    if response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::OK;
    }
    response
}

/// Serve `surface` over HTTP until `stop` is cancelled. `ready` is called with each address
/// it listens on, once all are bound.
pub async fn serve(
    surface: Arc<Surface>,
    options: HttpOptions,
    stop: CancellationToken,
    ready: impl Fn(&Listen),
) -> Result<(), HttpError> {
    options.check()?;
    let app: Arc<Library> = surface.library.clone();
    let token = if options.auth {
        Some(Arc::<str>::from(ensure_token(&app.home)?))
    } else {
        None
    };
    let token_file = Arc::new(token_path(&app.home));
    let mcp = StreamableHttpService::new(
        move || Ok(Rendered::new(surface.clone(), "http")),
        Arc::new(LocalSessionManager::default()),
        rmcp_config(&options, stop.clone()),
    );

    // Bind everything first, so a bad address fails the start rather than half of it.
    let mut bound = Vec::new();
    for listen in &options.listen {
        bound.push(bind(listen).await?);
    }
    let console = match options.console.then(|| options.console_port()).flatten() {
        Some(i) => {
            let port = match bound[i].at() {
                Listen::Tcp(a) => a.port(),
                Listen::Unix(_) => 0,
            };
            let mounted = crate::console::Mounted::new(app.home.clone(), port)?;
            crate::console::mounted::write_url(&app.home, &mounted.url())?;
            Some((i, mounted))
        }
        None => None,
    };
    let handle = move |req: Request<Incoming>, console: Option<crate::console::Mounted>| {
        let mut mcp = mcp.clone();
        let token = token.clone();
        let token_file = token_file.clone();
        async move {
            // The console's paths are the console's alone: its own session, never the token.
            if let Some(console) = console
                && crate::console::Mounted::owns(req.uri().path())
            {
                return Ok::<_, Infallible>(console.call(req).await);
            }
            let mut req = req;
            let principal = match &token {
                Some(t) if !authorized(&req, t) => {
                    return Ok::<_, Infallible>(unauthorized(&token_file));
                }
                Some(_) => Principal::Token,
                None => Principal::Unauthenticated,
            };
            req.extensions_mut().insert(principal);
            if req.uri().path() != MCP_PATH {
                return Ok(plain(
                    StatusCode::NOT_FOUND,
                    format!("autotool serves MCP at {MCP_PATH}\n"),
                ));
            }
            let deleting = req.method() == http::Method::DELETE;
            let answer = mcp.call(req).await;
            Ok(match answer {
                Ok(r) if deleting => session_ended(r),
                Ok(r) => r,
                Err(never) => match never {},
            })
        }
    };
    let mut loops = tokio::task::JoinSet::new();
    for (i, listener) in bound.into_iter().enumerate() {
        ready(&listener.at());
        let here = console
            .as_ref()
            .filter(|(at, _)| *at == i)
            .map(|(_, c)| c.clone());
        let handle = handle.clone();
        let service = hyper::service::service_fn(move |req| handle(req, here.clone()));
        let stop = stop.clone();
        loops.spawn(async move { listener.serve(service, stop).await });
    }
    if let Some((_, mounted)) = &console {
        tracing::info!(
            file = %crate::console::mounted::url_file(&app.home).display(),
            "the console is mounted at {}: `autotool console --url` prints its URL",
            mounted.url().split_once("?s=").map_or("", |(at, _)| at)
        );
    }
    while loops.join_next().await.is_some() {}
    if let Some((_, mounted)) = &console {
        crate::console::mounted::forget_url(&app.home, &mounted.url());
    }
    Ok(())
}

/// A bound listener; a TCP one is registered as autotool's own while it is open.
enum Bound {
    Tcp(tokio::net::TcpListener, crate::egress::OwnListener),
    Unix(tokio::net::UnixListener, PathBuf),
}

/// How the record of a TCP listener names it.
const OWN_LISTENER: &str = "autotool serve --transport http";

async fn bind(listen: &Listen) -> Result<Bound, HttpError> {
    match listen {
        Listen::Tcp(addr) => {
            let listener =
                tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|why| HttpError::Listen {
                        at: addr.to_string(),
                        why,
                    })?;
            let port = listener.local_addr()?.port();
            let own = crate::egress::register_own_listener_as(port, OWN_LISTENER);
            Ok(Bound::Tcp(listener, own))
        }
        Listen::Unix(path) => {
            if let Some(dir) = path.parent()
                && !dir.as_os_str().is_empty()
            {
                std::fs::create_dir_all(dir)?;
            }
            // A socket left by an earlier run (nothing answers on it) is replaced.
            if path.exists() && std::os::unix::net::UnixStream::connect(path).is_err() {
                std::fs::remove_file(path)?;
            }
            let listener =
                tokio::net::UnixListener::bind(path).map_err(|why| HttpError::Listen {
                    at: path.display().to_string(),
                    why,
                })?;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
            Ok(Bound::Unix(listener, path.clone()))
        }
    }
}

impl Bound {
    fn at(&self) -> Listen {
        match self {
            Bound::Tcp(l, _) => match l.local_addr() {
                Ok(a) => Listen::Tcp(a),
                Err(_) => Listen::Tcp(SocketAddr::from(([127, 0, 0, 1], 0))),
            },
            Bound::Unix(_, path) => Listen::Unix(path.clone()),
        }
    }

    async fn serve<S>(self, service: S, stop: CancellationToken)
    where
        S: hyper::service::Service<
                Request<Incoming>,
                Response = Response<Body>,
                Error = Infallible,
            > + Clone
            + Send
            + 'static,
        S::Future: Send + 'static,
    {
        match self {
            Bound::Tcp(listener, _own) => loop {
                let accepted = tokio::select! {
                    () = stop.cancelled() => break,
                    accepted = listener.accept() => accepted,
                };
                match accepted {
                    Ok((stream, _)) => {
                        let _ = stream.set_nodelay(true);
                        crate::listen::spawn_connection(
                            TokioIo::new(stream),
                            service.clone(),
                            stop.clone(),
                        );
                    }
                    Err(e) => tracing::warn!("accepting a connection: {e}"),
                }
            },
            Bound::Unix(listener, path) => {
                loop {
                    let accepted = tokio::select! {
                        () = stop.cancelled() => break,
                        accepted = listener.accept() => accepted,
                    };
                    match accepted {
                        Ok((stream, _)) => crate::listen::spawn_connection(
                            TokioIo::new(stream),
                            service.clone(),
                            stop.clone(),
                        ),
                        Err(e) => tracing::warn!("accepting a connection: {e}"),
                    }
                }
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn listen_addresses_parse() {
        assert_eq!(
            Listen::parse("127.0.0.1:8765").unwrap(),
            Listen::Tcp("127.0.0.1:8765".parse().unwrap())
        );
        assert_eq!(
            Listen::parse("[::1]:9").unwrap(),
            Listen::Tcp("[::1]:9".parse().unwrap())
        );
        assert_eq!(
            Listen::parse("localhost:80").unwrap(),
            Listen::Tcp("127.0.0.1:80".parse().unwrap())
        );
        assert_eq!(
            Listen::parse("unix:/tmp/a.sock").unwrap(),
            Listen::Unix("/tmp/a.sock".into())
        );
        for bad in [
            "",
            "unix:",
            "8765",
            "example.com:80",
            "127.0.0.1",
            "localhost:x",
        ] {
            assert!(Listen::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn only_local_listening_without_allow_remote_and_no_auth_only_on_unix_sockets() {
        let opts = |listen: &str, auth: bool, allow_remote: bool| HttpOptions {
            listen: vec![Listen::parse(listen).unwrap()],
            auth,
            allow_remote,
            console: false,
        };
        assert!(opts("127.0.0.1:1", true, false).check().is_ok());
        assert!(opts("unix:/x", false, false).check().is_ok());
        // Without the token only on a unix socket: never on TCP, loopback or not.
        for tcp in ["127.0.0.1:1", "[::1]:1", "localhost:8765"] {
            let err = opts(tcp, false, false).check().unwrap_err().to_string();
            assert!(
                err.contains("--no-auth is refused on") && err.contains("unix:PATH"),
                "{err}"
            );
        }
        let mixed = HttpOptions {
            listen: vec![
                Listen::parse("unix:/x").unwrap(),
                Listen::parse("127.0.0.1:1").unwrap(),
            ],
            auth: false,
            allow_remote: false,
            console: false,
        };
        assert!(mixed.check().is_err());
        assert!(opts("unix:/x", false, true).check().is_err());
        assert!(opts("0.0.0.0:1", true, false).check().is_err());
        assert!(opts("192.168.1.2:1", true, false).check().is_err());
        assert!(opts("0.0.0.0:1", true, true).check().is_ok());
        assert!(opts("0.0.0.0:1", false, true).check().is_err());
        assert!(opts("127.0.0.1:1", false, true).check().is_err());
    }

    #[test]
    fn the_console_is_mounted_only_on_a_loopback_tcp_listener() {
        let opts = |listen: &[&str], allow_remote: bool| HttpOptions {
            listen: listen.iter().map(|l| Listen::parse(l).unwrap()).collect(),
            auth: true,
            allow_remote,
            console: true,
        };
        // The first loopback TCP listener carries it.
        let both = opts(&["unix:/x", "127.0.0.1:0", "[::1]:1"], false);
        assert!(both.check().is_ok());
        assert_eq!(both.console_port(), Some(1));
        assert!(opts(&["[::1]:1"], false).check().is_ok());
        // A unix socket only: no browser reaches it.
        let err = opts(&["unix:/x"], false).check().unwrap_err().to_string();
        assert!(
            err.contains("--console needs a loopback TCP listener"),
            "{err}"
        );
        // Never with --allow-remote, even when a loopback listener is among them.
        let err = opts(&["127.0.0.1:1", "0.0.0.0:2"], true)
            .check()
            .unwrap_err()
            .to_string();
        assert!(err.contains("refused with --allow-remote"), "{err}");
        // The control: without --console the same listeners are fine.
        let mut remote = opts(&["127.0.0.1:1", "0.0.0.0:2"], true);
        remote.console = false;
        assert!(remote.check().is_ok());
    }

    #[test]
    fn the_401_body_says_what_to_send_and_where_the_token_is() {
        let file = Path::new("/home/u/.autotool/service-token");
        let text = unauthorized_text(file);
        assert!(text.contains("`Authorization: Bearer <token>`"), "{text}");
        assert!(text.contains("every request"), "{text}");
        assert!(
            text.contains("/home/u/.autotool/service-token on the machine"),
            "{text}"
        );
        assert!(text.contains("autotool connect"), "{text}");
        // `setup --service` registers the stdio bridge; it gives no client a token.
        assert!(!text.contains("setup --service"), "{text}");
        let r = unauthorized(file);
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(
            r.headers()
                .get(header::WWW_AUTHENTICATE)
                .map(|v| v.as_bytes()),
            Some(&b"Bearer realm=\"autotool\""[..])
        );
    }

    #[tokio::test]
    async fn an_address_in_use_is_said_once() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = Listen::Tcp(taken.local_addr().unwrap());
        let Err(e) = bind(&at).await else {
            panic!("bound a port in use");
        };
        let said = format!("{:#}", anyhow::Error::from(e));
        assert!(said.starts_with("cannot listen on 127.0.0.1:"), "{said}");
        assert_eq!(said.matches("in use").count(), 1, "{said}");
    }

    #[test]
    fn an_ended_session_is_answered_200_and_other_answers_pass() {
        let answer = |status| {
            let mut r = Response::new(());
            *r.status_mut() = status;
            session_ended(r).status()
        };
        assert_eq!(answer(StatusCode::ACCEPTED), StatusCode::OK);
        assert_eq!(answer(StatusCode::NOT_FOUND), StatusCode::NOT_FOUND);
        assert_eq!(
            answer(StatusCode::METHOD_NOT_ALLOWED),
            StatusCode::METHOD_NOT_ALLOWED
        );
    }

    #[test]
    fn the_bearer_token_must_match_exactly() {
        let req = |v: &str| {
            Request::builder()
                .header(header::AUTHORIZATION, v)
                .body(())
                .unwrap()
        };
        assert!(authorized(&req("Bearer abc123"), "abc123"));
        assert!(authorized(&req("bearer abc123"), "abc123"));
        for wrong in [
            "Bearer abc12",
            "Bearer abc1234",
            "Basic abc123",
            "abc123",
            "Bearer ",
        ] {
            assert!(!authorized(&req(wrong), "abc123"), "{wrong}");
        }
        assert!(!authorized(&Request::new(()), "abc123"));
    }
}
