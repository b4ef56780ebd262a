//! `autotool setup`: register `autotool serve` (by the absolute path of the running binary)
//! with every agent app found on this machine.
//!
//! | app | config file | format | an autotool entry already there |
//! | --- | --- | --- | --- |
//! | Claude Code | `$CLAUDE_CONFIG_DIR/.claude.json`, else `~/.claude.json` (user scope) | JSON | left untouched |
//! | Codex | `$CODEX_HOME/config.toml`, else `~/.codex/config.toml` | TOML | left untouched |
//! | Cursor | `~/.cursor/mcp.json` | JSON with comments | pointed here, `env` kept |
//! | Claude Desktop | `~/.config/Claude/` (`$XDG_CONFIG_HOME`), `~/Library/Application Support/Claude/`, `%APPDATA%\Claude\` + `claude_desktop_config.json` | JSON | pointed here, `env` kept |
//! | OpenClaw | `$OPENCLAW_CONFIG_PATH`, else `openclaw.json` in `$OPENCLAW_STATE_DIR` or `~/.openclaw` | JSON5, `mcp.servers` | pointed here, `env` kept |
//! | VS Code | `mcp.json` in the user directory (`~/.config/Code/User/`) | JSON with comments, `servers` | pointed here, `env` kept |
//! | Windsurf | `~/.codeium/windsurf/mcp_config.json` | JSON with comments | pointed here, `env` kept |
//! | Zed | `~/.config/zed/settings.json` | JSON with comments, `context_servers` | pointed here, `env` kept |
//! | Gemini CLI | `~/.gemini/settings.json` | JSON with comments | pointed here, `env` kept |
//! | Goose | `~/.config/goose/config.yaml` | YAML, `extensions` ([`yaml`]) | left untouched |
//! | Cline, Roo Code | `settings/cline_mcp_settings.json`, `settings/mcp_settings.json` in the extension's VS Code storage | JSON | pointed here, `env` kept |
//!
//! An app is *found* when its config directory (or file) exists or its CLI (`claude`, `codex`,
//! `openclaw`, `code`, `windsurf`, `zed`, `gemini`, `goose`) is on `PATH`; an app named with
//! `--app` is registered even when it is not. Paths per OS: [`locate`].
//!
//! `--remove` ([`remove`]) undoes setup: from the record setup keeps of each config ([`undo`])
//! it puts the file back byte for byte while it is still setup's, else takes autotool's own
//! entry out. Every write backs the file up first under a name no other backup has ([`files`]);
//! a dry run prints the change with every secret hidden ([`mask`]).
//!
//! A home other than `~/.autotool` goes into each entry as `--home` ([`Entry::with_home`]); an
//! entry's home is read back by [`served`] (`doctor` compares it).
//!
//! The steps, each its own function so tests can take them one at a time:
//! 1. [`locate`]: where an app keeps its config, and whether the app is there ([`HostEnv`] is
//!    the part of the environment that decides it);
//! 2. [`edit_for`]: the config's new text from its old text, a pure function (the formats live
//!    in [`json`] and [`toml`]), or why it cannot be made ([`EditError`]);
//! 3. [`plan`]: both, plus reading the file: registered already, a change, or why not;
//! 4. [`apply`]: the change written through [`files`] (backup to `.bak`, `.bak.1`, …, atomic
//!    replace, mode kept);
//! 5. [`run`]: every app, and a line for each saying what was done.
//!
//! Running it twice changes nothing: the second run finds every entry in place.

pub mod edit;
pub mod files;
pub mod import;
pub mod json;
mod locate;
pub mod mask;
pub mod moved;
mod remove;
pub mod served;
pub mod toml;
pub mod undo;
pub mod yaml;

pub use edit::{Edit, EditError, Removal, edit_for, is_autotool, remove_for};
pub use locate::{Location, locate};
pub use mask::diff;
pub use remove::{RemovePlan, RemoveSummary, plan_removal, run_remove};
pub use served::{Served, served};

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The name autotool's entry has in every app.
pub const SERVER_NAME: &str = "autotool";

