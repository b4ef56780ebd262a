//! Verdicts and the baseline: what verification found of each function of a version
//! (examples, relations, non-degeneracy, determinism), kept with the version so `autotool tools show` can
//! say what stands behind it; what the version met, which joins the tool's baseline when the
//! version is promoted to active ([`Tx::adopt_met`]); the baseline itself, which only grows
//! (an obligation is dropped only by the user, and keeps its row).

use super::{Event, Ledger, LedgerError, Tx, now_ms};
use crate::verify::Obligation;
use crate::verify::verdicts::{Check, Outcome, Verdict};
use rusqlite::{OptionalExtension, params};
use serde::Serialize;

/// One obligation of a tool's baseline, as `autotool tools baseline` lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BaselineRow {
    #[serde(flatten)]
    pub obligation: Obligation,
    /// Unix ms it joined.
    pub added_at: i64,
    /// Unix ms the user dropped it; `None` while it is owed.
    pub dropped_at: Option<i64>,
}

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

impl Ledger {
    /// The fit the trigger check found for each tool's current version, where it ran.
    pub fn trigger_fits_of_current(
        &self,
    ) -> Result<std::collections::HashMap<String, f64>, LedgerError> {
        let conn = self.conn();
        let mut query = conn.prepare(
            "SELECT v.tool, v.detail FROM verdicts v
             JOIN tools t ON t.name = v.tool AND t.current_version = v.version
             WHERE v.check_name = 'trigger' AND v.outcome IN ('passed', 'failed')",
        )?;
        let rows = query.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        let mut fits = std::collections::HashMap::new();
        for row in rows {
            let (tool, detail) = row?;
            if let Some(fit) = crate::verify::verdicts::fit_in(&detail) {
                fits.insert(tool, fit);
            }
        }
        Ok(fits)
    }

