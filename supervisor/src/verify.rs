//! The gate every tool passes before it is mounted, however it arrives (an agent's
//! `create_tool`, synthesis, a file placed by hand, an import).
//!
//! Stages, in order, each bounded in time; the first failure ends verification:
//! 1. [`Stage::Lint`]: the runtime's `ruff` for syntax errors and undefined names ([`lint`],
//!    bounded by [`LINT_TIMEOUT`]). (The code's size is the registry's rule, checked when it is
//!    staged.)
//! 2. [`Stage::Declarations`]: `REQUIRED_ENV` read statically from the source
//!    ([`required_env`]); no tool code runs outside the launcher, not even to learn what it
//!    declares.
//!    `REQUIRED_PACKAGES` is read at the same time ([`required_packages`]); resolving and
//!    installing them is [`Stage::Packages`], done by the library before verification starts
//!    (`crate::packages`), since consent is asked about the resolved set.
//! 3. [`Stage::Launch`]: the code written to the caller's staged directory and the process
//!    started with the caller's [`ToolSpec`] (confined through `autotool-launcher`, or not).
//! 4. [`Stage::Initialize`]: the MCP `initialize` handshake, within the spec's start timeout.
//! 5. [`Stage::ListTools`]: `tools/list`: at least one function, valid names that fit with
//!    the tool's own in a mounted name and hold no key value (nor do its parameters' names),
//!    object schemas ([`check_tools`]). What it lists is redacted here, before anything keeps
//!    it (titles, descriptions, schemas with their defaults, annotations): a tool may compute
//!    them from its key at import.
//! 6. [`Stage::SmokeTest`]: the optional call the author asked for, within its timeout.
//! 7. [`Stage::Examples`]: each example the code declares in `EXAMPLES` (read statically at
//!    stage 2, like `REQUIRED_ENV`) called, and its answer compared with what it expects.
//! 8. [`Stage::Relations`]: each relation the code declares in `RELATIONS` (read at stage 2),
//!    generated into pairs of calls from the examples' inputs ([`relations`]): the input and
//!    the input transformed must be answered alike.
//! 9. [`Stage::Robustness`]: edge-case calls derived from each function's input schema
//!    ([`probes`]); a function that crashes on one, or hangs, fails; then the [`verdicts`] no
//!    author writes: a function answering one constant to distinct inputs fails
//!    (`non_degenerate`), and one answering the same arguments differently fails
//!    (`deterministic`) unless it declares so in `NONDETERMINISTIC` or holds keys or reached
//!    the network (then the difference is recorded). Whether stages 7 to 9 make calls is
//!    [`Thoroughness::skips`]: by default only for tools that declare no keys, so no API quota
//!    is spent by surprise.
//! 10. [`Stage::Adversarial`]: hostile inputs autotool's own model writes for each function,
//!     checked against its schema and made like the probes ([`adversary`]); a leak of a key or
//!     of the environment, or a host the egress proxy refused, fails; a crash or a shape other
//!     than declared is recorded as a warning. Without a model (or with `verify: "quick"`) it
//!     is skipped, and its verdict says so.
//! 11. [`Stage::Baseline`]: what trusted versions of the tool did, owed by this one
//!     ([`baseline`]): their smoke tests, examples and relations called again, their verdicts
//!     held.
//!
//! Which keys the tool receives is the caller's decision (the spec's environment); [`verify`]
//! only reports what the code declares. A caller that must ask for consent before anything runs
//! calls [`check_source`] (stages 1–2) first. Every log a [`VerifyFailure`] carries (ruff's
//! report, the tool's stderr) is redacted with the request's redactor *before* it is cut to
//! size, so a key value straddling the cut cannot leave a piece behind; the message is redacted
//! again where it is rendered for the host.
//!
//! Layout: [`declarations`] reads `REQUIRED_ENV`, `EXAMPLES`, `NONDETERMINISTIC` and `USES`
//! (whether what `USES` names may be called is the library's check, `crate::library::uses`);
//! [`relations`] reads `RELATIONS` and makes its pairs;
//! [`lint`](mod@lint) runs ruff; [`probes`] plans and makes the robustness calls; [`verdicts`]
//! judges answers; `judge` makes the calls verdicts are judged from; [`rank`] orders verified
//! candidates for one need by their verdicts, safety first.

