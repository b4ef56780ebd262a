//! `autotool setup --import [--app APP…] [--dry-run] [--yes]`: the MCP servers an app starts
//! itself from a registry package (`uvx`, `pipx run`, `npx`), moved behind autotool. For each
//! server the user accepts: its `env` values go into the key store under their names, it is
//! added like `autotool add` (same name, same arguments; the directories its arguments name
//! granted read and write), and its entry leaves the app's config, so the app reaches it only
//! through autotool. Every copy autotool keeps of the old config (the undo record, the backups)
//! holds a placeholder instead of each value ([`crate::host_apps::moved`]); `setup --remove`
//! puts the config back byte for byte, values included. A server that cannot be moved (a
//! program on the disk, a container, a URL), or whose add fails, stays where it is, with why.

use crate::added::{self, AddRequest};
use crate::credentials::{KeyStore, Target};
use crate::host_apps::import::{Found, Movable, classify};
use crate::host_apps::moved::Moved;
use crate::host_apps::{self, App, HostEnv, edit, files, undo};
use crate::library::Library;
use autotool_policy::reach::DeclaredReach;
use std::io::{IsTerminal, Write};

/// What an import did.
#[derive(Debug, Default)]
pub struct Imported {
    pub moved: usize,
    pub stayed: usize,
    pub failed: usize,
}

/// `~/x` as the user's path.
fn expand(env: &HostEnv, arg: &str) -> std::path::PathBuf {
    match arg.strip_prefix("~/") {
        Some(rest) => env.home.join(rest),
        None => std::path::PathBuf::from(arg),
    }
}

fn describe(m: &Movable) -> String {
    let mut parts = vec![format!(
        "`autotool add {} {}{}`",
        m.tool,
        m.source,
        if m.args.is_empty() {
            String::new()
        } else {
            format!(" -- {}", m.args.join(" "))
        }
    )];
    if !m.env.is_empty() {
        let names: Vec<String> = m.env.iter().map(|(k, _)| k.to_string()).collect();
        parts.push(format!("keys moved to autotool: {}", names.join(", ")));
    }
    if !m.dirs.is_empty() {
        parts.push(format!("directories granted: {}", m.dirs.join(", ")));
    }
    parts.join("; ")
}

/// Put the values of `m` in the key store; the moved values, or why not.
fn store_keys(store: &KeyStore, m: &Movable) -> Result<Vec<(String, Moved)>, String> {
    let setting = std::env::var(crate::credentials::CREDENTIALS_VAR).ok();
    let target = Target::choose(false, setting.as_deref()).map_err(|e| e.to_string())?;
    let mut moved = Vec::new();
    for (key, value) in &m.env {
        if let Ok(Some((held, _))) = store.get(key.as_str())
            && held.expose() != value.as_bytes()
        {
            return Err(format!(
                "autotool already holds another value for {key}; rename it in the app's \
                 config, or remove autotool's (`autotool keys remove {key}`), and import again"
            ));
        }
        store
            .add(key.as_str(), value.as_bytes(), target)
            .map_err(|e| format!("storing {key}: {e}"))?;
        moved.push((value.clone(), Moved::new(key.as_str())));
    }
    Ok(moved)
}

