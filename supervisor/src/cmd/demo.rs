//! `autotool demo`: offline, no key, one command. A scripted model (served on loopback by the
//! demo itself) plays an agent that needs a Hacker-News-like tool; a local fake API stands in
//! for the web. It shows, step by step: the tool written; a first version failing verification
//! and repaired; consent for a key; the tool mounted; the call answered; a key the tool echoes
//! back arriving redacted; a request to a host outside the key's allowlist refused. Then the
//! lifecycle half ([`lifecycle`]): the tool's upstream breaks and it is quarantined on the third
//! failure, `rehab` puts it back on trial, `search_tools` picks a working tool over a
//! better-described failing one, a rewrite breaking a trusted version's example is refused,
//! a tool built on the first one (`USES`) calls its key-echoing function and gets the key redacted,
//! and, once autotool has a model of its own, its adversarial stage catches a tool leaking its key.
//! All under the strict sandbox, or saying clearly why strict is unavailable.
//!
//! It runs on a fresh temporary `AUTOTOOL_HOME` (removed afterwards unless `--keep`), so it
//! never touches the user's tools, keys or approvals; the Python runtime is the user's own
//! (`~/.autotool/runtime`, created the first time with progress, or `AUTOTOOL_RUNTIME`).
//! Every milestone is checked: a run that misses one exits non-zero.

pub mod fakes;
pub mod lifecycle;

use crate::client::ConnectOptions;
use crate::home::Home;
use crate::own_model::agent::{AgentOptions, Step, provider_from_vars, run_agent_with};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// What the demo's user asks.
pub const TASK: &str = "What are the top three stories on Hacker News right now?";

/// The key the fake API wants (a fresh value each run).
pub const KEY_NAME: &str = "HN_API_KEY";

/// Where the key may be sent: the real-looking API host (the fake answers on loopback, which a
/// tool may always reach).
pub const KEY_HOST: &str = "hn.example";

/// What a run showed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Milestones {
    pub written: bool,
    pub first_failed: bool,
    pub repaired: bool,
    pub consent_asked: bool,
    pub answered: bool,
    pub key_redacted: bool,
    pub refused: bool,
    pub final_answer: bool,
    /// The lifecycle half.
    pub lifecycle: lifecycle::Shown,
}

impl Milestones {
    fn missing(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        for (ok, what) in [
            (self.written, "the tool written"),
            (self.first_failed, "a first version failing verification"),
            (self.repaired, "the repaired version mounted"),
            (self.consent_asked, "consent asked for the key"),
            (self.answered, "the call answered"),
            (self.key_redacted, "the echoed key arriving redacted"),
            (self.refused, "the request outside the allowlist refused"),
            (self.final_answer, "the final answer"),
        ] {
            if !ok {
                out.push(what);
            }
        }
        out.extend(self.lifecycle.missing());
        out
    }
}

/// Width of the demo's indented text.
const WIDTH: usize = 96;
/// Lines one message may take before its middle is left out.
const MAX_WRAPPED: usize = 5;

