//! Process facts read from `/proc`: who descends from whom, command lines, environments,
//! whether a process is still alive.

use std::collections::{BTreeMap, BTreeSet};

/// Every process: pid → parent pid.
fn parents() -> BTreeMap<u32, u32> {
    let mut map = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return map;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The command name (field 2) may hold spaces and parentheses: fields resume after the
        // last ')'. Then: state, ppid.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|s| s.parse().ok()) {
            map.insert(pid, ppid);
        }
    }
    map
}

/// The parent of `pid`, while it lives.
pub fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Every descendant of `pid` (children, their children, ...), not `pid` itself.
pub fn descendants(pid: u32) -> Vec<u32> {
    let parents = parents();
    let mut found = BTreeSet::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for (&child, &parent) in &parents {
            if parent == p && found.insert(child) {
                frontier.push(child);
            }
        }
    }
    found.into_iter().collect()
}

/// The command line of `pid`, arguments joined by spaces ("" when gone or unreadable).
pub fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// Whether `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Every live process whose environment holds exactly `key=value`.
pub fn with_env(key: &str, value: &str) -> Vec<u32> {
    let needle = format!("{key}={value}");
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if env.split(|c| *c == 0).any(|kv| kv == needle.as_bytes()) && alive(pid) {
            found.push(pid);
        }
    }
    found
}

/// A process's environment (`/proc/PID/environ`), as `KEY=VALUE` pairs; empty once it is gone.
pub fn environ(pid: u32) -> Vec<(String, String)> {
    let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return Vec::new();
    };
    env.split(|c| *c == 0)
        .filter_map(|kv| {
            let kv = String::from_utf8_lossy(kv);
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}
