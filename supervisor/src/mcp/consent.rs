//! Asking the host for consent, in its own era, before anything runs with a key:
//! - hosts of the 2025 revisions get a form elicitation (`elicitation/create`) with one boolean,
//!   `allow`, while the call waits, sent to the peer that made the call;
//! - 2026-07-28 hosts get an `input_required` result holding the same form and a sealed
//!   `requestState` ([`crate::consent::Consent`]), bound to the called tool, its arguments and
//!   the channel the question went out on; the retry carrying the answer must come back on it;
//! - a host that cannot ask (no elicitation capability) or an answer that is not a yes leaves
//!   the call refused with what the user can run: `autotool tools approve TOOL KEY`. The
//!   question is remembered so that command can answer it before the tool exists.

use crate::consent::{Ask, PackagesAsk, ReachAsk, StateError};
use crate::ledger::Event;
use crate::library::{Grants, Library};
use crate::version::Subject;
use autotool_policy::consent as rules;
use autotool_policy::names::KeyName;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequest,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, InputRequest,
    InputRequests, InputRequiredResult, JsonObject,
};
use rmcp::service::{ElicitationMode, RequestContext};
use serde_json::Value;
use std::time::Duration;

/// How long a host may take to answer an elicitation before the call gives up.
pub const ELICITATION_TIMEOUT: Duration = Duration::from_secs(600);

/// The key of the consent form in `inputRequests` / `inputResponses`.
pub const INPUT_KEY: &str = "consent";

/// The consent form could not be built (the schema builder refused it); the call fails with
/// this text.
#[derive(Debug, thiserror::Error)]
#[error("building the consent form: {0}")]
struct FormError(String);

/// The consent form: one yes/no.
fn form(message: String) -> Result<ElicitRequestParams, FormError> {
    let schema = ElicitationSchema::builder()
        .required_bool_with("allow", |b| {
            b.title("Allow")
                .description("Let this tool use the key, as the question above says")
        })
        .build()
        .map_err(|e| FormError(e.to_string()))?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    })
}

/// Whether an elicitation answer is a yes.
fn is_yes(answer: &ElicitResult) -> bool {
    answer.action == ElicitationAction::Accept
        && answer
            .content
            .as_ref()
            .and_then(|c| c.get("allow"))
            .and_then(Value::as_bool)
            == Some(true)
}

fn keys_of(asks: &[Ask]) -> Vec<KeyName> {
    asks.iter().map(|a| a.key.clone()).collect()
}

fn joined(keys: &[KeyName]) -> String {
    keys.iter()
        .map(KeyName::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

fn failed(text: String) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(text)]).into()
}

/// What a question is about, for audit events: `WEATHER_API_KEY`, `packages feedparser
/// 6.0.11` and/or `reach (reach api.open-meteo.com without a key)`.
fn about(keys: &[KeyName], packages: Option<&PackagesAsk>, reach: Option<&ReachAsk>) -> String {
    let mut parts = Vec::new();
    if !keys.is_empty() {
        parts.push(joined(keys));
    }
    if let Some(p) = packages {
        parts.push(format!("packages ({})", p.phrase));
    }
    if let Some(r) = reach {
        parts.push(format!("reach ({})", r.phrase));
    }
    parts.join(" and ")
}

/// The refusal a host gets when it cannot ask or the user did not say yes; the question is
/// remembered for `autotool tools approve`.
fn refusal(
    library: &Library,
    subject: Subject<'_>,
    grants: &Grants,
    why: &str,
    called: &str,
) -> CallToolResponse {
    library.remember(subject);
    let asks = &grants.asks;
    let mut commands: Vec<String> = asks
        .iter()
        .map(|a| format!("`autotool tools approve {} {}`", subject.tool, a.key))
        .collect();
    let mut wants = Vec::new();
    if !asks.is_empty() {
        wants.push(joined(&keys_of(asks)));
    }
    if let Some(p) = &grants.packages {
        commands.push(format!(
            "`autotool tools approve {} --packages`",
            subject.tool
        ));
        wants.push(format!("to {}", p.phrase));
    }
    if let Some(r) = &grants.reach {
        commands.push(format!("`autotool tools approve {} --reach`", subject.tool));
        wants.push(format!("to {}", r.phrase));
    }
    let again = if called == "create_tool" {
        "then call create_tool again with the same code"
    } else {
        "then call it again"
    };
    let mut reach: Vec<String> = asks
        .iter()
        .map(|a| format!("{} {}", a.key, rules::reach(&a.key, a.allowlist.as_deref())))
        .collect();
    if grants.packages.is_some() {
        reach.push("packages only inside the tool's sandbox".into());
    }
    if grants.reach.is_some() {
        reach.push("without a key, only the hosts and directories it declares".into());
    }
    failed(format!(
        "consent needed: the tool `{}` wants {} and the user has not approved it ({why}). \
         Nothing ran with the key, and nothing was installed. Where it could go: {}. Ask the \
         user to run {}, {again}.",
        subject.tool,
        wants.join(" and "),
        reach.join("; "),
        commands.join(" and "),
    ))
}

