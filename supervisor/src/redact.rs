//! Redaction: every byte bound for the model passes here, and every secret value autotool knows
//! comes out as `[REDACTED:NAME]` (DESIGN §1 promise 4).
//!
//! A [`Redactor`] is built once from the `(name, value)` pairs of the keys autotool holds, and
//! rebuilt when they change. Each value is searched for in the forms a tool is likely to echo it
//! in:
//! - raw bytes;
//! - URL-encoded, as Python's `urllib.parse.quote` (with and without `/` kept), `quote_plus` and
//!   `urlencode`, the WHATWG form encoding (`URLSearchParams`), and JavaScript's
//!   `encodeURIComponent` and `encodeURI` would write it: so a space is found as `%20` and as
//!   `+`, with upper- and lower-case hex digits;
//! - JSON-escaped, as `json.dumps` writes it (`ensure_ascii`: `\uXXXX` for non-ASCII and control
//!   characters, `\udcXX` for bytes that are not UTF-8, as Python's `surrogateescape` gives them),
//!   with upper-case hex, as `serde_json`, `JSON.stringify` and `ensure_ascii=False` write it,
//!   with `\/` for `/` (PHP and others), and as Go's HTML-safe encoder writes `<`, `>`, `&`.
//!
//! All forms of all values go into one `aho-corasick` automaton with leftmost-longest
//! semantics, so a text is scanned once however many keys there are, and of two values where one
//! is a prefix of the other, the longer wins. A value shorter than [`MIN_SECRET_LEN`] bytes is
//! not searched for: see there. Before the automaton, a sampling q-gram filter over one
//! *anchor* per value (a run of plain characters every form keeps) skips the text that cannot
//! hold a secret, probing one position in every dozen or more bytes: about 1.5 GB/s with 100
//! keys on the 2-core development machine (`cargo test --release --test redact -- --nocapture
//! throughput`), against 0.45 GB/s for the automaton alone. See `Matcher`.
//!
//! Three ways in: [`Redactor::redact`] for a whole string, [`Redactor::redact_json`] for a JSON
//! value (every string, object key and number), and [`StreamRedactor`] / [`RedactingWriter`] for
//! bytes that arrive in chunks (a tool's stderr, a log). The stream works on bytes, holds back at
//! most the longest pattern's length − 1 bytes between chunks, and its output equals
//! [`Redactor::redact_bytes`] of the whole stream however it was cut, mid-secret and
//! mid-character included.
//!
//! Limits, by design: leftmost-longest replaces non-overlapping matches, so where two different
//! secrets overlap in a text (the end of one is the start of the other) only the leftmost is
//! replaced and the tail of the other shows; a value transformed in ways other than the forms
//! above (base64, hex, reversed, split) is not recognised. Redaction is a guard against a
//! value echoed by accident; against a hostile tool the guards are consent, the allowlist and
//! the sandbox.

use aho_corasick::{AhoCorasick, AhoCorasickKind, Input, Match, MatchKind};
use std::borrow::{Borrow, Cow};
use std::collections::HashSet;
use std::io::{self, Write};
use std::ops::{ControlFlow, Range};

/// Values shorter than this many bytes are not redacted. A value that short is no credential
/// anyone issues, and redacting it would do harm without protecting it: every occurrence of,
/// say, `abc` in every result would be replaced, and the places where text went missing would
/// themselves tell the model the value. `autotool keys add` refuses such values; one that comes
/// from the environment is listed in [`Redactor::ignored`].
pub const MIN_SECRET_LEN: usize = 4;

/// Why a redactor could not be built.
#[derive(Debug, thiserror::Error)]
pub enum RedactError {
    #[error(
        "cannot build the redaction automaton for {patterns} patterns: {source}; remove some keys \
         (`autotool keys remove NAME`)"
    )]
    Build {
        patterns: usize,
        #[source]
        source: aho_corasick::BuildError,
    },
}

