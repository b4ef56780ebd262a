//! `autotool hosts …`: the hosts the user allows every tool that declares them in
//! `REQUIRED_HOSTS`, so common public APIs ask nothing. A tool that does not declare a host
//! still cannot reach it: this list answers consent, it widens no tool's reach by itself.

use crate::home::Home;
use crate::registry::Registry;
use std::io::Write;
use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum HostsCmd {
    /// Allow hosts for every tool that declares them, without asking.
    ///
    /// Each HOST as `autotool keys allow` takes it: `api.x.com`, `*.x.com` (its subdomains),
    /// `api.x.com:8443` for another port; a public suffix (`*.com`) is refused. A tool reaches
    /// a host only when it also declares it in REQUIRED_HOSTS.
    Allow {
        #[arg(required = true, value_name = "HOST")]
        hosts: Vec<String>,
    },
    /// List the hosts allowed for every tool that declares them.
    ///
    /// Each with when and how it was added.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop allowing hosts for every tool; declaring one asks again.
    ///
    /// Grants already given to a tool stay (`autotool tools revoke TOOL` withdraws them).
    Remove {
        #[arg(required = true, value_name = "HOST")]
        hosts: Vec<String>,
    },
}

/// Run a `hosts` subcommand against `$AUTOTOOL_HOME`, writing to `out`.
pub fn run(cmd: HostsCmd, out: &mut impl Write) -> ExitCode {
    match run_in(cmd, out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => super::fail("hosts", &format!("{e:#}")),
    }
}

fn run_in(cmd: HostsCmd, out: &mut impl Write) -> anyhow::Result<()> {
    let home = Home::from_env()?;
    let registry = Registry::open(&home)?;
    match cmd {
        HostsCmd::Allow { hosts } => {
            writeln!(
                out,
                "{}",
                crate::consent::allow_hosts(&registry, &hosts, "cli")?
            )?;
        }
        HostsCmd::Remove { hosts } => {
            let entries = hosts
                .iter()
                .map(|h| autotool_policy::hosts::AllowRule::parse(h).map(|r| r.to_string()))
                .collect::<Result<Vec<_>, _>>()?;
            let removed = registry.ledger().disallow_hosts(&entries)?;
            if removed.is_empty() {
                writeln!(out, "none of those hosts was allowed; nothing changed")?;
            } else {
                writeln!(
                    out,
                    "no longer allowed for every tool: {}. A tool that declares one is asked \
                     again, unless it was granted it already.",
                    removed.join(", ")
                )?;
            }
        }
        HostsCmd::List { json } => {
            let rows = registry.ledger().allowed_hosts()?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
            } else if rows.is_empty() {
                writeln!(
                    out,
                    "no host is allowed for every tool: each host a tool declares in \
                     REQUIRED_HOSTS is asked (`autotool hosts allow HOST…` to allow one)"
                )?;
            } else {
                for r in rows {
                    writeln!(
                        out,
                        "{}  added {} via {}",
                        r.entry,
                        crate::ledger::format_ms(r.added_at),
                        r.via
                    )?;
                }
            }
        }
    }
    Ok(())
}