/// The agent apps setup knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum App {
    /// Claude Code (user scope).
    ClaudeCode,
    /// OpenAI Codex (CLI, IDE extension and app share one config).
    Codex,
    /// Cursor (global MCP servers).
    Cursor,
    /// Claude Desktop.
    ClaudeDesktop,
    /// OpenClaw (`mcp.servers`).
    #[value(name = "openclaw")]
    OpenClaw,
    /// VS Code's agent mode (GitHub Copilot): the user's `mcp.json`.
    #[value(name = "vscode")]
    VsCode,
    /// Windsurf (Cascade).
    Windsurf,
    /// Zed (`context_servers` in its settings).
    Zed,
    /// Gemini CLI (user settings).
    Gemini,
    /// Goose (`extensions` in its YAML config).
    Goose,
    /// Cline, the VS Code extension.
    Cline,
    /// Roo Code, the VS Code extension.
    Roo,
}

impl App {
    /// Every app, in the order setup reports them.
    pub const ALL: [App; 12] = [
        App::ClaudeCode,
        App::Codex,
        App::Cursor,
        App::ClaudeDesktop,
        App::OpenClaw,
        App::VsCode,
        App::Windsurf,
        App::Zed,
        App::Gemini,
        App::Goose,
        App::Cline,
        App::Roo,
    ];

    /// The app's name as users know it.
    pub fn title(self) -> &'static str {
        match self {
            App::ClaudeCode => "Claude Code",
            App::Codex => "Codex",
            App::Cursor => "Cursor",
            App::ClaudeDesktop => "Claude Desktop",
            App::OpenClaw => "OpenClaw",
            App::VsCode => "VS Code",
            App::Windsurf => "Windsurf",
            App::Zed => "Zed",
            App::Gemini => "Gemini CLI",
            App::Goose => "Goose",
            App::Cline => "Cline",
            App::Roo => "Roo Code",
        }
    }

    /// The name `--app` takes.
    pub fn id(self) -> &'static str {
        match self {
            App::ClaudeCode => "claude-code",
            App::Codex => "codex",
            App::Cursor => "cursor",
            App::ClaudeDesktop => "claude-desktop",
            App::OpenClaw => "openclaw",
            App::VsCode => "vscode",
            App::Windsurf => "windsurf",
            App::Zed => "zed",
            App::Gemini => "gemini",
            App::Goose => "goose",
            App::Cline => "cline",
            App::Roo => "roo",
        }
    }

    /// The app's CLI, whose presence on `PATH` counts as finding the app.
    fn cli(self) -> Option<&'static str> {
        match self {
            App::ClaudeCode => Some("claude"),
            App::Codex => Some("codex"),
            App::OpenClaw => Some("openclaw"),
            App::VsCode => Some("code"),
            App::Windsurf => Some("windsurf"),
            App::Zed => Some("zed"),
            App::Gemini => Some("gemini"),
            App::Goose => Some("goose"),
            App::Cursor | App::ClaudeDesktop | App::Cline | App::Roo => None,
        }
    }

    /// What the user still does in the app itself before autotool works there, if anything.
    pub fn setup_note(self) -> Option<&'static str> {
        match self {
            App::Gemini => Some(
                "it shows autotool as Disabled (\"MCP servers are configured but disabled \
                 because this folder is untrusted\") until you trust the folder: start gemini \
                 in your project folder and, at \"Do you trust the files in this folder?\", \
                 choose \"Trust folder\" (or \"Trust parent folder\"); in a running gemini, \
                 /permissions trust; kept in ~/.gemini/trustedFolders.json; see docs/hosts.md",
            ),
            _ => None,
        }
    }
}

