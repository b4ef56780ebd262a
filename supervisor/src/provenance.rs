//! Provenance of added servers (`autotool add`): where each came from: `$AUTOTOOL_HOME/added.json`, by tool name, one entry
//! per version added. An entry counts only for the version whose code it names (its hash):
//! a file that merely claims a `SOURCE` is not an added server.

use crate::home::Home;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One version of an added server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddedVersion {
    /// The tool's version.
    pub version: u32,
    /// sha256 of the file autotool wrote for it.
    pub code_hash: String,
    /// `pypi` or `npm`.
    pub registry: String,
    /// The package, as its registry names it.
    pub package: String,
    /// The exact version installed.
    pub package_version: String,
    /// The console script or `module:function` named with `--entry`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    /// The arguments it is started with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// When it was added (RFC 3339, UTC).
    pub added_at: String,
    /// The host app it was moved from (`setup --import`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported_from: Option<String>,
}

impl AddedVersion {
    /// `pypi:mcp-server-time 2026.10.19`: how the origin is shown.
    pub fn origin(&self) -> String {
        format!(
            "{}:{} {}",
            self.registry, self.package, self.package_version
        )
    }
}

fn path(home: &Home) -> PathBuf {
    home.root().join("added.json")
}

/// Every added server's versions, oldest first.
pub fn all(home: &Home) -> BTreeMap<String, Vec<AddedVersion>> {
    std::fs::read(path(home))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Where `tool`'s version with `code_hash` came from, if it was added.
pub fn of(home: &Home, tool: &str, code_hash: &str) -> Option<AddedVersion> {
    all(home)
        .remove(tool)?
        .into_iter()
        .rev()
        .find(|v| v.code_hash == code_hash)
}

/// The latest version added of `tool`, whatever the current version is.
pub fn latest(home: &Home, tool: &str) -> Option<AddedVersion> {
    all(home).remove(tool)?.pop()
}

/// Record a version (replacing an entry for the same version).
pub fn record(home: &Home, tool: &str, entry: AddedVersion) -> std::io::Result<()> {
    let mut every = all(home);
    let versions = every.entry(tool.to_string()).or_default();
    versions.retain(|v| v.version != entry.version);
    versions.push(entry);
    let bytes = serde_json::to_vec_pretty(&every).map_err(std::io::Error::other)?;
    crate::home::write_private(&path(home), &bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn entry(version: u32, hash: &str) -> AddedVersion {
        AddedVersion {
            version,
            code_hash: hash.into(),
            registry: "pypi".into(),
            package: "mcp-server-time".into(),
            package_version: format!("2026.10.{version}"),
            entry: None,
            args: vec![],
            added_at: "2026-12-07T00:00:00Z".into(),
            imported_from: None,
        }
    }

    #[test]
    fn an_origin_counts_only_for_the_code_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        assert!(of(&home, "timesrv", "aa").is_none());
        record(&home, "timesrv", entry(1, "aa")).unwrap();
        record(&home, "timesrv", entry(2, "bb")).unwrap();
        assert_eq!(of(&home, "timesrv", "aa").unwrap().version, 1);
        assert_eq!(
            of(&home, "timesrv", "bb").unwrap().origin(),
            "pypi:mcp-server-time 2026.10.2"
        );
        assert!(of(&home, "timesrv", "cc").is_none());
        assert!(of(&home, "other", "aa").is_none());
        assert_eq!(latest(&home, "timesrv").unwrap().version, 2);
        // Recording a version again replaces its entry.
        record(&home, "timesrv", entry(2, "dd")).unwrap();
        assert_eq!(all(&home)["timesrv"].len(), 2);
        assert!(of(&home, "timesrv", "bb").is_none());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("added.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
