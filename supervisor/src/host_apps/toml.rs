//! Codex's `config.toml`: `[mcp_servers.<name>]` with `command`, `args` and, on Linux,
//! `env_vars`, the names of the variables Codex passes through to the server on top of its short
//! default list (`HOME`, `PATH`, `USER`, `LANG`, …).
//!
//! The document is edited with `toml_edit`, which keeps every comment, blank line and key order
//! of the rest of the file. An existing entry is never touched: `codex mcp add` overwrites
//! silently, which is exactly what setup must not do to a user's own setting.

use super::{Edit, EditError, Entry, Removal};
use toml_edit::{Array, DocumentMut, InlineTable, Item, Table, Value};

/// Line and column (1-based) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// `command args…` (or the URL) of an existing entry, for messages.
fn describe(entry: &dyn toml_edit::TableLike) -> String {
    if let Some(c) = entry.get("command").and_then(Item::as_str) {
        let mut words = vec![c.to_string()];
        if let Some(args) = entry.get("args").and_then(Item::as_array) {
            words.extend(args.iter().map(|a| {
                a.as_str()
                    .map_or_else(|| a.to_string().trim().to_string(), str::to_string)
            }));
        }
        return words.join(" ");
    }
    match entry.get("url").and_then(Item::as_str) {
        Some(u) => format!("the remote server {u}"),
        None => "no command".to_string(),
    }
}

fn string_array<'a>(items: impl IntoIterator<Item = &'a str>) -> Array {
    items.into_iter().collect()
}

/// Whether an existing entry runs `entry` (for the message only: it is left alone either way).
fn runs(existing: &dyn toml_edit::TableLike, entry: &Entry) -> bool {
    existing.get("command").and_then(Item::as_str) == Some(entry.command.as_str())
        && existing
            .get("args")
            .and_then(Item::as_array)
            .is_some_and(|a| {
                a.iter().map(Value::as_str).collect::<Vec<_>>()
                    == entry
                        .args
                        .iter()
                        .map(|s| Some(s.as_str()))
                        .collect::<Vec<_>>()
            })
}

/// Register `name` in `text` (the file's contents; empty for a file that does not exist yet).
/// `env_vars` empty leaves the key out.
pub fn edit(text: &str, entry: &Entry, env_vars: &[&str], name: &str) -> Result<Edit, EditError> {
    let mut doc = parse(text)?;

    if !doc.contains_key("mcp_servers") {
        let mut servers = Table::new();
        // No `[mcp_servers]` header of its own: only `[mcp_servers.autotool]` appears.
        servers.set_implicit(true);
        doc.insert("mcp_servers", Item::Table(servers));
    }
    let Some(servers) = doc.get_mut("mcp_servers") else {
        return Err(EditError::CannotAdd {
            path: "mcp_servers".into(),
        });
    };
    let Some(existing) = servers.as_table_like() else {
        return Err(EditError::NotATable {
            path: "mcp_servers".into(),
        });
    };
    if let Some(current) = existing.get(name) {
        let Some(current) = current.as_table_like() else {
            return Err(EditError::NotATable {
                path: format!("mcp_servers.{name}"),
            });
        };
        return Ok(Edit::Present {
            runs: describe(current),
            same: runs(current, entry),
        });
    }

    let command = entry.command.as_str();
    let args = string_array(entry.args.iter().map(String::as_str));
    match servers {
        Item::Table(t) => {
            let mut new = Table::new();
            new.insert("command", toml_edit::value(command));
            new.insert("args", toml_edit::value(args));
            if !env_vars.is_empty() {
                new.insert(
                    "env_vars",
                    toml_edit::value(string_array(env_vars.iter().copied())),
                );
            }
            t.insert(name, Item::Table(new));
        }
        Item::Value(Value::InlineTable(t)) => {
            // `mcp_servers = { … }` written inline: the entry joins it inline.
            let mut new = InlineTable::new();
            new.insert("command", command.into());
            new.insert("args", Value::Array(args));
            if !env_vars.is_empty() {
                new.insert(
                    "env_vars",
                    Value::Array(string_array(env_vars.iter().copied())),
                );
            }
            t.insert(name, Value::InlineTable(new));
        }
        _ => {
            return Err(EditError::NotATable {
                path: "mcp_servers".into(),
            });
        }
    }
    let after = doc.to_string();

    // Read it back: the entry must be there as meant.
    let check: DocumentMut = after
        .parse()
        .map_err(|e: toml_edit::TomlError| EditError::EditUnparsable { why: e.to_string() })?;
    let ok = check
        .get("mcp_servers")
        .and_then(Item::as_table_like)
        .and_then(|s| s.get(name))
        .and_then(Item::as_table_like)
        .is_some_and(|e| runs(e, entry));
    if !ok {
        return Err(EditError::EditNotReadBack);
    }
    Ok(Edit::Changed {
        text: after,
        replaced: None,
    })
}