/// Setup errors (per-app problems are not errors: they are reported in [`Plan`]).
#[derive(Debug, thiserror::Error)]
pub enum HostsError {
    #[error(
        "HOME is not set, so setup cannot tell where the agent apps keep their settings: set HOME \
         and run it again"
    )]
    NoHome,
    #[error(
        "cannot tell where this autotool binary is ({0}); run setup with the binary's full path"
    )]
    CurrentExe(std::io::Error),
    #[error(
        "this autotool binary's path ({0}) is not an absolute UTF-8 path, which app configs need; \
         install autotool under a plain path and run its setup"
    )]
    BadBinary(String),
    #[error(
        "the autotool home {0} is not an absolute UTF-8 path, which app configs need; set \
         AUTOTOOL_HOME to a plain absolute path and run setup again"
    )]
    BadHome(String),
    #[error("writing the report: {0}")]
    Io(#[from] std::io::Error),
}

/// The command an app is told to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub command: String,
    pub args: Vec<String>,
}

impl Entry {
    /// `<binary> serve`.
    pub fn serve(binary: &Path) -> Result<Entry, HostsError> {
        let bad = || HostsError::BadBinary(binary.display().to_string());
        if !binary.is_absolute() {
            return Err(bad());
        }
        let command = binary.to_str().ok_or_else(bad)?.to_string();
        Ok(Entry {
            command,
            args: vec!["serve".to_string()],
        })
    }

    /// The same entry serving the autotool home `home`: `--home <home>` after the verb
    /// (`serve --home …`, `connect --home …`), unless `home` is `default_home`, the one the
    /// app's autotool would use anyway (`~/.autotool`), where the entry stays as it always was.
    pub fn with_home(mut self, home: &Path, default_home: &Path) -> Result<Entry, HostsError> {
        if home == default_home {
            return Ok(self);
        }
        let bad = || HostsError::BadHome(home.display().to_string());
        if !home.is_absolute() {
            return Err(bad());
        }
        let home = home.to_str().ok_or_else(bad)?.to_string();
        self.args.extend(["--home".to_string(), home]);
        Ok(self)
    }

    /// `autotool serve` for the running binary.
    pub fn current() -> Result<Entry, HostsError> {
        let exe = std::env::current_exe().map_err(HostsError::CurrentExe)?;
        Entry::serve(&exe)
    }
}

/// The operating system whose conventions decide the paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    Linux,
    MacOs,
    Windows,
}

impl Os {
    /// The one this binary was built for (other Unixes follow Linux).
    pub fn current() -> Os {
        if cfg!(target_os = "macos") {
            Os::MacOs
        } else if cfg!(windows) {
            Os::Windows
        } else {
            Os::Linux
        }
    }
}

/// The environment variables setup reads besides `HOME`.
pub const VARIABLES: [&str; 8] = [
    "PATH",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "XDG_CONFIG_HOME",
    "APPDATA",
    "OPENCLAW_HOME",
    "OPENCLAW_STATE_DIR",
    "OPENCLAW_CONFIG_PATH",
];

/// What decides where the apps keep their configs: the home directory (`$HOME`), the OS, and
/// [`VARIABLES`]. Tests build one around a fixture home.
#[derive(Debug, Clone)]
pub struct HostEnv {
    pub home: PathBuf,
    pub os: Os,
    vars: BTreeMap<String, OsString>,
}

impl HostEnv {
    /// `$HOME`, this OS, and [`VARIABLES`] from the process environment.
    pub fn from_process() -> Result<HostEnv, HostsError> {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .ok_or(HostsError::NoHome)?;
        let mut env = HostEnv::new(PathBuf::from(home), Os::current());
        for name in VARIABLES {
            if let Some(v) = std::env::var_os(name) {
                env = env.with_var(name, v);
            }
        }
        Ok(env)
    }

    /// A home and an OS, with no variables set.
    pub fn new(home: impl Into<PathBuf>, os: Os) -> HostEnv {
        HostEnv {
            home: home.into(),
            os,
            vars: BTreeMap::new(),
        }
    }

    /// The same with `name` set to `value`.
    pub fn with_var(mut self, name: &str, value: impl Into<OsString>) -> HostEnv {
        self.vars.insert(name.to_string(), value.into());
        self
    }

