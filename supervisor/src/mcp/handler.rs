//! The MCP server a host app talks to: `create_tool`, `run_tool`, `search_tools` and every
//! created function as `<tool>__<function>`, for hosts of both protocol eras on one connection.
//!
//! - 2025-06-18 / 2025-11-25 hosts `initialize`, and hear of list changes through
//!   `notifications/tools/list_changed` on the connection's peer.
//! - 2026-07-28 hosts call `server/discover`, carry their version in each request's `_meta`, and
//!   hear of list changes only on the `subscriptions/listen` streams they open.
//!
//! The list of mounted tools is a snapshot swapped atomically; `get_tool` (synchronous, used by
//! rmcp to validate calls) reads it without waiting, and also finds the functions of tools the
//! list limit leaves out, so calls to them by name work. The tool list is sorted by name and
//! the same for every connection.

use crate::app::{App, MountedTool, Secrets};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, ErrorCode, GetPromptRequestParams, GetPromptResponse, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};
use std::borrow::Cow;
use std::sync::Arc;

/// The protocol revisions autotool is tested against.
pub const PROTOCOL_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

/// Separator between a tool's name and its function's in a mounted name.
pub const SEPARATOR: &str = "__";

/// What `create_tool` tells the agent (the template), before the sentence on keys. It is also
/// the core of the instructions of autotool's own model in `synthesize_tool`.
pub const CREATE_TOOL_DESCRIPTION: &str = "\
Create (or replace) a tool when you need something you have no tool for: a web API, live data, \
a local service. Write a small Python MCP server; autotool lints it, runs it in a sandbox, checks \
its tools and an optional smoke test, probes each function with edge-case input from its schema \
(empty and huge strings, unicode, boundary numbers, missing optional arguments), and mounts each \
function as `<name>__<function>`. On failure you get the stage that failed and the log \
(traceback included): fix the code and call create_tool again with the same name. Template:

```python
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
import os, httpx2

REQUIRED_ENV = [\"WEATHER_API_KEY\"]   # credentials this tool needs (names only; [] if none)
mcp = MCPServer(\"weather\")

@mcp.tool()
def forecast(city: str, days: int = 3) -> str:
    \"\"\"Forecast for a city.\"\"\"
    base = os.environ.get(\"WEATHER_API_BASE\", \"https://api.weather.example\")
    r = httpx2.get(f\"{base}/forecast\", params={\"q\": city, \"days\": days},
                   headers={\"Authorization\": os.environ[\"WEATHER_API_KEY\"]})
    if r.status_code != 200:
        raise ToolError(f\"weather API said {r.status_code}: {r.text[:200]}\")
    return r.text

if __name__ == \"__main__\":
    mcp.run()
```

Rules: one file, standard library plus `mcp` and `httpx2`; no subprocesses, no files outside \
/tmp; type-annotate every argument; raise ToolError for errors the caller should read (an \
unexpected exception on any input the schema accepts fails the probes); read API base URLs from \
`*_API_BASE` variables so the tool can be pointed at a test server. `name` matches \
^[a-z][a-z0-9_]{0,39}$ without `__`. `verify`: \"standard\" (default) probes tools that declare \
no keys; \"thorough\" probes even those (it may spend API quota); \"quick\" skips the probes.";

/// How many built-in tools every list holds.
pub const BUILTINS: usize = 3;

const SEARCH_TOOLS_DESCRIPTION: &str = "\
Find tools already made, by what they do, before you write one: {query, limit?}. Results are \
ranked by score = 0.5 × text relevance (BM25 and the share of your words each tool has, over its \
name, description, functions and parameters) + 0.35 × observed success rate of its recent calls \
+ 0.15 × trust (active 1, on probation 0.5), so a tool that works beats a better-described one \
that keeps failing. Each result gives the tool's functions with their input schemas, its state, \
success rate and score breakdown, and how to call it: run_tool {tool, function, arguments}, \
which works for every tool, listed or not.";

