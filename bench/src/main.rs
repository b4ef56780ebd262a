//! `launcher-bench`: what confinement costs at tool start-up, measured side by side.
//!
//! Three scenarios, each timed for three variants of starting the same process (bare, through
//! `autotool-launcher`, through bubblewrap with comparable settings):
//! - (a) fixed cost: `python3 -c pass`, spawn → exit;
//! - (b) an SDK-less stdio MCP server (`tools/echo_server.py`), spawn → `initialize` answered;
//! - (c) a tool on the `mcp` SDK (`tools/sdk_tool.py`), spawn → `initialize` answered.
//!
//! Variants are interleaved within each round (bare, launcher, bwrap, bare, …) so that drift in
//! the machine's load falls on all of them alike. The bench prints figures, never a pass/fail on
//! timing; it exits non-zero only when a variant could not be run at all.
//!
//! Layout: [`variant`] builds each variant's command, [`run`] times one start, [`stats`]
//! summarises a sample.

mod run;
mod stats;
mod variant;

use anyhow::{Context, Result};
use clap::Parser;
use run::Until;
use stats::Summary;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use variant::{Setup, Variant, Workload};

/// Default location of the Python runtime the tests and the bench use.
const DEFAULT_RUNTIME: &str = "/opt/autotool-test-runtime";

#[derive(Debug, Parser)]
#[command(
    name = "launcher-bench",
    about = "Start-up cost of a tool process: bare vs autotool-launcher vs bubblewrap, side by side",
    after_help = "Build the launcher first: cargo build --release -p autotool-launcher\n\
                  Then: cargo run --release -p autotool-bench --bin launcher-bench"
)]
struct Args {
    /// Measured rounds; each round runs every variant once, interleaved.
    #[arg(long, default_value_t = 30)]
    rounds: usize,
    /// Unmeasured rounds first (at least 1: it also checks that each variant works at all).
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Scenarios to run: a (python -c pass), b (SDK-less echo server), c (SDK tool).
    #[arg(long, value_delimiter = ',', default_value = "a,b,c")]
    scenarios: Vec<Scenario>,
    /// Variants to compare; bare is the baseline and always runs.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "bare,launcher,bwrap,fork"
    )]
    variants: Vec<Variant>,
    /// Warm SDK tools per variant kept running at once for the memory figures (scenario c).
    #[arg(long, default_value_t = 3)]
    warm: usize,
    /// The Python runtime (a venv with `mcp`) [default: $AUTOTOOL_TEST_RUNTIME or /opt/autotool-test-runtime]
    #[arg(long)]
    runtime: Option<PathBuf>,
    /// autotool-launcher binary [default: next to this binary, i.e. target/release/autotool-launcher]
    #[arg(long)]
    launcher: Option<PathBuf>,
    /// bubblewrap binary [default: `bwrap` on PATH]
    #[arg(long)]
    bwrap: Option<PathBuf>,
    /// Seconds a single start may take before it is killed and counted as a failure.
    #[arg(long, default_value_t = 30)]
    timeout: u64,
    /// Print each variant's command line before measuring.
    #[arg(long)]
    show_commands: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Scenario {
    A,
    B,
    C,
}

impl Scenario {
    fn title(self) -> &'static str {
        match self {
            Scenario::A => "(a) fixed cost: python3 -c pass, spawn → exit",
            Scenario::B => "(b) SDK-less stdio MCP server, spawn → initialize answered",
            Scenario::C => {
                "(c) tool on the mcp SDK (MCPServer, one tool), spawn → initialize answered"
            }
        }
    }

    fn label(self) -> &'static str {
        match self {
            Scenario::A => "(a)",
            Scenario::B => "(b)",
            Scenario::C => "(c)",
        }
    }

    fn workload(self) -> (Workload, Until) {
        let isolated = || vec!["-I".to_string(), "-B".to_string()];
        match self {
            Scenario::A => {
                let mut args = isolated();
                args.extend(["-c".to_string(), "pass".to_string()]);
                // The tool path lands in sys.argv[1] and is never opened; it keeps the argv
                // shape the launcher always produces.
                (
                    Workload {
                        tool_file: "echo_server.py",
                        interpreter_args: args,
                    },
                    Until::Exit,
                )
            }
            Scenario::B => (
                Workload {
                    tool_file: "echo_server.py",
                    interpreter_args: isolated(),
                },
                Until::Initialized,
            ),
            Scenario::C => (
                Workload {
                    tool_file: "sdk_tool.py",
                    interpreter_args: isolated(),
                },
                Until::Initialized,
            ),
        }
    }
}

