//! Resolving a tool's requirements with `uv pip compile`: for the runtime's interpreter, wheels
//! only, constrained to what the runtime holds, every file pinned by its hash; and the one way
//! uv is run here ([`run`]): bounded in time and output, in a fresh working directory inside
//! autotool's private `work/`, reading no configuration file, with the index the user's own
//! settings name (see `crate::tool::runtime::build`'s `isolate`).

use super::{PackagesError, Source, io};
use crate::tool::runtime::Python;
use crate::tool::runtime::build::Private;
use autotool_policy::packages::{Lock, Requirement, normalize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;

/// How much of each of uv's streams is kept.
const OUTPUT_CAP: usize = 256 << 10;
/// How much of uv's message an error carries.
const MESSAGE_CAP: usize = 4 << 10;

/// What a finished uv printed.
pub(super) struct Output {
    pub stdout: String,
    pub stderr: String,
    pub success: bool,
}

/// A check made while uv runs (the layer's size): `Err` stops it with that error.
pub(super) type Watch<'a> = &'a (dyn Fn() -> Result<(), PackagesError> + Sync);

/// Run uv with `args` in a fresh directory of `private.work`, within `timeout`; `watch` is
/// called twice a second while it runs.
pub(super) async fn run(
    uv: &Path,
    args: &[std::ffi::OsString],
    source: &Source,
    private: &Private,
    timeout: Duration,
    what: &'static str,
    watch: Option<Watch<'_>>,
) -> Result<Output, PackagesError> {
    let cwd = private
        .workdir()
        .map_err(io("making a working directory in", &private.work))?;
    let mut cmd = crate::tool::runtime::build::uv_command(uv, cwd.path(), private, source);
    cmd.args(args);
    run_command(cmd, timeout, what, watch).await
}

/// Run `cmd` (uv, or pip, as `crate::tool::runtime::build` makes them) within `timeout`,
/// keeping [`OUTPUT_CAP`] of each stream; `watch` is called twice a second while it runs.
pub(super) async fn run_command(
    cmd: std::process::Command,
    timeout: Duration,
    what: &'static str,
    watch: Option<Watch<'_>>,
) -> Result<Output, PackagesError> {
    let program = PathBuf::from(cmd.get_program());
    let uv = program.as_path();
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(io("running", uv))?;
    let out_task = tokio::spawn(read_capped(child.stdout.take()));
    let err_task = tokio::spawn(read_capped(child.stderr.take()));
    let deadline = Instant::now() + timeout;
    let status = loop {
        let tick = tokio::time::sleep(Duration::from_millis(500));
        tokio::select! {
            status = child.wait() => break status.map_err(io("waiting for", uv))?,
            () = tick => {
                if Instant::now() >= deadline {
                    let _ = child.kill().await;
                    return Err(PackagesError::Timeout { what, secs: timeout.as_secs() });
                }
                if let Some(check) = watch
                    && let Err(e) = check()
                {
                    let _ = child.kill().await;
                    return Err(e);
                }
            }
        }
    };
    let stdout = out_task.await.unwrap_or_default();
    let stderr = err_task.await.unwrap_or_default();
    Ok(Output {
        stdout,
        stderr,
        success: status.success(),
    })
}

/// Up to [`OUTPUT_CAP`] bytes of `pipe`, then the rest left unread.
async fn read_capped<R: tokio::io::AsyncRead + Unpin>(pipe: Option<R>) -> String {
    let mut buf = Vec::new();
    if let Some(p) = pipe {
        let _ = p.take(OUTPUT_CAP as u64).read_to_end(&mut buf).await;
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// uv's message, without colour codes and cut to size, with the index's credentials taken out.
pub(super) fn message(source: &Source, stderr: &str) -> String {
    let mut text = String::with_capacity(stderr.len().min(MESSAGE_CAP));
    let mut chars = stderr.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // An escape sequence: `ESC [ … letter`.
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        text.push(c);
    }
    let text = source.scrub(text.trim());
    match text.char_indices().nth(MESSAGE_CAP) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// What a resolver failure means for the agent, after the resolver's own words.
fn hint(message: &str) -> &'static str {
    let m = message.to_ascii_lowercase();
    if m.contains("building from source is disabled")
        || m.contains("no wheels")
        || m.contains("no usable wheels")
        || m.contains("only-binary")
    {
        "autotool installs wheels only (no build script ever runs): pick a package, or a version, that publishes a wheel for this platform, or write the tool without it"
    } else if m.contains("not found in the package registry")
        || m.contains("was not found")
        || m.contains("no versions of")
    {
        "check the package's name and version on the index"
    } else if m.contains("unsatisfiable") || m.contains("no solution found") {
        "the requirements conflict with each other or with the runtime's own packages (mcp, httpx2 and what they need, which a tool cannot change): loosen the version specifiers"
    } else {
        "check the names and versions, or ask the user whether the package index is reachable"
    }
}

fn os(args: &[&str]) -> Vec<std::ffi::OsString> {
    args.iter().map(Into::into).collect()
}

/// The distributions a virtual environment holds, read from its `*.dist-info` directory names
/// (`{name}-{version}.dist-info`, as installers write them); `None` when it has no
/// site-packages of that Python's version.
fn installed_in(venv: &Path, version: &str) -> Option<BTreeMap<String, String>> {
    let site = venv.join(format!("lib/python{version}/site-packages"));
    let entries = std::fs::read_dir(site).ok()?;
    Some(
        entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let stem = name.strip_suffix(".dist-info")?.to_string();
                let (project, version) = stem.rsplit_once('-')?;
                Some((normalize(project), version.to_string()))
            })
            .collect(),
    )
}

