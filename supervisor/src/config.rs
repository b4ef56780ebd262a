//! Settings: every value autotool runs with, and the layer it came from.
//!
//! One table, [`SETTINGS`], names each setting once: its flag (`serve`'s, where it has one), its
//! environment variable, its key in `$AUTOTOOL_HOME/config.toml`, how its text is read and
//! checked, and what it does. [`resolve`] takes the layers as data ([`Inputs`]) and, per
//! setting, keeps the strongest that gives a value: flag > environment > file > default
//! ([`Layer`] is ordered so). `autotool serve` and `autotool config` both build their settings
//! here, so what `config` prints is what `serve` runs with.
//!
//! Every layer is checked, also one that a stronger layer overrides. A value that does not
//! parse, a key the file may not hold and a file that is not TOML are each a [`Problem`]; all of
//! them are collected ([`Problems`]), `autotool config` exits non-zero with them and `serve`
//! refuses to start.
//!
//! Two settings keep, for the flag and the environment, the rule they had before the file
//! existed: for `sandbox` only an explicit `off`, `0`, `false` or `no` turns the sandbox off
//! (anything else, a typo too, is strict), and for `consent` only `dangerously-allow-all`
//! grants keys without asking. Such a fallback is kept as a note beside the value; in the file,
//! where the setting is new, an unknown word is a problem.
//!
//! Some settings are read from the environment only: `home` holds the file, and the others
//! (`runtime`, `python`, `log`, `credentials`, `key_names`) are read by commands that do not
//! resolve settings; `autotool config` shows them so that one place answers.

use crate::library::Settings;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

mod table;
mod units;

pub use table::{SETTINGS, Setting};
pub use units::{ValueError, bytes, count, duration, show_bytes, show_duration};

/// The file's name in `$AUTOTOOL_HOME`.
pub const FILE_NAME: &str = "config.toml";

/// Where a value came from. Ordered by strength: the strongest layer that gives a value wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    Default,
    File,
    Env,
    Flag,
}

impl Layer {
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Default => "default",
            Layer::File => "file",
            Layer::Env => "env",
            Layer::Flag => "flag",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything the table sets: `serve`'s [`Settings`] and the environment-only values.
#[derive(Debug, Clone)]
pub struct Values {
    pub serve: Settings,
    /// `$AUTOTOOL_HOME`.
    pub home: PathBuf,
    /// `$AUTOTOOL_RUNTIME`: a prepared virtual environment to run tools on.
    pub runtime: Option<PathBuf>,
    /// `$AUTOTOOL_PYTHON`: the interpreter the runtime is built from.
    pub python: Option<PathBuf>,
    /// `$AUTOTOOL_LOG`: the log filter.
    pub log: Option<String>,
    /// `$AUTOTOOL_CREDENTIALS`: where `autotool keys add` stores a value, `keychain` or `file`.
    pub credentials: String,
    /// `$AUTOTOOL_KEYS`: more environment variables that count as keys.
    pub key_names: Vec<String>,
}

impl Values {
    /// The defaults, for a home at `home`.
    pub fn defaults(home: &Path) -> Values {
        Values {
            serve: Settings::default(),
            home: home.to_path_buf(),
            runtime: None,
            python: None,
            log: None,
            credentials: "keychain".into(),
            key_names: Vec::new(),
        }
    }
}

/// The config file as the resolver is given it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum FileText {
    /// There is none.
    #[default]
    Absent,
    /// Its text.
    Text(String),
    /// It could not be read, and why.
    Unreadable(String),
}

/// What each layer says, before anything is checked.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// Command-line flags by setting name, as typed (only `serve` has any).
    pub flags: BTreeMap<String, String>,
    /// The environment; only the variables the table names are read, and an empty one counts
    /// as unset.
    pub env: BTreeMap<String, String>,
    /// The home the file is in (and the `home` setting's value).
    pub home: PathBuf,
    /// `$home/config.toml`.
    pub file: FileText,
}

