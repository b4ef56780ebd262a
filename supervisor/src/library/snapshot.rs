//! The mounted set at one registry generation: every current version, which of them the tool
//! list shows (all, or the most used when they are more than [`Settings::list_limit`] allows),
//! the `search_tools` index, and each version's recent outcomes. Rebuilt from the registry when
//! its generation moves ([`Library::reload`]); swapped whole, so a reader never sees half of a
//! change.
//!
//! [`Settings::list_limit`]: super::Settings::list_limit

use super::Library;
use super::settings::USAGE_WINDOW;
use crate::ledger::CallKind;
use crate::version::Version;
use autotool_policy::names::{MountedName, ToolName};
use autotool_policy::search::{Entry, Index};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counts every rebuild, so what the protocol edge derives from a snapshot (the rendered tool
/// list) can be kept until the next one.
static REVISIONS: AtomicU64 = AtomicU64::new(1);

/// The set of mounted tools at one registry generation.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The registry generation it was read at (`None` before the first read).
    pub generation: Option<u64>,
    /// Distinct for every rebuild (a change of the key names rebuilds it at the same
    /// generation).
    pub revision: u64,
    pub tools: BTreeMap<ToolName, Arc<Version>>,
    /// The listed tools (probation, active) whose functions are in the tool list: all of them,
    /// or the most used when they are more than the list limit allows.
    pub shown: BTreeSet<ToolName>,
    /// Listed tools left out of the tool list by the limit (found with `search_tools`).
    pub hidden: usize,
    /// What `search_tools` ranks, with the health of each tool when it was read.
    pub index: Arc<Index>,
    /// The current versions' recent outcomes the index was built with.
    pub health: Arc<RecentCalls>,
    /// Whether `synthesize_tool` was offered when it was built (it counts against the limit).
    pub synthesize: bool,
}

impl Default for Snapshot {
    fn default() -> Self {
        Snapshot {
            generation: None,
            revision: 0,
            tools: BTreeMap::new(),
            shown: BTreeSet::new(),
            hidden: 0,
            index: Arc::new(Index::new(Vec::new())),
            health: Arc::new(RecentCalls::default()),
            synthesize: false,
        }
    }
}

impl Snapshot {
    /// The listed versions in the tool list, by name.
    pub fn shown_versions(&self) -> impl Iterator<Item = &Arc<Version>> {
        self.tools.values().filter(|t| self.shown.contains(&t.name))
    }

    /// `<tool>__<function>` → the version and function, when mounted and listed (shown in the
    /// list or not).
    pub fn resolve(&self, name: &str) -> Option<(&Arc<Version>, MountedName)> {
        let mounted = MountedName::split(name)?;
        let t = self.tools.get(mounted.tool())?;
        if !t.state.listed() || t.functions.get(mounted.function().as_str()).is_none() {
            return None;
        }
        Some((t, mounted))
    }
}

/// The last calls of each mounted tool's current version, as far as the ledger's call `last`.
#[derive(Debug, Clone, Default)]
pub struct RecentCalls {
    /// The newest call id read.
    pub last: i64,
    /// Tool → (its current version, outcomes oldest first, at most the lifecycle window).
    pub tools: HashMap<String, (u32, VecDeque<CallKind>)>,
}

impl RecentCalls {
    /// (successes, failures) of `tool`; `ToolError`s count as neither.
    pub fn counts(&self, tool: &str) -> (u32, u32) {
        let Some((_, recent)) = self.tools.get(tool) else {
            return (0, 0);
        };
        let n = |o: CallKind| u32::try_from(recent.iter().filter(|r| **r == o).count());
        (
            n(CallKind::Ok).unwrap_or(u32::MAX),
            n(CallKind::Failure).unwrap_or(u32::MAX),
        )
    }

    /// Add calls newer than [`RecentCalls::last`] (id, tool, version, outcome), keeping at most
    /// `window` per tool.
    pub fn add(&mut self, calls: Vec<(i64, String, u32, CallKind)>, window: usize) {
        for (id, tool, version, outcome) in calls {
            if let Some((v, recent)) = self.tools.get_mut(&tool)
                && *v == version
            {
                recent.push_back(outcome);
                while recent.len() > window {
                    recent.pop_front();
                }
            }
            self.last = self.last.max(id);
        }
    }
}