const RUN_TOOL_DESCRIPTION: &str = "\
Call a function of a tool created with create_tool: {tool, function, arguments}. Use it when your \
tool list has not refreshed yet after create_tool, or to call any created tool by name. The \
result is the function's own. A tool that kept failing is quarantined (off the list); `force: \
true` calls it anyway.";

/// The server; one per connection, sharing the [`App`].
#[derive(Debug, Clone)]
pub struct AutotoolServer {
    app: Arc<App>,
}

impl AutotoolServer {
    /// The tool version a call would run, when it declares keys: `create_tool`'s code, or the
    /// mounted tool behind `run_tool` and `<tool>__<function>`. `None` when there is nothing to
    /// consent to (or the call is malformed, which it then reports itself).
    fn consent_subject(&self, name: &str, args: &JsonObject) -> Option<crate::consent::Subject> {
        let tool = match name {
            "create_tool" => {
                let tool = args.get("name").and_then(Value::as_str)?;
                let code = args.get("code").and_then(Value::as_str)?;
                if !crate::app::valid_tool_name(tool)
                    || code.len() > self.app.settings.max_code_bytes
                {
                    return None;
                }
                let subject = App::subject_for_code(tool, code);
                return (!subject.declared.is_empty()).then_some(subject);
            }
            "run_tool" => {
                let tool = args.get("tool").and_then(Value::as_str)?;
                let function = args.get("function").and_then(Value::as_str)?;
                self.app
                    .resolve_mounted(&format!("{tool}{SEPARATOR}{function}"))?
                    .0
            }
            other => self.app.resolve_mounted(other)?.0,
        };
        let mounted = self.app.mounted();
        let t = mounted.tools.get(&tool)?;
        (!t.required_env.is_empty()).then(|| t.subject())
    }

    pub fn new(app: Arc<App>) -> Self {
        AutotoolServer { app }
    }
}

fn object(v: Value) -> Arc<JsonObject> {
    Arc::new(match v {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    })
}

/// The names of the keys available, as the agent is told them.
pub fn keys_sentence(names: &[String]) -> String {
    if names.is_empty() {
        "No keys are available yet: if a tool needs one, ask the user to run `autotool keys add \
         NAME`."
            .to_string()
    } else {
        format!(
            "Keys available (names only; declare the ones a tool needs in REQUIRED_ENV): {}. The \
             user is asked once whether the tool may use them; if they decline or cannot be \
             asked, the result says what they can run. For any other key, ask the user to run \
             `autotool keys add NAME`.",
            names.join(", ")
        )
    }
}

/// What the agent is told of the list limit (`list_limit` entries, 0: none).
pub fn library_sentence(list_limit: usize) -> String {
    if list_limit == 0 {
        "Before writing a tool, search_tools may find one already made.".to_string()
    } else {
        format!(
            "Before writing a tool, search_tools may find one already made. The tool list holds \
             at most {list_limit} entries: when the library has more tools, only the most used \
             are listed; search_tools finds the others and run_tool calls them."
        )
    }
}

