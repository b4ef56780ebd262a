//! Which created tools `tools/list` shows when the library is larger than hosts handle well.
//!
//! Hosts pay for every entry of a tool list (their models read each description on every turn,
//! and some cap the number of tools), so the list is bounded by a number of **entries**: the
//! built-in tools plus one entry per function of each tool shown.
//!
//! - When every listed tool's functions fit with the built-ins, all are shown.
//! - Otherwise tools are taken most used first (ties by name), whole: a tool is shown with all
//!   its functions or not at all. A tool whose functions would not fit in what is left is
//!   skipped and the next one tried, so a large tool does not crowd out every smaller one.
//! - The built-ins are always shown, even when they alone exceed the limit.
//! - A limit of 0 means no limit.
//!
//! The tools left out stay mounted: `search_tools` finds them and `run_tool` (or their mounted
//! name) calls them.

use std::collections::BTreeSet;

/// One tool that could be listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub name: String,
    /// How much it was used (calls over the ranking window).
    pub uses: u64,
    /// How many entries it takes: its functions.
    pub entries: usize,
}

/// How many entries autotool's built-in tools (`create_tool`, `run_tool`, `search_tools`,
/// `tool_info`) take in every list; `synthesize_tool` is one more when it is offered.
pub const BUILT_INS: usize = 4;

/// The names of the tools to show, given `builtins` entries that are always there and a
/// `limit` on all entries (0: none).
pub fn shown(candidates: &[Candidate], builtins: usize, limit: usize) -> BTreeSet<String> {
    let total: usize = candidates.iter().map(|c| c.entries).sum();
    if limit == 0 || builtins + total <= limit {
        return candidates.iter().map(|c| c.name.clone()).collect();
    }
    let mut order: Vec<&Candidate> = candidates.iter().collect();
    order.sort_by(|a, b| b.uses.cmp(&a.uses).then_with(|| a.name.cmp(&b.name)));
    let mut room = limit.saturating_sub(builtins);
    let mut out = BTreeSet::new();
    for c in order {
        if c.entries <= room {
            room -= c.entries;
            out.insert(c.name.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(name: &str, uses: u64, entries: usize) -> Candidate {
        Candidate {
            name: name.into(),
            uses,
            entries,
        }
    }

    fn names(set: BTreeSet<String>) -> Vec<String> {
        set.into_iter().collect()
    }

    #[test]
    fn everything_when_it_fits_or_there_is_no_limit() {
        let all = [c("a", 0, 2), c("b", 5, 3)];
        assert_eq!(names(shown(&all, 3, 8)), ["a", "b"]);
        assert_eq!(names(shown(&all, 3, 0)), ["a", "b"]);
        assert!(shown(&[], 3, 1).is_empty());
    }

    #[test]
    fn most_used_first_ties_by_name_whole_tools_only() {
        let all = [
            c("zeta", 9, 1),
            c("alpha", 0, 1),
            c("beta", 0, 1),
            c("gamma", 4, 1),
        ];
        // Room for 2 beside 3 built-ins: the most used, then the first by name of the rest.
        assert_eq!(names(shown(&all, 3, 5)), ["gamma", "zeta"]);
        assert_eq!(names(shown(&all, 3, 6)), ["alpha", "gamma", "zeta"]);
    }

    #[test]
    fn a_tool_that_does_not_fit_is_skipped_for_smaller_ones() {
        let all = [c("big", 10, 5), c("small", 1, 1), c("mid", 2, 2)];
        // 3 built-ins, limit 7: room 4; big (5) does not fit, mid (2) and small (1) do.
        assert_eq!(names(shown(&all, 3, 7)), ["mid", "small"]);
        // The built-ins alone reach the limit: nothing else.
        assert!(shown(&all, 3, 3).is_empty());
        assert!(shown(&all, 3, 2).is_empty());
    }
}
