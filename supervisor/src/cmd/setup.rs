//! `autotool setup`: register autotool with the agent apps found here ([`crate::host_apps`])
//! and make the tool runtime ready ([`hosts`]); `autotool setup --launcher`: install the
//! launcher with file capabilities, for machines where unprivileged user namespaces are
//! switched off (Ubuntu 23.10+ through AppArmor, hardened kernels).
//!
//! The copy goes to [`crate::tool::launcher::INSTALLED`], owned by root, with exactly
//! [`CAPABILITIES`]: what building the sandbox needs without a user namespace. The launcher uses
//! them only for that and drops every one before the tool starts.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The file capabilities set on the installed launcher.
pub const CAPABILITIES: &str = "cap_sys_admin,cap_net_admin,cap_setpcap+ep";

/// Setup errors.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(
        "no launcher to install beside the autotool binary ({0}); build it with `cargo build --release -p autotool-launcher`"
    )]
    NoSource(String),
    #[error("not confirmed; nothing was changed")]
    NotConfirmed,
    #[error("standard input is not a terminal; re-run with --yes to confirm")]
    NeedsConfirmation,
    #[error("`{command}` failed ({status}); nothing else was changed")]
    Command { command: String, status: String },
    #[error(
        "the installed launcher does not report its file capabilities; is {0} on a filesystem mounted nosuid, or without extended attributes?"
    )]
    NoCapabilities(PathBuf),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

fn source() -> Result<PathBuf, SetupError> {
    let exe = std::env::current_exe()?;
    let src = exe
        .parent()
        .map(|d| d.join("autotool-launcher"))
        .ok_or_else(|| SetupError::NoSource(exe.display().to_string()))?;
    if src.is_file() {
        Ok(src)
    } else {
        Err(SetupError::NoSource(src.display().to_string()))
    }
}

/// The commands that install `src`, as argv lists, with `sudo` in front unless we are root.
pub fn install_commands(src: &Path, dest: &Path, as_root: bool) -> Vec<Vec<String>> {
    let s = |p: &Path| p.display().to_string();
    let mut cmds = vec![
        vec![
            "install".into(),
            "-D".into(),
            "-m".into(),
            "0755".into(),
            "-o".into(),
            "root".into(),
            "-g".into(),
            "root".into(),
            s(src),
            s(dest),
        ],
        vec!["setcap".into(), CAPABILITIES.into(), s(dest)],
    ];
    if !as_root {
        for c in &mut cmds {
            c.insert(0, "sudo".into());
        }
    }
    cmds
}

/// Install the launcher. `out` receives the explanation and progress.
pub fn install_launcher(yes: bool, dry_run: bool, out: &mut dyn Write) -> Result<(), SetupError> {
    let src = source()?;
    let dest = PathBuf::from(crate::tool::launcher::INSTALLED);
    let as_root = rustix::process::geteuid().is_root();
    let cmds = install_commands(&src, &dest, as_root);
    writeln!(
        out,
        "This installs the sandbox launcher at {dest} (owned by root) with the file capabilities\n\
         {CAPABILITIES}. They let it create each tool's namespaces and mounts where unprivileged\n\
         user namespaces are switched off; it drops every capability before the tool starts, and\n\
         the tool never holds one. Commands:",
        dest = dest.display()
    )?;
    for c in &cmds {
        writeln!(out, "  {}", c.join(" "))?;
    }
    if dry_run {
        writeln!(out, "(dry run: nothing was changed)")?;
        return Ok(());
    }
    if !yes {
        if !std::io::stdin().is_terminal() {
            return Err(SetupError::NeedsConfirmation);
        }
        write!(out, "Proceed? [y/N] ")?;
        out.flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            return Err(SetupError::NotConfirmed);
        }
    }
    for c in &cmds {
        let status = Command::new(&c[0]).args(&c[1..]).status()?;
        if !status.success() {
            return Err(SetupError::Command {
                command: c.join(" "),
                status: status.to_string(),
            });
        }
    }
    let probe = crate::tool::launcher::probe(&dest)
        .map_err(|e| SetupError::Io(std::io::Error::other(e.to_string())))?;
    if !probe.file_capabilities && !as_root {
        return Err(SetupError::NoCapabilities(dest));
    }
    writeln!(
        out,
        "Installed. `autotool doctor` now uses {}.",
        dest.display()
    )?;
    Ok(())
}

