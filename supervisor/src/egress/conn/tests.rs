//! Tests of the connection path: chunked framing, reason phrases, and properties of the
//! request and tunnel checks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::chunked::Chunked;
use super::forward::plan_forward;
use super::tunnel::{check_hello, connect_target};
use super::*;
use crate::egress::tls::Hello;
use autotool_policy::hosts::Host;

#[test]
fn chunked_bodies_end_where_their_framing_says() {
    let body =
        b"4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\nX-Trailer: t\r\n\r\nGET http://next/ HTTP/1.1\r\n";
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
