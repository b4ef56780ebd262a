//! `autotool setup --model`: autotool's own model (behind `synthesize_tool`), written to
//! `$AUTOTOOL_HOME/.env` and tried with one short request before it is kept.
//!
//! - Three kinds: `openai` (OpenAI, or with `--base-url` any OpenAI-compatible server),
//!   `anthropic`, `local` (an OpenAI-compatible server of your own, by default Ollama at
//!   [`LOCAL_BASE_URL`], no key needed).
//! - Each value comes from its flag, else (on a terminal) from a question whose default is the
//!   value in effect, else from the file as it is. The key: `--key-stdin` reads it from stdin;
//!   on a terminal it is asked without echo (Enter keeps the current one); without a terminal
//!   the vendor's variable (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`) in the environment is taken.
//!   Without a terminal nothing is ever asked: a missing value is an error naming its flag.
//! - A rerun first shows the current values (the key masked). Without a terminal and without
//!   a flag, that is all it does.
//! - One request ("reply with ok") tests the model; when it fails, the file is left as it was
//!   and the exit code is 1 (`--no-test` skips it). The file keeps its other lines (tool keys,
//!   comments); the model's variables are replaced. It is written 0600, atomically.
//!
//! The decisions are pure functions ([`vars_for`], [`rewrite`]), tested whole; the terminal
//! and the request stay thin.

use crate::cmd::run::MODEL_VARS;
use crate::own_model::agent::{Api, Item, ProviderConfig};
use crate::own_model::settings;
use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal, Read, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Where `local` points unless `--base-url` says: Ollama's OpenAI-compatible API.
pub const LOCAL_BASE_URL: &str = "http://localhost:11434/v1";
/// The bound on the test request.
const TEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Which kind of model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    OpenAi,
    Anthropic,
    Local,
}

impl Kind {
    /// From `--provider`'s value.
    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "openai" => Some(Kind::OpenAi),
            "anthropic" => Some(Kind::Anthropic),
            "local" | "ollama" => Some(Kind::Local),
            _ => None,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Kind::OpenAi => "openai",
            Kind::Anthropic => "anthropic",
            Kind::Local => "local",
        }
    }
    /// The variable of its key.
    fn key_var(self) -> &'static str {
        match self {
            Kind::Anthropic => "ANTHROPIC_API_KEY",
            Kind::OpenAi | Kind::Local => "OPENAI_API_KEY",
        }
    }
}

/// What the command line gave.
#[derive(Debug, Clone, Default)]
pub struct ModelArgs {
    pub provider: Option<String>,
    pub base_url: Option<String>,
    pub model_name: Option<String>,
    pub key_stdin: bool,
    pub no_test: bool,
    pub dry_run: bool,
}

/// The values decided, before they become variables.
#[derive(Clone, PartialEq, Eq)]
pub struct Answers {
    pub kind: Kind,
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub key: Option<String>,
}

impl std::fmt::Debug for Answers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Answers")
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("key", &self.key.as_deref().map(settings::mask))
            .finish()
    }
}

/// The model variables `answers` mean, checked by the rules every command reads them with.
pub fn vars_for(a: &Answers) -> Result<BTreeMap<String, String>, String> {
    let mut vars = BTreeMap::new();
    let mut set = |k: &str, v: &Option<String>| {
        if let Some(v) = v.as_deref().map(str::trim).filter(|v| !v.is_empty()) {
            vars.insert(k.to_string(), v.to_string());
        }
    };
    match a.kind {
        Kind::OpenAi | Kind::Anthropic => {
            let (base_var, model_var) = match a.kind {
                Kind::Anthropic => ("ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL"),
                Kind::OpenAi | Kind::Local => ("OPENAI_BASE_URL", "OPENAI_LLM"),
            };
            if a.key.is_none() {
                return Err(format!(
                    "{} needs a key: --key-stdin, or {} in the environment when there is no \
                     terminal",
                    a.kind.name(),
                    a.kind.key_var()
                ));
            }
            set(a.kind.key_var(), &a.key);
            set(base_var, &a.base_url);
            set(model_var, &a.model);
        }
        Kind::Local => {
            if a.model.is_none() {
                return Err(
                    "a local server needs the model it runs: --model-name (for Ollama, \
                            one `ollama list` shows)"
                        .into(),
                );
            }
            set(
                "OPENAI_BASE_URL",
                &Some(a.base_url.clone().unwrap_or(LOCAL_BASE_URL.into())),
            );
            set("OPENAI_LLM", &a.model);
            set("OPENAI_API_KEY", &a.key);
        }
    }
    ProviderConfig::from_vars(&vars).map_err(|e| e.to_string())?;
    Ok(vars)
}

