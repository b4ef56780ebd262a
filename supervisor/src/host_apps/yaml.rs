//! Goose's `config.yaml`: `extensions.<name>`, an entry of `type: stdio` with `cmd`, `args`,
//! `envs`, `enabled` and `timeout` (the shape `goose configure` writes).
//!
//! No kept Rust crate edits YAML and keeps its comments and layout, so the edit is a text edit
//! of whole lines: the entry's block of lines is inserted after the last line of the
//! `extensions` mapping (or, with no such mapping, `extensions:` and the entry are appended), and
//! removing it cuts exactly that block. Every other byte of the file stays where it was. The
//! lines are found by indentation, as YAML's block style defines them; a file whose
//! `extensions` is written in flow style (`extensions: {a: …}`) is refused rather than guessed
//! at, and a file that is JSON throughout (valid YAML too) goes to the JSON editor. The result
//! is scanned again to check the entry reads back as meant and nothing else moved.

use super::json::{self, Dialect, Existing, Spec};
use super::{Edit, EditError, Entry, Removal};
use serde_json::{Value, json};

/// The key of the mapping of extensions.
const EXTENSIONS: &str = "extensions";

/// What Goose is told about the entry.
const DESCRIPTION: &str = "Tools your agent writes for itself: verified, confined and kept";

/// One line of the file: where it starts, its text without the line break, its indentation.
#[derive(Debug, Clone, Copy)]
struct Line<'a> {
    start: usize,
    end: usize,
    text: &'a str,
    indent: usize,
}

impl Line<'_> {
    /// Neither blank nor a comment.
    fn content(&self) -> bool {
        let t = self.text.trim();
        !t.is_empty() && !t.starts_with('#')
    }

    /// The mapping key this line starts, unquoted (`"a b": …` is `a b`).
    fn key(&self) -> Option<&str> {
        let t = self.text.trim_start();
        let (key, _) = t.split_once(':')?;
        let key = key.trim_end();
        let unquoted = key
            .strip_prefix('"')
            .and_then(|k| k.strip_suffix('"'))
            .or_else(|| key.strip_prefix('\'').and_then(|k| k.strip_suffix('\'')));
        Some(unquoted.unwrap_or(key))
    }

    /// The value after `key:` on this line, without a trailing comment.
    fn inline_value(&self) -> &str {
        let t = self.text.trim_start();
        let rest = t.split_once(':').map_or("", |(_, v)| v);
        let rest = match rest.find(" #") {
            Some(i) => &rest[..i],
            None => rest,
        };
        rest.trim()
    }
}

fn lines(text: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut start = 0;
    for piece in text.split_inclusive('\n') {
        let body = piece.trim_end_matches('\n').trim_end_matches('\r');
        out.push(Line {
            start,
            end: start + piece.len(),
            text: body,
            indent: body.len() - body.trim_start_matches(' ').len(),
        });
        start += piece.len();
    }
    out
}

/// `cmd`, `args` and `envs.AUTOTOOL_HOME` of extension `name` (block style), for
/// [`super::served`]; `None` when there is no such extension or the file cannot be scanned.
pub(super) fn entry_command(
    text: &str,
    name: &str,
) -> Option<(Option<String>, Vec<String>, Option<String>)> {
    let found = Found::scan(text).ok()?;
    let range = found.entry(name)?;
    let (cmd, args) = found.command(range.clone());
    let fields = &found.lines[range.start + 1..range.end];
    let field_indent = fields.iter().find(|l| l.content()).map_or(0, |l| l.indent);
    let env_home = fields
        .iter()
        .position(|l| l.content() && l.indent == field_indent && l.key() == Some("envs"))
        .and_then(|i| {
            fields[i + 1..]
                .iter()
                .filter(|l| l.content())
                .take_while(|l| l.indent > field_indent)
                .find(|l| l.key() == Some("AUTOTOOL_HOME"))
                .map(|l| scalar(l.inline_value()))
        });
    Some((cmd, args, env_home))
}

/// A YAML scalar as written (`"a"`, `'a'`, `a`), as its string.
fn scalar(v: &str) -> String {
    let v = v.trim();
    if v.starts_with('"')
        && let Ok(Value::String(s)) = serde_json::from_str::<Value>(v)
    {
        return s;
    }
    if let Some(inner) = v.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) {
        return inner.replace("''", "'");
    }
    v.to_string()
}

