//! A running tool process, spoken to over MCP.
//!
//! [`ToolProcess::start`] starts one tool (confined through `autotool-launcher`, or plainly with
//! `--sandbox off`), performs the MCP `initialize` handshake as an rmcp client within a start
//! timeout, and then serves [`ToolProcess::list_tools`] and concurrent [`ToolProcess::call`]s
//! until [`ToolProcess::shutdown`]. Layout:
//! - [`child`]: the OS process in either sandbox mode: spawn, wait, kill;
//! - [`link`]: the tool link: stdout checked line by line before rmcp parses any of it (only
//!   answers to autotool's own requests reach rmcp; the tool's requests are refused and
//!   counted, its notifications dropped within a rate budget; lines, ids and method names
//!   bounded), stdin written one whole message at a time by a pump that stops a tool which
//!   stops reading. How much an answer may hold follows from [`ToolSpec::max_output_bytes`];
//! - [`stdio`]: stderr kept in a bounded ring for error messages.
//!
//! With [`ToolSpec::egress`] set, the process gets an [`EgressProxy`] for its lifetime: confined,
//! on the listeners the launcher binds inside the tool's network namespace and hands up; with
//! `--sandbox off`, on a listener on the host's loopback. Either way the tool's proxy variables
//! point at it, and the proxy stops when the process does.
//!
//! Failure model: a timeout, the process ending mid-request, anything on stdout that is not
//! an MCP message, or a misuse of the link ([`Misuse`]) fails the request with a
//! [`ToolProcError`] that quotes the tail of the tool's stderr, and marks the process dead
//! ([`ToolProcess::is_alive`]); a process killed for one request fails every other request in
//! flight at once. Nothing here panics or waits without a bound. Errors quote the tool's
//! stderr verbatim: redact them before they reach the model. What they quote of the tool's
//! own messages (a line of garbage, a JSON-RPC error's message) is redacted with the current
//! redactor ([`crate::logging::redact_cut`]) before it is cut, so no cut leaves a piece of a
//! key behind. Nothing the tool sends is logged at the default level.

mod child;
mod link;
mod stdio;

pub use link::{Bounds, MAX_ID, Misuse, REQUEST_BUDGET, STDIN_STALL};

use crate::egress::{EgressConfig, EgressProxy};
use crate::tool::launcher::LauncherError;
use crate::tool::runtime::Python;
use autotool_policy::{Limits, PolicyError};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, Implementation,
    JsonObject, ProtocolVersion, Tool,
};
use rmcp::service::RunningService;
use rmcp::{ClientLifecycleMode, ClientServiceExt, Peer, RoleClient, ServiceError};
use serde::Serialize;
use std::collections::BTreeMap;
use std::future::Future;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use stdio::StderrLog;
use tokio::sync::{Notify, mpsc, watch};

pub use rmcp::model::ContentBlock;

/// How long a tool may take from spawn to its answer to `initialize`.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long [`ToolProcess::shutdown`] waits after closing stdin before it kills.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// How long a failed request waits for the process to finish dying, so its exit status and its
/// last stderr lines make it into the error.
const EXIT_GRACE: Duration = Duration::from_secs(2);
/// How long the monitor waits for stderr to close after the process has exited.
const STDERR_DRAIN: Duration = Duration::from_millis(500);
/// The default `max_output_bytes` (the serve setting of that name).
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 256 << 10;
/// Bytes of a tool's JSON-RPC error message kept in a [`ToolProcError::Rejected`].
const REJECTED_MESSAGE: usize = 4 << 10;
/// Bytes of a failed handshake's description kept (rmcp's wording may quote what it got).
const HANDSHAKE_WHAT: usize = 2 << 10;
/// The protocol revision offered in `initialize`: the newest one with a handshake. The Python
/// SDK (mcp 2.3.0) answers it, and also answers `2025-11-25` to an `initialize` offering
/// `2026-07-28`; the supervisor–tool link is private, so the era of the host does not matter.
const OFFERED_VERSION: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// Whether a tool runs confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxMode {
    /// Through `autotool-launcher`: namespaces, fresh root, limits, Landlock, seccomp.
    #[default]
    Strict,
    /// The interpreter run directly: an environment of exactly the given variables, the tool
    /// directory as working directory, its own process group, best-effort resource limits
    /// (no thread limit). For machines where autotool already runs inside a container or VM.
    Off,
}

