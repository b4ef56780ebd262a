//! The tool link under attack: the fixture `tests/tools/serve/link_attacks.py`, a real Python
//! tool on the `mcp` SDK written to attack autotool through its MCP link, run through
//! [`ToolProcess`] (confined and unconfined) and, as the control, through a plain rmcp client
//! with rmcp's default handler and a plain `tracing` writer: the client autotool had before the
//! link, which shows each attack working.
//!
//! Logs are captured per test: each scenario runs on a current-thread runtime with its own
//! subscriber as the thread's default, so what rmcp and the link log lands in that test's
//! buffer. Memory is measured in `toollink_memory.rs`, a binary of its own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod link;
use anyhow::{Context, Result, ensure};
use autotool::redact::Redactor;
use autotool::tool::process::{Misuse, SandboxMode, ToolProcError, ToolProcess, ToolSpec};
use common::{launcher_for, runtime};
use rmcp::model::CallToolRequestParams;
use serde_json::{Map, Value, json};
use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The key the attacking tool holds, and tries to get into the logs.
const KEY: &str = "lk-7f3a9c0e51d2-link-attack-value";
const BOUND: Duration = Duration::from_secs(120);
const CALL: Duration = Duration::from_secs(60);

fn spec(dir: &Path, mode: SandboxMode, launcher: Option<PathBuf>) -> ToolSpec {
    let mut spec = ToolSpec::new(dir, "tool.py", runtime(), mode);
    spec.launcher = launcher;
    spec.env = link::environment(KEY);
    spec
}

fn args(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// A buffer log lines are written into.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// How serve logged before: `info`, every line as it came.
fn plain_logging(into: &Captured) -> impl tracing::Subscriber + Send + Sync {
    let into = into.clone();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
        .with_ansi(false)
        .with_writer(move || into.clone())
        .finish()
}

/// How serve logs now, at `level` (as if `AUTOTOOL_LOG=level`).
fn serve_logging(into: &Captured, level: &str) -> impl tracing::Subscriber + Send + Sync {
    let sink: Arc<dyn autotool::logging::Sink> = Arc::new(Mutex::new(into.clone()));
    tracing_subscriber::fmt()
        .with_env_filter(autotool::logging::filter_from(Some(level), "info"))
        .with_ansi(false)
        .with_writer(autotool::logging::Lines::new(vec![sink]))
        .finish()
}

/// Run `work` on a current-thread runtime with `subscriber` as the default, within [`BOUND`].
fn on_thread<T>(
    subscriber: impl tracing::Subscriber + Send + Sync + 'static,
    work: impl Future<Output = Result<T>>,
) -> T {
    let _default = tracing::subscriber::set_default(subscriber);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    match runtime.block_on(async { tokio::time::timeout(BOUND, work).await }) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => panic!("{e:#}"),
        Err(_) => panic!("still running after {BOUND:?}"),
    }
}

/// The control, and a way to call it.
struct Plain(link::Plain);

impl Plain {
    async fn start() -> Result<Plain> {
        Ok(Plain(link::Plain::start(KEY).await?))
    }

    /// The text of a call's answer.
    async fn call(&self, name: &str, arguments: Value) -> Result<String> {
        let params = CallToolRequestParams::new(name.to_string()).with_arguments(args(arguments));
        let result = tokio::time::timeout(CALL, self.0.client.peer().call_tool(params))
            .await
            .context("no answer")??;
        Ok(result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect::<Vec<_>>()
            .join("\n"))
    }
}

/// The text of a successful call through the link.
async fn text(tool: &ToolProcess, name: &str, arguments: Value) -> Result<String> {
    let outcome = tool.call(name, args(arguments), CALL).await?;
    ensure!(!outcome.is_error, "{name} failed: {:?}", outcome.content);
    Ok(outcome
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n"))
}

/// Each scenario as `<name>::strict` and `<name>::off`.
macro_rules! in_both_modes {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            use super::*;
            #[test]
            fn strict() {
                if let Some(launcher) = launcher_for(stringify!($name), SandboxMode::Strict) {
                    super::$name(SandboxMode::Strict, launcher)
                }
            }
            #[test]
            fn off() {
                super::$name(SandboxMode::Off, None)
            }
        }
    )*};
}

in_both_modes!(
    a_log_flood_reaches_no_log_and_is_stopped,
    requests_to_autotool_are_refused_then_the_tool_is_stopped,
    an_answer_over_the_cap_stops_the_tool_with_a_clear_message,
    a_tool_that_stops_reading_its_stdin_is_stopped,
);

