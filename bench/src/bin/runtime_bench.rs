//! `runtime-bench`: how long the tool runtime takes to be ready, measured side by side in one
//! run, each variant a real `autotool runtime install` into a home that has no runtime:
//! - `from nothing`: a fresh `HOME`, so no uv, no pip cache and no uv cache: uv is fetched
//!   from PyPI with pip, then the environment is made and the pinned packages downloaded,
//!   installed and compiled;
//! - `warm cache`: a `HOME` whose uv and caches an earlier build left, a new `AUTOTOOL_HOME`:
//!   what a second home, a rebuild or a pin change costs;
//! - `pip fallback`: the same warm `HOME` with uv unavailable (`AUTOTOOL_UV` names nothing),
//!   so the build falls back to `python -m venv` and `pip install`, its cache warm.
//!
//! Variants are interleaved round by round. It needs PyPI (or the index in the machine's pip
//! and uv settings); figures depend on the network as much as on the machine. It prints min /
//! median / max per variant, which installer each build reported, the ratio of medians
//! against the targets (from nothing ≤ 8 s, warm ≤ 3 s) and pip's against uv's; it asserts
//! nothing, and exits 1 only when a build failed.

// Differences of medians are for start-up benches; this one compares ratios.
#[allow(dead_code)]
#[path = "../stats.rs"]
mod stats;

use anyhow::{Context, Result, bail};
use clap::Parser;
use stats::Summary;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

/// The targets: ready from nothing within 8 s, with a warm cache within 3 s.
const TARGET_COLD_S: f64 = 8.0;
const TARGET_WARM_S: f64 = 3.0;

#[derive(Debug, Parser)]
#[command(
    name = "runtime-bench",
    about = "The tool runtime ready from nothing, with a warm cache, and with pip: real builds, side by side"
)]
struct Args {
    /// Measured builds of each variant.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Leave the pip fallback out (it takes 15-30 s a build).
    #[arg(long)]
    no_pip: bool,
    /// The `autotool` binary [default: next to this binary, i.e. target/release/autotool]
    #[arg(long)]
    autotool: Option<PathBuf>,
    /// Where the homes are made [default: the system's temporary directory]
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// Variables a build must not inherit: they would point it at caches or a runtime of the
/// bench's caller. Everything else (the index, certificates, a proxy) stays the machine's.
const SCRUBBED: [&str; 7] = [
    "XDG_CACHE_HOME",
    "UV_CACHE_DIR",
    "PIP_CACHE_DIR",
    "AUTOTOOL_HOME",
    "AUTOTOOL_RUNTIME",
    "AUTOTOOL_UV",
    "VIRTUAL_ENV",
];

/// One build: `autotool runtime install` with `HOME=home`, `AUTOTOOL_HOME=autotool_home`.
/// Its time and the installer its last line names.
fn build(
    autotool: &Path,
    home: &Path,
    autotool_home: &Path,
    no_uv: bool,
) -> Result<(Duration, String)> {
    let mut cmd = Command::new(autotool);
    cmd.args(["runtime", "install"])
        .env("HOME", home)
        .env("AUTOTOOL_HOME", autotool_home);
    for v in SCRUBBED {
        if v != "AUTOTOOL_HOME" {
            cmd.env_remove(v);
        }
    }
    if no_uv {
        cmd.env("AUTOTOOL_UV", "/nonexistent/uv");
    }
    let t0 = Instant::now();
    let out = cmd.output().context("running autotool runtime install")?;
    let took = t0.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("the build failed ({}):\n{stderr}", out.status);
    }
    let installer = stderr
        .lines()
        .rev()
        .find_map(|l| l.split("built with ").nth(1))
        .map(|w| w.trim_end_matches(')').to_string())
        .unwrap_or_else(|| "?".into());
    Ok((took, installer))
}

fn beside_me(name: &str) -> Option<PathBuf> {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(name)))
}

