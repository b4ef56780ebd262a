//! Text from outside (a registry, a tool, a model) as data, never terminal control (DESIGN §10).
//!
//! A registry's fields, a tool's description, a model's words can hold escape sequences (set the
//! window title, erase a line, conceal text, move the cursor), bare carriage returns that draw a
//! line over another, and bidirectional overrides or invisible characters that make text read
//! other than it is. Every character of that kind is shown as a visible escape, `\uXXXX` (a
//! surrogate pair past U+FFFF): the same spelling JSON uses, so an escape inside a JSON string
//! still decodes to the original character and `--json` output stays valid and means the same.
//!
//! - [`escape_line`]: one field on one line: every such character escaped, `\n` and `\t` too, so a
//!   field cannot start a line of its own and pass for the command's own words.
//! - [`escape_text`]: text laid out by its writer: the same, keeping `\n` and `\t`.
//! - [`SafeWriter`]: [`escape_text`] over a byte stream. Every command's stdout passes one
//!   ([`crate::cmd::cli::main`]), and so does every error and log line on stderr, so a call site
//!   that forgets to escape a field still prints no control. Call sites escape fields themselves
//!   only to keep them on their line.
//! - [`shell_quote`]: an argument of a command the user is told to run, quoted for a POSIX shell.
//!
//! Which characters: every control character (C0, DEL, C1), the line and paragraph separators,
//! the bidirectional marks, embeddings, overrides and isolates (U+061C, U+200E–U+200F,
//! U+202A–U+202E, U+2066–U+2069), and the invisible format characters that can hide text
//! (U+200B zero width space, U+2060–U+2064, U+206A–U+206F, U+FEFF, U+FFF9–U+FFFB, and the tag
//! characters U+E0000–U+E007F that spell ASCII invisibly). The zero width joiner and non-joiner
//! (U+200C, U+200D) stay: scripts and emoji need them, and they hide nothing.

use std::borrow::Cow;
use std::io::{self, Write};

/// Whether `c` is shown escaped (see the module's list). `\n` and `\t` are, too; [`escape_text`]
/// keeps them.
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200B}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{206F}'
                | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}'
                | '\u{E0000}'..='\u{E007F}'
        )
}

fn escape(s: &str, keep: fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(|c| is_unsafe(c) && !keep(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if is_unsafe(c) && !keep(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `\uXXXX`, as JSON writes it (a surrogate pair past U+FFFF).
fn push_escaped(out: &mut String, c: char) {
    let mut units = [0u16; 2];
    for unit in c.encode_utf16(&mut units) {
        out.push_str(&format!("\\u{unit:04x}"));
    }
}

/// `s` as one line: every control, bidirectional and invisible character escaped, `\n` and `\t`
/// included.
pub fn escape_line(s: &str) -> Cow<'_, str> {
    escape(s, |_| false)
}

/// `s` with every control, bidirectional and invisible character escaped but `\n` and `\t`.
pub fn escape_text(s: &str) -> Cow<'_, str> {
    escape(s, |c| c == '\n' || c == '\t')
}

/// [`escape_text`] of bytes: what is not UTF-8 becomes U+FFFD.
pub fn escape_text_bytes(bytes: &[u8]) -> Cow<'_, [u8]> {
    match std::str::from_utf8(bytes) {
        Ok(s) => match escape_text(s) {
            Cow::Borrowed(_) => Cow::Borrowed(bytes),
            Cow::Owned(o) => Cow::Owned(o.into_bytes()),
        },
        Err(_) => Cow::Owned(
            escape_text(&String::from_utf8_lossy(bytes))
                .into_owned()
                .into_bytes(),
        ),
    }
}

/// A writer that passes [`escape_text`] of everything written to it. A character cut between two
/// writes is held until the rest arrives (at most 3 bytes); bytes that are not UTF-8 become
/// U+FFFD. What is still held when it is dropped (a cut character that never completed) is
/// written as U+FFFD.
pub struct SafeWriter<W: Write> {
    inner: W,
    /// The start of a character whose other bytes have not arrived yet.
    held: Vec<u8>,
}

impl<W: Write> std::fmt::Debug for SafeWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SafeWriter")
            .field("held", &self.held.len())
            .finish()
    }
}

impl<W: Write> SafeWriter<W> {
    pub fn new(inner: W) -> SafeWriter<W> {
        SafeWriter {
            inner,
            held: Vec::new(),
        }
    }
}

impl<W: Write> Write for SafeWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut bytes = std::mem::take(&mut self.held);
        bytes.extend_from_slice(buf);
        let complete = incomplete_tail(&bytes);
        self.inner
            .write_all(&escape_text_bytes(&bytes[..complete]))?;
        self.held = bytes[complete..].to_vec();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Write> Drop for SafeWriter<W> {
    fn drop(&mut self) {
        if !self.held.is_empty() {
            let _ = self.inner.write_all("\u{FFFD}".as_bytes());
            let _ = self.inner.flush();
        }
    }
}

/// Where the character cut at the end of `bytes` starts (`bytes.len()` when none is cut).
fn incomplete_tail(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let i = bytes.len() - back;
        let b = bytes[i];
        if b & 0xC0 == 0x80 {
            continue;
        }
        let needs = match b {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        return if needs > back { i } else { bytes.len() };
    }
    bytes.len()
}

