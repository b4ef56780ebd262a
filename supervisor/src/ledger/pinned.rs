//! The user's pin of a tool (`autotool tools pin NAME`, the console's Pin): while it is set,
//! nothing replaces the tool's current version (an agent's rewrite, a synthesis, a pull, a
//! followed library, a changed or hand-placed file), until the user unpins it. Rolling back
//! and removing stay the user's to do while pinned: a rollback moves the pin's hold to the
//! version rolled back to, and a removal drops the pin with the tool.
//!
//! Not to be confused with a version's code pin ([`crate::pin`]: the hash a version's file and
//! schemas are held to) nor with a pull by digest ([`crate::team`]): this one is a decision of
//! the user's, kept in `tools.pinned_at` / `tools.pinned_by`.
//!
//! What counts as replacing: a new version whose code or description differs from the pinned
//! current version's. The same code and description again (serve reading a pinned version's
//! schemas once more) is not a replacement, so it is let through.

use super::{Actor, Event, Ledger, LedgerError, Tx, format_ms, now_ms};
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use std::collections::BTreeMap;

/// A tool's pin: when and by whom.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pin {
    /// Unix milliseconds (RFC 3339 in JSON).
    #[serde(serialize_with = "rfc3339")]
    pub at: i64,
    /// The actor's word: `cli`, `console`, `host:<client name>`.
    pub by: String,
}

fn rfc3339<S: serde::Serializer>(ms: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_ms(*ms))
}

impl std::fmt::Display for Pin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pinned by {} at {}", self.by, format_ms(self.at))
    }
}

/// Why a pin or unpin was refused.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error("no tool named {0:?} (`autotool tools list` shows them)")]
    NotFound(String),
    #[error("{0} was removed; there is no version to pin")]
    Removed(String),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

impl From<rusqlite::Error> for PinError {
    fn from(e: rusqlite::Error) -> Self {
        PinError::Ledger(e.into())
    }
}

/// A new version of a pinned tool, refused. `Display` is what the agent (or the user) is told:
/// who pinned it and how to unpin it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{tool} is pinned by the user ({pin}): nothing replaces its version {version} until it is \
     unpinned. Use {tool} as it is, or ask the user to unpin it: `autotool tools unpin {tool}` \
     (or Unpin on its page in `autotool console`)"
)]
pub struct PinHeld {
    pub tool: String,
    /// The version the pin holds.
    pub version: u32,
    pub pin: Pin,
}

/// `tool`'s pin, if the tool is live and pinned.
fn pin_of(conn: &Connection, tool: &str) -> rusqlite::Result<Option<Pin>> {
    conn.query_row(
        "SELECT pinned_at, pinned_by FROM tools
         WHERE name = ?1 AND removed_at IS NULL AND pinned_at IS NOT NULL",
        [tool],
        |r| {
            Ok(Pin {
                at: r.get(0)?,
                by: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
            })
        },
    )
    .optional()
}

/// Whether a new version of `tool` with `code_hash` and `description` would replace a pinned
/// current version: the refusal, or `None`.
fn held(
    conn: &Connection,
    tool: &str,
    code_hash: &str,
    description: &str,
) -> rusqlite::Result<Option<PinHeld>> {
    let Some(pin) = pin_of(conn, tool)? else {
        return Ok(None);
    };
    let current: Option<(u32, String, String)> = conn
        .query_row(
            "SELECT v.version, v.code_hash, v.description FROM tools t JOIN versions v
               ON v.name = t.name AND v.version = t.current_version
             WHERE t.name = ?1",
            [tool],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?;
    Ok(match current {
        Some((_, hash, desc)) if hash == code_hash && desc == description => None,
        Some((version, ..)) => Some(PinHeld {
            tool: tool.to_string(),
            version,
            pin,
        }),
        // A pinned tool without a current version holds nothing to replace.
        None => None,
    })
}

impl Ledger {
    /// `tool`'s pin, if it is live and pinned.
    pub fn pin_of(&self, tool: &str) -> Result<Option<Pin>, LedgerError> {
        Ok(pin_of(&self.conn(), tool)?)
    }

    /// Every live pinned tool's pin, by name.
    pub fn pins(&self) -> Result<BTreeMap<String, Pin>, LedgerError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT name, pinned_at, pinned_by FROM tools
             WHERE removed_at IS NULL AND pinned_at IS NOT NULL",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                Pin {
                    at: r.get(1)?,
                    by: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
                },
            ))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Whether a new version of `tool` with this code and description would be refused by
    /// its pin (read without the write lock: [`Tx::held`] decides at commit).
    pub fn held(
        &self,
        tool: &str,
        code_hash: &str,
        description: &str,
    ) -> Result<Option<PinHeld>, LedgerError> {
        Ok(held(&self.conn(), tool, code_hash, description)?)
    }

    /// Pin `tool`'s current version, as `by`, with a `pinned` event. Returns the pin and
    /// whether it is new (`false`: it was pinned already, and nothing changed).
    pub fn pin(&self, tool: &str, by: &Actor) -> Result<(Pin, bool), PinError> {
        self.write(|tx| {
            let version = live_version(tx, tool)?;
            if let Some(pin) = pin_of(tx.tx, tool)? {
                return Ok((pin, false));
            }
            let pin = Pin {
                at: now_ms(),
                by: by.actor.clone(),
            };
            tx.tx.execute(
                "UPDATE tools SET pinned_at = ?2, pinned_by = ?3 WHERE name = ?1",
                params![tool, pin.at, pin.by],
            )?;
            tx.bump_generation()?;
            tx.event_by(
                Some(tool),
                Event::Pinned,
                &format!(
                    "version {version} pinned by the user ({}): nothing replaces it until it is \
                     unpinned",
                    by.actor
                ),
                by,
            )?;
            Ok((pin, true))
        })
    }

    /// Unpin `tool`, as `by`, with an `unpinned` event. Returns the pin it had (`None`: it was
    /// not pinned, and nothing changed).
    pub fn unpin(&self, tool: &str, by: &Actor) -> Result<Option<Pin>, PinError> {
        self.write(|tx| {
            let version = live_version(tx, tool)?;
            let Some(pin) = pin_of(tx.tx, tool)? else {
                return Ok(None);
            };
            tx.tx.execute(
                "UPDATE tools SET pinned_at = NULL, pinned_by = NULL WHERE name = ?1",
                [tool],
            )?;
            tx.bump_generation()?;
            tx.event_by(
                Some(tool),
                Event::Unpinned,
                &format!(
                    "unpinned by the user ({}); it was {pin}: version {version} may be replaced \
                     again",
                    by.actor
                ),
                by,
            )?;
            Ok(Some(pin))
        })
    }
}

