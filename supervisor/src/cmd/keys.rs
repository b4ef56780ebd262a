//! `autotool keys …`: add, list, remove and limit the keys tools may be given.
//!
//! A value is read from the terminal without echo, or from stdin when stdin is not a terminal
//! (`printf %s "$TOKEN" | autotool keys add NAME`); never from the command line, where other
//! users could see it in the process list and the shell keeps it in its history. Nothing here
//! prints a value.

use crate::credentials::{Added, CredError, KeyInfo, KeyStore, Removed, Source, Target};
use crate::home::Home;
use std::io::{self, IsTerminal, Read, Write};
use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum KeysCmd {
    /// Add or replace a key; its value is read from the terminal or stdin.
    ///
    /// The value is read without echo from the terminal, or from stdin (one trailing newline
    /// dropped); never from the command line. Stored in the OS keychain, or with `--file` in
    /// $AUTOTOOL_HOME/credentials (mode 0600).
    Add {
        /// The key's name, as tools ask for it: upper case, digits and `_` (TAVILY_API_KEY).
        name: String,
        /// Refused: a value is never taken from the command line (this is here only to say
        /// so, and how to give it instead).
        #[arg(hide = true, value_name = "VALUE")]
        value: Option<String>,
        /// Keep it in $AUTOTOOL_HOME/credentials (mode 0600) instead of the OS keychain, for
        /// machines without one (also AUTOTOOL_CREDENTIALS=file).
        #[arg(long)]
        file: bool,
    },
    /// List the keys: names, sources and allowlists, never a value.
    ///
    /// Each name, where its value comes from, and where it may be sent.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a key from the OS keychain and the credentials file.
    ///
    /// Its allowlist is kept.
    Remove {
        /// The key's name.
        name: String,
    },
    /// Limit where a key may be sent (no hosts removes the limit).
    ///
    /// `api.x.com` exactly, `*.x.com` any subdomain (not x.com itself), `host:port` for ports
    /// other than 443 and 80. An entry naming a public suffix (`*.com`, `*.co.uk`,
    /// `*.github.io`) is refused. No hosts removes the limit.
    Allow {
        /// The key's name.
        name: String,
        /// The hosts it may be sent to.
        hosts: Vec<String>,
    },
}

/// Why a `keys` command failed.
#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error(transparent)]
    Cred(#[from] CredError),
    #[error(transparent)]
    Home(#[from] crate::home::HomeError),
    #[error("cannot read the value: {0}")]
    Input(io::Error),
    #[error("cannot write the output: {0}")]
    Output(#[from] io::Error),
    #[error("cannot encode JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error(
        "a key's value is never taken from the command line, where other users can read it in \
         the process list and the shell keeps it in its history; nothing was stored. Run \
         `autotool keys add {0}` and type the value (it is not shown), or pipe it in: \
         `printf %s \"$VALUE\" | autotool keys add {0}`"
    )]
    ValueInArgv(String),
}

/// Run a `keys` subcommand against `$AUTOTOOL_HOME`, this process's environment and the OS
/// keychain, writing to `out`; errors go to stderr.
pub fn run(cmd: KeysCmd, out: &mut impl Write) -> ExitCode {
    let result = Home::from_env()
        .map_err(CliError::from)
        .and_then(|home| run_in(&KeyStore::open(&home), cmd, out));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A usage error: the command line itself is wrong.
        Err(e @ CliError::ValueInArgv(_)) => {
            let _ = super::fail("keys add", &e.to_string());
            ExitCode::from(2)
        }
        Err(e) => super::fail("keys", &e.to_string()),
    }
}

fn run_in(store: &KeyStore, cmd: KeysCmd, out: &mut impl Write) -> Result<(), CliError> {
    match cmd {
        KeysCmd::Add {
            value: Some(_),
            name,
            ..
        } => Err(CliError::ValueInArgv(name)),
        KeysCmd::Add {
            name,
            file,
            value: None,
        } => {
            crate::credentials::check_name(&name)?;
            let setting = std::env::var(crate::credentials::CREDENTIALS_VAR).ok();
            let target = Target::choose(file, setting.as_deref())?;
            if target == Target::Keychain {
                store.probe_keychain()?;
            }
            let value = read_value(&name)?;
            let added = store.add(&name, &value, target)?;
            report_added(store, &name, target, &added, out)
        }
        KeysCmd::List { json } => {
            let keys = store.list()?;
            if json {
                let doc = serde_json::json!({
                    "keys": keys,
                    "credentials_file": store.credentials_path(),
                });
                writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
            } else {
                write_table(store, &keys, out)?;
            }
            Ok(())
        }
        KeysCmd::Remove { name } => {
            let removed = store.remove(&name)?;
            report_removed(&name, &removed, out)
        }
        KeysCmd::Allow { name, hosts } => {
            let stored = store
                .list()?
                .iter()
                .any(|k| k.name == name && k.source.is_some());
            let hosts = store.allow(&name, &hosts)?;
            if !stored {
                eprintln!(
                    "autotool keys: warning: {name} is not stored (not in the OS keychain, the \
                     credentials file or this environment); the limit is kept and applies once \
                     it is: `autotool keys add {name}`. Check the spelling if you meant a key \
                     you have (`autotool keys list`)."
                );
            }
            if hosts.is_empty() {
                writeln!(
                    out,
                    "{name} may now be sent to any host: its allowlist is removed. Tools that \
                     hold it will be asked for consent again on each new version."
                )?;
            } else {
                writeln!(
                    out,
                    "{name} may only be sent to: {}. A tool holding it reaches only these hosts \
                     (this machine itself only on a port named here, or on the port of an \
                     `*_API_BASE` variable of serve's environment).",
                    hosts.join(", ")
                )?;
            }
            Ok(())
        }
    }
}