/// `autotool setup` without `--launcher`: registers autotool with the apps, then (with
/// `prepare_runtime`) makes the tool runtime ready. Exits non-zero when a config found could
/// not be read or written, or the runtime could not be built.
pub fn hosts(
    apps: Vec<crate::host_apps::App>,
    dry_run: bool,
    service: bool,
    prepare_runtime: bool,
    out: &mut dyn Write,
) -> std::process::ExitCode {
    use crate::host_apps;
    let run = |out: &mut dyn Write| -> Result<host_apps::Summary, host_apps::HostsError> {
        let env = host_apps::HostEnv::from_process()?;
        let home = crate::home::Home::from_env().map_err(|_| host_apps::HostsError::NoHome)?;
        let mut entry = host_apps::Entry::current()?;
        if service {
            // Every app gets the stdio bridge: it works in all of them, and the service's
            // token stays in $AUTOTOOL_HOME instead of being copied into app configs.
            entry.args = vec!["connect".to_string()];
        }
        // A home other than the default goes into each entry as `--home`: not every app's
        // config can carry an environment, and an app does not inherit setup's.
        let entry = entry.with_home(home.root(), &env.home.join(".autotool"))?;
        let opts = host_apps::Options {
            apps,
            dry_run,
            records: Some(home.root().join("setup")),
        };
        host_apps::run(&opts, &env, &entry, out)
    };
    let registered = match run(out) {
        Ok(summary) => summary.failed == 0,
        Err(e) => {
            let _ = super::fail("setup", &e.to_string());
            false
        }
    };
    let runtime_ok = !prepare_runtime || runtime(dry_run, out);
    if registered && runtime_ok {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}

/// `autotool setup --remove`: takes autotool's entry out of the apps' configs. Exits non-zero
/// when a config could not be read or written.
pub fn remove(
    apps: Vec<crate::host_apps::App>,
    dry_run: bool,
    out: &mut dyn Write,
) -> std::process::ExitCode {
    use crate::host_apps;
    let run = host_apps::HostEnv::from_process().and_then(|env| {
        let records = crate::home::Home::from_env()
            .ok()
            .map(|h| h.root().join("setup"));
        let opts = host_apps::Options {
            apps,
            dry_run,
            records,
        };
        host_apps::run_remove(&opts, &env, out)
    });
    match run {
        Ok(summary) if summary.failed == 0 => std::process::ExitCode::SUCCESS,
        Ok(_) => std::process::ExitCode::FAILURE,
        Err(e) => super::fail("setup", &e.to_string()),
    }
}

/// The tool runtime, made ready (or, in a dry run, what would be done); whether it is ready.
fn runtime(dry_run: bool, out: &mut dyn Write) -> bool {
    let home = match crate::home::Home::from_env() {
        Ok(h) => h,
        Err(e) => {
            let _ = super::fail("setup", &e.to_string());
            return false;
        }
    };
    if dry_run {
        let status = crate::tool::runtime::status(&home.runtime_dir());
        let _ = match status.state {
            "ready" => writeln!(
                out,
                "The tool runtime is ready at {}.",
                status.dir.display()
            ),
            _ => writeln!(
                out,
                "Would build the tool runtime at {} ({}).",
                status.dir.display(),
                crate::tool::runtime::RUNTIME_REQUIREMENTS.join(" ")
            ),
        };
        return true;
    }
    let _ = out.flush();
    match crate::cmd::runtime::install(&home, false) {
        Ok(said) => {
            let _ = writeln!(out, "{}{}.", said[..1].to_uppercase(), &said[1..]);
            true
        }
        Err(e) => {
            let _ = super::fail(
                "setup",
                &format!(
                    "the apps are set up, but the tool runtime could not be built: {e}; \
                     `autotool runtime install` tries again (serve also does, when a tool is \
                     first needed)"
                ),
            );
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_use_sudo_only_when_not_root() {
        let src = Path::new("/build/autotool-launcher");
        let dest = Path::new(crate::tool::launcher::INSTALLED);
        let user = install_commands(src, dest, false);
        assert_eq!(
            user,
            vec![
                vec![
                    "sudo",
                    "install",
                    "-D",
                    "-m",
                    "0755",
                    "-o",
                    "root",
                    "-g",
                    "root",
                    "/build/autotool-launcher",
                    crate::tool::launcher::INSTALLED
                ],
                vec![
                    "sudo",
                    "setcap",
                    CAPABILITIES,
                    crate::tool::launcher::INSTALLED
                ],
            ]
        );
        let root = install_commands(src, dest, true);
        assert!(root.iter().all(|c| c[0] != "sudo"));
        assert_eq!(
            root[1],
            vec!["setcap", CAPABILITIES, crate::tool::launcher::INSTALLED]
        );
    }
}