pub mod adversary;
pub mod baseline;
pub mod declarations;
mod failure;
mod functions;
mod judge;
pub mod lint;
pub mod probes;
pub mod rank;
pub mod relations;
pub mod verdicts;

use failure::{SCRUB, cap_head, cap_tail, split};
pub use failure::{Stage, VerifyFailure, tail_of, traceback_summary};
pub use functions::check_tools;
use functions::smoke;

pub use baseline::Obligation;
pub use declarations::{EXPECTED_FORM, Example, required_env, required_packages};
pub use lint::{LINT_RULES, LINT_TIMEOUT, lint};
pub use probes::{PROBE_BUDGET, PROBE_TIMEOUT};
pub use verdicts::Verdict;

use crate::redact::Redactor;
use crate::tool::process::{
    CallOutcome, InitFailure, SandboxMode, ToolInfo, ToolProcError, ToolProcess, ToolSpec,
};
use crate::tool::runtime::{self, Python};
use autotool_policy::names::{KeyName, ToolName};
use rmcp::model::JsonObject;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Default bound on the smoke test's call.
pub const SMOKE_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest name, description and schemas of one function together, serialised.
pub const MAX_FUNCTION_BYTES: usize = 64 << 10;
/// How much of a log a failure keeps.
const LOG_CAP: usize = 16 << 10;
/// Beyond the spec's start timeout, the outer bound on starting (never reached unless
/// `ToolProcess::start` itself misbehaves).
const START_GRACE: Duration = Duration::from_secs(10);

/// The call to make once the tool is up: `{function, arguments}` as in `create_tool`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SmokeTest {
    pub function: String,
    #[serde(default)]
    pub arguments: JsonObject,
}

/// How hard [`verify`] tries a tool beyond the smoke test: whether [`Stage::Robustness`] runs.
/// `create_tool`'s `verify` argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Thoroughness {
    /// No probes.
    Quick,
    /// Probes for tools that declare no keys: probing a tool that holds keys could spend an
    /// API's quota, and one that lacks them would fail for the missing key, not its code.
    #[default]
    Standard,
    /// Probes whatever the tool declares.
    Thorough,
}

impl Thoroughness {
    /// Every level, as `create_tool` names them.
    pub const ALL: [Thoroughness; 3] = [
        Thoroughness::Quick,
        Thoroughness::Standard,
        Thoroughness::Thorough,
    ];

    /// `quick`, `standard`, `thorough`.
    pub fn name(self) -> &'static str {
        match self {
            Thoroughness::Quick => "quick",
            Thoroughness::Standard => "standard",
            Thoroughness::Thorough => "thorough",
        }
    }

    /// The level named `name`.
    pub fn named(name: &str) -> Option<Thoroughness> {
        Thoroughness::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Why a tool declaring `declared` keys is not probed at this level; `None`: it is.
    pub fn skips(self, declared: &[KeyName]) -> Option<Skipped> {
        match self {
            Thoroughness::Quick => Some(Skipped::Quick),
            Thoroughness::Standard if !declared.is_empty() => Some(Skipped::DeclaresKeys),
            Thoroughness::Standard | Thoroughness::Thorough => None,
        }
    }
}

/// Why [`Stage::Robustness`] did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skipped {
    /// `verify: "quick"`.
    Quick,
    /// The tool declares keys and `thorough` was not asked for.
    DeclaresKeys,
}

/// What [`Stage::Robustness`] did for a tool that passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Robustness {
    /// `made` of the `planned` probes were made and answered (the rest were left out when the
    /// time budget ran out).
    Probed {
        made: usize,
        planned: usize,
        took: Duration,
    },
    Skipped(Skipped),
}

