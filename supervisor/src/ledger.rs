//! The ledger: `$AUTOTOOL_HOME/autotool.db`, the SQLite database every supervisor on the machine
//! shares.
//!
//! It records which tools exist and which version of each is current, every version's manifest
//! (code hash, description, declared key names, functions), every call (duration, outcome) and
//! an audit trail of lifecycle events. Another process notices a change to tools or versions by
//! polling [`Ledger::generation`], a single-row counter bumped in the same transaction as the
//! change.
//!
//! Sharing: WAL mode (readers never block the writer), a 5 s busy timeout, `synchronous=NORMAL`
//! (an application crash never loses a committed transaction; a power cut may lose the last
//! ones, never corrupt the file), and every write in a `BEGIN IMMEDIATE` transaction, which takes
//! the write lock up front so two processes never both read-then-write on a stale snapshot.
//!
//! **No secret values, ever.** Callers pass key *names* (`required_env`) and error text that
//! has already been through the redactor; nothing here can tell a secret from other text.
//!
//! The schema is versioned with `PRAGMA user_version` and created or migrated on open; add a
//! change by appending to [`MIGRATIONS`], never by editing a shipped entry.

pub mod actor;
mod approvals;
mod calls;
mod event;
mod log;
mod packages;
mod pinned;
mod reach;
mod rollback;
mod schema;
mod states;
mod trust;
mod verdicts;

pub use actor::Actor;
pub use calls::{CallRecord, CallRow, ToolStats};
pub use event::Event;
pub use log::EventFilter;
pub use pinned::{Pin, PinError, PinHeld};
pub use rollback::{RollbackError, RolledBack};
use schema::migrate;
pub use schema::{MIGRATIONS, SCHEMA_VERSION};
pub use verdicts::BaselineRow;

pub use approvals::{ApprovalRow, PendingConsent};
pub use packages::{PackageApproval, approved_now};
pub use reach::{AllowedHost, ReachGrant};

pub use crate::version::Version;
use autotool_policy::names::{KeyName, ToolName};
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long a statement waits for another process's write lock before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Error text longer than this (in bytes) is cut, with a note, before it is stored.
pub const MAX_ERROR_LEN: usize = 4096;

/// What went wrong with the ledger.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("cannot open the ledger {path:?}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error(
        "the ledger {path:?} has schema version {found}, newer than this autotool knows ({known}); \
         upgrade autotool (every process sharing this home should run the same version)"
    )]
    NewerSchema {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error(
        "the ledger is busy: another autotool process held it for more than {}s; try again",
        BUSY_TIMEOUT.as_secs()
    )]
    Busy,
    #[error("ledger: {0}")]
    Sqlite(rusqlite::Error),
    #[error("ledger: a stored {what} is not valid JSON: {source}")]
    Json {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
}

impl From<rusqlite::Error> for LedgerError {
    fn from(e: rusqlite::Error) -> Self {
        if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) {
            LedgerError::Busy
        } else {
            LedgerError::Sqlite(e)
        }
    }
}

pub use autotool_policy::lifecycle::{CallKind, State};

/// One row of `tools`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolRow {
    pub name: String,
    pub current_version: Option<u32>,
    /// Unix milliseconds, when removed.
    pub removed_at: Option<i64>,
    pub created_at: i64,
}

/// One row of `events`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventRow {
    pub id: i64,
    pub at: i64,
    pub tool: Option<String>,
    pub kind: String,
    pub detail: String,
    /// Who caused it (`cli`, `host:<client name>`, `console`, `serve`, `follow`; `''` for
    /// events written before this was kept).
    pub actor: String,
    /// The surface it came through (`cli`, `stdio`, `http`, `console`, `serve`).
    pub surface: String,
}

/// An open ledger. One connection, behind a mutex so the handle can be shared between threads;
/// open one per process (or several, each is independent).
#[derive(Debug)]
pub struct Ledger {
    path: PathBuf,
    conn: Mutex<Connection>,
}

