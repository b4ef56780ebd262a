//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`, pinned in
//! `integration/conformance`) against `autotool serve --transport http`: one run per spec
//! revision (`server --url … --requirements REV -o DIR`), its per-scenario results, and the
//! verdict against the committed expected failures.
//!
//! - The suite writes `DIR/server-<scenario>-<timestamp>/checks.json` per scenario; a scenario
//!   fails when any of its checks has status `FAILURE` (warnings do not fail it, as in the
//!   suite's own summary). Its summary lines on stdout (`✓ name: N passed, M failed`) name
//!   every scenario that ran, in order.
//! - `expected-failures.txt`: `REVISION SCENARIO  # reason`, or `REVISION SCENARIO:CHECK  #
//!   reason` to excuse one check of a scenario whose other checks must pass. Every line needs a
//!   reason. A listed failure that passes, or that did not run, is itself a failure (the list
//!   cannot rot).

use anyhow::{Context as _, Result, bail};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The revisions the suite has requirement sets for, and autotool serves.
pub const REVISIONS: &[&str] = &["2025-11-25", "2026-07-28"];

/// One line of the expected-failures file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub revision: String,
    pub scenario: String,
    /// `None`: the whole scenario may fail; `Some(id)`: only this check of it.
    pub check: Option<String>,
    pub reason: String,
    pub line: usize,
}

impl Expected {
    fn key(&self) -> String {
        match &self.check {
            Some(c) => format!("{} {}:{c}", self.revision, self.scenario),
            None => format!("{} {}", self.revision, self.scenario),
        }
    }
}

/// Parse the expected-failures file: blank lines and lines starting with `#` are skipped.
pub fn parse_expected(text: &str) -> Result<Vec<Expected>, String> {
    let mut out: Vec<Expected> = Vec::new();
    let mut errors = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let Some((entry, reason)) = trimmed.split_once('#') else {
            errors.push(format!("line {line}: no `# reason`: {trimmed:?}"));
            continue;
        };
        let reason = reason.trim();
        let words: Vec<&str> = entry.split_whitespace().collect();
        let [revision, target] = words[..] else {
            errors.push(format!(
                "line {line}: want `REVISION SCENARIO  # reason`, got {trimmed:?}"
            ));
            continue;
        };
        if !REVISIONS.contains(&revision) {
            errors.push(format!(
                "line {line}: unknown revision {revision:?} (known: {REVISIONS:?})"
            ));
            continue;
        }
        if reason.is_empty() {
            errors.push(format!("line {line}: the reason is empty"));
            continue;
        }
        let (scenario, check) = match target.split_once(':') {
            Some((s, c)) => (s, Some(c.to_string())),
            None => (target, None),
        };
        let e = Expected {
            revision: revision.to_string(),
            scenario: scenario.to_string(),
            check,
            reason: reason.to_string(),
            line,
        };
        if let Some(prev) = out.iter().find(|p| p.key() == e.key()) {
            errors.push(format!(
                "line {line}: {} repeats line {}",
                e.key(),
                prev.line
            ));
            continue;
        }
        let whole_and_checks = out.iter().any(|p| {
            p.revision == e.revision
                && p.scenario == e.scenario
                && (p.check.is_none() != e.check.is_none())
        });
        if whole_and_checks {
            errors.push(format!(
                "line {line}: {} {} is listed both whole and by check",
                e.revision, e.scenario
            ));
            continue;
        }
        out.push(e);
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors.join("\n"))
    }
}

/// One check of a scenario that did not pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedCheck {
    pub id: String,
    pub message: String,
}

/// One scenario's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario {
    pub name: String,
    pub passed: usize,
    pub warnings: usize,
    pub failed: Vec<FailedCheck>,
}

impl Scenario {
    pub fn ok(&self) -> bool {
        self.failed.is_empty()
    }

    /// A scenario's outcome from its `checks.json` (an array of checks).
    pub fn from_checks(name: &str, checks: &Value) -> Result<Scenario> {
        let list = checks
            .as_array()
            .with_context(|| format!("{name}: checks.json is not an array"))?;
        let mut s = Scenario {
            name: name.to_string(),
            passed: 0,
            warnings: 0,
            failed: Vec::new(),
        };
        for c in list {
            match c.get("status").and_then(Value::as_str) {
                Some("SUCCESS") => s.passed += 1,
                Some("WARNING") => s.warnings += 1,
                Some("FAILURE") => s.failed.push(FailedCheck {
                    id: c
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                        .to_string(),
                    message: c
                        .get("errorMessage")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                }),
                _ => {}
            }
        }
        Ok(s)
    }
}