/// The distributions the runtime holds, normalised name → version: read from the directory of
/// a virtual environment (the runtime autotool builds is one), else asked of uv.
pub(super) async fn present(
    uv: &Path,
    python: &Python,
    source: &Source,
    private: &Private,
    timeout: Duration,
) -> Result<BTreeMap<String, String>, PackagesError> {
    if let Some(found) = python
        .venv
        .as_deref()
        .and_then(|v| installed_in(v, &python.version))
        .filter(|f| !f.is_empty())
    {
        return Ok(found);
    }
    let mut args = os(&["pip", "freeze", "--python"]);
    args.push(python.interpreter.clone().into());
    let out = run(
        uv,
        &args,
        source,
        private,
        timeout,
        "listing the runtime's packages",
        None,
    )
    .await?;
    if !out.success {
        return Err(PackagesError::Resolve(format!(
            "uv could not list the runtime's packages: {}",
            message(source, &out.stderr)
        )));
    }
    Ok(out
        .stdout
        .lines()
        .filter_map(|l| l.trim().split_once("=="))
        .map(|(n, v)| (normalize(n.trim()), v.trim().to_string()))
        .collect())
}

/// `requirements` resolved and locked with hashes, for `python`, wheels only, what the
/// runtime holds kept at its version.
pub(super) async fn compile(
    uv: &Path,
    python: &Python,
    requirements: &[Requirement],
    present: &BTreeMap<String, String>,
    source: &Source,
    private: &Private,
    timeout: Duration,
) -> Result<Lock, PackagesError> {
    let work = private
        .workdir()
        .map_err(io("making a directory in", &private.work))?;
    let input: PathBuf = work.path().join("requirements.in");
    let constraints: PathBuf = work.path().join("constraints.txt");
    let text: String = requirements.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&input, text).map_err(io("writing", &input))?;
    let pins: String = present.iter().map(|(n, v)| format!("{n}=={v}\n")).collect();
    std::fs::write(&constraints, pins).map_err(io("writing", &constraints))?;
    let mut args = os(&["pip", "compile"]);
    args.push(input.into());
    args.extend(os(&[
        "--generate-hashes",
        "--no-header",
        "--no-annotate",
        "--only-binary",
        ":all:",
        "--quiet",
        "--constraint",
    ]));
    args.push(constraints.into());
    args.push("--python".into());
    args.push(python.interpreter.clone().into());
    let out = run(
        uv,
        &args,
        source,
        private,
        timeout,
        "resolving the packages",
        None,
    )
    .await?;
    if !out.success {
        let said = message(source, &out.stderr);
        return Err(PackagesError::Resolve(format!(
            "{}. The resolver said: {said}",
            hint(&said)
        )));
    }
    Ok(Lock::parse(&out.stdout)?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn messages_lose_colour_and_credentials_and_are_bounded() {
        let source = Source {
            default: Some("https://u:pw@corp.example/simple".into()),
            ..Source::default()
        };
        let m = message(
            &source,
            "\u{1b}[31merror\u{1b}[0m: fetching https://u:pw@corp.example/simple/x/ failed",
        );
        assert_eq!(m, "error: fetching https://corp.example/simple/x/ failed");
        let long = "x".repeat(MESSAGE_CAP * 3);
        assert!(message(&Source::default(), &long).chars().count() <= MESSAGE_CAP + 1);
    }

    #[test]
    fn a_venvs_distributions_are_read_from_their_directories() {
        let venv = tempfile::tempdir().unwrap();
        let site = venv.path().join("lib/python3.11/site-packages");
        for d in [
            "mcp-2.3.0.dist-info",
            "typing_extensions-4.12.2.dist-info",
            "mcp",
            "x.pth",
        ] {
            std::fs::create_dir_all(site.join(d)).unwrap();
        }
        let found = installed_in(venv.path(), "3.11").unwrap();
        assert_eq!(
            found,
            BTreeMap::from([
                ("mcp".to_string(), "2.3.0".to_string()),
                ("typing-extensions".to_string(), "4.12.2".to_string()),
            ])
        );
        assert!(installed_in(venv.path(), "3.12").is_none());
    }

    #[tokio::test]
    async fn a_run_over_its_time_is_stopped_and_one_that_fails_its_watch_too() {
        let home = tempfile::tempdir().unwrap();
        let private = Private::in_home(home.path()).unwrap();
        let sleep = Path::new("/bin/sleep");
        let args: Vec<std::ffi::OsString> = vec!["30".into()];
        let t0 = Instant::now();
        let e = run(
            sleep,
            &args,
            &Source::default(),
            &private,
            Duration::from_secs(1),
            "sleeping",
            None,
        )
        .await
        .err()
        .unwrap();
        assert!(
            matches!(
                e,
                PackagesError::Timeout {
                    what: "sleeping",
                    secs: 1
                }
            ),
            "{e}"
        );
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        let watch = || Err(PackagesError::TooLarge { limit_mib: 1 });
        let e = run(
            sleep,
            &args,
            &Source::default(),
            &private,
            Duration::from_secs(20),
            "sleeping",
            Some(&watch),
        )
        .await
        .err()
        .unwrap();
        assert!(matches!(e, PackagesError::TooLarge { .. }), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(8), "{:?}", t0.elapsed());
        // The control: a run within its time finishes with its output.
        let out = run(
            Path::new("/bin/echo"),
            &["done".into()],
            &Source::default(),
            &private,
            Duration::from_secs(5),
            "echo",
            None,
        )
        .await
        .unwrap();
        assert!(out.success && out.stdout.trim() == "done");
    }

    #[test]
    fn hints_follow_the_resolver() {
        assert!(
            hint("has no usable wheels and building from source is disabled")
                .contains("wheels only")
        );
        assert!(hint("Because nope was not found in the package registry").contains("name"));
        assert!(hint("No solution found when resolving").contains("conflict"));
    }
}
