//! `autotool setup --remove`: take autotool's entry out of the apps' configs again.
//!
//! Only an entry setup would have written goes: one named `autotool` that runs an `autotool`
//! binary with `serve` or `connect` ([`super::edit::is_autotool`]). An entry of that name that
//! runs something else is the user's, and stays. Every config that has one is looked at (an
//! app's config can outlive the app), or only those `--app` names. The file is backed up first
//! (the next free `.bak` name, [`super::files`]) and everything but the entry is kept byte for
//! byte; a dry run prints the change, secrets hidden, and writes nothing.
//!
//! Where setup kept a record ([`super::undo`]) and the file is still exactly what setup wrote,
//! the whole file goes back as it was before setup, byte for byte (or the file setup created
//! goes); where it changed since, only the entry comes out, and a user's own `autotool` entry
//! setup had pointed here goes back to what it ran.

use super::{
    App, EditError, HostEnv, HostsError, Options, Removal, files, locate, remove_for, undo,
};
use std::io::Write;
use std::path::{Path, PathBuf};

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
    /// The file is exactly what setup wrote: it goes back to `original`, the text before
    /// setup (`None`: setup created it, and it is deleted with the empty directories setup
    /// created, `created_dirs`).
    Restore {
        config: PathBuf,
        before: String,
        original: Option<String>,
        created_dirs: Vec<PathBuf>,
        runs: String,
    },
    /// The file changed since setup, whose entry (running `runs`) had replaced the user's own
    /// `autotool` entry: that goes back to running `users`, the rest of the file as it is.
    PutBack {
        config: PathBuf,
        before: String,
        after: String,
        runs: String,
        users: String,
    },
    /// As [`RemovePlan::PutBack`], but the entry cannot be put back in this format: it is
    /// left as it is, not deleted.
    KeptUsers {
        config: PathBuf,
        runs: String,
        users: String,
    },
}

/// What removing autotool from `app` comes to, without setup's records.
pub fn plan_removal(app: App, env: &HostEnv) -> RemovePlan {
    plan_removal_with(app, env, None)
}

/// What removing autotool from `app` comes to, with setup's records in `records`.
pub fn plan_removal_with(app: App, env: &HostEnv, records: Option<&Path>) -> RemovePlan {
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
    let record = records.and_then(|dir| undo::load(dir, app, &config));
    match remove_for(app, &text) {
        Err(why) => RemovePlan::Unreadable { config, why },
        Ok(Removal::Absent) => RemovePlan::NotRegistered {
            config,
            exists: true,
        },
        Ok(Removal::NotOurs { runs }) => RemovePlan::NotOurs { config, runs },
        Ok(Removal::Removed { text: after, runs }) => {
            match record.as_ref().map(|r| (r, undo::decide(app, r, &text))) {
                Some((r, undo::Undo::Restore { original })) => {
                    // Values `setup --import` moved come back from the key store; one no longer
                    // there leaves the file as it is, less autotool's entry.
                    let original = match original {
                        Some(o) if !r.moved.is_empty() => match unmask(records, &o, &r.moved) {
                            Some(o) => Some(o),
                            None => {
                                return RemovePlan::Change {
                                    config,
                                    before: text,
                                    after,
                                    runs,
                                };
                            }
                        },
                        other => other,
                    };
                    RemovePlan::Restore {
                        config,
                        before: text,
                        original,
                        created_dirs: r.created_dirs.clone(),
                        runs,
                    }
                }
                Some((_, undo::Undo::Entry { users: Some(users) })) => {
                    let shown = std::iter::once(users.command.as_str())
                        .chain(users.args.iter().map(String::as_str))
                        .collect::<Vec<_>>()
                        .join(" ");
                    match undo::put_back(app, env.os, &users, &text) {
                        Some(put) => RemovePlan::PutBack {
                            config,
                            before: text,
                            after: put,
                            runs,
                            users: shown,
                        },
                        None => RemovePlan::KeptUsers {
                            config,
                            runs,
                            users: shown,
                        },
                    }
                }
                _ => RemovePlan::Change {
                    config,
                    before: text,
                    after,
                    runs,
                },
            }
        }
    }
}

