//! Ranking tools for `search_tools`: text relevance, observed health and lifecycle trust, with
//! explicit weights.
//!
//! `score = WEIGHTS.text × relevance + WEIGHTS.health × success + WEIGHTS.trust × trust`, where
//! - `relevance`, in [0, 1], is the mean of the share of the query's words the tool has and its
//!   BM25 (k1 = 1.2, b = 0.75) divided by the best BM25 among the candidates; a tool's words are
//!   its name, its description, its functions' names and descriptions and their parameter names,
//!   `snake_case` and `camelCase` split. The share keeps a tool that repeats a word from
//!   outranking one that has every word once. Where a trigger check measured how well the
//!   description draws the requests it serves (`fit`, in [0, 1]: trigger rate × (1 −
//!   false-trigger rate)), relevance is scaled by `0.5 + 0.5 × fit`: words that mislead a model
//!   count for less;
//! - `success` is the tool's success rate over its recent calls with a prior of one success and
//!   one failure (`(ok + 1) / (ok + failures + 2)`; a tool never called scores 0.5); a
//!   `ToolError` counts as neither;
//! - `trust` is [`State::trust`]: active 1, probation 0.5.
//!
//! Only tools with some relevance (a query word in their words) are returned, and only listed
//! states ([`State::listed`]). With the default weights a tool that works beats a better
//! described one that keeps failing: text alone can win at most 0.5, health moves 0.35.

use crate::lifecycle::State;
use std::collections::HashMap;

/// How much each part counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    pub text: f64,
    pub health: f64,
    pub trust: f64,
}

/// The weights `search_tools` uses.
pub const WEIGHTS: Weights = Weights {
    text: 0.5,
    health: 0.35,
    trust: 0.15,
};

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Lower-case words of `text`: runs of letters and digits, `snake_case` and `camelCase` split.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower && !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
            word.extend(c.to_lowercase());
        } else {
            prev_lower = false;
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// One tool as search sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub name: String,
    /// Everything its words come from, joined.
    pub text: String,
    pub state: State,
    /// Successful and failed calls recently (`ToolError`s not counted).
    pub ok: u32,
    pub failures: u32,
    /// How well its description draws the requests it serves, from a trigger check (`None`:
    /// never checked).
    pub fit: Option<f64>,
}

/// Entries with their words counted once, to answer many queries fast.
#[derive(Debug, Clone)]
pub struct Index {
    entries: Vec<Entry>,
    /// Per entry: word → count.
    counts: Vec<HashMap<String, u32>>,
    lengths: Vec<f64>,
    average_length: f64,
    /// Word → how many entries hold it.
    frequency: HashMap<String, u32>,
}

/// One result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub name: String,
    pub score: f64,
    pub relevance: f64,
    pub success: f64,
    pub trust: f64,
}