/// The current time in unix milliseconds.
pub fn now_ms() -> i64 {
    to_ms(SystemTime::now())
}

fn to_ms(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

/// Unix milliseconds as RFC 3339 UTC, `2026-05-01T12:00:00.000Z`.
pub fn format_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

fn json_col<T: serde::de::DeserializeOwned>(row: &Row<'_>, idx: usize) -> rusqlite::Result<T> {
    let text: String = row.get(idx)?;
    serde_json::from_str(&text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(idx, rusqlite::types::Type::Text, e.into())
    })
}

const VERSION_COLS: &str = "v.name, v.version, v.code_hash, v.description, v.required_env, v.functions, v.state, v.created_at, v.packages, v.uses, v.reach";

/// A `versions` row as a [`Version`]; `None` for a row whose name no longer passes the rule
/// ([`ToolName`]), which is left alone and not served. A declared key whose name does not pass
/// [`KeyName`] is left out of `required_env`: such a key could never be granted anyway.
fn version_row(row: &Row<'_>) -> rusqlite::Result<Option<Version>> {
    let name: String = row.get(0)?;
    let Ok(name) = ToolName::parse(&name) else {
        tracing::warn!(
            "the ledger holds a tool named {name:?}, which is not a valid tool name; it is not served"
        );
        return Ok(None);
    };
    let declared: Vec<String> = json_col(row, 4)?;
    let required_env = declared
        .iter()
        .filter_map(|k| match KeyName::parse(k) {
            Ok(k) => Some(k),
            Err(e) => {
                tracing::warn!(tool = %name, "{e}; it is never granted");
                None
            }
        })
        .collect();
    Ok(Some(Version {
        name,
        version: row.get(1)?,
        code_hash: row.get(2)?,
        description: row.get(3)?,
        required_env,
        functions: json_col(row, 5)?,
        state: State::parse(&row.get::<_, String>(6)?),
        created_at: row.get(7)?,
        uses: json_col(row, 9)?,
        reach: match row.get::<_, Option<String>>(10)? {
            Some(text) => Some(serde_json::from_str(&text).map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(10, rusqlite::types::Type::Text, e.into())
            })?),
            None => None,
        },
        packages: match row.get::<_, Option<String>>(8)? {
            Some(text) => Some(std::sync::Arc::new(serde_json::from_str(&text).map_err(
                |e| {
                    rusqlite::Error::FromSqlConversionFailure(
                        8,
                        rusqlite::types::Type::Text,
                        e.into(),
                    )
                },
            )?)),
            None => None,
        },
    }))
}

fn tool_row(row: &Row<'_>) -> rusqlite::Result<ToolRow> {
    Ok(ToolRow {
        name: row.get(0)?,
        current_version: row.get(1)?,
        removed_at: row.get(2)?,
        created_at: row.get(3)?,
    })
}

