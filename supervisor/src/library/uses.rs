//! Tools built from tools: a tool that declares `USES = ["weather__forecast"]` gets a channel
//! (`crate::tool::process` serves it) on which it may call exactly those functions.
//!
//! - **At creation** ([`Library::check_uses`]): each name must be a mounted function, and the
//!   declaration must leave the graph of calls between tools acyclic and no deeper than
//!   [`rules::MAX_DEPTH`] calls ([`autotool_policy::uses`]).
//! - **Against trust** ([`Library::uses_beyond_trust`]): once a version of the tool earned
//!   trust, a rewrite may call what its trusted versions called, or fewer, never a function
//!   none of them called ([`rules::widened`], the ledger's `trusted_uses`): refused at the
//!   baseline stage, before anything of the rewrite runs.
//! - **At each call** ([`Library::call_used`]): the name must be one the caller declares
//!   (nothing else is reachable: the channel is the caller's, and it names no other tool); the
//!   graph of the versions mounted now is checked again; the called tool must be listed (a
//!   quarantined one fails the call with its reason); its keys must already be approved
//!   (nobody can be asked from inside a tool: the call fails with the command that approves
//!   them). The call then goes through [`Library::call_with`], like a host's: the called tool's
//!   own process, keys, allowlists, ledger row and lifecycle. Its answer is redacted with every
//!   key value autotool knows before the caller gets it, so a caller never sees the keys of the
//!   tool it calls.
//! - **Bounds**: depth as above; one call in flight per calling process (the channel serves one
//!   request at a time) and at most [`MAX_CALLS_AT_ONCE`] across the library; each call within
//!   serve's call timeout.

use super::Library;
use crate::tool::process::{ContentBlock, UsesHandler};
use autotool_policy::names::MountedName;
use autotool_policy::uses as rules;
use rmcp::model::JsonObject;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

/// The most calls between tools in flight at once, across the library.
pub const MAX_CALLS_AT_ONCE: usize = 8;

/// The channel of one process of a tool that declares `USES`.
#[derive(Debug)]
struct Channel {
    library: Weak<Library>,
    caller: String,
    uses: Vec<String>,
}

impl UsesHandler for Channel {
    fn call(
        &self,
        name: String,
        arguments: JsonObject,
    ) -> Pin<Box<dyn Future<Output = Result<Value, String>> + Send + '_>> {
        Box::pin(async move {
            let Some(library) = self.library.upgrade() else {
                return Err("autotool is shutting down".into());
            };
            library
                .call_used(&self.caller, &self.uses, &name, arguments)
                .await
        })
    }
}

/// The tools (not functions) that `uses` names.
fn tools_of(uses: &[String]) -> BTreeSet<String> {
    uses.iter()
        .filter_map(|u| MountedName::split(u))
        .map(|m| m.tool().to_string())
        .collect()
}

/// A function's answer as its caller gets it: its structured content when it has one (a plain
/// value the SDK wrapped as `{"result": value}` is unwrapped), else its text.
fn answer(structured: Option<Value>, content: &[ContentBlock]) -> Value {
    match structured {
        Some(Value::Object(mut o)) if o.len() == 1 && o.contains_key("result") => {
            o.remove("result").unwrap_or(Value::Null)
        }
        Some(v) => v,
        None => Value::String(text(content)),
    }
}

fn text(content: &[ContentBlock]) -> String {
    content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n")
}

impl Library {
    /// The channel a process of `tool` gets for the functions it declares in `uses`; `None`
    /// when it declares none.
    pub(super) fn uses_channel(&self, tool: &str, uses: &[String]) -> Option<Arc<dyn UsesHandler>> {
        if uses.is_empty() {
            return None;
        }
        Some(Arc::new(Channel {
            library: self.me.clone(),
            caller: tool.to_string(),
            uses: uses.to_vec(),
        }))
    }

    /// Every mounted tool and the tools it calls.
    fn uses_graph(&self) -> BTreeMap<String, BTreeSet<String>> {
        self.snapshot()
            .tools
            .values()
            .map(|v| (v.name.to_string(), tools_of(&v.uses)))
            .collect()
    }

