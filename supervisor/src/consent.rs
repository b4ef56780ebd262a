//! Consent per tool × key, asked of the user through the host before anything runs with a key.
//!
//! What is asked and when is decided in [`autotool_policy::consent`]; this module finds the
//! keys a tool version wants and has not been approved for, puts the question to the host in
//! its own era, and records the answers in the ledger (`approvals`, and an audit event for
//! every question, answer and grant):
//! - hosts of the 2025 revisions get a form elicitation (`elicitation/create`) with one boolean,
//!   `allow`, while the call waits;
//! - 2026-07-28 hosts get an `input_required` result holding the same form and a `requestState`
//!   sealed with rmcp's [`RequestStateCodec`] (HMAC-SHA256 under a key drawn at start), bound to
//!   the called tool and a digest of its arguments, valid for [`STATE_TTL`] and for one answer:
//!   a nonce seen once is refused again;
//! - a host that cannot ask (no elicitation capability) or an answer that is not a yes leaves
//!   the call refused with what the user can run: `autotool tools approve TOOL KEY`. The
//!   question is remembered (`pending_consent`) so that command can answer it before the tool
//!   exists.
//!
//! The value of a key is never asked for, shown, or put in a question: only its name and where
//! it may be sent.

use crate::app::App;
use crate::credentials::KeyStore;
use crate::ledger::{ApprovalRow, PendingConsent, kind, now_ms};
use crate::registry::Registry;
use autotool_policy::consent::{self as rules, Approval, Ask, Verdict, Wanted};
use autotool_policy::hosts::AllowRule;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequest,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, InputRequest,
    InputRequests, InputRequiredResult, JsonObject, RequestStateCodec, SealOptions,
};
use rmcp::service::{ElicitationMode, RequestContext};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a sealed consent question stays answerable.
pub const STATE_TTL: Duration = Duration::from_secs(600);

/// How long a host may take to answer an elicitation before the call gives up.
pub const ELICITATION_TIMEOUT: Duration = Duration::from_secs(600);

/// The key of the consent form in `inputRequests` / `inputResponses`.
pub const INPUT_KEY: &str = "consent";

/// A tool version that wants keys: what consent is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    pub tool: String,
    /// sha256 of its `tool.py`, lowercase hex.
    pub code_hash: String,
    /// Every key it declares (`REQUIRED_ENV`).
    pub declared: Vec<String>,
}

/// The sealed state of one `input_required` question.
#[derive(Debug, Serialize, Deserialize)]
struct State {
    /// Single use: a nonce is accepted once.
    nonce: String,
    tool: String,
    code: String,
    keys: Vec<String>,
}

/// Why an echoed `requestState` was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StateError {
    #[error("it has expired (a question stays answerable for {} minutes); call again to be asked anew", STATE_TTL.as_secs() / 60)]
    Expired,
    #[error("it was not issued by this autotool for this call and these arguments")]
    Forged,
    #[error("it was already used once; call again to be asked anew")]
    Replayed,
}

/// The codec and the nonces already answered.
pub struct Consent {
    codec: RequestStateCodec,
    used: Mutex<HashMap<String, Instant>>,
}

impl std::fmt::Debug for Consent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consent").finish_non_exhaustive()
    }
}

/// `N` bytes from `/dev/urandom`: the consent sealing key and nonces, the service token, the
/// demo's key.
pub(crate) fn random_bytes<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut buf = [0u8; N];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf)
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `value` with every object's keys in order, so equal arguments digest equally however the
/// host ordered them.
fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let sorted: BTreeMap<&String, Value> =
                map.iter().map(|(k, v)| (k, canonical(v))).collect();
            Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// What a sealed state is bound to: the called tool and a digest of its arguments.
fn binding(called: &str, arguments: &JsonObject) -> Vec<u8> {
    let args = canonical(&Value::Object(arguments.clone())).to_string();
    let digest = Sha256::digest(args.as_bytes());
    format!("autotool/consent/v1|{called}|{}", hex(&digest)).into_bytes()
}

