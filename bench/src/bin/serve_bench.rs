//! `serve-bench`: what `autotool serve` costs a host, measured side by side in one run.
//!
//! - (a) a warm call through `autotool serve` (bench → serve → tool) against the same call
//!   straight to a tool process over stdio, interleaved call by call. Two baselines: `direct`,
//!   the bench's own JSON-RPC client (the one it uses for serve) talking to a tool started
//!   through `autotool-launcher` exactly as the supervisor starts one; and `toolproc`, the
//!   supervisor's own client (`autotool::tool::process::ToolProcess`, rmcp) in the bench process, so
//!   that what serve adds splits into its client layer and the hop through it. Back to back by
//!   default; `--gap-ms` idles before each call, as calls from an agent do.
//! - (b) the first call right after `create_tool` has returned (serve hands the verified
//!   process to its pool), and the one after it, over R fresh tools; beside them the same call
//!   to a fresh `ToolProcess` in the bench that has been through what verification does;
//! - (c) `create_tool` end to end for the same R small tools (with a smoke test);
//! - (d) the resident memory of an idle serve process: a fresh home with 0 tools, and one with
//!   K tools pre-registered through `autotool::registry::Registry` (never started: the pool
//!   starts a process on its first call), after `initialize` + `tools/list` and a settle delay,
//!   read from `/proc/<pid>/status`;
//! - (p) one tool under S concurrent HTTP sessions: calls per second and latency with
//!   `tool_processes = 1` beside the default pool, in alternating rounds ([`pool`]).
//!
//! It prints figures and whether each target of the plan is met, asserts nothing, and exits 1
//! only when a part could not run (2 when nothing could be set up).

#[path = "serve_bench/fork.rs"]
mod fork;
#[path = "serve_bench/pool.rs"]
mod pool;
#[path = "../stats.rs"]
mod stats;

use anyhow::{Context, Result, anyhow, bail};
use autotool::home::Home;
use autotool::ledger::{CallKind, CallRecord};
use autotool::registry::{FunctionSpec, Manifest, Registry};
use autotool::tool::process::{SandboxMode, ToolProcess, ToolSpec};
use autotool::tool::runtime::Python;
use clap::Parser;
use serde_json::{Map, Value, json};
use stats::Summary;
use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitCode, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// Default location of the Python runtime the tests and the benches use.
const DEFAULT_RUNTIME: &str = "/opt/autotool-test-runtime";
/// The protocol revision the bench's client offers (the newest one with a handshake).
const PROTOCOL: &str = "2025-11-25";
/// Targets from the plan (issue 3, "Benchmark").
const TARGET_ADDED_MS: f64 = 0.5;
const TARGET_FIRST_CALL_MS: f64 = 5.0;
const TARGET_RSS_MIB: f64 = 30.0;
/// Lines of a child's stderr kept for error messages and for serve's `verified … took=` lines.
const STDERR_LINES: usize = 20_000;
/// How long a child gets to exit after its stdin closes before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(15);

/// The tool every part uses: one small function on the `mcp` SDK.
const TOOL_CODE: &str = r#""""serve-bench's tool: one small function."""

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("bench_add")


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


if __name__ == "__main__":
    mcp.run()
"#;
/// The function (a) calls and its name as serve mounts it.
const FUNCTION: &str = "add";
const WARM_TOOL: &str = "bench_add";

