//! Approvals of a tool's package sets: one row per set the user said yes to, bound to the set's
//! digest (a changed resolution is another set, asked about again); and the layers the live
//! tools' versions name, which are kept when unused ones are collected.

use super::{Event, Ledger, LedgerError, now_ms};
use rusqlite::params;
use std::collections::BTreeSet;

/// One approval of a tool's packages.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PackageApproval {
    pub tool: String,
    /// sha256 of the lock's canonical text.
    pub digest: String,
    /// What the user was shown: `feedparser 6.0.11, sgmllib3k 1.0.0`.
    pub packages: String,
    /// Where from, as the user was told.
    pub source: String,
    /// `elicitation`, `input_required`, `cli`.
    pub via: String,
    pub granted_at: i64,
}

impl Ledger {
    /// Whether the user approved the package set `digest` for `tool`.
    pub fn packages_approved(&self, tool: &str, digest: &str) -> Result<bool, LedgerError> {
        let n: i64 = self.conn().query_row(
            "SELECT count(*) FROM package_approvals WHERE tool = ?1 AND digest = ?2",
            params![tool, digest],
            |r| r.get(0),
        )?;
        Ok(n > 0)
    }

    /// Every package approval of `tool`, newest first.
    pub fn package_approvals(&self, tool: &str) -> Result<Vec<PackageApproval>, LedgerError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT tool, digest, packages, source, via, granted_at FROM package_approvals
             WHERE tool = ?1 ORDER BY granted_at DESC, digest",
        )?;
        let rows = stmt.query_map([tool], |r| {
            Ok(PackageApproval {
                tool: r.get(0)?,
                digest: r.get(1)?,
                packages: r.get(2)?,
                source: r.get(3)?,
                via: r.get(4)?,
                granted_at: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Record the user's yes to a package set, with its `consent_granted` event.
    pub fn approve_packages(&self, row: &PackageApproval) -> Result<(), LedgerError> {
        self.write(|tx| {
            tx.tx.execute(
                "INSERT INTO package_approvals (tool, digest, packages, source, via, granted_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (tool, digest) DO UPDATE SET via = excluded.via,
                    granted_at = excluded.granted_at",
                params![
                    row.tool,
                    row.digest,
                    row.packages,
                    row.source,
                    row.via,
                    row.granted_at
                ],
            )?;
            tx.event(
                Some(&row.tool),
                Event::ConsentGranted,
                &format!(
                    "packages {} from {} granted via {} (set {})",
                    row.packages,
                    row.source,
                    row.via,
                    super::approvals::short(&row.digest)
                ),
            )
        })
    }

    /// Withdraw every package approval of `tool`, with a `consent_revoked` event; returns how
    /// many there were.
    pub fn revoke_packages(&self, tool: &str, why: &str) -> Result<usize, LedgerError> {
        self.write(|tx| {
            let n = tx
                .tx
                .execute("DELETE FROM package_approvals WHERE tool = ?1", [tool])?;
            if n > 0 {
                tx.event(
                    Some(tool),
                    Event::ConsentRevoked,
                    &format!("packages: {why}"),
                )?;
            }
            Ok(n)
        })
    }

    /// The layer of every version of every live tool, and of the question a tool could not
    /// ask: the layers that are kept.
    pub fn layers_in_use(&self) -> Result<BTreeSet<String>, LedgerError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT v.packages FROM versions v JOIN tools t ON t.name = v.name
             WHERE t.removed_at IS NULL AND v.packages IS NOT NULL
             UNION ALL SELECT packages FROM pending_consent WHERE packages IS NOT NULL",
        )?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        let mut layers = BTreeSet::new();
        for text in rows {
            let set: crate::packages::PackageSet =
                serde_json::from_str(&text?).map_err(|source| LedgerError::Json {
                    what: "a version's packages",
                    source,
                })?;
            layers.extend(set.layer);
        }
        Ok(layers)
    }
}

/// The approval of `set` for `tool`, given now `via` a way of asking.
pub fn approved_now(tool: &str, set: &crate::packages::PackageSet, via: &str) -> PackageApproval {
    PackageApproval {
        tool: tool.to_string(),
        digest: set.digest.clone(),
        packages: set.lock.describe(),
        source: set.source.clone(),
        via: via.to_string(),
        granted_at: now_ms(),
    }
}
