//! The team library end to end, against a real registry (Debian's `docker-registry`) on
//! 127.0.0.1, two homes standing for two people: A creates a tool, makes a signing key and
//! pushes; B trusts A's key, pulls (verified again there, on probation, no key granted), is
//! asked for the key's consent by its own host, and calls it. Every blob pushed is searched for
//! A's key value in each encoding; a tool holding it, raw or inside a base64 token, is not pushed. Then artifacts crafted by hand over the registry API
//! (tampered, unsigned, signed by an unknown key, oversized, a traversal name, a wrong type, a
//! type holding escape sequences, a publisher's host list with a shell tail, a layer that is not
//! what the config says) are each refused with their reason, leaving B's home
//! as it was; a tool pulled by digest is pinned. A tool's publisher is part of what it is: a
//! second trusted publisher's version, or an unsigned one, does not replace it without
//! `--new-publisher`; a scoped publisher signs nothing outside its scope; `trust add` of a
//! changed key is refused naming both fingerprints; every refused signature names its key.

use super::keys::SECRET;
use super::{asking, ok, strict, yes};
use autotool_tests::oci::{Registry, digest, fake, http, unavailable};
use autotool_tests::serve::{ServeHome, Server};
use base64::Engine as _;
use serde_json::{Value, json};

const REPO: &str = "team/tools";

const WEATHER: &str = r#"import os
from mcp.server.mcpserver import MCPServer

REQUIRED_ENV = ["FAKE_API_KEY"]
mcp = MCPServer("weather")


@mcp.tool()
def forecast(city: str) -> str:
    """The forecast for a city."""
    held = "key held" if os.environ.get("FAKE_API_KEY") else "no key"
    return "VERSION sunny in " + city + " (" + held + ")"


if __name__ == "__main__":
    mcp.run()
"#;

fn weather(version: &str) -> String {
    WEATHER.replace("VERSION", version)
}

/// A registry, or `None` after printing why it cannot run here.
pub(super) fn registry(basic: Option<(&str, &str)>) -> Option<Registry> {
    if let Some(why) = unavailable() {
        eprintln!("SKIP: {why}");
        return None;
    }
    Some(Registry::start(basic).unwrap())
}

/// `autotool ARGS` on `home` with the signing key in a file, `FAKE_API_KEY` set and no Docker
/// config: (success, stdout, stderr).
pub(super) fn run(home: &ServeHome, args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    // No Docker config of the user running the tests is read (a `credsStore` there would be
    // asked about 127.0.0.1); a test that wants one sets DOCKER_CONFIG itself.
    let no_config = home.path().join("no-docker-config");
    let mut all: Vec<(&str, &std::ffi::OsStr)> = vec![
        ("AUTOTOOL_TRUST_KEY_FILE", "1".as_ref()),
        ("FAKE_API_KEY", SECRET.as_ref()),
        ("DOCKER_CONFIG", no_config.as_os_str()),
    ];
    all.extend(env.iter().map(|(k, v)| (*k, std::ffi::OsStr::new(*v))));
    let (status, out, err) = home.cli_with(args, &all).unwrap();
    (status.success(), out, err)
}

#[track_caller]
fn must(home: &ServeHome, args: &[&str]) -> String {
    let (ok, out, err) = run(home, args, &[]);
    assert!(ok, "autotool {args:?} failed: {out}{err}");
    out
}

/// Run `autotool ARGS`, which must fail; its stderr.
#[track_caller]
fn refused(home: &ServeHome, args: &[&str]) -> String {
    let (ok, out, err) = run(home, args, &[]);
    assert!(
        !ok,
        "autotool {args:?} was expected to be refused: {out}{err}"
    );
    err
}

fn create(server: &mut Server, name: &str, code: &str) {
    let (outcome, _) = server
        .call_answering(
            "create_tool",
            json!({"name": name, "code": code, "description": "the weather where you are",
                   "smoke_test": {"function": "forecast", "arguments": {"city": "Oslo"}}}),
            yes,
        )
        .unwrap();
    ok(&outcome);
}

/// Every form of `SECRET` the redactor knows.
fn secret_forms() -> Vec<String> {
    let b64 = base64::engine::general_purpose::STANDARD.encode(SECRET);
    vec![
        SECRET.to_string(),
        SECRET
            .replace('@', "%40")
            .replace('/', "%2F")
            .replace(' ', "%20"),
        SECRET
            .replace('@', "%40")
            .replace('/', "%2F")
            .replace(' ', "+"),
        SECRET.replace('/', "\\/"),
        b64.trim_end_matches('=').to_string(),
    ]
}

