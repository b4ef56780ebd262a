//! The one render step: everything bound for a host becomes protocol objects here, and every
//! string in them passes the redactor before anything is cut to size.
//!
//! - Typed results of the library ([`Created`], [`CreateError`], [`Called`], [`CallError`],
//!   search hits) become `CallToolResult`s ([`created`], [`call`], …).
//! - [`Renderer::result`] takes a whole `CallToolResult`, serialises it, redacts **every
//!   string** of it (every content block type: text, images and audio with their mime types
//!   and data, embedded resources, resource links' names, URIs, titles and descriptions,
//!   annotations, `_meta`; `structuredContent`; object keys and numbers too), and only then
//!   caps it: the cap counts the whole serialised answer, so a 2 MiB embedded resource cannot
//!   pass a 256 KiB cap, and since the value was replaced before the cut, a value straddling
//!   the cut leaves nothing of itself behind.
//! - Before the strings, every payload the protocol base64-encodes (image and audio `data`, a
//!   resource's `blob`, a `data:…;base64,` URI) is decoded and searched as bytes ([`binary`]):
//!   a block that holds a key, or is not base64, is withheld and replaced by a text block that
//!   says so and names the key; the rest pass unchanged.
//! - [`Renderer::value`] does the same for any other protocol object (the tool list, server
//!   info and instructions, errors, progress, a consent question): [`super::Rendered`] runs
//!   every answer of the server through it, so a path that forgot is still covered.
//!
//! A value that no longer fits its type once redacted (a number that was a key value, say) is
//! not sent: the answer becomes an error that says so.

use crate::library::search::Hit;
use crate::library::{CallError, Called, CreateError, Created, Secrets};
use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Redacts with one key snapshot and caps at one size.
#[derive(Debug, Clone, Copy)]
pub struct Renderer<'a> {
    pub secrets: &'a Secrets,
    /// The most bytes a serialised tool answer may take.
    pub cap: usize,
}

/// Room kept for the note that says what was cut.
const NOTE_ROOM: usize = 160;

impl Renderer<'_> {
    /// `value` with every string (object keys and numbers too) redacted. `None` when the
    /// redacted value no longer fits `T`.
    pub fn value<T: Serialize + DeserializeOwned>(&self, value: &T) -> Option<T> {
        let mut v = serde_json::to_value(value).ok()?;
        self.json(&mut v);
        serde_json::from_value(v).ok()
    }

    /// A JSON value redacted in place: its binary payloads checked first ([`binary`]: a block
    /// whose decoded bytes hold a key is withheld), then every string.
    pub fn json(&self, value: &mut Value) {
        if let Some(redactor) = self.secrets.redactor() {
            binary::screen(redactor, value, self.cap);
            redactor.redact_json(value);
        }
    }

    /// Plain text, redacted.
    pub fn text(&self, text: &str) -> String {
        self.secrets.redact(text)
    }

    /// A tool answer for the host: redacted, then capped.
    pub fn result(&self, result: CallToolResult) -> CallToolResult {
        let Some(redacted) = self.value(&result) else {
            return CallToolResult::error(vec![ContentBlock::text(
                "autotool withheld this answer: once the key values in it were redacted it was \
                 no longer a valid result",
            )]);
        };
        cap(redacted, self.cap)
    }
}

/// Bytes `v` takes serialised.
fn json_len<T: Serialize>(v: &T) -> usize {
    serde_json::to_vec(v).map(|b| b.len()).unwrap_or(usize::MAX)
}

/// How many bytes `c` takes inside a JSON string.
fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// The longest prefix of `s` whose JSON string body takes at most `budget` bytes.
fn prefix_within(s: &str, budget: usize) -> &str {
    let mut used = 0;
    for (i, c) in s.char_indices() {
        used += escaped_len(c);
        if used > budget {
            return &s[..i];
        }
    }
    s
}

