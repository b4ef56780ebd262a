//! Where a value may be: the cheap first pass that keeps the search off text that cannot hold
//! one.
//!
//! Each value has an *anchor*: 8 to 32 bytes of it, taken from its longest run of bytes that
//! read the same in every reading: anything but `%` and `\` (where escapes start) and `+` and
//! space (which the search takes for each other). A [`QgramFilter`] samples the text at every
//! `stride`-th position and tests the 4 bytes there against the 4-grams of every anchor, so a
//! text is looked at in one place per dozen or more bytes, and only where a gram of an anchor
//! really occurs is there a *candidate*.
//!
//! An anchor can hide behind escapes (`%73%6B%2D…`), so where the text holds a `%` or `\` the
//! filter samples its *decoded view* instead: the text with every escape read the longest way
//! (see [`escapes::longest_at`]). The view is never built: the runs between escapes are sampled
//! where they lie, and only a gram that takes in an escape's bytes is put together, from the
//! last 4 bytes of the view.
//! The longest reading is not the only one the search considers, but on a run it agrees with
//! every reading: an escape that starts on a run byte is the run byte's own (no longer escape
//! starts with the `%HH` or `\uHHHH` of such a byte), except at the run's first 7 bytes, which an
//! escape starting before the run can take in (`%` then `5Cu0041…`, `\` then `u002541…`, `\`
//! then `u0041…`, `%` then `41…`; past those, an escape needs another `%` or `\`, which ends the
//! run). So anchors are taken from the part of a run past its first 7 bytes, and a value needs a
//! run of 15 to have one. A text with no `%` and no `\` at all (the common case) holds no escape
//! and cannot hold a value that has a `%` or `\`: it is sampled for a second set of anchors,
//! taken whole from the runs of the other values, so with a longer stride.

use super::escapes;
use memchr::memchr2;
use std::ops::ControlFlow;

/// Length of the grams sampled.
const Q: usize = 4;
/// The longest anchor taken from a value.
const MAX_ANCHOR: usize = 32;
/// The shortest: below this the filter would probe too often to gain much.
const MIN_ANCHOR: usize = 8;
/// Characters at the start of a run that an escape begun before it may take in: `5Cu0041`
/// after a `%`, `u002541` after a `\`.
const LEAD: usize = 7;

/// The anchor of a value: the last (up to) 32 bytes of its longest run of bytes other than
/// `%`, `\`, `+` and space, leaving out the run's first 7; `None` when that leaves fewer than 8.
pub(super) fn anchor(value: &[u8]) -> Option<&[u8]> {
    let plain = |b: &u8| !b"%\\+ ".contains(b);
    let run = value.split(|b| !plain(b)).max_by_key(|run| run.len())?;
    let len = run.len().checked_sub(LEAD)?.min(MAX_ANCHOR);
    (len >= MIN_ANCHOR).then(|| &run[run.len() - len..])
}

/// The anchor of a value for text with no `%` and no `\\`, where no escape can take bytes in:
/// the last (up to) 32 bytes of its longest run of bytes other than `+` and space. `Some(None)`
/// for a value that holds a `%` or `\\`, which such a text cannot hold; `None` when the run is
/// shorter than 8.
fn plain_anchor(value: &[u8]) -> Option<Option<&[u8]>> {
    if value.iter().any(|&b| escapes::is_introducer(b)) {
        return Some(None);
    }
    let run = value
        .split(|b| b"+ ".contains(b))
        .max_by_key(|run| run.len())?;
    let len = run.len().min(MAX_ANCHOR);
    (len >= MIN_ANCHOR).then(|| Some(&run[run.len() - len..]))
}

/// The candidates of a text, for a set of anchors.
pub(super) struct Prefilter {
    filter: QgramFilter,
    /// For text with no `%` and no `\\`: longer anchors, so fewer probes.
    plain: Option<QgramFilter>,
}

impl Prefilter {
    #[cfg(test)]
    fn new(anchors: &[Vec<u8>]) -> Prefilter {
        Prefilter {
            filter: QgramFilter::new(anchors),
            plain: None,
        }
    }

    /// The prefilter for these values; `None` when one of them has no [`anchor`].
    pub(super) fn for_values(values: &[&[u8]]) -> Option<Prefilter> {
        let mut anchors: Vec<Vec<u8>> = Vec::new();
        let mut plain: Option<Vec<Vec<u8>>> = Some(Vec::new());
        for value in values {
            let a = anchor(value)?;
            if !anchors.iter().any(|x| x == a) {
                anchors.push(a.to_vec());
            }
            match (plain_anchor(value), &mut plain) {
                (Some(Some(a)), Some(list)) if !list.iter().any(|x| x == a) => {
                    list.push(a.to_vec());
                }
                (None, _) => plain = None,
                _ => {}
            }
        }
        let plain = plain.filter(|list| !list.is_empty());
        Some(Prefilter {
            filter: QgramFilter::new(&anchors),
            plain: plain.map(|list| QgramFilter::new(&list)),
        })
    }

