//! A team library followed and left running, against a real registry (Debian's
//! `docker-registry`) on 127.0.0.1: A publishes, B's home runs two serves that follow.
//! - a push stores the manifest by digest and its signature before it moves the tag, and the
//!   same version pushed again (under any tag) is the same digest;
//! - a digest B refused as not signed (the tag seen before its signature) is tried again and
//!   taken once the signature is there, without the tag moving, by one of the two serves: one
//!   version, not two;
//! - a release refused because B pinned the tool is taken the round after `tools unpin`; one
//!   refused for a package set is taken the round after `tools approve --packages`; one signed
//!   by a publisher no longer trusted the round after `trust add`; `library status` shows each;
//! - `library follow` says what it found: no such tag (exit 1, no serve running), then the
//!   digest and the two serves (exit 0).

use super::team::{registry, run};
use super::{asking, ok, strict, yes};
use autotool_tests::index::{Index, Wheel};
use autotool_tests::locate;
use autotool_tests::oci::digest;
use autotool_tests::serve::{Serve, ServeHome, Server};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const REPO: &str = "team/follow";

/// A tool with no key, answering `word`.
fn hello(word: &str) -> String {
    format!(
        r#"from mcp.server.mcpserver import MCPServer

mcp = MCPServer("hello")


@mcp.tool()
def greet(city: str) -> str:
    """Greets a city."""
    return "{word} " + city


if __name__ == "__main__":
    mcp.run()
"#
    )
}

/// A tool declaring a package.
const FEEDS: &str = r#"from mcp.server.mcpserver import MCPServer
import helperdep

REQUIRED_PACKAGES = ["helperdep==2.0"]
mcp = MCPServer("feeds")


@mcp.tool()
def tag(word: str) -> str:
    """Tags a word."""
    return helperdep.PREFIX + word


if __name__ == "__main__":
    mcp.run()
"#;

#[track_caller]
fn must(home: &ServeHome, args: &[&str]) -> String {
    let (okay, out, err) = run(home, args, &[]);
    assert!(okay, "autotool {args:?} failed: {out}{err}");
    out
}

