//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`, pinned with the
//! Node.js 22 it needs in `integration/conformance`) against `autotool serve --transport http
//! --no-auth` on a fresh home, once per spec revision it has requirements for
//! (`--requirements 2025-11-25`, then `2026-07-28`, both against the one serve). The suite
//! sends no token and `--no-auth` is refused on TCP, so the serve listens on its unix socket
//! and the test bridges a loopback port to it ([`UnixBridge`]).
//!
//! Every scenario must pass except those in `integration/conformance/expected-failures.txt`
//! (fixture-dependent ones, each with its reason), and every listed failure must still fail and
//! still run, so the list cannot rot. Per revision the test prints passed / failed / expected
//! failure counts and the reason of each expected failure.

use autotool_integration::conformance::{self, REVISIONS};
use autotool_integration::http::{HttpServe, UnixBridge};
use autotool_integration::{Checks, Need, TestHome, locate, setup};
use std::time::Duration;

/// The bound on one revision's run (the suite takes a few seconds here; each scenario has the
/// suite's own 30 s limit).
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

#[test]
fn conformance_suite_passes_all_but_the_listed_failures_in_both_revisions() {
    let test = "conformance_suite_passes_all_but_the_listed_failures_in_both_revisions";
    let Some(setup) = setup(test, &[Need::Serve, Need::Conformance]) else {
        return;
    };
    let Some(suite) = setup.conformance.clone() else {
        panic!("{test}: the conformance probe passed but left no suite");
    };
    let list_path = locate::conformance_expected_failures();
    let list = std::fs::read_to_string(&list_path)
        .unwrap_or_else(|e| panic!("{test}: reading {}: {e}", list_path.display()));
    let expected = conformance::parse_expected(&list)
        .unwrap_or_else(|e| panic!("{test}: {} is malformed:\n{e}", list_path.display()));

    let mut c = Checks::new();
    let home = TestHome::new(&setup).unwrap();
    let socket = home.path().join("conformance.sock");
    let serve = HttpServe::start(
        &home,
        &format!("unix:{}", socket.display()),
        &["--no-auth"],
        Duration::from_secs(60),
    )
    .unwrap();
    let bridge = UnixBridge::start(&socket, 100_000).unwrap();
    let url = bridge.url();
    eprintln!(
        "{test}: conformance {} on Node.js {} against {url}",
        suite.version, suite.node_version
    );

    let mut transcripts = String::new();
    for revision in REVISIONS {
        let out = home.path().join(format!("conformance-{revision}"));
        std::fs::create_dir_all(&out).unwrap();
        let run = conformance::run(&suite, &url, revision, &out, RUN_TIMEOUT).unwrap();
        let v = conformance::judge(revision, &run.results, &expected);
        eprintln!(
            "conformance {revision}: {} ({} scenarios in {:.1}s; suite exit {:?})",
            v.counts(),
            run.results.len(),
            run.elapsed.as_secs_f64(),
            run.exit
        );
        for (name, reason) in &v.expected {
            eprintln!("  expected failure: {revision} {name}: {reason}");
        }
        c.check(
            !run.results.is_empty(),
            &format!("{revision}: the suite ran scenarios"),
            &run.stdout,
        );
        c.check(
            v.unexpected.is_empty(),
            &format!("{revision}: every scenario passes but the listed ones"),
            v.unexpected.join("\n        "),
        );
        c.check(
            v.stale.is_empty(),
            &format!("{revision}: every listed failure still fails"),
            v.stale.join("\n        "),
        );
        c.check(
            v.not_run.is_empty(),
            &format!("{revision}: every listed failure is a scenario the suite ran"),
            v.not_run.join("\n        "),
        );
        transcripts.push_str(&format!(
            "--- conformance {revision} stdout\n{}\n--- stderr\n{}\n",
            run.stdout, run.stderr
        ));
    }

    let mut serve = serve;
    let alive = serve.child.wait_exit(Duration::ZERO).unwrap().is_none();
    c.check(
        alive,
        "the serve is still running after both runs",
        serve.child.stderr(),
    );
    c.finish(test, || {
        format!(
            "{transcripts}\n--- serve stderr\n{}",
            serve.child.final_stderr()
        )
    });
}
