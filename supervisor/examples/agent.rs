//! autotool's agent as a library: `run_agent_with` against a spawned `autotool serve`, offline.
//!
//! The model is the scripted one of `autotool demo` and the web is a fake Hacker-News-like API,
//! both on loopback; swap in your own model with `provider_from_vars` (see docs/agent.md).
//!
//! ```sh
//! cargo build -p autotool -p autotool-launcher
//! AUTOTOOL_RUNTIME=/opt/autotool-test-runtime cargo run -p autotool --example agent
//! ```

use autotool::client::ConnectOptions;
use autotool::cmd::demo::fakes::{fake_api, scripted_model};
use autotool::own_model::agent::{AgentOptions, Step, provider_from_vars, run_agent_with};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let stop = CancellationToken::new();
    let model = scripted_model(stop.clone()).await?;
    let api = fake_api("hn-example-key-123456".into(), stop.clone()).await?;
    // What a `.env` would hold; for a real model: OPENAI_API_KEY=… or ANTHROPIC_API_KEY=….
    let vars = BTreeMap::from([
        ("OPENAI_BASE_URL".to_string(), format!("http://{model}/v1")),
        ("OPENAI_LLM".to_string(), "scripted".to_string()),
    ]);
    let provider = provider_from_vars(&vars)?;

    let home = tempfile::tempdir()?;
    let options = AgentOptions {
        connect: ConnectOptions {
            env: vec![
                ("AUTOTOOL_HOME".into(), home.path().display().to_string()),
                ("HN_API_KEY".into(), "hn-example-key-123456".into()),
                ("HN_API_BASE".into(), format!("http://{api}")),
            ],
            // autotool asks before a tool gets a key; this program says yes.
            on_consent: Some(Arc::new(|question: &str| {
                eprintln!("consent? {question} -> yes");
                true
            })),
            quiet: true,
            ..ConnectOptions::default()
        },
        ..AgentOptions::default()
    };
    let answer = run_agent_with(
        "What are the top stories on the HN-like API?",
        provider.as_ref(),
        options,
        |step| match step {
            Step::Call { name, .. } => eprintln!("call   {name}"),
            Step::Result { text, is_error, .. } => {
                let first = text.lines().next().unwrap_or_default();
                eprintln!("{}  {first}", if *is_error { "failed" } else { "result" });
            }
            Step::Thought(_) | Step::Answer(_) => {}
        },
    )
    .await?;
    stop.cancel();
    eprintln!("\n{answer}");
    Ok(())
}
