//! The MCP server a host app talks to: `create_tool`, `run_tool`, `search_tools` and every
//! created function as `<tool>__<function>`, for hosts of both protocol eras on one connection.
//!
//! - 2025-06-18 / 2025-11-25 hosts `initialize`, and hear of list changes through
//!   `notifications/tools/list_changed` on the connection's peer.
//! - 2026-07-28 hosts call `server/discover`, carry their version in each request's `_meta`, and
//!   hear of list changes only on the `subscriptions/listen` streams they open.
//!
//! A `tools/call` is parsed once into a typed [`Request`], consent is obtained for the version
//! it would run, and one handler per kind of request calls the library and renders its typed
//! result ([`super::render`]). The tool list is built once per snapshot and shared by every
//! connection; `get_tool` (synchronous, used by rmcp to validate calls) reads it without
//! waiting, and also finds the functions of tools the list limit leaves out, so calls to them by
//! name work.

use super::listing;
use super::render::{self, Renderer};
use super::request::{ParseError, Request};
use crate::library::{CallError, Library};
use crate::version::Subject;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CustomRequest, CustomResult,
    ErrorCode, GetPromptRequestParams, GetPromptResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use std::borrow::Cow;
use std::sync::{Arc, RwLock};

/// The protocol revisions autotool is tested against.
pub const PROTOCOL_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

/// What every connection of one serve shares: the library, and the tool list rendered for its
/// current snapshot.
#[derive(Debug)]
pub struct Surface {
    pub library: Arc<Library>,
    /// The tool list of the snapshot revision it was built for.
    list: RwLock<Option<(u64, Arc<Vec<Tool>>)>>,
    /// `create_tool` verifications, which outlive the calls that began them.
    verifying: super::verifying::Verifying,
}

impl Surface {
    pub fn new(library: Arc<Library>) -> Arc<Surface> {
        Arc::new(Surface {
            library,
            list: RwLock::new(None),
            verifying: Default::default(),
        })
    }

    /// The tool list for the current snapshot, built (and redacted) once per snapshot.
    pub fn tools(&self) -> Arc<Vec<Tool>> {
        let snapshot = self.library.snapshot();
        if let Some((revision, list)) = &*self.list.read().unwrap_or_else(|p| p.into_inner())
            && *revision == snapshot.revision
        {
            return list.clone();
        }
        let secrets = self.library.secrets();
        let renderer = self.renderer(&secrets);
        let list: Vec<Tool> =
            listing::tool_list(&snapshot, &secrets.names, self.library.settings.list_limit)
                .into_iter()
                .filter_map(|t| renderer.value(&t))
                .collect();
        let list = Arc::new(list);
        *self.list.write().unwrap_or_else(|p| p.into_inner()) =
            Some((snapshot.revision, list.clone()));
        list
    }

    /// The server instructions.
    pub fn instructions(&self) -> String {
        let secrets = self.library.secrets();
        let told = listing::instructions(
            &self.library.snapshot(),
            &secrets.names,
            self.library.settings.list_limit,
        );
        self.renderer(&secrets).text(&format!(
            "{told} {}",
            super::info::self_report(&self.library)
        ))
    }

    fn renderer<'a>(&self, secrets: &'a crate::library::Secrets) -> Renderer<'a> {
        Renderer {
            secrets,
            cap: self.library.settings.max_output_bytes,
        }
    }
}

/// The server; one per connection (or, for 2026-07-28 requests over HTTP, per request),
/// sharing the [`Surface`].
#[derive(Debug, Clone)]
pub struct AutotoolServer {
    surface: Arc<Surface>,
    /// The connection's kind, for what a consent question is bound to (`stdio`, `http`).
    transport: &'static str,
}

/// Whether the request comes from a 2026-07-28 host (no `initialize` in its era).
pub fn modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| !v.has_initialize())
}

