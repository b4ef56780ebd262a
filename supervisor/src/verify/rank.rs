//! Which of several verified candidates for one need is kept: `synthesize_tool` may write more
//! than one (the setting `synthesize_candidates`), verifies each, and keeps the one that does
//! best here without trading safety for capability.
//!
//! A candidate's [`Standing`] is, for each kind of verdict in [`ORDER`], the worst outcome its
//! verdicts of that kind had ([`Outcome`] ranked by [`outcome_rank`]: failed and skipped alike
//! < recorded < passed; a kind with no verdict at all counts as skipped, since nothing was
//! judged), then its capability: the examples and relations it met, then its functions. A check
//! not made ranks as one failed, below a recorded warning: a candidate not examined on a check
//! (`verify: "quick"`, probes left out for a tool that declares keys, an adversary that did not
//! answer) never wins over one examined on it and warned about; otherwise leaving the exam out
//! would be a way to win. (Candidates of autotool's own model are verified at `standard`
//! whatever `verify` they ask for: `crate::mcp::synthesize`.)
//!
//! [`compare`] goes through [`ORDER`] one kind at a time, safety first: the adversarial stage
//! (leaks, refused hosts), the baseline (what trusted versions did), then the verdicts no
//! author writes (deterministic, non-degenerate), then what the author asked for (smoke test,
//! examples, relations) and the trigger check. The first kind where two candidates differ
//! decides; capability counts only when every kind is tied. So a candidate worse on a safety
//! check than another never wins over it by meeting more examples or offering more functions;
//! it can only win over a candidate that is worse on a check earlier in [`ORDER`] (when each is
//! worse somewhere, the earlier check is the one that counts). A full tie keeps the candidate
//! written first.

use super::verdicts::{Check, Outcome, Verdict};
use std::cmp::Ordering;

/// The kinds of verdict, in the order candidates are compared: safety first.
pub const ORDER: [Check; 8] = [
    Check::Adversarial,
    Check::Baseline,
    Check::Deterministic,
    Check::NonDegenerate,
    Check::SmokeTest,
    Check::Example,
    Check::Relation,
    Check::Trigger,
];

/// How good an outcome is, for ranking: failed 0 = skipped 0 < recorded 1 < passed 2. A check
/// not made proves nothing, so it counts as failed.
pub fn outcome_rank(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Failed | Outcome::Skipped => 0,
        Outcome::Recorded => 1,
        Outcome::Passed => 2,
    }
}

/// Where one verified candidate stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    /// For each kind of [`ORDER`], in that order, the worst outcome of its verdicts (skipped
    /// when it had none).
    pub checks: [Outcome; ORDER.len()],
    /// Examples and relations met.
    pub met: usize,
    /// Functions offered.
    pub functions: usize,
}

impl Standing {
    /// The standing of a candidate with `verdicts` and `functions` functions.
    pub fn of(verdicts: &[Verdict], functions: usize) -> Standing {
        let checks = ORDER.map(|check| {
            verdicts
                .iter()
                .filter(|v| v.check == check)
                .map(|v| v.outcome)
                // Of a failed and a skipped one, which rank alike, the failure is named.
                .min_by_key(|o| (outcome_rank(*o), *o != Outcome::Failed))
                .unwrap_or(Outcome::Skipped)
        });
        let met = verdicts
            .iter()
            .filter(|v| {
                matches!(v.check, Check::Example | Check::Relation) && v.outcome == Outcome::Passed
            })
            .count();
        Standing {
            checks,
            met,
            functions,
        }
    }

    /// The outcome of `check`.
    pub fn outcome(&self, check: Check) -> Outcome {
        ORDER
            .iter()
            .position(|c| *c == check)
            .map_or(Outcome::Skipped, |i| self.checks[i])
    }
}

/// Why a candidate ranked below another: the first thing, in the order compared, it did
/// worse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Worse {
    /// Its worst verdict of `check` was `had`; the other's was `other`.
    Check {
        check: Check,
        had: Outcome,
        other: Outcome,
    },
    /// Tied on every check; it met fewer examples and relations.
    Met { had: usize, other: usize },
    /// Tied on every check and what it met; it offers fewer functions.
    Functions { had: usize, other: usize },
    /// Tied on everything; the other was written first.
    Tie,
}