/// What to start.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// Directory holding the tool.
    pub tool_dir: PathBuf,
    /// The tool's file inside `tool_dir` (a plain name).
    pub tool_file: String,
    /// The interpreter it runs on.
    pub python: Python,
    /// The tool's environment, exactly (see `autotool_policy::launch::tool_environment`).
    pub env: BTreeMap<String, String>,
    /// Resource limits.
    pub limits: Limits,
    pub sandbox: SandboxMode,
    /// The launcher for [`SandboxMode::Strict`]; `None` finds it with
    /// [`crate::tool::launcher::locate`].
    pub launcher: Option<PathBuf>,
    /// Bound on spawn → `initialize` answered; also the bound on [`ToolProcess::list_tools`].
    pub start_timeout: Duration,
    /// The tool's way to the network: an egress proxy with these allowlists and limits, for as
    /// long as the process runs; its proxy variables (`HTTP_PROXY`, …, `NO_PROXY` empty) are
    /// set in the environment over any in `env`. `None`: confined, no network at all;
    /// unconfined, the host's network directly.
    pub egress: Option<EgressConfig>,
    /// The most output an answer may carry (serve's `max_output_bytes`): the tool link takes
    /// no message larger than an answer of this much needs ([`Bounds::for_output`]).
    pub max_output_bytes: usize,
}

impl ToolSpec {
    /// A spec with an empty environment, default limits, the launcher found by
    /// [`crate::tool::launcher::locate`] and [`DEFAULT_START_TIMEOUT`].
    pub fn new(
        tool_dir: impl Into<PathBuf>,
        tool_file: impl Into<String>,
        python: Python,
        sandbox: SandboxMode,
    ) -> Self {
        ToolSpec {
            tool_dir: tool_dir.into(),
            tool_file: tool_file.into(),
            python,
            env: BTreeMap::new(),
            limits: Limits::default(),
            sandbox,
            launcher: None,
            start_timeout: DEFAULT_START_TIMEOUT,
            egress: None,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
        }
    }
}

/// Why a tool did not become a working MCP server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InitFailure {
    #[error("it gave no answer to `initialize` within {}", secs(*after))]
    NoAnswer { after: Duration },
    #[error("it ended ({exit}) before answering `initialize`")]
    Exited {
        status: Option<ExitStatus>,
        exit: String,
    },
    #[error("{what}")]
    Garbage { what: String },
    #[error("the `initialize` handshake failed: {what}")]
    Handshake { what: String },
}

/// What went wrong with a tool process. Messages say what happened and what to do, and quote
/// the tail of the tool's stderr verbatim (redact before showing them to a model).
#[derive(Debug, thiserror::Error)]
pub enum ToolProcError {
    #[error("the tool's launch policy is invalid: {0}")]
    Policy(#[from] PolicyError),
    #[error("the tool cannot be confined: {0}")]
    Launcher(#[from] LauncherError),
    #[error(
        "could not start {program:?}: {source}; check the Python runtime and the launcher with `autotool doctor`"
    )]
    Spawn {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the tool's egress proxy could not be set up: {what}; check the launcher with `autotool doctor`.{}",
        stderr_section(stderr_tail)
    )]
    Egress { what: String, stderr_tail: String },
    #[error(
        "the tool did not start as an MCP server: {reason}. A tool must be a Python MCP server that ends with `mcp.run()` and writes nothing but MCP messages to stdout (log to stderr).{}",
        stderr_section(stderr_tail)
    )]
    Initialize {
        reason: InitFailure,
        stderr_tail: String,
    },
    #[error(
        "`{operation}` got no answer within {}, so the tool process was stopped; make the function return sooner, or give it a longer timeout.{}",
        secs(*after),
        stderr_section(stderr_tail)
    )]
    Timeout {
        operation: String,
        after: Duration,
        stderr_tail: String,
    },
    #[error(
        "the tool process ended ({exit}) before answering `{operation}`; fix what its stderr shows (a crash, an exit, a limit) and start it again.{}",
        stderr_section(stderr_tail)
    )]
    Exited {
        operation: String,
        status: Option<ExitStatus>,
        exit: String,
        stderr_tail: String,
    },
    #[error(
        "the tool broke the MCP protocol during `{operation}`: {what}. It was stopped; print diagnostics to stderr (`print(..., file=sys.stderr)` or `logging`), never to stdout.{}",
        stderr_section(stderr_tail)
    )]
    Protocol {
        operation: String,
        what: String,
        stderr_tail: String,
    },
    #[error(
        "during `{operation}`, {}, so the tool was stopped. {}{}",
        misuse.what(),
        misuse.advice(),
        stderr_section(stderr_tail)
    )]
    Misused {
        operation: String,
        misuse: Misuse,
        stderr_tail: String,
    },
    #[error("the tool refused `{operation}` with JSON-RPC error {code}: {message}")]
    Rejected {
        operation: String,
        code: i32,
        message: String,
    },
    #[error(
        "`{operation}` was not answered: the tool process is not running any more ({why}); start it again"
    )]
    Stopped { operation: String, why: String },
}