impl std::fmt::Display for Robustness {
    /// For the agent, in `create_tool`'s result.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Robustness::Probed { made, planned, .. } if made == planned => {
                write!(f, "{made} edge-case probes answered without a crash")
            }
            Robustness::Probed { made, planned, .. } => write!(
                f,
                "{made} of {planned} edge-case probes answered without a crash (the rest did not fit the time budget)"
            ),
            Robustness::Skipped(Skipped::Quick) => {
                f.write_str("not probed: verify \"quick\" was asked for")
            }
            Robustness::Skipped(Skipped::DeclaresKeys) => f.write_str(
                "not probed: the tool declares keys, so probes could spend an API's quota; verify \"thorough\" probes it anyway",
            ),
        }
    }
}

/// What to verify, and how.
#[derive(Debug, Clone)]
pub struct VerifyRequest {
    /// The tool's name: its functions' mounted names must fit with it.
    pub name: ToolName,
    /// Its source. [`verify`] writes it to `spec.tool_dir/spec.tool_file` (unless that file
    /// already holds exactly this), so what is linted is what runs.
    pub code: String,
    pub smoke_test: Option<SmokeTest>,
    /// How to start it: `tool_dir` is the staged directory, `python` the runtime (whose `ruff`
    /// lints the code, see [`runtime::ruff`]), `env` the keys the caller grants, and
    /// `start_timeout` bounds [`Stage::Initialize`] and [`Stage::ListTools`].
    pub spec: ToolSpec,
    /// Bound on [`Stage::Lint`].
    pub lint_timeout: Duration,
    /// Bound on [`Stage::SmokeTest`].
    pub smoke_timeout: Duration,
    /// Whether [`Stage::Robustness`] runs.
    pub thoroughness: Thoroughness,
    /// Bound on each probe's answer.
    pub probe_timeout: Duration,
    /// No probe starts after this much time probing.
    pub probe_budget: Duration,
    /// `REQUIRED_ENV` as the caller already read it from `code` (so it is read once per
    /// create); `None` reads it here.
    pub declared: Option<Vec<KeyName>>,
    /// Every key value autotool knows: logs are redacted with it before they are cut, and a
    /// function whose name holds a value is refused.
    pub redactor: Option<Arc<Redactor>>,
    /// What trusted versions of the tool did, owed by this one ([`Stage::Baseline`]).
    pub baseline: Vec<Obligation>,
    /// Who writes [`Stage::Adversarial`]'s inputs, or why it is skipped.
    pub adversary: adversary::Adversarial,
}

impl VerifyRequest {
    /// A request with no smoke test, [`Thoroughness::Standard`] and the default bounds.
    pub fn new(name: ToolName, code: impl Into<String>, spec: ToolSpec) -> Self {
        VerifyRequest {
            name,
            code: code.into(),
            smoke_test: None,
            spec,
            lint_timeout: LINT_TIMEOUT,
            smoke_timeout: SMOKE_TIMEOUT,
            thoroughness: Thoroughness::default(),
            probe_timeout: PROBE_TIMEOUT,
            probe_budget: PROBE_BUDGET,
            declared: None,
            redactor: None,
            baseline: Vec::new(),
            adversary: adversary::Adversarial::default(),
        }
    }
}

/// A tool that passed: its process (kept warm, to serve as the first instance), what it offers
/// and what it declares.
#[derive(Debug)]
pub struct Verified {
    pub process: ToolProcess,
    pub tools: Vec<ToolInfo>,
    pub required_env: Vec<KeyName>,
    /// The smoke test's answer, when one was asked for.
    pub smoke: Option<CallOutcome>,
    /// Whether the probes ran, and how many.
    pub robustness: Robustness,
    /// Every verdict reached (examples, non-degeneracy, determinism, the baseline), passed,
    /// recorded or skipped.
    pub verdicts: Vec<Verdict>,
    /// What this version met, owed by later ones once it is trusted ([`baseline::met`]).
    pub met: Vec<Obligation>,
    /// How long each stage took (Launch: writing the file; Initialize: spawn to `initialize`
    /// answered).
    pub timings: Vec<(Stage, Duration)>,
}