impl Index {
    pub fn new(entries: Vec<Entry>) -> Index {
        let mut counts = Vec::with_capacity(entries.len());
        let mut lengths = Vec::with_capacity(entries.len());
        let mut frequency: HashMap<String, u32> = HashMap::new();
        for e in &entries {
            let mut c: HashMap<String, u32> = HashMap::new();
            let ws = words(&e.text);
            lengths.push(ws.len() as f64);
            for w in ws {
                *c.entry(w).or_default() += 1;
            }
            for w in c.keys() {
                *frequency.entry(w.clone()).or_default() += 1;
            }
            counts.push(c);
        }
        let average_length = if lengths.is_empty() {
            1.0
        } else {
            (lengths.iter().sum::<f64>() / lengths.len() as f64).max(1.0)
        };
        Index {
            entries,
            counts,
            lengths,
            average_length,
            frequency,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn bm25(&self, i: usize, query: &[String]) -> f64 {
        let n = self.entries.len() as f64;
        let mut score = 0.0;
        for q in query {
            let Some(&tf) = self.counts[i].get(q) else {
                continue;
            };
            let df = f64::from(self.frequency.get(q).copied().unwrap_or(0));
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            let tf = f64::from(tf);
            let norm = K1 * (1.0 - B + B * self.lengths[i] / self.average_length);
            score += idf * tf * (K1 + 1.0) / (tf + norm);
        }
        score
    }

    /// The best `limit` listed entries for `query`, best first (ties by name).
    pub fn search(&self, query: &str, limit: usize, weights: &Weights) -> Vec<Hit> {
        self.search_with(query, limit, weights, |_| None)
    }

    /// [`Index::search`] with health fresher than the entries': `health(name)` gives a tool's
    /// `(ok, failures)` now, or `None` to keep the entry's. The words are counted once when
    /// the index is built; calls keep coming after that.
    pub fn search_with(
        &self,
        query: &str,
        limit: usize,
        weights: &Weights,
        health: impl Fn(&str) -> Option<(u32, u32)>,
    ) -> Vec<Hit> {
        let mut query = words(query);
        query.sort();
        query.dedup();
        let raw: Vec<(usize, f64)> = (0..self.entries.len())
            .filter(|&i| self.entries[i].state.listed())
            .map(|i| (i, self.bm25(i, &query)))
            .filter(|(_, s)| *s > 0.0)
            .collect();
        let best = raw.iter().map(|(_, s)| *s).fold(0.0_f64, f64::max);
        let asked = query.len().max(1) as f64;
        let mut hits: Vec<Hit> = raw
            .into_iter()
            .map(|(i, s)| {
                let e = &self.entries[i];
                let share = query
                    .iter()
                    .filter(|q| self.counts[i].contains_key(*q))
                    .count() as f64
                    / asked;
                let relevance = 0.5 * share + 0.5 * if best > 0.0 { s / best } else { 0.0 };
                let relevance = match e.fit {
                    Some(fit) => relevance * (0.5 + 0.5 * fit.clamp(0.0, 1.0)),
                    None => relevance,
                };
                let (ok, failures) = health(&e.name).unwrap_or((e.ok, e.failures));
                let success = (f64::from(ok) + 1.0) / (f64::from(ok) + f64::from(failures) + 2.0);
                let trust = e.state.trust();
                Hit {
                    name: e.name.clone(),
                    score: weights.text * relevance
                        + weights.health * success
                        + weights.trust * trust,
                    relevance,
                    success,
                    trust,
                }
            })
            .collect();
        hits.sort_by(|a, b| {
            b.score
                .partial_cmp(&a.score)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then_with(|| a.name.cmp(&b.name))
        });
        hits.truncate(limit);
        hits
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn entry(name: &str, text: &str, state: State, ok: u32, failures: u32) -> Entry {
        Entry {
            name: name.into(),
            text: format!("{name} {text}"),
            state,
            ok,
            failures,
            fit: None,
        }
    }

    #[test]
    fn a_misleading_description_counts_for_less() {
        let described = |fit| Entry {
            fit,
            ..entry("weather", "forecast for a city", State::Active, 0, 0)
        };
        let plain = Index::new(vec![described(None)]);
        let misleading = Index::new(vec![described(Some(0.0))]);
        let drawing = Index::new(vec![described(Some(1.0))]);
        let r = |i: &Index| i.search("forecast city", 5, &WEIGHTS)[0].relevance;
        assert!((r(&drawing) - r(&plain)).abs() < 1e-9);
        assert!((r(&misleading) - 0.5 * r(&plain)).abs() < 1e-9);
    }

    #[test]
    fn words_split_cases_and_punctuation() {
        assert_eq!(
            words("get_weatherForecast: City-name, 3 days! Ünïcode"),
            [
                "get",
                "weather",
                "forecast",
                "city",
                "name",
                "3",
                "days",
                "ünïcode"
            ]
        );
        assert_eq!(words("HTTPServer"), ["httpserver"]);
        assert!(words("  -- ").is_empty());
    }

    #[test]
    fn relevant_tools_only_best_first() {
        let index = Index::new(vec![
            entry("weather", "forecast for a city", State::Active, 10, 0),
            entry("stocks", "share prices", State::Active, 10, 0),
            entry(
                "news",
                "top stories, weather headlines",
                State::Active,
                10,
                0,
            ),
        ]);
        let hits = index.search("weather forecast", 10, &WEIGHTS);
        let names: Vec<&str> = hits.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["weather", "news"]);
        assert!((hits[0].relevance - 1.0).abs() < 1e-9);
        assert!(index.search("nothing matches", 10, &WEIGHTS).is_empty());
        assert_eq!(index.search("weather", 1, &WEIGHTS).len(), 1);
    }

    #[test]
    fn a_working_tool_beats_a_better_described_failing_one() {
        let index = Index::new(vec![
            entry(
                "weather_pro",
                "weather forecast weather conditions forecast for any city weather",
                State::Probation,
                1,
                9,
            ),
            entry("meteo", "weather for a city", State::Active, 30, 1),
        ]);
        let hits = index.search("weather forecast city", 10, &WEIGHTS);
        assert_eq!(hits[0].name, "meteo", "{hits:?}");
        assert!(hits[1].relevance > hits[0].relevance, "{hits:?}");
        // Control: with text alone the better-described one wins.
        let text_only = Weights {
            text: 1.0,
            health: 0.0,
            trust: 0.0,
        };
        assert_eq!(
            index.search("weather forecast city", 10, &text_only)[0].name,
            "weather_pro"
        );
    }

    #[test]
    fn fresher_health_replaces_the_entries() {
        let index = Index::new(vec![
            entry("meteo", "weather for a city", State::Probation, 0, 0),
            entry(
                "weather",
                "weather forecast for a city",
                State::Probation,
                0,
                0,
            ),
        ]);
        assert_eq!(
            index.search("weather city", 10, &WEIGHTS)[0].name,
            "weather"
        );
        // The better-described one failed twice since the index was built; the other worked.
        let hits = index.search_with("weather city", 10, &WEIGHTS, |name| match name {
            "weather" => Some((0, 2)),
            "meteo" => Some((2, 0)),
            _ => None,
        });
        assert_eq!(hits[0].name, "meteo", "{hits:?}");
        assert!((hits[0].success - 0.75).abs() < 1e-9);
        assert!((hits[1].success - 0.25).abs() < 1e-9);
    }

    #[test]
    fn unlisted_states_are_not_found_and_unused_tools_score_half() {
        let index = Index::new(vec![
            entry("a", "weather", State::Quarantined, 50, 0),
            entry("b", "weather", State::Retired, 50, 0),
            entry("c", "weather", State::Draft, 50, 0),
            entry("d", "weather", State::Probation, 0, 0),
        ]);
        let hits = index.search("weather", 10, &WEIGHTS);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].name, "d");
        assert!((hits[0].success - 0.5).abs() < 1e-9);
        assert!((hits[0].score - (0.5 + 0.35 * 0.5 + 0.15 * 0.5)).abs() < 1e-9);
    }
}
