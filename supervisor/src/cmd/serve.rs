//! `autotool serve`: the MCP server over stdio (what a host app spawns), or over streamable HTTP
//! with `--transport http` ([`crate::mcp::http`]: the service many hosts share).
//!
//! On stdio only JSON-RPC ever reaches stdout (through [`crate::mcp::stdio`]'s guard, which
//! answers every malformed message with an error the host can match). Logs go to stderr and to
//! `$AUTOTOOL_HOME/logs/serve.log`.
//!
//! It answers at once. Before serving it only opens the home and the registry and, in strict
//! mode (the default), checks that tools can be confined here: the launcher's probe, cached
//! under the identity of the launcher, the boot and this process's own confinement
//! ([`crate::cmd::doctor::probe_cached`]); a machine that cannot confine stops `serve` at start
//! with `autotool doctor`'s explanation. The tool runtime is prepared in the background from
//! the start when it is missing ([`crate::tool::runtime::Preparer`]); a call that needs it
//! meanwhile is held a few seconds at most, then told when to call again. `--sandbox off` (or
//! `AUTOTOOL_SANDBOX=off|0|false|no`, or `sandbox = "off"` in `config.toml`) runs tools as plain
//! subprocesses with the same environment scrubbing. Its settings come from [`crate::config`],
//! as `autotool config` shows them.

use crate::config::Config;
use crate::home::Home;
use crate::library::Library;
use crate::mcp::Rendered;
use crate::mcp::handler::Surface;
use crate::tool::process::SandboxMode;
use rmcp::ServiceExt;
use std::path::PathBuf;
use std::time::Duration;

/// Check, in strict mode, that tools can be confined here (with `launcher`, else the one
/// found), from the cached probe when nothing it depends on changed; the doctor report
/// explains why not.
fn check_confinement(launcher: Option<PathBuf>, home: &Home) -> Result<(), String> {
    let cache = crate::cmd::doctor::probe_cache_path(home);
    let report = crate::cmd::doctor::confinement(launcher.as_deref(), Some(&cache));
    if report.worst() == crate::cmd::doctor::Status::Fail {
        return Err(format!(
            "autotool serve: tools cannot be confined on this machine (--sandbox strict).\n{}\n\
             Fix the FAIL lines, or run with --sandbox off if autotool already runs inside a \
             container or VM.",
            report.render()
        ));
    }
    Ok(())
}

/// How hosts reach the server.
#[derive(Debug, Clone)]
pub enum Transport {
    Stdio,
    Http(crate::mcp::http::HttpOptions),
}

