//! The state one `autotool serve` process shares between its connections: settings, the
//! registry, the mounted-tool snapshot, warm tool processes, and change notification.
//!
//! Create → verify → mount: `create_tool` stages the code, verifies it (lint, declarations,
//! launch confined, initialize, list, optional smoke test, robustness probes), commits it as a
//! new version, hands
//! the verified process to the pool as the first warm instance, swaps the snapshot and tells
//! every connected host. Other `serve` processes sharing the home notice the ledger's generation
//! change within the poll interval and do the same.
//!
//! The library: the snapshot also holds the `search_tools` index (text, state and each current
//! version's recent calls, read in one query per reload and brought up to date call by call at
//! search time), and which tools `tools/list` shows when they are more than
//! [`Settings::list_limit`] allows (the most used over [`USAGE_WINDOW`], decided at reload).
//! Every poll also holds each mounted version to its pin ([`crate::pin`]).

use crate::consent::{Consent, Subject};
use crate::credentials::{KeyStore, Stamp};
use crate::home::Home;
use crate::ledger::{CallKind, CallRecord, State, kind};
use crate::pin::{Break, FileStamp, FileState};
use crate::redact::Redactor;
use crate::registry::{FunctionSpec, Manifest, Registry, StoredFunction, ToolVersion};
use crate::tool::pool::{Launchable, PinCheck, Pool, StartError};
use crate::tool::process::{SandboxMode, ToolSpec};
use crate::tool::runtime::Python;
use crate::verify::Thoroughness;
use autotool_policy::Limits;
use autotool_policy::hosts::AllowRule;
use autotool_policy::search::{Entry, Index};
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// What `serve` was told (resolved from its flags, the environment, `config.toml` and these
/// defaults by [`crate::config`]).
#[derive(Debug, Clone)]
pub struct Settings {
    pub sandbox: SandboxMode,
    /// Wall-clock bound on one call.
    pub call_timeout: Duration,
    /// A tool process unused this long is stopped.
    pub idle_timeout: Duration,
    /// Bytes of text a result may carry before it is truncated.
    pub max_output_bytes: usize,
    /// Largest `code` accepted by `create_tool`.
    pub max_code_bytes: usize,
    /// How often the registry is checked for changes made by other processes.
    pub poll_interval: Duration,
    /// The launcher to use (else found by `launcher::locate`).
    pub launcher: Option<PathBuf>,
    pub limits: Limits,
    /// `--dangerously-allow-all-tools` / `AUTOTOOL_CONSENT=dangerously-allow-all`: grant every
    /// tool the keys it declares without asking (the sandbox and allowlists still hold).
    pub allow_all_keys: bool,
    /// When a tool is promoted or quarantined (`autotool_policy::lifecycle`).
    pub lifecycle: autotool_policy::lifecycle::Thresholds,
    /// Most entries `tools/list` holds, built-ins included (0: no limit); beyond it only the
    /// most used tools are listed and the rest are found with `search_tools`
    /// (`autotool_policy::listing`).
    pub list_limit: usize,
    /// Offer `synthesize_tool` when `$AUTOTOOL_HOME/.env` names a model (`synthesize = off`
    /// turns it off).
    pub synthesize: bool,
    /// Rounds of write → verify → repair one `synthesize_tool` call may take.
    pub synthesize_rounds: usize,
    /// Bound on one `synthesize_tool` call.
    pub synthesize_time: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            sandbox: SandboxMode::Strict,
            call_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(600),
            max_output_bytes: 256 << 10,
            max_code_bytes: 256 << 10,
            poll_interval: Duration::from_millis(500),
            launcher: None,
            limits: Limits::default(),
            allow_all_keys: false,
            lifecycle: autotool_policy::lifecycle::Thresholds::default(),
            list_limit: DEFAULT_LIST_LIMIT,
            synthesize: true,
            synthesize_rounds: crate::own_model::synthesize::DEFAULT_ROUNDS,
            synthesize_time: crate::own_model::synthesize::DEFAULT_TIME_BOUND,
        }
    }
}

/// How many tools `search_tools` returns unless asked.
pub const SEARCH_DEFAULT: usize = 5;
/// The most `search_tools` returns.
pub const SEARCH_MAX: u64 = 20;

/// [`Settings::list_limit`] unless told otherwise.
pub const DEFAULT_LIST_LIMIT: usize = 40;

/// How far back calls count towards "most used" for the list limit.
pub const USAGE_WINDOW: Duration = Duration::from_secs(30 * 24 * 3600);

/// One mounted tool: its current version and functions.
#[derive(Debug, Clone)]
pub struct MountedTool {
    pub name: String,
    pub version: u32,
    pub description: String,
    pub dir: PathBuf,
    /// Its functions as verification recorded them (the schemas kept as text).
    pub functions: Arc<[StoredFunction]>,
    /// Key names the tool declares (`REQUIRED_ENV`).
    pub required_env: Vec<String>,
    /// sha256 of its `tool.py`: what a per-version approval is bound to.
    pub code_hash: String,
    /// Its lifecycle state; only probation and active tools are listed.
    pub state: crate::ledger::State,
}

impl MountedTool {
    /// What consent for this version is about.
    pub fn subject(&self) -> Subject {
        Subject {
            tool: self.name.clone(),
            code_hash: self.code_hash.clone(),
            declared: self.required_env.clone(),
        }
    }
}

/// The set of mounted tools at one registry generation.
#[derive(Debug, Clone)]
pub struct Mounted {
    /// The registry generation it was read at (`None` before the first read).
    pub generation: Option<u64>,
    pub tools: BTreeMap<String, MountedTool>,
    /// What `tools/list` answers: built-ins and the functions of the tools in `shown`, sorted
    /// by name.
    pub list: Vec<rmcp::model::Tool>,
    /// The listed tools (probation, active) whose functions are in `list`: all of them, or the
    /// most used when they are more than [`Settings::list_limit`] allows.
    pub shown: BTreeSet<String>,
    /// Listed tools left out of `list` by the limit (found with `search_tools`).
    pub hidden: usize,
    /// What `search_tools` ranks, with the health of each tool when it was read.
    pub index: Arc<Index>,
    /// The current versions' recent outcomes the index was built with.
    pub health: Arc<RecentCalls>,
}