/// What `search_tools` matches a tool by: its name and description, and its functions' names,
/// descriptions and parameter names.
fn search_text(t: &Version) -> String {
    let mut text = format!("{} {}", t.name, t.description);
    for f in t.functions.specs() {
        text.push(' ');
        text.push_str(&f.name);
        if let Some(d) = &f.description {
            text.push(' ');
            text.push_str(d);
        }
        if let Some(serde_json::Value::Object(properties)) = f.input_schema.get("properties") {
            for p in properties.keys() {
                text.push(' ');
                text.push_str(p);
            }
        }
    }
    text
}

impl Library {
    /// Rebuild the snapshot from the registry. Returns whether the mounted list changed.
    pub fn reload(&self) -> Result<bool, crate::registry::RegistryError> {
        self.reload_with(false)
    }

    /// [`Self::reload`], rebuilding even when the registry did not change (the key names the
    /// tool list mentions did, or `synthesize_tool` came or went).
    ///
    /// Besides the tools, it reads in one query each the recent outcomes of every current
    /// version (for `search_tools`) and every tool's calls over [`USAGE_WINDOW`] (for the list
    /// limit): the list follows usage when the registry changes, not call by call.
    pub fn reload_with(&self, force: bool) -> Result<bool, crate::registry::RegistryError> {
        let generation = Some(self.registry.generation()?);
        let old = self.snapshot();
        if generation == old.generation && !force {
            return Ok(false);
        }
        let mut tools = BTreeMap::new();
        let mut texts: Vec<String> = Vec::new();
        self.registry.current_each(|v| {
            texts.push(search_text(&v));
            tools.insert(v.name.clone(), Arc::new(v));
        })?;
        let ledger = self.registry.ledger();
        let window = self.settings.lifecycle.window;
        let (last, outcomes) = ledger.recent_outcomes_of_current(window)?;
        let fits = ledger.trigger_fits_of_current()?;
        let mut health = RecentCalls {
            last,
            tools: HashMap::with_capacity(tools.len()),
        };
        for t in tools.values() {
            let recent: VecDeque<CallKind> = outcomes
                .get(t.name.as_str())
                .map(|o| o.iter().copied().collect())
                .unwrap_or_default();
            health.tools.insert(t.name.to_string(), (t.version, recent));
        }
        let since =
            crate::ledger::now_ms() - i64::try_from(USAGE_WINDOW.as_millis()).unwrap_or(i64::MAX);
        let uses = ledger.uses_since(since)?;
        let listed: Vec<&Arc<Version>> = tools.values().filter(|t| t.state.listed()).collect();
        let candidates: Vec<autotool_policy::listing::Candidate> = listed
            .iter()
            .map(|t| autotool_policy::listing::Candidate {
                name: t.name.to_string(),
                uses: uses.get(t.name.as_str()).copied().unwrap_or(0),
                entries: t.functions.len(),
            })
            .collect();
        let synthesize = self.synthesize_offered();
        let shown: BTreeSet<ToolName> = autotool_policy::listing::shown(
            &candidates,
            autotool_policy::listing::BUILT_INS + usize::from(synthesize),
            self.settings.list_limit,
        )
        .into_iter()
        .filter_map(|n| ToolName::parse(&n).ok())
        .collect();
        // Both come sorted by name.
        let index = Index::new(
            tools
                .values()
                .zip(texts)
                .map(|(t, text)| {
                    let (ok, failures) = health.counts(t.name.as_str());
                    Entry {
                        name: t.name.to_string(),
                        text,
                        state: t.state,
                        ok,
                        failures,
                        fit: fits.get(t.name.as_str()).copied(),
                    }
                })
                .collect(),
        );
        let changed = old.tools.len() != tools.len()
            || old.shown != shown
            || old.synthesize != synthesize
            || old
                .tools
                .iter()
                .zip(tools.iter())
                .any(|((a, ta), (b, tb))| {
                    a != b || ta.version != tb.version || ta.state != tb.state
                });
        let hidden = listed.len() - shown.len();
        *self.snapshot.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(Snapshot {
            generation,
            revision: REVISIONS.fetch_add(1, Ordering::Relaxed),
            tools,
            shown,
            hidden,
            index: Arc::new(index),
            health: Arc::new(health),
            synthesize,
        });
        Ok(changed || force)
    }
}