/// The channel a request came on: the transport, who it authenticated as (over HTTP) and its
/// session, when it has one. A consent question is answered only on the channel it was asked.
fn channel(transport: &str, context: &RequestContext<RoleServer>) -> String {
    let Some(parts) = context.extensions.get::<http::request::Parts>() else {
        return transport.to_string();
    };
    let principal = parts
        .extensions
        .get::<super::http::Principal>()
        .map(|p| p.to_string())
        .unwrap_or_else(|| "anonymous".into());
    let session = parts
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    format!("{transport}|{principal}|{session}")
}

impl AutotoolServer {
    pub fn new(surface: Arc<Surface>, transport: &'static str) -> Self {
        AutotoolServer { surface, transport }
    }

    fn library(&self) -> &Library {
        &self.surface.library
    }

    /// The version a request would run, when it declares keys or packages: `create_tool`'s
    /// code, or the mounted tool behind `run_tool` and `<tool>__<function>`.
    fn wants_consent<'a>(
        &self,
        request: &'a Request,
        prepared: Option<&'a crate::library::Prepared>,
        mounted: Option<&'a crate::version::Version>,
    ) -> Option<Subject<'a>> {
        let subject = match request {
            Request::Create(_) => prepared?.subject(),
            Request::Run { .. } | Request::Mounted { .. } => mounted?.subject(),
            Request::Search { .. } | Request::Synthesize { .. } | Request::Info { .. } => {
                return None;
            }
        };
        let reaches = subject.reach.is_some_and(|r| !r.is_empty());
        (!subject.declared.is_empty() || subject.packages.is_some() || reaches).then_some(subject)
    }

    async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let held_from = tokio::time::Instant::now();
        let library = self.library();
        let args = request.arguments.clone().unwrap_or_default();
        let parsed = match Request::parse(&request.name, &args, library.synthesize_offered()) {
            Ok(r) => r,
            Err(ParseError::Arguments(e)) => return Ok(render::error_result(e).into()),
            Err(ParseError::UnknownTool(name)) => return Err(unknown_tool(&name)),
        };
        // What the request would run, read once: the prepared code, or the mounted version.
        let mut prepared = None;
        let mut mounted = None;
        match &parsed {
            Request::Create(c) => match library.prepare(c.clone()) {
                Ok(p) => prepared = Some(p),
                Err(e) => return Ok(render::create_failed(&e).into()),
            },
            Request::Run { tool, function, .. } => {
                mounted = library
                    .mounted(tool)
                    .filter(|t| t.state.listed() && t.functions.get(function).is_some());
            }
            Request::Mounted { name, .. } => {
                let snapshot = library.snapshot();
                match snapshot.resolve(&name.to_string()) {
                    Some((t, _)) => mounted = Some(t.clone()),
                    None => {
                        if let Some(message) = library.off_list(name.tool().as_str()) {
                            return Ok(render::error_result(message).into());
                        }
                        return Err(unknown_tool(&request.name));
                    }
                }
            }
            Request::Search { .. } | Request::Synthesize { .. } | Request::Info { .. } => {}
        }
        // What runs a tool waits for the runtime, a bounded time (it is prepared in the
        // background from serve's start).
        if matches!(
            parsed,
            Request::Create(_) | Request::Run { .. } | Request::Mounted { .. }
        ) && let Some(answer) = self.runtime_ready(&request.name, &context).await
        {
            return Ok(answer.into());
        }
        // The packages the code declares are resolved before consent: the user is asked about
        // the exact set that would be installed.
        if let Some(p) = prepared.as_mut()
            && let Err(e) = library.resolve_packages(p).await
        {
            return Ok(render::create_failed(&e).into());
        }
        // Consent comes before anything runs with a key or is installed, verification
        // included. The approvals are read once here and what they grant goes with the call.
        let mut grants = None;
        if let Some(subject) = self.wants_consent(&parsed, prepared.as_ref(), mounted.as_deref()) {
            let channel = channel(self.transport, &context);
            let mut g = library.grants(subject);
            if let Err(answer) =
                super::consent::obtain(library, subject, &mut g, &request, &context, &channel).await
            {
                return Ok(answer);
            }
            grants = Some(g);
        }
        let for_version = |g: Option<crate::library::Grants>| {
            g.zip(mounted.as_ref().map(|t| t.version))
                .map(|(g, version)| (version, g))
        };
        let cap = library.settings.max_output_bytes;
        let result: CallToolResult = match parsed {
            Request::Create(_) => match prepared {
                Some(p) => self.create(p, grants, held_from, &context).await,
                None => render::error_result("create_tool: nothing to create"),
            },
            Request::Run {
                tool,
                function,
                arguments,
                force,
            } => render::call(
                &library
                    .call_with(&tool, &function, arguments, force, for_version(grants))
                    .await,
                cap,
            ),
            Request::Mounted { name, arguments } => render::call(
                &library
                    .call_with(
                        name.tool().as_str(),
                        name.function().as_str(),
                        arguments,
                        false,
                        for_version(grants),
                    )
                    .await,
                cap,
            ),
            Request::Search { query, limit } => {
                render::search(&query, &library.search(&query, limit))
            }
            Request::Info { name } => super::info::tool_info(library, &name),
            #[cfg(feature = "own-model")]
            Request::Synthesize { need } => {
                let progress = progress_reporter(&context, self.surface.clone());
                super::synthesize::synthesize_tool(library, &need, &progress).await
            }
            #[cfg(not(feature = "own-model"))]
            Request::Synthesize { .. } => render::error_result(
                "synthesize_tool is not part of this build of autotool (built without the \
                 own-model feature)",
            ),
        };
        Ok(CallToolResponse::Complete(result))
    }
}

