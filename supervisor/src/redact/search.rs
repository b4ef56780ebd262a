//! The search: every place in a text where some reading of it spells a value.
//!
//! A text is read as a lattice: from every position there is a *literal* step (the byte
//! itself) and, where an escape starts, a step over the whole escape to the bytes it stands for
//! ([`escapes::escapes_at`]: at most two). A value occurs on `start..end` when some path of
//! steps from `start` to `end` spells it (its first and last step may be escapes of which only
//! part of the bytes belong to the value, for values that are not whole characters). Every
//! reading is considered, so a value is found however its characters were written, and one
//! whose own characters look like an escape (`100%25`, `C:\new`) is found written plainly too.
//!
//! The walk runs one deterministic Aho-Corasick automaton (standard semantics, every match)
//! over all paths at once: at each position it holds the set of automaton states that the
//! paths arriving there are in, deduplicated, so a text costs one automaton step per byte
//! per live state. Where no escape is in reach only the literal path is alive and the walk is
//! a plain loop over the bytes. Where a value ends, its start is found by walking back over the
//! lattice ([`Searcher::start_of`]). The walk only covers *windows* of the text: around each
//! candidate of the [`Prefilter`] (a value lies within [`Searcher::span`] bytes of its anchor),
//! or the whole text when some value has no anchor.
//!
//! Matches are gathered into *groups*, chains of overlapping matches, each to be replaced as a
//! whole and named after its leftmost match (the longest of those, then the name given first).

use super::escapes::{self, MAX_ESCAPE, MAX_EXPANSION, fold};
use super::prefilter::Prefilter;
use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::{Anchored, MatchKind, dfa, nfa};
use memchr::memchr2;
use std::ops::{ControlFlow, Range};

/// One match, or one group of them: `start..end` in the text, and the value it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Hit {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) owner: usize,
}

/// The automaton over every value: a DFA (one table lookup per step) while the values are few,
/// a contiguous NFA past that.
enum Machine {
    Dfa(dfa::DFA),
    Nfa(nfa::contiguous::NFA),
}

/// Total value bytes up to which the DFA is built. Its rows are a few hundred bytes each (one
/// entry per byte class), one row per value byte: a value being matched walks through rows no
/// other text touches, each a cache miss once the table outgrows the caches. The NFA's states
/// are a tenth of that, so with more than about 20 keys (1 KiB of values, a DFA of some 300 KB)
/// the NFA, slower per byte on paper, is the faster of the two on the short stretches the
/// prefilter leaves (measured with 100 keys: the DFA's misses were a tenth of all the time).
const DFA_LIMIT: usize = 1024;

pub(super) struct Searcher {
    machine: Machine,
    /// The values with `+` read as a space ([`fold`]), by pattern id.
    patterns: Vec<Vec<u8>>,
    /// For each pattern, which value it is.
    owners: Vec<usize>,
    prefilter: Option<Prefilter>,
    /// The longest value.
    longest: usize,
    span: usize,
}

impl Searcher {
    /// `patterns` must be distinct, non-empty and already folded.
    pub(super) fn new(
        patterns: Vec<Vec<u8>>,
        owners: Vec<usize>,
        prefilter: Option<Prefilter>,
    ) -> Result<Searcher, aho_corasick::BuildError> {
        let total: usize = patterns.iter().map(Vec::len).sum();
        let machine = if total <= DFA_LIMIT {
            Machine::Dfa(
                dfa::Builder::new()
                    .match_kind(MatchKind::Standard)
                    .prefilter(false)
                    .build(&patterns)?,
            )
        } else {
            Machine::Nfa(
                nfa::contiguous::Builder::new()
                    .match_kind(MatchKind::Standard)
                    .prefilter(false)
                    .build(&patterns)?,
            )
        };
        let longest = patterns.iter().map(Vec::len).max().unwrap_or(0);
        Ok(Searcher {
            machine,
            patterns,
            owners,
            prefilter,
            longest,
            span: Searcher::span_of(longest),
        })
    }