fn refused_state(e: &StateError) -> CallToolResponse {
    failed(format!(
        "the consent answer was refused: its requestState {e}. Nothing ran with the key."
    ))
}

/// Record the user's yes to `keys` and, when the question was about them, the package set
/// and the declared reach.
fn approve(
    library: &Library,
    subject: Subject<'_>,
    keys: &[KeyName],
    packages: bool,
    reach: bool,
    via: &str,
) -> Result<(), String> {
    let recorded = library.approve(subject, keys, via).and_then(|()| {
        if packages {
            library.approve_packages(subject, via)?;
        }
        if reach {
            library.approve_reach(subject, via)?;
        }
        Ok(())
    });
    recorded.map_err(|e| format!("recording the approval failed: {e}"))
}

/// Make sure `subject` may hold the keys it wants, and have the packages it declares, before
/// the call runs: `Ok(())` to go on (nothing to ask, or the user just said yes), or the answer
/// the host gets instead (a question, in the 2026-07-28 era, or a refusal). `channel` names the
/// connection the call came on: a sealed question is answered only on the channel it was asked
/// on.
pub async fn obtain(
    library: &Library,
    subject: Subject<'_>,
    grants: &mut Grants,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    channel: &str,
) -> Result<(), CallToolResponse> {
    let called = request.name.as_ref();
    let empty = JsonObject::new();
    let arguments = request.arguments.as_ref().unwrap_or(&empty);
    let tool = subject.tool.as_str();
    let digest = subject.packages.map(|p| p.digest.as_str());

    // A retry carrying an answer to an `input_required` question.
    if let Some(sealed) = &request.request_state {
        let state = match library.consent.open(sealed, channel, called, arguments) {
            // A question about a package set is answered for that set only: one resolved
            // differently since is asked about anew.
            // So is one about reach: what is asked now must be what was asked then.
            Ok(s)
                if s.tool == tool
                    && s.code == subject.code_hash
                    && (s.packages.is_none() || s.packages.as_deref() == digest)
                    && (s.reach.is_none()
                        || s.reach.as_deref()
                            == grants.reach.as_ref().map(|r| r.digest.as_str())) =>
            {
                s
            }
            Ok(_) => {
                library.audit(
                    tool,
                    Event::ConsentRefused,
                    "requestState for another tool, code or package set",
                );
                return Err(refused_state(&StateError::Forged));
            }
            Err(e) => {
                library.audit(
                    tool,
                    Event::ConsentRefused,
                    &format!("requestState refused: {e}"),
                );
                return Err(refused_state(&e));
            }
        };
        let answer = request
            .input_responses
            .as_ref()
            .and_then(|r| r.get(INPUT_KEY))
            .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok());
        let asked = about(
            &state.keys,
            grants
                .packages
                .as_ref()
                .filter(|_| state.packages.is_some()),
            grants.reach.as_ref().filter(|_| state.reach.is_some()),
        );
        match answer {
            Some(a) if is_yes(&a) => {
                library.audit(
                    tool,
                    Event::ConsentAnswered,
                    &format!("yes to {asked} (input_required)"),
                );
                approve(
                    library,
                    subject,
                    &state.keys,
                    state.packages.is_some(),
                    state.reach.is_some(),
                    "input_required",
                )
                .map_err(failed)?;
                *grants = library.grants(subject);
            }
            other => {
                let what = match &other {
                    None => "no answer to the consent question".to_string(),
                    Some(a) => format!("the user answered {:?}", a.action).to_lowercase(),
                };
                library.audit(tool, Event::ConsentDeclined, &format!("{asked}: {what}"));
                return Err(refusal(library, subject, grants, &what, called));
            }
        }
    }

    if grants.asks.is_empty() && grants.packages.is_none() && grants.reach.is_none() {
        return Ok(());
    }
    let keys = keys_of(&grants.asks);
    let asked_packages = grants.packages.is_some();
    let reach_digest = grants.reach.as_ref().map(|r| r.digest.clone());
    let asked = about(&keys, grants.packages.as_ref(), grants.reach.as_ref());
    let question = crate::consent::question(
        tool,
        &grants.asks,
        grants.packages.as_ref(),
        grants.reach.as_ref(),
        subject.uses,
    );
    let cannot_ask = "this host cannot ask the user: it offers no elicitation";
    if super::handler::modern(context) {
        let can_ask = context.client_capabilities().is_some_and(|c| {
            c.elicitation
                .as_ref()
                .is_some_and(|e| e.form.is_some() || e.url.is_none())
        });
        if !can_ask {
            library.audit(
                tool,
                Event::ConsentUnavailable,
                &format!("{asked}: the host offers no elicitation"),
            );
            return Err(refusal(library, subject, grants, cannot_ask, called));
        }
        let sealed = library
            .consent
            .seal(
                subject,
                &keys,
                digest.filter(|_| asked_packages),
                reach_digest.as_deref(),
                channel,
                called,
                arguments,
            )
            .map_err(|e| {
                failed(format!(
                    "autotool could not prepare the consent question: {e}"
                ))
            })?;
        library.remember(subject);
        library.audit(
            tool,
            Event::ConsentAsked,
            &format!("{asked} (input_required): {question}"),
        );
        let form = form(library.secrets().redact(&question)).map_err(|e| failed(e.to_string()))?;
        let mut requests = InputRequests::new();
        requests.insert(
            INPUT_KEY.to_string(),
            InputRequest::Elicitation(ElicitRequest::new(form)),
        );
        return Err(InputRequiredResult::new(Some(requests), Some(sealed)).into());
    }

    let peer = &context.peer;
    if !peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
    {
        library.audit(
            tool,
            Event::ConsentUnavailable,
            &format!("{asked}: the host offers no elicitation"),
        );
        return Err(refusal(library, subject, grants, cannot_ask, called));
    }
    library.remember(subject);
    library.audit(
        tool,
        Event::ConsentAsked,
        &format!("{asked} (elicitation): {question}"),
    );
    let form = form(library.secrets().redact(&question)).map_err(|e| failed(e.to_string()))?;
    let answer = peer
        .create_elicitation_with_timeout(form, Some(ELICITATION_TIMEOUT))
        .await;
    match answer {
        Ok(a) if is_yes(&a) => {
            library.audit(
                tool,
                Event::ConsentAnswered,
                &format!("yes to {asked} (elicitation)"),
            );
            approve(
                library,
                subject,
                &keys,
                asked_packages,
                reach_digest.is_some(),
                "elicitation",
            )
            .map_err(failed)?;
            *grants = library.grants(subject);
            Ok(())
        }
        Ok(a) => {
            let what = if a.action == ElicitationAction::Accept {
                "the user did not allow it".to_string()
            } else {
                format!("the user answered {:?}", a.action).to_lowercase()
            };
            library.audit(tool, Event::ConsentDeclined, &format!("{asked}: {what}"));
            Err(refusal(library, subject, grants, &what, called))
        }
        Err(e) => {
            let what = format!("the host did not answer the question: {e}");
            library.audit(tool, Event::ConsentUnavailable, &format!("{asked}: {what}"));
            Err(refusal(library, subject, grants, &what, called))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn only_an_accepted_true_is_a_yes() {
        let yes = ElicitResult::new(ElicitationAction::Accept)
            .with_content(serde_json::json!({"allow": true}));
        assert!(is_yes(&yes));
        for no in [
            ElicitResult::new(ElicitationAction::Accept)
                .with_content(serde_json::json!({"allow": false})),
            ElicitResult::new(ElicitationAction::Accept)
                .with_content(serde_json::json!({"allow": "true"})),
            ElicitResult::new(ElicitationAction::Accept),
            ElicitResult::new(ElicitationAction::Decline),
            ElicitResult::new(ElicitationAction::Cancel)
                .with_content(serde_json::json!({"allow": true})),
        ] {
            assert!(!is_yes(&no), "{no:?}");
        }
    }

    #[test]
    fn the_form_asks_one_boolean_and_never_a_value() {
        let ElicitRequestParams::FormElicitationParams {
            requested_schema, ..
        } = form("q".into()).unwrap()
        else {
            panic!("not a form");
        };
        let schema = serde_json::to_value(&requested_schema).unwrap();
        assert_eq!(schema["properties"]["allow"]["type"], "boolean");
        assert_eq!(schema["required"], serde_json::json!(["allow"]));
        assert_eq!(schema["properties"].as_object().unwrap().len(), 1);
    }
}
