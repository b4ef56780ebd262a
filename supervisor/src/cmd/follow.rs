//! `autotool library follow|unfollow|status`: the team libraries this home follows
//! ([`crate::team::follow`]). `follow` checks what it can when it is run (the tag resolves, the
//! credentials work, a serve runs here to follow it) and says what it found.

use crate::home::Home;
use crate::team::follow::{self, Checked, Followed};
use crate::team::reference::Reference;
use clap::Subcommand;
use std::io::Write;
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum LibraryCmd {
    /// Follow oci://HOST/REPO[:TAG]: serve pulls its new versions.
    ///
    /// Tag `latest` by default. Every running `autotool serve` looks at it every
    /// `follow_interval` and pulls a new digest as `tools pull` would. Following checks, and
    /// says, whether the tag resolves with the credentials found for the registry and which
    /// serves on this home will look at it; exit 1 when the tag or the registry has a problem
    /// (the library stays followed all the same).
    Follow {
        /// oci://HOST[:PORT]/REPO[:TAG].
        reference: String,
        /// Speak plain HTTP to a registry that is not on loopback (loopback always is).
        #[arg(long)]
        plain_http: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop following a library (tools pulled from it stay).
    Unfollow {
        /// oci://HOST[:PORT]/REPO[:TAG], as followed.
        reference: String,
    },
    /// Each followed library: when last reached, and what was refused.
    ///
    /// Also when it was last looked at, the digest its tag names, the digest pulled, and when
    /// a refused digest is tried again (or what here it waits for).
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// An interval in words: `300s` as `5m`.
fn every(ms: u64) -> String {
    let secs = ms / 1000;
    if secs >= 60 && secs.is_multiple_of(60) {
        format!("{}m", secs / 60)
    } else if secs > 0 {
        format!("{secs}s")
    } else {
        format!("{ms}ms")
    }
}

/// What `library follow` found, in lines.
fn found_lines(c: &Checked) -> Vec<String> {
    use crate::terminal::escape_line;
    let mut lines = vec![if c.already {
        format!(
            "{} was already followed; what it refused is tried again next round.",
            c.reference
        )
    } else {
        format!("Following {}.", c.reference)
    }];
    let who = c
        .credentials
        .as_ref()
        .map(|u| format!("as {}", escape_line(u)))
        .unwrap_or_else(|| "anonymously".to_string());
    if let Some(d) = &c.digest {
        lines.push(format!("  tag: names {d} (registry reached {who})"));
    }
    if let Some(p) = &c.problem {
        let reached = if c.reached {
            format!("registry reached {who}")
        } else {
            format!("registry not reached, {who}")
        };
        lines.push(format!(
            "  problem ({reached}): {}; followed all the same, and looked at every round",
            escape_line(p)
        ));
    }
    if c.serves.is_empty() {
        lines.push(
            "  serve: none runs on this home, so nothing pulls it until one starts (your agent \
             app starts `autotool serve`; `autotool service install` keeps one running)"
                .to_string(),
        );
    } else {
        let each: Vec<String> = c
            .serves
            .iter()
            .map(|s| format!("pid {} every {}", s.pid, every(s.every_ms)))
            .collect();
        lines.push(format!(
            "  serve: {} on this home look at it ({}); one of them pulls what is new",
            c.serves.len(),
            each.join(", ")
        ));
    }
    lines
}

/// One followed library's status, in lines.
fn status_lines(f: &Followed) -> Vec<String> {
    let never = "never".to_string();
    let mut lines = vec![
        f.reference.clone(),
        format!(
            "  last reached: {}; last looked: {}",
            f.reached_at.as_ref().unwrap_or(&never),
            f.checked_at.as_ref().unwrap_or(&never)
        ),
    ];
    if let Some(d) = &f.digest {
        lines.push(format!("  serves: {d}"));
    }
    if let Some(d) = &f.pulled {
        lines.push(format!("  pulled: {d}"));
    }
    if let Some(p) = &f.problem {
        // A registry's or a tool's words: kept on this line.
        lines.push(format!("  problem: {}", crate::terminal::escape_line(p)));
    }
    if let (Some(r), Some(_)) = (&f.retry, &f.problem) {
        let waits = r
            .cure
            .as_ref()
            .map(|c| format!(", or in the next round after {}", c.said()))
            .unwrap_or_default();
        lines.push(format!(
            "  tried again: at {}{waits} (refused {} time{})",
            r.at,
            r.times,
            if r.times == 1 { "" } else { "s" }
        ));
    }
    lines
}

/// `autotool library …`.
pub fn library(cmd: LibraryCmd, out: &mut impl Write) -> ExitCode {
    let mut problem = false;
    let result = (|| -> anyhow::Result<()> {
        let home = Home::from_env()?;
        match cmd {
            LibraryCmd::Follow {
                reference,
                plain_http,
                json,
            } => {
                let r = Reference::parse(&reference)?;
                follow::canonical(&r)?;
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                let checked = runtime.block_on(follow::follow_checked(&home, &r, plain_http))?;
                problem = checked.problem.is_some();
                if json {
                    writeln!(out, "{}", serde_json::to_string(&checked)?)?;
                } else {
                    for line in found_lines(&checked) {
                        writeln!(out, "{line}")?;
                    }
                }
            }
            LibraryCmd::Unfollow { reference } => {
                let r = Reference::parse(&reference)?;
                let shown = follow::canonical(&r)?;
                if follow::unfollow(&home, &r)? {
                    writeln!(
                        out,
                        "No longer following {shown}; tools pulled from it stay."
                    )?;
                } else {
                    writeln!(out, "{shown} was not followed.")?;
                }
            }
            LibraryCmd::Status { json } => {
                let list = follow::status(&home)?;
                if json {
                    writeln!(out, "{}", serde_json::json!({"following": list}))?;
                } else if list.is_empty() {
                    writeln!(
                        out,
                        "No library is followed (`autotool library follow oci://…`)."
                    )?;
                } else {
                    for f in list {
                        for line in status_lines(&f) {
                            writeln!(out, "{line}")?;
                        }
                    }
                }
            }
        }
        Ok(())
    })();
    match result {
        // The problem was said (in the JSON too): exit 1 without a second document.
        Ok(()) if problem => ExitCode::FAILURE,
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => super::fail("library", &format!("{e:#}")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::team::follow::Serving;

    fn checked() -> Checked {
        Checked {
            reference: "oci://h/team/tools:latest".into(),
            already: false,
            reached: true,
            credentials: None,
            digest: Some("sha256:ab".into()),
            problem: None,
            serves: vec![Serving {
                pid: 7,
                every_ms: 300_000,
            }],
        }
    }

    #[test]
    fn follow_says_what_it_found() {
        assert_eq!(
            found_lines(&checked()),
            [
                "Following oci://h/team/tools:latest.",
                "  tag: names sha256:ab (registry reached anonymously)",
                "  serve: 1 on this home look at it (pid 7 every 5m); one of them pulls what is new",
            ]
        );
        let lost = Checked {
            reached: false,
            credentials: Some("alice".into()),
            digest: None,
            problem: Some("the registry refused the credentials\u{1b}[2J".into()),
            serves: Vec::new(),
            ..checked()
        };
        let lines = found_lines(&lost);
        assert!(
            lines[1].starts_with("  problem (registry not reached, as alice): the registry"),
            "{lines:?}"
        );
        assert!(!lines[1].contains('\u{1b}'), "{lines:?}");
        assert!(lines[2].contains("none runs on this home"), "{lines:?}");
        assert_eq!(every(1_000), "1s");
        assert_eq!(every(90_000), "90s");
    }
}
