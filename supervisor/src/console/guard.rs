//! Who may use the console, checked on every request before anything is read or changed:
//!
//! 1. `Host` must be `127.0.0.1:PORT` or `localhost:PORT` (DNS rebinding: a page of another
//!    site whose name was pointed at 127.0.0.1 sends its own name);
//! 2. an `Origin`, when sent, must be this console's own (`http://127.0.0.1:PORT` or
//!    `http://localhost:PORT`), and `Sec-Fetch-Site`, when sent, must not be `cross-site`;
//! 3. the session: the secret printed by `autotool console` (in the URL's `s=`, traded once
//!    for a cookie, `HttpOnly`, `SameSite=Strict`, named for the port since cookies are not),
//!    compared in constant time; the browser is then sent on to the page asked for only when
//!    that is surely a page of this console ([`redirect_target`]), else to the library;
//! 4. a state change: a POST of a form carrying the session's CSRF token.
//!
//! Every answer carries a strict Content-Security-Policy (nothing but this console's own
//! stylesheet; no script, no frames, forms only to itself), `nosniff`, no referrer beyond
//! itself (`no-referrer` would make browsers send `Origin: null` on its own forms), no cache,
//! and no CORS header at all.

use http::{HeaderMap, HeaderValue, header};

/// The Content-Security-Policy of every answer.
pub const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
                       form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Why a request was refused, said to whoever sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `Host` is not this console's (DNS rebinding).
    Host,
    /// A cross-site request (`Origin` or `Sec-Fetch-Site`).
    Origin,
    /// No session: neither the secret nor its cookie.
    NoSession,
    /// A state change without the CSRF token (or not a POST of a form).
    Csrf,
}

impl Refusal {
    pub fn status(self) -> http::StatusCode {
        match self {
            Refusal::Host => http::StatusCode::MISDIRECTED_REQUEST,
            Refusal::Origin | Refusal::Csrf => http::StatusCode::FORBIDDEN,
            Refusal::NoSession => http::StatusCode::UNAUTHORIZED,
        }
    }

    pub fn says(self) -> &'static str {
        match self {
            Refusal::Host => {
                "This console answers only to http://127.0.0.1:PORT and http://localhost:PORT."
            }
            Refusal::Origin => "Cross-site requests are refused.",
            Refusal::NoSession => {
                "Open the URL `autotool console` printed: it carries this session's secret."
            }
            Refusal::Csrf => {
                "Changes are made only by the console's own confirmation forms (a POST with this \
                 session's token)."
            }
        }
    }
}

/// The session: the port the console listens on, the path it is served under, its secret and
/// its CSRF token.
#[derive(Debug, Clone)]
pub struct Session {
    pub port: u16,
    /// `""` on a listener of its own; [`super::MOUNT`] when mounted by serve.
    pub base: &'static str,
    pub secret: String,
    pub csrf: String,
}

