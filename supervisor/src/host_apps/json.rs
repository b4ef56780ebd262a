//! The JSON family of host configs (Claude Code, Cursor, Claude Desktop: a `mcpServers`
//! object; OpenClaw: `mcp.servers` in JSON5), edited in place.
//!
//! The file is edited through a concrete syntax tree (`jsonc-parser`'s CST), so everything
//! outside the autotool entry (comments, key order, indentation, trailing commas, the final
//! newline) comes out byte for byte as it went in. Then the result is read back and compared, as
//! data, with the original plus the intended entry: any other difference refuses the edit, so a
//! surprise in the editor can never cost a user a setting.

use super::{Edit, EditError, Entry, Removal};
use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstInputValue, CstObject, CstRootNode};
use serde_json::{Map, Value};

/// Which JSON a file is written in, and so what its app's own parser accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// Plain JSON (`JSON.parse`): a comment or trailing comma is an error to the app too.
    Json,
    /// JSON with comments and trailing commas, as VS Code-based editors read it.
    Jsonc,
    /// JSON5: also unquoted keys, single quotes, hexadecimal, `Infinity`, …
    Json5,
}

impl Dialect {
    fn options(self) -> ParseOptions {
        let loose = self != Dialect::Json;
        let json5 = self == Dialect::Json5;
        ParseOptions {
            allow_comments: loose,
            allow_trailing_commas: loose,
            allow_loose_object_property_names: json5,
            allow_missing_commas: false,
            allow_single_quoted_strings: json5,
            allow_hexadecimal_numbers: json5,
            allow_unary_plus_numbers: json5,
            allow_bare_decimal_point_numbers: json5,
            allow_non_finite_numbers: json5,
            allow_extended_string_escapes: json5,
        }
    }

    /// How the dialect is named in messages.
    pub fn describe(self) -> &'static str {
        match self {
            Dialect::Json => "JSON",
            Dialect::Jsonc => "JSON (with comments)",
            Dialect::Json5 => "JSON5",
        }
    }
}

/// What to do with an entry of the same name already in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Leave it exactly as it is, whatever it runs (Claude Code: the user or `claude mcp add`
    /// put it there).
    LeaveAlone,
    /// Point it at this binary: `command` and `args` are set; `env` and every other key are
    /// kept, except the keys that would make it a remote server.
    Update,
}

/// One app's JSON config format.
#[derive(Debug, Clone)]
pub struct Spec {
    pub dialect: Dialect,
    /// The keys leading from the top-level object to the object of servers.
    pub servers: &'static [&'static str],
    pub existing: Existing,
    /// The whole entry written when there is none, in the order written: `command` and
    /// `args`, and for Claude Code also `type` and an empty `env`, the shape `claude mcp add`
    /// writes.
    pub fresh: Vec<(String, Value)>,
}

impl Spec {
    /// A spec whose fresh entry is `extra` keys, then `command` and `args`, then `trailing`.
    pub fn new(
        dialect: Dialect,
        servers: &'static [&'static str],
        existing: Existing,
        entry: &Entry,
        extra: &[(&str, Value)],
        trailing: &[(&str, Value)],
    ) -> Spec {
        let mut fresh: Vec<(String, Value)> = extra
            .iter()
            .map(|(k, v)| ((*k).to_string(), v.clone()))
            .collect();
        fresh.push(("command".into(), Value::String(entry.command.clone())));
        fresh.push(("args".into(), entry.args.clone().into()));
        fresh.extend(trailing.iter().map(|(k, v)| ((*k).to_string(), v.clone())));
        Spec {
            dialect,
            servers,
            existing,
            fresh,
        }
    }

    /// The fresh entry as data (for comparisons; key order is not kept).
    fn fresh_value(&self) -> Value {
        Value::Object(self.fresh.iter().cloned().collect())
    }

    /// The fresh entry as the syntax tree gets it, keys in order.
    fn fresh_input(&self) -> CstInputValue {
        CstInputValue::Object(
            self.fresh
                .iter()
                .map(|(k, v)| (k.clone(), to_input(v)))
                .collect(),
        )
    }
}