/// Run the server with `config`'s settings until the host closes stdio, or (HTTP) until
/// SIGTERM or SIGINT.
pub async fn run(config: Config, transport: Transport) -> anyhow::Result<()> {
    // Its own decisions (health, broken pins, stopped tools) are serve's; a host's request
    // names the host ([`crate::ledger::actor::scope`]).
    crate::ledger::actor::set_default(crate::ledger::Actor::serve());
    let home = Home::from_env()?;
    home.ensure()?;
    crate::logging::init_serve(&home);
    for note in config.notes() {
        tracing::warn!("setting {note}");
    }
    if config.file_exists {
        tracing::info!(file = %config.file.display(), "settings read from the config file");
    }
    let settings = config.settings();
    if settings.sandbox == SandboxMode::Strict {
        if let Err(why) = check_confinement(settings.launcher.clone(), &home) {
            eprintln!("{why}");
            anyhow::bail!("tools cannot be confined here");
        }
    } else {
        tracing::warn!(
            "--sandbox off: tools run as plain subprocesses, unconfined (consent and redaction \
             still apply)"
        );
    }
    if settings.allow_all_keys {
        tracing::warn!(
            "--dangerously-allow-all-tools: every tool gets the keys it declares without \
             asking the user (the sandbox and allowlists still apply)"
        );
    }
    let poll = settings.poll_interval;
    let idle = settings.idle_timeout;
    let app = Library::new(settings, home)?;
    // What this serve grants without asking, for `tools show` and the console, while it runs.
    let _serving = crate::serving::register(
        &app.home,
        app.settings.allow_all_keys,
        app.settings.reach == autotool_policy::reach::ReachPreset::Trusted,
        cfg!(feature = "team").then_some(app.settings.follow_interval),
    );
    // Ready before it is needed: a missing runtime is built while hosts already talk to us.
    app.runtime.start();
    // The tool template too: the first tool started forks from it rather than waiting for it.
    {
        let app = app.clone();
        tokio::spawn(async move {
            if let Ok(python) = app.runtime().await {
                app.warm_template(&python);
            }
        });
    }
    // Package layers no live tool names any more (its tools removed since) go, off the
    // startup path.
    {
        let app = app.clone();
        tokio::task::spawn_blocking(move || app.collect_layers());
    }
    // What a tool can reach here, measured once the runtime is ready (instructions and
    // tool_info report it).
    app.load_reach();
    {
        let app = app.clone();
        tokio::spawn(async move {
            match app.measure_reach().await {
                Ok(reach) => tracing::info!(?reach, "measured what a tool can reach"),
                Err(e) => tracing::warn!(
                    "measuring what a tool can reach: {}",
                    app.secrets().redact(&e)
                ),
            }
        });
    }
    let surface = Surface::new(app.clone());
    if app.settings.allow_all_keys {
        let _ = app.registry.event(
            None,
            crate::ledger::Event::ConsentGranted,
            "serve started with --dangerously-allow-all-tools: declared keys are granted \
             without asking",
        );
    }
    let watcher = {
        let app = app.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(poll);
            let mut last_reap = tokio::time::Instant::now();
            loop {
                tick.tick().await;
                app.poll().await;
                if last_reap.elapsed() > Duration::from_secs(5) {
                    app.pool.reap(idle).await;
                    last_reap = tokio::time::Instant::now();
                }
            }
        })
    };
    let follower = start_following(&app);
    if let Transport::Http(options) = transport {
        let stop = tokio_util::sync::CancellationToken::new();
        let signals = {
            let stop = stop.clone();
            tokio::spawn(async move {
                wait_for_stop_signal().await;
                tracing::info!("stopping: signal received");
                stop.cancel();
            })
        };
        let tools = app.snapshot().tools.len();
        let home = app.home.root().display().to_string();
        let served = crate::mcp::http::serve(surface, options, stop, |at| {
            tracing::info!(tools, home, "autotool serve listening on {at}");
        })
        .await;
        signals.abort();
        watcher.abort();
        stop_following(&follower);
        app.runtime.shutdown(Duration::from_secs(2)).await;
        app.settle_calls().await;
        app.pool.shutdown().await;
        return Ok(served?);
    }
    tracing::info!(
        tools = app.snapshot().tools.len(),
        home = %app.home.root().display(),
        "autotool serve ready on stdio"
    );
    let server = Rendered::new(surface, "stdio");
    let guard = crate::mcp::stdio::guarded();
    match server.serve((guard.reader, guard.writer)).await {
        Ok(running) => {
            let reason = running.waiting().await;
            tracing::info!(?reason, "host closed the connection");
        }
        // A host that hangs up before any session began (a probe that only asked
        // `server/discover`, say) ends the server normally.
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(why)) => {
            tracing::info!("host closed the connection before a session began ({why})");
        }
        Err(e) => {
            watcher.abort();
            stop_following(&follower);
            app.runtime.shutdown(Duration::from_secs(2)).await;
            app.settle_calls().await;
            app.pool.shutdown().await;
            return Err(e.into());
        }
    }
    watcher.abort();
    stop_following(&follower);
    // A build still under way stops and removes what it made; the next serve starts it again.
    app.runtime.shutdown(Duration::from_secs(2)).await;
    app.settle_calls().await;
    app.pool.shutdown().await;
    let _ = tokio::time::timeout(Duration::from_secs(2), guard.writer_done).await;
    Ok(())
}

/// The task that looks at the followed team libraries every `follow_interval`
/// ([`crate::team::follow`]), apart from the watcher so a slow registry never holds up a poll.
fn start_following(app: &std::sync::Arc<Library>) -> Option<tokio::task::JoinHandle<()>> {
    #[cfg(feature = "team")]
    {
        let app = app.clone();
        let every = app.settings.follow_interval;
        Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                crate::ledger::actor::scope(
                    crate::ledger::Actor::follow(),
                    crate::team::follow::round(&app),
                )
                .await;
            }
        }))
    }
    #[cfg(not(feature = "team"))]
    {
        let _ = app;
        None
    }
}

fn stop_following(follower: &Option<tokio::task::JoinHandle<()>>) {
    if let Some(f) = follower {
        f.abort();
    }
}

/// SIGTERM (systemd stopping the service) or SIGINT (Ctrl-C).
pub(crate) async fn wait_for_stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Where `serve --transport http` listens when not told.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8765";

/// The transport `serve`'s flags ask for: `http` on `listen` (else [`DEFAULT_LISTEN`]) with the
/// rest of `http` as given, or stdio, which takes none of the HTTP flags.
pub fn transport(
    transport: &str,
    listen: &[String],
    http: crate::mcp::http::HttpOptions,
) -> Result<Transport, String> {
    if transport != "http" {
        if !listen.is_empty() || !http.auth || http.allow_remote || http.console {
            return Err(
                "--listen, --no-auth, --allow-remote and --console need --transport http".into(),
            );
        }
        return Ok(Transport::Stdio);
    }
    let given: Vec<&str> = if listen.is_empty() {
        vec![DEFAULT_LISTEN]
    } else {
        listen.iter().map(String::as_str).collect()
    };
    let listen = given
        .into_iter()
        .map(crate::mcp::http::Listen::parse)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    Ok(Transport::Http(crate::mcp::http::HttpOptions {
        listen,
        ..http
    }))
}

/// `autotool serve`, on a multi-threaded runtime.
pub fn main(config: Config, transport: Transport) -> std::process::ExitCode {
    super::cli::block_on("serve", run(config, transport))
}
