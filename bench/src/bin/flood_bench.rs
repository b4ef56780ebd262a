//! `flood-bench`: what tools that attack autotool through their MCP link cost `autotool serve`,
//! measured side by side with an idle serve in one run.
//!
//! The attacking tool is the escape suite's `tests/tools/serve/link_attacks.py` (a real tool on
//! the `mcp` SDK, confined as serve confines every tool). One serve on a fresh home holds a
//! bystander (the same code, only ever asked to add) and `--tools` attackers, all warm. Then:
//! - **one tool**: each attack alone, on one attacker: 64 MiB of log notifications carrying
//!   its key; 30 pings with ids of 8 MiB while it stops reading its stdin; a stream of requests
//!   to autotool (ping, roots/list); a 2 MB answer; a function that blocks while autotool
//!   writes 1 MiB messages to it;
//! - **ten at once**: every attacker at once, the attacks dealt round, `--rounds` times.
//!
//! Throughout, the bystander is called in a loop: every call must answer. serve's memory comes
//! from `/proc/<pid>/status`: `VmRSS` after each phase, and the phase's peak `VmHWM` (reset
//! before each phase through `/proc/<pid>/clear_refs`). The idle figure is a second serve on
//! another fresh home, after `initialize` and `tools/list`, with no tool. Targets: one attacking
//! tool costs serve at most 16 MiB at its peak over serve before it; ten at once leave serve
//! (peak and after) at most idle + 64 MiB; the bystander answers every call.
//!
//! It prints the figures and whether each target is met, asserts nothing, and exits 1 only
//! when a part could not run.
//!
//! Run: `cargo build --release -p autotool -p autotool-launcher && cargo run --release -p
//! autotool-bench --bin flood-bench`.

use anyhow::{Context, Result, bail};
use autotool_tests::serve::{Sandbox, Serve, ServeHome, Server};
use clap::Parser;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The attacking tool.
const FIXTURE: &str = include_str!("../../../tests/tools/serve/link_attacks.py");
/// The key every attacker holds.
const KEY: &str = "fb-2c71d9e0a4-flood-bench-value";
/// Targets from the plan (issue 16, §3).
const TARGET_ONE_MIB: f64 = 16.0;
const TARGET_TEN_OVER_IDLE_MIB: f64 = 64.0;

#[derive(Debug, Parser)]
#[command(
    name = "flood-bench",
    about = "What tools attacking their MCP link cost `autotool serve`, beside an idle serve",
    after_help = "Build first: cargo build --release -p autotool -p autotool-launcher\n\
                  Then: cargo run --release -p autotool-bench --bin flood-bench"
)]
struct Args {
    /// Attacking tools.
    #[arg(long, default_value_t = 10)]
    tools: usize,
    /// Rounds of all attackers at once.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Milliseconds to let serve settle before reading its memory.
    #[arg(long, default_value_t = 1000)]
    settle_ms: u64,
    /// The `autotool` binary [default: next to this binary, i.e. target/release/autotool]
    #[arg(long)]
    autotool: Option<PathBuf>,
    /// The Python runtime [default: $AUTOTOOL_TEST_RUNTIME or /opt/autotool-test-runtime]
    #[arg(long)]
    runtime: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    // The harness finds serve and the runtime through the environment; set them for a run of
    // this same binary (no `unsafe` `set_var` here).
    if std::env::var_os("AUTOTOOL_BIN").is_none() {
        return match reexec(&args) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("flood-bench: {e:#}");
                ExitCode::from(2)
            }
        };
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("flood-bench: {e:#}");
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
    let mut child = std::process::Command::new(&me);
    child
        .args(std::env::args_os().skip(1))
        .env("AUTOTOOL_BIN", &autotool);
    if let Some(runtime) = &args.runtime {
        child.env("AUTOTOOL_TEST_RUNTIME", runtime);
    }
    let status = child.status().context("running the bench")?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}

/// serve's memory, in KiB.
#[derive(Debug, Clone, Copy, Default)]
struct Memory {
    rss: u64,
    peak: u64,
}

fn memory(pid: u32) -> Result<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    Ok(Memory {
        rss: field("VmRSS:"),
        peak: field("VmHWM:"),
    })
}