impl Ledger {
    /// Open (creating it and its schema if needed) the ledger at `path`.
    pub fn open(path: &Path) -> Result<Ledger, LedgerError> {
        let open_err = |source| LedgerError::Open {
            path: path.to_path_buf(),
            source,
        };
        let mut conn = Connection::open(path).map_err(open_err)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
        // Switching a new database to WAL needs a moment of exclusive access; when several
        // processes create the file at once the loser may see SQLITE_BUSY without the busy
        // handler being consulted, so retry for as long as the busy timeout.
        let deadline = Instant::now() + BUSY_TIMEOUT;
        loop {
            match conn
                .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
            {
                Ok(_) => break,
                Err(e)
                    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                        && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(open_err(e)),
            }
        }
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(open_err)?;
        migrate(&mut conn, path)?;
        Ok(Ledger {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves no half-done transaction behind (rusqlite rolls
        // back on drop), so a poisoned lock is still a usable connection.
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run `f` inside one `BEGIN IMMEDIATE` transaction and commit it if `f` succeeds (roll
    /// back otherwise). Holding the write lock, `f` sees a state no other process can change
    /// until it returns, so it may also move files whose fate must match the rows it writes.
    pub fn write<T, E>(&self, f: impl FnOnce(&Tx<'_>) -> Result<T, E>) -> Result<T, E>
    where
        E: From<LedgerError>,
    {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| E::from(e.into()))?;
        let out = f(&Tx { tx: &tx })?;
        tx.commit().map_err(|e| E::from(e.into()))?;
        Ok(out)
    }

    /// The change counter: bumped by every change to tools or versions, in the same
    /// transaction. Cheap enough to poll every few hundred milliseconds.
    pub fn generation(&self) -> Result<u64, LedgerError> {
        let v: i64 =
            self.conn()
                .query_row("SELECT value FROM generation WHERE id = 1", [], |r| {
                    r.get(0)
                })?;
        Ok(u64::try_from(v).unwrap_or(0))
    }

    /// Every live tool's current version, sorted by name.
    pub fn current(&self) -> Result<Vec<Version>, LedgerError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT {VERSION_COLS} FROM tools t JOIN versions v
               ON v.name = t.name AND v.version = t.current_version
             WHERE t.removed_at IS NULL ORDER BY t.name"
        ))?;
        let rows = stmt.query_map([], version_row)?;
        Ok(rows
            .filter_map(Result::transpose)
            .collect::<Result<_, _>>()?)
    }

    /// [`Ledger::current`], handing each row to `f` as it is read.
    pub fn current_each(&self, mut f: impl FnMut(Version)) -> Result<(), LedgerError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT {VERSION_COLS} FROM tools t JOIN versions v
               ON v.name = t.name AND v.version = t.current_version
             WHERE t.removed_at IS NULL ORDER BY t.name"
        ))?;
        let rows = stmt.query_map([], version_row)?;
        for row in rows {
            if let Some(v) = row? {
                f(v);
            }
        }
        Ok(())
    }

    /// `name`'s current version, unless the tool is unknown or removed.
    pub fn current_of(&self, name: &str) -> Result<Option<Version>, LedgerError> {
        Ok(self
            .conn()
            .query_row(
                &format!(
                    "SELECT {VERSION_COLS} FROM tools t JOIN versions v
                       ON v.name = t.name AND v.version = t.current_version
                     WHERE t.removed_at IS NULL AND t.name = ?1"
                ),
                [name],
                version_row,
            )
            .optional()?
            .flatten())
    }

