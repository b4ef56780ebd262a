//! Declared reach end to end through `autotool serve`, each guard with a control that shows the
//! same thing gets through without it:
//! - `autotool hosts allow/list/remove`: a host allowed for every tool is not asked about, and
//!   removing it asks again (control: the same declaration asked when nothing is allowed); a
//!   host the tool did not declare is refused, as an `egress_denied` event naming the tool,
//!   host and port (control: the declared host answers);
//! - the machine's preset `reach = trusted` grants declared hosts unasked (directories are
//!   still asked), and `tools show` says so while the serve runs and after (control: the same
//!   tool on a machine without the preset is asked); `--dangerously-allow-all-tools` is shown
//!   as what it grants;
//! - a `WRITE_DIRS` tool writes a file of the user's through serve, and is refused by the
//!   kernel outside it (control: the same write unconfined lands);
//! - `autotool dirs widen/list/narrow`: a directory a deny rule refuses is not mounted even when
//!   granted (a `reach_refused` event, `tools show` says why), is mounted once the rule is
//!   widened and not after it is narrowed; autotool's own home is never widened;
//! - a team tool pulled from a registry is asked about its declared reach on the follower: the
//!   publisher's approval does not travel.

use super::keys::fake_api;
use super::{asking, finish, never, no, ok, strict, yes};
use autotool_tests::serve::{Sandbox, Serve, ServeHome, Server};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// A keyless tool declaring `hosts` (and `dirs` as `KIND = [...]` lines), with `get(port)`
/// (fetch the fake API on that loopback port), `read(path)` and `write(path, text)`.
fn tool(hosts: &str, dirs: &str) -> String {
    format!(
        r#"import urllib.request
from mcp.server.mcpserver import MCPServer

REQUIRED_HOSTS = [{hosts}]
{dirs}
mcp = MCPServer("reacher")


@mcp.tool()
def get(port: int) -> str:
    """Fetch the API on a loopback port."""
    try:
        url = "http://localhost:" + str(port) + "/echo?data=argument"
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.read().decode()
    except Exception as e:
        return "REFUSED: " + str(e)


@mcp.tool()
def read(path: str) -> str:
    """Read a file."""
    try:
        with open(path) as f:
            return f.read()
    except Exception as e:
        return "UNREADABLE: " + type(e).__name__


@mcp.tool()
def write(path: str, text: str) -> str:
    """Write a file."""
    try:
        with open(path, "w") as f:
            f.write(text)
        return "WROTE"
    except Exception as e:
        return "UNWRITABLE: " + type(e).__name__ + ": " + str(e)


if __name__ == "__main__":
    mcp.run()
"#
    )
}

/// `autotool ARGS` on `home` with `HOME=user`: (success, stdout + stderr).
fn cli(home: &ServeHome, user: &Path, args: &[&str]) -> (bool, String) {
    let (status, out, err) = home.cli_with(args, &[("HOME", user.as_os_str())]).unwrap();
    (status.success(), format!("{out}{err}"))
}

#[track_caller]
fn must(home: &ServeHome, user: &Path, args: &[&str]) -> String {
    let (success, out) = cli(home, user, args);
    assert!(success, "autotool {args:?} failed: {out}");
    out
}

/// `tools show NAME --json`, parsed.
fn shown(home: &ServeHome, user: &Path, name: &str) -> Value {
    serde_json::from_str(&must(home, user, &["tools", "show", name, "--json"])).unwrap()
}

/// The reach entry `tools show` gives for `host`.
fn host_entry(show: &Value, host: &str) -> Value {
    show["reach"]["hosts"]
        .as_array()
        .and_then(|hosts| hosts.iter().find(|h| h["host"] == host))
        .cloned()
        .unwrap_or_else(|| panic!("{host} not shown: {}", show["reach"]))
}