/// Where the `extensions` mapping is, in a block-style file.
struct Found<'a> {
    lines: Vec<Line<'a>>,
    /// The `extensions:` line, if there is one.
    key: Option<usize>,
    /// The lines of its value (after the key line up to the next top-level content line).
    body: std::ops::Range<usize>,
    /// The indentation of its entries (0 when it has none).
    child_indent: usize,
}

impl<'a> Found<'a> {
    fn scan(text: &'a str) -> Result<Found<'a>, EditError> {
        let lines = lines(text);
        let key = lines
            .iter()
            .position(|l| l.indent == 0 && l.content() && l.key() == Some(EXTENSIONS));
        let Some(k) = key else {
            return Ok(Found {
                body: lines.len()..lines.len(),
                lines,
                key: None,
                child_indent: 0,
            });
        };
        let end = lines[k + 1..]
            .iter()
            .position(|l| l.content() && l.indent == 0)
            .map_or(lines.len(), |i| k + 1 + i);
        let value = lines[k].inline_value();
        let child_indent = lines[k + 1..end]
            .iter()
            .find(|l| l.content())
            .map_or(0, |l| l.indent);
        let first_child = lines[k + 1..end].iter().find(|l| l.content());
        if first_child.is_some_and(|l| l.text.trim_start().starts_with('-')) {
            return Err(EditError::NotAnObject {
                path: EXTENSIONS.into(),
            });
        }
        if !matches!(value, "" | "{}" | "null" | "~") || (value == "{}" && first_child.is_some()) {
            return Err(EditError::FlowStyle {
                path: EXTENSIONS.into(),
            });
        }
        Ok(Found {
            lines,
            key: Some(k),
            body: k + 1..end,
            child_indent,
        })
    }

    /// The lines of entry `name`: its key line through its last content line.
    fn entry(&self, name: &str) -> Option<std::ops::Range<usize>> {
        let first = self.body.clone().find(|&i| {
            let l = &self.lines[i];
            l.content() && l.indent == self.child_indent && l.key() == Some(name)
        })?;
        let next = (first + 1..self.body.end)
            .find(|&i| self.lines[i].content() && self.lines[i].indent <= self.child_indent)
            .unwrap_or(self.body.end);
        let last = (first..next)
            .rev()
            .find(|&i| self.lines[i].content())
            .unwrap_or(first);
        Some(first..last + 1)
    }

    /// The names of the entries, in order.
    fn names(&self) -> Vec<String> {
        self.body
            .clone()
            .map(|i| &self.lines[i])
            .filter(|l| l.content() && l.indent == self.child_indent)
            .filter_map(|l| l.key().map(str::to_string))
            .collect()
    }

    /// `cmd` and `args` of the entry in `range`.
    fn command(&self, range: std::ops::Range<usize>) -> (Option<String>, Vec<String>) {
        let fields = &self.lines[range.start + 1..range.end];
        let field_indent = fields.iter().find(|l| l.content()).map_or(0, |l| l.indent);
        let mut cmd = None;
        let mut args = Vec::new();
        for (i, l) in fields.iter().enumerate() {
            if !l.content() || l.indent != field_indent {
                continue;
            }
            match l.key() {
                Some("cmd") => cmd = Some(scalar(l.inline_value())),
                Some("args") => {
                    let v = l.inline_value();
                    if let Some(inner) = v.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
                        args = inner
                            .split(',')
                            .map(scalar)
                            .filter(|a| !a.is_empty())
                            .collect();
                    } else {
                        args = fields[i + 1..]
                            .iter()
                            .filter(|l| l.content())
                            .take_while(|l| {
                                l.indent > field_indent
                                    || (l.indent == field_indent
                                        && l.text.trim_start().starts_with('-'))
                            })
                            .filter_map(|l| l.text.trim_start().strip_prefix('-'))
                            .map(scalar)
                            .collect();
                    }
                }
                _ => {}
            }
        }
        (cmd, args)
    }
}

fn describe(cmd: Option<&str>, args: &[String]) -> String {
    match cmd {
        Some(c) => std::iter::once(c.to_string())
            .chain(args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" "),
        None => "no command".to_string(),
    }
}

