//! Verdicts: what verification found of each function of a version (examples, non-degeneracy,
//! determinism), kept with the version so `autotool tools show` can say what stands behind it.

use super::{Ledger, LedgerError};
use crate::verify::verdicts::{Check, Outcome, Verdict};
use rusqlite::params;

impl Ledger {
    /// Keep `verdicts` as those of `tool` version `version`, replacing any kept before.
    pub fn record_verdicts(
        &self,
        tool: &str,
        version: u32,
        verdicts: &[Verdict],
    ) -> Result<(), LedgerError> {
        self.write(|tx| {
            tx.tx.execute(
                "DELETE FROM verdicts WHERE tool = ?1 AND version = ?2",
                params![tool, version],
            )?;
            let mut insert = tx.tx.prepare(
                "INSERT INTO verdicts (tool, version, function, check_name, example, outcome, detail)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            for v in verdicts {
                insert.execute(params![
                    tool,
                    version,
                    v.function,
                    v.check.name(),
                    v.example,
                    v.outcome.name(),
                    v.detail
                ])?;
            }
            Ok(())
        })
    }

    /// The verdicts kept for `tool` version `version`, in the order they were reached.
    pub fn verdicts(&self, tool: &str, version: u32) -> Result<Vec<Verdict>, LedgerError> {
        let conn = self.conn();
        let mut query = conn.prepare(
            "SELECT function, check_name, example, outcome, detail FROM verdicts
             WHERE tool = ?1 AND version = ?2 ORDER BY id",
        )?;
        let rows = query.query_map(params![tool, version], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<u32>>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
            ))
        })?;
        let mut verdicts = Vec::new();
        for row in rows {
            let (function, check, example, outcome, detail) = row?;
            // A row this build does not know (written by a newer one) is left out.
            let (Some(check), Some(outcome)) = (Check::named(&check), Outcome::named(&outcome))
            else {
                continue;
            };
            verdicts.push(Verdict {
                function,
                check,
                example,
                outcome,
                detail,
            });
        }
        Ok(verdicts)
    }
}