/// Whether `given` equals `expected`, in time that does not depend on where they differ.
pub fn same(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

fn value(headers: &HeaderMap, name: header::HeaderName) -> Option<&[u8]> {
    headers.get(name).map(HeaderValue::as_bytes)
}

impl Session {
    /// A new session (32 random bytes each for its secret and its CSRF token) for a console on
    /// `port` under `base`.
    pub fn new(port: u16, base: &'static str) -> std::io::Result<Session> {
        Ok(Session {
            port,
            base,
            secret: crate::consent::hex(&crate::consent::random_bytes::<32>()?),
            csrf: crate::consent::hex(&crate::consent::random_bytes::<32>()?),
        })
    }

    /// The name of the session cookie: one per port, since cookies are shared by every port
    /// of a host.
    pub fn cookie_name(&self) -> String {
        format!("autotool_console_{}", self.port)
    }

    /// The `Set-Cookie` value that starts the session: sent back only below the console's
    /// base (a mounted console's cookie never goes to serve's `/mcp`).
    pub fn set_cookie(&self) -> String {
        format!(
            "{}={}; Path={}; HttpOnly; SameSite=Strict",
            self.cookie_name(),
            self.secret,
            if self.base.is_empty() { "/" } else { self.base }
        )
    }

    /// The URL printed to the user.
    pub fn url(&self) -> String {
        format!(
            "http://127.0.0.1:{}{}/?s={}",
            self.port, self.base, self.secret
        )
    }

    fn own_origins(&self) -> [String; 2] {
        [
            format!("http://127.0.0.1:{}", self.port),
            format!("http://localhost:{}", self.port),
        ]
    }

    /// Checks 1 and 2: where the request says it goes and comes from.
    pub fn check_origin(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let host = value(headers, header::HOST).ok_or(Refusal::Host)?;
        let ours = [
            format!("127.0.0.1:{}", self.port),
            format!("localhost:{}", self.port),
        ];
        if !ours.iter().any(|h| h.as_bytes().eq_ignore_ascii_case(host)) {
            return Err(Refusal::Host);
        }
        if let Some(origin) = value(headers, header::ORIGIN)
            && !self
                .own_origins()
                .iter()
                .any(|o| o.as_bytes().eq_ignore_ascii_case(origin))
        {
            return Err(Refusal::Origin);
        }
        if headers
            .get("sec-fetch-site")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"cross-site"))
        {
            return Err(Refusal::Origin);
        }
        Ok(())
    }

    /// Whether `query` carries this session's secret as `s=`.
    pub fn secret_in(&self, query: Option<&str>) -> bool {
        query.is_some_and(|q| {
            form_urlencoded::parse(q.as_bytes())
                .any(|(k, v)| k == "s" && same(v.as_bytes(), self.secret.as_bytes()))
        })
    }

    /// Check 3: the session cookie.
    pub fn check_cookie(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let name = self.cookie_name();
        let found = headers.get_all(header::COOKIE).iter().any(|v| {
            v.to_str().unwrap_or("").split(';').any(|pair| {
                pair.trim()
                    .split_once('=')
                    .is_some_and(|(k, v)| k == name && same(v.as_bytes(), self.secret.as_bytes()))
            })
        });
        if found {
            Ok(())
        } else {
            Err(Refusal::NoSession)
        }
    }

    /// Check 4: a form POST carrying the CSRF token; returns its fields.
    pub fn check_form(
        &self,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Vec<(String, String)>, Refusal> {
        let form = value(headers, header::CONTENT_TYPE).is_some_and(|t| {
            t.split(|b| *b == b';')
                .next()
                .is_some_and(|t| t.trim_ascii() == b"application/x-www-form-urlencoded")
        });
        if !form {
            return Err(Refusal::Csrf);
        }
        let fields: Vec<(String, String)> = form_urlencoded::parse(body).into_owned().collect();
        let tokens: Vec<&String> = fields
            .iter()
            .filter(|(k, _)| k == "csrf")
            .map(|(_, v)| v)
            .collect();
        match tokens.as_slice() {
            [t] if same(t.as_bytes(), self.csrf.as_bytes()) => Ok(fields),
            _ => Err(Refusal::Csrf),
        }
    }
}

/// Where trading the secret for the cookie sends the browser on: `path` (below the console's
/// base) when it is surely a page of this console, `/` otherwise. It must begin with exactly one
/// `/`, the next character neither `/` nor `\` (browsers read `/\host` as `//host`: another
/// site), and hold only visible ASCII and no `\` anywhere (browsers drop tabs and newlines
/// from a URL, so `/<TAB>/host` would become `//host`); and so must every percent-decoded
/// reading of it, down to the last level (`/%5Chost`, `/%2F%2Fhost`, `/%252F%252Fhost`), since
/// a decoded form is what something on the way may act on. A path with a scheme cannot pass
/// the first rule.
pub fn redirect_target(path: &str) -> &str {
    let mut reading = path.as_bytes().to_vec();
    loop {
        if !own_path(&reading) {
            return "/";
        }
        let decoded = percent_decoded(&reading);
        if decoded == reading {
            return path;
        }
        reading = decoded;
    }
}

/// The rule of [`redirect_target`] on one reading.
fn own_path(path: &[u8]) -> bool {
    matches!(path, [b'/', rest @ ..] if !matches!(rest.first(), Some(b'/' | b'\\')))
        && path.iter().all(|b| b.is_ascii_graphic() && *b != b'\\')
}

/// `path` with each `%HH` decoded once (a `%` not followed by two hex digits kept as it is).
fn percent_decoded(path: &[u8]) -> Vec<u8> {
    let hex = |b: u8| char::from(b).to_digit(16);
    let mut out = Vec::with_capacity(path.len());
    let mut i = 0;
    while i < path.len() {
        let byte = match (path[i], path.get(i + 1), path.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) => hex(h).zip(hex(l)).map(|(h, l)| (h * 16 + l) as u8),
            _ => None,
        };
        match byte {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(path[i]);
                i += 1;
            }
        }
    }
    out
}

