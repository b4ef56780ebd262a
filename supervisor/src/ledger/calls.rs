//! Calls: recorded as they finish (outcome, duration, redacted error), and read back for the
//! lifecycle, `search_tools`' health, the list limit and `autotool tools`.

use super::{CallKind, Ledger, LedgerError, MAX_ERROR_LEN, to_ms};
use rusqlite::{OptionalExtension, params};
use serde::Serialize;
use std::collections::HashMap;
use std::time::{Duration, SystemTime};

/// A finished call, to be recorded. `error` must already be redacted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRecord {
    pub tool: String,
    pub version: u32,
    pub function: String,
    pub started_at: SystemTime,
    pub duration: Duration,
    pub outcome: CallKind,
    /// Redacted error text for `ToolError`/`Error` outcomes; cut at [`MAX_ERROR_LEN`].
    pub error: Option<String>,
}

/// One row of `calls`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallRow {
    pub id: i64,
    pub tool: String,
    pub version: u32,
    pub function: String,
    pub started_at: i64,
    pub duration_ms: i64,
    pub outcome: CallKind,
    pub error: Option<String>,
}

/// A tool's health as observed from its calls (all versions).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ToolStats {
    pub calls: u64,
    /// Calls whose outcome was `tool_error` or `error`.
    pub failures: u64,
    /// The error text of the most recent failed call.
    pub last_error: Option<String>,
    /// Unix milliseconds of the most recent call.
    pub last_call_at: Option<i64>,
}

pub(super) fn truncate_error(mut s: String) -> String {
    if s.len() > MAX_ERROR_LEN {
        let mut cut = MAX_ERROR_LEN;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        let dropped = s.len() - cut;
        s.truncate(cut);
        s.push_str(&format!("… [{dropped} more bytes not kept]"));
    }
    s
}

impl Ledger {
    /// The id of the newest call (0 with none): calls after it are new.
    pub fn last_call_id(&self) -> Result<i64, LedgerError> {
        Ok(self
            .conn()
            .query_row("SELECT COALESCE(MAX(id), 0) FROM calls", [], |r| r.get(0))?)
    }