/// Write `line` to stderr, escaped ([`escape_text`]), with a newline.
pub fn eprint_line(line: &str) {
    let mut err = io::stderr().lock();
    let _ = writeln!(err, "{}", escape_text(line));
}

/// `arg` quoted for a POSIX shell when it needs to be: as it is when it holds only characters no
/// shell treats specially, else in single quotes (a `'` inside as `'\''`).
pub fn shell_quote(arg: &str) -> Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:@%+=,".contains(c);
    if !arg.is_empty() && arg.chars().all(plain) {
        return Cow::Borrowed(arg);
    }
    Cow::Owned(format!("'{}'", arg.replace('\'', r"'\''")))
}

/// `args` quoted ([`shell_quote`]) and joined by spaces.
pub fn shell_words<S: AsRef<str>>(args: &[S]) -> String {
    args.iter()
        .map(|a| shell_quote(a.as_ref()).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Standard output for a verb's report: once the reader has gone (`autotool tools list | head
/// -1`), the rest is dropped and the verb goes on as if it had been read, so a closed pipe is
/// never an error (docs/cli.md), whichever verb prints.
pub struct ClosedPipeIsFine<W: std::io::Write> {
    inner: W,
    closed: bool,
}

impl<W: std::io::Write> std::io::Write for ClosedPipeIsFine<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.closed {
            return Ok(buf.len());
        }
        match self.inner.write(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(buf.len())
            }
            other => other,
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.closed {
            return Ok(());
        }
        match self.inner.flush() {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            other => other,
        }
    }
}

impl<W: std::io::Write> std::fmt::Debug for ClosedPipeIsFine<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClosedPipeIsFine")
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

impl<W: std::io::Write> ClosedPipeIsFine<W> {
    /// Over `inner`, whose reader is still there.
    pub fn new(inner: W) -> Self {
        ClosedPipeIsFine {
            inner,
            closed: false,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// What a hostile registry or model writes: a title change, an erased line, concealed text,
    /// a carriage return over the line, a right-to-left override, an invisible tag character.
    const ATTACK: &str = "ok\u{1b}]0;pwned\u{7}\u{1b}[2K\u{1b}[8mhidden\u{1b}[0m\rfake \u{202e}txt.exe\u{2066}\u{E0041}\u{9b}31m\u{7f}";

    fn has_control(s: &str) -> bool {
        s.chars().any(|c| is_unsafe(c) && c != '\n' && c != '\t')
    }

    #[test]
    fn outside_text_prints_no_control() {
        assert!(
            has_control(ATTACK),
            "control: the raw text carries controls"
        );
        let input = format!("{ATTACK}\nsecond\tline");
        let line = escape_line(&input);
        assert!(!line.chars().any(is_unsafe), "{line}");
        assert!(line.contains(r"\u001b]0;pwned\u0007"), "{line}");
        assert!(
            line.contains(r"\u202etxt.exe\u2066\udb40\udc41\u009b31m\u007f"),
            "{line}"
        );
        assert!(line.contains(r"\u000asecond\u0009line"), "{line}");
        let text = escape_text(&input);
        assert!(
            !has_control(&text) && text.contains("\nsecond\tline"),
            "{text}"
        );
        // Plain text, other scripts, emoji sequences are left alone (and not copied).
        for plain in [
            "Weather for a city",
            "naïve 東京 مرحبا",
            "👨\u{200d}👩\u{200d}👧",
        ] {
            assert!(matches!(escape_line(plain), Cow::Borrowed(_)), "{plain}");
        }
    }

    #[test]
    fn escapes_keep_json_valid_and_equal() {
        let v = serde_json::json!({"description": ATTACK, "k": "\u{85}\u{2028}"});
        let json = v.to_string();
        assert!(
            has_control(&json),
            "control: serde_json leaves C1 and bidi raw"
        );
        let shown = escape_text(&json);
        assert!(!has_control(&shown));
        let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn the_writer_escapes_whatever_the_cuts() {
        let text = format!("{ATTACK}\nnext line\n");
        let expected = escape_text(&text).into_owned();
        let bytes = text.as_bytes();
        for size in [1, 2, 3, 5, 7, bytes.len()] {
            let mut out = Vec::new();
            {
                let mut w = SafeWriter::new(&mut out);
                for chunk in bytes.chunks(size) {
                    w.write_all(chunk).unwrap();
                }
            }
            assert_eq!(
                String::from_utf8(out).unwrap(),
                expected,
                "chunks of {size}"
            );
        }
        let mut out = Vec::new();
        {
            let mut w = SafeWriter::new(&mut out);
            w.write_all(b"a\xff\x1bb\xe6\x9d").unwrap();
        }
        assert_eq!(String::from_utf8(out).unwrap(), "a\u{FFFD}\\u001bb\u{FFFD}");
    }

    #[test]
    fn suggested_arguments_are_quoted_for_the_shell() {
        assert_eq!(shell_quote("api.x.com:8443"), "api.x.com:8443");
        assert_eq!(shell_quote("*.x.com"), "'*.x.com'");
        assert_eq!(
            shell_quote("evil.example; touch /tmp/x"),
            "'evil.example; touch /tmp/x'"
        );
        assert_eq!(shell_quote("a'b"), r"'a'\''b'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(
            shell_words(&["keys", "allow", "K", "$(id)"]),
            "keys allow K '$(id)'"
        );
    }
}