impl Inputs {
    /// This process's environment and config file, with `flags`.
    pub fn from_process(flags: BTreeMap<String, String>) -> Result<Inputs, Problems> {
        // A home that is a file is the problem, not the `config.toml` that cannot be in it.
        let home = crate::home::Home::from_env()
            .and_then(|h| h.check_kind().map(|()| h))
            .map_err(|e| Problems(vec![Problem::Home(e.to_string())]))?;
        let env = std::env::vars_os()
            .filter_map(|(k, v)| {
                let k = k.into_string().ok()?;
                // `--home` wins over the variable, as the home setting's value too.
                (k.starts_with("AUTOTOOL_")
                    && !(k == "AUTOTOOL_HOME" && crate::home::overridden().is_some()))
                .then(|| (k, v.to_string_lossy().into_owned()))
            })
            .collect();
        let path = home.root().join(FILE_NAME);
        let file = match std::fs::read_to_string(&path) {
            Ok(text) => FileText::Text(text),
            Err(e) if e.kind() == io::ErrorKind::NotFound => FileText::Absent,
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                FileText::Unreadable("it is not UTF-8 text".into())
            }
            Err(e) => FileText::Unreadable(e.to_string()),
        };
        Ok(Inputs {
            flags,
            env,
            home: home.root().to_path_buf(),
            file,
        })
    }
}

/// One setting as resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub name: &'static str,
    /// As text every layer accepts.
    pub value: String,
    pub layer: Layer,
    /// Where: the flag, the environment variable, or `path:line` in the file (`None` for the
    /// default).
    #[serde(rename = "where")]
    pub source: Option<String>,
    /// Weaker layers that also gave a value, which this one overrides.
    pub overrides: Vec<String>,
    /// A remark on how the value was read (a word taken as strict, names ignored).
    pub note: Option<String>,
}

/// The settings in effect and where each came from.
#[derive(Debug, Clone)]
pub struct Config {
    pub values: Values,
    /// The config file, read or not.
    pub file: PathBuf,
    pub file_exists: bool,
    /// One per row of [`SETTINGS`], in order.
    pub entries: Vec<Entry>,
}

impl Config {
    /// `serve`'s settings.
    pub fn settings(&self) -> Settings {
        self.values.serve.clone()
    }

    /// The entry of the setting `name`.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// `name: note` for every value read with a remark.
    pub fn notes(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter_map(|e| e.note.as_ref().map(|n| format!("{}: {n}", e.name)))
            .collect()
    }
}

/// Something wrong with a setting or the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("{setting} = {raw:?} ({layer}, {at}) {why}")]
    Value {
        setting: &'static str,
        layer: Layer,
        /// The flag, the variable, or `path:line`.
        at: String,
        raw: String,
        why: ValueError,
    },
    #[error(
        "{path}, line {line}, column {column}: not valid TOML: {message}. Fix that line: each \
         setting is `name = value`, text in double quotes (sandbox = \"strict\"), and \
         limits.* and lifecycle.* may go under [limits] and [lifecycle]"
    )]
    Malformed {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{at}: unknown setting `{key}`{hint}. The file may set: {known}")]
    UnknownKey {
        /// `path:line`.
        at: String,
        key: String,
        /// ` (did you mean …?)`, or empty.
        hint: String,
        known: String,
    },
    #[error(
        "{at}: `{key}` is read from the environment only (commands that do not read this file \
         use it too); remove it and set {env} instead"
    )]
    EnvOnly {
        at: String,
        key: String,
        env: &'static str,
    },
    #[error("cannot read {path}: {why}; fix it, or move it away to use the defaults")]
    Unreadable { path: String, why: String },
    #[error("{0}")]
    Home(String),
}