/// The built-in tools; `create_tool`'s description names the keys available and the list
/// limit.
pub fn builtin_tools(key_names: &[String], list_limit: usize) -> Vec<Tool> {
    vec![
        Tool::new(
            "create_tool",
            format!(
                "{CREATE_TOOL_DESCRIPTION}\n\n{}\n\n{}",
                library_sentence(list_limit),
                keys_sentence(key_names)
            ),
            object(json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,39}$",
                             "description": "The tool's name; the same name again makes a new version."},
                    "code": {"type": "string", "description": "The whole Python file."},
                    "description": {"type": "string", "description": "What the tool is for."},
                    "smoke_test": {
                        "type": "object",
                        "description": "A call to make before mounting; a failure fails creation.",
                        "properties": {
                            "function": {"type": "string"},
                            "arguments": {"type": "object"}
                        },
                        "required": ["function"]
                    },
                    "verify": {
                        "type": "string",
                        "enum": ["quick", "standard", "thorough"],
                        "default": "standard",
                        "description": "Edge-case probes of every function: standard for tools without keys, thorough even with keys, quick none."
                    }
                },
                "required": ["name", "code"]
            })),
        ),
        Tool::new(
            "run_tool",
            RUN_TOOL_DESCRIPTION,
            object(json!({
                "type": "object",
                "properties": {
                    "tool": {"type": "string"},
                    "function": {"type": "string"},
                    "arguments": {"type": "object"},
                    "force": {"type": "boolean", "description": "Call a tool that is quarantined or retired (off the list) anyway."}
                },
                "required": ["tool", "function"]
            })),
        ),
        Tool::new(
            "search_tools",
            SEARCH_TOOLS_DESCRIPTION,
            object(json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What you need, in a few words."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": crate::app::SEARCH_MAX,
                              "description": format!("How many tools to return (default {}).", crate::app::SEARCH_DEFAULT)}
                },
                "required": ["query"]
            })),
        ),
    ]
}

/// The MCP tool for one mounted function; its description and schemas pass the redactor like
/// everything else bound for the model.
pub fn mounted_tool(t: &MountedTool, f: &crate::registry::FunctionSpec, secrets: &Secrets) -> Tool {
    let description = secrets.redact(&format!(
        "[{} v{}] {}",
        t.name,
        t.version,
        f.description.clone().unwrap_or_default()
    ));
    let schema = |map: &JsonObject| {
        let mut v = Value::Object(map.clone());
        secrets.redact_json(&mut v);
        match v {
            Value::Object(m) => m,
            _ => JsonObject::new(),
        }
    };
    let mut tool = Tool::new(
        format!("{}{SEPARATOR}{}", t.name, f.name),
        description,
        Arc::new(schema(&f.input_schema)),
    );
    if let Some(out) = &f.output_schema {
        tool = tool.with_raw_output_schema(Arc::new(schema(out)));
    }
    tool
}

/// `synthesize_tool`, offered when autotool has a model of its own.
pub fn synthesize_tool() -> Tool {
    Tool::new(
        "synthesize_tool",
        crate::own_model::synthesize::DESCRIPTION,
        object(json!({
            "type": "object",
            "properties": {
                "need": {"type": "string", "description": "What the tool should do: the API or service, the functions and their arguments, the key it needs if any."}
            },
            "required": ["need"]
        })),
    )
}

/// The tool list for a set of mounted tools: the built-ins (`synthesize_tool` among them when
/// `synthesize`) and every function, sorted by name. Built once per change of the mounted set,
/// not per request.
pub fn tool_list<'a>(
    mounted: impl IntoIterator<Item = &'a MountedTool>,
    secrets: &Secrets,
    synthesize: bool,
    list_limit: usize,
) -> Vec<Tool> {
    let mut tools = builtin_tools(&secrets.names, list_limit);
    if synthesize {
        tools.push(synthesize_tool());
    }
    for t in mounted {
        for f in t.functions.iter() {
            tools.push(mounted_tool(t, &f.spec(), secrets));
        }
    }
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    tools
}

/// Progress notifications for a request that asked for them (a `progressToken` in `_meta`),
/// each with the step as its message; nothing for one that did not.
fn progress_reporter(context: &RequestContext<RoleServer>) -> impl Fn(String) + Send + Sync {
    let token = context.meta.get_progress_token();
    let peer = context.peer.clone();
    let count = std::sync::atomic::AtomicU32::new(0);
    move |message: String| {
        let Some(token) = token.clone() else {
            return;
        };
        let n = count.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let mut params = rmcp::model::ProgressNotificationParam::new(token, f64::from(n));
        params.message = Some(message);
        let peer = peer.clone();
        tokio::spawn(async move {
            if let Err(e) = peer.notify_progress(params).await {
                tracing::debug!("progress not delivered: {e}");
            }
        });
    }
}

