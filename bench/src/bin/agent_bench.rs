//! `agent-bench`: N trials of an agent creating and using a credentialed tool through
//! `autotool serve`, end to end: the credentials flow as a host lives it.
//!
//! Each trial has a fresh `$AUTOTOOL_HOME`, a fresh Hacker-News-like API on loopback that wants
//! `Authorization: Bearer <key>` (`autotool::cmd::demo::fakes::fake_api`), the key in serve's
//! environment as `HN_API_KEY` and the API's root as `HN_API_BASE`, and an agent
//! (`autotool::own_model::agent::run_agent_with`) given a task that needs a tool for that API. Consent
//! questions are answered yes, and counted. A trial succeeds when the answer names the top three
//! stories.
//!
//! The model is the scripted one of `autotool demo` (`autotool::cmd::demo::fakes::scripted_model`,
//! Chat Completions on loopback: it writes a broken tool, repairs it from the failure, calls
//! it) unless `--provider-env FILE` names a real one, in the variables of a
//! `$AUTOTOOL_HOME/.env` (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, or `OPENAI_BASE_URL` +
//! `OPENAI_LLM`; see docs/providers.md).
//!
//! It prints each trial and then the success rate, consent prompts per trial and time per trial
//! (median and p90). It exits 1 when a trial with the scripted model failed (that is a
//! regression, not a measurement), 2 when nothing could be set up; a real model's failures are
//! reported, not fatal. A test in this file runs one trial against the scripted model, so
//! `cargo test --workspace` (CI) keeps the bench from rotting.

use anyhow::{Context, Result, anyhow, bail};
use autotool::client::ConnectOptions;
use autotool::cmd::demo::fakes::{STORIES, fake_api, scripted_model};
use autotool::own_model::agent::{
    AgentOptions, Provider, Step, provider_from_vars, run_agent_with,
};
use clap::Parser;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Default location of the Python runtime the tests and the benches use.
const DEFAULT_RUNTIME: &str = "/opt/autotool-test-runtime";
/// The key the fake API wants; `[REDACTED:HN_API_KEY]` wherever it would reach the model.
const API_KEY: &str = "hn-bench-key-7f3a9c0d21";
/// How many top stories the task asks for.
const TOP: usize = 3;

/// What the agent is asked, worded for a real model as much as for the scripted one.
fn task() -> String {
    format!(
        "What are the titles of the top {TOP} stories right now on the Hacker-News-like API \
         whose root URL is in the environment variable HN_API_BASE? Its endpoints: GET \
         /v0/topstories.json (a JSON list of story ids, best first) and GET /v0/item/<id>.json \
         (a story: id, title, score). Every request needs the header `Authorization: Bearer \
         <key>` with the key HN_API_KEY (declare it in REQUIRED_ENV). Create a tool for this \
         API, call it, and answer with the {TOP} titles."
    )
}

#[derive(Debug, Parser)]
#[command(
    name = "agent-bench",
    about = "N trials of an agent creating and using a credentialed tool through autotool serve: \
             success rate, consent prompts and time per trial",
    after_help = "Build first: cargo build --release -p autotool -p autotool-launcher -p autotool-bench\n\
                  Then: ./target/release/agent-bench [--provider-env ~/.autotool/.env]"
)]
struct Args {
    /// Trials to run.
    #[arg(long, default_value_t = 5)]
    trials: usize,
    /// Two trials (CI).
    #[arg(long)]
    quick: bool,
    /// A `.env`-style file naming a real model (OPENAI_API_KEY, ANTHROPIC_API_KEY, or
    /// OPENAI_BASE_URL + OPENAI_LLM) [default: the scripted model of `autotool demo`]
    #[arg(long)]
    provider_env: Option<PathBuf>,
    /// The Python runtime (a venv with `mcp`, `httpx2` and `ruff`) [default: $AUTOTOOL_TEST_RUNTIME or /opt/autotool-test-runtime]
    #[arg(long)]
    runtime: Option<PathBuf>,
    /// The `autotool` binary [default: next to this binary]
    #[arg(long)]
    autotool: Option<PathBuf>,
    /// serve's `--sandbox`: strict, or off where the machine cannot confine.
    #[arg(long, default_value = "strict")]
    sandbox: String,
    /// Model turns a trial may take.
    #[arg(long, default_value_t = 24)]
    max_turns: usize,
    /// Seconds a trial may take in all.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    /// Print every step of the agent.
    #[arg(long)]
    verbose: bool,
}

/// What every trial shares.
#[derive(Debug, Clone)]
struct Setup {
    autotool: PathBuf,
    runtime: PathBuf,
    sandbox: String,
    max_turns: usize,
    timeout: Duration,
    verbose: bool,
}

/// One trial's measurements.
#[derive(Debug, Clone)]
struct Trial {
    ok: bool,
    consent_prompts: usize,
    tool_calls: usize,
    elapsed: Duration,
    /// The answer, or why there was none.
    outcome: String,
}