fn main() -> ExitCode {
    match real_main() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("runtime-bench: {e:#}");
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
        .filter(|p| p.is_file())
        .context("no autotool binary: build it with `cargo build --release -p autotool`, or pass --autotool")?;
    let scratch = match &args.dir {
        Some(d) => tempfile::Builder::new()
            .prefix("runtime-bench.")
            .tempdir_in(d)?,
        None => tempfile::Builder::new()
            .prefix("runtime-bench.")
            .tempdir()?,
    };
    let root = scratch.path();
    let warm_home = root.join("warm-home");
    std::fs::create_dir_all(&warm_home)?;
    println!(
        "runtime-bench: {} rounds, autotool {}",
        args.rounds,
        autotool.display()
    );

    // Fill the warm home's uv, uv cache and pip cache (not measured).
    let (t, how) = build(&autotool, &warm_home, &root.join("warm-up-uv"), false)?;
    println!("  warm-up from nothing: {:.1} s ({how})", t.as_secs_f64());
    std::fs::remove_dir_all(root.join("warm-up-uv"))?;
    if !args.no_pip {
        let (t, how) = build(&autotool, &warm_home, &root.join("warm-up-pip"), true)?;
        println!("  warm-up of pip's cache: {:.1} s ({how})", t.as_secs_f64());
        std::fs::remove_dir_all(root.join("warm-up-pip"))?;
    }

    let names = ["from nothing", "warm cache", "pip fallback"];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); 3];
    let mut installers: Vec<Vec<String>> = vec![Vec::new(); 3];
    for round in 0..args.rounds {
        // From nothing: its own fresh HOME, removed afterwards (caches and all).
        let cold = root.join(format!("cold-{round}"));
        std::fs::create_dir_all(&cold)?;
        let (t, how) = build(&autotool, &cold, &cold.join(".autotool"), false)?;
        samples[0].push(t);
        installers[0].push(how);
        std::fs::remove_dir_all(&cold)?;

        let home = root.join(format!("warm-{round}"));
        let (t, how) = build(&autotool, &warm_home, &home, false)?;
        samples[1].push(t);
        installers[1].push(how);
        std::fs::remove_dir_all(&home)?;

        if !args.no_pip {
            let home = root.join(format!("pip-{round}"));
            let (t, how) = build(&autotool, &warm_home, &home, true)?;
            samples[2].push(t);
            installers[2].push(how);
            std::fs::remove_dir_all(&home)?;
        }
        println!(
            "  round {}: {}",
            round + 1,
            (0..3)
                .filter_map(|i| samples[i]
                    .last()
                    .filter(|_| samples[i].len() == round + 1)
                    .map(|t| format!("{} {:.1} s", names[i], t.as_secs_f64())))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let summaries: Vec<Option<Summary>> = samples.iter().map(|s| Summary::of(s)).collect();
    println!();
    println!(
        "  {:<14} {:>7} {:>7} {:>7}  built with",
        "variant", "min s", "median", "max"
    );
    for i in 0..3 {
        if let Some(s) = &summaries[i] {
            let mut how = installers[i].clone();
            how.dedup();
            println!(
                "  {:<14} {:>7.2} {:>7.2} {:>7.2}  {}",
                names[i],
                s.min_ms / 1e3,
                s.median_ms / 1e3,
                s.max_ms / 1e3,
                how.join(", ")
            );
        }
    }
    println!();
    if let Some(cold) = &summaries[0] {
        println!(
            "  from nothing: median {:.2} s, ×{:.2} of the {TARGET_COLD_S:.0} s target: {}",
            cold.median_ms / 1e3,
            cold.median_ms / 1e3 / TARGET_COLD_S,
            if cold.median_ms / 1e3 <= TARGET_COLD_S {
                "met"
            } else {
                "NOT met"
            }
        );
    }
    if let Some(warm) = &summaries[1] {
        println!(
            "  warm cache:   median {:.2} s, ×{:.2} of the {TARGET_WARM_S:.0} s target: {}",
            warm.median_ms / 1e3,
            warm.median_ms / 1e3 / TARGET_WARM_S,
            if warm.median_ms / 1e3 <= TARGET_WARM_S {
                "met"
            } else {
                "NOT met"
            }
        );
        if let Some(pip) = &summaries[2] {
            println!(
                "  pip fallback: median {:.2} s, ×{:.1} the warm uv build",
                pip.median_ms / 1e3,
                pip.ratio_to(warm)
            );
        }
    }
    Ok(())
}