/// The scenario names on the suite's summary lines (`✓ name: 3 passed, 0 failed`), in order.
pub fn summary_scenarios(stdout: &str) -> Vec<String> {
    let Some(start) = stdout.find("=== SUMMARY ===") else {
        return Vec::new();
    };
    stdout[start..]
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("✓ ").or_else(|| l.strip_prefix("✗ "))?;
            let (name, counts) = rest.rsplit_once(": ")?;
            counts.ends_with(" failed").then(|| name.to_string())
        })
        .collect()
}

/// The scenario a result directory belongs to: `server-<name>-<ISO time, : and . as ->`.
fn scenario_of_dir(dir: &str) -> Option<&str> {
    let rest = dir.strip_prefix("server-")?;
    // 2026-11-30T02-46-27-327Z: 24 characters, after a `-`.
    let cut = rest.len().checked_sub(25)?;
    let (name, stamp) = rest.split_at(cut);
    let stamp = stamp.strip_prefix('-')?;
    let shape = stamp.len() == 24
        && stamp.as_bytes()[10] == b'T'
        && stamp.ends_with('Z')
        && stamp
            .bytes()
            .enumerate()
            .all(|(i, b)| b.is_ascii_digit() || (i == 10 && b == b'T') || b == b'-' || b == b'Z');
    shape.then_some(name)
}

/// Every scenario's outcome from a run's output directory, checked against the names on its
/// summary lines (a scenario with no results, or results of a scenario not summarised, is an
/// error: the run did not go as parsed).
pub fn read_results(dir: &Path, stdout: &str) -> Result<Vec<Scenario>> {
    let mut by_name: BTreeMap<String, Scenario> = BTreeMap::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let e = e?;
        let file = e.file_name().to_string_lossy().into_owned();
        let Some(name) = scenario_of_dir(&file) else {
            continue;
        };
        let path = e.path().join("checks.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let checks: Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let s = Scenario::from_checks(name, &checks)?;
        if by_name.insert(name.to_string(), s).is_some() {
            bail!("two result directories for {name} in {}", dir.display());
        }
    }
    let names = summary_scenarios(stdout);
    if names.is_empty() {
        bail!("the suite printed no summary; its output:\n{stdout}");
    }
    let mut out = Vec::new();
    for n in &names {
        let s = by_name
            .remove(n)
            .with_context(|| format!("{n} is in the summary but has no checks.json"))?;
        out.push(s);
    }
    if let Some(extra) = by_name.keys().next() {
        bail!("{extra} has results but is not in the summary");
    }
    Ok(out)
}

/// How one revision's run compares with the expected failures.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Scenarios with no failing check.
    pub passed: Vec<String>,
    /// Failures the list accounts for, with the reason of each.
    pub expected: Vec<(String, String)>,
    /// Scenarios with a failure the list does not account for.
    pub failed: Vec<String>,
    /// Those failures: `scenario: check: message`.
    pub unexpected: Vec<String>,
    /// Listed failures that passed: the list must lose these lines.
    pub stale: Vec<String>,
    /// Listed failures of scenarios that did not run.
    pub not_run: Vec<String>,
}

impl Verdict {
    pub fn ok(&self) -> bool {
        self.unexpected.is_empty() && self.stale.is_empty() && self.not_run.is_empty()
    }

    /// `passed P, failed F, expected failures E` (F counts the scenarios whose failures the
    /// list does not excuse).
    pub fn counts(&self) -> String {
        format!(
            "passed {}, failed {}, expected failures {}",
            self.passed.len(),
            self.failed.len(),
            self.expected.len()
        )
    }
}

