//! `autotool forge "<need>" [--out FILE] [--yes]`: one synthesis from the shell. autotool's own
//! model (`$AUTOTOOL_HOME/.env`, the one `synthesize_tool` uses) writes a tool for the need,
//! which goes through the same gate as every tool (verified confined, the adversarial stage
//! included, then mounted in the home's library); the candidate's code and verdicts are
//! printed, and the code written to `--out` when asked.
//!
//! It asks first, on the terminal, with No as the default: the model's requests are billed to
//! the user, and code the model writes is run (confined) to verify it. Without a terminal it
//! refuses unless `--yes` says yes beforehand; it never blocks on a pipe. The exit status is 0
//! when a candidate passed, 1 when none did (or nothing was done), 2 for a refused command line.
//!
//! The synthesis itself is `autotool serve`'s `synthesize_tool`, run by a serve this command
//! starts and talks to over stdio, so the rounds, bounds, redaction and ledger events are
//! exactly a host's.

use crate::client::{ConnectOptions, connect};
use crate::home::Home;
use crate::own_model::synthesize::OwnModel;
use crate::registry::Registry;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// What `forge` was asked.
#[derive(Debug, Clone, Default)]
pub struct ForgeOptions {
    /// Where to write the candidate's code.
    pub out: Option<PathBuf>,
    /// Yes without asking (for scripts: no terminal to ask on).
    pub yes: bool,
}

/// Why nothing was synthesized.
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error("{0}. Set the model up with `autotool setup --model`.")]
    NoModel(String),
    #[error(
        "nobody to ask: stdin is not a terminal. Add --yes to let the model write the tool and autotool run it, confined, to verify it."
    )]
    NoTerminal,
    #[error("not confirmed; nothing was done.")]
    Declined,
}

/// Run `forge`; the exit status as the module says.
pub fn main(need: &str, options: &ForgeOptions, out: &mut dyn Write) -> ExitCode {
    let need = need.trim();
    if need.is_empty() {
        eprintln!("autotool forge: say what the tool is for, in plain words");
        return ExitCode::from(2);
    }
    let home = match Home::from_env() {
        Ok(home) => home,
        Err(e) => return failed(&e.to_string()),
    };
    let model = OwnModel::read(&home.env_file());
    let asked = match model.provider() {
        None => Err(Refused::NoModel(model.why_not().to_string())),
        Some(provider) => consent(need, &provider.describe(), options.yes),
    };
    if let Err(why) = asked {
        return failed(&why.to_string());
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return failed(&format!("cannot start the async runtime: {e}")),
    };
    let result = match runtime.block_on(synthesize(need)) {
        Ok(result) => result,
        Err(e) => return failed(&format!("{e:#}")),
    };
    match report(&home, &result, options, out) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => failed(&format!("{e:#}")),
    }
}

fn failed(why: &str) -> ExitCode {
    crate::terminal::eprint_line(&format!("autotool forge: {why}"));
    ExitCode::FAILURE
}

/// Ask on the terminal (stderr, so stdout carries only the candidate); No is the default.
fn consent(need: &str, model: &str, yes: bool) -> Result<(), Refused> {
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(Refused::NoTerminal);
    }
    let shown: String = need.chars().take(200).collect();
    eprint!(
        "Ask {model} to write a tool for {shown:?}, run it confined here to verify it, and keep it in your library if it passes? [y/N] "
    );
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return Err(Refused::Declined);
    }
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Ok(()),
        _ => Err(Refused::Declined),
    }
}

/// `synthesize_tool {need}` on a serve of this home.
async fn synthesize(need: &str) -> anyhow::Result<CallToolResult> {
    let client = connect(ConnectOptions {
        quiet: true,
        ..ConnectOptions::default()
    })
    .await?;
    let result = client
        .call_tool(
            "synthesize_tool",
            json!({ "need": need })
                .as_object()
                .cloned()
                .unwrap_or_default(),
        )
        .await;
    let _ = client.close().await;
    Ok(result?)
}

/// Print the outcome; write the code where asked. Whether a candidate passed.
fn report(
    home: &Home,
    result: &CallToolResult,
    options: &ForgeOptions,
    out: &mut dyn Write,
) -> anyhow::Result<bool> {
    let text: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| match c {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    let text = text.join("\n");
    let created = result.structured_content.as_ref();
    let tool = created.and_then(|s| s["tool"].as_str());
    let version = created
        .and_then(|s| s["version"].as_u64())
        .and_then(|v| u32::try_from(v).ok());
    let (Some(tool), Some(version), false) = (tool, version, result.is_error == Some(true)) else {
        eprintln!("autotool forge: no candidate passed verification");
        // The model's and the verifier's words: escaped like every line printed.
        crate::terminal::eprint_line(&text);
        return Ok(false);
    };
    let registry = Registry::open(home)?;
    let found = registry
        .get_version(tool, version)?
        .ok_or_else(|| anyhow::anyhow!("{tool} v{version} is not in the registry"))?;
    let path = registry.file_of(&found);
    let code = std::fs::read_to_string(&path)
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
    writeln!(out, "# {tool} v{version}, mounted: {}", path.display())?;
    writeln!(out, "{}", code.trim_end())?;
    writeln!(out, "# verdicts:")?;
    for verdict in created
        .and_then(|s| s["verdicts"].as_array())
        .into_iter()
        .flatten()
    {
        writeln!(out, "#   {}", shown(verdict))?;
    }
    if let Some(check) = created.map(|s| &s["trigger_check"]) {
        let said = check["summary"].as_str().or(check["skipped"].as_str());
        if let Some(said) = said {
            writeln!(out, "#   trigger: {said}")?;
        }
    }
    if let Some(file) = &options.out {
        std::fs::write(file, &code)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", file.display()))?;
        eprintln!(
            "autotool forge: wrote {tool} v{version} to {}",
            file.display()
        );
    }
    Ok(true)
}

/// A verdict as `tools show` prints it.
fn shown(verdict: &Value) -> String {
    match serde_json::from_value::<crate::verify::Verdict>(verdict.clone()) {
        Ok(v) => v.to_string(),
        Err(_) => verdict.to_string(),
    }
}