/// Import the servers of one app. `text` is its config now.
#[allow(clippy::too_many_arguments)]
async fn import_app(
    library: &Library,
    store: &KeyStore,
    env: &HostEnv,
    app: App,
    config: &std::path::Path,
    text: &str,
    records: &std::path::Path,
    dry_run: bool,
    yes: bool,
    out: &mut dyn Write,
    done: &mut Imported,
) -> anyhow::Result<()> {
    let (format, servers) = edit::format_of(app);
    let found = match format {
        edit::Format::Json(dialect) => host_apps::json::servers_of(text, dialect, servers)?,
        edit::Format::Toml => host_apps::toml::servers_of(text)?,
        edit::Format::Yaml => host_apps::yaml::servers_of(text)?,
    };
    let without = |text: &str, name: &str| match format {
        edit::Format::Json(dialect) => host_apps::json::remove_server(text, dialect, servers, name),
        edit::Format::Toml => host_apps::toml::remove_server(text, name),
        edit::Format::Yaml => host_apps::yaml::remove_server(text, name),
    };
    let is_dir = |a: &str| expand(env, a).is_dir();
    let mut movable = Vec::new();
    for (name, entry) in &found {
        let command = entry.get("command").and_then(|c| c.as_str()).unwrap_or("");
        let args = host_apps::json::string_args(entry);
        if edit::is_autotool(command, &args) {
            continue;
        }
        match classify(name, entry, app.title(), &is_dir) {
            Found::Movable(m) => movable.push(m),
            Found::Stays { name, runs, why } => {
                done.stayed += 1;
                writeln!(out, "{}: {name} stays (`{runs}`): {why}", app.title())?;
            }
        }
    }
    if movable.is_empty() {
        return Ok(());
    }
    writeln!(out, "{} ({}):", app.title(), env.show(config))?;
    for m in &movable {
        writeln!(out, "  {} (`{}`) -> {}", m.name, m.runs, describe(m))?;
    }
    if dry_run {
        writeln!(
            out,
            "  Dry run: nothing moved. Each would be installed and verified confined, its keys \
             moved to autotool's key store, and its entry taken out of the config."
        )?;
        return Ok(());
    }
    if !yes {
        if !std::io::stdin().is_terminal() {
            anyhow::bail!(
                "nothing was moved: there is no terminal to ask at; read the above (or \
                 --dry-run), then run again with --yes"
            );
        }
        if !super::add::ask(&format!(
            "Move these {} server(s) into autotool?",
            movable.len()
        )) {
            writeln!(out, "  Nothing moved from {}.", app.title())?;
            return Ok(());
        }
    }
    let mut after = text.to_string();
    let mut all_moved: Vec<(String, Moved)> = Vec::new();
    for m in movable {
        let keys = match store_keys(store, &m) {
            Ok(k) => k,
            Err(why) => {
                done.failed += 1;
                writeln!(out, "  {}: stays: {why}", m.name)?;
                continue;
            }
        };
        library.refresh_keys();
        let dirs: Vec<String> = m
            .dirs
            .iter()
            .map(|d| expand(env, d).display().to_string())
            .collect();
        let request = AddRequest {
            name: m.tool.clone(),
            source: m.source.clone(),
            entry: m.entry.clone(),
            args: m.args.clone(),
            keys: m.env.iter().map(|(k, _)| k.clone()).collect(),
            reach: DeclaredReach::parse::<String>(&[], &[], &dirs)?,
            settings: Vec::new(),
            upgrade: false,
            imported_from: Some(app.title().to_string()),
        };
        let added = match added::plan(library, request).await {
            Ok(plan) => added::add(library, plan, "autotool setup --import").await,
            Err(e) => Err(e),
        };
        match added {
            Ok(a) => {
                after = without(&after, &m.name)?;
                all_moved.extend(keys);
                done.moved += 1;
                let functions: Vec<String> = a
                    .created
                    .functions
                    .iter()
                    .map(|(f, _)| f.to_string())
                    .collect();
                writeln!(
                    out,
                    "  {}: moved ({}, verified confined; {})",
                    m.name,
                    a.origin.origin(),
                    functions.join(", ")
                )?;
            }
            Err(e) => {
                done.failed += 1;
                writeln!(out, "  {}: stays: {e}", m.name)?;
            }
        }
    }
    if after != text {
        files::replace(config, &after)?;
        undo::remember(records, app, config, Some(text), &after)?;
        undo::mask_record(records, app, config, &all_moved)?;
        crate::host_apps::moved::scrub_backups(config, &all_moved)?;
        writeln!(
            out,
            "  {} now reaches them through autotool; their values are out of the file and its \
             backups (`autotool setup --remove` puts it back as it was).",
            app.title()
        )?;
    }
    Ok(())
}

/// Import from `apps` (or every app whose config exists).
pub async fn run(
    library: &Library,
    apps: &[App],
    dry_run: bool,
    yes: bool,
    out: &mut dyn Write,
) -> anyhow::Result<Imported> {
    let env = HostEnv::from_process()?;
    let records = library.home.root().join("setup");
    let store = KeyStore::open(&library.home);
    let mut done = Imported::default();
    writeln!(
        out,
        "\nImporting the MCP servers the apps start themselves:"
    )?;
    for app in App::ALL {
        if !apps.is_empty() && !apps.contains(&app) {
            continue;
        }
        let config = host_apps::locate(app, &env).config;
        let text = match host_apps::read_config(&config) {
            Ok(Some(t)) => t,
            Ok(None) => continue,
            Err(why) => {
                writeln!(out, "{}: config unreadable, skipped: {why}", app.title())?;
                continue;
            }
        };
        if let Err(e) = import_app(
            library, &store, &env, app, &config, &text, &records, dry_run, yes, out, &mut done,
        )
        .await
        {
            done.failed += 1;
            writeln!(out, "{}: {e:#}", app.title())?;
        }
    }
    writeln!(
        out,
        "{} moved, {} stayed, {} failed.",
        done.moved, done.stayed, done.failed
    )?;
    Ok(done)
}

/// `autotool setup --import`: setup's registration (autotool is how the apps reach what is
/// moved), then the import.
pub fn main(
    apps: Vec<App>,
    dry_run: bool,
    yes: bool,
    out: &mut impl Write,
) -> std::process::ExitCode {
    let registered = super::setup::hosts(apps.clone(), dry_run, false, !dry_run, out);
    if registered != std::process::ExitCode::SUCCESS {
        return registered;
    }
    let work = async {
        let home = crate::home::Home::from_env()?;
        let config = crate::config::Inputs::from_process(Default::default())
            .and_then(|inputs| crate::config::resolve(&inputs))
            .map_err(|problems| anyhow::anyhow!("{problems}"))?;
        let library = Library::new(config.settings(), home)?;
        library.runtime.start();
        let done = run(&library, &apps, dry_run, yes, out).await;
        library
            .runtime
            .shutdown(std::time::Duration::from_secs(2))
            .await;
        library.pool.shutdown().await;
        let done = done?;
        if done.failed > 0 {
            anyhow::bail!(
                "{} server(s) could not be moved (above, with why)",
                done.failed
            );
        }
        anyhow::Ok(())
    };
    super::cli::block_on("setup --import", work)
}