fn secs(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

fn stderr_section(tail: &str) -> String {
    if tail.is_empty() {
        " It wrote nothing to stderr.".to_string()
    } else {
        format!("\n--- the tool's stderr, last lines ---\n{tail}")
    }
}

fn signal_name(sig: i32) -> String {
    match sig {
        6 => "SIGABRT".into(),
        9 => "SIGKILL".into(),
        11 => "SIGSEGV".into(),
        15 => "SIGTERM".into(),
        24 => "SIGXCPU: its CPU-time limit".into(),
        25 => "SIGXFSZ: its file-size limit".into(),
        31 => "SIGSYS: a system call the sandbox refuses".into(),
        n => format!("signal {n}"),
    }
}

/// Say how a process ended. Under the launcher, 125 is the launcher's own failure and 128+N
/// the tool's death by signal N.
fn describe_exit(status: Option<ExitStatus>, sandbox: SandboxMode) -> String {
    let Some(status) = status else {
        return "its exit status could not be read".into();
    };
    if let Some(sig) = status.signal() {
        return format!("killed by {}", signal_name(sig));
    }
    match (status.code(), sandbox) {
        (Some(125), SandboxMode::Strict) => {
            "exit status 125: autotool-launcher could not start it, for the reason in its stderr"
                .into()
        }
        (Some(c), SandboxMode::Strict) if (129..=192).contains(&c) => {
            format!("exit status {c}: killed by {}", signal_name(c - 128))
        }
        (Some(c), _) => format!("exit status {c}"),
        (None, _) => "no exit status".into(),
    }
}

/// A tool function as the tool describes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolInfo {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: JsonObject,
    /// Present for functions with a return annotation (`-> str` gives
    /// `{"properties": {"result": …}}`).
    pub output_schema: Option<JsonObject>,
    /// The tool's own hints (`readOnlyHint`, …), untrusted.
    pub annotations: Option<serde_json::Value>,
}

impl From<Tool> for ToolInfo {
    fn from(t: Tool) -> Self {
        ToolInfo {
            name: t.name.into_owned(),
            title: t.title,
            description: t.description.map(|d| d.into_owned()),
            input_schema: Arc::unwrap_or_clone(t.input_schema),
            output_schema: t.output_schema.map(Arc::unwrap_or_clone),
            annotations: t.annotations.and_then(|a| serde_json::to_value(a).ok()),
        }
    }
}

impl From<ToolInfo> for crate::version::FunctionSpec {
    fn from(t: ToolInfo) -> Self {
        crate::version::FunctionSpec {
            name: t.name,
            title: t.title,
            description: t.description,
            input_schema: t.input_schema,
            output_schema: t.output_schema,
            annotations: t.annotations,
        }
    }
}

/// The answer to one `tools/call`.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    pub content: Vec<ContentBlock>,
    /// `{"result": …}` for a function with a return annotation.
    pub structured_content: Option<serde_json::Value>,
    /// The tool reported an error: a `ToolError`'s message, or for an unexpected exception
    /// only "Error executing tool NAME" (the traceback is in [`CallOutcome::stderr`]).
    pub is_error: bool,
    /// What the process wrote to stderr while the call ran, up to its answer (after a crash,
    /// until stderr went quiet for a moment, so the traceback is whole). Best effort; calls
    /// running at the same time share one stderr, so this may hold their lines too.
    pub stderr: String,
    /// Request sent → answer received.
    pub duration: Duration,
}

impl CallOutcome {
    /// An error result that is not the tool's own answer but a crash inside it. The SDK words
    /// them apart: a `ToolError` (or arguments that fail validation, the caller's mistake)
    /// comes back as "Error executing tool NAME: message"; an unexpected exception as only
    /// "Error executing tool NAME" (nested: "…NAME: Error executing tool OTHER"), its traceback
    /// kept in the log.
    pub fn unexpected(&self) -> bool {
        fn crash(text: &str) -> bool {
            let Some(rest) = text.strip_prefix("Error executing tool ") else {
                return false;
            };
            match rest.split_once(": ") {
                None => !rest.trim().is_empty() && !rest.contains(char::is_whitespace),
                Some((_, inner)) => crash(inner),
            }
        }
        self.is_error
            && self.content.iter().any(|c| match c {
                ContentBlock::Text(t) => crash(t.text.trim_end()),
                _ => false,
            })
    }
}

/// Who answered `initialize`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerDetails {
    pub name: Option<String>,
    pub version: Option<String>,
    pub protocol_version: String,
    pub instructions: Option<String>,
    /// The tool says it may send `notifications/tools/list_changed`.
    pub tools_list_changed: bool,
}

/// How [`ToolProcess::shutdown`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// `None` when the exit could not be observed within the bounds.
    pub status: Option<ExitStatus>,
    /// It did not exit within [`SHUTDOWN_GRACE`] of its stdin closing and was killed.
    pub killed: bool,
    pub took: Duration,
}

