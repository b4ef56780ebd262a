//! Rolling a tool back to a version it trusted before (`autotool tools rollback`): that version
//! becomes the current one again, active; the baseline stays as it is (what later versions
//! owe is not forgotten by going back).

use super::trust::trusted;
use super::{Event, Ledger, LedgerError, State};
use rusqlite::{OptionalExtension, params};

/// Why a rollback was refused; `Display` says what to do.
#[derive(Debug, thiserror::Error)]
pub enum RollbackError {
    #[error("no tool named {0:?} (`autotool tools list` shows them)")]
    NotFound(String),
    #[error("{0} was removed; create it again instead")]
    Removed(String),
    #[error("{tool} has no version {version} (`autotool tools show {tool}` lists its versions)")]
    NoSuchVersion { tool: String, version: u32 },
    #[error("{tool} v{version} is already its current version")]
    AlreadyCurrent { tool: String, version: u32 },
    #[error(
        "{tool} v{version} was never trusted (never active): only a version that earned trust \
         can be rolled back to"
    )]
    NotTrusted { tool: String, version: u32 },
    #[error(
        "{tool} has no earlier trusted version to roll back to (`autotool tools show {tool}` \
         lists its versions and states)"
    )]
    NoneTrusted { tool: String },
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

impl From<rusqlite::Error> for RollbackError {
    fn from(e: rusqlite::Error) -> Self {
        RollbackError::Ledger(e.into())
    }
}

/// A rollback done: from which version to which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RolledBack {
    pub from: u32,
    pub to: u32,
}

impl Ledger {
    /// Make `to` (else the newest trusted version before the current one) `tool`'s current
    /// version, active, with an audit event; the baseline is left as it is. `check` is called
    /// with the version chosen, before anything changes, and may refuse it (its file no longer
    /// matches its pin, say); the choice is checked again under the write lock.
    pub fn roll_back(
        &self,
        tool: &str,
        to: Option<u32>,
        check: impl FnOnce(u32) -> Result<(), String>,
    ) -> Result<Result<RolledBack, String>, RollbackError> {
        let chosen = {
            let conn = self.conn();
            choose(&conn, tool, to)?
        };
        if let Err(why) = check(chosen.to) {
            return Ok(Err(why));
        }
        self.write(|tx| {
            let again = choose(tx.tx, tool, Some(chosen.to))?;
            if again != chosen {
                return Ok(Err(format!(
                    "{tool} changed meanwhile (now at version {}); try again",
                    again.from
                )));
            }
            let RolledBack { from, to } = chosen;
            tx.tx.execute(
                "UPDATE tools SET current_version = ?2 WHERE name = ?1",
                params![tool, to],
            )?;
            tx.tx.execute(
                "UPDATE versions SET state = ?3 WHERE name = ?1 AND version = ?2",
                params![tool, to, State::Active.as_str()],
            )?;
            tx.bump_generation()?;
            tx.event(
                Some(tool),
                Event::RolledBack,
                &format!("from version {from} back to version {to}; the baseline stays"),
            )?;
            tx.event(
                Some(tool),
                Event::StateChanged,
                &format!(
                    "version {to} is now active: rolled back to from version {from} by the user"
                ),
            )?;
            Ok(Ok(chosen))
        })
    }
}

/// The version a rollback of `tool` to `to` (else the newest trusted one before the current)
/// goes to, or why there is none.
fn choose(
    conn: &rusqlite::Connection,
    tool: &str,
    to: Option<u32>,
) -> Result<RolledBack, RollbackError> {
    let row: Option<(Option<u32>, Option<i64>)> = conn
        .query_row(
            "SELECT current_version, removed_at FROM tools WHERE name = ?1",
            [tool],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let (current, removed) = row.ok_or_else(|| RollbackError::NotFound(tool.into()))?;
    if removed.is_some() {
        return Err(RollbackError::Removed(tool.into()));
    }
    let from = current.unwrap_or(0);
    let exists = |v: u32| -> rusqlite::Result<bool> {
        Ok(conn
            .query_row(
                "SELECT 1 FROM versions WHERE name = ?1 AND version = ?2",
                params![tool, v],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    };
    let to = match to {
        Some(v) => {
            if !exists(v)? {
                return Err(RollbackError::NoSuchVersion {
                    tool: tool.into(),
                    version: v,
                });
            }
            if v == from {
                return Err(RollbackError::AlreadyCurrent {
                    tool: tool.into(),
                    version: v,
                });
            }
            if !trusted(conn, tool, v)? {
                return Err(RollbackError::NotTrusted {
                    tool: tool.into(),
                    version: v,
                });
            }
            v
        }
        None => {
            let mut found = None;
            for v in (1..from).rev() {
                if exists(v)? && trusted(conn, tool, v)? {
                    found = Some(v);
                    break;
                }
            }
            found.ok_or_else(|| RollbackError::NoneTrusted { tool: tool.into() })?
        }
    };
    Ok(RolledBack { from, to })
}
