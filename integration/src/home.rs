//! [`TestHome`]: a fresh `AUTOTOOL_HOME` for one test, the environment that points an
//! `autotool serve` (and the `autotool` CLI) at it, and a reaper: when the test ends, any process
//! still running with this home in its environment (a serve a client failed to stop) is killed.

use crate::prereq::Setup;
use crate::procfs;
use anyhow::{Context as _, Result};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// `AUTOTOOL_TEST_KEEP_HOME` set: leave each test's home in place for a look afterwards.
fn keep_home() -> bool {
    std::env::var_os("AUTOTOOL_TEST_KEEP_HOME").is_some()
}

/// One test's home.
#[derive(Debug)]
pub struct TestHome {
    dir: tempfile::TempDir,
    pub setup: Setup,
}

impl TestHome {
    pub fn new(setup: &Setup) -> Result<TestHome> {
        let dir = tempfile::Builder::new()
            .prefix("autotool-integration.")
            .disable_cleanup(keep_home())
            .tempdir()
            .context("creating a temporary AUTOTOOL_HOME")?;
        Ok(TestHome {
            dir,
            setup: setup.clone(),
        })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The environment of a serve (and a CLI run) on this home.
    pub fn env(&self) -> Vec<(String, String)> {
        let s = &self.setup;
        vec![
            ("AUTOTOOL_HOME".into(), self.path().display().to_string()),
            ("AUTOTOOL_RUNTIME".into(), s.runtime.display().to_string()),
            ("AUTOTOOL_LAUNCHER".into(), s.launcher.display().to_string()),
            // create_tool answers with its outcome however long verification takes (the
            // first-run tests, on a newcomer's environment, keep serve's 3.5 s hold).
            ("AUTOTOOL_CREATE_HOLD".into(), "0".into()),
            (
                "AUTOTOOL_LOG".into(),
                std::env::var("AUTOTOOL_LOG").unwrap_or_else(|_| "info".into()),
            ),
            ("RUST_BACKTRACE".into(), "1".into()),
        ]
    }

    /// `autotool ARGS` on this home, bounded by `timeout`: (exit status, stdout, stderr).
    pub fn cli(&self, args: &[&str], timeout: Duration) -> Result<(Option<i32>, String, String)> {
        let mut cmd = Command::new(&self.setup.autotool);
        cmd.args(args).envs(self.env());
        let mut child = crate::OwnedChild::spawn(&format!("autotool {}", args.join(" ")), cmd)?;
        child.close_stdin();
        let deadline = Instant::now() + timeout;
        let (lines, ended) = child.read_to_end(deadline);
        let status = child.wait_exit(deadline.saturating_duration_since(Instant::now()))?;
        let stdout: Vec<String> = lines.into_iter().map(|l| l.text).collect();
        let stderr = child.final_stderr();
        if !ended || status.is_none() {
            anyhow::bail!(
                "`autotool {}` did not finish within {timeout:?}",
                args.join(" ")
            );
        }
        Ok((status.and_then(|s| s.code()), stdout.join("\n"), stderr))
    }

    /// `autotool serve` processes (and anything else) running with this home.
    pub fn processes(&self) -> Vec<u32> {
        procfs::with_env("AUTOTOOL_HOME", &self.path().display().to_string())
    }

    /// Wait until no process runs with this home any more; the pids still running at the
    /// deadline.
    pub fn wait_idle(&self, timeout: Duration) -> Vec<u32> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = self.processes();
            if left.is_empty() || Instant::now() >= deadline {
                return left;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The serve log file(s) of this home, for failure messages (the last `max` bytes).
    pub fn log_tail(&self, max: usize) -> String {
        let mut out = String::new();
        let logs = self.path().join("logs");
        if let Ok(entries) = std::fs::read_dir(&logs) {
            for e in entries.flatten() {
                if let Ok(text) = std::fs::read_to_string(e.path()) {
                    let start = text.len().saturating_sub(max);
                    let start = (start..text.len())
                        .find(|i| text.is_char_boundary(*i))
                        .unwrap_or(text.len());
                    out.push_str(&format!(
                        "--- {} (last {} bytes)\n{}\n",
                        e.path().display(),
                        text.len() - start,
                        &text[start..]
                    ));
                }
            }
        }
        out
    }

    /// Every file under the home's `tools/` directory (relative paths), for failure messages.
    pub fn tool_files(&self) -> Vec<String> {
        let root = self.path().join("tools");
        let mut out = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    out.push(format!(
                        "{}/",
                        p.strip_prefix(&root).unwrap_or(&p).display()
                    ));
                    stack.push(p);
                } else {
                    out.push(p.strip_prefix(&root).unwrap_or(&p).display().to_string());
                }
            }
        }
        out.sort();
        out
    }
}

impl Drop for TestHome {
    fn drop(&mut self) {
        for pid in self.processes() {
            eprintln!(
                "reaping pid {pid} still running on {} at the end of the test: {}",
                self.path().display(),
                procfs::cmdline(pid)
            );
            let _ = crate::child::kill9(pid);
        }
        if keep_home() {
            eprintln!("kept AUTOTOOL_HOME at {}", self.path().display());
        }
    }
}
