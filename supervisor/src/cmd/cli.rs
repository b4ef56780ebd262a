//! The command line: [`main`] parses it ([`Cli`]) and runs the verb.
//!
//! Conventions every verb keeps:
//! - `about` is one short line; the detail is in `long_about` (`--help` shows it, `-h` not).
//! - Exit status ([`EXIT_CODES`]): 0 done (or healthy), 1 the command could not do what was
//!   asked or a check found a problem (the message says which and what to do), 2 the command
//!   line itself is wrong.
//! - With `--json`, an error is a JSON object on stdout too ([`fail`]), also for a command line
//!   clap refuses, so a script reading stdout always gets JSON.

use super::service::ServiceCmd;
use clap::{CommandFactory, Parser, Subcommand};

mod json_errors;
use json_errors::{JSON_ERRORS, wants_json};
pub use json_errors::{error_json, fail};
use std::process::ExitCode;
use std::sync::atomic::Ordering;

/// What every `autotool` command's exit status means (`--help` shows it; docs/cli.md too).
pub const EXIT_CODES: &str = "Exit status:\n  \
    0  done; for doctor, status and config checks: healthy\n  \
    1  the command could not do what was asked, or a check found a problem (the message says \
which, and what to do)\n  \
    2  the command line is wrong (unknown command or flag, missing or bad argument)";

/// What `autotool --version` prints after the name: this version and the commit it was built
/// from (`unknown` for a build outside a git checkout; see `supervisor/build.rs`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("AUTOTOOL_COMMIT"),
    ")"
);

