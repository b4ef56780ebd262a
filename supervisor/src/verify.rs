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
//! 3. [`Stage::Launch`]: the code written to the caller's staged directory and the process
//!    started with the caller's [`ToolSpec`] (confined through `autotool-launcher`, or not).
//! 4. [`Stage::Initialize`]: the MCP `initialize` handshake, within the spec's start timeout.
//! 5. [`Stage::ListTools`]: `tools/list`: at least one function, valid names that fit with
//!    the tool's own in a mounted name and hold no key value, object schemas ([`check_tools`]).
//! 6. [`Stage::SmokeTest`]: the optional call the author asked for, within its timeout.
//! 7. [`Stage::Robustness`]: edge-case calls derived from each function's input schema
//!    ([`probes`]); a function that crashes on one, or hangs, fails. Whether they run is
//!    [`Thoroughness::skips`]: by default only for tools that declare no keys, so no API quota
//!    is spent by surprise.
//!
//! Which keys the tool receives is the caller's decision (the spec's environment); [`verify`]
//! only reports what the code declares. A caller that must ask for consent before anything runs
//! calls [`check_source`] (stages 1–2) first. Every log a [`VerifyFailure`] carries (ruff's
//! report, the tool's stderr) is redacted with the request's redactor *before* it is cut to
//! size, so a key value straddling the cut cannot leave a piece behind; the message is redacted
//! again where it is rendered for the host.
//!
//! Layout: [`declarations`] reads `REQUIRED_ENV`; [`lint`](mod@lint) runs ruff; [`probes`] plans
//! and makes the robustness calls.

pub mod declarations;
pub mod lint;
pub mod probes;

pub use declarations::{EXPECTED_FORM, required_env};
pub use lint::{LINT_RULES, LINT_TIMEOUT, lint};
pub use probes::{PROBE_BUDGET, PROBE_TIMEOUT};

use crate::redact::Redactor;
use crate::tool::process::{
    CallOutcome, InitFailure, SandboxMode, ToolInfo, ToolProcError, ToolProcess, ToolSpec,
};
use crate::tool::runtime::{self, Python};
use autotool_policy::names::{FunctionName, KeyName, MountedName, ToolName};
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

/// A verification stage. [`Stage::name`] is stable: hosts and logs may match on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Lint,
    Declarations,
    Launch,
    Initialize,
    ListTools,
    SmokeTest,
    Robustness,
}

impl Stage {
    /// Every stage, in the order they run.
    pub const ALL: [Stage; 7] = [
        Stage::Lint,
        Stage::Declarations,
        Stage::Launch,
        Stage::Initialize,
        Stage::ListTools,
        Stage::SmokeTest,
        Stage::Robustness,
    ];

    /// `lint`, `declarations`, `launch`, `initialize`, `list_tools`, `smoke_test`,
    /// `robustness`.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Lint => "lint",
            Stage::Declarations => "declarations",
            Stage::Launch => "launch",
            Stage::Initialize => "initialize",
            Stage::ListTools => "list_tools",
            Stage::SmokeTest => "smoke_test",
            Stage::Robustness => "robustness",
        }
    }

    /// What to do after a failure here.
    fn next_step(self) -> &'static str {
        match self {
            Stage::Lint => "Fix the code at the lines ruff names, then create the tool again.",
            Stage::Declarations => "Fix the declaration, then create the tool again.",
            Stage::Launch => {
                "This is about the machine or autotool's setup, not the tool's code: `autotool doctor` says what is missing."
            }
            Stage::Initialize => {
                "The module must import without errors, create `mcp = MCPServer(\"name\")`, register functions with `@mcp.tool()` and end with `mcp.run()`; it may write only MCP messages to stdout (diagnostics go to stderr). Fix the error below, then create the tool again."
            }
            Stage::ListTools => "Fix the tool's functions, then create the tool again.",
            Stage::SmokeTest => {
                "Fix the function (or the smoke test's arguments), then create the tool again."
            }
            Stage::Robustness => {
                "Probes are edge-case calls autotool derives from each function's input schema (empty and huge strings, unicode, boundary numbers, missing optional arguments). Make the function answer such input with a result, or raise ToolError with a message the caller can act on; a range it cannot serve can be refused by the schema itself (`Annotated[int, Field(ge=1, le=100)]`). Then create the tool again. A tool whose calls change things outside it can be created with \"verify\": \"quick\", which skips the probes."
            }
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a tool did not pass. `Display` is the text for the agent that wrote it: the stage, what
/// went wrong, what to do, then the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyFailure {
    pub stage: Stage,
    /// What went wrong, in a sentence or two (without the log).
    pub message: String,
    /// Ruff's report (lint), or the tool's stderr with its traceback (later stages); may be
    /// empty. Unredacted.
    pub log: String,
}