    /// The most bytes of text a value of `len` bytes can take in any reading: every byte an
    /// escape of [`MAX_EXPANSION`] bytes, and a whole [`MAX_ESCAPE`] at either end for an
    /// escape the value has only part of.
    fn span_of(len: usize) -> usize {
        MAX_EXPANSION * len + 2 * MAX_ESCAPE
    }

    /// The longest stretch of text one match can take.
    pub(super) fn span(&self) -> usize {
        self.span
    }

    pub(super) fn pattern_count(&self) -> usize {
        self.patterns.len()
    }

    pub(super) fn has_prefilter(&self) -> bool {
        self.prefilter.is_some()
    }

    pub(super) fn without_prefilter(mut self) -> Searcher {
        self.prefilter = None;
        self
    }

    /// Whether `text` holds any match at all (stops at the first).
    pub(super) fn any(&self, text: &[u8]) -> bool {
        let mut groups = Grouper {
            first_only: true,
            ..Grouper::default()
        };
        self.search(text, &mut groups, &mut |_| ControlFlow::Break(()))
            .is_break()
    }

    /// Call `sink` with every group of matches in `text`, in order; they neither overlap nor
    /// nest.
    pub(super) fn groups(
        &self,
        text: &[u8],
        sink: &mut dyn FnMut(Hit) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let mut groups = Grouper::default();
        self.search(text, &mut groups, sink)?;
        groups.flush(usize::MAX, sink)
    }

    fn search(
        &self,
        text: &[u8],
        groups: &mut Grouper,
        sink: &mut dyn FnMut(Hit) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        match &self.prefilter {
            None => self.walk(text, 0..text.len(), groups, sink),
            Some(prefilter) => {
                // A match holds its value's anchor; in a text with no `%` and no `\\` it is the
                // value's own bytes, no more.
                let plain = memchr2(b'%', b'\\', text).is_none();
                let mut window: Option<Range<usize>> = None;
                prefilter.candidates(text, plain, |at| {
                    if plain && window.as_ref().is_some_and(|w| at + self.longest <= w.end) {
                        return ControlFlow::Continue(());
                    }
                    let next = if plain {
                        at.saturating_sub(self.longest)..(at + self.longest).min(text.len())
                    } else {
                        self.around(text, at)
                    };
                    match &mut window {
                        Some(w) if next.start <= w.end => w.end = w.end.max(next.end),
                        _ => {
                            if let Some(done) = window.replace(next) {
                                self.walk(text, done, groups, sink)?;
                            }
                        }
                    }
                    ControlFlow::Continue(())
                })?;
                match window {
                    Some(done) => self.walk(text, done, groups, sink),
                    None => ControlFlow::Continue(()),
                }
            }
        }
    }

    /// The stretch of `text` that holds every match through position `at`. A match is at most
    /// `longest` steps (each a byte or an escape, giving the value at least one byte), so it
    /// reaches no further on either side than `longest` steps can from `at`: the fewest steps
    /// between two positions is counted over the escapes really there, out to where every
    /// position within an escape's length needs more. In ordinary text that is the value's
    /// length and a little; only text dense with escapes makes it [`Searcher::span`].
    fn around(&self, text: &[u8], at: usize) -> Range<usize> {
        const RING: usize = 64;
        const _: () = assert!(RING > MAX_ESCAPE);
        let limit = self.longest;
        // Leftward: `fewest[z]`, the fewest steps from `z` to `at`.
        let mut fewest = [usize::MAX; RING];
        fewest[at % RING] = 0;
        let (mut start, mut beyond) = (at, 0);
        for z in (at.saturating_sub(self.span)..at).rev() {
            let mut f = fewest[(z + 1) % RING].saturating_add(1);
            for step in escapes::escapes_at(text, z).iter().flatten() {
                if z + step.len() <= at {
                    f = f.min(fewest[(z + step.len()) % RING].saturating_add(1));
                }
            }
            fewest[z % RING] = f;
            if f <= limit {
                (start, beyond) = (z, 0);
            } else {
                beyond += 1;
                if beyond > MAX_ESCAPE {
                    break;
                }
            }
        }
        // Rightward: `fewest[z]`, the fewest steps from `at` to `z`.
        let hi = (at + self.span).min(text.len());
        let mut fewest = [usize::MAX; RING];
        fewest[at % RING] = 0;
        let (mut end, mut beyond) = (at, 0);
        for z in at..=hi {
            let f = std::mem::replace(&mut fewest[z % RING], usize::MAX);
            if f <= limit {
                (end, beyond) = (z, 0);
            } else {
                beyond += 1;
                if beyond > MAX_ESCAPE {
                    break;
                }
            }
            if z == hi {
                break;
            }
            let to = &mut fewest[(z + 1) % RING];
            *to = (*to).min(f.saturating_add(1));
            for step in escapes::escapes_at(text, z).iter().flatten() {
                if z + step.len() <= hi {
                    let to = &mut fewest[(z + step.len()) % RING];
                    *to = (*to).min(f.saturating_add(1));
                }
            }
        }
        start..end
    }

