//! `startup-bench`: how soon `autotool serve` answers a host, measured side by side in one run.
//!
//! Every LangChain call in its default stateless mode, every MCP Inspector call and every
//! `claude mcp list` starts a new serve, so spawn → `initialize` answered is paid each time.
//! Interleaved round by round, each from a fresh process:
//! - `autotool serve` on a home with T tools registered (20 by default, never started), in
//!   strict mode with the runtime given (`AUTOTOOL_RUNTIME`), the launcher's probe cached as a
//!   second start on a machine finds it;
//! - the same with `--sandbox off` (no check at all), which says what the strict check adds;
//! - `minimal-mcp-server`, an rmcp stdio server with nothing in it: the floor.
//!
//! Before the rounds, the first strict start on a fresh cache (the probe is run and cached) is
//! timed once on its own. It prints min / median / max per variant, the ratios and differences
//! of medians against the minimal server, and whether the target (≤ 20 ms) is met; it asserts
//! nothing, and exits 1 only when a part could not run.

#[path = "../stats.rs"]
mod stats;

use anyhow::{Context, Result, bail};
use autotool::home::Home;
use autotool::registry::{FunctionSpec, Manifest, Registry};
use clap::Parser;
use serde_json::json;
use stats::Summary;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

const DEFAULT_RUNTIME: &str = "/opt/autotool-test-runtime";
/// The target: spawn → `initialize` answered.
const TARGET_MS: f64 = 20.0;

#[derive(Debug, Parser)]
#[command(
    name = "startup-bench",
    about = "spawn → initialize answered: autotool serve (strict, and --sandbox off) beside a minimal rmcp stdio server"
)]
struct Args {
    /// Measured starts of each variant.
    #[arg(long, default_value_t = 30)]
    rounds: usize,
    /// Tools registered in the home serve starts on.
    #[arg(long, default_value_t = 20)]
    tools: usize,
    /// The Python runtime given to serve [default: $AUTOTOOL_TEST_RUNTIME or
    /// /opt/autotool-test-runtime]
    #[arg(long)]
    runtime: Option<PathBuf>,
    /// The `autotool` binary [default: next to this binary, i.e. target/release/autotool]
    #[arg(long)]
    autotool: Option<PathBuf>,
    /// autotool-launcher [default: next to the autotool binary]
    #[arg(long)]
    launcher: Option<PathBuf>,
}

fn beside_me(name: &str) -> Option<PathBuf> {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(name)))
}

/// One program to start and what it needs.
struct Variant {
    name: &'static str,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

/// Spawn, send `initialize`, read the answer: the time it took. The process is then closed.
fn start_once(v: &Variant) -> Result<Duration> {
    let t0 = Instant::now();
    let mut child = Command::new(&v.program)
        .args(&v.args)
        .env_clear()
        .envs(v.env.iter().map(|(k, val)| (k.as_str(), val.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", v.program.display()))?;
    let mut stdin = child.stdin.take().context("no stdin")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "startup-bench", "version": "0"}}});
    writeln!(stdin, "{init}")?;
    stdin.flush()?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let took = t0.elapsed();
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait()?.is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let answer: serde_json::Value =
        serde_json::from_str(&line).with_context(|| format!("{} answered {line:?}", v.name))?;
    if answer.get("result").is_none() {
        bail!("{} did not accept initialize: {answer}", v.name);
    }
    Ok(took)
}

/// Register `count` tools (one function each) in a fresh home at `root`.
fn register(root: &Path, count: usize) -> Result<()> {
    let registry = Registry::open(&Home::at(root))?;
    for i in 0..count {
        let name = format!("startup_tool_{i}");
        let code = format!(
            "from mcp.server.mcpserver import MCPServer\n\nmcp = MCPServer({name:?})\n\n\n\
             @mcp.tool()\ndef ping() -> str:\n    \"\"\"Answer pong.\"\"\"\n    return \"pong\"\n\n\n\
             if __name__ == \"__main__\":\n    mcp.run()\n"
        );
        let tool = autotool_policy::names::ToolName::parse(&name)?;
        let staged = registry.stage(&tool, &code)?;
        registry.commit(
            staged,
            Manifest {
                description: format!("Tool {i} of startup-bench."),
                required_env: Vec::new(),
                packages: None,
                uses: Vec::new(),
                reach: Default::default(),
                functions: vec![FunctionSpec {
                    name: "ping".into(),
                    title: None,
                    description: Some("Answer pong.".into()),
                    input_schema: json!({"type": "object", "properties": {}})
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                    output_schema: None,
                    annotations: None,
                }],
            },
        )?;
    }
    Ok(())
}

