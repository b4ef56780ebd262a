//! What the running serves grant without asking, for what runs outside them (`autotool tools
//! show`, the console): a serve started with `--dangerously-allow-all-tools` (or
//! `AUTOTOOL_CONSENT=dangerously-allow-all`) grants every tool its declared reach, and one with
//! the preset `reach = trusted` its declared hosts, and a view computed from the ledger alone
//! would show such a host "not granted yet" while the serve reaches it.
//!
//! Each serve [registers](register) what it grants in `$AUTOTOOL_HOME/serving/<pid>.json`
//! (0600) for as long as it runs; [`granting`] reads the records of the serves still running
//! (the process is there and started when the record says: a pid reused since does not count),
//! and when none runs, the settings a serve started now would have (the config file and this
//! environment). The words it returns say which serve, or which setting, grants. The record also
//! says how often the serve looks at the followed team libraries (`library follow` reports it).

use crate::home::Home;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What one serve grants without asking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub pid: u32,
    /// The process's start time (`/proc/<pid>/stat`, field 22), so a reused pid is not taken
    /// for it. `None` where there is no `/proc`.
    pub started: Option<u64>,
    /// `--dangerously-allow-all-tools`: every declared key and reach, unasked.
    pub allow_all: bool,
    /// `reach = trusted`: every declared host, unasked.
    pub trusted_hosts: bool,
    /// How often it looks at the followed team libraries, in ms (`follow_interval`); `None`
    /// for a serve that follows none (built without the team library, or from before this was
    /// recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_every_ms: Option<u64>,
}

/// What is granted without asking, each in words naming what grants it; `None`: asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Granting {
    pub allow_all: Option<String>,
    pub trusted_hosts: Option<String>,
}

/// The record of this serve, removed when dropped.
#[derive(Debug)]
pub struct Registration {
    path: PathBuf,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn dir(home: &Home) -> PathBuf {
    home.root().join("serving")
}

/// The start time of process `pid`, from `/proc`.
fn started(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Record what this serve grants without asking, for as long as the returned guard lives.
/// A record that cannot be written is a warning: the views outside serve then show less than
/// it grants.
pub fn register(
    home: &Home,
    allow_all: bool,
    trusted_hosts: bool,
    follows: Option<std::time::Duration>,
) -> Option<Registration> {
    let pid = std::process::id();
    let record = Record {
        pid,
        started: started(pid),
        allow_all,
        trusted_hosts,
        follow_every_ms: follows.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    };
    let path = dir(home).join(format!("{pid}.json"));
    let written = crate::home::ensure_dir(&dir(home), 0o700)
        .map_err(|e| e.to_string())
        .and_then(|()| serde_json::to_vec(&record).map_err(|e| e.to_string()))
        .and_then(|bytes| crate::home::write_private(&path, &bytes).map_err(|e| e.to_string()));
    match written {
        Ok(()) => Some(Registration { path }),
        Err(e) => {
            tracing::warn!(
                "recording what this serve grants in {}: {e}",
                path.display()
            );
            None
        }
    }
}

/// The records of the serves running on `home`; a record whose serve is gone is removed.
pub fn running(home: &Home) -> Vec<Record> {
    let Ok(entries) = std::fs::read_dir(dir(home)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(record) = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Record>(&b).ok())
        else {
            continue;
        };
        let alive = match record.started {
            Some(at) => started(record.pid) == Some(at),
            None => std::path::Path::new(&format!("/proc/{}", record.pid)).exists(),
        };
        if alive {
            out.push(record);
        } else {
            let _ = std::fs::remove_file(&path);
        }
    }
    out.sort_by_key(|r| r.pid);
    out
}

/// What is granted without asking on `home`, for a view outside serve: by the serves running
/// there, or, when none runs, by the settings a serve started now would have.
pub fn granting(home: &Home) -> Granting {
    let serves = running(home);
    if !serves.is_empty() {
        let by = |pick: fn(&Record) -> bool, what: &str| {
            serves
                .iter()
                .find(|r| pick(r))
                .map(|r| format!("{what} of the running serve (pid {})", r.pid))
        };
        return Granting {
            allow_all: by(|r| r.allow_all, "--dangerously-allow-all-tools"),
            trusted_hosts: by(|r| r.trusted_hosts, "the preset `reach = trusted`"),
        };
    }
    let Ok(config) = crate::config::Inputs::from_process(Default::default())
        .and_then(|inputs| crate::config::resolve(&inputs))
    else {
        return Granting::default();
    };
    let settings = config.settings();
    let from = |name: &str| {
        config
            .get(name)
            .map(|e| e.layer.as_str())
            .unwrap_or("default")
            .to_owned()
    };
    Granting {
        allow_all: settings.allow_all_keys.then(|| {
            format!(
                "`consent = dangerously-allow-all` ({}), as a serve started now",
                from("consent")
            )
        }),
        trusted_hosts: (settings.reach == autotool_policy::reach::ReachPreset::Trusted).then(
            || {
                format!(
                    "the preset `reach = trusted` ({}), as a serve started now",
                    from("reach")
                )
            },
        ),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_running_serves_record_is_read_and_a_dead_ones_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        assert!(running(&home).is_empty());
        let guard = register(&home, true, false, None).unwrap();
        let mine = running(&home);
        assert_eq!(mine.len(), 1);
        assert_eq!(mine[0].pid, std::process::id());
        assert!(mine[0].allow_all && !mine[0].trusted_hosts);
        let granting = granting(&home);
        assert_eq!(
            granting.allow_all.as_deref(),
            Some(
                format!(
                    "--dangerously-allow-all-tools of the running serve (pid {})",
                    std::process::id()
                )
                .as_str()
            )
        );
        assert_eq!(granting.trusted_hosts, None);
        // A record of a process gone (or a pid reused since: another start time) is dropped.
        let stale = Record {
            pid: std::process::id(),
            started: Some(1),
            allow_all: false,
            trusted_hosts: true,
            follow_every_ms: None,
        };
        let stale_path = dir.path().join("serving/1.json");
        std::fs::write(&stale_path, serde_json::to_vec(&stale).unwrap()).unwrap();
        assert_eq!(running(&home).len(), 1);
        assert!(!stale_path.exists());
        drop(guard);
        assert!(running(&home).is_empty());
    }
}
