//! `autotool setup` against fixture homes, one per situation, for each app's format (JSON,
//! JSON with comments, JSON5, TOML, YAML): a fresh config, other servers kept, an existing
//! autotool entry (its `env` kept, or for Claude Code and Codex left untouched), a second run
//! that changes nothing, an unparseable config left alone with the reason, a dry run that writes
//! nothing and prints no secret (one-line configs of every app), `--remove` giving each file
//! back byte for byte, and the numbered backups. The last tests run the `autotool` binary
//! itself.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use autotool::host_apps::{self, App, Entry, HostEnv, Options, Os, Plan, Summary};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

const BIN: &str = "/opt/autotool/bin/autotool";

fn entry() -> Entry {
    Entry::serve(Path::new(BIN)).unwrap()
}

/// A fixture home: a temporary directory standing in for `$HOME`, with an empty `bin/` as the
/// only `PATH` entry.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        Home { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn env(&self) -> HostEnv {
        HostEnv::new(self.dir.path(), Os::Linux).with_var("PATH", self.path("bin"))
    }

    fn mkdir(&self, rel: &str) -> &Home {
        std::fs::create_dir_all(self.path(rel)).unwrap();
        self
    }

    fn write(&self, rel: &str, text: &str) -> &Home {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        self
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
    }

    /// A program called `name` on the fixture's PATH.
    fn cli(&self, name: &str) -> &Home {
        let p = self.path(&format!("bin/{name}"));
        std::fs::write(&p, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        self
    }

    /// Every file under the home, with its contents and mode: equal snapshots mean nothing
    /// was written, created or removed.
    fn snapshot(&self) -> BTreeMap<PathBuf, (Vec<u8>, u32)> {
        let mut out = BTreeMap::new();
        let mut stack = vec![self.dir.path().to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let e = e.unwrap();
                let meta = e.metadata().unwrap();
                if meta.is_dir() {
                    stack.push(e.path());
                } else {
                    out.insert(
                        e.path(),
                        (std::fs::read(e.path()).unwrap(), meta.permissions().mode()),
                    );
                }
            }
        }
        out
    }

    fn run(&self, apps: &[App], dry_run: bool) -> (Summary, String) {
        let mut out = Vec::new();
        let opts = Options {
            apps: apps.to_vec(),
            dry_run,
            records: Some(self.records()),
        };
        let summary = host_apps::run(&opts, &self.env(), &entry(), &mut out).unwrap();
        (summary, String::from_utf8(out).unwrap())
    }

    /// Where setup keeps its undo records: `$AUTOTOOL_HOME/setup` of the default home.
    fn records(&self) -> PathBuf {
        self.path(".autotool/setup")
    }

    fn plan(&self, app: App) -> Plan {
        host_apps::plan(app, &self.env(), &entry(), false)
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// For each app: the directory that shows it is installed, its config file, and the whole
/// file a fresh registration writes.
fn fresh_cases() -> Vec<(App, &'static str, &'static str, String)> {
    vec![
        (
            App::ClaudeCode,
            ".claude",
            ".claude.json",
            format!(
                "{{\n  \"mcpServers\": {{\n    \"autotool\": {{\n      \"type\": \"stdio\",\n      \
                 \"command\": \"{BIN}\",\n      \"args\": [\"serve\"],\n      \"env\": {{}}\n    \
                 }}\n  }}\n}}\n"
            ),
        ),
        (
            App::Codex,
            ".codex",
            ".codex/config.toml",
            format!(
                "[mcp_servers.autotool]\ncommand = \"{BIN}\"\nargs = [\"serve\"]\nenv_vars = \
                 [\"DBUS_SESSION_BUS_ADDRESS\", \"XDG_RUNTIME_DIR\"]\n"
            ),
        ),
        (
            App::Cursor,
            ".cursor",
            ".cursor/mcp.json",
            format!(
                "{{\n  \"mcpServers\": {{\n    \"autotool\": {{\n      \"command\": \"{BIN}\",\n      \
                 \"args\": [\"serve\"]\n    }}\n  }}\n}}\n"
            ),
        ),
        (
            App::ClaudeDesktop,
            ".config/Claude",
            ".config/Claude/claude_desktop_config.json",
            format!(
                "{{\n  \"mcpServers\": {{\n    \"autotool\": {{\n      \"command\": \"{BIN}\",\n      \
                 \"args\": [\"serve\"]\n    }}\n  }}\n}}\n"
            ),
        ),
        (
            App::OpenClaw,
            ".openclaw",
            ".openclaw/openclaw.json",
            format!(
                "{{\n  \"mcp\": {{\n    \"servers\": {{\n      \"autotool\": {{\n        \"command\": \
                 \"{BIN}\",\n        \"args\": [\"serve\"]\n      }}\n    }}\n  }}\n}}\n"
            ),
        ),
        (
            App::VsCode,
            ".config/Code",
            ".config/Code/User/mcp.json",
            format!(
                "{{\n  \"servers\": {{\n    \"autotool\": {{\n      \"type\": \"stdio\",\n      \
                 \"command\": \"{BIN}\",\n      \"args\": [\"serve\"]\n    }}\n  }}\n}}\n"
            ),
        ),
        (
            App::Windsurf,
            ".codeium/windsurf",
            ".codeium/windsurf/mcp_config.json",
            mcp_servers_json(),
        ),
        (
            App::Zed,
            ".config/zed",
            ".config/zed/settings.json",
            format!(
                "{{\n  \"context_servers\": {{\n    \"autotool\": {{\n      \"source\": \"custom\",\n      \
                 \"command\": \"{BIN}\",\n      \"args\": [\"serve\"],\n      \"env\": {{}}\n    }}\n  \
                 }}\n}}\n"
            ),
        ),
        (
            App::Gemini,
            ".gemini",
            ".gemini/settings.json",
            mcp_servers_json(),
        ),
        (
            App::Goose,
            ".config/goose",
            ".config/goose/config.yaml",
            format!(
                "extensions:\n  autotool:\n    enabled: true\n    type: \"stdio\"\n    name: \
                 \"autotool\"\n    description: \"Tools your agent writes for itself: verified, \
                 confined and kept\"\n    cmd: \"{BIN}\"\n    args: [\"serve\"]\n    envs: {{}}\n    \
                 env_keys: []\n    timeout: 300\n"
            ),
        ),
        (
            App::Cline,
            ".config/Code/User/globalStorage/saoudrizwan.claude-dev",
            ".config/Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json",
            mcp_servers_json(),
        ),
        (
            App::Roo,
            ".config/Code/User/globalStorage/rooveterinaryinc.roo-cline",
            ".config/Code/User/globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json",
            mcp_servers_json(),
        ),
    ]
}

/// A fresh `mcpServers` file with only autotool's entry.
fn mcp_servers_json() -> String {
    format!(
        "{{\n  \"mcpServers\": {{\n    \"autotool\": {{\n      \"command\": \"{BIN}\",\n      \
         \"args\": [\"serve\"]\n    }}\n  }}\n}}\n"
    )
}

/// Apps whose extension directory lies inside another app's (VS Code's): finding them finds it.
fn inside_vscode(app: App) -> bool {
    matches!(app, App::Cline | App::Roo)
}

#[test]
fn a_fresh_config_is_created_private_for_each_app_found() {
    for (app, dir, config, expected) in fresh_cases() {
        let home = Home::new();
        home.mkdir(dir);
        let (summary, out) = home.run(&[], false);
        let found = if inside_vscode(app) { 2 } else { 1 };
        assert_eq!(summary.registered, found, "{app:?}: {out}");
        assert_eq!(summary.not_found, App::ALL.len() - found, "{app:?}: {out}");
        assert_eq!(home.read(config), expected, "{app:?}");
        assert_eq!(mode(&home.path(config)), 0o600, "{app:?}");
        assert!(!home.path(&format!("{config}.bak")).exists(), "{app:?}");
        assert!(
            out.contains(&format!(
                "{:<16}registered (created ~/{config})",
                app.title()
            )),
            "{app:?}: {out}"
        );
    }
}

#[test]
fn nothing_found_means_nothing_written_and_says_where_it_looked() {
    let home = Home::new();
    let before = home.snapshot();
    let (summary, out) = home.run(&[], false);
    assert_eq!(
        summary,
        Summary {
            not_found: App::ALL.len(),
            ..Summary::default()
        }
    );
    assert_eq!(home.snapshot(), before);
    assert!(
        out.contains(
            "Claude Code     not found (no ~/.claude.json or ~/.claude, and no `claude` on PATH)"
        ),
        "{out}"
    );
    assert!(
        out.contains("Cursor          not found (no ~/.cursor)"),
        "{out}"
    );
    assert!(out.contains("autotool setup --app"), "{out}");
}

#[test]
fn a_cli_on_path_counts_as_found() {
    let home = Home::new();
    home.cli("claude").cli("codex").cli("openclaw");
    let (summary, out) = home.run(&[], false);
    assert_eq!(summary.registered, 3, "{out}");
    assert!(home.path(".claude.json").is_file());
    assert!(home.path(".codex/config.toml").is_file());
    assert_eq!(mode(&home.path(".codex")), 0o700);
    assert!(home.path(".openclaw/openclaw.json").is_file());
}

#[test]
fn an_app_named_with_app_is_registered_even_when_not_found() {
    let home = Home::new();
    let (summary, out) = home.run(&[App::Cursor], false);
    assert_eq!(
        summary,
        Summary {
            registered: 1,
            ..Summary::default()
        },
        "{out}"
    );
    assert!(home.path(".cursor/mcp.json").is_file());
    assert!(
        !out.contains("Claude Code"),
        "only the named app is reported: {out}"
    );
}

#[test]
fn other_servers_and_settings_are_kept_and_the_old_file_is_backed_up() {
    let home = Home::new();
    let claude = "{\n  \"numStartups\": 7,\n  \"mcpServers\": {\n    \"github\": {\n      \"type\": \"stdio\",\n      \"command\": \"npx\",\n      \"args\": [\"-y\", \"gh\"],\n      \"env\": {\"GITHUB_TOKEN\": \"t\"}\n    }\n  },\n  \"projects\": {\"/w\": {\"mcpServers\": {}}}\n}\n";
    let codex =
        "# mine\nmodel = \"o3\"\n\n[mcp_servers.docs]\ncommand = \"npx\"\nargs = [\"docs\"]\n";
    let cursor =
        "{\n  // personal\n  \"mcpServers\": {\n    \"db\": {\"command\": \"db-mcp\"},\n  },\n}\n";
    let desktop = "{\"mcpServers\":{\"fs\":{\"command\":\"fs-mcp\",\"args\":[\"/\"]}},\"globalShortcut\":\"\"}";
    let openclaw = "// OpenClaw\n{\n  gateway: { port: 18789 }, // local\n  mcp: {\n    servers: {\n      docs: { command: 'npx', args: ['-y', 'fetch'] },\n    },\n  },\n}\n";
    home.write(".claude.json", claude)
        .write(".codex/config.toml", codex)
        .write(".cursor/mcp.json", cursor)
        .write(".config/Claude/claude_desktop_config.json", desktop)
        .write(".openclaw/openclaw.json", openclaw);
    std::fs::set_permissions(
        home.path(".claude.json"),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    let (summary, out) = home.run(&[], false);
    assert_eq!(summary.registered, 5, "{out}");

    // Claude Code: everything else as data and the file's mode.
    let v: Value = serde_json::from_str(&home.read(".claude.json")).unwrap();
    assert_eq!(
        v,
        json!({
            "numStartups": 7,
            "mcpServers": {
                "github": {"type": "stdio", "command": "npx", "args": ["-y", "gh"], "env": {"GITHUB_TOKEN": "t"}},
                "autotool": {"type": "stdio", "command": BIN, "args": ["serve"], "env": {}}
            },
            "projects": {"/w": {"mcpServers": {}}}
        })
    );
    assert_eq!(mode(&home.path(".claude.json")), 0o640);
    assert_eq!(mode(&home.path(".claude.json.bak")), 0o640);

    // Codex and the comment-carrying formats: the old text is a prefix or kept around the edit.
    let codex_after = home.read(".codex/config.toml");
    assert!(codex_after.starts_with(codex), "{codex_after}");
    let cursor_after = home.read(".cursor/mcp.json");
    assert!(
        cursor_after.starts_with(
            "{\n  // personal\n  \"mcpServers\": {\n    \"db\": {\"command\": \"db-mcp\"},\n"
        ),
        "{cursor_after}"
    );
    let openclaw_after = home.read(".openclaw/openclaw.json");
    assert!(
        openclaw_after.starts_with(
            "// OpenClaw\n{\n  gateway: { port: 18789 }, // local\n  mcp: {\n    servers: {\n      docs: { command: 'npx', args: ['-y', 'fetch'] },\n"
        ),
        "{openclaw_after}"
    );
    let desktop_after: Value =
        serde_json::from_str(&home.read(".config/Claude/claude_desktop_config.json")).unwrap();
    assert_eq!(
        desktop_after,
        json!({"mcpServers": {"fs": {"command": "fs-mcp", "args": ["/"]}, "autotool": {"command": BIN, "args": ["serve"]}}, "globalShortcut": ""})
    );

    // Each old file is in its .bak.
    for (rel, old) in [
        (".claude.json", claude),
        (".codex/config.toml", codex),
        (".cursor/mcp.json", cursor),
        (".config/Claude/claude_desktop_config.json", desktop),
        (".openclaw/openclaw.json", openclaw),
    ] {
        assert_eq!(home.read(&format!("{rel}.bak")), old, "{rel}.bak");
        assert!(
            out.contains(&format!("the previous file is ~/{rel}.bak")),
            "{rel}: {out}"
        );
    }
}

#[test]
fn an_existing_autotool_entry_is_pointed_here_and_keeps_its_env() {
    let old = |servers_open: &str, servers_close: &str| {
        format!(
            "{servers_open}\"autotool\": {{\"command\": \"/old/autotool\", \"args\": [\"serve\"], \"env\": {{\"AUTOTOOL_HOME\": \"/data/at\"}}, \"disabled\": false}}{servers_close}"
        )
    };
    let cases = [
        (
            App::Cursor,
            ".cursor/mcp.json",
            old("{\"mcpServers\": {", "}}\n"),
            "/mcpServers/autotool",
        ),
        (
            App::ClaudeDesktop,
            ".config/Claude/claude_desktop_config.json",
            old("{\"mcpServers\": {", "}}\n"),
            "/mcpServers/autotool",
        ),
        (
            App::OpenClaw,
            ".openclaw/openclaw.json",
            old("{mcp: {servers: {", "}}} // end\n"),
            "/mcp/servers/autotool",
        ),
    ];
    for (app, rel, text, pointer) in cases {
        let home = Home::new();
        home.write(rel, &text);
        let (summary, out) = home.run(&[], false);
        assert_eq!(summary.registered, 1, "{app:?}: {out}");
        assert!(
            out.contains(
                "the autotool entry ran `/old/autotool serve`, its env and other settings are kept"
            ),
            "{app:?}: {out}"
        );
        let after = home.read(rel);
        let v: Value = jsonc_value(&after);
        assert_eq!(
            v.pointer(pointer).unwrap(),
            &json!({"command": BIN, "args": ["serve"], "env": {"AUTOTOOL_HOME": "/data/at"}, "disabled": false}),
            "{app:?}: {after}"
        );
        assert_eq!(home.read(&format!("{rel}.bak")), text, "{app:?}");
    }
}

/// A JSON5 text as data, through serde_json after stripping what JSON lacks: only what the
/// fixtures above use (a trailing `// …` comment, unquoted keys).
fn jsonc_value(text: &str) -> Value {
    let no_comment = text.split("//").next().unwrap();
    let quoted = no_comment
        .replace("{mcp:", "{\"mcp\":")
        .replace("{servers:", "{\"servers\":");
    serde_json::from_str(&quoted).unwrap_or_else(|e| panic!("{e}: {quoted}"))
}

#[test]
fn an_existing_claude_code_or_codex_entry_is_left_untouched() {
    let home = Home::new();
    home.write(
        ".claude.json",
        "{\"mcpServers\": {\"autotool\": {\"type\": \"stdio\", \"command\": \"/old/autotool\", \"args\": [\"serve\"], \"env\": {\"X\": \"1\"}}}}",
    )
    .write(
        ".codex/config.toml",
        "[mcp_servers.autotool]\ncommand = \"/old/autotool\"\nargs = [\"serve\", \"--sandbox\", \"off\"]\n",
    );
    let before = home.snapshot();
    let (summary, out) = home.run(&[], false);
    assert_eq!(home.snapshot(), before, "nothing may be written: {out}");
    assert_eq!(summary.already, 2, "{out}");
    assert!(
        out.contains(
            "Claude Code     already registered (~/.claude.json), left untouched: it runs \
             `/old/autotool serve`, not this binary. To point it here, remove it with `claude mcp \
             remove --scope user autotool` or with `autotool setup --remove --app claude-code`, \
             then run `autotool setup` again."
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "Codex           already registered (~/.codex/config.toml), left untouched: it runs \
             `/old/autotool serve --sandbox off`"
        ),
        "{out}"
    );
}

#[test]
fn a_second_run_changes_nothing() {
    let home = Home::new();
    for (_, dir, _, _) in fresh_cases() {
        home.mkdir(dir);
    }
    home.write(
        ".cursor/mcp.json",
        "{\"mcpServers\": {\"a\": {\"command\": \"a\"}}}",
    );
    let (first, _) = home.run(&[], false);
    assert_eq!(first.registered, App::ALL.len());
    let after_first = home.snapshot();
    let (second, out) = home.run(&[], false);
    assert_eq!(
        second,
        Summary {
            already: App::ALL.len(),
            ..Summary::default()
        },
        "{out}"
    );
    assert_eq!(
        home.snapshot(),
        after_first,
        "the second run wrote something: {out}"
    );
    for app in App::ALL {
        assert!(
            out.contains(&format!("{:<16}already registered (", app.title())),
            "{app:?}: {out}"
        );
    }
}

#[test]
fn an_unparseable_config_is_left_alone_with_the_reason() {
    let cases = [
        (
            App::ClaudeCode,
            ".claude.json",
            "{\"mcpServers\": {}, // a comment JSON does not allow\n}",
            "it is not valid JSON: Comments are not allowed at line 1, column 20",
        ),
        (
            App::Codex,
            ".codex/config.toml",
            "model = \"o3\"\n[mcp_servers.autotool\n",
            "it is not valid TOML: ",
        ),
        (
            App::Cursor,
            ".cursor/mcp.json",
            "{\"mcpServers\": [\"not\", \"an object\"]}",
            "`mcpServers` in it is not an object",
        ),
        (
            App::ClaudeDesktop,
            ".config/Claude/claude_desktop_config.json",
            "{\"mcpServers\": {\"autotool\": ",
            "it is not valid JSON: ",
        ),
        (
            App::OpenClaw,
            ".openclaw/openclaw.json",
            "{ mcp: { servers: { a: { command: 'x' } } } ",
            "it is not valid JSON5: ",
        ),
    ];
    for (app, rel, text, why) in cases {
        let home = Home::new();
        home.write(rel, text);
        let before = home.snapshot();
        match home.plan(app) {
            Plan::Unreadable { config, why: got } => {
                assert_eq!(config, home.path(rel), "{app:?}");
                assert!(got.to_string().starts_with(why), "{app:?}: {got}");
            }
            other => panic!("{app:?}: expected Unreadable, got {other:?}"),
        }
        let (summary, out) = home.run(&[], false);
        assert_eq!(summary.failed, 1, "{app:?}: {out}");
        assert_eq!(
            home.snapshot(),
            before,
            "{app:?}: the file must be left alone"
        );
        assert!(
            out.contains(&format!(
                "{:<16}config unreadable: ~/{rel}: {why}",
                app.title()
            )),
            "{app:?}: {out}"
        );
        assert!(out.contains("It was left alone"), "{app:?}: {out}");
    }
}

#[test]
fn a_dry_run_writes_nothing_and_prints_each_change() {
    let home = Home::new();
    for (_, dir, _, _) in fresh_cases() {
        home.mkdir(dir);
    }
    home.write(
        ".cursor/mcp.json",
        "{\n  \"mcpServers\": {\n    \"autotool\": {\"command\": \"/old\", \"args\": [\"serve\"]}\n  }\n}\n",
    );
    let before = home.snapshot();
    let (summary, out) = home.run(&[], true);
    assert_eq!(home.snapshot(), before, "a dry run wrote something: {out}");
    assert_eq!(summary.registered, App::ALL.len(), "{out}");
    assert!(out.starts_with(&format!(
        "Dry run: would register `{BIN} serve` with the agent apps on this machine:\n"
    )));
    assert!(out.contains("Claude Code     would register (would create ~/.claude.json)\n    --- /dev/null\n    +++ ~/.claude.json\n"), "{out}");
    assert!(
        out.contains(
            "Cursor          would register (~/.cursor/mcp.json; the autotool entry ran `/old \
             serve`, its env and other settings are kept; a backup would go to \
             ~/.cursor/mcp.json.bak)\n    --- ~/.cursor/mcp.json\n    +++ ~/.cursor/mcp.json\n    @@"
        ),
        "{out}"
    );
    // The diff is of the pretty-printed form: the changed line alone.
    let cursor = &out[out.find("Cursor ").unwrap()..];
    let cursor = &cursor[..cursor.find("Claude Desktop").unwrap()];
    let changed: Vec<&str> = cursor
        .lines()
        .filter(|l| l.starts_with("    -") || l.starts_with("    +"))
        .filter(|l| !l.starts_with("    ---") && !l.starts_with("    +++"))
        .collect();
    assert_eq!(changed.len(), 2, "{cursor}");
    assert!(changed[0].contains("\"command\": \"/old\""), "{cursor}");
    assert!(
        changed[1].contains(&format!("\"command\": \"{BIN}\"")),
        "{cursor}"
    );
    assert!(
        out.contains(&format!("    +command = \"{BIN}\"\n")),
        "the Codex diff: {out}"
    );
    assert!(out.ends_with("Dry run: nothing was written.\n"), "{out}");
}

/// Secrets other servers keep in a config: a value under `env`, one under `headers`, and a
/// token-shaped one under a key of another name.
const ENV_SECRET: &str = "env-secret-value";
const HEADER_SECRET: &str = "header-secret-value";
const TOKEN: &str = "ghp_abcdefghij0123456789";

/// For each app, its config written on one line (as a minifier or an app's own writer leaves
/// it), holding [`ENV_SECRET`], [`HEADER_SECRET`] and [`TOKEN`] in other servers' settings.
fn one_line_configs() -> Vec<(App, &'static str, String)> {
    let (e, h, t) = (ENV_SECRET, HEADER_SECRET, TOKEN);
    let mcp_servers = format!(
        r#"{{"mcpServers":{{"github":{{"command":"npx","args":["-y","gh","--token",{t:?}],"env":{{"GITHUB_TOKEN":"{e}"}}}},"tavily":{{"url":"https://mcp.tavily.example/mcp","headers":{{"Authorization":"Bearer {h}"}}}}}}}}"#
    );
    vec![
        (
            App::ClaudeCode,
            ".claude.json",
            format!(
                r#"{{"mcpServers":{{"github":{{"type":"stdio","command":"npx","args":[],"env":{{"GITHUB_TOKEN":"{e}"}}}},"tavily":{{"type":"http","url":"https://mcp.tavily.example/mcp","headers":{{"Authorization":"Bearer {h}"}}}}}},"oauthAccount":{{"accessToken":"{t}"}}}}"#
            ),
        ),
        (
            App::Codex,
            ".codex/config.toml",
            format!(
                r#"mcp_servers = {{ github = {{ command = "npx", args = ["{t}"], env = {{ GITHUB_TOKEN = "{e}" }} }}, tavily = {{ url = "https://mcp.tavily.example/mcp", http_headers = {{ Authorization = "Bearer {h}" }} }} }}"#
            ),
        ),
        (App::Cursor, ".cursor/mcp.json", mcp_servers.clone()),
        (
            App::ClaudeDesktop,
            ".config/Claude/claude_desktop_config.json",
            mcp_servers.clone(),
        ),
        (
            App::OpenClaw,
            ".openclaw/openclaw.json",
            format!(
                r#"{{mcp:{{servers:{{github:{{command:'npx',args:['{t}'],env:{{GITHUB_TOKEN:'{e}'}}}},tavily:{{url:'https://mcp.tavily.example/mcp',headers:{{Authorization:'Bearer {h}'}}}}}}}}}}"#
            ),
        ),
        (
            App::VsCode,
            ".config/Code/User/mcp.json",
            format!(
                r#"{{"servers":{{"github":{{"type":"http","url":"https://api.example/mcp/","headers":{{"Authorization":"Bearer {h}"}}}},"gh":{{"type":"stdio","command":"gh","args":["{t}"],"env":{{"GITHUB_TOKEN":"{e}"}}}}}},"inputs":[]}}"#
            ),
        ),
        (
            App::Windsurf,
            ".codeium/windsurf/mcp_config.json",
            mcp_servers.clone(),
        ),
        (
            App::Zed,
            ".config/zed/settings.json",
            format!(
                r#"{{"theme":"One Dark","context_servers":{{"github":{{"source":"custom","command":"gh","args":["{t}"],"env":{{"GITHUB_TOKEN":"{e}"}}}},"remote":{{"url":"https://x.example/mcp","headers":{{"Authorization":"Bearer {h}"}}}}}}}}"#
            ),
        ),
        (App::Gemini, ".gemini/settings.json", mcp_servers.clone()),
        (
            App::Goose,
            ".config/goose/config.yaml",
            format!(
                r#"{{"GOOSE_PROVIDER":"openai","extensions":{{"github":{{"enabled":true,"type":"stdio","name":"github","cmd":"gh","args":["{t}"],"envs":{{"GITHUB_TOKEN":"{e}"}}}},"remote":{{"enabled":true,"type":"streamable_http","uri":"https://x.example/mcp","headers":{{"Authorization":"Bearer {h}"}}}}}}}}"#
            ),
        ),
        (
            App::Cline,
            ".config/Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json",
            mcp_servers.clone(),
        ),
        (
            App::Roo,
            ".config/Code/User/globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json",
            mcp_servers,
        ),
    ]
}

/// A one-line config's only line is the whole file, so a plain diff of the edit prints every
/// other server's settings. A dry run prints none of their secrets, for every app, registering
/// and removing. Control: the secrets are in the file, and the plain diff shows them.
#[test]
fn a_dry_run_never_prints_a_secret_of_a_one_line_config() {
    for (app, rel, text) in one_line_configs() {
        let home = Home::new();
        home.write(rel, &text);
        for secret in [ENV_SECRET, HEADER_SECRET, TOKEN] {
            assert!(
                home.read(rel).contains(secret),
                "{app:?}: control: {secret}"
            );
        }
        let (summary, out) = home.run(&[app], true);
        assert_eq!(summary.registered, 1, "{app:?}: {out}");
        for secret in [ENV_SECRET, HEADER_SECRET, TOKEN] {
            assert!(
                !out.contains(secret),
                "{app:?}: the dry run printed {secret}:\n{out}"
            );
        }
        assert!(out.contains(BIN), "{app:?}: the entry is shown: {out}");
        // Control: the change is on the line that holds them.
        let Plan::Change { after, .. } = host_apps::plan(app, &home.env(), &entry(), true) else {
            panic!("{app:?}: no change planned");
        };
        let plain = similar::TextDiff::from_lines(text.as_str(), after.as_str())
            .unified_diff()
            .context_radius(0)
            .to_string();
        for secret in [ENV_SECRET, HEADER_SECRET, TOKEN] {
            assert!(
                plain.contains(secret),
                "{app:?}: control: {secret}:\n{plain}"
            );
        }

        // The same for a removal of the entry from the same file.
        home.run(&[app], false);
        let mut out = Vec::new();
        let opts = Options {
            apps: vec![app],
            dry_run: true,
            records: Some(home.records()),
        };
        let removed = host_apps::run_remove(&opts, &home.env(), &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert_eq!(removed.removed, 1, "{app:?}: {out}");
        for secret in [ENV_SECRET, HEADER_SECRET, TOKEN] {
            assert!(
                !out.contains(secret),
                "{app:?}: --remove --dry-run printed {secret}:\n{out}"
            );
        }
    }
}

/// For each app, a config as a user keeps it: pretty, another server in it, and comments where
/// the format has them.
fn pretty_configs() -> Vec<(App, &'static str, &'static str)> {
    let mcp_json = "{\n  \"mcpServers\": {\n    \"github\": {\n      \"command\": \"npx\",\n      \"args\": [\"-y\", \"gh\"]\n    }\n  },\n  \"theme\": \"dark\"\n}\n";
    let mcp_jsonc = "// mine\n{\n  \"mcpServers\": {\n    \"github\": {\"command\": \"npx\"} // the cli\n  }\n}\n";
    vec![
        (App::ClaudeCode, ".claude.json", mcp_json),
        (
            App::Codex,
            ".codex/config.toml",
            "# mine\nmodel = \"o3\"  # fast\n\n[mcp_servers.docs]\ncommand = \"npx\"\n\n[profiles.x]\nmodel = \"y\"\n",
        ),
        (App::Cursor, ".cursor/mcp.json", mcp_jsonc),
        (
            App::ClaudeDesktop,
            ".config/Claude/claude_desktop_config.json",
            mcp_json,
        ),
        (
            App::OpenClaw,
            ".openclaw/openclaw.json",
            "// OpenClaw\n{\n  gateway: { port: 18789 }, // local\n  mcp: {\n    servers: {\n      docs: { command: 'npx' },\n    },\n  },\n}\n",
        ),
        (
            App::VsCode,
            ".config/Code/User/mcp.json",
            "{\n  // mine\n  \"servers\": {\n    \"gh\": {\"type\": \"http\", \"url\": \"https://x.example/mcp\"}\n  },\n  \"inputs\": []\n}\n",
        ),
        (
            App::Windsurf,
            ".codeium/windsurf/mcp_config.json",
            mcp_jsonc,
        ),
        (
            App::Zed,
            ".config/zed/settings.json",
            "// Zed settings\n{\n  \"theme\": \"One Dark\", // dark\n  \"context_servers\": {\n    \"gh\": {\"source\": \"custom\", \"command\": \"gh\"}\n  }\n}\n",
        ),
        (App::Gemini, ".gemini/settings.json", mcp_jsonc),
        (
            App::Goose,
            ".config/goose/config.yaml",
            "# goose\nGOOSE_PROVIDER: openai\nextensions:\n  developer:\n    enabled: true\n    type: builtin # the shell\n    name: developer\n\n# models\nGOOSE_MODEL: gpt-5\n",
        ),
        (
            App::Cline,
            ".config/Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json",
            mcp_json,
        ),
        (
            App::Roo,
            ".config/Code/User/globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json",
            mcp_json,
        ),
    ]
}

fn remove(home: &Home, apps: &[App], dry_run: bool) -> (host_apps::RemoveSummary, String) {
    let mut out = Vec::new();
    let opts = Options {
        apps: apps.to_vec(),
        dry_run,
        records: Some(home.records()),
    };
    let summary = host_apps::run_remove(&opts, &home.env(), &mut out).unwrap();
    (summary, String::from_utf8(out).unwrap())
}

/// Setup, then `--remove`: for every app the file comes back as it was, byte for byte (the
/// entry's own text is all that goes), each step backed up under a name of its own.
#[test]
fn remove_takes_out_only_the_entry_for_every_app() {
    for (app, rel, text) in pretty_configs() {
        let home = Home::new();
        home.write(rel, text);
        let (summary, out) = home.run(&[app], false);
        assert_eq!(summary.registered, 1, "{app:?}: {out}");
        let registered = home.read(rel);
        assert!(registered.contains(BIN), "{app:?}: {registered}");

        let before = home.snapshot();
        let (summary, out) = remove(&home, &[app], true);
        assert_eq!(summary.removed, 1, "{app:?}: {out}");
        assert_eq!(home.snapshot(), before, "{app:?}: a dry run wrote: {out}");
        assert!(
            out.contains(&format!("a backup would go to ~/{rel}.bak.1")),
            "{app:?}: {out}"
        );
        assert!(
            out.lines()
                .any(|l| l.starts_with("    -") && l.contains(BIN)),
            "{app:?}: the dry run shows the entry going: {out}"
        );

        let (summary, out) = remove(&home, &[app], false);
        assert_eq!(summary.removed, 1, "{app:?}: {out}");
        assert_eq!(home.read(rel), text, "{app:?}: not the file as it was");
        assert_eq!(home.read(&format!("{rel}.bak")), text, "{app:?}");
        assert_eq!(home.read(&format!("{rel}.bak.1")), registered, "{app:?}");
        assert!(
            out.contains(&format!(
                "{:<16}removed (~/{rel} is as it was before setup, byte for byte; the entry ran \
                 `{BIN} serve`; the file with the entry is ~/{rel}.bak.1)",
                app.title()
            )),
            "{app:?}: {out}"
        );
        assert!(
            !home.records().join(format!("{}.json", app.id())).exists(),
            "{app:?}: the record is forgotten once used"
        );

        // Again: nothing left to remove, nothing written.
        let before = home.snapshot();
        let (summary, out) = remove(&home, &[app], false);
        assert_eq!(summary.not_registered, 1, "{app:?}: {out}");
        assert_eq!(home.snapshot(), before, "{app:?}: {out}");
        assert!(
            out.contains(&format!("not registered (no autotool entry in ~/{rel})")),
            "{app:?}: {out}"
        );
    }
}

/// An `autotool` entry that runs something else is the user's: `--remove` names it and leaves
/// the file alone. An app with no config is "not registered".
#[test]
fn remove_leaves_an_entry_setup_did_not_write() {
    let home = Home::new();
    home.write(
        ".cursor/mcp.json",
        "{\"mcpServers\": {\"autotool\": {\"command\": \"uvx\", \"args\": [\"autotool-mcp\"]}}}",
    )
    .write(
        ".codex/config.toml",
        "[mcp_servers.autotool]\nurl = \"http://127.0.0.1:8765/mcp\"\n",
    )
    .write(
        ".config/goose/config.yaml",
        "extensions:\n  autotool:\n    cmd: /usr/bin/python3\n    args: [serve]\n",
    );
    let before = home.snapshot();
    let (summary, out) = remove(&home, &[], false);
    assert_eq!(home.snapshot(), before, "{out}");
    assert_eq!(summary.not_ours, 3, "{out}");
    assert_eq!(summary.not_registered, App::ALL.len() - 3, "{out}");
    assert!(
        out.contains(
            "Cursor          left untouched: the autotool entry in ~/.cursor/mcp.json runs `uvx \
             autotool-mcp`, which setup did not write"
        ),
        "{out}"
    );
    assert!(
        out.contains("runs `the remote server http://127.0.0.1:8765/mcp`"),
        "{out}"
    );
    assert!(
        out.contains("Claude Code     not registered (no ~/.claude.json)"),
        "{out}"
    );
    // Control: an entry that does run autotool (written by another build) does go.
    home.write(
        ".cursor/mcp.json",
        "{\"mcpServers\": {\"autotool\": {\"command\": \"/elsewhere/autotool\", \"args\": [\"connect\"]}}}",
    );
    let (summary, out) = remove(&home, &[App::Cursor], false);
    assert_eq!(summary.removed, 1, "{out}");
    assert_eq!(home.read(".cursor/mcp.json"), "{\"mcpServers\": {}}");
}

#[test]
fn the_cli_removes_what_it_registered() {
    let home = Home::new();
    home.mkdir(".cursor").mkdir(".gemini");
    let (code, out, err) = autotool(&home, &["setup", "--no-runtime"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(home.read(".gemini/settings.json").contains("autotool"));
    let before = home.snapshot();
    let (code, out, err) = autotool(&home, &["setup", "--remove", "--dry-run"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(home.snapshot(), before, "{out}");
    let (code, out, err) = autotool(&home, &["setup", "--remove", "--app", "gemini"]);
    assert_eq!(code, Some(0), "{out}{err}");
    // Setup created the file: undoing it deletes it (the directory was the user's, and stays).
    assert!(!home.path(".gemini/settings.json").exists(), "{out}");
    assert!(home.path(".gemini").is_dir(), "{out}");
    assert!(
        out.contains("deleted ~/.gemini/settings.json, which setup created"),
        "{out}"
    );
    assert!(
        home.read(".cursor/mcp.json").contains("autotool"),
        "--app gemini only"
    );
    // Without the record (another home's setup wrote it), only the entry goes.
    std::fs::remove_file(home.path(".autotool/setup/cursor.json")).unwrap();
    let (code, out, err) = autotool(&home, &["setup", "--remove", "--app", "cursor"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let v: Value = serde_json::from_str(&home.read(".cursor/mcp.json")).unwrap();
    assert_eq!(v, json!({"mcpServers": {}}));
    assert!(home.path(".cursor/mcp.json.bak").is_file());
    let (code, _, err) = autotool(&home, &["setup", "--remove", "--service"]);
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn where_each_app_keeps_its_config() {
    let home = Home::new();
    let h = |rel: &str| home.path(rel);
    let cfg = |app, env: &HostEnv| host_apps::locate(app, env).config;
    let env = home.env();
    assert_eq!(cfg(App::ClaudeCode, &env), h(".claude.json"));
    assert_eq!(cfg(App::Codex, &env), h(".codex/config.toml"));
    assert_eq!(cfg(App::Cursor, &env), h(".cursor/mcp.json"));
    assert_eq!(
        cfg(App::ClaudeDesktop, &env),
        h(".config/Claude/claude_desktop_config.json")
    );
    assert_eq!(cfg(App::OpenClaw, &env), h(".openclaw/openclaw.json"));

    let moved = home
        .env()
        .with_var("CLAUDE_CONFIG_DIR", "/cfg/claude")
        .with_var("CODEX_HOME", "~/codex-home")
        .with_var("XDG_CONFIG_HOME", "/xdg")
        .with_var("OPENCLAW_STATE_DIR", "/state/openclaw");
    assert_eq!(
        cfg(App::ClaudeCode, &moved),
        PathBuf::from("/cfg/claude/.claude.json")
    );
    assert_eq!(cfg(App::Codex, &moved), h("codex-home/config.toml"));
    assert_eq!(
        cfg(App::ClaudeDesktop, &moved),
        PathBuf::from("/xdg/Claude/claude_desktop_config.json")
    );
    assert_eq!(
        cfg(App::OpenClaw, &moved),
        PathBuf::from("/state/openclaw/openclaw.json")
    );
    let explicit = home
        .env()
        .with_var("OPENCLAW_HOME", "/oc")
        .with_var("OPENCLAW_CONFIG_PATH", "/etc/oc.json5");
    assert_eq!(
        cfg(App::OpenClaw, &explicit),
        PathBuf::from("/etc/oc.json5")
    );
    let oc_home = home.env().with_var("OPENCLAW_HOME", "/oc");
    assert_eq!(
        cfg(App::OpenClaw, &oc_home),
        PathBuf::from("/oc/.openclaw/openclaw.json")
    );

    let mac = HostEnv::new("/Users/me", Os::MacOs);
    assert_eq!(
        cfg(App::ClaudeDesktop, &mac),
        PathBuf::from("/Users/me/Library/Application Support/Claude/claude_desktop_config.json")
    );
    let win =
        HostEnv::new("C:/Users/me", Os::Windows).with_var("APPDATA", "C:/Users/me/AppData/Roaming");
    assert_eq!(
        cfg(App::ClaudeDesktop, &win),
        PathBuf::from("C:/Users/me/AppData/Roaming")
            .join("Claude")
            .join("claude_desktop_config.json")
    );
    // The apps added since, on each OS.
    let linux = [
        (App::VsCode, ".config/Code/User/mcp.json"),
        (App::Windsurf, ".codeium/windsurf/mcp_config.json"),
        (App::Zed, ".config/zed/settings.json"),
        (App::Gemini, ".gemini/settings.json"),
        (App::Goose, ".config/goose/config.yaml"),
        (
            App::Cline,
            ".config/Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json",
        ),
        (
            App::Roo,
            ".config/Code/User/globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json",
        ),
    ];
    for (app, rel) in linux {
        assert_eq!(cfg(app, &env), h(rel), "{app:?}");
    }
    assert_eq!(
        cfg(App::VsCode, &moved),
        PathBuf::from("/xdg/Code/User/mcp.json")
    );
    assert_eq!(
        cfg(App::Zed, &moved),
        PathBuf::from("/xdg/zed/settings.json")
    );
    assert_eq!(
        cfg(App::Goose, &moved),
        PathBuf::from("/xdg/goose/config.yaml")
    );
    assert_eq!(
        cfg(App::VsCode, &mac),
        PathBuf::from("/Users/me/Library/Application Support/Code/User/mcp.json")
    );
    assert_eq!(
        cfg(App::Goose, &mac),
        PathBuf::from("/Users/me/.config/goose/config.yaml")
    );
    assert_eq!(
        cfg(App::Roo, &mac),
        PathBuf::from(
            "/Users/me/Library/Application Support/Code/User/globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json"
        )
    );
    let roaming = PathBuf::from("C:/Users/me/AppData/Roaming");
    assert_eq!(
        cfg(App::Goose, &win),
        roaming
            .join("Block")
            .join("goose")
            .join("config")
            .join("config.yaml")
    );
    assert_eq!(
        cfg(App::Zed, &win),
        roaming.join("Zed").join("settings.json")
    );
    assert_eq!(
        cfg(App::Windsurf, &win),
        PathBuf::from("C:/Users/me/.codeium/windsurf/mcp_config.json")
    );
    // Codex passes the keychain's variables on Linux only.
    assert_eq!(
        host_apps::codex_env_vars(Os::Linux),
        ["DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR"]
    );
    assert!(host_apps::codex_env_vars(Os::MacOs).is_empty());
}

#[test]
fn claude_code_honours_claude_config_dir() {
    let home = Home::new();
    home.mkdir("claude-cfg");
    let env = home
        .env()
        .with_var("CLAUDE_CONFIG_DIR", home.path("claude-cfg"));
    let mut out = Vec::new();
    let opts = Options::default();
    let summary = host_apps::run(&opts, &env, &entry(), &mut out).unwrap();
    assert_eq!(summary.registered, 1, "{}", String::from_utf8_lossy(&out));
    assert!(home.path("claude-cfg/.claude.json").is_file());
    assert!(!home.path(".claude.json").exists());
}

// ---------------------------------------------------------------------------------------------
// The binary.

fn autotool(home: &Home, args: &[&str]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_autotool"))
        .args(args)
        .env_clear()
        .env("HOME", home.dir.path())
        .env("PATH", home.path("bin"))
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_cli_registers_its_own_path_and_exits_non_zero_on_an_unreadable_config() {
    let home = Home::new();
    home.mkdir(".cursor")
        .write(".codex/config.toml", "not toml at all\n");
    let before = home.snapshot();
    let (code, out, err) = autotool(&home, &["setup", "--dry-run"]);
    assert_eq!(home.snapshot(), before, "--dry-run wrote something: {out}");
    assert_eq!(code, Some(1), "{out}{err}");

    // The registration alone: building the runtime is `setup`'s second step, tested in
    // integration/tests/suite/first_run.rs (this home has no Python on its PATH).
    let (code, out, err) = autotool(&home, &["setup", "--app", "cursor", "--no-runtime"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_autotool")).unwrap();
    let v: Value = serde_json::from_str(&home.read(".cursor/mcp.json")).unwrap();
    assert_eq!(
        v["mcpServers"]["autotool"],
        json!({"command": exe.to_str().unwrap(), "args": ["serve"]})
    );
    assert!(
        !out.contains("Codex"),
        "--app cursor reports Cursor only: {out}"
    );
}

#[test]
fn setup_service_registers_the_bridge_and_switches_an_existing_entry() {
    let home = Home::new();
    home.mkdir(".cursor");
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_autotool")).unwrap();
    let (code, out, err) = autotool(&home, &["setup", "--app", "cursor", "--no-runtime"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let (code, out, err) = autotool(
        &home,
        &["setup", "--service", "--app", "cursor", "--no-runtime"],
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let v: Value = serde_json::from_str(&home.read(".cursor/mcp.json")).unwrap();
    assert_eq!(
        v["mcpServers"]["autotool"],
        json!({"command": exe.to_str().unwrap(), "args": ["connect"]})
    );
    let (code, _, err) = autotool(&home, &["setup", "--service", "--launcher"]);
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn an_entry_of_this_binary_with_other_arguments_is_not_called_another_binary() {
    let home = Home::new();
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_autotool")).unwrap();
    let exe = exe.to_str().unwrap();
    // The same file under another name: a symlink, as a package manager's `bin/` gives it.
    let link = home.path("bin/autotool-link");
    std::os::unix::fs::symlink(exe, &link).unwrap();
    for command in [exe, link.to_str().unwrap()] {
        home.write(
            ".claude.json",
            &json!({"mcpServers": {"autotool": {"type": "stdio", "command": command, "args": ["serve"]}}})
                .to_string(),
        );
        let (code, out, err) = autotool(
            &home,
            &["setup", "--service", "--app", "claude-code", "--no-runtime"],
        );
        assert_eq!(code, Some(0), "{out}{err}");
        assert!(
            out.contains(&format!(
                "left untouched: it runs this binary as `{command} serve`, not `{exe} connect`."
            )),
            "{out}"
        );
        assert!(!out.contains("not this binary"), "{out}");
    }
    // Control: another binary is still called one.
    home.write(
        ".claude.json",
        r#"{"mcpServers": {"autotool": {"type": "stdio", "command": "/old/autotool", "args": ["serve"]}}}"#,
    );
    let (code, out, err) = autotool(
        &home,
        &["setup", "--service", "--app", "claude-code", "--no-runtime"],
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("it runs `/old/autotool serve`, not this binary."),
        "{out}"
    );
}

#[test]
fn doctor_names_each_app_found_and_whether_it_runs_autotool() {
    let home = Home::new();
    home.mkdir(".cursor")
        .write(".codex/config.toml", "not toml at all\n");
    let host_checks = |home: &Home| -> Vec<Value> {
        let (_, out, err) = autotool(home, &["doctor", "--json"]);
        let report: Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["name"] == "host")
            .cloned()
            .collect()
    };
    let checks = host_checks(&home);
    assert_eq!(checks.len(), 2, "{checks:?}");
    let cursor = checks
        .iter()
        .find(|c| c["detail"].as_str().unwrap().starts_with("Cursor"))
        .unwrap();
    assert_eq!(cursor["status"], "warn", "{cursor}");
    assert_eq!(cursor["fix"], "autotool setup --app cursor");
    let codex = checks
        .iter()
        .find(|c| c["detail"].as_str().unwrap().starts_with("Codex"))
        .unwrap();
    // An app's unreadable config is a warning about that app, with the fix; tools can still
    // run (a FAIL means they cannot).
    assert_eq!(codex["status"], "warn", "{codex}");
    assert!(
        codex["fix"]
            .as_str()
            .unwrap()
            .contains("repair ~/.codex/config.toml"),
        "{codex}"
    );
    let (code, out, err) = autotool(&home, &["setup", "--app", "cursor", "--no-runtime"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let cursor = host_checks(&home)
        .into_iter()
        .find(|c| c["detail"].as_str().unwrap().starts_with("Cursor"))
        .unwrap();
    assert_eq!(cursor["status"], "ok", "{cursor}");
    assert!(
        cursor["detail"].as_str().unwrap().contains("registered"),
        "{cursor}"
    );
}

#[test]
fn the_cli_keeps_setup_launcher_apart() {
    let home = Home::new();
    let (code, _, err) = autotool(&home, &["setup", "--launcher", "--app", "cursor"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cannot be used with"), "{err}");
    let (code, _, err) = autotool(&home, &["setup", "--yes"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--launcher"), "{err}");
    let (code, out, err) = autotool(&home, &["setup", "--app", "nonesuch"]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(
        err.contains("claude-code"),
        "the error lists the app names: {err}"
    );
}

#[test]
fn setup_launcher_still_installs_the_launcher() {
    let home = Home::new();
    let before = home.snapshot();
    let (code, out, err) = autotool(&home, &["setup", "--launcher", "--dry-run"]);
    assert_eq!(home.snapshot(), before, "{out}");
    let beside = Path::new(env!("CARGO_BIN_EXE_autotool")).with_file_name("autotool-launcher");
    if beside.is_file() {
        assert_eq!(code, Some(0), "{out}{err}");
        assert!(out.contains("This installs the sandbox launcher"), "{out}");
        assert!(out.ends_with("(dry run: nothing was changed)\n"), "{out}");
    } else {
        // Built without the launcher: the launcher path still answers, not host registration.
        assert_eq!(code, Some(1), "{out}{err}");
        assert!(err.contains("no launcher to install"), "{err}");
    }
    assert!(!out.contains("agent apps"), "{out}");
}

// ---------------------------------------------------------------------------------------------
// `setup --remove` as an undo (issue 37, point 4), and the home each entry serves (point 3).

/// For each app, a config as a real user's looks: comments, odd indentation, trailing commas
/// where the dialect allows, keys in no order, other servers with env values; one in CRLF.
fn planted_configs() -> Vec<(App, &'static str, &'static str)> {
    vec![
        (
            App::ClaudeCode,
            ".claude.json",
            "{\"numStartups\": 12,\n \"mcpServers\":{\"gh\":{\"env\":{\"GITHUB_TOKEN\":\"ghp_x\"},\"command\":\"npx\",\"type\":\"stdio\",\"args\":[\"-y\",\"gh\"]}},\n   \"userID\": \"abc\"}",
        ),
        (
            App::Codex,
            ".codex/config.toml",
            "model   = \"o3\"\r\n# servers\r\n[mcp_servers.docs]\r\ncommand = \"npx\"\r\nenv = { TOKEN = \"t1\" }   # inline\r\n\r\n[profiles.x]\r\nmodel = \"y\"\r\n",
        ),
        (
            App::Cursor,
            ".cursor/mcp.json",
            "// my servers\n{\n\t\"mcpServers\": {\n\t\t\"db\": { \"env\": { \"PGPASSWORD\": \"hunter2\" }, \"command\": \"pg-mcp\", },\n\t},\n}\n",
        ),
        (
            App::ClaudeDesktop,
            ".config/Claude/claude_desktop_config.json",
            "{\n    \"globalShortcut\": \"\",\n    \"mcpServers\": {\n        \"fs\": {\"command\": \"npx\", \"args\": [\"fs\", \"/home\"], \"env\": {\"A\": \"b\"}}\n    }\n}",
        ),
        (
            App::OpenClaw,
            ".openclaw/openclaw.json",
            "/* OpenClaw */\n{\n  gateway: {port: 18789,},\n  mcp: {servers: {docs: {command: 'npx', env: {KEY: 'k',},},},},\n}\n",
        ),
        (
            App::VsCode,
            ".config/Code/User/mcp.json",
            "{\n  \"inputs\": [],\n  // remote\n  \"servers\": {\n      \"gh\": {\"type\": \"http\", \"url\": \"https://x.example/mcp\", \"headers\": {\"Authorization\": \"Bearer s\"},},\n  },\n}\n",
        ),
        (
            App::Windsurf,
            ".codeium/windsurf/mcp_config.json",
            "{\"mcpServers\":{\"a\":{\"command\":\"a\",\"env\":{\"K\":\"v\"}}}}",
        ),
        (
            App::Zed,
            ".config/zed/settings.json",
            "// Zed\n{\n  \"vim_mode\": true,\n  \"context_servers\": {\n    \"gh\": {\"source\": \"custom\", \"command\": \"gh\", \"env\": {\"T\": \"x\"},}, // mine\n  },\n  \"theme\": \"One Dark\",\n}\n",
        ),
        (
            App::Gemini,
            ".gemini/settings.json",
            "{\n  \"theme\": \"GitHub\",\n  \"mcpServers\": {\n    \"x\": { \"command\": \"x\", \"env\": {\"API_KEY\": \"$X\"} } // x\n  }\n}\n",
        ),
        (
            App::Goose,
            ".config/goose/config.yaml",
            "GOOSE_PROVIDER: openai   # mine\nextensions:\n    developer:\n        enabled: true\n        type: builtin\n        name: developer\n        envs: { A: b }\nGOOSE_MODEL: gpt-5\n",
        ),
        (
            App::Cline,
            ".config/Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json",
            "{\n\"mcpServers\": {\n\"s\": {\"command\": \"s\", \"disabled\": false, \"env\": {\"K\": \"1\"}, \"autoApprove\": []}\n}\n}\n",
        ),
        (
            App::Roo,
            ".config/Code/User/globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json",
            "{\"mcpServers\": {}, \"z\": 1, \"a\": [1, 2]}",
        ),
    ]
}

/// Setup, then `--remove`: every planted config is back byte for byte (control: setup did
/// change each one), and a config setup created is deleted with the directories it made.
#[test]
fn setup_then_remove_restores_every_planted_config_byte_for_byte() {
    let home = Home::new();
    for (_, rel, text) in planted_configs() {
        home.write(rel, text);
    }
    let (summary, out) = home.run(&[], false);
    assert_eq!(summary.registered, App::ALL.len(), "{out}");
    for (app, rel, text) in planted_configs() {
        assert_ne!(home.read(rel), text, "{app:?}: setup did not change it");
        assert!(home.read(rel).contains(BIN), "{app:?}");
    }
    let (summary, out) = remove(&home, &[], false);
    assert_eq!(summary.removed, App::ALL.len(), "{out}");
    for (app, rel, text) in planted_configs() {
        assert_eq!(
            std::fs::read(home.path(rel)).unwrap(),
            text.as_bytes(),
            "{app:?}: not byte for byte: {out}"
        );
    }

    // A config setup created goes again, with the directories setup made for it.
    let home = Home::new();
    home.mkdir(".codex");
    let (summary, out) = home.run(&[App::Codex, App::Cline], false);
    assert_eq!(summary.registered, 2, "{out}");
    let (summary, out) = remove(&home, &[], false);
    assert_eq!(summary.removed, 2, "{out}");
    assert!(!home.path(".codex/config.toml").exists(), "{out}");
    assert!(home.path(".codex").is_dir(), "the user's directory stays");
    assert!(!home.path(".config/Code").exists(), "{out}");
}

/// A second setup (here: switching to the service) keeps the first original, the user's.
#[test]
fn several_setups_then_remove_give_back_the_users_original() {
    let home = Home::new();
    let (app, rel, text) = planted_configs()[2];
    home.write(rel, text);
    home.run(&[app], false);
    let mut service = entry();
    service.args = vec!["connect".into()];
    let opts = Options {
        apps: vec![app],
        dry_run: false,
        records: Some(home.records()),
    };
    let summary = host_apps::run(&opts, &home.env(), &service, &mut Vec::new()).unwrap();
    assert_eq!(summary.registered, 1);
    assert!(home.read(rel).contains("connect"));
    let (summary, out) = remove(&home, &[app], false);
    assert_eq!(summary.removed, 1, "{out}");
    assert_eq!(home.read(rel), text, "{out}");
}

/// The user's own `autotool` entry in Cursor, repointed by setup: `--remove` gives it back
/// byte for byte; and when the file changed since, the entry goes back to what it ran (never
/// deleted) and the user's edit stays.
#[test]
fn remove_gives_back_a_users_own_cursor_entry() {
    let planted = "{\n  \"mcpServers\": {\n    \"autotool\": {\"command\": \"/usr/local/bin/autotool\", \"args\": [\"serve\"], \"env\": {\"AUTOTOOL_LOG\": \"debug\"}}\n  }\n}\n";
    let home = Home::new();
    home.write(".cursor/mcp.json", planted);
    let (summary, out) = home.run(&[App::Cursor], false);
    assert_eq!(summary.registered, 1, "{out}");
    assert!(
        home.read(".cursor/mcp.json").contains(BIN),
        "repointed: {out}"
    );
    let (summary, out) = remove(&home, &[App::Cursor], false);
    assert_eq!(summary.removed, 1, "{out}");
    assert_eq!(home.read(".cursor/mcp.json"), planted, "{out}");

    // Setup again, then the user adds a server: the entry is put back, not deleted.
    home.run(&[App::Cursor], false);
    let edited = home
        .read(".cursor/mcp.json")
        .replacen("{\n", "{\n  \"theme\": \"mine\",\n", 1);
    home.write(".cursor/mcp.json", &edited);
    let (summary, out) = remove(&home, &[App::Cursor], false);
    assert_eq!(summary.removed, 1, "{out}");
    let now = home.read(".cursor/mcp.json");
    let v = jsonc_value(&now);
    assert_eq!(v["theme"], "mine", "{now}");
    assert_eq!(
        v["mcpServers"]["autotool"],
        json!({"command": "/usr/local/bin/autotool", "args": ["serve"], "env": {"AUTOTOOL_LOG": "debug"}}),
        "{now}"
    );
    assert!(
        out.contains("your own autotool entry runs `/usr/local/bin/autotool serve` again"),
        "{out}"
    );
}

/// A config the user edited after setup: only the entry goes, the edit stays.
#[test]
fn remove_after_an_edit_takes_only_the_entry_and_keeps_the_edit() {
    let home = Home::new();
    let planted = "{\n  \"mcpServers\": {\n    \"x\": {\"command\": \"x\"}\n  }\n}\n";
    home.write(".gemini/settings.json", planted);
    home.run(&[App::Gemini], false);
    let edited =
        home.read(".gemini/settings.json")
            .replacen("{\n", "{\n  \"theme\": \"GitHub\",\n", 1);
    home.write(".gemini/settings.json", &edited);
    let (summary, out) = remove(&home, &[App::Gemini], true);
    assert_eq!(summary.removed, 1, "{out}");
    assert!(
        out.contains("would remove (~/.gemini/settings.json"),
        "{out}"
    );
    let (summary, out) = remove(&home, &[App::Gemini], false);
    assert_eq!(summary.removed, 1, "{out}");
    assert_eq!(
        home.read(".gemini/settings.json"),
        "{\n  \"theme\": \"GitHub\",\n  \"mcpServers\": {\n    \"x\": {\"command\": \"x\"}\n  }\n}\n",
        "{out}"
    );
}

fn autotool_with(
    home: &Home,
    vars: &[(&str, &Path)],
    args: &[&str],
) -> (Option<i32>, String, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_autotool"));
    cmd.args(args)
        .env_clear()
        .env("HOME", home.dir.path())
        .env("PATH", home.path("bin"));
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `doctor --json`'s host checks, by app title.
fn host_checks_with(home: &Home, vars: &[(&str, &Path)]) -> BTreeMap<String, Value> {
    let (_, out, err) = autotool_with(home, vars, &["doctor", "--json"]);
    let report: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == "host")
        .map(|c| {
            let detail = c["detail"].as_str().unwrap();
            let title = App::ALL
                .into_iter()
                .map(App::title)
                .find(|t| detail.starts_with(&format!("{t}:")))
                .unwrap();
            (title.to_string(), c.clone())
        })
        .collect()
}

/// With AUTOTOOL_HOME set to a home other than the default, every entry setup writes carries
/// `--home` with it; doctor is content while it runs in that home, and warns for each app,
/// naming both homes and the fix, once the home differs from the one the entries serve.
#[test]
fn setup_writes_a_non_default_home_into_every_entry_and_doctor_checks_it() {
    let home = Home::new();
    let other = home.path("work/autotool-home");
    let ids = App::ALL.map(App::id).join(",");
    let vars = [("AUTOTOOL_HOME", other.as_path())];
    let (code, out, err) = autotool_with(&home, &vars, &["setup", "--no-runtime", "--app", &ids]);
    assert_eq!(code, Some(0), "{out}{err}");
    let home_arg = other.to_str().unwrap();
    for (app, rel, _) in planted_configs() {
        let text = home.read(rel);
        assert!(text.contains("--home"), "{app:?}: {text}");
        assert!(text.contains(home_arg), "{app:?}: {text}");
    }
    let checks = host_checks_with(&home, &vars);
    assert_eq!(checks.len(), App::ALL.len(), "{checks:?}");
    for (title, c) in &checks {
        assert_eq!(
            c["status"],
            "ok",
            "{title}: {c}\n{}",
            home.read(".config/Claude/claude_desktop_config.json")
        );
    }
    // The default home now: every entry serves another.
    let checks = host_checks_with(&home, &[]);
    assert_eq!(checks.len(), App::ALL.len(), "{checks:?}");
    for (title, c) in &checks {
        assert_eq!(c["status"], "warn", "{title}: {c}");
        let detail = c["detail"].as_str().unwrap();
        assert!(
            detail.contains(
                "serves the autotool home ~/work/autotool-home, not this one (~/.autotool)"
            ),
            "{title}: {detail}"
        );
    }
    assert_eq!(checks["Cursor"]["fix"], "autotool setup --app cursor");

    // And setup in the default home points the entries it repoints back, and says so of the
    // ones it leaves (Claude Code's).
    let (code, out, err) = autotool_with(&home, &[], &["setup", "--no-runtime", "--app", &ids]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(!home.read(".cursor/mcp.json").contains("--home"));
    assert!(
        out.lines().any(|l| l.starts_with("Claude Code")
            && l.contains(
                "serves the autotool home ~/work/autotool-home, not this one (~/.autotool)"
            )),
        "{out}"
    );
}

/// An entry whose env block names the home counts as serving it; with the default home and a
/// plain entry, nothing is said.
#[test]
fn doctor_reads_the_home_from_an_entrys_env_block() {
    let home = Home::new();
    let (code, out, err) = autotool(&home, &["setup", "--no-runtime", "--app", "cursor"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        !home.read(".cursor/mcp.json").contains("--home"),
        "the default home adds nothing"
    );
    assert_eq!(host_checks_with(&home, &[])["Cursor"]["status"], "ok");
    let text = home.read(".cursor/mcp.json").replace(
        "\"args\"",
        "\"env\": {\"AUTOTOOL_HOME\": \"/srv/elsewhere\"}, \"args\"",
    );
    home.write(".cursor/mcp.json", &text);
    let c = &host_checks_with(&home, &[])["Cursor"];
    assert_eq!(c["status"], "warn", "{c}");
    assert!(
        c["detail"].as_str().unwrap().contains("/srv/elsewhere"),
        "{c}"
    );
}

/// `serve --home X` keeps everything under X, as AUTOTOOL_HOME=X would, and answers.
#[test]
fn serve_home_uses_that_home() {
    use std::io::Write as _;
    let home = Home::new();
    let other = home.path("elsewhere");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_autotool"))
        .args(["serve", "--home", other.to_str().unwrap()])
        .env_clear()
        .env("HOME", home.dir.path())
        .env("PATH", home.path("bin"))
        .env("AUTOTOOL_HOME", home.path("not-this-one"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{init}").unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    let reply: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    assert!(reply["result"]["serverInfo"].is_object(), "{reply}");
    assert!(other.join("autotool.db").exists(), "{status}");
    assert!(!home.path("not-this-one").exists());
    assert!(!home.path(".autotool").exists());
}

/// Gemini CLI shows a user-level server as Disabled until its folder is trusted: setup says
/// so wherever it registers (or finds) autotool there, in the words Gemini CLI's own trust
/// question and answer use, and for no other app.
#[test]
fn setup_says_gemini_needs_a_trusted_folder() {
    let home = Home::new();
    home.write(".gemini/settings.json", "{}\n");
    home.write(".cursor/mcp.json", "{}\n");
    for dry_run in [true, false, false] {
        let (_, out) = home.run(&[App::Gemini, App::Cursor], dry_run);
        let said: Vec<&str> = out.lines().filter(|l| l.contains("Disabled")).collect();
        assert_eq!(said.len(), 1, "{out}");
        assert!(
            said[0].starts_with("Gemini CLI: ")
                && said[0].contains("\"Do you trust the files in this folder?\"")
                && said[0].contains("\"Trust folder\"")
                && said[0].contains("docs/hosts.md"),
            "{out}"
        );
    }
    // Control: Cursor alone has nothing to add.
    let (_, out) = home.run(&[App::Cursor], false);
    assert!(!out.contains("Disabled") && !out.contains("trust"), "{out}");
}
