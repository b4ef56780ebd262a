//! What `setup --import` finds in an app's config: each MCP server the app starts itself, and
//! whether autotool can run it instead ([`classify`], pure): a server started from a registry
//! package (`uvx PACKAGE`, `uvx --from PACKAGE COMMAND`, `uv tool run …`, `pipx run PACKAGE`,
//! `pipx run --spec PACKAGE COMMAND`, `npx [-y] PACKAGE`) is moved; anything else (a program on
//! the disk, `python -m`, `node script.js`, Docker, a remote URL) is listed with why it stays.

use autotool_policy::added::ServerSource;
use autotool_policy::names::{KeyName, ToolName};
use serde_json::Value;

/// One server of an app's config, as `setup --import` sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// autotool can run it: `autotool add NAME SOURCE [--entry E] [--write DIR…] -- ARGS`.
    Movable(Movable),
    /// It stays in the app's config, for the reason given.
    Stays {
        name: String,
        runs: String,
        why: String,
    },
}

/// A server autotool can run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Movable {
    /// Its name in the app's config.
    pub name: String,
    /// The tool's name: the same, unless the app's name is not a tool name.
    pub tool: ToolName,
    pub source: ServerSource,
    /// The command it ran, when that is not the package's own (`--from PKG CMD`).
    pub entry: Option<String>,
    pub args: Vec<String>,
    /// Its `env`, by name: moved into autotool's key store.
    pub env: Vec<(KeyName, String)>,
    /// The arguments that name a directory of the user's: granted read and write, since the
    /// server had them before.
    pub dirs: Vec<String>,
    /// The command line as the app ran it (values of `env` never in it).
    pub runs: String,
}

/// A tool name for a server the app calls `name`: itself when it is one, else lower case with
/// `_` for anything else (`my-server` → `my_server`).
pub fn tool_name(name: &str) -> Option<ToolName> {
    if let Ok(t) = ToolName::parse(name) {
        return Some(t);
    }
    let mut out = String::new();
    for c in name.chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '_'
        };
        if !(c == '_' && (out.is_empty() || out.ends_with('_'))) {
            out.push(c);
        }
    }
    let out = out.trim_end_matches('_').to_string();
    let out = if out.starts_with(|c: char| c.is_ascii_digit()) {
        format!("s_{out}")
    } else {
        out
    };
    ToolName::parse(&out).ok()
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// `PKG`, `PKG==1.0` or `PKG@1.0` (uvx's spelling) as a PyPI source.
fn pypi(spec: &str) -> Result<ServerSource, String> {
    let spec = match spec.split_once('@') {
        Some((name, version)) if !name.contains(' ') && version != "latest" => {
            format!("{name}=={version}")
        }
        Some((name, _)) => name.to_string(),
        None => spec.to_string(),
    };
    ServerSource::parse(&format!("pypi:{spec}")).map_err(|e| e.to_string())
}

/// `(source, entry, args)` from a `uvx`/`uv tool run`/`pipx run` command line.
fn python_runner(
    args: &[String],
    from_flag: &str,
) -> Result<(ServerSource, Option<String>, Vec<String>), String> {
    let mut from: Option<String> = None;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == from_flag {
            from = Some(
                args.get(i + 1)
                    .ok_or(format!("{a} without a package"))?
                    .clone(),
            );
            i += 2;
        } else if let Some(v) = a.strip_prefix(&format!("{from_flag}=")) {
            from = Some(v.to_string());
            i += 1;
        } else if matches!(a, "--python" | "-p") {
            // autotool runs every server on its own runtime.
            i += 2;
        } else if a.starts_with("--python=") || matches!(a, "-q" | "--quiet" | "--isolated") {
            i += 1;
        } else if a.starts_with('-') {
            return Err(format!("its option {a} is not one autotool can carry over"));
        } else {
            break;
        }
    }
    let rest = &args[i.min(args.len())..];
    let Some(first) = rest.first() else {
        return Err("it names no package".into());
    };
    match from {
        Some(package) => Ok((pypi(&package)?, Some(first.clone()), rest[1..].to_vec())),
        None => Ok((pypi(first)?, None, rest[1..].to_vec())),
    }
}