    /// Every version of `name` ever committed (removed tools too), oldest first.
    pub fn versions(&self, name: &str) -> Result<Vec<Version>, LedgerError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT {VERSION_COLS} FROM versions v WHERE v.name = ?1 ORDER BY v.version"
        ))?;
        let rows = stmt.query_map([name], version_row)?;
        Ok(rows
            .filter_map(Result::transpose)
            .collect::<Result<_, _>>()?)
    }

    /// One version of `name`.
    pub fn version(&self, name: &str, version: u32) -> Result<Option<Version>, LedgerError> {
        Ok(self
            .conn()
            .query_row(
                &format!(
                    "SELECT {VERSION_COLS} FROM versions v WHERE v.name = ?1 AND v.version = ?2"
                ),
                params![name, version],
                version_row,
            )
            .optional()?
            .flatten())
    }

    /// `name`'s row in `tools`, removed or not.
    pub fn tool(&self, name: &str) -> Result<Option<ToolRow>, LedgerError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT name, current_version, removed_at, created_at FROM tools WHERE name = ?1",
                [name],
                tool_row,
            )
            .optional()?)
    }

    /// Whether some version of `name` has this code hash.
    pub fn has_code(&self, name: &str, code_hash: &str) -> Result<bool, LedgerError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT 1 FROM versions WHERE name = ?1 AND code_hash = ?2 LIMIT 1",
                [name, code_hash],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// Take on a piece of work about `name` that every supervisor sharing the home would
    /// otherwise do at once: records a `kind` event with `detail` unless one with the same
    /// detail exists. Returns whether the caller got it.
    pub fn claim_once(&self, name: &str, kind: Event, detail: &str) -> Result<bool, LedgerError> {
        self.write(|tx| {
            let taken = tx
                .tx
                .query_row(
                    "SELECT 1 FROM events WHERE tool = ?1 AND kind = ?2 AND detail = ?3 LIMIT 1",
                    params![name, kind.as_str(), detail],
                    |_| Ok(()),
                )
                .optional()?
                .is_some();
            if taken {
                return Ok(false);
            }
            tx.event(Some(name), kind, detail)?;
            Ok(true)
        })
    }

    /// Why `name` is in its state: the newest `state_changed` event's detail.
    pub fn state_reason(&self, name: &str) -> Result<Option<String>, LedgerError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT detail FROM events WHERE tool = ?1 AND kind = ?2 ORDER BY id DESC LIMIT 1",
                params![name, Event::StateChanged.as_str()],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Append an audit event (`tool` is `None` for events about autotool itself), attributed
    /// to [`actor::current`].
    pub fn event(&self, tool: Option<&str>, kind: Event, detail: &str) -> Result<(), LedgerError> {
        self.write(|tx| tx.event(tool, kind, detail))
    }

    /// [`Ledger::event`], attributed to `by`.
    pub fn event_by(
        &self,
        tool: Option<&str>,
        kind: Event,
        detail: &str,
        by: &Actor,
    ) -> Result<(), LedgerError> {
        self.write(|tx| tx.event_by(tool, kind, detail, by))
    }

    /// The last `limit` events of `tool` (`None`: of every tool and autotool itself), newest
    /// first.
    pub fn events(&self, tool: Option<&str>, limit: u32) -> Result<Vec<EventRow>, LedgerError> {
        let mut rows = self.event_log(&EventFilter {
            tool: tool.map(String::from),
            newest: Some(limit),
            ..EventFilter::default()
        })?;
        rows.reverse();
        Ok(rows)
    }
}

/// The write transaction handed to [`Ledger::write`]'s closure.
#[derive(Debug)]
pub struct Tx<'a> {
    tx: &'a rusqlite::Transaction<'a>,
}

