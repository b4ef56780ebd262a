//! Candidates that race: several tools written for one need (by `synthesize_tool`, the setting
//! `synthesize_candidates`), each checked through the same gate as any tool
//! ([`Library::check`]), side by side; only the one that does best across the verdicts
//! ([`crate::verify::rank`]: safety first, capability only on a full tie) is committed and
//! mounted, and the others are given up (their processes stopped, their staged code removed).
//!
//! Each loser gets a `candidate_lost` event (on the tool it would have been a version of)
//! naming the winner and the first thing it did worse; a candidate that failed verification
//! lost for that, and has its `verification_failed` event too. When none passes, nothing is
//! committed and no `candidate_lost` is written: each failure is returned, for the answer.

use super::{Checked, CreateError, Created, Library, Prepared};
use crate::ledger::Event;
use crate::verify::rank::{self, Standing, Worse};

/// How one candidate of a race came out.
#[derive(Debug)]
pub enum Finish {
    /// It did best, and is committed and mounted.
    Won(Box<Created>),
    /// It passed verification, but candidate `winner` (an index into the race) did better.
    Lost { winner: usize, why: Worse },
    /// It did not pass (or the winner could not be stored); nothing of it was kept.
    Failed(CreateError),
}

/// Longest part of a failure a `candidate_lost` event keeps.
const REASON_CHARS: usize = 300;

impl Library {
    /// Check every candidate side by side, commit the best one and give up the others; how
    /// each came out, in the order given.
    pub async fn race(&self, candidates: Vec<Prepared>) -> Vec<Finish> {
        let n = candidates.len();
        let names: Vec<String> = candidates
            .iter()
            .map(|c| c.request.name.to_string())
            .collect();
        let hashes: Vec<String> = candidates.iter().map(|c| c.code_hash.clone()).collect();
        let checked =
            crate::join::all(candidates.into_iter().map(|c| self.check(c)).collect()).await;
        let standings: Vec<(usize, Standing)> = checked
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let c = c.as_ref().ok()?;
                Some((i, Standing::of(c.verdicts(), c.functions())))
            })
            .collect();
        let ranked = rank::rank(&standings.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>());
        let Some((best, whys)) = ranked else {
            // None passed: each is its failure.
            return checked
                .into_iter()
                .filter_map(Result::err)
                .map(Finish::Failed)
                .collect();
        };
        let winner = standings[best].0;
        let mut why_of: Vec<Option<Worse>> = (0..n).map(|_| None).collect();
        for ((i, _), why) in standings.iter().zip(whys) {
            why_of[*i] = why;
        }
        let mut finishes = Vec::with_capacity(n);
        let mut winning: Option<Checked> = None;
        for (i, c) in checked.into_iter().enumerate() {
            match c {
                Err(e) => finishes.push(Finish::Failed(e)),
                Ok(c) if i == winner => {
                    winning = Some(c);
                    // Filled in once it is committed.
                    finishes.push(Finish::Lost {
                        winner,
                        why: Worse::Tie,
                    });
                }
                Ok(c) => {
                    self.discard_checked(c).await;
                    finishes.push(Finish::Lost {
                        winner,
                        why: why_of[i].take().unwrap_or(Worse::Tie),
                    });
                }
            }
        }
        let Some(winning) = winning else {
            return finishes;
        };
        match self.commit_checked(winning).await {
            Ok(created) => {
                let shown = format!(
                    "candidate {} of {n}, {} v{}",
                    winner + 1,
                    created.tool,
                    created.version
                );
                for (i, finish) in finishes.iter().enumerate() {
                    let Some(reason) = finish.reason().filter(|_| i != winner) else {
                        continue;
                    };
                    self.audit(
                        &names[i],
                        Event::CandidateLost,
                        &format!(
                            "candidate {} of {n} (code sha256 {}) lost to {shown}: {reason}",
                            i + 1,
                            &hashes[i][..hashes[i].len().min(12)]
                        ),
                    );
                }
                tracing::info!(tool = %created.tool, version = created.version, candidates = n, "race won");
                finishes[winner] = Finish::Won(Box::new(created));
            }
            Err(e) => finishes[winner] = Finish::Failed(e),
        }
        finishes
    }
}

impl Finish {
    /// Why it lost, in a sentence (a failure's first line, bounded; redact before it leaves);
    /// `None` for the winner.
    pub fn reason(&self) -> Option<String> {
        match self {
            Finish::Won(_) => None,
            Finish::Lost { why, .. } => Some(why.to_string()),
            Finish::Failed(e) => {
                let text = e.to_string();
                let first = text.lines().next().unwrap_or_default();
                let mut shown: String = first.chars().take(REASON_CHARS).collect();
                if first.chars().count() > REASON_CHARS {
                    shown.push('…');
                }
                Some(format!("it failed: {shown}"))
            }
        }
    }
}