fn create(server: &mut Server, code: &str, answer: fn(&Value) -> Value) -> (bool, Vec<Value>) {
    let (outcome, asked) = server
        .call_answering(
            "create_tool",
            json!({"name": "reacher", "code": code, "verify": "quick"}),
            answer,
        )
        .unwrap();
    (outcome.is_ok_and(|r| !r.is_error), asked)
}

fn call(server: &mut Server, function: &str, args: Value) -> String {
    let (outcome, _) = server
        .call_answering(&format!("reacher__{function}"), args, never)
        .unwrap();
    ok(&outcome).text.clone()
}

/// A scratch home for the user (not under `/tmp`, which the sandbox replaces) holding `dirs`,
/// each writable by the `nobody` a tool started by root runs as.
fn user_home(dirs: &[&str]) -> tempfile::TempDir {
    let user = autotool_tests::host::scratch_dir("autotool-reach-e2e-").unwrap();
    for d in dirs {
        let path = user.path().join(d);
        std::fs::create_dir_all(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    user
}

#[test]
fn hosts_allowed_for_every_tool_ask_nothing_until_removed_and_undeclared_hosts_are_refused() {
    let Some(serve) = strict() else { return };
    let user = user_home(&[]);
    let (declared, undeclared) = (fake_api(), fake_api());
    let host = format!("localhost:{declared}");
    let home = ServeHome::new().unwrap();
    let serve = serve.env("HOME", &user.path().display().to_string());

    // Control: nothing allowed for every tool, so the declaration is asked about.
    let mut server = serve.start(&home).unwrap();
    server.initialize_with(asking()).unwrap();
    let code = tool(&format!("\"{host}\""), "");
    let (created, asked) = create(&mut server, &code, no);
    assert!(!created, "declined, yet created");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("reach {host} without a key")),
        "{asked:?}"
    );
    finish(server);

    // Allowed for every tool: listed, and the same declaration is asked nothing.
    let said = must(&home, user.path(), &["hosts", "allow", &host]);
    eprintln!("hosts allow: {said}");
    let listed = must(&home, user.path(), &["hosts", "list"]);
    assert!(
        listed.contains(&host) && listed.contains("via cli"),
        "{listed}"
    );
    let listed: Value =
        serde_json::from_str(&must(&home, user.path(), &["hosts", "list", "--json"])).unwrap();
    assert_eq!(listed[0]["entry"], host.as_str(), "{listed}");
    let mut server = serve.start(&home).unwrap();
    server.initialize_with(asking()).unwrap();
    let (created, asked) = create(&mut server, &code, never);
    assert!(created && asked.is_empty(), "{asked:?}");
    let reached = call(&mut server, "get", json!({"port": declared}));
    assert!(
        reached.contains("line=GET /echo?data=argument"),
        "{reached}"
    );
    let show = shown(&home, user.path(), "reacher");
    let entry = host_entry(&show, &host);
    assert_eq!(entry["reachable"], true, "{entry}");
    assert!(
        entry["why"]
            .as_str()
            .unwrap()
            .contains("allowed for every tool"),
        "{entry}"
    );

    // The attack: the argument posted to a port it did not declare. Refused before any
    // connection, and recorded with the tool, the host and the port.
    let posted = call(&mut server, "get", json!({"port": undeclared}));
    assert!(
        posted.starts_with("REFUSED") && posted.contains("403"),
        "{posted}"
    );
    let show = shown(&home, user.path(), "reacher");
    let refusals = show["reach"]["refused"].to_string();
    assert!(
        refusals.contains(&format!("localhost:{undeclared}")),
        "{refusals}"
    );
    let (_, events) = cli(
        &home,
        user.path(),
        &["events", "--tool", "reacher", "--json"],
    );
    assert!(
        events.contains("egress_denied") && events.contains(&format!("localhost:{undeclared}")),
        "{events}"
    );

    // Removed: not listed; a new version declaring it is asked again.
    let said = must(&home, user.path(), &["hosts", "remove", &host]);
    assert!(said.contains(&host), "{said}");
    let listed = must(&home, user.path(), &["hosts", "list"]);
    assert!(!listed.contains(&host), "{listed}");
    let (created, asked) = create(&mut server, &format!("{code}\n# v2\n"), no);
    assert!(!created);
    assert_eq!(
        asked.len(),
        1,
        "asked again once no longer allowed: {asked:?}"
    );
    finish(server);
}