impl AutotoolServer {
    /// Verify and mount `prepared` on a task of its own (or join the same request's
    /// verification under way), holding the call until `held_from` +
    /// [`crate::tool::runtime::prepare::HOLD`] with a progress notification each second; then,
    /// if it is still running, answer that verification continues.
    async fn create(
        &self,
        prepared: crate::library::Prepared,
        grants: Option<crate::library::Grants>,
        held_from: tokio::time::Instant,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        use super::verifying::{Key, continues};
        let key = Key {
            tool: prepared.request.name.to_string(),
            code_hash: prepared.code_hash.clone(),
            description: prepared.request.description.clone(),
        };
        let library = self.surface.library.clone();
        let by = crate::ledger::actor::current();
        let joined = self.surface.verifying.join_or_start(
            key,
            crate::ledger::actor::scope(by, async move {
                let list_limit = library.settings.list_limit;
                match match grants {
                    Some(g) => library.create_with(prepared, g).await,
                    None => library.create(prepared).await,
                } {
                    Ok(created) => render::created(&created, list_limit),
                    Err(e) => render::create_failed(&e),
                }
            }),
        );
        let tool = joined.key.tool.clone();
        if joined.joined {
            tracing::info!(%tool, "create_tool: joined the verification under way");
        }
        let token = context.meta.get_progress_token();
        let peer = context.peer.clone();
        let mut sent = 0u32;
        let tick = |running: std::time::Duration| {
            let Some(token) = token.clone() else {
                return;
            };
            sent += 1;
            let mut params = rmcp::model::ProgressNotificationParam::new(token, f64::from(sent));
            params.message = Some(format!("verifying {tool}: {} s so far", running.as_secs()));
            let peer = peer.clone();
            tokio::spawn(async move {
                if let Err(e) = peer.notify_progress(params).await {
                    tracing::debug!("progress not delivered: {e}");
                }
            });
        };
        // At least a moment to wait, even when consent took the call past its hold; a hold
        // of zero waits for the end (bounded by verification's own timeouts).
        let hold = match self.library().settings.create_hold {
            std::time::Duration::ZERO => std::time::Duration::from_secs(24 * 3600),
            hold => hold,
        };
        let deadline = (held_from + hold)
            .max(tokio::time::Instant::now() + std::time::Duration::from_millis(500));
        let started = joined.started;
        match self.surface.verifying.hold(joined, deadline, tick).await {
            Some(outcome) => outcome,
            None => {
                tracing::info!(%tool, "create_tool: verification continues after the hold");
                continues(&tool, started.elapsed())
            }
        }
    }