/// Judge one revision's scenarios against the expected failures (lines of other revisions are
/// ignored).
pub fn judge(revision: &str, results: &[Scenario], expected: &[Expected]) -> Verdict {
    let mine: Vec<&Expected> = expected.iter().filter(|e| e.revision == revision).collect();
    let mut v = Verdict::default();
    for s in results {
        let listed: Vec<&&Expected> = mine.iter().filter(|e| e.scenario == s.name).collect();
        let whole = listed.iter().find(|e| e.check.is_none());
        if let Some(e) = whole {
            if s.ok() {
                v.passed.push(s.name.clone());
                v.stale.push(format!(
                    "{} {} (line {}) passed: remove it from the list",
                    revision, s.name, e.line
                ));
            } else {
                v.expected.push((s.name.clone(), e.reason.clone()));
            }
            continue;
        }
        let mut reasons = Vec::new();
        for f in &s.failed {
            match listed.iter().find(|e| e.check.as_deref() == Some(&f.id)) {
                Some(e) => reasons.push(format!("{}: {}", f.id, e.reason)),
                None => v
                    .unexpected
                    .push(format!("{}: {}: {}", s.name, f.id, f.message)),
            }
        }
        for e in &listed {
            let still_fails = s.failed.iter().any(|f| Some(&f.id) == e.check.as_ref());
            if !still_fails {
                v.stale.push(format!(
                    "{} {}:{} (line {}) passed: remove it from the list",
                    revision,
                    s.name,
                    e.check.as_deref().unwrap_or(""),
                    e.line
                ));
            }
        }
        if s.ok() {
            v.passed.push(s.name.clone());
        } else if s.failed.len() == reasons.len() {
            v.expected.push((s.name.clone(), reasons.join("; ")));
        } else {
            v.failed.push(s.name.clone());
        }
    }
    for e in &mine {
        if !results.iter().any(|s| s.name == e.scenario) {
            v.not_run.push(format!(
                "{} (line {}) did not run: the suite has no such scenario for {revision}",
                e.key(),
                e.line
            ));
        }
    }
    v
}

/// What one run of the suite printed, and where its results are.
#[derive(Debug)]
pub struct Run {
    pub revision: String,
    pub results: Vec<Scenario>,
    pub stdout: String,
    pub stderr: String,
    pub exit: Option<i32>,
    pub elapsed: Duration,
}