/// `(source, args)` from an `npx` command line.
fn npx(args: &[String]) -> Result<(ServerSource, Vec<String>), String> {
    let mut i = 0;
    while i < args.len() && matches!(args[i].as_str(), "-y" | "--yes" | "-q" | "--quiet") {
        i += 1;
    }
    let Some(first) = args.get(i) else {
        return Err("it names no package".into());
    };
    if first.starts_with('-') {
        return Err(format!(
            "its option {first} is not one autotool can carry over"
        ));
    }
    let source = ServerSource::parse(&format!("npm:{first}")).map_err(|e| e.to_string())?;
    Ok((source, args[i + 1..].to_vec()))
}

/// What `setup --import` makes of the server `name` whose entry is `entry`; `is_dir` tells
/// whether an argument names a directory of the user's.
pub fn classify(name: &str, entry: &Value, app: &str, is_dir: &dyn Fn(&str) -> bool) -> Found {
    let command = entry.get("command").and_then(Value::as_str).unwrap_or("");
    let args = strings(entry.get("args"));
    let runs = std::iter::once(command.to_string())
        .chain(args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    let stays = |why: String| Found::Stays {
        name: name.to_string(),
        runs: runs.clone(),
        why,
    };
    if command.is_empty() {
        return match entry.get("url").or_else(|| entry.get("serverUrl")) {
            Some(_) => stays("a remote server (a URL): nothing of it runs here to confine".into()),
            None => stays("it names no command".into()),
        };
    }
    let program = std::path::Path::new(command)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parsed = match program.as_str() {
        "uvx" => python_runner(&args, "--from"),
        "uv" if args.first().is_some_and(|a| a == "tool")
            && args.get(1).is_some_and(|a| a == "run") =>
        {
            python_runner(&args[2..], "--from")
        }
        "pipx" if args.first().is_some_and(|a| a == "run") => python_runner(&args[1..], "--spec"),
        "npx" => npx(&args).map(|(s, a)| (s, None, a)),
        "python" | "python3" if args.first().is_some_and(|a| a == "-m") => Err(format!(
            "`{program} -m MODULE` does not say which package holds the module; add it with \
             `autotool add {name} pypi:PACKAGE --entry MODULE:main`"
        )),
        "docker" | "podman" => Err("a container image: autotool runs registry packages".into()),
        "node" | "deno" | "bun" => Err(format!(
            "`{program}` runs a script on the disk, not a registry package"
        )),
        _ => Err(format!(
            "`{program}` is a program on the disk, not a registry package autotool can install"
        )),
    };
    let (source, entry_point, server_args) = match parsed {
        Ok(p) => p,
        Err(why) => return stays(why),
    };
    if entry.get("enabled").and_then(Value::as_bool) == Some(false)
        || entry.get("disabled").and_then(Value::as_bool) == Some(true)
    {
        return stays(format!(
            "it is turned off in {app}; turn it on there and import again, or `autotool add` it"
        ));
    }
    // Variables the app passes from its own environment or keyring (Codex's `env_vars`,
    // Goose's `env_keys`): their values are not in the config, so there is nothing to move.
    let passed = strings(entry.get("env_vars"))
        .into_iter()
        .chain(strings(entry.get("env_keys")))
        .collect::<Vec<_>>();
    if !passed.is_empty() {
        let keys = passed
            .iter()
            .map(|k| format!(" --key {k}"))
            .collect::<String>();
        return stays(format!(
            "{app} gives it {} from outside the config, so autotool cannot move the value: store \
             each with `autotool keys add NAME`, then `autotool add {} {source}{keys}`",
            passed.join(", "),
            tool_name(name).map_or_else(|| name.to_string(), |t| t.to_string())
        ));
    }
    let Some(tool) = tool_name(name) else {
        return stays(format!("{name:?} cannot be made a tool name"));
    };
    let mut env = Vec::new();
    if let Some(map) = entry.get("env").and_then(Value::as_object) {
        for (k, v) in map {
            let Some(v) = v.as_str() else {
                return stays(format!("its env {k} is not a string"));
            };
            match KeyName::parse(k) {
                Ok(key) => env.push((key, v.to_string())),
                Err(_) => {
                    return stays(format!(
                        "its env {k} is not a name autotool holds keys under"
                    ));
                }
            }
        }
    }
    let dirs = server_args
        .iter()
        .filter(|a| (a.starts_with('/') || a.starts_with("~/")) && is_dir(a))
        .cloned()
        .collect();
    Found::Movable(Movable {
        name: name.to_string(),
        tool,
        source,
        entry: entry_point,
        args: server_args,
        env,
        dirs,
        runs,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn movable(name: &str, entry: Value) -> Movable {
        match classify(name, &entry, "Claude Code", &|a| a == "/home/u/notes") {
            Found::Movable(m) => m,
            other => panic!("{other:?}"),
        }
    }

    fn stays(name: &str, entry: Value) -> String {
        match classify(name, &entry, "Claude Code", &|_| false) {
            Found::Stays { why, .. } => why,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn uvx_pipx_and_npx_servers_are_moved_with_their_args_env_and_directories() {
        let m = movable(
            "timesrv",
            json!({"command": "uvx", "args": ["mcp-server-time", "--local-timezone", "Etc/UTC"]}),
        );
        assert_eq!(m.source.to_string(), "pypi:mcp-server-time");
        assert_eq!(m.args, vec!["--local-timezone", "Etc/UTC"]);
        assert_eq!(m.entry, None);
        let m = movable(
            "fetch",
            json!({"command": "/usr/local/bin/uvx", "args": ["--from", "mcp-server-fetch@2026.10.24", "mcp-server-fetch"],
                   "env": {"FETCH_TOKEN": "s3cret"}}),
        );
        assert_eq!(m.source.to_string(), "pypi:mcp-server-fetch==2026.10.24");
        assert_eq!(m.entry.as_deref(), Some("mcp-server-fetch"));
        assert_eq!(
            m.env,
            vec![(KeyName::parse("FETCH_TOKEN").unwrap(), "s3cret".into())]
        );
        assert!(!m.runs.contains("s3cret"));
        let m = movable(
            "git",
            json!({"command": "pipx", "args": ["run", "--spec", "mcp-server-git", "mcp-server-git", "--repository", "/r"]}),
        );
        assert_eq!(m.source.to_string(), "pypi:mcp-server-git");
        assert_eq!(m.args, vec!["--repository", "/r"]);
        let m = movable(
            "files",
            json!({"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/u/notes", "/nope"]}),
        );
        assert_eq!(
            m.source.to_string(),
            "npm:@modelcontextprotocol/server-filesystem"
        );
        assert_eq!(m.dirs, vec!["/home/u/notes"]);
        let m = movable(
            "t",
            json!({"command": "uv", "args": ["tool", "run", "--python", "3.12", "mcp-server-time"]}),
        );
        assert_eq!(m.source.to_string(), "pypi:mcp-server-time");
    }

    #[test]
    fn names_that_are_not_tool_names_are_made_into_one() {
        let m = movable("My-Server", json!({"command": "uvx", "args": ["x"]}));
        assert_eq!(m.tool.as_str(), "my_server");
        assert_eq!(tool_name("9lives").unwrap().as_str(), "s_9lives");
        assert_eq!(tool_name("time").unwrap().as_str(), "time");
    }

    #[test]
    fn what_cannot_be_moved_says_why() {
        assert!(stays("r", json!({"url": "https://x.example/mcp"})).contains("remote"));
        assert!(
            stays("d", json!({"command": "docker", "args": ["run", "x"]})).contains("container")
        );
        assert!(stays("n", json!({"command": "node", "args": ["/srv/x.js"]})).contains("script"));
        assert!(
            stays("p", json!({"command": "python3", "args": ["-m", "srv"]})).contains("--entry")
        );
        assert!(stays("b", json!({"command": "/opt/bin/server"})).contains("program on the disk"));
        assert!(
            stays("u", json!({"command": "uvx", "args": ["--with", "x", "y"]})).contains("--with")
        );
        assert!(
            stays(
                "u",
                json!({"command": "uvx", "args": ["https://evil/x.whl"]})
            )
            .len()
                > 5
        );
        assert!(
            stays(
                "e",
                json!({"command": "uvx", "args": ["x"], "env": {"lower": "v"}})
            )
            .contains("lower")
        );
        assert!(
            stays(
                "x",
                json!({"command": "npx", "args": ["-y", "git+https://x/y"]})
            )
            .len()
                > 5
        );
        assert!(
            stays(
                "off",
                json!({"command": "uvx", "args": ["x"], "enabled": false})
            )
            .contains("turned off in Claude Code")
        );
        let passed = stays(
            "gh-server",
            json!({"command": "npx", "args": ["-y", "gh"], "env_vars": ["GITHUB_TOKEN"]}),
        );
        assert!(
            passed.contains("GITHUB_TOKEN")
                && passed.contains("autotool add gh_server npm:gh --key GITHUB_TOKEN"),
            "{passed}"
        );
        assert!(
            stays(
                "g",
                json!({"command": "uvx", "args": ["x"], "env_keys": ["K"]})
            )
            .contains("--key K")
        );
    }
}
