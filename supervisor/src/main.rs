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
        apps: Vec<autotool::host_apps::App>,
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
        /// HTTP: do not require the bearer token ($AUTOTOOL_HOME/service-token). Loopback and
        /// unix sockets only.
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
        cmd: autotool::cmd::tools::ToolsCmd,
    },
    /// Add, list and remove the keys (API credentials) tools may be given, and limit where each
    /// may be sent. Values are read without echo and never printed.
    Keys {
        #[command(subcommand)]
        cmd: autotool::cmd::keys::KeysCmd,
    },
    /// Do a task with a demo agent on your own model (from ./.env): it writes the tools it lacks
    /// into ./tools and prints each step. No consent prompts or allowlists; tools are still
    /// confined.
    Run {
        /// What to do, in plain words.
        task: String,
    },
}

#[derive(Debug, Subcommand)]
enum ServiceCmd {
    /// Write ~/.config/systemd/user/autotool.service and enable and start it.
    Install {
        /// Where HTTP hosts reach it (loopback).
        #[arg(long, default_value = autotool::cmd::service::DEFAULT_TCP)]
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

fn main() -> ExitCode {
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
        let config = match autotool::config::Inputs::from_process(flags)
            .and_then(|inputs| autotool::config::resolve(&inputs))
        {
            Ok(c) => c,
            Err(problems) => {
                eprintln!("autotool serve: {problems}");
                return ExitCode::FAILURE;
            }
        };
        let transport = if transport == "http" {
            let given: Vec<&str> = if listen.is_empty() {
                vec![DEFAULT_LISTEN]
            } else {
                listen.iter().map(String::as_str).collect()
            };
            let parsed: Result<Vec<_>, String> = given
                .into_iter()
                .map(autotool::mcp::http::Listen::parse)
                .collect();
            match parsed {
                Ok(listen) => {
                    autotool::cmd::serve::Transport::Http(autotool::mcp::http::HttpOptions {
                        listen,
                        auth: !*no_auth,
                        allow_remote: *allow_remote,
                    })
                }
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
            autotool::cmd::serve::Transport::Stdio
        };
        return serve(config, transport);
    }
    if let Cmd::Connect = &cli.command {
        return connect();
    }
    if let Cmd::Demo { keep } = &cli.command {
        return demo(*keep);
    }
    // Not for `serve`: there stdout is the JSON-RPC channel, written from the runtime's threads.
    let mut stdout = std::io::stdout().lock();
    match cli.command {
        Cmd::Serve { .. } | Cmd::Connect | Cmd::Demo { .. } => ExitCode::FAILURE,
        Cmd::Service { cmd } => service(cmd, &mut stdout),
        Cmd::Config { json, get } => config(json, get.as_deref(), &mut stdout),
        Cmd::Doctor { json } => {
            let config = autotool::config::Inputs::from_process(Default::default())
                .and_then(|inputs| autotool::config::resolve(&inputs));
            let report = autotool::cmd::doctor::run_all(&config);
            let text = if json {
                serde_json::to_string_pretty(&report).unwrap_or_default() + "\n"
            } else {
                report.render()
            };
            let _ = stdout.write_all(text.as_bytes());
            if report.worst() == autotool::cmd::doctor::Status::Fail {
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
        } => match autotool::cmd::setup::install_launcher(yes, dry_run, &mut stdout) {
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
        } => setup_hosts(apps, dry_run, service, &mut stdout),
        Cmd::Tools { cmd } => autotool::cmd::tools::run(cmd, &mut stdout),
        Cmd::Keys { cmd } => autotool::cmd::keys::run(cmd, &mut stdout),
        Cmd::Run { task } => autotool::own_model::run::main(&task, &mut stdout),
    }
}

/// `autotool config`: the settings `serve` would run with (but for its flags).
fn config(json: bool, get: Option<&str>, out: &mut impl Write) -> ExitCode {
    use autotool::config;
    let resolved =
        config::Inputs::from_process(Default::default()).and_then(|i| config::resolve(&i));
    let config = match resolved {
        Ok(c) => c,
        Err(problems) => {
            eprintln!("autotool config: {problems}");
            return ExitCode::FAILURE;
        }
    };
    let written = match get {
        Some(name) => match config.get(name) {
            Some(entry) => writeln!(out, "{}", entry.value),
            None => {
                let names: Vec<&str> = config::SETTINGS.iter().map(|s| s.name).collect();
                eprintln!(
                    "autotool config: no setting is called {name:?}; the settings are: {}",
                    names.join(", ")
                );
                return ExitCode::FAILURE;
            }
        },
        None if json => {
            let text = serde_json::to_string_pretty(&config::to_json(&config)).unwrap_or_default();
            writeln!(out, "{text}")
        }
        None => config::render(&config, out),
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        // `autotool config | head`: the reader has what it wanted.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("autotool config: cannot write the output: {e}");
            ExitCode::FAILURE
        }
    }
}

fn service(cmd: ServiceCmd, out: &mut impl Write) -> ExitCode {
    let home = match autotool::home::Home::from_env() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("autotool service: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match cmd {
        ServiceCmd::Install { listen, no_start } => {
            autotool::cmd::service::install(&home, &listen, !no_start, out)
        }
        ServiceCmd::Uninstall => autotool::cmd::service::uninstall(out),
        ServiceCmd::Status { json } => autotool::cmd::service::status(&home).and_then(|s| {
            if json {
                serde_json::to_writer_pretty(&mut *out, &s)?;
                writeln!(out)?;
            } else {
                autotool::cmd::service::render(&s, out)?;
            }
            if s.answering {
                Ok(())
            } else {
                Err(anyhow::anyhow!("the service is not answering"))
            }
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("autotool service: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `autotool setup` without `--launcher`: exits non-zero when a config found could not be read
/// or written.
fn setup_hosts(
    apps: Vec<autotool::host_apps::App>,
    dry_run: bool,
    service: bool,
    out: &mut dyn Write,
) -> ExitCode {
    use autotool::host_apps;
    let run = || -> Result<host_apps::Summary, host_apps::HostsError> {
        let env = host_apps::HostEnv::from_process()?;
        let mut entry = host_apps::Entry::current()?;
        if service {
            // Every app gets the stdio bridge: it works in all of them, and the service's
            // token stays in $AUTOTOOL_HOME instead of being copied into app configs.
            entry.args = vec!["connect".to_string()];
        }
        host_apps::run(&host_apps::Options { apps, dry_run }, &env, &entry, out)
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

fn demo(keep: bool) -> ExitCode {
    let out: std::sync::Arc<std::sync::Mutex<dyn Write + Send>> =
        std::sync::Arc::new(std::sync::Mutex::new(std::io::stdout()));
    block_on("demo", autotool::own_model::demo::run(out, keep))
}

fn connect() -> ExitCode {
    let home = match autotool::home::Home::from_env() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("autotool connect: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Logs only to stderr: stdout is the host's JSON-RPC channel.
    autotool::logging::init_stderr("warn");
    let token = std::fs::read_to_string(autotool::mcp::http::token_path(&home))
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty());
    let socket = autotool::mcp::http::service_socket(&home);
    block_on("connect", autotool::cmd::connect::bridge(&socket, token))
}

/// Where `serve --transport http` listens when not told.
const DEFAULT_LISTEN: &str = "127.0.0.1:8765";

fn serve(config: autotool::config::Config, transport: autotool::cmd::serve::Transport) -> ExitCode {
    block_on("serve", autotool::cmd::serve::run(config, transport))
}

/// Run `work` on a multi-threaded async runtime: success, or its error on stderr after
/// `autotool CMD:` and a failing exit.
fn block_on<T>(cmd: &str, work: impl std::future::Future<Output = anyhow::Result<T>>) -> ExitCode {
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
