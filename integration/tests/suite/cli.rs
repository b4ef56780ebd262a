//! The command line's conventions, run as a user would run it: exit status 0 (done, healthy),
//! 1 (could not, or a check found a problem) and 2 (the command line is wrong); with `--json`,
//! errors are JSON on stdout too; completions and man pages; and messages that point the right
//! way (`tools revoke` of a tool that does not exist, `keys add NAME VALUE`, `keys allow` of a
//! key not stored or of a public suffix), each beside the case that works.

use autotool_integration::wire::RawServe;
use autotool_integration::{Checks, Need, OwnedChild, TestHome, setup};
use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

const BOUND: Duration = Duration::from_secs(60);

/// `autotool ARGS` on `home` with `extra` variables and `stdin`: (exit code, stdout, stderr).
fn run(
    home: &TestHome,
    args: &[&str],
    extra: &[(&str, &str)],
    stdin: Option<&str>,
) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(&home.setup.autotool);
    cmd.args(args).envs(home.env());
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let mut child = OwnedChild::spawn(&format!("autotool {}", args.join(" ")), cmd).unwrap();
    if let Some(text) = stdin {
        child.send_line(text).unwrap();
    }
    child.close_stdin();
    let deadline = Instant::now() + BOUND;
    let (lines, ended) = child.read_to_end(deadline);
    let status = child
        .wait_exit(deadline.saturating_duration_since(Instant::now()))
        .unwrap();
    let stderr = child.final_stderr();
    assert!(
        ended,
        "`autotool {}` did not finish: {stderr}",
        args.join(" ")
    );
    let stdout: Vec<String> = lines.into_iter().map(|l| l.text).collect();
    (status.and_then(|s| s.code()), stdout.join("\n"), stderr)
}

fn json_error(stdout: &str) -> Value {
    serde_json::from_str::<Value>(stdout).unwrap_or_default()["error"].clone()
}

#[test]
fn cli_exit_codes_and_json_errors() {
    let test = "cli_exit_codes_and_json_errors";
    let Some(s) = setup(test, &[Need::Serve]) else {
        return;
    };
    let mut c = Checks::new();
    let home = TestHome::new(&s).unwrap();

    let (code, out, _) = run(&home, &["--help"], &[], None);
    c.check(
        code == Some(0)
            && out.contains("Exit status:")
            && out.contains("2  the command line is wrong"),
        "--help documents the exit status, and exits 0",
        &out,
    );
    let (code, _, err) = run(&home, &["nosuch"], &[], None);
    c.check(
        code == Some(2) && err.contains("unrecognized subcommand"),
        "an unknown command exits 2",
        format!("{code:?} {err}"),
    );
    let (code, out, err) = run(&home, &["tools", "list", "--json", "--bogus"], &[], None);
    let e = json_error(&out);
    c.check(
        code == Some(2)
            && e["exit_code"] == 2
            && e["message"].as_str().is_some_and(|m| m.contains("--bogus")),
        "with --json, a refused command line is a JSON error on stdout, exit 2",
        format!("{code:?} {out} {err}"),
    );
    let (code, out, err) = run(&home, &["tools", "show", "nosuch", "--json"], &[], None);
    let e = json_error(&out);
    c.check(
        code == Some(1)
            && e["command"] == "autotool tools"
            && e["exit_code"] == 1
            && e["message"].as_str().is_some_and(|m| m.contains("nosuch")),
        "with --json, a failure is a JSON error on stdout, exit 1",
        format!("{code:?} {out} {err}"),
    );
    let (code, out, err) = run(&home, &["tools", "show", "nosuch"], &[], None);
    c.check(
        code == Some(1) && out.is_empty() && err.starts_with("autotool tools: "),
        "without --json, the same failure is a line on stderr, exit 1",
        format!("{code:?} {out} {err}"),
    );

    let (code, out, _) = run(&home, &["runtime", "status", "--json"], &[], None);
    let v: Value = serde_json::from_str(&out).unwrap_or_default();
    c.check(
        code == Some(0) && v["state"] == "ready",
        "runtime status: a usable AUTOTOOL_RUNTIME is ready, exit 0",
        &out,
    );
    let (code, out, _) = run(
        &home,
        &["runtime", "status", "--json"],
        &[("AUTOTOOL_RUNTIME", "/nonexistent/venv")],
        None,
    );
    let v: Value = serde_json::from_str(&out).unwrap_or_default();
    c.check(
        code == Some(1) && v["state"] == "broken",
        "runtime status: a broken AUTOTOOL_RUNTIME is reported, exit 1",
        &out,
    );

    let (code, out, _) = run(&home, &["doctor", "--json"], &[], None);
    let worst_ok = !out.contains("\"fail\"");
    c.check(
        code == Some(0) && worst_ok,
        "doctor on a machine that can run tools exits 0",
        format!("{code:?} {out}"),
    );
    let (code, out, _) = run(
        &home,
        &["doctor", "--json"],
        &[("AUTOTOOL_LAUNCHER", "/nonexistent/autotool-launcher")],
        None,
    );
    c.check(
        code == Some(1) && out.contains("\"fail\""),
        "doctor without a launcher: a FAIL check, exit 1",
        format!("{code:?} {out}"),
    );
    c.finish(test, String::new);
}