    /// Call `f` with a position of `text` near every place an anchor occurs, in any reading of
    /// the text, in increasing order: the position where (the escape that gave) a sampled gram
    /// of the anchor begins. `plain` says that `text` holds no `%` and no `\\`.
    pub(super) fn candidates(
        &self,
        text: &[u8],
        plain: bool,
        mut f: impl FnMut(usize) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        if !plain {
            return self.decoded_candidates(text, f);
        }
        let filter = self.plain.as_ref().unwrap_or(&self.filter);
        let mut at = 0;
        while at + Q <= text.len() {
            if filter.hit(&text[at..at + Q]) {
                f(at)?;
            }
            at += filter.stride;
        }
        ControlFlow::Continue(())
    }

    /// Sample the decoded view (see the module docs): probes at every `stride`-th byte of it,
    /// each reported at the text position its first byte comes from.
    fn decoded_candidates(
        &self,
        text: &[u8],
        mut f: impl FnMut(usize) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let stride = self.filter.stride;
        let mut tail = Tail::default();
        // The view position of `text[at]`, and the next position to probe.
        let (mut decoded, mut next) = (0, 0);
        let mut at = 0;
        while at < text.len() {
            let stop = next_introducer(text, at);
            let run = &text[at..stop];
            let end = decoded + run.len();
            // Probes that begin in the tail and end in the run.
            while next < decoded && next + Q <= end {
                let from_tail = decoded - next;
                if self.filter.hit_word(tail.gram(from_tail, run)) {
                    f(tail.origin(from_tail))?;
                }
                next += stride;
            }
            // Probes wholly in the run, where it lies.
            while next + Q <= end {
                let i = next - decoded;
                if self.filter.hit(&run[i..i + Q]) {
                    f(at + i)?;
                }
                next += stride;
            }
            tail.run(run, at);
            decoded = end;
            at = stop;
            if at == text.len() {
                break;
            }
            let (bytes, len) = match escapes::longest_at(text, at) {
                Some(e) => (e, e.len()),
                None => (escapes::Escape::literal(text[at]), 1),
            };
            for &b in bytes.bytes() {
                tail.push(b, at);
                decoded += 1;
                if next + Q == decoded {
                    if self.filter.hit_word(tail.word) {
                        f(tail.origin(Q))?;
                    }
                    next += stride;
                }
            }
            at += len;
        }
        ControlFlow::Continue(())
    }
}