    /// Keep `met` as what `tool` version `version` met (replacing any kept before).
    pub fn record_met(
        &self,
        tool: &str,
        version: u32,
        met: &[Obligation],
    ) -> Result<(), LedgerError> {
        self.write(|tx| {
            tx.tx.execute(
                "DELETE FROM met WHERE tool = ?1 AND version = ?2",
                params![tool, version],
            )?;
            let mut insert = tx.tx.prepare(
                "INSERT INTO met
                   (tool, version, function, check_name, arguments, answer, exact, relation)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?;
            for m in met {
                insert.execute(params![
                    tool,
                    version,
                    m.function,
                    m.check.name(),
                    serde_json::Value::Object(m.arguments.clone()).to_string(),
                    m.answer.as_ref().map(ToString::to_string),
                    m.exact,
                    m.relation
                        .as_ref()
                        .map(|r| serde_json::to_string(r).unwrap_or_default())
                ])?;
            }
            Ok(())
        })
    }

    /// `tool`'s baseline, oldest first; with `dropped`, the obligations the user dropped too.
    pub fn baseline(&self, tool: &str, dropped: bool) -> Result<Vec<BaselineRow>, LedgerError> {
        let conn = self.conn();
        let mut query = conn.prepare(
            "SELECT id, function, check_name, arguments, answer, exact, since_version, added_at,
                    dropped_at, relation
             FROM obligations WHERE tool = ?1 AND (?2 OR dropped_at IS NULL) ORDER BY id",
        )?;
        let rows = query.query_map(params![tool, dropped], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, Option<String>>(4)?,
                r.get::<_, bool>(5)?,
                r.get::<_, u32>(6)?,
                r.get::<_, i64>(7)?,
                r.get::<_, Option<i64>>(8)?,
                r.get::<_, String>(9)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (
                id,
                function,
                check,
                arguments,
                answer,
                exact,
                since,
                added_at,
                dropped_at,
                relation,
            ) = row?;
            // A row this build cannot read (written by a newer one) is left out.
            let Some(check) = Check::named(&check) else {
                continue;
            };
            let Ok(serde_json::Value::Object(arguments)) = serde_json::from_str(&arguments) else {
                continue;
            };
            let relation = match relation.as_str() {
                "" => None,
                r => match serde_json::from_str(r) {
                    Ok(r) => Some(r),
                    Err(_) => continue,
                },
            };
            let answer = match answer {
                None => None,
                Some(a) => match serde_json::from_str(&a) {
                    Ok(v) => Some(v),
                    Err(_) => continue,
                },
            };
            out.push(BaselineRow {
                obligation: Obligation {
                    id: Some(id),
                    function,
                    check,
                    arguments,
                    relation,
                    answer,
                    exact,
                    since_version: since,
                },
                added_at,
                dropped_at,
            });
        }
        Ok(out)
    }

    /// Drop obligation `id` from `tool`'s baseline (an audit event, with `why`); `false` when
    /// it is not one of the tool's owed obligations.
    pub fn drop_obligation(&self, tool: &str, id: i64, why: &str) -> Result<bool, LedgerError> {
        self.write(|tx| {
            let shown: Option<(String, String)> = tx
                .tx
                .query_row(
                    "SELECT check_name, function FROM obligations
                     WHERE tool = ?1 AND id = ?2 AND dropped_at IS NULL",
                    params![tool, id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            let Some((check, function)) = shown else {
                return Ok(false);
            };
            tx.tx.execute(
                "UPDATE obligations SET dropped_at = ?3 WHERE tool = ?1 AND id = ?2",
                params![tool, id, now_ms()],
            )?;
            tx.event(
                Some(tool),
                Event::ObligationDropped,
                &format!("obligation #{id} ({check} of {function}) dropped: {why}"),
            )?;
            Ok(true)
        })
    }
}

impl Tx<'_> {
    /// What `tool` version `version` met joins the tool's baseline (a dropped obligation met
    /// again by a newly trusted version is owed again, with its answer).
    pub fn adopt_met(&self, tool: &str, version: u32) -> Result<usize, LedgerError> {
        let n = self.tx.execute(
            "INSERT INTO obligations
               (tool, function, check_name, arguments, relation, answer, exact, since_version,
                added_at)
             SELECT tool, function, check_name, arguments, COALESCE(relation, ''), answer, exact,
                    version, ?3
             FROM met WHERE tool = ?1 AND version = ?2
             ON CONFLICT (tool, function, check_name, arguments, relation) DO UPDATE SET
               answer = excluded.answer, exact = excluded.exact,
               since_version = excluded.since_version, dropped_at = NULL",
            params![tool, version, now_ms()],
        )?;
        if n > 0 {
            self.event(
                Some(tool),
                Event::BaselineGrew,
                &format!("version {version} is trusted: {n} obligations it met are owed by every later version"),
            )?;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::ledger::{State, Version};
    use crate::verify::relations::{Relation, Transform};
    use autotool_policy::names::ToolName;
    use serde_json::json;

    fn obligation(check: Check, relation: Option<Relation>) -> Obligation {
        Obligation {
            id: None,
            function: "lookup".into(),
            check,
            arguments: json!({"isbn": "0306406152"}).as_object().cloned().unwrap(),
            relation,
            answer: (check == Check::Example).then(|| json!("Dune")),
            exact: true,
            since_version: 0,
        }
    }

    #[test]
    fn relations_on_one_input_are_owed_apart_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(&dir.path().join("autotool.db")).unwrap();
        ledger
            .write(|tx| {
                tx.insert_current_version(&Version {
                    name: ToolName::parse("books").unwrap(),
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
        let relation = |transform, value: Option<&str>| Relation {
            function: "lookup".into(),
            argument: "isbn".into(),
            transform,
            value: value.map(String::from),
        };
        let padded = relation(Transform::SurroundingWhitespace, None);
        let prefixed = relation(Transform::Prefix, Some("ISBN "));
        // An example and two relations, all on the same input.
        let met = [
            obligation(Check::Example, None),
            obligation(Check::Relation, Some(padded.clone())),
            obligation(Check::Relation, Some(prefixed.clone())),
        ];
        ledger.record_met("books", 1, &met).unwrap();
        assert!(ledger.baseline("books", false).unwrap().is_empty());
        ledger
            .set_state("books", 1, State::Active, "5 successful calls")
            .unwrap();
        let owed: Vec<(Check, Option<Relation>, u32)> = ledger
            .baseline("books", false)
            .unwrap()
            .into_iter()
            .map(|r| {
                (
                    r.obligation.check,
                    r.obligation.relation,
                    r.obligation.since_version,
                )
            })
            .collect();
        assert_eq!(
            owed,
            [
                (Check::Example, None, 1),
                (Check::Relation, Some(padded), 1),
                (Check::Relation, Some(prefixed), 1),
            ]
        );
    }

    #[test]
    fn a_baseline_written_before_relations_is_kept_by_the_migration() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("autotool.db");
        {
            let conn = rusqlite::Connection::open(&path).unwrap();
            for sql in &crate::ledger::MIGRATIONS[..4] {
                conn.execute_batch(sql).unwrap();
            }
            conn.pragma_update(None, "user_version", 4).unwrap();
            conn.execute(
                "INSERT INTO obligations (id, tool, function, check_name, arguments, answer,
                   exact, since_version, added_at, dropped_at)
                 VALUES (7, 'books', 'lookup', 'example', '{\"isbn\":\"1\"}', '\"Dune\"', 1, 2,
                   5, NULL)",
                [],
            )
            .unwrap();
        }
        let ledger = Ledger::open(&path).unwrap();
        let rows = ledger.baseline("books", true).unwrap();
        assert_eq!(rows.len(), 1);
        let ob = &rows[0].obligation;
        assert_eq!(
            (ob.id, ob.check, ob.relation.clone(), ob.answer.clone()),
            (Some(7), Check::Example, None, Some(json!("Dune")))
        );
    }
}