/// Finds every known secret value, in every form it is searched for, and replaces it with
/// `[REDACTED:NAME]`. Cheap to share (`Arc<Redactor>`); searching needs no lock.
pub struct Redactor {
    /// `None` when there is nothing to search for: every text passes unchanged.
    matcher: Option<Matcher>,
    /// For each pattern of `ac`, the index into `replacements`.
    pattern_owner: Vec<usize>,
    /// `[REDACTED:NAME]` for each name, in the order the names were given.
    replacements: Vec<Vec<u8>>,
    names: Vec<String>,
    ignored: Vec<String>,
    max_pattern_len: usize,
}

/// Never shows a value: only names and sizes.
impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("names", &self.names)
            .field("ignored", &self.ignored)
            .field("patterns", &self.pattern_owner.len())
            .field("max_pattern_len", &self.max_pattern_len)
            .finish()
    }
}

impl Default for Redactor {
    /// A redactor that knows no secrets.
    fn default() -> Redactor {
        Redactor {
            matcher: None,
            pattern_owner: Vec::new(),
            replacements: Vec::new(),
            names: Vec::new(),
            ignored: Vec::new(),
            max_pattern_len: 0,
        }
    }
}

impl Redactor {
    /// A redactor for these `(name, value)` pairs. Where two names hold the same value (or two
    /// values share a form), the first name given is the one shown. Values shorter than
    /// [`MIN_SECRET_LEN`] are skipped and their names kept in [`Redactor::ignored`].
    pub fn new<N: AsRef<str>, V: AsRef<[u8]>>(secrets: &[(N, V)]) -> Result<Redactor, RedactError> {
        let mut names = Vec::new();
        let mut ignored = Vec::new();
        let mut replacements = Vec::new();
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        let mut pattern_owner = Vec::new();
        let mut seen: HashSet<Vec<u8>> = HashSet::new();
        // One anchor per value, for the prefilter; `None` once a value has none.
        let mut anchors: Option<Vec<Vec<u8>>> = Some(Vec::new());
        for (name, value) in secrets {
            let (name, value) = (name.as_ref(), value.as_ref());
            if value.len() < MIN_SECRET_LEN {
                ignored.push(name.to_owned());
                continue;
            }
            let owner = replacements.len();
            names.push(name.to_owned());
            replacements.push(format!("[REDACTED:{name}]").into_bytes());
            let forms = forms(value);
            match anchor(value) {
                Some(a) if forms.iter().all(|f| contains(f, a)) => {
                    if let Some(list) = &mut anchors
                        && !list.iter().any(|x| x == a)
                    {
                        list.push(a.to_vec());
                    }
                }
                _ => anchors = None,
            }
            for form in forms {
                if seen.insert(form.clone()) {
                    patterns.push(form);
                    pattern_owner.push(owner);
                }
            }
        }
        if patterns.is_empty() {
            return Ok(Redactor {
                names,
                ignored,
                replacements,
                ..Redactor::default()
            });
        }
        let max_pattern_len = patterns.iter().map(Vec::len).max().unwrap_or(0);
        let mut builder = AhoCorasick::builder();
        builder.match_kind(MatchKind::LeftmostLongest);
        // A DFA is the fastest to search (one table lookup per byte) and, for a hundred keys
        // of ordinary length, a few MB; past its size limit the builder's own choice (an NFA)
        // still works, only slower.
        let ac = match builder.kind(Some(AhoCorasickKind::DFA)).build(&patterns) {
            Ok(ac) => ac,
            Err(_) => builder
                .kind(None)
                .build(&patterns)
                .map_err(|source| RedactError::Build {
                    patterns: patterns.len(),
                    source,
                })?,
        };
        let anchors = anchors.map(|list| QgramFilter::new(&list));
        Ok(Redactor {
            matcher: Some(Matcher {
                ac,
                anchors,
                max_len: max_pattern_len,
            }),
            pattern_owner,
            replacements,
            names,
            ignored,
            max_pattern_len,
        })
    }

    /// The names whose values are searched for.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The names whose values are too short to search for (see [`MIN_SECRET_LEN`]).
    pub fn ignored(&self) -> &[String] {
        &self.ignored
    }

    /// How many distinct byte strings are searched for (all forms of all values).
    pub fn pattern_count(&self) -> usize {
        self.pattern_owner.len()
    }

