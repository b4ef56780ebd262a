//! `autotool tools rollback|pin|unpin|verify|logs`: what a user reaches for when a tool went
//! wrong or must not change: back to a version it trusted, hold the current version, verify it
//! again now, read what it wrote to stderr.

use super::CliError;
use crate::home::Home;
use crate::registry::{Registry, RegistryError};
use std::io::{Read, Seek, SeekFrom, Write};

/// Bytes of a tool's stderr `tools logs` prints unless told.
pub const LOG_BYTES: u64 = 16 << 10;

#[derive(Debug, Clone, clap::Subcommand)]
pub enum SteerCmd {
    /// Make an earlier trusted version current again; its baseline stays.
    ///
    /// VERSION must be one that was active once (trusted); without it, the newest trusted
    /// version before the current one. It becomes the current version, active, in every
    /// running server within a second; what later versions owe (the baseline) is kept.
    Rollback {
        /// The tool's name.
        name: String,
        /// The version to go back to (`tools show NAME` lists them).
        version: Option<u32>,
    },
    /// Pin a tool: nothing replaces its current version until it is unpinned.
    ///
    /// An agent's rewrite (create_tool or synthesize_tool of the same name), a pull, a followed
    /// library, a changed or hand-placed tool.py: each is refused, saying the tool is pinned and
    /// how to unpin it (a `pin_held` event). Rollback and remove still work: they are the
    /// user's own. Takes effect at once in every running server.
    Pin {
        /// The tool's name.
        name: String,
    },
    /// Unpin a tool: new versions may replace its current one again.
    Unpin {
        /// The tool's name.
        name: String,
    },
    /// Verify a tool's current version again, now.
    ///
    /// For after a runtime, key or kernel change: the gate a new version passes (lint, a
    /// confined launch with the keys it holds today, its functions listed, its baseline; not
    /// the robustness probes, passed when it was created), on a copy of its pinned code. No new
    /// version is made and its state is left alone; the outcome is an event. Exits 1 when it
    /// fails, with the stage and the redacted log.
    Verify {
        /// The tool's name.
        name: String,
    },
    /// Print what a tool wrote to stderr (the newest part, redacted).
    ///
    /// Kept in $AUTOTOOL_HOME/logs/tools/NAME.log (the older part in NAME.log.1), redacted with
    /// the key values the process held when it was written, and again with those held now.
    Logs {
        /// The tool's name.
        name: String,
        /// How many of the newest bytes to print (at most 512KiB).
        #[arg(long, default_value_t = LOG_BYTES)]
        bytes: u64,
    },
}

pub(super) fn run(
    home: &Home,
    registry: &Registry,
    cmd: SteerCmd,
    out: &mut impl Write,
) -> Result<(), CliError> {
    match cmd {
        SteerCmd::Rollback { name, version } => rollback(registry, &name, version, out),
        SteerCmd::Pin { name } => {
            let said = crate::console::actions::pin(registry, &name)?;
            Ok(writeln!(out, "{said}")?)
        }
        SteerCmd::Unpin { name } => {
            let said = crate::console::actions::unpin(registry, &name)?;
            Ok(writeln!(out, "{said}")?)
        }
        SteerCmd::Verify { name } => verify(home, registry, &name, out),
        SteerCmd::Logs { name, bytes } => logs(home, registry, &name, bytes, out),
    }
}

fn rollback(
    registry: &Registry,
    name: &str,
    version: Option<u32>,
    out: &mut impl Write,
) -> Result<(), CliError> {
    let check = |v: u32| {
        let Ok(Some(version)) = registry.get_version(name, v) else {
            return Err(format!("{name} v{v} cannot be read"));
        };
        let file = registry.file_of(&version);
        match std::fs::read(&file) {
            Ok(code) if crate::version::code_hash(&code) == version.code_hash => Ok(()),
            Ok(_) => Err(format!(
                "{} no longer holds the code {name} v{v} was verified with",
                file.display()
            )),
            Err(e) => Err(format!("cannot read {}: {e}", file.display())),
        }
    };
    let done = registry
        .ledger()
        .roll_back(name, version, check)
        .map_err(|e| anyhow::anyhow!("cannot roll {name} back: {e}"))?
        .map_err(|why| anyhow::anyhow!("cannot roll {name} back: {why}"))?;
    writeln!(
        out,
        "{name} is back at v{} (active), from v{}; its baseline stays. Running `autotool serve` \
         processes switch within a second.",
        done.to, done.from
    )?;
    Ok(())
}

