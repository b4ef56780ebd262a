//! The server name in a TLS ClientHello: what the tool opens a CONNECT tunnel to say.
//!
//! After `200` the first bytes through a tunnel must be a TLS ClientHello whose SNI names the
//! CONNECT host; otherwise a shared front end (a CDN) could route the tunnel to a host that was
//! never checked. The hello may span several records; it is parsed only as far as its
//! extensions. Encrypted ClientHello (and its predecessor, encrypted SNI) hides the real name
//! behind a public one, so a hello carrying either is refused.

/// Largest ClientHello accepted (handshake message bytes); real ones are a few KiB.
pub(super) const MAX_HELLO: usize = 64 << 10;

const RECORD_HANDSHAKE: u8 = 22;
const HANDSHAKE_CLIENT_HELLO: u8 = 1;
const EXT_SERVER_NAME: u16 = 0x0000;
const EXT_ENCRYPTED_CLIENT_HELLO: u16 = 0xfe0d;
const EXT_ENCRYPTED_SERVER_NAME: u16 = 0xffce;
const NAME_TYPE_HOST: u8 = 0;

/// What the first bytes of a tunnel say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Hello {
    /// More bytes are needed.
    Incomplete,
    /// A ClientHello naming this server (as sent, not yet canonical).
    Sni(String),
    /// A ClientHello without a server name.
    NoSni,
    /// A ClientHello with an encrypted (hidden) server name.
    Encrypted,
    /// Not a TLS handshake at all.
    NotTls,
    /// A TLS handshake that does not parse as a ClientHello.
    Malformed(&'static str),
}

/// Parse the ClientHello at the start of `buf` (the bytes received after `200` so far).
pub(super) fn parse_client_hello(buf: &[u8]) -> Hello {
    let mut message = Vec::new();
    let mut rest = buf;
    loop {
        if rest.len() < 5 {
            return Hello::Incomplete;
        }
        if rest[0] != RECORD_HANDSHAKE || rest[1] != 3 {
            return if message.is_empty() {
                Hello::NotTls
            } else {
                Hello::Malformed("a record of another kind inside the ClientHello")
            };
        }
        let len = usize::from(u16::from_be_bytes([rest[3], rest[4]]));
        if len == 0 || len > (16 << 10) + 256 {
            return Hello::Malformed("a record of impossible length");
        }
        let Some(fragment) = rest.get(5..5 + len) else {
            return Hello::Incomplete;
        };
        message.extend_from_slice(fragment);
        rest = &rest[5 + len..];
        if message.len() >= 4 {
            if message[0] != HANDSHAKE_CLIENT_HELLO {
                return Hello::Malformed("the first handshake message is not a ClientHello");
            }
            let body_len = usize::from(message[1]) << 16
                | usize::from(message[2]) << 8
                | usize::from(message[3]);
            if body_len > MAX_HELLO {
                return Hello::Malformed("the ClientHello is too large");
            }
            if let Some(body) = message.get(4..4 + body_len) {
                return match client_hello(body) {
                    Ok(hello) => hello,
                    Err(Truncated) => Hello::Malformed("a truncated field in the ClientHello"),
                };
            }
        }
        if message.len() > MAX_HELLO + 4 {
            return Hello::Malformed("the ClientHello is too large");
        }
    }
}

/// A field ran past the end of its enclosing structure.
struct Truncated;

