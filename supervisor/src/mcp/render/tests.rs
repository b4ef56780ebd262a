//! The render step: every string of an answer redacted, every content block type included,
//! then the whole serialised answer capped, with nothing of a value left at the cut.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::library::Secrets;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::json;

const KEY: &str = "sk-live-4f9a1c7e2b8d6f30a5e1";

fn secrets() -> Secrets {
    Secrets::with_values(&[("FAKE_API_KEY", KEY)])
}

/// A result with the key in every place a tool can put a string.
fn everywhere() -> CallToolResult {
    let value: Value = json!({
        "content": [
            {"type": "text", "text": format!("text {KEY}"),
             "annotations": {"audience": ["user"], "priority": 0.5},
             "_meta": {"note": KEY, KEY: "as a key"}},
            {"type": "image", "data": KEY, "mimeType": format!("image/{KEY}")},
            {"type": "audio", "data": KEY, "mimeType": format!("audio/{KEY}")},
            {"type": "resource", "resource": {"uri": format!("file:///{KEY}"),
             "mimeType": "text/plain", "text": format!("embedded {KEY}")}},
            {"type": "resource", "resource": {"uri": "file:///blob", "blob": KEY}},
            {"type": "resource_link", "uri": format!("https://x/{KEY}"), "name": KEY,
             "title": KEY, "description": KEY, "mimeType": "text/plain"}
        ],
        "structuredContent": {"result": KEY, "nested": [{"deep": KEY}]},
        "isError": false,
        "_meta": {"trace": KEY}
    });
    serde_json::from_value(value).unwrap()
}

#[test]
fn every_string_of_every_block_is_redacted() {
    let secrets = secrets();
    let r = Renderer {
        secrets: &secrets,
        cap: 1 << 20,
    };
    // Control: the key is in the answer as a tool sent it, in every one of those places.
    let raw = serde_json::to_string(&everywhere()).unwrap();
    assert!(raw.matches(KEY).count() >= 17, "{raw}");
    let out = serde_json::to_string(&r.result(everywhere())).unwrap();
    assert!(!out.contains(KEY), "{out}");
    assert!(
        !out.contains("sk-live-4f9a"),
        "a piece of the key is left: {out}"
    );
    assert!(out.contains("[REDACTED:FAKE_API_KEY]"), "{out}");
    // The answer is still the same shape: six blocks, structured content, not an error.
    let back: CallToolResult = serde_json::from_str(&out).unwrap();
    assert_eq!(back.content.len(), 6);
    assert_eq!(back.is_error, Some(false));
    assert!(back.structured_content.is_some());
}

#[test]
fn the_cap_counts_the_whole_answer() {
    let secrets = Secrets::default();
    let cap = 256 << 10;
    let r = Renderer {
        secrets: &secrets,
        cap,
    };
    // A 2 MiB embedded resource beside a short text block.
    let big = "R".repeat(2 << 20);
    let result = CallToolResult::success(vec![
        ContentBlock::text("short answer"),
        ContentBlock::embedded_text("file:///big", big.clone()),
        ContentBlock::image("I".repeat(1 << 20), "image/png"),
    ]);
    assert!(
        json_len(&result) > 3 << 20,
        "control: the answer is over 3 MiB"
    );
    let out = r.result(result);
    let size = json_len(&out);
    assert!(size <= cap, "{size} bytes over a {cap} cap");
    let text = serde_json::to_string(&out).unwrap();
    assert!(text.contains("short answer"));
    assert!(
        text.contains("an embedded resource of"),
        "{}",
        &text[..text.len().min(600)]
    );
    assert!(text.contains("an image (image/png)"));
    assert!(text.contains("[output truncated: "));
    // Text blocks are shortened to fit, escapes counted: quotes and newlines take two bytes.
    for filler in ["x", "\"", "\n", "é", "\u{1}"] {
        let result = CallToolResult::success(vec![ContentBlock::text(filler.repeat(1 << 20))]);
        let size = json_len(&r.result(result));
        assert!(size <= cap, "{filler:?}: {size} bytes over a {cap} cap");
    }
}

/// A value straddling the cut leaves no piece behind: the render step redacts, then cuts.
/// Control: cutting first (what the answer would be if the cap came before the redactor)
/// leaves the key's first bytes in the answer, where the redactor no longer finds them.
#[test]
fn a_value_straddling_the_cut_leaves_nothing_behind() {
    let secrets = secrets();
    let limit = 4096;
    let r = Renderer {
        secrets: &secrets,
        cap: limit,
    };
    let piece = &KEY[..8];
    let mut straddled = 0;
    for offset in 3800..4000 {
        let text = format!("{}{KEY}{}", "a".repeat(offset), "b".repeat(5000));
        let result = CallToolResult::success(vec![ContentBlock::text(text.clone())]);
        let out = serde_json::to_string(&r.result(result.clone())).unwrap();
        assert!(!out.contains(piece), "offset {offset}: {out}");
        assert!(json_len(&r.result(result)) <= limit);
        // Control: cut first, then redact. Where the cut falls inside the key with eight of
        // its bytes before it, those bytes are left for the model.
        let cut = cap(
            CallToolResult::success(vec![ContentBlock::text(text)]),
            limit,
        );
        let kept = cut.content[0].as_text().map(|t| t.text.len()).unwrap_or(0);
        if kept >= offset + 8 && kept < offset + KEY.len() {
            straddled += 1;
            let naive = secrets.redact(&serde_json::to_string(&cut).unwrap());
            assert!(naive.contains(piece), "control at {offset}: {naive}");
        }
    }
    assert!(straddled > 0, "no offset put the cut inside the key");
}

#[test]
fn a_redacted_number_that_breaks_the_type_withholds_the_answer() {
    let result: CallToolResult = serde_json::from_value(json!({
        "content": [{"type": "text", "text": "t", "annotations": {"priority": 0.25}}],
        "isError": false
    }))
    .unwrap();
    // Control: with no such key the answer passes unchanged.
    let none = Secrets::default();
    let plain = Renderer {
        secrets: &none,
        cap: 1 << 20,
    };
    assert_eq!(plain.result(result.clone()), result);
    // A key whose value is that number: the typed field cannot hold the marker, so the answer
    // is withheld rather than sent with the value.
    let secrets = Secrets::with_values(&[("NUM_KEY", "0.25")]);
    let r = Renderer {
        secrets: &secrets,
        cap: 1 << 20,
    };
    let out = r.result(result);
    assert_eq!(out.is_error, Some(true));
    let text = serde_json::to_string(&out).unwrap();
    assert!(
        text.contains("withheld") && !text.contains("0.25"),
        "{text}"
    );
}