    /// The longest of them: a [`StreamRedactor`] holds back at most this − 1 bytes.
    pub fn max_pattern_len(&self) -> usize {
        self.max_pattern_len
    }

    /// `text` with every secret replaced; borrowed when nothing was found.
    pub fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        match self.redact_bytes(text.as_bytes()) {
            Cow::Borrowed(_) => Cow::Borrowed(text),
            Cow::Owned(bytes) => Cow::Owned(match String::from_utf8(bytes) {
                Ok(s) => s,
                // Only a value that is not itself UTF-8 can match part of a character; the
                // character's remaining bytes become U+FFFD, and the value is gone all the same.
                Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
            }),
        }
    }

    /// Whether the values are found through the anchor prefilter (see the module docs); without
    /// it, every byte goes through the automaton, about a third as fast. A value without a run
    /// of 8 plain characters (letters, digits, `-`, `_`, `.`) turns it off for all.
    pub fn has_prefilter(&self) -> bool {
        self.matcher.as_ref().is_some_and(|m| m.anchors.is_some())
    }

    /// `bytes` with every secret replaced; borrowed when nothing was found.
    pub fn redact_bytes<'t>(&self, bytes: &'t [u8]) -> Cow<'t, [u8]> {
        let Some(matcher) = &self.matcher else {
            return Cow::Borrowed(bytes);
        };
        let mut out = Vec::new();
        let mut last = 0;
        matcher.scan(bytes, |m| {
            if out.is_empty() {
                out.reserve(bytes.len() + 64);
            }
            out.extend_from_slice(&bytes[last..m.start()]);
            out.extend_from_slice(self.replacement(m.pattern().as_usize()));
            last = m.end();
            ControlFlow::Continue(())
        });
        if out.is_empty() && last == 0 {
            return Cow::Borrowed(bytes);
        }
        out.extend_from_slice(&bytes[last..]);
        Cow::Owned(out)
    }

    /// Whether `bytes` holds any secret in any form.
    pub fn contains_secret(&self, bytes: &[u8]) -> bool {
        let mut found = false;
        if let Some(matcher) = &self.matcher {
            matcher.scan(bytes, |_| {
                found = true;
                ControlFlow::Break(())
            });
        }
        found
    }

    /// Redact a JSON value in place: every string, every object key (keys that become equal
    /// are kept apart with a `#2`, `#3`… suffix rather than dropped) and every number whose
    /// text holds a secret (it becomes the redacted string).
    pub fn redact_json(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        if self.matcher.is_none() {
            return;
        }
        match value {
            Value::String(s) => {
                if let Cow::Owned(r) = self.redact(s) {
                    *s = r;
                }
            }
            Value::Number(n) => {
                let text = n.to_string();
                if let Cow::Owned(r) = self.redact(&text) {
                    *value = Value::String(r);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_json(v)),
            Value::Object(map) => {
                map.values_mut().for_each(|v| self.redact_json(v));
                if map.keys().any(|k| self.contains_secret(k.as_bytes())) {
                    let old = std::mem::take(map);
                    for (k, v) in old {
                        let key = self.redact(&k).into_owned();
                        let mut unique = key.clone();
                        let mut n = 1;
                        while map.contains_key(&unique) {
                            n += 1;
                            unique = format!("{key}#{n}");
                        }
                        map.insert(unique, v);
                    }
                }
            }
            Value::Null | Value::Bool(_) => {}
        }
    }

    fn replacement(&self, pattern: usize) -> &[u8] {
        // Every pattern has an owner: both vectors are filled together in `new`.
        self.pattern_owner
            .get(pattern)
            .and_then(|&owner| self.replacements.get(owner))
            .map_or(b"[REDACTED]".as_slice(), Vec::as_slice)
    }
}

/// Redacts bytes that arrive in chunks. Output equals [`Redactor::redact_bytes`] of all the
/// chunks put together, however they were cut. Between calls it holds back at most
/// `max_pattern_len − 1` bytes, the most a secret still being written could have shown so far;
/// [`StreamRedactor::finish`] releases them.
///
/// `R` is whatever holds the redactor: `&Redactor`, or `Arc<Redactor>` for a stream that
/// outlives the caller. A stream keeps the redactor it was started with.
pub struct StreamRedactor<R: Borrow<Redactor>> {
    redactor: R,
    pending: Vec<u8>,
}

