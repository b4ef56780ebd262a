//! OpenClaw for real (npm `openclaw`, pinned in `integration/openclaw` with the Node.js 24 it
//! needs): `openclaw mcp probe NAME --json` starts a server from `~/.openclaw/openclaw.json`,
//! lists its tools and, for a server whose tools carry no MCP safety annotations, says
//! "tools have no safety annotations; calls require approval" (its `approvalHint`).
//!
//! The control is a plain Python SDK server whose tool has no annotations: the probe warns about
//! it. Then `autotool serve`, registered by `autotool setup --app openclaw`: no warning for the
//! built-ins, nor once a created tool (which brings annotations of its own) is listed.

use autotool_integration::hosts::UserHome;
use autotool_integration::wire::RawServe;
use autotool_integration::{Checks, Need, OwnedChild, TestHome, setup};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const PROBE_TIMEOUT: Duration = Duration::from_secs(90);

/// A tool without any annotations: what the probe warns about.
const PLAIN_SERVER: &str = r#"from mcp.server.mcpserver import MCPServer

mcp = MCPServer("plain")


@mcp.tool()
def echo(text: str) -> str:
    """Echo the text."""
    return text


if __name__ == "__main__":
    mcp.run()
"#;

/// The tool created through autotool: read-only by its own account.
const ANNOTATED_TOOL: &str = r#"from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

mcp = MCPServer("clock")


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
def year() -> str:
    """The year, as text."""
    return "2026"


if __name__ == "__main__":
    mcp.run()
"#;

/// `openclaw mcp probe NAME --json` as the user of `user`, with the serve environment of
/// `home`: the JSON it printed, and its stderr.
fn probe(
    user: &UserHome,
    home: &TestHome,
    node: &std::path::Path,
    entry: &std::path::Path,
    name: &str,
) -> (Value, String) {
    let mut cmd = user.command(node);
    cmd.arg(entry)
        .args(["mcp", "probe", name, "--json"])
        .envs(home.env())
        .env("AUTOTOOL_SANDBOX", &home.setup.sandbox);
    let mut child = OwnedChild::spawn(&format!("openclaw mcp probe {name}"), cmd).unwrap();
    child.close_stdin();
    let deadline = Instant::now() + PROBE_TIMEOUT;
    let (lines, ended) = child.read_to_end(deadline);
    let _ = child.wait_exit(Duration::from_secs(10));
    let stderr = child.final_stderr();
    assert!(ended, "openclaw mcp probe {name} did not finish: {stderr}");
    let text: Vec<String> = lines.into_iter().map(|l| l.text).collect();
    let json = serde_json::from_str(&text.join("\n")).unwrap_or_else(|e| {
        panic!("openclaw mcp probe {name} printed no JSON ({e}): {text:?}\n{stderr}")
    });
    (json, stderr)
}

fn approval_hint(probe: &Value, server: &str) -> String {
    probe["servers"][server]["approvalHint"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[test]
fn openclaw_sees_safety_annotations_on_every_autotool_tool() {
    let test = "openclaw_sees_safety_annotations_on_every_autotool_tool";
    let Some(setup) = setup(test, &[Need::Serve, Need::PythonSdk, Need::OpenClaw]) else {
        return;
    };
    let (node, entry, version) = setup.openclaw.clone().unwrap();
    let mut c = Checks::new();
    let home = TestHome::new(&setup).unwrap();
    let user = UserHome::new(&home, &[]).unwrap();

    let (code, out, err) = user
        .setup(&home, &["--app", "openclaw"], Duration::from_secs(30))
        .unwrap();
    c.check(
        code == Some(0) && out.contains("OpenClaw") && out.contains("registered"),
        "autotool setup registers serve with OpenClaw",
        format!("{code:?}\n{out}\n{err}"),
    );
    // The control beside it: a plain SDK server without annotations.
    let plain = home.path().join("plain.py");
    std::fs::write(&plain, PLAIN_SERVER).unwrap();
    let config = user.file(".openclaw/openclaw.json");
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    // OpenClaw passes a server only part of its own environment: the test's home reaches the
    // serve through the entry's `env`, beside what setup wrote.
    let mut env = serde_json::Map::new();
    for (k, v) in home.env() {
        env.insert(k, Value::String(v));
    }
    env.insert(
        "AUTOTOOL_SANDBOX".into(),
        Value::String(setup.sandbox.clone()),
    );
    doc["mcp"]["servers"]["autotool"]["env"] = Value::Object(env);
    doc["mcp"]["servers"]["plain"] = json!({
        "command": setup.python.display().to_string(),
        "args": [plain.display().to_string()],
    });
    std::fs::write(&config, serde_json::to_string_pretty(&doc).unwrap()).unwrap();

    let (control, control_err) = probe(&user, &home, &node, &entry, "plain");
    c.check(
        approval_hint(&control, "plain").contains("no safety annotations"),
        &format!(
            "control: OpenClaw {version} warns about a server whose tools have no annotations"
        ),
        format!("{control}\n{control_err}"),
    );

    let (fresh, fresh_err) = probe(&user, &home, &node, &entry, "autotool");
    let tools: Vec<String> = fresh["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    c.check(
        tools.iter().any(|t| t.ends_with("create_tool")),
        "OpenClaw lists autotool's built-ins",
        format!("{tools:?}\n{fresh_err}"),
    );
    c.check(
        approval_hint(&fresh, "autotool").is_empty(),
        "no warning about annotations for autotool's built-ins",
        &fresh,
    );

    let mut serve = RawServe::start(&home).unwrap();
    let created = serve.create_tool("clock", ANNOTATED_TOOL).unwrap();
    let listed = serve.request("tools/list", json!({})).unwrap();
    let _ = serve.finish();
    c.check(
        created["result"]["isError"] != true,
        "a tool with annotations of its own is created",
        &created,
    );
    let year = listed["result"]["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "clock__year"))
        .cloned()
        .unwrap_or_default();
    c.check(
        year["annotations"]["readOnlyHint"] == true && year["annotations"]["openWorldHint"] == true,
        "the created tool's own annotation passes through, with openWorldHint set",
        &year,
    );
    let (after, after_err) = probe(&user, &home, &node, &entry, "autotool");
    let tools: Vec<String> = after["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    c.check(
        tools.iter().any(|t| t.contains("clock__year")),
        "OpenClaw lists the created tool",
        format!("{tools:?}\n{after_err}"),
    );
    c.check(
        approval_hint(&after, "autotool").is_empty(),
        "no warning about annotations once a created tool is listed",
        &after,
    );
    c.finish(test, || format!("{}\n{}", home.log_tail(4000), after_err));
}