    /// A variable's value, unless unset or empty.
    fn var(&self, name: &str) -> Option<&OsString> {
        self.vars.get(name).filter(|v| !v.is_empty())
    }

    /// A variable naming a directory or file: a leading `~` is the home directory.
    fn path_var(&self, name: &str) -> Option<PathBuf> {
        let v = PathBuf::from(self.var(name)?);
        Some(match v.strip_prefix("~") {
            Ok(rest) => self.home.join(rest),
            Err(_) => v,
        })
    }

    /// The first executable file called `program` in `$PATH`.
    pub fn on_path(&self, program: &str) -> Option<PathBuf> {
        use std::os::unix::fs::PermissionsExt as _;
        let path = self.var("PATH")?;
        std::env::split_paths(path)
            .filter(|d| d.is_absolute())
            .map(|d| d.join(program))
            .find(|p| {
                std::fs::metadata(p)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    }

    /// `path` with the home directory shown as `~`, for messages.
    pub fn show(&self, path: &Path) -> String {
        match path.strip_prefix(&self.home) {
            Ok(rest) if rest.as_os_str().is_empty() => "~".to_string(),
            Ok(rest) => format!("~/{}", rest.display()),
            Err(_) => path.display().to_string(),
        }
    }
}

/// What Codex passes to the server besides its default list: on Linux, what the keychain
/// (Secret Service over the session D-Bus) needs to be reachable.
pub fn codex_env_vars(os: Os) -> &'static [&'static str] {
    match os {
        Os::Linux => &["DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR"],
        Os::MacOs | Os::Windows => &[],
    }
}

/// What setup will do for one app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// No sign of the app; `looked_for` says what was looked for.
    NotFound { looked_for: String },
    /// The config exists but cannot be read or edited safely; it is left alone.
    Unreadable { config: PathBuf, why: EditError },
    /// An autotool entry is there already and stays as it is.
    Present {
        config: PathBuf,
        runs: String,
        same: bool,
    },
    /// The config gets new text (`before` is `None` for a file that does not exist yet).
    Change {
        config: PathBuf,
        before: Option<String>,
        after: String,
        replaced: Option<String>,
    },
}

/// What setup will do for `app`. `forced`: register even where no sign of the app is found.
pub fn plan(app: App, env: &HostEnv, entry: &Entry, forced: bool) -> Plan {
    let loc = locate(app, env);
    if loc.found.is_none() && !forced {
        return Plan::NotFound {
            looked_for: loc.looked_for,
        };
    }
    let config = loc.config;
    let before = match read_config(&config) {
        Ok(text) => text,
        Err(why) => return Plan::Unreadable { config, why },
    };
    match edit_for(app, env.os, entry, before.as_deref().unwrap_or("")) {
        Err(why) => Plan::Unreadable { config, why },
        Ok(Edit::Present { runs, same }) => Plan::Present { config, runs, same },
        Ok(Edit::Changed { text, replaced }) => Plan::Change {
            config,
            before,
            after: text,
            replaced,
        },
    }
}

/// A config's text: `None` when there is no such file, an error when it cannot be read or is
/// not UTF-8.
pub(crate) fn read_config(config: &Path) -> Result<Option<String>, EditError> {
    match std::fs::read(config) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| EditError::NotUtf8),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(EditError::Unreadable { why: e.to_string() }),
    }
}

/// Carry out a [`Plan::Change`] (anything else writes nothing and returns `None`).
pub fn apply(plan: &Plan) -> std::io::Result<Option<files::Written>> {
    match plan {
        Plan::Change { config, after, .. } => files::replace(config, after).map(Some),
        _ => Ok(None),
    }
}

