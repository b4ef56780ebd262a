//! The trigger check of a tool just created, when autotool has its own model
//! ([`crate::own_model::trigger`]): run against the tool list as it stands, kept as the
//! version's `trigger` verdict, and returned for `create_tool`'s result (`trigger_check`).
//! Without a model of its own (or a build without the `own-model` feature) it is skipped, and
//! the result says so.

use super::Library;
use crate::verify::verdicts::{Check, Outcome, Verdict};
use autotool_policy::names::ToolName;
use serde_json::{Value, json};

impl Library {
    /// Check `tool` version `version` (mounted, described by `description`); the verdict is
    /// recorded with the version's others. Returns what `create_tool` reports.
    pub async fn trigger_check(&self, tool: &ToolName, version: u32, description: &str) -> Value {
        let (verdict, reported) = self.run_trigger_check(tool, description).await;
        let mut kept = match self.registry.ledger().verdicts(tool.as_str(), version) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(%tool, "reading the verdicts: {e}");
                Vec::new()
            }
        };
        kept.retain(|v| v.check != Check::Trigger);
        kept.push(verdict);
        if let Err(e) = self
            .registry
            .ledger()
            .record_verdicts(tool.as_str(), version, &kept)
        {
            tracing::warn!(%tool, "recording the trigger check: {e}");
        }
        // The fit joins the search ranking now.
        if let Err(e) = self.reload_with(true) {
            tracing::warn!("rebuilding the snapshot: {e}");
        }
        reported
    }

    /// Who writes the adversarial stage's inputs: autotool's own model, or why there is none.
    pub fn adversary(&self) -> crate::verify::adversary::Adversarial {
        #[cfg(feature = "own-model")]
        {
            crate::own_model::adversary::ModelAdversary::stage(self.own_model.current(), no_model)
        }
        #[cfg(not(feature = "own-model"))]
        {
            crate::verify::adversary::Adversarial::Off(
                "this build has no model of its own (the own-model feature)".into(),
            )
        }
    }

    #[cfg(feature = "own-model")]
    async fn run_trigger_check(&self, tool: &ToolName, description: &str) -> (Verdict, Value) {
        use crate::own_model::trigger::{self, Listed};
        let model = self.own_model.current();
        let Some(provider) = model.provider() else {
            return skipped(tool, no_model(model.why_not()));
        };
        let snapshot = self.snapshot();
        let listed: Vec<Listed> = snapshot
            .tools
            .iter()
            .filter(|(name, _)| snapshot.shown.contains(*name) || *name == tool)
            .flat_map(|(name, version)| {
                version.functions.specs().into_iter().map(move |f| Listed {
                    name: format!("{name}{}{}", autotool_policy::names::SEPARATOR, f.name),
                    description: f.description.clone().unwrap_or_default(),
                })
            })
            .collect();
        let secrets = self.secrets();
        match trigger::check(provider.as_ref(), tool.as_str(), description, &listed).await {
            Ok(found) => {
                let summary = secrets.redact(&model.redact(&found.summary()));
                let verdict = Verdict {
                    function: String::new(),
                    check: Check::Trigger,
                    example: None,
                    outcome: if found.passed {
                        Outcome::Passed
                    } else {
                        Outcome::Failed
                    },
                    detail: crate::verify::verdicts::trigger_detail(&summary, found.fit()),
                };
                let mut reported = serde_json::to_value(&found).unwrap_or(Value::Null);
                secrets.redact_json(&mut reported);
                if let Value::Object(o) = &mut reported {
                    o.insert("summary".into(), Value::String(summary));
                    o.insert("model".into(), Value::String(provider.describe()));
                }
                (verdict, reported)
            }
            Err(why) => skipped(
                tool,
                format!(
                    "the model could not be asked: {}",
                    secrets.redact(&model.redact(&why))
                ),
            ),
        }
    }

    #[cfg(not(feature = "own-model"))]
    async fn run_trigger_check(&self, tool: &ToolName, _description: &str) -> (Verdict, Value) {
        skipped(
            tool,
            "this build has no model of its own (the own-model feature)".into(),
        )
    }
}

/// Why the check is skipped, from why there is no model: said once, whether or not the reason
/// already opens with it (a missing `.env` does; a bad setting in it does not).
#[cfg_attr(not(feature = "own-model"), allow(dead_code))]
pub(super) fn no_model(why_not: &str) -> String {
    const NONE: &str = "autotool has no model of its own";
    if why_not.starts_with(NONE) {
        why_not.to_string()
    } else {
        format!("{NONE} ({why_not})")
    }
}

fn skipped(tool: &ToolName, why: String) -> (Verdict, Value) {
    let _ = tool;
    (
        Verdict {
            function: String::new(),
            check: Check::Trigger,
            example: None,
            outcome: Outcome::Skipped,
            detail: why.clone(),
        },
        json!({"skipped": why}),
    )
}

#[cfg(test)]
mod tests {
    use super::no_model;

    #[test]
    fn why_there_is_no_model_is_said_once() {
        let missing = "autotool has no model of its own: /h/.env does not exist. Put …";
        assert_eq!(no_model(missing), missing);
        assert_eq!(
            no_model("/h/.env: OPENAI_LLM is set without OPENAI_BASE_URL"),
            "autotool has no model of its own (/h/.env: OPENAI_LLM is set without OPENAI_BASE_URL)"
        );
    }
}
