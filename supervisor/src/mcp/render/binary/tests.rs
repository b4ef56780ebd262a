//! Binary payloads, attacked: a key's bytes inside an image, an audio clip, an embedded or read
//! resource's blob and a `data:` URI, at every alignment of base64, raw and in the forms the
//! redactor reads, wrapped in lines, in either alphabet. Each has its control: the same answer
//! through the string redaction alone (what the render step did before) still decodes to the
//! key.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::library::Secrets;
use crate::mcp::render::Renderer;
use base64::Engine as _;
use base64::prelude::{BASE64_STANDARD, BASE64_URL_SAFE_NO_PAD};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

const KEY: &str = "sk-live-4f9a1c7e2b8d6f30a5e1";
const NAME: &str = "FAKE_API_KEY";

fn secrets() -> Secrets {
    Secrets::with_values(&[(NAME, KEY)])
}

/// A PNG-looking payload with `inside` at byte `offset` of it.
fn png_with(inside: &[u8], offset: usize) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.resize(offset.max(bytes.len()), 0x42);
    bytes.truncate(offset);
    bytes.extend_from_slice(inside);
    bytes.extend_from_slice(&[0u8, 1, 2, 3, 0xff, 0xfe]);
    bytes
}

/// Every string of `v`, and every base64 string of it decoded.
fn strings_and_decoded(v: &Value, out: &mut Vec<Vec<u8>>) {
    match v {
        Value::String(s) => {
            out.push(s.as_bytes().to_vec());
            let payload = s.rsplit_once(";base64,").map_or(s.as_str(), |(_, p)| p);
            let compact: String = payload.split_whitespace().collect();
            for engine in [&BASE64_STANDARD, &BASE64_URL_SAFE_NO_PAD] {
                if let Ok(bytes) = engine.decode(compact.trim_end_matches('=')) {
                    out.push(bytes);
                }
            }
            if let Ok(bytes) = BASE64_STANDARD.decode(&compact) {
                out.push(bytes);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| strings_and_decoded(i, out)),
        Value::Object(map) => map.iter().for_each(|(k, v)| {
            out.push(k.as_bytes().to_vec());
            strings_and_decoded(v, out);
        }),
        _ => {}
    }
}

/// Whether the key is anywhere in `v`: in a string, or in the bytes a base64 string decodes to
/// (raw, or in any form the redactor finds).
fn leaks(v: &Value) -> bool {
    let secrets = secrets();
    let r = secrets.redactor().unwrap();
    let mut all = Vec::new();
    strings_and_decoded(v, &mut all);
    all.iter().any(|b| r.found_in(b).is_some())
}

fn renderer(secrets: &Secrets) -> Renderer<'_> {
    Renderer {
        secrets,
        cap: 1 << 20,
    }
}

fn render(v: Value) -> Value {
    let secrets = secrets();
    let r = renderer(&secrets);
    let typed: CallToolResult = serde_json::from_value(v).unwrap();
    serde_json::to_value(r.result(typed)).unwrap()
}

/// The render step before binary payloads were read: every string redacted, nothing decoded.
fn strings_only(v: &Value) -> Value {
    let mut v = v.clone();
    secrets().redact_json(&mut v);
    v
}

fn blocks(data: &str) -> Value {
    json!({
        "content": [
            {"type": "text", "text": "three binary blocks follow"},
            {"type": "image", "data": data, "mimeType": "image/png"},
            {"type": "audio", "data": data, "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": data,
             "mimeType": "application/octet-stream"}},
        ],
        "isError": false
    })
}

#[test]
fn a_key_inside_binary_blocks_is_withheld_at_every_alignment_and_form() {
    let url_encoded: String = KEY.bytes().map(|b| format!("%{b:02X}")).collect();
    let json_escaped: String = KEY
        .chars()
        .map(|c| format!("\\u{:04x}", c as u32))
        .collect();
    for inside in [KEY.to_string(), url_encoded, json_escaped] {
        for offset in [8, 9, 10, 11, 300] {
            let bytes = png_with(inside.as_bytes(), offset);
            for data in [
                BASE64_STANDARD.encode(&bytes),
                BASE64_URL_SAFE_NO_PAD.encode(&bytes),
                // Wrapped in lines, as MIME writes it.
                BASE64_STANDARD
                    .encode(&bytes)
                    .as_bytes()
                    .chunks(76)
                    .map(|c| std::str::from_utf8(c).unwrap())
                    .collect::<Vec<_>>()
                    .join("\r\n"),
            ] {
                let sent = blocks(&data);
                // Control: the strings alone redacted, the key is one decode away.
                assert!(leaks(&strings_only(&sent)), "control at {offset}: {inside}");
                let got = render(sent);
                assert!(!leaks(&got), "offset {offset}, {inside}: {got}");
                let content = got["content"].as_array().unwrap();
                assert_eq!(content.len(), 4, "{got}");
                for (block, what) in
                    content[1..]
                        .iter()
                        .zip(["an image", "an audio clip", "an embedded resource"])
                {
                    assert_eq!(block["type"], "text", "{got}");
                    let note = block["text"].as_str().unwrap();
                    assert!(
                        note.starts_with(&format!("[autotool withheld {what}"))
                            && note.ends_with(&format!("it holds the value of {NAME}]")),
                        "{note}"
                    );
                }
                assert_eq!(got["isError"], false);
            }
        }
    }
}

