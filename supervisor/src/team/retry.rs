//! When a followed library's refused digest is looked at again. No refusal is final, so no
//! release is lost for good:
//! - a refusal that may change by itself (not signed yet, the registry down or refusing the
//!   credentials, the runtime still building) is tried again the next round, then after 1, 3, 7…
//!   intervals, at most every [`SOON_CAP`] (or every interval, if that is longer);
//! - one that does not change by itself (a signature that fails or is by a key not trusted here,
//!   a hostile artifact, a failed verification, another publisher) after [`LASTING_FIRST`], then
//!   doubling, at most every [`LASTING_CAP`];
//! - one that waits for the user of this machine ([`Cure`]: a package set or a reach to approve,
//!   a pin to lift, a publisher to trust) in the first round after the user did it, whichever
//!   way it was done (CLI, console, another serve), besides the lasting schedule.

use super::TeamError;
use crate::library::Library;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The longest wait before a refusal that may change by itself is tried again.
pub const SOON_CAP: Duration = Duration::from_secs(15 * 60);
/// The first wait before a refusal that does not change by itself is tried again.
pub const LASTING_FIRST: Duration = Duration::from_secs(60 * 60);
/// The longest wait before a refusal that does not change by itself is tried again.
pub const LASTING_CAP: Duration = Duration::from_secs(24 * 60 * 60);

/// What the user of this machine can do that a refusal waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Cure {
    /// Approve the tool's package set (`autotool tools approve TOOL --packages`).
    Packages { tool: String, digest: String },
    /// Grant the tool's declared reach (`autotool tools approve TOOL --reach`): its reach
    /// grants are no longer `granted`.
    Reach { tool: String, granted: String },
    /// Lift the user's pin (`autotool tools unpin TOOL`).
    Unpin { tool: String },
    /// Change the publishers trusted here (`autotool trust add|replace|remove`): they are no
    /// longer `publishers`.
    Trust { publishers: String },
}

impl Cure {
    /// Whether the user has done it.
    pub fn done(&self, library: &Library) -> bool {
        let ledger = library.registry.ledger();
        match self {
            Cure::Packages { tool, digest } => {
                ledger.packages_approved(tool, digest).unwrap_or(false)
            }
            Cure::Reach { tool, granted } => reach_stamp(library, tool) != *granted,
            Cure::Unpin { tool } => matches!(ledger.pin_of(tool), Ok(None)),
            Cure::Trust { publishers } => trust_stamp(library) != *publishers,
        }
    }

    /// What the user can run, in words.
    pub fn said(&self) -> String {
        match self {
            Cure::Packages { tool, .. } => format!("`autotool tools approve {tool} --packages`"),
            Cure::Reach { tool, .. } => format!("`autotool tools approve {tool} --reach`"),
            Cure::Unpin { tool } => format!("`autotool tools unpin {tool}`"),
            Cure::Trust { .. } => {
                "a change to the publishers trusted here (`autotool trust …`)".to_string()
            }
        }
    }
}

/// The reach granted to `tool` now, as a stamp ([`Cure::Reach`]).
pub fn reach_stamp(library: &Library, tool: &str) -> String {
    match library.registry.ledger().reach_grants(tool) {
        Ok(rows) => format!(
            "{}@{}",
            rows.len(),
            rows.iter().map(|g| g.granted_at).max().unwrap_or(0)
        ),
        Err(_) => String::new(),
    }
}

/// The publishers trusted here now, as a stamp ([`Cure::Trust`]).
pub fn trust_stamp(library: &Library) -> String {
    let publishers = super::trust::Trust::of(&library.home)
        .publishers()
        .unwrap_or_default();
    let text: Vec<String> = publishers
        .iter()
        .map(|p| {
            format!(
                "{} {} {} {}",
                p.name,
                p.key.fingerprint(),
                p.scope_text(),
                p.retired.len()
            )
        })
        .collect();
    super::client::sha256_digest(text.join("\n").as_bytes())
}

