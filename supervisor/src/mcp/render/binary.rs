//! Binary payloads: the bytes a protocol object carries base64-encoded because the protocol
//! says so (an image's or audio clip's `data`, an embedded or read resource's `blob`, a
//! `data:…;base64,` URI such as an icon's `src`). Redacting the base64 text finds nothing: a
//! key in the bytes is one decode away from the model. So each payload is decoded and searched
//! as bytes, with the same redactor (the value raw, URL-encoded, JSON-escaped), before the
//! strings are redacted; one that holds a key is **withheld**: the whole block is replaced by a
//! text block that says what was withheld and names the key. Bytes cannot be redacted in place
//! and stay the image they were (a PNG whose bytes were replaced no longer decodes), and a block
//! the model cannot read whole is no use to it, so a block is passed unchanged or not at all.
//!
//! Hostile payloads: one that is not base64 (after ASCII whitespace, which decoders skip; either
//! alphabet, padding optional) is withheld too, since a lenient reader could still decode some
//! of it. Decoding is bounded by the answer's cap: the payloads decoded in one answer take at
//! most that many bytes of base64 together, and a payload past what is left is left out without
//! being decoded, as the cap would have left it out.

use crate::redact::Redactor;
use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde_json::{Map, Value, json};

/// Either alphabet, padding present or not, stray bits at the end allowed: every spelling a
/// lenient reader takes.
const LENIENT: GeneralPurposeConfig = GeneralPurposeConfig::new()
    .with_decode_padding_mode(DecodePaddingMode::Indifferent)
    .with_decode_allow_trailing_bits(true);
const STANDARD: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, LENIENT);
const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::URL_SAFE, LENIENT);

/// Every binary payload of `value` checked against `redactor`, within `budget` bytes of base64
/// in all. Blocks and URIs that hold a key, are not base64 or are past the budget are replaced
/// by a note; the rest are left as they were.
pub fn screen(redactor: &Redactor, value: &mut Value, budget: usize) {
    let mut left = budget;
    walk(redactor, value, &mut left);
}

fn walk(redactor: &Redactor, value: &mut Value, left: &mut usize) {
    match value {
        Value::Object(map) => {
            if let Some(replacement) = judge_object(redactor, map, left) {
                *value = replacement;
                return;
            }
            for child in map.values_mut() {
                walk(redactor, child, left);
            }
        }
        Value::Array(items) => {
            for item in items {
                walk(redactor, item, left);
            }
        }
        Value::String(text) => {
            if let Some(note) = judge_data_uri(redactor, text, left) {
                *text = note;
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// What an object carrying a binary payload becomes when the payload may not pass: a content
/// block becomes a text block, a resource's contents (outside a block) become text contents.
fn judge_object(redactor: &Redactor, map: &Map<String, Value>, left: &mut usize) -> Option<Value> {
    let kind = map.get("type").and_then(Value::as_str);
    let mime = |m: &Map<String, Value>| {
        m.get("mimeType")
            .and_then(Value::as_str)
            .map(|t| format!(" ({t})"))
            .unwrap_or_default()
    };
    let (what, payload) = match (kind, map.get("data"), map.get("resource")) {
        (Some("image"), Some(Value::String(data)), _) => (format!("an image{}", mime(map)), data),
        (Some("audio"), Some(Value::String(data)), _) => {
            (format!("an audio clip{}", mime(map)), data)
        }
        (Some("resource"), _, Some(Value::Object(resource))) => match resource.get("blob") {
            Some(Value::String(blob)) => (format!("an embedded resource{}", mime(resource)), blob),
            _ => return None,
        },
        _ => match (map.get("blob"), map.get("uri")) {
            // Resource contents on their own (`resources/read`): they stay contents.
            (Some(Value::String(blob)), Some(uri)) => {
                let note = withheld(redactor, &format!("a resource{}", mime(map)), blob, left)?;
                return Some(json!({"uri": uri, "mimeType": "text/plain", "text": note}));
            }
            _ => return None,
        },
    };
    let note = withheld(redactor, &what, payload, left)?;
    Some(json!({"type": "text", "text": note}))
}

/// A `data:` URI whose payload is base64: the note that replaces it, when it may not pass.
fn judge_data_uri(redactor: &Redactor, text: &str, left: &mut usize) -> Option<String> {
    let head = text.get(..5)?;
    if !head.eq_ignore_ascii_case("data:") {
        return None;
    }
    let (header, payload) = text[5..].split_once(',')?;
    if !header.to_ascii_lowercase().ends_with(";base64") {
        // Percent-encoded text: the string's own redaction reads it.
        return None;
    }
    let media = header[..header.len() - 7].split(';').next().unwrap_or("");
    let what = if media.is_empty() {
        "a data: URI".to_string()
    } else {
        format!("a data: URI ({media})")
    };
    withheld(redactor, &what, payload, left)
}

/// The note for `what` when its base64 `payload` may not pass (it holds a key, it is not
/// base64, or it is past the budget); `None` when it passes as it is.
fn withheld(redactor: &Redactor, what: &str, payload: &str, left: &mut usize) -> Option<String> {
    let size = payload.len();
    if size > *left {
        return Some(format!(
            "[{what} of {size} bytes left out: over autotool's cap]"
        ));
    }
    *left -= size;
    let why = match decode(payload) {
        None => "its data is not valid base64".to_string(),
        Some(bytes) => {
            // The key in the bytes, or in the text itself (a value made of base64 characters).
            let found = redactor
                .found_in(&bytes)
                .or_else(|| redactor.found_in(payload.as_bytes()))?;
            format!("it holds the value of {found}")
        }
    };
    Some(format!("[autotool withheld {what}: {why}]"))
}

/// The bytes of `payload`: base64 in either alphabet (not both), ASCII whitespace skipped, `%HH`
/// read first when there is any (as a `data:` URI may carry it). `None` when it is none of these.
fn decode(payload: &str) -> Option<Vec<u8>> {
    let unescaped;
    let text = if payload.contains('%') {
        unescaped = percent_decoded(payload)?;
        unescaped.as_slice()
    } else {
        payload.as_bytes()
    };
    let compact: Vec<u8> = text
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    let url = compact.iter().any(|b| matches!(b, b'-' | b'_'));
    let engine = if url { &URL_SAFE } else { &STANDARD };
    engine.decode(&compact).ok()
}

fn percent_decoded(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests;
