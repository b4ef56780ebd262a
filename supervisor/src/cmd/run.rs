//! `autotool run "<task>"`: the demo agent on the user's own model. The model comes from
//! `./.env` (or the file `--env-file` names; `--model` replaces the model it names); tools land in `./tools` (the ledger in `./autotool.db`); there are no consent
//! prompts and no allowlists. It prints its steps as it goes: each tool written, each
//! verification result, each call and its result, and the answer.
//!
//! The choices, made by [`plan`] (a pure function, tested whole):
//! - `AUTOTOOL_HOME` is the current directory unless `AUTOTOOL_HOME` is set;
//! - `AUTOTOOL_RUNTIME` is the user's default runtime (`~/.autotool/runtime`, or
//!   `$AUTOTOOL_HOME/runtime` when that is set), created there with progress if missing, unless
//!   `AUTOTOOL_RUNTIME` is set, so each project does not build its own;
//! - `autotool serve` runs with `--dangerously-allow-all-tools` (declared keys are granted
//!   without asking; the sandbox still confines every tool) and gets the `.env`'s other
//!   variables (tool keys, `*_API_BASE`) in its environment; the model's own variables stay
//!   out of it, so no tool can ask for the model's key;
//! - `synthesize_tool` is not offered (`AUTOTOOL_SYNTHESIZE=off`): this agent writes its own
//!   tools, with the same model.

use crate::client::ConnectOptions;
use crate::home::Home;
use crate::own_model::agent::{AgentOptions, Provider, Step, run_agent_with};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The variables that choose autotool's own model (see `agent::ProviderConfig::from_vars`);
/// they are not passed on to `serve`.
pub const MODEL_VARS: &[&str] = &[
    "AUTOTOOL_PROVIDER",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_LLM",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
    "AUTOTOOL_LLM_TIMEOUT",
];

/// Model turns the agent may take.
pub const MAX_TURNS: usize = 24;
/// Bytes of a call's arguments or result shown in a step line.
const SHOWN_BYTES: usize = 400;
/// Lines of a call's result shown.
const SHOWN_LINES: usize = 6;

const HOW_TO: &str = "Put one of these in it:\n  \
     OPENAI_API_KEY=sk-...                        OpenAI (model gpt-6-sol; OPENAI_LLM picks another)\n  \
     ANTHROPIC_API_KEY=sk-ant-...                 Anthropic (model claude-opus-5; ANTHROPIC_MODEL picks another)\n  \
     OPENAI_BASE_URL=http://localhost:11434/v1    an OpenAI-compatible server (Ollama, LM Studio, vLLM),\n  \
     OPENAI_LLM=qwen3:8b                          with the model it runs\n\
     Keys for the tools (and *_API_BASE overrides) can go in the same file. Keys in your shell's \
     environment are never used for the model.";

/// Why `autotool run` cannot start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("autotool run reads its model from {path}, which does not exist. {HOW_TO}")]
    NoEnv { path: String },
    #[error("{path} names no model. {HOW_TO}")]
    NoModel { path: String },
    #[error("{path}: {source}")]
    Model {
        path: String,
        #[source]
        source: crate::own_model::agent::ProviderError,
    },
    #[error(transparent)]
    Read(#[from] crate::dotenv::DotEnvError),
    #[error("neither AUTOTOOL_HOME nor the current directory can be used: {0}")]
    Home(String),
}

/// Where the tool runtime comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runtime {
    /// `AUTOTOOL_RUNTIME` was set: used as it is.
    Given(PathBuf),
    /// The user's default runtime: created here (with progress) if missing, then given to serve.
    Default(PathBuf),
}

/// What the command line chose.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// The `.env` the model comes from, relative to the current directory (`None`: `./.env`).
    pub env_file: Option<PathBuf>,
    /// The model to use in place of the one the file names (`OPENAI_LLM`, `ANTHROPIC_MODEL`).
    pub model: Option<String>,
}

impl RunOptions {
    /// The `.env` file read, from the current directory `cwd`.
    pub fn env_path(&self, cwd: &Path) -> PathBuf {
        cwd.join(self.env_file.as_deref().unwrap_or(Path::new(".env")))
    }
}