impl Consent {
    /// A codec under a fresh random key: states from another process (or an earlier run) are
    /// never accepted.
    pub fn new() -> std::io::Result<Consent> {
        let key: [u8; 32] = random_bytes()?;
        let codec = RequestStateCodec::try_new(key.to_vec())
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(Consent {
            codec,
            used: Mutex::new(HashMap::new()),
        })
    }

    /// Seal a question about `keys` of `subject`, for a call of `called` with `arguments`.
    fn seal(
        &self,
        subject: &Subject,
        keys: &[String],
        called: &str,
        arguments: &JsonObject,
    ) -> Result<String, String> {
        let nonce = hex(&random_bytes::<16>().map_err(|e| e.to_string())?);
        let state = State {
            nonce,
            tool: subject.tool.clone(),
            code: subject.code_hash.clone(),
            keys: keys.to_vec(),
        };
        let ad = binding(called, arguments);
        self.codec
            .seal_json_with(
                &state,
                &SealOptions::new().associated_data(&ad).ttl(STATE_TTL),
            )
            .map_err(|e| e.to_string())
    }

    /// Open an echoed state for a call of `called` with `arguments`, and spend its nonce.
    fn open(
        &self,
        sealed: &str,
        called: &str,
        arguments: &JsonObject,
    ) -> Result<State, StateError> {
        let ad = binding(called, arguments);
        let state: State = self
            .codec
            .open_json_with(sealed, &ad)
            .map_err(|e| match e {
                rmcp::model::RequestStateError::Expired => StateError::Expired,
                _ => StateError::Forged,
            })?;
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        // A nonce can only be replayed while its state is unexpired; forget older ones.
        used.retain(|_, at| at.elapsed() < STATE_TTL + Duration::from_secs(60));
        if used.insert(state.nonce.clone(), Instant::now()).is_some() {
            return Err(StateError::Replayed);
        }
        Ok(state)
    }
}

/// Parse stored allowlist entries (canonical already); an entry that no longer parses makes
/// the list allow nothing, never everything.
pub fn parse_list(entries: &[String]) -> Vec<AllowRule> {
    let mut rules = Vec::new();
    for e in entries {
        match AllowRule::parse(e) {
            Ok(r) => rules.push(r),
            Err(err) => {
                tracing::warn!(
                    "an allowlist entry does not parse ({err}); the list allows nothing"
                );
                return Vec::new();
            }
        }
    }
    rules
}

fn approval_of(row: &ApprovalRow) -> Approval {
    Approval {
        key: row.key.clone(),
        code_hash: row.code_hash.clone(),
        allowlist: row.allowlist.as_deref().map(parse_list),
        declared: row.declared.iter().cloned().collect(),
        sandboxed: row.sandboxed,
    }
}

/// The keys of `subject` among `candidates` that the approvals on record do not cover.
fn uncovered(
    subject: &Subject,
    candidates: &[String],
    allowlists: &BTreeMap<String, Vec<AllowRule>>,
    approvals: &[ApprovalRow],
    sandboxed: bool,
) -> Vec<Ask> {
    let approvals: Vec<Approval> = approvals.iter().map(approval_of).collect();
    let declared: BTreeSet<String> = subject.declared.iter().cloned().collect();
    candidates
        .iter()
        .filter_map(|key| {
            let list = allowlists.get(key);
            let wanted = Wanted {
                key,
                code_hash: &subject.code_hash,
                allowlist: list.map(Vec::as_slice),
                declared: &declared,
                sandboxed,
            };
            match rules::decide(&wanted, &approvals) {
                Verdict::Approved => None,
                Verdict::Ask(reason) => Some(Ask {
                    key: key.clone(),
                    allowlist: list.cloned(),
                    reason,
                }),
            }
        })
        .collect()
}

