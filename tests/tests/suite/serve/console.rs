//! `autotool console` end to end, with the real binary:
//! - no confined tool reaches it, with its secret or without, though the user allowed the
//!   tool's key to that very loopback port; the control: once the console is gone, the same
//!   port is reached;
//! - in a real browser (Debian's chromium, headless, over WebDriver): the library page says a
//!   tool waits for consent, the consent page asks, a click and a confirmation approve it, and
//!   the tool's call then succeeds through `serve` holding the key. Screenshots of the consent
//!   and library pages go to `$AUTOTOOL_SCREENSHOTS` (the README's come from there), else to
//!   a temporary directory.

use super::super::network::{Catcher, deliver};
use super::keys::{SECRET, TOOL, assert_own_listener, attacker, fake_api, remove_records};
use super::{finish, start, strict};
use autotool_tests::browser::{self, Browser, Console};
use autotool_tests::serve::ServeHome;
use serde_json::json;
use std::path::PathBuf;

#[test]
fn no_tool_reaches_the_console_with_or_without_its_secret() {
    let Some(serve) = strict() else { return };
    // The user's console, on another home, and a tool whose key the user allowed to its port.
    let console_home = ServeHome::new().unwrap();
    let console = Console::start(console_home.path(), &[]).unwrap();
    let port = console.port;
    let (_home, mut server) = attacker(serve, port);

    let with_secret = console.url.clone();
    assert!(with_secret.contains("/?s="), "{with_secret}");
    let approve = format!(
        "http://127.0.0.1:{port}/action?action=approve&tool=deliver&key=LEAK_API_KEY&{}",
        with_secret.split_once('?').unwrap().1
    );
    for url in [
        with_secret.as_str(),
        &format!("http://127.0.0.1:{port}/"),
        &format!("http://localhost:{port}/consent"),
        &approve,
    ] {
        assert_own_listener(&deliver(&mut server, url), "autotool console");
    }
    // Without its record, the socket itself gives it away: an autotool process holds it.
    assert!(
        remove_records(port) > 0,
        "the console left no record of {port}"
    );
    let held = format!(
        "a socket held by an autotool process (pid {})",
        console.pid()
    );
    assert_own_listener(&deliver(&mut server, &with_secret), &held);

    // The control: the console gone, the same port, allowed the same way, is reached.
    drop(console);
    let catcher = Catcher::bind_freed("127.0.0.1", port);
    assert_eq!(
        deliver(&mut server, &format!("http://127.0.0.1:{port}/")),
        "ARRIVED: arrived"
    );
    assert_eq!(catcher.arrived().len(), 1);
    finish(server);
}

/// Where the screenshots go: `$AUTOTOOL_SCREENSHOTS`, else a temporary directory (removed with
/// the returned guard).
fn screenshots() -> (PathBuf, Option<tempfile::TempDir>) {
    match std::env::var_os("AUTOTOOL_SCREENSHOTS").filter(|v| !v.is_empty()) {
        Some(dir) => (PathBuf::from(dir), None),
        None => {
            let tmp = tempfile::Builder::new()
                .prefix("autotool-console-shots-")
                .tempdir()
                .unwrap();
            (tmp.path().to_path_buf(), Some(tmp))
        }
    }
}

/// `path` holds a PNG image.
#[track_caller]
fn assert_png(path: &std::path::Path) {
    let bytes = std::fs::read(path).unwrap();
    assert!(
        bytes.len() > 1000 && bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is no screenshot ({} bytes)",
        path.display(),
        bytes.len()
    );
}