/// Everything `autotool run` decided before starting.
#[derive(Clone, PartialEq, Eq)]
pub struct Plan {
    /// `AUTOTOOL_HOME` for serve: where tools and the ledger go.
    pub home: PathBuf,
    pub runtime: Runtime,
    /// The variables the model is built from (the `.env`'s).
    pub model: BTreeMap<String, String>,
    /// serve's arguments.
    pub serve_args: Vec<String>,
    /// What serve's environment gets on top of this process's.
    pub serve_env: Vec<(String, String)>,
}

impl std::fmt::Debug for Plan {
    /// Names only for the variables: their values may be keys.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("home", &self.home)
            .field("runtime", &self.runtime)
            .field("model", &self.model.keys().collect::<Vec<_>>())
            .field("serve_args", &self.serve_args)
            .field(
                "serve_env",
                &self.serve_env.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Decide, from the current directory, the options, the `.env` they name (`None`: no file)
/// and the process's `AUTOTOOL_HOME`, `AUTOTOOL_RUNTIME` and `HOME`.
pub fn plan(
    cwd: &Path,
    options: &RunOptions,
    dotenv: Option<crate::dotenv::DotEnv>,
    vars: &BTreeMap<String, String>,
) -> Result<Plan, RunError> {
    let env_path = options.env_path(cwd).display().to_string();
    let mut dotenv = dotenv.ok_or_else(|| RunError::NoEnv {
        path: env_path.clone(),
    })?;
    if dotenv.is_empty() || !crate::own_model::settings::names_a_model(&dotenv.vars) {
        return Err(RunError::NoModel { path: env_path });
    }
    if let Some(model) = options.model.as_deref().filter(|m| !m.trim().is_empty()) {
        // Whichever API the file picks reads its own one of the two.
        for var in ["OPENAI_LLM", "ANTHROPIC_MODEL"] {
            dotenv.vars.insert(var.to_string(), model.to_string());
        }
    }
    let set = |name: &str| vars.get(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let home = set("AUTOTOOL_HOME").unwrap_or_else(|| cwd.to_path_buf());
    let runtime = match set("AUTOTOOL_RUNTIME") {
        Some(given) => Runtime::Given(given),
        None => Runtime::Default(
            Home::from_vars(set("AUTOTOOL_HOME"), set("HOME"))
                .map_err(|e| RunError::Home(e.to_string()))?
                .runtime_dir(),
        ),
    };
    let runtime_dir = match &runtime {
        Runtime::Given(p) | Runtime::Default(p) => p.clone(),
    };
    let mut serve_env = vec![
        ("AUTOTOOL_HOME".to_string(), home.display().to_string()),
        (
            "AUTOTOOL_RUNTIME".to_string(),
            runtime_dir.display().to_string(),
        ),
        (
            crate::library::settings::SWITCH_VAR.to_string(),
            "off".to_string(),
        ),
    ];
    if !vars.contains_key("AUTOTOOL_LOG") {
        // serve's info lines would bury the steps; warnings (and start-up failures) still show.
        serve_env.push(("AUTOTOOL_LOG".to_string(), "warn".to_string()));
    }
    serve_env.extend(
        dotenv
            .vars
            .iter()
            .filter(|(k, _)| !MODEL_VARS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    Ok(Plan {
        home,
        runtime,
        model: dotenv.vars,
        serve_args: vec!["serve".into(), "--dangerously-allow-all-tools".into()],
        serve_env,
    })
}

/// `autotool run`: the exit code, errors on stderr, steps on `out`.
pub fn main(task: &str, options: &RunOptions, out: &mut dyn Write) -> ExitCode {
    match run(task, options, out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = out.flush();
            crate::terminal::eprint_line(&format!("autotool run: {e:#}"));
            ExitCode::FAILURE
        }
    }
}

fn run(task: &str, options: &RunOptions, out: &mut dyn Write) -> anyhow::Result<()> {
    let cwd = std::env::current_dir()?;
    let env_path = options.env_path(&cwd);
    let dotenv = crate::dotenv::read(&env_path)?;
    if let Some(env) = &dotenv {
        for skipped in &env.skipped {
            eprintln!("autotool run: {skipped}");
        }
    }
    let vars: BTreeMap<String, String> =
        ["AUTOTOOL_HOME", "AUTOTOOL_RUNTIME", "AUTOTOOL_LOG", "HOME"]
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
            .collect();
    let plan = plan(&cwd, options, dotenv, &vars)?;
    let provider = crate::own_model::agent::provider_from_vars(&plan.model).map_err(|source| {
        RunError::Model {
            path: env_path.display().to_string(),
            source,
        }
    })?;
    if let Runtime::Default(dir) = &plan.runtime {
        if let Some(root) = dir.parent() {
            Home::at(root).ensure()?;
        }
        let mut progress = std::io::stderr();
        crate::tool::runtime::ensure_venv(
            dir,
            &crate::tool::runtime::RUNTIME_REQUIREMENTS,
            &mut progress,
        )?;
    }
    writeln!(
        out,
        "autotool run: model {}; tools in {}",
        provider.describe(),
        plan.home.join("tools").display()
    )?;
    out.flush()?;
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    tokio.block_on(agent(task, provider.as_ref(), &plan, out))
}

async fn agent(
    task: &str,
    provider: &dyn Provider,
    plan: &Plan,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let options = AgentOptions {
        max_turns: MAX_TURNS,
        connect: ConnectOptions {
            args: plan.serve_args.clone(),
            env: plan.serve_env.clone(),
            ..ConnectOptions::default()
        },
        ..AgentOptions::default()
    };
    let mut steps = Steps::default();
    run_agent_with(task, provider, options, |step| {
        for line in steps.lines(step) {
            let _ = writeln!(out, "{line}");
        }
        let _ = out.flush();
    })
    .await?;
    Ok(())
}

/// Turns the agent's steps into the lines `autotool run` prints. Remembers the tool a
/// `create_tool` call was writing, to name it in the verification result.
#[derive(Debug, Default)]
pub struct Steps {
    writing: Option<String>,
}

impl Steps {
    /// The lines for one step.
    pub fn lines(&mut self, step: &Step) -> Vec<String> {
        match step {
            Step::Thought(text) => vec![format!("[thought] {}", shorten(text.trim()))],
            Step::Call { name, arguments } if name == "create_tool" => {
                let tool = arguments["name"].as_str().unwrap_or("?").to_string();
                let lines = arguments["code"].as_str().map_or(0, |c| c.lines().count());
                self.writing = Some(tool.clone());
                vec![format!("[tool] writing {tool} ({lines} lines of Python)")]
            }
            Step::Call { name, arguments } => {
                vec![format!("[call] {name} {}", shorten(&arguments.to_string()))]
            }
            Step::Result { name, text, .. } if name == "create_tool" => {
                let tool = self.writing.take().unwrap_or_else(|| "?".into());
                verification_lines(&tool, text)
            }
            Step::Result { text, is_error, .. } => {
                let tag = if *is_error { "[error]" } else { "[result]" };
                vec![format!("{tag} {}", shorten(text.trim()))]
            }
            Step::Answer(text) => vec![format!("[answer] {}", text.trim())],
        }
    }
}

/// A `create_tool` result as lines: the version and functions mounted (and key notes), or the
/// failing stage with the end of its log, where a traceback says what went wrong.
fn verification_lines(tool: &str, text: &str) -> Vec<String> {
    let summary = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v.get("tool").is_some() && v.get("version").is_some());
    if let Some(s) = summary {
        let functions: Vec<&str> = s["functions"]
            .as_array()
            .map(|f| f.iter().filter_map(|f| f["name"].as_str()).collect())
            .unwrap_or_default();
        let mut lines = vec![format!(
            "[verify] {} v{} passed: mounted {}",
            s["tool"].as_str().unwrap_or(tool),
            s["version"],
            functions.join(", ")
        )];
        if let Some(granted) = s["keys_granted"].as_array().filter(|g| !g.is_empty()) {
            let names: Vec<&str> = granted.iter().filter_map(Value::as_str).collect();
            lines.push(format!("[keys] granted {}", names.join(", ")));
        }
        for note in s["key_notes"].as_array().into_iter().flatten() {
            lines.push(format!("[keys] {}", note.as_str().unwrap_or_default()));
        }
        return lines;
    }
    let mut all = text.lines();
    let first = all.next().unwrap_or_default().trim();
    let first = first.strip_prefix("verification ").unwrap_or(first);
    let mut lines = vec![format!("[verify] {tool} {}", shorten(first))];
    if let Some((_, log)) = text.split_once("\n--- ") {
        let log: Vec<&str> = log
            .lines()
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .collect();
        for line in &log[log.len().saturating_sub(3)..] {
            lines.push(format!("    {}", shorten(line.trim_end())));
        }
    }
    lines
}

/// At most [`SHOWN_LINES`] lines and [`SHOWN_BYTES`] bytes of `text`, saying how much was left,
/// its later lines indented under the step's tag.
fn shorten(text: &str) -> String {
    let mut end = text.len().min(SHOWN_BYTES);
    if let Some((i, _)) = text.match_indices('\n').nth(SHOWN_LINES - 1) {
        end = end.min(i);
    }
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let shown = text[..end].replace('\n', "\n    ");
    if end == text.len() {
        shown
    } else {
        format!("{shown} … ({} more bytes)", text.len() - end)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_whole_plan() {
        let env = crate::dotenv::parse(
            "OPENAI_API_KEY=sk-model-key\nOPENAI_LLM=gpt-6-sol\nHN_API_KEY=hn-key\n\
             HN_API_BASE=http://127.0.0.1:9\n",
        );
        let got = plan(
            Path::new("/work/project"),
            &RunOptions::default(),
            Some(env),
            &vars(&[("HOME", "/home/u")]),
        )
        .unwrap();
        let s = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(
            got,
            Plan {
                home: "/work/project".into(),
                runtime: Runtime::Default("/home/u/.autotool/runtime".into()),
                model: vars(&[
                    ("HN_API_BASE", "http://127.0.0.1:9"),
                    ("HN_API_KEY", "hn-key"),
                    ("OPENAI_API_KEY", "sk-model-key"),
                    ("OPENAI_LLM", "gpt-6-sol"),
                ]),
                serve_args: vec!["serve".into(), "--dangerously-allow-all-tools".into()],
                serve_env: vec![
                    s("AUTOTOOL_HOME", "/work/project"),
                    s("AUTOTOOL_RUNTIME", "/home/u/.autotool/runtime"),
                    s("AUTOTOOL_SYNTHESIZE", "off"),
                    s("AUTOTOOL_LOG", "warn"),
                    s("HN_API_BASE", "http://127.0.0.1:9"),
                    s("HN_API_KEY", "hn-key"),
                ],
            }
        );
        assert!(!format!("{got:?}").contains("sk-model-key"));
    }

    #[test]
    fn set_variables_win() {
        let env = crate::dotenv::parse("ANTHROPIC_API_KEY=sk-ant\n");
        let got = plan(
            Path::new("/p"),
            &RunOptions::default(),
            Some(env),
            &vars(&[
                ("HOME", "/home/u"),
                ("AUTOTOOL_HOME", "/srv/autotool"),
                ("AUTOTOOL_RUNTIME", "/opt/rt"),
                ("AUTOTOOL_LOG", "debug"),
            ]),
        )
        .unwrap();
        assert_eq!(got.home, PathBuf::from("/srv/autotool"));
        assert_eq!(got.runtime, Runtime::Given("/opt/rt".into()));
        assert!(!got.serve_env.iter().any(|(k, _)| k == "AUTOTOOL_LOG"));
        let env = crate::dotenv::parse("OPENAI_API_KEY=sk-x\n");
        let got = plan(
            Path::new("/p"),
            &RunOptions::default(),
            Some(env),
            &vars(&[("AUTOTOOL_HOME", "/a")]),
        )
        .unwrap();
        // Without AUTOTOOL_RUNTIME, the runtime of the home the user set.
        assert_eq!(got.runtime, Runtime::Default("/a/runtime".into()));
    }

    #[test]
    fn no_model_names_the_variables() {
        for env in [
            None,
            Some(crate::dotenv::parse("# empty\n")),
            Some(crate::dotenv::parse("HN_API_KEY=k\n")),
        ] {
            let e = plan(
                Path::new("/p"),
                &RunOptions::default(),
                env,
                &vars(&[("HOME", "/h")]),
            )
            .unwrap_err();
            let text = e.to_string();
            for var in [
                "/p/.env",
                "OPENAI_API_KEY",
                "ANTHROPIC_API_KEY",
                "OPENAI_BASE_URL",
                "OPENAI_LLM",
            ] {
                assert!(text.contains(var), "{var}: {text}");
            }
        }
    }

    #[test]
    fn env_file_and_model_options() {
        let options = RunOptions {
            env_file: Some("conf/model.env".into()),
            model: Some("qwen3:32b".into()),
        };
        assert_eq!(
            options.env_path(Path::new("/p")),
            PathBuf::from("/p/conf/model.env")
        );
        let absolute = RunOptions {
            env_file: Some("/etc/m.env".into()),
            model: None,
        };
        assert_eq!(
            absolute.env_path(Path::new("/p")),
            PathBuf::from("/etc/m.env")
        );
        // The file's error names the file given.
        let e = plan(Path::new("/p"), &options, None, &vars(&[])).unwrap_err();
        assert!(e.to_string().contains("/p/conf/model.env"), "{e}");
        let planned = |options: &RunOptions, text: &str| {
            let env = crate::dotenv::parse(text);
            plan(
                Path::new("/p"),
                options,
                Some(env),
                &vars(&[("HOME", "/h")]),
            )
            .unwrap()
        };
        let model = |got: &Plan| {
            crate::own_model::agent::ProviderConfig::from_vars(&got.model)
                .unwrap()
                .model
        };
        // --model replaces the file's model, for either API, and stays out of serve's env.
        let got = planned(
            &options,
            "OPENAI_BASE_URL=http://127.0.0.1:9/v1\nOPENAI_LLM=small\nX_API_KEY=k\n",
        );
        assert_eq!(model(&got), "qwen3:32b");
        assert!(
            !got.serve_env
                .iter()
                .any(|(k, _)| k == "OPENAI_LLM" || k == "ANTHROPIC_MODEL")
        );
        assert_eq!(
            model(&planned(&options, "ANTHROPIC_API_KEY=sk-ant\n")),
            "qwen3:32b"
        );
        // Without --model, the file's.
        let got = planned(&absolute, "ANTHROPIC_API_KEY=sk-ant\nANTHROPIC_MODEL=m1\n");
        assert_eq!(model(&got), "m1");
    }

    #[test]
    fn steps_as_lines() {
        let mut steps = Steps::default();
        let code = "import os\nprint(1)\n";
        assert_eq!(
            steps.lines(&Step::Call {
                name: "create_tool".into(),
                arguments: json!({"name": "adder", "code": code}),
            }),
            ["[tool] writing adder (2 lines of Python)"]
        );
        let failure = "verification failed at launch: the tool exited before answering\n\
                       Fix the code.\n--- the tool's stderr (traceback included) ---\n\
                       Traceback (most recent call last):\n  File \"tool.py\", line 1\n\
                       import nope\nModuleNotFoundError: No module named 'nope'\n";
        assert_eq!(
            steps.lines(&Step::Result {
                name: "create_tool".into(),
                text: failure.into(),
                is_error: true,
            }),
            [
                "[verify] adder failed at launch: the tool exited before answering",
                "      File \"tool.py\", line 1",
                "    import nope",
                "    ModuleNotFoundError: No module named 'nope'",
            ]
        );
        steps.lines(&Step::Call {
            name: "create_tool".into(),
            arguments: json!({"name": "adder", "code": code}),
        });
        let created = format!(
            "Created adder v1: mounted adder__add. Hosts …\n{}",
            json!({"tool": "adder", "version": 1, "functions": [{"name": "adder__add"}],
                   "keys_granted": ["ADDER_API_KEY"], "key_notes": []})
        );
        assert_eq!(
            steps.lines(&Step::Result {
                name: "create_tool".into(),
                text: created,
                is_error: false,
            }),
            [
                "[verify] adder v1 passed: mounted adder__add",
                "[keys] granted ADDER_API_KEY"
            ]
        );
        assert_eq!(
            steps.lines(&Step::Call {
                name: "adder__add".into(),
                arguments: json!({"a": 2}),
            }),
            ["[call] adder__add {\"a\":2}"]
        );
        let long = "x\n".repeat(20);
        assert_eq!(
            steps.lines(&Step::Result {
                name: "adder__add".into(),
                text: long,
                is_error: false,
            }),
            ["[result] x\n    x\n    x\n    x\n    x\n    x … (28 more bytes)"]
        );
        assert_eq!(steps.lines(&Step::Answer(" 5 \n".into())), ["[answer] 5"]);
    }
}
