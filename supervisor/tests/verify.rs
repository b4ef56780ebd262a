//! `autotool::verify` and the runtime it needs (`autotool::tool::runtime::ensure_runtime`), against
//! real Python MCP tools, in both sandbox modes.
//!
//! The runtime is the virtual environment at `$AUTOTOOL_TEST_RUNTIME` (default
//! `/opt/autotool-test-runtime`, with `mcp==2.3.0` and `ruff==0.17.6`), opened the way
//! `ensure_runtime` opens `$AUTOTOOL_RUNTIME`. Confined runs use the launcher at
//! `$AUTOTOOL_LAUNCHER` or `target/debug/autotool-launcher`; where it cannot confine, they print
//! `SKIP …` with the reason and pass. Every test is bounded by [`BOUND`]. Creating a runtime is
//! tested offline (a venv without packages); the real `pip install` runs only with
//! `AUTOTOOL_TEST_PIP=1` (it downloads from PyPI).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use anyhow::{Context, Result, bail, ensure};
use autotool::tool::process::{CallOutcome, SandboxMode, ToolSpec};
use autotool::tool::runtime::{self, Python};
use autotool::verify::{
    self, EXPECTED_FORM, Robustness, Skipped, SmokeTest, Stage, Thoroughness, Verified,
    VerifyFailure, VerifyRequest, required_env,
};
use common::launcher_for;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// Upper bound on any one test.
const BOUND: Duration = Duration::from_secs(90);

fn test_runtime_dir() -> PathBuf {
    std::env::var_os("AUTOTOOL_TEST_RUNTIME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/autotool-test-runtime"))
}

fn test_runtime() -> Python {
    let venv = test_runtime_dir();
    runtime::open_runtime(&venv).unwrap_or_else(|e| {
        panic!(
            "the test runtime is missing ({e}); create it with `python3 -m venv {v} && {v}/bin/pip install {}` or set AUTOTOOL_TEST_RUNTIME",
            runtime::RUNTIME_REQUIREMENTS.join(" "),
            v = venv.display()
        )
    })
}

/// Run a blocking test body on its own thread, failing if it is still running after [`BOUND`].
fn bounded(name: &str, body: impl FnOnce() + Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        body();
        let _ = tx.send(());
    });
    match rx.recv_timeout(BOUND) {
        Ok(()) => handle.join().unwrap(),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(panic) = handle.join() {
                std::panic::resume_unwind(panic);
            }
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{name}: still running after {BOUND:?}")
        }
    }
}

// ---------------------------------------------------------------------------------------------
// REQUIRED_ENV, read statically

fn accepted(code: &str) -> Vec<String> {
    required_env(code)
        .unwrap_or_else(|e| panic!("refused {code:?}: {e}"))
        .into_iter()
        .map(String::from)
        .collect()
}

fn refused(code: &str) -> String {
    match required_env(code) {
        Ok(names) => panic!("accepted {code:?} as {names:?}"),
        Err(e) => {
            let e = e.to_string();
            assert!(e.ends_with(EXPECTED_FORM), "no expected form in: {e}");
            e
        }
    }
}

#[test]
fn required_env_absent_means_no_keys() {
    assert!(accepted("").is_empty());
    assert!(accepted("import os\nprint(os.environ.get('X'))\n").is_empty());
    assert!(accepted("# REQUIRED_ENV = ['A']\ns = 'REQUIRED_ENV = [\"B\"]'\n").is_empty());
    assert!(accepted("REQUIRED_ENV = []\n").is_empty());
    assert!(accepted("REQUIRED_ENV = ()\n").is_empty());
}

#[test]
fn required_env_lists_and_tuples() {
    assert_eq!(accepted("REQUIRED_ENV = [\"A\", \"B_2\"]"), ["A", "B_2"]);
    assert_eq!(accepted("REQUIRED_ENV = ('A', 'B')\n"), ["A", "B"]);
    assert_eq!(accepted("REQUIRED_ENV = ('A',)\n"), ["A"]);
    assert_eq!(accepted("REQUIRED_ENV=['A','B',]\n"), ["A", "B"]);
    assert_eq!(
        accepted("REQUIRED_ENV: list[str] = [\"TAVILY_API_KEY\"]\n"),
        ["TAVILY_API_KEY"]
    );
    assert_eq!(
        accepted("REQUIRED_ENV = [r\"A\", u'B', \"\"\"C\"\"\", '''D''']\n"),
        ["A", "B", "C", "D"]
    );
    // A name listed twice counts once.
    assert_eq!(accepted("REQUIRED_ENV = ['A', 'B', 'A']\n"), ["A", "B"]);
}

#[test]
fn required_env_multi_line_with_comments_and_trailing_comma() {
    let code = r#""""A tool. REQUIRED_ENV = ["NOT_THIS"] in a docstring is text."""
import os  # REQUIRED_ENV = ["NOR_THIS"]
from mcp.server.mcpserver import MCPServer

REQUIRED_ENV = [
    "TAVILY_API_KEY",   # search
    # "COMMENTED_OUT",
    'OTHER_KEY',
]

mcp = MCPServer("t")

@mcp.tool()
def search(q: str) -> str:
    missing = [k for k in REQUIRED_ENV if k not in os.environ]
    self_ref = f"{REQUIRED_ENV!r:>{len(q)}} {q['x'] if False else ''}"
    os.environ.get(REQUIRED_ENV[0])
    helper(REQUIRED_ENV=1)
    return str(missing)

class Config:
    def __init__(self):
        self.REQUIRED_ENV = ["ATTRIBUTE_OF_SELF"]

if __name__ == "__main__":
    mcp.run()
"#;
    assert_eq!(accepted(code), ["TAVILY_API_KEY", "OTHER_KEY"]);
    assert_eq!(
        accepted("REQUIRED_ENV = \\\n    ['A']\n\nx = 1\n"),
        ["A"],
        "a line continuation"
    );
    assert_eq!(accepted("\u{feff}REQUIRED_ENV = ['A']\r\nx = 1\r\n"), ["A"]);
    let reads = "REQUIRED_ENV = ['A']\nwith open('f') as fh, ctx(REQUIRED_ENV):\n    for k in REQUIRED_ENV: print(k, REQUIRED_ENV.index(k))\nf = lambda: REQUIRED_ENV\n";
    assert_eq!(accepted(reads), ["A"]);
}

