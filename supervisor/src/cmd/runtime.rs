//! `autotool runtime install|status|rebuild`: the Python runtime tools run on, made ready ahead
//! of time instead of inside a host's first call.
//!
//! The build's steps are shown as a progress bar when stderr is a terminal, as plain lines
//! otherwise (a log, CI); the outcome goes to stdout. With `$AUTOTOOL_RUNTIME` set nothing is
//! built: that runtime is checked and used as it is.

use crate::home::Home;
use crate::tool::runtime::{self, Event, Progress, RUNTIME_REQUIREMENTS};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, clap::Subcommand)]
pub enum RuntimeCmd {
    /// Build the tool runtime if it is not ready (once per machine).
    #[command(
        long_about = "Build the Python runtime tools run on, if it is not ready: a virtual \
                      environment at $AUTOTOOL_HOME/runtime holding the pinned tool SDK, HTTP \
                      client and linter, built with uv (fetched from PyPI the first time; pip \
                      where uv cannot be had). A build from nothing takes about 5-15 s, a \
                      rebuild with warm caches 2-4 s. `autotool setup` does this too, and \
                      `autotool serve` starts it in the background when it is missing.\n\n\
                      Exits 0 when the runtime is ready, 1 when it could not be built."
    )]
    Install,
    /// Say whether the tool runtime is ready, and how it was built.
    #[command(
        long_about = "Say whether the tool runtime is ready: where it is, its Python, the \
                      packages its stamp lists and whether they are the ones this autotool \
                      pins, what built it, whether a build is running now, and what a killed \
                      build left behind (removed by the next build).\n\n\
                      Exits 0 when it is ready, 1 when it is missing, stale or broken."
    )]
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Build the tool runtime anew; the old one serves until it is ready.
    #[command(
        long_about = "Build the tool runtime anew even when it is ready, for example after \
                      the machine's Python was upgraded. The runtime in place stays in use \
                      until the new one is complete; a build that fails or is interrupted \
                      leaves it as it was.\n\n\
                      Exits 0 when the new runtime is ready, 1 when it could not be built."
    )]
    Rebuild,
}

/// The build's progress on a terminal: one bar through the steps, the latest line of output
/// beside it.
struct Bar {
    bar: indicatif::ProgressBar,
}

impl Bar {
    fn new() -> Bar {
        let bar = indicatif::ProgressBar::new(1);
        let style = indicatif::ProgressStyle::with_template(
            "{spinner} [{bar:24}] {pos}/{len} {msg} ({elapsed})",
        )
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(120));
        Bar { bar }
    }
}

impl Progress for Bar {
    fn event(&mut self, event: Event) {
        match event {
            Event::Step { n, of, what } => {
                self.bar.set_length(u64::from(of));
                self.bar.set_position(u64::from(n.saturating_sub(1)));
                self.bar.set_message(what);
            }
            Event::Detail(line) => {
                // Notes about the build itself are kept above the bar; tools' chatter is not.
                if line.starts_with("note:") || line.starts_with("uv could not") {
                    self.bar.println(format!("  {line}"));
                }
            }
            Event::Ready { .. } => {
                self.bar.set_position(self.bar.length().unwrap_or(1));
                self.bar.finish_and_clear();
                eprintln!("{}", runtime::plain_line(&event));
            }
            other => self.bar.println(runtime::plain_line(&other)),
        }
    }
}

/// Where a build's progress goes: a bar on a terminal, plain lines on stderr otherwise.
pub fn progress() -> Box<dyn Progress> {
    if std::io::stderr().is_terminal() {
        Box::new(Bar::new())
    } else {
        Box::new(std::io::stderr())
    }
}

/// Make the runtime ready (or rebuild it), with progress; `Ok` says where it is.
pub fn install(home: &Home, rebuild: bool) -> Result<String, String> {
    if let Some(venv) = runtime::override_dir() {
        return runtime::open_runtime(&venv)
            .map(|p| {
                format!(
                    "AUTOTOOL_RUNTIME={} is used as it is (Python {}); nothing was built",
                    venv.display(),
                    p.version
                )
            })
            .map_err(|e| e.to_string());
    }
    let dir = home.runtime_dir();
    let mut progress = progress();
    let built = if rebuild {
        runtime::rebuild_venv(
            &dir,
            &RUNTIME_REQUIREMENTS,
            progress.as_mut(),
            &Default::default(),
        )
    } else {
        runtime::ensure_venv(&dir, &RUNTIME_REQUIREMENTS, progress.as_mut())
    };
    built
        .map(|p| {
            format!(
                "the tool runtime is ready at {} (Python {}; {})",
                dir.display(),
                p.version,
                RUNTIME_REQUIREMENTS.join(" ")
            )
        })
        .map_err(|e| e.to_string())
}

/// `autotool runtime …`.
pub fn main(cmd: RuntimeCmd, out: &mut dyn Write) -> ExitCode {
    let home = match Home::from_env() {
        Ok(h) => h,
        Err(e) => return super::fail("runtime", &e.to_string()),
    };
    match cmd {
        RuntimeCmd::Install | RuntimeCmd::Rebuild => {
            match install(&home, matches!(cmd, RuntimeCmd::Rebuild)) {
                Ok(said) => {
                    let _ = writeln!(out, "{said}");
                    ExitCode::SUCCESS
                }
                Err(e) => super::fail("runtime", &e),
            }
        }
        RuntimeCmd::Status { json } => {
            let s = runtime::status(&home.runtime_dir());
            let text = if json {
                serde_json::to_string_pretty(&s).unwrap_or_default() + "\n"
            } else {
                render(&s)
            };
            let _ = out.write_all(text.as_bytes());
            if s.state == "ready" {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// `runtime status` for people.
fn render(s: &runtime::Status) -> String {
    let mut out = String::new();
    let mut line = |k: &str, v: String| out.push_str(&format!("{k:<12} {v}\n"));
    match &s.overridden_by {
        Some(venv) => line(
            "runtime",
            format!(
                "{} (AUTOTOOL_RUNTIME; {} is not used)",
                venv.display(),
                s.dir.display()
            ),
        ),
        None => line("runtime", s.dir.display().to_string()),
    }
    line(
        "state",
        match &s.why {
            Some(why) => format!("{}: {why}", s.state),
            None => s.state.to_string(),
        },
    );
    if let (Some(i), Some(v)) = (&s.interpreter, &s.python_version) {
        line("python", format!("{} ({v})", i.display()));
    }
    if !s.requirements.is_empty() {
        line("packages", s.requirements.join(" "));
    }
    if let Some(w) = &s.built_with {
        line("built with", w.clone());
    }
    if s.building {
        line("building", "yes, by another autotool process now".into());
    }
    for l in &s.leftovers {
        line(
            "leftover",
            format!(
                "{} (a killed build's; the next build removes it)",
                l.display()
            ),
        );
    }
    match s.state {
        "ready" => {}
        "broken" => {
            out.push_str("\nfix: point AUTOTOOL_RUNTIME at a working runtime, or unset it\n")
        }
        _ => out.push_str("\nfix: autotool runtime install\n"),
    }
    out
}
