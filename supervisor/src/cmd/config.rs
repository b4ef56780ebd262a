//! `autotool config`: every setting in effect, its value and where it came from.

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
    let written = match get {
        Some(name) => match config.get(name) {
            Some(entry) => writeln!(out, "{}", entry.value),
            None => {
                let names: Vec<&str> = config::SETTINGS.iter().map(|s| s.name).collect();
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
            let text = serde_json::to_string_pretty(&config::to_json(&config)).unwrap_or_default();
            writeln!(out, "{text}")
        }
        None => config::render(&config, out),
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        // `autotool config | head`: the reader has what it wanted.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => super::fail("config", &format!("cannot write the output: {e}")),
    }
}