#[test]
fn control_a_log_flood_goes_into_the_log_with_the_key() {
    let logs = Captured::default();
    let answer = on_thread(plain_logging(&logs), async {
        let plain = Plain::start().await?;
        plain.call("log_flood", json!({"megabytes": 8})).await
    });
    assert!(answer.starts_with("sent "), "{answer}");
    assert!(
        logs.len() >= 8 << 20,
        "only {} bytes of log from 8 MiB of notifications",
        logs.len()
    );
    assert!(logs.text().contains(KEY), "the key is not in the log");
}

fn a_log_flood_reaches_no_log_and_is_stopped(mode: SandboxMode, launcher: Option<PathBuf>) {
    // At the default level nothing the tool sends is logged, whatever the redactor knows.
    let logs = Captured::default();
    let dir = link::tool_dir();
    let error = on_thread(serve_logging(&logs, "info"), async {
        let tool = ToolProcess::start(spec(dir.path(), mode, launcher.clone())).await?;
        let started = Instant::now();
        let e = tool
            .call("log_flood", args(json!({"megabytes": 64})), CALL)
            .await
            .err()
            .context("64 MiB of notifications were taken")?;
        ensure!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
        ensure!(!tool.is_alive());
        Ok(e)
    });
    assert!(
        matches!(
            &error,
            ToolProcError::Misused {
                misuse: Misuse::Flood { .. },
                ..
            }
        ),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains("flooded autotool with notifications"),
        "{message}"
    );
    assert!(!message.contains(KEY));
    let text = logs.text();
    assert!(logs.len() < 4 << 10, "{} bytes of log: {text}", logs.len());
    assert!(!text.contains(KEY), "{text}");
    assert!(
        !text.contains("the key is"),
        "a notification was logged: {text}"
    );

    // At debug, a few are logged: redacted, then cut.
    let logs = Captured::default();
    autotool::logging::set_redactor(Arc::new(Redactor::new(&[("LINK_API_KEY", KEY)]).unwrap()));
    on_thread(serve_logging(&logs, "debug"), async {
        let tool = ToolProcess::start(spec(dir.path(), mode, launcher.clone())).await?;
        let r = tool
            .call("log_flood", args(json!({"megabytes": 64})), CALL)
            .await;
        ensure!(r.is_err(), "64 MiB of notifications were taken");
        Ok(())
    });
    let text = logs.text();
    let logged: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("tool log notification"))
        .collect();
    assert!(!logged.is_empty(), "no log notification at debug: {text}");
    assert!(
        logged.len() <= 25,
        "{} log notifications logged",
        logged.len()
    );
    for line in &logged {
        assert!(line.len() < 1200, "a line of {} bytes: {line}", line.len());
        assert!(line.contains("[REDACTED:LINK_API_KEY]"), "{line}");
    }
    assert!(!text.contains(KEY), "the key is in the debug log");
    assert!(logs.len() < 64 << 10, "{} bytes of debug log", logs.len());
}

#[test]
fn control_requests_from_a_tool_are_served_by_a_plain_client() {
    let answers = on_thread(plain_logging(&Captured::default()), async {
        let plain = Plain::start().await?;
        let mut answers = Vec::new();
        for kind in ["ping", "roots", "elicitation"] {
            answers.push(plain.call("ask", json!({"kind": kind})).await?);
        }
        Ok(answers)
    });
    for answer in &answers {
        assert!(answer.starts_with("answered: "), "{answers:?}");
    }
}

fn requests_to_autotool_are_refused_then_the_tool_is_stopped(
    mode: SandboxMode,
    launcher: Option<PathBuf>,
) {
    let logs = Captured::default();
    let dir = link::tool_dir();
    let error = on_thread(serve_logging(&logs, "info"), async {
        let tool = ToolProcess::start(spec(dir.path(), mode, launcher)).await?;
        for kind in ["ping", "roots", "sampling", "elicitation"] {
            let answer = text(&tool, "ask", json!({"kind": kind})).await?;
            ensure!(
                answer.starts_with("refused: ")
                    && answer.contains("autotool serves no requests from tools"),
                "{kind}: {answer}"
            );
        }
        // The fifth is one too many.
        let e = tool
            .call("ask", args(json!({"kind": "roots"})), CALL)
            .await
            .err()
            .context("the fifth request was refused and the tool kept running")?;
        ensure!(!tool.is_alive());
        Ok(e)
    });
    let ToolProcError::Misused {
        misuse: Misuse::Requests { count, methods },
        ..
    } = &error
    else {
        panic!("{error}")
    };
    assert_eq!(*count, 5);
    assert_eq!(
        methods,
        &[
            "elicitation/create",
            "ping",
            "roots/list",
            "sampling/createMessage"
        ]
    );
    assert!(error.to_string().contains("stopped as abusive"), "{error}");
    assert!(
        !logs.text().contains("Paste your API key"),
        "{}",
        logs.text()
    );
}