#[test]
fn the_trusted_preset_grants_declared_hosts_unasked_and_tools_show_says_so() {
    let Some(serve) = strict() else { return };
    let user = user_home(&["notes"]);
    std::fs::write(user.path().join("notes/n.txt"), "a note").unwrap();
    let port = fake_api();
    let host = format!("localhost:{port}");
    let code = tool(&format!("\"{host}\""), "READ_DIRS = [\"~/notes\"]");
    let serve = serve.env("HOME", &user.path().display().to_string());

    // Control: a machine without the preset asks about the host.
    let plain = ServeHome::new().unwrap();
    let mut server = serve.start(&plain).unwrap();
    server.initialize_with(asking()).unwrap();
    let (created, asked) = create(&mut server, &code, no);
    assert!(!created);
    assert!(
        asked[0]["message"].as_str().unwrap().contains(&host),
        "{asked:?}"
    );
    finish(server);

    // The preset: only the directory is asked; the host is reached.
    let home = ServeHome::new().unwrap();
    std::fs::write(home.path().join("config.toml"), "reach = \"trusted\"\n").unwrap();
    let config = must(&home, user.path(), &["config"]);
    assert!(config.contains("trusted"), "{config}");
    let mut server = serve.start(&home).unwrap();
    server.initialize_with(asking()).unwrap();
    let (created, asked) = create(&mut server, &code, yes);
    assert!(created);
    assert_eq!(asked.len(), 1, "{asked:?}");
    let q = asked[0]["message"].as_str().unwrap();
    assert!(q.contains("read ~/notes") && !q.contains(&host), "{q}");
    let reached = call(&mut server, "get", json!({"port": port}));
    assert!(reached.contains("line=GET /echo"), "{reached}");
    // What is shown is what is enforced: reachable, and by what.
    let entry = host_entry(&shown(&home, user.path(), "reacher"), &host);
    assert_eq!(entry["reachable"], true, "{entry}");
    let why = entry["why"].as_str().unwrap();
    assert!(
        why.contains("`reach = trusted` of the running serve (pid"),
        "{why}"
    );
    finish(server);
    // No serve runs: what one started now would do, from the config file.
    let entry = host_entry(&shown(&home, user.path(), "reacher"), &host);
    assert_eq!(entry["reachable"], true, "{entry}");
    assert!(
        entry["why"]
            .as_str()
            .unwrap()
            .contains("`reach = trusted` (file), as a serve started now"),
        "{entry}"
    );
    // --dangerously-allow-all-tools is shown as what it grants while that serve runs.
    let mut server = serve
        .clone()
        .arg("--dangerously-allow-all-tools")
        .start(&plain)
        .unwrap();
    server.initialize_with(asking()).unwrap();
    let (created, asked) = create(&mut server, &code, never);
    assert!(created && asked.is_empty(), "{asked:?}");
    let show = shown(&plain, user.path(), "reacher");
    let entry = host_entry(&show, &host);
    assert_eq!(entry["reachable"], true, "{entry}");
    assert!(
        entry["why"]
            .as_str()
            .unwrap()
            .contains("--dangerously-allow-all-tools of the running serve"),
        "{entry}"
    );
    assert_eq!(show["reach"]["directories"][0]["granted"], true, "{show}");
    let reached = call(&mut server, "get", json!({"port": port}));
    assert!(reached.contains("line=GET /echo"), "{reached}");
    finish(server);
    // That serve gone, the plain machine's config grants nothing: shown not granted again.
    let entry = host_entry(&shown(&plain, user.path(), "reacher"), &host);
    assert_eq!(entry["reachable"], false, "{entry}");
    assert!(
        entry["why"].as_str().unwrap().contains("not granted yet"),
        "{entry}"
    );
}

