//! packages-bench: what declaring packages (`REQUIRED_PACKAGES`) costs, measured side by side in
//! one run against a PEP 503 index served on loopback over wheels the bench builds (a pure
//! package with a dependency, and a CPython extension compiled for the runtime).
//!
//! On one strict `autotool serve` (`--dangerously-allow-all-tools`, so no question is asked),
//! each round creates, in turn:
//! - `plain`: a tool with no packages;
//! - `cold`: a tool with a package set never seen before (a package new to the round joins the
//!   shared ones): resolved, downloaded and installed into a new layer;
//! - `warm`: a second tool with the same set as `cold`: resolved again, its layer shared.
//!
//! The target is warm ≤ plain + 50 ms. Then the layer's cost at launch: the same tool started
//! through the launcher (spawn to `initialize` answered) with the layer mounted at `/packages`
//! and without, alternating.

use anyhow::{Context, Result, bail};
use autotool::tool::process::{SandboxMode, ToolProcess, ToolSpec};
use autotool_tests::index::{Index, Wheel};
use autotool_tests::serve::{Sandbox, Serve, ServeHome, Server};
use clap::Parser;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// What warm may add to plain.
const TARGET_MS: f64 = 50.0;

#[derive(Parser, Debug)]
#[command(about = "What declaring packages costs a tool: create and launch, side by side")]
struct Args {
    /// Rounds of plain, cold and warm creates.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Launches with and without the layer, each.
    #[arg(long, default_value_t = 15)]
    launches: usize,
    /// The autotool binary [default: beside this one]
    #[arg(long)]
    autotool: Option<PathBuf>,
    /// uv [default: $AUTOTOOL_TEST_UV or /opt/autotool-test-uv/bin/uv]
    #[arg(long)]
    uv: Option<PathBuf>,
}

const FASTCALC_C: &str = r#"
#define PY_SSIZE_T_CLEAN
#include <Python.h>
static PyObject *answer(PyObject *self, PyObject *args) { return PyLong_FromLong(42); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, "42"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "fastcalc", NULL, -1, methods};
PyMODINIT_FUNC PyInit_fastcalc(void) { return PyModule_Create(&module); }
"#;

/// A tool declaring `packages` (a Python list literal) and importing `imports`.
fn tool(packages: &str, imports: &str) -> String {
    format!(
        "from mcp.server.mcpserver import MCPServer\n{imports}\n\nREQUIRED_PACKAGES = {packages}\n\
         mcp = MCPServer(\"bench\")\n\n@mcp.tool()\ndef ping() -> str:\n    \"\"\"Answer pong.\"\"\"\n    \
         return \"pong\"\n\nif __name__ == \"__main__\":\n    mcp.run()\n"
    )
}

fn main() -> ExitCode {
    let args = Args::parse();
    // The harness finds serve through the environment; set it for a run of this same binary
    // (no `unsafe` `set_var` here).
    if std::env::var_os("AUTOTOOL_BIN").is_none() {
        return match reexec(&args) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("packages-bench: {e:#}");
                ExitCode::from(2)
            }
        };
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("packages-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn reexec(args: &Args) -> Result<ExitCode> {
    let me = std::env::current_exe().context("locating this binary")?;
    let autotool = args
        .autotool
        .clone()
        .unwrap_or_else(|| me.with_file_name("autotool"));
    if !autotool.is_file() {
        bail!(
            "autotool not found at {}: build it with `cargo build --release -p autotool -p \
             autotool-launcher` or pass --autotool PATH",
            autotool.display()
        );
    }
    let status = std::process::Command::new(&me)
        .args(std::env::args_os().skip(1))
        .env("AUTOTOOL_BIN", &autotool)
        .status()
        .context("running the bench")?;
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn median_ms(sample: &[Duration]) -> f64 {
    let mut ms: Vec<f64> = sample.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    match ms.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => ms[n / 2],
        n => (ms[n / 2 - 1] + ms[n / 2]) / 2.0,
    }
}

fn create(server: &mut Server, name: &str, code: &str) -> Result<Duration> {
    let started = Instant::now();
    let r = server.call_result(
        "create_tool",
        json!({"name": name, "code": code, "verify": "quick"}),
    )?;
    let took = started.elapsed();
    if r.is_error {
        bail!("creating {name} failed: {}", r.text);
    }
    Ok(took)
}

