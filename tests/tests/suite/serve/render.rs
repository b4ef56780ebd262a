//! The render step, attacked: a confined tool holding a key puts it into every string of its
//! answers (every content block type, annotations, `_meta`, the structured copy), sends a
//! resource larger than the output cap, sets the key where the cap's cut falls, and names a
//! function with it. Through `autotool serve` nothing of the key arrives and no answer is over
//! the cap. Each has a control: the same tool, confined the same way, spoken to by the suite's
//! raw client, delivers the key (or the size) in full.

use super::{start, strict};
use autotool_tests::serve::{Serve, ServeHome, Server, fixture};
use autotool_tests::tool::{Mode, ToolBuilder, ToolProcess};
use base64::Engine as _;
use base64::prelude::{BASE64_STANDARD, BASE64_URL_SAFE};
use serde_json::{Value, json};

const ATTACKS: &str = "render_attacks.py";
const NAMED: &str = "render_name.py";
/// The key: letters and digits only, so it is valid in a URI and as a function name.
const KEY: &str = "rk4f9a1c7e2b8d6f30a5e1";
const NAME_KEY: &str = "leakyname0x4f9a1c7e2b8d";

/// The fixture `file` confined as serve would confine it, holding `key` as `var`, spoken to by
/// the suite's raw client: the control, with no render step in between.
pub(super) fn raw(file: &str, var: &str, key: &str) -> ToolProcess {
    let code = fixture(file).unwrap();
    let mut builder = ToolBuilder::new(autotool_tests::ATTACK_TOOL)
        .unwrap()
        .with_file(file, code.as_bytes())
        .unwrap();
    builder.policy_mut().tool_file = file.to_string();
    builder.policy_mut().env.insert(var.into(), key.into());
    builder.start(Mode::Confined).unwrap()
}

/// A serve holding the key, granting declared keys without asking, with `render` created.
fn serve_with(cap: Option<usize>) -> Option<(ServeHome, Server)> {
    let mut serve = strict()?
        .arg("--dangerously-allow-all-tools")
        .env("RENDER_API_KEY", KEY);
    if let Some(cap) = cap {
        serve = serve.max_output_bytes(cap);
    }
    let home = ServeHome::new().unwrap();
    let server = serving("render", ATTACKS, &serve, &home);
    Some((home, server))
}

/// `serve` started on `home` with the fixture `file` created as `name` (quick verification).
pub(super) fn serving(name: &str, file: &str, serve: &Serve, home: &ServeHome) -> Server {
    let mut server = start(serve, home);
    let created = server
        .call_result(
            "create_tool",
            json!({"name": name, "code": fixture(file).unwrap(), "verify": "quick"}),
        )
        .unwrap();
    assert!(!created.is_error, "{}{}", created.text, server.context());
    server
}

/// The whole `tools/call` result, as serve sent it.
fn answer(server: &mut Server, name: &str, arguments: Value) -> Value {
    server
        .request("tools/call", json!({"name": name, "arguments": arguments}))
        .unwrap()
        .unwrap_or_else(|e| panic!("tools/call {name}: {e}"))
}

#[test]
fn every_string_of_every_block_reaches_the_host_redacted() {
    let Some((_home, mut server)) = serve_with(None) else {
        return;
    };
    // Control: confined, the tool sends the key in every one of those places.
    let mut control = raw(ATTACKS, "RENDER_API_KEY", KEY);
    control.initialize().unwrap();
    let sent = control
        .request("tools/call", json!({"name": "blocks", "arguments": {}}))
        .unwrap()
        .to_string();
    assert!(sent.matches(KEY).count() >= 14, "control: {sent}");
    drop(control);

    let got = answer(&mut server, "render__blocks", json!({}));
    let text = got.to_string();
    assert!(!text.contains(KEY), "the key reached the host: {text}");
    assert!(
        !text.contains(&KEY[..10]),
        "a piece of the key reached the host: {text}"
    );
    assert!(
        text.matches("[REDACTED:RENDER_API_KEY]").count() >= 8,
        "{text}"
    );
    // The image, the audio clip and the blob carry the key as their payload (`binary`): each
    // is withheld whole, replaced by a note naming the key.
    assert_eq!(
        text.matches("it holds the value of RENDER_API_KEY]")
            .count(),
        3,
        "{text}"
    );
    let blocks = got["content"].as_array().unwrap();
    let types: Vec<&str> = blocks.iter().filter_map(|b| b["type"].as_str()).collect();
    assert_eq!(
        types,
        ["text", "text", "text", "resource", "text", "resource_link"],
        "{text}"
    );
    // The string answer's structured copy too.
    let got = answer(
        &mut server,
        "render__at_offset",
        json!({"offset": 3, "after": 3}),
    );
    assert!(got.get("structuredContent").is_some(), "{got}");
    assert!(!got.to_string().contains(KEY), "{got}");
    // And the tool list the host sees holds no value (its schemas and descriptions are the
    // tool's own).
    let listed = server
        .request_ok("tools/list", json!({}))
        .unwrap()
        .to_string();
    assert!(!listed.contains(KEY), "{listed}");
}