fn rows_for(
    subject: &Subject,
    keys: &[String],
    allowlists: &BTreeMap<String, Vec<AllowRule>>,
    sandboxed: bool,
    via: &str,
) -> Vec<ApprovalRow> {
    let now = now_ms();
    keys.iter()
        .map(|key| ApprovalRow {
            tool: subject.tool.clone(),
            key: key.clone(),
            code_hash: subject.code_hash.clone(),
            allowlist: allowlists
                .get(key)
                .map(|l| l.iter().map(ToString::to_string).collect()),
            declared: subject.declared.clone(),
            sandboxed,
            via: via.to_string(),
            granted_at: now,
        })
        .collect()
}

impl App {
    fn sandboxed(&self) -> bool {
        self.settings.sandbox == crate::tool::process::SandboxMode::Strict
    }

    /// The keys `subject` wants, holds a value for, and has no approval for, with why each is
    /// asked. Empty under `--dangerously-allow-all-tools`.
    pub fn consent_asks(&self, subject: &Subject) -> Vec<Ask> {
        if self.settings.allow_all_keys {
            return Vec::new();
        }
        let secrets = self.secrets();
        let known: Vec<String> = subject
            .declared
            .iter()
            .filter(|k| secrets.has_value(k))
            .cloned()
            .collect();
        if known.is_empty() {
            return Vec::new();
        }
        let approvals = match self.registry.ledger().approvals(&subject.tool) {
            Ok(a) => a,
            Err(e) => {
                // Fail closed: without the record, every key is asked.
                tracing::warn!("reading approvals: {e}");
                Vec::new()
            }
        };
        uncovered(
            subject,
            &known,
            secrets.allowlists(),
            &approvals,
            self.sandboxed(),
        )
    }

    /// The keys `subject` is granted, with their values: those it declares, holds a value
    /// for, and is approved for (all of them under `--dangerously-allow-all-tools`).
    pub fn granted(&self, subject: &Subject) -> BTreeMap<String, String> {
        let secrets = self.secrets();
        let asks = self.consent_asks(subject);
        subject
            .declared
            .iter()
            .filter(|k| !asks.iter().any(|a| &a.key == *k))
            .filter_map(|k| secrets.value(k).map(|v| (k.clone(), v.to_string())))
            .collect()
    }

    /// Record the user's yes to `keys` of `subject`.
    fn approve(&self, subject: &Subject, keys: &[String], via: &str) -> Result<(), String> {
        let secrets = self.secrets();
        let rows = rows_for(subject, keys, secrets.allowlists(), self.sandboxed(), via);
        self.registry
            .ledger()
            .grant(&rows)
            .map_err(|e| e.to_string())
    }

    fn audit(&self, tool: &str, kind: &str, detail: &str) {
        if let Err(e) = self.registry.event(Some(tool), kind, detail) {
            tracing::warn!("recording a consent event: {e}");
        }
    }

    /// Remember the question, so `autotool tools approve` can answer it even if the host never
    /// does (it may drop an `input_required` result, or the user may close the dialog).
    fn remember(&self, subject: &Subject) {
        let pending = PendingConsent {
            tool: subject.tool.clone(),
            code_hash: subject.code_hash.clone(),
            declared: subject.declared.clone(),
            asked_at: now_ms(),
        };
        if let Err(e) = self.registry.ledger().set_pending(&pending) {
            tracing::warn!("remembering the consent question: {e}");
        }
    }

