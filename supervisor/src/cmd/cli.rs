//! The command line: [`main`] parses it ([`Cli`]) and runs the verb.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "autotool",
    version,
    about = "Grow MCP tools for your agents, confined"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
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
        apps: Vec<crate::host_apps::App>,
        /// Install the launcher with file capabilities (for machines without unprivileged user
        /// namespaces). Asks before running anything through sudo.
        #[arg(long)]
        launcher: bool,
        /// Do not ask for confirmation (with --launcher).
        #[arg(long, requires = "launcher")]
        yes: bool,
        /// Register `autotool connect` (the bridge to the service, `autotool service install`)
        /// instead of `autotool serve`, so every app shares one supervisor.
        #[arg(long, conflicts_with = "launcher")]
        service: bool,
        /// Print what would be done (for apps, each change as a diff) and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Serve MCP on stdin/stdout: the command a host app runs (or over HTTP with `--transport
    /// http`). Agents create tools with `create_tool`; they are verified, confined, mounted live
    /// and kept for every agent.
    Serve {
        /// `stdio` (default) or `http` (streamable HTTP at /mcp on `--listen`).
        #[arg(long, default_value = "stdio", value_parser = ["stdio", "http"])]
        transport: String,
        /// Where HTTP listens: 127.0.0.1:PORT (default 127.0.0.1:8765), [::1]:PORT or unix:PATH;
        /// give it more than once to listen on several.
        #[arg(long)]
        listen: Vec<String>,
        /// HTTP: do not require the bearer token ($AUTOTOOL_HOME/service-token). Unix sockets
        /// only (`--listen unix:PATH`); refused on TCP.
        #[arg(long)]
        no_auth: bool,
        /// HTTP: allow listening on an address other than loopback (the token is required).
        #[arg(long)]
        allow_remote: bool,
        /// `strict` (default) confines every tool; only an explicit `off`, `0`, `false` or `no`
        /// runs them unconfined (also `AUTOTOOL_SANDBOX`, `sandbox` in config.toml).
        #[arg(long)]
        sandbox: Option<String>,
        /// Wall-clock bound on one tool call: seconds, or 500ms, 2m… [default: 60s; also
        /// `AUTOTOOL_CALL_TIMEOUT`, `call_timeout` in config.toml]
        #[arg(long)]
        call_timeout: Option<String>,
        /// Stop a tool process unused this long: seconds, or 10m… [default: 600s; also
        /// `AUTOTOOL_IDLE_TIMEOUT`, `idle_timeout` in config.toml]
        #[arg(long)]
        idle_timeout: Option<String>,
        /// Bytes of text a tool result may carry before it is truncated, or 256KiB… [default:
        /// 256KiB; also `AUTOTOOL_MAX_OUTPUT_BYTES`, `max_output_bytes` in config.toml]
        #[arg(long)]
        max_output_bytes: Option<String>,
        /// Grant every tool the keys it declares without asking (also
        /// `AUTOTOOL_CONSENT=dangerously-allow-all`). The sandbox and allowlists still apply.
        #[arg(long)]
        dangerously_allow_all_tools: bool,
    },
    /// See autotool work, offline and without a key: a scripted agent grows a tool for a fake
    /// Hacker-News-like API (verification and repair, consent, redaction, the allowlist), under
    /// the strict sandbox. Exits non-zero if any step does not happen.
    #[cfg(feature = "own-model")]
    Demo {
        /// Keep the demo's temporary AUTOTOOL_HOME to look at afterwards.
        #[arg(long)]
        keep: bool,
    },
    /// Print every setting in effect, its value and the layer it came from: the environment,
    /// $AUTOTOOL_HOME/config.toml or the default (for `serve`, its flags first). Exits non-zero,
    /// naming the setting, the layer and the problem, when a value anywhere is bad.
    Config {
        /// Print JSON.
        #[arg(long, conflicts_with = "get")]
        json: bool,
        /// Print only this setting's value (for example `call_timeout` or
        /// `limits.memory_bytes`).
        #[arg(long, value_name = "NAME")]
        get: Option<String>,
    },
    /// Speak MCP on stdin/stdout, relayed to the autotool service (`autotool service install`):
    /// for host apps that only spawn stdio servers, so every host shares one supervisor.
    Connect,
    /// Run autotool as a systemd user service: one supervisor on streamable HTTP (loopback and a
    /// unix socket) for every host on the machine.
    Service {
        #[command(subcommand)]
        cmd: ServiceCmd,
    },
    /// List, show and remove the tools every agent on this machine shares.
    Tools {
        #[command(subcommand)]
        cmd: crate::cmd::tools::ToolsCmd,
    },
    /// Add, list and remove the keys (API credentials) tools may be given, and limit where each
    /// may be sent. Values are read without echo and never printed.
    Keys {
        #[command(subcommand)]
        cmd: crate::cmd::keys::KeysCmd,
    },
    /// Do a task with a demo agent on your own model (from ./.env): it writes the tools it lacks
    /// into ./tools and prints each step. No consent prompts or allowlists; tools are still
    /// confined.
    #[cfg(feature = "own-model")]
    Run {
        /// What to do, in plain words.
        task: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ServiceCmd {
    /// Write ~/.config/systemd/user/autotool.service and enable and start it.
    Install {
        /// Where HTTP hosts reach it (loopback).
        #[arg(long, default_value = crate::cmd::service::DEFAULT_TCP)]
        listen: String,
        /// Only write the unit.
        #[arg(long)]
        no_start: bool,
    },
    /// Stop, disable and remove the unit.
    Uninstall,
    /// Whether the unit is installed and the service answers. Exits non-zero when it does not.
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Parse the command line and run the verb.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Cmd::Serve {
        transport,
        listen,
        no_auth,
        allow_remote,
        sandbox,
        call_timeout,
        idle_timeout,
        max_output_bytes,
        dangerously_allow_all_tools,
    } = &cli.command
    {
        let mut flags = std::collections::BTreeMap::new();
        for (name, value) in [
            ("sandbox", sandbox),
            ("call_timeout", call_timeout),
            ("idle_timeout", idle_timeout),
            ("max_output_bytes", max_output_bytes),
        ] {
            if let Some(v) = value {
                flags.insert(name.to_string(), v.clone());
            }
        }
        if *dangerously_allow_all_tools {
            flags.insert("consent".into(), "dangerously-allow-all".into());
        }
        let config = match crate::config::Inputs::from_process(flags)
            .and_then(|inputs| crate::config::resolve(&inputs))
        {
            Ok(c) => c,
            Err(problems) => {
                eprintln!("autotool serve: {problems}");
                return ExitCode::FAILURE;
            }
        };
        let transport = if transport == "http" {
            let given: Vec<&str> = if listen.is_empty() {
                vec![super::serve::DEFAULT_LISTEN]
            } else {
                listen.iter().map(String::as_str).collect()
            };
            let parsed: Result<Vec<_>, _> = given
                .into_iter()
                .map(crate::mcp::http::Listen::parse)
                .collect();
            match parsed {
                Ok(listen) => crate::cmd::serve::Transport::Http(crate::mcp::http::HttpOptions {
                    listen,
                    auth: !*no_auth,
                    allow_remote: *allow_remote,
                }),
                Err(e) => {
                    eprintln!("autotool serve: {e}");
                    return ExitCode::from(2);
                }
            }
        } else if !listen.is_empty() || *no_auth || *allow_remote {
            eprintln!(
                "autotool serve: --listen, --no-auth and --allow-remote need --transport http"
            );
            return ExitCode::from(2);
        } else {
            crate::cmd::serve::Transport::Stdio
        };
        return super::serve::main(config, transport);
    }
    if let Cmd::Connect = &cli.command {
        return super::connect::main();
    }
    #[cfg(feature = "own-model")]
    if let Cmd::Demo { keep } = &cli.command {
        return super::demo::main(*keep);
    }
    // Not for `serve`: there stdout is the JSON-RPC channel, written from the runtime's threads.
    let mut stdout = std::io::stdout().lock();
    match cli.command {
        Cmd::Serve { .. } | Cmd::Connect => ExitCode::FAILURE,
        #[cfg(feature = "own-model")]
        Cmd::Demo { .. } => ExitCode::FAILURE,
        Cmd::Service { cmd } => super::service::main(cmd, &mut stdout),
        Cmd::Config { json, get } => super::config::main(json, get.as_deref(), &mut stdout),
        Cmd::Doctor { json } => super::doctor::main(json, &mut stdout),
        Cmd::Setup {
            launcher: true,
            yes,
            dry_run,
            ..
        } => match crate::cmd::setup::install_launcher(yes, dry_run, &mut stdout) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("autotool setup: {e}");
                ExitCode::FAILURE
            }
        },
        Cmd::Setup {
            apps,
            dry_run,
            service,
            ..
        } => super::setup::hosts(apps, dry_run, service, &mut stdout),
        Cmd::Tools { cmd } => crate::cmd::tools::run(cmd, &mut stdout),
        Cmd::Keys { cmd } => crate::cmd::keys::run(cmd, &mut stdout),
        #[cfg(feature = "own-model")]
        Cmd::Run { task } => crate::cmd::run::main(&task, &mut stdout),
    }
}

/// Run `work` on a multi-threaded async runtime: success, or its error on stderr after
/// `autotool CMD:` and a failing exit.
pub(crate) fn block_on<T>(
    cmd: &str,
    work: impl std::future::Future<Output = anyhow::Result<T>>,
) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("autotool {cmd}: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(work) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("autotool {cmd}: {e:#}");
            ExitCode::FAILURE
        }
    }
}