/// The first reason the process stopped serving.
#[derive(Debug, Clone)]
enum Cause {
    Exited(Option<ExitStatus>),
    TimedOut {
        request: u64,
        operation: String,
        after: Duration,
    },
    /// Something other than MCP on stdout, or an answer MCP does not allow.
    Violation(String),
    /// The tool link stopped it.
    Misused(Misuse),
    /// The `initialize` handshake failed while the process kept running.
    Refused(String),
    ShutDown,
}

/// The process was reaped (and its stderr drained, within [`STDERR_DRAIN`]).
#[derive(Debug, Clone, Copy)]
struct Exit(Option<ExitStatus>);

/// State shared by the handle, the monitor, the stdout guard and the stderr pump.
#[derive(Debug)]
struct Shared {
    sandbox: SandboxMode,
    stderr: Arc<StderrLog>,
    cause: watch::Sender<Option<Cause>>,
    exit: watch::Sender<Option<Exit>>,
    /// Ask the monitor to SIGKILL the process.
    kill: Notify,
    stdin: link::StdinLink,
    /// The process's egress proxy; dropped (stopped) once the process has exited.
    egress: std::sync::Mutex<EgressSlot>,
}

/// Where a process's egress proxy lives.
#[derive(Debug)]
enum EgressSlot {
    /// None yet (or none asked for).
    Empty,
    Running(EgressProxy),
    /// The process has exited: a proxy arriving now is stopped at once.
    Closed,
}

impl Shared {
    /// Record why the process stops serving (the first reason wins) and, unless it is already
    /// gone or going, kill it.
    fn fail(&self, cause: Cause) {
        let kill = matches!(
            cause,
            Cause::TimedOut { .. } | Cause::Violation(_) | Cause::Misused(_) | Cause::Refused(_)
        );
        self.cause.send_if_modified(|c| {
            if c.is_none() {
                *c = Some(cause);
                true
            } else {
                false
            }
        });
        if kill {
            self.kill.notify_one();
        }
    }

    fn cause(&self) -> Option<Cause> {
        self.cause.borrow().clone()
    }

    /// The reason, once there is one.
    async fn next_cause(&self) -> Cause {
        let mut rx = self.cause.subscribe();
        let cause = rx
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|c| c.clone());
        // The sender lives in `self`, so the wait cannot end without a value.
        cause.unwrap_or(Cause::ShutDown)
    }

    async fn cause_within(&self, bound: Duration) -> Option<Cause> {
        tokio::time::timeout(bound, self.next_cause()).await.ok()
    }

    /// The exit, waiting for it at most `bound`.
    async fn exited(&self, bound: Duration) -> Option<Exit> {
        let mut rx = self.exit.subscribe();
        let waited = tokio::time::timeout(bound, rx.wait_for(Option::is_some)).await;
        waited.ok()?.ok().and_then(|e| *e)
    }

    fn tail(&self) -> String {
        self.stderr.tail(stdio::STDERR_IN_ERRORS)
    }

    /// Keep `proxy` running until the process exits (stop it at once if it already has).
    fn hold_egress(&self, proxy: EgressProxy) {
        let mut slot = self
            .egress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if matches!(*slot, EgressSlot::Empty) {
            *slot = EgressSlot::Running(proxy);
        }
    }

    /// The process has exited: stop its proxy, and any that arrives later.
    fn stop_egress(&self) {
        let old = std::mem::replace(
            &mut *self
                .egress
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            EgressSlot::Closed,
        );
        drop(old);
    }
}

/// The proxy for a process just spawned: on the listeners the launcher hands over (confined)
/// or on the host listener (unconfined), within `bound`.
async fn start_egress(
    end: child::EgressEnd,
    config: EgressConfig,
    shared: &Shared,
    bound: Duration,
) -> Result<EgressProxy, String> {
    let setup = async {
        match end {
            child::EgressEnd::Report(report) => {
                let listeners = crate::egress::receive_listeners(report).await?;
                EgressProxy::serve(listeners, config)
            }
            child::EgressEnd::Host(listener) => EgressProxy::serve_on_host(listener, config),
        }
    };
    tokio::select! {
        biased;
        r = setup => r.map_err(|e| e.to_string()),
        () = tokio::time::sleep(bound) => Err(format!(
            "the launcher did not hand over the egress listeners within {}",
            secs(bound)
        )),
        _ = shared.next_cause() => Err("the process stopped before its egress listeners were handed over".into()),
    }
}