/// `result` cut to at most `cap` serialised bytes: the structured copy goes first (the text
/// content carries the same answer), then text blocks are shortened and other blocks left
/// out, in order, with a note saying how much was cut.
pub fn cap(mut result: CallToolResult, cap: usize) -> CallToolResult {
    if json_len(&result) <= cap {
        return result;
    }
    let mut cut = 0usize;
    if let Some(s) = result.structured_content.take() {
        if json_len(&result) <= cap {
            // The text blocks carry the answer; only the structured copy did not fit.
            return result;
        }
        cut += json_len(&s);
    }
    let blocks = std::mem::take(&mut result.content);
    let base = json_len(&result);
    let mut room = cap.saturating_sub(base + NOTE_ROOM);
    for block in blocks {
        let size = json_len(&block) + 1;
        if size <= room {
            room -= size;
            result.content.push(block);
            continue;
        }
        match &block {
            ContentBlock::Text(t) => {
                // The block's own framing (`{"type":"text","text":""}`, its annotations and
                // `_meta`, and a comma).
                let framing = size - t.text.chars().map(escaped_len).sum::<usize>();
                let kept = prefix_within(&t.text, room.saturating_sub(framing));
                cut += t.text.len() - kept.len();
                if !kept.is_empty() {
                    room =
                        room.saturating_sub(framing + kept.chars().map(escaped_len).sum::<usize>());
                    let mut shortened = t.clone();
                    shortened.text = kept.to_string();
                    result.content.push(ContentBlock::Text(shortened));
                }
            }
            other => {
                let what = match other {
                    ContentBlock::Image(i) => format!("an image ({})", i.mime_type),
                    ContentBlock::Audio(a) => format!("an audio clip ({})", a.mime_type),
                    ContentBlock::Resource(_) => "an embedded resource".to_string(),
                    ContentBlock::ResourceLink(_) => "a resource link".to_string(),
                    _ => "a content block".to_string(),
                };
                cut += size;
                let note = format!("[{what} of {size} bytes left out: over autotool's cap]");
                let note_size = note.len() + 30;
                if note_size <= room {
                    room -= note_size;
                    result.content.push(ContentBlock::text(note));
                }
            }
        }
    }
    result.content.push(ContentBlock::text(format!(
        "[output truncated: {cut} bytes over autotool's cap of {cap} bytes]"
    )));
    result
}

fn text(s: impl Into<String>) -> ContentBlock {
    ContentBlock::text(s.into())
}

/// An `isError` result holding `message`.
pub fn error_result(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![text(message)])
}

/// A call that did not run because the tool runtime is not ready: the text for the model, and
/// in `_meta` when to call again and why (docs/serve.md).
pub fn not_ready(refused: &crate::tool::runtime::prepare::NotReady) -> CallToolResult {
    retry_later(refused.message.clone(), refused.reason, refused.retry_after)
}

/// An `isError` answer saying the call did not run to its end yet: `message` for the model,
/// and for programs `_meta` `io.autotool/reason` (`reason`) and, when calling again soon is the
/// answer, `io.autotool/retryAfterMs`.
pub fn retry_later(
    message: String,
    reason: &str,
    retry_after: Option<std::time::Duration>,
) -> CallToolResult {
    use crate::tool::runtime::prepare::{META_REASON, META_RETRY_AFTER_MS};
    let mut meta = serde_json::Map::new();
    meta.insert(META_REASON.into(), json!(reason));
    if let Some(after) = retry_after {
        let ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
        meta.insert(META_RETRY_AFTER_MS.into(), json!(ms));
    }
    let mut result = error_result(message);
    result.meta = Some(rmcp::model::MetaObject(meta));
    result
}

/// What the agent is told of a tool it created.
pub fn created(c: &Created, list_limit: usize) -> CallToolResult {
    let mounted: Vec<Value> = c
        .functions
        .iter()
        .map(|(name, f)| {
            json!({
                "name": name.to_string(),
                "description": f.description,
                "inputSchema": f.input_schema,
                "outputSchema": f.output_schema,
            })
        })
        .collect();
    let mut summary = json!({
        "tool": c.tool.as_str(),
        "version": c.version,
        "functions": mounted,
        "required_env": c.required_env,
        "keys_granted": c.keys_granted,
        "key_notes": c.key_notes,
        "robustness": c.robustness,
        "verdicts": c.verdicts,
        "trigger_check": c.trigger_check,
    });
    if let Some(packages) = &c.packages {
        summary["packages"] = json!(packages);
    }
    let names: Vec<String> = c.functions.iter().map(|(n, _)| n.to_string()).collect();
    let listed_now = if c.listed {
        "Hosts that refresh their tool list see them now".to_string()
    } else {
        format!(
            "They are not in the tool list: the library holds more tools than the list's \
             {list_limit} entries, which go to the most used tools (search_tools finds the rest)"
        )
    };
    let name = &c.tool;
    if c.unchanged {
        summary["unchanged"] = json!(true);
    }
    let said = if c.unchanged {
        format!(
            "Unchanged: {name} v{} is already mounted with exactly this code and description, so \
             no new version was made ({}). Call it as before, or with run_tool {{\"tool\": \
             \"{name}\", \"function\": …, \"arguments\": {{…}}}}.",
            c.version,
            names.join(", ")
        )
    } else {
        format!(
            "Created {name} v{}: mounted {}. {listed_now}; any host can call them right away \
             with run_tool {{\"tool\": \"{name}\", \"function\": …, \"arguments\": {{…}}}}.",
            c.version,
            names.join(", ")
        )
    };
    let mut result = CallToolResult::success(vec![text(said), text(summary.to_string())]);
    for note in &c.key_notes {
        result.content.push(text(note.clone()));
    }
    result.structured_content = Some(summary);
    result
}

