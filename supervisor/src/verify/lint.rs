//! The lint stage: the runtime's `ruff`, on the code read from stdin, for the mistakes that
//! stop a tool from running or break it when called: syntax errors (for the runtime's Python
//! version) and undefined names. Ruff only reads the code; nothing of it runs. Ruff itself runs
//! outside the sandbox, so it is run only when it (and every directory above it) belongs to
//! the user or root and nobody else may write it (`crate::home::check_owned`).

use super::{Stage, VerifyFailure, cap_head};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// How long ruff may take.
pub const LINT_TIMEOUT: Duration = Duration::from_secs(10);
/// Ruff's rules: syntax errors (E9), comparisons that are always wrong (F63), misplaced
/// statements such as `return` outside a function (F7), undefined names (F82).
pub const LINT_RULES: &str = "E9,F63,F7,F82";
/// The file name diagnostics carry.
const SHOWN_AS: &str = "tool.py";

/// Lint `code` with `ruff` for Python `python_version` (`major.minor`, as in
/// [`crate::tool::runtime::Python::version`]), within `timeout`. A failure is a [`Stage::Lint`]
/// failure whose message names the first problem's line and whose log is ruff's report.
pub async fn lint(
    ruff: &Path,
    code: &str,
    python_version: &str,
    timeout: Duration,
) -> Result<(), VerifyFailure> {
    let fail = |message: String, log: String| VerifyFailure {
        stage: Stage::Lint,
        message,
        log,
    };
    // Ruff runs outside the sandbox, as the user: only a ruff nobody else can change (nor any
    // directory above it) is run, so a runtime under a directory others may write cannot be
    // handed a program of theirs.
    if let Err(e) = crate::home::check_owned(ruff) {
        return Err(fail(
            format!(
                "autotool will not run ruff at {}: {e}; this is a problem with autotool's Python runtime, not with the tool: rebuild it where only you can write (`autotool runtime rebuild`, with a home only you can change) and see `autotool doctor`",
                ruff.display()
            ),
            String::new(),
        ));
    }
    let mut cmd = tokio::process::Command::new(ruff);
    cmd.args(["check", "--no-cache", "--isolated", "--select", LINT_RULES])
        .args(["--output-format", "concise", "--stdin-filename", SHOWN_AS]);
    if let Some(target) = target_version(python_version) {
        cmd.args(["--target-version", &target]);
    }
    // Nothing of the user's environment or working directory reaches ruff.
    cmd.env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| {
        fail(
            format!(
                "autotool could not run ruff at {} ({e}); this is a problem with autotool's Python runtime, not with the tool: `autotool doctor` checks it",
                ruff.display()
            ),
            String::new(),
        )
    })?;
    if let Some(mut stdin) = child.stdin.take() {
        let code = code.as_bytes().to_vec();
        tokio::spawn(async move {
            let _ = stdin.write_all(&code).await;
        });
    }
    let output = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => {
            return Err(fail(
                format!("autotool could not read ruff's report ({e})"),
                String::new(),
            ));
        }
        Err(_) => {
            return Err(fail(
                format!(
                    "ruff did not finish within {} s; make the file smaller",
                    timeout.as_secs()
                ),
                String::new(),
            ));
        }
    };
    let report = String::from_utf8_lossy(&output.stdout).trim().to_string();
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
    match output.status.code() {
        Some(0) => Ok(()),
        Some(1) => {
            let problems: Vec<&str> = report.lines().filter(|l| l.starts_with(SHOWN_AS)).collect();
            let first = problems
                .first()
                .map(|l| describe(l))
                .unwrap_or_else(|| report.lines().next().unwrap_or_default().to_string());
            let count = problems.len().max(1);
            Err(fail(
                format!(
                    "ruff found {count} problem{} that would stop the tool from running or break it when called; the first: {first}",
                    if count == 1 { "" } else { "s" }
                ),
                cap_head(&report),
            ))
        }
        _ => Err(fail(
            format!(
                "ruff could not check the code ({}); this is a problem with autotool's Python runtime, not with the tool",
                output.status
            ),
            cap_head(&format!("{report}\n{stderr}")),
        )),
    }
}

/// `tool.py:3:7: invalid-syntax: Expected …` → `line 3, column 7: invalid-syntax: Expected …`.
fn describe(line: &str) -> String {
    let mut parts = line.splitn(4, ':');
    let (_, row, col, rest) = (parts.next(), parts.next(), parts.next(), parts.next());
    match (row, col, rest) {
        (Some(row), Some(col), Some(rest)) => {
            format!("line {row}, column {col}: {}", rest.trim())
        }
        _ => line.to_string(),
    }
}

/// Ruff's name for a Python version, within the range ruff 0.17 knows.
fn target_version(version: &str) -> Option<String> {
    let (major, minor) = version.split_once('.')?;
    let minor: u32 = minor.parse().ok()?;
    (major == "3").then(|| format!("py3{}", minor.clamp(10, 15)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagnostics_read_as_lines_and_columns() {
        assert_eq!(
            describe("tool.py:3:7: invalid-syntax: Expected `)`, found newline"),
            "line 3, column 7: invalid-syntax: Expected `)`, found newline"
        );
    }

    #[test]
    fn target_versions_stay_in_ruffs_range() {
        assert_eq!(target_version("3.11").as_deref(), Some("py311"));
        assert_eq!(target_version("3.9").as_deref(), Some("py310"));
        assert_eq!(target_version("3.20").as_deref(), Some("py315"));
        assert_eq!(target_version("4.0"), None);
        assert_eq!(target_version("x"), None);
    }
}
