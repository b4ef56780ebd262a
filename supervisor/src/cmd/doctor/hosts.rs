//! The agent apps on this machine, as `doctor` sees them: which are here, whether each runs
//! autotool, and whether the autotool it runs serves this home.

use super::*;

/// Which agent apps are here and whether each runs autotool: a found app without an autotool
/// entry, or whose config cannot be read, is a warning about that app (tools still run, for
/// every other host).
///
/// An entry that serves another autotool home than `home` (its `--home`, else an
/// `AUTOTOOL_HOME` in its env block, else `~/.autotool`) is a warning too: that app sees
/// none of this home's tools.
pub(super) fn host_checks(home: &crate::home::Home, checks: &mut Vec<Check>) {
    use crate::host_apps::{App, Entry, HostEnv, Plan, plan};
    let default_home = |env: &HostEnv| env.home.join(".autotool");
    let (env, entry) = match HostEnv::from_process().and_then(|env| {
        let entry = Entry::current()?.with_home(home.root(), &default_home(&env))?;
        Ok((env, entry))
    }) {
        Ok(both) => both,
        Err(e) => {
            checks.push(Check::new("hosts", Status::Warn, e.to_string()));
            return;
        }
    };
    let mut found = 0;
    for app in App::ALL {
        let check = match plan(app, &env, &entry, false) {
            Plan::NotFound { .. } => continue,
            // An autotool entry serving another home, whether setup would leave it (Present)
            // or point it here (Change).
            Plan::Present { config, .. } | Plan::Change { config, .. }
                if let Some(theirs) = crate::host_apps::read_config(&config)
                    .ok()
                    .flatten()
                    .and_then(|t| crate::host_apps::served(app, &t))
                    .filter(|s| crate::host_apps::is_autotool(&s.command, &s.args))
                    && theirs.home(&default_home(&env)) != home.root() =>
            {
                let runs = std::iter::once(theirs.command.as_str())
                    .chain(theirs.args.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(" ");
                let theirs = theirs.home(&default_home(&env));
                Check::new(
                    "host",
                    Status::Warn,
                    format!(
                        "{}: registered in {} ({runs}), but it serves the autotool home {}, \
                         not this one ({}): none of this home's tools, keys or ledger",
                        app.title(),
                        env.show(&config),
                        env.show(&theirs),
                        env.show(home.root())
                    ),
                )
                .fix(match app {
                    App::ClaudeCode => format!(
                        "claude mcp remove --scope user autotool, then autotool setup --app {}",
                        app.id()
                    ),
                    App::Codex | App::Goose => format!(
                        "autotool setup --remove --app {id}, then autotool setup --app {id}",
                        id = app.id()
                    ),
                    _ => format!("autotool setup --app {}", app.id()),
                })
            }
            Plan::Present { config, runs, same } => Check::new(
                "host",
                Status::Ok,
                format!(
                    "{}: registered in {} ({runs}{})",
                    app.title(),
                    env.show(&config),
                    if same {
                        ""
                    } else {
                        "; another autotool than this one"
                    }
                ),
            ),
            Plan::Change { config, .. } => Check::new(
                "host",
                Status::Warn,
                format!(
                    "{}: found, autotool not registered in {}",
                    app.title(),
                    env.show(&config)
                ),
            )
            .fix(format!("autotool setup --app {}", app.id())),
            Plan::Unreadable { config, why } => Check::new(
                "host",
                Status::Warn,
                format!(
                    "{}: {} cannot be used: {why}",
                    app.title(),
                    env.show(&config)
                ),
            )
            .fix(format!(
                "repair {} (autotool setup leaves it alone until then)",
                env.show(&config)
            )),
        };
        found += 1;
        checks.push(check);
    }
    if found == 0 {
        checks.push(
            Check::new(
                "hosts",
                Status::Warn,
                format!(
                    "no agent app found ({})",
                    App::ALL.map(App::title).join(", ")
                ),
            )
            .fix("install one, then run autotool setup"),
        );
    }
}
