//! Binary payloads, attacked: a confined tool holding a key puts its bytes into the payloads the
//! protocol base64-encodes (an image, an audio clip, an embedded blob, an error's image and its
//! structured copy) and into an embedded text resource. Through `autotool serve`, in both
//! protocol eras, by the mounted name and through `run_tool`, nothing a host could decode holds
//! the key in any form, each such block is replaced by a note naming the key, and a clean image
//! arrives byte for byte. The control: the same tool, confined the same way, spoken to by the
//! suite's raw client, sends payloads that decode to the key.

use super::render::{forms, found_in, leak_in, raw, serving};
use super::strict;
use autotool_tests::serve::{ServeHome, Server};
use base64::Engine as _;
use base64::prelude::BASE64_STANDARD;
use serde_json::{Value, json};

const FILE: &str = "render_binary.py";
const VAR: &str = "BINARY_API_KEY";
/// Letters and digits only: the tool writes it raw and URL-encoded byte by byte.
const KEY: &str = "bk7e2b8d6f30a5e14f9a1c";

/// What the tool sent, through the raw client (the control).
fn sent(function: &str) -> Value {
    let mut control = raw(FILE, VAR, KEY);
    control.initialize().unwrap();
    control
        .request("tools/call", json!({"name": function, "arguments": {}}))
        .unwrap()
}

/// The calls of `function` a host can make: by its mounted name and through `run_tool`.
fn calls(function: &str) -> [(String, Value); 2] {
    [
        (format!("binary__{function}"), json!({})),
        (
            "run_tool".to_string(),
            json!({"tool": "binary", "function": function, "arguments": {}}),
        ),
    ]
}

/// The notes in `got`'s content that say a block was withheld for holding the key.
fn notes(got: &Value) -> Vec<String> {
    got["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .filter(|t| t.starts_with("[autotool withheld "))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// `blocks` as a host received it: three withheld payloads, the text resource redacted, the
/// clean image as the tool sent it.
#[track_caller]
fn check_blocks(got: &Value, clean: &Value, how: &str) {
    assert_eq!(leak_in(got, KEY), None, "{how}: {got}");
    let notes = notes(got);
    assert_eq!(notes.len(), 3, "{how}: {got}");
    for (note, what) in notes.iter().zip([
        "an image (image/png)",
        "an audio clip (audio/wav)",
        "an embedded resource",
    ]) {
        assert!(
            note.starts_with(&format!("[autotool withheld {what}"))
                && note.ends_with(&format!("it holds the value of {VAR}]")),
            "{how}: {note}"
        );
    }
    let text = got.to_string();
    assert!(
        text.contains("the key: [REDACTED:BINARY_API_KEY]"),
        "{how}: {text}"
    );
    let blocks = got["content"].as_array().unwrap();
    assert_eq!(blocks.len(), 6, "{how}: {got}");
    assert_eq!(&blocks[5], clean, "{how}: the clean image was changed");
}

#[track_caller]
fn check_failed(got: &Value, how: &str) {
    assert_eq!(leak_in(got, KEY), None, "{how}: {got}");
    assert_eq!(got["isError"], true, "{how}: {got}");
    assert_eq!(notes(got).len(), 1, "{how}: {got}");
    let why = &got["structuredContent"]["why"];
    assert_eq!(why["type"], "text", "{how}: {got}");
    assert!(
        why["text"]
            .as_str()
            .unwrap_or("")
            .contains("holds the value of BINARY_API_KEY"),
        "{how}: {got}"
    );
}

#[test]
fn a_key_in_binary_blocks_reaches_no_host_in_either_era_on_any_path() {
    let Some(serve) = strict() else { return };
    // Control: confined, every payload the tool sends decodes to the key (raw in the image and
    // the audio clip, URL-encoded in the blob), and so does the failed call's.
    let blocks = sent("blocks");
    let content = blocks["content"].as_array().unwrap();
    for (i, form) in [(1, "raw"), (2, "raw"), (3, "%HH")] {
        let data = content[i]
            .get("data")
            .or(content[i]["resource"].get("blob"))
            .and_then(Value::as_str)
            .unwrap();
        let bytes = BASE64_STANDARD.decode(data).unwrap();
        assert_eq!(
            found_in(&bytes, &forms(KEY)).as_deref(),
            Some(form),
            "control {i}"
        );
    }
    let clean = content[5].clone();
    assert!(leak_in(&sent("failed"), KEY).is_some(), "control: failed");

    let home = ServeHome::new().unwrap();
    let serve = serve.arg("--dangerously-allow-all-tools").env(VAR, KEY);
    let mut server = serving("binary", FILE, &serve, &home);

    // The older era, by name and through run_tool.
    for (name, arguments) in calls("blocks") {
        let got = answer(&mut server, &name, arguments);
        check_blocks(&got, &clean, &format!("2025-11-25 {name}"));
    }
    for (name, arguments) in calls("failed") {
        let got = answer(&mut server, &name, arguments);
        check_failed(&got, &format!("2025-11-25 {name}"));
    }

    // A 2026-07-28 host of the same library (no handshake: its version rides in `_meta`).
    let mut modern = serve.start(&home).unwrap();
    for (name, arguments) in calls("blocks") {
        let got = modern
            .call_modern(&name, arguments, json!({}), json!({}))
            .unwrap()
            .unwrap_or_else(|e| panic!("2026-07-28 {name}: {e}"));
        check_blocks(&got, &clean, &format!("2026-07-28 {name}"));
    }
    for (name, arguments) in calls("failed") {
        let got = modern
            .call_modern(&name, arguments, json!({}), json!({}))
            .unwrap()
            .unwrap_or_else(|e| panic!("2026-07-28 {name}: {e}"));
        check_failed(&got, &format!("2026-07-28 {name}"));
    }
    for s in [&server, &modern] {
        let log = s.stderr();
        assert_eq!(leak_in(&Value::String(log.clone()), KEY), None, "{log}");
    }
}

/// The whole `tools/call` result, as serve sent it.
fn answer(server: &mut Server, name: &str, arguments: Value) -> Value {
    server
        .request("tools/call", json!({"name": name, "arguments": arguments}))
        .unwrap()
        .unwrap_or_else(|e| panic!("tools/call {name}: {e}"))
}