/// Run every stage on `req`. On success the process is returned running; on failure it has
/// been shut down.
pub async fn verify(req: VerifyRequest) -> Result<Verified, VerifyFailure> {
    let name = req.name.clone();
    let redactor = req.redactor.clone();
    let mut timings = Vec::new();
    let t0 = Instant::now();
    let result = SCRUB
        .scope(redactor.clone(), run(req, &mut timings))
        .await
        .map_err(|f| f.redacted(redactor.as_deref()));
    match &result {
        Ok(_) => tracing::info!(tool = %name, took = ?t0.elapsed(), "verified"),
        Err(f) => {
            tracing::info!(tool = %name, stage = %f.stage, took = ?t0.elapsed(), "verification failed")
        }
    }
    let (process, tools, required_env, smoke, robustness, verdicts, met) = result?;
    Ok(Verified {
        process,
        tools,
        required_env,
        smoke,
        robustness,
        verdicts,
        met,
        timings,
    })
}

type Passed = (
    ToolProcess,
    Vec<ToolInfo>,
    Vec<KeyName>,
    Option<CallOutcome>,
    Robustness,
    Vec<Verdict>,
    Vec<Obligation>,
);

/// What the code declares, read statically at [`Stage::Declarations`].
struct Declared {
    keys: Vec<KeyName>,
    examples: Vec<Example>,
    nondeterministic: Vec<String>,
    /// The pairs of calls `RELATIONS` makes, and the relations.
    relations: (Vec<relations::Relation>, Vec<relations::Pair>),
}