    /// The refusal a host gets when it cannot ask or the user did not say yes; the question
    /// is remembered for `autotool tools approve`.
    fn consent_refusal(
        &self,
        subject: &Subject,
        asks: &[Ask],
        why: &str,
        called: &str,
    ) -> CallToolResult {
        self.remember(subject);
        let commands: Vec<String> = asks
            .iter()
            .map(|a| format!("`autotool tools approve {} {}`", subject.tool, a.key))
            .collect();
        let again = if called == "create_tool" {
            "then call create_tool again with the same code"
        } else {
            "then call it again"
        };
        let reach: Vec<String> = asks
            .iter()
            .map(|a| format!("{} {}", a.key, rules::reach(&a.key, a.allowlist.as_deref())))
            .collect();
        CallToolResult::error(vec![ContentBlock::text(format!(
            "consent needed: the tool `{}` wants {} and the user has not approved it ({why}). \
             Nothing ran with the key. Where it could go: {}. Ask the user to run {}, {again}.",
            subject.tool,
            asks.iter()
                .map(|a| a.key.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            reach.join("; "),
            commands.join(" and "),
        ))])
    }
}

/// The consent form: one yes/no.
fn form(message: String) -> Result<ElicitRequestParams, String> {
    let schema = ElicitationSchema::builder()
        .required_bool_with("allow", |b| {
            b.title("Allow")
                .description("Let this tool use the key, as the question above says")
        })
        .build()
        .map_err(|e| format!("building the consent form: {e}"))?;
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

fn keys_of(asks: &[Ask]) -> Vec<String> {
    asks.iter().map(|a| a.key.clone()).collect()
}

/// Make sure `subject` may hold the keys it wants before the call runs: `Ok(())` to go on
/// (nothing to ask, or the user just said yes), or the answer the host gets instead (a
/// question, in the 2026-07-28 era, or a refusal).
pub async fn obtain(
    app: &App,
    subject: &Subject,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<(), CallToolResponse> {
    let called = request.name.as_ref();
    let empty = JsonObject::new();
    let arguments = request.arguments.as_ref().unwrap_or(&empty);
    let tool = subject.tool.as_str();

    // A retry carrying an answer to an `input_required` question.
    if let Some(sealed) = &request.request_state {
        let state = match app.consent.open(sealed, called, arguments) {
            Ok(s) if s.tool == subject.tool && s.code == subject.code_hash => s,
            Ok(_) => {
                app.audit(
                    tool,
                    kind::CONSENT_REFUSED,
                    "requestState for another tool or code",
                );
                return Err(refused_state(&StateError::Forged));
            }
            Err(e) => {
                app.audit(
                    tool,
                    kind::CONSENT_REFUSED,
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
        let asks = app.consent_asks(subject);
        match answer {
            Some(a) if is_yes(&a) => {
                app.audit(
                    tool,
                    "consent_answered",
                    &format!("yes to {} (input_required)", state.keys.join(", ")),
                );
                if let Err(e) = app.approve(subject, &state.keys, "input_required") {
                    return Err(CallToolResult::error(vec![ContentBlock::text(format!(
                        "recording the approval failed: {e}"
                    ))])
                    .into());
                }
            }
            other => {
                let what = match &other {
                    None => "no answer to the consent question".to_string(),
                    Some(a) => format!("the user answered {:?}", a.action).to_lowercase(),
                };
                app.audit(
                    tool,
                    kind::CONSENT_DECLINED,
                    &format!("{}: {what}", state.keys.join(", ")),
                );
                return Err(app.consent_refusal(subject, &asks, &what, called).into());
            }
        }
    }

    let asks = app.consent_asks(subject);
    if asks.is_empty() {
        return Ok(());
    }
    let question = rules::question(tool, &asks);
    let keys = keys_of(&asks);
    let modern = context
        .protocol_version()
        .is_some_and(|v| !v.has_initialize());
    if modern {
        let can_ask = context.client_capabilities().is_some_and(|c| {
            c.elicitation
                .as_ref()
                .is_some_and(|e| e.form.is_some() || e.url.is_none())
        });
        if !can_ask {
            app.audit(
                tool,
                kind::CONSENT_UNAVAILABLE,
                &format!("{}: the host offers no elicitation", keys.join(", ")),
            );
            return Err(app
                .consent_refusal(
                    subject,
                    &asks,
                    "this host cannot ask the user: it offers no elicitation",
                    called,
                )
                .into());
        }
        let sealed = match app.consent.seal(subject, &keys, called, arguments) {
            Ok(s) => s,
            Err(e) => {
                return Err(CallToolResult::error(vec![ContentBlock::text(format!(
                    "autotool could not prepare the consent question: {e}"
                ))])
                .into());
            }
        };
        app.remember(subject);
        app.audit(
            tool,
            kind::CONSENT_ASKED,
            &format!("{} (input_required): {question}", keys.join(", ")),
        );
        let form = form(question).map_err(|e| {
            CallToolResponse::from(CallToolResult::error(vec![ContentBlock::text(e)]))
        })?;
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
        app.audit(
            tool,
            kind::CONSENT_UNAVAILABLE,
            &format!("{}: the host offers no elicitation", keys.join(", ")),
        );
        return Err(app
            .consent_refusal(
                subject,
                &asks,
                "this host cannot ask the user: it offers no elicitation",
                called,
            )
            .into());
    }
    app.remember(subject);
    app.audit(
        tool,
        kind::CONSENT_ASKED,
        &format!("{} (elicitation): {question}", keys.join(", ")),
    );
    let form = form(question)
        .map_err(|e| CallToolResponse::from(CallToolResult::error(vec![ContentBlock::text(e)])))?;
    let answer = peer
        .create_elicitation_with_timeout(form, Some(ELICITATION_TIMEOUT))
        .await;
    match answer {
        Ok(a) if is_yes(&a) => {
            app.audit(
                tool,
                "consent_answered",
                &format!("yes to {} (elicitation)", keys.join(", ")),
            );
            app.approve(subject, &keys, "elicitation").map_err(|e| {
                CallToolResponse::from(CallToolResult::error(vec![ContentBlock::text(format!(
                    "recording the approval failed: {e}"
                ))]))
            })
        }
        Ok(a) => {
            let what = format!("the user answered {:?}", a.action).to_lowercase();
            let what = if a.action == ElicitationAction::Accept {
                "the user did not allow it".to_string()
            } else {
                what
            };
            app.audit(
                tool,
                kind::CONSENT_DECLINED,
                &format!("{}: {what}", keys.join(", ")),
            );
            Err(app.consent_refusal(subject, &asks, &what, called).into())
        }
        Err(e) => {
            let what = format!("the host did not answer the question: {e}");
            app.audit(
                tool,
                kind::CONSENT_UNAVAILABLE,
                &format!("{}: {what}", keys.join(", ")),
            );
            Err(app.consent_refusal(subject, &asks, &what, called).into())
        }
    }
}

fn refused_state(e: &StateError) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "the consent answer was refused: its requestState {e}. Nothing ran with the key."
    ))])
    .into()
}

/// `autotool tools approve TOOL KEY`: approve `key` for the tool's current version and for
/// the question it could not ask, if any. Returns what was approved, for the user.
pub fn approve_from_cli(
    registry: &Registry,
    keys: &KeyStore,
    tool: &str,
    key: &str,
) -> anyhow::Result<String> {
    let current = registry.get(tool)?;
    let pending = registry.ledger().pending(tool)?;
    let mut subjects: Vec<Subject> = Vec::new();
    if let Some(v) = &current {
        subjects.push(Subject {
            tool: tool.to_string(),
            code_hash: v.code_hash.clone(),
            declared: v.required_env.clone(),
        });
    }
    if let Some(p) = &pending
        && !subjects.iter().any(|s| s.code_hash == p.code_hash)
    {
        subjects.push(Subject {
            tool: tool.to_string(),
            code_hash: p.code_hash.clone(),
            declared: p.declared.clone(),
        });
    }
    if subjects.is_empty() {
        anyhow::bail!(
            "no tool named {tool:?}, and no tool of that name waiting for consent (see `autotool \
             tools list`)"
        );
    }
    let declaring: Vec<&Subject> = subjects
        .iter()
        .filter(|s| s.declared.iter().any(|k| k == key))
        .collect();
    if declaring.is_empty() {
        let mut declared: Vec<&str> = subjects
            .iter()
            .flat_map(|s| s.declared.iter().map(String::as_str))
            .collect();
        declared.sort();
        declared.dedup();
        anyhow::bail!(
            "{tool} does not declare {key}; it declares {}",
            if declared.is_empty() {
                "no keys".to_string()
            } else {
                declared.join(", ")
            }
        );
    }
    let list = keys.allowlist(key)?.map(|entries| parse_list(&entries));
    let mut allowlists = BTreeMap::new();
    if let Some(l) = &list {
        allowlists.insert(key.to_string(), l.clone());
    }
    let mut rows = Vec::new();
    for s in declaring {
        // Approved for confined use: with an allowlist it holds across rewrites while tools run
        // confined; a server running unconfined still matches it to this code only.
        rows.extend(rows_for(s, &[key.to_string()], &allowlists, true, "cli"));
    }
    registry.ledger().grant(&rows)?;
    Ok(format!(
        "approved: `{tool}` may use {key}; it can send it {}.\n{}",
        rules::reach(key, list.as_deref()),
        if list.is_some() {
            "The approval holds for later versions of the tool while the allowlist is not \
             widened and the tool declares no new keys."
        } else {
            "The key has no allowlist, so the approval holds for this version of the tool only."
        }
    ))
}

/// `autotool tools revoke TOOL [KEY]`.
pub fn revoke_from_cli(
    registry: &Registry,
    tool: &str,
    key: Option<&str>,
) -> anyhow::Result<String> {
    let revoked =
        registry
            .ledger()
            .revoke(tool, key, "revoked by the user (autotool tools revoke)")?;
    Ok(if revoked.is_empty() {
        format!(
            "{tool} had no approval{}; nothing changed",
            key.map(|k| format!(" of {k}")).unwrap_or_default()
        )
    } else {
        format!(
            "revoked: `{tool}` may no longer use {}; running servers stop its process and ask \
             again on the next call",
            revoked.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn args(v: Value) -> JsonObject {
        v.as_object().cloned().unwrap_or_default()
    }

    fn subject() -> Subject {
        Subject {
            tool: "weather".into(),
            code_hash: "ab".repeat(32),
            declared: vec!["WEATHER_API_KEY".into()],
        }
    }

    #[test]
    fn a_state_opens_once_for_the_same_call_only() {
        let c = Consent::new().unwrap();
        let a = args(serde_json::json!({"city": "Oslo", "days": 3}));
        let keys = vec!["WEATHER_API_KEY".to_string()];
        let sealed = c.seal(&subject(), &keys, "weather__forecast", &a).unwrap();
        // Other arguments, another tool, or a tampered state: refused.
        let b = args(serde_json::json!({"city": "Bergen", "days": 3}));
        assert_eq!(
            c.open(&sealed, "weather__forecast", &b).err(),
            Some(StateError::Forged)
        );
        assert_eq!(
            c.open(&sealed, "other__forecast", &a).err(),
            Some(StateError::Forged)
        );
        let mut tampered = sealed.clone();
        tampered.insert(tampered.len() / 2, 'x');
        assert_eq!(
            c.open(&tampered, "weather__forecast", &a).err(),
            Some(StateError::Forged)
        );
        // Another process's key: refused.
        let other = Consent::new().unwrap();
        assert_eq!(
            other.open(&sealed, "weather__forecast", &a).err(),
            Some(StateError::Forged)
        );
        // Key order does not matter; the first open works, the replay does not.
        let reordered = args(serde_json::json!({"days": 3, "city": "Oslo"}));
        let state = c.open(&sealed, "weather__forecast", &reordered).unwrap();
        assert_eq!(state.keys, keys);
        assert_eq!(state.tool, "weather");
        assert_eq!(
            c.open(&sealed, "weather__forecast", &a).err(),
            Some(StateError::Replayed)
        );
    }

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