fn verify(
    home: &Home,
    registry: &Registry,
    name: &str,
    out: &mut impl Write,
) -> Result<(), CliError> {
    if registry.get(name)?.is_none() {
        return Err(RegistryError::NotFound(name.to_string()).into());
    }
    let config = crate::config::Inputs::from_process(Default::default())
        .and_then(|inputs| crate::config::resolve(&inputs))
        .map_err(|problems| anyhow::anyhow!("{problems}"))?;
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let library = crate::library::Library::new(config.settings(), home.clone())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let outcome = tokio.block_on(async {
        let outcome = library.reverify(name).await;
        library.pool.shutdown().await;
        outcome
    });
    match outcome {
        Ok(Some(done)) => {
            writeln!(
                out,
                "{name} v{} passed verification again ({} ms): {}",
                done.version,
                done.took.as_millis(),
                done.robustness
            )?;
            for v in &done.verdicts {
                writeln!(out, "  {}", crate::cmd::events::shown(&v.to_string(), 160))?;
            }
            Ok(())
        }
        Ok(None) => Err(RegistryError::NotFound(name.to_string()).into()),
        Err(e) => {
            let log = match &e {
                crate::library::CreateError::Verify(f) if !f.log.trim().is_empty() => {
                    format!("\n{}", tail(&f.log, 4 << 10))
                }
                _ => String::new(),
            };
            Err(anyhow::anyhow!("{name} failed verification: {e}{log}").into())
        }
    }
}

/// The newest `max` bytes of `text`, from a line start.
fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.trim_end().to_string();
    }
    let mut at = text.len() - max;
    while !text.is_char_boundary(at) {
        at += 1;
    }
    let rest = &text[at..];
    rest.split_once('\n')
        .map_or(rest, |(_, r)| r)
        .trim_end()
        .to_string()
}

fn logs(
    home: &Home,
    registry: &Registry,
    name: &str,
    bytes: u64,
    out: &mut impl Write,
) -> Result<(), CliError> {
    if registry.tool(name)?.is_none() {
        return Err(RegistryError::NotFound(name.to_string()).into());
    }
    let bytes = bytes.min(2 * crate::tool::process::STDERR_FILE_CAP);
    let path = home.tool_log(name);
    let mut aside = path.clone().into_os_string();
    aside.push(".1");
    // The newest `bytes`: the end of the current file, and before it the end of the older.
    let mut kept = Vec::new();
    let mut want = bytes;
    let mut cut = false;
    for file in [path.clone(), aside.into()] {
        if want == 0 {
            break;
        }
        let Ok(mut f) = std::fs::File::open(&file) else {
            continue;
        };
        let len = f.metadata()?.len();
        let take = len.min(want);
        cut |= take < len;
        f.seek(SeekFrom::Start(len - take))?;
        let mut chunk = Vec::new();
        f.take(take).read_to_end(&mut chunk)?;
        chunk.extend_from_slice(&kept);
        kept = chunk;
        want -= take;
    }
    if kept.is_empty() {
        writeln!(
            out,
            "{name} has written nothing to stderr yet ({} is empty or missing).",
            path.display()
        )?;
        return Ok(());
    }
    let text = String::from_utf8_lossy(&kept);
    // What was cut starts at the next line.
    let text = match text.split_once('\n') {
        Some((_, rest)) if cut => rest,
        _ => &text,
    };
    let text = text.trim_end();
    for line in text.lines() {
        let shown: String = line
            .chars()
            .flat_map(|c| {
                if c.is_control() && c != '\t' {
                    c.escape_default().collect::<Vec<_>>()
                } else {
                    vec![c]
                }
            })
            .collect();
        writeln!(out, "{shown}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_starts_at_a_line_and_keeps_the_newest() {
        assert_eq!(tail("a\nb\nc\n", 100), "a\nb\nc");
        assert_eq!(tail("first line\nsecond\nthird", 10), "third");
        assert_eq!(tail("ééé\nx", 3), "x");
    }
}
