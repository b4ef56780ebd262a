//! `autotool console`: a local web page to see and steer what autotool knows: the library
//! (state, trust, success, last call, packages, keys declared), one tool (versions with their
//! diffs, verdicts, baseline obligations, approvals, calls over time, egress refusals, events),
//! the keys (names, sources and allowed hosts; never a value) and the consent questions tools
//! could not ask their host, answered here with the same meaning as `autotool tools approve`.
//!
//! It is a security boundary ([`guard`]): loopback only (127.0.0.1, a random port unless
//! told), registered as one of autotool's own listeners so no tool of any autotool on the
//! machine reaches it through its egress proxy; a per-session secret in the URL printed once,
//! traded for an `HttpOnly`, `SameSite=Strict` cookie; `Host` and `Origin` checked; every
//! change a confirmed POST with a CSRF token, recorded in the event log as the console's
//! ([`actions`]); a strict Content-Security-Policy, no script and no CORS; everything a tool
//! wrote redacted of every key value held now, cut and escaped ([`html`]). Its stylesheet is
//! part of the binary: no CDN, no network.
//!
//! Pages are rendered on the server from the ledger on each request ([`pages`]), so what a
//! running `autotool serve` records shows on the next reload, and a decision taken here reaches
//! every running server the way `autotool tools …` does (through the ledger and key files).
//!
//! The same console, router and guards included, is also mounted under [`MOUNT`] on the loopback
//! listener of `autotool serve --transport http --console` ([`Mounted`]), with a session of its
//! own: serve's bearer token does not open it, and its cookie (`Path=/console`) does not open
//! serve's `/mcp`. Its URL, secret included, is written to `$AUTOTOOL_HOME/console-url` (0600)
//! for `autotool console --url`.

pub mod actions;
pub mod guard;
pub mod html;
pub mod mounted;
pub mod pages;

use crate::credentials::KeyStore;
use crate::home::Home;
use crate::listen::Body;
use crate::redact::Redactor;
use crate::registry::Registry;
use bytes::Bytes;
use guard::{Refusal, Session};
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
pub use mounted::{MOUNT, Mounted};
use std::convert::Infallible;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The largest form the console accepts.
const MAX_FORM: usize = 16 * 1024;

/// How a refusal of one of autotool's own listeners names the console.
const OWN_LISTENER: &str = "autotool console";

/// Who the event log says took a decision made here.
pub const ACTOR: &str = "console";

/// The stylesheet, part of the binary.
const CSS: &str = include_str!("assets/console.css");

/// Why the console did not start.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// The reason is in the message, not a `source` too: the error chain would say it twice.
    #[error("cannot listen on 127.0.0.1:{port}: {why}")]
    Listen { port: u16, why: std::io::Error },
    #[error(transparent)]
    Registry(#[from] crate::registry::RegistryError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// A running console's state: where it reads and its session.
#[derive(Debug)]
struct Console {
    home: Home,
    registry: Registry,
    session: Session,
}

impl Console {
    fn new(home: Home, port: u16, base: &'static str) -> Result<Console, ConsoleError> {
        Ok(Console {
            registry: Registry::open(&home)?,
            session: Session::new(port, base)?,
            home,
        })
    }
}

/// Serve the console for `home` on `127.0.0.1:port` (0: a free port) until `stop` is
/// cancelled. `ready` is given the URL, secret included, once it listens.
pub async fn serve(
    home: Home,
    port: u16,
    stop: CancellationToken,
    ready: impl FnOnce(&str),
) -> Result<(), ConsoleError> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|why| ConsoleError::Listen { port, why })?;
    let port = listener.local_addr()?.port();
    let _own = crate::egress::register_own_listener_as(port, OWN_LISTENER);
    let console = Arc::new(Console::new(home, port, "")?);
    ready(&console.session.url());
    let service = hyper::service::service_fn(move |req| handle(console.clone(), req));
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => {
                crate::listen::spawn_connection(TokioIo::new(stream), service.clone(), stop.clone())
            }
            Err(e) => tracing::warn!("console: accepting a connection: {e}"),
        }
    }
    Ok(())
}

async fn handle(
    console: Arc<Console>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let (parts, body) = req.into_parts();
    let body = if parts.method == Method::POST {
        match Limited::new(body, MAX_FORM).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(_) => {
                return Ok(console.answer(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    pages::message("Too large", "The form is larger than the console accepts."),
                ));
            }
        }
    } else {
        Bytes::new()
    };
    // What the console does is the console's, in the event log (named in the blocking pool,
    // where no task-local actor reaches).
    let answering = console.clone();
    let answered = tokio::task::spawn_blocking(move || {
        crate::ledger::actor::sync_scope(crate::ledger::actor::Actor::console(), || {
            answering.respond(&parts, &body)
        })
    })
    .await;
    Ok(answered.unwrap_or_else(|_| {
        console.answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            pages::message("Error", "The console failed to answer; see its log."),
        )
    }))
}

/// An HTML answer with the console's headers.
fn answer(status: StatusCode, html: String) -> Response<Body> {
    typed(status, "text/html; charset=utf-8", html)
}

fn typed(status: StatusCode, content_type: &'static str, body: String) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(body)).boxed());
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    guard::harden(r.headers_mut());
    r
}