impl Default for Mounted {
    fn default() -> Self {
        Mounted {
            generation: None,
            tools: BTreeMap::new(),
            list: crate::mcp::handler::tool_list(
                [],
                &Secrets::default(),
                false,
                DEFAULT_LIST_LIMIT,
            ),
            shown: BTreeSet::new(),
            hidden: 0,
            index: Arc::new(Index::new(Vec::new())),
            health: Arc::new(RecentCalls::default()),
        }
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
    fn add(&mut self, calls: Vec<(i64, String, u32, CallKind)>, window: usize) {
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

/// A mounted version's `tool.py` as the watcher last saw it ([`crate::pin`]).
#[derive(Debug, Clone)]
struct Watched {
    version: u32,
    stamp: Option<FileStamp>,
    state: FileState,
}

/// What autotool knows of the keys: their names (offered to the agent), the value each
/// resolves to now, their allowlists, and a redactor holding every value (shadowed ones too),
/// so no value reaches the model. Reread when the key files change.
#[derive(Default)]
pub struct Secrets {
    stamp: Option<Stamp>,
    pub names: Vec<String>,
    pub redactor: Option<Redactor>,
    values: BTreeMap<String, String>,
    allowlists: BTreeMap<String, Vec<AllowRule>>,
}

impl std::fmt::Debug for Secrets {
    /// Names only: a value is never formatted.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("names", &self.names)
            .field("allowlists", &self.allowlists)
            .finish_non_exhaustive()
    }
}

impl Secrets {
    /// Whether `key` has a value now.
    pub fn has_value(&self, key: &str) -> bool {
        self.values.contains_key(key)
    }

    /// The value `key` resolves to now (environment, keychain, file: first wins).
    pub fn value(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// Every key's allowlist; a key missing here has none.
    pub fn allowlists(&self) -> &BTreeMap<String, Vec<AllowRule>> {
        &self.allowlists
    }

    /// `text` with every known secret replaced by `[REDACTED:NAME]`.
    pub fn redact(&self, text: &str) -> String {
        match &self.redactor {
            Some(r) => r.redact(text).into_owned(),
            None => text.to_string(),
        }
    }

    /// Redact every string (and object key) of `value`.
    pub fn redact_json(&self, value: &mut Value) {
        if let Some(r) = &self.redactor {
            r.redact_json(value);
        }
    }

    /// Redact every text block and the structured content of a result.
    pub fn redact_result(&self, mut result: CallToolResult) -> CallToolResult {
        for block in &mut result.content {
            if let ContentBlock::Text(t) = block {
                t.text = self.redact(&t.text);
            }
        }
        if let Some(v) = result.structured_content.as_mut() {
            self.redact_json(v);
        }
        result
    }
}

/// Shared state of one `serve` process.
#[derive(Debug)]
pub struct App {
    pub settings: Settings,
    pub home: Home,
    pub registry: Arc<Registry>,
    pub keys: KeyStore,
    secrets: RwLock<Arc<Secrets>>,
    runtime: tokio::sync::OnceCell<Python>,
    mounted: RwLock<Arc<Mounted>>,
    pub pool: Pool,
    changes: tokio::sync::watch::Sender<u64>,
    legacy_peers: Mutex<Vec<Peer<RoleServer>>>,
    api_bases: BTreeMap<String, String>,
    /// The sealing key of consent questions and the answers already used.
    pub(crate) consent: Consent,
    /// Keyed at random per process, so a grants fingerprint says nothing about a value.
    grants_hasher: std::hash::RandomState,
    /// Hand-placed files that failed verification, by path, with the size and mtime seen.
    rejected: Mutex<HashMap<PathBuf, (u64, Option<std::time::SystemTime>)>>,
    /// autotool's own model (`$AUTOTOOL_HOME/.env`), behind `synthesize_tool`.
    pub(crate) own_model: RwLock<Arc<crate::own_model::synthesize::OwnModel>>,
    /// Each mounted version's file as last seen, by tool.
    watched: Mutex<HashMap<String, Watched>>,
    /// Versions whose process broke their pin, to verify again at the next poll.
    reverify: Mutex<Vec<(String, u32)>>,
    /// [`Mounted::health`] brought up to date with the calls since (for `search_tools`), and
    /// the generation it started from.
    recent: Mutex<(Option<u64>, RecentCalls)>,
}

fn text(s: impl Into<String>) -> ContentBlock {
    ContentBlock::text(s.into())
}

fn error_result(s: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![text(s)])
}

/// Whether `name` is a valid tool name: `^[a-z][a-z0-9_]{0,39}$` without `__`.
pub fn valid_tool_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 40
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
        && !name.contains(crate::mcp::handler::SEPARATOR)
}

impl App {
    /// Open the home and registry and mount what it holds.
    pub fn new(settings: Settings, home: Home) -> anyhow::Result<Arc<App>> {
        let registry = Arc::new(Registry::open(&home)?);
        let keys = KeyStore::open(&home);
        let api_bases = std::env::vars()
            .filter(|(k, _)| k.ends_with("_API_BASE"))
            .collect();
        let (changes, _) = tokio::sync::watch::channel(0u64);
        let app = Arc::new(App {
            settings,
            home,
            registry,
            keys,
            secrets: RwLock::new(Arc::new(Secrets::default())),
            runtime: tokio::sync::OnceCell::new(),
            mounted: RwLock::new(Arc::new(Mounted::default())),
            pool: Pool::default(),
            changes,
            legacy_peers: Mutex::new(Vec::new()),
            api_bases,
            consent: Consent::new()
                .map_err(|e| anyhow::anyhow!("drawing a random key from /dev/urandom: {e}"))?,
            grants_hasher: std::hash::RandomState::new(),
            rejected: Mutex::new(HashMap::new()),
            own_model: RwLock::new(Arc::new(crate::own_model::synthesize::OwnModel::default())),
            watched: Mutex::new(HashMap::new()),
            reverify: Mutex::new(Vec::new()),
            recent: Mutex::new((None, RecentCalls::default())),
        });
        app.refresh_keys();
        app.refresh_model();
        app.reload()?;
        Ok(app)
    }