/// Keys that make an entry a remote (HTTP) server; an updated entry loses them.
const REMOTE_KEYS: [&str; 3] = ["url", "headers", "transport"];

/// `command args…` of an entry, for messages (a remote entry shows its URL).
pub fn describe_entry(entry: &Value) -> String {
    let mut words: Vec<String> = Vec::new();
    match (entry.get("command"), entry.get("url")) {
        (Some(Value::String(c)), _) => words.push(c.clone()),
        (_, Some(Value::String(u))) => return format!("the remote server {u}"),
        _ => return "no command".to_string(),
    }
    if let Some(Value::Array(args)) = entry.get("args") {
        for a in args {
            words.push(a.as_str().map_or_else(|| a.to_string(), str::to_string));
        }
    }
    words.join(" ")
}

/// An entry's `args` as strings (a non-string argument as an empty one; none: empty).
pub(crate) fn string_args(entry: &Value) -> Vec<String> {
    entry
        .get("args")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|v| v.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `entry` already runs exactly what `fresh` runs, as a local (stdio) server.
fn runs_the_same(entry: &Value, fresh: &Value) -> bool {
    entry.get("command") == fresh.get("command")
        && entry.get("args") == fresh.get("args")
        && REMOTE_KEYS.iter().all(|k| entry.get(*k).is_none())
        && entry.get("type").is_none_or(|t| t == "stdio")
}

/// The entry an update leaves, as data: `old` with `command` and `args` from `fresh`, without
/// the remote keys, and without a `type` other than `stdio`.
fn updated(old: &Map<String, Value>, fresh: &Value) -> Map<String, Value> {
    let mut new = old.clone();
    for k in REMOTE_KEYS {
        new.remove(k);
    }
    if new.get("type").is_some_and(|t| t != "stdio") {
        new.remove("type");
    }
    for k in ["command", "args"] {
        if let Some(v) = fresh.get(k) {
            new.insert(k.to_string(), v.clone());
        }
    }
    new
}

fn to_input(v: &Value) -> CstInputValue {
    match v {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(a) => CstInputValue::Array(a.iter().map(to_input).collect()),
        Value::Object(o) => {
            CstInputValue::Object(o.iter().map(|(k, v)| (k.clone(), to_input(v))).collect())
        }
    }
}

fn parse_error(e: &jsonc_parser::errors::ParseError, dialect: Dialect) -> EditError {
    EditError::Invalid {
        format: dialect.describe(),
        message: e.kind().to_string(),
        at: Some((e.line_display(), e.column_display())),
    }
}

pub(super) fn parse(text: &str, dialect: Dialect) -> Result<Value, EditError> {
    jsonc_parser::parse_to_serde_value::<Value>(text, &dialect.options())
        .map_err(|e| parse_error(&e, dialect))
}

/// The object at `path` under `root`, created (or made of a `null`) on the way; `None` where a
/// key on the way holds something else.
fn object_at<'a>(root: &'a mut Value, path: &[&str]) -> Option<&'a mut Map<String, Value>> {
    let mut here = root.as_object_mut()?;
    for key in path {
        let slot = here
            .entry((*key).to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if slot.is_null() {
            *slot = Value::Object(Map::new());
        }
        here = slot.as_object_mut()?;
    }
    Some(here)
}