    fn walk(
        &self,
        text: &[u8],
        window: Range<usize>,
        groups: &mut Grouper,
        sink: &mut dyn FnMut(Hit) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        match &self.machine {
            Machine::Dfa(m) => self.walk_with(m, text, window, groups, sink),
            Machine::Nfa(m) => self.walk_with(m, text, window, groups, sink),
        }
    }

    /// The lattice walk over `text[window]` (see the module docs). Matches go to `groups`.
    fn walk_with<A: Automaton>(
        &self,
        machine: &A,
        text: &[u8],
        window: Range<usize>,
        groups: &mut Grouper,
        sink: &mut dyn FnMut(Hit) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        // Escapes reach at most MAX_ESCAPE ahead: a ring of that many sets of states, for the
        // paths that arrive at each position by an escape.
        const RING: usize = 64;
        const _: () = assert!(RING > MAX_ESCAPE);
        let Ok(start) = machine.start_state(Anchored::No) else {
            // Cannot happen: the automaton is built for unanchored searches.
            return ControlFlow::Continue(());
        };
        let (floor, end) = (window.start, window.end);
        let mut ring: [Vec<StateID>; RING] = std::array::from_fn(|_| Vec::new());
        // How many sets of `ring` are not empty.
        let mut ahead = 0;
        // The states of the paths at `at`, and (reused) those one byte on.
        let mut here = vec![start];
        let mut next = Vec::new();
        let mut at = floor;
        loop {
            if ahead > 0 {
                let arriving = &mut ring[at % RING];
                if !arriving.is_empty() {
                    ahead -= 1;
                    for s in arriving.drain(..) {
                        if !here.contains(&s) {
                            here.push(s);
                        }
                    }
                }
            }
            if at >= end {
                break;
            }
            if let [state] = here[..] {
                // One path: plain bytes up to the next `%` or `\`, or the next place an
                // escape's step arrives.
                let mut stop = memchr2(b'%', b'\\', &text[at..end]).map_or(end, |i| at + i);
                if ahead > 0
                    && let Some(d) = (1..stop - at).find(|d| !ring[(at + d) % RING].is_empty())
                {
                    stop = at + d;
                }
                let mut state = state;
                for (i, &b) in text[at..stop].iter().enumerate() {
                    state = machine.next_state(Anchored::No, state, fold(b));
                    if machine.is_match(state) {
                        self.report(
                            machine,
                            text,
                            floor,
                            state,
                            at + i,
                            at + i + 1,
                            1,
                            groups,
                            sink,
                        )?;
                    }
                }
                here[0] = state;
                if stop > at {
                    at = stop;
                    continue;
                }
            }
            // Several paths, or an escape starts here.
            let steps = escapes::escapes_at(text, at);
            let literal = fold(text[at]);
            next.clear();
            for &state in &here {
                let s = machine.next_state(Anchored::No, state, literal);
                if machine.is_match(s) {
                    self.report(machine, text, floor, s, at, at + 1, 1, groups, sink)?;
                }
                if !next.contains(&s) {
                    next.push(s);
                }
                for step in steps.iter().flatten() {
                    let to = at + step.len();
                    if to > end {
                        continue;
                    }
                    let mut s = state;
                    for (i, &b) in step.bytes().iter().enumerate() {
                        s = machine.next_state(Anchored::No, s, fold(b));
                        if machine.is_match(s) {
                            self.report(machine, text, floor, s, at, to, i + 1, groups, sink)?;
                        }
                    }
                    let slot = &mut ring[to % RING];
                    if slot.is_empty() {
                        ahead += 1;
                    }
                    if !slot.contains(&s) {
                        slot.push(s);
                    }
                }
            }
            std::mem::swap(&mut here, &mut next);
            at += 1;
        }
        // Sets past the window's end belong to steps that were not taken.
        ControlFlow::Continue(())
    }

