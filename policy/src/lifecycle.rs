//! A tool version's lifecycle: a decision (draft → probation → active → quarantined → retired),
//! kept apart from its health (an observation over its recent calls), and the rules that move
//! one by the other.
//!
//! - A verified version starts on **probation**; after [`Thresholds::promote_after`] successful
//!   calls in a row of its own it becomes **active**.
//! - A version whose own failures cross a threshold is **quarantined** automatically:
//!   [`Thresholds::quarantine_consecutive`] failures in a row, or a failure rate of at least
//!   [`Thresholds::quarantine_rate`] over the last [`Thresholds::window`] calls (once that many
//!   were made).
//! - Only failures that are the tool's fault count: a crash, a timeout, an unexpected
//!   traceback, broken protocol ([`CallKind::Failure`]). A `ToolError` the tool raised on purpose
//!   (bad input, the upstream said no) is the tool working ([`CallKind::ToolError`]): it neither
//!   promotes nor quarantines, and it does not break a run of successes.
//! - `rehab` puts a quarantined (or retired) version back on probation; `retire` retires any.
//!   Only probation and active versions are listed to hosts.

use std::fmt;

/// Where a version stands. Stored in the ledger as its word (`as_str`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Draft,
    Probation,
    Active,
    Quarantined,
    Retired,
}

impl State {
    /// Whether hosts see it in `tools/list` (and in search).
    pub fn listed(self) -> bool {
        matches!(self, State::Probation | State::Active)
    }

    /// Whether a call may run it: a listed state always; a quarantined or retired one only
    /// when the caller insists (`force`); a draft (verified code no longer matches its file, or
    /// never finished verifying) never.
    pub fn may_call(self, force: bool) -> bool {
        self.listed() || (force && self != State::Draft)
    }

    /// How much a state is trusted, for ranking (`search`).
    pub fn trust(self) -> f64 {
        match self {
            State::Active => 1.0,
            State::Probation => 0.5,
            State::Draft | State::Quarantined | State::Retired => 0.0,
        }
    }
}

impl State {
    /// The state's word, as the ledger stores it and users read it.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Draft => "draft",
            State::Probation => "probation",
            State::Active => "active",
            State::Quarantined => "quarantined",
            State::Retired => "retired",
        }
    }

    /// A stored word back into a state. An unknown word (written by a newer autotool) reads as
    /// `Quarantined`: hidden, not lost.
    pub fn parse(s: &str) -> State {
        match s {
            "draft" => State::Draft,
            "probation" => State::Probation,
            "active" => State::Active,
            "retired" => State::Retired,
            _ => State::Quarantined,
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a call ended, as the lifecycle counts it and the ledger records it (`as_str`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum CallKind {
    /// The function answered.
    #[serde(rename = "ok")]
    Ok,
    /// The tool raised `ToolError`: its own, deliberate answer (the tool works; the input or
    /// the remote side did not).
    #[serde(rename = "tool_error")]
    ToolError,
    /// A crash, timeout, unexpected traceback or protocol error.
    #[serde(rename = "error")]
    Failure,
}

impl CallKind {
    /// The outcome's word, as the ledger stores it.
    pub fn as_str(self) -> &'static str {
        match self {
            CallKind::Ok => "ok",
            CallKind::ToolError => "tool_error",
            CallKind::Failure => "error",
        }
    }

    /// A stored word back into an outcome; an unknown one counts as a failure.
    pub fn parse(s: &str) -> CallKind {
        match s {
            "ok" => CallKind::Ok,
            "tool_error" => CallKind::ToolError,
            _ => CallKind::Failure,
        }
    }
}

/// The numbers the rules use (settings: `autotool config`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// Successful calls in a row (`ToolError`s do not break the run) to leave probation.
    pub promote_after: u32,
    /// Failures in a row that quarantine.
    pub quarantine_consecutive: u32,
    /// Failure rate over the window that quarantines.
    pub quarantine_rate: f64,
    /// How many recent calls the rate is taken over (and how many it needs).
    pub window: u32,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            promote_after: 5,
            quarantine_consecutive: 3,
            quarantine_rate: 0.5,
            window: 20,
        }
    }
}

