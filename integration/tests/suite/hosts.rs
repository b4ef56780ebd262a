//! `autotool setup` against the real host apps (npm `@anthropic-ai/claude-code`,
//! `@openai/codex` and `@google/gemini-cli`, pinned in `integration/hosts`): setup finds each app by its CLI on `PATH`
//! in a scratch user home and registers `autotool serve`; the app's own CLI then starts that
//! serve from the config exactly as setup wrote it and lists it as connected, with its tools.
//! A second setup, after the app has rewritten its config, changes nothing.

use autotool_integration::hosts::{CodexAppServer, UserHome, claude_mcp_list, gemini_mcp_list};
use autotool_integration::{Checks, Need, TestHome, procfs, setup};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SETUP_TIMEOUT: Duration = Duration::from_secs(30);

/// A process's environment, as `/proc` gives it.
type Environ = Vec<(String, String)>;

/// The path setup registers: the running binary, resolved (`/proc/self/exe`).
fn registered_path(autotool: &std::path::Path) -> String {
    std::fs::canonicalize(autotool)
        .unwrap()
        .to_str()
        .unwrap()
        .to_string()
}

/// The serve the app started ran on the test's home (so the app passed the test's variables
/// on) and in the sandbox mode the test asked for (strict where `autotool doctor` passes).
fn check_serve_ran_here(c: &mut Checks, home: &TestHome, how: &str) {
    let log = std::fs::read_to_string(home.path().join("logs/serve.log")).unwrap_or_default();
    let off = log.contains("--sandbox off");
    c.check(
        log.contains("autotool serve ready") && off == (home.setup.sandbox == "off"),
        &format!(
            "the serve started on the test's AUTOTOOL_HOME ({how}) with --sandbox {}",
            home.setup.sandbox
        ),
        format!(
            "serve.log: {} bytes; mentions --sandbox off: {off}",
            log.len()
        ),
    );
}

#[test]
fn claude_code_connects_to_the_serve_setup_registered() {
    let test = "claude_code_connects_to_the_serve_setup_registered";
    let Some(setup) = setup(test, &[Need::Serve, Need::PythonSdk, Need::ClaudeCode]) else {
        return;
    };
    let (claude, version) = setup.claude_code.clone().unwrap();
    let mut c = Checks::new();
    let home = TestHome::new(&setup).unwrap();
    let user = UserHome::new(&home, &[("claude", &claude)]).unwrap();
    let command = registered_path(&setup.autotool);

    let (code, out, err) = user.setup(&home, &[], SETUP_TIMEOUT).unwrap();
    c.check(
        code == Some(0) && out.contains("Claude Code     registered (created ~/.claude.json)"),
        "setup finds Claude Code by `claude` on PATH and creates ~/.claude.json",
        format!("exit {code:?}\n{out}{err}"),
    );
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(user.file(".claude.json")).unwrap())
            .unwrap_or(Value::Null);
    c.check(
        config
            == json!({"mcpServers": {"autotool": {
                "type": "stdio", "command": command, "args": ["serve"], "env": {}
            }}}),
        "~/.claude.json holds the user-scope entry `claude mcp add --scope user` would write",
        &config,
    );

    let list = claude_mcp_list(&home, &user, Duration::from_secs(120)).unwrap();
    let line = list.line("autotool").unwrap_or("").to_string();
    eprintln!(
        "{test}: Claude Code {version}, serve --sandbox {} ({:.1}s): {line}",
        setup.sandbox,
        list.elapsed.as_secs_f64()
    );
    c.check(
        line == format!("autotool: {command} serve - ✔ Connected"),
        "`claude mcp list` shows autotool ✔ Connected",
        format!(
            "exit {:?}\nstdout:\n{}\nstderr:\n{}",
            list.status, list.stdout, list.stderr
        ),
    );
    check_serve_ran_here(&mut c, &home, "Claude Code passes its environment on");

    // Claude Code has rewritten the file with its own state by now; setup again leaves it be.
    let before = std::fs::read(user.file(".claude.json")).unwrap();
    let (code, out, err) = user.setup(&home, &[], SETUP_TIMEOUT).unwrap();
    c.check(
        code == Some(0)
            && out.contains("Claude Code     already registered (~/.claude.json)")
            && std::fs::read(user.file(".claude.json")).unwrap() == before
            && !user.file(".claude.json.bak").exists(),
        "a second setup finds the entry and writes nothing",
        format!("exit {code:?}\n{out}{err}"),
    );

    let left = home.wait_idle(Duration::from_secs(10));
    c.check(
        left.is_empty(),
        "no serve still runs after `claude mcp list` exited",
        format!("{left:?}"),
    );
    c.finish(test, || home.log_tail(20_000));
}