impl VerifyFailure {
    fn new(stage: Stage, message: impl Into<String>, log: impl Into<String>) -> Self {
        VerifyFailure {
            stage,
            message: message.into(),
            log: log.into(),
        }
    }

    /// The same failure with every known key value replaced in its message and log.
    pub fn redacted(self, redactor: Option<&Redactor>) -> Self {
        match redactor {
            None => self,
            Some(r) => VerifyFailure {
                stage: self.stage,
                message: r.redact(&self.message).into_owned(),
                log: r.redact(&self.log).into_owned(),
            },
        }
    }
}

tokio::task_local! {
    /// The redactor of the verification running on this task: every cut of a log
    /// ([`cap_head`], [`cap_tail`], [`tail_of`]) redacts through it first.
    static SCRUB: Option<Arc<Redactor>>;
}

/// `text` with every value the running verification's redactor knows replaced (unchanged
/// outside a verification).
fn scrub(text: &str) -> std::borrow::Cow<'_, str> {
    SCRUB
        .try_with(|r| r.as_ref().map(|r| r.redact(text).into_owned()))
        .ok()
        .flatten()
        .map_or(std::borrow::Cow::Borrowed(text), std::borrow::Cow::Owned)
}

impl std::fmt::Display for VerifyFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "verification failed at {}: {}\n{}",
            self.stage,
            self.message,
            self.stage.next_step()
        )?;
        let log = self.log.trim_end();
        match self.stage {
            Stage::Initialize if log.is_empty() => {
                write!(f, "\n--- the tool's stderr: it wrote nothing ---")
            }
            _ if log.is_empty() => Ok(()),
            Stage::Lint => write!(f, "\n--- ruff's report ---\n{log}"),
            _ => write!(f, "\n--- the tool's stderr (traceback included) ---\n{log}"),
        }
    }
}

impl std::error::Error for VerifyFailure {}

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
    let (process, tools, required_env, smoke, robustness) = result?;
    Ok(Verified {
        process,
        tools,
        required_env,
        smoke,
        robustness,
        timings,
    })
}

