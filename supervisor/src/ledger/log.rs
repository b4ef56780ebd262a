//! The machine-wide event log read back: every decision across tools, filtered by tool, time
//! and position, oldest first (what `autotool events` prints and follows).

use super::{Actor, EventRow, Ledger, LedgerError};
use rusqlite::{OptionalExtension, params};

/// Which events to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// Only this tool's events.
    pub tool: Option<String>,
    /// Only events at or after this time (unix ms).
    pub since_ms: Option<i64>,
    /// Only events after this id (following the log).
    pub after_id: Option<i64>,
    /// Only the newest this many of those (still returned oldest first); all without it.
    pub newest: Option<u32>,
}

impl Ledger {
    /// The events `filter` selects, oldest first.
    pub fn event_log(&self, filter: &EventFilter) -> Result<Vec<EventRow>, LedgerError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT id, at, tool, kind, detail, actor, surface FROM events
             WHERE (?1 IS NULL OR tool = ?1) AND (?2 IS NULL OR at >= ?2)
               AND (?3 IS NULL OR id > ?3)
             ORDER BY id DESC LIMIT ?4",
        )?;
        let limit = filter.newest.map_or(-1, i64::from);
        let rows = stmt.query_map(
            params![filter.tool, filter.since_ms, filter.after_id, limit],
            |r| {
                Ok(EventRow {
                    id: r.get(0)?,
                    at: r.get(1)?,
                    tool: r.get(2)?,
                    kind: r.get(3)?,
                    detail: r.get(4)?,
                    actor: r.get(5)?,
                    surface: r.get(6)?,
                })
            },
        )?;
        let mut rows: Vec<EventRow> = rows.collect::<Result<_, _>>()?;
        rows.reverse();
        Ok(rows)
    }

    /// The newest event's id (0 with none): where following the log starts.
    pub fn last_event_id(&self) -> Result<i64, LedgerError> {
        Ok(self
            .conn()
            .query_row("SELECT COALESCE(MAX(id), 0) FROM events", [], |r| r.get(0))?)
    }

    /// Who created a version and through what (its provenance); `None` for an unknown
    /// version, an empty actor for one created before this was kept.
    pub fn created_by(&self, name: &str, version: u32) -> Result<Option<Actor>, LedgerError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT created_by, created_via FROM versions WHERE name = ?1 AND version = ?2",
                params![name, version],
                |r| Ok(Actor::new(r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
            )
            .optional()?)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::{Event, actor};
    use super::*;

    #[test]
    fn the_log_keeps_who_and_filters_by_tool_time_and_position() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(&dir.path().join("autotool.db")).unwrap();
        ledger
            .event_by(
                Some("a"),
                Event::ConsentGranted,
                "K",
                &Actor::host(Some("claude-code"), "stdio"),
            )
            .unwrap();
        actor::sync_scope(Actor::console(), || {
            ledger
                .event(Some("b"), Event::StateChanged, "retired")
                .unwrap();
        });
        ledger.event(None, Event::PullRefused, "x").unwrap();
        let all = ledger.event_log(&EventFilter::default()).unwrap();
        let who: Vec<(&str, &str, &str)> = all
            .iter()
            .map(|e| (e.kind.as_str(), e.actor.as_str(), e.surface.as_str()))
            .collect();
        assert_eq!(
            who,
            [
                ("consent_granted", "host:claude-code", "stdio"),
                ("state_changed", "console", "console"),
                ("pull_refused", "autotool", ""),
            ]
        );
        let b = EventFilter {
            tool: Some("b".into()),
            ..EventFilter::default()
        };
        assert_eq!(ledger.event_log(&b).unwrap().len(), 1);
        let after = EventFilter {
            after_id: Some(all[0].id),
            newest: Some(1),
            ..EventFilter::default()
        };
        let after = ledger.event_log(&after).unwrap();
        assert_eq!(after.len(), 1);
        assert_eq!(after[0].kind, "pull_refused");
        let future = EventFilter {
            since_ms: Some(super::super::now_ms() + 60_000),
            ..EventFilter::default()
        };
        assert!(ledger.event_log(&future).unwrap().is_empty());
        assert_eq!(ledger.last_event_id().unwrap(), all[2].id);
        // `events` (newest first) is the same log.
        let newest = ledger.events(None, 2).unwrap();
        assert_eq!(newest[0].kind, "pull_refused");
        assert_eq!(newest.len(), 2);
    }
}