#[derive(Debug, Parser)]
#[command(
    name = "autotool",
    version = VERSION,
    about = "Grow MCP tools for your agents, confined",
    long_about = "Grow MCP tools for your agents, confined.\n\n\
                  An agent that lacks a tool writes one (a small Python MCP server); autotool \
                  verifies it, runs it in a sandbox with only the keys you approved, and keeps \
                  it for every later session of every agent on the machine.\n\n\
                  Start with `autotool setup` (registers autotool with the agent apps found \
                  here and prepares the tool runtime), then `autotool doctor`.",
    after_long_help = EXIT_CODES
)]
pub struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Check that tools can run here, and how to fix what is missing.
    ///
    /// Checks what this machine offers the sandbox (Landlock, seccomp, PR_SET_MDWE, user
    /// namespaces or the launcher's file capabilities), the tool runtime, and the agent apps;
    /// then launches a trial tool exactly as `autotool serve` would: the same runtime, launch
    /// policy and code path. A FAIL line means tools cannot run; a warning (an agent app whose
    /// config cannot be read, a runtime not built yet) does not.
    ///
    /// Exits 0 when tools can run (warnings or not), 1 when they cannot.
    Doctor {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Register autotool with the agent apps here, and build the tool runtime.
    ///
    /// Registers `autotool serve` with every agent app found (Claude Code, Codex, Cursor,
    /// Claude Desktop, OpenClaw, VS Code, Windsurf, Zed, Gemini CLI, Goose, Cline, Roo Code) by
    /// this binary's absolute path. Each config is backed up before it is edited (`.bak`, then
    /// `.bak.1`, `.bak.2`, … : a backup never overwrites another); an existing Claude Code,
    /// Codex or Goose entry is left untouched. Then builds the Python runtime tools run on, if
    /// it is not ready (a few seconds, once), so the first tool an agent creates does not wait
    /// for it.
    ///
    /// With `--remove`, takes autotool's entry out of every app's config again (or only the
    /// `--app` ones). With `--launcher`, installs the sandbox launcher with file capabilities
    /// instead. With `--model`, sets up autotool's own model (for synthesize_tool) instead.
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
        /// Do not ask for confirmation (with --launcher or --import).
        #[arg(long)]
        yes: bool,
        /// Also move the MCP servers the apps start themselves from PyPI or npm (`uvx`,
        /// `pipx run`, `npx`) behind autotool: each is added as with `autotool add` (same
        /// name), its env values go to autotool's key store, and its entry leaves the app's
        /// config. Shows each move first and asks (`--yes` for scripts, `--dry-run` to look).
        #[arg(long, conflicts_with_all = ["launcher", "remove", "service"])]
        import: bool,
        /// Register `autotool connect` (the bridge to the service, `autotool service install`)
        /// instead of `autotool serve`, so every app shares one supervisor.
        #[arg(long, conflicts_with = "launcher")]
        service: bool,
        /// Do not prepare the tool runtime (serve prepares it when it is first needed).
        #[arg(long, conflicts_with = "launcher")]
        no_runtime: bool,
        /// Unregister, as an undo: a config still exactly as setup wrote it goes back byte for
        /// byte (a file setup created is deleted); one changed since loses only the entry
        /// setup wrote (a backup made first). An `autotool` entry that runs something else is
        /// left alone.
        #[arg(long, conflicts_with_all = ["launcher", "service"])]
        remove: bool,
        /// Print what would be done (for apps, each change as a diff) and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Set up autotool's own model instead (for synthesize_tool): asks on a terminal, shows
        /// the current values, tries the model with one short request, writes
        /// $AUTOTOOL_HOME/.env. Without a terminal, only flags and the environment are read.
        #[arg(long, conflicts_with_all = ["launcher", "service", "remove", "apps", "no_runtime"])]
        model: bool,
        /// With --model: openai (or an OpenAI-compatible server with --base-url), anthropic,
        /// or local (Ollama by default, no key needed).
        #[arg(long, requires = "model", value_parser = ["openai", "anthropic", "local"])]
        provider: Option<String>,
        /// With --model: the model's name (OPENAI_LLM, ANTHROPIC_MODEL).
        #[arg(long, requires = "model", value_name = "NAME")]
        model_name: Option<String>,
        /// With --model: the API root (OPENAI_BASE_URL, ANTHROPIC_BASE_URL).
        #[arg(long, requires = "model", value_name = "URL")]
        base_url: Option<String>,
        /// With --model: read the key from stdin (never from the command line).
        #[arg(long, requires = "model")]
        key_stdin: bool,
        /// With --model: write the settings without the test request.
        #[arg(long, requires = "model")]
        no_test: bool,
    },
    /// Serve MCP to a host app on stdin/stdout (or HTTP).
    ///
    /// The command a host app runs. Agents create tools with `create_tool`; they are
    /// verified, confined, mounted live and kept for every agent. It answers at once: the
    /// sandbox check and, if it is missing, the tool runtime are prepared in the background,
    /// and a call that needs them meanwhile is held a few seconds at most (with progress
    /// notifications when the host asks for them), then told when to call again.
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
        /// HTTP: mount the console under /console/ on the loopback listener, with a session of
        /// its own (its URL: `autotool console --url`).
        #[arg(long)]
        console: bool,
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
        /// Use this autotool home instead of $AUTOTOOL_HOME (default ~/.autotool): the same
        /// meaning, for apps whose config cannot set a variable. `autotool setup` writes it into
        /// each app's entry when it runs with a home other than the default.
        #[arg(long, value_name = "DIR")]
        home: Option<std::path::PathBuf>,
    },
    /// See autotool work, offline and without a key.
    ///
    /// A scripted agent grows a tool for a fake Hacker-News-like API: verification and
    /// repair, consent, redaction, the allowlist, under the strict sandbox (or, where this
    /// machine cannot confine, unconfined and saying why). It runs on a temporary home it
    /// removes afterwards; the first run prepares the tool runtime (a few seconds).
    ///
    /// Exits 0 when every step happened, 1 when one did not.
    #[cfg(feature = "own-model")]
    Demo {
        /// Keep the demo's temporary AUTOTOOL_HOME to look at afterwards.
        #[arg(long)]
        keep: bool,
    },
    /// Print every setting in effect and where it came from.
    ///
    /// Each setting, its value and the layer it came from: the environment,
    /// $AUTOTOOL_HOME/config.toml or the default (for `serve`, its flags first).
    ///
    /// Exits 1, naming the setting, the layer and the problem, when a value anywhere is bad.
    Config {
        /// Print JSON.
        #[arg(long, conflicts_with = "get")]
        json: bool,
        /// Print only this setting's value (for example `call_timeout` or
        /// `limits.memory_bytes`).
        #[arg(long, value_name = "NAME")]
        get: Option<String>,
    },
    /// A local web page to see and steer tools, keys and consent.
    ///
    /// Served on 127.0.0.1 only; its URL, with this session's secret, is the first line on
    /// stdout. Runs until Ctrl-C. With --url, prints the URL of the console a running `serve
    /// --transport http --console` (the service) mounts, and exits.
    Console {
        /// Do not open a browser.
        #[arg(long)]
        no_open: bool,
        /// The port (default: a free one).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Print the URL of the console the running service mounts ($AUTOTOOL_HOME/console-url).
        #[arg(long, conflicts_with_all = ["no_open", "port"])]
        url: bool,
    },
    /// Relay MCP on stdin/stdout to the autotool service.
    ///
    /// For host apps that only spawn stdio servers, so every host shares the one supervisor
    /// `autotool service install` runs.
    Connect {
        /// Reach the service of this autotool home instead of $AUTOTOOL_HOME's (default
        /// ~/.autotool): the same meaning, for apps whose config cannot set a variable.
        /// `autotool setup --service` writes it into each app's entry when it runs with a home
        /// other than the default.
        #[arg(long, value_name = "DIR")]
        home: Option<std::path::PathBuf>,
    },
    /// Run autotool as a systemd user service for every host.
    ///
    /// One supervisor on streamable HTTP (loopback and a unix socket) for every host on the
    /// machine; stdio-only hosts reach it through `autotool connect`.
    Service {
        #[command(subcommand)]
        cmd: ServiceCmd,
    },
    /// List, show, approve, revoke and remove the tools agents share.
    Tools {
        #[command(subcommand)]
        cmd: crate::cmd::tools::ToolsCmd,
    },
    /// Print the event log: every decision across tools, and who caused it.
    ///
    /// Created, verified, state changes, consent asked and answered (and by whom), egress
    /// refused, baseline grown, pulls, …: each with its time, tool, kind, who caused it (`cli`,
    /// `host:<client name>`, `console`, `serve`, `follow`) and the surface it came through
    /// (`cli`, `stdio`, `http`, `console`, `serve`), oldest first; the newest 50 unless
    /// `--since` or `--all`. Details are redacted and cut.
    Events(crate::cmd::events::EventsArgs),
    /// Make this machine's signing key; keep the publishers it accepts.
    ///
    /// `tools push` signs with this machine's key; `tools pull` accepts a tool only when a
    /// publisher added here signed it (cosign's key-based format, ECDSA P-256).
    #[cfg(feature = "team")]
    Trust {
        #[command(subcommand)]
        cmd: crate::cmd::team::TrustCmd,
    },
    /// Follow a team library: serve pulls its new versions by itself.
    ///
    /// A followed oci://HOST/REPO[:TAG] is looked at by every `autotool serve` on this machine
    /// every `follow_interval`; a new digest is pulled as `tools pull` would (signature, this
    /// machine's verification, probation, consent asked here) and hosts are told.
    #[cfg(feature = "team")]
    Library {
        #[command(subcommand)]
        cmd: crate::cmd::follow::LibraryCmd,
    },
    /// Add, list, remove and limit the keys tools may be given.
    ///
    /// Values are read without echo from the terminal, or from stdin; never from the command
    /// line, and never printed.
    Keys {
        #[command(subcommand)]
        cmd: crate::cmd::keys::KeysCmd,
    },
    /// Allow hosts for every tool that declares them (REQUIRED_HOSTS).
    ///
    /// Common public APIs then ask nothing when a tool declares them. A tool still reaches
    /// only the hosts it declares; these widen no tool's reach by themselves.
    Hosts {
        #[command(subcommand)]
        cmd: crate::cmd::hosts::HostsCmd,
    },
    /// Widen, list or narrow the deny rules of READ_DIRS and WRITE_DIRS.
    ///
    /// A tool is never granted the home itself, ~/.ssh, ~/.gnupg, ~/.aws, ~/.config, /etc or
    /// other users' homes unless the user widens that rule here; never autotool's own home.
    Dirs {
        #[command(subcommand)]
        cmd: crate::cmd::dirs::DirsCmd,
    },
    /// Build, check or rebuild the Python runtime tools run on.
    ///
    /// A virtual environment at $AUTOTOOL_HOME/runtime with the pinned tool SDK, HTTP client
    /// and linter, built with uv (pip where uv cannot be had). `setup` and `serve` prepare it
    /// by themselves; these commands do it ahead of time, or look at it.
    Runtime {
        #[command(subcommand)]
        cmd: crate::cmd::runtime::RuntimeCmd,
    },
    /// Do a task with a demo agent on your own model (./.env).
    ///
    /// It writes the tools it lacks into ./tools and prints each step. No consent prompts or
    /// allowlists; tools are still confined.
    #[cfg(feature = "own-model")]
    Run {
        /// What to do, in plain words.
        task: String,
        /// Read the model from this file instead of ./.env.
        #[arg(long, value_name = "FILE")]
        env_file: Option<std::path::PathBuf>,
        /// Use this model instead of the one the file names (OPENAI_LLM, ANTHROPIC_MODEL).
        #[arg(long, value_name = "NAME")]
        model: Option<String>,
    },
    /// Write one tool for a need with autotool's own model, verified and kept.
    ///
    /// Uses the model `autotool setup --model` set up ($AUTOTOOL_HOME/.env), asks before it
    /// starts (No by default; without a terminal, only with --yes), prints the candidate's code
    /// and verdicts, and exits 1 when no candidate passes.
    #[cfg(feature = "own-model")]
    Forge {
        /// What the tool is for, in plain words.
        need: String,
        /// Also write the tool's code to this file.
        #[arg(long, value_name = "FILE")]
        out: Option<std::path::PathBuf>,
        /// Do not ask: the answer is yes (for scripts; required without a terminal).
        #[arg(long)]
        yes: bool,
    },
    /// Add an MCP server you already run (from PyPI or npm) behind the sandbox.
    ///
    /// `autotool add timesrv pypi:mcp-server-time`: resolves the package (wheels only, every
    /// hash locked), shows what it will install and grant (keys, hosts, directories) and asks
    /// (`--yes` for scripts); then installs it read-only and verifies it confined, and every
    /// serve on this home mounts its functions as NAME__function. It reaches only what is
    /// named here. `--upgrade` moves it to a newer version, asked again.
    Add(super::add::AddArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    ///
    /// For example `autotool completions bash > ~/.local/share/bash-completion/completions/autotool`,
    /// or `autotool completions zsh > "${fpath[1]}/_autotool"`.
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print the man page, or write one per command into a directory.
    ///
    /// `autotool man | man -l -` reads it now; `autotool man --dir ~/.local/share/man/man1`
    /// installs autotool.1 and autotool-<command>.1 for every command.
    Man {
        /// Write every page into this directory instead of printing the main one.
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
    },
}

