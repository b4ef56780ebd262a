//! The request head a tool sends its proxy: read within a size bound, parsed with `httparse`.

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// Most header fields accepted in one request head.
const MAX_HEADERS: usize = 100;
/// Most bytes asked of the socket in one read.
const READ_CHUNK: usize = 4096;

/// A parsed request head.
#[derive(Debug)]
pub(super) struct Head {
    pub method: String,
    /// The request target as sent: `host:port` for CONNECT, `http://host/path` otherwise.
    pub target: String,
    /// `1` for HTTP/1.1, `0` for HTTP/1.0.
    pub minor_version: u8,
    /// Header fields in order, names as sent.
    pub headers: Vec<(String, Vec<u8>)>,
}

impl Head {
    /// The values of every field named `name` (case-insensitive).
    pub fn values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }
}

/// Why no head was read.
#[derive(Debug)]
pub(super) enum HeadError {
    /// Longer than the bound, or more than [`MAX_HEADERS`] fields: 431.
    TooLarge,
    /// Not HTTP/1: 400.
    Malformed(String),
    /// The tool closed the connection first (nothing to answer).
    Closed,
    /// Reading failed (the connection was reset).
    Io,
}

/// Read from `stream` into `buf` until a complete head is there, at most `max` bytes. Returns
/// the head and how many bytes of `buf` it took; the rest is the start of the body (or, after
/// CONNECT, of the tunnel).
pub(super) async fn read_head(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    max: usize,
) -> Result<(Head, usize), HeadError> {
    loop {
        if let Some(parsed) = parse(buf)? {
            return Ok(parsed);
        }
        if buf.len() >= max {
            return Err(HeadError::TooLarge);
        }
        // Straight into `buf`, never more than the bound allows: no zeroed chunk, no copy.
        let room = (max - buf.len()).min(READ_CHUNK);
        buf.reserve(room);
        let n = (&mut *stream)
            .take(room as u64)
            .read_buf(buf)
            .await
            .map_err(|_| HeadError::Io)?;
        if n == 0 {
            return Err(if buf.is_empty() {
                HeadError::Closed
            } else {
                HeadError::Malformed("the connection closed in the middle of the request".into())
            });
        }
    }
}

pub(super) fn parse(buf: &[u8]) -> Result<Option<(Head, usize)>, HeadError> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut fields);
    match req.parse(buf) {
        Ok(httparse::Status::Partial) => Ok(None),
        Ok(httparse::Status::Complete(len)) => {
            let (Some(method), Some(target), Some(minor_version)) =
                (req.method, req.path, req.version)
            else {
                return Err(HeadError::Malformed("an incomplete request line".into()));
            };
            let head = Head {
                method: method.to_owned(),
                target: target.to_owned(),
                minor_version,
                headers: req
                    .headers
                    .iter()
                    .map(|h| (h.name.to_owned(), h.value.to_owned()))
                    .collect(),
            };
            Ok(Some((head, len)))
        }
        Err(httparse::Error::TooManyHeaders) => Err(HeadError::TooLarge),
        Err(e) => Err(HeadError::Malformed(format!("not an HTTP/1 request ({e})"))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn parses_connect_and_absolute_form() {
        let (head, len) =
            parse(b"CONNECT api.x.com:443 HTTP/1.1\r\nHost: api.x.com:443\r\n\r\nrest")
                .unwrap()
                .unwrap();
        assert_eq!(head.method, "CONNECT");
        assert_eq!(head.target, "api.x.com:443");
        assert_eq!(head.minor_version, 1);
        assert_eq!(len, 55);
        assert_eq!(head.values("host").collect::<Vec<_>>(), [b"api.x.com:443"]);
        let (head, _) = parse(b"GET http://a.example/x?y HTTP/1.0\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(
            (
                head.method.as_str(),
                head.target.as_str(),
                head.minor_version
            ),
            ("GET", "http://a.example/x?y", 0)
        );
    }

    #[test]
    fn partial_and_malformed_heads() {
        assert!(
            parse(b"GET http://a.example/ HTTP/1.1\r\nHost: a")
                .unwrap()
                .is_none()
        );
        assert!(matches!(
            parse(b"GET http://a.example/ HTTP/1.1\r\nBad Header\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
        assert!(matches!(
            parse(b"\x16\x03\x01\x00\x05hello"),
            Err(HeadError::Malformed(_))
        ));
        let many: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: v\r\n")).collect();
        let req = format!("GET http://a.example/ HTTP/1.1\r\n{many}\r\n");
        assert!(matches!(parse(req.as_bytes()), Err(HeadError::TooLarge)));
    }

    mod props {
        use super::*;
        use proptest::collection::vec;
        use proptest::prelude::*;

        /// A well-formed request head: method, target, fields.
        fn request() -> impl Strategy<Value = (String, String, Vec<u8>)> {
            let method = prop_oneof![
                Just("GET".to_string()),
                Just("CONNECT".to_string()),
                "[A-Z]{1,8}".prop_map(|m| m),
            ];
            let target = prop_oneof![
                "[a-z0-9.-]{1,30}:[0-9]{1,5}",
                "http://[a-z0-9.-]{1,30}(:[0-9]{1,5})?/[a-zA-Z0-9/?=&%._-]{0,40}",
            ];
            let fields = vec(
                ("[A-Za-z][A-Za-z0-9-]{0,15}", "[!-~]([ -~]{0,30}[!-~])?"),
                0..8,
            );
            (method, target, fields).prop_map(|(m, t, fields)| {
                let mut head = format!("{m} {t} HTTP/1.1\r\n");
                for (name, value) in &fields {
                    head.push_str(&format!("{name}: {value}\r\n"));
                }
                head.push_str("\r\n");
                (m, t, head.into_bytes())
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            /// Whatever a tool sends, the parser answers (complete, partial or refused) without
            /// panicking, and a complete head never claims more bytes than it was given.
            #[test]
            fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..4096)) {
                if let Ok(Some((head, len))) = parse(&bytes) {
                    prop_assert!(len <= bytes.len());
                    prop_assert!(head.headers.len() <= MAX_HEADERS);
                }
            }

            /// Bytes that start like a request line, to reach the field parser.
            #[test]
            fn request_shaped_garbage_never_panics(
                line in "[A-Z]{1,8} [!-~]{1,40} HTTP/1\\.[01]\r\n",
                rest in vec(any::<u8>(), 0..512),
            ) {
                let mut bytes = line.into_bytes();
                bytes.extend_from_slice(&rest);
                if let Ok(Some((_, len))) = parse(&bytes) {
                    prop_assert!(len <= bytes.len());
                }
            }

            /// A head is found whole, exactly where it ends, whatever follows it (a body, a
            /// tunnel's first bytes); every prefix of it is only incomplete, never refused, so a
            /// head sent a byte at a time is read the same.
            #[test]
            fn a_head_ends_where_it_ends_and_no_prefix_is_refused(
                (method, target, head) in request(),
                after in vec(any::<u8>(), 0..64),
            ) {
                let mut bytes = head.clone();
                bytes.extend_from_slice(&after);
                let Ok(Some((parsed, len))) = parse(&bytes) else {
                    return Err(TestCaseError::fail(format!("{:?}", String::from_utf8_lossy(&head))));
                };
                prop_assert_eq!(len, head.len());
                prop_assert_eq!(parsed.method, method);
                prop_assert_eq!(parsed.target, target);
                for cut in 0..head.len() {
                    prop_assert!(matches!(parse(&head[..cut]), Ok(None)), "cut {}", cut);
                }
            }
        }
    }
}