/// `original` with the moved values read back from the key store of the home that keeps
/// `records` (`$AUTOTOOL_HOME/setup`).
fn unmask(records: Option<&Path>, original: &str, moved: &[super::moved::Moved]) -> Option<String> {
    let home = crate::home::Home::at(records?.parent()?);
    let store = crate::credentials::KeyStore::open(&home);
    super::moved::unmask(original, moved, &|key| {
        let (secret, _) = store.get(key).ok()??;
        String::from_utf8(secret.expose().to_vec()).ok()
    })
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
    let records = opts.records.as_deref();
    for app in apps {
        let title = format!("{:<width$}", app.title(), width = super::TITLE_WIDTH);
        let plan = plan_removal_with(app, env, records);
        // Once the entry is gone (or never was), the record describes nothing any more.
        let forget = |out: &mut dyn Write| -> std::io::Result<()> {
            if let Some(dir) = records
                && !opts.dry_run
                && let Err(e) = undo::forget(dir, app)
            {
                writeln!(
                    out,
                    "{title}(could not delete {}: {e}; delete it yourself)",
                    env.show(&undo::path(dir, app))
                )?;
            }
            Ok(())
        };
        match &plan {
            RemovePlan::NotRegistered { config, exists } => {
                summary.not_registered += 1;
                let at = env.show(config);
                if *exists {
                    writeln!(out, "{title}not registered (no autotool entry in {at})")?;
                } else {
                    writeln!(out, "{title}not registered (no {at})")?;
                }
                forget(out)?;
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
            RemovePlan::Restore {
                config,
                before,
                original,
                created_dirs,
                runs,
            } => {
                let at = env.show(config);
                if opts.dry_run {
                    summary.removed += 1;
                    match original {
                        Some(original) => {
                            writeln!(
                                out,
                                "{title}would put {at} back as it was before setup (the entry \
                                 runs `{runs}`; a backup would go to {})",
                                env.show(&files::backup_path(config))
                            )?;
                            for line in
                                super::diff(env, app, config, Some(before), original).lines()
                            {
                                writeln!(out, "    {line}")?;
                            }
                        }
                        None => writeln!(
                            out,
                            "{title}would delete {at}, which setup created (the entry runs \
                             `{runs}`)"
                        )?,
                    }
                    continue;
                }
                let done = match original {
                    Some(original) => files::replace(config, original).map(|w| {
                        let kept = w
                            .backup
                            .map(|b| format!("; the file with the entry is {}", env.show(&b)))
                            .unwrap_or_default();
                        format!(
                            "removed ({at} is as it was before setup, byte for byte; the entry \
                             ran `{runs}`{kept})"
                        )
                    }),
                    None => undo::delete_created(config, created_dirs).map(|()| {
                        format!("removed (deleted {at}, which setup created; it ran `{runs}`)")
                    }),
                };
                match done {
                    Ok(line) => {
                        summary.removed += 1;
                        writeln!(out, "{title}{line}")?;
                        forget(out)?;
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
            RemovePlan::KeptUsers {
                config,
                runs,
                users,
            } => {
                summary.not_ours += 1;
                let kept = records
                    .map(|dir| format!(" (`original` in {})", env.show(&undo::path(dir, app))))
                    .unwrap_or_default();
                writeln!(
                    out,
                    "{title}left in place: the autotool entry in {} was yours (it ran \
                     `{users}`) before setup pointed it at `{runs}`, and the file changed \
                     since; point it back yourself: the file as it was before setup is kept{kept}",
                    env.show(config)
                )?;
            }
            RemovePlan::PutBack {
                config,
                before,
                after,
                runs,
                users,
            } => {
                let at = env.show(config);
                if opts.dry_run {
                    summary.removed += 1;
                    writeln!(
                        out,
                        "{title}would point the autotool entry in {at} back to `{users}`, as \
                         it was yours before setup (it runs `{runs}`; the rest of the file \
                         changed since and is kept; a backup would go to {})",
                        env.show(&files::backup_path(config))
                    )?;
                    for line in super::diff(env, app, config, Some(before), after).lines() {
                        writeln!(out, "    {line}")?;
                    }
                    continue;
                }
                if replace_and_say(config, after, env, out, &title, |kept| {
                    format!(
                        "removed ({at}: your own autotool entry runs `{users}` again, as \
                         before setup; the rest of the file is as you left it{kept})"
                    )
                })? {
                    summary.removed += 1;
                    forget(out)?;
                } else {
                    summary.failed += 1;
                }
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
                if replace_and_say(config, after, env, out, &title, |kept| {
                    format!("removed ({at}, it ran `{runs}`{kept})")
                })? {
                    summary.removed += 1;
                    forget(out)?;
                } else {
                    summary.failed += 1;
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

/// Write `after` over `config` (backed up first) and say so on `out` after `title`: `done` is
/// given the words naming the backup. A write that fails is said too, with the file as it was.
/// Whether it was written.
fn replace_and_say(
    config: &std::path::Path,
    after: &str,
    env: &HostEnv,
    out: &mut dyn Write,
    title: &str,
    done: impl FnOnce(&str) -> String,
) -> std::io::Result<bool> {
    match files::replace(config, after) {
        Ok(files::Written { backup, .. }) => {
            let kept = backup
                .map(|b| format!("; the previous file is {}", env.show(&b)))
                .unwrap_or_default();
            writeln!(out, "{title}{}", done(&kept))?;
            Ok(true)
        }
        Err(e) => {
            writeln!(
                out,
                "{title}failed: could not write {}: {e}. The file is as it was.",
                env.show(config)
            )?;
            Ok(false)
        }
    }
}
