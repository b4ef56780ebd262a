//! The escapes the redactor reads through: what counts as an escape, and what it decodes to.
//!
//! Two layers, each at most once, in either order, mixed freely from one character to the next:
//! - **URL**: `%HH` for any byte, either hex case. (`+` for a space is no escape here: the
//!   search folds `+` and space into one byte, see [`fold`].)
//! - **JSON**: `\"` `\\` `\/` `\b` `\f` `\n` `\r` `\t`, and `\uHHHH` for any character, either
//!   hex case: a surrogate pair for a character past U+FFFF, and a lone `\uDC80`..`\uDCFF` for a
//!   byte that is not UTF-8 (as Python's `surrogateescape` and `json.dumps` write it). Other lone
//!   surrogates stand for nothing and are no escape.
//! - **JSON-escaped, then URL-encoded**: any character of a JSON escape may be `%HH`
//!   (`%5Cu0041`, `\%75004%31`, `%5C%75%30%30%34%31` are all `A`).
//! - **URL-encoded, then JSON-escaped**: any character of a `%HH` may be `\u00HH`
//!   (`\u002541`, `%\u00341`, `\u0025\u0034\u0031` are all `A`).
//!
//! An escape never decodes to more than 4 bytes, spans at most [`MAX_ESCAPE`] bytes of text, and
//! never more than [`MAX_EXPANSION`] bytes per byte it decodes to. Whether an escape starts at a
//! position depends only on the bytes from there on, never on what came before: the search
//! considers every reading of the text (each escape decoded, or read as the characters it is
//! made of), so no earlier escape can hide a later one.

/// The longest escape: a surrogate pair with each of its 12 characters percent-encoded.
pub(super) const MAX_ESCAPE: usize = 36;

/// The most bytes of text an escape takes per byte it decodes to: `\u0041` with each of its 6
/// characters percent-encoded, or `%41` with each of its 3 characters as `\u00HH`.
pub(super) const MAX_EXPANSION: usize = 18;

/// `%` and `\`: every escape starts with one of them.
pub(super) fn is_introducer(b: u8) -> bool {
    b == b'%' || b == b'\\'
}

/// Where a form is written for a form-encoded body or query, `+` is a space; elsewhere it is
/// `+`. The search cannot tell which, so it compares text and values with `+` read as a space:
/// a value with a `+` is also found where it shows a space instead, which only ever redacts
/// more.
pub(super) fn fold(b: u8) -> u8 {
    if b == b'+' { b' ' } else { b }
}

/// One escape: how many bytes of text it takes and the bytes it stands for. Six bytes, so it
/// is handed back in registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Escape {
    bytes: [u8; 4],
    count: u8,
    len: u8,
}

impl Escape {
    /// A byte read as itself.
    pub(super) fn literal(b: u8) -> Escape {
        Escape::byte(1, b)
    }

    /// `len` is at most [`MAX_ESCAPE`].
    fn byte(len: usize, b: u8) -> Escape {
        Escape {
            bytes: [b, 0, 0, 0],
            count: 1,
            len: len as u8,
        }
    }

    fn char(len: usize, c: char) -> Escape {
        let mut bytes = [0; 4];
        let count = c.encode_utf8(&mut bytes).len() as u8;
        Escape {
            bytes,
            count,
            len: len as u8,
        }
    }

    /// How many bytes of text it takes.
    pub(super) fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// The bytes this escape stands for (1 to 4).
    pub(super) fn bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.count)]
    }
}

/// The escapes that start at `at`: the one whose outer layer is URL (`%…`, its characters
/// perhaps `\u00HH`) and the one whose outer layer is JSON (`\…`, its characters perhaps
/// `%HH`). Either, both or neither may be there; each is unique when it is.
#[inline]
pub(super) fn escapes_at(text: &[u8], at: usize) -> [Option<Escape>; 2] {
    match text.get(at) {
        Some(&b) if is_introducer(b) => match plain_at(text, at) {
            Some(Plain::Url(e)) => [Some(e), None],
            Some(Plain::Json(e)) => [None, Some(e)],
            None => layered_at(text, at),
        },
        _ => [None, None],
    }
}