/// Remove `name` from `text` when it is autotool's own entry ([`super::edit::is_autotool`]); the
/// rest of the document keeps its comments, order and layout, and is read back to check that
/// only that entry went.
pub fn remove(text: &str, name: &str) -> Result<Removal, EditError> {
    remove_entry(text, name, true)
}

/// `text` without the server `name`, whatever it runs, for `setup --import` (which moved it);
/// the rest is kept as [`remove`] keeps it.
pub fn remove_server(text: &str, name: &str) -> Result<String, EditError> {
    match remove_entry(text, name, false)? {
        Removal::Removed { text, .. } => Ok(text),
        Removal::Absent | Removal::NotOurs { .. } => Ok(text.to_string()),
    }
}

/// Each server of `mcp_servers` as `setup --import` reads one
/// ([`super::import::classify`]): its fields as JSON (`command`, `args`, `env`, `env_vars`,
/// `url`, …), in the file's order. Pure.
pub fn servers_of(text: &str) -> Result<Vec<(String, serde_json::Value)>, EditError> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let doc = parse(text)?;
    let Some(servers) = doc.get("mcp_servers").and_then(Item::as_table_like) else {
        return Ok(Vec::new());
    };
    Ok(servers
        .iter()
        .filter_map(|(name, item)| Some((name.to_string(), table_json(item.as_table_like()?))))
        .collect())
}

fn table_json(t: &dyn toml_edit::TableLike) -> serde_json::Value {
    let fields = t
        .iter()
        .filter_map(|(k, item)| {
            let v = match item {
                Item::Value(v) => value_json(v),
                other => table_json(other.as_table_like()?),
            };
            Some((k.to_string(), v))
        })
        .collect();
    serde_json::Value::Object(fields)
}

fn value_json(v: &Value) -> serde_json::Value {
    match v {
        Value::String(s) => serde_json::Value::String(s.value().clone()),
        Value::Integer(i) => serde_json::json!(*i.value()),
        Value::Float(f) => serde_json::json!(*f.value()),
        Value::Boolean(b) => serde_json::json!(*b.value()),
        Value::Datetime(d) => serde_json::Value::String(d.value().to_string()),
        Value::Array(a) => serde_json::Value::Array(a.iter().map(value_json).collect()),
        Value::InlineTable(t) => table_json(t),
    }
}