/// The position of the first `%` or `\\` in `text` from `at` on, or its length. Escapes in
/// text come close together (`\"quoted\"`, `\u00e9t\u00e9`), and a search call costs more than
/// the few bytes between them: the next 16 bytes are looked at a word at a time first.
#[inline]
fn next_introducer(text: &[u8], mut at: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has = |w: u64, b: u8| {
        let x = w ^ (ONES * u64::from(b));
        x.wrapping_sub(ONES) & !x & HIGH
    };
    for _ in 0..2 {
        let Some(&[a, b, c, d, e, f, g, h]) = text.get(at..at + 8) else {
            break;
        };
        let word = u64::from_le_bytes([a, b, c, d, e, f, g, h]);
        // The lowest flagged byte is exact (only bytes above a true one can be flagged falsely).
        let found = has(word, b'%') | has(word, b'\\');
        if found != 0 {
            return at + (found.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    memchr2(b'%', b'\\', &text[at.min(text.len())..]).map_or(text.len(), |i| at + i)
}

/// The last [`Q`] bytes of the decoded view (a shift register, the latest byte highest), and
/// where in the text each comes from (a ring).
#[derive(Debug, Default)]
struct Tail {
    word: u32,
    origins: [usize; Q],
    pushed: usize,
}

impl Tail {
    fn push(&mut self, b: u8, origin: usize) {
        self.word = (self.word >> 8) | (u32::from(b) << 24);
        self.origins[self.pushed % Q] = origin;
        self.pushed += 1;
    }

    /// `text[at..at + run.len()]` copied one for one.
    fn run(&mut self, run: &[u8], at: usize) {
        if let [.., a, b, c, d] = *run {
            self.word = u32::from_le_bytes([a, b, c, d]);
            let from = at + run.len() - Q;
            for i in 0..Q {
                self.origins[(self.pushed + i) % Q] = from + i;
            }
            self.pushed += Q;
        } else {
            for (i, &b) in run.iter().enumerate() {
                self.push(b, at + i);
            }
        }
    }

    /// The gram of the last `n` (1 to 3) bytes followed by the first `Q − n` of `next`.
    fn gram(&self, n: usize, next: &[u8]) -> u32 {
        let mut gram = self.word >> (8 * (Q - n));
        for (i, &b) in next[..Q - n].iter().enumerate() {
            gram |= u32::from(b) << (8 * (n + i));
        }
        gram
    }

    /// Where the `n`-th byte from the end comes from.
    fn origin(&self, n: usize) -> usize {
        self.origins[self.pushed.wrapping_sub(n) % Q]
    }
}

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

    /// Whether these Q bytes are a gram of some anchor.
    #[inline]
    fn hit(&self, gram: &[u8]) -> bool {
        self.hit_word(QgramFilter::word(gram))
    }

    /// The same, for the Q bytes as a little-endian word.
    #[inline]
    fn hit_word(&self, word: u32) -> bool {
        let slot = self.slot(word);
        self.bits[slot >> 6] & (1 << (slot & 63)) != 0 && self.grams.binary_search(&word).is_ok()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_next_introducer_is_found_at_every_distance() {
        for gap in 0..40 {
            for lead in 0..9 {
                let mut text = b"x".repeat(lead + gap);
                text.push(if gap % 2 == 0 { b'%' } else { b'\\' });
                text.extend_from_slice(b"%\\%");
                assert_eq!(next_introducer(&text, lead), lead + gap, "{gap} {lead}");
            }
            assert_eq!(next_introducer(&b"y".repeat(gap), 0), gap);
        }
        // A byte just above or below `%` and `\` is none.
        assert_eq!(next_introducer(b"$&[]\x24\x26\x5b\x5d....%", 0), 12);
    }

    #[test]
    fn anchors_leave_out_the_lead_of_a_run() {
        assert_eq!(anchor(b"sk-proj-0123456789"), Some(&b"-0123456789"[..]));
        assert_eq!(anchor(b"x+abcdefghijklmn%y"), None);
        assert_eq!(anchor(b"x abcdefghijklmno\\y"), Some(&b"hijklmno"[..]));
        assert_eq!(anchor(b"ab/cd=ef\"gh<ij>k+"), Some(&b"f\"gh<ij>k"[..]));
        let long = [b'a'; 100];
        assert_eq!(anchor(&long).map(<[u8]>::len), Some(MAX_ANCHOR));
    }

    /// Every gram of an anchor is a candidate at the text position its first byte comes from,
    /// at every phase of the sampling, whether the gram lies in a run, takes in an escape or
    /// starts in one.
    #[test]
    fn candidates_map_back_to_the_text() {
        // View: a b c(%63) d e(\u0065) f + g % z z \n; the anchor is the whole view.
        let text = b"ab%63d\\u0065f+g%zz\\n";
        let view = b"abcdef+g%zz\n".to_vec();
        let origins = [0, 1, 2, 5, 6, 12, 13, 14, 15, 16, 17, 18];
        let p = Prefilter::new(&[view]);
        let stride = p.filter.stride;
        for lead in 0..stride {
            let mut t = b"-".repeat(lead);
            t.extend_from_slice(text);
            let mut found = Vec::new();
            let _ = p.candidates(&t, false, |at| {
                found.push(at - lead);
                ControlFlow::Continue(())
            });
            let expect: Vec<usize> = (0..=origins.len() - Q)
                .filter(|d| (d + lead) % stride == 0)
                .map(|d| origins[d])
                .collect();
            assert_eq!(found, expect, "lead {lead}");
        }
    }

    /// A run right after `\\` or `%`: the longest reading takes its first characters in (`\\n`,
    /// `%AB`, `%5Cu0041`, `\\u002541`), so the anchor must lie past them, at every sampling
    /// phase.
    #[test]
    fn a_run_after_an_escape_keeps_its_anchor() {
        for value in [
            &b"\\nABCDEFGHIJKLMNOP"[..],
            b"%ABCDEFGHIJKLMNOPQ",
            b"%5Cu0041BCDEFGHIJKLM",
            b"\\u0041BCDEFGHIJKLMN",
            b"\\u002541BCDEFGHIJKLM",
        ] {
            let p = Prefilter::new(&[anchor(value).unwrap().to_vec()]);
            for offset in 0..40 {
                let mut text = b"%20".repeat(offset / 3);
                text.extend(std::iter::repeat_n(b'.', offset % 3));
                text.extend_from_slice(value);
                text.extend_from_slice(b" tail");
                let mut found = false;
                let _ = p.candidates(&text, false, |_| {
                    found = true;
                    ControlFlow::Break(())
                });
                assert!(found, "{:?} at {offset}", String::from_utf8_lossy(value));
            }
        }
    }

    #[test]
    fn a_hidden_anchor_is_a_candidate() {
        let value = b"tok-ABCDEFGHIJKLMNOP";
        let a = anchor(value).unwrap().to_vec();
        let p = Prefilter::new(&[a]);
        let mut text = b"xx ".repeat(500);
        let at = text.len();
        for &b in value {
            text.extend_from_slice(format!("%{b:02X}").as_bytes());
        }
        text.extend_from_slice(&b" yy".repeat(500));
        let mut found = Vec::new();
        let _ = p.candidates(&text, false, |c| {
            found.push(c);
            ControlFlow::Continue(())
        });
        assert!(!found.is_empty());
        assert!(
            found.iter().all(|&c| c >= at && c < at + 3 * value.len()),
            "{found:?}"
        );
        // Control: the same text sampled where it lies shows no anchor.
        let raw = Prefilter::new(&[anchor(value).unwrap().to_vec()]);
        let mut plain = 0;
        let mut at = 0;
        while at + Q <= text.len() {
            plain += usize::from(raw.filter.hit(&text[at..at + Q]));
            at += 1;
        }
        assert_eq!(plain, 0);
    }
}
