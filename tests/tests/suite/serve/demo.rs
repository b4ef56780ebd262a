//! `autotool demo`, as a user runs it: every step it promises shows up (the agent's half and the
//! lifecycle half), under the strict sandbox, and it exits 0 (it checks its own milestones and
//! exits non-zero on a miss).

use super::strict;
use autotool_tests::serve::ServeHome;

#[test]
fn the_demo_shows_every_step_under_the_strict_sandbox() {
    if strict().is_none() {
        return;
    }
    // The demo makes its own temporary home; this one only carries the test runtime.
    let home = ServeHome::new().unwrap();
    let (status, out, err) = home.cli(&["demo"]).unwrap();
    assert!(status.success(), "autotool demo failed: {err}\n{out}");
    for step in [
        "sandbox: strict",
        "the agent writes a tool, `hn` (attempt 1)",
        "verification failed",
        "No module named 'requests'",
        "> consent: Allow the tool `hn` to use HN_API_KEY? It can send HN_API_KEY only to hn.example.",
        "the agent writes a tool, `hn` (attempt 2)",
        "verified and mounted",
        "A sandbox for agent-written tools (412 points)",
        "Bearer [REDACTED:HN_API_KEY]",
        "403: hn holds HN_API_KEY, which may only be sent to hn.example; evil.example is not on that list",
        // Each failed call says why, not only the SDK's "Error executing tool top_stories".
        "call 1: failed: Error executing tool top_stories; it raised json.decoder.JSONDecodeError",
        "call 3: failed: Error executing tool top_stories; it raised json.decoder.JSONDecodeError",
        "✔ the ledger caught it on the third failure: hn is quarantined and off the tool list",
        "✔ rehab put hn back on probation: listed again, and it answers",
        "search_tools \"top stories on Hacker News\": stories then stories_plus",
        "verification failed at baseline",
        "v1 answered 212; this version answers 230",
        "✔ the rewrite was refused: it broke an example a trusted version met",
        "create_tool briefing: Created briefing v1",
        "✔ briefing got hn's answer with the key already [REDACTED:HN_API_KEY]",
        "verification failed at adversarial",
        "✔ the adversary's input read the key by its name; the tool was not mounted",
        // The command to run stays whole (long lines are wrapped, never cut).
        "the user can run `autotool keys allow HN_API_KEY hn.example evil.example`",
        "✔ every step of the demo happened",
    ] {
        // Long messages are wrapped at word boundaries: compare with the line breaks and
        // indents folded into single spaces.
        let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat(&out).contains(&flat(step)),
            "the demo did not show {step:?}:\n{out}"
        );
    }
    // The key's value (`demo-` and 16 hex digits) is never printed.
    let leaked = out.match_indices("demo-").any(|(i, _)| {
        let rest = &out[i + 5..];
        rest.len() >= 16 && rest[..16].bytes().all(|b| b.is_ascii_hexdigit())
    });
    assert!(!leaked, "the key's value was printed:\n{out}");
}