    /// Hold a call of `name` until the tool runtime is ready, at most
    /// [`crate::tool::runtime::prepare::HOLD`], sending a host that gave a `progressToken` a
    /// progress notification at each step; `Some` is the answer when it is not ready by then
    /// (what is happening, and when to call again) or could not be prepared.
    async fn runtime_ready(
        &self,
        name: &str,
        context: &RequestContext<RoleServer>,
    ) -> Option<CallToolResult> {
        use crate::tool::runtime::State;
        let runtime = &self.library().runtime;
        if matches!(runtime.state(), State::Ready(_)) {
            return None;
        }
        let token = context.meta.get_progress_token();
        let peer = context.peer.clone();
        let surface = self.surface.clone();
        let mut sent = 0u32;
        let mut last = String::new();
        let progress = move |state: &State| {
            let Some(token) = token.clone() else {
                return;
            };
            let said = state.describe();
            if said == last {
                return;
            }
            last.clone_from(&said);
            sent += 1;
            let mut params = rmcp::model::ProgressNotificationParam::new(token, f64::from(sent));
            params.message = Some(surface.library.secrets().redact(&said));
            let peer = peer.clone();
            tokio::spawn(async move {
                if let Err(e) = peer.notify_progress(params).await {
                    tracing::debug!("progress not delivered: {e}");
                }
            });
        };
        runtime
            .hold(
                name,
                crate::tool::runtime::prepare::HOLD,
                crate::tool::runtime::prepare::RUN_BY,
                progress,
            )
            .await
            .err()
            .map(|refused| render::not_ready(&refused))
    }
}

fn unknown_tool(name: &str) -> McpError {
    McpError::invalid_params(
        format!(
            "unknown tool {name:?}; call tools/list (or run_tool) to see the tools autotool has \
             mounted"
        ),
        None,
    )
}

#[cfg(feature = "own-model")]
/// Progress notifications for a request that asked for them (a `progressToken` in `_meta`),
/// each with the step as its message (redacted); nothing for one that did not.
fn progress_reporter(
    context: &RequestContext<RoleServer>,
    surface: Arc<Surface>,
) -> impl Fn(String) + Send + Sync + use<> {
    let token = context.meta.get_progress_token();
    let peer = context.peer.clone();
    let count = std::sync::atomic::AtomicU32::new(0);
    move |message: String| {
        let Some(token) = token.clone() else {
            return;
        };
        let n = count.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let mut params = rmcp::model::ProgressNotificationParam::new(token, f64::from(n));
        params.message = Some(surface.library.secrets().redact(&message));
        let peer = peer.clone();
        tokio::spawn(async move {
            if let Err(e) = peer.notify_progress(params).await {
                tracing::debug!("progress not delivered: {e}");
            }
        });
    }
}