impl std::fmt::Display for Worse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Worse::Check { check, had, other } => write!(
                f,
                "worse at {}: {} where the winner's {}",
                check.name(),
                had.name(),
                other.name()
            ),
            Worse::Met { had, other } => write!(
                f,
                "tied on every check, but met {had} examples and relations where the winner \
                 met {other}"
            ),
            Worse::Functions { had, other } => write!(
                f,
                "tied on every check and on what it met, but offers {had} functions where the \
                 winner offers {other}"
            ),
            Worse::Tie => f.write_str("tied on everything; the candidate written first is kept"),
        }
    }
}

/// How `a` compares with `b` (`Greater`: `a` is better), and, when they differ, the first
/// difference in the order compared: what the worse one did worse.
pub fn compare(a: &Standing, b: &Standing) -> (Ordering, Option<Worse>) {
    for (i, check) in ORDER.iter().enumerate() {
        let (x, y) = (a.checks[i], b.checks[i]);
        match outcome_rank(x).cmp(&outcome_rank(y)) {
            Ordering::Equal => continue,
            Ordering::Greater => {
                return (
                    Ordering::Greater,
                    Some(Worse::Check {
                        check: *check,
                        had: y,
                        other: x,
                    }),
                );
            }
            Ordering::Less => {
                return (
                    Ordering::Less,
                    Some(Worse::Check {
                        check: *check,
                        had: x,
                        other: y,
                    }),
                );
            }
        }
    }
    match a.met.cmp(&b.met) {
        Ordering::Greater => {
            return (
                Ordering::Greater,
                Some(Worse::Met {
                    had: b.met,
                    other: a.met,
                }),
            );
        }
        Ordering::Less => {
            return (
                Ordering::Less,
                Some(Worse::Met {
                    had: a.met,
                    other: b.met,
                }),
            );
        }
        Ordering::Equal => {}
    }
    match a.functions.cmp(&b.functions) {
        Ordering::Greater => (
            Ordering::Greater,
            Some(Worse::Functions {
                had: b.functions,
                other: a.functions,
            }),
        ),
        Ordering::Less => (
            Ordering::Less,
            Some(Worse::Functions {
                had: a.functions,
                other: b.functions,
            }),
        ),
        Ordering::Equal => (Ordering::Equal, None),
    }
}

