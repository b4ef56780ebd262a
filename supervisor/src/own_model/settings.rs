//! autotool's own model as a user sees it: the `.env` file that names it and what it names,
//! the key masked (a few characters and its length, never more). `autotool config` shows it as
//! rows, `autotool doctor` as one line, `autotool setup --model` before it asks.

use super::agent::ProviderConfig;
use crate::dotenv::DotEnv;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The variables of which one, set, means a `.env` names a model.
pub const CHOOSING_VARS: &[&str] = &[
    "AUTOTOOL_PROVIDER",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
];

/// Characters of a key shown, and the shortest key that shows any.
const SHOWN: usize = 4;
const SHOWN_FROM: usize = 16;

/// Whether `vars` name a model (one of [`CHOOSING_VARS`] set, not blank).
pub fn names_a_model(vars: &BTreeMap<String, String>) -> bool {
    CHOOSING_VARS
        .iter()
        .any(|k| vars.get(*k).is_some_and(|v| !v.trim().is_empty()))
}

/// A key as it may be shown: its first few characters (a key of 16 or more; most keys start
/// with a vendor prefix such as `sk-`) and its length: `sk-p… (51 chars)`, `(8 chars)`.
pub fn mask(key: &str) -> String {
    let len = key.chars().count();
    if len >= SHOWN_FROM {
        let head: String = key.chars().take(SHOWN).collect();
        format!("{head}… ({len} chars)")
    } else {
        format!("({len} chars)")
    }
}

/// What a `.env` says about the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// No such file.
    Absent,
    /// The file could not be read (the reason).
    Unreadable(String),
    /// The file names no model.
    NoModel,
    /// It names one that cannot be used (the reason, naming variables, never a value of a key).
    Invalid(String),
    /// A usable model.
    Ready {
        api: &'static str,
        base_url: String,
        model: String,
        /// Masked by [`mask`]; `None`: no key (a local server).
        key: Option<String>,
    },
}

/// The model a `.env` file names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub file: PathBuf,
    pub state: State,
}

/// What `vars` (read from `file`; `None`: no file) name.
pub fn summarize(file: &Path, dotenv: Option<&DotEnv>) -> Summary {
    let state = match dotenv {
        None => State::Absent,
        Some(env) if !names_a_model(&env.vars) => State::NoModel,
        Some(env) => match ProviderConfig::from_vars(&env.vars) {
            Ok(c) => State::Ready {
                api: c.api.name(),
                key: c.api_key.as_deref().map(mask),
                base_url: c.base_url,
                model: c.model,
            },
            Err(e) => State::Invalid(e.to_string()),
        },
    };
    Summary {
        file: file.to_path_buf(),
        state,
    }
}

/// Reads `file` and summarizes it.
pub fn read(file: &Path) -> Summary {
    match crate::dotenv::read(file) {
        Ok(env) => summarize(file, env.as_ref()),
        Err(e) => Summary {
            file: file.to_path_buf(),
            state: State::Unreadable(e.to_string()),
        },
    }
}

impl Summary {
    /// `(name, value)` rows for `autotool config`.
    pub fn rows(&self) -> Vec<(&'static str, String)> {
        let file = self.file.display().to_string();
        let mut rows = vec![("model.file", file)];
        match &self.state {
            State::Ready {
                api,
                base_url,
                model,
                key,
            } => {
                rows.push(("model.api", (*api).to_string()));
                rows.push(("model.base_url", base_url.clone()));
                rows.push(("model.name", model.clone()));
                rows.push(("model.key", key.clone().unwrap_or_else(|| "none".into())));
            }
            other => rows.push(("model", self.problem(other))),
        }
        rows
    }

    /// One line: the model, or why there is none.
    pub fn line(&self) -> String {
        match &self.state {
            State::Ready {
                api,
                base_url,
                model,
                key,
            } => format!(
                "{model} over {api} at {base_url}, key {} (from {})",
                key.as_deref().unwrap_or("none"),
                self.file.display()
            ),
            other => self.problem(other),
        }
    }

    fn problem(&self, state: &State) -> String {
        let file = self.file.display();
        match state {
            State::Absent => format!("none ({file} does not exist)"),
            State::Unreadable(why) => format!("unreadable: {why}"),
            State::NoModel => format!("none ({file} names no model)"),
            State::Invalid(why) => format!("not usable: {why} (in {file})"),
            State::Ready { .. } => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> DotEnv {
        DotEnv {
            vars: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            skipped: vec![],
        }
    }

    #[test]
    fn a_key_shows_four_characters_and_its_length_and_a_short_one_only_its_length() {
        assert_eq!(mask("sk-proj-abcdefghijklmnop"), "sk-p… (24 chars)");
        assert_eq!(mask("0123456789abcdef"), "0123… (16 chars)");
        assert_eq!(mask("0123456789abcde"), "(15 chars)");
        assert_eq!(mask(""), "(0 chars)");
    }

    #[test]
    fn rows_show_the_model_and_never_the_key() {
        let key = "sk-ant-api03-SECRETSECRETSECRET";
        let s = summarize(
            Path::new("/h/.env"),
            Some(&env(&[
                ("ANTHROPIC_API_KEY", key),
                ("ANTHROPIC_MODEL", "claude-x"),
            ])),
        );
        assert_eq!(
            s.rows(),
            [
                ("model.file", "/h/.env".to_string()),
                ("model.api", "anthropic-messages".into()),
                ("model.base_url", "https://api.anthropic.com".into()),
                ("model.name", "claude-x".into()),
                ("model.key", "sk-a… (31 chars)".into()),
            ]
        );
        let all = format!("{:?} {}", s, s.line());
        assert!(!all.contains("SECRET"), "{all}");
    }

    #[test]
    fn a_local_server_has_no_key_and_each_problem_is_named() {
        let local = summarize(
            Path::new("/p/.env"),
            Some(&env(&[
                ("OPENAI_BASE_URL", "http://localhost:11434/v1"),
                ("OPENAI_LLM", "qwen3:8b"),
            ])),
        );
        assert_eq!(
            local.line(),
            "qwen3:8b over chat-completions at http://localhost:11434/v1, key none (from /p/.env)"
        );
        let absent = summarize(Path::new("/p/.env"), None);
        assert_eq!(absent.line(), "none (/p/.env does not exist)");
        let none = summarize(Path::new("/p/.env"), Some(&env(&[("TAVILY_API_KEY", "x")])));
        assert_eq!(none.state, State::NoModel);
        let bad = summarize(
            Path::new("/p/.env"),
            Some(&env(&[("OPENAI_BASE_URL", "http://localhost:11434/v1")])),
        );
        assert!(
            matches!(&bad.state, State::Invalid(why) if why.contains("OPENAI_LLM")),
            "{bad:?}"
        );
        assert_eq!(bad.rows()[1].0, "model");
    }
}