/// The servers object in the tree, created on the way as in [`object_at`].
fn cst_object_at(root: &CstRootNode, path: &[&str]) -> Result<CstObject, EditError> {
    let mut here = root.object_value().ok_or(EditError::TopLevelNotObject)?;
    for (i, key) in path.iter().enumerate() {
        here = match here.object_value_or_create(key) {
            Some(o) => o,
            None => {
                let prop = here.get(key);
                let is_null = prop
                    .as_ref()
                    .and_then(|p| p.value())
                    .and_then(|v| v.as_null_keyword())
                    .is_some();
                match prop {
                    Some(p) if is_null => p.object_value_or_set(),
                    _ => {
                        return Err(EditError::NotAnObject {
                            path: path[..=i].join("."),
                        });
                    }
                }
            }
        };
    }
    Ok(here)
}

/// Register `name` in `text` (the file's contents; empty for a file that does not exist yet).
pub fn edit(text: &str, spec: &Spec, name: &str) -> Result<Edit, EditError> {
    let dotted = |path: &[&str]| path.join(".");
    if text.trim().is_empty() {
        // A new (or empty) file: the servers object nested as the app expects it, two-space
        // indented like the apps' own writers.
        let mut value = spec.fresh_input();
        let mut keys: Vec<&str> = spec.servers.to_vec();
        keys.push(name);
        for key in keys.iter().rev() {
            value = CstInputValue::Object(vec![((*key).to_string(), value)]);
        }
        let root = CstRootNode::parse("", &spec.dialect.options())
            .map_err(|e| parse_error(&e, spec.dialect))?;
        root.set_value(value);
        let mut text = root.to_string();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        return Ok(Edit::Changed {
            text,
            replaced: None,
        });
    }

    let before = parse(text, spec.dialect)?;
    if !before.is_object() {
        return Err(EditError::TopLevelNotObject);
    }
    let old_entry = {
        let mut v = &before;
        for key in spec.servers {
            v = v.get(*key).unwrap_or(&Value::Null);
        }
        if !(v.is_object() || v.is_null()) {
            return Err(EditError::NotAnObject {
                path: dotted(spec.servers),
            });
        }
        v.get(name).cloned()
    };
    let replaced = match &old_entry {
        None => None,
        Some(Value::Object(old)) => {
            let same = runs_the_same(&Value::Object(old.clone()), &spec.fresh_value());
            if spec.existing == Existing::LeaveAlone || same {
                return Ok(Edit::Present {
                    runs: describe_entry(&Value::Object(old.clone())),
                    same,
                });
            }
            Some(describe_entry(&Value::Object(old.clone())))
        }
        Some(_) => {
            return Err(EditError::NotAnObject {
                path: format!("{}.{name}", dotted(spec.servers)),
            });
        }
    };

    // The edit, in the syntax tree.
    let root = CstRootNode::parse(text, &spec.dialect.options())
        .map_err(|e| parse_error(&e, spec.dialect))?;
    let servers = cst_object_at(&root, spec.servers)?;
    match servers.get(name).and_then(|p| p.object_value()) {
        None => {
            servers.append(name, spec.fresh_input());
        }
        Some(entry) => {
            for key in REMOTE_KEYS {
                if let Some(p) = entry.get(key) {
                    p.remove();
                }
            }
            if let Some(p) = entry.get("type")
                && p.to_serde_value().is_some_and(|t| t != "stdio")
            {
                p.remove();
            }
            let fresh = spec.fresh_value();
            for key in ["command", "args"] {
                let Some(v) = fresh.get(key) else {
                    continue;
                };
                match entry.get(key) {
                    Some(p) => p.set_value(to_input(v)),
                    None => {
                        entry.append(key, to_input(v));
                    }
                }
            }
        }
    }
    let after_text = root.to_string();

    // The same edit, as data: the text must say exactly this and nothing else.
    let mut expected = before.clone();
    if let Some(servers) = object_at(&mut expected, spec.servers) {
        let entry = match &old_entry {
            Some(Value::Object(old)) => Value::Object(updated(old, &spec.fresh_value())),
            _ => spec.fresh_value(),
        };
        servers.insert(name.to_string(), entry);
    }
    let after = parse(&after_text, spec.dialect)
        .map_err(|e| EditError::EditUnparsable { why: e.to_string() })?;
    if after != expected {
        return Err(EditError::EditTooWide);
    }
    Ok(Edit::Changed {
        text: after_text,
        replaced,
    })
}

