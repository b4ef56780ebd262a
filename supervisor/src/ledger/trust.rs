//! Which versions of a tool earned trust (active now, or promoted to active once), and what the
//! trust binds besides the baseline's obligations: the functions its trusted versions called
//! (`USES`), a ceiling for every later version ([`Ledger::trusted_uses`]).

use super::{Event, Ledger, LedgerError, State};
use rusqlite::{OptionalExtension, params};
use std::collections::BTreeSet;

impl Ledger {
    /// Whether `version` of `tool` is trusted: active now, or promoted to active once.
    pub fn was_trusted(&self, tool: &str, version: u32) -> Result<bool, LedgerError> {
        let conn = self.conn();
        Ok(trusted(&conn, tool, version)?)
    }

    /// The functions `tool`'s trusted versions declared in `USES`, all of them together,
    /// sorted; `None` when no version of it was trusted since it was last removed (then a
    /// rewrite may call anything the `USES` rules allow). A rewrite may call these or fewer,
    /// never one outside them.
    pub fn trusted_uses(&self, tool: &str) -> Result<Option<Vec<String>>, LedgerError> {
        let conn = self.conn();
        // A tool created again after `autotool tools remove` starts with no baseline: only
        // versions made since the last removal count.
        let removed: Option<i64> = conn.query_row(
            "SELECT MAX(at) FROM events WHERE tool = ?1 AND kind = ?2",
            params![tool, Event::Removed.as_str()],
            |r| r.get(0),
        )?;
        let mut query = conn.prepare(
            "SELECT version, uses FROM versions WHERE name = ?1 AND created_at > ?2
             ORDER BY version",
        )?;
        let rows = query
            .query_map(params![tool, removed.unwrap_or(i64::MIN)], |r| {
                Ok((r.get::<_, u32>(0)?, r.get::<_, String>(1)?))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let mut any = false;
        let mut uses = BTreeSet::new();
        for (version, declared) in rows {
            if !trusted(&conn, tool, version)? {
                continue;
            }
            any = true;
            // A trusted version's USES that cannot be read bind nothing less: the error
            // stops the check, it does not waive it.
            let declared: Vec<String> =
                serde_json::from_str(&declared).map_err(|source| LedgerError::Json {
                    what: "uses",
                    source,
                })?;
            uses.extend(declared);
        }
        Ok(any.then(|| uses.into_iter().collect()))
    }
}

/// Whether `version` of `tool` is active now or was promoted to active once (a
/// `state_changed` event says so).
pub(super) fn trusted(
    conn: &rusqlite::Connection,
    tool: &str,
    version: u32,
) -> rusqlite::Result<bool> {
    let state: Option<String> = conn
        .query_row(
            "SELECT state FROM versions WHERE name = ?1 AND version = ?2",
            params![tool, version],
            |r| r.get(0),
        )
        .optional()?;
    if state.as_deref() == Some(State::Active.as_str()) {
        return Ok(true);
    }
    Ok(conn
        .query_row(
            "SELECT 1 FROM events WHERE tool = ?1 AND kind = ?2 AND detail LIKE ?3 LIMIT 1",
            params![
                tool,
                Event::StateChanged.as_str(),
                format!("version {version} is now active:%")
            ],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::ledger::{Version, now_ms};
    use autotool_policy::names::ToolName;

    fn add(ledger: &Ledger, version: u32, uses: &[&str]) {
        ledger
            .write(|tx| {
                tx.insert_current_version(&Version {
                    name: ToolName::parse("briefing").unwrap(),
                    version,
                    code_hash: format!("{version:064}"),
                    description: String::new(),
                    required_env: Vec::new(),
                    functions: Default::default(),
                    packages: None,
                    uses: uses.iter().map(|s| s.to_string()).collect(),
                    reach: None,
                    state: State::Probation,
                    created_at: now_ms(),
                })
            })
            .unwrap();
    }

    #[test]
    fn the_uses_of_every_trusted_version_bind_and_untrusted_ones_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(&dir.path().join("autotool.db")).unwrap();
        assert_eq!(ledger.trusted_uses("briefing").unwrap(), None);
        // On probation, v1 binds nothing.
        add(&ledger, 1, &["hn__top"]);
        assert_eq!(ledger.trusted_uses("briefing").unwrap(), None);
        // Promoted, it does; v2 calls nothing and is promoted, then quarantined: trusted once,
        // so it counts (with nothing to add); v3 on probation adds nothing.
        ledger
            .set_state("briefing", 1, State::Active, "5 successful calls")
            .unwrap();
        add(&ledger, 2, &[]);
        ledger
            .set_state("briefing", 2, State::Active, "5 successful calls")
            .unwrap();
        ledger
            .set_state("briefing", 2, State::Quarantined, "3 failures")
            .unwrap();
        add(&ledger, 3, &["bank__transfer"]);
        assert_eq!(
            ledger.trusted_uses("briefing").unwrap(),
            Some(vec!["hn__top".to_string()])
        );
        add(&ledger, 4, &["hn__item", "hn__top"]);
        ledger
            .set_state("briefing", 4, State::Active, "5 successful calls")
            .unwrap();
        assert_eq!(
            ledger.trusted_uses("briefing").unwrap(),
            Some(vec!["hn__item".to_string(), "hn__top".to_string()])
        );
        // Removed and created again: it starts with no baseline.
        ledger
            .write(|tx| {
                tx.mark_removed("briefing")?;
                tx.event(Some("briefing"), Event::Removed, "by the user")
            })
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
        add(&ledger, 5, &["bank__transfer"]);
        assert_eq!(ledger.trusted_uses("briefing").unwrap(), None);
        assert_eq!(ledger.trusted_uses("other").unwrap(), None);
    }
}