/// The longest escape at `at`, if any.
#[inline]
pub(super) fn longest_at(text: &[u8], at: usize) -> Option<Escape> {
    match escapes_at(text, at) {
        [Some(u), Some(j)] => Some(if u.len >= j.len { u } else { j }),
        [u, j] => u.or(j),
    }
}

/// The general parser, for what [`plain_at`] leaves: rare in text, so kept out of line.
#[inline(never)]
fn layered_at(text: &[u8], at: usize) -> [Option<Escape>; 2] {
    [url_at(text, at), json_at(text, at)]
}

/// An escape written with no second layer, when it is the only one at its position.
enum Plain {
    Url(Escape),
    Json(Escape),
}

/// The escapes nearly all text holds, read without the general parser: `%HH` (unless `%5C`,
/// which may begin a URL-encoded JSON escape), a short JSON escape, and `\uHHHH` (unless
/// `\u0025`, which may begin a JSON-escaped `%HH`, or a surrogate). `None`: ask the parser.
#[inline]
fn plain_at(text: &[u8], at: usize) -> Option<Plain> {
    let next = *text.get(at + 1)?;
    if text[at] == b'%' {
        let b = (hex(next)? << 4) | hex(*text.get(at + 2)?)?;
        return (b != b'\\').then_some(Plain::Url(Escape::byte(3, b)));
    }
    let b = match next {
        b'"' | b'\\' | b'/' => next,
        b'b' => 0x08,
        b'f' => 0x0c,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'u' => {
            let digits = text.get(at + 2..at + 6)?;
            let mut unit = 0u32;
            for &d in digits {
                unit = (unit << 4) | u32::from(hex(d)?);
            }
            if unit == 0x25 || (0xD800..=0xDFFF).contains(&unit) {
                return None;
            }
            return Some(Plain::Json(Escape::char(6, char::from_u32(unit)?)));
        }
        _ => return None,
    };
    Some(Plain::Json(Escape::byte(2, b)))
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// One character of a JSON escape: itself, or `%HH` (the escape was then URL-encoded).
fn json_char(text: &[u8], at: usize) -> Option<(u8, usize)> {
    let b = *text.get(at)?;
    if b == b'%'
        && let (Some(h), Some(l)) = (
            text.get(at + 1).and_then(|&c| hex(c)),
            text.get(at + 2).and_then(|&c| hex(c)),
        )
    {
        return Some(((h << 4) | l, at + 3));
    }
    Some((b, at + 1))
}

/// One character of a URL escape: itself, or `\u00HH` (the escape was then JSON-escaped).
fn url_char(text: &[u8], at: usize) -> Option<(u8, usize)> {
    let b = *text.get(at)?;
    if b == b'\\' && text.get(at + 1) == Some(&b'u') {
        let digits = text.get(at + 2..at + 6)?;
        let mut unit = 0u32;
        for &d in digits {
            match hex(d) {
                Some(v) => unit = (unit << 4) | u32::from(v),
                None => return Some((b, at + 1)),
            }
        }
        if let Ok(ascii) = u8::try_from(unit)
            && ascii.is_ascii()
        {
            return Some((ascii, at + 6));
        }
    }
    Some((b, at + 1))
}

/// `%HH`, each of its three characters raw or `\u00HH`.
fn url_at(text: &[u8], at: usize) -> Option<Escape> {
    let (c, p) = url_char(text, at)?;
    if c != b'%' {
        return None;
    }
    let (h, p) = url_char(text, p)?;
    let (l, p) = url_char(text, p)?;
    Some(Escape::byte(p - at, (hex(h)? << 4) | hex(l)?))
}

/// A JSON escape, each of its characters raw or `%HH`.
fn json_at(text: &[u8], at: usize) -> Option<Escape> {
    let (c, p) = json_char(text, at)?;
    if c != b'\\' {
        return None;
    }
    let (e, p) = json_char(text, p)?;
    let b = match e {
        b'"' | b'\\' | b'/' => e,
        b'b' => 0x08,
        b'f' => 0x0c,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'u' => return unicode(text, at, p),
        _ => return None,
    };
    Some(Escape::byte(p - at, b))
}

fn hex4(text: &[u8], mut p: usize) -> Option<(u32, usize)> {
    let mut unit = 0u32;
    for _ in 0..4 {
        let (c, q) = json_char(text, p)?;
        unit = (unit << 4) | u32::from(hex(c)?);
        p = q;
    }
    Some((unit, p))
}

/// The rest of `\uHHHH` (and of its low half, for a surrogate pair), `p` just past the `u`.
fn unicode(text: &[u8], at: usize, p: usize) -> Option<Escape> {
    let (unit, p) = hex4(text, p)?;
    match unit {
        0xD800..=0xDBFF => {
            let (c, q) = json_char(text, p)?;
            let (u, q) = json_char(text, q)?;
            if (c, u) != (b'\\', b'u') {
                return None;
            }
            let (low, q) = hex4(text, q)?;
            if !(0xDC00..=0xDFFF).contains(&low) {
                return None;
            }
            let c = char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))?;
            Some(Escape::char(q - at, c))
        }
        0xDC80..=0xDCFF => Some(Escape::byte(p - at, (unit - 0xDC00) as u8)),
        _ => Some(Escape::char(p - at, char::from_u32(unit)?)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn read(text: &str) -> Vec<(usize, Vec<u8>)> {
        escapes_at(text.as_bytes(), 0)
            .iter()
            .flatten()
            .map(|e| (e.len(), e.bytes().to_vec()))
            .collect()
    }

    #[test]
    fn each_layer_and_both_orders() {
        assert_eq!(read("%41"), [(3, b"A".to_vec())]);
        assert_eq!(read("%e9"), [(3, vec![0xe9])]);
        assert_eq!(read("\\n"), [(2, b"\n".to_vec())]);
        assert_eq!(read("\\u00E9"), [(6, "é".as_bytes().to_vec())]);
        assert_eq!(read("\\uD83D\\udd11"), [(12, "🔑".as_bytes().to_vec())]);
        assert_eq!(read("\\udcff"), [(6, vec![0xff])]);
        // URL-encoded JSON: the `%5C` alone is a backslash, the whole is `A`.
        assert_eq!(read("%5Cu0041"), [(3, b"\\".to_vec()), (8, b"A".to_vec())]);
        assert_eq!(
            read("%5C%75%30%30%34%31"),
            [(3, b"\\".to_vec()), (18, b"A".to_vec())]
        );
        // JSON-escaped URL: `\u0025` alone is `%`, the whole is `A`.
        assert_eq!(read("\\u002541"), [(8, b"A".to_vec()), (6, b"%".to_vec())]);
        assert_eq!(
            read("\\u0025\\u0034\\u0031"),
            [(18, b"A".to_vec()), (6, b"%".to_vec())]
        );
        let pair = "%5CuD83D%5C%75%44%44%31%31";
        assert_eq!(read(pair)[1], (pair.len(), "🔑".as_bytes().to_vec()));
        assert!(pair.len() <= MAX_ESCAPE);
    }

    #[test]
    fn what_is_no_escape() {
        for text in [
            "%4", "%G1", "\\x41", "\\U0041", "\\u004", "\\ud83d", "\\ud83dx", "\\udc41", "%%41",
        ] {
            assert_eq!(read(text), [], "{text:?}");
        }
        // A second level of the same layer is not read through.
        assert_eq!(read("%2541"), [(3, b"%".to_vec())]);
        assert_eq!(read("\\\\u0041"), [(2, b"\\".to_vec())]);
    }
}
