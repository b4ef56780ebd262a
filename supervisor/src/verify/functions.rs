//! What a tool offers, checked ([`check_tools`]: names, schemas, sizes) and tried ([`smoke`]:
//! the call its author asked for).

use super::{
    MAX_FUNCTION_BYTES, SmokeTest, Stage, VerifyFailure, cap_tail, split, traceback_summary,
};
use crate::redact::Redactor;
use crate::tool::process::{CallOutcome, ToolInfo, ToolProcess};
use autotool_policy::names::{FunctionName, MountedName, ToolName};
use rmcp::model::JsonObject;
use std::time::Duration;

/// The [`Stage::ListTools`] rules: at least one function; names that are [`FunctionName`]s,
/// each once, that fit with `tool`'s name in a [`MountedName`], and that hold no key value
/// (a name is an identity hosts show and keep: it is refused, not redacted); input schemas
/// with `"type": "object"`; output schemas, where present, likewise; each function's name,
/// description and schemas at most [`MAX_FUNCTION_BYTES`].
pub fn check_tools(
    tool: &ToolName,
    tools: &[ToolInfo],
    redactor: Option<&Redactor>,
) -> Result<(), VerifyFailure> {
    let fail = |m: String| Err(VerifyFailure::new(Stage::ListTools, m, ""));
    if tools.is_empty() {
        return fail(
            "the tool offers no functions: register at least one with `@mcp.tool()` above a function defined before `mcp.run()`".into(),
        );
    }
    for (i, f) in tools.iter().enumerate() {
        let name = &f.name;
        if let Some(r) = redactor
            && let shown = r.redact(name)
            && shown != name.as_str()
        {
            return fail(format!(
                "function name {shown:?} holds the value of a key; a function's name is shown to every host, so it may never hold a credential: name the function for what it does"
            ));
        }
        let function = match FunctionName::parse(name) {
            Ok(f) => f,
            Err(e) => return fail(e.to_string()),
        };
        if let Err(e) = MountedName::join(tool, &function) {
            return fail(e.to_string());
        }
        if tools[..i].iter().any(|t| &t.name == name) {
            return fail(format!(
                "two functions are named {name:?}; give each a name of its own"
            ));
        }
        if let Some(why) = not_an_object_schema(&f.input_schema) {
            return fail(format!(
                "function {name:?} has an input schema that {why}; its parameters must form a JSON object schema (\"type\": \"object\"), which the SDK writes for plain typed parameters"
            ));
        }
        if let Some(output) = &f.output_schema
            && let Some(why) = not_an_object_schema(output)
        {
            return fail(format!(
                "function {name:?} has an output schema that {why}; return a str, a dict or a pydantic model and let the SDK describe it"
            ));
        }
        let size = serde_json::to_vec(f).map(|v| v.len()).unwrap_or(0);
        if size > MAX_FUNCTION_BYTES {
            return fail(format!(
                "function {name:?} is described in {} KiB (name, description and schemas); keep it under {} KiB",
                size.div_ceil(1024),
                MAX_FUNCTION_BYTES >> 10
            ));
        }
    }
    Ok(())
}

fn not_an_object_schema(schema: &JsonObject) -> Option<String> {
    match schema.get("type") {
        Some(serde_json::Value::String(t)) if t == "object" => {}
        Some(other) => return Some(format!("has \"type\": {other}")),
        None => return Some("has no \"type\"".into()),
    }
    match schema.get("properties") {
        None | Some(serde_json::Value::Object(_)) => None,
        Some(_) => Some("has \"properties\" that are not an object".into()),
    }
}

/// [`Stage::SmokeTest`]: call the function the author named, with their arguments.
pub(super) async fn smoke(
    process: &ToolProcess,
    tools: &[ToolInfo],
    test: &SmokeTest,
    timeout: Duration,
    tool_file: &str,
) -> Result<CallOutcome, VerifyFailure> {
    let function = &test.function;
    if !tools.iter().any(|t| &t.name == function) {
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        return Err(VerifyFailure::new(
            Stage::SmokeTest,
            format!(
                "smoke_test.function {function:?} is not one of the tool's functions ({})",
                names.join(", ")
            ),
            "",
        ));
    }
    let shown = format!(
        "{function}({})",
        serde_json::to_string(&test.arguments).unwrap_or_default()
    );
    let outcome = process
        .call(function, test.arguments.clone(), timeout)
        .await
        .map_err(|e| {
            let (message, log) = split(e);
            let raised = traceback_summary(&log, tool_file)
                .map(|r| format!("; it raised {r}"))
                .unwrap_or_default();
            VerifyFailure::new(
                Stage::SmokeTest,
                format!("the smoke test {shown} failed: {message}{raised}"),
                log,
            )
        })?;
    if outcome.is_error {
        let text = outcome
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
            .collect::<Vec<_>>()
            .join("\n");
        let text = if text.trim().is_empty() {
            "(no message)".to_string()
        } else {
            text
        };
        let message = match traceback_summary(&outcome.stderr, tool_file) {
            Some(raised) => format!(
                "the smoke test {shown} raised {raised} (the traceback is below); the tool answered: {text}"
            ),
            None => format!("the smoke test {shown} returned an error: {text}"),
        };
        return Err(VerifyFailure::new(
            Stage::SmokeTest,
            message,
            cap_tail(&outcome.stderr),
        ));
    }
    Ok(outcome)
}