#[test]
fn a_click_in_the_browser_approves_a_pending_consent_and_the_call_then_succeeds() {
    let (chromium, driver) = match browser::probe() {
        Ok(found) => found,
        Err(why) if browser::required() => panic!("no browser on a machine that needs one: {why}"),
        Err(why) => {
            autotool_tests::print_skip("console browser test", &why);
            return;
        }
    };
    if autotool_tests::capabilities_mode() {
        // There every tool keeps this user's id, and its thread limit counts every task of the
        // user, counted at its launch: chromium's hundred threads, started beside the suite's
        // tools, would use up theirs. The root and user-namespace runs cover the browser.
        autotool_tests::print_skip(
            "console browser test",
            "capabilities mode: chromium's threads would count against every running tool's \
             thread limit (same user id)",
        );
        return;
    }
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let api = fake_api();
    let serve = serve
        .env("FAKE_API_KEY", SECRET)
        .env("FAKE_API_BASE", &format!("http://localhost:{api}"));
    // A host that cannot ask: the question waits for the user.
    let mut server = start(&serve, &home);
    let args = json!({"name": "fake", "code": TOOL});
    let r = server.call_result("create_tool", args.clone()).unwrap();
    assert!(r.is_error, "{}", r.text);
    assert!(
        r.text.contains("autotool tools approve fake FAKE_API_KEY"),
        "{}",
        r.text
    );

    let console = Console::start(home.path(), &[("FAKE_API_KEY", SECRET)]).unwrap();
    let b = Browser::start(&chromium, &driver).unwrap();
    // The printed URL: the secret is traded for the cookie and leaves the address bar.
    b.go(&console.url).unwrap();
    let here = b.url().unwrap();
    assert_eq!(here, format!("http://127.0.0.1:{}/", console.port));
    let library = b.source().unwrap();
    assert!(
        library.contains("1 tool is waiting for consent"),
        "{library}"
    );

    b.click("p.notice a").unwrap();
    let consent = b.source().unwrap();
    assert!(
        consent.contains("Allow fake to use FAKE_API_KEY?"),
        "{consent}"
    );
    assert!(!consent.contains("s3cr3t"), "{consent}");
    let (shots, _keep) = screenshots();
    b.screenshot(&shots.join("console-consent.png")).unwrap();
    assert_png(&shots.join("console-consent.png"));

    b.click("a.button").unwrap();
    let confirm = b.source().unwrap();
    assert!(confirm.contains("Confirm"), "{confirm}");
    b.click("button#confirm").unwrap();
    let done = b.source().unwrap();
    assert!(
        done.contains("approved: `fake` may use FAKE_API_KEY"),
        "{done}"
    );

    // The tool is created and its call succeeds, holding the key, through serve.
    let r = server.call_result("create_tool", args).unwrap();
    assert!(!r.is_error, "{}", r.text);
    let echoed = server.call_text("fake__echo", json!({})).unwrap();
    assert!(echoed.contains("line=GET /echo?key="), "{echoed}");
    assert!(echoed.contains("[REDACTED:FAKE_API_KEY]"), "{echoed}");

    // The library shows it, and the consent page has nothing left to ask.
    b.go(&format!("http://127.0.0.1:{}/consent", console.port))
        .unwrap();
    assert!(
        b.source()
            .unwrap()
            .contains("No tool is waiting for consent")
    );
    b.click("nav a[href=\"/\"]").unwrap();
    let library = b.source().unwrap();
    assert!(library.contains("href=\"/tool/fake\""), "{library}");
    assert!(library.contains("100% of"), "{library}");
    b.screenshot(&shots.join("console-library.png")).unwrap();
    assert_png(&shots.join("console-library.png"));
    b.click("a[href=\"/tool/fake\"]").unwrap();
    let tool = b.source().unwrap();
    assert!(tool.contains("FAKE_API_KEY via console"), "{tool}");
    assert!(!tool.contains("s3cr3t"), "{tool}");
    drop(b);
    finish(server);

    // The event log says the console granted it.
    let (_, shown, _) = home.cli(&["tools", "show", "fake", "--json"]).unwrap();
    assert!(
        shown.contains("FAKE_API_KEY granted via console"),
        "{shown}"
    );
}