/// Start a new peak: `VmHWM` becomes the current `VmRSS`.
fn reset_peak(pid: u32) -> Result<()> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
        .with_context(|| format!("resetting the peak through /proc/{pid}/clear_refs"))
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// One attack: a function of the attacking tool and its arguments.
#[derive(Debug, Clone)]
struct Attack {
    label: &'static str,
    calls: Vec<(&'static str, Value)>,
}

fn attacks() -> Vec<Attack> {
    let big_text = "m".repeat(1 << 20);
    let requests = ["ping", "roots/list"].repeat(20);
    vec![
        Attack {
            label: "64 MiB of log notifications with its key",
            calls: vec![("log_flood", json!({"megabytes": 64}))],
        },
        Attack {
            label: "30 pings with 8 MiB ids, not reading stdin",
            calls: vec![("ping_flood", json!({"count": 30, "id_mib": 8, "hold": 20}))],
        },
        Attack {
            label: "requests to autotool (ping, roots/list) ×40",
            calls: vec![("requests_raw", json!({"methods": requests}))],
        },
        Attack {
            label: "a 2 MB answer",
            calls: vec![("big", json!({"size": 2_000_000}))],
        },
        Attack {
            label: "blocks while autotool writes 2 × 1 MiB",
            calls: vec![
                ("block", json!({"seconds": 40})),
                ("measure", json!({"text": big_text.clone()})),
                ("measure", json!({"text": big_text})),
            ],
        },
    ]
}

/// What one phase did.
#[derive(Debug, Default)]
struct Phase {
    label: String,
    memory: Memory,
    /// Attacking calls that ended with the tool stopped (an error result).
    stopped: usize,
    attacking_calls: usize,
    /// Bystander calls answered correctly, of those made, and the slowest.
    answered: usize,
    asked: usize,
    slowest: Duration,
    took: Duration,
}

fn run(args: &Args) -> Result<()> {
    let settle = Duration::from_millis(args.settle_ms);
    println!(
        "flood-bench: {} attacking tools and a bystander in one serve, beside an idle serve",
        args.tools
    );
    println!(
        "  autotool {}",
        std::env::var("AUTOTOOL_BIN").unwrap_or_default()
    );

    // Idle: a fresh home, no tool.
    let idle_home = ServeHome::new()?;
    let mut idle = Serve::new(Sandbox::Strict)
        .start_initialized(&idle_home)
        .context("starting the idle serve")?;
    idle.tool_names()?;
    std::thread::sleep(settle);
    let idle_memory = memory(idle.pid())?;

    let home = ServeHome::new()?;
    let mut server = Serve::new(Sandbox::Strict)
        .call_timeout(60)
        .arg("--dangerously-allow-all-tools")
        .env("LINK_API_KEY", KEY)
        .start_initialized(&home)
        .context("starting serve")?;
    let attackers: Vec<String> = (0..args.tools).map(|i| format!("attacker{i}")).collect();
    for name in std::iter::once("bystander").chain(attackers.iter().map(String::as_str)) {
        let created = server.call_result(
            "create_tool",
            json!({"name": name, "code": FIXTURE, "verify": "quick",
                   "smoke_test": {"function": "add", "arguments": {"a": 1, "b": 2}}}),
        )?;
        if created.is_error {
            bail!("creating {name}: {}", created.text);
        }
        call(&mut server, name, "instance", json!({}))?;
    }
    std::thread::sleep(settle);
    let ready = memory(server.pid())?;
    let pid = server.pid();

    let mut phases = Vec::new();
    for attack in attacks() {
        let plan: Vec<(String, &'static str, Value)> = attack
            .calls
            .iter()
            .map(|(f, a)| (attackers[0].clone(), *f, a.clone()))
            .collect();
        let mut phase = under_attack(&mut server, pid, &plan, settle)?;
        phase.label = format!("one tool: {}", attack.label);
        phases.push(phase);
    }

    // Ten at once: the single-call attacks dealt round the attackers.
    let dealt: Vec<Attack> = attacks()
        .into_iter()
        .filter(|a| a.calls.len() == 1)
        .collect();
    let mut ten = Phase {
        label: format!("{} tools at once, {} rounds", args.tools, args.rounds),
        ..Phase::default()
    };
    let t0 = Instant::now();
    reset_peak(pid)?;
    let mut peak = 0;
    for round in 0..args.rounds {
        let plan: Vec<(String, &'static str, Value)> = attackers
            .iter()
            .enumerate()
            .map(|(i, tool)| {
                let (f, a) = &dealt[(i + round) % dealt.len()].calls[0];
                (tool.clone(), *f, a.clone())
            })
            .collect();
        let phase = under_attack(&mut server, pid, &plan, Duration::ZERO)?;
        peak = peak.max(phase.memory.peak);
        ten.stopped += phase.stopped;
        ten.attacking_calls += phase.attacking_calls;
        ten.answered += phase.answered;
        ten.asked += phase.asked;
        ten.slowest = ten.slowest.max(phase.slowest);
    }
    std::thread::sleep(settle);
    ten.memory = Memory {
        rss: memory(pid)?.rss,
        peak: peak.max(memory(pid)?.peak),
    };
    ten.took = t0.elapsed();
    phases.push(ten);

    print(idle_memory, ready, &phases, args);
    let _ = idle.finish(Duration::from_secs(10));
    let _ = server.finish(Duration::from_secs(20));
    Ok(())
}

/// Call `tool`'s `function` through `run_tool` (with `force`: an attacker is soon quarantined).
fn call(server: &mut Server, tool: &str, function: &str, arguments: Value) -> Result<Value> {
    server.request_ok(
        "tools/call",
        json!({"name": "run_tool", "arguments":
            {"tool": tool, "function": function, "arguments": arguments, "force": true}}),
    )
}

/// Start every call of `plan` at once, call the bystander until all have answered, then read
/// serve's memory (peak over the phase, and after `settle`).
fn under_attack(
    server: &mut Server,
    pid: u32,
    plan: &[(String, &'static str, Value)],
    settle: Duration,
) -> Result<Phase> {
    // Each attacker answers its `instance` first, so every attack meets a warm process.
    for (tool, _, _) in plan {
        call(server, tool, "instance", json!({}))?;
    }
    reset_peak(pid)?;
    let t0 = Instant::now();
    let mut pending = Vec::new();
    for (tool, function, arguments) in plan {
        let id = server.start_request(
            "tools/call",
            json!({"name": "run_tool", "arguments":
                {"tool": tool, "function": function, "arguments": arguments, "force": true}}),
        )?;
        pending.push(id);
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut phase = Phase {
        attacking_calls: plan.len(),
        ..Phase::default()
    };
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut n: i64 = 0;
    while !pending.is_empty() {
        if Instant::now() > deadline {
            bail!(
                "{} attacking calls got no answer within 90 s",
                pending.len()
            );
        }
        n += 1;
        let asked = Instant::now();
        phase.asked += 1;
        let sum = server
            .call_text("bystander__add", json!({"a": n, "b": 1}))
            .ok();
        phase.slowest = phase.slowest.max(asked.elapsed());
        if sum.as_deref() == Some((n + 1).to_string().as_str()) {
            phase.answered += 1;
        }
        let mut still = Vec::new();
        for id in pending {
            match server.wait_answer(id, Duration::from_millis(1)) {
                Ok(answer) => {
                    if answer.pointer("/result/isError") == Some(&json!(true)) {
                        phase.stopped += 1;
                    }
                }
                Err(_) => still.push(id),
            }
        }
        pending = still;
        std::thread::sleep(Duration::from_millis(20));
    }
    phase.took = t0.elapsed();
    let peak = memory(pid)?.peak;
    std::thread::sleep(settle);
    phase.memory = Memory {
        rss: memory(pid)?.rss,
        peak: peak.max(memory(pid)?.peak),
    };
    Ok(phase)
}

fn print(idle: Memory, ready: Memory, phases: &[Phase], args: &Args) {
    println!();
    println!(
        "serve's memory from /proc/<pid>/status (MiB); peak = VmHWM over the phase; Δ peak is \
         over serve just before the phase"
    );
    println!(
        "{:<52} {:>8} {:>8} {:>8} {:>9} {:>12} {:>10}",
        "", "VmRSS", "peak", "Δ peak", "stopped", "bystander", "slowest"
    );
    println!(
        "{:<52} {:>8.1} {:>8.1}",
        "serve idle (fresh home, no tool)",
        mib(idle.rss),
        mib(idle.peak)
    );
    println!(
        "{:<52} {:>8.1} {:>8.1}",
        format!("serve ready ({} attackers + bystander, warm)", args.tools),
        mib(ready.rss),
        mib(ready.peak)
    );
    let mut before = ready.rss;
    let mut one_ok = true;
    let mut answered_ok = true;
    for p in phases {
        let delta = mib(p.memory.peak.saturating_sub(before));
        println!(
            "{:<52} {:>8.1} {:>8.1} {:>+8.1} {:>5}/{:<3} {:>7}/{:<4} {:>8.0}ms",
            p.label,
            mib(p.memory.rss),
            mib(p.memory.peak),
            delta,
            p.stopped,
            p.attacking_calls,
            p.answered,
            p.asked,
            p.slowest.as_secs_f64() * 1000.0
        );
        if p.label.starts_with("one tool") && delta > TARGET_ONE_MIB {
            one_ok = false;
        }
        answered_ok &= p.answered == p.asked && p.asked > 0;
        before = p.memory.rss;
    }
    let ten = phases.last();
    let ten_peak = ten.map_or(0.0, |p| mib(p.memory.peak));
    let ten_after = ten.map_or(0.0, |p| mib(p.memory.rss));
    let limit = mib(idle.rss) + TARGET_TEN_OVER_IDLE_MIB;
    println!();
    println!(
        "one attacking tool costs serve ≤ {TARGET_ONE_MIB} MiB at its peak: {}",
        met(one_ok)
    );
    println!(
        "{} at once: peak {ten_peak:.1} MiB, after {ten_after:.1} MiB, ≤ idle {:.1} + \
         {TARGET_TEN_OVER_IDLE_MIB} = {limit:.1} MiB: {}",
        args.tools,
        mib(idle.rss),
        met(ten_peak <= limit && ten_after <= limit)
    );
    println!(
        "the bystander answered every call during every attack: {}",
        met(answered_ok)
    );
}

fn met(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT met" }
}