fn args_of(request: &CallToolRequestParams) -> JsonObject {
    request.arguments.clone().unwrap_or_default()
}

fn error_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text.into())])
}

/// Whether the request comes from a 2026-07-28 host (no `initialize` in its era).
fn modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| !v.has_initialize())
}

impl ServerHandler for AutotoolServer {
    // rmcp marks logging deprecated (SEP-2577); the 2025 eras still define it.
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            // Prompts and resources: none, but listed (empty, with cache hints) rather than
            // refused, as clients and the conformance suite expect; reading one is "not found".
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
        .with_instructions(self.app.instructions())
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(PROTOCOL_VERSIONS)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Only hosts of the older eras initialize: they hear of changes on this peer.
        self.app.set_legacy_peer(context.peer.clone());
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let mut changes = self.app.subscribe_changes();
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
            tools: self.app.mounted().list.clone(),
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

    /// There are no resources: every URI is unknown (-32002 for the 2025 eras; rmcp makes it
    /// -32602 for 2026-07-28, as SEP-2164 asks), with the URI in `data`.
    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        Err(McpError::resource_not_found(
            format!("no resource {:?}: autotool serves tools only", request.uri),
            Some(json!({"uri": request.uri})),
        ))
    }

    /// There are no prompts: every name is unknown (-32602, as for an unknown tool).
    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        Err(McpError::invalid_params(
            format!("no prompt {:?}: autotool serves tools only", request.name),
            None,
        ))
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
        let mounted = self.app.mounted();
        if let Ok(i) = mounted.list.binary_search_by(|t| t.name.as_ref().cmp(name)) {
            return mounted.list.get(i).cloned();
        }
        // A listed tool that the list limit leaves out is still called by its name.
        let (tool, function) = name.split_once(SEPARATOR)?;
        let t = mounted.tools.get(tool)?;
        if !t.state.listed() {
            return None;
        }
        let f = t.functions.iter().find(|f| f.name == function)?;
        Some(mounted_tool(t, &f.spec(), &self.app.secrets()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        let args = args_of(&request);
        // Consent comes before anything runs with a key, verification included.
        if let Some(subject) = self.consent_subject(&name, &args)
            && let Err(answer) =
                crate::consent::obtain(&self.app, &subject, &request, &context).await
        {
            return Ok(answer);
        }
        let result = match name.as_str() {
            "create_tool" => self.app.create_tool(args).await,
            "synthesize_tool" => {
                let progress = progress_reporter(&context);
                self.app.synthesize_tool(args, &progress).await
            }
            "search_tools" => self.app.search_tools(&args),
            "run_tool" => {
                let tool = args.get("tool").and_then(Value::as_str);
                let function = args.get("function").and_then(Value::as_str);
                let arguments = match args.get("arguments") {
                    None | Some(Value::Null) => Some(JsonObject::new()),
                    Some(Value::Object(o)) => Some(o.clone()),
                    Some(_) => None,
                };
                match (tool, function, arguments) {
                    (Some(t), Some(f), Some(a)) => {
                        let force = args.get("force").and_then(Value::as_bool).unwrap_or(false);
                        self.app.call_function(t, f, a, force).await
                    }
                    _ => error_result(
                        "run_tool needs {\"tool\": string, \"function\": string, \"arguments\": object}",
                    ),
                }
            }
            other => match self.app.resolve_mounted(other) {
                Some((tool, function)) => {
                    self.app.call_function(&tool, &function, args, false).await
                }
                None => {
                    if let Some((tool, _)) = other.split_once(SEPARATOR)
                        && let Some(message) = self.app.off_list(tool)
                    {
                        return Ok(CallToolResponse::Complete(error_result(message)));
                    }
                    return Err(McpError::invalid_params(
                        format!(
                            "unknown tool {other:?}; call tools/list (or run_tool) to see the tools \
                             autotool has mounted"
                        ),
                        None,
                    ));
                }
            },
        };
        Ok(CallToolResponse::Complete(result))
    }
}
