//! A call of a mounted function: which version runs it (a quarantined or retired one only when
//! the caller insists, never a draft: [`State::may_call`]), the warm process with the keys it is
//! granted, the answer, its record in the ledger, and the lifecycle decision after it.
//!
//! Each call is queued to be recorded, and one task per tool at a time writes what is queued
//! in one transaction (calls that finish while a write is under way go in the next one, so a
//! busy tool costs the ledger a commit per batch, not per call) and then takes the lifecycle
//! decision after each of them, in order. A success of an active tool, the hot call, is answered
//! without waiting for that: its row follows within moments, and the only decision it can lead
//! to (a quarantine, when it fills a window whose failure rate is over the limit) is taken
//! before the tool's next call;
//! every other call (a failure, a tool error, any call of a tool on probation or one called with
//! `force`) is answered once its row is written and its decision taken, so whoever reads the
//! ledger after the answer sees it. A tool's next call waits for its calls so far before it
//! reads the tool's state, and [`Library::call`] and serve's shutdown
//! ([`Library::settle_calls`]) wait for them too.
//!
//! [`State::may_call`]: autotool_policy::lifecycle::State::may_call

use super::Library;
use crate::ledger::{CallKind, CallRecord, Event, State};
use crate::pin::Break;
use crate::tool::pool::{Launchable, PinCheck, StartError};
use crate::tool::process::ContentBlock;
use crate::version::Version;
use rmcp::model::JsonObject;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A function's answer, as the tool gave it. Its content is the tool's own (untrusted: the
/// protocol edge renders it, redacted and capped, for the host).
#[derive(Debug, Clone)]
pub struct Called {
    pub tool: String,
    pub version: u32,
    pub function: String,
    pub content: Vec<ContentBlock>,
    pub structured_content: Option<serde_json::Value>,
    /// The tool answered with an error (a `ToolError`, or an unexpected exception).
    pub is_error: bool,
    /// What the tool wrote to stderr during a failed call (the traceback), to show with it.
    pub stderr: Option<String>,
    /// Why the tool is off the list, when it was called with `force`.
    pub forced: Option<String>,
    /// Destinations (`host:port`) the egress proxy refused this tool while the call ran: an
    /// answer that reads like success may be the refusal's text (the protocol edge marks it).
    pub egress_refused: Vec<String>,
}

/// The most refused destinations kept per tool.
const REFUSALS_KEPT: usize = 16;

/// Per tool, the destinations its egress proxy refused, each numbered: a call notes the count
/// before it runs and takes what came after.
#[derive(Debug, Clone, Default)]
pub(crate) struct Refusals(Arc<std::sync::Mutex<RefusalsByTool>>);

/// Per tool: how many were refused so far, and the last ones kept, each with its number.
type RefusalsByTool = std::collections::BTreeMap<String, (u64, Vec<(u64, String)>)>;

impl Refusals {
    /// `tool`'s proxy refused `target`.
    pub(crate) fn push(&self, tool: &str, target: String) {
        let mut all = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (count, kept) = all.entry(tool.to_string()).or_default();
        *count += 1;
        kept.push((*count, target));
        if kept.len() > REFUSALS_KEPT {
            kept.remove(0);
        }
    }

    /// How many `tool`'s proxy refused so far.
    pub(crate) fn count(&self, tool: &str) -> u64 {
        let all = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        all.get(tool).map_or(0, |(c, _)| *c)
    }

    /// The destinations refused after the `since`th, without repeats.
    pub(crate) fn since(&self, tool: &str, since: u64) -> Vec<String> {
        let all = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out: Vec<String> = Vec::new();
        for (n, target) in all.get(tool).map(|(_, k)| k.as_slice()).unwrap_or_default() {
            if *n > since && !out.contains(target) {
                out.push(target.clone());
            }
        }
        out
    }
}

/// Why a call did not reach the tool, or the tool did not answer. `Display` is for the agent
/// (redact before it reaches one).
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    #[error("no tool named {tool:?} is mounted; tools: {}", known_tools(.known))]
    NoTool { tool: String, known: Vec<String> },
    #[error("tool {tool:?} has no function {function:?}; its functions: {}", .known.join(", "))]
    NoFunction {
        tool: String,
        function: String,
        known: Vec<String>,
    },
    /// The tool is off the list and the call may not run it (the text says what can be done).
    #[error("{0}")]
    OffList(String),
    #[error("the Python runtime is not available: {0}")]
    Runtime(#[source] std::sync::Arc<super::RuntimeUnavailable>),
    #[error(
        "{tool} v{version} was refused: {reason}. It is off the tool list until it is verified \
         again; autotool is doing that now, and a verified version is listed as a new version \
         (watch for the list to change, or search_tools)."
    )]
    Unpinned {
        tool: String,
        version: u32,
        reason: String,
    },
    /// The version's packages cannot be had now (not approved, or not installable).
    #[error("{0}")]
    Packages(String),
    /// The version's declared reach is not granted (the user was not asked, or said no).
    #[error("{0}")]
    Reach(String),
    #[error("calling {tool}.{function} failed: {why}")]
    Failed {
        tool: String,
        function: String,
        why: String,
    },
}

