//! The edit of one app's config: what its format's editor decided ([`Edit`]), or why the edit
//! cannot be made ([`EditError`]); [`edit_for`] picks the editor and the shape each app expects.

use super::{App, Entry, Os, SERVER_NAME, codex_env_vars, toml};

/// What a config format's editor decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// An entry of that name is there and stays as it is; `runs` is its command, `same` whether
    /// that is exactly this entry.
    Present { runs: String, same: bool },
    /// The config's new text; `replaced` is what an updated entry ran before.
    Changed {
        text: String,
        replaced: Option<String>,
    },
}

/// Why an app's config cannot take autotool's entry. The message follows the config's path
/// (`~/.cursor/mcp.json: it is not valid JSON (with comments): …`); the file is left alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error("it is not UTF-8 text")]
    NotUtf8,
    #[error("it cannot be read: {why}")]
    Unreadable { why: String },
    /// Not valid in its format; `at` is the line and column when the parser gave them.
    #[error("it is not valid {format}: {message}{}", at_line(*at))]
    Invalid {
        format: &'static str,
        message: String,
        at: Option<(usize, usize)>,
    },
    #[error("its top level is not an object")]
    TopLevelNotObject,
    /// `path` (dotted) holds something other than an object.
    #[error("`{path}` in it is not an object")]
    NotAnObject { path: String },
    /// `path` (dotted) holds something other than a table.
    #[error("`{path}` in it is not a table")]
    NotATable { path: String },
    /// `path` (dotted) is a YAML flow mapping (`{ … }`), which autotool does not edit.
    #[error(
        "`{path}` in it is written in YAML's flow style (`{{ … }}`), which autotool does not \
         edit: write it as a block mapping, one entry per line"
    )]
    FlowStyle { path: String },
    #[error("`{path}` could not be added")]
    CannotAdd { path: String },
    #[error("autotool's edit of it would not parse ({why}); this is a bug in autotool")]
    EditUnparsable { why: String },
    #[error(
        "autotool's edit of it would have changed more than the autotool entry; this is a bug \
         in autotool"
    )]
    EditTooWide,
    #[error("autotool's edit of it did not read back as written; this is a bug in autotool")]
    EditNotReadBack,
}

fn at_line(at: Option<(usize, usize)>) -> String {
    match at {
        Some((line, column)) => format!(" at line {line}, column {column}"),
        None => String::new(),
    }
}

/// `app`'s config text with `entry` registered, from its current `text` ("" when the file does
/// not exist), or why it cannot be done. Pure.
pub fn edit_for(app: App, os: Os, entry: &Entry, text: &str) -> Result<Edit, EditError> {
    use super::json::{self, Dialect, Existing, Spec};
    use serde_json::{Value, json};
    let spec = |dialect, servers, existing, extra: &[(&str, Value)], trailing: &[(&str, Value)]| {
        Spec::new(dialect, servers, existing, entry, extra, trailing)
    };
    match app {
        // The shape `claude mcp add --scope user` writes.
        App::ClaudeCode => json::edit(
            text,
            &spec(
                Dialect::Json,
                &["mcpServers"],
                Existing::LeaveAlone,
                &[("type", json!("stdio"))],
                &[("env", json!({}))],
            ),
            SERVER_NAME,
        ),
        App::Codex => toml::edit(text, entry, codex_env_vars(os), SERVER_NAME),
        App::Cursor => json::edit(
            text,
            &spec(Dialect::Jsonc, &["mcpServers"], Existing::Update, &[], &[]),
            SERVER_NAME,
        ),
        App::ClaudeDesktop => json::edit(
            text,
            &spec(Dialect::Json, &["mcpServers"], Existing::Update, &[], &[]),
            SERVER_NAME,
        ),
        App::OpenClaw => json::edit(
            text,
            &spec(
                Dialect::Json5,
                &["mcp", "servers"],
                Existing::Update,
                &[],
                &[],
            ),
            SERVER_NAME,
        ),
        // The shape VS Code's "MCP: Add Server" writes.
        App::VsCode => json::edit(
            text,
            &spec(
                Dialect::Jsonc,
                &["servers"],
                Existing::Update,
                &[("type", json!("stdio"))],
                &[],
            ),
            SERVER_NAME,
        ),
        App::Windsurf | App::Gemini => json::edit(
            text,
            &spec(Dialect::Jsonc, &["mcpServers"], Existing::Update, &[], &[]),
            SERVER_NAME,
        ),
        App::Cline | App::Roo => json::edit(
            text,
            &spec(Dialect::Json, &["mcpServers"], Existing::Update, &[], &[]),
            SERVER_NAME,
        ),
        // Zed's own settings file: a custom context server.
        App::Zed => json::edit(
            text,
            &spec(
                Dialect::Jsonc,
                &["context_servers"],
                Existing::Update,
                &[("source", json!("custom"))],
                &[("env", json!({}))],
            ),
            SERVER_NAME,
        ),
        App::Goose => super::yaml::edit(text, entry, SERVER_NAME),
    }
}

/// How an app's config file is written, which decides how a dry run shows it
/// ([`super::mask`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json(super::json::Dialect),
    Toml,
    Yaml,
}

/// The format of `app`'s config, and the keys leading to its servers (JSON family only).
pub fn format_of(app: App) -> (Format, &'static [&'static str]) {
    use super::json::Dialect;
    match app {
        App::ClaudeCode | App::ClaudeDesktop | App::Cline | App::Roo => {
            (Format::Json(Dialect::Json), &["mcpServers"])
        }
        App::Cursor | App::Windsurf | App::Gemini => {
            (Format::Json(Dialect::Jsonc), &["mcpServers"])
        }
        App::VsCode => (Format::Json(Dialect::Jsonc), &["servers"]),
        App::Zed => (Format::Json(Dialect::Jsonc), &["context_servers"]),
        App::OpenClaw => (Format::Json(Dialect::Json5), &["mcp", "servers"]),
        App::Codex => (Format::Toml, &["mcp_servers"]),
        App::Goose => (Format::Yaml, &["extensions"]),
    }
}

/// What removing autotool's entry from a config comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// No entry of that name: nothing to do.
    Absent,
    /// An entry of that name that does not run autotool (`runs`): the user's, left alone.
    NotOurs { runs: String },
    /// The config's new text, without the entry, which ran `runs`.
    Removed { text: String, runs: String },
}

/// Whether `command args…` is an entry setup writes: an `autotool` binary (at any path: an
/// entry written by another build or install is autotool's too) running `serve` or `connect`.
pub fn is_autotool(command: &str, args: &[String]) -> bool {
    std::path::Path::new(command)
        .file_name()
        .is_some_and(|n| n == "autotool")
        && matches!(args.first().map(String::as_str), Some("serve" | "connect"))
}

/// `app`'s config text without autotool's entry, from its current `text`, or why it cannot be
/// done. Pure.
pub fn remove_for(app: App, text: &str) -> Result<Removal, EditError> {
    match format_of(app) {
        (Format::Json(dialect), servers) => {
            super::json::remove(text, dialect, servers, SERVER_NAME, "command")
        }
        (Format::Toml, _) => toml::remove(text, SERVER_NAME),
        (Format::Yaml, _) => super::yaml::remove(text, SERVER_NAME),
    }
}
