//! `autotool`: the command line.
#![deny(clippy::print_stdout)]

use clap::{Parser, Subcommand};
use std::io::Write;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "autotool",
    version,
    about = "Grow MCP tools for your agents, confined"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Check what this machine offers the sandbox, launch a trial tool, and say how to fix what
    /// is missing. Exits non-zero when tools cannot be confined.
    Doctor {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Install parts of autotool on this machine.
    Setup {
        /// Install the launcher with file capabilities (for machines without unprivileged user
        /// namespaces). Asks before running anything through sudo.
        #[arg(long, required = true)]
        launcher: bool,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
        /// Print what would be done and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut stdout = std::io::stdout().lock();
    match cli.command {
        Cmd::Doctor { json } => {
            let report = autotool::doctor::run();
            let text = if json {
                serde_json::to_string_pretty(&report).unwrap_or_default() + "\n"
            } else {
                report.render()
            };
            let _ = stdout.write_all(text.as_bytes());
            if report.worst() == autotool::doctor::Status::Fail {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Cmd::Setup {
            launcher: _,
            yes,
            dry_run,
        } => match autotool::setup::install_launcher(yes, dry_run, &mut stdout) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("autotool setup: {e}");
                ExitCode::FAILURE
            }
        },
    }
}
