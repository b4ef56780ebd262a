//! Where each app keeps its config on each OS, and what shows the app is installed.

use super::{App, HostEnv, Os};
use std::path::PathBuf;

/// Where an app keeps its config, and whether it is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The file autotool's entry goes in.
    pub config: PathBuf,
    /// What shows the app is installed (`~/.cursor exists`, `` `claude` on PATH ``), if
    /// anything does.
    pub found: Option<String>,
    /// What setup looked for, for a "not found".
    pub looked_for: String,
}

/// Where `app` keeps its config in `env`.
pub fn locate(app: App, env: &HostEnv) -> Location {
    let home = &env.home;
    // (config file, directories or files whose existence shows the app)
    let (config, signs): (PathBuf, Vec<PathBuf>) = match app {
        App::ClaudeCode => match env.path_var("CLAUDE_CONFIG_DIR") {
            Some(dir) => (dir.join(".claude.json"), vec![dir]),
            None => (
                home.join(".claude.json"),
                vec![home.join(".claude.json"), home.join(".claude")],
            ),
        },
        App::Codex => {
            let dir = env
                .path_var("CODEX_HOME")
                .unwrap_or_else(|| home.join(".codex"));
            (dir.join("config.toml"), vec![dir])
        }
        App::Cursor => {
            let dir = home.join(".cursor");
            (dir.join("mcp.json"), vec![dir])
        }
        App::ClaudeDesktop => {
            let dir = app_data(env).join("Claude");
            (dir.join("claude_desktop_config.json"), vec![dir])
        }
        App::OpenClaw => {
            let state = env.path_var("OPENCLAW_STATE_DIR").unwrap_or_else(|| {
                env.path_var("OPENCLAW_HOME")
                    .unwrap_or_else(|| home.clone())
                    .join(".openclaw")
            });
            match env.path_var("OPENCLAW_CONFIG_PATH") {
                Some(file) => (file.clone(), vec![file, state]),
                None => (state.join("openclaw.json"), vec![state]),
            }
        }
        App::VsCode => {
            let dir = app_data(env).join("Code");
            (dir.join("User").join("mcp.json"), vec![dir])
        }
        App::Windsurf => {
            let dir = home.join(".codeium").join("windsurf");
            (dir.join("mcp_config.json"), vec![dir])
        }
        App::Zed => {
            let dir = match env.os {
                Os::Windows => app_data(env).join("Zed"),
                Os::Linux | Os::MacOs => config_home(env).join("zed"),
            };
            (dir.join("settings.json"), vec![dir])
        }
        App::Gemini => {
            let dir = home.join(".gemini");
            (dir.join("settings.json"), vec![dir])
        }
        App::Goose => {
            let dir = match env.os {
                Os::Windows => app_data(env).join("Block").join("goose").join("config"),
                Os::Linux | Os::MacOs => config_home(env).join("goose"),
            };
            (dir.join("config.yaml"), vec![dir])
        }
        App::Cline | App::Roo => {
            let (extension, file) = match app {
                App::Cline => ("saoudrizwan.claude-dev", "cline_mcp_settings.json"),
                _ => ("rooveterinaryinc.roo-cline", "mcp_settings.json"),
            };
            let dir = app_data(env)
                .join("Code")
                .join("User")
                .join("globalStorage")
                .join(extension);
            (dir.join("settings").join(file), vec![dir])
        }
    };
    let mut found = signs
        .iter()
        .find(|p| p.exists())
        .map(|p| format!("{} exists", env.show(p)));
    if found.is_none()
        && let Some(cli) = app.cli()
        && let Some(p) = env.on_path(cli)
    {
        found = Some(format!("`{cli}` is on PATH ({})", env.show(&p)));
    }
    let mut looked: Vec<String> = signs.iter().map(|p| env.show(p)).collect();
    looked.dedup();
    let mut looked_for = format!("no {}", looked.join(" or "));
    if let Some(cli) = app.cli() {
        looked_for.push_str(&format!(", and no `{cli}` on PATH"));
    }
    Location {
        config,
        found,
        looked_for,
    }
}

/// `$XDG_CONFIG_HOME` (when absolute), else `~/.config`.
fn config_home(env: &HostEnv) -> PathBuf {
    env.path_var("XDG_CONFIG_HOME")
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| env.home.join(".config"))
}

/// Where desktop apps keep their settings on `env.os`: the XDG config home on Linux,
/// `~/Library/Application Support` on macOS, `%APPDATA%` on Windows.
fn app_data(env: &HostEnv) -> PathBuf {
    match env.os {
        Os::Linux => config_home(env),
        Os::MacOs => env.home.join("Library/Application Support"),
        Os::Windows => env
            .path_var("APPDATA")
            .unwrap_or_else(|| env.home.join("AppData").join("Roaming")),
    }
}