/// Never shows the held-back bytes: they may be the start of a secret.
impl<R: Borrow<Redactor>> std::fmt::Debug for StreamRedactor<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamRedactor")
            .field("redactor", self.redactor.borrow())
            .field("pending_len", &self.pending.len())
            .finish()
    }
}

impl<R: Borrow<Redactor>> StreamRedactor<R> {
    pub fn new(redactor: R) -> StreamRedactor<R> {
        StreamRedactor {
            redactor,
            pending: Vec::new(),
        }
    }

    /// Bytes held back, waiting to learn whether they start a secret.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Take in `chunk`; append to `out` every byte that is now certain.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        let redactor = self.redactor.borrow();
        let Some(matcher) = &redactor.matcher else {
            out.extend_from_slice(chunk);
            return;
        };
        if self.pending.is_empty() {
            // Nothing held: search the chunk where it lies and keep only its unsettled tail.
            let settled = settle(redactor, matcher, chunk, out);
            self.pending.extend_from_slice(&chunk[settled..]);
        } else {
            let mut data = std::mem::take(&mut self.pending);
            data.extend_from_slice(chunk);
            let settled = settle(redactor, matcher, &data, out);
            data.drain(..settled);
            self.pending = data;
        }
    }

    /// The stream has ended: append the held-back bytes, redacted, to `out`.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        let pending = std::mem::take(&mut self.pending);
        out.extend_from_slice(&self.redactor.borrow().redact_bytes(&pending));
    }
}

/// Append to `out` the redacted prefix of `data` that no later byte can change, and return its
/// length. Any match starting before `cutoff` lies wholly in `data` (no pattern is longer than
/// `max_pattern_len`), and so do all the bytes deciding whether one starts there: those
/// positions are settled. From `cutoff` on, a match may still be growing.
fn settle(redactor: &Redactor, matcher: &Matcher, data: &[u8], out: &mut Vec<u8>) -> usize {
    let cutoff = data.len().saturating_sub(matcher.max_len - 1);
    let mut last = 0;
    matcher.scan(data, |m| {
        if m.start() >= cutoff {
            return ControlFlow::Break(());
        }
        out.extend_from_slice(&data[last..m.start()]);
        out.extend_from_slice(redactor.replacement(m.pattern().as_usize()));
        last = m.end();
        ControlFlow::Continue(())
    });
    let settled = last.max(cutoff);
    out.extend_from_slice(&data[last..settled]);
    settled
}

/// A [`Write`] that redacts everything written through it before it reaches `inner`.
/// Call [`RedactingWriter::finish`] at the end: without it the held-back tail (at most the
/// longest pattern − 1 bytes) is dropped, never written unredacted. `flush` flushes `inner` but
/// cannot release held bytes, since they may be the start of a secret.
pub struct RedactingWriter<W: Write, R: Borrow<Redactor>> {
    inner: W,
    stream: StreamRedactor<R>,
    scratch: Vec<u8>,
}

impl<W: Write, R: Borrow<Redactor>> std::fmt::Debug for RedactingWriter<W, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedactingWriter")
            .field("stream", &self.stream)
            .finish_non_exhaustive()
    }
}

impl<W: Write, R: Borrow<Redactor>> RedactingWriter<W, R> {
    pub fn new(inner: W, redactor: R) -> RedactingWriter<W, R> {
        RedactingWriter {
            inner,
            stream: StreamRedactor::new(redactor),
            scratch: Vec::new(),
        }
    }

    /// Write the held-back tail, flush, and hand back the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.scratch.clear();
        self.stream.finish(&mut self.scratch);
        self.inner.write_all(&self.scratch)?;
        self.inner.flush()?;
        Ok(self.inner)
    }
}

impl<W: Write, R: Borrow<Redactor>> Write for RedactingWriter<W, R> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.scratch.clear();
        self.stream.push(buf, &mut self.scratch);
        self.inner.write_all(&self.scratch)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

