//! Registry credentials and hostile registries, for `autotool tools pull`: basic auth on a real
//! `docker-registry` from `~/.docker/config.json`'s `auths` and from a credential helper
//! (`docker-credential-NAME get`); the bearer-token challenge flow, a redirect to another host
//! (followed without the credentials) and a garbage answer, from fake registries on loopback; a
//! baseline carried by an artifact, owed by the code it comes with. `library follow` checks the
//! credentials when it is run (a wrong password is said, exit 1).

use super::team::{craft, registry, run};
use autotool_tests::oci::{digest, fake};
use autotool_tests::serve::ServeHome;
use base64::Engine as _;
use serde_json::json;

/// A record naming its tool `../x`: refused after the registry was read, so reaching that
/// refusal shows the credentials worked.
fn traversal_record(code: &str) -> serde_json::Value {
    json!({
        "schema": 1, "name": "../x", "version": 1,
        "code_hash": digest(code.as_bytes()).trim_start_matches("sha256:"),
        "pin": "", "description": "", "functions": [], "required_env": [],
        "runtime_mcp": "mcp==2.3.0",
    })
}

#[test]
fn credentials_come_from_the_docker_config_and_its_helpers() {
    let Some(registry) = registry(Some(("alice", "pa55word"))) else {
        return;
    };
    let code = "print('hi')\n";
    craft(
        &registry,
        "v1",
        &traversal_record(code),
        code.as_bytes(),
        |_| {},
    );
    let reference = registry.reference("team/tools:v1");
    let home = ServeHome::new().unwrap();
    let docker = tempfile::tempdir().unwrap();
    let docker_dir = docker.path().to_str().unwrap().to_string();
    let pull = |env: &[(&str, &str)]| {
        let mut all = vec![("DOCKER_CONFIG", docker_dir.as_str())];
        all.extend_from_slice(env);
        let (ok, out, err) = run(
            &home,
            &["tools", "pull", &reference, "--allow-unsigned"],
            &all,
        );
        assert!(!ok, "{out}");
        err
    };
    let anonymous = pull(&[]);
    assert!(
        anonymous.contains("asks for a user name and password and none is kept"),
        "{anonymous}"
    );
    eprintln!("anonymous: {}", anonymous.trim());

    let host = format!("127.0.0.1:{}", registry.port);
    let write = |config: serde_json::Value| {
        std::fs::write(docker.path().join("config.json"), config.to_string()).unwrap();
    };
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    write(json!({"auths": {host.clone(): {"auth": b64("alice:wrong")}}}));
    let wrong = pull(&[]);
    assert!(wrong.contains("401"), "{wrong}");
    assert!(
        !wrong.contains("wrong"),
        "the password is in the message: {wrong}"
    );
    eprintln!("wrong password: {}", wrong.trim());
    // `library follow` checks the credentials when it is run, and says what it found.
    let follow = |home: &ServeHome| {
        let (ok, out, _) = run(
            home,
            &["library", "follow", &reference, "--json"],
            &[("DOCKER_CONFIG", docker_dir.as_str())],
        );
        (ok, serde_json::from_str::<serde_json::Value>(&out).unwrap())
    };
    let (ok, found) = follow(&home);
    eprintln!("library follow, wrong password: {found}");
    assert!(!ok, "{found}");
    assert_eq!(found["reached"], false, "{found}");
    assert_eq!(found["credentials"], "alice", "{found}");
    let said = found["problem"].as_str().unwrap_or_default();
    assert!(said.contains("401") && !said.contains("wrong"), "{found}");
    assert!(!said.ends_with(": "), "an empty quote: {found}");
    write(json!({"auths": {format!("https://{host}/v1/"): {"auth": b64("alice:pa55word")}}}));
    let through = pull(&[]);
    assert!(
        through.contains("is not a tool name"),
        "auths did not get through: {through}"
    );
    let (ok, found) = follow(&home);
    assert!(ok, "{found}");
    assert_eq!(found["reached"], true, "{found}");
    assert!(
        found["digest"]
            .as_str()
            .unwrap_or_default()
            .starts_with("sha256:"),
        "{found}"
    );

    // A credential helper, as `docker login` with a keychain leaves it.
    let bin = tempfile::tempdir().unwrap();
    let helper = bin.path().join("docker-credential-autotooltest");
    std::fs::write(
        &helper,
        "#!/bin/sh\nread registry\necho \"{\\\"ServerURL\\\":\\\"$registry\\\",\\\"Username\\\":\\\"alice\\\",\\\"Secret\\\":\\\"pa55word\\\"}\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&helper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    write(json!({"credHelpers": {host.clone(): "autotooltest"}}));
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let helped = pull(&[("PATH", path.as_str())]);
    assert!(
        helped.contains("is not a tool name"),
        "the helper did not get through: {helped}"
    );
    let missing = pull(&[]);
    assert!(
        missing.contains("docker-credential-autotooltest"),
        "{missing}"
    );
    assert!(!home.path().join("tools").join("x").exists());
}

#[test]
fn bearer_tokens_are_fetched_redirects_drop_them_and_garbage_is_refused() {
    // The blob store a redirect points at: another origin, which must never see the token.
    let (store, store_log) =
        fake(|_| (200, Vec::new(), b"<html>not a manifest{".to_vec())).unwrap();
    let registry_port = std::sync::Arc::new(std::sync::OnceLock::<u16>::new());
    let own = registry_port.clone();
    let (port, log) = fake(move |r| {
        let me = *own.get().unwrap_or(&0);
        if r.path.starts_with("/token") {
            return (200, Vec::new(), br#"{"token": "t0ken-for-pull"}"#.to_vec());
        }
        if r.header("authorization") != Some("Bearer t0ken-for-pull") {
            let challenge = format!(
                "Bearer realm=\"http://127.0.0.1:{me}/token\",service=\"fake\",scope=\"repository:team/tools:pull\""
            );
            return (
                401,
                vec![("www-authenticate".into(), challenge)],
                b"{}".to_vec(),
            );
        }
        let location = format!("http://127.0.0.1:{store}/elsewhere");
        (307, vec![("location".into(), location)], Vec::new())
    })
    .unwrap();
    registry_port.set(port).unwrap();
    let home = ServeHome::new().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let reference = format!("oci://127.0.0.1:{port}/team/tools:v1");
    let (ok, out, err) = run(
        &home,
        &["tools", "pull", &reference],
        &[("DOCKER_CONFIG", empty.path().to_str().unwrap())],
    );
    assert!(!ok, "{out}");
    assert!(err.contains("not an OCI image manifest"), "{err}");
    eprintln!("garbage: {}", err.trim());
    let seen = log.lock().unwrap().clone();
    let token = seen
        .iter()
        .find(|r| r.path.starts_with("/token"))
        .expect("no token asked");
    assert!(
        token
            .path
            .contains("scope=repository%3Ateam%2Ftools%3Apull"),
        "{}",
        token.path
    );
    assert!(
        seen.iter()
            .any(|r| r.header("authorization") == Some("Bearer t0ken-for-pull")),
        "the token was never used: {seen:?}"
    );
    let redirected = store_log.lock().unwrap().clone();
    assert_eq!(redirected.len(), 1, "{redirected:?}");
    assert_eq!(
        redirected[0].header("authorization"),
        None,
        "the token crossed hosts"
    );
}