#[test]
fn doctor_warns_about_an_unreadable_host_app_config_and_still_exits_0() {
    let test = "doctor_warns_about_an_unreadable_host_app_config_and_still_exits_0";
    let Some(s) = setup(test, &[Need::Serve]) else {
        return;
    };
    let mut c = Checks::new();
    let home = TestHome::new(&s).unwrap();
    let user = home.path().join("user");
    std::fs::create_dir_all(user.join(".cursor")).unwrap();
    std::fs::write(user.join(".cursor/mcp.json"), "{ this is not json").unwrap();
    let user = user.display().to_string();
    let (code, out, err) = run(&home, &["doctor"], &[("HOME", &user)], None);
    let line = out
        .lines()
        .find(|l| l.contains("Cursor"))
        .unwrap_or("")
        .to_string();
    c.check(
        line.starts_with("[warn] host: Cursor:") && line.contains("cannot be used"),
        "an unreadable Cursor config is a warning about Cursor",
        format!("{out}\n{err}"),
    );
    c.check(
        code == Some(0) && out.contains("Tools can run"),
        "and doctor still says tools can run, exit 0",
        format!("{code:?}\n{out}"),
    );
    c.finish(test, String::new);
}

#[test]
fn cli_completions_and_man_pages() {
    let test = "cli_completions_and_man_pages";
    let Some(s) = setup(test, &[Need::Serve]) else {
        return;
    };
    let mut c = Checks::new();
    let home = TestHome::new(&s).unwrap();
    for (shell, mark) in [
        ("bash", "_autotool()"),
        ("zsh", "#compdef autotool"),
        ("fish", "complete -c autotool"),
    ] {
        let (code, out, err) = run(&home, &["completions", shell], &[], None);
        c.check(
            code == Some(0) && out.contains(mark) && out.contains("runtime"),
            &format!("completions {shell}: a script that knows the commands"),
            format!(
                "{code:?} {err} {}",
                out.chars().take(200).collect::<String>()
            ),
        );
    }
    let (code, _, err) = run(&home, &["completions", "tcsh"], &[], None);
    c.check(code == Some(2), "an unknown shell exits 2", err);
    let (code, out, _) = run(&home, &["man"], &[], None);
    c.check(
        code == Some(0) && out.contains(".TH autotool") && out.contains("Exit status"),
        "man prints the man page (roff)",
        out.chars().take(200).collect::<String>(),
    );
    let dir = home.path().join("man1");
    let (code, out, err) = run(
        &home,
        &["man", "--dir", &dir.display().to_string()],
        &[],
        None,
    );
    c.check(
        code == Some(0)
            && dir.join("autotool.1").is_file()
            && dir.join("autotool-runtime.1").is_file()
            && dir.join("autotool-doctor.1").is_file(),
        "man --dir writes a page per command",
        format!("{code:?} {out} {err}"),
    );
    c.finish(test, String::new);
}

#[test]
fn cli_revoke_of_a_tool_that_does_not_exist_fails_as_approve_does() {
    let test = "cli_revoke_of_a_tool_that_does_not_exist_fails_as_approve_does";
    let Some(s) = setup(test, &[Need::Serve]) else {
        return;
    };
    let mut c = Checks::new();
    let home = TestHome::new(&s).unwrap();

    let (code, _, approve_err) = run(
        &home,
        &["tools", "approve", "nosuch", "SOME_KEY"],
        &[],
        None,
    );
    c.check(
        code == Some(1) && approve_err.contains("no tool named \"nosuch\""),
        "approve of a tool that does not exist fails",
        format!("{code:?} {approve_err}"),
    );
    let (code, out, err) = run(&home, &["tools", "revoke", "nosuch"], &[], None);
    c.check(
        code == Some(1) && err.contains("no tool named \"nosuch\"") && out.is_empty(),
        "revoke of a tool that does not exist fails the same way",
        format!("{code:?} {out} {err}"),
    );
    let (code, out, err) = run(&home, &["tools", "revoke", "../../etc"], &[], None);
    c.check(
        code == Some(1) && err.contains("../../etc") && out.is_empty(),
        "revoke refuses ../../etc as a tool name",
        format!("{code:?} {out} {err}"),
    );
    let (code, _, err) = run(
        &home,
        &["tools", "revoke", "nosuch", "not-a-key"],
        &[],
        None,
    );
    c.check(
        code == Some(1),
        "revoke refuses a key name that is no key's",
        err,
    );

    // The control: a tool that exists, without approvals, is revoked with exit 0.
    let mut serve = RawServe::start(&home).unwrap();
    let created = serve
        .create_tool(
            "plain",
            "from mcp.server.mcpserver import MCPServer\n\nmcp = MCPServer(\"plain\")\n\n\n\
             @mcp.tool()\ndef one() -> str:\n    \"\"\"One.\"\"\"\n    return \"1\"\n\n\n\
             if __name__ == \"__main__\":\n    mcp.run()\n",
        )
        .unwrap();
    let _ = serve.finish();
    c.check(
        created["result"]["isError"] != true,
        "a tool is created for the control",
        &created,
    );
    let (code, out, err) = run(&home, &["tools", "revoke", "plain"], &[], None);
    c.check(
        code == Some(0) && out.contains("plain had no approval"),
        "revoke of a tool that exists exits 0",
        format!("{code:?} {out} {err}"),
    );
    c.finish(test, || home.log_tail(3000));
}