/// The (sub)command a command line names, as far as it names known ones (`tools show`), for
/// an error about the rest of it; empty when it names none.
fn subcommand_named(args: impl IntoIterator<Item = String>) -> String {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let mut path: Vec<String> = Vec::new();
    for arg in args {
        if arg.starts_with('-') {
            continue;
        }
        match cmd.find_subcommand(&arg) {
            Some(sub) => {
                path.push(sub.get_name().to_string());
                let next = sub.clone();
                cmd = next;
            }
            None => break,
        }
    }
    path.join(" ")
}

/// Parse the command line; a refused one exits 2 (its message as JSON with `--json`).
fn parse() -> Result<Cli, ExitCode> {
    match Cli::try_parse() {
        Ok(cli) => Ok(cli),
        Err(e) => {
            use clap::error::ErrorKind;
            let asked_json = std::env::args_os().any(|a| a == "--json");
            let informational = matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            );
            if asked_json && !informational {
                use std::io::Write;
                let rendered = e.to_string();
                let first = rendered.lines().next().unwrap_or("").trim();
                let message = first.strip_prefix("error: ").unwrap_or(first);
                let named = subcommand_named(std::env::args().skip(1));
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "{}", error_json(&named, message, 2));
                return Err(ExitCode::from(2));
            }
            // clap prints usage errors to stderr and exits 2, help and version to stdout and 0.
            let _ = e.print();
            Err(ExitCode::from(if e.use_stderr() { 2 } else { 0 }))
        }
    }
}