/// A cursor over one length-delimited structure.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Truncated> {
        if self.0.len() < n {
            return Err(Truncated);
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, Truncated> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, Truncated> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn vec8(&mut self) -> Result<Reader<'a>, Truncated> {
        let n = usize::from(self.u8()?);
        Ok(Reader(self.take(n)?))
    }
    fn vec16(&mut self) -> Result<Reader<'a>, Truncated> {
        let n = usize::from(self.u16()?);
        Ok(Reader(self.take(n)?))
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn client_hello(body: &[u8]) -> Result<Hello, Truncated> {
    let mut r = Reader(body);
    r.take(2)?; // legacy_version
    r.take(32)?; // random
    r.vec8()?; // legacy_session_id
    r.vec16()?; // cipher_suites
    r.vec8()?; // legacy_compression_methods
    if r.is_empty() {
        return Ok(Hello::NoSni);
    }
    let mut extensions = r.vec16()?;
    let mut sni = None;
    while !extensions.is_empty() {
        let kind = extensions.u16()?;
        let mut data = extensions.vec16()?;
        match kind {
            EXT_ENCRYPTED_CLIENT_HELLO | EXT_ENCRYPTED_SERVER_NAME => return Ok(Hello::Encrypted),
            EXT_SERVER_NAME => {
                if sni.is_some() {
                    return Ok(Hello::Malformed("two server_name extensions"));
                }
                let mut list = data.vec16()?;
                let mut host = None;
                while !list.is_empty() {
                    let name_type = list.u8()?;
                    let name = list.vec16()?.0;
                    if name_type != NAME_TYPE_HOST {
                        continue;
                    }
                    if host.is_some() {
                        return Ok(Hello::Malformed("two host names in server_name"));
                    }
                    match std::str::from_utf8(name) {
                        Ok(name) if !name.is_empty() => host = Some(name.to_owned()),
                        _ => return Ok(Hello::Malformed("a server name that is not text")),
                    }
                }
                match host {
                    Some(host) => sni = Some(host),
                    None => return Ok(Hello::Malformed("a server_name extension without a host")),
                }
            }
            _ => {}
        }
    }
    Ok(sni.map_or(Hello::NoSni, Hello::Sni))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// A minimal ClientHello carrying `sni` (and optionally other extensions), split into records of
    /// at most `record` bytes.
    fn client_hello_for_tests(
        sni: Option<&str>,
        extra: &[(u16, Vec<u8>)],
        record: usize,
    ) -> Vec<u8> {
        let mut extensions = Vec::new();
        if let Some(name) = sni {
            let name = name.as_bytes();
            let mut entry = vec![NAME_TYPE_HOST];
            entry.extend_from_slice(&(name.len() as u16).to_be_bytes());
            entry.extend_from_slice(name);
            let mut data = (entry.len() as u16).to_be_bytes().to_vec();
            data.extend_from_slice(&entry);
            extensions.extend_from_slice(&EXT_SERVER_NAME.to_be_bytes());
            extensions.extend_from_slice(&(data.len() as u16).to_be_bytes());
            extensions.extend_from_slice(&data);
        }
        for (kind, data) in extra {
            extensions.extend_from_slice(&kind.to_be_bytes());
            extensions.extend_from_slice(&(data.len() as u16).to_be_bytes());
            extensions.extend_from_slice(data);
        }
        let mut body = vec![3, 3];
        body.extend_from_slice(&[0x5a; 32]);
        body.push(0); // session id
        body.extend_from_slice(&[0, 2, 0x13, 0x01]); // TLS_AES_128_GCM_SHA256
        body.extend_from_slice(&[1, 0]); // null compression
        body.extend_from_slice(&(extensions.len() as u16).to_be_bytes());
        body.extend_from_slice(&extensions);
        let mut message = vec![HANDSHAKE_CLIENT_HELLO];
        message.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        message.extend_from_slice(&body);
        let mut out = Vec::new();
        for fragment in message.chunks(record.max(1)) {
            out.extend_from_slice(&[RECORD_HANDSHAKE, 3, 1]);
            out.extend_from_slice(&(fragment.len() as u16).to_be_bytes());
            out.extend_from_slice(fragment);
        }
        out
    }

    #[test]
    fn finds_the_server_name() {
        let hello = client_hello_for_tests(Some("api.example.test"), &[], 16 << 10);
        assert_eq!(
            parse_client_hello(&hello),
            Hello::Sni("api.example.test".into())
        );
        // Trailing bytes (early data) do not matter.
        let mut more = hello.clone();
        more.extend_from_slice(b"\x17\x03\x03\x00\x01x");
        assert_eq!(
            parse_client_hello(&more),
            Hello::Sni("api.example.test".into())
        );
        // Every prefix is incomplete, never a wrong answer.
        for cut in 0..hello.len() {
            assert_eq!(
                parse_client_hello(&hello[..cut]),
                Hello::Incomplete,
                "cut {cut}"
            );
        }
    }

    #[test]
    fn a_hello_split_over_records_is_reassembled() {
        let hello = client_hello_for_tests(Some("a.example"), &[(0x000a, vec![0, 2, 0, 29])], 7);
        assert_eq!(parse_client_hello(&hello), Hello::Sni("a.example".into()));
    }

    #[test]
    fn no_name_hidden_names_and_garbage() {
        assert_eq!(
            parse_client_hello(&client_hello_for_tests(None, &[], 512)),
            Hello::NoSni
        );
        let ech = client_hello_for_tests(Some("public.example"), &[(0xfe0d, vec![0; 8])], 512);
        assert_eq!(parse_client_hello(&ech), Hello::Encrypted);
        assert_eq!(parse_client_hello(b"GET / HTTP/1.1\r\n\r\n"), Hello::NotTls);
        assert_eq!(
            parse_client_hello(b"SSH-2.0-OpenSSH_9.6\r\n"),
            Hello::NotTls
        );
        let mut two = client_hello_for_tests(Some("a.example"), &[], 512);
        two[5] = 2; // a ServerHello
        assert!(matches!(parse_client_hello(&two), Hello::Malformed(_)));
        let dup = client_hello_for_tests(
            Some("a.example"),
            &[(
                0,
                vec![
                    0, 12, 0, 0, 9, b'b', b'.', b'e', b'x', b'a', b'm', b'p', b'l',
                ],
            )],
            512,
        );
        assert!(matches!(parse_client_hello(&dup), Hello::Malformed(_)));
    }

    mod props {
        use super::*;
        use proptest::collection::vec;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            /// Whatever follows a `200` through a tunnel, the reader answers without panicking.
            #[test]
            fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..8192)) {
                let _ = parse_client_hello(&bytes);
            }

            /// Bytes under a handshake record header, to reach the ClientHello parser.
            #[test]
            fn handshake_shaped_garbage_never_panics(
                length in any::<u16>(),
                body in vec(any::<u8>(), 0..4096),
            ) {
                let mut bytes = vec![RECORD_HANDSHAKE, 3, 1];
                bytes.extend_from_slice(&length.to_be_bytes());
                bytes.push(HANDSHAKE_CLIENT_HELLO);
                bytes.extend_from_slice(&body);
                let _ = parse_client_hello(&bytes);
            }

            /// A hello names the server it carries however it is cut into records and whatever
            /// follows it; until it is whole it is only incomplete, never another answer.
            #[test]
            fn a_hello_names_its_server_however_it_is_split(
                sni in "[a-zA-Z0-9][a-zA-Z0-9.-]{0,80}",
                record in 1usize..700,
                other in vec((1u16..0xfe00, vec(any::<u8>(), 0..40)), 0..4),
                after in vec(any::<u8>(), 0..32),
            ) {
                let hello = client_hello_for_tests(Some(&sni), &other, record);
                let mut more = hello.clone();
                more.extend_from_slice(&after);
                prop_assert_eq!(parse_client_hello(&more), Hello::Sni(sni.clone()));
                for cut in (0..hello.len()).step_by(5) {
                    prop_assert_eq!(parse_client_hello(&hello[..cut]), Hello::Incomplete);
                }
            }

            /// One byte changed anywhere in a hello: no panic, and a name, when one is read, is
            /// non-empty text (what the tunnel's check then compares with the CONNECT host).
            #[test]
            fn a_damaged_hello_never_panics(
                sni in "[a-z][a-z0-9.-]{0,40}",
                at in any::<prop::sample::Index>(),
                byte in any::<u8>(),
            ) {
                let mut hello = client_hello_for_tests(Some(&sni), &[], 512);
                let i = at.index(hello.len());
                hello[i] = byte;
                if let Hello::Sni(name) = parse_client_hello(&hello) {
                    prop_assert!(!name.is_empty());
                }
            }
        }
    }
}