#[test]
fn clean_binary_blocks_pass_byte_for_byte() {
    let data = BASE64_STANDARD.encode(png_with(b"no key in here at all", 40));
    let sent = blocks(&data);
    let got = render(sent.clone());
    assert_eq!(got["content"], sent["content"]);
    // And with no key held at all, nothing is decoded or changed.
    let none = Secrets::default();
    let r = renderer(&none);
    let typed: CallToolResult = serde_json::from_value(blocks("not base64 !!")).unwrap();
    assert_eq!(r.result(typed.clone()), typed);
}

#[test]
fn a_payload_that_is_not_base64_is_withheld_without_a_panic() {
    for data in [
        "not base64 at all!",
        "QUJD=RUY=",
        "QUJDRA==QUJD",
        "%zz",
        "\u{0}\u{ffff}é",
        "QUJD+-",
        "A",
    ] {
        let got = render(blocks(data));
        let content = got["content"].as_array().unwrap();
        for block in &content[1..] {
            let note = block["text"].as_str().unwrap_or_default();
            assert!(note.contains("is not valid base64"), "{data:?}: {got}");
        }
    }
    // Bytes of every kind do not panic the walk (a cheap exhaustive sweep of short payloads).
    for a in 0u8..128 {
        for b in [b'A', b'=', b'%', b'-', b'/', b' ', 0xC3] {
            let data = String::from_utf8_lossy(&[a, b, a, b'=']).into_owned();
            let _ = render(blocks(&data));
        }
    }
}

#[test]
fn data_uris_icons_structured_content_and_meta_are_read_too() {
    let bytes = png_with(KEY.as_bytes(), 10);
    let uri = format!("data:image/png;base64,{}", BASE64_STANDARD.encode(&bytes));
    let escaped = format!(
        "DATA:image/png;BASE64,{}",
        BASE64_STANDARD.encode(&bytes).replace('=', "%3D")
    );
    let image = json!({"type": "image", "data": BASE64_STANDARD.encode(&bytes),
                       "mimeType": "image/png"});
    let sent = json!({
        "content": [
            {"type": "resource_link", "uri": "file:///x", "name": "x",
             "icons": [{"src": uri}, {"src": escaped}]},
            {"type": "text", "text": "t", "_meta": {"preview": image, "thumb": uri}},
        ],
        "structuredContent": {"picture": image, "inline": uri},
        "isError": false
    });
    assert!(leaks(&strings_only(&sent)), "control");
    let got = render(sent);
    assert!(!leaks(&got), "{got}");
    let text = got.to_string();
    assert!(
        text.matches(&format!("it holds the value of {NAME}"))
            .count()
            >= 6,
        "{text}"
    );
    // The link is still a link, with its icons' sources replaced by the note.
    assert_eq!(got["content"][0]["type"], "resource_link");
    assert_eq!(got["content"][0]["icons"].as_array().unwrap().len(), 2);
}

#[test]
fn resource_contents_on_their_own_become_text_contents() {
    let secrets = secrets();
    let r = renderer(&secrets);
    let blob = BASE64_STANDARD.encode(png_with(KEY.as_bytes(), 11));
    let read = json!({"contents": [{"uri": "file:///a", "blob": blob, "mimeType": "image/png"}]});
    let typed: rmcp::model::ReadResourceResult = serde_json::from_value(read.clone()).unwrap();
    assert!(leaks(&strings_only(&read)), "control");
    let got = serde_json::to_value(r.value(&typed).unwrap()).unwrap();
    assert!(!leaks(&got), "{got}");
    assert_eq!(got["contents"][0]["uri"], "file:///a");
    assert!(
        got["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("withheld a resource (image/png)"),
        "{got}"
    );
}

#[test]
fn an_error_s_data_is_read_too() {
    let secrets = secrets();
    let r = renderer(&secrets);
    let mut data = json!({"attachment": {"type": "audio", "mimeType": "audio/wav",
        "data": BASE64_STANDARD.encode(png_with(KEY.as_bytes(), 8))}});
    assert!(leaks(&strings_only(&data)), "control");
    r.json(&mut data);
    assert!(!leaks(&data), "{data}");
}

/// The payloads decoded in one answer take at most the cap together: past it a block is left
/// out, undecoded, as the cap would leave it out; before it, each is read.
#[test]
fn decoding_is_bounded_by_the_cap() {
    let secrets = secrets();
    let cap = 64 << 10;
    let r = Renderer {
        secrets: &secrets,
        cap,
    };
    let clean = BASE64_STANDARD.encode(vec![7u8; 20 << 10]);
    let keyed = BASE64_STANDARD.encode(png_with(KEY.as_bytes(), 9));
    let mut content = Vec::new();
    for _ in 0..10 {
        content.push(json!({"type": "image", "data": clean, "mimeType": "image/png"}));
    }
    content.push(json!({"type": "image", "data": keyed, "mimeType": "image/png"}));
    let mut v = json!({"content": content, "isError": false});
    // Control: the payloads together are over the cap.
    assert!(clean.len() * 10 > cap);
    r.json(&mut v);
    let notes: Vec<&str> = v["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect();
    let decoded = cap / clean.len();
    assert_eq!(notes.len(), 10 - decoded + 1, "{notes:?}");
    assert!(
        notes[..notes.len() - 1]
            .iter()
            .all(|n| n.contains("left out: over autotool's cap"))
    );
    // The small keyed block still fits what is left, and is read.
    assert!(
        notes.last().unwrap().contains("holds the value of"),
        "{notes:?}"
    );
    assert!(!leaks(&v));
}