    /// The outcomes of the last `window` calls of every live tool's current version, oldest
    /// first, in one query; with the id of the newest call they cover (calls after it are
    /// read with [`Ledger::calls_after`]).
    pub fn recent_outcomes_of_current(
        &self,
        window: u32,
    ) -> Result<(i64, HashMap<String, Vec<CallKind>>), LedgerError> {
        let last = self.last_call_id()?;
        let conn = self.conn();
        // Per tool, its newest calls through the (tool, id) index, stopping at the window: a
        // third of the time of a window function over every call of the current versions.
        let mut stmt = conn.prepare_cached(
            "SELECT t.name, c.outcome FROM tools t JOIN calls c ON c.id IN (
               SELECT id FROM calls
               WHERE tool = t.name AND version = t.current_version AND id <= ?2
               ORDER BY id DESC LIMIT ?1)
             WHERE t.removed_at IS NULL ORDER BY t.name, c.id",
        )?;
        let rows = stmt.query_map(params![window, last], |r| {
            Ok((
                r.get::<_, String>(0)?,
                CallKind::parse(&r.get::<_, String>(1)?),
            ))
        })?;
        let mut out: HashMap<String, Vec<CallKind>> = HashMap::new();
        for row in rows {
            let (tool, outcome) = row?;
            out.entry(tool).or_default().push(outcome);
        }
        Ok((last, out))
    }

    /// Calls recorded after call `id`, oldest first: (id, tool, version, outcome).
    pub fn calls_after(&self, id: i64) -> Result<Vec<(i64, String, u32, CallKind)>, LedgerError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT id, tool, version, outcome FROM calls WHERE id > ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([id], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                CallKind::parse(&r.get::<_, String>(3)?),
            ))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// How many calls each tool got (all versions) since `since` (unix ms), in one query.
    pub fn uses_since(&self, since: i64) -> Result<HashMap<String, u64>, LedgerError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT tool, COUNT(*) FROM calls WHERE started_at >= ?1 GROUP BY tool",
        )?;
        let rows = stmt.query_map([since], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
        })?;
        let mut out = HashMap::new();
        for row in rows {
            let (tool, n) = row?;
            out.insert(tool, u64::try_from(n).unwrap_or(0));
        }
        Ok(out)
    }

    /// Record a finished call. The error text must already be redacted.
    pub fn record_call(&self, call: &CallRecord) -> Result<(), LedgerError> {
        self.record_calls(std::slice::from_ref(call))
    }

    /// Record finished calls in one transaction (one commit for the lot). The error texts must
    /// already be redacted.
    pub fn record_calls(&self, calls: &[CallRecord]) -> Result<(), LedgerError> {
        self.write(|tx| {
            let mut insert = tx.tx.prepare_cached(
                "INSERT INTO calls (tool, version, function, started_at, duration_ms, outcome, error)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            for call in calls {
                let duration_ms = i64::try_from(call.duration.as_millis()).unwrap_or(i64::MAX);
                insert.execute(params![
                    call.tool,
                    call.version,
                    call.function,
                    to_ms(call.started_at),
                    duration_ms,
                    call.outcome.as_str(),
                    call.error.clone().map(truncate_error)
                ])?;
            }
            Ok(())
        })
    }

    /// Calls and failures of `name` (all versions) and the most recent error.
    pub fn stats(&self, name: &str) -> Result<ToolStats, LedgerError> {
        let conn = self.conn();
        let (calls, failures, last_call_at): (i64, i64, Option<i64>) = conn.query_row(
            "SELECT COUNT(*), COALESCE(SUM(outcome != 'ok'), 0), MAX(started_at)
             FROM calls WHERE tool = ?1",
            [name],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        let last_error: Option<String> = conn
            .query_row(
                "SELECT error FROM calls WHERE tool = ?1 AND outcome != 'ok'
                 ORDER BY id DESC LIMIT 1",
                [name],
                |r| r.get(0),
            )
            .optional()?
            .flatten();
        Ok(ToolStats {
            calls: u64::try_from(calls).unwrap_or(0),
            failures: u64::try_from(failures).unwrap_or(0),
            last_error,
            last_call_at,
        })
    }

    /// Calls of `name` (all versions) per day over the last `days` days, oldest day first:
    /// `(calls, failures)` each, days without calls included.
    pub fn calls_per_day(&self, name: &str, days: u32) -> Result<Vec<(u64, u64)>, LedgerError> {
        const DAY_MS: i64 = 86_400_000;
        let today = super::now_ms().div_euclid(DAY_MS);
        let first = today - i64::from(days.max(1)) + 1;
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT started_at / ?2 AS day, COUNT(*), COALESCE(SUM(outcome != 'ok'), 0)
             FROM calls WHERE tool = ?1 AND started_at >= ?3 GROUP BY day",
        )?;
        let rows = stmt.query_map(params![name, DAY_MS, first * DAY_MS], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })?;
        let mut out = vec![(0u64, 0u64); usize::try_from(today - first + 1).unwrap_or(1)];
        for row in rows {
            let (day, calls, failed) = row?;
            if let Some(slot) = usize::try_from(day - first)
                .ok()
                .and_then(|i| out.get_mut(i))
            {
                *slot = (
                    u64::try_from(calls).unwrap_or(0),
                    u64::try_from(failed).unwrap_or(0),
                );
            }
        }
        Ok(out)
    }

    /// The last `limit` calls of `name`, newest first.
    pub fn recent_calls(&self, name: &str, limit: u32) -> Result<Vec<CallRow>, LedgerError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT id, tool, version, function, started_at, duration_ms, outcome, error
             FROM calls WHERE tool = ?1 ORDER BY id DESC LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![name, limit], |r| {
            Ok(CallRow {
                id: r.get(0)?,
                tool: r.get(1)?,
                version: r.get(2)?,
                function: r.get(3)?,
                started_at: r.get(4)?,
                duration_ms: r.get(5)?,
                outcome: CallKind::parse(&r.get::<_, String>(6)?),
                error: r.get(7)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// How the last `limit` calls of one version ended, oldest first: what its lifecycle is
    /// decided on.
    pub fn recent_outcomes(
        &self,
        name: &str,
        version: u32,
        limit: u32,
    ) -> Result<Vec<CallKind>, LedgerError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT outcome FROM calls WHERE tool = ?1 AND version = ?2 ORDER BY id DESC LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![name, version, limit], |r| {
            Ok(CallKind::parse(&r.get::<_, String>(0)?))
        })?;
        let mut out: Vec<CallKind> = rows.collect::<Result<_, _>>()?;
        out.reverse();
        Ok(out)
    }
}