// ---------------------------------------------------------------------------------------------
// The search

/// The search proper. `ac` holds every form of every value (leftmost-longest); running it over
/// every byte costs a table lookup per byte. Most text holds no secret, so when it can,
/// `anchors` first finds the few places worth a look: each value has an *anchor*, a run of
/// bytes that every form of the value contains verbatim, and a match lies within `max_len`
/// bytes of its anchor on either side. `ac` runs only over windows around the candidate
/// places (merged where they touch), which gives exactly the matches a full run would: no
/// match starts outside a window or crosses from one window into the next.
#[derive(Debug)]
struct Matcher {
    ac: AhoCorasick,
    anchors: Option<QgramFilter>,
    max_len: usize,
}

impl Matcher {
    /// Call `f` with each leftmost-longest match in `text`, in order, until it breaks.
    fn scan(&self, text: &[u8], mut f: impl FnMut(Match) -> ControlFlow<()>) {
        let Some(filter) = &self.anchors else {
            for m in self.ac.find_iter(text) {
                if f(m).is_break() {
                    return;
                }
            }
            return;
        };
        let mut search = |window: Range<usize>| -> ControlFlow<()> {
            for m in self.ac.find_iter(Input::new(text).span(window)) {
                f(m)?;
            }
            ControlFlow::Continue(())
        };
        let mut window: Option<Range<usize>> = None;
        let mut flow = ControlFlow::Continue(());
        filter.candidates(text, |at| {
            let next = at.saturating_sub(self.max_len)..(at + self.max_len).min(text.len());
            match &mut window {
                Some(w) if next.start <= w.end => w.end = next.end,
                _ => {
                    if let Some(done) = window.replace(next) {
                        flow = search(done);
                    }
                }
            }
            flow
        });
        if let (ControlFlow::Continue(()), Some(done)) = (flow, window) {
            let _ = search(done);
        }
    }
}

/// Length of the q-grams [`QgramFilter`] samples.
const Q: usize = 4;
/// The longest anchor taken from a value.
const MAX_ANCHOR: usize = 32;

/// A sampling q-gram filter (in the family of Wu-Manber): if an anchor of length `L` occurs in
/// a text, then among the text positions that are multiples of `stride = L − Q + 1` one lies
/// where the anchor's own Q-grams are, so the filter looks only at those positions and tests
/// the Q bytes there against a bit set of every Q-gram of every anchor, then (on a hit) against
/// the sorted grams themselves. With anchors of 32 bytes that is one probe per 29 bytes of
/// text; only a Q-gram that really is part of an anchor makes a candidate.
#[derive(Debug)]
struct QgramFilter {
    bits: Vec<u64>,
    grams: Vec<u32>,
    shift: u32,
    stride: usize,
}

impl QgramFilter {
    fn new(anchors: &[Vec<u8>]) -> QgramFilter {
        let shortest = anchors.iter().map(Vec::len).min().unwrap_or(Q).max(Q);
        let grams: usize = anchors.iter().map(|a| a.len() + 1 - Q).sum();
        // About 64 bits per Q-gram keeps collisions near 1.5%, within 4 KiB .. 2 MiB.
        let log2 = (grams.max(1) * 64)
            .next_power_of_two()
            .trailing_zeros()
            .clamp(15, 24);
        let mut filter = QgramFilter {
            bits: vec![0; 1 << (log2 - 6)],
            grams: Vec::with_capacity(grams),
            shift: 32 - log2,
            stride: shortest + 1 - Q,
        };
        for anchor in anchors {
            for gram in anchor.windows(Q) {
                let word = QgramFilter::word(gram);
                let slot = filter.slot(word);
                filter.bits[slot >> 6] |= 1 << (slot & 63);
                filter.grams.push(word);
            }
        }
        filter.grams.sort_unstable();
        filter.grams.dedup();
        filter
    }

    fn word(gram: &[u8]) -> u32 {
        u32::from_le_bytes([gram[0], gram[1], gram[2], gram[3]])
    }