/// The reader is linear: a file near the size cap that names `REQUIRED_ENV` on every line, or
/// thousands of times in one expression, is read at once.
#[test]
fn required_env_reads_large_files_quickly() {
    let many_lines = format!(
        "REQUIRED_ENV = ['A']\n{}",
        "print(REQUIRED_ENV, REQUIRED_ENV)\n".repeat(7_000)
    );
    let one_line = format!(
        "REQUIRED_ENV = ['A']\nx = [{}]\ny = 0 {}\n",
        "REQUIRED_ENV, ".repeat(8_000),
        "or REQUIRED_ENV ".repeat(8_000)
    );
    for code in [many_lines, one_line] {
        assert!(code.len() <= autotool::registry::DEFAULT_CODE_LIMIT);
        let t0 = Instant::now();
        assert_eq!(accepted(&code), ["A"]);
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "took {:?}",
            t0.elapsed()
        );
    }
}

#[test]
fn required_env_refuses_what_is_not_a_literal_list() {
    let cases: &[(&str, &str)] = &[
        (
            "KEY = 'A'\nREQUIRED_ENV = [KEY]\n",
            "`KEY` (a variable or call)",
        ),
        ("REQUIRED_ENV = [os.environ['A']]\n", "`os`"),
        ("REQUIRED_ENV = [f\"A\"]\n", "f-string"),
        ("REQUIRED_ENV = [F'A_{x}']\n", "f-string"),
        ("REQUIRED_ENV = [b'A']\n", "bytes"),
        ("REQUIRED_ENV = ['A'] + ['B']\n", "nothing may follow"),
        ("REQUIRED_ENV = ['A' + 'B']\n", "not built with `+`"),
        ("REQUIRED_ENV = ['A' 'B']\n", "implicit concatenation"),
        ("REQUIRED_ENV = KEYS\n", "must be a list literal"),
        ("REQUIRED_ENV = 'A'\n", "must be a list literal"),
        ("REQUIRED_ENV = {'A'}\n", "must be a list literal"),
        ("REQUIRED_ENV = list(('A',))\n", "must be a list literal"),
        ("REQUIRED_ENV = ('A')\n", "not a tuple"),
        ("REQUIRED_ENV = [k for k in 'AB']\n", "comprehension"),
        ("REQUIRED_ENV = ['A']; x = 1\n", "nothing may follow"),
        ("REQUIRED_ENV = OTHER = ['A']\n", "must be a list literal"),
        ("REQUIRED_ENV: list[str]\n", "no value"),
        ("REQUIRED_ENV = ['A'\n", "not closed"),
        ("REQUIRED_ENV = ['A\n", "not terminated"),
    ];
    for (code, why) in cases {
        let e = refused(code);
        assert!(e.contains(why), "{code:?}: expected {why:?} in: {e}");
    }
}

#[test]
fn required_env_refuses_names_that_are_not_upper_case_variables() {
    for name in [
        "api_key", "Api_Key", "1KEY", "A-B", "A B", "", "_A", "A\\x42", "ÄPI",
    ] {
        let code = format!("REQUIRED_ENV = [\"{name}\"]\n");
        let e = refused(&code);
        assert!(e.contains("line 1"), "{e}");
        assert!(
            e.contains("not an environment variable name"),
            "{code:?}: {e}"
        );
    }
    refused(&format!("REQUIRED_ENV = [\"{}\"]\n", "A".repeat(129)));
    assert_eq!(
        accepted(&format!("REQUIRED_ENV = [\"{}\"]\n", "A".repeat(128))).len(),
        1
    );
}

#[test]
fn required_env_refuses_assignments_outside_one_top_level_declaration() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "def setup():\n    REQUIRED_ENV = ['A']\n",
            "line 2",
            "inside a function, class or block",
        ),
        (
            "import sys\nif sys.platform == 'linux':\n    REQUIRED_ENV = ['A']\n",
            "line 3",
            "inside a function, class or block",
        ),
        (
            "class T:\n    REQUIRED_ENV = ['A']\n",
            "line 2",
            "inside a function",
        ),
        (
            "REQUIRED_ENV = ['A']\nx = 1\nREQUIRED_ENV = ['B']\n",
            "lines 1, 3",
            "more than once",
        ),
        (
            "REQUIRED_ENV = ['A']\nREQUIRED_ENV += ['B']\n",
            "line 2",
            "assigned with `+=`",
        ),
        (
            "REQUIRED_ENV = ['A']\nREQUIRED_ENV.append('B')\n",
            "line 2",
            "changed with `.append`",
        ),
        (
            "REQUIRED_ENV = ['A']\nREQUIRED_ENV[0] = 'B'\n",
            "line 2",
            "a target of `=`",
        ),
        (
            "x = 1; REQUIRED_ENV = ['A']\n",
            "line 1",
            "not as a top-level declaration line of its own",
        ),
        (
            "a, REQUIRED_ENV = 1, ['A']\n",
            "line 1",
            "assigned with `=`",
        ),
        ("x = REQUIRED_ENV = ['A']\n", "line 1", "assigned with `=`"),
        (
            "def f():\n    global REQUIRED_ENV\n    REQUIRED_ENV = ['A']\n",
            "line 2",
            "bound by `global`",
        ),
        (
            "REQUIRED_ENV = ['A']\ndel REQUIRED_ENV\n",
            "line 2",
            "bound by `del`",
        ),
        (
            "from config import REQUIRED_ENV\n",
            "line 1",
            "bound by `import`",
        ),
        (
            "from config import (\n    A,\n    REQUIRED_ENV,\n)\n",
            "line 3",
            "bound by `import`",
        ),
        ("import os as REQUIRED_ENV\n", "line 1", "bound by `as`"),
        (
            "for REQUIRED_ENV in [['A']]:\n    pass\n",
            "line 1",
            "bound by `for`",
        ),
        ("def f(REQUIRED_ENV):\n    pass\n", "line 1", "parameter"),
        (
            "if (REQUIRED_ENV := ['A']):\n    pass\n",
            "line 1",
            "assigned with `:=`",
        ),
    ];
    for (code, line, why) in cases {
        let e = refused(code);
        assert!(e.contains(line), "{code:?}: expected {line:?} in: {e}");
        assert!(e.contains(why), "{code:?}: expected {why:?} in: {e}");
    }
}

// ---------------------------------------------------------------------------------------------
// Lint