/// Parse the command line and run the verb.
pub fn main() -> ExitCode {
    let cli = match parse() {
        Ok(c) => c,
        Err(code) => return code,
    };
    JSON_ERRORS.store(wants_json(&cli.command), Ordering::Relaxed);
    // What a command writes to the event log is the user's doing; serve names its own.
    crate::ledger::actor::set_default(crate::ledger::Actor::cli());
    if let Cmd::Serve { home: Some(h), .. } | Cmd::Connect { home: Some(h) } = &cli.command
        && let Err(e) = crate::home::set_override(h)
    {
        eprintln!("autotool: --home: {e}");
        return ExitCode::from(2);
    }
    if let Cmd::Serve {
        transport,
        listen,
        no_auth,
        allow_remote,
        console,
        sandbox,
        call_timeout,
        idle_timeout,
        max_output_bytes,
        dangerously_allow_all_tools,
        home: _,
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
                // A bad flag value is a wrong command line (2, as clap's own refusals); a bad
                // setting in the environment or config.toml is a failure to start (1).
                return if problems.from_command_line() {
                    ExitCode::from(2)
                } else {
                    ExitCode::FAILURE
                };
            }
        };
        let http = crate::mcp::http::HttpOptions {
            listen: Vec::new(),
            auth: !*no_auth,
            allow_remote: *allow_remote,
            console: *console,
        };
        return match super::serve::transport(transport, listen, http) {
            Ok(transport) => super::serve::main(config, transport),
            Err(e) => {
                eprintln!("autotool serve: {e}");
                ExitCode::from(2)
            }
        };
    }
    if let Cmd::Connect { .. } = &cli.command {
        return super::connect::main();
    }
    #[cfg(feature = "own-model")]
    if let Cmd::Demo { keep } = &cli.command {
        return super::demo::main(*keep);
    }
    // Not for `serve`: there stdout is the JSON-RPC channel, written from the runtime's threads.
    // Scripts autotool generates itself (completions, man pages) go out as they are.
    match cli.command {
        Cmd::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "autotool", &mut script);
            return super::generated::written(
                "completions",
                std::io::Write::write_all(&mut std::io::stdout().lock(), &script),
            );
        }
        Cmd::Man { dir } => {
            return super::generated::man(dir.as_deref(), &mut std::io::stdout().lock());
        }
        command => run(command),
    }
}