/// Every problem found; `serve` starts only when there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problems(pub Vec<Problem>);

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [one] => write!(f, "{one}"),
            many => {
                write!(f, "{} problems with the settings:", many.len())?;
                for p in many {
                    write!(f, "\n- {p}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Problems {}

impl Problems {
    /// Whether a flag's value is among the problems: the command line itself is wrong.
    pub fn from_command_line(&self) -> bool {
        self.0.iter().any(|p| {
            matches!(
                p,
                Problem::Value {
                    layer: Layer::Flag,
                    ..
                }
            )
        })
    }
}

/// One value the file gives: its text and line.
#[derive(Debug, Clone)]
struct FileValue {
    raw: String,
    line: usize,
}

/// Resolve every setting: flag > environment > file > default, each layer checked.
pub fn resolve(inputs: &Inputs) -> Result<Config, Problems> {
    let path = inputs.home.join(FILE_NAME);
    let mut problems = Vec::new();
    let file = match &inputs.file {
        FileText::Absent => BTreeMap::new(),
        FileText::Unreadable(why) => {
            problems.push(Problem::Unreadable {
                path: path.display().to_string(),
                why: why.clone(),
            });
            BTreeMap::new()
        }
        FileText::Text(text) => read_file(&path, text, &mut problems),
    };
    let mut values = Values::defaults(&inputs.home);
    let mut entries = Vec::with_capacity(SETTINGS.len());
    for s in SETTINGS {
        // Weakest first, so the strongest that gives a value is applied last and stays.
        let mut given: Vec<(Layer, &str, String)> = Vec::new();
        if let Some(v) = s.key.and_then(|k| file.get(k)) {
            given.push((
                Layer::File,
                &v.raw,
                format!("{}:{}", path.display(), v.line),
            ));
        }
        if let Some(v) = inputs.env.get(s.env).filter(|v| !v.is_empty()) {
            given.push((Layer::Env, v, s.env.to_string()));
        }
        if let Some(v) = inputs.flags.get(s.name) {
            given.push((Layer::Flag, v, s.flag.unwrap_or(s.name).to_string()));
        }
        let mut entry = Entry {
            name: s.name,
            value: String::new(),
            layer: Layer::Default,
            source: None,
            overrides: Vec::new(),
            note: None,
        };
        for (layer, raw, source) in given {
            match (s.apply)(&mut values, raw, layer) {
                Ok(note) => {
                    if let Some(previous) = entry.source.take() {
                        entry.overrides.push(previous);
                    }
                    entry.layer = layer;
                    entry.source = Some(source);
                    entry.note = note;
                }
                Err(why) => problems.push(Problem::Value {
                    setting: s.name,
                    layer,
                    at: source,
                    raw: raw.to_string(),
                    why,
                }),
            }
        }
        entry.value = s.show(&values);
        entries.push(entry);
    }
    if !problems.is_empty() {
        return Err(Problems(problems));
    }
    Ok(Config {
        values,
        file: path,
        file_exists: inputs.file != FileText::Absent,
        entries,
    })
}

/// The settings the file gives, by key; problems of its syntax and keys go to `problems`.
fn read_file(
    path: &Path,
    text: &str,
    problems: &mut Vec<Problem>,
) -> BTreeMap<&'static str, FileValue> {
    let mut found = BTreeMap::new();
    let doc = match toml_edit::Document::parse(text) {
        Ok(doc) => doc,
        Err(e) => {
            let (line, column) = e
                .span()
                .map(|s| line_column(text, s.start))
                .unwrap_or((1, 1));
            problems.push(Problem::Malformed {
                path: path.display().to_string(),
                line,
                column,
                message: e.message().to_string(),
            });
            return found;
        }
    };
    let mut leaves = Vec::new();
    walk(doc.as_table(), "", text, &mut leaves);
    for (key, item, line) in leaves {
        let at = format!("{}:{line}", path.display());
        if let Some(s) = SETTINGS.iter().find(|s| s.key == Some(key.as_str())) {
            match toml_text(item) {
                Ok(raw) => {
                    found.insert(s.name, FileValue { raw, line });
                }
                Err(kind) => problems.push(Problem::Value {
                    setting: s.name,
                    layer: Layer::File,
                    at,
                    raw: item.to_string().trim().to_string(),
                    why: ValueError::NotScalar { kind },
                }),
            }
        } else if let Some(s) = SETTINGS.iter().find(|s| s.key.is_none() && s.name == key) {
            problems.push(Problem::EnvOnly {
                at,
                key,
                env: s.env,
            });
        } else {
            let hint = nearest_key(&key)
                .map(|k| format!(" (did you mean `{k}`?)"))
                .unwrap_or_default();
            let known = SETTINGS
                .iter()
                .filter_map(|s| s.key)
                .collect::<Vec<_>>()
                .join(", ");
            problems.push(Problem::UnknownKey {
                at,
                key,
                hint,
                known,
            });
        }
    }
    found
}

/// Every value in `table`, with its dotted key and line. A table is walked into; an empty one
/// that no key lives under is reported as a key of its own.
fn walk<'a>(
    table: &'a dyn toml_edit::TableLike,
    prefix: &str,
    text: &str,
    out: &mut Vec<(String, &'a toml_edit::Item, usize)>,
) {
    for (name, item) in table.iter() {
        let key = format!("{prefix}{name}");
        let line = table
            .key(name)
            .and_then(toml_edit::Key::span)
            .or_else(|| item.span())
            .map_or(1, |s| line_column(text, s.start).0);
        match item.as_table_like() {
            Some(inner) => {
                let section = format!("{key}.");
                let used = SETTINGS
                    .iter()
                    .any(|s| s.key.is_some_and(|k| k.starts_with(&section)));
                if inner.is_empty() && !used {
                    out.push((key, item, line));
                } else {
                    walk(inner, &section, text, out);
                }
            }
            None => out.push((key, item, line)),
        }
    }
}

/// A scalar's text for the setting's parser, or what kind of value it is instead.
fn toml_text(item: &toml_edit::Item) -> Result<String, &'static str> {
    use toml_edit::Value;
    match item.as_value() {
        Some(Value::String(s)) => Ok(s.value().clone()),
        Some(Value::Integer(i)) => Ok(i.value().to_string()),
        Some(Value::Float(f)) => Ok(f.value().to_string()),
        Some(Value::Boolean(b)) => Ok(b.value().to_string()),
        Some(Value::Datetime(_)) => Err("a date"),
        Some(Value::Array(_)) => Err("a list"),
        Some(Value::InlineTable(_)) | None => Err("a table"),
    }
}

/// 1-based line and column of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// The file key closest to `key`, when it is a likely typo of it.
fn nearest_key(key: &str) -> Option<&'static str> {
    SETTINGS
        .iter()
        .filter_map(|s| s.key)
        .map(|k| (edit_distance(key, k), k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4))
        .min()
        .map(|(_, k)| k)
        .or_else(|| {
            // A section-less spelling: `memory_bytes` for `limits.memory_bytes`.
            SETTINGS
                .iter()
                .filter_map(|s| s.key)
                .find(|k| k.rsplit('.').next() == Some(key) && k.contains('.'))
        })
}

