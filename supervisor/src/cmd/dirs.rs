//! `autotool dirs …`: the deny rules of `READ_DIRS` and `WRITE_DIRS` the user widens
//! explicitly. A directory such as `~/.config/myapp` is refused to every tool by a rule
//! (`~/.config` holds applications' tokens); `dirs widen ~/.config/myapp` lets a tool that
//! declares it, or a directory below it, be granted it, after the usual consent. Widening
//! grants nothing by itself, and never reaches `/`, autotool's own home, the kernel's
//! interfaces or the sandbox's own places ([`crate::tool::dirs::resolve_widening`]).
//! The widened paths are kept in the ledger, canonical, shared by every serve on the machine.

use crate::home::Home;
use crate::registry::Registry;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum DirsCmd {
    /// Widen the deny rule that refuses a directory to every tool.
    ///
    /// A tool that declares it (or a directory below it) can then be granted it. PATH as READ_DIRS takes it (`~/.config/myapp`, `/etc/myapp`), an existing directory;
    /// symlinks and `..` are resolved now, once. A tool still reaches it only when it declares
    /// it and the user grants it. Never autotool's own home, `/`, `/proc`, `/sys`, `/dev` or
    /// the sandbox's own places.
    Widen {
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<String>,
    },
    /// List the directories whose deny rules are widened.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Undo a widening: the rule refuses the directory again.
    ///
    /// From the next launch of each tool granted it.
    Narrow {
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<String>,
    },
}

/// Run a `dirs` subcommand against `$AUTOTOOL_HOME`, writing to `out`.
pub fn run(cmd: DirsCmd, out: &mut impl Write) -> ExitCode {
    match run_in(cmd, out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => super::fail("dirs", &format!("{e:#}")),
    }
}

/// The user's home, as serve resolves grants against it.
fn user_home() -> anyhow::Result<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .ok_or_else(|| anyhow::anyhow!("HOME is not set: `~` cannot be resolved"))
}

fn run_in(cmd: DirsCmd, out: &mut impl Write) -> anyhow::Result<()> {
    let home = Home::from_env()?;
    let registry = Registry::open(&home)?;
    match cmd {
        DirsCmd::Widen { paths } => {
            let user = user_home()?;
            // Every path is checked before any is kept: one refused widens none.
            let checked = paths
                .iter()
                .map(|p| crate::tool::dirs::resolve_widening(p, &user, home.root()))
                .collect::<Result<Vec<_>, String>>()
                .map_err(|why| anyhow::anyhow!("{why}"))?;
            for (path, what) in checked {
                let shown = autotool_policy::dirs::shown(&path, &user);
                let added = registry
                    .ledger()
                    .widen_dir(&path.to_string_lossy(), &what, "cli")?;
                if added {
                    writeln!(
                        out,
                        "widened for {shown} (the rule for {what}): a tool that declares it, or \
                         a directory below it, can now be granted it once you approve"
                    )?;
                } else {
                    writeln!(out, "{shown} was widened already; nothing changed")?;
                }
            }
        }
        DirsCmd::Narrow { paths } => {
            let user = user_home().ok();
            // As widened: canonical where it still resolves, else as written (a directory
            // gone since can still be narrowed by the path `dirs list` shows).
            let entries: Vec<String> = paths
                .iter()
                .map(|p| {
                    let expanded = match (p.strip_prefix("~/"), &user) {
                        (Some(rest), Some(h)) => h.join(rest),
                        _ => PathBuf::from(p),
                    };
                    std::fs::canonicalize(&expanded)
                        .unwrap_or(expanded)
                        .to_string_lossy()
                        .into_owned()
                })
                .collect();
            let removed = registry.ledger().narrow_dirs(&entries)?;
            if removed.is_empty() {
                writeln!(
                    out,
                    "none of those directories was widened; nothing changed"
                )?;
            } else {
                writeln!(
                    out,
                    "no longer widened: {}. A tool granted one is refused it from its next \
                     launch.",
                    removed.join(", ")
                )?;
            }
        }
        DirsCmd::List { json } => {
            let rows = registry.ledger().widened_dirs()?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
            } else if rows.is_empty() {
                writeln!(
                    out,
                    "no deny rule is widened: a tool is never granted the home itself, ~/.ssh, \
                     ~/.gnupg, ~/.aws, ~/.config, /etc, other users' homes and the like \
                     (`autotool dirs widen PATH` to widen one)"
                )?;
            } else {
                for r in rows {
                    writeln!(
                        out,
                        "{}  widened {} via {}",
                        r.path,
                        crate::ledger::format_ms(r.added_at),
                        r.via
                    )?;
                }
            }
        }
    }
    Ok(())
}
