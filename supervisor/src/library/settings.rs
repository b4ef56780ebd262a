//! What one `autotool serve` was told: every setting its library runs by, resolved from its
//! flags, the environment, `config.toml` and these defaults by [`crate::config`].

use crate::tool::process::SandboxMode;
use autotool_policy::Limits;
use std::path::PathBuf;
use std::time::Duration;

/// What `serve` was told (resolved from its flags, the environment, `config.toml` and these
/// defaults by [`crate::config`]).
#[derive(Debug, Clone)]
pub struct Settings {
    pub sandbox: SandboxMode,
    /// Wall-clock bound on one call.
    pub call_timeout: Duration,
    /// A tool process unused this long is stopped.
    pub idle_timeout: Duration,
    /// Most processes one tool runs at once when it is called concurrently (also bounded by
    /// the cores: [`crate::tool::pool`]).
    pub tool_processes: usize,
    /// How long a `create_tool` is held for its verification before it is answered that
    /// verification continues (zero: held until verification ends).
    pub create_hold: Duration,
    /// Fork confined tools from their runtime's template (`crate::tool::template`) instead of
    /// starting each through the launcher.
    pub fork_tools: bool,
    /// Bytes of text a result may carry before it is truncated.
    pub max_output_bytes: usize,
    /// Largest `code` accepted by `create_tool`.
    pub max_code_bytes: usize,
    /// How often the registry is checked for changes made by other processes.
    pub poll_interval: Duration,
    /// How often serve looks at the team libraries it follows (`autotool library follow`).
    pub follow_interval: Duration,
    /// The launcher to use (else found by `launcher::locate`).
    pub launcher: Option<PathBuf>,
    pub limits: Limits,
    /// `--dangerously-allow-all-tools` / `AUTOTOOL_CONSENT=dangerously-allow-all`: grant every
    /// tool the keys it declares without asking (the sandbox and allowlists still hold).
    pub allow_all_keys: bool,
    /// How declared reach is granted: asked (`ask`), or declared hosts without asking
    /// (`trusted`). `allow_all_keys` grants all of it.
    pub reach: autotool_policy::reach::ReachPreset,
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
    /// Candidates `synthesize_tool` writes for one need, each verified, the best one kept
    /// ([`crate::library::race`]); 1 writes one, as before candidates raced.
    pub synthesize_candidates: usize,
    /// How large a tool's package layer may be, and how long resolving or installing may take.
    pub packages: crate::packages::Limits,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            sandbox: SandboxMode::Strict,
            call_timeout: Duration::from_secs(60),
            // Chosen from a measurement (docs/serve.md, "The idle limit"): a restart costs a
            // forked tool about 30 ms, an idle one holds 13 to 20 MiB.
            idle_timeout: Duration::from_secs(120),
            tool_processes: DEFAULT_TOOL_PROCESSES,
            create_hold: crate::tool::runtime::prepare::HOLD,
            fork_tools: true,
            max_output_bytes: 256 << 10,
            max_code_bytes: 256 << 10,
            poll_interval: Duration::from_millis(500),
            follow_interval: Duration::from_secs(300),
            launcher: None,
            limits: Limits::default(),
            allow_all_keys: false,
            reach: autotool_policy::reach::ReachPreset::Ask,
            lifecycle: autotool_policy::lifecycle::Thresholds::default(),
            list_limit: DEFAULT_LIST_LIMIT,
            synthesize: true,
            synthesize_rounds: DEFAULT_ROUNDS,
            synthesize_time: DEFAULT_TIME_BOUND,
            synthesize_candidates: DEFAULT_CANDIDATES,
            packages: crate::packages::Limits::default(),
        }
    }
}

/// How many tools `search_tools` returns unless asked.
pub const SEARCH_DEFAULT: usize = 5;
/// The most `search_tools` returns.
pub const SEARCH_MAX: u64 = 20;

/// [`Settings::tool_processes`] unless told otherwise: enough for the cores of a workstation;
/// the cores bound it further.
pub const DEFAULT_TOOL_PROCESSES: usize = 4;

/// [`Settings::list_limit`] unless told otherwise.
pub const DEFAULT_LIST_LIMIT: usize = 40;

/// How far back calls count towards "most used" for the list limit.
pub const USAGE_WINDOW: Duration = Duration::from_secs(30 * 24 * 3600);

/// Rounds of write → verify → repair before giving up.
pub const DEFAULT_ROUNDS: usize = 3;
/// Bound on one `synthesize_tool` call, model requests and verification together. A round that
/// has begun verifying is finished; no model request starts after the bound.
pub const DEFAULT_TIME_BOUND: Duration = Duration::from_secs(600);
/// Candidates written for one need unless told otherwise.
pub const DEFAULT_CANDIDATES: usize = 2;
/// The most candidates one `synthesize_tool` call may write (each is a model request per round
/// and a tool verified).
pub const MAX_CANDIDATES: usize = 4;
/// The variable of the `synthesize` setting ([`crate::config`]): `off` never offers
/// `synthesize_tool`, whatever the `.env` holds (`autotool run` sets it: its agent writes its
/// own tools with the same model).
pub const SWITCH_VAR: &str = "AUTOTOOL_SYNTHESIZE";