/// `tool`'s current version, or why there is none to pin.
fn live_version(tx: &Tx<'_>, tool: &str) -> Result<u32, PinError> {
    let row = tx
        .tool(tool)?
        .ok_or_else(|| PinError::NotFound(tool.to_string()))?;
    match (row.removed_at, row.current_version) {
        (None, Some(v)) => Ok(v),
        _ => Err(PinError::Removed(tool.to_string())),
    }
}

impl Tx<'_> {
    /// [`Ledger::held`] under the write lock: what a commit checks, so a pin set while the new
    /// version was being verified still holds.
    pub fn held(
        &self,
        tool: &str,
        code_hash: &str,
        description: &str,
    ) -> Result<Option<PinHeld>, LedgerError> {
        Ok(held(self.tx, tool, code_hash, description)?)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_tool_from_before_pins_is_unpinned_and_a_pin_holds_only_other_code() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("autotool.db");
        {
            let conn = rusqlite::Connection::open(&path).unwrap();
            for sql in &crate::ledger::MIGRATIONS[..7] {
                conn.execute_batch(sql).unwrap();
            }
            conn.pragma_update(None, "user_version", 7).unwrap();
            conn.execute_batch(
                "INSERT INTO tools (name, current_version, removed_at, created_at)
                   VALUES ('books', 1, NULL, 5);
                 INSERT INTO versions (name, version, code_hash, description, created_at)
                   VALUES ('books', 1, 'aaa', 'finds books', 5);",
            )
            .unwrap();
        }
        let ledger = Ledger::open(&path).unwrap();
        assert_eq!(ledger.pin_of("books").unwrap(), None);
        assert_eq!(ledger.held("books", "bbb", "finds books").unwrap(), None);
        let (pin, new) = ledger.pin("books", &Actor::console()).unwrap();
        assert!(new);
        assert_eq!(pin.by, "console");
        assert_eq!(ledger.pins().unwrap().get("books"), Some(&pin));
        // Other code, or another description, is a replacement; the same is not.
        for (code, description) in [("bbb", "finds books"), ("aaa", "finds films")] {
            let held = ledger.held("books", code, description).unwrap().unwrap();
            assert_eq!((held.version, held.pin.clone()), (1, pin.clone()));
            assert!(
                held.to_string()
                    .contains("`autotool tools unpin books` (or Unpin"),
                "{held}"
            );
        }
        assert_eq!(ledger.held("books", "aaa", "finds books").unwrap(), None);
        // A tool never heard of holds nothing and cannot be pinned.
        assert_eq!(ledger.held("films", "ccc", "").unwrap(), None);
        assert!(matches!(
            ledger.pin("films", &Actor::cli()),
            Err(PinError::NotFound(_))
        ));
        assert_eq!(ledger.unpin("books", &Actor::cli()).unwrap(), Some(pin));
        assert_eq!(ledger.held("books", "bbb", "finds books").unwrap(), None);
    }
}