    /// Every value matched in `state`, reached on the step `from..to` after `consumed` of the
    /// step's bytes, is a match ending at `to`.
    #[allow(clippy::too_many_arguments)]
    fn report<A: Automaton>(
        &self,
        machine: &A,
        text: &[u8],
        floor: usize,
        state: StateID,
        from: usize,
        to: usize,
        consumed: usize,
        groups: &mut Grouper,
        sink: &mut dyn FnMut(Hit) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        for i in 0..machine.match_len(state) {
            let pattern = machine.match_pattern(state, i).as_usize();
            let (Some(value), Some(&owner)) =
                (self.patterns.get(pattern), self.owners.get(pattern))
            else {
                continue;
            };
            let start = Searcher::start_of(text, floor, from, consumed, value);
            let hit = Hit {
                start,
                end: to,
                owner,
            };
            // No later match starts before `from + 1 − span`.
            groups.push(hit, (from + 1).saturating_sub(self.span), sink)?;
        }
        ControlFlow::Continue(())
    }

    /// Where a match of `value` begins that ends with the first `consumed` bytes of the step
    /// starting at `from`: the earliest start over every path (not before `floor`) that spells
    /// the rest of the value up to `from`.
    fn start_of(text: &[u8], floor: usize, from: usize, consumed: usize, value: &[u8]) -> usize {
        let Some(need) = value.len().checked_sub(consumed).filter(|&n| n > 0) else {
            return from;
        };
        // With no escape in reach, only the literal path is there.
        let reach = from.saturating_sub(need + MAX_ESCAPE).max(floor);
        if from - floor >= need && memchr2(b'%', b'\\', &text[reach..from]).is_none() {
            return from - need;
        }
        // Escapes can only start at the `%` and `\\` in reach.
        let lo = from
            .saturating_sub(Searcher::span_of(value.len()))
            .max(floor);
        let introducers: Vec<usize> = memchr::memchr2_iter(b'%', b'\\', &text[lo..from])
            .map(|i| lo + i)
            .collect();
        let mut best = usize::MAX;
        // Visited states: few (about one per byte of the value) in all but contrived text.
        let mut seen: Vec<(usize, usize)> = Vec::new();
        // (position, how many of the value's first bytes are still to be spelled before it)
        let mut todo = vec![(from, need)];
        while let Some((to, need)) = todo.pop() {
            if need == 0 {
                best = best.min(to);
                continue;
            }
            if seen.contains(&(to, need)) {
                continue;
            }
            seen.push((to, need));
            if to > floor && fold(text[to - 1]) == value[need - 1] {
                todo.push((to - 1, need - 1));
            }
            let first = introducers.partition_point(|&i| i + MAX_ESCAPE < to);
            for &at in introducers[first..].iter().take_while(|&&i| i + 1 < to) {
                for step in escapes::escapes_at(text, at).iter().flatten() {
                    if at + step.len() != to {
                        continue;
                    }
                    let bytes = step.bytes();
                    if bytes.len() <= need {
                        if folded_eq(bytes, &value[need - bytes.len()..need]) {
                            todo.push((at, need - bytes.len()));
                        }
                    } else if folded_eq(&bytes[bytes.len() - need..], &value[..need]) {
                        best = best.min(at);
                    }
                }
            }
        }
        // A match was seen, so some path exists; should none be found, cover all it could be.
        if best == usize::MAX {
            from.saturating_sub(Searcher::span_of(value.len()))
                .max(floor)
        } else {
            best
        }
    }
}

