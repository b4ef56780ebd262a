//! What a dry run shows of a config: a form of it in which no secret can appear.
//!
//! Agent app configs hold other servers' tokens (`env`, `headers`), and a file written on one
//! line makes any change a change of that whole line. So a dry run never diffs the file as it
//! is: it diffs [`shown`] forms of the text before and after. Every string value under a key
//! that holds secrets ([`SECRET_PARENTS`]: `env`, `headers`, …), under a key named like one
//! (`token`, `api_key`, `password`, …), following such a flag in a list of arguments
//! (`"--api-key", "…"`), or shaped like a token itself (`ghp_…`, `sk-…`, a long run of letters
//! and digits) reads [`HIDDEN`]. JSON-family files are shown pretty-printed (two
//! spaces, one key per line), so a one-line file's diff is the entry's own lines; TOML keeps its
//! own layout (Codex's edit never touches another server's line); block YAML is masked line by
//! line.

use super::edit::Format;
use serde_json::Value;

/// What a hidden value reads as.
pub const HIDDEN: &str = "<hidden>";

/// Keys whose every value is hidden, at any depth below them.
pub const SECRET_PARENTS: [&str; 6] = [
    "env",
    "envs",
    "headers",
    "http_headers",
    "env_http_headers",
    "environment",
];

/// Parts of key names that say the value is a secret.
const SECRET_WORDS: [&str; 9] = [
    "token",
    "secret",
    "password",
    "passwd",
    "apikey",
    "api_key",
    "auth",
    "credential",
    "cookie",
];

/// Prefixes of well-known token formats.
const TOKEN_PREFIXES: [&str; 22] = [
    "sk-",
    "sk_",
    "pk_",
    "rk_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xapp-",
    "AKIA",
    "ASIA",
    "AIza",
    "tvly-",
    "hf_",
    "gsk_",
    "pplx-",
];

/// Whether a key's name says its value is a secret.
fn secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase().replace('-', "_");
    SECRET_WORDS.iter().any(|w| k.contains(w))
}

/// Whether one word (no separators) looks like a token.
fn token_word(w: &str) -> bool {
    if TOKEN_PREFIXES
        .iter()
        .any(|p| w.len() >= p.len() + 8 && w.starts_with(p))
    {
        return true;
    }
    w.len() >= 20
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.+=".contains(c))
        && w.chars().any(|c| c.is_ascii_digit())
        && w.chars().any(|c| c.is_ascii_alphabetic())
}

/// Whether a string holds something shaped like a token (alone, or as `--key=…`, in a URL's
/// query, after `Bearer `).
pub fn token_shaped(s: &str) -> bool {
    s.split(|c: char| c.is_whitespace() || "=:/?&,;\"'".contains(c))
        .any(token_word)
}

/// Whether an argument is a flag naming a secret (`--api-key`, `--token`): the argument after
/// it is one.
fn secret_flag(arg: &str) -> bool {
    arg.starts_with('-') && !arg.contains('=') && secret_key(arg)
}

/// `v` with every secret string hidden; `hide` is whether everything below is secret.
fn mask_value(v: &mut Value, hide: bool) {
    match v {
        Value::String(s) if hide || token_shaped(s) => *s = HIDDEN.to_string(),
        Value::Array(a) => {
            let mut after_flag = false;
            for v in a.iter_mut() {
                let flag = v.as_str().is_some_and(secret_flag);
                mask_value(v, hide || after_flag);
                after_flag = flag;
            }
        }
        Value::Object(o) => {
            for (k, v) in o.iter_mut() {
                let below = hide || SECRET_PARENTS.contains(&k.as_str()) || secret_key(k);
                mask_value(v, below);
            }
        }
        _ => {}
    }
}

/// `text`, in the form a dry run diffs: secrets hidden (see the module's doc).
pub fn shown(format: Format, text: &str) -> String {
    if text.trim().is_empty() {
        return String::new();
    }
    match format {
        Format::Json(dialect) => json(text, dialect),
        Format::Toml => toml(text).unwrap_or_else(|| lines(text)),
        Format::Yaml if super::yaml::json_shaped(text) => json(text, super::json::Dialect::Json5),
        Format::Yaml => lines(text),
    }
}