impl Tx<'_> {
    /// The next version number of `name`: one past the highest ever committed (versions of a
    /// removed tool still count, so a number is never reused).
    pub fn next_version(&self, name: &str) -> Result<u32, LedgerError> {
        let max: Option<u32> = self.tx.query_row(
            "SELECT MAX(version) FROM versions WHERE name = ?1",
            [name],
            |r| r.get(0),
        )?;
        Ok(max.unwrap_or(0) + 1)
    }

    /// Whether the row for this version exists.
    pub fn version_exists(&self, name: &str, version: u32) -> Result<bool, LedgerError> {
        Ok(self
            .tx
            .query_row(
                "SELECT 1 FROM versions WHERE name = ?1 AND version = ?2",
                params![name, version],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// Insert a version and make it `name`'s current one (reviving a removed tool).
    pub fn insert_current_version(&self, row: &Version) -> Result<(), LedgerError> {
        let json = |what, v: Result<String, serde_json::Error>| {
            v.map_err(|source| LedgerError::Json { what, source })
        };
        let required_env = json("required_env", serde_json::to_string(&row.required_env))?;
        let functions = json("functions", serde_json::to_string(&row.functions))?;
        let uses = json("uses", serde_json::to_string(&row.uses))?;
        let packages = row
            .packages
            .as_deref()
            .map(|p| json("packages", serde_json::to_string(p)))
            .transpose()?;
        let reach = row
            .reach
            .as_ref()
            .map(|r| json("reach", serde_json::to_string(r)))
            .transpose()?;
        self.tx.execute(
            "INSERT INTO tools (name, current_version, removed_at, created_at)
             VALUES (?1, ?2, NULL, ?3)
             ON CONFLICT (name) DO UPDATE SET current_version = excluded.current_version,
                                              removed_at = NULL",
            params![row.name.as_str(), row.version, row.created_at],
        )?;
        let by = actor::current();
        self.tx.execute(
            "INSERT INTO versions
               (name, version, code_hash, description, required_env, functions, state, created_at,
                packages, uses, created_by, created_via, reach)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            params![
                row.name.as_str(),
                row.version,
                row.code_hash,
                row.description,
                required_env,
                functions,
                row.state.as_str(),
                row.created_at,
                packages,
                uses,
                by.actor,
                by.surface,
                reach
            ],
        )?;
        Ok(())
    }

    /// `name`'s row in `tools`.
    pub fn tool(&self, name: &str) -> Result<Option<ToolRow>, LedgerError> {
        Ok(self
            .tx
            .query_row(
                "SELECT name, current_version, removed_at, created_at FROM tools WHERE name = ?1",
                [name],
                tool_row,
            )
            .optional()?)
    }

    /// Mark `name` removed now (its pin, if any, goes with it). Returns false if it was not live.
    pub fn mark_removed(&self, name: &str) -> Result<bool, LedgerError> {
        let n = self.tx.execute(
            "UPDATE tools SET removed_at = ?2, pinned_at = NULL, pinned_by = NULL
             WHERE name = ?1 AND removed_at IS NULL",
            params![name, now_ms()],
        )?;
        // A tool created again under the name starts with no baseline (the rows are kept).
        self.tx.execute(
            "UPDATE obligations SET dropped_at = ?2 WHERE tool = ?1 AND dropped_at IS NULL",
            params![name, now_ms()],
        )?;
        Ok(n > 0)
    }

    /// Bump the change counter; call in every transaction that changes tools or versions.
    pub fn bump_generation(&self) -> Result<(), LedgerError> {
        self.tx
            .execute("UPDATE generation SET value = value + 1 WHERE id = 1", [])?;
        Ok(())
    }

    /// Append an audit event in this transaction, attributed to [`actor::current`].
    pub fn event(&self, tool: Option<&str>, kind: Event, detail: &str) -> Result<(), LedgerError> {
        self.event_by(tool, kind, detail, &actor::current())
    }

    /// [`Tx::event`], attributed to `by`.
    pub fn event_by(
        &self,
        tool: Option<&str>,
        kind: Event,
        detail: &str,
        by: &Actor,
    ) -> Result<(), LedgerError> {
        // A detail often quotes a tool, a registry or a model: stored with its control
        // characters escaped, so no reader of the log (events, tools show, the console) is
        // handed terminal control.
        let detail = crate::terminal::escape_text(detail);
        self.tx.execute(
            "INSERT INTO events (at, tool, kind, detail, actor, surface)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                now_ms(),
                tool,
                kind.as_str(),
                detail.as_ref(),
                by.actor,
                by.surface
            ],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_times() {
        assert_eq!(format_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_ms(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(format_ms(1_798_761_599_999), "2026-12-31T23:59:59.999Z");
        assert_eq!(format_ms(-1), "1969-12-31T23:59:59.999Z");
    }

    fn ledger_with(tools: &[(&str, u32)]) -> (tempfile::TempDir, Ledger) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ledger =
            Ledger::open(&dir.path().join("autotool.db")).unwrap_or_else(|e| panic!("{e}"));
        for (name, versions) in tools {
            for version in 1..=*versions {
                ledger
                    .write(|tx| {
                        tx.insert_current_version(&Version {
                            name: ToolName::parse(name).unwrap_or_else(|e| panic!("{e}")),
                            version,
                            code_hash: format!("{version:064}"),
                            description: String::new(),
                            required_env: Vec::new(),
                            functions: Default::default(),
                            packages: None,
                            uses: Vec::new(),
                            reach: None,
                            state: State::Probation,
                            created_at: now_ms(),
                        })?;
                        tx.bump_generation()
                    })
                    .unwrap_or_else(|e: LedgerError| panic!("{e}"));
            }
        }
        (dir, ledger)
    }

    fn call(ledger: &Ledger, tool: &str, version: u32, outcome: CallKind, ago: Duration) {
        ledger
            .record_call(&CallRecord {
                tool: tool.into(),
                version,
                function: "f".into(),
                started_at: SystemTime::now() - ago,
                duration: Duration::from_millis(1),
                outcome,
                error: None,
            })
            .unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn recent_outcomes_of_every_current_version_in_one_query() {
        let (_dir, ledger) = ledger_with(&[("a", 2), ("b", 1), ("c", 1)]);
        let now = Duration::ZERO;
        // a's old version does not count; b's window keeps its last 3, oldest first.
        call(&ledger, "a", 1, CallKind::Failure, now);
        call(&ledger, "a", 2, CallKind::Ok, now);
        call(&ledger, "a", 2, CallKind::ToolError, now);
        for o in [
            CallKind::Failure,
            CallKind::Ok,
            CallKind::Failure,
            CallKind::Ok,
        ] {
            call(&ledger, "b", 1, o, now);
        }
        let (last, recent) = ledger
            .recent_outcomes_of_current(3)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(last, 7);
        assert_eq!(recent["a"], [CallKind::Ok, CallKind::ToolError]);
        assert_eq!(recent["b"], [CallKind::Ok, CallKind::Failure, CallKind::Ok]);
        assert!(!recent.contains_key("c"));
        call(&ledger, "c", 1, CallKind::Ok, now);
        let after = ledger.calls_after(last).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(after, [(8, "c".to_string(), 1, CallKind::Ok)]);
    }

    #[test]
    fn uses_count_calls_since_a_time_over_all_versions() {
        let (_dir, ledger) = ledger_with(&[("a", 2), ("b", 1)]);
        let day = Duration::from_secs(86_400);
        call(&ledger, "a", 1, CallKind::Ok, day);
        call(&ledger, "a", 2, CallKind::Failure, Duration::ZERO);
        call(&ledger, "b", 1, CallKind::Ok, 40 * day);
        let uses = ledger
            .uses_since(now_ms() - 30 * 86_400_000)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(uses.get("a"), Some(&2));
        assert_eq!(uses.get("b"), None);
    }

    #[test]
    fn a_broken_pin_makes_a_draft_once_and_a_claim_is_taken_once() {
        let (_dir, ledger) = ledger_with(&[("a", 1)]);
        let g = ledger.generation().unwrap_or_else(|e| panic!("{e}"));
        assert!(
            ledger
                .break_pin("a", 1, "its tool.py changed")
                .unwrap_or(false)
        );
        assert!(
            !ledger
                .break_pin("a", 1, "its tool.py changed")
                .unwrap_or(true)
        );
        assert_eq!(ledger.generation().unwrap_or(0), g + 1);
        let v = ledger.version("a", 1).ok().flatten().map(|v| v.state);
        assert_eq!(v, Some(State::Draft));
        let reason = ledger.state_reason("a").ok().flatten().unwrap_or_default();
        assert!(reason.contains("draft: its tool.py changed"), "{reason}");
        assert!(
            ledger
                .claim_once("a", Event::VerifyingAgain, "code x")
                .unwrap_or(false)
        );
        assert!(
            !ledger
                .claim_once("a", Event::VerifyingAgain, "code x")
                .unwrap_or(true)
        );
        assert!(
            ledger
                .claim_once("a", Event::VerifyingAgain, "code y")
                .unwrap_or(false)
        );
        // A move from a state the version is no longer in does nothing.
        assert!(
            !ledger
                .set_state_from("a", 1, State::Probation, State::Active, "x")
                .unwrap_or(true)
        );
        assert!(
            ledger
                .set_state_from("a", 1, State::Draft, State::Probation, "back")
                .unwrap_or(false)
        );
    }

    #[test]
    fn cuts_long_errors_on_a_char_boundary() {
        let s = "é".repeat(MAX_ERROR_LEN);
        let cut = calls::truncate_error(s);
        assert!(cut.ends_with("more bytes not kept]"));
        assert!(cut.len() < MAX_ERROR_LEN + 64);
    }
}
