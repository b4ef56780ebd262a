//! Redaction: every byte bound for the model passes here, and every secret value autotool knows
//! comes out as `[REDACTED:NAME]` (DESIGN §1 promise 4).
//!
//! A [`Redactor`] is built once from the `(name, value)` pairs of the keys autotool holds, and
//! rebuilt when they change. It finds a value in any mixture, character by character, of:
//! - raw bytes;
//! - URL encoding: `%HH` for any byte, either hex case, and `+` for a space;
//! - JSON escapes: `\"` `\\` `\/` `\b` `\f` `\n` `\r` `\t`, and `\uHHHH` for any character,
//!   either hex case, with surrogate pairs for characters past U+FFFF and `\udcHH` for a byte
//!   that is not UTF-8 (as Python's `surrogateescape` and `json.dumps` write it);
//! - one level of each, in either order: JSON-escaped then URL-encoded (`%5Cu0041`,
//!   `%5C%75%30%30%34%31`) and URL-encoded then JSON-escaped (`\u002541`,
//!   `\u0025\u0034\u0031`), each character of the inner escape encoded or not.
//!
//! So every form Python's `quote`/`quote_plus`/`urlencode`, JavaScript's
//! `encodeURIComponent`/`encodeURI`/`URLSearchParams`, `json.dumps` (with and without
//! `ensure_ascii`), `serde_json`, `JSON.stringify` and Go's HTML-safe encoder write, and any
//! hand-made mixture of them. A value is searched for in every *reading* of the text, where each
//! escape is either decoded or read as the characters it is made of ([`escapes`]), so a value
//! whose own characters look like an escape (`100%25`, `C:\new`) is found too, written plainly
//! or encoded, and no escape before a value can hide it. A `+` and a space are one byte to the
//! search (a value holding either is also found with the other in its place).
//!
//! Where it stops, by design: a second level of the same layer (`%2541`, double URL-encoding;
//! `\\u0041`, JSON inside a JSON string) is read one level down only, as `%41` or `\u0041`, which
//! shows the value to no reader either unless it decodes twice; so are three layers. Each level
//! would triple the stretch of text a value can take (which the stream holds back) and the
//! readings to consider, while a tool that means to hide a value from redaction has endless
//! other ways (base64, hex, `\x41`, `&#65;`, reversing, splitting): redaction is the guard
//! against a value echoed back; against a hostile tool the guards are consent, the allowlist and
//! the sandbox. (Base64 the protocol itself chose, an image's `data` or a resource's `blob`, is
//! decoded by the render step, which searches the bytes with [`Redactor::found_in`].) A value shorter than [`MIN_SECRET_LEN`] bytes is not searched for (see there).
//!
//! How: [`search`] walks every reading of the text at once with one Aho-Corasick automaton over
//! the raw values, and replaces the whole stretch of text each match took (escapes and all) with
//! `[REDACTED:NAME]`; matches that overlap (two values sharing bytes, or the end of one the
//! start of the next) are replaced together, under the leftmost one's name. Before it, a
//! sampling q-gram [`prefilter`] over one *anchor* per value finds the few places worth the
//! walk: over the text where it lies when it holds no `%` and no `\` (the common case), over
//! its decoded view where it does. With 100 keys, 1.2 to 2.3 GB/s on JSON answers and log
//! lines, 0.3 GB/s on text made only of escapes, on the 2-core development machine (`redact-bench`
//! in `bench/`; figures in `docs/keys.md`). Time and memory are linear in the
//! text: the decoded view is never built, escapes never decode to more than they
//! take, and the walk holds at most one state per automaton state at each of 64 positions.
//!
//! Three ways in: [`Redactor::redact`] for a whole string, [`Redactor::redact_json`] for a JSON
//! value (every string, object key and number), and [`StreamRedactor`] / [`RedactingWriter`] for
//! bytes that arrive in chunks (a tool's stderr, a log). The stream works on bytes, holds back at
//! most [`Redactor::max_pattern_len`] − 1 bytes between chunks (the most text one value can take
//! in any form, so a value cut anywhere, mid-escape included, is still whole when searched), and
//! its output equals [`Redactor::redact_bytes`] of the whole stream however it was cut.

mod escapes;
mod prefilter;
mod search;

use prefilter::Prefilter;
use search::{Hit, Searcher};
use std::borrow::{Borrow, Cow};
use std::collections::HashSet;
use std::io::{self, Write};
use std::ops::ControlFlow;

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
    search: Option<Searcher>,
    /// `[REDACTED:NAME]` for each name, in the order the names were given.
    replacements: Vec<Vec<u8>>,
    names: Vec<String>,
    ignored: Vec<String>,
}

/// Never shows a value: only names and sizes.
impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("names", &self.names)
            .field("ignored", &self.ignored)
            .field("patterns", &self.pattern_count())
            .field("max_pattern_len", &self.max_pattern_len())
            .finish()
    }
}

impl Default for Redactor {
    /// A redactor that knows no secrets.
    fn default() -> Redactor {
        Redactor {
            search: None,
            replacements: Vec::new(),
            names: Vec::new(),
            ignored: Vec::new(),
        }
    }
}

