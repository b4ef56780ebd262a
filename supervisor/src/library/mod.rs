//! The library one `autotool serve` keeps, in no protocol's terms: the state its connections
//! share and everything a tool goes through between arriving and answering. The protocol edge
//! ([`crate::mcp`]) parses what hosts send into typed requests, calls in here, and renders the
//! typed results; nothing here knows an MCP server type.
//!
//! Layout:
//! - [`settings`]: what serve was told;
//! - [`snapshot`]: the mounted versions at one registry generation, rebuilt when it changes;
//! - [`grants`]: the keys (names, values, allowlists, the redactor), which of them a version is
//!   granted, and the process it runs as (environment, egress);
//! - [`create`]: stage → verify → commit → adopt: `Result<Created, CreateError>`, with the
//!   verified candidate in between ([`Checked`]) for those that race;
//! - [`race`]: candidates for one need checked side by side, the best one committed;
//! - [`call`]: a call of a mounted function, recorded, and the lifecycle after it:
//!   `Result<Called, CallError>`;
//! - [`watch`]: the poll round: changes by other processes, keys, pins, hand-placed files;
//! - [`reach`]: what a tool can reach here, measured by a probe tool at serve's start;
//! - [`reverify`]: a current version verified again on request (`autotool tools verify`);
//! - [`search`]: `search_tools` ranking;
//! - [`trigger`]: the trigger check of a created tool, with autotool's own model;
//! - [`uses`]: tools built from tools: what a tool's `USES` channel may call, and how.

pub mod call;
pub mod create;
pub mod declared_reach;
pub mod grants;
pub mod offers;
pub mod packages;
pub mod race;
pub mod reach;
pub mod reverify;
pub mod search;
pub mod settings;
pub mod snapshot;
pub mod trigger;
pub mod uses;
pub mod watch;

pub use call::{CallError, Called};
pub use create::{Checked, CreateError, CreateRequest, Created, Prepared};
pub use grants::{Grants, Secrets};
pub use settings::Settings;
pub use snapshot::{RecentCalls, Snapshot};

use crate::consent::Consent;
use crate::credentials::KeyStore;
use crate::home::Home;
use crate::registry::Registry;
use crate::tool::pool::Pool;
use crate::tool::runtime::{Preparer, Python};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

/// Why a library could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Registry(#[from] crate::registry::RegistryError),
    #[error("drawing a random key from /dev/urandom: {0}")]
    Random(std::io::Error),
}

/// Why the Python runtime is not there to run a tool: it could not be found or made, or it is
/// still being prepared (the text says which, and what to do).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct RuntimeUnavailable(pub String);

/// The shared state of one `serve` process.
#[derive(Debug)]
pub struct Library {
    pub settings: Settings,
    pub home: Home,
    pub registry: Arc<Registry>,
    pub keys: KeyStore,
    secrets: RwLock<Arc<Secrets>>,
    /// The Python runtime, prepared in the background ([`Preparer`]).
    pub runtime: Arc<Preparer>,
    snapshot: RwLock<Arc<Snapshot>>,
    pub pool: Pool,
    /// Bumped on every change of the mounted list; the protocol edge tells hosts.
    changes: tokio::sync::watch::Sender<u64>,
    /// `*_API_BASE` variables of serve's own environment, passed to every tool.
    api_bases: BTreeMap<String, String>,
    /// The sealing key of consent questions and the answers already used.
    pub consent: Consent,
    /// Keyed at random per process, so a grants fingerprint says nothing about a value.
    grants_hasher: std::hash::RandomState,
    /// What the poll round remembers between rounds.
    watch: watch::Watched,
    /// [`Snapshot::health`] brought up to date with the calls since (for `search_tools`), and
    /// the generation it started from.
    recent: Mutex<(Option<u64>, RecentCalls)>,
    /// What a tool can reach here, as measured ([`reach`]); `None` until measured.
    reach: RwLock<Option<Result<reach::Reach, String>>>,
    /// autotool's own model (`$AUTOTOOL_HOME/.env`), behind `synthesize_tool`.
    #[cfg(feature = "own-model")]
    pub own_model: crate::own_model::synthesize::ModelSlot,
    /// The library itself, for the uses channels of its tools' processes.
    me: std::sync::Weak<Library>,
    /// Calls between tools in flight ([`uses::MAX_CALLS_AT_ONCE`]).
    uses_slots: tokio::sync::Semaphore,
    /// Per tool, the task recording its last call and taking the lifecycle decision after it
    /// ([`call`]): done off the answer's path, waited for by the tool's next call.
    after_calls: Mutex<BTreeMap<String, call::AfterCalls>>,
    /// Per tool, the destinations its egress proxy refused, numbered ([`call::Refusals`]): a
    /// call's answer says which were refused while it ran.
    pub(crate) refusals: call::Refusals,
}