/// The kind and values a `.env`'s variables are set to now (`None`: it names no model).
pub fn current(vars: &BTreeMap<String, String>) -> Option<Answers> {
    let c = ProviderConfig::from_vars(vars).ok()?;
    let given = |k: &str| vars.get(k).filter(|v| !v.trim().is_empty()).cloned();
    let kind = match c.api {
        Api::AnthropicMessages => Kind::Anthropic,
        Api::ChatCompletions if c.api_key.is_none() => Kind::Local,
        Api::ChatCompletions | Api::OpenAiResponses => Kind::OpenAi,
    };
    let base_url = match kind {
        Kind::Anthropic => given("ANTHROPIC_BASE_URL"),
        Kind::OpenAi | Kind::Local => given("OPENAI_BASE_URL"),
    };
    Some(Answers {
        kind,
        base_url,
        model: Some(c.model),
        key: c.api_key,
    })
}

/// `existing` (a `.env`'s text) with the model's variables replaced by `vars`: every other
/// line kept as it was, the new ones at the end.
pub fn rewrite(existing: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    for line in existing.lines() {
        let t = line.trim_start();
        let t = t.strip_prefix("export ").map_or(t, str::trim_start);
        let name = t.split('=').next().unwrap_or("").trim();
        if t.contains('=') && MODEL_VARS.contains(&name) {
            continue;
        }
        if line.trim() == HEADING {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    if !vars.is_empty() {
        out.push_str(HEADING);
        out.push('\n');
        for (k, v) in vars {
            out.push_str(&format!("{k}={}\n", quote(v)));
        }
    }
    out
}

const HEADING: &str = "# autotool's own model (autotool setup --model)";

/// A value as the `.env` reader reads it back unchanged.
fn quote(v: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_.:/@+=~,".contains(c);
    if !v.is_empty() && v.chars().all(plain) {
        v.to_string()
    } else if !v.contains('\'') && !v.contains('\n') {
        format!("'{v}'")
    } else {
        let escaped = v
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
            .replace('\t', "\\t");
        format!("\"{escaped}\"")
    }
}

/// `autotool setup --model`.
pub fn main(args: &ModelArgs, out: &mut dyn Write) -> ExitCode {
    match run(args, out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = out.flush();
            super::fail("setup", &e)
        }
    }
}

fn run(args: &ModelArgs, out: &mut dyn Write) -> Result<(), String> {
    let io = |e: std::io::Error| format!("cannot write the output: {e}");
    let home = crate::home::Home::from_env().map_err(|e| e.to_string())?;
    let file = home.env_file();
    let existing_text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("cannot read {}: {e}", file.display())),
    };
    let existing = crate::dotenv::parse(&existing_text);
    let summary = settings::summarize(&file, Some(&existing).filter(|_| file.exists()));
    writeln!(out, "current model: {}", summary.line()).map_err(io)?;
    let terminal = std::io::stdin().is_terminal() && !args.key_stdin;
    let any_flag = args.provider.is_some() || args.base_url.is_some();
    let any_flag = any_flag || args.model_name.is_some() || args.key_stdin;
    if !terminal && !any_flag {
        writeln!(
            out,
            "no terminal and no flag: nothing changed (give --provider openai|anthropic|local, \
             --model-name, --base-url, --key-stdin)"
        )
        .map_err(io)?;
        return Ok(());
    }
    let now = current(&existing.vars);
    let answers = ask(args, now.as_ref(), terminal, out)?;
    let vars = vars_for(&answers)?;
    if !args.no_test {
        test(&vars, out)?;
    }
    let text = rewrite(&existing_text, &vars);
    let after = settings::summarize(&file, Some(&crate::dotenv::parse(&text)));
    if args.dry_run {
        writeln!(
            out,
            "dry run: would write {}: {}",
            file.display(),
            after.line()
        )
        .map_err(io)?;
        return Ok(());
    }
    home.ensure().map_err(|e| e.to_string())?;
    crate::home::write_private(&file, text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    writeln!(out, "wrote {}: {}", file.display(), after.line()).map_err(io)?;
    writeln!(
        out,
        "serve offers synthesize_tool with it (a running serve picks the file up by itself)"
    )
    .map_err(io)?;
    Ok(())
}