#[test]
fn the_cap_counts_the_whole_serialised_answer() {
    const CAP: usize = 65536;
    let Some((_home, mut server)) = serve_with(Some(CAP)) else {
        return;
    };
    // Control: the tool's answer is a 150 KB embedded resource, under the tool link's bound
    // (which stops a tool whose answer is far over the cap) but well over the cap.
    let mut control = raw(ATTACKS, "RENDER_API_KEY", KEY);
    control.initialize().unwrap();
    let sent = control
        .request(
            "tools/call",
            json!({"name": "big_resource", "arguments": {"size": 150_000}}),
        )
        .unwrap()
        .to_string();
    assert!(sent.len() > 150_000, "control: {} bytes", sent.len());
    drop(control);

    let got = answer(
        &mut server,
        "render__big_resource",
        json!({"size": 150_000}),
    );
    let size = got.to_string().len();
    assert!(size <= CAP, "a {size}-byte answer passed a {CAP}-byte cap");
    let text = got.to_string();
    assert!(
        text.contains("a large resource follows"),
        "{}",
        &text[..text.len().min(500)]
    );
    assert!(
        text.contains("an embedded resource of"),
        "{}",
        &text[..text.len().min(500)]
    );
    assert!(
        text.contains("[output truncated: "),
        "{}",
        &text[..text.len().min(500)]
    );
    assert!(!text.contains(KEY));
}

#[test]
fn a_key_where_the_cap_cuts_leaves_nothing_behind() {
    const CAP: usize = 16384;
    let Some((_home, mut server)) = serve_with(Some(CAP)) else {
        return;
    };
    let piece = &KEY[..8];
    let mut straddled = 0;
    for offset in (CAP - 420..CAP - 120).step_by(6) {
        let got = answer(
            &mut server,
            "render__at_offset",
            json!({"offset": offset, "after": 30_000}),
        );
        let text = got.to_string();
        assert!(
            !text.contains(piece),
            "offset {offset}: a piece of the key arrived"
        );
        assert!(text.len() <= CAP, "offset {offset}: {} bytes", text.len());
        // Control: where the cut falls inside the key with eight or more of its bytes before it,
        // cutting the tool's text there (before redacting) would hand them over.
        let kept = got["content"][0]["text"].as_str().unwrap_or("").len();
        let sent = format!("{}{KEY}{}", "a".repeat(offset), "b".repeat(30_000));
        if kept >= offset + 8 && kept < offset + KEY.len() {
            straddled += 1;
            assert!(sent[..kept].contains(piece), "control at {offset}");
        }
    }
    assert!(straddled > 0, "no offset put the cut inside the key");
}

