//! The kinds of audit event the ledger records.

use serde::{Deserialize, Serialize};

/// Audit event kinds the registry itself writes; other parts add their own (`consent_asked`,
/// `egress_denied`, …) as plain strings.
/// The kinds of audit event, stored as their word ([`Event::as_str`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    Created,
    Verified,
    VerificationFailed,
    Removed,
    StateChanged,
    Recovered,
    ConsentAsked,
    /// The user's yes, as the host relayed it (followed by `ConsentGranted`).
    ConsentAnswered,
    ConsentGranted,
    ConsentDeclined,
    ConsentUnavailable,
    ConsentRefused,
    ConsentRevoked,
    Synthesized,
    SynthesisFailed,
    /// A candidate written for the same need as another lost the race to it (the detail names
    /// the winner and the first thing the loser did worse).
    CandidateLost,
    /// A version's file or its process's schemas no longer match what was verified.
    PinBroken,
    /// A process took on verifying a changed version again (one per change, for every
    /// supervisor sharing the home).
    VerifyingAgain,
    /// The egress proxy refused a connection.
    EgressDenied,
    /// A tool process was stopped for what it sent the supervisor (floods, requests, sizes).
    ToolStopped,
    /// A version earned trust and what it met joined the tool's baseline.
    BaselineGrew,
    /// The user dropped an obligation from a tool's baseline.
    ObligationDropped,
    /// A version was published to a registry (`autotool tools push`).
    Published,
    /// A version pulled from a registry passed this machine's gate: where from, its digest
    /// and its signer.
    Pulled,
    /// An artifact from a registry was refused (signature, hostile content, pin).
    PullRefused,
    /// Where a key may be sent changed (a host allowed or disallowed, by whom).
    AllowlistChanged,
    /// The user made an earlier trusted version current again (`autotool tools rollback`).
    RolledBack,
    /// The user pinned a tool: nothing replaces its current version until it is unpinned.
    Pinned,
    /// The user unpinned a tool: new versions may replace it again.
    Unpinned,
    /// A new version of a pinned tool was refused (a rewrite, a pull, a changed file).
    PinHeld,
    /// A directory a tool was granted (`READ_DIRS`, `WRITE_DIRS`) was not mounted at launch: a
    /// deny rule refuses it, or it is gone or no longer the directory granted (the detail says
    /// which directory and why).
    ReachRefused,
}

impl Event {
    /// Every kind.
    pub const ALL: [Event; 31] = [
        Event::Created,
        Event::Verified,
        Event::VerificationFailed,
        Event::Removed,
        Event::StateChanged,
        Event::Recovered,
        Event::ConsentAsked,
        Event::ConsentAnswered,
        Event::ConsentGranted,
        Event::ConsentDeclined,
        Event::ConsentUnavailable,
        Event::ConsentRefused,
        Event::ConsentRevoked,
        Event::Synthesized,
        Event::SynthesisFailed,
        Event::CandidateLost,
        Event::PinBroken,
        Event::VerifyingAgain,
        Event::EgressDenied,
        Event::ToolStopped,
        Event::BaselineGrew,
        Event::ObligationDropped,
        Event::Published,
        Event::Pulled,
        Event::PullRefused,
        Event::AllowlistChanged,
        Event::RolledBack,
        Event::Pinned,
        Event::Unpinned,
        Event::PinHeld,
        Event::ReachRefused,
    ];

    /// The word stored in `events.kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            Event::Created => "created",
            Event::Verified => "verified",
            Event::VerificationFailed => "verification_failed",
            Event::Removed => "removed",
            Event::StateChanged => "state_changed",
            Event::Recovered => "recovered",
            Event::ConsentAsked => "consent_asked",
            Event::ConsentAnswered => "consent_answered",
            Event::ConsentGranted => "consent_granted",
            Event::ConsentDeclined => "consent_declined",
            Event::ConsentUnavailable => "consent_unavailable",
            Event::ConsentRefused => "consent_refused",
            Event::ConsentRevoked => "consent_revoked",
            Event::Synthesized => "synthesized",
            Event::SynthesisFailed => "synthesis_failed",
            Event::CandidateLost => "candidate_lost",
            Event::PinBroken => "pin_broken",
            Event::VerifyingAgain => "verifying_again",
            Event::EgressDenied => "egress_denied",
            Event::ToolStopped => "tool_stopped",
            Event::BaselineGrew => "baseline_grew",
            Event::ObligationDropped => "obligation_dropped",
            Event::Published => "published",
            Event::Pulled => "pulled",
            Event::PullRefused => "pull_refused",
            Event::AllowlistChanged => "allowlist_changed",
            Event::RolledBack => "rolled_back",
            Event::Pinned => "pinned",
            Event::Unpinned => "unpinned",
            Event::PinHeld => "pin_held",
            Event::ReachRefused => "reach_refused",
        }
    }
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<Event> for String {
    fn eq(&self, other: &Event) -> bool {
        self == other.as_str()
    }
}