/// `node conformance server --url URL --requirements REVISION -o OUT`, at most `timeout`.
pub fn run(
    suite: &crate::prereq::Conformance,
    url: &str,
    revision: &str,
    out: &Path,
    timeout: Duration,
) -> Result<Run> {
    let mut cmd = Command::new(&suite.node);
    cmd.arg(&suite.entry)
        .args(["server", "--url", url, "--requirements", revision])
        .arg("-o")
        .arg(out)
        .current_dir(out)
        .env("NO_COLOR", "1")
        .env("npm_config_update_notifier", "false");
    let started = Instant::now();
    let mut child = crate::OwnedChild::spawn(&format!("conformance {revision}"), cmd)?;
    child.close_stdin();
    let (lines, ended) = child.read_to_end(started + timeout);
    let status = child.wait_exit(Duration::from_secs(5))?;
    let stderr = child.final_stderr();
    let stdout: String = lines
        .iter()
        .map(|l| l.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    if !ended {
        child.kill_group();
        bail!(
            "the conformance suite ({revision}) did not finish within {timeout:?}; stdout:\n\
             {stdout}\nstderr:\n{stderr}"
        );
    }
    let results = read_results(out, &stdout)
        .with_context(|| format!("reading the {revision} results; stderr:\n{stderr}"))?;
    Ok(Run {
        revision: revision.to_string(),
        results,
        stdout,
        stderr,
        exit: status.and_then(|s| s.code()),
        elapsed: started.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn scenario(name: &str, failed: &[&str]) -> Scenario {
        Scenario {
            name: name.into(),
            passed: 1,
            warnings: 0,
            failed: failed
                .iter()
                .map(|id| FailedCheck {
                    id: id.to_string(),
                    message: format!("{id} went wrong"),
                })
                .collect(),
        }
    }

    #[test]
    fn conformance_expected_failures_parse_with_a_reason_per_line() {
        let text = "\
# header
2025-11-25 tools-call-image   # fixture tool test_image_content

2026-07-28 server-stateless:sep-1  # fixture tool test_missing_capability
";
        let got = parse_expected(text).unwrap();
        assert_eq!(
            got,
            vec![
                Expected {
                    revision: "2025-11-25".into(),
                    scenario: "tools-call-image".into(),
                    check: None,
                    reason: "fixture tool test_image_content".into(),
                    line: 2,
                },
                Expected {
                    revision: "2026-07-28".into(),
                    scenario: "server-stateless".into(),
                    check: Some("sep-1".into()),
                    reason: "fixture tool test_missing_capability".into(),
                    line: 4,
                },
            ]
        );
        for bad in [
            "2025-11-25 tools-call-image",
            "2025-11-25 tools-call-image  #   ",
            "2024-01-01 tools-call-image  # r",
            "2025-11-25  # r",
            "2025-11-25 a b  # r",
            "2025-11-25 a  # r\n2025-11-25 a  # again",
            "2025-11-25 a  # r\n2025-11-25 a:c  # r",
        ] {
            assert!(parse_expected(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn conformance_verdict_excuses_only_what_is_listed_and_flags_stale_lines() {
        let expected = parse_expected(
            "\
2026-07-28 fixture-a  # a
2026-07-28 now-passes  # b
2026-07-28 mixed:c1  # c
2026-07-28 gone  # d
2025-11-25 fixture-a  # other revision
",
        )
        .unwrap();
        let results = vec![
            scenario("clean", &[]),
            scenario("fixture-a", &["x"]),
            scenario("now-passes", &[]),
            scenario("mixed", &["c1", "c2"]),
            scenario("regressed", &["r"]),
        ];
        let v = judge("2026-07-28", &results, &expected);
        assert_eq!(v.passed, ["clean", "now-passes"]);
        assert_eq!(v.failed, ["mixed", "regressed"]);
        assert_eq!(v.expected, [("fixture-a".to_string(), "a".to_string())]);
        assert_eq!(
            v.unexpected,
            ["mixed: c2: c2 went wrong", "regressed: r: r went wrong"]
        );
        assert_eq!(v.stale.len(), 1);
        assert!(v.stale[0].contains("now-passes"), "{:?}", v.stale);
        assert_eq!(v.not_run.len(), 1);
        assert!(v.not_run[0].contains("gone"), "{:?}", v.not_run);
        assert!(!v.ok());

        // A per-check line excuses its check; the scenario is then an expected failure.
        let v = judge("2026-07-28", &[scenario("mixed", &["c1"])], &expected);
        assert_eq!(v.expected, [("mixed".to_string(), "c1: c".to_string())]);
        assert!(v.unexpected.is_empty());
        // A per-check line whose check passes is stale, though another check fails.
        let v = judge("2026-07-28", &[scenario("mixed", &["c9"])], &expected);
        assert_eq!(v.unexpected, ["mixed: c9: c9 went wrong"]);
        assert_eq!(v.stale.len(), 1);
        assert_eq!(
            v.counts(),
            "passed 0, failed 1, expected failures 0",
            "{v:?}"
        );
    }

    #[test]
    fn conformance_results_read_from_checks_and_summary() {
        let dir = tempfile::tempdir().unwrap();
        let write = |d: &str, checks: Value| {
            let p = dir.path().join(d);
            std::fs::create_dir(&p).unwrap();
            std::fs::write(p.join("checks.json"), checks.to_string()).unwrap();
        };
        write(
            "server-ping-2026-11-30T02-46-27-044Z",
            json!([{"id": "ping", "status": "SUCCESS"}, {"id": "w", "status": "WARNING"}]),
        );
        write(
            "server-tools-call-error-2026-11-30T02-46-27-215Z",
            json!([{"id": "tce", "status": "FAILURE", "errorMessage": "unknown tool"},
                   {"id": "wire-schema-valid", "status": "SUCCESS"}]),
        );
        let stdout = "Running…\n\n=== SUMMARY ===\n✓ ping: 1 passed, 0 failed\n\
                      ✗ tools-call-error: 1 passed, 1 failed\n\nTotal: 2 passed, 1 failed\n";
        let got = read_results(dir.path(), stdout).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].name, "ping");
        assert!(got[0].ok());
        assert_eq!(got[0].warnings, 1);
        assert_eq!(got[1].name, "tools-call-error");
        assert_eq!(
            got[1].failed,
            [FailedCheck {
                id: "tce".into(),
                message: "unknown tool".into()
            }]
        );
        // A summarised scenario without results, or results without a summary line: an error.
        assert!(read_results(dir.path(), "=== SUMMARY ===\n✓ ping: 1 passed, 0 failed\n").is_err());
        assert!(read_results(dir.path(), "no summary").is_err());
        assert_eq!(
            scenario_of_dir("server-ping-2026-11-30T02-46-27-044Z"),
            Some("ping")
        );
        assert_eq!(scenario_of_dir("server-ping"), None);
    }
}