fn json(text: &str, dialect: super::json::Dialect) -> String {
    match super::json::parse(text, dialect) {
        Ok(mut v) => {
            mask_value(&mut v, false);
            let mut out = serde_json::to_string_pretty(&v).unwrap_or_default();
            out.push('\n');
            out
        }
        Err(_) => lines(text),
    }
}

fn toml(text: &str) -> Option<String> {
    use toml_edit::{Item, TableLike, Value as T};
    fn value(v: &mut T, hide: bool) {
        match v {
            T::String(s) if hide || token_shaped(s.value()) => {
                let decor = s.decor().clone();
                let mut new = toml_edit::Formatted::new(HIDDEN.to_string());
                *new.decor_mut() = decor;
                *s = new;
            }
            T::Array(a) => {
                let mut after_flag = false;
                for v in a.iter_mut() {
                    let flag = v.as_str().is_some_and(secret_flag);
                    value(v, hide || after_flag);
                    after_flag = flag;
                }
            }
            T::InlineTable(t) => table(t, hide),
            _ => {}
        }
    }
    fn table(t: &mut dyn TableLike, hide: bool) {
        for (k, item) in t.iter_mut() {
            let below = hide || SECRET_PARENTS.contains(&k.get()) || secret_key(k.get());
            match item {
                Item::Value(v) => value(v, below),
                Item::Table(t) => table(t, below),
                Item::ArrayOfTables(a) => a.iter_mut().for_each(|t| table(t, below)),
                Item::None => {}
            }
        }
    }
    let mut doc: toml_edit::DocumentMut = text.parse().ok()?;
    table(doc.as_table_mut(), false);
    Some(doc.to_string())
}

/// Line by line, for block YAML (and anything that does not parse): a `key: value` below a
/// secret parent or under a secret key name, a `- item` below a secret parent, and any
/// token-shaped word, hidden.
fn lines(text: &str) -> String {
    let mut parents: Vec<(usize, bool)> = Vec::new();
    let mut after_flag = false;
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let body = line.trim_start();
        let indent = line.len() - body.len();
        if body.is_empty() || body.starts_with('#') {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        while parents.last().is_some_and(|(i, _)| *i >= indent) {
            parents.pop();
        }
        let is_item = body.starts_with("- ");
        let hidden_here = parents.iter().any(|(_, s)| *s) || (is_item && after_flag);
        let item = body.strip_prefix("- ").unwrap_or(body);
        after_flag = is_item && secret_flag(item.trim());
        let shown = match item.split_once(':') {
            Some((key, rest)) if !key.contains(' ') || key.starts_with(['"', '\'']) => {
                let k = key.trim_matches(['"', '\'']);
                let secret = hidden_here || SECRET_PARENTS.contains(&k) || secret_key(k);
                parents.push((indent, secret));
                let value = rest.trim();
                if (hidden_here || secret_key(k)) && !value.is_empty() {
                    format!("{}{key}: {HIDDEN}", &line[..line.len() - item.len()])
                } else {
                    line.to_string()
                }
            }
            _ if hidden_here => format!("{}{HIDDEN}", &line[..line.len() - item.len()]),
            _ => line.to_string(),
        };
        let words: Vec<String> = shown
            .split(' ')
            .map(|w| {
                if token_shaped(w) {
                    HIDDEN.to_string()
                } else {
                    w.to_string()
                }
            })
            .collect();
        out.push_str(&words.join(" "));
        out.push('\n');
    }
    out
}