fn known_tools(known: &[String]) -> String {
    if known.is_empty() {
        "none (create one with create_tool)".into()
    } else {
        known.join(", ")
    }
}

impl Library {
    /// Why `tool` is not listed (quarantined, retired, draft), if it is a tool that is not.
    pub fn unlisted(&self, tool: &str) -> Option<String> {
        let snapshot = self.snapshot();
        let t = snapshot.tools.get(tool)?;
        if t.state.listed() {
            return None;
        }
        let why = self
            .registry
            .ledger()
            .state_reason(tool)
            .ok()
            .flatten()
            .unwrap_or_default();
        Some(format!(
            "{tool} is {}{}",
            t.state,
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({why})")
            }
        ))
    }

    /// What a call of `tool`, which is off the list, is told: why, and what can be done.
    /// `None` when `tool` is listed (or unknown).
    pub fn off_list(&self, tool: &str) -> Option<String> {
        let why = self.unlisted(tool)?;
        let draft = self
            .snapshot()
            .tools
            .get(tool)
            .is_some_and(|t| t.state == State::Draft);
        Some(if draft {
            format!(
                "{why}. Nothing runs it, not even with force, until it is verified again: \
                 autotool does that by itself when its file changes, or call create_tool with \
                 its code."
            )
        } else {
            format!(
                "{why}. It is off the tool list; run_tool with \"force\": true calls it anyway, \
                 and the user can run `autotool tools rehab {tool}` to put it back on probation."
            )
        })
    }

    /// The version a call of `tool` would run, if it is mounted.
    pub fn mounted(&self, tool: &str) -> Option<Arc<Version>> {
        self.snapshot().tools.get(tool).cloned()
    }

    /// Call `function` of mounted `tool` with `arguments`. A quarantined or retired tool
    /// answers only with `force`, and the answer says what it is.
    pub async fn call(
        &self,
        tool: &str,
        function: &str,
        arguments: JsonObject,
        force: bool,
    ) -> Result<Called, CallError> {
        let called = self.call_with(tool, function, arguments, force, None).await;
        self.settle_calls_of(tool).await;
        called
    }

    /// Wait until `tool`'s calls so far are recorded and their lifecycle decisions taken.
    pub async fn settle_calls_of(&self, tool: &str) {
        let pushed = self.after_calls().get(tool).map_or(0, |a| a.pushed);
        self.wait_recorded(tool, pushed).await;
    }

    /// Wait until every call so far is recorded (serve's shutdown: no call's row is lost).
    pub async fn settle_calls(&self) {
        let all: Vec<(String, u64)> = self
            .after_calls()
            .iter()
            .map(|(tool, a)| (tool.clone(), a.pushed))
            .collect();
        for (tool, pushed) in all {
            self.wait_recorded(&tool, pushed).await;
        }
    }

    /// Wait until `tool`'s first `seq` queued calls are recorded and decided on.
    async fn wait_recorded(&self, tool: &str, seq: u64) {
        loop {
            let notify = {
                let all = self.after_calls();
                match all.get(tool) {
                    Some(a) if a.done < seq => a.notify.clone(),
                    _ => return,
                }
            };
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // Looked at again once registered: a batch finished in between is not missed.
            if self.after_calls().get(tool).is_none_or(|a| a.done >= seq) {
                return;
            }
            notified.await;
        }
    }

    fn after_calls(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<String, AfterCalls>> {
        self.after_calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// [`Library::call`] with the grants already read (by the consent check of the same call)
    /// for version `.0` of the tool; they are used only if that is still the version the call
    /// runs, and read again otherwise.
    pub async fn call_with(
        &self,
        tool: &str,
        function: &str,
        arguments: JsonObject,
        force: bool,
        grants: Option<(u32, super::Grants)>,
    ) -> Result<Called, CallError> {
        // The previous call's lifecycle decision first: the state read below is after it.
        self.settle_calls_of(tool).await;
        let snapshot = self.snapshot();
        let Some(t) = snapshot.tools.get(tool).cloned() else {
            return Err(CallError::NoTool {
                tool: tool.to_string(),
                known: snapshot.tools.keys().map(ToString::to_string).collect(),
            });
        };
        if t.functions.get(function).is_none() {
            return Err(CallError::NoFunction {
                tool: tool.to_string(),
                function: function.to_string(),
                known: t.functions.names().into_iter().map(String::from).collect(),
            });
        }
        if !t.state.may_call(force) {
            return Err(CallError::OffList(self.off_list(tool).unwrap_or_default()));
        }
        let forced = self.unlisted(tool);
        let what = self.launchable(tool, &t, grants).await?;
        let started = Instant::now();
        let refused_before = self.refusals.count(tool);
        let outcome = match self.pool.get(tool, &what).await {
            Ok(process) => process
                .call(function, arguments, self.settings.call_timeout)
                .await
                .map_err(|e| e.to_string()),
            Err(StartError::Unpinned(b)) => {
                self.break_pin(&t, &b).await;
                return Err(CallError::Unpinned {
                    tool: tool.to_string(),
                    version: t.version,
                    reason: b.reason(),
                });
            }
            Err(e) => Err(format!("the tool could not be started: {e}")),
        };
        let duration = started.elapsed();
        match outcome {
            Ok(out) => {
                // A ToolError is the tool answering; an unexpected exception is it failing.
                let kind = if !out.is_error {
                    CallKind::Ok
                } else if out.unexpected() {
                    CallKind::Failure
                } else {
                    CallKind::ToolError
                };
                let first_text = out.content.iter().find_map(|c| match c {
                    ContentBlock::Text(t) => Some(t.text.clone()),
                    _ => None,
                });
                let record = self.call_record(
                    tool,
                    t.version,
                    function,
                    duration,
                    kind,
                    out.is_error.then(|| first_text.unwrap_or_default()),
                );
                let seq = self.after_call(record, t.state);
                if !(kind == CallKind::Ok && t.state == State::Active) {
                    self.wait_recorded(tool, seq).await;
                }
                let stderr = (out.is_error && !out.stderr.trim().is_empty())
                    .then(|| self.secrets().redact(out.stderr.trim_end()));
                Ok(Called {
                    tool: tool.to_string(),
                    version: t.version,
                    function: function.to_string(),
                    content: out.content,
                    structured_content: out.structured_content,
                    is_error: out.is_error,
                    stderr,
                    forced,
                    egress_refused: self.refusals.since(tool, refused_before),
                })
            }
            Err(why) => {
                let why = self.secrets().redact(&why);
                let record = self.call_record(
                    tool,
                    t.version,
                    function,
                    duration,
                    CallKind::Failure,
                    Some(why.clone()),
                );
                let seq = self.after_call(record, t.state);
                self.wait_recorded(tool, seq).await;
                Err(CallError::Failed {
                    tool: tool.to_string(),
                    function: function.to_string(),
                    why,
                })
            }
        }
    }

    /// How to start (or find running) the mounted version `t` of `tool`: its grants, each
    /// checked (packages and reach approved), its spec and pin. `grants` are the ones already
    /// read for this version, if any.
    pub(super) async fn launchable(
        &self,
        tool: &str,
        t: &Version,
        grants: Option<(u32, super::Grants)>,
    ) -> Result<Launchable, CallError> {
        let python = self
            .runtime()
            .await
            .map_err(|e| CallError::Runtime(std::sync::Arc::new(e)))?;
        let grants = match grants {
            Some((version, g)) if version == t.version => g,
            _ => self.grants(t.subject()),
        };
        let keys = grants.keys;
        if let Some(ask) = grants.packages {
            return Err(CallError::Packages(format!(
                "{tool} v{} may not run: the user has not approved its packages ({}); they can \
                 run `autotool tools approve {tool} --packages`",
                t.version, ask.phrase
            )));
        }
        if let Some(ask) = grants.reach {
            return Err(CallError::Reach(format!(
                "{tool} v{} may not run: the user has not granted what it declares it reaches \
                 ({}); they can run `autotool tools approve {tool} --reach`",
                t.version, ask.phrase
            )));
        }
        let reach = self.reach_granted(t.subject());
        let layer = self.version_layer(t).await.map_err(CallError::Packages)?;
        let dir = self.registry.dir_of(t);
        let mut spec = self.spec(tool, dir.clone(), python, &keys, layer, reach.as_ref());
        self.npm_layer(&spec)
            .await
            .map_err(|e| CallError::Packages(e.to_string()))?;
        spec.uses = self.uses_channel(tool, &t.uses);
        let what = Launchable {
            version: t.version,
            grants: self.fingerprint(&keys, reach.as_ref()),
            spec,
            pin: Some(PinCheck {
                file: dir.join(crate::version::TOOL_FILE),
                code_hash: t.code_hash.clone(),
                description: t.description.clone(),
                functions: t.functions.clone(),
                redactor: self.secrets().redactor().cloned(),
            }),
        };
        Ok(what)
    }

    /// Queue `call` to be recorded, with the lifecycle decision after it, and start the tool's
    /// recording task unless one is running (see the module's text). Returns its place in the
    /// tool's queue, for [`Library::wait_recorded`].
    fn after_call(&self, call: CallRecord, state: State) -> u64 {
        let tool = call.tool.clone();
        let mut all = self.after_calls();
        let pending = all.entry(tool.clone()).or_default();
        pending.queue.push((call, state));
        pending.pushed += 1;
        let seq = pending.pushed;
        if !pending.running {
            pending.running = true;
            match self.me.upgrade() {
                Some(me) => {
                    tokio::spawn(async move { me.record_queued(&tool).await });
                }
                None => {
                    // Not held in an `Arc` (never the case once opened): nothing records it.
                    tracing::warn!(tool, "a call could not be recorded: the library is closing");
                    pending.running = false;
                    pending.queue.clear();
                    pending.done = pending.pushed;
                }
            }
        }
        seq
    }

    /// Write `tool`'s queued calls, a batch per transaction, each batch followed by the
    /// lifecycle decisions after its calls; stop when the queue is found empty.
    async fn record_queued(&self, tool: &str) {
        loop {
            let batch = {
                let mut all = self.after_calls();
                let Some(pending) = all.get_mut(tool) else {
                    return;
                };
                if pending.queue.is_empty() {
                    pending.running = false;
                    return;
                }
                std::mem::take(&mut pending.queue)
            };
            let count = batch.len() as u64;
            let (calls, states): (Vec<CallRecord>, Vec<State>) = batch.into_iter().unzip();
            self.write_calls(&calls);
            // Per version, in order: the decisions after its calls of this batch.
            let mut i = 0;
            while i < calls.len() {
                let version = calls[i].version;
                let run = calls[i..]
                    .iter()
                    .take_while(|c| c.version == version)
                    .count();
                self.lifecycle_after_calls(tool, version, states[i], run)
                    .await;
                i += run;
            }
            if let Some(pending) = self.after_calls().get_mut(tool) {
                pending.done += count;
                pending.notify.notify_waiters();
            }
        }
    }

    /// Promote or quarantine `tool`'s version by its recent calls; a change is recorded with
    /// its reason and every host hears of the new list.
    /// `calls`: how many of the version's newest calls are new; the decision is taken after
    /// each of them in turn, as if they had been recorded one by one, up to the first change.
    async fn lifecycle_after_calls(&self, tool: &str, version: u32, state: State, calls: usize) {
        let thresholds = &self.settings.lifecycle;
        let limit = thresholds
            .window
            .max(thresholds.promote_after)
            .max(thresholds.quarantine_consecutive);
        let extra = u32::try_from(calls.saturating_sub(1)).unwrap_or(u32::MAX);
        let recent =
            match self
                .registry
                .ledger()
                .recent_outcomes(tool, version, limit.saturating_add(extra))
            {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!("reading recent calls: {e}");
                    return;
                }
            };
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let change =
            autotool_policy::lifecycle::after_calls(state, &recent, calls, limit, thresholds);
        let Some(change) = change else {
            return;
        };
        let to = change.to;
        tracing::info!(
            tool,
            version,
            to = to.as_str(),
            reason = change.reason,
            "lifecycle"
        );
        // Only from the state decided on: a pin broken meanwhile (draft) is not undone.
        match self
            .registry
            .ledger()
            .set_state_from(tool, version, state, to, &change.reason)
        {
            Ok(true) => {
                if let Err(e) = self.reload() {
                    tracing::warn!("reloading the registry: {e}");
                }
                self.changed();
            }
            Ok(false) => {}
            Err(e) => tracing::warn!("recording the state change: {e}"),
        }
    }

    fn call_record(
        &self,
        tool: &str,
        version: u32,
        function: &str,
        duration: Duration,
        outcome: CallKind,
        error: Option<String>,
    ) -> CallRecord {
        // The ledger never holds a secret value: error text is redacted on the way in.
        let error = error.map(|e| self.secrets().redact(&e));
        CallRecord {
            tool: tool.to_string(),
            version,
            function: function.to_string(),
            started_at: std::time::SystemTime::now() - duration,
            duration,
            outcome,
            error,
        }
    }

    fn write_calls(&self, calls: &[CallRecord]) {
        if let Err(e) = self.registry.ledger().record_calls(calls) {
            tracing::warn!("recording the call in the ledger failed: {e}");
        }
    }

    /// Take a version whose pin broke off every list (every supervisor sharing the home follows
    /// within a poll) and stop its process; a schema change is queued to be verified again.
    pub(super) async fn break_pin(&self, t: &Version, b: &Break) {
        let reason = self.secrets().redact(&b.reason());
        tracing::warn!(tool = %t.name, version = t.version, "pin broken: {reason}");
        match self
            .registry
            .ledger()
            .break_pin(t.name.as_str(), t.version, &reason)
        {
            Ok(true) => {
                if let Err(e) = self.reload() {
                    tracing::warn!("reloading the registry: {e}");
                }
                self.changed();
            }
            Ok(false) => {}
            Err(e) => tracing::warn!("recording the broken pin: {e}"),
        }
        self.pool.stop(t.name.as_str()).await;
        // An added server's listing is what the user said yes to: a changed one (a "rug
        // pull") stays off the list until the user looks and adds it again.
        if let Break::Schemas { .. } = b
            && let Some(added) = crate::provenance::of(&self.home, t.name.as_str(), &t.code_hash)
        {
            self.audit(
                t.name.as_str(),
                Event::PinBroken,
                &format!(
                    "{} (an added server, {}) now lists other functions or descriptions than it \
                     was added with; it stays off the list until you run the same `autotool add` \
                     again with --upgrade (`autotool tools show {}` shows its source and \
                     arguments), which shows what it lists now and asks",
                    t.name,
                    added.origin(),
                    t.name,
                ),
            );
            return;
        }
        if let Break::Schemas { now, .. } = b
            && self.claim(t, &format!("pin {now}"))
        {
            self.queue_reverify(t);
        }
    }
}

/// A tool's finished calls waiting to be recorded, and how far recording has come.
#[derive(Debug, Default)]
pub(super) struct AfterCalls {
    queue: Vec<(CallRecord, State)>,
    /// Whether a task is recording (it takes the queue until it finds it empty).
    running: bool,
    /// Calls queued so far, and calls recorded and decided on so far.
    pushed: u64,
    done: u64,
    /// Told each time `done` moves.
    notify: Arc<tokio::sync::Notify>,
}
