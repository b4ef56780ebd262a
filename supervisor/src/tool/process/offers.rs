//! What a server offers besides tools, relayed to hosts: its prompts and its resources
//! (static ones and templates). They are listed once, when a version is verified, and that
//! list is what hosts see (pinned as its functions are); getting a prompt or reading a
//! resource asks the running server, and its answer is bounded like a call's and redacted on
//! the way out like every answer.

use super::{ToolProcError, ToolProcess};
use rmcp::model::{
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, JsonObject, Prompt,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceTemplate,
};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The most prompts, resources and templates kept of one server (the rest are left out, with
/// a warning in the log).
pub const MAX_PROMPTS: usize = 100;
pub const MAX_RESOURCES: usize = 200;
pub const MAX_TEMPLATES: usize = 50;

/// A server's prompts and resources, as listed when its version was verified.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Offers {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prompts: Vec<Prompt>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<Resource>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub templates: Vec<ResourceTemplate>,
}

impl Offers {
    pub fn is_empty(&self) -> bool {
        self.prompts.is_empty() && self.resources.is_empty() && self.templates.is_empty()
    }
}

fn bounded<T>(mut items: Vec<T>, max: usize, what: &str) -> Vec<T> {
    if items.len() > max {
        tracing::warn!(
            "the server lists {} {what}; the first {max} are kept",
            items.len()
        );
        items.truncate(max);
    }
    items
}

impl ToolProcess {
    /// Its prompts and resources, each list only when it said at `initialize` it offers them.
    pub async fn list_offers(&self) -> Result<Offers, ToolProcError> {
        let mut offers = Offers::default();
        let timeout = self.list_timeout;
        if self.server.prompts {
            let prompts = self
                .request("prompts/list".into(), timeout, self.peer.list_all_prompts())
                .await?;
            offers.prompts = bounded(prompts, MAX_PROMPTS, "prompts");
        }
        if self.server.resources {
            let resources = self
                .request(
                    "resources/list".into(),
                    timeout,
                    self.peer.list_all_resources(),
                )
                .await?;
            offers.resources = bounded(resources, MAX_RESOURCES, "resources");
            let templates = self
                .request(
                    "resources/templates/list".into(),
                    timeout,
                    self.peer.list_all_resource_templates(),
                )
                .await?;
            offers.templates = bounded(templates, MAX_TEMPLATES, "resource templates");
        }
        Ok(offers)
    }

    /// Get prompt `name` with `arguments`.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        timeout: Duration,
    ) -> Result<GetPromptResult, ToolProcError> {
        let mut params = GetPromptRequestParams::new(name.to_string());
        params.arguments = arguments;
        let operation = format!("prompts/get {name}");
        match self
            .request(
                operation.clone(),
                timeout,
                self.peer.get_prompt_once(params),
            )
            .await?
        {
            GetPromptResponse::Complete(result) => Ok(result),
            _ => Err(self.refused_input(operation).await),
        }
    }

    /// Read resource `uri`.
    pub async fn read_resource(
        &self,
        uri: &str,
        timeout: Duration,
    ) -> Result<ReadResourceResult, ToolProcError> {
        let params = ReadResourceRequestParams::new(uri.to_string());
        let operation = format!("resources/read {uri}");
        match self
            .request(
                operation.clone(),
                timeout,
                self.peer.read_resource_once(params),
            )
            .await?
        {
            ReadResourceResponse::Complete(result) => Ok(result),
            _ => Err(self.refused_input(operation).await),
        }
    }

    /// An answer asking for input: the server is stopped, as for a call.
    async fn refused_input(&self, operation: String) -> ToolProcError {
        self.shared.fail(super::Cause::Violation(
            "it answered with an input request, which autotool tools may not do".into(),
        ));
        let cause = self.shared.cause().unwrap_or(super::Cause::ShutDown);
        self.dead(0, operation, cause).await
    }
}