#[test]
fn a_write_dirs_tool_writes_inside_its_directory_and_the_kernel_refuses_outside() {
    let Some(serve) = strict() else { return };
    let user = user_home(&["exports", "outside"]);
    let code = tool("", "WRITE_DIRS = [\"~/exports\"]");
    let inside = user.path().join("exports/report.txt");
    let outside = user.path().join("outside/planted.txt");
    let serve = serve.env("HOME", &user.path().display().to_string());
    let home = ServeHome::new().unwrap();
    let mut server = serve.start(&home).unwrap();
    server.initialize_with(asking()).unwrap();
    let (created, asked) = create(&mut server, &code, yes);
    assert!(created);
    let q = asked[0]["message"].as_str().unwrap();
    assert!(q.contains("~/exports"), "{q}");
    let wrote = call(
        &mut server,
        "write",
        json!({"path": inside, "text": "quarterly"}),
    );
    assert_eq!(wrote, "WROTE");
    assert_eq!(std::fs::read_to_string(&inside).unwrap(), "quarterly");
    // The attack: a file planted beside the granted directory, by its path and through `..`.
    for path in [
        outside.display().to_string(),
        format!(
            "{}/../outside/planted.txt",
            user.path().join("exports").display()
        ),
    ] {
        let planted = call(&mut server, "write", json!({"path": path, "text": "x"}));
        assert!(planted.starts_with("UNWRITABLE"), "{path}: {planted}");
        assert!(!outside.exists(), "{path} was planted");
    }
    finish(server);

    // Control: the same tool unconfined plants it.
    let open = ServeHome::new().unwrap();
    let mut server = Serve::new(Sandbox::Off)
        .env("HOME", &user.path().display().to_string())
        .start(&open)
        .unwrap();
    server.initialize_with(asking()).unwrap();
    let (created, _) = create(&mut server, &code, yes);
    assert!(created);
    let planted = call(&mut server, "write", json!({"path": outside, "text": "x"}));
    assert_eq!(planted, "WROTE");
    assert!(outside.exists());
    finish(server);
}

#[test]
fn a_refused_directory_is_mounted_only_while_its_rule_is_widened_and_never_autotools_home() {
    let Some(serve) = strict() else { return };
    let user = user_home(&[".config/app"]);
    let settings = user.path().join(".config/app/settings.txt");
    std::fs::write(&settings, "theme=dark").unwrap();
    let code = tool("", "READ_DIRS = [\"~/.config/app\"]");
    let home = ServeHome::new().unwrap();
    let mut server = serve
        .env("HOME", &user.path().display().to_string())
        .start(&home)
        .unwrap();
    server.initialize_with(asking()).unwrap();
    let (created, _) = create(&mut server, &code, yes);
    assert!(created);
    let path = json!({"path": settings});

    // Granted by the user, refused by the rule for ~/.config: not mounted, and said so.
    let read = call(&mut server, "read", path.clone());
    assert!(read.starts_with("UNREADABLE"), "{read}");
    let show = shown(&home, user.path(), "reacher");
    let dir = &show["reach"]["directories"][0];
    assert_eq!(dir["granted"], true, "{show}");
    assert!(
        dir["not_mounted"]
            .as_str()
            .unwrap_or_default()
            .contains("widen the rule"),
        "{dir}"
    );
    let text = must(&home, user.path(), &["tools", "show", "reacher"]);
    assert!(text.contains("granted but not mounted"), "{text}");
    assert!(
        show["recent_events"].to_string().contains("reach_refused"),
        "{}",
        show["recent_events"]
    );

    // Widened: listed, and mounted at the next call.
    let said = must(&home, user.path(), &["dirs", "widen", "~/.config/app"]);
    assert!(said.contains("widened for ~/.config/app"), "{said}");
    let listed = must(&home, user.path(), &["dirs", "list", "--json"]);
    assert!(listed.contains(".config/app"), "{listed}");
    assert_eq!(call(&mut server, "read", path.clone()), "theme=dark");
    let show = shown(&home, user.path(), "reacher");
    assert!(
        show["reach"]["directories"][0]["not_mounted"].is_null(),
        "{show}"
    );

    // Never autotool's own home, nor `/`.
    let home_path = home.path().display().to_string();
    for refused_path in [home_path.as_str(), "/"] {
        let (success, said) = cli(&home, user.path(), &["dirs", "widen", refused_path]);
        assert!(!success, "{refused_path} widened: {said}");
        assert!(said.contains("cannot be widened"), "{said}");
    }

    // Narrowed: refused again from the next launch.
    let said = must(&home, user.path(), &["dirs", "narrow", "~/.config/app"]);
    assert!(said.contains("no longer widened"), "{said}");
    let read = call(&mut server, "read", path);
    assert!(read.starts_with("UNREADABLE"), "{read}");
    finish(server);
}

