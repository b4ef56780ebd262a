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

fn parse(buf: &[u8]) -> Result<Option<(Head, usize)>, HeadError> {
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
}