/// The measured sample of one variant in one scenario.
#[derive(Debug)]
struct Sample {
    variant: Variant,
    times: Vec<Duration>,
}

/// One scenario's outcome: summaries per variant, and the variants that could not run.
#[derive(Debug)]
struct Outcome {
    scenario: Scenario,
    summaries: Vec<(Variant, Summary)>,
    failed: Vec<(Variant, String)>,
}

impl Outcome {
    fn summary(&self, v: Variant) -> Option<&Summary> {
        self.summaries.iter().find(|(x, _)| *x == v).map(|(_, s)| s)
    }
}

fn main() -> ExitCode {
    match real_main() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("launcher-bench: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Returns whether every requested variant ran.
fn real_main() -> Result<bool> {
    let args = Args::parse();
    let runtime = args
        .runtime
        .clone()
        .or_else(|| std::env::var_os("AUTOTOOL_TEST_RUNTIME").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_RUNTIME));
    let mut variants = args.variants.clone();
    variants.push(Variant::Bare);
    variants.sort();
    variants.dedup();

    let mut all_ran = true;
    let launcher = if variants.contains(&Variant::Launcher) || variants.contains(&Variant::Fork) {
        let path = match &args.launcher {
            Some(p) => p.clone(),
            None => std::env::current_exe()
                .context("locate this binary")?
                .with_file_name("autotool-launcher"),
        };
        if path.is_file() {
            Some(path)
        } else {
            println!(
                "launcher: not found at {} — build it with `cargo build --release -p \
                 autotool-launcher` or pass --launcher PATH; measuring without it",
                path.display()
            );
            all_ran = false;
            None
        }
    } else {
        None
    };
    let bwrap = if variants.contains(&Variant::Bwrap) {
        let found = args
            .bwrap
            .clone()
            .or_else(|| variant::find_on_path("bwrap"));
        if found.is_none() {
            println!(
                "bwrap: bubblewrap is not installed (apt-get install bubblewrap); measuring without it"
            );
            all_ran = false;
        }
        found
    } else {
        None
    };
    let runtime_dirs = variant::runtime_dirs(&runtime)?;
    let fork = match (&launcher, variants.contains(&Variant::Fork)) {
        (Some(l), true) => match variant::start_fork(l, &runtime, &runtime_dirs) {
            Ok(f) => Some(f),
            Err(e) => {
                println!("fork: the template could not be started ({e:#}); measuring without it");
                all_ran = false;
                None
            }
        },
        _ => None,
    };
    variants.retain(|v| match v {
        Variant::Bare => true,
        Variant::Launcher => launcher.is_some(),
        Variant::Bwrap => bwrap.is_some(),
        Variant::Fork => fork.is_some(),
    });

    let setup = Setup {
        runtime_dirs,
        runtime,
        tool_dir: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tools"),
        launcher,
        bwrap,
        fork,
    };

    println!(
        "launcher-bench: {} rounds (+{} warm-up), variants interleaved each round: {}",
        args.rounds,
        args.warmup.max(1),
        variants
            .iter()
            .map(|v| v.name())
            .collect::<Vec<_>>()
            .join(" → ")
    );
    println!("  runtime  {}", setup.interpreter().display());
    if let Some(l) = &setup.launcher {
        println!("  launcher {}", l.display());
    }
    if let Some(b) = &setup.bwrap {
        println!("  bwrap    {} ({})", b.display(), bwrap_version(b));
    }
    println!(
        "  running as uid {}, on {} cores",
        nix::unistd::getuid(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    let timeout = Duration::from_secs(args.timeout);
    let mut outcomes = Vec::new();
    for &scenario in &args.scenarios {
        let outcome = measure(&setup, scenario, &variants, &args, timeout);
        print_outcome(&outcome);
        all_ran &= outcome.failed.is_empty();
        outcomes.push(outcome);
    }
    if args.scenarios.contains(&Scenario::C) && args.warm > 0 {
        all_ran &= memory(&setup, &variants, args.warm, timeout);
    }
    println!();
    println!("{}", verdict(&outcomes, args.rounds));
    Ok(all_ran)
}

/// Run one scenario: warm-up rounds (a variant failing there is dropped, with its error), then
/// the measured rounds, variants interleaved.
fn measure(
    setup: &Setup,
    scenario: Scenario,
    variants: &[Variant],
    args: &Args,
    timeout: Duration,
) -> Outcome {
    let (work, until) = scenario.workload();
    let mut failed = Vec::new();
    let mut samples: Vec<Sample> = variants
        .iter()
        .map(|&variant| Sample {
            variant,
            times: Vec::with_capacity(args.rounds),
        })
        .collect();

    println!();
    println!("{}", scenario.title());
    if args.show_commands {
        for s in &samples {
            if let Ok(p) = variant::prepare(setup, s.variant, &work) {
                println!("  {:<9} {:?}", s.variant.name(), p.command);
            }
        }
    }

    let warmup = args.warmup.max(1);
    for round in 0..warmup + args.rounds {
        let measured = round >= warmup;
        samples.retain_mut(|sample| {
            let result = match (sample.variant, &setup.fork) {
                (Variant::Fork, Some(fork)) => {
                    let policy = setup.policy_for(Variant::Fork, &work);
                    run::time_forked(fork, &policy, until, timeout)
                }
                _ => variant::prepare(setup, sample.variant, &work)
                    .and_then(|p| run::time_once(p, until, timeout)),
            };
            match result {
                Ok(t) => {
                    if measured {
                        sample.times.push(t);
                    }
                    true
                }
                Err(e) => {
                    println!(
                        "  {:<9} FAILED in round {}: {e:#}",
                        sample.variant.name(),
                        round + 1
                    );
                    failed.push((sample.variant, format!("{e:#}")));
                    false
                }
            }
        });
    }
    let summaries = samples
        .iter()
        .filter_map(|s| Summary::of(&s.times).map(|sum| (s.variant, sum)))
        .collect();
    Outcome {
        scenario,
        summaries,
        failed,
    }
}

fn print_outcome(o: &Outcome) {
    println!(
        "  {:<9} {:>9} {:>9} {:>9}   median vs bare",
        "variant", "min ms", "median ms", "max ms"
    );
    let bare = o.summary(Variant::Bare);
    for (v, s) in &o.summaries {
        let versus = match (bare, v) {
            (Some(b), Variant::Launcher | Variant::Bwrap | Variant::Fork) => {
                format!("×{:.3}  {:+.2} ms", s.ratio_to(b), s.added_over(b))
            }
            _ => String::new(),
        };
        println!(
            "  {:<9} {:>9.2} {:>9.2} {:>9.2}   {versus}",
            v.name(),
            s.min_ms,
            s.median_ms,
            s.max_ms
        );
    }
    for (v, _) in &o.failed {
        println!("  {:<9} not measured (failed, see above)", v.name());
    }
}

/// The closing line: what the launcher and bubblewrap add over bare, in median milliseconds, for
/// the scenarios where start-up cost is not drowned by the SDK's import time.
fn verdict(outcomes: &[Outcome], rounds: usize) -> String {
    let mut parts = Vec::new();
    for o in outcomes {
        if o.scenario == Scenario::C {
            continue;
        }
        let Some(bare) = o.summary(Variant::Bare) else {
            continue;
        };
        let added = |v| {
            o.summary(v).map_or("not measured".to_string(), |s| {
                format!("{:+.2} ms", s.added_over(bare))
            })
        };
        parts.push(format!(
            "{} launcher {} vs bwrap {}, fork {}",
            o.scenario.label(),
            added(Variant::Launcher),
            added(Variant::Bwrap),
            added(Variant::Fork)
        ));
    }
    if parts.is_empty() {
        return "verdict: nothing to compare (run scenario a or b)".to_string();
    }
    format!(
        "verdict (median added over bare, {rounds} rounds): {}",
        parts.join("; ")
    )
}

/// Keep `warm` initialised SDK tools of each variant running at once, and print the PSS and
/// private dirty memory of each one's whole process tree (launcher or init included), read from
/// `/proc/<pid>/smaps_rollup`; for the fork variant, the template's own tree too (paid once per
/// runtime). Returns whether every variant could be measured.
fn memory(setup: &Setup, variants: &[Variant], warm: usize, timeout: Duration) -> bool {
    let (work, _) = Scenario::C.workload();
    println!();
    println!("(c) memory: {warm} warm SDK tools per variant at once, whole process tree each");
    println!(
        "  {:<9} {:>12} {:>18} {:>10}",
        "variant", "PSS MiB/tool", "private dirty MiB", "processes"
    );
    let mib = |kib: u64| kib as f64 / 1024.0;
    let mut ok = true;
    // Measured while no forked tool runs: the launcher, the template's init and the template.
    let template_alone = setup
        .fork
        .as_ref()
        .map(|f| run::tree_memory(f.template.launcher_pid))
        .unwrap_or_default();
    for &v in variants {
        if v == Variant::Bwrap {
            continue;
        }
        let started: Result<Vec<run::Warm>> = (0..warm)
            .map(|_| match (v, &setup.fork) {
                (Variant::Fork, Some(fork)) => {
                    run::warm_forked(fork, &setup.policy_for(v, &work), timeout)
                }
                _ => variant::prepare(setup, v, &work).and_then(|p| run::warm_spawned(p, timeout)),
            })
            .collect();
        let tools = match started {
            Ok(t) => t,
            Err(e) => {
                println!("  {:<9} FAILED: {e:#}", v.name());
                ok = false;
                continue;
            }
        };
        // Let start-up allocations settle.
        std::thread::sleep(Duration::from_millis(300));
        let per: Vec<run::Memory> = tools.iter().map(|t| run::tree_memory(t.root())).collect();
        let n = per.len().max(1) as u64;
        let pss = per.iter().map(|m| m.pss_kib).sum::<u64>() / n;
        let dirty = per.iter().map(|m| m.private_dirty_kib).sum::<u64>() / n;
        let procs = per.iter().map(|m| m.processes).sum::<usize>() / per.len().max(1);
        println!(
            "  {:<9} {:>12.1} {:>18.1} {:>10}",
            v.name(),
            mib(pss),
            mib(dirty),
            procs
        );
        if let (Variant::Fork, Some(fork)) = (v, &setup.fork) {
            // The template's tree holds every forked tool: its total over the tools is what
            // each costs with its share of the template.
            let all = run::tree_memory(fork.template.launcher_pid);
            println!(
                "  {:<9} {:>12.1} {:>18.1} {:>10}   (template + all {} forked trees, per tool; the template alone: {:.1} MiB PSS)",
                "fork+tmpl",
                mib(all.pss_kib / n),
                mib(all.private_dirty_kib / n),
                all.processes,
                per.len(),
                mib(template_alone.pss_kib),
            );
        }
        drop(tools);
    }
    ok
}

fn bwrap_version(bwrap: &std::path::Path) -> String {
    std::process::Command::new(bwrap)
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "version unknown".to_string())
}