fn tool_dirs(home: &ServeHome) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(home.path().join("tools"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A's artifact's manifest and config, as JSON, to craft others from.
fn published(registry: &Registry, tag: &str) -> (Value, Value, Vec<u8>) {
    let manifest: Value =
        serde_json::from_slice(&registry.get_manifest(REPO, tag).unwrap()).unwrap();
    let config_digest = manifest["config"]["digest"].as_str().unwrap();
    let (status, _, config) = registry
        .request(
            "GET",
            &format!("/v2/{REPO}/blobs/{config_digest}"),
            &[],
            &[],
        )
        .unwrap();
    assert_eq!(status, 200);
    let code_digest = manifest["layers"][0]["digest"].as_str().unwrap();
    let (_, _, code) = registry
        .request("GET", &format!("/v2/{REPO}/blobs/{code_digest}"), &[], &[])
        .unwrap();
    (manifest, serde_json::from_slice(&config).unwrap(), code)
}

/// Push a crafted artifact by hand under `tag`: `config` and `code` uploaded, the manifest
/// `edit`ed after it names them.
pub(super) fn craft(
    registry: &Registry,
    tag: &str,
    config: &Value,
    code: &[u8],
    edit: impl FnOnce(&mut Value),
) -> String {
    let config = serde_json::to_vec(config).unwrap();
    let config_digest = registry.push_blob(REPO, &config).unwrap();
    let code_digest = registry.push_blob(REPO, code).unwrap();
    let mut manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactType": "application/vnd.autotool.tool.v1",
        "config": {"mediaType": "application/vnd.autotool.tool.config.v1+json",
                   "digest": config_digest, "size": config.len()},
        "layers": [{"mediaType": "application/vnd.autotool.tool.code.v1.python",
                    "digest": code_digest, "size": code.len()}],
    });
    edit(&mut manifest);
    registry
        .put_manifest(REPO, tag, &serde_json::to_vec(&manifest).unwrap())
        .unwrap()
}