#[test]
fn codex_app_server_lists_the_tools_of_the_serve_setup_registered() {
    let test = "codex_app_server_lists_the_tools_of_the_serve_setup_registered";
    let Some(setup) = setup(test, &[Need::Serve, Need::PythonSdk, Need::Codex]) else {
        return;
    };
    let (codex, version) = setup.codex.clone().unwrap();
    let mut c = Checks::new();
    let home = TestHome::new(&setup).unwrap();
    let user = UserHome::new(&home, &[("codex", &codex)]).unwrap();
    let command = registered_path(&setup.autotool);

    let (code, out, err) = user.setup(&home, &[], SETUP_TIMEOUT).unwrap();
    c.check(
        code == Some(0)
            && out.contains("Codex           registered (created ~/.codex/config.toml)"),
        "setup finds Codex by `codex` on PATH and creates ~/.codex/config.toml",
        format!("exit {code:?}\n{out}{err}"),
    );
    let config = std::fs::read_to_string(user.file(".codex/config.toml")).unwrap_or_default();
    c.check(
        config
            == format!(
                "[mcp_servers.autotool]\ncommand = \"{command}\"\nargs = [\"serve\"]\nenv_vars = \
                 [\"DBUS_SESSION_BUS_ADDRESS\", \"XDG_RUNTIME_DIR\"]\n"
            ),
        "config.toml holds [mcp_servers.autotool] with env_vars for the keychain",
        &config,
    );

    // What the keychain needs, set on Codex: env_vars must carry it to the serve.
    let bus = "unix:path=/nonexistent/autotool-test-bus";
    let runtime_dir = user.file("run").display().to_string();
    // The serve Codex starts may live only as long as the status request: watch for it from
    // the start and keep the environment of the first one seen.
    let seen: Arc<Mutex<Option<Environ>>> = Arc::default();
    let watching = {
        let seen = seen.clone();
        let home_dir = home.path().display().to_string();
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(120);
            while Instant::now() < deadline && seen.lock().unwrap().is_none() {
                for pid in procfs::with_env("AUTOTOOL_HOME", &home_dir) {
                    if procfs::cmdline(pid).ends_with(" serve") {
                        let env = procfs::environ(pid);
                        if !env.is_empty() {
                            *seen.lock().unwrap() = Some(env);
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };

    let mut app = CodexAppServer::start(
        &home,
        &user,
        &[
            ("DBUS_SESSION_BUS_ADDRESS", bus),
            ("XDG_RUNTIME_DIR", &runtime_dir),
        ],
    )
    .unwrap();
    let init = app
        .request(
            "initialize",
            json!({"clientInfo": {"name": "autotool-integration", "version": "0"}}),
            Duration::from_secs(60),
        )
        .unwrap();
    c.check(
        init["result"]["codexHome"] == json!(user.file(".codex").display().to_string()),
        "codex app-server initializes on the user home's ~/.codex",
        &init,
    );
    app.notify("initialized", json!({})).unwrap();

    // The list connects to each server; ask again while autotool is still starting.
    let deadline = Instant::now() + Duration::from_secs(90);
    let server = loop {
        let list = app
            .request("mcpServerStatus/list", json!({}), Duration::from_secs(90))
            .unwrap();
        let server = list["result"]["data"]
            .as_array()
            .and_then(|d| d.iter().find(|s| s["name"] == "autotool"))
            .cloned()
            .unwrap_or(Value::Null);
        let settled = server["tools"].as_object().is_some_and(|t| !t.is_empty())
            || server["toolsError"].is_string();
        if settled || Instant::now() >= deadline {
            break server;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let mut tools: Vec<String> = server["tools"]
        .as_object()
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default();
    tools.sort();
    eprintln!(
        "{test}: Codex {version}, serve --sandbox {}: autotool tools {tools:?}",
        setup.sandbox
    );
    c.check(
        tools == ["create_tool", "run_tool", "search_tools", "tool_info"]
            && server["toolsError"].is_null(),
        "mcpServerStatus/list shows autotool with create_tool, run_tool and search_tools",
        &server,
    );
    c.check(
        server["serverInfo"]["name"] == "autotool",
        "the server Codex connected to is autotool",
        &server["serverInfo"],
    );
    let tool = &server["tools"]["create_tool"];
    c.check(
        tool["inputSchema"]["properties"]["name"].is_object()
            && tool["inputSchema"]["properties"]["code"].is_object(),
        "create_tool's input schema reached Codex",
        &tool["inputSchema"],
    );

    let transcript = format!(
        "--- codex app-server\n{}\nstderr:\n{}",
        app.transcript.join("\n"),
        app.stderr()
    );
    drop(app);
    let _ = watching.join();
    check_serve_ran_here(&mut c, &home, "through `-c mcp_servers.autotool.env`");
    let env = seen.lock().unwrap().clone().unwrap_or_default();
    let get = |k: &str| {
        env.iter()
            .find(|(name, _)| name == k)
            .map(|(_, v)| v.clone())
    };
    c.check(
        get("DBUS_SESSION_BUS_ADDRESS").as_deref() == Some(bus)
            && get("XDG_RUNTIME_DIR").as_deref() == Some(runtime_dir.as_str()),
        "the serve Codex started got DBUS_SESSION_BUS_ADDRESS and XDG_RUNTIME_DIR (env_vars)",
        env.iter()
            .map(|(k, _)| k.as_str())
            .collect::<Vec<_>>()
            .join(" "),
    );

    // Setup again: the existing entry is left untouched.
    let before = std::fs::read(user.file(".codex/config.toml")).unwrap();
    let (code, out, err) = user.setup(&home, &[], SETUP_TIMEOUT).unwrap();
    c.check(
        code == Some(0)
            && out.contains("Codex           already registered (~/.codex/config.toml)")
            && std::fs::read(user.file(".codex/config.toml")).unwrap() == before,
        "a second setup finds the entry and writes nothing",
        format!("exit {code:?}\n{out}{err}"),
    );

    let left = home.wait_idle(Duration::from_secs(10));
    c.check(
        left.is_empty(),
        "no serve still runs after codex app-server exited",
        format!("{left:?}"),
    );
    c.finish(test, || format!("{transcript}\n{}", home.log_tail(20_000)));
}

/// Gemini CLI: setup finds it by `gemini` on PATH and adds the entry to the user's one-line
/// settings (another server's secret never printed by the dry run); `gemini mcp list` starts
/// that serve and connects; `setup --remove` takes the entry out again, the rest as it was, and
/// Gemini CLI no longer lists it.
#[test]
fn gemini_cli_connects_to_the_serve_setup_registered_until_it_is_removed() {
    let test = "gemini_cli_connects_to_the_serve_setup_registered_until_it_is_removed";
    let Some(setup) = setup(test, &[Need::Serve, Need::PythonSdk, Need::GeminiCli]) else {
        return;
    };
    let (gemini, version) = setup.gemini_cli.clone().unwrap();
    let mut c = Checks::new();
    let home = TestHome::new(&setup).unwrap();
    let user = UserHome::new(&home, &[("gemini", &gemini)]).unwrap();
    let command = registered_path(&setup.autotool);
    let settings = user.file(".gemini/settings.json");
    let before = r#"{"general":{"enableAutoUpdate":false},"privacy":{"usageStatisticsEnabled":false},"mcpServers":{"other":{"command":"/bin/false","env":{"OTHER_TOKEN":"other-secret-value"}}}}"#;
    std::fs::create_dir_all(user.file(".gemini")).unwrap();
    std::fs::write(&settings, before).unwrap();
    let before_value: Value = serde_json::from_str(before).unwrap();

    let (code, out, err) = user.setup(&home, &["--dry-run"], SETUP_TIMEOUT).unwrap();
    c.check(
        code == Some(0)
            && out.contains("Gemini CLI      would register (~/.gemini/settings.json")
            && out.contains(&command)
            && !out.contains("other-secret-value")
            && std::fs::read_to_string(&settings).unwrap() == before,
        "a dry run shows the entry, not the other server's secret, and writes nothing",
        format!("exit {code:?}\n{out}{err}"),
    );
    let (code, out, err) = user.setup(&home, &[], SETUP_TIMEOUT).unwrap();
    c.check(
        code == Some(0) && out.contains("Gemini CLI      registered (~/.gemini/settings.json"),
        "setup finds Gemini CLI by `gemini` on PATH and edits ~/.gemini/settings.json",
        format!("exit {code:?}\n{out}{err}"),
    );
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap_or(Value::Null);
    let mut want = before_value.clone();
    want["mcpServers"]["autotool"] = json!({"command": command, "args": ["serve"]});
    c.check(
        config == want,
        "the entry joins the user's settings, the rest kept",
        &config,
    );

    let list = gemini_mcp_list(&home, &user, Duration::from_secs(120)).unwrap();
    let line = list.line("autotool").unwrap_or("").to_string();
    eprintln!(
        "{test}: Gemini CLI {version}, serve --sandbox {} ({:.1}s): {line}",
        setup.sandbox,
        list.elapsed.as_secs_f64()
    );
    c.check(
        line.contains(&format!("autotool: {command} serve")) && line.ends_with("Connected"),
        "`gemini mcp list` starts the registered serve and shows it Connected",
        format!(
            "exit {:?}\nstdout:\n{}\nstderr:\n{}",
            list.status, list.stdout, list.stderr
        ),
    );
    check_serve_ran_here(&mut c, &home, "Gemini CLI passes its environment on");

    // Gemini CLI may have rewritten its settings by now (it migrates old keys): what
    // --remove must leave is whatever is there, less the entry.
    let read = || -> Value {
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap_or(Value::Null)
    };
    let mut want = read();
    if let Some(servers) = want["mcpServers"].as_object_mut() {
        servers.remove("autotool");
    }
    let (code, out, err) = user.setup(&home, &["--remove"], SETUP_TIMEOUT).unwrap();
    let after = read();
    c.check(
        code == Some(0)
            && out.contains("Gemini CLI      removed (~/.gemini/settings.json")
            && after == want
            && after["mcpServers"]["other"] == before_value["mcpServers"]["other"],
        "setup --remove takes the entry out and leaves the rest of the settings as they were",
        format!("exit {code:?}\n{out}{err}\n{after}"),
    );
    let list = gemini_mcp_list(&home, &user, Duration::from_secs(120)).unwrap();
    c.check(
        list.line("autotool").is_none() && list.line("other").is_some(),
        "`gemini mcp list` no longer shows autotool (the other server still there)",
        format!("stdout:\n{}\nstderr:\n{}", list.stdout, list.stderr),
    );
    let left = home.wait_idle(Duration::from_secs(10));
    c.check(
        left.is_empty(),
        "no serve still runs after `gemini mcp list` exited",
        format!("{left:?}"),
    );
    c.finish(test, || home.log_tail(20_000));
}