impl Console {
    /// An HTML answer, its links under the console's base ([`html::rebase`]).
    fn answer(&self, status: StatusCode, html: String) -> Response<Body> {
        answer(status, html::rebase(&html, self.session.base))
    }

    fn refuse(&self, why: Refusal) -> Response<Body> {
        self.answer(why.status(), pages::message("Refused", why.says()))
    }

    fn respond(&self, parts: &http::request::Parts, body: &[u8]) -> Response<Body> {
        if let Err(why) = self.session.check_origin(&parts.headers) {
            return self.refuse(why);
        }
        let method = &parts.method;
        if method != Method::GET && method != Method::HEAD && method != Method::POST {
            let mut r = self.answer(
                StatusCode::METHOD_NOT_ALLOWED,
                pages::message("Not allowed", "The console takes GET and POST only."),
            );
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD, POST"));
            return r;
        }
        // The path below the base; `/` for the base itself.
        let path = match parts.uri.path().strip_prefix(self.session.base) {
            Some("") => "/",
            Some(p) if p.starts_with('/') => p,
            _ => {
                return self.answer(
                    StatusCode::NOT_FOUND,
                    pages::message("Not found", "No such page."),
                );
            }
        };
        if method != Method::POST && self.session.secret_in(parts.uri.query()) {
            return self.start_session(path);
        }
        if let Err(why) = self.session.check_cookie(&parts.headers) {
            return self.refuse(why);
        }
        match self.route(parts, path, body) {
            Ok(r) => r,
            Err(e) => {
                let said = match redactor(&KeyStore::open(&self.home)) {
                    Ok(r) => r.redact(&format!("{e:#}")).into_owned(),
                    Err(_) => "the console failed to answer".to_string(),
                };
                tracing::warn!("console: {said}");
                self.answer(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    pages::message("Error", &said),
                )
            }
        }
    }

    /// Trade the secret in the URL for the session cookie, and send the browser on to the
    /// same page without the secret (so it leaves the address bar and the history).
    fn start_session(&self, path: &str) -> Response<Body> {
        // `//host`, `/\host` and their spellings would be another site: only a path of this
        // console.
        let to = guard::redirect_target(path);
        let mut r = self.answer(
            StatusCode::SEE_OTHER,
            pages::message("Welcome", "Signed in."),
        );
        if let Ok(v) = HeaderValue::from_str(&format!("{}{to}", self.session.base)) {
            r.headers_mut().insert(header::LOCATION, v);
        }
        if let Ok(v) = HeaderValue::from_str(&self.session.set_cookie()) {
            r.headers_mut().insert(header::SET_COOKIE, v);
        }
        r
    }

    fn route(
        &self,
        parts: &http::request::Parts,
        path: &str,
        body: &[u8],
    ) -> anyhow::Result<Response<Body>> {
        let keys = KeyStore::open(&self.home);
        let redactor = redactor(&keys)?;
        let view = pages::View {
            registry: &self.registry,
            keys: &keys,
            redactor: &redactor,
            csrf: &self.session.csrf,
            home: &self.home,
            granting: crate::serving::granting(&self.home),
            user_home: std::env::var_os("HOME").map(std::path::PathBuf::from),
        };
        if parts.method == Method::POST {
            if path != "/action" {
                return Ok(self.refuse(Refusal::Csrf));
            }
            let fields = match self.session.check_form(&parts.headers, body) {
                Ok(f) => f,
                Err(why) => return Ok(self.refuse(why)),
            };
            let done = actions::Action::parse(&fields)
                .map_err(anyhow::Error::msg)
                .and_then(|action| action.run(&self.registry, &keys, ACTOR));
            return Ok(match done {
                Ok(said) => self.answer(StatusCode::OK, view.outcome_page(true, &said)),
                Err(e) => self.answer(
                    StatusCode::BAD_REQUEST,
                    view.outcome_page(false, &format!("{e:#}")),
                ),
            });
        }
        let ok = |html| Ok(self.answer(StatusCode::OK, html));
        match path {
            "/" => ok(view.library_page()?),
            "/consent" => ok(view.consent_page()?),
            "/keys" => ok(view.keys_page()?),
            "/confirm" => {
                let fields: Vec<(String, String)> =
                    form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes())
                        .into_owned()
                        .collect();
                match actions::Action::parse(&fields) {
                    Ok(action) => ok(view.confirm_page(&action, &fields)),
                    Err(e) => {
                        Ok(self.answer(StatusCode::BAD_REQUEST, view.outcome_page(false, &e)))
                    }
                }
            }
            "/api/library" => Ok(typed(
                StatusCode::OK,
                "application/json",
                serde_json::to_string(&view.library()?)?,
            )),
            "/assets/console.css" => Ok(typed(StatusCode::OK, "text/css", CSS.to_string())),
            _ => match path.strip_prefix("/tool/").map(|n| view.tool_page(n)) {
                Some(Ok(Some(html))) => ok(html),
                Some(Err(e)) => Err(e),
                _ => Ok(self.answer(
                    StatusCode::NOT_FOUND,
                    pages::message("Not found", "No such page or tool."),
                )),
            },
        }
    }
}

/// A redactor of every key value held now (an unreadable keychain gives none, as for serve).
/// No page is shown without one.
fn redactor(keys: &KeyStore) -> anyhow::Result<Redactor> {
    let (values, _unreadable) = keys.known_values();
    Ok(Redactor::new(&values)?)
}