#[test]
fn a_tool_travels_between_two_homes_signed_and_verified_again_and_bad_artifacts_are_refused() {
    let Some(serve) = strict() else { return };
    let Some(registry) = registry(None) else {
        return;
    };
    let serve = serve.env("FAKE_API_KEY", SECRET);

    // A creates the tool, makes a key, pushes.
    let a = ServeHome::new().unwrap();
    let mut server = serve.start(&a).unwrap();
    server.initialize_with(asking()).unwrap();
    create(&mut server, "weather", &weather("v1"));
    create(
        &mut server,
        "leaky",
        &format!("# {SECRET}\n{}", weather("v1")),
    );
    // The key's value inside a longer base64 token, one byte in: its encoding there is not the
    // value's own base64 (which the check searched before).
    let token = base64::engine::general_purpose::STANDARD
        .encode([b"\x01".as_slice(), SECRET.as_bytes(), b"-build-7"].concat());
    assert!(
        !token.contains(
            base64::engine::general_purpose::STANDARD
                .encode(SECRET)
                .trim_end_matches('=')
        )
    );
    create(
        &mut server,
        "encoded",
        &format!("TOKEN = \"{token}\"\n{}", weather("v1")),
    );
    drop(server);
    must(&a, &["trust", "init"]);
    let pem = must(&a, &["trust", "show"]);
    assert!(pem.starts_with("-----BEGIN PUBLIC KEY-----"), "{pem}");
    let v1 = registry.reference(&format!("{REPO}:v1"));
    let pushed: Value =
        serde_json::from_str(&must(&a, &["tools", "push", "weather", &v1, "--json"])).unwrap();
    let digest1 = pushed["digest"].as_str().unwrap().to_string();
    eprintln!("A pushed weather v1 as {digest1}");

    // The guard: a tool whose code holds a key's value is not pushed.
    let leak = refused(
        &a,
        &[
            "tools",
            "push",
            "leaky",
            &registry.reference(&format!("{REPO}:leaky")),
        ],
    );
    assert!(leak.contains("would carry the value"), "{leak}");
    eprintln!("push of a tool holding a key value: {}", leak.trim());
    let leak = refused(
        &a,
        &[
            "tools",
            "push",
            "encoded",
            &registry.reference(&format!("{REPO}:encoded")),
        ],
    );
    assert!(
        leak.contains("would carry the base64 of FAKE_API_KEY"),
        "{leak}"
    );
    eprintln!("push of a tool holding a key's base64: {}", leak.trim());
    // No blob in the registry holds the key's value, in any encoding.
    let blobs = registry.blobs();
    assert!(
        blobs.len() >= 4,
        "config, code, signature config and payload: {}",
        blobs.len()
    );
    for blob in &blobs {
        let text = String::from_utf8_lossy(blob);
        for form in secret_forms() {
            assert!(
                !text.contains(&form),
                "a pushed blob holds the key value as {form:?}"
            );
        }
    }
    // The layout: an OCI 1.1 artifact of its own type, its signature under cosign's tag.
    let (manifest, config, code) = published(&registry, "v1");
    assert_eq!(manifest["artifactType"], "application/vnd.autotool.tool.v1");
    assert_eq!(config["name"], "weather");
    assert_eq!(config["required_env"], json!(["FAKE_API_KEY"]));
    assert!(config["runtime_mcp"].as_str().unwrap().starts_with("mcp=="));
    assert!(manifest["annotations"]["org.opencontainers.image.created"].is_string());
    assert_eq!(String::from_utf8_lossy(&code), weather("v1"));
    let sig_tag = digest1.replace(':', "-") + ".sig";
    let sig: Value =
        serde_json::from_slice(&registry.get_manifest(REPO, &sig_tag).unwrap()).unwrap();
    assert_eq!(sig["subject"]["digest"], digest1.as_str());
    assert!(sig["layers"][0]["annotations"]["dev.cosignproject.cosign/signature"].is_string());

    // B trusts A, pulls: verified here, on probation, nothing granted.
    let b = ServeHome::new().unwrap();
    let pem_file = b.path().join("alice.pem");
    std::fs::write(&pem_file, &pem).unwrap();
    let no_trust = refused(&b, &["tools", "pull", &v1]);
    assert!(no_trust.contains("trusts no publisher yet"), "{no_trust}");
    must(&b, &["trust", "add", "alice", pem_file.to_str().unwrap()]);
    let pulled: Value = serde_json::from_str(&must(&b, &["tools", "pull", &v1, "--json"])).unwrap();
    eprintln!("B pulled: {pulled}");
    assert_eq!(pulled["digest"], digest1.as_str());
    assert_eq!(pulled["signer"], "alice");
    assert_eq!(pulled["created"]["keys_granted"], json!([]));
    let notes = pulled["created"]["key_notes"].to_string();
    assert!(
        notes.contains("autotool tools approve weather FAKE_API_KEY"),
        "{notes}"
    );
    let shown = must(&b, &["tools", "show", "weather", "--json"]);
    assert!(shown.contains("probation"), "{shown}");
    assert!(
        shown.contains("pulled") && shown.contains(&digest1) && shown.contains("alice"),
        "{shown}"
    );
    // `tools list` says where it came from: the reference, the digest and who signed it.
    let listed: Value = serde_json::from_str(&must(&b, &["tools", "list", "--json"])).unwrap();
    let origin = listed
        .as_array()
        .and_then(|a| a.iter().find(|e| e["name"] == "weather"))
        .map(|e| e["origin"].to_string())
        .unwrap_or_default();
    assert!(
        origin.contains(v1.trim_start_matches("oci://"))
            && origin.contains(&digest1[..19])
            && origin.contains("signed by alice"),
        "{listed}"
    );

    // B's own host is asked for the key, then the call holds it.
    let mut server = serve.start(&b).unwrap();
    server.initialize_with(asking()).unwrap();
    let (outcome, asked) = server
        .call_answering("weather__forecast", json!({"city": "Bergen"}), yes)
        .unwrap();
    let answer = ok(&outcome).text.clone();
    assert!(answer.contains("v1 sunny in Bergen (key held)"), "{answer}");
    assert_eq!(asked.len(), 1, "{asked:?}");
    let question = asked[0]["message"].as_str().unwrap_or_default().to_string();
    assert!(
        question.contains("weather") && question.contains("FAKE_API_KEY"),
        "{question}"
    );
    eprintln!("B was asked: {question}");
    drop(server);

    // The OCI 1.1 referrers API, which distribution 2.8 lacks: a front that answers it and
    // forwards the rest to the registry, hiding cosign's tag, so only that path can succeed.
    let port = registry.port;
    let sig_digest = digest(&registry.get_manifest(REPO, &sig_tag).unwrap());
    let (d1, repo) = (digest1.clone(), REPO);
    let (front, log) = fake(move |r| {
        if r.path.starts_with(&format!("/v2/{repo}/referrers/{d1}")) {
            let index = json!({
                "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                               "digest": sig_digest, "size": 1,
                               "artifactType": "application/vnd.dev.cosign.artifact.sig.v1+json"}],
            });
            let ct = (
                "content-type".to_string(),
                "application/vnd.oci.image.index.v1+json".to_string(),
            );
            return (200, vec![ct], index.to_string().into_bytes());
        }
        if r.path.ends_with(".sig") {
            return (404, Vec::new(), b"{}".to_vec());
        }
        let accept = r.header("accept").unwrap_or("*/*").to_string();
        http(port, None, &r.method, &r.path, &[("Accept", &accept)], &[]).unwrap_or((
            502,
            Vec::new(),
            Vec::new(),
        ))
    })
    .unwrap();
    let via = must(
        &b,
        &[
            "tools",
            "pull",
            &format!("oci://127.0.0.1:{front}/{REPO}:v1"),
        ],
    );
    assert!(
        via.contains("signed by alice") && via.contains("already this code"),
        "{via}"
    );
    let paths: Vec<String> = log.lock().unwrap().iter().map(|r| r.path.clone()).collect();
    assert!(paths.iter().any(|p| p.contains("/referrers/")), "{paths:?}");
    assert!(!paths.iter().any(|p| p.ends_with(".sig")), "{paths:?}");
    let before = tool_dirs(&b);

    // Tampered: the manifest edited after signing, the signature copied along.
    let mut edited = manifest.clone();
    edited["annotations"]["org.opencontainers.image.description"] = json!("now with more");
    let tampered = registry
        .put_manifest(REPO, "tampered", &serde_json::to_vec(&edited).unwrap())
        .unwrap();
    let sig_bytes = registry.get_manifest(REPO, &sig_tag).unwrap();
    registry
        .put_manifest(REPO, &(tampered.replace(':', "-") + ".sig"), &sig_bytes)
        .unwrap();
    let why = refused(
        &b,
        &[
            "tools",
            "pull",
            &registry.reference(&format!("{REPO}:tampered")),
        ],
    );
    assert!(why.contains("no longer matches its signature"), "{why}");
    eprintln!("tampered: {}", why.trim());

    // Unsigned.
    let mut unsigned = manifest.clone();
    unsigned["annotations"]["org.opencontainers.image.description"] = json!("unsigned");
    registry
        .put_manifest(REPO, "unsigned", &serde_json::to_vec(&unsigned).unwrap())
        .unwrap();
    let unsigned_ref = registry.reference(&format!("{REPO}:unsigned"));
    let why = refused(&b, &["tools", "pull", &unsigned_ref]);
    assert!(
        why.contains("is not signed") && why.contains("--allow-unsigned"),
        "{why}"
    );
    eprintln!("unsigned: {}", why.trim());

    // Signed by a key B does not trust: the refusal names that key, and `--allow-unsigned`
    // does not take it (a signature by an unknown key is not "unsigned").
    let fingerprint = |home: &ServeHome, name: &str| {
        let list: Value = serde_json::from_str(&must(home, &["trust", "list", "--json"])).unwrap();
        list["publishers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap()["fingerprint"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let alice_fp = fingerprint(&b, "alice");
    let c = ServeHome::new().unwrap();
    must(&c, &["trust", "init"]);
    let other = b.path().join("mallory.pem");
    std::fs::write(&other, must(&c, &["trust", "show"])).unwrap();
    // A changed key under a trusted name is refused, naming both; a new name is added (control).
    let why = refused(&b, &["trust", "add", "alice", other.to_str().unwrap()]);
    assert!(
        why.contains(&alice_fp) && why.contains("autotool trust replace alice"),
        "{why}"
    );
    eprintln!("trust add with a changed key: {}", why.trim());
    assert_eq!(
        fingerprint(&b, "alice"),
        alice_fp,
        "the refusal changed alice"
    );
    must(&b, &["trust", "remove", "alice"]);
    must(&b, &["trust", "add", "mallory", other.to_str().unwrap()]);
    let mallory_fp = fingerprint(&b, "mallory");
    assert!(why.contains(&mallory_fp), "{why}");
    // The explicit step shows both, and keeps the old key retired (in a home of its own).
    let d = ServeHome::new().unwrap();
    must(&d, &["trust", "add", "alice", pem_file.to_str().unwrap()]);
    let replaced = must(&d, &["trust", "replace", "alice", other.to_str().unwrap()]);
    assert!(
        replaced.contains(&format!("{alice_fp} (old) -> {mallory_fp} (new)")),
        "{replaced}"
    );
    let listed = must(&d, &["trust", "list"]);
    assert!(listed.contains(&format!("retired {alice_fp}")), "{listed}");
    let why = refused(&b, &["tools", "pull", &v1]);
    assert!(
        why.contains("none by a publisher this machine trusts")
            && why.contains(&format!("signed by an unknown key {alice_fp}")),
        "{why}"
    );
    eprintln!("unknown key: {}", why.trim());
    let versions = |home: &ServeHome| {
        let shown: Value =
            serde_json::from_str(&must(home, &["tools", "show", "weather", "--json"])).unwrap();
        shown["versions"].clone()
    };
    let before_waiver = versions(&b);
    let why = refused(&b, &["tools", "pull", &v1, "--allow-unsigned"]);
    assert!(why.contains(&alice_fp), "{why}");
    assert_eq!(
        versions(&b),
        before_waiver,
        "--allow-unsigned took a foreign key's code"
    );
    must(&b, &["trust", "remove", "mallory"]);
    must(&b, &["trust", "add", "alice", pem_file.to_str().unwrap()]);

    // Hostile content, even when the signature check is waived.
    let hostile = |tag: &str, config: &Value, code: &[u8], edit: fn(&mut Value)| {
        craft(&registry, tag, config, code, edit);
        let r = registry.reference(&format!("{REPO}:{tag}"));
        refused(&b, &["tools", "pull", &r, "--allow-unsigned"])
    };
    let big = format!("{}\n# {}\n", weather("big"), "x".repeat(300 << 10));
    let mut big_config = config.clone();
    big_config["code_hash"] = json!(digest(big.as_bytes()).trim_start_matches("sha256:"));
    let why = hostile("oversized", &big_config, big.as_bytes(), |_| {});
    assert!(why.contains("more than the 262144 bytes"), "{why}");
    eprintln!("oversized: {}", why.trim());
    let mut traversal = config.clone();
    traversal["name"] = json!("../x");
    let why = hostile("traversal", &traversal, &code, |_| {});
    assert!(why.contains("\"../x\", which is not a tool name"), "{why}");
    eprintln!("traversal: {}", why.trim());
    let why = hostile("wrongtype", &config, &code, |m| {
        m["artifactType"] = json!("application/vnd.example.other.v1");
    });
    assert!(why.contains("not an autotool tool"), "{why}");
    eprintln!("wrong artifactType: {}", why.trim());
    // A registry's text drives no terminal; a publisher's host list is read by the
    // allowlist's rule (it is pasted into a command the user is told to run).
    let why = hostile("escapes", &config, &code, |m| {
        m["artifactType"] = json!("application/x\u{1b}]0;pwned\u{7}\u{1b}[2K");
    });
    assert!(why.contains(r"application/x\u001b]0;pwned\u0007"), "{why}");
    assert!(!why.contains('\u{1b}') && !why.contains('\u{7}'), "{why:?}");
    let mut hosts = config.clone();
    hosts["key_hosts"] =
        json!({"FAKE_API_KEY": ["api.example.com", "attacker.example; touch /tmp/x"]});
    let why = hostile("hosts", &hosts, &code, |_| {});
    assert!(
        why.contains("\"attacker.example; touch /tmp/x\", which is not a host"),
        "{why}"
    );
    eprintln!("host list entry that is not a host: {}", why.trim());
    let other_code = weather("evil");
    let why = hostile("mismatch", &config, other_code.as_bytes(), |_| {});
    assert!(
        why.contains("is not the code its config describes"),
        "{why}"
    );
    eprintln!("layer not the config's: {}", why.trim());
    assert_eq!(
        tool_dirs(&b),
        before,
        "a refused pull left something in B's home"
    );
    let events = must(&b, &["tools", "show", "weather", "--json"]);
    assert!(!events.contains("evil"), "{events}");

    // Pins: pulled by digest, a later version by tag does not replace it.
    let pinned = format!("{}@{digest1}", registry.reference(REPO));
    let same = must(&b, &["tools", "pull", &pinned]);
    assert!(same.contains("already this code"), "{same}");
    let mut server = serve.start(&a).unwrap();
    server.initialize_with(asking()).unwrap();
    create(&mut server, "weather", &weather("v2"));
    drop(server);
    let v2 = registry.reference(&format!("{REPO}:v2"));
    must(&a, &["tools", "push", "weather", &v2]);
    let why = refused(&b, &["tools", "pull", &v2]);
    assert!(
        why.contains("is pinned to") && why.contains(&digest1),
        "{why}"
    );
    eprintln!("pinned: {}", why.trim());
    let replaced = must(&b, &["tools", "pull", &v2, "--unpin"]);
    assert!(replaced.contains("Pulled weather version 2"), "{replaced}");

    // Following: B's serve looks at followed tags by itself and pulls what is new; a library
    // that is down or refused is reported by `library status` and holds nothing up.
    let v3 = registry.reference(&format!("{REPO}:v3"));
    // `library follow` says what it found: a tag not pushed yet, a registry down (exit 1,
    // followed all the same); a tag that resolves (exit 0).
    let (okay, out, _) = run(&b, &["library", "follow", &v3], &[]);
    assert!(!okay && out.contains("no tag v3"), "{out}");
    must(&b, &["library", "follow", &unsigned_ref]);
    let (okay, out, _) = run(
        &b,
        &["library", "follow", "oci://127.0.0.1:1/down/here"],
        &[],
    );
    assert!(
        !okay && out.contains("problem (registry not reached, anonymously)"),
        "{out}"
    );
    let mut server = serve.start(&a).unwrap();
    server.initialize_with(asking()).unwrap();
    create(&mut server, "weather", &weather("v3"));
    drop(server);
    let pushed3: Value =
        serde_json::from_str(&must(&a, &["tools", "push", "weather", &v3, "--json"])).unwrap();
    let digest3 = pushed3["digest"].as_str().unwrap().to_string();
    let mut server = serve
        .clone()
        .env("AUTOTOOL_FOLLOW_INTERVAL", "1s")
        .start(&b)
        .unwrap();
    server.initialize_with(asking()).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    let status = loop {
        let status: Value =
            serde_json::from_str(&must(&b, &["library", "status", "--json"])).unwrap();
        let list = status["following"].as_array().unwrap().clone();
        let done = list.iter().all(|f| f["checked_at"].is_string())
            && list.iter().any(|f| f["pulled"] == digest3.as_str());
        if done || std::time::Instant::now() > deadline {
            break list;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    eprintln!(
        "library status: {}",
        serde_json::to_string_pretty(&status).unwrap()
    );
    let by = |r: &str| status.iter().find(|f| f["reference"] == r).unwrap().clone();
    assert_eq!(by(&v3)["pulled"], digest3.as_str(), "{status:?}");
    assert!(by(&v3)["problem"].is_null(), "{status:?}");
    let unsigned_status = by(&unsigned_ref);
    assert!(
        unsigned_status["problem"]
            .as_str()
            .unwrap_or_default()
            .contains("is not signed"),
        "{status:?}"
    );
    assert!(unsigned_status["reached_at"].is_string());
    let down = by("oci://127.0.0.1:1/down/here:latest");
    assert!(
        down["reached_at"].is_null() && down["problem"].is_string(),
        "{status:?}"
    );
    let (outcome, _) = server
        .call_answering("weather__forecast", json!({"city": "Tromso"}), yes)
        .unwrap();
    let answer = ok(&outcome).text.clone();
    assert!(answer.contains("v3 sunny in Tromso"), "{answer}");
    drop(server);
    let (okay, out, _) = run(
        &b,
        &["library", "unfollow", "oci://127.0.0.1:1/down/here"],
        &[],
    );
    assert!(okay && out.contains("No longer following"), "{out}");

    // A second trusted publisher: C (carol) pulls alice's weather and pushes it signed by C.
    // Scoped elsewhere, carol's signature does not count here; scoped to this repository it
    // does, but weather is alice's, so carol's version is refused naming both publishers until
    // B says `--new-publisher`.
    must(&c, &["trust", "add", "alice", pem_file.to_str().unwrap()]);
    must(&c, &["tools", "pull", &v1]);
    let carol_ref = registry.reference(&format!("{REPO}:carol"));
    must(&c, &["tools", "push", "weather", &carol_ref]);
    let carol = other.to_str().unwrap();
    let elsewhere = "oci://127.0.0.1:1/team";
    must(&b, &["trust", "add", "carol", carol, "--scope", elsewhere]);
    let why = refused(&b, &["tools", "pull", &carol_ref]);
    assert!(
        why.contains(&format!(
            "carol ({mallory_fp}), who is trusted here only for {elsewhere}"
        )),
        "{why}"
    );
    eprintln!("outside its scope: {}", why.trim());
    let repo_scope = registry.reference(REPO);
    let rescoped = must(
        &b,
        &["trust", "add", "carol", carol, "--scope", &repo_scope],
    );
    assert!(rescoped.contains(&repo_scope), "{rescoped}");
    let why = refused(&b, &["tools", "pull", &carol_ref]);
    assert!(
        why.contains("weather is published by alice")
            && why.contains(&alice_fp)
            && why.contains("signed by carol")
            && why.contains(&mallory_fp)
            && why.contains("--new-publisher"),
        "{why}"
    );
    eprintln!("another publisher: {}", why.trim());
    let taken = must(&b, &["tools", "pull", &carol_ref, "--new-publisher"]);
    assert!(
        taken.contains("New publisher") && taken.contains("alice") && taken.contains("carol"),
        "{taken}"
    );
    let shown: Value =
        serde_json::from_str(&must(&b, &["tools", "show", "weather", "--json"])).unwrap();
    let current = shown["current"]["version"].clone();
    let current = shown["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["version"] == current)
        .unwrap()
        .clone();
    assert_eq!(current["publisher"]["name"], "carol", "{shown}");
    assert_eq!(current["publisher"]["key"], mallory_fp.as_str(), "{shown}");
    let text = must(&b, &["tools", "show", "weather"]);
    assert!(
        text.contains(&format!("published by alice ({alice_fp})"))
            && text.contains(&format!("published by carol ({mallory_fp})")),
        "{text}"
    );

    // A baseline carried by an artifact is owed by its code: an obligation the code does not
    // meet (a function a trusted version offered, gone) is refused by B's own verification;
    // the same code without it is taken (control). (Calls of a tool declaring keys are not made
    // by default, so an answer owed would be skipped, as for a local rewrite.) Unsigned, each
    // replaces weather only with `--new-publisher`: `--allow-unsigned` alone is refused.
    let v9 = weather("v9");
    let mut owed = config.clone();
    owed["code_hash"] = json!(digest(v9.as_bytes()).trim_start_matches("sha256:"));
    let plain = owed.clone();
    owed["baseline"] = json!([{
        "function": "hourly", "check": "smoke_test", "arguments": {"city": "Oslo"},
        "answer": "cloudy in Oslo", "exact": true, "since_version": 1,
    }]);
    craft(&registry, "owed", &owed, v9.as_bytes(), |_| {});
    let r = registry.reference(&format!("{REPO}:owed"));
    let why = refused(&b, &["tools", "pull", &r, "--allow-unsigned"]);
    assert!(
        why.contains("weather is published by carol")
            && why.contains("unsigned")
            && why.contains("--allow-unsigned --new-publisher"),
        "{why}"
    );
    eprintln!("unsigned over an existing tool: {}", why.trim());
    let why = refused(
        &b,
        &["tools", "pull", &r, "--allow-unsigned", "--new-publisher"],
    );
    assert!(
        why.contains("cloudy in Oslo") || why.contains("baseline"),
        "{why}"
    );
    // Said to the person who pulled, not to an agent that would repair the code.
    assert!(
        why.contains("did not pass verification on this machine")
            && !why.contains("create_tool")
            && !why.contains("create the tool again"),
        "{why}"
    );
    eprintln!("carried baseline broken: {}", why.trim());
    craft(&registry, "plain", &plain, v9.as_bytes(), |_| {});
    let r = registry.reference(&format!("{REPO}:plain"));
    let (okay, out, err) = run(
        &b,
        &["tools", "pull", &r, "--allow-unsigned", "--new-publisher"],
        &[],
    );
    assert!(okay && out.contains("UNSIGNED"), "{out}{err}");
    let text = must(&b, &["tools", "show", "weather"]);
    assert!(
        text.contains("published by nobody (pulled unsigned)"),
        "{text}"
    );
    assert!(
        err.contains("--allow-unsigned"),
        "the waiver is not said: {err}"
    );
}
