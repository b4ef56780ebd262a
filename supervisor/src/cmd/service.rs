//! `autotool service install|uninstall|status`: the supervisor as a systemd user service, one
//! for every host on the machine.
//!
//! The unit (`$XDG_CONFIG_HOME/systemd/user/autotool.service`) runs `autotool serve --transport
//! http` on loopback TCP (for hosts that speak HTTP) and on `$AUTOTOOL_HOME/service.sock` (for
//! `autotool connect`, the stdio bridge), with the same `$AUTOTOOL_HOME` as the user who
//! installed it; on a loopback address it mounts the console too (`--console`: under
//! `/console/`, its URL from `autotool console --url`). It leaves out the hardening options that would break autotool: `ProtectHome`
//! hides the session bus (the keychain), and `NoNewPrivileges`, `RestrictNamespaces` and
//! `SystemCallFilter` stop the launcher from building each tool's sandbox, which does all of
//! that per tool.

use crate::home::Home;
use serde::Serialize;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The unit's name.
pub const UNIT: &str = "autotool.service";

/// Where the service listens for HTTP hosts unless told otherwise.
pub const DEFAULT_TCP: &str = "127.0.0.1:8765";

/// `$XDG_CONFIG_HOME/systemd/user/autotool.service` (default `~/.config/…`).
pub fn unit_path() -> anyhow::Result<PathBuf> {
    crate::listen::service_unit_path().map_err(anyhow::Error::msg)
}