    /// Whether `tool` may declare `uses`: no cycle, no chain too deep, and each a function
    /// that is mounted. The text says what is wrong.
    pub fn check_uses(&self, tool: &str, uses: &[String]) -> Result<(), String> {
        if uses.is_empty() {
            return Ok(());
        }
        rules::check(tool, &tools_of(uses), &self.uses_graph()).map_err(|r| r.to_string())?;
        let snapshot = self.snapshot();
        for name in uses {
            let Some(m) = MountedName::split(name) else {
                return Err(format!("USES names {name:?}, which is not a mounted name"));
            };
            match snapshot.tools.get(m.tool()) {
                None => {
                    return Err(format!(
                        "USES names {name}, but no tool {} is mounted; create it first",
                        m.tool()
                    ));
                }
                Some(t) if t.functions.get(m.function().as_str()).is_none() => {
                    return Err(format!(
                        "USES names {name}, but {} has no function {}; its functions: {}",
                        m.tool(),
                        m.function(),
                        t.functions.names().join(", ")
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// Why a new version of `tool` declaring `uses` calls beyond what its trusted versions
    /// called ([`rules::widened`]), if it does; nothing when no version of it was trusted. Read
    /// before anything of the version runs.
    pub fn uses_beyond_trust(
        &self,
        tool: &str,
        uses: &[String],
    ) -> Result<Option<String>, crate::ledger::LedgerError> {
        let Some(trusted) = self.registry.ledger().trusted_uses(tool)? else {
            return Ok(None);
        };
        let added = rules::widened(&trusted, uses);
        if added.is_empty() {
            return Ok(None);
        }
        let before = if trusted.is_empty() {
            "none".to_string()
        } else {
            format!("only {}", trusted.join(", "))
        };
        Ok(Some(format!(
            "its USES reach beyond what {tool}'s trusted versions called: it adds {} (they \
             called {before}). A rewrite of a trusted tool may call the functions its trusted \
             versions called, or fewer, never another: remove {} from USES, or make the wider \
             tool under a new name. Nothing of this version ran.",
            added.join(", "),
            added.join(", ")
        )))
    }

    /// A call by `caller` (declaring `uses`) of mounted function `name`: its answer, redacted,
    /// or why not (redacted too).
    pub async fn call_used(
        &self,
        caller: &str,
        uses: &[String],
        name: &str,
        arguments: JsonObject,
    ) -> Result<Value, String> {
        let secrets = self.secrets();
        self.call_used_unredacted(caller, uses, name, arguments)
            .await
            .map(|mut v| {
                secrets.redact_json(&mut v);
                v
            })
            .map_err(|e| secrets.redact(&e))
    }

    async fn call_used_unredacted(
        &self,
        caller: &str,
        uses: &[String],
        name: &str,
        arguments: JsonObject,
    ) -> Result<Value, String> {
        let declared = uses.iter().any(|u| u == name);
        let target = MountedName::split(name).filter(|_| declared).ok_or_else(|| {
            format!(
                "{caller} may call only the functions it declares in USES ({}); {name:?} is not \
                 one of them",
                uses.join(", ")
            )
        })?;
        rules::check(caller, &tools_of(uses), &self.uses_graph())
            .map_err(|r| format!("the call of {name} was refused: {caller} {r}"))?;
        let callee = target.tool().as_str();
        let function = target.function().as_str();
        if let Some(why) = self.unlisted(callee) {
            return Err(format!(
                "{name} cannot be called: {why}. Calls from {caller} fail until it is back on \
                 the list (`autotool tools rehab {callee}` puts it on probation)."
            ));
        }
        let Some(t) = self.mounted(callee) else {
            return Err(format!(
                "{name} cannot be called: no tool {callee} is mounted"
            ));
        };
        let grants = self.grants(t.subject());
        if !grants.asks.is_empty() {
            let keys: Vec<&str> = grants.asks.iter().map(|a| a.key.as_str()).collect();
            let commands: Vec<String> = keys
                .iter()
                .map(|k| format!("`autotool tools approve {callee} {k}`"))
                .collect();
            return Err(format!(
                "consent needed: {callee} wants {} and the user has not approved it; nobody can \
                 be asked from inside {caller}. Ask the user to run {}, then call again.",
                keys.join(", "),
                commands.join(" and ")
            ));
        }
        let Ok(_slot) = self.uses_slots.try_acquire() else {
            return Err(format!(
                "{name} was not called: {MAX_CALLS_AT_ONCE} calls between tools are already in \
                 flight"
            ));
        };
        let bound = self.settings.call_timeout;
        let called = tokio::time::timeout(
            bound,
            self.call_with(
                callee,
                function,
                arguments,
                false,
                Some((t.version, grants)),
            ),
        )
        .await
        .map_err(|_| format!("{name} did not answer within {} s", bound.as_secs()))?;
        match called {
            Err(e) => Err(e.to_string()),
            Ok(c) if c.is_error => Err(format!(
                "{name} answered with an error: {}",
                text(&c.content)
            )),
            Ok(c) => Ok(answer(c.structured_content, &c.content)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_the_structured_value_or_the_text() {
        let text = vec![ContentBlock::text("hello")];
        assert_eq!(
            answer(Some(serde_json::json!({"result": 3})), &text),
            serde_json::json!(3)
        );
        assert_eq!(
            answer(Some(serde_json::json!({"a": 1, "b": 2})), &text),
            serde_json::json!({"a": 1, "b": 2})
        );
        assert_eq!(answer(None, &text), serde_json::json!("hello"));
    }
}