#[tokio::test]
async fn lint_names_the_line_of_a_syntax_error() {
    let python = test_runtime();
    let code = "import os\n\ndef broken(:\n    pass\n";
    let f = tokio::time::timeout(
        BOUND,
        verify::lint(
            &runtime::ruff(&python),
            code,
            &python.version,
            verify::LINT_TIMEOUT,
        ),
    )
    .await
    .unwrap()
    .unwrap_err();
    assert_eq!(f.stage, Stage::Lint);
    assert!(f.message.contains("line 3, column"), "{f}");
    assert!(f.log.contains("tool.py:3:"), "{f}");
    assert!(
        f.to_string().starts_with("verification failed at lint: "),
        "{f}"
    );
}

#[tokio::test]
async fn lint_catches_an_undefined_name_and_newer_syntax() {
    let python = test_runtime();
    let ruff = runtime::ruff(&python);
    let code = "def f() -> str:\n    return undefined_thing_42\n";
    let f = verify::lint(&ruff, code, &python.version, verify::LINT_TIMEOUT)
        .await
        .unwrap_err();
    assert!(f.message.contains("line 2"), "{f}");
    assert!(f.message.contains("F821"), "{f}");
    assert!(f.message.contains("undefined_thing_42"), "{f}");

    // Syntax the runtime's Python lacks is a lint failure on that Python.
    let pep701 = "d = {'k': 1}\nx = f\"{d[\"k\"]}\"\n";
    let on_runtime = verify::lint(&ruff, pep701, &python.version, verify::LINT_TIMEOUT).await;
    let on_313 = verify::lint(&ruff, pep701, "3.13", verify::LINT_TIMEOUT).await;
    assert!(on_313.is_ok(), "{on_313:?}");
    if python.version == "3.11" {
        let f = on_runtime.unwrap_err();
        assert!(f.message.contains("3.11"), "{f}");
    }

    let clean = "import os\n\ndef f() -> str:\n    return os.sep\n";
    verify::lint(&ruff, clean, &python.version, verify::LINT_TIMEOUT)
        .await
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// Whole verification, in both sandbox modes

const GOOD: &str = r#"
import os
from mcp.server.mcpserver import MCPServer

REQUIRED_ENV = ["VERIFY_TEST_KEY"]

mcp = MCPServer("verify_good")

@mcp.tool()
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"hello {name}"

@mcp.tool()
def key_prefix() -> str:
    """The first characters of the granted key."""
    return os.environ.get("VERIFY_TEST_KEY", "missing")[:4]

if __name__ == "__main__":
    mcp.run()
"#;

/// One scenario's surroundings: the mode, and staged directories.
struct Env {
    mode: SandboxMode,
    python: Python,
    launcher: Option<PathBuf>,
    dirs: Vec<TempDir>,
}

impl Env {
    /// A request for `code` in a fresh staged directory, granting `keys`.
    fn request(&mut self, code: &str, keys: &[(&str, &str)]) -> VerifyRequest {
        let dir = tempfile::Builder::new()
            .prefix("autotool-verify-")
            .tempdir()
            .unwrap();
        // The confined tool runs as another user of its namespace.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut spec = ToolSpec::new(dir.path(), "tool.py", self.python.clone(), self.mode);
        spec.launcher = self.launcher.clone();
        let keys: BTreeMap<String, String> = keys
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        spec.env = autotool_policy::launch::tool_environment(&keys, &BTreeMap::new(), None);
        self.dirs.push(dir);
        VerifyRequest::new(
            autotool_policy::names::ToolName::parse("verify_test").unwrap(),
            code,
            spec,
        )
    }

    /// Verify `code` granting `keys`, the request changed by `adjust` first.
    async fn verify(
        &mut self,
        code: &str,
        keys: &[(&str, &str)],
        adjust: impl FnOnce(&mut VerifyRequest),
    ) -> Result<Verified, VerifyFailure> {
        let mut req = self.request(code, keys);
        adjust(&mut req);
        verify::verify(req).await
    }

    /// [`Env::verify`] that must pass; the process is shut down.
    async fn passes(
        &mut self,
        code: &str,
        keys: &[(&str, &str)],
        adjust: impl FnOnce(&mut VerifyRequest),
    ) -> Result<Robustness> {
        let v = self
            .verify(code, keys, adjust)
            .await
            .map_err(|f| anyhow::anyhow!("verification failed: {f}"))?;
        v.process.shutdown().await;
        Ok(v.robustness)
    }

    /// [`Env::verify`] that must fail.
    async fn fails_with(
        &mut self,
        code: &str,
        keys: &[(&str, &str)],
        adjust: impl FnOnce(&mut VerifyRequest),
    ) -> Result<VerifyFailure> {
        match self.verify(code, keys, adjust).await {
            Ok(v) => {
                v.process.shutdown().await;
                bail!("verification passed: {:?}", v.robustness)
            }
            Err(f) => Ok(f),
        }
    }

    async fn fails(&mut self, code: &str, smoke: Option<SmokeTest>) -> Result<VerifyFailure> {
        let mut req = self.request(code, &[]);
        req.smoke_test = smoke;
        match verify::verify(req).await {
            Ok(v) => {
                v.process.shutdown().await;
                bail!("verification passed: {:?}", v.tools)
            }
            Err(f) => Ok(f),
        }
    }
}

/// Run `scenario` in `mode` within [`BOUND`].
async fn run<F, Fut>(name: &str, mode: SandboxMode, scenario: F)
where
    F: FnOnce(Env) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let Some(launcher) = launcher_for(name, mode) else {
        return;
    };
    let env = Env {
        mode,
        python: test_runtime(),
        launcher,
        dirs: Vec::new(),
    };
    match tokio::time::timeout(BOUND, scenario(env)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("{name} ({mode:?}): {e:#}"),
        Err(_) => panic!("{name} ({mode:?}): still running after {BOUND:?}"),
    }
}

/// Each scenario as `<name>::strict` and `<name>::off`.
macro_rules! in_both_modes {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn strict() {
                run(stringify!($name), SandboxMode::Strict, super::$name).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn off() {
                run(stringify!($name), SandboxMode::Off, super::$name).await
            }
        }
    )*};
}