/// Every other verb. Everything it prints passes one terminal-safe writer
/// ([`crate::terminal::SafeWriter`]): text from a registry, a tool or a model never reaches the
/// terminal as control characters, whichever call site prints it.
fn run(command: Cmd) -> ExitCode {
    let mut stdout = crate::terminal::SafeWriter::new(crate::terminal::ClosedPipeIsFine::new(
        std::io::stdout().lock(),
    ));
    match command {
        Cmd::Serve { .. } | Cmd::Connect { .. } => ExitCode::FAILURE,
        #[cfg(feature = "own-model")]
        Cmd::Demo { .. } => ExitCode::FAILURE,
        Cmd::Service { cmd } => super::service::main(cmd, &mut stdout),
        Cmd::Config { json, get } => super::config::main(json, get.as_deref(), &mut stdout),
        Cmd::Doctor { json } => super::doctor::main(json, &mut stdout),
        #[cfg(feature = "own-model")]
        Cmd::Setup {
            model: true,
            provider,
            model_name,
            base_url,
            key_stdin,
            no_test,
            dry_run,
            ..
        } => super::setup_model::main(
            &super::setup_model::ModelArgs {
                provider,
                base_url,
                model_name,
                key_stdin,
                no_test,
                dry_run,
            },
            &mut stdout,
        ),
        #[cfg(not(feature = "own-model"))]
        Cmd::Setup { model: true, .. } => fail(
            "setup",
            "this autotool was built without its own model (feature own-model)",
        ),
        Cmd::Setup {
            launcher: true,
            yes,
            dry_run,
            ..
        } => match crate::cmd::setup::install_launcher(yes, dry_run, &mut stdout) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail("setup", &e.to_string()),
        },
        Cmd::Setup {
            yes: true,
            launcher: false,
            import: false,
            ..
        } => {
            crate::terminal::eprint_line(
                "autotool setup: --yes answers the question --launcher or --import asks; give \
                 one of them",
            );
            ExitCode::from(2)
        }
        Cmd::Setup {
            apps,
            dry_run,
            remove: true,
            ..
        } => super::setup::remove(apps, dry_run, &mut stdout),
        Cmd::Setup {
            apps,
            dry_run,
            import: true,
            yes,
            ..
        } => super::import::main(apps, dry_run, yes, &mut stdout),
        Cmd::Setup {
            apps,
            dry_run,
            service,
            no_runtime,
            ..
        } => super::setup::hosts(apps, dry_run, service, !no_runtime, &mut stdout),
        Cmd::Console { url: true, .. } => super::console::url(&mut stdout),
        Cmd::Console { no_open, port, .. } => super::console::main(no_open, port, &mut stdout),
        Cmd::Tools { cmd } => crate::cmd::tools::run(cmd, &mut stdout),
        Cmd::Events(args) => crate::cmd::events::main(args, &mut stdout),
        Cmd::Keys { cmd } => crate::cmd::keys::run(cmd, &mut stdout),
        Cmd::Hosts { cmd } => crate::cmd::hosts::run(cmd, &mut stdout),
        Cmd::Dirs { cmd } => crate::cmd::dirs::run(cmd, &mut stdout),
        #[cfg(feature = "team")]
        Cmd::Trust { cmd } => crate::cmd::team::trust(cmd, &mut stdout),
        #[cfg(feature = "team")]
        Cmd::Library { cmd } => crate::cmd::follow::library(cmd, &mut stdout),
        Cmd::Runtime { cmd } => crate::cmd::runtime::main(cmd, &mut stdout),
        #[cfg(feature = "own-model")]
        Cmd::Run {
            task,
            env_file,
            model,
        } => crate::cmd::run::main(
            &task,
            &crate::cmd::run::RunOptions { env_file, model },
            &mut stdout,
        ),
        #[cfg(feature = "own-model")]
        Cmd::Forge { need, out, yes } => crate::cmd::forge::main(
            &need,
            &crate::cmd::forge::ForgeOptions { out, yes },
            &mut stdout,
        ),
        Cmd::Add(args) => super::add::main(&args, &mut stdout),
        Cmd::Completions { .. } | Cmd::Man { .. } => ExitCode::FAILURE,
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
        Err(e) => return fail(cmd, &format!("cannot start the async runtime: {e}")),
    };
    match runtime.block_on(work) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => fail(cmd, &format!("{e:#}")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_refused_command_line_is_named_by_the_subcommands_it_gives() {
        let named = |line: &str| subcommand_named(line.split_whitespace().map(String::from));
        assert_eq!(named("tools show --json --bogus"), "tools show");
        assert_eq!(named("--json serve --call-timeout abc"), "serve");
        assert_eq!(named("runtime status --json extra"), "runtime status");
        assert_eq!(named("nonsense --json"), "");
        assert_eq!(
            error_json(&named("tools list --json --bogus"), "m", 2),
            r#"{"error":{"command":"autotool tools list","exit_code":2,"message":"m"}}"#
        );
    }

    /// Every command and subcommand: (path, about, long_about).
    fn commands() -> Vec<(String, String, Option<String>)> {
        fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<(String, String, Option<String>)>) {
            for sub in cmd.get_subcommands() {
                let p = format!("{path} {}", sub.get_name());
                out.push((
                    p.clone(),
                    sub.get_about().map(|s| s.to_string()).unwrap_or_default(),
                    sub.get_long_about().map(|s| s.to_string()),
                ));
                walk(sub, &p, out);
            }
        }
        let mut out = Vec::new();
        walk(&Cli::command(), "autotool", &mut out);
        out
    }

    #[test]
    fn every_about_is_one_short_line_with_the_detail_in_long_about() {
        let all = commands();
        assert!(all.len() > 25, "{}", all.len());
        // Every offender at once, so one run lists them all.
        let mut wrong = Vec::new();
        for (path, about, long) in &all {
            if about.is_empty() {
                wrong.push(format!("{path} has no about"));
            }
            if about.chars().count() > 72 || about.contains('\n') {
                wrong.push(format!(
                    "{path}: about is {} characters: {about:?}",
                    about.chars().count()
                ));
            }
            if let Some(long) = long
                && long.len() <= about.len()
            {
                wrong.push(format!("{path}: long_about adds nothing"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        // The commands whose detail matters have it.
        for path in [
            "autotool doctor",
            "autotool setup",
            "autotool serve",
            "autotool runtime install",
            "autotool runtime status",
            "autotool keys",
        ] {
            let found = all.iter().find(|(p, _, _)| p == path);
            assert!(
                found.is_some_and(|(_, _, long)| long.is_some()),
                "{path} has no long_about"
            );
        }
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn errors_in_json_name_the_command_and_exit_code() {
        let v: serde_json::Value =
            serde_json::from_str(&error_json("tools show", "no tool \"x\"", 1)).unwrap_or_default();
        assert_eq!(
            v,
            serde_json::json!({"error": {"command": "autotool tools show", "message": "no tool \"x\"", "exit_code": 1}})
        );
        let v: serde_json::Value =
            serde_json::from_str(&error_json("", "unexpected argument", 2)).unwrap_or_default();
        assert_eq!(v["error"]["command"], "autotool");
    }

    #[test]
    fn json_is_noticed_wherever_a_command_takes_it() {
        for (args, json) in [
            (&["autotool", "doctor", "--json"][..], true),
            (&["autotool", "tools", "list", "--json"], true),
            (&["autotool", "tools", "show", "x", "--json"], true),
            (&["autotool", "keys", "list", "--json"], true),
            (&["autotool", "runtime", "status", "--json"], true),
            (&["autotool", "service", "status", "--json"], true),
            (&["autotool", "config", "--json"], true),
            (
                &["autotool", "library", "follow", "oci://h/r", "--json"],
                true,
            ),
            (&["autotool", "tools", "list"], false),
            (&["autotool", "runtime", "install"], false),
        ] {
            let cli = Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            assert_eq!(wants_json(&cli.command), json, "{args:?}");
        }
    }
}