async fn run(
    req: VerifyRequest,
    timings: &mut Vec<(Stage, Duration)>,
) -> Result<Passed, VerifyFailure> {
    let VerifyRequest {
        name,
        code,
        smoke_test,
        spec,
        lint_timeout,
        smoke_timeout,
        thoroughness,
        probe_timeout,
        probe_budget,
        declared,
        redactor,
        baseline,
        adversary,
    } = req;
    let Declared {
        keys: required_env,
        examples,
        nondeterministic,
        relations: (relations, pairs),
    } = check_source_timed(&code, &spec.python, lint_timeout, declared, timings).await?;

    let t = Instant::now();
    stage_file(&spec, &code)?;
    timings.push((Stage::Launch, t.elapsed()));

    let t = Instant::now();
    let sandbox = spec.sandbox;
    let tool_file = spec.tool_file.clone();
    let env_names = environment_names(&spec);
    let bound = spec.start_timeout + START_GRACE;
    let process = match tokio::time::timeout(bound, ToolProcess::start(spec)).await {
        Ok(Ok(process)) => process,
        Ok(Err(e)) => return Err(start_failure(e, sandbox, &tool_file)),
        Err(_) => {
            return Err(VerifyFailure::new(
                Stage::Initialize,
                format!(
                    "the tool did not finish starting within {} s",
                    bound.as_secs()
                ),
                "",
            ));
        }
    };
    timings.push((Stage::Initialize, t.elapsed()));

    let t = Instant::now();
    let listed = match process.list_tools().await {
        Ok(tools) => check_tools(&name, &tools, redactor.as_deref())
            .map(|()| functions::redacted(tools, redactor.as_deref())),
        Err(e) => Err(call_failure(Stage::ListTools, e)),
    };
    let tools = match listed {
        Ok(tools) => tools,
        Err(mut failure) => {
            process.shutdown().await;
            if failure.log.is_empty() {
                failure.log = process.stderr_tail();
            }
            return Err(failure);
        }
    };
    timings.push((Stage::ListTools, t.elapsed()));

    let smoke = match &smoke_test {
        None => None,
        Some(test) => {
            let t = Instant::now();
            match smoke(&process, &tools, test, smoke_timeout, &tool_file).await {
                Ok(outcome) => {
                    timings.push((Stage::SmokeTest, t.elapsed()));
                    Some(outcome)
                }
                Err(failure) => {
                    process.shutdown().await;
                    return Err(failure);
                }
            }
        }
    };

    let skip = thoroughness.skips(&required_env);
    let t = Instant::now();
    let mut verdicts =
        match judge::examples(&process, &tools, &examples, skip, smoke_timeout, &tool_file).await {
            Ok(verdicts) => verdicts,
            Err(failure) => {
                process.shutdown().await;
                return Err(failure);
            }
        };
    timings.push((Stage::Examples, t.elapsed()));
    let t = Instant::now();
    let relations = (&relations[..], &pairs[..]);
    match judge::relations(&process, &tools, relations, skip, smoke_timeout, &tool_file).await {
        Ok(kept) => verdicts.extend(kept),
        Err(failure) => {
            process.shutdown().await;
            return Err(failure);
        }
    }
    timings.push((Stage::Relations, t.elapsed()));

    let robustness = match skip {
        Some(why) => {
            verdicts.extend(judge::skipped(&tools, why));
            Robustness::Skipped(why)
        }
        None => {
            let t = Instant::now();
            let planned = probes::plan(&tools);
            let reach = judge::Reach {
                holds_keys: !required_env.is_empty(),
                nondeterministic: &nondeterministic,
                sandbox,
            };
            let judged = async {
                let made = probes::run(&process, &planned, probe_timeout, probe_budget, &tool_file)
                    .await?;
                let judged = judge::after_probes(
                    &process,
                    &tools,
                    &planned,
                    &made,
                    &reach,
                    probe_timeout,
                    &tool_file,
                )
                .await?;
                Ok::<_, VerifyFailure>((made.len(), judged))
            };
            match judged.await {
                Ok((made, judged)) => {
                    let took = t.elapsed();
                    timings.push((Stage::Robustness, took));
                    verdicts.extend(judged);
                    Robustness::Probed {
                        made,
                        planned: planned.len(),
                        took,
                    }
                }
                Err(failure) => {
                    process.shutdown().await;
                    return Err(failure);
                }
            }
        }
    };
    let t = Instant::now();
    let adversarial = match (&adversary, thoroughness) {
        (_, Thoroughness::Quick) => Ok(adversary::skipped("verify \"quick\" was asked for")),
        (adversary::Adversarial::Off(why), _) => Ok(adversary::skipped(why.clone())),
        (adversary::Adversarial::On(writer), _) => {
            let how = adversary::Run {
                adversary: writer.as_ref(),
                secrets: adversary::Secrets {
                    redactor: redactor.as_deref(),
                    env_names: &env_names,
                },
                timeout: probe_timeout,
                budget: probe_budget,
            };
            adversary::run(&process, &tools, &how).await
        }
    };
    match adversarial {
        Ok(found) => verdicts.extend(found),
        Err(failure) => {
            process.shutdown().await;
            return Err(failure);
        }
    }
    timings.push((Stage::Adversarial, t.elapsed()));
    let t = Instant::now();
    let owed = baseline::Owed {
        tool: name.as_str(),
        baseline: &baseline,
        no_calls: !required_env.is_empty() && thoroughness != Thoroughness::Thorough,
        nondeterministic: &nondeterministic,
        redactor: redactor.as_deref(),
    };
    match baseline::check(
        &process,
        &tools,
        &verdicts,
        &owed,
        smoke_timeout,
        &tool_file,
    )
    .await
    {
        Ok(kept) => verdicts.extend(kept),
        Err(failure) => {
            process.shutdown().await;
            return Err(failure);
        }
    }
    timings.push((Stage::Baseline, t.elapsed()));
    let smoke_answer = smoke.as_ref().map(verdicts::Answer::of);
    let met = baseline::met(
        0,
        smoke_test
            .as_ref()
            .zip(smoke_answer.as_ref())
            .map(|(t, a)| (t.function.as_str(), &t.arguments, a)),
        &examples,
        &pairs,
        &verdicts,
        redactor.as_deref(),
    );
    Ok((
        process,
        tools,
        required_env,
        smoke,
        robustness,
        verdicts,
        met,
    ))
}

/// Stages 1–2, [`Stage::Lint`] and [`Stage::Declarations`]: everything that needs no process.
/// Returns the declared keys. Nothing of `code` runs.
pub async fn check_source(
    code: &str,
    python: &Python,
    lint_timeout: Duration,
) -> Result<Vec<KeyName>, VerifyFailure> {
    Ok(
        check_source_timed(code, python, lint_timeout, None, &mut Vec::new())
            .await?
            .keys,
    )
}