/// Levenshtein distance, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if ca == *cb {
                diagonal
            } else {
                1 + diagonal.min(above).min(row[j])
            };
            diagonal = above;
        }
    }
    row[b.len()]
}

/// `autotool config`: a table of every setting, then the notes.
pub fn render(config: &Config, out: &mut dyn Write) -> io::Result<()> {
    let state = if config.file_exists {
        "read"
    } else {
        "absent; see docs/config.md for an example"
    };
    writeln!(out, "config file: {} ({state})", config.file.display())?;
    writeln!(out)?;
    let rows: Vec<[&str; 4]> = config
        .entries
        .iter()
        .map(|e| {
            [
                e.name,
                e.value.as_str(),
                e.layer.as_str(),
                e.source.as_deref().unwrap_or(""),
            ]
        })
        .collect();
    let header = ["NAME", "VALUE", "LAYER", "WHERE"];
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([header[i].len()])
            .max()
            .unwrap_or(0)
    };
    let widths = [width(0), width(1), width(2)];
    for row in std::iter::once(&header).chain(&rows) {
        let line = format!(
            "{:w0$}  {:w1$}  {:w2$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
        );
        writeln!(out, "{}", line.trim_end())?;
    }
    let mut remarks = Vec::new();
    for e in &config.entries {
        if !e.overrides.is_empty() {
            remarks.push(format!(
                "{}: {} overrides {}",
                e.name,
                e.source.as_deref().unwrap_or(""),
                e.overrides.join(" and ")
            ));
        }
    }
    remarks.extend(config.notes());
    if !remarks.is_empty() {
        writeln!(out)?;
        for r in remarks {
            writeln!(out, "note: {r}")?;
        }
    }
    Ok(())
}

/// `autotool config --json`.
pub fn to_json(config: &Config) -> serde_json::Value {
    let defaults = Values::defaults(&config.values.home);
    let settings: Vec<serde_json::Value> = SETTINGS
        .iter()
        .zip(&config.entries)
        .map(|(s, e)| {
            serde_json::json!({
                "name": e.name,
                "value": e.value,
                "layer": e.layer,
                "where": e.source,
                "overrides": e.overrides,
                "note": e.note,
                "default": s.show(&defaults),
                "flag": s.flag,
                "env": s.env,
                "key": s.key,
                "description": s.description,
            })
        })
        .collect();
    serde_json::json!({
        "file": { "path": config.file, "exists": config.file_exists },
        "settings": settings,
    })
}

#[cfg(test)]
mod tests;
