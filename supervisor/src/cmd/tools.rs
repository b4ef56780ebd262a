//! `autotool tools …`: look at and manage the tools every agent on this machine shares.
//!
//! Reads and writes the registry of `$AUTOTOOL_HOME` directly; a running `autotool serve`
//! notices changes (a removal) through the ledger's generation counter.

use crate::home::Home;
use crate::ledger::{self, CallRow, EventRow, ToolStats};
use crate::redact::RedactingWriter;
use crate::registry::{Registry, RegistryError, Version};
use autotool_policy::lifecycle::Manual;
use serde::Serialize;
use std::io::{self, Write};
use std::process::ExitCode;

mod baseline;
mod show;
mod steer;

/// How many recent calls and events `tools show` prints.
const RECENT: u32 = 10;

#[derive(Debug, clap::Subcommand)]
pub enum ToolsCmd {
    #[cfg(feature = "team")]
    #[command(flatten)]
    Team(super::team::ToolsTeamCmd),
    #[command(flatten)]
    Steer(steer::SteerCmd),
    /// List the tools every agent on this machine can use.
    ///
    /// Each with its versions, functions, keys, calls, failures and the last error.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show one tool: its manifest, versions, recent calls and events.
    Show {
        /// The tool's name.
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a tool; running servers unmount it within seconds.
    ///
    /// Its versions, files and history are kept; creating the same name again makes a new
    /// version.
    Remove {
        /// The tool's name.
        name: String,
    },
    /// Let a tool use a key, its packages or its reach (hosts that cannot ask).
    ///
    /// KEY: one the tool declares in REQUIRED_ENV; `--packages`: the package set it declares in
    /// REQUIRED_PACKAGES, as resolved when it asked (a changed set is asked about again);
    /// `--reach`: the hosts it declares in REQUIRED_HOSTS and the directories in READ_DIRS and
    /// WRITE_DIRS (a version that declares more is asked again). As if the user had said yes
    /// when asked. Takes effect on the next call in every running server.
    #[command(group(clap::ArgGroup::new("what").required(true).multiple(true).args(["key", "packages", "reach"])))]
    Approve {
        /// The tool's name.
        name: String,
        /// The key's name (one the tool declares in REQUIRED_ENV).
        key: Option<String>,
        /// Approve the packages it declares (REQUIRED_PACKAGES), as resolved when it asked.
        #[arg(long)]
        packages: bool,
        /// Grant the hosts and directories it declares (REQUIRED_HOSTS, READ_DIRS, WRITE_DIRS).
        #[arg(long)]
        reach: bool,
    },
    /// Limit a tool kept from before declared reach to what its code declares.
    ///
    /// Such a tool reaches any public host without a key; narrowed, it reaches only the hosts
    /// its code declares in REQUIRED_HOSTS (usually none), once granted.
    Narrow {
        /// The tool's name.
        name: String,
    },
    /// Put a quarantined (or retired) tool back on probation.
    ///
    /// It is listed again, and promoted after successful calls. Takes effect live in every
    /// running server.
    Rehab {
        /// The tool's name.
        name: String,
    },
    /// Retire a tool: off every host's list (`rehab` brings it back).
    ///
    /// Its history is kept.
    Retire {
        /// The tool's name.
        name: String,
    },
    /// List what a tool owes its trusted versions, or drop one obligation.
    ///
    /// The baseline: what its trusted versions did (smoke tests with their answers, examples,
    /// verdicts), owed by every later version. `--drop ID` drops one (an audit event), for a
    /// change of behaviour that is intended.
    Baseline {
        /// The tool's name.
        name: String,
        /// Drop this obligation (its number in the list).
        #[arg(long, value_name = "ID")]
        drop: Option<i64>,
        /// Why it is dropped, kept with the audit event.
        #[arg(long, requires = "drop")]
        why: Option<String>,
        /// Print JSON (dropped obligations included).
        #[arg(long)]
        json: bool,
    },
    /// Withdraw a tool's approval of a key (of every key without KEY).
    ///
    /// Its process is restarted without the key on the next call, which asks again. A tool
    /// that does not exist is an error, as for `approve`.
    Revoke {
        /// The tool's name.
        name: String,
        /// The key's name; every key when left out.
        key: Option<String>,
    },
}

/// Why a `tools` command failed.
#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Home(#[from] crate::home::HomeError),
    #[error("cannot write the output: {0}")]
    Output(#[from] io::Error),
    #[error("cannot encode JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Ledger(#[from] crate::ledger::LedgerError),
    #[error("{0:#}")]
    Other(#[from] anyhow::Error),
}

/// Run a `tools` subcommand against `$AUTOTOOL_HOME`, writing to `out`; errors go to stderr.
/// Everything it prints (text and `--json`, errors too) passes the redactor of every key value
/// held now: what verification stored of a tool was redacted before it was written, but a
/// value stored before its key was added is only known to be one now.
pub fn run(cmd: ToolsCmd, out: &mut impl Write) -> ExitCode {
    let found = Home::from_env().map_err(CliError::from).and_then(|home| {
        let redactor = super::events::held_redactor(&home).map_err(anyhow::Error::msg)?;
        Ok((home, redactor))
    });
    let (home, redactor) = match found {
        Ok(found) => found,
        Err(e) => return super::fail("tools", &e.to_string()),
    };
    let mut shown = RedactingWriter::new(&mut *out, &redactor);
    // A pulled tool's record was written by someone else: shown through the same redactor.
    let (code, result) = match cmd {
        #[cfg(feature = "team")]
        ToolsCmd::Team(cmd) => (super::team::tools(cmd, &mut shown), Ok(())),
        cmd => (ExitCode::SUCCESS, run_in(&home, cmd, &mut shown)),
    };
    match result.and(shown.finish().map(drop).map_err(CliError::from)) {
        Ok(()) => code,
        Err(e) => super::fail("tools", &redactor.redact(&e.to_string())),
    }
}

fn run_in(home: &Home, cmd: ToolsCmd, out: &mut impl Write) -> Result<(), CliError> {
    let registry = Registry::open(home)?;
    match cmd {
        ToolsCmd::List { json } => list(&registry, json, out),
        ToolsCmd::Show { name, json } => show::show(home, &registry, &name, json, out),
        ToolsCmd::Remove { name } => {
            if registry.remove(&name)? {
                writeln!(
                    out,
                    "Removed {name}. Running `autotool serve` processes unmount it within a few \
                     seconds; its versions and history are kept."
                )?;
            } else {
                writeln!(out, "{name} was already removed.")?;
            }
            Ok(())
        }
        ToolsCmd::Narrow { name } => {
            writeln!(out, "{}", crate::consent::narrow(&registry, &name)?)?;
            Ok(())
        }
        ToolsCmd::Approve {
            name,
            key,
            packages,
            reach,
        } => {
            if let Some(key) = key {
                let keys = crate::credentials::KeyStore::open(home);
                let said = crate::consent::approve_from_cli(&registry, &keys, &name, &key)?;
                writeln!(out, "{said}")?;
            }
            if packages {
                let said = crate::consent::approve_packages_from_cli(&registry, &name)?;
                writeln!(out, "{said}")?;
            }
            if reach {
                let said = crate::consent::approve_reach(&registry, &name, "cli")?;
                writeln!(out, "{said}")?;
            }
            Ok(())
        }
        ToolsCmd::Baseline {
            name,
            drop,
            why,
            json,
        } => baseline::baseline(&registry, &name, drop, why.as_deref(), json, out),
        ToolsCmd::Rehab { name } => manual(&registry, &name, Manual::Rehab, out),
        ToolsCmd::Steer(cmd) => steer::run(home, &registry, cmd, out),
        // `run` takes these before a registry is opened here.
        #[cfg(feature = "team")]
        ToolsCmd::Team(_) => Ok(()),
        ToolsCmd::Retire { name } => manual(&registry, &name, Manual::Retire, out),
        ToolsCmd::Revoke { name, key } => {
            let said = crate::consent::revoke_from_cli(&registry, &name, key.as_deref())?;
            writeln!(out, "{said}")?;
            Ok(())
        }
    }
}

/// `tools rehab` / `tools retire`: move the current version by hand, with an audit event.
fn manual(
    registry: &Registry,
    name: &str,
    action: Manual,
    out: &mut impl Write,
) -> Result<(), CliError> {
    let said = crate::console::actions::manual(registry, name, action, "cli")?;
    writeln!(out, "{said}")?;
    Ok(())
}

/// One entry of `tools list --json`.
#[derive(Debug, Serialize)]
struct ListEntry {
    /// Where it came from ([`crate::team::publisher::origin`]): `pypi:NAME VERSION` for an added
    /// server, `REFERENCE @ DIGEST, signed by …` for a pulled one; absent when grown here.
    origin: Option<String>,
    name: String,
    version: u32,
    versions: Vec<u32>,
    state: &'static str,
    /// Whether hosts may see it (probation, active); the list limit may still leave it out
    /// of a `tools/list`, ranked by `calls_30d`.
    listed: bool,
    description: String,
    functions: Vec<String>,
    /// sha256 of the current version's `tool.py`.
    code_hash: String,
    /// The current version's pin: its code hash, description and schemas together
    /// (`autotool::pin`). A running server holds the version to it.
    pin: String,
    /// Calls in the last 30 days, all versions: what the list limit ranks tools by.
    calls_30d: u64,
    /// Key names the tool holds (its declared `REQUIRED_ENV`).
    keys: Vec<String>,
    calls: u64,
    failures: u64,
    last_error: Option<String>,
    /// The current version's last calls, as the lifecycle counts them.
    health: Health,
    /// Why it is in its state (the newest state change), if it changed.
    state_reason: Option<String>,
    /// The user's pin (`tools pin`: nothing replaces this version until unpinned): when and
    /// by whom; `null` when not pinned.
    pinned: Option<ledger::Pin>,
    created_at: String,
    dir: String,
}

/// The current version's recent calls.
#[derive(Debug, Serialize)]
struct Health {
    /// Calls looked at (at most the window, 20).
    recent: u32,
    ok: u32,
    /// `ToolError`s: the tool answering that it could not (bad input, the upstream said no).
    tool_errors: u32,
    /// Crashes, timeouts, unexpected tracebacks.
    failures: u32,
    /// `(ok + 1) / (ok + failures + 2)`: what `search_tools` ranks by.
    success_rate: f64,
}

fn health(registry: &Registry, name: &str, version: u32) -> Result<Health, CliError> {
    let window = autotool_policy::lifecycle::Thresholds::default().window;
    let recent = registry.ledger().recent_outcomes(name, version, window)?;
    let count = |o: ledger::CallKind| recent.iter().filter(|r| **r == o).count() as u32;
    let (ok, failures) = (
        count(ledger::CallKind::Ok),
        count(ledger::CallKind::Failure),
    );
    Ok(Health {
        recent: recent.len() as u32,
        ok,
        tool_errors: count(ledger::CallKind::ToolError),
        failures,
        success_rate: ((f64::from(ok) + 1.0) / (f64::from(ok) + f64::from(failures) + 2.0)
            * 1000.0)
            .round()
            / 1000.0,
    })
}

fn list(registry: &Registry, json: bool, out: &mut impl Write) -> Result<(), CliError> {
    let mut entries = Vec::new();
    let since = ledger::now_ms()
        - i64::try_from(crate::library::settings::USAGE_WINDOW.as_millis()).unwrap_or(i64::MAX);
    let uses = registry.ledger().uses_since(since)?;
    let mut pins = registry.ledger().pins()?;
    for tv in registry.current()? {
        let dir = registry.dir_of(&tv).display().to_string();
        let name = tv.name.as_str();
        let versions = registry.versions(name)?.iter().map(|v| v.version).collect();
        let stats = registry.stats(name)?;
        let health = health(registry, name, tv.version)?;
        let state_reason = registry.ledger().state_reason(name)?;
        entries.push(ListEntry {
            origin: crate::team::publisher::origin(
                registry.home(),
                name,
                tv.version,
                &tv.code_hash,
            ),
            health,
            state_reason,
            pinned: pins.remove(name),
            versions,
            state: tv.state.as_str(),
            listed: tv.state.listed(),
            functions: tv.functions.iter().map(|f| f.name.clone()).collect(),
            pin: crate::pin::of(&tv),
            calls_30d: uses.get(name).copied().unwrap_or(0),
            keys: tv.required_env.iter().map(ToString::to_string).collect(),
            calls: stats.calls,
            failures: stats.failures,
            last_error: stats.last_error,
            created_at: ledger::format_ms(tv.created_at),
            dir,
            code_hash: tv.code_hash.clone(),
            name: tv.name.to_string(),
            version: tv.version,
            description: tv.description,
        });
    }
    if json {
        serde_json::to_writer_pretty(&mut *out, &entries)?;
        writeln!(out)?;
        return Ok(());
    }
    if entries.is_empty() {
        writeln!(
            out,
            "No tools yet. An agent connected to `autotool serve` creates one with create_tool."
        )?;
        return Ok(());
    }
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        let versions = if e.versions.len() == 1 {
            "1 version".to_string()
        } else {
            format!("{} versions", e.versions.len())
        };
        let pinned = match &e.pinned {
            Some(p) => format!(", pinned by {}", p.by),
            None => String::new(),
        };
        writeln!(
            out,
            "{}  v{} ({versions}, {}{pinned})",
            e.name, e.version, e.state
        )?;
        if !e.description.is_empty() {
            writeln!(out, "  {}", one_line(&e.description, 100))?;
        }
        if let Some(origin) = &e.origin {
            writeln!(out, "  origin:    {origin}")?;
        }
        writeln!(out, "  functions: {}", or_none(&e.functions))?;
        writeln!(out, "  keys:      {}", or_none(&e.keys))?;
        writeln!(
            out,
            "  pinned:    code {}, pin {}",
            crate::pin::short(&e.code_hash),
            crate::pin::short(&e.pin)
        )?;
        writeln!(
            out,
            "  health:    last {} calls of v{}: {} ok, {} tool errors, {} failures",
            e.health.recent, e.version, e.health.ok, e.health.tool_errors, e.health.failures
        )?;
        if let Some(why) = &e.state_reason
            && e.state != "active"
        {
            writeln!(out, "  {}: {}", e.state, one_line(why, 100))?;
        }
        writeln!(
            out,
            "  calls:     {} in all versions, {} failed; {} in the last 30 days",
            e.calls, e.failures, e.calls_30d
        )?;
        if let Some(err) = &e.last_error {
            writeln!(out, "  last error: {}", one_line(err, 100))?;
        }
    }
    Ok(())
}

fn or_none<T: AsRef<str>>(items: &[T]) -> String {
    crate::console::html::joined_or(items, "(none)")
}

/// The first line of `s`, cut to `max` characters, what is left of control characters escaped
/// ([`crate::terminal::escape_line`]).
fn one_line(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or("");
    let mut cut: String = line.chars().take(max).collect();
    if cut.len() < line.len() || s.lines().nth(1).is_some() {
        cut.push('…');
    }
    crate::terminal::escape_line(&cut).into_owned()
}