/// Stop a process whose proxy could not be set up, and say why: the launcher's own exit (its
/// stderr names the missing kernel feature) when it failed, the proxy's failure otherwise.
async fn egress_failed(what: String, shared: &Shared, sandbox: SandboxMode) -> ToolProcError {
    let cause = shared.cause_within(EXIT_GRACE).await;
    shared.fail(Cause::Refused(what.clone()));
    shared.kill.notify_one();
    let _ = shared.exited(EXIT_GRACE).await;
    match cause {
        Some(Cause::Exited(status)) => ToolProcError::Initialize {
            reason: InitFailure::Exited {
                status,
                exit: describe_exit(status, sandbox),
            },
            stderr_tail: shared.tail(),
        },
        _ => ToolProcError::Egress {
            what,
            stderr_tail: shared.tail(),
        },
    }
}

/// What log lines call the tool: `NAME/VERSION` from its directory (`tools/NAME/VERSION`).
fn tool_label(spec: &ToolSpec) -> String {
    let mut parts = spec.tool_dir.iter().rev().take(2).collect::<Vec<_>>();
    parts.reverse();
    parts
        .iter()
        .map(|p| p.to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Owns the OS process: waits for it, kills it on request, and publishes its exit.
async fn monitor(
    mut child: child::Child,
    shared: Arc<Shared>,
    stderr: tokio::task::JoinHandle<()>,
) {
    let status = loop {
        let waited = tokio::select! {
            r = child.wait() => Some(r),
            () = shared.kill.notified() => None,
        };
        match waited {
            Some(Ok(status)) => break Some(status),
            Some(Err(e)) => {
                tracing::warn!(%e, "waiting for a tool process failed; killing it");
                child.kill();
                break None;
            }
            None => child.kill(),
        }
    };
    child.kill_leftovers();
    shared.stop_egress();
    // Its last words (a traceback) are usually still in the pipe.
    let _ = tokio::time::timeout(STDERR_DRAIN, stderr).await;
    shared.exit.send_replace(Some(Exit(status)));
    shared.fail(Cause::Exited(status));
}

/// A started tool process with an initialised MCP session.
pub struct ToolProcess {
    peer: Peer<RoleClient>,
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, ClientConfig>>>,
    shared: Arc<Shared>,
    server: ServerDetails,
    pid: Option<u32>,
    started_in: Duration,
    list_timeout: Duration,
    next_request: AtomicU64,
}

impl std::fmt::Debug for ToolProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolProcess")
            .field("pid", &self.pid)
            .field("sandbox", &self.shared.sandbox)
            .field("server", &self.server)
            .field("alive", &self.is_alive())
            .finish_non_exhaustive()
    }
}

/// How the start-up race ended.
enum Start {
    Up(Box<RunningService<RoleClient, ClientConfig>>),
    Refused(String),
    Late,
    Died(Cause),
}