    fn slot(&self, word: u32) -> usize {
        (word.wrapping_mul(0x9E37_79B1) >> self.shift) as usize
    }

    /// Call `f` with each sampled position whose Q-gram may belong to an anchor, in order.
    fn candidates(&self, text: &[u8], mut f: impl FnMut(usize) -> ControlFlow<()>) {
        if text.len() < Q {
            return;
        }
        let mut at = 0;
        while at + Q <= text.len() {
            let word = QgramFilter::word(&text[at..at + Q]);
            let slot = self.slot(word);
            if self.bits[slot >> 6] & (1 << (slot & 63)) != 0
                && self.grams.binary_search(&word).is_ok()
                && f(at).is_break()
            {
                return;
            }
            at += self.stride;
        }
    }
}

/// The anchor of a value: the last (up to) [`MAX_ANCHOR`] bytes of its longest run of ASCII
/// letters, digits, `-`, `_` and `.`, which no URL or JSON encoding here changes; `None` when
/// that run is shorter than 8 bytes (the filter would have to probe too often to gain much).
fn anchor(value: &[u8]) -> Option<&[u8]> {
    let keeps = |b: &u8| b.is_ascii_alphanumeric() || b"-_.".contains(b);
    let longest = value
        .split(|b| !keeps(b))
        .max_by_key(|run| run.len())
        .filter(|run| run.len() >= 8)?;
    Some(&longest[longest.len().saturating_sub(MAX_ANCHOR)..])
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

// ---------------------------------------------------------------------------------------------
// The forms of a value

/// Every distinct form `value` is searched in: raw, URL-encoded, JSON-escaped.
pub fn forms(value: &[u8]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = vec![value.to_vec()];
    let mut add = |form: Vec<u8>| {
        if !out.contains(&form) {
            out.push(form);
        }
    };
    for style in URL_STYLES {
        for upper in [true, false] {
            add(url_encode(value, style, upper));
        }
    }
    for style in JSON_STYLES {
        add(json_escape(value, style));
    }
    out
}

/// One way of percent-encoding: which bytes stay as they are, and what a space becomes.
#[derive(Debug, Clone, Copy)]
struct UrlStyle {
    /// ASCII punctuation left unencoded, besides letters and digits.
    keep: &'static [u8],
    space_plus: bool,
}

const URL_STYLES: &[UrlStyle] = &[
    // urllib.parse.quote(s): `safe='/'` by default.
    UrlStyle {
        keep: b"_.-~/",
        space_plus: false,
    },
    // quote(s, safe='').
    UrlStyle {
        keep: b"_.-~",
        space_plus: false,
    },
    // quote_plus(s) and urlencode({...}).
    UrlStyle {
        keep: b"_.-~",
        space_plus: true,
    },
    // WHATWG application/x-www-form-urlencoded (URLSearchParams, HTML forms).
    UrlStyle {
        keep: b"*-._",
        space_plus: true,
    },
    // encodeURIComponent.
    UrlStyle {
        keep: b"-_.!~*'()",
        space_plus: false,
    },
    // encodeURI.
    UrlStyle {
        keep: b"-_.!~*'();,/?:@&=+$#",
        space_plus: false,
    },
];

fn url_encode(value: &[u8], style: &UrlStyle, upper: bool) -> Vec<u8> {
    let hex: &[u8; 16] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let mut out = Vec::with_capacity(value.len() * 3);
    for &b in value {
        if b.is_ascii_alphanumeric() || style.keep.contains(&b) {
            out.push(b);
        } else if b == b' ' && style.space_plus {
            out.push(b'+');
        } else {
            out.extend_from_slice(&[b'%', hex[usize::from(b >> 4)], hex[usize::from(b & 15)]]);
        }
    }
    out
}

/// One way of writing a string's contents in JSON.
#[derive(Debug, Clone, Copy)]
struct JsonStyle {
    /// `\uXXXX` for everything outside printable ASCII (Python's `ensure_ascii=True`).
    ascii: bool,
    upper_hex: bool,
    /// `\/` for `/`.
    slash: bool,
    /// `\u003c`, `\u003e`, `\u0026`, `\u2028`, `\u2029` (Go's HTML-safe encoder).
    html: bool,
}

const JSON_STYLES: &[JsonStyle] = &[
    // json.dumps(s)
    JsonStyle {
        ascii: true,
        upper_hex: false,
        slash: false,
        html: false,
    },
    JsonStyle {
        ascii: true,
        upper_hex: true,
        slash: false,
        html: false,
    },
    JsonStyle {
        ascii: true,
        upper_hex: false,
        slash: true,
        html: false,
    },
    // json.dumps(s, ensure_ascii=False), serde_json, JSON.stringify
    JsonStyle {
        ascii: false,
        upper_hex: false,
        slash: false,
        html: false,
    },
    JsonStyle {
        ascii: false,
        upper_hex: false,
        slash: true,
        html: false,
    },
    // Go's encoding/json
    JsonStyle {
        ascii: false,
        upper_hex: false,
        slash: false,
        html: true,
    },
];

fn json_escape(value: &[u8], style: &JsonStyle) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() * 2);
    let unicode = |out: &mut Vec<u8>, unit: u32| {
        let s = if style.upper_hex {
            format!("\\u{unit:04X}")
        } else {
            format!("\\u{unit:04x}")
        };
        out.extend_from_slice(s.as_bytes());
    };
    for chunk in value.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => out.extend_from_slice(b"\\\""),
                '\\' => out.extend_from_slice(b"\\\\"),
                '\n' => out.extend_from_slice(b"\\n"),
                '\r' => out.extend_from_slice(b"\\r"),
                '\t' => out.extend_from_slice(b"\\t"),
                '\u{8}' => out.extend_from_slice(b"\\b"),
                '\u{c}' => out.extend_from_slice(b"\\f"),
                '/' if style.slash => out.extend_from_slice(b"\\/"),
                '<' | '>' | '&' | '\u{2028}' | '\u{2029}' if style.html => {
                    unicode(&mut out, u32::from(c))
                }
                c if u32::from(c) < 0x20 => unicode(&mut out, u32::from(c)),
                c if style.ascii && !(' '..='~').contains(&c) => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        unicode(&mut out, u32::from(*unit));
                    }
                }
                c => {
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        for &b in chunk.invalid() {
            if style.ascii {
                // Python reads a non-UTF-8 environment byte as the lone surrogate U+DC80..DCFF
                // (`surrogateescape`), which `json.dumps` writes as `\udcXX`.
                unicode(&mut out, 0xDC00 + u32::from(b));
            } else {
                out.push(b);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn url_forms_match_python() {
        // urllib.parse.quote('a b/c+d~é') == 'a%20b/c%2Bd~%C3%A9'
        let v = "a b/c+d~é".as_bytes();
        let f = forms(v);
        for expect in [
            "a%20b/c%2Bd~%C3%A9",   // quote
            "a%20b%2Fc%2Bd~%C3%A9", // quote(safe='')
            "a+b%2Fc%2Bd~%C3%A9",   // quote_plus
            "a+b%2Fc%2Bd%7E%C3%A9", // WHATWG form
            "a%20b%2fc%2bd~%c3%a9", // lower-case hex
        ] {
            assert!(f.contains(&expect.as_bytes().to_vec()), "{expect} missing");
        }
    }

    #[test]
    fn json_forms_match_python() {
        // json.dumps('q"\\\n\x01é😀/') (without the quotes)
        let v = "q\"\\\n\u{1}é😀/".as_bytes();
        let f = forms(v);
        for expect in [
            r#"q\"\\\n\u0001\u00e9\ud83d\ude00/"#,
            r#"q\"\\\n\u0001\u00E9\uD83D\uDE00/"#,
            r#"q\"\\\n\u0001\u00e9\ud83d\ude00\/"#,
            "q\\\"\\\\\\n\\u0001é😀/",
        ] {
            assert!(f.contains(&expect.as_bytes().to_vec()), "{expect} missing");
        }
        // surrogateescape for a byte that is not UTF-8
        let f = forms(b"ab\xffcd");
        assert!(f.contains(&br"ab\udcffcd".to_vec()));
    }
}