/// The first `n` non-empty lines of code, each cut at `width` (code is shown as a glimpse).
fn first_lines(text: &str, n: usize, width: usize) -> String {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .take(n)
        .map(|l| {
            let cut: String = l.chars().take(width).collect();
            format!(
                "      {cut}{}",
                if cut.chars().count() < l.chars().count() {
                    "…"
                } else {
                    ""
                }
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One message, whole, wrapped at word boundaries to [`WIDTH`]. When it would take more than
/// [`MAX_WRAPPED`] lines, its middle is left out: the start (what happened, and why) and the
/// end (where the command to run is) are kept.
fn wrapped(message: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in message.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > WIDTH {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    if lines.len() > MAX_WRAPPED {
        let tail = lines.split_off(lines.len() - 2);
        lines.truncate(MAX_WRAPPED - 3);
        lines.push("…".into());
        lines.extend(tail);
    }
    lines
        .iter()
        .map(|l| format!("      {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first `n` non-empty lines of `text`, each [`wrapped`].
fn messages(text: &str, n: usize) -> String {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .take(n)
        .map(wrapped)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Run the demo, printing to `out`. `keep`: leave the temporary home in place.
pub async fn run(out: Arc<Mutex<dyn Write + Send>>, keep: bool) -> anyhow::Result<Milestones> {
    let say = {
        let out = out.clone();
        move |text: String| {
            if let Ok(mut o) = out.lock() {
                let _ = writeln!(o, "{text}");
                let _ = o.flush();
            }
        }
    };

    // The sandbox: strict when this machine can confine, else say why and go on unconfined.
    let report =
        tokio::task::spawn_blocking(|| crate::cmd::doctor::confinement(None, None)).await?;
    let sandbox = if report.worst() == crate::cmd::doctor::Status::Fail {
        say("autotool demo: this machine cannot confine tools, so the demo runs them UNCONFINED (--sandbox off). Why:".into());
        for c in report
            .checks
            .iter()
            .filter(|c| c.status == crate::cmd::doctor::Status::Fail)
        {
            say(format!("  {}: {}", c.name, c.detail));
            if let Some(fix) = &c.fix {
                say(format!("    fix: {fix}"));
            }
        }
        "off"
    } else {
        "strict"
    };

    // The Python runtime: the user's own, made once.
    let user_home = Home::from_env()?;
    let runtime_dir = match std::env::var_os("AUTOTOOL_RUNTIME").filter(|v| !v.is_empty()) {
        Some(v) => std::path::PathBuf::from(v),
        None => {
            let dir = user_home.runtime_dir();
            let d = dir.clone();
            tokio::task::spawn_blocking(move || {
                let mut err = std::io::stderr();
                crate::tool::runtime::ensure_runtime(&d, &mut err)
            })
            .await??;
            dir
        }
    };

    let scratch = tempfile::Builder::new()
        .prefix("autotool-demo-")
        .tempdir()?;
    let home = Home::at(scratch.path());
    home.ensure()?;
    let keys = crate::credentials::KeyStore::open(&home);
    keys.allow(KEY_NAME, &[KEY_HOST.to_string()])?;

    let stop = CancellationToken::new();
    let key = format!(
        "demo-{}",
        crate::consent::hex(&crate::consent::random_bytes::<8>()?)
    );
    let broken = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let api = fakes::fake_api_switched(key.clone(), broken.clone(), stop.clone()).await?;
    let model = fakes::scripted_model(stop.clone()).await?;
    let mut vars = BTreeMap::new();
    vars.insert("AUTOTOOL_PROVIDER".into(), "chat".into());
    vars.insert("OPENAI_BASE_URL".into(), format!("http://{model}/v1"));
    vars.insert("OPENAI_LLM".into(), "autotool-demo-scripted".into());
    let provider = provider_from_vars(&vars)?;

    say(format!("autotool demo: {TASK}"));
    say(format!(
        "  model: a scripted agent on {model} (no key, no network); API: a fake on {api}; \
         sandbox: {sandbox}"
    ));
    say(format!(
        "  {KEY_NAME} is set and may only be sent to {KEY_HOST} (autotool keys allow {KEY_NAME} {KEY_HOST})"
    ));

    let consent_asked = Arc::new(AtomicUsize::new(0));
    let on_consent = {
        let say = say.clone();
        let asked = consent_asked.clone();
        Arc::new(move |question: &str| {
            asked.fetch_add(1, Ordering::Relaxed);
            say(format!("\n> consent: {question}"));
            say("  → yes (the demo answers for you; a real host asks you)".into());
            true
        })
    };
    let options = AgentOptions {
        connect: ConnectOptions {
            binary: None,
            args: vec!["serve".into(), "--sandbox".into(), sandbox.into()],
            env: vec![
                ("AUTOTOOL_HOME".into(), home.root().display().to_string()),
                ("AUTOTOOL_RUNTIME".into(), runtime_dir.display().to_string()),
                (KEY_NAME.into(), key.clone()),
                (
                    "HN_API_BASE".into(),
                    format!("http://localhost:{}", api.port()),
                ),
            ],
            on_consent: Some(on_consent),
            quiet: true,
        },
        ..AgentOptions::default()
    };

    let lifecycle_connect = options.connect.clone();
    let mut m = Milestones::default();
    let mut creates = 0;
    let observed = Arc::new(Mutex::new(Vec::<Step>::new()));
    let seen = observed.clone();
    let answer = run_agent_with(TASK, provider.as_ref(), options, |step| {
        if let Ok(mut s) = seen.lock() {
            s.push(step.clone());
        }
        match step {
            Step::Thought(t) => say(format!("\n> the agent thinks: {t}")),
            Step::Call { name, arguments } if name == "create_tool" => {
                creates += 1;
                let code = arguments["code"].as_str().unwrap_or("");
                say(format!(
                    "\n> step: the agent writes a tool, `{}` (attempt {creates}):",
                    arguments["name"].as_str().unwrap_or("?")
                ));
                say(first_lines(code, 8, 90));
            }
            Step::Call { name, arguments } => {
                say(format!("\n> step: call {name} {arguments}"));
            }
            Step::Result {
                name,
                text,
                is_error,
            } => {
                if name == "create_tool" {
                    if *is_error {
                        say("  verification failed; fed back to the agent:".into());
                        say(messages(text, 1));
                        if let Some(last) = text.lines().rev().find(|l| !l.trim().is_empty()) {
                            say(format!("      …\n{}", wrapped(last)));
                        }
                    } else {
                        say("  verified and mounted:".into());
                        say(messages(text, 1));
                    }
                } else {
                    say(format!("  {}:", if *is_error { "error" } else { "answer" }));
                    say(messages(text, 5));
                }
            }
            Step::Answer(a) => {
                say("\n> the agent answers:".into());
                say(messages(a, 10));
            }
        }
    })
    .await;
    if answer.is_ok() {
        let model_url = format!("http://{model}/v1");
        m.lifecycle = lifecycle::run(&home, lifecycle_connect, &model_url, &broken, &say).await?;
    }
    stop.cancel();

    let steps = observed.lock().map(|s| s.clone()).unwrap_or_default();
    let results: Vec<(String, String, bool)> = steps
        .iter()
        .filter_map(|s| match s {
            Step::Result {
                name,
                text,
                is_error,
            } => Some((name.clone(), text.clone(), *is_error)),
            _ => None,
        })
        .collect();
    let creates: Vec<&(String, String, bool)> =
        results.iter().filter(|r| r.0 == "create_tool").collect();
    m.written = !creates.is_empty();
    m.first_failed = creates.first().is_some_and(|r| r.2);
    m.repaired = creates
        .get(1)
        .is_some_and(|r| !r.2 && r.1.contains("Created hn"));
    m.consent_asked = consent_asked.load(Ordering::Relaxed) > 0;
    m.answered = results
        .iter()
        .any(|r| !r.2 && r.1.contains(fakes::STORIES[0].1));
    m.key_redacted = results
        .iter()
        .any(|r| r.1.contains(&format!("[REDACTED:{KEY_NAME}]")) && !r.1.contains(&key));
    m.refused = results
        .iter()
        .any(|r| r.1.contains("403") && r.1.contains(KEY_HOST));
    m.final_answer = answer
        .as_ref()
        .is_ok_and(|a| a.contains(fakes::STORIES[0].1));
    let leaked = steps.iter().any(|s| format!("{s:?}").contains(&key));

    if m.key_redacted {
        say(format!(
            "\n✔ the key the API echoed arrived as [REDACTED:{KEY_NAME}]; the model never saw it"
        ));
    }
    if m.refused {
        say(format!(
            "✔ the request to evil.example was refused: {KEY_NAME} may only go to {KEY_HOST}"
        ));
    }
    if keep {
        let kept = scratch.keep();
        say(format!(
            "the demo's home is kept at {} (AUTOTOOL_HOME={} autotool tools show hn)",
            kept.display(),
            kept.display()
        ));
    }
    if let Err(e) = &answer {
        anyhow::bail!("the demo's agent failed: {e:#}");
    }
    if leaked {
        anyhow::bail!("the key's value reached the agent: a redaction failure");
    }
    let missing = m.missing();
    if !missing.is_empty() {
        anyhow::bail!("the demo did not show: {}", missing.join(", "));
    }
    say("✔ every step of the demo happened".into());
    Ok(m)
}

/// `autotool demo`.
pub fn main(keep: bool) -> std::process::ExitCode {
    let out: std::sync::Arc<std::sync::Mutex<dyn std::io::Write + Send>> =
        std::sync::Arc::new(std::sync::Mutex::new(std::io::stdout()));
    super::cli::block_on("demo", run(out, keep))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_long_message_keeps_its_reason_and_the_command_at_its_end() {
        let refusal = "403: hn holds HN_API_KEY, which may only be sent to hn.example; \
                       evil.example is not on that list. To allow it, run: autotool keys allow \
                       HN_API_KEY hn.example evil.example";
        let shown = wrapped(refusal);
        assert!(
            shown.lines().all(|l| l.chars().count() <= WIDTH + 6),
            "{shown}"
        );
        let joined: Vec<&str> = shown.split_whitespace().collect();
        assert_eq!(
            joined.join(" "),
            refusal,
            "a message that fits is shown whole"
        );

        let long = format!(
            "verification failed at initialize: the tool did not start. {} Then run: autotool \
             tools approve hn HN_API_KEY",
            "filler words ".repeat(80)
        );
        let shown = wrapped(&long);
        assert_eq!(shown.lines().count(), MAX_WRAPPED, "{shown}");
        assert!(
            shown.starts_with("      verification failed at initialize:"),
            "{shown}"
        );
        assert!(shown.contains("\n      …\n"), "{shown}");
        assert!(
            shown
                .trim_end()
                .ends_with("autotool tools approve hn HN_API_KEY"),
            "{shown}"
        );
    }
}