    /// What autotool knows of the keys right now.
    pub fn secrets(&self) -> Arc<Secrets> {
        self.secrets
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Reread the key store when it changed: names for the agent, values for the redactor.
    /// Returns whether the names changed (the tool list mentions them).
    pub fn refresh_keys(&self) -> bool {
        let stamp = self.keys.stamp();
        let old = self.secrets();
        if old.stamp.as_ref() == Some(&stamp) {
            return false;
        }
        let (values, errors) = self.keys.known_values();
        for e in errors {
            tracing::warn!("reading a key: {e}");
        }
        let redactor = match Redactor::new(&values) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::error!("building the redactor: {e}");
                None
            }
        };
        let mut names: Vec<String> = self
            .keys
            .list()
            .map(|l| {
                l.into_iter()
                    .filter(|k| k.source.is_some())
                    .map(|k| k.name)
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        let mut current = BTreeMap::new();
        for name in &names {
            match self.keys.get(name) {
                Ok(Some((value, _))) => {
                    current.insert(
                        name.clone(),
                        String::from_utf8_lossy(value.expose()).into_owned(),
                    );
                }
                Ok(None) => {}
                Err(e) => tracing::warn!("reading key {name}: {e}"),
            }
        }
        let allowlists = match self.keys.allowlists() {
            Ok(lists) => lists
                .into_iter()
                .map(|(k, entries)| {
                    let rules = crate::consent::parse_list(&entries);
                    (k, rules)
                })
                .collect(),
            Err(e) => {
                // Fail closed: a list that cannot be read allows nothing for every key.
                tracing::error!("reading the allowlists: {e}; keys are sent nowhere");
                names.iter().map(|n| (n.clone(), Vec::new())).collect()
            }
        };
        let changed = names != old.names;
        *self.secrets.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(Secrets {
            stamp: Some(stamp),
            names,
            redactor,
            values: current,
            allowlists,
        });
        changed
    }

    /// The current snapshot.
    pub fn mounted(&self) -> Arc<Mounted> {
        self.mounted
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Server instructions: what autotool is, how to find and grow tools.
    pub fn instructions(&self) -> String {
        let mounted = self.mounted();
        let names: Vec<&str> = mounted.shown.iter().map(String::as_str).collect();
        let library = if mounted.hidden > 0 {
            format!(
                "Tools in your list now: {}. {} more are in the library but not listed (the \
                 list is kept to {} entries, the most used tools): find them with search_tools \
                 and call them with run_tool.",
                if names.is_empty() {
                    "none but the built-ins".to_string()
                } else {
                    names.join(", ")
                },
                mounted.hidden,
                self.settings.list_limit
            )
        } else {
            format!(
                "Tools mounted now: {}.",
                if names.is_empty() {
                    "none yet".to_string()
                } else {
                    names.join(", ")
                }
            )
        };
        format!(
            "autotool grows tools. When you need something you have no tool for, first \
             search_tools {{query}}: it finds tools already made, by what they do, ranked by \
             relevance, success rate and trust. If none fits, write one with create_tool (a \
             small Python MCP server; the description shows the template); it is verified, \
             sandboxed and mounted as <tool>__<function>, for this and every later session. If \
             your tool list does not refresh, call any created function through run_tool. \
             {library} {}",
            crate::mcp::handler::keys_sentence(&self.secrets().names)
        )
    }

    /// Remember a connected host of the older protocol eras, to notify of changes.
    pub fn set_legacy_peer(&self, peer: Peer<RoleServer>) {
        self.legacy_peers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(peer);
    }

    /// A receiver that wakes on every change of the mounted list.
    pub fn subscribe_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Tell every connected host the tool list changed, in its era.
    pub async fn notify_changed(&self) {
        self.changes.send_modify(|g| *g += 1);
        let peers: Vec<Peer<RoleServer>> = self
            .legacy_peers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut gone = Vec::new();
        for (i, peer) in peers.iter().enumerate() {
            if peer.is_transport_closed() {
                gone.push(i);
                continue;
            }
            if let Err(e) = peer.notify_tool_list_changed().await {
                tracing::debug!("list_changed not delivered: {e}");
            }
        }
        if !gone.is_empty() {
            let mut peers = self.legacy_peers.lock().unwrap_or_else(|p| p.into_inner());
            peers.retain(|p| !p.is_transport_closed());
        }
    }

    /// Rebuild the snapshot from the registry. Returns whether the mounted list changed.
    pub fn reload(&self) -> anyhow::Result<bool> {
        self.reload_with(false)
    }

    /// [`Self::reload`], rebuilding the tool list even when the registry did not change (the
    /// key names it mentions did).
    ///
    /// Besides the tools, it reads in one query each the recent outcomes of every current
    /// version (for `search_tools`) and every tool's calls over [`USAGE_WINDOW`] (for the list
    /// limit): the list follows usage when the registry changes, not call by call.
    pub fn reload_with(&self, force: bool) -> anyhow::Result<bool> {
        let generation = Some(self.registry.generation()?);
        if generation == self.mounted().generation && !force {
            return Ok(false);
        }
        let mut tools = BTreeMap::new();
        let mut texts: Vec<String> = Vec::new();
        self.registry.current_each(|v| {
            texts.push(search_text(&v));
            tools.insert(v.name.clone(), mounted_from(v));
        })?;
        let ledger = self.registry.ledger();
        let window = self.settings.lifecycle.window;
        let (last, outcomes) = ledger.recent_outcomes_of_current(window)?;
        let mut health = RecentCalls {
            last,
            tools: HashMap::with_capacity(tools.len()),
        };
        for t in tools.values() {
            let recent: VecDeque<CallKind> = outcomes
                .get(&t.name)
                .map(|o| o.iter().copied().collect())
                .unwrap_or_default();
            health.tools.insert(t.name.clone(), (t.version, recent));
        }
        let since =
            crate::ledger::now_ms() - i64::try_from(USAGE_WINDOW.as_millis()).unwrap_or(i64::MAX);
        let uses = ledger.uses_since(since)?;
        let listed: Vec<&MountedTool> = tools.values().filter(|t| t.state.listed()).collect();
        let candidates: Vec<autotool_policy::listing::Candidate> = listed
            .iter()
            .map(|t| autotool_policy::listing::Candidate {
                name: t.name.clone(),
                uses: uses.get(&t.name).copied().unwrap_or(0),
                entries: t.functions.len(),
            })
            .collect();
        let shown = autotool_policy::listing::shown(
            &candidates,
            crate::mcp::handler::BUILTINS + usize::from(self.synthesize_offered()),
            self.settings.list_limit,
        );
        // Both come sorted by name.
        let index = Index::new(
            tools
                .values()
                .zip(texts)
                .map(|(t, text)| {
                    let (ok, failures) = health.counts(&t.name);
                    Entry {
                        name: t.name.clone(),
                        text,
                        state: t.state,
                        ok,
                        failures,
                    }
                })
                .collect(),
        );
        let old = self.mounted();
        let changed = old.tools.len() != tools.len()
            || old.shown != shown
            || old
                .tools
                .iter()
                .zip(tools.iter())
                .any(|((a, ta), (b, tb))| {
                    a != b || ta.version != tb.version || ta.state != tb.state
                });
        let list = crate::mcp::handler::tool_list(
            listed.iter().copied().filter(|t| shown.contains(&t.name)),
            &self.secrets(),
            self.synthesize_offered(),
            self.settings.list_limit,
        );
        let hidden = listed.len() - shown.len();
        *self.mounted.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(Mounted {
            generation,
            tools,
            list,
            shown,
            hidden,
            index: Arc::new(index),
            health: Arc::new(health),
        });
        Ok(changed || force)
    }

    /// The Python runtime, created the first time it is needed (progress on stderr).
    pub async fn runtime(&self) -> Result<Python, String> {
        let dir = self.home.runtime_dir();
        self.runtime
            .get_or_try_init(|| async move {
                tokio::task::spawn_blocking(move || {
                    let mut err = std::io::stderr();
                    crate::tool::runtime::ensure_runtime(&dir, &mut err)
                })
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())
            })
            .await
            .cloned()
    }

    /// Which declared keys the tool did not get, and why, for the agent.
    fn key_notes(&self, subject: &Subject, granted: &BTreeMap<String, String>) -> Vec<String> {
        let secrets = self.secrets();
        subject
            .declared
            .iter()
            .filter(|k| !granted.contains_key(*k))
            .map(|k| {
                if !secrets.has_value(k) {
                    format!(
                        "{k} is not set: ask the user to run `autotool keys add {k}`, then call \
                         create_tool again"
                    )
                } else {
                    format!(
                        "{k} is not approved for {tool}: the user can run `autotool tools \
                         approve {tool} {k}`",
                        tool = subject.tool
                    )
                }
            })
            .collect()
    }

    /// The egress proxy for `tool` holding `keys`: where it may go is the intersection of their
    /// allowlists, plus localhost; refusals are audit events.
    fn egress(&self, tool: &str, keys: &BTreeMap<String, String>) -> crate::egress::EgressConfig {
        let mut lists = autotool_policy::hosts::KeyLists::new(tool);
        let secrets = self.secrets();
        for key in keys.keys() {
            lists = lists.with_key(autotool_policy::hosts::KeyAllowlist {
                key: key.clone(),
                rules: secrets.allowlists().get(key).cloned(),
            });
        }
        let mut config = crate::egress::EgressConfig::new(lists);
        let registry = self.registry.clone();
        let tool_name = tool.to_string();
        config.events = Some(Arc::new(move |event: crate::egress::EgressEvent| {
            let detail = format!("{}: {event}", event.target);
            tracing::warn!(tool = tool_name, "egress refused: {detail}");
            let _ = registry.event(Some(&tool_name), "egress_denied", &detail);
        }));
        config
    }

    fn environment(&self, tool: &str, keys: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut env = autotool_policy::launch::tool_environment(keys, &self.api_bases, None);
        if self.settings.sandbox == SandboxMode::Off {
            // Unconfined, the sandbox's /tmp and home do not exist: a private scratch directory
            // under the home stands in for both.
            let scratch = self.home.root().join("scratch").join(tool);
            let _ = std::fs::create_dir_all(&scratch);
            let s = scratch.display().to_string();
            env.insert("HOME".into(), s.clone());
            env.insert("TMPDIR".into(), s);
        }
        env
    }

    fn spec(
        &self,
        tool: &str,
        dir: PathBuf,
        python: Python,
        keys: &BTreeMap<String, String>,
    ) -> ToolSpec {
        let mut spec = ToolSpec::new(dir, "tool.py", python, self.settings.sandbox);
        spec.env = self.environment(tool, keys);
        spec.egress = Some(self.egress(tool, keys));
        spec.limits = self.settings.limits;
        spec.launcher = self.settings.launcher.clone();
        spec
    }

    /// What consent for `code` as tool `name` is about: the keys it declares, read statically.
    pub fn subject_for_code(name: &str, code: &str) -> Subject {
        Subject {
            tool: name.to_string(),
            code_hash: crate::registry::code_hash(code.as_bytes()),
            declared: crate::verify::required_env(code).unwrap_or_default(),
        }
    }

    /// A fingerprint of what a process was given: the keys, their values and allowlists. A
    /// warm process whose fingerprint differs from the call's is replaced.
    fn fingerprint(&self, keys: &BTreeMap<String, String>) -> u64 {
        use std::hash::{BuildHasher, Hash, Hasher};
        let secrets = self.secrets();
        let mut h = self.grants_hasher.build_hasher();
        for (k, v) in keys {
            k.hash(&mut h);
            v.hash(&mut h);
            secrets.allowlists().get(k).hash(&mut h);
        }
        h.finish()
    }

    /// `<tool>__<function>` → (tool, function), when mounted and listed.
    pub fn resolve_mounted(&self, name: &str) -> Option<(String, String)> {
        let (tool, function) = name.split_once(crate::mcp::handler::SEPARATOR)?;
        let mounted = self.mounted();
        let t = mounted.tools.get(tool)?;
        if !t.state.listed() {
            return None;
        }
        t.functions
            .iter()
            .any(|f| f.name == function)
            .then(|| (tool.to_string(), function.to_string()))
    }

    /// Why `tool` is not listed (quarantined, retired, draft), if it is a tool that is not.
    pub fn unlisted(&self, tool: &str) -> Option<String> {
        let mounted = self.mounted();
        let t = mounted.tools.get(tool)?;
        if t.state.listed() {
            return None;
        }
        let why = self
            .registry
            .ledger()
            .state_reason(tool)
            .ok()
            .flatten()
            .unwrap_or_default();
        Some(format!(
            "{tool} is {}{}",
            t.state.as_str(),
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({why})")
            }
        ))
    }