async fn check_source_timed(
    code: &str,
    python: &Python,
    lint_timeout: Duration,
    declared: Option<Vec<KeyName>>,
    timings: &mut Vec<(Stage, Duration)>,
) -> Result<Declared, VerifyFailure> {
    let t = Instant::now();
    if code.trim().is_empty() {
        return Err(VerifyFailure::new(Stage::Lint, "the code is empty", ""));
    }
    lint(&runtime::ruff(python), code, &python.version, lint_timeout).await?;
    timings.push((Stage::Lint, t.elapsed()));

    let t = Instant::now();
    let refused = |e: declarations::DeclarationError| {
        VerifyFailure::new(Stage::Declarations, e.to_string(), "")
    };
    let keys = match declared {
        Some(d) => d,
        None => required_env(code).map_err(refused)?,
    };
    let examples = declarations::examples(code).map_err(refused)?;
    let nondeterministic = declarations::nondeterministic(code).map_err(refused)?;
    let declared_relations = relations::relations(code).map_err(refused)?;
    let pairs = relations::pairs(&declared_relations, &examples).map_err(refused)?;
    let uses = declarations::uses(code).map_err(refused)?;
    declarations::reach(code).map_err(refused)?;
    // A setting is a plain variable the user gave an added server, never a key's name.
    declarations::settings_beside(code, &keys).map_err(refused)?;
    // An npm server runs on node from its own layer: Python packages and uses channels are
    // Python's, and would silently not be there.
    if declarations::npm(code).map_err(refused)?.is_some()
        && (!uses.is_empty() || !required_packages(code).map_err(refused)?.is_empty())
    {
        return Err(VerifyFailure::new(
            Stage::Declarations,
            format!(
                "a file declaring NPM runs on node and may declare neither REQUIRED_PACKAGES \
                 nor USES. {}",
                declarations::NPM_FORM
            ),
            "",
        ));
    }
    timings.push((Stage::Declarations, t.elapsed()));
    Ok(Declared {
        keys,
        examples,
        nondeterministic,
        relations: (declared_relations, pairs),
    })
}

/// The names of the variables a process started from `spec` gets: its own, and the proxy
/// variables when it has an egress proxy.
fn environment_names(spec: &ToolSpec) -> Vec<String> {
    let mut names: Vec<String> = spec.env.keys().cloned().collect();
    if spec.egress.is_some() {
        for proxy in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"] {
            if !names.iter().any(|n| n == proxy) {
                names.push(proxy.into());
            }
        }
    }
    names
}

/// Put `code` where the spec will start it, unless it is already there.
fn stage_file(spec: &ToolSpec, code: &str) -> Result<(), VerifyFailure> {
    use std::os::unix::fs::PermissionsExt;
    let path = spec.tool_dir.join(&spec.tool_file);
    if std::fs::read(&path).is_ok_and(|current| current == code.as_bytes()) {
        return Ok(());
    }
    let written = std::fs::create_dir_all(&spec.tool_dir)
        .and_then(|()| std::fs::write(&path, code))
        // Readable by the confined tool, which may run as another user.
        .and_then(|()| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)));
    written.map_err(|e| {
        VerifyFailure::new(
            Stage::Launch,
            format!(
                "autotool could not write the tool to {}: {e}",
                path.display()
            ),
            "",
        )
    })
}

/// A failed [`ToolProcess::start`]: [`Stage::Launch`] when the process could not be started
/// (or the launcher gave up before the tool ran), else [`Stage::Initialize`].
fn start_failure(e: ToolProcError, sandbox: SandboxMode, tool_file: &str) -> VerifyFailure {
    let launcher_gave_up = matches!(
        &e,
        ToolProcError::Initialize {
            reason: InitFailure::Exited { status: Some(s), .. },
            ..
        } if sandbox == SandboxMode::Strict && s.code() == Some(125)
    );
    let stage = match &e {
        ToolProcError::Policy(_) | ToolProcError::Launcher(_) | ToolProcError::Spawn { .. } => {
            Stage::Launch
        }
        _ if launcher_gave_up => Stage::Launch,
        _ => Stage::Initialize,
    };
    let (mut message, log) = split(e);
    if let Some(raised) = traceback_summary(&log, tool_file) {
        message = format!("{message}; it raised {raised}");
    }
    VerifyFailure::new(stage, message, log)
}

