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
    /// Register `autotool serve` with every agent app found here (Claude Code, Codex, Cursor,
    /// Claude Desktop, OpenClaw), by this binary's absolute path. Each config is copied to
    /// `.bak` before it is edited; an existing Claude Code or Codex entry is left untouched.
    /// With `--launcher`, install the sandbox launcher instead.
    Setup {
        /// Only these apps (comma-separated or repeated), registered even where setup finds no
        /// sign of them.
        #[arg(
            long = "app",
            value_enum,
            value_delimiter = ',',
            conflicts_with = "launcher"
        )]
        apps: Vec<autotool::hosts::App>,
        /// Install the launcher with file capabilities (for machines without unprivileged user
        /// namespaces). Asks before running anything through sudo.
        #[arg(long)]
        launcher: bool,
        /// Do not ask for confirmation (with --launcher).
        #[arg(long, requires = "launcher")]
        yes: bool,
        /// Print what would be done (for apps, each change as a diff) and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Serve MCP on stdin/stdout: the command a host app runs. Agents create tools with
    /// `create_tool`; they are verified, confined, mounted live and kept for every agent.
    Serve {
        /// `strict` (default) confines every tool; only an explicit `off`, `0`, `false` or `no`
        /// runs them unconfined (also `AUTOTOOL_SANDBOX`).
        #[arg(long)]
        sandbox: Option<String>,
        /// Wall-clock bound on one tool call, in seconds.
        #[arg(long, default_value_t = 60)]
        call_timeout: u64,
        /// Stop a tool process unused for this many seconds.
        #[arg(long, default_value_t = 600)]
        idle_timeout: u64,
        /// Bytes of text a tool result may carry before it is truncated.
        #[arg(long, default_value_t = 256 * 1024)]
        max_output_bytes: usize,
        /// Grant every tool the keys it declares without asking (also
        /// `AUTOTOOL_CONSENT=dangerously-allow-all`). The sandbox and allowlists still apply.
        #[arg(long)]
        dangerously_allow_all_tools: bool,
    },
    /// List, show and remove the tools every agent on this machine shares.
    Tools {
        #[command(subcommand)]
        cmd: autotool::registry::cli::ToolsCmd,
    },
    /// Add, list and remove the keys (API credentials) tools may be given, and limit where each
    /// may be sent. Values are read without echo and never printed.
    Keys {
        #[command(subcommand)]
        cmd: autotool::credentials::cli::KeysCmd,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Cmd::Serve {
        sandbox,
        call_timeout,
        idle_timeout,
        max_output_bytes,
        dangerously_allow_all_tools,
    } = &cli.command
    {
        let allow_all_keys = *dangerously_allow_all_tools
            || std::env::var("AUTOTOOL_CONSENT").is_ok_and(|v| v == "dangerously-allow-all");
        let settings = autotool::app::Settings {
            sandbox: autotool::serve::sandbox_mode(sandbox.as_deref()),
            call_timeout: std::time::Duration::from_secs((*call_timeout).max(1)),
            idle_timeout: std::time::Duration::from_secs((*idle_timeout).max(1)),
            max_output_bytes: (*max_output_bytes).max(1024),
            allow_all_keys,
            ..Default::default()
        };
        return serve(settings);
    }
    // Not for `serve`: there stdout is the JSON-RPC channel, written from the runtime's threads.
    let mut stdout = std::io::stdout().lock();
    match cli.command {
        Cmd::Serve { .. } => ExitCode::FAILURE,
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
            launcher: true,
            yes,
            dry_run,
            ..
        } => match autotool::setup::install_launcher(yes, dry_run, &mut stdout) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("autotool setup: {e}");
                ExitCode::FAILURE
            }
        },
        Cmd::Setup { apps, dry_run, .. } => setup_hosts(apps, dry_run, &mut stdout),
        Cmd::Tools { cmd } => autotool::registry::cli::run(cmd, &mut stdout),
        Cmd::Keys { cmd } => autotool::credentials::cli::run(cmd, &mut stdout),
    }
}

/// `autotool setup` without `--launcher`: exits non-zero when a config found could not be read
/// or written.
fn setup_hosts(apps: Vec<autotool::hosts::App>, dry_run: bool, out: &mut dyn Write) -> ExitCode {
    use autotool::hosts;
    let run = || -> Result<hosts::Summary, hosts::HostsError> {
        let env = hosts::HostEnv::from_process()?;
        let entry = hosts::Entry::current()?;
        hosts::run(&hosts::Options { apps, dry_run }, &env, &entry, out)
    };
    match run() {
        Ok(summary) if summary.failed == 0 => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("autotool setup: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(settings: autotool::app::Settings) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("autotool serve: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(autotool::serve::run(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("autotool serve: {e:#}");
            ExitCode::FAILURE
        }
    }
}