fn main() -> ExitCode {
    match real_main() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("startup-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn real_main() -> Result<()> {
    let args = Args::parse();
    let autotool = args
        .autotool
        .clone()
        .or_else(|| beside_me("autotool"))
        .context("cannot find the autotool binary: pass --autotool")?;
    let launcher = args
        .launcher
        .clone()
        .unwrap_or_else(|| autotool.with_file_name("autotool-launcher"));
    let minimal = beside_me("minimal-mcp-server").context("cannot find minimal-mcp-server")?;
    let runtime = args
        .runtime
        .clone()
        .or_else(|| std::env::var_os("AUTOTOOL_TEST_RUNTIME").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_RUNTIME));
    for (what, p) in [
        ("autotool", &autotool),
        ("autotool-launcher", &launcher),
        ("minimal-mcp-server", &minimal),
    ] {
        if !p.is_file() {
            bail!(
                "no {what} at {}: build with `cargo build --release -p autotool -p \
                 autotool-launcher -p autotool-bench`",
                p.display()
            );
        }
    }
    let scratch = tempfile::tempdir()?;
    let home = scratch.path().join("home");
    let cache = scratch.path().join("cache");
    register(&home, args.tools)?;
    let base = |extra: &[(&str, String)]| -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = vec![
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
            ("HOME".into(), scratch.path().display().to_string()),
            ("XDG_CACHE_HOME".into(), cache.display().to_string()),
            ("AUTOTOOL_HOME".into(), home.display().to_string()),
            ("AUTOTOOL_RUNTIME".into(), runtime.display().to_string()),
            ("AUTOTOOL_LAUNCHER".into(), launcher.display().to_string()),
            ("AUTOTOOL_LOG".into(), "warn".into()),
        ];
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
        env
    };
    let strict = Variant {
        name: "serve (strict)",
        program: autotool.clone(),
        args: vec!["serve".into()],
        env: base(&[]),
    };
    let off = Variant {
        name: "serve (--sandbox off)",
        program: autotool.clone(),
        args: vec!["serve".into(), "--sandbox".into(), "off".into()],
        env: base(&[]),
    };
    let floor = Variant {
        name: "minimal rmcp server",
        program: minimal,
        args: Vec::new(),
        env: base(&[]),
    };

    println!(
        "startup-bench: spawn → initialize answered, {} rounds",
        args.rounds
    );
    println!("  autotool  {}", autotool.display());
    println!(
        "  home      {} tools registered; runtime {}",
        args.tools,
        runtime.display()
    );
    let first = start_once(&strict).context("the first strict start (probe not cached yet)")?;
    println!(
        "  first strict start, probing the launcher and caching it: {:.1} ms",
        first.as_secs_f64() * 1e3
    );
    let variants = [&strict, &off, &floor];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); variants.len()];
    // One unmeasured start of each, for the page cache.
    for v in variants {
        start_once(v)?;
    }
    for _ in 0..args.rounds {
        for (i, v) in variants.iter().enumerate() {
            samples[i].push(start_once(v)?);
        }
    }
    let summaries: Vec<Summary> = samples
        .iter()
        .map(|s| Summary::of(s).context("no sample"))
        .collect::<Result<_>>()?;
    println!();
    println!(
        "  {:<24} {:>9} {:>9} {:>9}",
        "variant", "min ms", "median", "max"
    );
    for (v, s) in variants.iter().zip(&summaries) {
        println!(
            "  {:<24} {:>9.1} {:>9.1} {:>9.1}",
            v.name, s.min_ms, s.median_ms, s.max_ms
        );
    }
    let floor_s = &summaries[2];
    println!();
    for (v, s) in variants.iter().zip(&summaries).take(2) {
        println!(
            "  {:<24} ×{:.2} the minimal server's median, +{:.1} ms",
            v.name,
            s.ratio_to(floor_s),
            s.added_over(floor_s)
        );
    }
    let strict_s = &summaries[0];
    println!(
        "  target: serve answers initialize within {TARGET_MS:.0} ms: median {:.1} ms, {}",
        strict_s.median_ms,
        if strict_s.median_ms <= TARGET_MS {
            "met"
        } else {
            "NOT met"
        }
    );
    Ok(())
}