    /// What a call of `tool`, which is off the list, is told: why, and what can be done.
    /// `None` when `tool` is listed (or unknown).
    pub fn off_list(&self, tool: &str) -> Option<String> {
        let why = self.unlisted(tool)?;
        let draft = self
            .mounted()
            .tools
            .get(tool)
            .is_some_and(|t| t.state == State::Draft);
        Some(if draft {
            format!(
                "{why}. Nothing runs it, not even with force, until it is verified again: \
                 autotool does that by itself when its file changes, or call create_tool with \
                 its code."
            )
        } else {
            format!(
                "{why}. It is off the tool list; run_tool with \"force\": true calls it anyway, \
                 and the user can run `autotool tools rehab {tool}` to put it back on probation."
            )
        })
    }

    /// Call `function` of mounted `tool`. A quarantined or retired tool answers only with
    /// `force` (through `run_tool`), and the result says what it is.
    pub async fn call_function(
        &self,
        tool: &str,
        function: &str,
        arguments: JsonObject,
        force: bool,
    ) -> CallToolResult {
        let mounted = self.mounted();
        let Some(t) = mounted.tools.get(tool) else {
            let names: Vec<&str> = mounted.tools.keys().map(String::as_str).collect();
            return error_result(format!(
                "no tool named {tool:?} is mounted; tools: {}",
                if names.is_empty() {
                    "none (create one with create_tool)".into()
                } else {
                    names.join(", ")
                }
            ));
        };
        if !t.functions.iter().any(|f| f.name == function) {
            let names: Vec<&str> = t.functions.iter().map(|f| f.name.as_str()).collect();
            return error_result(format!(
                "tool {tool:?} has no function {function:?}; its functions: {}",
                names.join(", ")
            ));
        }
        let unlisted = self.unlisted(tool);
        if unlisted.is_some() && (!force || t.state == State::Draft) {
            return error_result(self.off_list(tool).unwrap_or_default());
        }
        let python = match self.runtime().await {
            Ok(p) => p,
            Err(e) => return error_result(format!("the Python runtime is not available: {e}")),
        };
        let keys = self.granted(&t.subject());
        let what = Launchable {
            version: t.version,
            grants: self.fingerprint(&keys),
            spec: self.spec(tool, t.dir.clone(), python, &keys),
            pin: Some(PinCheck {
                file: t.dir.join(crate::registry::TOOL_FILE),
                code_hash: t.code_hash.clone(),
                description: t.description.clone(),
                functions: t.functions.clone(),
            }),
        };
        let started = Instant::now();
        let outcome = match self.pool.get(tool, &what).await {
            Ok(process) => process
                .call(function, arguments, self.settings.call_timeout)
                .await
                .map_err(|e| e.to_string()),
            Err(StartError::Unpinned(b)) => {
                self.break_pin(t, &b).await;
                return error_result(self.secrets().redact(&format!(
                    "{tool} v{} was refused: {}. It is off the tool list until it is verified \
                     again; autotool is doing that now, and a verified version is listed as a \
                     new version (watch for the list to change, or search_tools).",
                    t.version,
                    b.reason()
                )));
            }
            Err(StartError::Process(e)) => Err(format!("the tool could not be started: {e}")),
        };
        let duration = started.elapsed();
        match outcome {
            Ok(out) => {
                // A ToolError is the tool answering; an unexpected exception is it failing.
                let kind = if !out.is_error {
                    CallKind::Ok
                } else if out.unexpected() {
                    CallKind::Failure
                } else {
                    CallKind::ToolError
                };
                let first_text = out.content.iter().find_map(|c| match c {
                    ContentBlock::Text(t) => Some(t.text.clone()),
                    _ => None,
                });
                self.record(
                    tool,
                    t.version,
                    function,
                    duration,
                    kind,
                    out.is_error.then(|| first_text.unwrap_or_default()),
                );
                let mut content = out.content;
                if out.is_error && !out.stderr.trim().is_empty() {
                    // The end of stderr holds the traceback: keep the tail, within a quarter of
                    // the output cap, so a flood before the error cannot push it out.
                    let budget = (self.settings.max_output_bytes / 4).min(16 << 10);
                    content.push(text(format!(
                        "tool stderr:\n{}",
                        crate::verify::tail_of(out.stderr.trim_end(), budget)
                    )));
                }
                let mut result = if out.is_error {
                    CallToolResult::error(content)
                } else {
                    CallToolResult::success(content)
                };
                result.structured_content = out.structured_content;
                if let Some(why) = &unlisted {
                    result.content.insert(
                        0,
                        text(format!(
                            "[called with force: {why}; it is off the tool list]"
                        )),
                    );
                }
                self.lifecycle_after_call(tool, t.version, t.state).await;
                self.secrets().redact_result(self.cap(result))
            }
            Err(e) => {
                let e = self.secrets().redact(&e);
                self.record(
                    tool,
                    t.version,
                    function,
                    duration,
                    CallKind::Failure,
                    Some(e.clone()),
                );
                self.lifecycle_after_call(tool, t.version, t.state).await;
                error_result(format!("calling {tool}.{function} failed: {e}"))
            }
        }
    }