/// The change as a unified diff without context lines, of the [`shown`] forms of the
/// text before and after: every secret (another server's `env` or `headers` value, anything
/// shaped like a token) reads `<hidden>`, and a JSON-family file is pretty-printed first, so a
/// config written on one line shows only the lines of autotool's entry.
pub fn diff(
    env: &super::HostEnv,
    app: super::App,
    config: &std::path::Path,
    before: Option<&str>,
    after: &str,
) -> String {
    let name = env.show(config);
    let old = if before.is_some() {
        name.clone()
    } else {
        "/dev/null".to_string()
    };
    let (format, _) = super::edit::format_of(app);
    let before = shown(format, before.unwrap_or(""));
    let after = shown(format, after);
    let text = similar::TextDiff::from_lines(&before, &after);
    let mut unified = text.unified_diff();
    unified.context_radius(0);
    let mut out = format!("--- {old}\n+++ {name}\n");
    for hunk in unified.iter_hunks() {
        out.push_str(&format!("{}\n", hunk.header()));
        for change in hunk.iter_changes() {
            let sign = match change.tag() {
                similar::ChangeTag::Delete => '-',
                similar::ChangeTag::Insert => '+',
                similar::ChangeTag::Equal => ' ',
            };
            out.push_str(&format!(
                "{sign}{}\n",
                change.value().trim_end_matches('\n')
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::host_apps::json::Dialect;

    #[test]
    fn tokens_are_told_from_names_paths_and_versions() {
        for t in [
            "ghp_abcdefghijklmnop1234",
            "sk-proj-0123456789abcdef",
            "Bearer tvly-0123456789abcdef",
            "--api-key=AIzaSyA0123456789abcdefgh",
            "https://x.example/mcp?key=a1b2c3d4e5f6a7b8c9d0e1f2",
            "3f2a9c81d0e44b7f9a6c5e21",
        ] {
            assert!(token_shaped(t), "{t}");
        }
        for t in [
            "/opt/autotool/bin/autotool",
            "serve",
            "DBUS_SESSION_BUS_ADDRESS",
            "--api-key",
            "@modelcontextprotocol/server-github",
            "npx",
            "mcp-server-fetch==2025.4.7",
            "https://api.example.com/v1/mcp",
        ] {
            assert!(!token_shaped(t), "{t}");
        }
    }

    #[test]
    fn json_is_shown_pretty_with_every_secret_hidden() {
        let text = r#"{"mcpServers":{"gh":{"command":"gh","args":["--token","ghp_abcdefghijklmnop1234","--api-key","short1","--port","8080"],"env":{"DEBUG":"1"},"headers":{"X":"y"}},"x":{"url":"u","api_key":"plain"}}}"#;
        let out = shown(Format::Json(Dialect::Json), text);
        assert!(!out.contains("ghp_") && !out.contains("\"1\"") && !out.contains("plain"));
        assert!(!out.contains("short1") && out.contains("\"8080\""), "{out}");
        assert!(out.contains("\"command\": \"gh\""), "{out}");
        assert!(out.contains("\"DEBUG\": \"<hidden>\""), "{out}");
        assert!(out.lines().count() > 10, "{out}");
    }

    #[test]
    fn toml_keeps_its_layout_and_hides_env() {
        let text = "# mine\n[mcp_servers.gh]\ncommand = \"gh\"  # the cli\nenv = { GITHUB_TOKEN = \"abc\" }\n";
        assert_eq!(
            shown(Format::Toml, text),
            "# mine\n[mcp_servers.gh]\ncommand = \"gh\"  # the cli\nenv = { GITHUB_TOKEN = \"<hidden>\" }\n"
        );
    }

    #[test]
    fn yaml_lines_below_secret_keys_are_hidden() {
        let text = "extensions:\n  gh:\n    cmd: gh\n    envs:\n      GITHUB_TOKEN: abc\n    args:\n    - --key\n    - ghp_abcdefghijklmnop1234\n    - --api-key\n    - short1\n    timeout: 300\n";
        let out = shown(Format::Yaml, text);
        assert_eq!(
            out,
            "extensions:\n  gh:\n    cmd: gh\n    envs:\n      GITHUB_TOKEN: <hidden>\n    args:\n    - --key\n    - <hidden>\n    - --api-key\n    - <hidden>\n    timeout: 300\n"
        );
    }
}
