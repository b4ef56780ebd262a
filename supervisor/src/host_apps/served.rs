//! Which autotool home an app's `autotool` entry will serve, read from the entry itself: its
//! `--home` argument, else an `AUTOTOOL_HOME` in the entry's environment block (JSON `env`,
//! Codex's `env` table, Goose's `envs`), else the user's default home (`~/.autotool`). `doctor`
//! compares it with the home it runs in; setup names it when it leaves an entry untouched.
//!
//! The app's own environment can carry `AUTOTOOL_HOME` too (an app started from a shell that
//! exports it): a config cannot show that, so it is not counted.

use super::{App, SERVER_NAME, edit};
use std::path::{Path, PathBuf};

/// What an app's `autotool` entry runs, as far as the home goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    pub command: String,
    pub args: Vec<String>,
    /// `AUTOTOOL_HOME` in the entry's environment block.
    pub env_home: Option<String>,
}

impl Served {
    /// The home it serves: `--home DIR` (or `--home=DIR`), else its `AUTOTOOL_HOME`, else
    /// `default_home`.
    pub fn home(&self, default_home: &Path) -> PathBuf {
        home_arg(&self.args)
            .map(PathBuf::from)
            .or_else(|| {
                self.env_home
                    .clone()
                    .filter(|h| !h.is_empty())
                    .map(PathBuf::from)
            })
            .unwrap_or_else(|| default_home.to_path_buf())
    }
}

/// The value of a `--home` argument.
pub fn home_arg(args: &[String]) -> Option<&str> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--home" {
            return it.next().map(String::as_str);
        }
        if let Some(v) = a.strip_prefix("--home=") {
            return Some(v);
        }
    }
    None
}

/// The `autotool` entry in `app`'s config `text`, if there is one that runs a command.
pub fn served(app: App, text: &str) -> Option<Served> {
    match edit::format_of(app) {
        (edit::Format::Json(dialect), path) => {
            let root = super::json::parse(text, dialect).ok()?;
            let mut here = &root;
            for key in path {
                here = here.get(*key)?;
            }
            let entry = here.get(SERVER_NAME)?;
            Some(Served {
                command: entry.get("command")?.as_str()?.to_string(),
                args: super::json::string_args(entry),
                env_home: entry
                    .get("env")
                    .and_then(|e| e.get("AUTOTOOL_HOME"))
                    .and_then(|v| v.as_str())
                    .map(str::to_string),
            })
        }
        (edit::Format::Toml, _) => {
            let doc: toml_edit::DocumentMut = text.parse().ok()?;
            let entry = doc.get("mcp_servers")?.get(SERVER_NAME)?;
            let strings = |v: Option<&toml_edit::Item>| -> Vec<String> {
                v.and_then(|a| a.as_array())
                    .map(|a| {
                        a.iter()
                            .filter_map(|s| s.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            Some(Served {
                command: entry.get("command")?.as_str()?.to_string(),
                args: strings(entry.get("args")),
                env_home: entry
                    .get("env")
                    .and_then(|e| e.get("AUTOTOOL_HOME"))
                    .and_then(|v| v.as_str())
                    .map(str::to_string),
            })
        }
        (edit::Format::Yaml, _) => {
            let (command, args, env_home) = super::yaml::entry_command(text, SERVER_NAME)?;
            Some(Served {
                command: command?,
                args,
                env_home,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_home_is_the_flag_then_the_env_block_then_the_default() {
        let default = Path::new("/u/.autotool");
        let s = |args: &[&str], env: Option<&str>| Served {
            command: "/bin/autotool".into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env_home: env.map(str::to_string),
        };
        assert_eq!(s(&["serve"], None).home(default), default);
        assert_eq!(s(&["serve"], Some("/e")).home(default), Path::new("/e"));
        assert_eq!(
            s(&["serve", "--home", "/f"], Some("/e")).home(default),
            Path::new("/f")
        );
        assert_eq!(
            s(&["connect", "--home=/g"], None).home(default),
            Path::new("/g")
        );
    }

    #[test]
    fn each_format_is_read() {
        let cursor = "// c\n{\"mcpServers\": {\"autotool\": {\"command\": \"/b/autotool\", \
                      \"args\": [\"serve\"], \"env\": {\"AUTOTOOL_HOME\": \"/e\"}}}}";
        let got = served(App::Cursor, cursor);
        assert_eq!(got.unwrap().env_home.as_deref(), Some("/e"));
        let codex = "[mcp_servers.autotool]\ncommand = \"/b/autotool\"\nargs = [\"serve\", \
                     \"--home\", \"/h\"]\n";
        let got = served(App::Codex, codex).unwrap();
        assert_eq!(got.home(Path::new("/d")), Path::new("/h"));
        let goose = "extensions:\n  autotool:\n    cmd: /b/autotool\n    args:\n    - serve\n    \
                     envs:\n      AUTOTOOL_HOME: /y\n";
        let got = served(App::Goose, goose).unwrap();
        assert_eq!(got.home(Path::new("/d")), Path::new("/y"));
        assert_eq!(served(App::Zed, "{}"), None);
    }
}