/// What the recent calls of one version say (newest last; at most [`Thresholds::window`] are
/// looked at).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Health {
    /// Calls seen in the window.
    pub calls: u32,
    pub failures: u32,
    pub tool_errors: u32,
    /// Failures at the end of the window, in a row.
    pub failing_run: u32,
    /// Successes at the end of the window, in a row (`ToolError`s skipped).
    pub success_run: u32,
}

impl Health {
    /// Observe `recent` (oldest first), the last `window` of them.
    pub fn of(recent: &[CallKind], window: u32) -> Health {
        let start = recent
            .len()
            .saturating_sub(usize::try_from(window).unwrap_or(usize::MAX));
        let recent = &recent[start..];
        let count = |k: CallKind| recent.iter().filter(|c| **c == k).count();
        let mut failing_run = 0u32;
        for c in recent.iter().rev() {
            match c {
                CallKind::Failure => failing_run += 1,
                CallKind::ToolError => continue,
                CallKind::Ok => break,
            }
        }
        let mut success_run = 0u32;
        for c in recent.iter().rev() {
            match c {
                CallKind::Ok => success_run += 1,
                CallKind::ToolError => continue,
                CallKind::Failure => break,
            }
        }
        let n = |x: usize| u32::try_from(x).unwrap_or(u32::MAX);
        Health {
            calls: n(recent.len()),
            failures: n(count(CallKind::Failure)),
            tool_errors: n(count(CallKind::ToolError)),
            failing_run,
            success_run,
        }
    }

    /// Failures over calls in the window (0 with no calls).
    pub fn failure_rate(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            f64::from(self.failures) / f64::from(self.calls)
        }
    }
}

/// A state change and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub to: State,
    pub reason: String,
}

/// After a call: the automatic move the health calls for, if any.
pub fn after_call(state: State, health: &Health, t: &Thresholds) -> Option<Transition> {
    if matches!(state, State::Probation | State::Active) {
        if t.quarantine_consecutive > 0 && health.failing_run >= t.quarantine_consecutive {
            return Some(Transition {
                to: State::Quarantined,
                reason: format!(
                    "{} failures in a row (crash, timeout or unexpected error; the limit is {})",
                    health.failing_run, t.quarantine_consecutive
                ),
            });
        }
        if t.window > 0 && health.calls >= t.window && health.failure_rate() >= t.quarantine_rate {
            return Some(Transition {
                to: State::Quarantined,
                reason: format!(
                    "{} of its last {} calls failed ({:.0}%; the limit is {:.0}%)",
                    health.failures,
                    health.calls,
                    health.failure_rate() * 100.0,
                    t.quarantine_rate * 100.0
                ),
            });
        }
    }
    if state == State::Probation && health.success_run >= t.promote_after {
        return Some(Transition {
            to: State::Active,
            reason: format!("{} successful calls in a row", health.success_run),
        });
    }
    None
}

/// The decision after each of the newest `calls` of `recent` (a version's recent outcomes,
/// oldest first) in turn, as if they had been recorded one by one, each seeing the last `limit`
/// calls up to it: the first change, if any. What a batch of calls recorded together decides.
pub fn after_calls(
    state: State,
    recent: &[CallKind],
    calls: usize,
    limit: usize,
    t: &Thresholds,
) -> Option<Transition> {
    (0..calls.min(recent.len())).rev().find_map(|newer| {
        let end = recent.len() - newer;
        let view = &recent[end.saturating_sub(limit)..end];
        after_call(state, &Health::of(view, t.window), t)
    })
}

/// What a user can do by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manual {
    /// Back on probation (from quarantined or retired).
    Rehab,
    Retire,
}

/// The state `action` leads to from `state`, or why it does not apply.
pub fn manual(state: State, action: Manual) -> Result<State, String> {
    match (action, state) {
        (Manual::Rehab, State::Quarantined | State::Retired) => Ok(State::Probation),
        (Manual::Rehab, other) => Err(format!(
            "it is {other}; only a quarantined or retired tool can be put back on probation"
        )),
        (Manual::Retire, State::Retired) => Err("it is already retired".into()),
        (Manual::Retire, _) => Ok(State::Retired),
    }
}

#[cfg(test)]
mod tests;
