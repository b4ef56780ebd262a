//! `search_tools`' ranking: the tools best for a query by text relevance, observed success and
//! trust ([`autotool_policy::search`]), with each tool's health brought up to date call by call
//! (the snapshot's is as of its last rebuild).

use super::Library;
use crate::version::Version;
use std::sync::Arc;

/// How many tools a search returns unless asked.
pub const SEARCH_DEFAULT: usize = 5;
/// The most a search returns.
pub const SEARCH_MAX: usize = 20;

/// One tool a search found.
#[derive(Debug, Clone)]
pub struct Hit {
    pub version: Arc<Version>,
    /// Whether its functions are in the tool list (else only `run_tool` reaches them).
    pub in_list: bool,
    pub score: f64,
    pub relevance: f64,
    pub success: f64,
    pub trust: f64,
    /// Recent calls of its current version: (successes, failures).
    pub recent: (u32, u32),
}

impl Library {
    /// The tools best for `query` (trimmed, not empty), at most `limit` (1 to
    /// [`SEARCH_MAX`]), best first.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Hit> {
        let snapshot = self.snapshot();
        let weights = autotool_policy::search::WEIGHTS;
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if recent.0 != snapshot.generation {
            *recent = (snapshot.generation, (*snapshot.health).clone());
        }
        match self.registry.ledger().calls_after(recent.1.last) {
            Ok(calls) => recent.1.add(
                calls,
                usize::try_from(self.settings.lifecycle.window).unwrap_or(usize::MAX),
            ),
            Err(e) => tracing::warn!("reading recent calls: {e}"),
        }
        let hits = snapshot
            .index
            .search_with(query, limit, &weights, |name| Some(recent.1.counts(name)));
        hits.into_iter()
            .filter_map(|h| {
                let version = snapshot.tools.get(h.name.as_str())?.clone();
                Some(Hit {
                    in_list: snapshot.shown.contains(&version.name),
                    recent: recent.1.counts(&h.name),
                    score: h.score,
                    relevance: h.relevance,
                    success: h.success,
                    trust: h.trust,
                    version,
                })
            })
            .collect()
    }
}
