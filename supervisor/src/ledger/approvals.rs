//! Approvals of keys per tool, and the newest consent question a tool could not ask its host.
//! Names and hashes only: no value is ever stored here.

use super::{Event, Ledger, LedgerError, Tx};
use rusqlite::params;

/// One approval: a key for a tool, with what the user was shown when giving it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ApprovalRow {
    pub tool: String,
    pub key: String,
    pub code_hash: String,
    /// The key's allowlist then, canonical entries; `None`: it had none.
    pub allowlist: Option<Vec<String>>,
    /// Every key the tool declared then.
    pub declared: Vec<String>,
    pub sandboxed: bool,
    /// How it was given: `elicitation`, `input_required`, `cli`.
    pub via: String,
    pub granted_at: i64,
}

/// A consent question a tool could not put to its host (no elicitation, or declined): what
/// `autotool tools approve` answers when the tool is not mounted yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingConsent {
    pub tool: String,
    pub code_hash: String,
    pub declared: Vec<String>,
    /// The package set asked about (JSON `PackageSet`), if the tool declares packages.
    pub packages: Option<String>,
    /// The reach asked about (JSON `DeclaredReach`), if the question named any.
    pub reach: Option<String>,
    pub asked_at: i64,
}

fn json_list(what: &'static str, text: &str) -> Result<Vec<String>, LedgerError> {
    serde_json::from_str(text).map_err(|source| LedgerError::Json { what, source })
}

fn to_json(what: &'static str, list: &[String]) -> Result<String, LedgerError> {
    serde_json::to_string(list).map_err(|source| LedgerError::Json { what, source })
}

impl Ledger {
    /// Every approval of `tool`, newest first.
    pub fn approvals(&self, tool: &str) -> Result<Vec<ApprovalRow>, LedgerError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT tool, key, code_hash, allowlist, declared, sandboxed, via, granted_at
             FROM approvals WHERE tool = ?1 ORDER BY granted_at DESC, rowid DESC",
        )?;
        let rows = stmt.query_map([tool], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<String>>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, i64>(5)?,
                r.get::<_, String>(6)?,
                r.get::<_, i64>(7)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (tool, key, code_hash, allowlist, declared, sandboxed, via, granted_at) = row?;
            out.push(ApprovalRow {
                tool,
                key,
                code_hash,
                allowlist: allowlist
                    .map(|a| json_list("approval allowlist", &a))
                    .transpose()?,
                declared: json_list("approval declared keys", &declared)?,
                sandboxed: sandboxed != 0,
                via,
                granted_at,
            });
        }
        Ok(out)
    }

    /// Record approvals (one transaction, one `consent_granted` event each).
    pub fn grant(&self, rows: &[ApprovalRow]) -> Result<(), LedgerError> {
        self.write(|tx| {
            for row in rows {
                tx.grant(row)?;
            }
            Ok(())
        })
    }

    /// Withdraw `tool`'s approvals of `key` (every key when `None`), with a `consent_revoked`
    /// event naming `why`. Returns the keys that had an approval.
    pub fn revoke(
        &self,
        tool: &str,
        key: Option<&str>,
        why: &str,
    ) -> Result<Vec<String>, LedgerError> {
        self.write(|tx| tx.revoke(tool, key, why))
    }

    /// Remember the consent question `tool` could not ask, replacing an older one.
    pub fn set_pending(&self, pending: &PendingConsent) -> Result<(), LedgerError> {
        let declared = to_json("pending declared keys", &pending.declared)?;
        self.conn().execute(
            "INSERT INTO pending_consent (tool, code_hash, declared, asked_at, packages, reach)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (tool) DO UPDATE SET code_hash = excluded.code_hash,
                declared = excluded.declared, asked_at = excluded.asked_at,
                packages = excluded.packages, reach = excluded.reach",
            params![
                pending.tool,
                pending.code_hash,
                declared,
                pending.asked_at,
                pending.packages,
                pending.reach
            ],
        )?;
        Ok(())
    }

    /// The newest question `tool` could not ask, if any.
    pub fn pending(&self, tool: &str) -> Result<Option<PendingConsent>, LedgerError> {
        Ok(self.pendings(Some(tool))?.into_iter().next())
    }

    /// The questions tools could not ask (of `tool` only, when given), newest first.
    pub fn pendings(&self, tool: Option<&str>) -> Result<Vec<PendingConsent>, LedgerError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT tool, code_hash, declared, asked_at, packages, reach FROM pending_consent
             WHERE ?1 IS NULL OR tool = ?1 ORDER BY asked_at DESC, tool",
        )?;
        let rows = stmt.query_map([tool], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, Option<String>>(4)?,
                r.get::<_, Option<String>>(5)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (tool, code_hash, declared, asked_at, packages, reach) = row?;
            out.push(PendingConsent {
                tool,
                code_hash,
                declared: json_list("pending declared keys", &declared)?,
                packages,
                reach,
                asked_at,
            });
        }
        Ok(out)
    }
}

impl Tx<'_> {
    /// Record one approval and its `consent_granted` event.
    pub fn grant(&self, row: &ApprovalRow) -> Result<(), LedgerError> {
        let allowlist = row
            .allowlist
            .as_deref()
            .map(|a| to_json("approval allowlist", a))
            .transpose()?;
        let declared = to_json("approval declared keys", &row.declared)?;
        self.tx.execute(
            "INSERT INTO approvals
               (tool, key, code_hash, allowlist, declared, sandboxed, via, granted_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (tool, key, code_hash) DO UPDATE SET allowlist = excluded.allowlist,
                declared = excluded.declared, sandboxed = excluded.sandboxed,
                via = excluded.via, granted_at = excluded.granted_at",
            params![
                row.tool,
                row.key,
                row.code_hash,
                allowlist,
                declared,
                i64::from(row.sandboxed),
                row.via,
                row.granted_at
            ],
        )?;
        let reach = match &row.allowlist {
            Some(list) if list.is_empty() => "an empty allowlist".to_string(),
            Some(list) => format!("allowlist {}", list.join(" ")),
            None => "no allowlist".to_string(),
        };
        self.event(
            Some(&row.tool),
            Event::ConsentGranted,
            &format!(
                "{} granted via {} for code {} ({reach}{})",
                row.key,
                row.via,
                short(&row.code_hash),
                if row.sandboxed { "" } else { ", unconfined" }
            ),
        )
    }

    /// See [`Ledger::revoke`].
    pub fn revoke(
        &self,
        tool: &str,
        key: Option<&str>,
        why: &str,
    ) -> Result<Vec<String>, LedgerError> {
        let mut keys: Vec<String> = {
            let mut stmt = self.tx.prepare(
                "SELECT DISTINCT key FROM approvals WHERE tool = ?1 AND (?2 IS NULL OR key = ?2)",
            )?;
            let rows = stmt.query_map(params![tool, key], |r| r.get::<_, String>(0))?;
            rows.collect::<Result<_, _>>()?
        };
        keys.sort();
        self.tx.execute(
            "DELETE FROM approvals WHERE tool = ?1 AND (?2 IS NULL OR key = ?2)",
            params![tool, key],
        )?;
        if key.is_none() {
            self.tx
                .execute("DELETE FROM pending_consent WHERE tool = ?1", [tool])?;
        }
        for k in &keys {
            self.event(Some(tool), Event::ConsentRevoked, &format!("{k}: {why}"))?;
        }
        Ok(keys)
    }
}

/// The first 12 hex digits of a hash, for messages.
pub(crate) fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}
