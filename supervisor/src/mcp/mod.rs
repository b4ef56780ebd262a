//! The protocol edge: the only place rmcp's server types appear.
//!
//! - [`request`]: a `tools/call` parsed once into a typed request; the built-ins' input schemas
//!   generated from the same types;
//! - [`handler`]: the server hosts talk to, one handler per kind of request, over the
//!   [`crate::library`];
//! - [`consent`]: asking the host for consent in its era;
//! - [`info`]: `tool_info`, a tool's record read by the agent, and the sandbox's measured
//!   self-report;
//! - [`listing`]: the tool list and the server instructions;
//! - [`render`]: the one render step, typed results → what the host receives: redact every
//!   string, then cap. [`Rendered`] wraps the server so that every answer it sends passes it;
//! - [`synthesize`]: `synthesize_tool`, on autotool's own model;
//! - [`verifying`]: a `create_tool` whose verification outlasts its hold, joined by the same
//!   request again;
//! - [`stdio`], [`http`]: the transports.

pub mod consent;
pub mod handler;
pub mod http;
pub mod info;
pub mod listing;
pub mod offers;
pub mod render;
pub mod request;
pub mod stdio;
#[cfg(feature = "own-model")]
pub mod synthesize;
pub mod verifying;

use handler::{AutotoolServer, Surface};
use render::Renderer;
#[allow(deprecated)]
use rmcp::model::SetLevelRequestParams;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CustomRequest, CustomResult, GetPromptRequestParams,
    GetPromptResponse, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use std::borrow::Cow;
use std::sync::Arc;

/// The server with the render step around every answer: whatever the handler returns (a
/// result, the tool list, server info and instructions, an error) is redacted, and a tool
/// answer capped, on its way to the host. The handler renders its own results already; this
/// covers a path that forgot, so "every byte bound for the model is redacted" does not depend
/// on each path remembering.
#[derive(Debug, Clone)]
pub struct Rendered(pub AutotoolServer, pub Arc<Surface>);

impl Rendered {
    /// The server for one connection of `transport` (`stdio`, `http`).
    pub fn new(surface: Arc<Surface>, transport: &'static str) -> Rendered {
        Rendered(AutotoolServer::new(surface.clone(), transport), surface)
    }

    fn with_renderer<T>(&self, f: impl FnOnce(&Renderer<'_>) -> T) -> T {
        let secrets = self.1.library.secrets();
        let renderer = Renderer {
            secrets: &secrets,
            cap: self.1.library.settings.max_output_bytes,
        };
        f(&renderer)
    }
}

fn render_error(renderer: &Renderer<'_>, mut e: McpError) -> McpError {
    e.message = Cow::Owned(renderer.text(&e.message));
    if let Some(data) = e.data.as_mut() {
        renderer.json(data);
    }
    e
}

/// What is withheld when an answer no longer fits its type once redacted.
fn withheld() -> McpError {
    McpError::internal_error(
        "autotool withheld an answer: once the key values in it were redacted it was no longer \
         valid",
        None,
    )
}

impl Rendered {
    /// `answer`, redacted (and a tool answer capped too).
    fn render<T: serde::Serialize + serde::de::DeserializeOwned>(
        &self,
        answer: Result<T, McpError>,
    ) -> Result<T, McpError> {
        self.with_renderer(|r| match answer {
            Ok(v) => r.value(&v).ok_or_else(withheld),
            Err(e) => Err(render_error(r, e)),
        })
    }
}

/// Every method the handler answers, delegated and rendered; the rest keep rmcp's defaults,
/// which say a method is not there.
impl ServerHandler for Rendered {
    fn get_info(&self) -> ServerConfig {
        let info = self.0.get_info();
        self.with_renderer(|r| r.value(&info)).unwrap_or_else(|| {
            let mut bare = info;
            bare.instructions = None;
            bare
        })
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        self.0.supported_protocol_versions()
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.0.on_initialized(context).await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        self.0.accepted_subscription_filter(requested)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        self.0.listen(context).await
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let answer = self.0.list_tools(request, context).await;
        self.render(answer)
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, McpError> {
        let answer = self.0.list_prompts(request, context).await;
        self.render(answer)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, McpError> {
        let answer = self.0.list_resources(request, context).await;
        self.render(answer)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, McpError> {
        let answer = self.0.list_resource_templates(request, context).await;
        self.render(answer)
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let answer = self.0.set_level(request, context).await;
        self.with_renderer(|r| answer.map_err(|e| render_error(r, e)))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        // A tool's resource: rendered (redacted, bounded) as every answer, binary contents
        // included.
        let answer = self.0.read_resource(request, context).await;
        self.with_renderer(|r| match answer {
            Ok(ReadResourceResponse::Complete(result)) => r
                .value(&result)
                .map(ReadResourceResponse::Complete)
                .ok_or_else(withheld),
            Ok(ReadResourceResponse::InputRequired(input)) => r
                .value(&input)
                .map(ReadResourceResponse::InputRequired)
                .ok_or_else(withheld),
            Ok(other) => Ok(other),
            Err(e) => Err(render_error(r, e)),
        })
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        // A tool's prompt: its messages (images among them) rendered as every answer.
        let answer = self.0.get_prompt(request, context).await;
        self.with_renderer(|r| match answer {
            Ok(GetPromptResponse::Complete(result)) => r
                .value(&result)
                .map(GetPromptResponse::Complete)
                .ok_or_else(withheld),
            Ok(GetPromptResponse::InputRequired(input)) => r
                .value(&input)
                .map(GetPromptResponse::InputRequired)
                .ok_or_else(withheld),
            Ok(other) => Ok(other),
            Err(e) => Err(render_error(r, e)),
        })
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        let answer = self.0.on_custom_request(request, context).await;
        self.render(answer)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let tool = self.0.get_tool(name)?;
        self.with_renderer(|r| r.value(&tool))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let answer = self.0.call_tool(request, context).await;
        self.with_renderer(|r| match answer {
            Ok(CallToolResponse::Complete(result)) => {
                Ok(CallToolResponse::Complete(r.result(result)))
            }
            Ok(CallToolResponse::InputRequired(input)) => r
                .value(&input)
                .map(CallToolResponse::InputRequired)
                .ok_or_else(withheld),
            Ok(other) => Ok(other),
            Err(e) => Err(render_error(r, e)),
        })
    }
}