#[derive(Debug, Parser)]
#[command(
    name = "serve-bench",
    about = "What `autotool serve` costs a host: warm call through serve vs straight to the tool, \
             first call after create_tool, create_tool end to end, idle RSS with many tools",
    after_help = "Build first: cargo build --release -p autotool -p autotool-launcher\n\
                  Then: cargo run --release -p autotool-bench --bin serve-bench"
)]
struct Args {
    /// (a) measured calls per variant, interleaved (direct, toolproc, serve, direct, …).
    #[arg(long, default_value_t = 500)]
    calls: usize,
    /// (a) unmeasured calls per variant first.
    #[arg(long, default_value_t = 50)]
    warmup: usize,
    /// (a) milliseconds of idle before each call (0: back to back). An idle pause costs a
    /// call about 1 ms more in the tool itself (the CPU and caches go cold); this shows what
    /// serve adds in that regime.
    #[arg(long, default_value_t = 0)]
    gap_ms: u64,
    /// (b), (c) fresh tools created through serve.
    #[arg(long, default_value_t = 10)]
    tools: usize,
    /// (d) tools pre-registered in the home whose idle RSS is read.
    #[arg(long, default_value_t = 100)]
    registered: usize,
    /// (d) milliseconds to wait after `tools/list` before reading the RSS.
    #[arg(long, default_value_t = 1000)]
    settle_ms: u64,
    /// (p) concurrent HTTP sessions calling the one tool.
    #[arg(long, default_value_t = 24)]
    pool_sessions: usize,
    /// (p) measured rounds per side, alternating.
    #[arg(long, default_value_t = 6)]
    pool_rounds: usize,
    /// (p) milliseconds per round.
    #[arg(long, default_value_t = 5000)]
    pool_round_ms: u64,
    /// (e) tools created on the fork and the launcher serve, then called cold.
    #[arg(long, default_value_t = 10)]
    cold_tools: usize,
    /// (f) warm tools whose memory is read, per mode.
    #[arg(long, default_value_t = 100)]
    warm_tools: usize,
    /// Parts to run: a, b, c, d (b and c run together), e, f (fork vs launcher), p (the pool).
    #[arg(long, value_delimiter = ',', default_value = "a,b,c,d,e,f,p")]
    parts: Vec<Part>,
    /// The Python runtime (a venv with `mcp` and `ruff`) [default: $AUTOTOOL_TEST_RUNTIME or /opt/autotool-test-runtime]
    #[arg(long)]
    runtime: Option<PathBuf>,
    /// The `autotool` binary [default: next to this binary, i.e. target/release/autotool]
    #[arg(long)]
    autotool: Option<PathBuf>,
    /// autotool-launcher, used by serve and by the direct variants alike [default: next to the autotool binary]
    #[arg(long)]
    launcher: Option<PathBuf>,
    /// Seconds one request may take before the bench gives up on it.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// Keep the temporary homes (their serve.log and ledger) and print where they are.
    #[arg(long)]
    keep: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Part {
    A,
    B,
    C,
    D,
    P,
    E,
    F,
}

fn main() -> ExitCode {
    match real_main() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("serve-bench: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Everything the parts share.
struct Setup {
    autotool: PathBuf,
    launcher: PathBuf,
    runtime: PathBuf,
    python: Python,
    work: PathBuf,
    timeout: Duration,
}

/// Returns whether every requested part ran.
fn real_main() -> Result<bool> {
    let args = Args::parse();
    let runtime = args
        .runtime
        .clone()
        .or_else(|| std::env::var_os("AUTOTOOL_TEST_RUNTIME").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_RUNTIME));
    let autotool = match &args.autotool {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .context("locate this binary")?
            .with_file_name("autotool"),
    };
    if !autotool.is_file() {
        bail!(
            "autotool not found at {} — build it with `cargo build --release -p autotool -p \
             autotool-launcher` or pass --autotool PATH",
            autotool.display()
        );
    }
    let launcher = args
        .launcher
        .clone()
        .unwrap_or_else(|| autotool.with_file_name("autotool-launcher"));
    if !launcher.is_file() {
        bail!(
            "autotool-launcher not found at {} — build it with `cargo build --release -p \
             autotool-launcher` or pass --launcher PATH",
            launcher.display()
        );
    }
    let python = autotool::tool::runtime::open_runtime(&runtime)
        .with_context(|| format!("the Python runtime at {}", runtime.display()))?;
    let tempdir = tempfile::Builder::new()
        .prefix("serve-bench-")
        .tempdir()
        .context("create a temporary directory")?;
    let setup = Setup {
        autotool,
        launcher,
        runtime,
        python,
        work: tempdir.path().to_path_buf(),
        timeout: Duration::from_secs(args.timeout.max(1)),
    };
    let parts = |p| args.parts.contains(&p);
    let (run_a, run_bc, run_d) = (
        parts(Part::A),
        parts(Part::B) || parts(Part::C),
        parts(Part::D),
    );

    println!(
        "serve-bench: (a) {} calls per variant (+{} warm-up), interleaved direct → toolproc → \
         serve; (b)+(c) {} fresh tools; (d) idle RSS with 0 and {} tools registered",
        args.calls, args.warmup, args.tools, args.registered
    );
    println!("  autotool {}", setup.autotool.display());
    println!("  launcher {}", setup.launcher.display());
    println!(
        "  runtime  {} (Python {})",
        setup.python.interpreter.display(),
        setup.python.version
    );
    println!(
        "  running as uid {}, on {} cores, load average {}",
        nix::unistd::getuid(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average()
    );

    // One async runtime for the in-process tool client, like serve's (multi-threaded, one
    // worker per core). The bench's own JSON-RPC clients are plain blocking I/O on this thread.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("start the async runtime")?;

    let mut all_ran = true;
    let mut verdict = Verdict::default();

    if run_a || run_bc {
        match start_main_serve(&setup) {
            Ok((mut serve, first_create)) => {
                println!();
                println!(
                    "serve started; its first create_tool ({WARM_TOOL}, opens the runtime): {:.1} ms",
                    ms(first_create)
                );
                if run_a {
                    match part_a(&setup, &rt, &mut serve, &args) {
                        Ok(a) => verdict.a = Some(a),
                        Err(e) => {
                            println!("  (a) FAILED: {e:#}");
                            all_ran = false;
                        }
                    }
                }
                if run_bc {
                    let warm = verdict.a.as_ref().and_then(|a| a.get(Variant::Serve));
                    match part_bc(&setup, &rt, &mut serve, args.tools, warm) {
                        Ok(bc) => verdict.bc = Some(bc),
                        Err(e) => {
                            println!("  (b)/(c) FAILED: {e:#}");
                            all_ran = false;
                        }
                    }
                }
                verdict.after_run = proc_status(serve.pid()).ok();
                verdict.after_run_tools = 1 + verdict.bc.as_ref().map_or(0, |bc| bc.created);
                if let Err(e) = serve.close() {
                    println!("  serve did not shut down cleanly: {e:#}");
                }
            }
            Err(e) => {
                println!("serve could not be started with a tool: {e:#}");
                all_ran = false;
            }
        }
    }

    if run_d {
        match part_d(
            &setup,
            args.registered,
            Duration::from_millis(args.settle_ms),
        ) {
            Ok(d) => verdict.d = Some(d),
            Err(e) => {
                println!("  (d) FAILED: {e:#}");
                all_ran = false;
            }
        }
    }
    if run_d || verdict.after_run.is_some() {
        print_rss(&verdict, args.registered);
    }
    let mut fork_verdict = Vec::new();
    for (part, run) in [
        (Part::E, fork::part_e as fork::PartFn),
        (Part::F, fork::part_f),
    ] {
        if parts(part) {
            match run(&setup, &args) {
                Ok(line) => fork_verdict.push(line),
                Err(e) => {
                    println!("  ({part:?}) FAILED: {e:#}");
                    all_ran = false;
                }
            }
        }
    }

    if parts(Part::P) {
        let plan = pool::Plan {
            sessions: args.pool_sessions.max(1),
            rounds: args.pool_rounds.max(1),
            round: Duration::from_millis(args.pool_round_ms.max(100)),
            warmup: Duration::from_millis(args.pool_round_ms.max(100)),
        };
        match pool::part_p(&setup, plan) {
            Ok(p) => {
                pool::print_p(&p);
                verdict.p = Some(p);
            }
            Err(e) => {
                println!("  (p) FAILED: {e:#}");
                all_ran = false;
            }
        }
    }

    println!();
    println!("{}", verdict.line(&args));
    if !fork_verdict.is_empty() {
        println!("fork vs launcher (medians): {}", fork_verdict.join("; "));
    }
    if args.keep {
        println!("kept: {}", tempdir.keep().display());
    }
    Ok(all_ran)
}

// ---------------------------------------------------------------------------------------------
// (a) warm call

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// bench's JSON-RPC client → autotool-launcher → tool.
    Direct,
    /// `ToolProcess` (rmcp client, stdout guard, stderr pump) in the bench → launcher → tool.
    ToolProc,
    /// bench's JSON-RPC client → `autotool serve` → its `ToolProcess` → launcher → tool.
    Serve,
}

impl Variant {
    const ALL: [Variant; 3] = [Variant::Direct, Variant::ToolProc, Variant::Serve];

    fn name(self) -> &'static str {
        match self {
            Variant::Direct => "direct",
            Variant::ToolProc => "toolproc",
            Variant::Serve => "serve",
        }
    }
}

/// A summary with the 90th percentile, which [`Summary`] does not carry.
#[derive(Debug, Clone, Copy)]
struct Figures {
    s: Summary,
    p90_ms: f64,
}

impl Figures {
    fn of(sample: &[Duration]) -> Option<Figures> {
        Some(Figures {
            s: Summary::of(sample)?,
            p90_ms: percentile(sample, 0.9)?,
        })
    }
}

/// Nearest-rank percentile, in milliseconds.
fn percentile(sample: &[Duration], q: f64) -> Option<f64> {
    let mut ms: Vec<f64> = sample.iter().map(|d| ms(*d)).collect();
    ms.sort_by(f64::total_cmp);
    let rank = ((q * ms.len() as f64).ceil() as usize).clamp(1, ms.len().max(1));
    ms.get(rank - 1).copied()
}

#[derive(Debug)]
struct AResult {
    figures: Vec<(Variant, Figures)>,
    /// The ledger row serve writes on every call, timed in the bench on a ledger of its own.
    ledger: Option<Figures>,
}

impl AResult {
    fn get(&self, v: Variant) -> Option<&Figures> {
        self.figures.iter().find(|(x, _)| *x == v).map(|(_, f)| f)
    }
}

fn part_a(
    setup: &Setup,
    rt: &tokio::runtime::Runtime,
    serve: &mut Rpc,
    args: &Args,
) -> Result<AResult> {
    // The baselines run the same tool file from a directory of their own, confined the same
    // way serve confines its tools: default policy and limits, the tool environment with no
    // keys, the same launcher and runtime.
    let dir = setup.work.join("direct-tool");
    write_tool_dir(&dir, TOOL_CODE)?;
    let env = autotool_policy::launch::tool_environment(&BTreeMap::new(), &BTreeMap::new(), None);

    // The runtime's own policy, as serve builds it: its virtual environment mounted, so an
    // interpreter that is a symlink out of it (pyenv, the system's) is reached through it.
    let mut policy = setup.python.launch_policy(&dir, "tool.py");
    policy.env = env.clone();
    let child = autotool::tool::launcher::spawn(&setup.launcher, &policy, Vec::new())
        .context("start the direct tool through the launcher")?;
    let mut direct = Rpc::new("direct tool", child)?;
    direct
        .initialize(setup.timeout)
        .context("initialize the direct tool")?;

    let mut spec = ToolSpec::new(&dir, "tool.py", setup.python.clone(), SandboxMode::Strict);
    spec.env = env;
    spec.launcher = Some(setup.launcher.clone());
    let toolproc = rt
        .block_on(ToolProcess::start(spec))
        .context("start the tool as a ToolProcess")?;

    let ledger_home = setup.work.join("home-ledger");
    std::fs::create_dir_all(&ledger_home)?;
    std::fs::set_permissions(&ledger_home, std::fs::Permissions::from_mode(0o700))?;
    let ledger = Registry::open(&Home::at(&ledger_home)).context("open a ledger to time")?;

    let result = measure_a(setup, rt, serve, &mut direct, &toolproc, &ledger, args);

    let _ = rt.block_on(toolproc.shutdown());
    if let Err(e) = direct.close() {
        println!("  the direct tool did not shut down cleanly: {e:#}");
    }
    let result = result?;
    print_a(&result, args);
    Ok(result)
}

fn measure_a(
    setup: &Setup,
    rt: &tokio::runtime::Runtime,
    serve: &mut Rpc,
    direct: &mut Rpc,
    toolproc: &ToolProcess,
    ledger: &Registry,
    args: &Args,
) -> Result<AResult> {
    let mounted = format!("{WARM_TOOL}__{FUNCTION}");
    let mut samples: Vec<(Variant, Vec<Duration>)> = Variant::ALL
        .iter()
        .map(|&v| (v, Vec::with_capacity(args.calls)))
        .collect();
    let mut ledger_times = Vec::with_capacity(args.calls);
    for round in 0..args.warmup + args.calls {
        let a = i64::try_from(round).unwrap_or(0);
        let arguments = || {
            let mut m = Map::new();
            m.insert("a".into(), json!(a));
            m.insert("b".into(), json!(1));
            m
        };
        for (variant, times) in &mut samples {
            if args.gap_ms > 0 {
                std::thread::sleep(Duration::from_millis(args.gap_ms));
            }
            let (took, value) = match variant {
                Variant::Direct => direct
                    .call_tool(FUNCTION, arguments(), setup.timeout)
                    .context("direct call")?,
                Variant::Serve => serve
                    .call_tool(&mounted, arguments(), setup.timeout)
                    .context("call through serve")?,
                Variant::ToolProc => {
                    let t0 = Instant::now();
                    let out = rt
                        .block_on(toolproc.call(FUNCTION, arguments(), setup.timeout))
                        .context("ToolProcess call")?;
                    let took = t0.elapsed();
                    if out.is_error {
                        bail!(
                            "ToolProcess call: the tool reported an error: {:?}",
                            out.content
                        );
                    }
                    (took, out.structured_content.unwrap_or(Value::Null))
                }
            };
            if value["result"] != json!(a + 1) {
                bail!("{} call answered {value} for add({a}, 1)", variant.name());
            }
            if round >= args.warmup {
                times.push(took);
            }
        }
        // What serve's `App::record` does after each call, before it answers.
        let record = CallRecord {
            tool: WARM_TOOL.into(),
            version: 1,
            function: FUNCTION.into(),
            started_at: std::time::SystemTime::now(),
            duration: Duration::from_micros(900),
            outcome: CallKind::Ok,
            error: None,
        };
        let t0 = Instant::now();
        ledger.record_call(&record).context("record a call")?;
        if round >= args.warmup {
            ledger_times.push(t0.elapsed());
        }
    }
    Ok(AResult {
        figures: samples
            .iter()
            .filter_map(|(v, t)| Figures::of(t).map(|f| (*v, f)))
            .collect(),
        ledger: Figures::of(&ledger_times),
    })
}

fn print_a(r: &AResult, args: &Args) {
    println!();
    println!(
        "(a) warm call: tools/call {FUNCTION} {{a, b}} → answer, {} calls per variant (+{} \
         warm-up), interleaved, {}",
        args.calls,
        args.warmup,
        if args.gap_ms == 0 {
            "back to back".to_string()
        } else {
            format!("{} ms idle before each call", args.gap_ms)
        }
    );
    println!("  direct   = bench JSON-RPC client → autotool-launcher → tool");
    println!(
        "  toolproc = autotool::tool::process::ToolProcess (rmcp) in the bench → launcher → tool"
    );
    println!("  serve    = bench JSON-RPC client → autotool serve → ToolProcess → launcher → tool");
    println!(
        "  {:<9} {:>8} {:>9} {:>8} {:>8}   median vs direct",
        "variant", "min ms", "median ms", "p90 ms", "max ms"
    );
    let base = r.get(Variant::Direct);
    for (v, f) in &r.figures {
        let versus = match (base, v) {
            (Some(b), Variant::ToolProc | Variant::Serve) => format!(
                "×{:.2}  {:+.3} ms (p90 {:+.3} ms)",
                f.s.ratio_to(&b.s),
                f.s.added_over(&b.s),
                f.p90_ms - b.p90_ms
            ),
            _ => String::new(),
        };
        println!(
            "  {:<9} {:>8.3} {:>9.3} {:>8.3} {:>8.3}   {versus}",
            v.name(),
            f.s.min_ms,
            f.s.median_ms,
            f.p90_ms,
            f.s.max_ms
        );
    }
    if let (Some(d), Some(t), Some(s)) = (base, r.get(Variant::ToolProc), r.get(Variant::Serve)) {
        let added = s.s.added_over(&d.s);
        println!(
            "  serve adds {added:+.3} ms to the median call over direct (target ≤ {TARGET_ADDED_MS} \
             ms: {}); of which the supervisor's tool client (toolproc − direct) {:+.3} ms and \
             the hop through serve (serve − toolproc) {:+.3} ms",
            met(added <= TARGET_ADDED_MS),
            t.s.added_over(&d.s),
            s.s.added_over(&t.s)
        );
    }
    if let Some(l) = &r.ledger {
        println!(
            "  for scale: the ledger row serve writes per call (Registry::record_call, timed in \
             the bench on its own ledger) median {:.3} ms, p90 {:.3} ms",
            l.s.median_ms, l.p90_ms
        );
    }
}

// ---------------------------------------------------------------------------------------------
// (b) first call after create_tool, (c) create_tool end to end

#[derive(Debug)]
struct BcResult {
    created: usize,
    first_call: Figures,
    /// The same call straight to a fresh `ToolProcess` that has been through what verification
    /// does to it.
    direct_first_call: Figures,
    /// The call after the first one, through serve.
    second_call: Figures,
    create: Figures,
    verify: Option<Figures>,
}

fn part_bc(
    setup: &Setup,
    rt: &tokio::runtime::Runtime,
    serve: &mut Rpc,
    tools: usize,
    warm_serve: Option<&Figures>,
) -> Result<BcResult> {
    let dir = setup.work.join("direct-tool");
    write_tool_dir(&dir, TOOL_CODE)?;
    let mut first_calls = Vec::with_capacity(tools);
    let mut direct_first_calls = Vec::with_capacity(tools);
    let mut second_calls = Vec::with_capacity(tools);
    let mut creates = Vec::with_capacity(tools);
    let mut names = Vec::with_capacity(tools);
    for i in 0..tools {
        let name = format!("fresh_{i:03}");
        let (took, _) = create_tool(serve, &name, setup.timeout)
            .with_context(|| format!("create_tool {name}"))?;
        creates.push(took);
        let mut arguments = Map::new();
        arguments.insert("a".into(), json!(40));
        arguments.insert("b".into(), json!(2));
        let (took, value) = serve
            .call_tool(&format!("{name}__{FUNCTION}"), arguments, setup.timeout)
            .with_context(|| format!("first call of {name}"))?;
        if value["result"] != json!(42) {
            bail!("the first call of {name} answered {value} for add(40, 2)");
        }
        first_calls.push(took);
        let mut arguments = Map::new();
        arguments.insert("a".into(), json!(1));
        arguments.insert("b".into(), json!(1));
        let (took, _) = serve
            .call_tool(&format!("{name}__{FUNCTION}"), arguments, setup.timeout)
            .with_context(|| format!("second call of {name}"))?;
        second_calls.push(took);
        names.push(name);
        direct_first_calls.push(
            rt.block_on(fresh_first_call(setup, &dir))
                .context("the same first call straight to a fresh tool process")?,
        );
    }
    // serve logs `verified tool=NAME took=…` when verification passes: the part of create_tool
    // spent linting, starting the tool, listing it and running the smoke test.
    let verify: Vec<Duration> = names.iter().filter_map(|n| serve.verify_time(n)).collect();
    let r = BcResult {
        created: tools,
        first_call: Figures::of(&first_calls).context("no tools created")?,
        direct_first_call: Figures::of(&direct_first_calls).context("no tools created")?,
        second_call: Figures::of(&second_calls).context("no tools created")?,
        create: Figures::of(&creates).context("no tools created")?,
        verify: if verify.len() == names.len() {
            Figures::of(&verify)
        } else {
            None
        },
    };
    println!();
    println!(
        "(b) first call right after create_tool returned (the verified process, handed to the \
         pool), {tools} fresh tools"
    );
    println!(
        "  serve  = bench → serve, the call right after create_tool answered (then = the call \
         after it)\n  direct = a fresh ToolProcess in the bench, started, listed and smoke-tested \
         as verification does, then the same call"
    );
    print_figures_header();
    print_figures("serve", &r.first_call);
    print_figures("serve then", &r.second_call);
    print_figures("direct", &r.direct_first_call);
    let versus_warm = warm_serve.map_or(String::new(), |w| {
        format!(
            "; {:+.3} ms over a warm call through serve in (a), ×{:.2}",
            r.first_call.s.added_over(&w.s),
            r.first_call.s.ratio_to(&w.s)
        )
    });
    println!(
        "  median {:.3} ms (target ≤ {TARGET_FIRST_CALL_MS} ms: {}){versus_warm}",
        r.first_call.s.median_ms,
        met(r.first_call.s.median_ms <= TARGET_FIRST_CALL_MS)
    );
    println!();
    println!(
        "(c) create_tool end to end (small tool, one function, smoke test), the same {tools} tools"
    );
    print_figures_header();
    print_figures("create", &r.create);
    if let Some(v) = &r.verify {
        print_figures("verify", v);
        println!(
            "  verify = serve's own log line `verified … took=`: lint, launch confined, \
             initialize, tools/list, smoke test; the rest ({:.1} ms at the median) is staging, \
             commit, mount and the answer",
            r.create.s.median_ms - v.s.median_ms
        );
    }
    Ok(r)
}

/// Start the bench tool as verification does (launch confined, initialize, `tools/list`, the
/// smoke call) and time the call after that.
async fn fresh_first_call(setup: &Setup, dir: &Path) -> Result<Duration> {
    let mut spec = ToolSpec::new(dir, "tool.py", setup.python.clone(), SandboxMode::Strict);
    spec.env = autotool_policy::launch::tool_environment(&BTreeMap::new(), &BTreeMap::new(), None);
    spec.launcher = Some(setup.launcher.clone());
    let process = ToolProcess::start(spec).await?;
    let args = |a: i64, b: i64| {
        let mut m = Map::new();
        m.insert("a".into(), json!(a));
        m.insert("b".into(), json!(b));
        m
    };
    let result = async {
        process.list_tools().await?;
        process.call(FUNCTION, args(1, 2), setup.timeout).await?;
        let t0 = Instant::now();
        let out = process.call(FUNCTION, args(40, 2), setup.timeout).await?;
        let took = t0.elapsed();
        if out.structured_content.as_ref().map(|v| &v["result"]) != Some(&json!(42)) {
            bail!(
                "the fresh tool answered {:?} for add(40, 2)",
                out.structured_content
            );
        }
        Ok(took)
    }
    .await;
    process.shutdown().await;
    result
}

fn create_tool(serve: &mut Rpc, name: &str, timeout: Duration) -> Result<(Duration, Value)> {
    let params = json!({
        "name": "create_tool",
        "arguments": {
            "name": name,
            "code": TOOL_CODE,
            "description": "Adds two numbers (serve-bench).",
            "smoke_test": {"function": FUNCTION, "arguments": {"a": 1, "b": 2}},
        }
    });
    let (took, result) = serve.request("tools/call", params, timeout)?;
    if result["isError"] == json!(true) {
        bail!("create_tool failed: {}", content_text(&result));
    }
    Ok((took, result))
}

fn print_figures_header() {
    println!(
        "  {:<11} {:>9} {:>9} {:>9} {:>9}",
        "", "min ms", "median ms", "p90 ms", "max ms"
    );
}

fn print_figures(label: &str, f: &Figures) {
    println!(
        "  {:<11} {:>9.3} {:>9.3} {:>9.3} {:>9.3}   (n={})",
        label, f.s.min_ms, f.s.median_ms, f.p90_ms, f.s.max_ms, f.s.runs
    );
}

// ---------------------------------------------------------------------------------------------
// (d) idle RSS

#[derive(Debug, Clone, Copy, Default)]
struct ProcStatus {
    rss_kb: u64,
    hwm_kb: u64,
    anon_kb: u64,
    file_kb: u64,
    threads: u64,
}

#[derive(Debug)]
struct RssRow {
    label: String,
    listed: usize,
    ready: Duration,
    status: ProcStatus,
}

#[derive(Debug)]
struct DResult {
    rows: Vec<RssRow>,
    /// How long staging and committing the tools took (in the bench, before serve starts).
    preregistered: Duration,
    settle: Duration,
}

fn part_d(setup: &Setup, registered: usize, settle: Duration) -> Result<DResult> {
    let mut rows = Vec::new();
    let empty = setup.work.join("home-0");
    rows.push(idle_serve(setup, &empty, 0, settle).context("serve with 0 tools")?);

    let full = setup.work.join(format!("home-{registered}"));
    let t0 = Instant::now();
    preregister(&full, registered).context("pre-register tools")?;
    let preregistered = t0.elapsed();
    rows.push(
        idle_serve(setup, &full, registered, settle)
            .with_context(|| format!("serve with {registered} tools"))?,
    );
    Ok(DResult {
        rows,
        preregistered,
        settle,
    })
}

/// Commit `count` copies of the bench tool as if they had been verified.
fn preregister(root: &Path, count: usize) -> Result<()> {
    std::fs::create_dir_all(root)?;
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o700))?;
    let registry = Registry::open(&Home::at(root))?;
    let schema = |v: Value| match v {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let function = FunctionSpec {
        name: FUNCTION.into(),
        title: None,
        description: Some("Add two numbers.".into()),
        input_schema: schema(json!({
            "type": "object",
            "properties": {
                "a": {"title": "A", "type": "integer"},
                "b": {"title": "B", "type": "integer"},
            },
            "required": ["a", "b"],
            "title": "addArguments",
        })),
        output_schema: Some(schema(json!({
            "type": "object",
            "properties": {"result": {"title": "Result", "type": "integer"}},
            "required": ["result"],
            "title": "addOutput",
        }))),
        annotations: None,
    };
    for i in 0..count {
        let name = format!("reg_{i:03}");
        let staged = registry.stage(&autotool_policy::names::ToolName::parse(&name)?, TOOL_CODE)?;
        registry.commit(
            staged,
            Manifest {
                description: format!("Adds two numbers (serve-bench tool {i})."),
                required_env: Vec::new(),
                functions: vec![function.clone()],
                packages: None,
                uses: Vec::new(),
                reach: Default::default(),
            },
        )?;
    }
    Ok(())
}