impl ServerHandler for AutotoolServer {
    // rmcp marks logging deprecated (SEP-2577); the 2025 eras still define it.
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            // Prompts and resources: those the mounted tools offer ([`super::offers`]), listed
            // (empty, with cache hints, when none does).
            // Logging: declared so `logging/setLevel` (2025 eras) is accepted; autotool sends
            // hosts no log messages (tools' logs go to the serve log).
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_prompts()
                .enable_resources()
                .enable_logging()
                .build(),
        )
        .with_server_info(Implementation::new("autotool", env!("CARGO_PKG_VERSION")))
        .with_instructions(self.surface.instructions())
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(PROTOCOL_VERSIONS)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Only hosts of the older eras initialize: they hear of changes on this peer, for as
        // long as it is connected.
        let peer = context.peer.clone();
        let mut changes = self.library().subscribe_changes();
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                if peer.is_transport_closed() {
                    return;
                }
                if let Err(e) = peer.notify_tool_list_changed().await {
                    tracing::debug!("list_changed not delivered: {e}");
                    if peer.is_transport_closed() {
                        return;
                    }
                }
            }
        });
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let mut changes = self.library().subscribe_changes();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    if context.accepted().tools_list_changed == Some(true) {
                        context
                            .sink()
                            .notify_tool_list_changed()
                            .await
                            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                    }
                }
            }
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult {
            tools: self.surface.tools().as_ref().clone(),
            ..Default::default()
        })
    }

    /// `logging/setLevel` is a request of the 2025 eras, accepted there (nothing is sent at any
    /// level); 2026-07-28 removed it (a request's `_meta` carries its log level instead), so
    /// it is "method not found" for those hosts, which rmcp leaves to the handler.
    #[allow(deprecated)]
    async fn set_level(
        &self,
        _request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if modern(&context) {
            return Err(McpError::new(
                ErrorCode::METHOD_NOT_FOUND,
                "logging/setLevel is not part of 2026-07-28: set `_meta.logLevel` on a request",
                None,
            ));
        }
        Ok(())
    }

    /// A resource of a mounted tool, read from it ([`super::offers`]).
    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        super::offers::read_resource(self.library(), request).await
    }

    /// A prompt of a mounted tool (`<tool>__<prompt>`), got from it ([`super::offers`]).
    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        super::offers::get_prompt(self.library(), request).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, McpError> {
        Ok(super::offers::list_prompts(self.library()))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, McpError> {
        Ok(super::offers::list_resources(self.library()))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, McpError> {
        Ok(super::offers::list_resource_templates(self.library()))
    }

    /// rmcp hands over requests whose params do not fit the method as custom requests: a known
    /// method gets "invalid params" naming what it expects, not "method not found". The one
    /// exception is `initialize` from a 2026-07-28 host, whose era has no such method.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        if request.method == "initialize" && modern(&context) {
            return Err(McpError::new(
                ErrorCode::METHOD_NOT_FOUND,
                "initialize is not part of 2026-07-28: call server/discover, and carry the \
                 protocol version in each request's _meta",
                None,
            ));
        }
        let expected = match request.method.as_str() {
            "tools/call" => Some("{\"name\": string, \"arguments\"?: object}"),
            "tools/list" | "prompts/list" | "resources/list" => Some("{\"cursor\"?: string}"),
            "initialize" => Some(
                "{\"protocolVersion\": string, \"capabilities\": object, \"clientInfo\": object}",
            ),
            "subscriptions/listen" => Some("{\"notifications\": object}"),
            _ => None,
        };
        Err(match expected {
            Some(shape) => McpError::invalid_params(
                format!("invalid params for {}: expected {shape}", request.method),
                None,
            ),
            None => McpError::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("method not found: {}", request.method),
                None,
            ),
        })
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let list = self.surface.tools();
        if let Ok(i) = list.binary_search_by(|t| t.name.as_ref().cmp(name)) {
            return list.get(i).cloned();
        }
        // A listed tool that the list limit leaves out is still called by its name.
        let snapshot = self.library().snapshot();
        let (t, mounted) = snapshot.resolve(name)?;
        let f = t.functions.get(mounted.function().as_str())?.spec();
        let secrets = self.library().secrets();
        self.surface
            .renderer(&secrets)
            .value(&listing::mounted_tool(t, &f))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        // What the call decides is the host's doing: named by the client name it gave.
        let by = crate::ledger::Actor::host(
            context.client_info().as_ref().map(|i| i.name.as_str()),
            self.transport,
        );
        crate::ledger::actor::scope(by, self.call(request, context)).await
    }
}

impl From<CallError> for CallToolResult {
    fn from(e: CallError) -> Self {
        render::error_result(e.to_string())
    }
}