    /// Promote or quarantine `tool`'s version by its recent calls; a change is recorded with its
    /// reason and every host hears of the new list.
    async fn lifecycle_after_call(&self, tool: &str, version: u32, state: crate::ledger::State) {
        let thresholds = &self.settings.lifecycle;
        let recent = match self.registry.ledger().recent_outcomes(
            tool,
            version,
            thresholds
                .window
                .max(thresholds.promote_after)
                .max(thresholds.quarantine_consecutive),
        ) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("reading recent calls: {e}");
                return;
            }
        };
        let kinds: Vec<_> = recent.iter().map(|o| *o).collect();
        let health = autotool_policy::lifecycle::Health::of(&kinds, thresholds.window);
        let Some(change) = autotool_policy::lifecycle::after_call(state, &health, thresholds)
        else {
            return;
        };
        let to = change.to;
        tracing::info!(
            tool,
            version,
            to = to.as_str(),
            reason = change.reason,
            "lifecycle"
        );
        // Only from the state decided on: a pin broken meanwhile (draft) is not undone.
        match self
            .registry
            .ledger()
            .set_state_from(tool, version, state, to, &change.reason)
        {
            Ok(true) => {
                if let Err(e) = self.reload() {
                    tracing::warn!("reloading the registry: {e}");
                }
                self.notify_changed().await;
            }
            Ok(false) => {}
            Err(e) => tracing::warn!("recording the state change: {e}"),
        }
    }

    fn record(
        &self,
        tool: &str,
        version: u32,
        function: &str,
        duration: Duration,
        outcome: CallKind,
        error: Option<String>,
    ) {
        // The ledger never holds a secret value: error text is redacted on the way in.
        let error = error.map(|e| self.secrets().redact(&e));
        let call = CallRecord {
            tool: tool.to_string(),
            version,
            function: function.to_string(),
            started_at: std::time::SystemTime::now() - duration,
            duration,
            outcome,
            error,
        };
        if let Err(e) = self.registry.record_call(&call) {
            tracing::warn!("recording the call in the ledger failed: {e}");
        }
    }

    /// Truncate text beyond the output cap, with a note; drop oversized structured content.
    fn cap(&self, mut result: CallToolResult) -> CallToolResult {
        let cap = self.settings.max_output_bytes;
        let mut used = 0usize;
        let mut cut = 0usize;
        for block in &mut result.content {
            if let ContentBlock::Text(t) = block {
                let room = cap.saturating_sub(used);
                if t.text.len() > room {
                    let mut end = room;
                    while end > 0 && !t.text.is_char_boundary(end) {
                        end -= 1;
                    }
                    cut += t.text.len() - end;
                    t.text.truncate(end);
                }
                used += t.text.len();
            }
        }
        let structured_len = result
            .structured_content
            .as_ref()
            .map(|v| v.to_string().len())
            .unwrap_or(0);
        if structured_len > cap {
            result.structured_content = None;
            cut += structured_len;
        }
        if cut > 0 {
            result.content.push(text(format!(
                "[output truncated: {cut} bytes over autotool's cap of {cap} bytes]"
            )));
        }
        result
    }

    /// The `create_tool` call.
    pub async fn create_tool(&self, args: JsonObject) -> CallToolResult {
        let name = args.get("name").and_then(Value::as_str).unwrap_or("");
        let Some(code) = args.get("code").and_then(Value::as_str) else {
            return error_result("create_tool needs `code`: the whole Python file, as a string");
        };
        if !valid_tool_name(name) {
            return error_result(format!(
                "invalid tool name {name:?}: it must match ^[a-z][a-z0-9_]{{0,39}}$ and not \
                 contain `__`"
            ));
        }
        if code.len() > self.settings.max_code_bytes {
            return error_result(format!(
                "the code is {} bytes; autotool accepts at most {} bytes per tool",
                code.len(),
                self.settings.max_code_bytes
            ));
        }
        let description = args
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let smoke = match args.get("smoke_test") {
            None | Some(Value::Null) => None,
            Some(Value::Object(o)) => {
                let Some(function) = o.get("function").and_then(Value::as_str) else {
                    return error_result("smoke_test needs `function` (a string)");
                };
                let arguments = match o.get("arguments") {
                    None | Some(Value::Null) => JsonObject::new(),
                    Some(Value::Object(a)) => a.clone(),
                    Some(_) => return error_result("smoke_test.arguments must be an object"),
                };
                Some(crate::verify::SmokeTest {
                    function: function.to_string(),
                    arguments,
                })
            }
            Some(_) => return error_result("smoke_test must be an object {function, arguments}"),
        };
        let thoroughness = match args.get("verify") {
            None | Some(Value::Null) => Thoroughness::default(),
            Some(v) => match v.as_str().and_then(Thoroughness::named) {
                Some(t) => t,
                None => {
                    return error_result(format!(
                        "verify must be \"quick\" (no probes), \"standard\" (the default: probes \
                         for tools that declare no keys) or \"thorough\" (probes even with keys), \
                         not {v}"
                    ));
                }
            },
        };
        self.create(name, code, &description, smoke, thoroughness)
            .await
    }

    /// Stage, verify, commit and mount `code` as a new version of `name`. Every way a tool
    /// enters comes through here, so every one passes the same gate.
    pub async fn create(
        &self,
        name: &str,
        code: &str,
        description: &str,
        smoke: Option<crate::verify::SmokeTest>,
        thoroughness: Thoroughness,
    ) -> CallToolResult {
        let python = match self.runtime().await {
            Ok(p) => p,
            Err(e) => return error_result(format!("the Python runtime is not available: {e}")),
        };
        let staged = match self.registry.stage(name, code) {
            Ok(s) => s,
            Err(e) => return error_result(format!("create_tool failed: {e}")),
        };
        // The static read verify repeats; here it decides which keys the process gets: those
        // the user approved (the host asked before this call ran) or, for a tool placed by
        // hand, approved earlier.
        let subject = Self::subject_for_code(name, code);
        let keys = self.granted(&subject);
        let grants = self.fingerprint(&keys);
        let spec = self.spec(name, staged.dir().to_path_buf(), python, &keys);
        let mut request = crate::verify::VerifyRequest::new(name, code, spec);
        request.smoke_test = smoke;
        request.thoroughness = thoroughness;
        let verified = match crate::verify::verify(request).await {
            Ok(v) => v,
            Err(failure) => {
                let _ = self.registry.discard(staged);
                let _ = self.registry.event(
                    Some(name),
                    kind::VERIFICATION_FAILED,
                    &self
                        .secrets()
                        .redact(&format!("{}: {}", failure.stage, failure.message)),
                );
                return error_result(self.secrets().redact(&failure.to_string()));
            }
        };
        if let Some(f) = verified
            .tools
            .iter()
            .find(|f| name.len() + crate::mcp::handler::SEPARATOR.len() + f.name.len() > 64)
        {
            let _ = self.registry.discard(staged);
            verified.process.shutdown().await;
            return error_result(format!(
                "verification failed at list_tools: `{name}{}{}` is longer than the 64 characters \
                 hosts accept for a tool name; shorten the tool or the function name",
                crate::mcp::handler::SEPARATOR,
                f.name
            ));
        }
        let manifest = Manifest {
            description: description.to_string(),
            required_env: verified.required_env.clone(),
            functions: verified
                .tools
                .iter()
                .cloned()
                .map(FunctionSpec::from)
                .collect(),
        };
        let version = match self.registry.commit(staged, manifest) {
            Ok(v) => v,
            Err(e) => {
                verified.process.shutdown().await;
                return error_result(format!("create_tool failed storing the tool: {e}"));
            }
        };
        let functions = verified.tools.clone();
        let robustness = verified.robustness.to_string();
        self.pool
            .adopt(name, version.version, grants, verified.process)
            .await;
        if let Err(e) = self.reload() {
            tracing::warn!("reloading the registry: {e}");
        }
        self.notify_changed().await;
        let mounted: Vec<Value> = functions
            .iter()
            .map(|f| {
                json!({
                    "name": format!("{name}{}{}", crate::mcp::handler::SEPARATOR, f.name),
                    "description": f.description,
                    "inputSchema": f.input_schema,
                    "outputSchema": f.output_schema,
                })
            })
            .collect();
        let notes = self.key_notes(&subject, &keys);
        let required_env = &subject.declared;
        let summary = json!({
            "tool": name,
            "version": version.version,
            "functions": mounted,
            "required_env": required_env,
            "keys_granted": keys.keys().collect::<Vec<_>>(),
            "key_notes": notes,
            "robustness": robustness,
        });
        let names: Vec<String> = functions
            .iter()
            .map(|f| format!("{name}{}{}", crate::mcp::handler::SEPARATOR, f.name))
            .collect();
        let listed_now = if self.mounted().shown.contains(name) {
            "Hosts that refresh their tool list see them now".to_string()
        } else {
            format!(
                "They are not in the tool list: the library holds more tools than the list's \
                 {} entries, which go to the most used tools (search_tools finds the rest)",
                self.settings.list_limit
            )
        };
        let mut result = CallToolResult::success(vec![
            text(format!(
                "Created {name} v{}: mounted {}. {listed_now}; any host can call them right away \
                 with run_tool {{\"tool\": \"{name}\", \"function\": …, \"arguments\": {{…}}}}.",
                version.version,
                names.join(", ")
            )),
            text(summary.to_string()),
        ]);
        for note in &notes {
            result.content.push(text(note.clone()));
        }
        result.structured_content = Some(summary);
        self.secrets().redact_result(result)
    }

    /// One round of the watcher: pick up changes made by other processes and tools placed by
    /// hand. Returns whether the mounted list changed.
    pub async fn poll(&self) -> bool {
        let before = self.mounted();
        let names_changed = self.refresh_keys();
        let model_changed = self.refresh_model();
        let changed = match self.reload_with(names_changed || model_changed) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("reading the registry: {e}");
                false
            }
        };
        if changed {
            let after = self.mounted();
            for name in before.tools.keys() {
                if !after.tools.contains_key(name) {
                    self.pool.stop(name).await;
                }
            }
            self.notify_changed().await;
        }
        self.check_pins().await;
        self.verify_queued().await;
        self.verify_hand_placed().await;
        changed
    }

    /// Hold every mounted version to its file ([`crate::pin`]): a `stat` each round, a hash
    /// when the stat moved (or is too recent to trust). A changed or missing file takes the
    /// version off the list at once and stops its process; changed code is verified again as
    /// a new version (by one supervisor of those sharing the home); a file put back as it was
    /// puts its version back on probation.
    async fn check_pins(&self) {
        let mounted = self.mounted();
        let mut moved = Vec::new();
        {
            let mut watched = self.watched.lock().unwrap_or_else(|p| p.into_inner());
            watched.retain(|name, _| mounted.tools.contains_key(name));
            for t in mounted.tools.values() {
                let path = t.dir.join(crate::registry::TOOL_FILE);
                let stamp = FileStamp::of(&path);
                let seen = watched.get(&t.name).filter(|w| w.version == t.version);
                if let Some(w) = seen
                    && w.stamp == stamp
                    && stamp.is_some_and(|s| s.settled())
                {
                    continue;
                }
                let state = match stamp {
                    Some(_) => crate::pin::file_state(&path, &t.code_hash),
                    None => FileState::Missing("it is gone".into()),
                };
                let before = seen.map(|w| w.state.clone());
                watched.insert(
                    t.name.clone(),
                    Watched {
                        version: t.version,
                        stamp,
                        state: state.clone(),
                    },
                );
                if before.as_ref() != Some(&state) {
                    moved.push((t.clone(), before, state));
                }
            }
        }
        for (t, before, state) in moved {
            match state {
                FileState::Pinned => {
                    if t.state != State::Draft {
                        continue;
                    }
                    if before.is_some() {
                        self.restore_pin(&t).await;
                    } else {
                        // Off the list since before this process looked (a schema change, or a
                        // verification nobody finished): verify it again.
                        self.verify_again_claimed(&t, None).await;
                    }
                }
                FileState::Changed(now) => {
                    let b = Break::FileChanged { now: now.clone() };
                    if t.state != State::Draft {
                        self.break_pin(&t, &b).await;
                    }
                    self.pool.stop(&t.name).await;
                    self.verify_again_claimed(&t, Some(now)).await;
                }
                FileState::Missing(why) => {
                    if t.state != State::Draft {
                        self.break_pin(&t, &Break::FileMissing { why }).await;
                    }
                    self.pool.stop(&t.name).await;
                }
            }
        }
    }

    /// A version whose file is back to its pin: on probation again.
    async fn restore_pin(&self, t: &MountedTool) {
        match self.registry.ledger().set_state_from(
            &t.name,
            t.version,
            State::Draft,
            State::Probation,
            "its tool.py is back to the code it was verified with",
        ) {
            Ok(true) => {
                tracing::info!(tool = t.name, version = t.version, "pin restored");
                if let Err(e) = self.reload() {
                    tracing::warn!("reloading the registry: {e}");
                }
                self.notify_changed().await;
            }
            Ok(false) => {}
            Err(e) => tracing::warn!("recording the state change: {e}"),
        }
    }

    /// Take a version whose pin broke off every list (every supervisor sharing the home follows
    /// within a poll) and stop its process; a schema change is queued to be verified again.
    async fn break_pin(&self, t: &MountedTool, b: &Break) {
        let reason = self.secrets().redact(&b.reason());
        tracing::warn!(tool = t.name, version = t.version, "pin broken: {reason}");
        match self
            .registry
            .ledger()
            .break_pin(&t.name, t.version, &reason)
        {
            Ok(true) => {
                if let Err(e) = self.reload() {
                    tracing::warn!("reloading the registry: {e}");
                }
                self.notify_changed().await;
            }
            Ok(false) => {}
            Err(e) => tracing::warn!("recording the broken pin: {e}"),
        }
        self.pool.stop(&t.name).await;
        if let Break::Schemas { now, .. } = b
            && self.claim(t, &format!("pin {now}"))
        {
            self.reverify
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((t.name.clone(), t.version));
        }
    }

    /// Whether this process takes on verifying `t` again for this change (`what`): one of the
    /// supervisors sharing the home does, once.
    fn claim(&self, t: &MountedTool, what: &str) -> bool {
        self.registry
            .ledger()
            .claim_once(
                &t.name,
                kind::VERIFYING_AGAIN,
                &format!("version {}: {what}", t.version),
            )
            .unwrap_or_else(|e| {
                tracing::warn!("claiming a verification: {e}");
                false
            })
    }

    /// Verify `t`'s file again (its code now, whose sha256 is `now`; `None`: the pinned code)
    /// when this process claims it.
    async fn verify_again_claimed(&self, t: &MountedTool, now: Option<String>) {
        let hash = now.unwrap_or_else(|| t.code_hash.clone());
        if self.claim(t, &format!("code {hash}")) {
            self.verify_again(t, &hash).await;
        }
    }

    /// Versions whose process reported other schemas: verify their code again.
    async fn verify_queued(&self) {
        let queued = std::mem::take(&mut *self.reverify.lock().unwrap_or_else(|p| p.into_inner()));
        for (name, version) in queued {
            let mounted = self.mounted();
            let Some(t) = mounted.tools.get(&name) else {
                continue;
            };
            if t.version == version && t.state == State::Draft {
                self.verify_again(t, &t.code_hash).await;
            }
        }
    }

    /// Verify the code in `t`'s file (if its sha256 is still `hash`) as a new version of the
    /// tool, like a tool placed by hand. A failure is an audit event and a log line; the
    /// version stays off the list.
    async fn verify_again(&self, t: &MountedTool, hash: &str) {
        let path = t.dir.join(crate::registry::TOOL_FILE);
        let Ok(code) = std::fs::read_to_string(&path) else {
            return;
        };
        if crate::registry::code_hash(code.as_bytes()) != hash {
            // Changed again meanwhile: the next round sees it.
            return;
        }
        tracing::info!(
            tool = t.name,
            version = t.version,
            "verifying a changed version again"
        );
        // New code entering (a file changed on disk) passes the full gate, probes included,
        // like a tool placed by hand. The pinned code itself (its process reported other
        // schemas) passed the gate when it entered, at the level it was created with, which is
        // not recorded: its schemas are read again without probing it a second time.
        let level = if hash == t.code_hash {
            crate::verify::Thoroughness::Quick
        } else {
            crate::verify::Thoroughness::default()
        };
        let result = self
            .create(&t.name, &code, &t.description, None, level)
            .await;
        if result.is_error == Some(true) {
            let why = result
                .content
                .iter()
                .find_map(|c| match c {
                    ContentBlock::Text(t) => Some(t.text.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            tracing::warn!(
                tool = t.name,
                "the changed version failed verification and stays off the list: {why}"
            );
        }
    }

    /// The `search_tools` call: the tools best for `query`, with what it takes to call them.
    pub fn search_tools(&self, args: &JsonObject) -> CallToolResult {
        let query = args
            .get("query")
            .and_then(Value::as_str)
            .map(str::trim)
            .unwrap_or("");
        if query.is_empty() {
            return error_result(
                "search_tools needs `query`: words for what you need, for example \"weather \
                 forecast for a city\"",
            );
        }
        let limit = match args.get("limit") {
            None | Some(Value::Null) => SEARCH_DEFAULT,
            Some(v) => match v.as_u64() {
                Some(n @ 1..=SEARCH_MAX) => usize::try_from(n).unwrap_or(SEARCH_DEFAULT),
                _ => {
                    return error_result(format!(
                        "limit must be an integer from 1 to {SEARCH_MAX}"
                    ));
                }
            },
        };
        let mounted = self.mounted();
        let weights = autotool_policy::search::WEIGHTS;
        let (hits, counts) = {
            let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
            if recent.0 != mounted.generation {
                *recent = (mounted.generation, (*mounted.health).clone());
            }
            match self.registry.ledger().calls_after(recent.1.last) {
                Ok(calls) => recent.1.add(
                    calls,
                    usize::try_from(self.settings.lifecycle.window).unwrap_or(usize::MAX),
                ),
                Err(e) => tracing::warn!("reading recent calls: {e}"),
            }
            let hits = mounted
                .index
                .search_with(query, limit, &weights, |name| Some(recent.1.counts(name)));
            let counts: Vec<(u32, u32)> = hits.iter().map(|h| recent.1.counts(&h.name)).collect();
            (hits, counts)
        };
        let round = |x: f64| (x * 1000.0).round() / 1000.0;
        let results: Vec<Value> = hits
            .iter()
            .zip(counts)
            .filter_map(|(h, (ok, failures))| {
                let t = mounted.tools.get(&h.name)?;
                let functions: Vec<Value> = t
                    .functions
                    .iter()
                    .map(StoredFunction::spec)
                    .map(|f| {
                        json!({
                            "name": f.name,
                            "mounted_as": format!("{}{}{}", t.name, crate::mcp::handler::SEPARATOR, f.name),
                            "description": f.description,
                            "inputSchema": f.input_schema,
                            "outputSchema": f.output_schema,
                        })
                    })
                    .collect();
                let first = t.functions.first().map(|f| f.name.as_str()).unwrap_or("");
                Some(json!({
                    "tool": t.name,
                    "version": t.version,
                    "description": t.description,
                    "state": t.state.as_str(),
                    "in_tools_list": mounted.shown.contains(&t.name),
                    "success_rate": round(h.success),
                    "recent_calls": {"ok": ok, "failures": failures},
                    "score": {
                        "total": round(h.score),
                        "relevance": round(h.relevance),
                        "success": round(h.success),
                        "trust": round(h.trust),
                    },
                    "functions": functions,
                    "call": format!(
                        "run_tool {{\"tool\": \"{}\", \"function\": \"{first}\", \"arguments\": {{…}}}}",
                        t.name
                    ),
                }))
            })
            .collect();
        let summary = json!({
            "query": query,
            "weights": {"text": weights.text, "health": weights.health, "trust": weights.trust},
            "results": results,
        });
        let lead = if results.is_empty() {
            format!(
                "No tool matches {query:?}. Write one with create_tool (its description shows \
                 the template)."
            )
        } else {
            format!(
                "{} tool{} for {query:?}, best first (score = {} × text relevance + {} × \
                 success rate + {} × trust). Call a function with run_tool {{\"tool\", \
                 \"function\", \"arguments\"}}, or by its mounted name when it is in your tool \
                 list.",
                results.len(),
                if results.len() == 1 { "" } else { "s" },
                weights.text,
                weights.health,
                weights.trust
            )
        };
        let mut result = CallToolResult::success(vec![text(lead), text(summary.to_string())]);
        result.structured_content = Some(summary);
        self.secrets().redact_result(self.cap(result))
    }

    async fn verify_hand_placed(&self) {
        let placed = match self.registry.hand_placed() {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("listing hand-placed tools: {e}");
                return;
            }
        };
        for (name, path) in placed {
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            let seen = (meta.len(), meta.modified().ok());
            if self
                .rejected
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&path)
                == Some(&seen)
            {
                continue;
            }
            let Ok(code) = std::fs::read_to_string(&path) else {
                continue;
            };
            tracing::info!(tool = name, path = %path.display(), "verifying a tool placed by hand");
            let result = self
                .create(&name, &code, "", None, Thoroughness::default())
                .await;
            if result.is_error == Some(true) {
                let why = result
                    .content
                    .iter()
                    .find_map(|c| match c {
                        ContentBlock::Text(t) => Some(t.text.clone()),
                        _ => None,
                    })
                    .unwrap_or_default();
                tracing::warn!(tool = name, "hand-placed tool failed verification: {why}");
                self.rejected
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(path, seen);
            }
        }
    }
}

fn mounted_from(v: ToolVersion) -> MountedTool {
    MountedTool {
        functions: v.functions.iter().map(StoredFunction::new).collect(),
        name: v.name,
        version: v.version,
        description: v.description,
        dir: v.dir,
        required_env: v.required_env,
        code_hash: v.code_hash,
        state: v.state,
    }
}

/// What `search_tools` matches a tool by: its name and description, and its functions' names,
/// descriptions and parameter names.
fn search_text(t: &ToolVersion) -> String {
    let mut text = format!("{} {}", t.name, t.description);
    for f in t.functions.iter() {
        text.push(' ');
        text.push_str(&f.name);
        if let Some(d) = &f.description {
            text.push(' ');
            text.push_str(d);
        }
        if let Some(Value::Object(properties)) = f.input_schema.get("properties") {
            for p in properties.keys() {
                text.push(' ');
                text.push_str(p);
            }
        }
    }
    text
}