/// The entry's fields, in the order written.
fn fields(entry: &Entry, name: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("enabled", json!(true)),
        ("type", json!("stdio")),
        ("name", json!(name)),
        ("description", json!(DESCRIPTION)),
        ("cmd", json!(entry.command)),
        ("args", json!(entry.args)),
        ("envs", json!({})),
        ("env_keys", json!([])),
        ("timeout", json!(300)),
    ]
}

/// The entry as YAML lines, at `indent` with fields `step` further in. Every value is written
/// as JSON, which YAML reads as the same value.
fn block(entry: &Entry, name: &str, indent: usize, step: usize) -> String {
    let pad = " ".repeat(indent);
    let inner = " ".repeat(indent + step);
    let mut out = format!("{pad}{name}:\n");
    for (k, v) in fields(entry, name) {
        out.push_str(&format!("{inner}{k}: {v}\n"));
    }
    out
}

/// Whether the file is JSON-shaped (its first content starts a flow mapping).
pub(super) fn json_shaped(text: &str) -> bool {
    lines(text)
        .iter()
        .find(|l| l.content())
        .is_some_and(|l| l.text.trim_start().starts_with('{'))
}

/// Register `name` in `text` (the file's contents; empty for a file that does not exist yet).
/// An entry of that name already there is left as it is.
pub fn edit(text: &str, entry: &Entry, name: &str) -> Result<Edit, EditError> {
    if json_shaped(text) {
        return edit_json(text, entry, name);
    }
    let found = Found::scan(text)?;
    if let Some(range) = found.entry(name) {
        let (cmd, args) = found.command(range);
        let same = cmd.as_deref() == Some(entry.command.as_str()) && args == entry.args;
        return Ok(Edit::Present {
            runs: describe(cmd.as_deref(), &args),
            same,
        });
    }
    let mut out = String::with_capacity(text.len() + 400);
    match found.key {
        None => {
            out.push_str(text);
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&format!("{EXTENSIONS}:\n"));
            out.push_str(&block(entry, name, 2, 2));
        }
        Some(k) => {
            let key_line = found.lines[k];
            let last = found
                .body
                .clone()
                .rev()
                .find(|&i| found.lines[i].content())
                .map_or(key_line, |i| found.lines[i]);
            let (indent, step) = if found.child_indent == 0 {
                (2, 2)
            } else {
                let step = found.lines[found.body.clone()]
                    .iter()
                    .find(|l| l.content() && l.indent > found.child_indent)
                    .map_or(found.child_indent, |l| l.indent - found.child_indent);
                (found.child_indent, step)
            };
            if found.child_indent == 0 && !key_line.inline_value().is_empty() {
                // `extensions: {}` or `extensions: null`: the key line becomes the block's
                // head, its comment kept.
                out.push_str(&text[..key_line.start]);
                out.push_str(&format!("{EXTENSIONS}:"));
                if let Some(i) = key_line.text.find(" #") {
                    out.push_str(&key_line.text[i..]);
                }
                out.push('\n');
                out.push_str(&block(entry, name, indent, step));
                out.push_str(&text[key_line.end..]);
            } else {
                out.push_str(&text[..last.end]);
                if !out.ends_with('\n') {
                    out.push('\n');
                }
                out.push_str(&block(entry, name, indent, step));
                out.push_str(&text[last.end..]);
            }
        }
    }
    // Read it back: the entry is found under `extensions`, running what it should.
    let check = Found::scan(&out).map_err(|e| EditError::EditUnparsable { why: e.to_string() })?;
    let range = check.entry(name).ok_or(EditError::EditNotReadBack)?;
    let (cmd, args) = check.command(range);
    if cmd.as_deref() != Some(entry.command.as_str()) || args != entry.args {
        return Err(EditError::EditNotReadBack);
    }
    let mut names = found.names();
    names.push(name.to_string());
    if check.names() != names {
        return Err(EditError::EditTooWide);
    }
    Ok(Edit::Changed {
        text: out,
        replaced: None,
    })
}

/// Remove `name` from `text` when it is autotool's own entry ([`super::edit::is_autotool`]):
/// exactly its lines go.
pub fn remove(text: &str, name: &str) -> Result<Removal, EditError> {
    if json_shaped(text) {
        return json::remove(text, Dialect::Json5, &[EXTENSIONS], name, "cmd");
    }
    remove_entry(text, name, true)
}