/// The answers: flags, else questions on a terminal (default: the value in effect), else the
/// value in effect.
fn ask(
    args: &ModelArgs,
    now: Option<&Answers>,
    terminal: bool,
    out: &mut dyn Write,
) -> Result<Answers, String> {
    let kind = match args.provider.as_deref() {
        Some(p) => Kind::parse(p).ok_or_else(|| {
            format!("--provider {p}: use openai, anthropic or local (Ollama, LM Studio, vLLM)")
        })?,
        None if terminal => {
            let default = now.map_or(Kind::OpenAi, |n| n.kind);
            let answer = question(
                out,
                "provider: openai (or OpenAI-compatible), anthropic, local",
                default.name(),
            )?;
            Kind::parse(&answer).ok_or_else(|| format!("{answer:?} is not one of them"))?
        }
        None => now.map_or(Kind::OpenAi, |n| n.kind),
    };
    // Values in effect count only for the same kind.
    let now = now.filter(|n| n.kind == kind);
    let default_model = now.and_then(|n| n.model.clone());
    let model = match &args.model_name {
        Some(m) => Some(m.clone()),
        None if terminal => {
            let fallback = match kind {
                Kind::OpenAi => crate::own_model::agent::config::DEFAULT_OPENAI_MODEL,
                Kind::Anthropic => crate::own_model::agent::config::DEFAULT_ANTHROPIC_MODEL,
                Kind::Local => "",
            };
            let default = default_model.unwrap_or_else(|| fallback.to_string());
            Some(question(out, "model", &default)?).filter(|m| !m.is_empty())
        }
        None => default_model,
    };
    let base_url = match &args.base_url {
        Some(b) => Some(b.clone()),
        None if terminal && kind == Kind::Local => {
            let default = now
                .and_then(|n| n.base_url.clone())
                .unwrap_or(LOCAL_BASE_URL.into());
            Some(question(out, "API root", &default)?)
        }
        None => now.and_then(|n| n.base_url.clone()),
    };
    let kept = now.and_then(|n| n.key.clone());
    let key = if args.key_stdin {
        Some(read_stdin()?)
    } else if terminal {
        let keep = kept.as_deref().map(settings::mask);
        let prompt = match (&keep, kind) {
            (Some(k), _) => format!("{} (not shown; Enter keeps {k}): ", kind.key_var()),
            (None, Kind::Local) => format!("{} (not shown; Enter for none): ", kind.key_var()),
            (None, _) => format!("{} (not shown): ", kind.key_var()),
        };
        let typed = rpassword::prompt_password(prompt).map_err(|e| e.to_string())?;
        Some(typed.trim().to_string())
            .filter(|k| !k.is_empty())
            .or(kept)
    } else {
        std::env::var(kind.key_var())
            .ok()
            .filter(|k| !k.trim().is_empty())
            .or(kept)
    };
    Ok(Answers {
        kind,
        base_url,
        model,
        key,
    })
}

fn question(out: &mut dyn Write, what: &str, default: &str) -> Result<String, String> {
    write!(out, "{what} [{default}]: ").map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    let line = line.trim();
    Ok(if line.is_empty() { default } else { line }.to_string())
}

/// The key: all of stdin (bounded), less surrounding blanks.
fn read_stdin() -> Result<String, String> {
    let mut key = String::new();
    std::io::stdin()
        .lock()
        .take(16 << 10)
        .read_to_string(&mut key)
        .map_err(|e| format!("cannot read the key from stdin: {e}"))?;
    let key = key.trim().to_string();
    if key.is_empty() {
        return Err("--key-stdin: stdin was empty".into());
    }
    Ok(key)
}