fn main() -> ExitCode {
    match real_main() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("agent-bench: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// `autotool` beside this binary (`target/<profile>/`), or beside its directory (a test binary
/// in `target/<profile>/deps/`).
fn default_autotool() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locate this binary")?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let candidates = [dir.join("autotool"), dir.join("../autotool")];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| {
            anyhow!(
                "autotool not found (looked at {candidates:?}): build it with `cargo build -p \
                 autotool -p autotool-launcher`, or pass --autotool PATH"
            )
        })
}

fn default_runtime() -> PathBuf {
    std::env::var_os("AUTOTOOL_TEST_RUNTIME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_RUNTIME))
}

/// Returns whether the run passed: every trial ran, and with the scripted model every one
/// succeeded.
fn real_main() -> Result<bool> {
    let args = Args::parse();
    let trials = if args.quick { 2 } else { args.trials.max(1) };
    let setup = Setup {
        autotool: match &args.autotool {
            Some(p) => p.clone(),
            None => default_autotool()?,
        },
        runtime: args.runtime.clone().unwrap_or_else(default_runtime),
        sandbox: args.sandbox.clone(),
        max_turns: args.max_turns,
        timeout: Duration::from_secs(args.timeout.max(1)),
        verbose: args.verbose,
    };
    autotool::tool::runtime::open_runtime(&setup.runtime)
        .with_context(|| format!("the Python runtime at {}", setup.runtime.display()))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("start the async runtime")?;
    rt.block_on(async {
        let stop = CancellationToken::new();
        let (provider, scripted) = model(args.provider_env.as_deref(), stop.clone()).await?;
        println!(
            "agent-bench: {trials} trials, model {}{}, sandbox {}",
            provider.describe(),
            if scripted { " (scripted)" } else { "" },
            setup.sandbox
        );
        println!("  autotool {}", setup.autotool.display());
        println!("  runtime  {}", setup.runtime.display());
        let mut results = Vec::new();
        for n in 1..=trials {
            let t = trial(&setup, provider.as_ref()).await?;
            println!(
                "trial {n}: {:4}  consent prompts {}  tool calls {:2}  {:6.1} s  {}",
                if t.ok { "ok" } else { "FAIL" },
                t.consent_prompts,
                t.tool_calls,
                t.elapsed.as_secs_f64(),
                one_line(&t.outcome, 100)
            );
            results.push(t);
        }
        stop.cancel();
        println!();
        println!("{}", report(&results));
        Ok(!scripted || results.iter().all(|t| t.ok))
    })
}

/// The provider: from `--provider-env`, or the scripted model served here until `stop`.
/// Returns it and whether it is the scripted one.
async fn model(
    provider_env: Option<&Path>,
    stop: CancellationToken,
) -> Result<(Box<dyn Provider>, bool)> {
    if let Some(path) = provider_env {
        let env = autotool::dotenv::read(path)?
            .ok_or_else(|| anyhow!("--provider-env {}: no such file", path.display()))?;
        for skipped in &env.skipped {
            eprintln!("agent-bench: {}: {skipped}", path.display());
        }
        let provider = provider_from_vars(&env.vars)
            .map_err(|e| anyhow!("--provider-env {}: {e}", path.display()))?;
        return Ok((provider, false));
    }
    let at = scripted_model(stop)
        .await
        .context("start the scripted model on loopback")?;
    let vars = BTreeMap::from([
        ("OPENAI_BASE_URL".to_string(), format!("http://{at}/v1")),
        ("OPENAI_LLM".to_string(), "scripted".to_string()),
    ]);
    Ok((provider_from_vars(&vars)?, true))
}

/// One trial: a fresh home and API, the agent run to its answer (or the time bound).
async fn trial(setup: &Setup, provider: &dyn Provider) -> Result<Trial> {
    let home = tempfile::Builder::new()
        .prefix("agent-bench-")
        .tempdir()
        .context("create a temporary home")?;
    let stop = CancellationToken::new();
    let api = fake_api(API_KEY.to_string(), stop.clone())
        .await
        .context("start the fake API on loopback")?;
    let prompts = Arc::new(AtomicUsize::new(0));
    let counted = prompts.clone();
    let options = AgentOptions {
        max_turns: setup.max_turns,
        connect: ConnectOptions {
            binary: Some(setup.autotool.clone()),
            args: vec!["serve".into(), "--sandbox".into(), setup.sandbox.clone()],
            env: vec![
                ("AUTOTOOL_HOME".into(), home.path().display().to_string()),
                (
                    "AUTOTOOL_RUNTIME".into(),
                    setup.runtime.display().to_string(),
                ),
                ("HN_API_KEY".into(), API_KEY.into()),
                ("HN_API_BASE".into(), format!("http://{api}")),
            ],
            on_consent: Some(Arc::new(move |_question: &str| {
                counted.fetch_add(1, Ordering::Relaxed);
                true
            })),
            quiet: true,
        },
        ..AgentOptions::default()
    };
    let mut tool_calls = 0;
    let verbose = setup.verbose;
    let task = task();
    let started = Instant::now();
    let run = run_agent_with(&task, provider, options, |step| {
        if let Step::Call { .. } = step {
            tool_calls += 1;
        }
        if verbose {
            println!("    {}", one_line(&format!("{step:?}"), 160));
        }
    });
    let outcome = tokio::time::timeout(setup.timeout, run).await;
    let elapsed = started.elapsed();
    stop.cancel();
    let (ok, outcome) = match outcome {
        Ok(Ok(answer)) => (answered(&answer), answer),
        Ok(Err(e)) => (false, format!("no answer: {e:#}")),
        Err(_) => (
            false,
            format!("no answer within {} s", setup.timeout.as_secs()),
        ),
    };
    if outcome.contains(API_KEY) {
        bail!("the key reached the model's answer: redaction failed");
    }
    Ok(Trial {
        ok,
        consent_prompts: prompts.load(Ordering::Relaxed),
        tool_calls,
        elapsed,
        outcome,
    })
}

/// Whether the answer names the top stories.
fn answered(answer: &str) -> bool {
    STORIES
        .iter()
        .take(TOP)
        .all(|(_, title, _)| answer.contains(title))
}

/// `text` on one line, at most `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        format!("{}…", flat.chars().take(max).collect::<String>())
    }
}