#[track_caller]
fn must_json(home: &ServeHome, args: &[&str]) -> Value {
    let out = must(home, args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

fn create(server: &mut Server, name: &str, code: &str) {
    let (outcome, _) = server
        .call_answering(
            "create_tool",
            json!({"name": name, "code": code, "description": "a team tool"}),
            yes,
        )
        .unwrap();
    ok(&outcome);
}

/// `serve` with the test's uv, a uv cache under `home`, and `index` as the only index.
fn with_uv(serve: &Serve, index: &Index, home: &ServeHome) -> Serve {
    let uv = locate::uv().unwrap_or_else(|e| panic!("{e:#}"));
    serve
        .clone()
        .env("AUTOTOOL_UV", &uv.to_string_lossy())
        .env(
            "UV_CACHE_DIR",
            &home.path().join("uv-cache").to_string_lossy(),
        )
        .env("UV_DEFAULT_INDEX", &index.url())
}

/// A started server, initialized by a host that can ask.
fn started(serve: &Serve, home: &ServeHome) -> Server {
    let mut server = serve.start(home).unwrap();
    server.initialize_with(asking()).unwrap();
    server
}

/// `reference`'s entry in B's `library status --json` once `done` holds of it (bounded: the
/// last entry seen when it never does).
fn status_when(home: &ServeHome, reference: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let status = must_json(home, &["library", "status", "--json"]);
        let entry = status["following"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["reference"] == reference)
            .cloned()
            .unwrap_or(Value::Null);
        if done(&entry) || Instant::now() > deadline {
            return entry;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn problem(entry: &Value) -> String {
    entry["problem"].as_str().unwrap_or_default().to_string()
}

/// A's home with `hello` (saying `word`) created and a signing key; B trusting A's key.
fn publisher(serve: &Serve, a: &ServeHome, b: &ServeHome, word: &str) {
    let mut server = started(serve, a);
    create(&mut server, "hello", &hello(word));
    drop(server);
    must(a, &["trust", "init"]);
    let pem = a.path().join("alice.pem");
    std::fs::write(&pem, must(a, &["trust", "show"])).unwrap();
    must(b, &["trust", "add", "alice", pem.to_str().unwrap()]);
}

#[test]
fn a_version_pushed_twice_is_one_digest_and_its_signature_is_stored_before_its_tag() {
    let Some(serve) = strict() else { return };
    let Some(registry) = registry(None) else {
        return;
    };
    let (a, b) = (ServeHome::new().unwrap(), ServeHome::new().unwrap());
    publisher(&serve, &a, &b, "hello");
    let latest = registry.reference(&format!("{REPO}:latest"));
    let push = |reference: &str| {
        let pushed = must_json(&a, &["tools", "push", "hello", reference, "--json"]);
        pushed["digest"].as_str().unwrap().to_string()
    };
    let first = push(&latest);
    let requests = registry.requests();
    eprintln!("first push: {requests:#?}");
    let at = |request: String| {
        requests
            .iter()
            .position(|r| *r == request)
            .unwrap_or_else(|| panic!("no {request} in {requests:#?}"))
    };
    let put = |reference: &str| format!("PUT /v2/{REPO}/manifests/{reference}");
    let sig_tag = first.replace(':', "-") + ".sig";
    let (by_digest, signature, tag) = (at(put(&first)), at(put(&sig_tag)), at(put("latest")));
    assert!(
        by_digest < signature && signature < tag,
        "the tag moved before the signature was stored: {requests:#?}"
    );
    // Pushed again, and under another tag: the same artifact, so no new release to follow.
    assert_eq!(push(&latest), first);
    assert_eq!(push(&registry.reference(&format!("{REPO}:v1"))), first);
    let manifest: Value =
        serde_json::from_slice(&registry.get_manifest(REPO, "latest").unwrap()).unwrap();
    eprintln!("the manifest: {manifest}");
    assert_eq!(
        manifest["annotations"]["org.opencontainers.image.source"],
        registry.reference(REPO).as_str()
    );
}

#[test]
fn a_follower_left_running_takes_every_release_once() {
    let Some(serve) = strict() else { return };
    let Some(registry) = registry(None) else {
        return;
    };
    let index = Index::start().unwrap();
    index.add_wheel(
        "helperdep",
        &Wheel::pure(
            "helperdep",
            "2.0",
            &[("helperdep.py", b"PREFIX = 'feed:'\n")],
            &[],
        ),
    );
    let (a, b) = (ServeHome::new().unwrap(), ServeHome::new().unwrap());
    let publishing = with_uv(&serve, &index, &a);
    publisher(&publishing, &a, &b, "v1");
    let latest = registry.reference(&format!("{REPO}:latest"));

    // Followed before anything is pushed, with no serve running: both said, exit 1.
    let (okay, out, err) = run(&b, &["library", "follow", &latest, "--json"], &[]);
    assert!(
        !okay,
        "a tag that does not exist passed the check: {out}{err}"
    );
    let checked: Value = serde_json::from_str(&out).unwrap();
    eprintln!("library follow, nothing pushed: {checked}");
    assert_eq!(checked["reached"], true, "{checked}");
    assert!(checked["digest"].is_null(), "{checked}");
    assert!(
        checked["problem"]
            .as_str()
            .unwrap_or_default()
            .contains("no tag latest"),
        "{checked}"
    );
    assert_eq!(checked["serves"], json!([]), "{checked}");
    let (_, text, _) = run(&b, &["library", "follow", &latest], &[]);
    assert!(text.contains("none runs on this home"), "{text}");

    // Two serves on B's home follow it every second.
    let following = with_uv(&serve, &index, &b).env("AUTOTOOL_FOLLOW_INTERVAL", "1s");
    let one = started(&following, &b);
    let two = started(&following, &b);

    // v1 pushed under another tag; its signature taken away, and its digest put under the
    // followed tag by hand: what a follower saw when a push moved the tag before signing.
    let pushed = must_json(
        &a,
        &[
            "tools",
            "push",
            "hello",
            &registry.reference(&format!("{REPO}:staging")),
            "--json",
        ],
    );
    let d1 = pushed["digest"].as_str().unwrap().to_string();
    let sig_tag = d1.replace(':', "-") + ".sig";
    let signature = registry.get_manifest(REPO, &sig_tag).unwrap();
    registry.delete_manifest(REPO, &digest(&signature)).unwrap();
    assert!(registry.get_manifest(REPO, &sig_tag).is_err());
    let manifest = registry.get_manifest(REPO, &d1).unwrap();
    registry.put_manifest(REPO, "latest", &manifest).unwrap();
    let refused = status_when(&b, &latest, |f| problem(f).contains("is not signed"));
    eprintln!("refused unsigned: {refused}");
    assert!(problem(&refused).contains("is not signed"), "{refused}");
    assert_eq!(refused["digest"], d1.as_str());
    assert_eq!(refused["retry"]["lasting"], false, "{refused}");
    // The signature arrives; the tag does not move: the follower tries the digest again.
    registry.put_manifest(REPO, &sig_tag, &signature).unwrap();
    let taken = status_when(&b, &latest, |f| f["pulled"] == d1.as_str());
    eprintln!("taken: {taken}");
    assert_eq!(taken["pulled"], d1.as_str(), "{taken}");
    assert!(
        taken["problem"].is_null() && taken["retry"].is_null(),
        "{taken}"
    );
    // By one of the two serves: one version.
    let shown = must_json(&b, &["tools", "show", "hello", "--json"]);
    assert_eq!(
        shown["versions"].as_array().unwrap().len(),
        1,
        "two serves pulled the same digest: {shown}"
    );

    // Now the check finds the tag and both serves.
    let checked = must_json(&b, &["library", "follow", &latest, "--json"]);
    eprintln!("library follow, two serves: {checked}");
    assert_eq!(checked["digest"], d1.as_str(), "{checked}");
    assert!(checked["problem"].is_null(), "{checked}");
    assert_eq!(checked["already"], true, "{checked}");
    let serves = checked["serves"].as_array().unwrap();
    assert_eq!(serves.len(), 2, "{checked}");
    assert!(serves.iter().all(|s| s["every_ms"] == 1000), "{checked}");

    // B pins hello: A's v2 waits for the unpin, and is taken the round after it.
    must(&b, &["tools", "pin", "hello"]);
    let mut server = started(&publishing, &a);
    create(&mut server, "hello", &hello("v2"));
    drop(server);
    let pushed = must_json(&a, &["tools", "push", "hello", &latest, "--json"]);
    let d2 = pushed["digest"].as_str().unwrap().to_string();
    let waits = status_when(&b, &latest, |f| f["retry"]["cure"]["kind"] == "unpin");
    eprintln!("waits for the unpin: {waits}");
    assert!(
        problem(&waits).contains("autotool tools unpin hello"),
        "{waits}"
    );
    assert_eq!(waits["digest"], d2.as_str(), "{waits}");
    // Not soon by itself: only the cure brings it back before an hour.
    assert_eq!(waits["retry"]["lasting"], true, "{waits}");
    let text = must(&b, &["library", "status"]);
    assert!(
        text.contains("tried again: at") && text.contains("`autotool tools unpin hello`"),
        "{text}"
    );
    must(&b, &["tools", "unpin", "hello"]);
    let taken = status_when(&b, &latest, |f| f["pulled"] == d2.as_str());
    eprintln!("taken after the unpin: {taken}");
    assert_eq!(taken["pulled"], d2.as_str(), "{taken}");
    assert!(taken["problem"].is_null(), "{taken}");

    // A tool declaring a package: it waits for the approval its status names.
    let feeds = registry.reference(&format!("{REPO}:feeds"));
    let mut server = started(&publishing, &a);
    create(&mut server, "feeds", FEEDS);
    drop(server);
    let pushed = must_json(&a, &["tools", "push", "feeds", &feeds, "--json"]);
    let d3 = pushed["digest"].as_str().unwrap().to_string();
    must(&b, &["library", "follow", &feeds]);
    let waits = status_when(&b, &feeds, |f| f["retry"]["cure"]["kind"] == "packages");
    eprintln!("waits for the packages: {waits}");
    assert!(
        problem(&waits).contains("autotool tools approve feeds --packages"),
        "{waits}"
    );
    assert_eq!(waits["retry"]["lasting"], true, "{waits}");
    must(&b, &["tools", "approve", "feeds", "--packages"]);
    let taken = status_when(&b, &feeds, |f| f["pulled"] == d3.as_str());
    eprintln!("taken after the approval: {taken}");
    assert_eq!(taken["pulled"], d3.as_str(), "{taken}");
    assert!(taken["problem"].is_null(), "{taken}");

    // B stops trusting alice: v3 waits for a change to the publishers trusted, and is taken the
    // round after alice's key is added again.
    must(&b, &["trust", "remove", "alice"]);
    let mut server = started(&publishing, &a);
    create(&mut server, "hello", &hello("v3"));
    drop(server);
    let pushed = must_json(&a, &["tools", "push", "hello", &latest, "--json"]);
    let d4 = pushed["digest"].as_str().unwrap().to_string();
    let waits = status_when(&b, &latest, |f| f["retry"]["cure"]["kind"] == "trust");
    eprintln!("waits for a publisher: {waits}");
    assert!(problem(&waits).contains("trust add"), "{waits}");
    assert_eq!(waits["retry"]["lasting"], true, "{waits}");
    let pem = a.path().join("alice.pem");
    must(&b, &["trust", "add", "alice", pem.to_str().unwrap()]);
    let taken = status_when(&b, &latest, |f| f["pulled"] == d4.as_str());
    eprintln!("taken after trust add: {taken}");
    assert_eq!(taken["pulled"], d4.as_str(), "{taken}");
    let shown = must_json(&b, &["tools", "show", "hello", "--json"]);
    assert_eq!(
        shown["versions"].as_array().unwrap().len(),
        3,
        "each release once: {shown}"
    );
    drop((one, two));
}
