//! `autotool config`: every setting in effect, its value and where it came from; then
//! autotool's own model, as `$AUTOTOOL_HOME/.env` names it (the key masked: a few characters
//! and its length), as `model.*` rows (`--get model.name` reads one).

use std::io::Write;
use std::process::ExitCode;

/// `autotool config`: the settings `serve` would run with (but for its flags).
pub fn main(json: bool, get: Option<&str>, out: &mut impl Write) -> ExitCode {
    use crate::config;
    let resolved =
        config::Inputs::from_process(Default::default()).and_then(|i| config::resolve(&i));
    let config = match resolved {
        Ok(c) => c,
        Err(problems) => return super::fail("config", &problems.to_string()),
    };
    let model = model_rows(&config);
    let written = match get {
        Some(name) if name.starts_with("model.") && model.iter().any(|(n, _)| *n == name) => {
            let value = model.iter().find(|(n, _)| *n == name).map(|(_, v)| v);
            writeln!(out, "{}", value.map_or("", String::as_str))
        }
        Some(name) => match config.get(name) {
            Some(entry) => writeln!(out, "{}", entry.value),
            None => {
                let mut names: Vec<&str> = config::SETTINGS.iter().map(|s| s.name).collect();
                names.extend(model.iter().map(|(n, _)| *n));
                return super::fail(
                    "config",
                    &format!(
                        "no setting is called {name:?}; the settings are: {}",
                        names.join(", ")
                    ),
                );
            }
        },
        None if json => {
            let mut json = config::to_json(&config);
            if !model.is_empty() {
                let rows = model.iter().map(|(name, value)| {
                    let name = name.strip_prefix("model.").unwrap_or(name);
                    (name.to_string(), serde_json::Value::from(value.as_str()))
                });
                json["model"] = serde_json::Value::Object(rows.collect());
            }
            let text = serde_json::to_string_pretty(&json).unwrap_or_default();
            writeln!(out, "{text}")
        }
        None => config::render(&config, out).and_then(|()| render_model(&model, out)),
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        // `autotool config | head`: the reader has what it wanted.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => super::fail("config", &format!("cannot write the output: {e}")),
    }
}

/// The `model.*` rows (none in a build without the own model).
fn model_rows(config: &crate::config::Config) -> Vec<(&'static str, String)> {
    #[cfg(feature = "own-model")]
    {
        let file = crate::home::Home::at(&config.values.home).env_file();
        crate::own_model::settings::read(&file).rows()
    }
    #[cfg(not(feature = "own-model"))]
    {
        let _ = config;
        Vec::new()
    }
}

/// The model rows after the settings, under their own heading.
fn render_model(rows: &[(&str, String)], out: &mut impl Write) -> std::io::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\nautotool's own model (synthesize_tool; `autotool setup --model` changes it):"
    )?;
    let width = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    for (name, value) in rows {
        writeln!(out, "{name:width$}  {value}")?;
    }
    Ok(())
}
