//! Declared reach in the ledger: the user's grants per tool × item (a host reached without a
//! key, a directory read or written), which outlive rewrites so a widened declaration is asked
//! again and a narrower one is not; the hosts the user allows every tool that declares them
//! (`autotool hosts allow`); the directories the user widened the deny rules for (`autotool
//! dirs widen`); narrowing a version kept from before reach was declared; and the
//! destinations the egress proxy refused a tool, newest first.

use super::{Event, EventRow, Ledger, LedgerError, now_ms};
use autotool_policy::reach::{DeclaredReach, ReachItem, ReachKind};
use rusqlite::params;

/// One grant of reach.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ReachGrant {
    pub tool: String,
    pub item: ReachItem,
    /// `elicitation`, `input_required`, `cli`, `console`.
    pub via: String,
    pub granted_at: i64,
}

/// A directory the user widened the deny rules for (`autotool dirs widen`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WidenedDir {
    /// Canonical: symlinks and `..` resolved when it was widened.
    pub path: String,
    pub via: String,
    pub added_at: i64,
}

/// A host the user allows every tool that declares it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AllowedHost {
    /// The allowlist entry, canonical.
    pub entry: String,
    pub via: String,
    pub added_at: i64,
}

impl Ledger {
    /// Every grant of reach to `tool`, hosts first, each kind in entry order.
    pub fn reach_grants(&self, tool: &str) -> Result<Vec<ReachGrant>, LedgerError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT kind, entry, via, granted_at FROM reach_grants WHERE tool = ?1
             ORDER BY kind, entry",
        )?;
        let rows = stmt.query_map([tool], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (kind, entry, via, granted_at) = row?;
            // A kind this build does not know grants nothing.
            if let Some(kind) = ReachKind::parse(&kind) {
                out.push(ReachGrant {
                    tool: tool.to_owned(),
                    item: ReachItem::new(kind, entry),
                    via,
                    granted_at,
                });
            }
        }
        Ok(out)
    }

    /// Record the user's yes to `reach` for `tool`, with its `consent_granted` event.
    pub fn grant_reach(
        &self,
        tool: &str,
        reach: &DeclaredReach,
        via: &str,
    ) -> Result<(), LedgerError> {
        if reach.is_empty() {
            return Ok(());
        }
        let now = now_ms();
        self.write(|tx| {
            for item in reach.items() {
                tx.tx.execute(
                    "INSERT INTO reach_grants (tool, kind, entry, via, granted_at)
                     VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (tool, kind, entry) DO UPDATE SET via = excluded.via,
                        granted_at = excluded.granted_at",
                    params![tool, item.kind.as_str(), item.entry, via, now],
                )?;
            }
            tx.event(
                Some(tool),
                Event::ConsentGranted,
                &format!("reach granted via {via}: {}", reach.phrase()),
            )
        })
    }

    /// Withdraw every grant of reach to `tool`, with a `consent_revoked` event; returns how
    /// many there were.
    pub fn revoke_reach(&self, tool: &str, why: &str) -> Result<usize, LedgerError> {
        self.write(|tx| {
            let n = tx
                .tx
                .execute("DELETE FROM reach_grants WHERE tool = ?1", [tool])?;
            if n > 0 {
                tx.event(Some(tool), Event::ConsentRevoked, &format!("reach: {why}"))?;
            }
            Ok(n)
        })
    }

    /// The hosts the user allows every tool that declares them, in entry order.
    pub fn allowed_hosts(&self) -> Result<Vec<AllowedHost>, LedgerError> {
        let conn = self.conn();
        let mut stmt =
            conn.prepare_cached("SELECT entry, via, added_at FROM allowed_hosts ORDER BY entry")?;
        let rows = stmt.query_map([], |r| {
            Ok(AllowedHost {
                entry: r.get(0)?,
                via: r.get(1)?,
                added_at: r.get(2)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Allow `entries` (canonical allowlist entries) for every tool that declares them.
    pub fn allow_hosts(&self, entries: &[String], via: &str) -> Result<(), LedgerError> {
        let now = now_ms();
        self.write(|tx| {
            for e in entries {
                tx.tx.execute(
                    "INSERT INTO allowed_hosts (entry, via, added_at) VALUES (?1, ?2, ?3)
                     ON CONFLICT (entry) DO NOTHING",
                    params![e, via, now],
                )?;
            }
            tx.event(
                None,
                Event::ConsentGranted,
                &format!(
                    "hosts allowed for every tool that declares them: {}",
                    entries.join(" ")
                ),
            )
        })
    }

    /// Stop allowing `entries` for every tool; returns those that were allowed.
    pub fn disallow_hosts(&self, entries: &[String]) -> Result<Vec<String>, LedgerError> {
        self.write(|tx| {
            let mut removed = Vec::new();
            for e in entries {
                if tx
                    .tx
                    .execute("DELETE FROM allowed_hosts WHERE entry = ?1", [e])?
                    > 0
                {
                    removed.push(e.clone());
                }
            }
            if !removed.is_empty() {
                tx.event(
                    None,
                    Event::ConsentRevoked,
                    &format!(
                        "hosts no longer allowed for every tool: {}",
                        removed.join(" ")
                    ),
                )?;
            }
            Ok(removed)
        })
    }

    /// The directories the user widened the deny rules for, in path order.
    pub fn widened_dirs(&self) -> Result<Vec<WidenedDir>, LedgerError> {
        let conn = self.conn();
        let mut stmt =
            conn.prepare_cached("SELECT path, via, added_at FROM widened_dirs ORDER BY path")?;
        let rows = stmt.query_map([], |r| {
            Ok(WidenedDir {
                path: r.get(0)?,
                via: r.get(1)?,
                added_at: r.get(2)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Widen the deny rules for `path` (canonical, checked by the caller: see
    /// `tool::dirs::resolve_widening`), with a `consent_granted` event saying what it lets a
    /// tool be granted. Returns whether it was not widened already.
    pub fn widen_dir(&self, path: &str, why: &str, via: &str) -> Result<bool, LedgerError> {
        let now = now_ms();
        self.write(|tx| {
            let added = tx.tx.execute(
                "INSERT INTO widened_dirs (path, via, added_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (path) DO NOTHING",
                params![path, via, now],
            )? > 0;
            if added {
                tx.event(
                    None,
                    Event::ConsentGranted,
                    &format!("deny rule widened for {path} ({why}) via {via}"),
                )?;
            }
            Ok(added)
        })
    }

    /// Undo the widening of `paths`; returns those that were widened.
    pub fn narrow_dirs(&self, paths: &[String]) -> Result<Vec<String>, LedgerError> {
        self.write(|tx| {
            let mut removed = Vec::new();
            for p in paths {
                if tx
                    .tx
                    .execute("DELETE FROM widened_dirs WHERE path = ?1", [p])?
                    > 0
                {
                    removed.push(p.clone());
                }
            }
            if !removed.is_empty() {
                tx.event(
                    None,
                    Event::ConsentRevoked,
                    &format!("deny rules no longer widened for: {}", removed.join(" ")),
                )?;
            }
            Ok(removed)
        })
    }

    /// Give every version of `tool` kept from before reach was declared the reach `reach`
    /// (what its code declares now): from then on it reaches only that. Returns how many
    /// versions changed.
    pub fn narrow_reach(&self, tool: &str, reach: &DeclaredReach) -> Result<usize, LedgerError> {
        let json = serde_json::to_string(reach).map_err(|source| LedgerError::Json {
            what: "reach",
            source,
        })?;
        self.write(|tx| {
            let n = tx.tx.execute(
                "UPDATE versions SET reach = ?2 WHERE name = ?1 AND reach IS NULL",
                params![tool, json],
            )?;
            if n > 0 {
                let what = if reach.is_empty() {
                    "nothing without a key".to_owned()
                } else {
                    reach.phrase()
                };
                tx.event(
                    Some(tool),
                    Event::ConsentRevoked,
                    &format!("reach narrowed from any public host to what it declares: {what}"),
                )?;
                tx.bump_generation()?;
            }
            Ok(n)
        })
    }

    /// The newest `limit` destinations the egress proxy refused `tool`, newest first.
    pub fn egress_refusals(&self, tool: &str, limit: u32) -> Result<Vec<EventRow>, LedgerError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT id, at, tool, kind, detail, actor, surface FROM events
             WHERE tool = ?1 AND kind = ?2 ORDER BY id DESC LIMIT ?3",
        )?;
        let rows = stmt.query_map(
            params![tool, Event::EgressDenied.as_str(), i64::from(limit)],
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
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn narrowing_gives_a_version_from_before_declared_reach_what_its_code_declares() {
        use crate::version::Version;
        use autotool_policy::lifecycle::State;
        use autotool_policy::names::ToolName;
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(&dir.path().join("a.db")).unwrap();
        ledger
            .write(|tx| {
                tx.insert_current_version(&Version {
                    name: ToolName::parse("old").unwrap(),
                    version: 1,
                    code_hash: format!("{:064}", 1),
                    description: String::new(),
                    required_env: Vec::new(),
                    functions: Default::default(),
                    packages: None,
                    uses: Vec::new(),
                    reach: None,
                    state: State::Probation,
                    created_at: now_ms(),
                })
            })
            .unwrap();
        assert_eq!(ledger.current_of("old").unwrap().unwrap().reach, None);
        let declared = DeclaredReach::parse(&["api.x.example"], &[], &[]).unwrap();
        assert_eq!(ledger.narrow_reach("old", &declared).unwrap(), 1);
        assert_eq!(
            ledger.current_of("old").unwrap().unwrap().reach,
            Some(declared.clone())
        );
        // Once declared, it is never narrowed again this way.
        assert_eq!(
            ledger
                .narrow_reach("old", &DeclaredReach::default())
                .unwrap(),
            0
        );
    }

    #[test]
    fn grants_and_allowed_hosts_are_kept_and_withdrawn() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(&dir.path().join("a.db")).unwrap();
        let reach = DeclaredReach::parse(&["api.open-meteo.com"], &["~/notes"], &[]).unwrap();
        ledger.grant_reach("weather", &reach, "cli").unwrap();
        let items: Vec<ReachItem> = ledger
            .reach_grants("weather")
            .unwrap()
            .into_iter()
            .map(|g| g.item)
            .collect();
        assert_eq!(
            items,
            [
                ReachItem::new(ReachKind::Host, "api.open-meteo.com"),
                ReachItem::new(ReachKind::Read, "~/notes")
            ]
        );
        assert!(ledger.reach_grants("other").unwrap().is_empty());
        assert_eq!(ledger.revoke_reach("weather", "test").unwrap(), 2);
        assert!(ledger.reach_grants("weather").unwrap().is_empty());

        ledger
            .allow_hosts(
                &["api.open-meteo.com".into(), "*.wikipedia.org".into()],
                "cli",
            )
            .unwrap();
        let hosts: Vec<String> = ledger
            .allowed_hosts()
            .unwrap()
            .into_iter()
            .map(|h| h.entry)
            .collect();
        assert_eq!(hosts, ["*.wikipedia.org", "api.open-meteo.com"]);
        assert_eq!(
            ledger
                .disallow_hosts(&["*.wikipedia.org".into(), "nope.example".into()])
                .unwrap(),
            ["*.wikipedia.org"]
        );
    }

    #[test]
    fn widened_dirs_are_kept_once_and_narrowed_with_an_event_each() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(&dir.path().join("a.db")).unwrap();
        assert!(ledger.widened_dirs().unwrap().is_empty());
        assert!(ledger.widen_dir("/srv/b", "why", "cli").unwrap());
        assert!(
            ledger
                .widen_dir("/home/u/.config/app", "why", "cli")
                .unwrap()
        );
        assert!(!ledger.widen_dir("/srv/b", "why", "console").unwrap());
        let rows = ledger.widened_dirs().unwrap();
        let paths: Vec<&str> = rows.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(paths, ["/home/u/.config/app", "/srv/b"]);
        assert_eq!(rows[1].via, "cli", "the first widening is kept");
        assert_eq!(
            ledger
                .narrow_dirs(&["/srv/b".into(), "/nowhere".into()])
                .unwrap(),
            ["/srv/b"]
        );
        assert!(ledger.narrow_dirs(&["/srv/b".into()]).unwrap().is_empty());
        let events = ledger.events(None, 10).unwrap();
        let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(
            kinds,
            ["consent_revoked", "consent_granted", "consent_granted"],
            "{events:?}"
        );
    }
}