/// The value: without echo from a terminal, else all of stdin less one trailing newline.
fn read_value(name: &str) -> Result<Vec<u8>, CliError> {
    let stdin = io::stdin();
    if stdin.is_terminal() {
        let value = rpassword::prompt_password(format!("Value for {name} (not shown): "))
            .map_err(CliError::Input)?;
        return Ok(value.into_bytes());
    }
    let mut value = Vec::new();
    stdin
        .lock()
        .take(crate::credentials::MAX_VALUE_LEN as u64 + 3)
        .read_to_end(&mut value)
        .map_err(CliError::Input)?;
    if value.ends_with(b"\n") {
        value.pop();
        if value.ends_with(b"\r") {
            value.pop();
        }
    }
    Ok(value)
}

fn report_added(
    store: &KeyStore,
    name: &str,
    target: Target,
    added: &Added,
    out: &mut impl Write,
) -> Result<(), CliError> {
    match target {
        Target::Keychain => writeln!(
            out,
            "Added {name} to the OS keychain (service `{}`).",
            crate::credentials::SERVICE
        )?,
        Target::File { reason } => writeln!(
            out,
            "Added {name} to {} (mode 0600), not to the OS keychain, because {reason}. Anyone \
             who can read your files (or root) can read it there; where a keychain runs, \
             `autotool keys add {name}` without --file keeps it there instead.",
            store.credentials_path().display()
        )?,
    }
    for source in &added.removed_from {
        writeln!(out, "Removed the older value of {name} from the {source}.")?;
    }
    if let Some((_, why)) = &added.shadowed_by {
        writeln!(out, "Note: {why}.")?;
    }
    Ok(())
}

fn report_removed(name: &str, removed: &Removed, out: &mut impl Write) -> Result<(), CliError> {
    if removed.removed_from.is_empty() {
        writeln!(
            out,
            "{name} was not stored in the OS keychain or the credentials file."
        )?;
    } else {
        let from: Vec<String> = removed.removed_from.iter().map(Source::to_string).collect();
        writeln!(out, "Removed {name} from the {}.", from.join(" and the "))?;
    }
    if removed.still_in_env {
        writeln!(
            out,
            "Note: {name} is still set in the environment; an `autotool serve` started with it \
             there (the host config's `env` block) still has it. Remove it there too."
        )?;
    }
    Ok(())
}

fn write_table(store: &KeyStore, keys: &[KeyInfo], out: &mut impl Write) -> Result<(), CliError> {
    if keys.is_empty() {
        writeln!(
            out,
            "No keys. Add one with `autotool keys add NAME` (the value is read without echo)."
        )?;
        return Ok(());
    }
    let rows: Vec<[String; 3]> = keys
        .iter()
        .map(|k| {
            let mut source = k
                .source
                .map_or_else(|| "(not set)".to_owned(), |s| s.to_string());
            if !k.shadowed.is_empty() {
                let also: Vec<String> = k.shadowed.iter().map(Source::to_string).collect();
                source.push_str(&format!(" (also in {}, unused)", also.join(", ")));
            }
            let hosts = k
                .allowed_hosts
                .as_ref()
                .map_or_else(|| "any (no allowlist)".to_owned(), |h| h.join(" "));
            [k.name.clone(), source, hosts]
        })
        .collect();
    let header = [
        "NAME".to_owned(),
        "SOURCE".to_owned(),
        "ALLOWED HOSTS".to_owned(),
    ];
    let width = |i: usize| {
        rows.iter()
            .chain([&header])
            .map(|r| r[i].chars().count())
            .max()
            .unwrap_or(0)
    };
    let (w0, w1) = (width(0), width(1));
    for row in [&header].into_iter().chain(&rows) {
        writeln!(out, "{:w0$}  {:w1$}  {}", row[0], row[1], row[2])?;
    }
    let sources: Vec<Source> = keys
        .iter()
        .flat_map(|k| k.source.into_iter().chain(k.shadowed.iter().copied()))
        .collect();
    if sources.contains(&Source::Env) {
        writeln!(
            out,
            "\nenvironment: set in this shell; `autotool serve` takes keys from its own \
             environment (the host config's `env` block), which wins over the keychain and file."
        )?;
    }
    if sources.contains(&Source::File) {
        writeln!(
            out,
            "file: {} (mode 0600), used because you opted in.",
            store.credentials_path().display()
        )?;
    }
    Ok(())
}