/// Remove `name` from `text` when it is autotool's own entry ([`super::edit::is_autotool`]: its
/// `command_key` names an autotool binary); the rest of the file is kept byte for byte, and the result is read back and compared, as data,
/// with the original less that one entry.
pub fn remove(
    text: &str,
    dialect: Dialect,
    servers: &[&str],
    name: &str,
    command_key: &str,
) -> Result<Removal, EditError> {
    if text.trim().is_empty() {
        return Ok(Removal::Absent);
    }
    let before = parse(text, dialect)?;
    if !before.is_object() {
        return Err(EditError::TopLevelNotObject);
    }
    let mut at = &before;
    for key in servers {
        at = at.get(*key).unwrap_or(&Value::Null);
    }
    let Some(old) = at.get(name) else {
        return Ok(Removal::Absent);
    };
    let runs = match old.get(command_key) {
        Some(Value::String(c)) if command_key != "command" => {
            let mut entry = old.clone();
            if let Some(o) = entry.as_object_mut() {
                o.insert("command".into(), Value::String(c.clone()));
            }
            describe_entry(&entry)
        }
        _ => describe_entry(old),
    };
    let args = string_args(old);
    let ours = old
        .get(command_key)
        .and_then(Value::as_str)
        .is_some_and(|c| super::edit::is_autotool(c, &args));
    if !ours {
        return Ok(Removal::NotOurs { runs });
    }
    let after_text = without_entry(text, &before, dialect, servers, name)?;
    Ok(Removal::Removed {
        text: after_text,
        runs,
    })
}

/// `text` (parsed: `before`) without the entry `name` under `servers`, whatever it runs; the
/// rest of the file byte for byte, read back and compared, as data, with the original less that
/// one entry.
pub(super) fn without_entry(
    text: &str,
    before: &Value,
    dialect: Dialect,
    servers: &[&str],
    name: &str,
) -> Result<String, EditError> {
    let root =
        CstRootNode::parse(text, &dialect.options()).map_err(|e| parse_error(&e, dialect))?;
    let mut here = root.object_value().ok_or(EditError::TopLevelNotObject)?;
    for key in servers {
        here = here
            .get(key)
            .and_then(|p| p.object_value())
            .ok_or_else(|| EditError::NotAnObject {
                path: servers.join("."),
            })?;
    }
    let prop = here.get(name).ok_or(EditError::EditNotReadBack)?;
    prop.remove();
    let after_text = root.to_string();
    let mut expected = before.clone();
    if let Some(servers) = object_at(&mut expected, servers) {
        servers.remove(name);
    }
    let after = parse(&after_text, dialect)
        .map_err(|e| EditError::EditUnparsable { why: e.to_string() })?;
    if after != expected {
        return Err(EditError::EditTooWide);
    }
    Ok(after_text)
}

/// The servers a config lists under `servers` (name and entry), parsed; empty when it lists
/// none.
pub fn servers_of(
    text: &str,
    dialect: Dialect,
    servers: &[&str],
) -> Result<Vec<(String, Value)>, EditError> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let root = parse(text, dialect)?;
    let mut at = &root;
    for key in servers {
        at = at.get(*key).unwrap_or(&Value::Null);
    }
    Ok(at
        .as_object()
        .map(|o| o.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default())
}

