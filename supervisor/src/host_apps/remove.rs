//! `autotool setup --remove`: take autotool's entry out of the apps' configs again.
//!
//! Only an entry setup would have written goes: one named `autotool` that runs an `autotool`
//! binary with `serve` or `connect` ([`super::edit::is_autotool`]). An entry of that name that
//! runs something else is the user's, and stays. Every config that has one is looked at (an
//! app's config can outlive the app), or only those `--app` names. The file is backed up first
//! (the next free `.bak` name, [`super::files`]) and everything but the entry is kept byte for
//! byte; a dry run prints the change, secrets hidden, and writes nothing.

use super::{App, EditError, HostEnv, HostsError, Options, Removal, files, locate, remove_for};
use std::io::Write;
use std::path::PathBuf;

/// What `--remove` will do for one app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemovePlan {
    /// Nothing to remove: no config file, or no autotool entry in it.
    NotRegistered { config: PathBuf, exists: bool },
    /// An `autotool` entry that does not run autotool; left alone.
    NotOurs { config: PathBuf, runs: String },
    /// The config cannot be read or edited safely; it is left alone.
    Unreadable { config: PathBuf, why: EditError },
    /// The config's new text without the entry, which ran `runs`.
    Change {
        config: PathBuf,
        before: String,
        after: String,
        runs: String,
    },
}

/// What removing autotool from `app` comes to.
pub fn plan_removal(app: App, env: &HostEnv) -> RemovePlan {
    let config = locate(app, env).config;
    let text = match super::read_config(&config) {
        Ok(Some(text)) => text,
        Ok(None) => {
            return RemovePlan::NotRegistered {
                config,
                exists: false,
            };
        }
        Err(why) => return RemovePlan::Unreadable { config, why },
    };
    match remove_for(app, &text) {
        Err(why) => RemovePlan::Unreadable { config, why },
        Ok(Removal::Absent) => RemovePlan::NotRegistered {
            config,
            exists: true,
        },
        Ok(Removal::NotOurs { runs }) => RemovePlan::NotOurs { config, runs },
        Ok(Removal::Removed { text: after, runs }) => RemovePlan::Change {
            config,
            before: text,
            after,
            runs,
        },
    }
}

/// How a removal went, per outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoveSummary {
    pub removed: usize,
    pub not_registered: usize,
    /// `autotool` entries that run something else, left alone.
    pub not_ours: usize,
    /// Configs that could not be read, parsed or written.
    pub failed: usize,
}

/// Remove autotool's entry from the apps `opts` names (or every app), reporting a line per app
/// on `out`.
pub fn run_remove(
    opts: &Options,
    env: &HostEnv,
    out: &mut dyn Write,
) -> Result<RemoveSummary, HostsError> {
    let apps: Vec<App> = App::ALL
        .into_iter()
        .filter(|a| opts.apps.is_empty() || opts.apps.contains(a))
        .collect();
    writeln!(
        out,
        "{} autotool from the agent apps on this machine:\n",
        if opts.dry_run {
            "Dry run: would remove"
        } else {
            "Removing"
        }
    )?;
    let mut summary = RemoveSummary::default();
    for app in apps {
        let title = format!("{:<width$}", app.title(), width = super::TITLE_WIDTH);
        let plan = plan_removal(app, env);
        match &plan {
            RemovePlan::NotRegistered { config, exists } => {
                summary.not_registered += 1;
                let at = env.show(config);
                if *exists {
                    writeln!(out, "{title}not registered (no autotool entry in {at})")?;
                } else {
                    writeln!(out, "{title}not registered (no {at})")?;
                }
            }
            RemovePlan::NotOurs { config, runs } => {
                summary.not_ours += 1;
                writeln!(
                    out,
                    "{title}left untouched: the autotool entry in {} runs `{runs}`, which setup \
                     did not write; remove it there yourself if you mean to",
                    env.show(config)
                )?;
            }
            RemovePlan::Unreadable { config, why } => {
                summary.failed += 1;
                writeln!(
                    out,
                    "{title}config unreadable: {}: {why}. It was left alone.",
                    env.show(config)
                )?;
            }
            RemovePlan::Change {
                config,
                before,
                after,
                runs,
            } => {
                let at = env.show(config);
                if opts.dry_run {
                    summary.removed += 1;
                    writeln!(
                        out,
                        "{title}would remove ({at}, the entry runs `{runs}`; a backup would go \
                         to {})",
                        env.show(&files::backup_path(config))
                    )?;
                    for line in super::diff(env, app, config, Some(before), after).lines() {
                        writeln!(out, "    {line}")?;
                    }
                    continue;
                }
                match files::replace(config, after) {
                    Ok(files::Written { backup, .. }) => {
                        summary.removed += 1;
                        let kept = backup
                            .map(|b| format!("; the previous file is {}", env.show(&b)))
                            .unwrap_or_default();
                        writeln!(out, "{title}removed ({at}, it ran `{runs}`{kept})")?;
                    }
                    Err(e) => {
                        summary.failed += 1;
                        writeln!(
                            out,
                            "{title}failed: could not write {at}: {e}. The file is as it was."
                        )?;
                    }
                }
            }
        }
    }
    writeln!(out)?;
    if opts.dry_run {
        writeln!(out, "Dry run: nothing was written.")?;
    } else if summary.removed > 0 {
        writeln!(
            out,
            "Restart the apps above (or start a new session in them) to unload autotool. Your \
             tools, keys and ledger stay in autotool's home ($AUTOTOOL_HOME, else ~/.autotool)."
        )?;
    }
    Ok(summary)
}