/// `text` without extension `name`, whatever it runs, for `setup --import` (which moved it):
/// exactly its lines go.
pub fn remove_server(text: &str, name: &str) -> Result<String, EditError> {
    if json_shaped(text) {
        return json::remove_server(text, Dialect::Json5, &[EXTENSIONS], name);
    }
    match remove_entry(text, name, false)? {
        Removal::Removed { text, .. } => Ok(text),
        Removal::Absent | Removal::NotOurs { .. } => Ok(text.to_string()),
    }
}

/// Each extension Goose starts as a process, as `setup --import` reads one
/// ([`super::import::classify`]): `{"command", "args", "env", "env_keys", "enabled"}` from
/// `cmd`, `args`, `envs`, `env_keys` and `enabled`, in the file's order. Goose's own
/// extensions (`type: builtin` or `platform`) are no servers and are left out. Pure.
pub fn servers_of(text: &str) -> Result<Vec<(String, Value)>, EditError> {
    if json_shaped(text) {
        let all = json::servers_of(text, Dialect::Json5, &[EXTENSIONS])?;
        return Ok(all
            .into_iter()
            .filter(|(_, e)| !builtin(e.get("type").and_then(Value::as_str)))
            .map(|(name, e)| {
                let entry = json!({
                    "command": e.get("cmd"), "args": e.get("args"), "env": e.get("envs"),
                    "env_keys": e.get("env_keys"), "enabled": e.get("enabled"),
                    "url": e.get("uri"),
                });
                (name, entry)
            })
            .collect());
    }
    let found = Found::scan(text)?;
    let mut out = Vec::new();
    for name in found.names() {
        let Some(range) = found.entry(&name) else {
            continue;
        };
        let fields = &found.lines[range.start + 1..range.end];
        let indent = fields.iter().find(|l| l.content()).map_or(0, |l| l.indent);
        let field = |key: &str| {
            fields
                .iter()
                .find(|l| l.content() && l.indent == indent && l.key() == Some(key))
                .map(|l| scalar(l.inline_value()))
        };
        if builtin(field("type").as_deref()) {
            continue;
        }
        let (cmd, args) = found.command(range.clone());
        let mut entry = json!({
            "command": cmd, "args": args,
            "env": Value::Object(mapping(fields, indent, "envs")),
            "env_keys": list(fields, indent, "env_keys"),
            "url": field("uri"),
        });
        if let Some(enabled) = field("enabled") {
            entry["enabled"] = json!(enabled != "false");
        }
        out.push((name, entry));
    }
    Ok(out)
}

/// Goose's own extensions, which start no server.
fn builtin(kind: Option<&str>) -> bool {
    matches!(
        kind,
        Some("builtin" | "platform" | "frontend" | "inline_python")
    )
}

/// The mapping under `key` among `fields` (block style, or `{}`/a one-line flow mapping), its
/// values as strings.
fn mapping(fields: &[Line<'_>], indent: usize, key: &str) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    let Some(at) = fields
        .iter()
        .position(|l| l.content() && l.indent == indent && l.key() == Some(key))
    else {
        return out;
    };
    let inline = fields[at].inline_value();
    if let Some(inner) = inline.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
        for pair in inner.split(',') {
            if let Some((k, v)) = pair.split_once(':') {
                out.insert(scalar(k), Value::String(scalar(v)));
            }
        }
        return out;
    }
    for l in fields[at + 1..]
        .iter()
        .filter(|l| l.content())
        .take_while(|l| l.indent > indent)
    {
        if let Some(k) = l.key() {
            out.insert(k.to_string(), Value::String(scalar(l.inline_value())));
        }
    }
    out
}

/// The list under `key` among `fields` (block style, or a one-line flow list).
fn list(fields: &[Line<'_>], indent: usize, key: &str) -> Vec<String> {
    let Some(at) = fields
        .iter()
        .position(|l| l.content() && l.indent == indent && l.key() == Some(key))
    else {
        return Vec::new();
    };
    let inline = fields[at].inline_value();
    if let Some(inner) = inline.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
        return inner
            .split(',')
            .map(scalar)
            .filter(|a| !a.is_empty())
            .collect();
    }
    fields[at + 1..]
        .iter()
        .filter(|l| l.content())
        .take_while(|l| {
            l.indent > indent || (l.indent == indent && l.text.trim_start().starts_with('-'))
        })
        .filter_map(|l| l.text.trim_start().strip_prefix('-'))
        .map(scalar)
        .collect()
}