/// Whether a refusal does not change by itself, and what here would cure it.
pub fn classify(library: &Library, e: &TeamError) -> (bool, Option<Cure>) {
    match e {
        TeamError::Unsigned(_)
        | TeamError::Registry(_)
        | TeamError::NotFound(_)
        | TeamError::Auth(_)
        | TeamError::Io(_) => (false, None),
        TeamError::Waiting { cure, .. } => (true, Some(cure.clone())),
        TeamError::Signature(_) | TeamError::Trust(_) => (
            true,
            Some(Cure::Trust {
                publishers: trust_stamp(library),
            }),
        ),
        TeamError::Reference(_) | TeamError::Refused(_) | TeamError::Tool(_) => (true, None),
    }
}

/// How long after its `times`-th refusal in a row a digest is tried again, with rounds every
/// `interval`.
pub fn delay(times: u32, lasting: bool, interval: Duration) -> Duration {
    let doubled = |first: Duration| first.saturating_mul(1u32 << times.saturating_sub(1).min(20));
    if lasting {
        doubled(LASTING_FIRST).min(LASTING_CAP).max(interval)
    } else {
        // 0 (the next round), 1, 3, 7… intervals.
        doubled(interval)
            .saturating_sub(interval)
            .min(SOON_CAP.max(interval))
    }
}

/// A refused digest: how many times in a row, when it is tried again, and what would cure it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retry {
    /// Refusals of this digest in a row.
    pub times: u32,
    /// When it is tried again: unix ms, and RFC 3339.
    pub at_ms: i64,
    pub at: String,
    /// Refused for a reason that does not change by itself: tried seldom.
    pub lasting: bool,
    /// What the user of this machine can do that makes the next round take it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cure: Option<Cure>,
}

impl Retry {
    /// The retry after a refusal at `now_ms`; `previous` is the last one's for the same digest.
    pub fn after(
        previous: Option<&Retry>,
        lasting: bool,
        cure: Option<Cure>,
        interval: Duration,
        now_ms: i64,
    ) -> Retry {
        let times = previous.map_or(0, |r| r.times).saturating_add(1);
        let wait = i64::try_from(delay(times, lasting, interval).as_millis()).unwrap_or(i64::MAX);
        let at_ms = now_ms.saturating_add(wait);
        Retry {
            times,
            at_ms,
            at: crate::ledger::format_ms(at_ms),
            lasting,
            cure,
        }
    }

    /// Whether it is tried at `now_ms`: its time has come, or the user has cured it.
    pub fn due(&self, library: &Library, now_ms: i64) -> bool {
        now_ms >= self.at_ms || self.cure.as_ref().is_some_and(|c| c.done(library))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_refusal_is_tried_again_on_a_bounded_backoff_never_never() {
        let every = Duration::from_secs(10);
        let soon: Vec<u64> = (1..=10).map(|n| delay(n, false, every).as_secs()).collect();
        assert_eq!(soon, [0, 10, 30, 70, 150, 310, 630, 900, 900, 900]);
        let lasting: Vec<u64> = (1..=7).map(|n| delay(n, true, every).as_secs()).collect();
        assert_eq!(lasting, [3600, 7200, 14400, 28800, 57600, 86400, 86400]);
        // Bounded however many times, and never less often than rounds come.
        assert_eq!(delay(u32::MAX, true, every), LASTING_CAP);
        assert_eq!(delay(u32::MAX, false, every), SOON_CAP);
        let slow = Duration::from_secs(3600);
        assert_eq!(delay(9, false, slow), slow);
        let daily = Duration::from_secs(2 * 86_400);
        assert_eq!(delay(1, true, daily), daily);
    }

    #[test]
    fn each_refusal_of_the_same_digest_counts_and_moves_the_next_try() {
        let every = Duration::from_secs(10);
        let first = Retry::after(None, false, None, every, 1_000);
        assert_eq!((first.times, first.at_ms), (1, 1_000));
        let second = Retry::after(Some(&first), false, None, every, 2_000);
        assert_eq!((second.times, second.at_ms), (2, 12_000));
        let third = Retry::after(Some(&second), true, None, every, 12_000);
        assert_eq!((third.times, third.at_ms), (3, 12_000 + 4 * 3_600_000));
    }
}