#[test]
fn a_pulled_team_tools_declared_reach_is_asked_on_the_follower() {
    let Some(serve) = strict() else { return };
    let Some(registry) = super::team::registry(None) else {
        return;
    };
    let user = user_home(&[]);
    let port = fake_api();
    let host = format!("localhost:{port}");
    let code = tool(&format!("\"{host}\""), "");
    let serve = serve.env("HOME", &user.path().display().to_string());
    let run = |home: &ServeHome, args: &[&str]| {
        let (success, out, err) = super::team::run(home, args, &[("HOME", user_str(&user))]);
        assert!(success, "autotool {args:?}: {out}{err}");
        out
    };

    // A grants the tool its reach and publishes it.
    let a = ServeHome::new().unwrap();
    let mut server = serve.start(&a).unwrap();
    server.initialize_with(asking()).unwrap();
    let (created, asked) = create(&mut server, &code, yes);
    assert!(created && asked.len() == 1, "{asked:?}");
    finish(server);
    run(&a, &["trust", "init"]);
    let pem = run(&a, &["trust", "show"]);
    let reference = registry.reference("team/reach:v1");
    run(&a, &["tools", "push", "reacher", &reference]);

    // B pulls it: nothing of A's approval came along, so B is asked before anything of it
    // runs here (verification included), naming the host and the command that grants it.
    let b = ServeHome::new().unwrap();
    let pem_file = b.path().join("alice.pem");
    std::fs::write(&pem_file, pem).unwrap();
    run(&b, &["trust", "add", "alice", pem_file.to_str().unwrap()]);
    let (pulled, out, err) = super::team::run(
        &b,
        &["tools", "pull", &reference],
        &[("HOME", user_str(&user))],
    );
    assert!(!pulled, "pulled without B's consent: {out}{err}");
    assert!(
        err.contains(&format!("may reach {host} without a key"))
            && err.contains("autotool tools approve reacher --reach"),
        "{err}"
    );
    eprintln!("B was asked: {}", err.trim());
    // B's yes, then the pull passes and B's serve reaches the host asking nothing more.
    run(&b, &["tools", "approve", "reacher", "--reach"]);
    run(&b, &["tools", "pull", &reference]);
    let entry = host_entry(&shown(&b, user.path(), "reacher"), &host);
    assert_eq!(entry["reachable"], true, "{entry}");
    assert!(
        entry["why"]
            .as_str()
            .unwrap()
            .contains("declared and granted"),
        "{entry}"
    );
    let mut server = serve.start(&b).unwrap();
    server.initialize_with(asking()).unwrap();
    assert!(call(&mut server, "get", json!({"port": port})).contains("line=GET /echo"));
    finish(server);
    // Control: on A, which granted it, the same call asks nothing.
    let mut server = serve.start(&a).unwrap();
    server.initialize_with(asking()).unwrap();
    assert!(call(&mut server, "get", json!({"port": port})).contains("line=GET /echo"));
    finish(server);
}

fn user_str(user: &tempfile::TempDir) -> &str {
    user.path().to_str().unwrap()
}