/// The winner among `standings` (its index; the first of equals), and for every other one why
/// it lost to the winner, in the same order as `standings` (`None` at the winner's place).
/// `None` when there is no candidate.
pub fn rank(standings: &[Standing]) -> Option<(usize, Vec<Option<Worse>>)> {
    let mut best = 0;
    for (i, s) in standings.iter().enumerate().skip(1) {
        if compare(s, &standings[best]).0 == Ordering::Greater {
            best = i;
        }
    }
    let winner = standings.get(best)?;
    let why = standings
        .iter()
        .enumerate()
        .map(|(i, s)| (i != best).then(|| compare(winner, s).1.unwrap_or(Worse::Tie)))
        .collect();
    Some((best, why))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn verdict(function: &str, check: Check, outcome: Outcome) -> Verdict {
        Verdict {
            function: function.into(),
            check,
            example: (check == Check::Example).then_some(1),
            outcome,
            detail: String::new(),
        }
    }

    /// Every kind passed but examples and relations, for `functions` functions; `examples`
    /// examples met (none: the kind is not judged, skipped); no relation declared.
    fn clean(functions: usize, examples: usize) -> Vec<Verdict> {
        let mut out = Vec::new();
        for f in 0..functions {
            let name = format!("f{f}");
            for check in ORDER {
                if !matches!(check, Check::Example | Check::Relation) {
                    out.push(verdict(&name, check, Outcome::Passed));
                }
            }
        }
        for _ in 0..examples {
            out.push(verdict("f0", Check::Example, Outcome::Passed));
        }
        out
    }

    fn with(mut verdicts: Vec<Verdict>, check: Check, outcome: Outcome) -> Vec<Verdict> {
        verdicts.push(verdict("f0", check, outcome));
        verdicts
    }

    #[test]
    fn outcomes_rank_failed_and_skipped_alike_then_recorded_then_passed() {
        let mut all = [
            Outcome::Passed,
            Outcome::Skipped,
            Outcome::Recorded,
            Outcome::Failed,
        ];
        all.sort_by_key(|o| outcome_rank(*o));
        assert_eq!(
            all,
            [
                Outcome::Skipped,
                Outcome::Failed,
                Outcome::Recorded,
                Outcome::Passed
            ]
        );
        assert_eq!(
            outcome_rank(Outcome::Skipped),
            outcome_rank(Outcome::Failed)
        );
        // Every kind of verdict is compared, each once.
        for check in Check::ALL {
            assert_eq!(
                ORDER.iter().filter(|c| **c == check).count(),
                1,
                "{check:?}"
            );
        }
    }

    #[test]
    fn a_standing_keeps_the_worst_outcome_of_each_kind() {
        let s = Standing::of(
            &[
                verdict("a", Check::Deterministic, Outcome::Passed),
                verdict("b", Check::Deterministic, Outcome::Recorded),
                verdict("a", Check::Example, Outcome::Passed),
                verdict("a", Check::Relation, Outcome::Passed),
                verdict("a", Check::Relation, Outcome::Skipped),
            ],
            2,
        );
        assert_eq!(s.outcome(Check::Deterministic), Outcome::Recorded);
        assert_eq!(s.outcome(Check::Relation), Outcome::Skipped);
        // Nothing judged counts as skipped.
        assert_eq!(s.outcome(Check::Adversarial), Outcome::Skipped);
        assert_eq!((s.met, s.functions), (2, 2));
    }

    #[test]
    fn safety_beats_capability() {
        // A meets five examples and offers three functions, but its adversarial stage recorded
        // a warning; B meets none, with one function, and passed it.
        let a = Standing::of(&with(clean(3, 5), Check::Adversarial, Outcome::Recorded), 3);
        let b = Standing::of(&clean(1, 0), 1);
        let (order, why) = compare(&a, &b);
        assert_eq!(order, Ordering::Less);
        assert_eq!(
            why,
            Some(Worse::Check {
                check: Check::Adversarial,
                had: Outcome::Recorded,
                other: Outcome::Passed
            })
        );
        let (winner, why) = rank(&[a, b]).unwrap();
        assert_eq!(winner, 1);
        assert_eq!(
            why[0].as_ref().map(ToString::to_string).as_deref(),
            Some("worse at adversarial: recorded where the winner's passed")
        );
        assert_eq!(why[1], None);
        // Worse on the baseline (a regression) loses to a candidate that is worse only on a
        // later, author-declared check.
        let regressed = Standing::of(&with(clean(1, 3), Check::Baseline, Outcome::Skipped), 1);
        let fewer = Standing::of(&with(clean(1, 0), Check::SmokeTest, Outcome::Skipped), 1);
        assert_eq!(rank(&[regressed, fewer]).unwrap().0, 1);
    }

    #[test]
    fn a_tie_on_every_check_is_broken_by_capability() {
        let one = Standing::of(&clean(1, 1), 1);
        let three = Standing::of(&clean(1, 3), 1);
        let (winner, why) = rank(&[one.clone(), three.clone()]).unwrap();
        assert_eq!(winner, 1);
        assert_eq!(why[0], Some(Worse::Met { had: 1, other: 3 }));
        // Then the functions offered.
        let wide = Standing::of(&clean(2, 1), 2);
        let narrow = Standing::of(&clean(1, 1), 1);
        let (winner, why) = rank(&[narrow, wide]).unwrap();
        assert_eq!(winner, 1);
        assert_eq!(why[0], Some(Worse::Functions { had: 1, other: 2 }));
        // A full tie keeps the first, and says so.
        let (winner, why) = rank(&[three.clone(), three]).unwrap();
        assert_eq!(winner, 0);
        assert_eq!(why[1], Some(Worse::Tie));
    }

    #[test]
    fn a_failed_check_loses() {
        let failed = Standing::of(&with(clean(2, 4), Check::Relation, Outcome::Failed), 2);
        let held = Standing::of(&with(clean(1, 1), Check::Relation, Outcome::Passed), 1);
        let (winner, why) = rank(&[failed, held]).unwrap();
        assert_eq!(winner, 1);
        assert_eq!(
            why[0],
            Some(Worse::Check {
                check: Check::Relation,
                had: Outcome::Failed,
                other: Outcome::Passed
            })
        );
        // Failed beside skipped in one kind: the failure is what the standing names.
        let both = Standing::of(
            &[
                verdict("a", Check::Relation, Outcome::Skipped),
                verdict("b", Check::Relation, Outcome::Failed),
            ],
            2,
        );
        assert_eq!(both.outcome(Check::Relation), Outcome::Failed);
        // Among three, the winner is better than each other one.
        let recorded = Standing::of(
            &with(clean(1, 9), Check::Deterministic, Outcome::Recorded),
            1,
        );
        let best = Standing::of(&clean(1, 0), 1);
        let failed = Standing::of(&with(clean(1, 9), Check::Adversarial, Outcome::Failed), 1);
        let (winner, why) = rank(&[recorded, failed, best]).unwrap();
        assert_eq!(winner, 2);
        assert!(matches!(
            why[0],
            Some(Worse::Check {
                check: Check::Deterministic,
                ..
            })
        ));
        assert!(matches!(
            why[1],
            Some(Worse::Check {
                check: Check::Adversarial,
                had: Outcome::Failed,
                ..
            })
        ));
        assert_eq!(rank(&[]), None);
    }

    /// The checks `verify: "quick"` leaves out (the adversarial stage, determinism,
    /// non-degeneracy), skipped for every function; all else passed.
    fn quick(functions: usize, examples: usize) -> Vec<Verdict> {
        clean(functions, examples)
            .into_iter()
            .map(|mut v| {
                if matches!(
                    v.check,
                    Check::Adversarial | Check::Deterministic | Check::NonDegenerate
                ) {
                    v.outcome = Outcome::Skipped;
                }
                v
            })
            .collect()
    }

    #[test]
    fn a_candidate_that_skipped_its_exam_loses_to_one_with_a_warning() {
        // The skipper meets more and offers more; its rival was examined and the adversary
        // recorded a warning (a crash on a hostile input).
        let skipper = Standing::of(&quick(3, 5), 3);
        let warned = Standing::of(&with(clean(1, 0), Check::Adversarial, Outcome::Recorded), 1);
        let (winner, why) = rank(&[skipper.clone(), warned.clone()]).unwrap();
        assert_eq!(winner, 1);
        assert_eq!(
            why[0].as_ref().map(ToString::to_string).as_deref(),
            Some("worse at adversarial: skipped where the winner's recorded")
        );
        // Whatever the order raced in.
        assert_eq!(rank(&[warned.clone(), skipper.clone()]).unwrap().0, 0);
        // Skipped on a later kind only (determinism), it still loses to a recorded difference.
        let unprobed = Standing::of(
            &with(clean(2, 4), Check::Deterministic, Outcome::Skipped),
            2,
        );
        let noisy = Standing::of(
            &with(clean(1, 0), Check::Deterministic, Outcome::Recorded),
            1,
        );
        assert_eq!(rank(&[unprobed, noisy]).unwrap().0, 1);
        // The control: ranked as it was before (skipped between recorded and passed), the
        // skipper would have won this very race on its capability.
        let before = |o: Outcome| match o {
            Outcome::Failed => 0,
            Outcome::Recorded => 1,
            Outcome::Skipped => 2,
            Outcome::Passed => 3,
        };
        let first_difference = ORDER
            .iter()
            .enumerate()
            .map(|(i, _)| before(skipper.checks[i]).cmp(&before(warned.checks[i])))
            .find(|o| o.is_ne());
        assert_eq!(first_difference, Some(Ordering::Greater));
        // And against a rival that skipped the same checks, capability decides: the skip is
        // what lost the race, nothing else.
        let (winner, why) = rank(&[Standing::of(&quick(1, 2), 1), skipper]).unwrap();
        assert_eq!(winner, 1);
        assert_eq!(why[0], Some(Worse::Met { had: 2, other: 5 }));
    }
}