/// What the agent is told of a tool that was not created.
pub fn create_failed(e: &CreateError) -> CallToolResult {
    error_result(e.to_string())
}

/// A function's answer for the host, with the traceback's end when it failed (within a quarter
/// of the cap, so a flood before the error cannot push it out) and a word when it was called
/// with `force`.
pub fn call(outcome: &Result<Called, CallError>, cap: usize) -> CallToolResult {
    let called = match outcome {
        Ok(c) => c,
        Err(e) => return error_result(e.to_string()),
    };
    let mut content = called.content.clone();
    if let Some(stderr) = &called.stderr {
        let budget = (cap / 4).min(16 << 10);
        content.push(text(format!(
            "tool stderr:\n{}",
            crate::verify::tail_of(stderr, budget)
        )));
    }
    if let Some(why) = &called.forced {
        content.insert(
            0,
            text(format!(
                "[called with force: {why}; it is off the tool list]"
            )),
        );
    }
    if !called.egress_refused.is_empty() {
        content.push(text(format!(
            "[autotool: while this call ran, the sandbox refused {}'s connection to {}: it may \
             not reach it (not declared, or not granted). What it answered may be that refusal, \
             not the site's answer. `autotool tools show {}` lists what it may reach.]",
            called.tool,
            called.egress_refused.join(", "),
            called.tool
        )));
    }
    let mut result = if called.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = called.structured_content.clone();
    if !called.egress_refused.is_empty() {
        let mut meta = serde_json::Map::new();
        meta.insert(
            "autotool/egress_refused".into(),
            json!(called.egress_refused),
        );
        result.meta = Some(rmcp::model::MetaObject(meta));
    }
    result
}

/// `search_tools`' answer: a sentence, the results as JSON text, and the same as structured
/// content.
pub fn search(query: &str, hits: &[Hit]) -> CallToolResult {
    let weights = autotool_policy::search::WEIGHTS;
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    let results: Vec<Value> = hits
        .iter()
        .map(|h| {
            let t = &h.version;
            let functions: Vec<Value> = t
                .functions
                .specs()
                .into_iter()
                .map(|f| {
                    json!({
                        "name": f.name,
                        "mounted_as": format!("{}{}{}", t.name, autotool_policy::names::SEPARATOR, f.name),
                        "description": f.description,
                        "inputSchema": f.input_schema,
                        "outputSchema": f.output_schema,
                    })
                })
                .collect();
            let first = t.functions.names().first().copied().unwrap_or("");
            json!({
                "tool": t.name.as_str(),
                "version": t.version,
                "description": t.description,
                "state": t.state.as_str(),
                "in_tools_list": h.in_list,
                "success_rate": round(h.success),
                "recent_calls": {"ok": h.recent.0, "failures": h.recent.1},
                "score": {
                    "total": round(h.score),
                    "relevance": round(h.relevance),
                    "success": round(h.success),
                    "trust": round(h.trust),
                },
                "functions": functions,
                "call": format!(
                    "run_tool {{\"tool\": \"{}\", \"function\": \"{first}\", \"arguments\": {{…}}}}",
                    t.name
                ),
            })
        })
        .collect();
    let summary = json!({
        "query": query,
        "weights": {"text": weights.text, "health": weights.health, "trust": weights.trust},
        "results": results,
    });
    let lead = if results.is_empty() {
        format!(
            "No tool matches {query:?}. Write one with create_tool (its description shows the \
             template)."
        )
    } else {
        format!(
            "{} tool{} for {query:?}, best first (score = {} × text relevance + {} × success \
             rate + {} × trust). Call a function with run_tool {{\"tool\", \"function\", \
             \"arguments\"}}, or by its mounted name when it is in your tool list.",
            results.len(),
            if results.len() == 1 { "" } else { "s" },
            weights.text,
            weights.health,
            weights.trust
        )
    };
    let mut result = CallToolResult::success(vec![text(lead), text(summary.to_string())]);
    result.structured_content = Some(summary);
    result
}

mod binary;
#[cfg(test)]
mod tests;