in_both_modes!(
    a_good_tool_passes_every_stage,
    an_exception_at_import_fails_initialize_with_the_traceback,
    a_tool_without_functions_fails_list_tools,
    a_smoke_test_that_raises_fails_with_the_traceback,
    a_smoke_test_with_a_tool_error_fails_with_its_message,
    a_tool_that_never_answers_initialize_fails_within_the_bound,
    a_crash_on_an_empty_string_fails_robustness_with_the_traceback,
    a_crash_on_zero_fails_robustness,
    a_function_that_ends_the_process_fails_robustness,
    tool_errors_on_edge_input_pass_and_the_process_serves_on,
    a_tool_with_keys_is_probed_only_when_thorough,
    a_probe_that_hangs_is_bounded,
    probes_stop_at_the_time_budget,
    a_declared_relation_is_checked_on_the_examples_inputs,
    a_broken_relation_is_named_with_both_inputs_and_answers_redacted,
);

fn args(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn text(outcome: &CallOutcome) -> String {
    outcome
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn a_good_tool_passes_every_stage(mut env: Env) -> Result<()> {
    // As the server will: read the declaration first, grant the keys, then verify.
    let declared = verify::check_source(GOOD, &env.python, verify::LINT_TIMEOUT).await?;
    ensure!(declared == ["VERIFY_TEST_KEY"], "{declared:?}");
    let mut req = env.request(GOOD, &[("VERIFY_TEST_KEY", "k-12345")]);
    req.smoke_test = Some(SmokeTest {
        function: "greet".into(),
        arguments: args(json!({"name": "ada"})),
    });
    let staged = req.spec.tool_dir.join("tool.py");
    let t0 = Instant::now();
    // It declares a key: only `thorough` probes it.
    req.thoroughness = Thoroughness::Thorough;
    let Verified {
        process,
        tools,
        required_env,
        smoke,
        robustness,
        timings,
        ..
    } = verify::verify(req)
        .await
        .map_err(|f| anyhow::anyhow!("{f}"))?;
    let took = t0.elapsed();
    ensure!(
        std::fs::read_to_string(&staged)? == GOOD,
        "the code was not staged"
    );
    ensure!(required_env == ["VERIFY_TEST_KEY"], "{required_env:?}");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    ensure!(names == ["greet", "key_prefix"], "{names:?}");
    ensure!(
        tools[0].input_schema.get("type") == Some(&json!("object")),
        "{:?}",
        tools[0].input_schema
    );
    let smoke = smoke.context("no smoke outcome")?;
    ensure!(!smoke.is_error && text(&smoke) == "hello ada", "{smoke:?}");
    ensure!(
        smoke.structured_content == Some(json!({"result": "hello ada"})),
        "{smoke:?}"
    );
    let stages: Vec<Stage> = timings.iter().map(|t| t.0).collect();
    // Every stage but packages, which the library runs before verification (consent is asked
    // about the resolved set in between).
    let verified: Vec<Stage> = Stage::ALL
        .into_iter()
        .filter(|s| *s != Stage::Packages)
        .collect();
    ensure!(stages == verified, "{stages:?}");
    ensure!(
        matches!(robustness, Robustness::Probed { made, planned, .. } if made == planned && made > 5),
        "{robustness:?}"
    );

    // The verified process stays warm and serves, with the granted key.
    ensure!(process.is_alive());
    let first = process.call("key_prefix", Map::new(), BOUND).await?;
    ensure!(text(&first) == "k-12", "{first:?}");
    eprintln!(
        "TIMING verify {:?} end to end: {took:?} ({}); first call on the verified process {:?}",
        env.mode,
        timings
            .iter()
            .map(|(s, d)| format!("{s} {d:.1?}"))
            .collect::<Vec<_>>()
            .join(", "),
        first.duration
    );
    let report = process.shutdown().await;
    ensure!(!report.killed, "{report:?}");
    Ok(())
}

async fn an_exception_at_import_fails_initialize_with_the_traceback(mut env: Env) -> Result<()> {
    let code = "import json\nfrom mcp.server.mcpserver import MCPServer\nmcp = MCPServer('t')\nraise RuntimeError('broken at import 9c1d')\nmcp.run()\n";
    let f = env.fails(code, None).await?;
    ensure!(f.stage == Stage::Initialize, "{f}");
    ensure!(f.log.contains("Traceback (most recent call last)"), "{f}");
    ensure!(f.log.contains("RuntimeError: broken at import 9c1d"), "{f}");
    ensure!(f.message.contains("before answering `initialize`"), "{f}");
    ensure!(
        f.message.contains(
            "it raised RuntimeError: broken at import 9c1d (tool.py, line 4, in <module>)"
        ),
        "{f}"
    );
    let shown = f.to_string();
    ensure!(
        shown.starts_with("verification failed at initialize: "),
        "{shown}"
    );
    ensure!(shown.contains("broken at import 9c1d"), "{shown}");
    Ok(())
}

async fn a_tool_without_functions_fails_list_tools(mut env: Env) -> Result<()> {
    let code = "from mcp.server.mcpserver import MCPServer\nmcp = MCPServer('empty')\n\ndef not_registered() -> str:\n    return 'x'\n\nif __name__ == '__main__':\n    mcp.run()\n";
    let f = env.fails(code, None).await?;
    ensure!(f.stage == Stage::ListTools, "{f}");
    ensure!(f.message.contains("no functions"), "{f}");
    ensure!(f.message.contains("@mcp.tool()"), "{f}");
    Ok(())
}

const SMOKY: &str = r#"
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

mcp = MCPServer("verify_smoke")

@mcp.tool()
def divide(a: int, b: int) -> str:
    """Divides."""
    return str(a / b)

@mcp.tool()
def fetch(url: str) -> str:
    """Refuses, as a tool should when it cannot do its job."""
    raise ToolError(f"cannot fetch {url}: 401 from upstream 5e2b")

if __name__ == "__main__":
    mcp.run()
"#;

async fn a_smoke_test_that_raises_fails_with_the_traceback(mut env: Env) -> Result<()> {
    let smoke = SmokeTest {
        function: "divide".into(),
        arguments: args(json!({"a": 1, "b": 0})),
    };
    let f = env.fails(SMOKY, Some(smoke)).await?;
    ensure!(f.stage == Stage::SmokeTest, "{f}");
    ensure!(f.message.contains("divide({\"a\":1,\"b\":0})"), "{f}");
    ensure!(f.message.contains("traceback is below"), "{f}");
    ensure!(
        f.message
            .contains("raised ZeroDivisionError: division by zero (tool.py, line 10, in divide)"),
        "{f}"
    );
    ensure!(f.log.contains("Traceback (most recent call last)"), "{f}");
    ensure!(f.log.contains("ZeroDivisionError"), "{f}");

    // A smoke test naming a function the tool lacks.
    let smoke = SmokeTest {
        function: "multiply".into(),
        arguments: Map::new(),
    };
    let f = env.fails(SMOKY, Some(smoke)).await?;
    ensure!(f.stage == Stage::SmokeTest, "{f}");
    ensure!(f.message.contains("divide, fetch"), "{f}");
    Ok(())
}

async fn a_smoke_test_with_a_tool_error_fails_with_its_message(mut env: Env) -> Result<()> {
    let smoke = SmokeTest {
        function: "fetch".into(),
        arguments: args(json!({"url": "https://example.test/"})),
    };
    let f = env.fails(SMOKY, Some(smoke)).await?;
    ensure!(f.stage == Stage::SmokeTest, "{f}");
    ensure!(
        f.message
            .contains("cannot fetch https://example.test/: 401 from upstream 5e2b"),
        "{f}"
    );
    ensure!(!f.log.contains("Traceback"), "{f}");
    Ok(())
}

async fn a_tool_that_never_answers_initialize_fails_within_the_bound(mut env: Env) -> Result<()> {
    let code =
        "import sys, time\nprint('thinking', file=sys.stderr, flush=True)\ntime.sleep(600)\n";
    let mut req = env.request(code, &[]);
    req.spec.start_timeout = Duration::from_secs(3);
    let t0 = Instant::now();
    let f = match verify::verify(req).await {
        Ok(v) => {
            v.process.shutdown().await;
            bail!("verification passed")
        }
        Err(f) => f,
    };
    let took = t0.elapsed();
    ensure!(f.stage == Stage::Initialize, "{f}");
    ensure!(
        f.message.contains("no answer to `initialize` within 3 s"),
        "{f}"
    );
    ensure!(f.log.contains("thinking"), "{f}");
    ensure!(took < Duration::from_secs(8), "took {took:?}");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Robustness probes

/// A tool whose functions crash on edge input, each on its own kind.
const FRAGILE: &str = r#"
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("verify_fragile")

@mcp.tool()
def initial(text: str) -> str:
    """The first letter."""
    return text[0]

if __name__ == "__main__":
    mcp.run()
"#;

async fn a_crash_on_an_empty_string_fails_robustness_with_the_traceback(
    mut env: Env,
) -> Result<()> {
    let f = env.fails_with(FRAGILE, &[], |_| {}).await?;
    ensure!(f.stage == Stage::Robustness, "{f}");
    ensure!(
        f.message
            .contains("the probe initial({\"text\":\"\"}) (text: empty string) raised IndexError: string index out of range (tool.py, line 9, in initial)"),
        "{f}"
    );
    ensure!(f.log.contains("Traceback (most recent call last)"), "{f}");
    ensure!(f.log.contains("return text[0]"), "{f}");
    let shown = f.to_string();
    ensure!(
        shown.starts_with("verification failed at robustness: "),
        "{shown}"
    );
    ensure!(shown.contains("raise ToolError"), "{shown}");
    ensure!(shown.contains("\"verify\": \"quick\""), "{shown}");

    // The same tool with verify "quick": not probed, mounted as it is.
    let robustness = env
        .passes(FRAGILE, &[], |r| r.thoroughness = Thoroughness::Quick)
        .await?;
    ensure!(
        robustness == Robustness::Skipped(Skipped::Quick),
        "{robustness:?}"
    );
    Ok(())
}

async fn a_crash_on_zero_fails_robustness(mut env: Env) -> Result<()> {
    let code = r#"
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("verify_average")

@mcp.tool()
def average(total: float, count: int = 1) -> float:
    """The mean of `count` items summing to `total`."""
    return total / count

if __name__ == "__main__":
    mcp.run()
"#;
    let f = env.fails_with(code, &[], |_| {}).await?;
    ensure!(f.stage == Stage::Robustness, "{f}");
    ensure!(
        f.message
            .contains("average({\"count\":0,\"total\":1.0}) (count: 0) raised ZeroDivisionError"),
        "{f}"
    );
    ensure!(f.log.contains("ZeroDivisionError"), "{f}");
    Ok(())
}

async fn a_function_that_ends_the_process_fails_robustness(mut env: Env) -> Result<()> {
    let code = r#"
import os, sys
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("verify_quitter")

@mcp.tool()
def shout(text: str) -> str:
    """Loud, and it gives up on long text."""
    if len(text) > 1000:
        print("too long, bye", file=sys.stderr, flush=True)
        os._exit(3)
    return text.upper()

if __name__ == "__main__":
    mcp.run()
"#;
    let f = env.fails_with(code, &[], |_| {}).await?;
    ensure!(f.stage == Stage::Robustness, "{f}");
    ensure!(f.message.contains("(text: a 100 KiB string)"), "{f}");
    ensure!(f.message.contains("… [102400 characters]"), "{f}");
    ensure!(f.message.contains("exit status 3"), "{f}");
    ensure!(f.log.contains("too long, bye"), "{f}");
    Ok(())
}

/// Edge input answered with results and ToolErrors, as a tool should.
const STURDY: &str = r#"
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

mcp = MCPServer("verify_sturdy")

@mcp.tool()
def initial(text: str) -> str:
    """The first letter."""
    if not text:
        raise ToolError("text is empty: give at least one character")
    return text[0]

@mcp.tool()
def average(total: float, count: int = 1, label: str | None = None) -> str:
    """The mean of `count` items summing to `total`."""
    if count <= 0:
        raise ToolError("count must be at least 1")
    return f"{label or 'mean'}: {total / count}"

@mcp.tool()
def flags(items: list[str], strict: bool = False) -> int:
    """How many items."""
    return len(items)

if __name__ == "__main__":
    mcp.run()
"#;

async fn tool_errors_on_edge_input_pass_and_the_process_serves_on(mut env: Env) -> Result<()> {
    let v = env
        .verify(STURDY, &[], |_| {})
        .await
        .map_err(|f| anyhow::anyhow!("{f}"))?;
    let (made, took) = match v.robustness {
        Robustness::Probed {
            made,
            planned,
            took,
        } => {
            ensure!(made == planned, "{:?}", v.robustness);
            (made, took)
        }
        other => bail!("not probed: {other:?}"),
    };
    ensure!(made > 15, "{made} probes");
    ensure!(
        v.robustness.to_string() == format!("{made} edge-case probes answered without a crash"),
        "{}",
        v.robustness
    );
    // The probed process is the one mounted: alive, and serving.
    ensure!(v.process.is_alive());
    let answer = v
        .process
        .call("initial", args(json!({"text": "probe"})), BOUND)
        .await?;
    ensure!(text(&answer) == "p", "{answer:?}");
    eprintln!(
        "TIMING robustness {:?}: {made} probes in {took:?}",
        env.mode
    );
    v.process.shutdown().await;
    Ok(())
}

/// It declares a key, and crashes on "".
const KEYED_FRAGILE: &str = r#"
import os
from mcp.server.mcpserver import MCPServer

REQUIRED_ENV = ["VERIFY_PROBE_KEY"]
mcp = MCPServer("verify_keyed")

@mcp.tool()
def initial(text: str) -> str:
    """The first letter, after asking an API that costs money per call."""
    return text[0]

if __name__ == "__main__":
    mcp.run()
"#;

async fn a_tool_with_keys_is_probed_only_when_thorough(mut env: Env) -> Result<()> {
    let key = [("VERIFY_PROBE_KEY", "k-probe")];
    let robustness = env.passes(KEYED_FRAGILE, &key, |_| {}).await?;
    ensure!(
        robustness == Robustness::Skipped(Skipped::DeclaresKeys),
        "{robustness:?}"
    );
    ensure!(
        robustness.to_string().contains("verify \"thorough\""),
        "{robustness}"
    );
    let f = env
        .fails_with(KEYED_FRAGILE, &key, |r| {
            r.thoroughness = Thoroughness::Thorough
        })
        .await?;
    ensure!(f.stage == Stage::Robustness, "{f}");
    ensure!(f.message.contains("IndexError"), "{f}");
    Ok(())
}

async fn a_probe_that_hangs_is_bounded(mut env: Env) -> Result<()> {
    let code = r#"
import time
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("verify_hang")

@mcp.tool()
def lookup(name: str) -> str:
    """Waits forever for an empty name."""
    while not name:
        time.sleep(1)
    return name

if __name__ == "__main__":
    mcp.run()
"#;
    let t0 = Instant::now();
    let f = env
        .fails_with(code, &[], |r| r.probe_timeout = Duration::from_secs(1))
        .await?;
    let took = t0.elapsed();
    ensure!(f.stage == Stage::Robustness, "{f}");
    ensure!(
        f.message
            .contains("lookup({\"name\":\"\"}) (name: empty string)"),
        "{f}"
    );
    ensure!(f.message.contains("no answer within 1.0 s"), "{f}");
    ensure!(took < Duration::from_secs(10), "took {took:?}");
    Ok(())
}

async fn probes_stop_at_the_time_budget(mut env: Env) -> Result<()> {
    let code = r#"
import time
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("verify_slow")

@mcp.tool()
def slow(text: str, n: int = 0) -> str:
    """Takes its time, and answers."""
    time.sleep(0.3)
    return f"ok: {len(text)} characters, n={n}"

if __name__ == "__main__":
    mcp.run()
"#;
    let t0 = Instant::now();
    let robustness = env
        .passes(code, &[], |r| r.probe_budget = Duration::from_secs(1))
        .await?;
    let took = t0.elapsed();
    match robustness {
        Robustness::Probed { made, planned, .. } => {
            ensure!((2..=5).contains(&made) && planned == 10, "{robustness:?}");
            ensure!(
                robustness
                    .to_string()
                    .contains("did not fit the time budget"),
                "{robustness}"
            );
        }
        other => bail!("not probed: {other:?}"),
    }
    ensure!(took < Duration::from_secs(10), "took {took:?}");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Declared relations

/// A tool whose `find` answers by a code written with padding, in any case: `normalise` is
/// the body that reads the code (`code.strip().upper()` keeps the relations, `code` breaks
/// them), `relations` the declaration (or nothing).
fn coded(normalise: &str, relations: &str) -> String {
    format!(
        r#"from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

EXAMPLES = [{{"function": "find", "arguments": {{"code": "FR"}}, "expect": "France"}}]
{relations}
COUNTRIES = {{"FR": "France", "DE": "Germany"}}
mcp = MCPServer("countries")

@mcp.tool()
def find(code: str) -> str:
    """The country with this code."""
    name = COUNTRIES.get({normalise})
    if name is None:
        raise ToolError("no country " + repr(code))
    return name

if __name__ == "__main__":
    mcp.run()
"#
    )
}

const CASE_AND_PADDING: &str = r#"RELATIONS = [
    {"function": "find", "argument": "code", "transform": "lower"},
    {"function": "find", "argument": "code", "transform": "surrounding_whitespace"},
]"#;

async fn a_declared_relation_is_checked_on_the_examples_inputs(mut env: Env) -> Result<()> {
    let kept = coded("code.strip().upper()", CASE_AND_PADDING);
    let v = env
        .verify(&kept, &[], |_| {})
        .await
        .map_err(|f| anyhow::anyhow!("{f}"))?;
    v.process.shutdown().await;
    let relations: Vec<String> = v
        .verdicts
        .iter()
        .filter(|v| v.check == verify::verdicts::Check::Relation)
        .map(ToString::to_string)
        .collect();
    ensure!(
        relations
            == [
                "find: relation 1 passed (code in lower case: kept on 1 input: find({\"code\":\"FR\"}) and find({\"code\":\"fr\"}) both answered \"France\")",
                "find: relation 2 passed (code padded with spaces: kept on 1 input: find({\"code\":\"FR\"}) and find({\"code\":\"  FR  \"}) both answered \"France\")",
            ],
        "{relations:#?}"
    );
    // Both relations, on the example's input, are what this version leaves to the baseline.
    let owed: Vec<String> = v
        .met
        .iter()
        .filter(|o| o.relation.is_some())
        .map(|o| o.shown())
        .collect();
    ensure!(
        owed == [
            "relation find({\"code\":\"FR\"}) unchanged with code in lower case, from v0",
            "relation find({\"code\":\"FR\"}) unchanged with code padded with spaces, from v0",
        ],
        "{owed:?}"
    );

    // An unknown transform stops at declarations, before anything runs, saying what to write.
    let unknown = coded(
        "code.strip().upper()",
        r#"RELATIONS = [{"function": "find", "argument": "code", "transform": "title_case"}]"#,
    );
    let f = env.fails_with(&unknown, &[], |_| {}).await?;
    ensure!(f.stage == Stage::Declarations, "{f}");
    ensure!(
        f.message
            .contains("\"title_case\" is not a transform autotool knows; the transforms are surrounding_whitespace, upper, lower, prefix, suffix, reverse, rotate"),
        "{f}"
    );
    // A relation on an argument the function does not take would hold of any function.
    let stray = coded(
        "code.strip().upper()",
        r#"RELATIONS = [{"function": "find", "argument": "country", "transform": "upper"}]"#,
    )
    .replace(r#"{"code": "FR"}"#, r#"{"code": "FR", "country": "fr"}"#);
    let f = env.fails_with(&stray, &[], |_| {}).await?;
    ensure!(f.stage == Stage::Relations, "{f}");
    ensure!(
        f.message.contains(
            "RELATIONS entry 1: find takes no argument \"country\" (its arguments: code)"
        ),
        "{f}"
    );
    Ok(())
}

async fn a_broken_relation_is_named_with_both_inputs_and_answers_redacted(
    mut env: Env,
) -> Result<()> {
    let broken = coded("code", CASE_AND_PADDING);
    let f = env.fails_with(&broken, &[], |_| {}).await?;
    ensure!(f.stage == Stage::Relations, "{f}");
    let text = f.to_string();
    for needle in [
        "verification failed at relations: verdict relation 1 failed for find",
        "RELATIONS entry 1 says its answer does not change with code in lower case",
        "but find({\"code\":\"FR\"}) answered \"France\" and find({\"code\":\"fr\"}) answered the error \"Error executing tool find: no country 'fr'\"",
        "remove the relation if it should not hold",
    ] {
        ensure!(text.contains(needle), "no {needle:?} in:\n{text}");
    }
    // Control: the same tool without the declaration verifies.
    env.passes(&coded("code", ""), &[], |_| {}).await?;

    // A tool holding a key is called only when thorough (the relations are skipped otherwise,
    // and say so); its answers reach the message redacted.
    let keyed = coded("code", CASE_AND_PADDING)
        .replace(
            "from mcp.server.mcpserver import MCPServer\n",
            "import os\nfrom mcp.server.mcpserver import MCPServer\n\nREQUIRED_ENV = [\"VERIFY_RELATION_KEY\"]\n",
        )
        .replace(
            "raise ToolError(\"no country \" + repr(code))",
            "raise ToolError(\"no country \" + repr(code) + \" for \" + os.environ[\"VERIFY_RELATION_KEY\"])",
        );
    let key = [("VERIFY_RELATION_KEY", "rk-7f3a9c41e2")];
    let redactor = std::sync::Arc::new(autotool::redact::Redactor::new(&key).unwrap());
    let v = env
        .verify(&keyed, &key, |r| r.redactor = Some(redactor.clone()))
        .await
        .map_err(|f| anyhow::anyhow!("{f}"))?;
    v.process.shutdown().await;
    let skipped: Vec<String> = v
        .verdicts
        .iter()
        .filter(|v| v.check == verify::verdicts::Check::Relation)
        .map(|v| v.outcome.name().to_string() + ": " + &v.detail)
        .collect();
    ensure!(
        skipped.len() == 2
            && skipped
                .iter()
                .all(|v| v.starts_with("skipped: ") && v.contains("verify \"thorough\"")),
        "{skipped:?}"
    );
    let f = env
        .fails_with(&keyed, &key, |r| {
            r.redactor = Some(redactor.clone());
            r.thoroughness = Thoroughness::Thorough;
        })
        .await?;
    let text = f.to_string();
    ensure!(f.stage == Stage::Relations, "{text}");
    ensure!(
        text.contains("find({\"code\":\"FR\"}) answered \"France\" and find({\"code\":\"fr\"}) answered the error \"Error executing tool find: no country 'fr' for [REDACTED:VERIFY_RELATION_KEY]\""),
        "{text}"
    );
    ensure!(!text.contains("rk-7f3a9c41e2"), "{text}");
    Ok(())
}

/// Stages that need no process fail the same way in either mode.
#[tokio::test]
async fn static_failures_stop_before_launch() {
    let mut env = Env {
        mode: SandboxMode::Off,
        python: test_runtime(),
        launcher: None,
        dirs: Vec::new(),
    };
    let work = async {
        let f = env.fails("def f(:\n", None).await?;
        ensure!(f.stage == Stage::Lint, "{f}");
        let f = env.fails("   \n", None).await?;
        ensure!(f.stage == Stage::Lint && f.message.contains("empty"), "{f}");
        let f = env
            .fails("import os\nREQUIRED_ENV = [os.environ['X']]\n", None)
            .await?;
        ensure!(f.stage == Stage::Declarations, "{f}");
        ensure!(f.message.contains("line 2"), "{f}");
        ensure!(
            f.to_string()
                .starts_with("verification failed at declarations: line 2"),
            "{f}"
        );
        // Nothing was staged or started.
        for dir in &env.dirs {
            ensure!(!dir.path().join("tool.py").exists());
        }
        Ok(())
    };
    tokio::time::timeout(BOUND, work).await.unwrap().unwrap();
}

// ---------------------------------------------------------------------------------------------
// The runtime

/// With `$AUTOTOOL_RUNTIME` set, `ensure_runtime` opens that environment and creates nothing.
/// The variable is set by running this test again as a child process (tests may not change
/// their own environment); `AUTOTOOL_RUNTIME_TEST_EXPECT=error` makes the child expect refusal.
#[test]
fn ensure_runtime_uses_autotool_runtime_as_is() {
    const NAME: &str = "ensure_runtime_uses_autotool_runtime_as_is";
    bounded(NAME, || {
        let Some(set) = std::env::var_os("AUTOTOOL_RUNTIME") else {
            let parent = |runtime: &Path, expect: &str| {
                let out = std::process::Command::new(std::env::current_exe().unwrap())
                    .args(["--exact", NAME, "--test-threads=1", "--nocapture"])
                    .env("AUTOTOOL_RUNTIME", runtime)
                    .env("AUTOTOOL_RUNTIME_TEST_EXPECT", expect)
                    .output()
                    .unwrap();
                let stdout = String::from_utf8_lossy(&out.stdout);
                assert!(
                    out.status.success() && stdout.contains("1 passed"),
                    "child ({expect}) failed:\n{stdout}\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            };
            parent(&test_runtime_dir(), "ok");
            parent(Path::new("/nonexistent/autotool-runtime"), "error");
            return;
        };
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("runtime");
        let mut progress = Vec::new();
        let got = runtime::ensure_runtime(&dir, &mut progress);
        let expect = std::env::var("AUTOTOOL_RUNTIME_TEST_EXPECT").unwrap_or_default();
        if expect == "error" {
            let e = got.unwrap_err();
            let shown = e.to_string();
            assert!(shown.starts_with("AUTOTOOL_RUNTIME="), "{shown}");
            assert!(shown.contains("unset it"), "{shown}");
        } else {
            let python = got.unwrap();
            assert_eq!(python, runtime::open_runtime(Path::new(&set)).unwrap());
            assert!(runtime::ruff(&python).is_file());
        }
        assert!(
            progress.is_empty(),
            "{}",
            String::from_utf8_lossy(&progress)
        );
        assert_eq!(
            std::fs::read_dir(home.path()).unwrap().count(),
            0,
            "something was created"
        );
    });
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// Creating a runtime, offline: a virtual environment with nothing to install.
#[test]
fn ensure_venv_creates_reuses_and_replaces_a_runtime() {
    bounded("ensure_venv_creates_reuses_and_replaces_a_runtime", || {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("runtime");
        // What a killed creator would have left.
        std::fs::create_dir(home.path().join(".runtime-build-killed")).unwrap();

        let t0 = Instant::now();
        let mut progress = Vec::new();
        let python = runtime::ensure_venv(&dir, &[], &mut progress).unwrap();
        let created_in = t0.elapsed();
        let said = String::from_utf8_lossy(&progress).into_owned();
        assert!(said.contains("creating the Python runtime"), "{said}");
        assert!(said.contains("the tool runtime is ready"), "{said}");
        assert_eq!(python.interpreter, dir.join("bin/python3"));
        assert_eq!(python.venv.as_deref(), Some(dir.as_path()), "{python:?}");
        let stamp = std::fs::read_to_string(dir.join(runtime::RUNTIME_STAMP)).unwrap();
        assert!(
            stamp.starts_with("# The tool runtime autotool created"),
            "{stamp}"
        );
        assert_eq!(mode(&dir), 0o755);
        assert_eq!(mode(&dir.join("bin")), 0o755);
        assert!(mode(&dir.join("pyvenv.cfg")) & 0o444 == 0o444);
        // Scripts name the final place, not the directory it was built in.
        let activate = std::fs::read_to_string(dir.join("bin/activate")).unwrap();
        assert!(activate.contains(&dir.display().to_string()), "{activate}");
        assert!(!activate.contains("-build-"), "{activate}");
        // Nothing is left beside it but the lock file and the private directories uv and pip
        // run in (the home's `cache/` and `work/`, 0700).
        let mut beside: Vec<String> = std::fs::read_dir(home.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        beside.sort();
        assert_eq!(beside, ["cache", "runtime", "runtime.lock", "work"]);
        assert_eq!(mode(&home.path().join("cache")), 0o700);
        assert_eq!(mode(&home.path().join("work")), 0o700);

        // Ready: used as it is.
        let mut progress = Vec::new();
        assert_eq!(
            runtime::ensure_venv(&dir, &[], &mut progress).unwrap(),
            python
        );
        assert!(
            progress.is_empty(),
            "{}",
            String::from_utf8_lossy(&progress)
        );

        // A stamp listing other requirements is replaced, and the old runtime goes.
        std::fs::write(dir.join(runtime::RUNTIME_STAMP), "mcp==1.0.0\n").unwrap();
        std::fs::write(dir.join("old-marker"), "").unwrap();
        let mut progress = Vec::new();
        runtime::ensure_venv(&dir, &[], &mut progress).unwrap();
        assert!(String::from_utf8_lossy(&progress).contains("creating"));
        assert!(!dir.join("old-marker").exists());
        assert_eq!(std::fs::read_dir(home.path()).unwrap().count(), 4);
        eprintln!("TIMING ensure_venv without packages: created in {created_in:?}");
    });
}

/// Two creators at once: one builds, the other waits and finds it ready.
#[test]
fn concurrent_creators_build_one_runtime() {
    bounded("concurrent_creators_build_one_runtime", || {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("runtime");
        let creators: Vec<_> = (0..3)
            .map(|_| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    let mut progress = Vec::new();
                    let python = runtime::ensure_venv(&dir, &[], &mut progress).unwrap();
                    (python, String::from_utf8_lossy(&progress).into_owned())
                })
            })
            .collect();
        let results: Vec<(Python, String)> =
            creators.into_iter().map(|h| h.join().unwrap()).collect();
        let built = results
            .iter()
            .filter(|(_, said)| said.contains("creating the Python runtime"))
            .count();
        assert_eq!(built, 1, "{results:?}");
        assert!(results.iter().all(|(p, _)| p == &results[0].0));
        assert!(dir.join(runtime::RUNTIME_STAMP).is_file());
    });
}

/// The real thing: `pip install` of the pinned requirements from PyPI. Only with
/// `AUTOTOOL_TEST_PIP=1` (it needs the network and takes a minute).
#[test]
fn ensure_venv_installs_the_pinned_requirements() {
    if std::env::var_os("AUTOTOOL_TEST_PIP").is_none_or(|v| v != "1") {
        eprintln!(
            "SKIP ensure_venv_installs_the_pinned_requirements: set AUTOTOOL_TEST_PIP=1 to run a real pip install (needs PyPI)"
        );
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("runtime");
    let t0 = Instant::now();
    let mut progress = Vec::new();
    let python = runtime::ensure_venv(&dir, &runtime::RUNTIME_REQUIREMENTS, &mut progress)
        .unwrap_or_else(|e| panic!("{e}\n{}", String::from_utf8_lossy(&progress)));
    eprintln!(
        "{}TIMING ensure_venv with {}: {:?}",
        String::from_utf8_lossy(&progress),
        runtime::RUNTIME_REQUIREMENTS.join(" "),
        t0.elapsed()
    );
    assert!(runtime::ruff(&python).is_file());
    let out = std::process::Command::new(&python.interpreter)
        .args([
            "-I",
            "-c",
            "import mcp, httpx2; from mcp.server.mcpserver import MCPServer",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Console scripts were rewritten to the final place.
    let pip = std::fs::read_to_string(dir.join("bin/pip")).unwrap();
    assert!(
        pip.starts_with(&format!("#!{}", dir.join("bin/python3").display())),
        "{pip}"
    );
}
