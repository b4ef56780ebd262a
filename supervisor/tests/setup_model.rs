//! autotool's own model set up as a user does it, with no terminal (stdin a pipe): `autotool
//! setup --model` against a fake Chat Completions server on loopback (one test request, the
//! `.env` written 0600), a rerun that shows the values in effect and changes nothing, a key from
//! stdin that is never printed, a model that does not answer (nothing written, exit 1); then
//! `autotool config` showing the model with the key masked, and `autotool run --env-file`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/chat.rs"]
mod chat;

use chat::ChatFake;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Output, Stdio};

const KEY: &str = "sk-test-0123456789abcdefXYZ";

/// `autotool ARGS` with `AUTOTOOL_HOME=home`, stdin `input` (a pipe, so no terminal), and no
/// model variable of this process's environment.
fn autotool(home: &Path, args: &[&str], input: &str) -> Output {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_autotool"))
        .args(args)
        .env("AUTOTOOL_HOME", home)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_model_tests_writes_shows_and_keeps_the_key_out_of_sight() {
    let fake = ChatFake::start(|_| chat::say("ok")).await;
    let home = tempfile::tempdir().unwrap();
    let env_file = home.path().join(".env");
    std::fs::write(&env_file, "# mine\nTAVILY_API_KEY=tv\n").unwrap();

    // A local server: no key, one request with the model named.
    let h = home.path().to_owned();
    let base = fake.base_url.clone();
    let out = tokio::task::spawn_blocking(move || {
        autotool(
            &h,
            &[
                "setup",
                "--model",
                "--provider",
                "local",
                "--base-url",
                &base,
                "--model-name",
                "tiny",
            ],
            "",
        )
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let requests = fake.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0]["model"], "tiny");
    let written = std::fs::read_to_string(&env_file).unwrap();
    assert!(
        written.starts_with("# mine\nTAVILY_API_KEY=tv\n"),
        "{written}"
    );
    assert!(written.contains("OPENAI_LLM=tiny"), "{written}");
    let mode = std::fs::metadata(&env_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(
        text(&out).contains("test request: chat-completions tiny"),
        "{}",
        text(&out)
    );

    // A rerun without a terminal or a flag shows the values and changes nothing.
    let h = home.path().to_owned();
    let out = tokio::task::spawn_blocking(move || autotool(&h, &["setup", "--model"], ""))
        .await
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("current model: tiny over chat-completions"),
        "{}",
        text(&out)
    );
    assert_eq!(fake.requests().len(), 1);
    assert_eq!(std::fs::read_to_string(&env_file).unwrap(), written);

    // An OpenAI-compatible server with a key from stdin: the key is never printed.
    let h = home.path().to_owned();
    let base = fake.base_url.clone();
    let out = tokio::task::spawn_blocking(move || {
        autotool(
            &h,
            &[
                "setup",
                "--model",
                "--provider",
                "openai",
                "--base-url",
                &base,
                "--model-name",
                "big",
                "--key-stdin",
            ],
            &format!("{KEY}\n"),
        )
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains(KEY), "{}", text(&out));
    assert!(text(&out).contains("sk-t… (27 chars)"), "{}", text(&out));
    assert_eq!(fake.requests().len(), 2);
    let vars = std::fs::read_to_string(&env_file).unwrap();
    assert!(vars.contains(&format!("OPENAI_API_KEY={KEY}")), "{vars}");
    assert!(vars.contains("TAVILY_API_KEY=tv"), "{vars}");

    // `autotool config` shows the model, the key masked.
    let h = home.path().to_owned();
    let out = tokio::task::spawn_blocking(move || autotool(&h, &["config"], ""))
        .await
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let shown = text(&out);
    assert!(!shown.contains(KEY), "{shown}");
    for row in [
        "model.api       chat-completions",
        "model.name      big",
        "model.key       sk-t… (27 chars)",
    ] {
        assert!(shown.contains(row), "{row}: {shown}");
    }
    let h = home.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        autotool(&h, &["config", "--get", "model.base_url"], "")
    })
    .await
    .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        fake.base_url,
        "{}",
        text(&out)
    );
    let h = home.path().to_owned();
    let out = tokio::task::spawn_blocking(move || autotool(&h, &["config", "--json"], ""))
        .await
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["model"]["key"], "sk-t… (27 chars)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_does_not_answer_is_not_written() {
    let home = tempfile::tempdir().unwrap();
    // A port nothing listens on any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}/v1");
    let h = home.path().to_owned();
    let b = base.clone();
    let out = tokio::task::spawn_blocking(move || {
        autotool(
            &h,
            &[
                "setup",
                "--model",
                "--provider",
                "local",
                "--base-url",
                &b,
                "--model-name",
                "m",
            ],
            "",
        )
    })
    .await
    .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("nothing was written"), "{}", text(&out));
    assert!(!home.path().join(".env").exists());
    // Without a terminal a missing value is an error naming its flag, never a question.
    let h = home.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        autotool(&h, &["setup", "--model", "--provider", "anthropic"], "")
    })
    .await
    .unwrap();
    assert!(!out.status.success());
    assert!(text(&out).contains("--key-stdin"), "{}", text(&out));
    // --no-test writes it all the same.
    let h = home.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        autotool(
            &h,
            &[
                "setup",
                "--model",
                "--provider",
                "local",
                "--base-url",
                &base,
                "--model-name",
                "m",
                "--no-test",
            ],
            "",
        )
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(home.path().join(".env").exists());
}

#[test]
fn run_reads_the_env_file_it_is_given() {
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join(".env"), "OPENAI_API_KEY=sk-x\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_autotool"))
        .args([
            "run",
            "--env-file",
            "conf/none.env",
            "--model",
            "m",
            "anything",
        ])
        .current_dir(project.path())
        .env_remove("AUTOTOOL_HOME")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("conf/none.env"), "{stderr}");
    assert!(stderr.contains("does not exist"), "{stderr}");
}