/// Remove extension `name`; with `only_ours`, only when it runs autotool.
fn remove_entry(text: &str, name: &str, only_ours: bool) -> Result<Removal, EditError> {
    let found = Found::scan(text)?;
    let Some(range) = found.entry(name) else {
        return Ok(Removal::Absent);
    };
    let (cmd, args) = found.command(range.clone());
    let runs = describe(cmd.as_deref(), &args);
    if only_ours && !cmd.is_some_and(|c| super::edit::is_autotool(&c, &args)) {
        return Ok(Removal::NotOurs { runs });
    }
    let from = found.lines[range.start].start;
    let to = found.lines[range.end - 1].end;
    let out = format!("{}{}", &text[..from], &text[to..]);
    let check = Found::scan(&out).map_err(|e| EditError::EditUnparsable { why: e.to_string() })?;
    let mut names = found.names();
    names.retain(|n| n != name);
    if check.names() != names {
        return Err(EditError::EditTooWide);
    }
    Ok(Removal::Removed { text: out, runs })
}

/// A JSON-shaped file: the JSON editor, with Goose's entry.
fn edit_json(text: &str, entry: &Entry, name: &str) -> Result<Edit, EditError> {
    let value = json::parse(text, Dialect::Json5)?;
    if let Some(old) = value.get(EXTENSIONS).and_then(|e| e.get(name)) {
        let cmd = old.get("cmd").and_then(Value::as_str);
        let args = json::string_args(old);
        return Ok(Edit::Present {
            runs: describe(cmd, &args),
            same: cmd == Some(entry.command.as_str()) && args == entry.args,
        });
    }
    let spec = Spec {
        dialect: Dialect::Json5,
        servers: &[EXTENSIONS],
        existing: Existing::LeaveAlone,
        fresh: fields(entry, name)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    };
    json::edit(text, &spec, name)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn entry() -> Entry {
        Entry {
            command: "/opt/autotool/bin/autotool".into(),
            args: vec!["serve".into()],
        }
    }

    fn changed(e: Edit) -> String {
        match e {
            Edit::Changed { text, .. } => text,
            other => panic!("expected a change, got {other:?}"),
        }
    }

    const GOOSE: &str = "# goose settings\nGOOSE_PROVIDER: openai\nextensions:\n  developer:\n    enabled: true\n    type: builtin # the shell\n    name: developer\n\n# models\nGOOSE_MODEL: gpt-5\n";

    #[test]
    fn the_entry_joins_the_extensions_and_nothing_else_moves() {
        let out = changed(edit(GOOSE, &entry(), "autotool").unwrap());
        let cut = GOOSE.find("\n\n# models").unwrap() + 1;
        assert_eq!(
            out,
            format!(
                "{}{}{}",
                &GOOSE[..cut],
                block(&entry(), "autotool", 2, 2),
                &GOOSE[cut..]
            )
        );
        assert!(out.contains("    cmd: \"/opt/autotool/bin/autotool\"\n    args: [\"serve\"]\n"));
        // Removing it gives back the very same bytes.
        match remove(&out, "autotool").unwrap() {
            Removal::Removed { text, runs } => {
                assert_eq!(text, GOOSE);
                assert_eq!(runs, "/opt/autotool/bin/autotool serve");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_file_without_extensions_gets_them_appended() {
        let out = changed(edit("GOOSE_MODEL: x", &entry(), "autotool").unwrap());
        assert!(out.starts_with("GOOSE_MODEL: x\nextensions:\n  autotool:\n    enabled: true\n"));
        let out = changed(edit("extensions: {}  # none yet\n", &entry(), "autotool").unwrap());
        assert!(
            out.starts_with("extensions: # none yet\n  autotool:\n"),
            "{out}"
        );
        let fresh = changed(edit("", &entry(), "autotool").unwrap());
        assert!(fresh.starts_with("extensions:\n  autotool:\n"), "{fresh}");
    }

    #[test]
    fn deeper_indentation_is_followed() {
        let text = "extensions:\n    developer:\n        enabled: true\n";
        let out = changed(edit(text, &entry(), "autotool").unwrap());
        assert!(out.starts_with(text), "{out}");
        assert!(
            out.contains("\n    autotool:\n        enabled: true\n"),
            "{out}"
        );
    }

    #[test]
    fn an_existing_entry_is_reported_and_a_foreign_one_never_removed() {
        let text = "extensions:\n  autotool:\n    cmd: /old/autotool\n    args:\n    - serve\n";
        match edit(text, &entry(), "autotool").unwrap() {
            Edit::Present { runs, same } => {
                assert_eq!(runs, "/old/autotool serve");
                assert!(!same);
            }
            other => panic!("{other:?}"),
        }
        let theirs = "extensions:\n  autotool:\n    cmd: uvx\n    args: [autotool-mcp]\n";
        assert_eq!(
            remove(theirs, "autotool").unwrap(),
            Removal::NotOurs {
                runs: "uvx autotool-mcp".into()
            }
        );
    }

    #[test]
    fn flow_style_extensions_are_refused_and_json_goes_to_the_json_editor() {
        let err = edit("extensions: {a: {cmd: x}}\n", &entry(), "autotool").unwrap_err();
        assert_eq!(
            err,
            EditError::FlowStyle {
                path: "extensions".into()
            }
        );
        let text = r#"{"extensions": {"github": {"cmd": "gh", "envs": {"T": "x"}}}}"#;
        let out = changed(edit(text, &entry(), "autotool").unwrap());
        let v = json::parse(&out, Dialect::Json5).unwrap();
        assert_eq!(
            v["extensions"]["autotool"]["cmd"],
            "/opt/autotool/bin/autotool"
        );
        assert_eq!(v["extensions"]["github"]["envs"]["T"], "x");
        match remove(&out, "autotool").unwrap() {
            Removal::Removed { text: back, .. } => {
                assert_eq!(
                    json::parse(&back, Dialect::Json5).unwrap(),
                    json::parse(text, Dialect::Json5).unwrap()
                );
            }
            other => panic!("{other:?}"),
        }
        // Removing cuts the entry's own text and nothing else.
        let with = r#"{"extensions": {"github": {"cmd": "gh"}, "autotool": {"cmd": "/x/autotool", "args": ["serve"]}}}"#;
        match remove(with, "autotool").unwrap() {
            Removal::Removed { text: back, .. } => {
                assert_eq!(back, r#"{"extensions": {"github": {"cmd": "gh"}}}"#);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn import_reads_each_server_goose_starts_and_removes_only_the_one_moved() {
        let text = "GOOSE_PROVIDER: openai\nextensions:\n  developer:\n    enabled: true\n    type: builtin\n    name: developer\n  timesrv:\n    enabled: true\n    type: stdio\n    cmd: uvx\n    args:\n    - mcp-server-time\n    - --local-timezone=UTC\n    envs:\n      TIME_TOKEN: \"t0k3n-value\"\n    env_keys: []\n    timeout: 300\n  off:\n    enabled: false\n    type: stdio\n    cmd: npx\n    args: [\"-y\", \"@modelcontextprotocol/server-memory\"]\n    envs: {}\n# models\nGOOSE_MODEL: gpt-5\n";
        let found = servers_of(text).unwrap();
        let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["timesrv", "off"]);
        assert_eq!(found[0].1["command"], "uvx");
        assert_eq!(
            found[0].1["args"],
            json!(["mcp-server-time", "--local-timezone=UTC"])
        );
        assert_eq!(found[0].1["env"]["TIME_TOKEN"], "t0k3n-value");
        assert_eq!(found[0].1["enabled"], true);
        assert_eq!(found[1].1["enabled"], false);
        assert_eq!(found[1].1["args"][1], "@modelcontextprotocol/server-memory");
        let after = remove_server(text, "timesrv").unwrap();
        assert_eq!(
            after,
            text.replace(
                "  timesrv:\n    enabled: true\n    type: stdio\n    cmd: uvx\n    args:\n    - mcp-server-time\n    - --local-timezone=UTC\n    envs:\n      TIME_TOKEN: \"t0k3n-value\"\n    env_keys: []\n    timeout: 300\n",
                ""
            )
        );
        assert_eq!(remove_server(text, "absent").unwrap(), text);
    }
}