/// `text` without the server `name` (whatever it runs), for `setup --import`.
pub fn remove_server(
    text: &str,
    dialect: Dialect,
    servers: &[&str],
    name: &str,
) -> Result<String, EditError> {
    let before = parse(text, dialect)?;
    without_entry(text, &before, dialect, servers, name)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn entry() -> Entry {
        Entry {
            command: "/opt/autotool/bin/autotool".into(),
            args: vec!["serve".into()],
        }
    }

    fn cursor() -> Spec {
        Spec::new(
            Dialect::Jsonc,
            &["mcpServers"],
            Existing::Update,
            &entry(),
            &[],
            &[],
        )
    }

    fn changed(e: Edit) -> String {
        match e {
            Edit::Changed { text, .. } => text,
            other => panic!("expected a change, got {other:?}"),
        }
    }

    #[test]
    fn an_empty_file_gets_the_whole_structure() {
        let openclaw = Spec::new(
            Dialect::Json5,
            &["mcp", "servers"],
            Existing::Update,
            &entry(),
            &[],
            &[],
        );
        let text = changed(edit("", &openclaw, "autotool").unwrap());
        assert_eq!(
            text,
            "{\n  \"mcp\": {\n    \"servers\": {\n      \"autotool\": {\n        \"command\": \
             \"/opt/autotool/bin/autotool\",\n        \"args\": [\"serve\"]\n      }\n    }\n  }\n}\n"
        );
    }

    #[test]
    fn comments_and_layout_outside_the_entry_are_kept_byte_for_byte() {
        let text = "// mine\n{\n    \"mcpServers\": {\n        \"other\": {\"command\": \"x\"}, // keep\n    },\n    \"theme\": \"dark\"\n}\n";
        let out = changed(edit(text, &cursor(), "autotool").unwrap());
        assert!(out.starts_with("// mine\n{\n    \"mcpServers\": {\n        \"other\": {\"command\": \"x\"}, // keep\n"), "{out}");
        assert!(out.ends_with("    \"theme\": \"dark\"\n}\n"), "{out}");
        let v = parse(&out, Dialect::Jsonc).unwrap();
        assert_eq!(
            v["mcpServers"]["autotool"],
            json!({"command": "/opt/autotool/bin/autotool", "args": ["serve"]})
        );
        assert_eq!(v["mcpServers"]["other"], json!({"command": "x"}));
    }

    #[test]
    fn an_update_keeps_env_and_drops_remote_keys() {
        let text = r#"{"mcpServers": {"autotool": {"url": "http://127.0.0.1:1/mcp", "type": "http", "env": {"A": "1"}, "disabled": true}}}"#;
        let e = edit(text, &cursor(), "autotool").unwrap();
        let Edit::Changed { text, replaced } = e else {
            panic!("{e:?}")
        };
        assert_eq!(
            replaced.as_deref(),
            Some("the remote server http://127.0.0.1:1/mcp")
        );
        let v = parse(&text, Dialect::Json).unwrap();
        assert_eq!(
            v["mcpServers"]["autotool"],
            json!({"env": {"A": "1"}, "disabled": true, "command": "/opt/autotool/bin/autotool", "args": ["serve"]})
        );
    }

    #[test]
    fn a_null_servers_object_is_replaced_and_a_non_object_refused() {
        let out = changed(edit(r#"{"mcpServers": null}"#, &cursor(), "autotool").unwrap());
        assert_eq!(
            parse(&out, Dialect::Json).unwrap()["mcpServers"]["autotool"]["args"],
            json!(["serve"])
        );
        let err = edit(r#"{"mcpServers": []}"#, &cursor(), "autotool")
            .unwrap_err()
            .to_string();
        assert_eq!(err, "`mcpServers` in it is not an object");
        let err = edit("[1]", &cursor(), "autotool").unwrap_err().to_string();
        assert_eq!(err, "its top level is not an object");
    }

    #[test]
    fn plain_json_refuses_comments_with_a_position() {
        let claude = Spec::new(
            Dialect::Json,
            &["mcpServers"],
            Existing::LeaveAlone,
            &entry(),
            &[],
            &[],
        );
        let err = edit("{\n  // no\n}", &claude, "autotool")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "it is not valid JSON: Comments are not allowed at line 2, column 3"
        );
    }
}