/// Remove `name`; with `only_ours`, only when it runs autotool.
fn remove_entry(text: &str, name: &str, only_ours: bool) -> Result<Removal, EditError> {
    let mut doc = parse(text)?;
    let Some(servers) = doc.get_mut("mcp_servers") else {
        return Ok(Removal::Absent);
    };
    let Some(servers) = servers.as_table_like_mut() else {
        return Err(EditError::NotATable {
            path: "mcp_servers".into(),
        });
    };
    let Some(current) = servers.get(name) else {
        return Ok(Removal::Absent);
    };
    let Some(current) = current.as_table_like() else {
        return Err(EditError::NotATable {
            path: format!("mcp_servers.{name}"),
        });
    };
    let runs = describe(current);
    let command = current.get("command").and_then(Item::as_str);
    let args: Vec<String> = current
        .get("args")
        .and_then(Item::as_array)
        .map(|a| {
            a.iter()
                .map(|v| v.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default();
    if only_ours && !command.is_some_and(|c| super::edit::is_autotool(c, &args)) {
        return Ok(Removal::NotOurs { runs });
    }
    let others: Vec<String> = servers
        .iter()
        .map(|(k, _)| k.to_string())
        .filter(|k| k != name)
        .collect();
    servers.remove(name);
    let after = doc.to_string();
    // Read it back: every other server is still there, the entry is not.
    let check = parse(&after).map_err(|e| EditError::EditUnparsable { why: e.to_string() })?;
    let left: Vec<String> = check
        .get("mcp_servers")
        .and_then(Item::as_table_like)
        .map(|s| s.iter().map(|(k, _)| k.to_string()).collect())
        .unwrap_or_default();
    if left != others {
        return Err(EditError::EditTooWide);
    }
    Ok(Removal::Removed { text: after, runs })
}

fn parse(text: &str) -> Result<DocumentMut, EditError> {
    text.parse()
        .map_err(|e: toml_edit::TomlError| EditError::Invalid {
            format: "TOML",
            message: e.message().trim().replace('\n', "; "),
            at: e.span().map(|span| line_col(text, span.start)),
        })
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

    const LINUX: &[&str] = &["DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR"];

    fn changed(e: Edit) -> String {
        match e {
            Edit::Changed { text, .. } => text,
            other => panic!("expected a change, got {other:?}"),
        }
    }

    #[test]
    fn a_new_file_gets_one_table_and_no_empty_parent_header() {
        let out = changed(edit("", &entry(), LINUX, "autotool").unwrap());
        assert_eq!(
            out,
            "[mcp_servers.autotool]\ncommand = \"/opt/autotool/bin/autotool\"\nargs = [\"serve\"]\n\
             env_vars = [\"DBUS_SESSION_BUS_ADDRESS\", \"XDG_RUNTIME_DIR\"]\n"
        );
        let mac = changed(edit("", &entry(), &[], "autotool").unwrap());
        assert!(!mac.contains("env_vars"), "{mac}");
    }

    #[test]
    fn the_rest_of_the_file_is_kept_as_written() {
        let head = "# my settings\nmodel = \"o3\"  # fast\n\n[mcp_servers.docs]\ncommand = \"npx\"\nargs = [\"-y\", \"docs\"]\n";
        let tail = "\n[profiles.x]\nmodel = \"y\"\n";
        let out = changed(edit(&format!("{head}{tail}"), &entry(), LINUX, "autotool").unwrap());
        // The new table joins the other servers.
        assert_eq!(
            out,
            format!(
                "{head}\n[mcp_servers.autotool]\ncommand = \"/opt/autotool/bin/autotool\"\n\
                 args = [\"serve\"]\nenv_vars = [\"DBUS_SESSION_BUS_ADDRESS\", \"XDG_RUNTIME_DIR\"]\n{tail}"
            )
        );
    }

    #[test]
    fn an_inline_servers_table_gets_an_inline_entry() {
        let out = changed(edit("mcp_servers = {}\n", &entry(), &[], "autotool").unwrap());
        let doc: DocumentMut = out.parse().unwrap();
        assert_eq!(
            doc["mcp_servers"]["autotool"]["command"].as_str(),
            Some("/opt/autotool/bin/autotool")
        );
    }

    #[test]
    fn an_existing_entry_is_reported_not_touched() {
        let text = "[mcp_servers.autotool]\ncommand = \"/old/autotool\"\nargs = [\"serve\"]\n";
        match edit(text, &entry(), LINUX, "autotool").unwrap() {
            Edit::Present { runs, same } => {
                assert_eq!(runs, "/old/autotool serve");
                assert!(!same);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn errors_say_where() {
        let err = edit("a = 1\nb = \n", &entry(), LINUX, "autotool")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("it is not valid TOML: "), "{err}");
        assert!(err.contains("line 2"), "{err}");
        let err = edit("mcp_servers = 3\n", &entry(), LINUX, "autotool")
            .unwrap_err()
            .to_string();
        assert_eq!(err, "`mcp_servers` in it is not a table");
    }

    #[test]
    fn import_reads_each_server_and_removes_only_the_one_moved() {
        let text = "# mine\nmodel = \"o3\"\n\n[mcp_servers.time]\ncommand = \"uvx\"\nargs = [\"mcp-server-time\"] # clock\nenv = { TZ_TOKEN = \"abc\" }\n\n[mcp_servers.autotool]\ncommand = \"/opt/autotool/bin/autotool\"\nargs = [\"serve\"]\n\n[mcp_servers.gh.env]\nGITHUB_TOKEN = \"ghp_x\"\n";
        let found = servers_of(text).unwrap();
        let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["time", "autotool", "gh"]);
        assert_eq!(found[0].1["command"], "uvx");
        assert_eq!(found[0].1["args"][0], "mcp-server-time");
        assert_eq!(found[0].1["env"]["TZ_TOKEN"], "abc");
        assert_eq!(found[2].1["env"]["GITHUB_TOKEN"], "ghp_x");
        let after = remove_server(text, "time").unwrap();
        assert!(!after.contains("mcp-server-time"), "{after}");
        assert!(after.starts_with("# mine\nmodel = \"o3\"\n"), "{after}");
        assert!(after.contains("[mcp_servers.autotool]") && after.contains("GITHUB_TOKEN"));
        assert_eq!(remove_server(text, "absent").unwrap(), text);
        assert!(servers_of("").unwrap().is_empty());
        assert!(servers_of("a = [").is_err());
    }
}
