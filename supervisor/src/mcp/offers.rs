//! Prompts and resources for hosts: what the mounted tools offer besides their functions
//! ([`crate::library::offers`]). A prompt is named as a function is, `<tool>__<prompt>`; a
//! resource keeps its own URI (the one the server's answers name in their resource links), and
//! a read goes to the one tool that lists that URI, or whose URI template matches it. A URI two
//! tools claim is refused with their names rather than guessed at.

use crate::library::Library;
use autotool_policy::names::{FunctionName, MountedName, ToolName};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    GetPromptRequestParams, GetPromptResponse, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ReadResourceRequestParams, ReadResourceResponse,
};
use serde_json::json;

/// Every prompt of the tools that may be called, named `<tool>__<prompt>` (a prompt whose name
/// cannot be mounted is left out, with a warning).
pub fn list_prompts(library: &Library) -> ListPromptsResult {
    let mut prompts = Vec::new();
    for (tool, offers) in library.offers() {
        for mut p in offers.prompts {
            match mounted(&tool, &p.name) {
                Some(name) => {
                    p.name = name.to_string();
                    prompts.push(p);
                }
                None => {
                    tracing::warn!(%tool, prompt = %p.name, "a prompt name that cannot be mounted: left out")
                }
            }
        }
    }
    ListPromptsResult {
        prompts,
        ..Default::default()
    }
}

fn mounted(tool: &ToolName, name: &str) -> Option<MountedName> {
    MountedName::join(tool, &FunctionName::parse(name).ok()?).ok()
}

/// Prompt `<tool>__<prompt>`, got from the running tool.
pub async fn get_prompt(
    library: &Library,
    request: GetPromptRequestParams,
) -> Result<GetPromptResponse, McpError> {
    let unknown = || {
        McpError::invalid_params(
            format!(
                "no prompt {:?}: prompts/list names the prompts the mounted tools offer",
                request.name
            ),
            None,
        )
    };
    let name = MountedName::split(&request.name).ok_or_else(unknown)?;
    let listed = library.offers().into_iter().any(|(tool, offers)| {
        &tool == name.tool()
            && offers
                .prompts
                .iter()
                .any(|p| p.name == name.function().as_str())
    });
    if !listed {
        return Err(unknown());
    }
    library
        .relay_prompt(
            name.tool().as_str(),
            name.function().as_str(),
            request.arguments,
        )
        .await
        .map(GetPromptResponse::Complete)
        .map_err(|e| McpError::internal_error(e.to_string(), None))
}

/// Every resource of the tools that may be called; a URI two tools list is shown once (the
/// first tool's), and reading it is refused with both names.
pub fn list_resources(library: &Library) -> ListResourcesResult {
    let mut seen = std::collections::BTreeSet::new();
    let resources = library
        .offers()
        .into_iter()
        .flat_map(|(_, o)| o.resources)
        .filter(|r| seen.insert(r.uri.clone()))
        .collect();
    ListResourcesResult {
        resources,
        ..Default::default()
    }
}

/// Every resource template of the tools that may be called.
pub fn list_resource_templates(library: &Library) -> ListResourceTemplatesResult {
    ListResourceTemplatesResult {
        resource_templates: library
            .offers()
            .into_iter()
            .flat_map(|(_, o)| o.templates)
            .collect(),
        ..Default::default()
    }
}

/// Read `uri` from the one tool that lists it (or, when none does, whose template matches it).
pub async fn read_resource(
    library: &Library,
    request: ReadResourceRequestParams,
) -> Result<ReadResourceResponse, McpError> {
    let uri = request.uri;
    let offers = library.offers();
    let mut owners: Vec<&ToolName> = offers
        .iter()
        .filter(|(_, o)| o.resources.iter().any(|r| r.uri == uri))
        .map(|(t, _)| t)
        .collect();
    if owners.is_empty() {
        owners = offers
            .iter()
            .filter(|(_, o)| o.templates.iter().any(|t| matches(&t.uri_template, &uri)))
            .map(|(t, _)| t)
            .collect();
    }
    let tool = match owners.as_slice() {
        [one] => one.as_str(),
        [] => {
            return Err(McpError::resource_not_found(
                format!(
                    "no resource {uri:?}: resources/list and resources/templates/list name what \
                     the mounted tools offer"
                ),
                Some(json!({"uri": uri})),
            ));
        }
        several => {
            let names: Vec<&str> = several.iter().map(|t| t.as_str()).collect();
            return Err(McpError::resource_not_found(
                format!(
                    "{uri:?} is offered by several tools ({}): autotool cannot tell which one \
                     is meant",
                    names.join(", ")
                ),
                Some(json!({"uri": uri})),
            ));
        }
    };
    library
        .relay_read(tool, &uri)
        .await
        .map(ReadResourceResponse::Complete)
        .map_err(|e| McpError::internal_error(e.to_string(), None))
}

/// Whether `uri` is one `template` (RFC 6570) expands to: its literal parts in order, each
/// expression standing for at least one character (`{x}` not crossing a `/`; `{+x}`, `{#x}`
/// and the rest any characters).
pub fn matches(template: &str, uri: &str) -> bool {
    // Literal parts and, between them, whether the expression may cross a `/`.
    let mut parts: Vec<(&str, Option<bool>)> = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            return false;
        };
        let expression = &rest[open + 1..open + close];
        let slash = !expression.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
        parts.push((&rest[..open], Some(slash)));
        rest = &rest[open + close + 1..];
    }
    parts.push((rest, None));
    fn go(parts: &[(&str, Option<bool>)], uri: &str) -> bool {
        let Some(((literal, expression), more)) = parts.split_first() else {
            return uri.is_empty();
        };
        let Some(after) = uri.strip_prefix(literal) else {
            return false;
        };
        match expression {
            None => after.is_empty() && more.is_empty(),
            Some(crosses) => (1..=after.len()).any(|n| {
                after.is_char_boundary(n)
                    && (*crosses || !after[..n].contains('/'))
                    && go(more, &after[n..])
            }),
        }
    }
    go(&parts, uri)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn templates_match_what_they_expand_to_and_nothing_else() {
        let t = "demo://resource/dynamic/text/{resourceId}";
        assert!(matches(t, "demo://resource/dynamic/text/2"));
        assert!(!matches(t, "demo://resource/dynamic/text/"));
        assert!(!matches(t, "demo://resource/dynamic/text/2/x"));
        assert!(!matches(t, "demo://resource/dynamic/blob/2"));
        assert!(matches("file:///{+path}", "file:///a/b/c.txt"));
        assert!(matches("x://{a}/{b}.json", "x://1/2.json"));
        assert!(!matches("x://{a}/{b}.json", "x://1/2.txt"));
        assert!(!matches("x://{a", "x://1"));
        assert!(matches("plain://x", "plain://x"));
        assert!(!matches("plain://x", "plain://xy"));
    }
}