#[test]
fn a_function_named_with_a_key_is_refused_and_the_refusal_is_redacted() {
    let Some(serve) = strict() else { return };
    // Control: confined, the tool lists a function named with the key.
    let mut control = raw(NAMED, "NAME_API_KEY", NAME_KEY);
    control.initialize().unwrap();
    let listed = control.request("tools/list", json!({})).unwrap();
    assert_eq!(listed["tools"][0]["name"], NAME_KEY, "control: {listed}");
    drop(control);

    let home = ServeHome::new().unwrap();
    let serve = serve
        .arg("--dangerously-allow-all-tools")
        .env("NAME_API_KEY", NAME_KEY);
    let mut server = start(&serve, &home);
    let r = server
        .call_result(
            "create_tool",
            json!({"name": "named", "code": fixture(NAMED).unwrap(), "verify": "quick"}),
        )
        .unwrap();
    assert!(
        r.is_error,
        "a function named with a key was mounted: {}",
        r.text
    );
    assert!(r.text.contains("holds the value of a key"), "{}", r.text);
    assert!(r.text.contains("[REDACTED:NAME_API_KEY]"), "{}", r.text);
    assert!(!r.text.contains(NAME_KEY), "{}", r.text);
    let listed = server
        .request_ok("tools/list", json!({}))
        .unwrap()
        .to_string();
    assert!(!listed.contains(NAME_KEY), "{listed}");
    assert!(!listed.contains("named__"), "{listed}");
}

/// Every form of `key` the suite searches for, each with its label: raw, URL-encoded (every
/// byte, either hex case), JSON-escaped (`\u00hh`, either case), and base64 in both alphabets at
/// each of the three alignments (the part of the encoding that depends on the key alone).
pub(super) fn forms(key: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = vec![("raw".to_string(), key.as_bytes().to_vec())];
    for (label, upper) in [("%HH", true), ("%hh", false)] {
        let encoded: String = key
            .bytes()
            .map(|b| {
                if upper {
                    format!("%{b:02X}")
                } else {
                    format!("%{b:02x}")
                }
            })
            .collect();
        out.push((label.to_string(), encoded.into_bytes()));
    }
    for (label, upper) in [("\\u00hh", false), ("\\u00HH", true)] {
        let escaped: String = key
            .chars()
            .map(|c| {
                let hex = format!("{:04x}", c as u32);
                format!("\\u{}", if upper { hex.to_uppercase() } else { hex })
            })
            .collect();
        out.push((label.to_string(), escaped.into_bytes()));
    }
    for pad in 0..3 {
        let mut bytes = vec![0u8; pad];
        bytes.extend_from_slice(key.as_bytes());
        for (label, engine) in [
            ("base64", &BASE64_STANDARD),
            ("base64url", &BASE64_URL_SAFE),
        ] {
            let text = engine.encode(&bytes);
            let start = if pad == 0 { 0 } else { 4 };
            let inner = &text[start..text.len() - 4];
            out.push((format!("{label} at +{pad}"), inner.as_bytes().to_vec()));
        }
    }
    out
}

/// The label of the first form of [`forms`] found in `bytes`.
pub(super) fn found_in(bytes: &[u8], forms: &[(String, Vec<u8>)]) -> Option<String> {
    forms
        .iter()
        .find(|(_, f)| bytes.windows(f.len()).any(|w| w == f.as_slice()))
        .map(|(label, _)| label.clone())
}

/// Every string of `v` (object keys too), each also decoded when it is base64 (whitespace
/// skipped, either alphabet, a `data:` URI's payload): what a host could read out of it.
pub(super) fn readable(v: &Value) -> Vec<Vec<u8>> {
    fn walk(v: &Value, out: &mut Vec<Vec<u8>>) {
        match v {
            Value::String(s) => {
                out.push(s.as_bytes().to_vec());
                let payload = s.rsplit_once(";base64,").map_or(s.as_str(), |(_, p)| p);
                let compact: String = payload.split_whitespace().collect();
                let bare = compact.trim_end_matches('=');
                for engine in [
                    &base64::prelude::BASE64_STANDARD_NO_PAD,
                    &base64::prelude::BASE64_URL_SAFE_NO_PAD,
                ] {
                    if let Ok(bytes) = engine.decode(bare) {
                        out.push(bytes);
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            Value::Object(map) => map.iter().for_each(|(k, v)| {
                out.push(k.as_bytes().to_vec());
                walk(v, out);
            }),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, &mut out);
    out
}

/// The first form of `key` a host could read out of `v` (see [`readable`]).
pub(super) fn leak_in(v: &Value, key: &str) -> Option<String> {
    let forms = forms(key);
    readable(v).iter().find_map(|b| found_in(b, &forms))
}
