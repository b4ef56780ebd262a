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
    }
}