fn call_failure(stage: Stage, e: ToolProcError) -> VerifyFailure {
    let (message, log) = split(e);
    VerifyFailure::new(stage, message, log)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_names_are_stable() {
        let names: Vec<&str> = Stage::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(
            names,
            [
                "lint",
                "declarations",
                "packages",
                "launch",
                "initialize",
                "list_tools",
                "smoke_test",
                "examples",
                "relations",
                "robustness",
                "adversarial",
                "baseline"
            ]
        );
        for stage in Stage::ALL {
            assert_eq!(
                serde_json::to_value(stage).ok(),
                Some(serde_json::Value::String(stage.name().into()))
            );
        }
    }

    #[test]
    fn probes_run_for_tools_without_keys_unless_quick_and_for_any_when_thorough() {
        let none: Vec<KeyName> = Vec::new();
        let keys = vec![KeyName::parse("WEATHER_API_KEY").unwrap_or_else(|e| panic!("{e}"))];
        let decide = |t: Thoroughness| (t.skips(&none), t.skips(&keys));
        assert_eq!(
            decide(Thoroughness::Quick),
            (Some(Skipped::Quick), Some(Skipped::Quick))
        );
        assert_eq!(
            decide(Thoroughness::Standard),
            (None, Some(Skipped::DeclaresKeys))
        );
        assert_eq!(decide(Thoroughness::Thorough), (None, None));
        assert_eq!(Thoroughness::default(), Thoroughness::Standard);
        for t in Thoroughness::ALL {
            assert_eq!(Thoroughness::named(t.name()), Some(t));
            assert_eq!(
                serde_json::to_value(t).ok(),
                Some(serde_json::Value::String(t.name().into()))
            );
        }
        assert_eq!(Thoroughness::named("Thorough"), None);
    }

    #[test]
    fn tracebacks_are_summarised_at_the_tools_own_frame() {
        let stderr = "Tool 'divide' raised an unexpected exception
Traceback (most recent call last):
  File \"/venv/lib/python3.11/site-packages/mcp/server/mcpserver/tools/base.py\", line 179, in run
    result = await self.fn_metadata.call_fn(self.fn, self.is_async, validated, pass_directly)
  File \"/tool/tool.py\", line 10, in divide
    return str(a / b)
               ~~^~~
ZeroDivisionError: division by zero

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File \"/venv/lib/python3.11/site-packages/mcp/server/mcpserver/tools/base.py\", line 213, in run
    raise UnexpectedToolError(f\"Error executing tool {self.name}\") from exc
mcp.server.mcpserver.exceptions.UnexpectedToolError: Error executing tool divide
";
        assert_eq!(
            traceback_summary(stderr, "tool.py").as_deref(),
            Some("ZeroDivisionError: division by zero (tool.py, line 10, in divide)")
        );
        assert_eq!(traceback_summary(stderr, "other.py"), None);
        assert_eq!(traceback_summary("plain words", "tool.py"), None);
        let import = "Traceback (most recent call last):\n  File \"tool.py\", line 4, in <module>\n    raise RuntimeError('x')\nRuntimeError: x\n";
        assert_eq!(
            traceback_summary(import, "tool.py").as_deref(),
            Some("RuntimeError: x (tool.py, line 4, in <module>)")
        );
    }

    #[test]
    fn logs_are_capped_on_char_boundaries() {
        let long = "é".repeat(LOG_CAP);
        assert!(cap_head(&long).starts_with('é'));
        assert!(cap_tail(&long).ends_with('é'));
        assert!(cap_tail(&long).len() < LOG_CAP + 64);
    }

    #[test]
    fn failures_read_as_instructions() {
        let f = VerifyFailure::new(
            Stage::Initialize,
            "the tool did not start",
            "Traceback (most recent call last):\nValueError: x",
        );
        let text = f.to_string();
        assert!(text.starts_with("verification failed at initialize: the tool did not start\n"));
        assert!(text.ends_with("--- the tool's stderr (traceback included) ---\nTraceback (most recent call last):\nValueError: x"));
    }
}