/// Quote one `ExecStart=` word the way systemd reads it: in double quotes, with `\` and `"`
/// escaped and `%` doubled (specifiers), so paths with spaces survive.
fn quote(word: &str) -> String {
    let mut out = String::from("\"");
    for c in word.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '%' => out.push_str("%%"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// What `ExecStart` runs: the absolute binary and its arguments; `--console` when `tcp` is a
/// loopback address (the console is for this machine only).
pub fn command(binary: &Path, home: &Home, tcp: &str) -> Vec<String> {
    let mut words = vec![
        binary.display().to_string(),
        "serve".into(),
        "--transport".into(),
        "http".into(),
        "--listen".into(),
        tcp.into(),
        "--listen".into(),
        format!("unix:{}", crate::mcp::http::service_socket(home).display()),
    ];
    if matches!(crate::mcp::http::Listen::parse(tcp), Ok(crate::mcp::http::Listen::Tcp(a)) if a.ip().is_loopback())
    {
        words.push("--console".into());
    }
    words
}

/// The unit file's text.
pub fn unit_text(binary: &Path, home: &Home, tcp: &str) -> String {
    let exec: Vec<String> = command(binary, home, tcp)
        .iter()
        .map(|w| quote(w))
        .collect();
    format!(
        "# Written by `autotool service install`; `autotool service uninstall` removes it.\n\
         [Unit]\n\
         Description=autotool: tools for every agent on this machine, each confined\n\
         \n\
         [Service]\n\
         Type=simple\n\
         ExecStart={}\n\
         Environment={}\n\
         Restart=on-failure\n\
         RestartSec=2\n\
         # Not ProtectHome (it hides the session bus, so the keychain), nor NoNewPrivileges,\n\
         # RestrictNamespaces or SystemCallFilter: the launcher confines each tool itself with\n\
         # namespaces, Landlock and seccomp, and these would stop it.\n\
         UMask=0077\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        exec.join(" "),
        quote(&format!("AUTOTOOL_HOME={}", home.root().display())),
    )
}

fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("service.tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Run `systemctl --user ARGS`; its failure explained.
fn systemctl(args: &[&str]) -> Result<String, String> {
    match Command::new("systemctl").arg("--user").args(args).output() {
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        Ok(out) => Err(format!(
            "`systemctl --user {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Err(format!("cannot run systemctl: {e}")),
    }
}

/// `service install`: write the unit and (unless `start` is false) enable and start it.
pub fn install(home: &Home, tcp: &str, start: bool, out: &mut impl Write) -> anyhow::Result<()> {
    crate::mcp::http::Listen::parse(tcp).map_err(anyhow::Error::msg)?;
    home.ensure()?;
    crate::mcp::http::ensure_token(home)?;
    let binary = std::env::current_exe()?;
    let path = unit_path()?;
    let text = unit_text(&binary, home, tcp);
    let unchanged = std::fs::read_to_string(&path).is_ok_and(|old| old == text);
    if !unchanged {
        write_atomic(&path, &text)?;
    }
    writeln!(
        out,
        "{} {}\n  serves http://{tcp}{} (token in {}) and {} for `autotool connect`",
        if unchanged { "unchanged:" } else { "wrote" },
        path.display(),
        crate::mcp::http::MCP_PATH,
        crate::mcp::http::token_path(home).display(),
        crate::mcp::http::service_socket(home).display()
    )?;
    if !start {
        writeln!(
            out,
            "not started (--no-start): `systemctl --user enable --now {UNIT}` starts it"
        )?;
        return Ok(());
    }
    let started = systemctl(&["daemon-reload"])
        .and_then(|_| systemctl(&["enable", "--now", UNIT]))
        .and_then(|_| {
            if unchanged {
                Ok(String::new())
            } else {
                systemctl(&["restart", UNIT])
            }
        });
    match started {
        Ok(_) => {
            writeln!(out, "enabled and started {UNIT}")?;
            Ok(())
        }
        Err(why) => anyhow::bail!(
            "the unit is installed, but it could not be started: {why}\nWithout a systemd user \
             instance, run the same server yourself: {}",
            command(&binary, home, tcp).join(" ")
        ),
    }
}

/// `service uninstall`: stop, disable and remove the unit.
pub fn uninstall(out: &mut impl Write) -> anyhow::Result<()> {
    let path = unit_path()?;
    if !path.exists() {
        writeln!(out, "{} is not installed; nothing to do", path.display())?;
        return Ok(());
    }
    if let Err(why) = systemctl(&["disable", "--now", UNIT]) {
        writeln!(out, "note: {why} (removing the unit anyway)")?;
    }
    std::fs::remove_file(&path)?;
    let _ = systemctl(&["daemon-reload"]);
    writeln!(out, "removed {}", path.display())?;
    Ok(())
}

/// What `service status` found.
#[derive(Debug, Serialize)]
pub struct Status {
    pub unit: PathBuf,
    pub installed: bool,
    /// `systemctl --user is-active`, or why it could not be asked.
    pub systemd: String,
    pub socket: PathBuf,
    /// Something accepts connections on the service socket.
    pub answering: bool,
    pub token: PathBuf,
}

/// Look at the unit, systemd's view, and whether the service answers.
pub fn status(home: &Home) -> anyhow::Result<Status> {
    let unit = unit_path()?;
    let socket = crate::mcp::http::service_socket(home);
    let systemd = match Command::new("systemctl")
        .args(["--user", "is-active", UNIT])
        .output()
    {
        Ok(out) => {
            let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if said.is_empty() {
                format!("unknown: {}", String::from_utf8_lossy(&out.stderr).trim())
            } else {
                said
            }
        }
        Err(e) => format!("unknown: cannot run systemctl ({e})"),
    };
    Ok(Status {
        installed: unit.exists(),
        unit,
        systemd,
        answering: std::os::unix::net::UnixStream::connect(&socket).is_ok(),
        socket,
        token: crate::mcp::http::token_path(home),
    })
}

/// Print `status` for people.
pub fn render(s: &Status, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        out,
        "unit: {} ({})",
        s.unit.display(),
        if s.installed {
            "installed"
        } else {
            "not installed"
        }
    )?;
    writeln!(out, "systemd: {}", s.systemd)?;
    writeln!(
        out,
        "service: {} on {}",
        if s.answering {
            "answering"
        } else {
            "not answering"
        },
        s.socket.display()
    )?;
    if !s.answering {
        writeln!(
            out,
            "fix: `autotool service install` (or run `autotool serve --transport http` yourself)"
        )?;
    }
    Ok(())
}

/// `autotool service …`.
pub fn main(cmd: ServiceCmd, out: &mut impl Write) -> std::process::ExitCode {
    let home = match crate::home::Home::from_env() {
        Ok(h) => h,
        Err(e) => return super::fail("service", &e.to_string()),
    };
    let result = match cmd {
        ServiceCmd::Install { listen, no_start } => {
            crate::cmd::service::install(&home, &listen, !no_start, out).map(|()| true)
        }
        ServiceCmd::Uninstall => crate::cmd::service::uninstall(out).map(|()| true),
        ServiceCmd::Status { json } => {
            crate::cmd::service::status(&home).and_then(|s| {
                if json {
                    serde_json::to_writer_pretty(&mut *out, &s)?;
                    writeln!(out)?;
                } else {
                    crate::cmd::service::render(&s, out)?;
                }
                if s.answering {
                    Ok(true)
                } else if json {
                    // The JSON already says so; a second document would break it.
                    Ok(false)
                } else {
                    Err(anyhow::anyhow!("the service is not answering"))
                }
            })
        }
    };
    match result {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::FAILURE,
        Err(e) => super::fail("service", &format!("{e:#}")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn words_are_quoted_for_systemd() {
        assert_eq!(quote("/usr/bin/autotool"), "\"/usr/bin/autotool\"");
        assert_eq!(quote("/a b/c"), "\"/a b/c\"");
        assert_eq!(quote("50%"), "\"50%%\"");
        assert_eq!(quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
    }

    #[test]
    fn the_unit_runs_http_on_loopback_and_the_socket_with_the_home() {
        let home = Home::at(Path::new("/home/u/my home/.autotool"));
        let text = unit_text(Path::new("/opt/auto tool/autotool"), &home, DEFAULT_TCP);
        assert!(text.contains(
            "ExecStart=\"/opt/auto tool/autotool\" \"serve\" \"--transport\" \"http\" \"--listen\" \
             \"127.0.0.1:8765\" \"--listen\" \"unix:/home/u/my home/.autotool/service.sock\" \
             \"--console\"\n"
        ), "{text}");
        // Not on an address other machines may reach.
        let remote = command(Path::new("/a"), &home, "[::1]:9");
        assert_eq!(remote.last().map(String::as_str), Some("--console"));
        let remote = command(Path::new("/a"), &home, "192.168.1.2:9");
        assert!(!remote.contains(&"--console".to_string()), "{remote:?}");
        assert!(text.contains("Environment=\"AUTOTOOL_HOME=/home/u/my home/.autotool\"\n"));
        for forbidden in [
            "\nProtectHome=",
            "\nNoNewPrivileges=",
            "\nRestrictNamespaces=",
        ] {
            assert!(!text.contains(forbidden), "{forbidden}");
        }
        assert!(text.contains("WantedBy=default.target"));
    }
}

/// `autotool service …`.
#[derive(Debug, clap::Subcommand)]
pub enum ServiceCmd {
    /// Write the systemd user unit, then enable and start it.
    ///
    /// Writes ~/.config/systemd/user/autotool.service (`autotool serve --transport http` on
    /// loopback and on $AUTOTOOL_HOME/service.sock, with a bearer token), then enables and
    /// starts it unless `--no-start`.
    Install {
        /// Where HTTP hosts reach it (loopback).
        #[arg(long, default_value = DEFAULT_TCP)]
        listen: String,
        /// Only write the unit.
        #[arg(long)]
        no_start: bool,
    },
    /// Stop, disable and remove the unit.
    Uninstall,
    /// Say whether the unit is installed and the service answers.
    ///
    /// Exits 0 when it answers, 1 when it does not.
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}