/// `autotool setup`'s choices.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Only these apps, each registered even where it is not found; empty: every app found.
    pub apps: Vec<App>,
    /// Print each change and write nothing.
    pub dry_run: bool,
    /// Where setup keeps what `--remove` needs to give each config back byte for byte
    /// (`$AUTOTOOL_HOME/setup`, [`undo`]); `None`: keep nothing, and `--remove` only takes the
    /// entry out.
    pub records: Option<PathBuf>,
}

/// How a run went, per outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub registered: usize,
    pub already: usize,
    pub not_found: usize,
    /// Configs that could not be read, parsed or written.
    pub failed: usize,
}

pub(crate) const TITLE_WIDTH: usize = 16;

/// Whether an entry that runs `runs` (its command line as an app's config gives it) starts
/// `command`, this binary: the same path, or another path to the same file (a symlink, a
/// relative spelling). Only then is the difference in its arguments (`serve` against `connect`
/// for the service) the thing to say, not the binary.
fn runs_this_binary(runs: &str, command: &str) -> bool {
    if runs == command || runs.starts_with(&format!("{command} ")) {
        return true;
    }
    let Some(first) = runs.split_whitespace().next() else {
        return false;
    };
    match (std::fs::metadata(first), std::fs::metadata(command)) {
        (Ok(a), Ok(b)) => {
            use std::os::unix::fs::MetadataExt as _;
            (a.dev(), a.ino()) == (b.dev(), b.ino())
        }
        _ => false,
    }
}