impl Redactor {
    /// A redactor for these `(name, value)` pairs. Where two names hold the same value (or
    /// values that differ only in `+` against space), the first name given is the one shown.
    /// Values shorter than [`MIN_SECRET_LEN`] are skipped and their names kept in
    /// [`Redactor::ignored`].
    pub fn new<N: AsRef<str>, V: AsRef<[u8]>>(secrets: &[(N, V)]) -> Result<Redactor, RedactError> {
        let mut names = Vec::new();
        let mut ignored = Vec::new();
        let mut replacements = Vec::new();
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        let mut owners = Vec::new();
        let mut seen: HashSet<Vec<u8>> = HashSet::new();
        let mut values: Vec<&[u8]> = Vec::new();
        for (name, value) in secrets {
            let (name, value) = (name.as_ref(), value.as_ref());
            if value.len() < MIN_SECRET_LEN {
                ignored.push(name.to_owned());
                continue;
            }
            let owner = replacements.len();
            names.push(name.to_owned());
            replacements.push(format!("[REDACTED:{name}]").into_bytes());
            values.push(value);
            let folded: Vec<u8> = value.iter().map(|&b| escapes::fold(b)).collect();
            if seen.insert(folded.clone()) {
                patterns.push(folded);
                owners.push(owner);
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
        let count = patterns.len();
        let prefilter = Prefilter::for_values(&values);
        let search =
            Searcher::new(patterns, owners, prefilter).map_err(|source| RedactError::Build {
                patterns: count,
                source,
            })?;
        Ok(Redactor {
            search: Some(search),
            replacements,
            names,
            ignored,
        })
    }

    /// The same redactor, searching every byte of every text with no prefilter: what the
    /// prefilter must never change, for tests to compare against.
    #[doc(hidden)]
    pub fn without_prefilter(mut self) -> Redactor {
        self.search = self.search.map(Searcher::without_prefilter);
        self
    }

    /// The names whose values are searched for.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The names whose values are too short to search for (see [`MIN_SECRET_LEN`]).
    pub fn ignored(&self) -> &[String] {
        &self.ignored
    }

    /// How many distinct values are searched for.
    pub fn pattern_count(&self) -> usize {
        self.search.as_ref().map_or(0, Searcher::pattern_count)
    }

    /// The most bytes of text one value can take in any form searched for (every byte of the
    /// longest value written in the longest escape): a [`StreamRedactor`] holds back at most
    /// this − 1 bytes.
    pub fn max_pattern_len(&self) -> usize {
        self.search.as_ref().map_or(0, Searcher::span)
    }

    /// Whether the values are found through the anchor prefilter (see the module docs);
    /// without it every byte goes through the automaton, a few times slower. A value without a
    /// run of 15 bytes free of `%`, `\`, `+` and space turns it off for all.
    pub fn has_prefilter(&self) -> bool {
        self.search.as_ref().is_some_and(Searcher::has_prefilter)
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

    /// `bytes` with every secret replaced; borrowed when nothing was found.
    pub fn redact_bytes<'t>(&self, bytes: &'t [u8]) -> Cow<'t, [u8]> {
        if self.search.is_none() {
            return Cow::Borrowed(bytes);
        }
        let mut out = Vec::new();
        let mut open = 0;
        if self.settle(bytes, None, &mut open, &mut out) {
            Cow::Owned(out)
        } else {
            Cow::Borrowed(bytes)
        }
    }

    /// Whether `bytes` holds any secret in any form.
    pub fn contains_secret(&self, bytes: &[u8]) -> bool {
        self.search.as_ref().is_some_and(|s| s.any(bytes))
    }

    /// The name of a key whose value `bytes` holds in any form searched for (the leftmost
    /// found), or `None`.
    pub fn found_in(&self, bytes: &[u8]) -> Option<&str> {
        let search = self.search.as_ref()?;
        let mut owner = None;
        let _ = search.groups(bytes, &mut |g: Hit| {
            owner = Some(g.owner);
            ControlFlow::Break(())
        });
        self.names.get(owner?).map(String::as_str)
    }

    /// `text` redacted in place, when it is there.
    pub fn redact_option(&self, text: &mut Option<String>) {
        if let Some(t) = text
            && let Cow::Owned(r) = self.redact(t)
        {
            *t = r;
        }
    }

    /// [`Redactor::redact_json`] of a JSON object in place.
    pub fn redact_object(&self, object: &mut serde_json::Map<String, serde_json::Value>) {
        let mut value = serde_json::Value::Object(std::mem::take(object));
        self.redact_json(&mut value);
        if let serde_json::Value::Object(redacted) = value {
            *object = redacted;
        }
    }

    /// Redact a JSON value in place: every string, every object key (keys that become equal
    /// are kept apart with a `#2`, `#3`… suffix rather than dropped) and every number whose
    /// text holds a secret (it becomes the redacted string).
    pub fn redact_json(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        if self.search.is_none() {
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

    fn replacement(&self, owner: usize) -> &[u8] {
        // Every owner has a replacement: both are made together in `new`.
        self.replacements
            .get(owner)
            .map_or(b"[REDACTED]".as_slice(), Vec::as_slice)
    }

    /// Append to `out` the redacted text of `data` up to `cutoff` (all of it when `None`) and
    /// return whether anything was replaced.
    ///
    /// `open` says how many bytes at the start of `data` a replacement already written covers
    /// (a group of matches that began before `data` and may go on); on return it is the same
    /// for the bytes from `cutoff` on. A group that starts before `cutoff` is written whole
    /// even if it reaches past it: whoever calls with a cutoff guarantees that every match
    /// starting before it ends within `data`, so the group's leftmost match, and with it its
    /// name, is known. Matches that reach past `cutoff` only make the group longer, and the
    /// next call, told by `open`, writes nothing for them. So cutting `data` anywhere and
    /// calling once per piece writes what one call over the whole would.
    fn settle(
        &self,
        data: &[u8],
        cutoff: Option<usize>,
        open: &mut usize,
        out: &mut Vec<u8>,
    ) -> bool {
        let Some(search) = &self.search else {
            out.extend_from_slice(&data[cutoff.map_or(data.len(), |c| c.min(data.len()))..]);
            return false;
        };
        let stop = cutoff.unwrap_or(data.len());
        // `data[..last]` is written; a replacement written covers `data[..covered]`.
        let mut last = 0;
        let mut covered = *open;
        let mut replaced = false;
        let _ = search.groups(data, &mut |g: Hit| {
            if g.start < covered {
                covered = covered.max(g.end);
                return ControlFlow::Continue(());
            }
            if g.start >= stop {
                return ControlFlow::Break(());
            }
            if !replaced {
                out.reserve(data.len() + 64);
                replaced = true;
            }
            last = last.max(covered);
            out.extend_from_slice(&data[last..g.start]);
            out.extend_from_slice(self.replacement(g.owner));
            last = g.start;
            covered = g.end;
            ControlFlow::Continue(())
        });
        let last = last.max(covered);
        if covered > stop {
            *open = covered - stop;
        } else {
            *open = 0;
            out.extend_from_slice(&data[last..stop]);
        }
        replaced
    }
}

/// Redacts bytes that arrive in chunks. Output equals [`Redactor::redact_bytes`] of all the
/// chunks put together, however they were cut. Between calls it holds back at most
/// [`Redactor::max_pattern_len`] − 1 bytes, the most a secret still being written could have
/// shown so far; [`StreamRedactor::finish`] releases them.
///
/// `R` is whatever holds the redactor: `&Redactor`, or `Arc<Redactor>` for a stream that
/// outlives the caller. A stream keeps the redactor it was started with.
pub struct StreamRedactor<R: Borrow<Redactor>> {
    redactor: R,
    pending: Vec<u8>,
    /// How many bytes at the start of `pending` a replacement already written covers.
    open: usize,
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
            open: 0,
        }
    }

    /// Bytes held back, waiting to learn whether they start a secret.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Take in `chunk`; append to `out` every byte that is now certain.
    ///
    /// Every match that starts before `len + 1 − max_pattern_len` ends within what has
    /// arrived, so the text before that point is settled (see `Redactor::settle`). Each call
    /// searches the held-back bytes again with the chunk: small chunks cost up to
    /// `max_pattern_len` bytes of search each.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        let redactor = self.redactor.borrow();
        if redactor.search.is_none() {
            out.extend_from_slice(chunk);
            return;
        }
        let span = redactor.max_pattern_len();
        let mut rest = chunk;
        if !self.pending.is_empty() {
            // The held-back bytes and the chunk's first `span`: afterwards, what is held back
            // lies wholly in the chunk, which is then searched where it lies.
            let head = rest.len().min(span);
            self.pending.extend_from_slice(&rest[..head]);
            let cutoff = (self.pending.len() + 1).saturating_sub(span);
            if cutoff > 0 {
                redactor.settle(&self.pending, Some(cutoff), &mut self.open, out);
                self.pending.drain(..cutoff);
            }
            if head == rest.len() {
                return;
            }
            // `pending` (span − 1 bytes) is the end of `rest[..head]`.
            rest = &rest[head - self.pending.len()..];
            self.pending.clear();
        }
        let cutoff = (rest.len() + 1).saturating_sub(span);
        if cutoff > 0 {
            redactor.settle(rest, Some(cutoff), &mut self.open, out);
        }
        self.pending.extend_from_slice(&rest[cutoff..]);
    }

    /// The stream has ended: append the held-back bytes, redacted, to `out`.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        let pending = std::mem::take(&mut self.pending);
        let redactor = self.redactor.borrow();
        redactor.settle(&pending, None, &mut self.open, out);
        self.open = 0;
    }
}

/// A [`Write`] that redacts everything written through it before it reaches `inner`.
/// Call [`RedactingWriter::finish`] at the end: without it the held-back tail (at most
/// [`Redactor::max_pattern_len`] − 1 bytes) is dropped, never written unredacted. `flush` flushes `inner` but
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