#[test]
fn cli_key_values_never_come_from_argv_and_allow_warns_about_a_key_not_stored() {
    let test = "cli_key_values_never_come_from_argv_and_allow_warns_about_a_key_not_stored";
    let Some(s) = setup(test, &[Need::Serve]) else {
        return;
    };
    let mut c = Checks::new();
    let home = TestHome::new(&s).unwrap();
    let file = [("AUTOTOOL_CREDENTIALS", "file")];

    let (code, out, err) = run(
        &home,
        &["keys", "add", "ARGV_KEY", "s3cr3t-value"],
        &file,
        None,
    );
    c.check(
        code == Some(2)
            && err.contains("never taken from the command line")
            && err.contains("printf %s")
            && !err.contains("s3cr3t-value")
            && !out.contains("s3cr3t-value"),
        "keys add NAME VALUE exits 2, saying values come from the terminal or stdin, never \
         echoing the value",
        format!("{code:?} {out} {err}"),
    );
    let (_, listed, _) = run(&home, &["keys", "list", "--json"], &file, None);
    c.check(
        !listed.contains("ARGV_KEY"),
        "and nothing was stored",
        &listed,
    );

    let (code, out, err) = run(
        &home,
        &["keys", "allow", "NOT_STORED", "api.example.com"],
        &file,
        None,
    );
    c.check(
        code == Some(0)
            && err.contains("warning: NOT_STORED is not stored")
            && err.contains("autotool keys add NOT_STORED"),
        "keys allow of a key not stored warns, and keeps the limit",
        format!("{code:?} {out} {err}"),
    );
    // The control: a stored key gets its limit without a warning.
    let (code, out, err) = run(
        &home,
        &["keys", "add", "STORED_KEY", "--file"],
        &file,
        Some("v4lue-1234"),
    );
    c.check(
        code == Some(0),
        "a key is stored from stdin",
        format!("{code:?} {out} {err}"),
    );
    let (code, out, err) = run(
        &home,
        &["keys", "allow", "STORED_KEY", "api.example.com"],
        &file,
        None,
    );
    c.check(
        code == Some(0) && !err.contains("warning") && out.contains("api.example.com"),
        "keys allow of a stored key: no warning",
        format!("{code:?} {out} {err}"),
    );
    c.finish(test, String::new);
}

#[test]
fn cli_keys_allow_refuses_a_public_suffix() {
    let test = "cli_keys_allow_refuses_a_public_suffix";
    let Some(s) = setup(test, &[Need::Serve]) else {
        return;
    };
    let mut c = Checks::new();
    let home = TestHome::new(&s).unwrap();
    let file = [("AUTOTOOL_CREDENTIALS", "file")];
    let (code, out, err) = run(
        &home,
        &["keys", "add", "SUFFIX_KEY", "--file"],
        &file,
        Some("v4lue-5678"),
    );
    c.check(
        code == Some(0),
        "a key is stored from stdin",
        format!("{code:?} {out} {err}"),
    );
    let (code, out, err) = run(
        &home,
        &["keys", "allow", "SUFFIX_KEY", "api.example.com"],
        &file,
        None,
    );
    c.check(
        code == Some(0),
        "a limit is set",
        format!("{code:?} {out} {err}"),
    );

    for (entry, suffix) in [
        ("*.com", "com"),
        ("*.co.uk", "co.uk"),
        ("*.github.io", "github.io"),
        ("co.uk", "co.uk"),
    ] {
        let (code, out, err) = run(
            &home,
            &["keys", "allow", "SUFFIX_KEY", "api.example.com", entry],
            &file,
            None,
        );
        c.check(
            code == Some(1)
                && err.contains(&format!("`{suffix}` is a public suffix"))
                && err.contains("Nothing was stored"),
            &format!("keys allow SUFFIX_KEY {entry}: refused, naming the public suffix"),
            format!("{code:?} {out} {err}"),
        );
    }
    let (_, listed, _) = run(&home, &["keys", "list", "--json"], &file, None);
    c.check(
        listed.contains("api.example.com")
            && !listed.contains("co.uk")
            && !listed.contains("*.com"),
        "the limit stored before is unchanged",
        &listed,
    );
    // The control: a name one label under the suffix is the service's own, and is stored.
    let (code, out, err) = run(
        &home,
        &[
            "keys",
            "allow",
            "SUFFIX_KEY",
            "*.example.co.uk",
            "octocat.github.io",
        ],
        &file,
        None,
    );
    c.check(
        code == Some(0) && out.contains("*.example.co.uk") && out.contains("octocat.github.io"),
        "keys allow SUFFIX_KEY *.example.co.uk octocat.github.io: stored",
        format!("{code:?} {out} {err}"),
    );
    c.finish(test, String::new);
}