fn run(args: &Args) -> Result<()> {
    let runtime = autotool_tests::locate::runtime()?;
    let uv = match &args.uv {
        Some(p) => p.clone(),
        None => autotool_tests::locate::uv()?,
    };
    let index = Index::start()?;
    index.add_wheel(
        "feedish",
        &Wheel::pure(
            "feedish",
            "1.0",
            &[(
                "feedish/__init__.py",
                b"from helperdep import PREFIX\ndef shout(w):\n    return PREFIX + w\n",
            )],
            &["helperdep>=2"],
        ),
    );
    index.add_wheel(
        "helperdep",
        &Wheel::pure(
            "helperdep",
            "2.0",
            &[("helperdep.py", b"PREFIX = 'x'\n")],
            &[],
        ),
    );
    index.add_wheel(
        "fastcalc",
        &Wheel::compiled("fastcalc", "1.0", "fastcalc", FASTCALC_C, &runtime.python)?,
    );
    let home = ServeHome::new()?;
    let cache = home.path().join("uv-cache");
    let mut server = Serve::new(Sandbox::Strict)
        .arg("--dangerously-allow-all-tools")
        .env("AUTOTOOL_UV", &uv.to_string_lossy())
        .env("UV_DEFAULT_INDEX", &index.url())
        .env("UV_CACHE_DIR", &cache.to_string_lossy())
        .start_initialized(&home)?;
    println!(
        "packages-bench: {} rounds of plain / cold / warm creates, {} launches each with and \
         without the layer; index {}",
        args.rounds,
        args.launches,
        index.url()
    );
    // One create first, so the runtime and the launcher are warm for every variant alike.
    create(&mut server, "warmup", &tool("[]", ""))?;

    let (mut plain, mut cold, mut warm) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..args.rounds {
        let fresh = format!("fresh{round}");
        index.add_wheel(
            &fresh,
            &Wheel::pure(&fresh, "1.0", &[(&format!("{fresh}.py"), b"N = 1\n")], &[]),
        );
        let set = format!("[\"feedish==1.0\", \"fastcalc\", \"{fresh}\"]");
        let imports = format!("import feedish, fastcalc, {fresh}");
        plain.push(create(
            &mut server,
            &format!("plain{round}"),
            &tool("[]", ""),
        )?);
        cold.push(create(
            &mut server,
            &format!("cold{round}"),
            &tool(&set, &imports),
        )?);
        warm.push(create(
            &mut server,
            &format!("warm{round}"),
            &tool(&set, &imports),
        )?);
        println!(
            "  round {round}: plain {:.0} ms, cold {:.0} ms, warm {:.0} ms",
            ms(plain[round]),
            ms(cold[round]),
            ms(warm[round])
        );
    }
    let (p, c, w) = (median_ms(&plain), median_ms(&cold), median_ms(&warm));
    println!("create_tool, median of {} rounds:", args.rounds);
    println!("  no packages              {p:8.1} ms");
    println!(
        "  a new package set (cold) {c:8.1} ms  (+{:.1} ms, x{:.2})",
        c - p,
        c / p
    );
    println!(
        "  the same set again (warm) {w:7.1} ms  (+{:.1} ms over no packages; target <= +{TARGET_MS:.0} ms: {})",
        w - p,
        if w - p <= TARGET_MS { "met" } else { "NOT met" }
    );
    let layers = std::fs::read_dir(home.path().join("layers"))?
        .flatten()
        .filter(|e| e.path().join("layer.json").is_file())
        .count();
    println!(
        "  layers installed: {layers} for {} sets ({} tools with packages)",
        args.rounds,
        args.rounds * 2
    );
    server.finish(Duration::from_secs(30))?;

    launch_cost(args, &home, &runtime.venv)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Spawn to `initialize` answered, with the layer of the last round mounted and without.
fn launch_cost(args: &Args, home: &ServeHome, runtime: &Path) -> Result<()> {
    let layer = std::fs::read_dir(home.path().join("layers"))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("layer.json").is_file())
        .context("no layer was installed")?
        .join(autotool::packages::SITE_DIR);
    let python = autotool::tool::runtime::open_runtime(runtime)?;
    let launcher = std::env::current_exe()?.with_file_name("autotool-launcher");
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("tool.py"), tool("[]", ""))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for i in 0..args.launches * 2 {
        let mounted = i % 2 == 0;
        let mut spec = ToolSpec::new(dir.path(), "tool.py", python.clone(), SandboxMode::Strict);
        spec.launcher = Some(launcher.clone());
        spec.packages = mounted.then(|| layer.clone());
        let started = Instant::now();
        let process = rt.block_on(ToolProcess::start(spec))?;
        let took = started.elapsed();
        rt.block_on(process.shutdown());
        if mounted { &mut with } else { &mut without }.push(took);
    }
    let (a, b) = (median_ms(&with), median_ms(&without));
    println!(
        "launch (spawn to initialize answered), median of {}:",
        args.launches
    );
    println!("  without a layer  {b:7.1} ms");
    println!(
        "  with the layer   {a:7.1} ms  (+{:.1} ms, x{:.2}: the mount, its Landlock rule and the bootstrap)",
        a - b,
        a / b
    );
    Ok(())
}