type Passed = (
    ToolProcess,
    Vec<ToolInfo>,
    Vec<KeyName>,
    Option<CallOutcome>,
    Robustness,
);

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
    } = req;
    let required_env =
        check_source_timed(&code, &spec.python, lint_timeout, declared, timings).await?;

    let t = Instant::now();
    stage_file(&spec, &code)?;
    timings.push((Stage::Launch, t.elapsed()));

    let t = Instant::now();
    let sandbox = spec.sandbox;
    let tool_file = spec.tool_file.clone();
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
        Ok(tools) => check_tools(&name, &tools, redactor.as_deref()).map(|()| tools),
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

    let smoke = match smoke_test {
        None => None,
        Some(test) => {
            let t = Instant::now();
            match smoke(&process, &tools, &test, smoke_timeout, &tool_file).await {
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

    let robustness = match thoroughness.skips(&required_env) {
        Some(why) => Robustness::Skipped(why),
        None => {
            let t = Instant::now();
            let planned = probes::plan(&tools);
            match probes::run(&process, &planned, probe_timeout, probe_budget, &tool_file).await {
                Ok(made) => {
                    let took = t.elapsed();
                    timings.push((Stage::Robustness, took));
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
    Ok((process, tools, required_env, smoke, robustness))
}

/// Stages 1–2, [`Stage::Lint`] and [`Stage::Declarations`]: everything that needs no process.
/// Returns the declared keys. Nothing of `code` runs.
pub async fn check_source(
    code: &str,
    python: &Python,
    lint_timeout: Duration,
) -> Result<Vec<KeyName>, VerifyFailure> {
    check_source_timed(code, python, lint_timeout, None, &mut Vec::new()).await
}

async fn check_source_timed(
    code: &str,
    python: &Python,
    lint_timeout: Duration,
    declared: Option<Vec<KeyName>>,
    timings: &mut Vec<(Stage, Duration)>,
) -> Result<Vec<KeyName>, VerifyFailure> {
    let t = Instant::now();
    if code.trim().is_empty() {
        return Err(VerifyFailure::new(Stage::Lint, "the code is empty", ""));
    }
    lint(&runtime::ruff(python), code, &python.version, lint_timeout).await?;
    timings.push((Stage::Lint, t.elapsed()));

    let t = Instant::now();
    let declared = match declared {
        Some(d) => d,
        None => required_env(code).map_err(|m| VerifyFailure::new(Stage::Declarations, m, ""))?,
    };
    timings.push((Stage::Declarations, t.elapsed()));
    Ok(declared)
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

/// A process error as (what happened, the tool's stderr).
fn split(e: ToolProcError) -> (String, String) {
    match e {
        ToolProcError::Initialize {
            reason,
            stderr_tail,
        } => (
            format!("the tool did not start as an MCP server: {reason}"),
            stderr_tail,
        ),
        ToolProcError::Timeout {
            operation,
            after,
            stderr_tail,
        } => (
            format!(
                "`{operation}` got no answer within {:.1} s, so the tool process was stopped",
                after.as_secs_f64()
            ),
            stderr_tail,
        ),
        ToolProcError::Exited {
            operation,
            exit,
            stderr_tail,
            ..
        } => (
            format!("the tool process ended ({exit}) before answering `{operation}`"),
            stderr_tail,
        ),
        ToolProcError::Protocol {
            operation,
            what,
            stderr_tail,
        } => (
            format!(
                "the tool broke the MCP protocol during `{operation}`: {what}; print diagnostics to stderr, never to stdout"
            ),
            stderr_tail,
        ),
        other => (other.to_string(), String::new()),
    }
}

/// The [`Stage::ListTools`] rules: at least one function; names that are [`FunctionName`]s,
/// each once, that fit with `tool`'s name in a [`MountedName`], and that hold no key value
/// (a name is an identity hosts show and keep: it is refused, not redacted); input schemas
/// with `"type": "object"`; output schemas, where present, likewise; each function's name,
/// description and schemas at most [`MAX_FUNCTION_BYTES`].
pub fn check_tools(
    tool: &ToolName,
    tools: &[ToolInfo],
    redactor: Option<&Redactor>,
) -> Result<(), VerifyFailure> {
    let fail = |m: String| Err(VerifyFailure::new(Stage::ListTools, m, ""));
    if tools.is_empty() {
        return fail(
            "the tool offers no functions: register at least one with `@mcp.tool()` above a function defined before `mcp.run()`".into(),
        );
    }
    for (i, f) in tools.iter().enumerate() {
        let name = &f.name;
        if let Some(r) = redactor
            && let shown = r.redact(name)
            && shown != name.as_str()
        {
            return fail(format!(
                "function name {shown:?} holds the value of a key; a function's name is shown to every host, so it may never hold a credential: name the function for what it does"
            ));
        }
        let function = match FunctionName::parse(name) {
            Ok(f) => f,
            Err(e) => return fail(e.to_string()),
        };
        if let Err(e) = MountedName::join(tool, &function) {
            return fail(e.to_string());
        }
        if tools[..i].iter().any(|t| &t.name == name) {
            return fail(format!(
                "two functions are named {name:?}; give each a name of its own"
            ));
        }
        if let Some(why) = not_an_object_schema(&f.input_schema) {
            return fail(format!(
                "function {name:?} has an input schema that {why}; its parameters must form a JSON object schema (\"type\": \"object\"), which the SDK writes for plain typed parameters"
            ));
        }
        if let Some(output) = &f.output_schema
            && let Some(why) = not_an_object_schema(output)
        {
            return fail(format!(
                "function {name:?} has an output schema that {why}; return a str, a dict or a pydantic model and let the SDK describe it"
            ));
        }
        let size = serde_json::to_vec(f).map(|v| v.len()).unwrap_or(0);
        if size > MAX_FUNCTION_BYTES {
            return fail(format!(
                "function {name:?} is described in {} KiB (name, description and schemas); keep it under {} KiB",
                size.div_ceil(1024),
                MAX_FUNCTION_BYTES >> 10
            ));
        }
    }
    Ok(())
}

fn not_an_object_schema(schema: &JsonObject) -> Option<String> {
    match schema.get("type") {
        Some(serde_json::Value::String(t)) if t == "object" => {}
        Some(other) => return Some(format!("has \"type\": {other}")),
        None => return Some("has no \"type\"".into()),
    }
    match schema.get("properties") {
        None | Some(serde_json::Value::Object(_)) => None,
        Some(_) => Some("has \"properties\" that are not an object".into()),
    }
}

/// [`Stage::SmokeTest`]: call the function the author named, with their arguments.
async fn smoke(
    process: &ToolProcess,
    tools: &[ToolInfo],
    test: &SmokeTest,
    timeout: Duration,
    tool_file: &str,
) -> Result<CallOutcome, VerifyFailure> {
    let function = &test.function;
    if !tools.iter().any(|t| &t.name == function) {
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        return Err(VerifyFailure::new(
            Stage::SmokeTest,
            format!(
                "smoke_test.function {function:?} is not one of the tool's functions ({})",
                names.join(", ")
            ),
            "",
        ));
    }
    let shown = format!(
        "{function}({})",
        serde_json::to_string(&test.arguments).unwrap_or_default()
    );
    let outcome = process
        .call(function, test.arguments.clone(), timeout)
        .await
        .map_err(|e| {
            let (message, log) = split(e);
            let raised = traceback_summary(&log, tool_file)
                .map(|r| format!("; it raised {r}"))
                .unwrap_or_default();
            VerifyFailure::new(
                Stage::SmokeTest,
                format!("the smoke test {shown} failed: {message}{raised}"),
                log,
            )
        })?;
    if outcome.is_error {
        let text = outcome
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
            .collect::<Vec<_>>()
            .join("\n");
        let text = if text.trim().is_empty() {
            "(no message)".to_string()
        } else {
            text
        };
        let message = match traceback_summary(&outcome.stderr, tool_file) {
            Some(raised) => format!(
                "the smoke test {shown} raised {raised} (the traceback is below); the tool answered: {text}"
            ),
            None => format!("the smoke test {shown} returned an error: {text}"),
        };
        return Err(VerifyFailure::new(
            Stage::SmokeTest,
            message,
            cap_tail(&outcome.stderr),
        ));
    }
    Ok(outcome)
}

/// The exception of the first traceback in `stderr` that passes through the tool's own file,
/// with that frame: `ZeroDivisionError: division by zero (tool.py, line 10, in divide)`.
fn traceback_summary(stderr: &str, tool_file: &str) -> Option<String> {
    let lines: Vec<&str> = stderr.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].starts_with("Traceback (most recent call last):") {
            i += 1;
            continue;
        }
        let mut frame = None;
        i += 1;
        while i < lines.len() && lines[i].starts_with(' ') {
            frame = tool_frame(lines[i], tool_file).or(frame);
            i += 1;
        }
        if let (Some(frame), Some(raised)) = (frame, lines.get(i)) {
            let raised = raised.trim();
            if !raised.is_empty() {
                return Some(format!("{raised} ({frame})"));
            }
        }
    }
    None
}

/// `  File "/tool/tool.py", line 10, in divide` → `tool.py, line 10, in divide`.
fn tool_frame(line: &str, tool_file: &str) -> Option<String> {
    let rest = line.trim_start().strip_prefix("File \"")?;
    let (path, place) = rest.split_once("\", ")?;
    let ours = path == tool_file || path.ends_with(&format!("/{tool_file}"));
    ours.then(|| format!("{tool_file}, {place}"))
}

/// At most [`LOG_CAP`] bytes of `text`, its start kept, redacted before it is cut.
fn cap_head(text: &str) -> String {
    let text = scrub(text);
    if text.len() <= LOG_CAP {
        return text.to_string();
    }
    let mut end = LOG_CAP;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[… {} more bytes]", &text[..end], text.len() - end)
}

/// At most [`LOG_CAP`] bytes of `text`, its end kept.
fn cap_tail(text: &str) -> String {
    tail_of(text, LOG_CAP)
}

/// At most `max` bytes of `text` (on a character boundary), its end kept, with a note of how
/// much came before; redacted (inside a verification) before it is cut. A traceback lives at
/// the end of a log.
pub fn tail_of(text: &str, max: usize) -> String {
    let text = scrub(text);
    if text.len() <= max {
        return text.to_string();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("[… {start} bytes before]\n{}", &text[start..])
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
                "launch",
                "initialize",
                "list_tools",
                "smoke_test",
                "robustness"
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
