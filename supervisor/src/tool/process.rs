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
//! - [`stdio`]: stderr kept in a bounded ring for error messages;
//! - `monitor`: the first reason a process stops serving, shared by the handle and the tasks
//!   around it, and the task that reaps the process; `egress`: its egress proxy, set up within
//!   the start timeout ([`EgressSetupError`]);
//! - `answers`: what a process answers ([`ToolInfo`], [`CallOutcome`], [`ServerDetails`],
//!   [`ShutdownReport`]); `error`: what went wrong ([`ToolProcError`], [`InitFailure`]).
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

mod answers;
mod egress;
mod error;
mod monitor;
mod offers;
mod uses;

pub use answers::{CallOutcome, ServerDetails, ShutdownReport, ToolInfo};
#[cfg(test)]
pub(crate) use child::launch_policy;
pub use egress::EgressSetupError;
pub use error::{InitFailure, ToolProcError};
pub use offers::Offers;
pub use stdio::{STDERR_FILE_CAP, StderrFile};
pub use uses::{MAX_REQUEST_BYTES, UsesHandler};

use egress::{egress_failed, start_egress};
use error::{describe_exit, secs};
pub use link::{Bounds, MAX_ID, Misuse, REQUEST_BUDGET, STDIN_STALL};
use monitor::{Cause, EgressSlot, Shared, monitor};

use crate::egress::EgressConfig;
use crate::tool::runtime::Python;
use autotool_policy::Limits;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, Implementation,
    JsonObject, ProtocolVersion,
};
use rmcp::service::RunningService;
use rmcp::{ClientLifecycleMode, ClientServiceExt, Peer, RoleClient, ServiceError};
use std::collections::BTreeMap;
use std::future::Future;
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
    /// The host directory of its installed packages (a layer, `crate::packages`), mounted
    /// read-only at `autotool_policy::launch::PACKAGES_MOUNT` and put on `sys.path` after the
    /// runtime's own; `None` without packages.
    pub packages: Option<PathBuf>,
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
    /// With [`SandboxMode::Strict`], fork the tool from its runtime's template, which shares
    /// these directories ([`crate::tool::template`]); `None` always starts the launcher.
    pub template: Option<crate::tool::template::Shares>,
    /// What answers the tool's calls of the other tools it declares in `USES`: the process
    /// gets a channel to it ([`uses`]); `None` for a tool that declares none.
    pub uses: Option<Arc<dyn UsesHandler>>,
    /// The directories of the user's it was granted (`READ_DIRS`, `WRITE_DIRS`), resolved
    /// ([`crate::tool::dirs::resolve_grant`]): the launch policy's `user_dirs`.
    pub user_dirs: Vec<autotool_policy::UserDir>,
    /// Where its stderr is also kept, redacted and bounded (`autotool tools logs`); `None`:
    /// only in memory.
    pub stderr_file: Option<StderrFile>,
    /// An npm server: node runs its script from its layer instead of Python running the tool
    /// file (which only declares); `None` for every Python tool.
    pub npm: Option<crate::npm::NpmRun>,
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
            packages: None,
            env: BTreeMap::new(),
            limits: Limits::default(),
            sandbox,
            launcher: None,
            start_timeout: DEFAULT_START_TIMEOUT,
            egress: None,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            template: None,
            uses: None,
            user_dirs: Vec::new(),
            stderr_file: None,
            npm: None,
        }
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
        if let (Some(end), Some(handler)) = (spawned.uses.take(), spec.uses.clone()) {
            tokio::spawn(uses::serve(end, handler));
        }
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
        let stderr_pump = tokio::spawn(stdio::pump_stderr(
            spawned.stderr,
            shared.stderr.clone(),
            spec.stderr_file.clone(),
        ));
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
            not_relayed: info
                .as_ref()
                .map(|i| answers::not_relayed(&i.capabilities))
                .unwrap_or_default(),
            prompts: info
                .as_ref()
                .is_some_and(|i| i.capabilities.prompts.is_some()),
            resources: info
                .as_ref()
                .is_some_and(|i| i.capabilities.resources.is_some()),
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

    /// Connections the process opened through its egress proxy so far (refused ones
    /// included); `None` when it has no proxy.
    pub fn egress_opened(&self) -> Option<u64> {
        match &*self
            .shared
            .egress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            EgressSlot::Running(proxy) => Some(proxy.connections_opened()),
            EgressSlot::Empty | EgressSlot::Closed => None,
        }
    }

    /// Requests its egress proxy refused so far; `None` when it has no proxy.
    pub fn egress_refused(&self) -> Option<u64> {
        match &*self
            .shared
            .egress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            EgressSlot::Running(proxy) => Some(proxy.refused()),
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
            // An error answered once the process was being stopped is the stop's doing (the
            // SDK answers requests in flight "Connection closed" when its stdin closes).
            Err(ServiceError::McpError(e)) => match self.shared.cause() {
                Some(cause) => Err(self.dead(id, operation, cause).await),
                None => Err(ToolProcError::Rejected {
                    operation,
                    code: e.code.0,
                    message: crate::logging::redact_cut_str(&e.message, REJECTED_MESSAGE),
                }),
            },
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

    #[test]
    fn handles_can_be_shared_across_tasks() {
        fn shareable<T: Send + Sync + 'static>() {}
        shareable::<ToolProcess>();
        shareable::<ToolProcError>();
    }
}