/// The value at or below which `p` of a sorted sample falls (nearest rank).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The closing lines: success rate, consent prompts and time per trial.
fn report(trials: &[Trial]) -> String {
    let n = trials.len();
    let ok = trials.iter().filter(|t| t.ok).count();
    let prompts: Vec<usize> = trials.iter().map(|t| t.consent_prompts).collect();
    let mut secs: Vec<f64> = trials.iter().map(|t| t.elapsed.as_secs_f64()).collect();
    secs.sort_by(f64::total_cmp);
    let median = if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        secs[n / 2]
    } else {
        (secs[n / 2 - 1] + secs[n / 2]) / 2.0
    };
    format!(
        "success rate: {ok}/{n} ({:.0}%)\n\
         consent prompts per trial: mean {:.1}, min {}, max {}\n\
         time per trial: median {median:.1} s, p90 {:.1} s (min {:.1} s, max {:.1} s)",
        100.0 * ok as f64 / n.max(1) as f64,
        prompts.iter().sum::<usize>() as f64 / n.max(1) as f64,
        prompts.iter().min().copied().unwrap_or(0),
        prompts.iter().max().copied().unwrap_or(0),
        percentile(&secs, 0.9),
        secs.first().copied().unwrap_or(f64::NAN),
        secs.last().copied().unwrap_or(f64::NAN),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_report() {
        let t = |ok, prompts, secs| Trial {
            ok,
            consent_prompts: prompts,
            tool_calls: 5,
            elapsed: Duration::from_secs_f64(secs),
            outcome: String::new(),
        };
        let trials = [
            t(true, 2, 3.0),
            t(true, 2, 1.0),
            t(false, 1, 10.0),
            t(true, 3, 2.0),
        ];
        assert_eq!(
            report(&trials),
            "success rate: 3/4 (75%)\n\
             consent prompts per trial: mean 2.0, min 1, max 3\n\
             time per trial: median 2.5 s, p90 10.0 s (min 1.0 s, max 10.0 s)"
        );
        assert_eq!(
            percentile(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], 0.9),
            9.0
        );
    }

    #[test]
    fn success_means_every_top_title() {
        let all: Vec<&str> = STORIES.iter().take(TOP).map(|s| s.1).collect();
        assert!(answered(&all.join("\n")));
        assert!(!answered(all[0]));
    }

    /// The CI hook: one trial against the scripted model, bounded in time, through the real
    /// `autotool serve` (confined where the machine can), so the bench cannot rot.
    #[test]
    fn one_trial_against_the_scripted_model() {
        let autotool = default_autotool().unwrap();
        let launcher = autotool.with_file_name("autotool-launcher");
        let sandbox = match autotool::tool::launcher::probe(&launcher).map(|p| p.missing()) {
            Ok(missing) if missing.is_empty() => "strict",
            other => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "this machine cannot confine in CI: {other:?}"
                );
                eprintln!("note: running unconfined: {other:?}");
                "off"
            }
        };
        let setup = Setup {
            autotool,
            runtime: default_runtime(),
            sandbox: sandbox.into(),
            max_turns: 12,
            timeout: Duration::from_secs(120),
            verbose: false,
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let trial = rt.block_on(async {
            let stop = CancellationToken::new();
            let (provider, scripted) = model(None, stop.clone()).await.unwrap();
            assert!(scripted);
            let t = trial(&setup, provider.as_ref()).await.unwrap();
            stop.cancel();
            t
        });
        assert!(trial.ok, "{trial:?}");
        // The tool declares HN_API_KEY: its first version and its repair are each asked about
        // (a key without an allowlist is asked again for every new version).
        assert_eq!(trial.consent_prompts, 2, "{trial:?}");
        assert_eq!(trial.tool_calls, 5, "{trial:?}");
        println!("{}", report(&[trial]));
    }
}