/// Start serve on `home`, `initialize` + `tools/list`, wait `settle`, read its status.
fn idle_serve(setup: &Setup, home: &Path, expect: usize, settle: Duration) -> Result<RssRow> {
    let t0 = Instant::now();
    let mut serve = spawn_serve(setup, home)?;
    serve.initialize(setup.timeout)?;
    let ready = t0.elapsed();
    let (_, list) = serve.request("tools/list", json!({}), setup.timeout)?;
    let listed = list["tools"].as_array().map_or(0, Vec::len);
    // The built-ins are always there; with more tools than the list limit, only the most used
    // (one function each here).
    let builtins = autotool::mcp::listing::BUILTINS;
    let expected =
        builtins + expect.min(autotool::library::settings::DEFAULT_LIST_LIMIT - builtins);
    if listed != expected {
        println!("  note: tools/list gave {listed} tools, expected {expected}");
    }
    std::thread::sleep(settle);
    let status = proc_status(serve.pid())?;
    serve.close()?;
    Ok(RssRow {
        label: format!("{expect} tools registered, idle"),
        listed,
        ready,
        status,
    })
}

fn print_rss(v: &Verdict, registered: usize) {
    println!();
    println!(
        "(d) serve's memory from /proc/<pid>/status (MiB); target ≤ {TARGET_RSS_MIB} MB idle with \
         {registered} tools registered"
    );
    if let Some(d) = &v.d {
        println!(
            "  idle = {:.0} ms after initialize + tools/list answered; the {registered} tools were \
             staged and committed through autotool::registry (never started) in {:.0} ms",
            ms(d.settle),
            ms(d.preregistered)
        );
    }
    println!(
        "  {:<36} {:>6} {:>8} {:>8} {:>8} {:>8} {:>7}",
        "serve", "listed", "VmRSS", "VmHWM", "RssAnon", "RssFile", "threads"
    );
    let row = |label: &str, listed: String, s: &ProcStatus, extra: String| {
        println!(
            "  {:<36} {:>6} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>7}{extra}",
            label,
            listed,
            mib(s.rss_kb),
            mib(s.hwm_kb),
            mib(s.anon_kb),
            mib(s.file_kb),
            s.threads
        );
    };
    for r in v.d.iter().flat_map(|d| &d.rows) {
        row(
            &r.label,
            r.listed.to_string(),
            &r.status,
            format!("   (spawn → initialize answered {:.0} ms)", ms(r.ready)),
        );
    }
    if let Some(s) = &v.after_run {
        row(
            &format!(
                "after the run above: {} warm tool{}",
                v.after_run_tools,
                if v.after_run_tools == 1 { "" } else { "s" }
            ),
            "-".into(),
            s,
            String::new(),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The verdict line

#[derive(Debug, Default)]
struct Verdict {
    a: Option<AResult>,
    bc: Option<BcResult>,
    d: Option<DResult>,
    after_run: Option<ProcStatus>,
    after_run_tools: usize,
    p: Option<pool::PoolResult>,
}

impl Verdict {
    fn line(&self, args: &Args) -> String {
        let mut parts = Vec::new();
        if let Some(a) = &self.a
            && let (Some(d), Some(s)) = (a.get(Variant::Direct), a.get(Variant::Serve))
        {
            let added = s.s.added_over(&d.s);
            parts.push(format!(
                "(a) serve adds {added:+.3} ms over direct (≤ {TARGET_ADDED_MS} ms: {})",
                met(added <= TARGET_ADDED_MS)
            ));
        }
        if let Some(bc) = &self.bc {
            let m = bc.first_call.s.median_ms;
            parts.push(format!(
                "(b) first call after create_tool {m:.3} ms (≤ {TARGET_FIRST_CALL_MS} ms: {})",
                met(m <= TARGET_FIRST_CALL_MS)
            ));
            parts.push(format!("(c) create_tool {:.1} ms", bc.create.s.median_ms));
        }
        if let Some(r) = self
            .d
            .iter()
            .flat_map(|d| &d.rows)
            .find(|r| r.label.starts_with(&format!("{} ", args.registered)))
        {
            let m = mib(r.status.rss_kb);
            parts.push(format!(
                "(d) idle RSS with {} tools {m:.1} MiB, peak {:.1} MiB (≤ {TARGET_RSS_MIB} MB: {})",
                args.registered,
                mib(r.status.hwm_kb),
                met(m <= TARGET_RSS_MIB)
            ));
        }
        if let Some(p) = &self.p {
            parts.push(pool::verdict(p));
        }
        if parts.is_empty() {
            return "verdict: nothing measured".into();
        }
        format!("verdict (medians): {}", parts.join("; "))
    }
}

fn met(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

// ---------------------------------------------------------------------------------------------
// serve

fn spawn_serve(setup: &Setup, home: &Path) -> Result<Rpc> {
    spawn_serve_with(setup, home, &[])
}

/// [`spawn_serve`] with further environment variables for serve.
fn spawn_serve_with(setup: &Setup, home: &Path, env: &[(&str, &str)]) -> Result<Rpc> {
    std::fs::create_dir_all(home)?;
    std::fs::set_permissions(home, std::fs::Permissions::from_mode(0o700))?;
    let child = Command::new(&setup.autotool)
        .args(["serve", "--sandbox", "strict"])
        .env("AUTOTOOL_HOME", home)
        .env("AUTOTOOL_RUNTIME", &setup.runtime)
        .env("AUTOTOOL_LAUNCHER", &setup.launcher)
        .envs(env.iter().copied())
        .env_remove("AUTOTOOL_SANDBOX")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("start {} serve", setup.autotool.display()))?;
    Rpc::new("autotool serve", child)
}

/// serve on a fresh home with the warm tool created; returns how long that create took.
fn start_main_serve(setup: &Setup) -> Result<(Rpc, Duration)> {
    let mut serve = spawn_serve(setup, &setup.work.join("home-main"))?;
    serve
        .initialize(setup.timeout)
        .context("initialize serve")?;
    let (took, _) = create_tool(&mut serve, WARM_TOOL, setup.timeout)
        .with_context(|| format!("create_tool {WARM_TOOL}"))?;
    Ok((serve, took))
}

// ---------------------------------------------------------------------------------------------
// A JSON-RPC client over a child's stdio: newline-delimited messages, one request at a time.

struct Rpc {
    label: &'static str,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    next_id: u64,
}

impl Rpc {
    fn new(label: &'static str, mut child: Child) -> Result<Rpc> {
        let stdin = child.stdin.take().context("child stdin")?;
        let stdout = child.stdout.take().context("child stdout")?;
        let stderr_pipe = child.stderr.take().context("child stderr")?;
        let (tx, lines) = mpsc::channel();
        // A thread reads stdout, so that a wait for an answer can time out.
        std::thread::Builder::new()
            .name(format!("{label} stdout"))
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            })?;
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        {
            let stderr = Arc::clone(&stderr);
            std::thread::Builder::new()
                .name(format!("{label} stderr"))
                .spawn(move || drain(stderr_pipe, &stderr))?;
        }
        Ok(Rpc {
            label,
            child,
            stdin: Some(stdin),
            lines,
            stderr,
            next_id: 1,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn send(&mut self, message: &Value) -> Result<()> {
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        let stdin = self.stdin.as_mut().context("stdin already closed")?;
        stdin
            .write_all(&line)
            .with_context(|| format!("write to {}{}", self.label, self.tail()))
    }

    /// Send a request and wait for its answer, skipping notifications (and refusing requests
    /// from the other side). Returns the time from the write to the answer, and its `result`.
    fn request(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<(Duration, Value)> {
        let id = self.next_id;
        self.next_id += 1;
        let mut line = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )?;
        line.push(b'\n');
        let stdin = self.stdin.as_mut().context("stdin already closed")?;
        let t0 = Instant::now();
        stdin
            .write_all(&line)
            .with_context(|| format!("write {method} to {}", self.label))?;
        let deadline = t0 + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(l) => l,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    bail!(
                        "{} gave no answer to {method} within {timeout:?}{}",
                        self.label,
                        self.tail()
                    )
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    bail!(
                        "{} closed its stdout before answering {method}{}",
                        self.label,
                        self.tail()
                    )
                }
            };
            let message: Value = serde_json::from_str(&line).with_context(|| {
                format!("{} wrote a line that is not JSON: {line:?}", self.label)
            })?;
            if message.get("method").is_some() {
                if let Some(rid) = message.get("id") {
                    // A request to the client: we offer no capabilities; answer ping, refuse the rest.
                    let reply = if message["method"] == "ping" {
                        json!({"jsonrpc": "2.0", "id": rid, "result": {}})
                    } else {
                        json!({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "not supported by serve-bench"}})
                    };
                    self.send(&reply)?;
                }
                continue;
            }
            if message.get("id") != Some(&json!(id)) {
                continue;
            }
            let took = t0.elapsed();
            if let Some(e) = message.get("error") {
                bail!("{} answered {method} with an error: {e}", self.label);
            }
            return Ok((took, message.get("result").cloned().unwrap_or(Value::Null)));
        }
    }

    fn initialize(&mut self, timeout: Duration) -> Result<Value> {
        let (_, result) = self.request(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "serve-bench", "version": env!("CARGO_PKG_VERSION")},
            }),
            timeout,
        )?;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(result)
    }

    /// `tools/call`; returns the time and the structured content. A tool error is an error.
    fn call_tool(
        &mut self,
        name: &str,
        arguments: Map<String, Value>,
        timeout: Duration,
    ) -> Result<(Duration, Value)> {
        let (took, result) = self.request(
            "tools/call",
            json!({"name": name, "arguments": arguments}),
            timeout,
        )?;
        if result["isError"] == json!(true) {
            bail!("{name} reported an error: {}", content_text(&result));
        }
        Ok((
            took,
            result
                .get("structuredContent")
                .cloned()
                .unwrap_or(Value::Null),
        ))
    }

    /// From serve's log: how long verification of `tool` took.
    fn verify_time(&self, tool: &str) -> Option<Duration> {
        let needle = format!("verified tool={tool} took=");
        let lines = self.stderr.lock().ok()?;
        let line = lines.iter().rev().find(|l| l.contains(&needle))?;
        let rest = &line[line.find(&needle)? + needle.len()..];
        parse_debug_duration(rest.split_whitespace().next()?)
    }

    fn tail(&self) -> String {
        let Ok(lines) = self.stderr.lock() else {
            return String::new();
        };
        if lines.is_empty() {
            return " (nothing on stderr)".into();
        }
        let tail: Vec<&str> = lines.iter().rev().take(15).map(String::as_str).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!("\n    stderr:\n      {}", tail.join("\n      "))
    }

    /// Close stdin and wait for the exit, killing after [`EXIT_GRACE`].
    fn close(mut self) -> Result<ExitStatus> {
        drop(self.stdin.take());
        let deadline = Instant::now() + EXIT_GRACE;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let status = self.child.wait()?;
                return Err(anyhow!(
                    "{} was still running {EXIT_GRACE:?} after its stdin closed; killed ({status})",
                    self.label
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Rpc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn drain(pipe: impl Read, into: &Mutex<VecDeque<String>>) {
    for line in BufReader::new(pipe).lines() {
        let Ok(line) = line else { break };
        if let Ok(mut lines) = into.lock() {
            if lines.len() == STDERR_LINES {
                lines.pop_front();
            }
            lines.push_back(line);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Small helpers

fn content_text(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_else(|| result.to_string())
}

/// A tool directory as the launcher needs it: world-readable (a confined tool may run as
/// `nobody`).
fn write_tool_dir(dir: &Path, code: &str) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    let file = dir.join("tool.py");
    std::fs::write(&file, code)?;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644))?;
    Ok(())
}

/// `Duration`'s `Debug` form as tracing prints it: `655.543425ms`, `1.2s`, `950µs`.
fn parse_debug_duration(s: &str) -> Option<Duration> {
    let (number, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix("µs") {
        (n, 1e-6)
    } else if let Some(n) = s.strip_suffix("ns") {
        (n, 1e-9)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else {
        return None;
    };
    number
        .parse::<f64>()
        .ok()
        .map(|v| Duration::from_secs_f64(v * scale))
}

fn proc_status(pid: u32) -> Result<ProcStatus> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("read /proc/{pid}/status"))?;
    let mut s = ProcStatus::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let number = || {
            value
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        match key {
            "VmRSS" => s.rss_kb = number(),
            "VmHWM" => s.hwm_kb = number(),
            "RssAnon" => s.anon_kb = number(),
            "RssFile" => s.file_kb = number(),
            "Threads" => s.threads = number(),
            _ => {}
        }
    }
    if s.rss_kb == 0 {
        bail!("/proc/{pid}/status has no VmRSS");
    }
    Ok(s)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn mib(kb: u64) -> f64 {
    kb as f64 / 1024.0
}