impl Library {
    /// Open the home and registry and mount what it holds.
    pub fn new(settings: Settings, home: Home) -> Result<Arc<Library>, OpenError> {
        let registry = Arc::new(Registry::open(&home)?.with_code_limit(settings.max_code_bytes));
        let keys = KeyStore::open(&home);
        let api_bases = std::env::vars()
            .filter(|(k, _)| k.ends_with("_API_BASE"))
            .collect();
        let (changes, _) = tokio::sync::watch::channel(0u64);
        let runtime = Preparer::new(
            home.runtime_dir(),
            home.log_dir().join(crate::tool::runtime::detach::LOG_NAME),
        );
        let consent = Consent::new().map_err(OpenError::Random)?;
        let pool = Pool::new(settings.tool_processes);
        let library = Arc::new_cyclic(|me| Library {
            settings,
            home,
            registry,
            keys,
            secrets: RwLock::new(Arc::new(Secrets::default())),
            runtime,
            snapshot: RwLock::new(Arc::new(Snapshot::default())),
            pool,
            changes,
            api_bases,
            consent,
            grants_hasher: std::hash::RandomState::new(),
            watch: watch::Watched::default(),
            recent: Mutex::new((None, RecentCalls::default())),
            reach: RwLock::new(None),
            #[cfg(feature = "own-model")]
            own_model: Default::default(),
            me: me.clone(),
            uses_slots: tokio::sync::Semaphore::new(uses::MAX_CALLS_AT_ONCE),
            after_calls: Mutex::new(BTreeMap::new()),
            refusals: call::Refusals::default(),
        });
        library.refresh_keys();
        library.refresh_model();
        library.reload()?;
        Ok(library)
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// A receiver that wakes on every change of the mounted list.
    pub fn subscribe_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Record that the mounted list changed: every host is told, in its era, by the protocol
    /// edge listening on [`Library::subscribe_changes`].
    pub fn changed(&self) {
        self.changes.send_modify(|g| *g += 1);
    }

    /// The Python runtime, prepared the first time it is needed (progress in the log), or why
    /// it could not be. Waits as long as preparing takes; hosts' calls are held only a bounded
    /// time before this ([`Preparer::hold`]).
    pub async fn runtime(&self) -> Result<Python, RuntimeUnavailable> {
        self.runtime
            .wait(None, |_| {})
            .await
            .map_err(|state| RuntimeUnavailable(state.describe()))
    }

    /// Whether `synthesize_tool` is offered now.
    pub fn synthesize_offered(&self) -> bool {
        #[cfg(feature = "own-model")]
        {
            self.own_model.current().provider().is_some()
        }
        #[cfg(not(feature = "own-model"))]
        {
            false
        }
    }

    /// Reread autotool's own model if its file changed. Returns whether `synthesize_tool` came
    /// or went.
    pub fn refresh_model(&self) -> bool {
        #[cfg(feature = "own-model")]
        {
            self.own_model
                .refresh(self.settings.synthesize, &self.home.env_file())
        }
        #[cfg(not(feature = "own-model"))]
        {
            false
        }
    }
}
