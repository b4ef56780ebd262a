//! A quick pass with `--sandbox off`: tools run as plain subprocesses, and the server handles
//! bad code, crashes, timeouts and unknown functions the same way.

use super::{HEALTHY, assert_serves, create_healthy, finish, instance, start};
use autotool_tests::serve::{Sandbox, Serve, ServeHome};
use serde_json::json;
use std::time::Duration;

#[test]
fn sandbox_off_quick_pass() {
    let home = ServeHome::new().unwrap();
    let mut server = start(&Serve::new(Sandbox::Off).call_timeout(2), &home);
    create_healthy(&mut server);

    // Unconfined: the tool sees the host's files (this is what the flag means).
    let home_path = home.path().display().to_string();
    assert_eq!(
        server
            .call_text("healthy__exists", json!({"path": home_path}))
            .unwrap(),
        "true",
        "with --sandbox off the tool should see {home_path}"
    );

    let first = instance(&mut server);
    let r = server
        .call_result("healthy__crash", json!({"status": 3}))
        .unwrap();
    assert!(r.is_error && r.text.contains("exit status 3"), "{}", r.text);
    let second = instance(&mut server);
    assert_ne!(first, second);

    let r = server
        .call_result("healthy__nap", json!({"seconds": 20}))
        .unwrap();
    assert!(
        r.is_error && r.text.contains("no answer within 2 s"),
        "{}",
        r.text
    );
    assert!(r.elapsed < Duration::from_secs(5), "took {:?}", r.elapsed);
    assert_ne!(instance(&mut server), second);

    let r = server
        .call_result(
            "run_tool",
            json!({"tool": HEALTHY, "function": "nope", "arguments": {}}),
        )
        .unwrap();
    assert!(r.is_error && r.text.contains("\"nope\""), "{}", r.text);

    let r = server
        .call_result(
            "create_tool",
            json!({"name": "broken", "code": "def f(:\n    pass\n"}),
        )
        .unwrap();
    assert!(
        r.is_error && r.text.contains("verification failed at lint"),
        "{}",
        r.text
    );

    let garbage = autotool_tests::serve::fixture("garbage_stdout.py").unwrap();
    let r = server
        .call_result("create_tool", json!({"name": "garbage", "code": garbage}))
        .unwrap();
    assert!(
        r.is_error && r.text.contains("verification failed at initialize"),
        "{}",
        r.text
    );
    assert_serves(&mut server, true, "the unconfined pass");
    let stderr = finish(server);
    assert!(
        stderr.contains("--sandbox off"),
        "no warning that tools run unconfined: {stderr}"
    );
}
