//! What a tool offers, checked ([`check_tools`]: names, schemas, sizes) and tried ([`smoke`]:
//! the call its author asked for).

use super::{
    MAX_FUNCTION_BYTES, SmokeTest, Stage, VerifyFailure, cap_tail, split, traceback_summary,
};
use crate::redact::Redactor;
use crate::tool::process::{CallOutcome, ToolInfo, ToolProcess};
use crate::version::FunctionSpec;
use autotool_policy::names::{FunctionName, MountedName, ToolName};
use rmcp::model::JsonObject;
use std::time::Duration;

/// The [`Stage::ListTools`] rules: at least one function; names that are [`FunctionName`]s,
/// each once, that fit with `tool`'s name in a [`MountedName`], and that hold no key value
/// (a name is an identity hosts show and keep: it is refused, not redacted), nor do the names
/// of its parameters (every call sends them back; see [`parameter_with_key`]); input schemas
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
        if let Some(r) = redactor
            && let Some(shown) = parameter_with_key(&f.input_schema, r).or_else(|| {
                f.output_schema
                    .as_ref()
                    .and_then(|o| parameter_with_key(o, r))
            })
        {
            return fail(format!(
                "function {name:?} has a parameter named {shown:?}, which holds the value of a key; a parameter's name is shown to every host and sent back in every call, so it may never hold a credential: name it for what it means"
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

/// The first property name, at any depth of `schema` (the keys of every `properties` object),
/// that holds a key value, as the redactor shows it.
fn parameter_with_key(schema: &JsonObject, r: &Redactor) -> Option<String> {
    fn walk(v: &serde_json::Value, r: &Redactor) -> Option<String> {
        match v {
            serde_json::Value::Object(map) => {
                if let Some(serde_json::Value::Object(properties)) = map.get("properties")
                    && let Some(name) = properties.keys().find(|k| r.contains_secret(k.as_bytes()))
                {
                    return Some(r.redact(name).into_owned());
                }
                map.values().find_map(|v| walk(v, r))
            }
            serde_json::Value::Array(items) => items.iter().find_map(|v| walk(v, r)),
            _ => None,
        }
    }
    walk(&serde_json::Value::Object(schema.clone()), r)
}

/// What verification records of a tool's functions, redacted before anything keeps it: titles,
/// descriptions, every string and object key of the schemas (defaults, enums, examples, titles
/// of parameters) and the annotations. A tool can compute them from its key at import; this is
/// the one place they are read from it, so the manifest, the ledger, the tool list, events and
/// `autotool tools show` all hold the redacted form. (Names holding a value were refused by
/// [`check_tools`].)
pub fn redacted(tools: Vec<ToolInfo>, redactor: Option<&Redactor>) -> Vec<ToolInfo> {
    let Some(r) = redactor else { return tools };
    tools
        .into_iter()
        .map(|t| ToolInfo::from(FunctionSpec::from(t).redacted(r)))
        .collect()
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;

    const KEY: &str = "mk-9f3e1a7c5b2d8e4f6a0c";

    fn info(input: serde_json::Value) -> ToolInfo {
        ToolInfo {
            name: "lookup".into(),
            title: Some(format!("Lookup with {KEY}")),
            description: Some(format!("Uses the key {KEY} for you")),
            input_schema: input.as_object().unwrap().clone(),
            output_schema: Some(
                json!({"type": "object", "properties": {"result": {"type": "string",
                       "examples": [KEY]}}})
                .as_object()
                .unwrap()
                .clone(),
            ),
            annotations: Some(json!({"title": KEY})),
        }
    }

    #[test]
    fn metadata_computed_from_a_key_is_redacted_and_a_parameter_named_with_it_refused() {
        let r = Redactor::new(&[("META_API_KEY", KEY)]).unwrap();
        let tool = ToolName::parse("meta").unwrap();
        let schema = json!({"type": "object", "properties": {
            "q": {"type": "string", "default": KEY, "title": KEY, "enum": [KEY, "x"]}}});
        let listed = vec![info(schema)];
        // Control: as listed, the key is in the title, description, schemas and annotations.
        let raw = serde_json::to_string(&listed).unwrap();
        assert_eq!(raw.matches(KEY).count(), 7, "{raw}");
        check_tools(&tool, &listed, Some(&r)).unwrap();
        let kept = serde_json::to_string(&redacted(listed, Some(&r))).unwrap();
        assert!(!kept.contains(KEY), "{kept}");
        assert_eq!(kept.matches("[REDACTED:META_API_KEY]").count(), 7, "{kept}");

        // A parameter named with the key, at the top or nested, is refused with the name
        // redacted. Control: without the redactor the same listing passes.
        for schema in [
            json!({"type": "object", "properties": {KEY: {"type": "string"}}}),
            json!({"type": "object", "properties": {"outer": {"type": "object",
                   "properties": {format!("x{KEY}"): {"type": "integer"}}}}}),
        ] {
            let listed = vec![info(schema)];
            check_tools(&tool, &listed, None).unwrap();
            let refused = check_tools(&tool, &listed, Some(&r)).unwrap_err();
            assert!(
                refused.message.contains("has a parameter named")
                    && refused.message.contains("[REDACTED:META_API_KEY]")
                    && !refused.message.contains(KEY),
                "{}",
                refused.message
            );
        }
    }
}