impl ToolProcess {
    /// Start the tool and complete `initialize` within `spec.start_timeout`. On any failure
    /// the process is killed before this returns.
    pub async fn start(spec: ToolSpec) -> Result<ToolProcess, ToolProcError> {
        let t0 = Instant::now();
        let mut spawned = child::spawn(&spec)?;
        let egress = spawned.egress.take();
        let pid = spawned.child.id();
        let bounds = Bounds::for_output(spec.max_output_bytes);
        let label = tool_label(&spec);
        // The link: tool stdout → guard → (answers only) → rmcp; rmcp → pump → tool stdin,
        // with the guard's refusals between rmcp's messages.
        let outstanding = link::Outstanding::default();
        let (refusals, replies) = mpsc::channel(link::REPLIES);
        let (rmcp_out, pump_in) = tokio::io::duplex(stdio::LINK_PIPE);
        let (stdin, pump) = link::stdin_link(link::StdinPump {
            from_rmcp: pump_in,
            replies,
            stdin: spawned.stdin,
            outstanding: outstanding.clone(),
        });
        let shared = Arc::new(Shared {
            sandbox: spec.sandbox,
            stderr: Arc::new(StderrLog::new(&spawned.stderr)),
            cause: watch::Sender::new(None),
            exit: watch::Sender::new(None),
            kill: Notify::new(),
            stdin,
            egress: std::sync::Mutex::new(EgressSlot::Empty),
        });
        let stderr_pump = tokio::spawn(stdio::pump_stderr(spawned.stderr, shared.stderr.clone()));
        let (guarded, guard_out) = tokio::io::simplex(stdio::LINK_PIPE);
        let on_stop = {
            let shared = shared.clone();
            move |stop: link::Stop| {
                shared.fail(match stop {
                    link::Stop::Garbage(what) => Cause::Violation(what),
                    link::Stop::Misuse(m) => Cause::Misused(m),
                })
            }
        };
        let inspector = link::Inspector::new(bounds, outstanding, label.clone());
        tokio::spawn(link::guard_stdout(
            spawned.stdout,
            guard_out,
            inspector,
            refusals,
            on_stop,
        ));
        let on_stall = {
            let shared = shared.clone();
            move |after: Duration| {
                tracing::warn!(tool = %label, "stopping the tool: it stopped reading its stdin");
                shared.fail(Cause::Misused(Misuse::StdinStalled { after }))
            }
        };
        tokio::spawn(pump.run(on_stall));
        tokio::spawn(monitor(spawned.child, shared.clone(), stderr_pump));
        if let (Some(end), Some(config)) = (egress, spec.egress.clone()) {
            match start_egress(end, config, &shared, spec.start_timeout).await {
                Ok(proxy) => shared.hold_egress(proxy),
                Err(what) => return Err(egress_failed(what, &shared, spec.sandbox).await),
            }
        }

        let client = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("autotool", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(OFFERED_VERSION);
        // rmcp's own bound on a line, behind the guard's.
        let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(guarded, rmcp_out)
            .with_max_line_length(bounds.max_line + 2);
        let handshake = client.serve_with_lifecycle(transport, ClientLifecycleMode::Initialize);
        let start = tokio::select! {
            biased;
            r = handshake => match r {
                Ok(service) => Start::Up(Box::new(service)),
                Err(e) => Start::Refused(crate::logging::redact_cut_str(&e.to_string(), HANDSHAKE_WHAT)),
            },
            () = tokio::time::sleep(spec.start_timeout) => Start::Late,
            cause = shared.next_cause() => Start::Died(cause),
        };
        let cause = match start {
            Start::Up(service) => return Ok(Self::serving(*service, shared, pid, t0, &spec)),
            Start::Late => Cause::TimedOut {
                request: 0,
                operation: "initialize".into(),
                after: spec.start_timeout,
            },
            Start::Died(cause) => cause,
            // The handshake may have failed because the process is going away: prefer its own
            // reason.
            Start::Refused(what) => match shared.cause_within(EXIT_GRACE).await {
                Some(cause) => cause,
                None => Cause::Refused(what),
            },
        };
        shared.fail(cause.clone());
        shared.kill.notify_one();
        let _ = shared.exited(EXIT_GRACE).await;
        let reason = match cause {
            Cause::Misused(misuse) => {
                return Err(ToolProcError::Misused {
                    operation: "initialize".into(),
                    misuse,
                    stderr_tail: shared.tail(),
                });
            }
            Cause::Exited(status) => InitFailure::Exited {
                status,
                exit: describe_exit(status, spec.sandbox),
            },
            Cause::TimedOut { after, .. } => InitFailure::NoAnswer { after },
            Cause::Violation(what) => InitFailure::Garbage { what },
            Cause::Refused(what) => InitFailure::Handshake { what },
            Cause::ShutDown => InitFailure::Handshake {
                what: "it was stopped".into(),
            },
        };
        Err(ToolProcError::Initialize {
            reason,
            stderr_tail: shared.tail(),
        })
    }

    /// The handle of a process that answered `initialize`.
    fn serving(
        service: RunningService<RoleClient, ClientConfig>,
        shared: Arc<Shared>,
        pid: Option<u32>,
        t0: Instant,
        spec: &ToolSpec,
    ) -> ToolProcess {
        let started_in = t0.elapsed();
        let peer = service.peer().clone();
        let info = peer.peer_info();
        let implementation = info.as_ref().and_then(|i| i.server_info.as_ref());
        let server = ServerDetails {
            name: implementation.map(|s| s.name.clone()),
            version: implementation.map(|s| s.version.clone()),
            protocol_version: info
                .as_ref()
                .map(|i| i.protocol_version.as_str().to_string())
                .unwrap_or_default(),
            instructions: info.as_ref().and_then(|i| i.instructions.clone()),
            tools_list_changed: info
                .as_ref()
                .and_then(|i| i.capabilities.tools.as_ref())
                .and_then(|t| t.list_changed)
                .unwrap_or(false),
        };
        tracing::debug!(?pid, ?started_in, sandbox = ?spec.sandbox, "tool process initialised");
        ToolProcess {
            peer,
            service: tokio::sync::Mutex::new(Some(service)),
            shared,
            server,
            pid,
            started_in,
            list_timeout: spec.start_timeout,
            next_request: AtomicU64::new(1),
        }
    }

    /// The tool's functions with their input and output schemas (every page), bounded by the
    /// spec's start timeout.
    pub async fn list_tools(&self) -> Result<Vec<ToolInfo>, ToolProcError> {
        let tools = self
            .request(
                "tools/list".into(),
                self.list_timeout,
                self.peer.list_all_tools(),
            )
            .await?;
        Ok(tools.into_iter().map(ToolInfo::from).collect())
    }

    /// Call function `name`. Calls may run concurrently on one process. A timeout kills the
    /// process (and so fails every other call in flight).
    pub async fn call(
        &self,
        name: &str,
        arguments: JsonObject,
        timeout: Duration,
    ) -> Result<CallOutcome, ToolProcError> {
        let mark = self.shared.stderr.total();
        let t0 = Instant::now();
        let operation = format!("tools/call {name}");
        let params = CallToolRequestParams::new(name.to_string()).with_arguments(arguments);
        let response = self
            .request(operation.clone(), timeout, self.peer.call_tool_once(params))
            .await?;
        let duration = t0.elapsed();
        let result = match response {
            CallToolResponse::Complete(result) => result,
            _ => {
                self.shared.fail(Cause::Violation(
                    "it answered with an input request or a task, which autotool tools may not do"
                        .into(),
                ));
                let cause = self.shared.cause().unwrap_or(Cause::ShutDown);
                return Err(self.dead(0, operation, cause).await);
            }
        };
        let mut outcome = CallOutcome {
            content: result.content,
            structured_content: result.structured_content,
            is_error: result.is_error.unwrap_or(false),
            stderr: String::new(),
            duration,
        };
        // What the tool wrote before answering is in the pipe; let the pump file it.
        self.shared
            .stderr
            .catch_up(Duration::from_millis(100))
            .await;
        if outcome.unexpected() {
            // The SDK logs an unexpected exception's traceback before it answers; make sure
            // all of it is here. (A ToolError is not logged: nothing to wait for.)
            self.shared
                .stderr
                .settle(Duration::from_millis(20), Duration::from_millis(250))
                .await;
        }
        outcome.stderr = self.shared.stderr.since(mark);
        Ok(outcome)
    }

    /// Close stdin, wait up to [`SHUTDOWN_GRACE`] for the tool to exit, then kill it (and,
    /// confined, the launcher takes the tool with it). Requests still in flight fail with
    /// [`ToolProcError::Stopped`]. Calling it again only reports the exit.
    pub async fn shutdown(&self) -> ShutdownReport {
        let t0 = Instant::now();
        self.shared.fail(Cause::ShutDown);
        self.shared.stdin.close();
        let mut killed = false;
        let exit = match self.shared.exited(SHUTDOWN_GRACE).await {
            Some(exit) => Some(exit),
            None => {
                killed = true;
                self.shared.kill.notify_one();
                self.shared.exited(EXIT_GRACE).await
            }
        };
        if let Some(mut service) = self.service.lock().await.take() {
            // The transport has ended with the process; this only joins rmcp's task.
            let _ = service.close_with_timeout(Duration::from_millis(500)).await;
        }
        ShutdownReport {
            status: exit.and_then(|e| e.0),
            killed,
            took: t0.elapsed(),
        }
    }

    /// Still serving: not exited, not killed, not shut down.
    pub fn is_alive(&self) -> bool {
        self.shared.cause.borrow().is_none()
    }

    /// The direct child's process id (the launcher's when confined).
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    pub fn sandbox(&self) -> SandboxMode {
        self.shared.sandbox
    }

    /// Who answered `initialize`, and in which protocol revision.
    pub fn server(&self) -> &ServerDetails {
        &self.server
    }

    /// Spawn → `initialize` answered.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// The newest lines of the tool's stderr (at most 16 KiB).
    pub fn stderr_tail(&self) -> String {
        self.shared.tail()
    }

    /// Connections open through the process's egress proxy, while it has one.
    pub fn egress_connections(&self) -> Option<usize> {
        match &*self
            .shared
            .egress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            EgressSlot::Running(proxy) => Some(proxy.active_connections()),
            EgressSlot::Empty | EgressSlot::Closed => None,
        }
    }