/// Register `entry` with the apps `opts` names (or all found), reporting a line per app on `out`.
pub fn run(
    opts: &Options,
    env: &HostEnv,
    entry: &Entry,
    out: &mut dyn Write,
) -> Result<Summary, HostsError> {
    let forced = !opts.apps.is_empty();
    let apps: Vec<App> = if forced {
        App::ALL
            .into_iter()
            .filter(|a| opts.apps.contains(a))
            .collect()
    } else {
        App::ALL.to_vec()
    };
    let command = std::iter::once(entry.command.as_str())
        .chain(entry.args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    writeln!(
        out,
        "{} `{command}` with the agent apps on this machine:\n",
        if opts.dry_run {
            "Dry run: would register"
        } else {
            "Registering"
        }
    )?;
    let mut summary = Summary::default();
    let mut notes = Vec::new();
    for app in apps {
        let title = format!("{:<TITLE_WIDTH$}", app.title());
        let p = plan(app, env, entry, forced);
        if matches!(p, Plan::Present { .. } | Plan::Change { .. })
            && let Some(note) = app.setup_note()
        {
            notes.push(format!("{}: {note}", app.title()));
        }
        match &p {
            Plan::NotFound { looked_for } => {
                summary.not_found += 1;
                writeln!(out, "{title}not found ({looked_for})")?;
            }
            Plan::Unreadable { config, why } => {
                summary.failed += 1;
                writeln!(
                    out,
                    "{title}config unreadable: {}: {why}. It was left alone: fix it (or move \
                     it aside) and run `autotool setup` again.",
                    env.show(config)
                )?;
            }
            Plan::Present { config, runs, same } => {
                summary.already += 1;
                let at = env.show(config);
                let home_note = home_note(app, env, config, entry);
                if *same {
                    writeln!(out, "{title}already registered ({at})")?;
                } else if runs_this_binary(runs, &entry.command) {
                    writeln!(
                        out,
                        "{title}already registered ({at}), left untouched: it runs this binary \
                         as `{runs}`, not `{command}`{home_note}. To change it, {}, then run \
                         `autotool setup` again.",
                        remove_hint(app, &at, runs)
                    )?;
                } else {
                    writeln!(
                        out,
                        "{title}already registered ({at}), left untouched: it runs `{runs}`, not \
                         this binary{home_note}. To point it here, {}, then run `autotool setup` \
                         again.",
                        remove_hint(app, &at, runs)
                    )?;
                }
            }
            Plan::Change {
                config,
                before,
                after,
                replaced,
            } => {
                let at = env.show(config);
                let was = replaced
                    .as_ref()
                    .map(|r| {
                        format!(
                            "; the autotool entry ran `{r}`, its env and other settings are kept"
                        )
                    })
                    .unwrap_or_default();
                if opts.dry_run {
                    summary.registered += 1;
                    let what = match before {
                        Some(_) => format!(
                            "would register ({at}{was}; a backup would go to {})",
                            env.show(&files::backup_path(config))
                        ),
                        None => format!("would register (would create {at})"),
                    };
                    writeln!(out, "{title}{what}")?;
                    for line in diff(env, app, config, before.as_deref(), after).lines() {
                        writeln!(out, "    {line}")?;
                    }
                } else {
                    if let Some(dir) = &opts.records
                        && let Err(e) = undo::remember(dir, app, config, before.as_deref(), after)
                    {
                        summary.failed += 1;
                        writeln!(
                            out,
                            "{title}failed: could not record in {} what `autotool setup \
                             --remove` needs to undo it: {e}. {at} was not changed.",
                            env.show(dir)
                        )?;
                        continue;
                    }
                    match apply(&p) {
                        Ok(Some(files::Written { backup, .. })) => {
                            summary.registered += 1;
                            let how = match backup {
                                Some(b) => {
                                    format!("{at}{was}; the previous file is {}", env.show(&b))
                                }
                                None => format!("created {at}"),
                            };
                            writeln!(out, "{title}registered ({how})")?;
                        }
                        Ok(None) => {}
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
    }
    writeln!(out)?;
    for note in notes {
        writeln!(out, "{note}")?;
    }
    if opts.dry_run {
        writeln!(out, "Dry run: nothing was written.")?;
    } else if summary.registered > 0 {
        writeln!(
            out,
            "Restart the apps registered above (or start a new session in them) to load autotool."
        )?;
    }
    if summary.registered + summary.already + summary.failed == 0 {
        writeln!(
            out,
            "No agent app was found. Name one to register it anyway: autotool setup --app {}",
            App::ALL.map(App::id).join("|")
        )?;
    }
    Ok(summary)
}

/// The home `entry` serves, as the app's config gives it: `--home`, else `AUTOTOOL_HOME` in
/// the entry's env block, else `default_home`.
fn entry_home(entry: &Entry, default_home: &Path) -> PathBuf {
    Served {
        command: entry.command.clone(),
        args: entry.args.clone(),
        env_home: None,
    }
    .home(default_home)
}

/// For an entry setup leaves untouched in `config`: `, and it serves the autotool home A, not
/// this one (B)` when its home is not the one `entry` serves; else nothing.
fn home_note(app: App, env: &HostEnv, config: &Path, entry: &Entry) -> String {
    let default_home = env.home.join(".autotool");
    let Some(theirs) = read_config(config)
        .ok()
        .flatten()
        .and_then(|text| served(app, &text))
    else {
        return String::new();
    };
    let (theirs, ours) = (theirs.home(&default_home), entry_home(entry, &default_home));
    if theirs == ours {
        return String::new();
    }
    format!(
        ", and it serves the autotool home {}, not this one ({}): its tools are not yours here",
        env.show(&theirs),
        env.show(&ours)
    )
}

/// How a user removes an entry setup leaves untouched (which runs `runs`): the app's own way,
/// and `setup --remove` where the entry runs an autotool binary.
fn remove_hint(app: App, at: &str, runs: &str) -> String {
    let own = match app {
        App::ClaudeCode => "remove it with `claude mcp remove --scope user autotool`".to_string(),
        App::Codex => format!(
            "remove its [mcp_servers.autotool] table from {at} (or run `codex mcp remove autotool`)"
        ),
        App::Goose => format!("remove its `autotool` extension from {at}"),
        _ => format!("remove its entry from {at}"),
    };
    let mut words = runs.split(' ');
    let command = words.next().unwrap_or_default();
    let args: Vec<String> = words.map(str::to_string).collect();
    if edit::is_autotool(command, &args) {
        format!("{own} or with `autotool setup --remove --app {}`", app.id())
    } else {
        own
    }
}