/// One short request to the model; its error, if any, is the command's.
fn test(vars: &BTreeMap<String, String>, out: &mut dyn Write) -> Result<(), String> {
    let mut config = ProviderConfig::from_vars(vars).map_err(|e| e.to_string())?;
    config.timeout = config.timeout.min(TEST_TIMEOUT);
    config.retry.max_retries = 1;
    let described = format!(
        "{} {} at {}",
        config.api.name(),
        config.model,
        config.base_url
    );
    let provider = config.build().map_err(|e| e.to_string())?;
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    let history = [Item::User("Reply with the single word: ok".into())];
    let turn = tokio.block_on(provider.complete("You are a connection test.", &history, &[]));
    match turn {
        Ok(_) => writeln!(
            out,
            "test request: {described} answered in {} ms",
            started.elapsed().as_millis()
        )
        .map_err(|e| e.to_string()),
        Err(e) => Err(format!(
            "the test request to {described} failed, so nothing was written: {e} \
             (--no-test writes it all the same)"
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn answers(kind: Kind, base: Option<&str>, model: Option<&str>, key: Option<&str>) -> Answers {
        Answers {
            kind,
            base_url: base.map(Into::into),
            model: model.map(Into::into),
            key: key.map(Into::into),
        }
    }

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn each_kind_becomes_its_variables() {
        assert_eq!(
            vars_for(&answers(Kind::OpenAi, None, Some("gpt-x"), Some("sk-1"))).unwrap(),
            vars(&[("OPENAI_API_KEY", "sk-1"), ("OPENAI_LLM", "gpt-x")])
        );
        assert_eq!(
            vars_for(&answers(Kind::Anthropic, None, None, Some("sk-ant"))).unwrap(),
            vars(&[("ANTHROPIC_API_KEY", "sk-ant")])
        );
        assert_eq!(
            vars_for(&answers(Kind::Local, None, Some("qwen3:8b"), None)).unwrap(),
            vars(&[
                ("OPENAI_BASE_URL", LOCAL_BASE_URL),
                ("OPENAI_LLM", "qwen3:8b")
            ])
        );
        // What is missing is named, with the flag that gives it.
        let e = vars_for(&answers(Kind::OpenAi, None, None, None)).unwrap_err();
        assert!(
            e.contains("--key-stdin") && e.contains("OPENAI_API_KEY"),
            "{e}"
        );
        let e = vars_for(&answers(Kind::Local, None, None, None)).unwrap_err();
        assert!(e.contains("--model-name"), "{e}");
        let e = vars_for(&answers(Kind::Local, Some("ftp://x"), Some("m"), None)).unwrap_err();
        assert!(e.contains("not an http(s) URL"), "{e}");
    }

    #[test]
    fn current_values_are_read_back_as_answers() {
        for a in [
            answers(Kind::OpenAi, None, Some("gpt-x"), Some("sk-1")),
            answers(
                Kind::Anthropic,
                Some("http://127.0.0.1:9"),
                Some("c"),
                Some("k"),
            ),
            answers(Kind::Local, Some("http://127.0.0.1:9/v1"), Some("m"), None),
        ] {
            assert_eq!(current(&vars_for(&a).unwrap()), Some(a.clone()), "{a:?}");
        }
        assert_eq!(current(&vars(&[("X_API_KEY", "k")])), None);
    }

    #[test]
    fn rewriting_keeps_other_lines_and_replaces_the_model() {
        let existing = "# tools\nTAVILY_API_KEY=tv\nexport OPENAI_API_KEY=old\nOPENAI_LLM=old\n\
                        AUTOTOOL_PROVIDER=chat\n";
        let new = vars(&[
            ("ANTHROPIC_API_KEY", "sk-ant 'odd\" \\ value"),
            ("ANTHROPIC_MODEL", "claude-x"),
        ]);
        let text = rewrite(existing, &new);
        let mut want = vars(&[("TAVILY_API_KEY", "tv")]);
        want.extend(new.clone());
        let parsed = crate::dotenv::parse(&text);
        assert_eq!(parsed.vars, want, "{text}");
        assert!(parsed.skipped.is_empty(), "{text}");
        assert!(text.starts_with("# tools\nTAVILY_API_KEY=tv\n"), "{text}");
        // Run again: the same text, one heading.
        assert_eq!(rewrite(&text, &new), text);
        for v in ["plain-1.2:3/x", "with space", "it's", "tab\there\nline"] {
            let line = format!("K={}\n", quote(v));
            assert_eq!(crate::dotenv::parse(&line).vars["K"], v, "{line}");
        }
    }

    #[test]
    fn debug_masks_the_key() {
        let a = answers(Kind::OpenAi, None, None, Some("sk-proj-0123456789abcdef"));
        assert!(!format!("{a:?}").contains("0123456789"));
    }
}
