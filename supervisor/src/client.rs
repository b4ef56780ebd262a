//! [`connect`]: an MCP client of a spawned `autotool serve`, for programs that drive autotool
//! themselves (the agent loop of [`crate::own_model::agent`], `autotool run`, `autotool demo`, a user's own
//! loop): list the tools, call them, and answer consent questions through a callback.
//!
//! It speaks the 2025-11-25 revision (`initialize`), so consent arrives as a form elicitation
//! on the connection while the call waits; the callback sees the question (tool, key, where the
//! key may go; never a value) and says yes or no.

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, ElicitationCapability, FormElicitationCapability,
    Implementation, JsonObject, ProtocolVersion, Tool,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::{ClientHandler, ErrorData as McpError, RoleClient, ServiceExt};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Answers a consent question: `true` allows the tool to use the key.
pub type ConsentFn = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// How to start `autotool serve`.
#[derive(Clone)]
pub struct ConnectOptions {
    /// The `autotool` binary; by default the running one when it is `autotool`, else the one
    /// beside it, else `autotool` on `PATH`.
    pub binary: Option<PathBuf>,
    /// Its arguments (default `["serve"]`).
    pub args: Vec<String>,
    /// Environment variables added for it (`AUTOTOOL_HOME`, keys, `*_API_BASE`, …).
    pub env: Vec<(String, String)>,
    /// Answers consent questions; without one the client offers no elicitation, and a tool that
    /// wants a key is refused with the `autotool tools approve` command.
    pub on_consent: Option<ConsentFn>,
    /// Send the server's log (stderr) nowhere instead of to this process's stderr (it is also in
    /// `$AUTOTOOL_HOME/logs/serve.log`).
    pub quiet: bool,
}

impl std::fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("binary", &self.binary)
            .field("args", &self.args)
            .field(
                "env",
                &self.env.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            )
            .field("on_consent", &self.on_consent.is_some())
            .field("quiet", &self.quiet)
            .finish()
    }
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            binary: None,
            args: vec!["serve".into()],
            env: Vec::new(),
            on_consent: None,
            quiet: false,
        }
    }
}

#[derive(Clone)]
struct Handler {
    on_consent: Option<ConsentFn>,
    asked: Arc<AtomicUsize>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.on_consent.is_some() {
            capabilities.elicitation =
                Some(ElicitationCapability::new().with_form(FormElicitationCapability::default()));
        }
        ClientConfig::new(
            capabilities,
            Implementation::new("autotool-client", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let (Some(on_consent), ElicitRequestParams::FormElicitationParams { message, .. }) =
            (&self.on_consent, request)
        else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        self.asked.fetch_add(1, Ordering::Relaxed);
        let allow = on_consent(&message);
        Ok(ElicitResult::new(ElicitationAction::Accept)
            .with_content(serde_json::json!({ "allow": allow })))
    }
}

/// A connected `autotool serve`.
pub struct Client {
    service: RunningService<RoleClient, Handler>,
    child: tokio::process::Child,
    asked: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("pid", &self.child.id())
            .finish_non_exhaustive()
    }
}

fn default_binary() -> PathBuf {
    if let Ok(exe) = std::env::current_exe() {
        if exe.file_name().is_some_and(|n| n == "autotool") {
            return exe;
        }
        if let Some(dir) = exe.parent() {
            for candidate in [dir.join("autotool"), dir.join("../autotool")] {
                if candidate.is_file() {
                    return candidate;
                }
            }
        }
    }
    PathBuf::from("autotool")
}

/// Why the client could not start a session or a request of it failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot start {}: {source}", binary.display())]
    Start {
        binary: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A stdio pipe of the spawned server was not set up.
    #[error("no {0} pipe")]
    NoPipe(&'static str),
    #[error("autotool serve did not start a session: {0}")]
    Session(#[source] Box<rmcp::service::ClientInitializeError>),
    /// A request of the session failed (the server went away, or answered with an error).
    #[error(transparent)]
    Request(#[from] rmcp::ServiceError),
}

/// Spawn `autotool serve` and complete the handshake.
pub async fn connect(options: ConnectOptions) -> Result<Client, ClientError> {
    let binary = options.binary.clone().unwrap_or_else(default_binary);
    let mut command = tokio::process::Command::new(&binary);
    command
        .args(&options.args)
        .envs(options.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(if options.quiet {
            Stdio::null()
        } else {
            Stdio::inherit()
        })
        .kill_on_drop(true);
    let mut child = command.spawn().map_err(|source| ClientError::Start {
        binary: binary.clone(),
        source,
    })?;
    let stdout = child.stdout.take().ok_or(ClientError::NoPipe("stdout"))?;
    let stdin = child.stdin.take().ok_or(ClientError::NoPipe("stdin"))?;
    let asked = Arc::new(AtomicUsize::new(0));
    let handler = Handler {
        on_consent: options.on_consent.clone(),
        asked: asked.clone(),
    };
    let service = handler
        .serve((stdout, stdin))
        .await
        .map_err(|e| ClientError::Session(Box::new(e)))?;
    Ok(Client {
        service,
        child,
        asked,
    })
}

/// The longest [`Client::call_tool`] keeps calling again on serve's hint.
pub const RETRY_BOUND: std::time::Duration = std::time::Duration::from_secs(600);

/// How long `result` asks to wait before calling again (at most 10 s a time), if it asks.
fn retry_after(result: &CallToolResult) -> Option<std::time::Duration> {
    let meta = result.meta.as_ref()?;
    let ms = meta
        .0
        .get(crate::tool::runtime::prepare::META_RETRY_AFTER_MS)?
        .as_u64()?;
    Some(std::time::Duration::from_millis(ms.min(10_000)))
}

impl Client {
    /// Every tool the server lists now.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, ClientError> {
        Ok(self.service.peer().list_all_tools().await?)
    }

    /// Call `name` with `arguments`; a tool's own failure is a result with `is_error`. An
    /// answer that says when to call again (`_meta` `io.autotool/retryAfterMs`: the runtime is
    /// being built, verification continues) is called again after that wait, as a program
    /// should, for at most [`RETRY_BOUND`] in all.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: JsonObject,
    ) -> Result<CallToolResult, ClientError> {
        let deadline = tokio::time::Instant::now() + RETRY_BOUND;
        loop {
            let mut params = CallToolRequestParams::new(name.to_string());
            params.arguments = Some(arguments.clone());
            let result = self.service.peer().call_tool(params).await?;
            let wait = retry_after(&result);
            match wait {
                Some(wait) if tokio::time::Instant::now() + wait < deadline => {
                    tokio::time::sleep(wait).await;
                }
                _ => return Ok(result),
            }
        }
    }

    /// How many consent questions the server has put to this client.
    pub fn consent_questions(&self) -> usize {
        self.asked.load(Ordering::Relaxed)
    }

    /// End the session and wait for the server to exit.
    pub async fn close(mut self) -> Result<(), ClientError> {
        let _ = self.service.cancel().await;
        match tokio::time::timeout(std::time::Duration::from_secs(10), self.child.wait()).await {
            Ok(_) => Ok(()),
            Err(_) => {
                let _ = self.child.kill().await;
                Ok(())
            }
        }
    }
}