    /// The exit status, once the process has exited and been reaped.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        self.shared.exit.borrow().and_then(|e| e.0)
    }

    /// Run one request against the bounds: its own timeout, and the process failing.
    async fn request<T>(
        &self,
        operation: String,
        timeout: Duration,
        answer: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, ToolProcError> {
        let id = self.next_request.fetch_add(1, Ordering::Relaxed);
        if let Some(cause) = self.shared.cause() {
            return Err(self.dead(id, operation, cause).await);
        }
        let answer = tokio::select! {
            biased;
            r = answer => r,
            () = tokio::time::sleep(timeout) => {
                self.shared.fail(Cause::TimedOut {
                    request: id,
                    operation: operation.clone(),
                    after: timeout,
                });
                // Another failure may have come first; report whichever did.
                let cause = self.shared.cause().unwrap_or(Cause::ShutDown);
                return Err(self.dead(id, operation, cause).await);
            }
            cause = self.shared.next_cause() => return Err(self.dead(id, operation, cause).await),
        };
        match answer {
            Ok(value) => Ok(value),
            Err(ServiceError::McpError(e)) => Err(ToolProcError::Rejected {
                operation,
                code: e.code.0,
                message: crate::logging::redact_cut_str(&e.message, REJECTED_MESSAGE),
            }),
            Err(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => {
                // The pipes closed: the process is going away, or closed its stdout.
                let cause = match self.shared.cause_within(EXIT_GRACE).await {
                    Some(cause) => cause,
                    None => {
                        self.shared.fail(Cause::Violation(
                            "it closed its stdout but kept running".into(),
                        ));
                        self.shared.cause().unwrap_or(Cause::ShutDown)
                    }
                };
                Err(self.dead(id, operation, cause).await)
            }
            Err(e) => {
                self.shared.fail(Cause::Violation(format!(
                    "its answer is not one MCP allows here ({e})"
                )));
                let cause = self.shared.cause().unwrap_or(Cause::ShutDown);
                Err(self.dead(id, operation, cause).await)
            }
        }
    }

    /// The error for request `id` on a process that stopped serving because of `cause`.
    async fn dead(&self, id: u64, operation: String, cause: Cause) -> ToolProcError {
        if !matches!(cause, Cause::Exited(_) | Cause::ShutDown) {
            // It is being killed: let it finish so its last stderr lines are in the tail.
            let _ = self.shared.exited(EXIT_GRACE).await;
        }
        let stderr_tail = self.shared.tail();
        match cause {
            Cause::Exited(status) => ToolProcError::Exited {
                operation,
                status,
                exit: describe_exit(status, self.shared.sandbox),
                stderr_tail,
            },
            Cause::TimedOut { request, after, .. } if request == id => ToolProcError::Timeout {
                operation,
                after,
                stderr_tail,
            },
            Cause::TimedOut {
                operation: other,
                after,
                ..
            } => ToolProcError::Stopped {
                operation,
                why: format!(
                    "it was stopped because `{other}` got no answer within {}",
                    secs(after)
                ),
            },
            Cause::Violation(what) | Cause::Refused(what) => ToolProcError::Protocol {
                operation,
                what,
                stderr_tail,
            },
            Cause::Misused(misuse) => ToolProcError::Misused {
                operation,
                misuse,
                stderr_tail,
            },
            Cause::ShutDown => ToolProcError::Stopped {
                operation,
                why: "it was shut down".into(),
            },
        }
    }
}

impl Drop for ToolProcess {
    fn drop(&mut self) {
        // Not shut down: kill it now (the monitor reaps it; without a runtime, the child
        // handles kill on drop themselves).
        self.shared.fail(Cause::ShutDown);
        self.shared.kill.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(text: &str) -> CallOutcome {
        CallOutcome {
            content: vec![ContentBlock::text(text.to_string())],
            structured_content: None,
            is_error: true,
            stderr: String::new(),
            duration: Duration::ZERO,
        }
    }

    #[test]
    fn a_crash_is_told_from_a_tool_error_by_the_sdk_wording() {
        for crash in [
            "Error executing tool divide",
            "Error executing tool outer: Error executing tool inner",
        ] {
            assert!(outcome(crash).unexpected(), "{crash}");
        }
        for answer in [
            "Error executing tool divide: cannot divide by zero",
            "Error executing tool add: 1 validation error for addArguments",
            "Error executing tool outer: Error executing tool inner: not found",
            "upstream said 403",
        ] {
            assert!(!outcome(answer).unexpected(), "{answer}");
        }
        let mut ok = outcome("Error executing tool divide");
        ok.is_error = false;
        assert!(!ok.unexpected());
    }

    #[test]
    fn exits_are_described_for_each_mode() {
        let code = |c: i32| Some(ExitStatus::from_raw(c << 8));
        assert_eq!(describe_exit(code(3), SandboxMode::Off), "exit status 3");
        assert_eq!(describe_exit(code(3), SandboxMode::Strict), "exit status 3");
        assert!(describe_exit(code(125), SandboxMode::Strict).contains("autotool-launcher"));
        assert_eq!(
            describe_exit(code(137), SandboxMode::Strict),
            "exit status 137: killed by SIGKILL"
        );
        assert_eq!(
            describe_exit(code(137), SandboxMode::Off),
            "exit status 137"
        );
        assert_eq!(
            describe_exit(Some(ExitStatus::from_raw(9)), SandboxMode::Off),
            "killed by SIGKILL"
        );
        assert_eq!(
            describe_exit(None, SandboxMode::Off),
            "its exit status could not be read"
        );
    }

    #[test]
    fn handles_can_be_shared_across_tasks() {
        fn shareable<T: Send + Sync + 'static>() {}
        shareable::<ToolProcess>();
        shareable::<ToolProcError>();
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(secs(Duration::from_secs(20)), "20 s");
        assert_eq!(secs(Duration::from_millis(1500)), "1.5 s");
    }
}