/// The headers every answer carries.
pub fn harden(headers: &mut HeaderMap) {
    let pairs: [(header::HeaderName, &'static str); 6] = [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "same-origin"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::CACHE_CONTROL, "no-store"),
        (
            header::HeaderName::from_static("cross-origin-resource-policy"),
            "same-origin",
        ),
    ];
    for (name, v) in pairs {
        headers.insert(name, HeaderValue::from_static(v));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn session() -> Session {
        Session {
            port: 4242,
            base: "",
            secret: "a".repeat(64),
            csrf: "b".repeat(64),
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn only_this_console_s_host_and_origin_pass() {
        let s = session();
        for ok in ["127.0.0.1:4242", "localhost:4242", "LOCALHOST:4242"] {
            assert_eq!(s.check_origin(&headers(&[("host", ok)])), Ok(()), "{ok}");
        }
        for bad in [
            "evil.example:4242",
            "127.0.0.1:4243",
            "127.0.0.1",
            "localhost",
            "[::1]:4242",
            "127.0.0.1:4242.evil.example",
        ] {
            assert_eq!(
                s.check_origin(&headers(&[("host", bad)])),
                Err(Refusal::Host),
                "{bad}"
            );
        }
        assert_eq!(s.check_origin(&headers(&[])), Err(Refusal::Host));
        let host = ("host", "127.0.0.1:4242");
        assert_eq!(
            s.check_origin(&headers(&[host, ("origin", "http://localhost:4242")])),
            Ok(())
        );
        for bad in [
            "http://evil.example",
            "http://127.0.0.1:4243",
            "null",
            "https://127.0.0.1:4242",
        ] {
            assert_eq!(
                s.check_origin(&headers(&[host, ("origin", bad)])),
                Err(Refusal::Origin),
                "{bad}"
            );
        }
        assert_eq!(
            s.check_origin(&headers(&[host, ("sec-fetch-site", "cross-site")])),
            Err(Refusal::Origin)
        );
    }

    #[test]
    fn the_session_is_the_secret_or_its_cookie_and_nothing_else() {
        let s = session();
        assert!(s.secret_in(Some(&format!("s={}", s.secret))));
        assert!(!s.secret_in(Some(&format!("s={}x", s.secret))));
        assert!(!s.secret_in(Some("s=")));
        assert!(!s.secret_in(None));
        let good = format!("other=1; autotool_console_4242={}", s.secret);
        assert_eq!(s.check_cookie(&headers(&[("cookie", &good)])), Ok(()));
        for bad in [
            format!("autotool_console_4243={}", s.secret),
            format!("autotool_console_4242={}", &s.secret[1..]),
            "autotool_console_4242=".to_string(),
        ] {
            assert_eq!(
                s.check_cookie(&headers(&[("cookie", &bad)])),
                Err(Refusal::NoSession),
                "{bad}"
            );
        }
        let set = s.set_cookie();
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.contains("Path=/;"),
            "{set}"
        );
        // Mounted: the cookie is sent back below the mount only, and the URL names it.
        let mounted = Session {
            base: super::super::MOUNT,
            ..session()
        };
        assert!(mounted.set_cookie().contains("; Path=/console;"));
        assert_eq!(
            mounted.url(),
            format!("http://127.0.0.1:4242/console/?s={}", s.secret)
        );
    }

    #[test]
    fn a_change_needs_a_form_with_the_token() {
        let s = session();
        let form = [("content-type", "application/x-www-form-urlencoded")];
        let body = format!("action=remove&tool=x&csrf={}", s.csrf);
        let fields = s.check_form(&headers(&form), body.as_bytes()).unwrap();
        assert!(fields.contains(&("tool".into(), "x".into())));
        for bad in [
            "action=remove&tool=x".to_string(),
            format!("action=remove&csrf={}x", s.csrf),
            format!("csrf={0}&csrf={0}", s.csrf),
        ] {
            assert_eq!(
                s.check_form(&headers(&form), bad.as_bytes()),
                Err(Refusal::Csrf),
                "{bad}"
            );
        }
        let json = [("content-type", "application/json")];
        assert_eq!(
            s.check_form(&headers(&json), body.as_bytes()),
            Err(Refusal::Csrf)
        );
    }

    #[test]
    fn the_redirect_after_the_secret_stays_on_this_console() {
        // The control: a page of this console is kept as it is.
        for kept in [
            "/",
            "/tool/weather",
            "/consent",
            "/keys/",
            "/tool/a%25b",
            "/a%2",
        ] {
            assert_eq!(redirect_target(kept), kept);
        }
        // Another site, in every spelling a browser (or something on the way) reads as one.
        for away in [
            "//evil.example",
            "//evil.example/",
            "/\\evil.example",
            "/\\\\evil.example",
            "/tool\\..\\\\evil.example",
            "/%5Cevil.example",
            "/%5cevil.example",
            "/%2F%2Fevil.example",
            "/%2f/evil.example",
            "/%252F%252Fevil.example",
            "/%25255Cevil.example",
            "/\t/evil.example",
            "/\n/evil.example",
            "/%09/evil.example",
            "/%0D%0A/evil.example",
            "/ /evil.example",
            "/tool/x\r\nSet-Cookie: a=b",
            "/%E2%80%8B/evil.example",
            "http://evil.example/",
            "evil.example",
            "",
        ] {
            assert_eq!(redirect_target(away), "/", "{away:?}");
        }
    }
}