fn folded_eq(text: &[u8], value: &[u8]) -> bool {
    text.len() == value.len() && text.iter().zip(value).all(|(&t, &v)| fold(t) == v)
}

/// Gathers matches into groups and hands each on once no later match can touch it.
#[derive(Debug, Default)]
struct Grouper {
    hits: Vec<Hit>,
    /// Sort and hand on when this many matches are held (doubles while they cannot be).
    flush_at: usize,
    /// Hand on the first match as it is, and nothing after (for [`Searcher::any`]).
    first_only: bool,
}

const FLUSH_AT: usize = 1024;

impl Grouper {
    /// Take `hit`; no match after it starts before `watermark`.
    fn push(
        &mut self,
        hit: Hit,
        watermark: usize,
        sink: &mut dyn FnMut(Hit) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        if self.first_only {
            return sink(hit);
        }
        self.hits.push(hit);
        if self.hits.len() >= self.flush_at.max(FLUSH_AT) {
            self.flush(watermark, sink)?;
            self.flush_at = 2 * self.hits.len();
        }
        ControlFlow::Continue(())
    }

    /// Hand on, in order, every group that ends by `watermark`.
    fn flush(
        &mut self,
        watermark: usize,
        sink: &mut dyn FnMut(Hit) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        // Leftmost first; of matches starting together the longest, then the first value given.
        self.hits
            .sort_unstable_by(|a, b| (a.start, b.end, a.owner).cmp(&(b.start, a.end, b.owner)));
        let mut done = 0;
        while let Some(&first) = self.hits.get(done) {
            let mut end = first.end;
            let mut next = done + 1;
            while let Some(h) = self.hits.get(next).filter(|h| h.start < end) {
                end = end.max(h.end);
                next += 1;
            }
            if end > watermark {
                break;
            }
            sink(Hit { end, ..first })?;
            done = next;
        }
        self.hits.drain(..done);
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn groups(values: &[&[u8]], text: &[u8]) -> Vec<(usize, usize, usize)> {
        let patterns: Vec<Vec<u8>> = values
            .iter()
            .map(|v| v.iter().map(|&b| fold(b)).collect())
            .collect();
        let owners = (0..values.len()).collect();
        let s = Searcher::new(patterns, owners, None).unwrap();
        let mut out = Vec::new();
        let _ = s.groups(text, &mut |h| {
            out.push((h.start, h.end, h.owner));
            ControlFlow::Continue(())
        });
        out
    }

    #[test]
    fn every_reading_is_searched() {
        // Encoded, and a value whose own characters look like an escape, written plainly.
        assert_eq!(groups(&[b"abcd"], b"x %61b\\u0063d y"), [(2, 13, 0)]);
        assert_eq!(groups(&[b"50%41"], b"x 50%41 y"), [(2, 7, 0)]);
        assert_eq!(groups(&[b"50%41"], b"x 50%2541 y"), [(2, 9, 0)]);
        assert_eq!(
            groups(&[b"C:\\new"], b"C:\\new C:\\\\new"),
            [(0, 6, 0), (7, 14, 0)]
        );
        // A value that is part of a character, inside one escape.
        assert_eq!(
            groups(&[b"\xa9\xc3\xa9\xc3"], b"\\u00e9\\u00e9\\u00e9"),
            [(0, 18, 0)]
        );
    }

    #[test]
    fn overlapping_matches_make_one_group() {
        assert_eq!(groups(&[b"abcdef", b"defghi"], b"abcdefghi"), [(0, 9, 0)]);
        assert_eq!(groups(&[b"abcd"], b"abcdabcd"), [(0, 4, 0), (4, 8, 0)]);
    }
}