#[test]
fn control_a_plain_client_takes_an_answer_of_megabytes() {
    let answer = on_thread(plain_logging(&Captured::default()), async {
        let plain = Plain::start().await?;
        plain.call("big", json!({"size": 2_000_000})).await
    });
    assert_eq!(answer.len(), 2_000_000);
}

fn an_answer_over_the_cap_stops_the_tool_with_a_clear_message(
    mode: SandboxMode,
    launcher: Option<PathBuf>,
) {
    let dir = link::tool_dir();
    let (fits, error) = on_thread(serve_logging(&Captured::default(), "info"), async {
        let mut spec = spec(dir.path(), mode, launcher);
        spec.max_output_bytes = 16 << 10;
        let tool = ToolProcess::start(spec).await?;
        // Within the cap, even twice over (text and structuredContent): whole.
        let fits = text(&tool, "big", json!({"size": 16_000})).await?;
        let e = tool
            .call("big", args(json!({"size": 100_000})), CALL)
            .await
            .err()
            .context("an answer of 200 KB was taken under a 16 KiB cap")?;
        ensure!(!tool.is_alive());
        Ok((fits, e))
    });
    assert_eq!(fits.len(), 16_000);
    assert!(
        matches!(
            &error,
            ToolProcError::Misused {
                misuse: Misuse::TooLarge { answer: true, .. },
                ..
            }
        ),
        "{error}"
    );
    let message = error.to_string();
    assert!(message.contains("answer was too large"), "{message}");
    assert!(message.contains("`max_output_bytes` (16 KiB)"), "{message}");
    assert!(message.contains("tools/call big"), "{message}");
    assert!(!message.contains("print diagnostics"), "{message}");
}

/// While a function blocks the tool's event loop, the SDK still has one `readline` running on
/// a worker thread: the first message after the block is read whole, however long; the next
/// one stays in the pipe. So the attack is two large messages.
const STALLING: usize = 1 << 20;

#[test]
fn control_a_plain_client_waits_without_bound_for_a_tool_that_stopped_reading() {
    let pending = on_thread(plain_logging(&Captured::default()), async {
        let plain = Arc::new(Plain::start().await?);
        let blocker = plain.clone();
        let _blocked =
            tokio::spawn(async move { blocker.call("block", json!({"seconds": 30})).await });
        tokio::time::sleep(Duration::from_millis(500)).await;
        let first = plain.clone();
        let _first = tokio::spawn(async move {
            first
                .call("measure", json!({"text": "m".repeat(STALLING)}))
                .await
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        let second = plain.call("measure", json!({"text": "m".repeat(STALLING)}));
        // Twice the link's stall bound: still neither answered nor failed.
        Ok(
            tokio::time::timeout(2 * Duration::from_secs(5) + Duration::from_secs(2), second)
                .await
                .is_err(),
        )
    });
    assert!(pending, "the call to a tool that stopped reading ended");
}

fn a_tool_that_stops_reading_its_stdin_is_stopped(mode: SandboxMode, launcher: Option<PathBuf>) {
    let dir = link::tool_dir();
    let (error, took) = on_thread(serve_logging(&Captured::default(), "info"), async {
        let tool = Arc::new(ToolProcess::start(spec(dir.path(), mode, launcher)).await?);
        let blocker = tool.clone();
        let blocked = tokio::spawn(async move {
            blocker
                .call("block", args(json!({"seconds": 40})), CALL)
                .await
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        let first = tool.clone();
        let first = tokio::spawn(async move {
            first
                .call("measure", args(json!({"text": "m".repeat(STALLING)})), CALL)
                .await
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        let started = Instant::now();
        let r = tool
            .call("measure", args(json!({"text": "m".repeat(STALLING)})), CALL)
            .await;
        let took = started.elapsed();
        let e = match r {
            Err(e) => e,
            Ok(o) => anyhow::bail!(
                "the write to a tool that stopped reading went through after {took:?}: {:?}",
                o.content
            ),
        };
        ensure!(blocked.await?.is_err(), "the blocked call was answered");
        ensure!(first.await?.is_err(), "the first call was answered");
        ensure!(!tool.is_alive());
        Ok((e, took))
    });
    assert!(
        matches!(
            &error,
            ToolProcError::Misused {
                misuse: Misuse::StdinStalled { .. },
                ..
            }
        ),
        "{error}"
    );
    assert!(
        error.to_string().contains("stopped reading its stdin"),
        "{error}"
    );
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(12),
        "stopped after {took:?}"
    );
}
