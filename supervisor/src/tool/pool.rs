//! Warm tool processes: for each mounted tool, one started on its first call, more while it is
//! called concurrently (up to a bound), each kept warm, stopped when idle, started again after a
//! crash.
//!
//! The process that passed verification is handed over as the first warm instance, so the first
//! call after `create_tool` pays no start-up. A call goes to an idle process, oldest first
//! ([`choice`]). When every process is busy and the tool runs fewer than
//! [`Pool::bound`] (the `tool_processes` setting, at most the number of cores), another is
//! started and the call takes it or the first process to free, whichever comes first; at the
//! bound, the call runs on the least busy process beside its other calls, as every call did when
//! a tool had one process. Extra processes are started and confined exactly like the first (the
//! same [`Launchable`]: spec, pin check, grants) and stopped by the same idle rule, one by one.
//!
//! A new version replaces every process of the old one only once it is mounted; the old ones are
//! shut down in the background. So are processes started with other keys than the call should
//! have (an approval revoked or given, a key or an allowlist changed): a process keeps the
//! environment and egress rules it started with. A process that died is dropped from the pool,
//! and a new one started when a call needs it. A start begun for what has since been replaced
//! is shut down when it completes.
//!
//! Every process the pool starts is held to its version's pin ([`crate::pin`]): the file is
//! hashed before the start and again once the process answered, and the functions it lists
//! must be the ones verification recorded. A process that fails either is stopped before any
//! call reaches it.

mod choice;

use crate::pin::{Break, FileState};
use crate::tool::process::{ToolProcError, ToolProcess, ToolSpec};
use crate::version::{FunctionSpec, Functions};
use choice::{Choice, choose};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// How long a failed start of an extra process holds further extra starts back (calls share
/// the running processes meanwhile), so a tool that cannot get a second process is not
/// started again for every waiting call.
const HOLD_BACK: Duration = Duration::from_secs(10);

/// What to start for a tool version, and the version it belongs to.
#[derive(Debug, Clone)]
pub struct Launchable {
    pub version: u32,
    /// A fingerprint of the keys granted, their values and allowlists ([`crate::library`]).
    pub grants: u64,
    pub spec: ToolSpec,
    /// What a new process must match; `None` starts it unchecked.
    pub pin: Option<PinCheck>,
}

/// What a version was verified with.
#[derive(Debug, Clone)]
pub struct PinCheck {
    /// Its `tool.py`.
    pub file: PathBuf,
    pub code_hash: String,
    pub description: String,
    pub functions: Functions,
    /// The key values known now: both sides are compared redacted, as verification stored
    /// them, so a listing that holds a key value matches its redacted record (and a version
    /// stored before a key was added is not taken for a changed one).
    pub redactor: Option<std::sync::Arc<crate::redact::Redactor>>,
}

impl PinCheck {
    fn file(&self) -> Result<(), Break> {
        match crate::pin::file_state(&self.file, &self.code_hash) {
            FileState::Pinned => Ok(()),
            FileState::Changed(now) => Err(Break::FileChanged { now }),
            FileState::Missing(why) => Err(Break::FileMissing { why }),
        }
    }

    /// Compare what a new process lists with what was verified.
    async fn process(&self, process: &ToolProcess) -> Result<Result<(), Break>, ToolProcError> {
        let shown = |f: FunctionSpec| match &self.redactor {
            Some(r) => f.redacted(r),
            None => f,
        };
        let reported: Vec<FunctionSpec> = process
            .list_tools()
            .await?
            .into_iter()
            .map(FunctionSpec::from)
            .map(shown)
            .collect();
        let pinned: Vec<FunctionSpec> = self.functions.specs().into_iter().map(shown).collect();
        let differences = crate::pin::differences(&pinned, &reported);
        if differences.is_empty() {
            return Ok(Ok(()));
        }
        Ok(Err(Break::Schemas {
            differences,
            now: crate::pin::pin(&self.code_hash, &self.description, &reported),
        }))
    }
}

/// Why no process could be had.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Process(#[from] ToolProcError),
    /// The version no longer matches its pin; nothing was left running.
    #[error("{}", .0.reason())]
    Unpinned(Break),
    /// The task starting it ended without an answer (the server is shutting down).
    #[error("the tool's start was interrupted: {0}")]
    Interrupted(String),
}

/// One process of a tool's pool.
#[derive(Debug)]
struct Member {
    id: u64,
    process: Arc<ToolProcess>,
    /// Calls on it now.
    in_flight: usize,
    last_used: Instant,
}

/// A tool's processes, and what they run.
#[derive(Debug, Default)]
struct Processes {
    /// The version and grants fingerprint every member runs.
    running: Option<(u32, u64)>,
    members: Vec<Member>,
    /// Starts under way for this generation.
    starting: usize,
    /// Bumped whenever the members are replaced or the tool stopped: a start begun before
    /// belongs to nothing any more.
    generation: u64,
    /// The tool was stopped (removed, or the server is shutting down).
    closed: bool,
    /// When a start of an extra process last failed ([`HOLD_BACK`]).
    extra_failed: Option<Instant>,
    next_id: u64,
}

impl Processes {
    /// Make the pool run `version` with `grants`: when it runs something else, every member is
    /// taken out (to be shut down) and starts under way are disowned. Dead members are taken
    /// out too.
    fn align(&mut self, version: u32, grants: u64) -> Vec<Member> {
        let mut out = Vec::new();
        if self.running != Some((version, grants)) {
            if self.running.is_some() {
                self.generation += 1;
                self.starting = 0;
                self.extra_failed = None;
            }
            self.running = Some((version, grants));
            out.append(&mut self.members);
        }
        let (live, dead): (Vec<Member>, Vec<Member>) = std::mem::take(&mut self.members)
            .into_iter()
            .partition(|m| m.process.is_alive());
        self.members = live;
        out.extend(dead);
        out
    }

    /// Take every member out and disown the starts under way.
    fn clear(&mut self) -> Vec<Member> {
        self.generation += 1;
        self.starting = 0;
        self.running = None;
        self.extra_failed = None;
        std::mem::take(&mut self.members)
    }

    /// Add a started process, with one call on it when `taken`.
    fn push(&mut self, process: Arc<ToolProcess>, taken: bool) -> u64 {
        self.next_id += 1;
        self.members.push(Member {
            id: self.next_id,
            process,
            in_flight: usize::from(taken),
            last_used: Instant::now(),
        });
        self.next_id
    }
}

/// The state of one tool name; `freed` wakes calls waiting for a process.
#[derive(Debug, Default)]
struct ToolSlot {
    processes: Mutex<Processes>,
    freed: Notify,
}

impl ToolSlot {
    fn lock(&self) -> MutexGuard<'_, Processes> {
        self.processes.lock().unwrap_or_else(|p| p.into_inner())
    }
}

type Slot = Arc<ToolSlot>;

/// A process taken for one call; dropping it gives the process back.
#[derive(Debug)]
pub struct Lease {
    slot: Slot,
    id: u64,
    process: Arc<ToolProcess>,
}

impl Lease {
    fn take(slot: &Slot, member: &mut Member) -> Lease {
        member.in_flight += 1;
        member.last_used = Instant::now();
        Lease {
            slot: slot.clone(),
            id: member.id,
            process: member.process.clone(),
        }
    }
}

impl std::ops::Deref for Lease {
    type Target = ToolProcess;
    fn deref(&self) -> &ToolProcess {
        &self.process
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        {
            let mut p = self.slot.lock();
            if let Some(m) = p.members.iter_mut().find(|m| m.id == self.id) {
                m.in_flight = m.in_flight.saturating_sub(1);
                m.last_used = Instant::now();
            }
        }
        self.slot.freed.notify_waiters();
    }
}

/// What a call does after deciding, outside the lock.
enum Step {
    Go(Lease),
    First(tokio::task::JoinHandle<Result<Option<Lease>, StartError>>),
    Extra(tokio::task::JoinHandle<Result<Option<Lease>, StartError>>),
    Wait,
}

/// The pool of warm processes.
#[derive(Debug)]
pub struct Pool {
    slots: Mutex<HashMap<String, Slot>>,
    bound: usize,
}

impl Default for Pool {
    fn default() -> Self {
        Pool::new(1)
    }
}

impl Pool {
    /// A pool running at most `processes` processes per tool, and no more than the cores.
    pub fn new(processes: usize) -> Pool {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Pool {
            slots: Mutex::default(),
            bound: processes.min(cores).max(1),
        }
    }

    /// The most processes one tool runs at once.
    pub fn bound(&self) -> usize {
        self.bound
    }

    fn slot(&self, tool: &str) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.entry(tool.to_string()).or_default().clone()
    }

    fn all(&self, remove: bool) -> Vec<(String, Slot)> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if remove {
            slots.drain().collect()
        } else {
            slots.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        }
    }

    /// Adopt an already running process (the one that passed verification) for `tool`. The
    /// processes of an older version are shut down in the background.
    pub async fn adopt(&self, tool: &str, version: u32, grants: u64, process: ToolProcess) {
        let slot = self.slot(tool);
        let old = {
            let mut p = slot.lock();
            let old = p.clear();
            p.running = Some((version, grants));
            p.push(Arc::new(process), false);
            old
        };
        slot.freed.notify_waiters();
        retire(tool, old, "replacing tool process");
    }

    /// A live process of `tool` at `what.version` holding `what.grants`, for one call: an idle
    /// one, a new one, or a busy one at the bound (see the module's text). Processes of
    /// another version or with other keys are replaced.
    pub async fn get(&self, tool: &str, what: &Launchable) -> Result<Lease, StartError> {
        loop {
            let slot = self.slot(tool);
            let freed = slot.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let (step, old) = {
                let mut p = slot.lock();
                if p.closed {
                    // Stopped while this call looked: the map holds a fresh slot now.
                    continue;
                }
                let old = p.align(what.version, what.grants);
                let loads: Vec<usize> = p.members.iter().map(|m| m.in_flight).collect();
                let held_back = p.extra_failed.is_some_and(|at| at.elapsed() < HOLD_BACK);
                let step = match choose(&loads, p.starting, self.bound, held_back) {
                    Choice::Use(i) => Step::Go(Lease::take(&slot, &mut p.members[i])),
                    Choice::Wait => Step::Wait,
                    c @ (Choice::StartFirst | Choice::StartExtra) => {
                        p.starting += 1;
                        let extra = c == Choice::StartExtra;
                        let task =
                            start(slot.clone(), p.generation, tool.into(), what.clone(), extra);
                        let handle = tokio::spawn(task);
                        if extra {
                            Step::Extra(handle)
                        } else {
                            Step::First(handle)
                        }
                    }
                };
                (step, old)
            };
            retire(tool, old, "replacing tool process");
            match step {
                Step::Go(lease) => return Ok(lease),
                Step::Wait => freed.await,
                Step::First(handle) => {
                    if let Some(lease) = joined(handle.await)? {
                        return Ok(lease);
                    }
                }
                Step::Extra(handle) => {
                    tokio::select! {
                        started = handle => {
                            // A failed extra start is logged; the call goes on with the others.
                            if let Ok(Some(lease)) = joined(started) {
                                return Ok(lease);
                            }
                        }
                        () = &mut freed => {}
                    }
                }
            }
        }
    }

    /// Stop `tool`'s processes, if any (the tool was removed).
    pub async fn stop(&self, tool: &str) {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.remove(tool)
        };
        if let Some(slot) = slot {
            close(&slot).await;
        }
    }

    /// Stop processes idle for longer than `idle` (and forget dead ones), each on its own.
    /// Returns how many.
    pub async fn reap(&self, idle: Duration) -> usize {
        let mut stopped = 0;
        for (tool, slot) in self.all(false) {
            let stale: Vec<Member> = {
                let mut p = slot.lock();
                let (stale, keep): (Vec<Member>, Vec<Member>) =
                    std::mem::take(&mut p.members).into_iter().partition(|m| {
                        !m.process.is_alive() || (m.in_flight == 0 && m.last_used.elapsed() > idle)
                    });
                p.members = keep;
                stale
            };
            for m in stale {
                tracing::info!(tool, pid = ?m.process.pid(), "stopping idle tool process");
                m.process.shutdown().await;
                stopped += 1;
            }
        }
        stopped
    }

    /// Stop everything (the server is shutting down), every tool at once: a tool takes up to
    /// its grace to exit, and a hundred of them one after the other would hold serve's exit
    /// for minutes.
    pub async fn shutdown(&self) {
        let mut stopping = tokio::task::JoinSet::new();
        for (_, slot) in self.all(true) {
            stopping.spawn(async move { close(&slot).await });
        }
        while stopping.join_next().await.is_some() {}
    }

    /// Tools with a process right now (for tests and `tools list`).
    pub fn warm(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .all(false)
            .into_iter()
            .filter(|(_, s)| !s.lock().members.is_empty())
            .map(|(k, _)| k)
            .collect();
        names.sort();
        names
    }

    /// How many processes `tool` runs now.
    pub fn processes(&self, tool: &str) -> usize {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.get(tool).map_or(0, |s| s.lock().members.len())
    }
}

/// Close a slot: no process is started for it any more, and every one it has is stopped.
async fn close(slot: &Slot) {
    let members = {
        let mut p = slot.lock();
        p.closed = true;
        p.clear()
    };
    slot.freed.notify_waiters();
    let mut stopping = tokio::task::JoinSet::new();
    for m in members {
        stopping.spawn(async move { m.process.shutdown().await });
    }
    while stopping.join_next().await.is_some() {}
}

/// Shut down, in the background, processes taken out of a pool.
fn retire(tool: &str, members: Vec<Member>, why: &'static str) {
    for m in members {
        tracing::info!(tool, pid = ?m.process.pid(), alive = m.process.is_alive(), "{why}");
        tokio::spawn(async move { m.process.shutdown().await });
    }
}

fn joined(
    r: Result<Result<Option<Lease>, StartError>, tokio::task::JoinError>,
) -> Result<Option<Lease>, StartError> {
    r.map_err(|e| StartError::Interrupted(e.to_string()))?
}

/// Start a process for `slot` as of `generation` and add it, taken for the call that waits
/// on this task (given back when that call went elsewhere). `None` when the pool moved on
/// meanwhile (the process is shut down).
async fn start(
    slot: Slot,
    generation: u64,
    tool: String,
    what: Launchable,
    extra: bool,
) -> Result<Option<Lease>, StartError> {
    let started = start_checked(&tool, &what).await;
    let outcome = {
        let mut p = slot.lock();
        let current = p.generation == generation && !p.closed;
        if current {
            p.starting = p.starting.saturating_sub(1);
        }
        match started {
            Ok(process) if current => {
                let process = Arc::new(process);
                let id = p.push(process.clone(), true);
                tracing::info!(
                    tool,
                    version = what.version,
                    processes = p.members.len(),
                    started_in = ?process.started_in(),
                    "tool process started"
                );
                Ok(Ok(Some(Lease {
                    slot: slot.clone(),
                    id,
                    process,
                })))
            }
            Ok(process) => Err(process),
            Err(e) => {
                if extra && current {
                    p.extra_failed = Some(Instant::now());
                    tracing::warn!(tool, "starting another process for a busy tool: {e}");
                }
                Ok(Err(e))
            }
        }
    };
    slot.freed.notify_waiters();
    match outcome {
        Ok(result) => result,
        Err(process) => {
            tracing::info!(
                tool,
                version = what.version,
                "started for what was since replaced; stopping it"
            );
            process.shutdown().await;
            Ok(None)
        }
    }
}

/// Start a process of `what`, held to its pin.
async fn start_checked(tool: &str, what: &Launchable) -> Result<ToolProcess, StartError> {
    if let Some(pin) = &what.pin {
        pin.file().map_err(StartError::Unpinned)?;
    }
    let process = ToolProcess::start(what.spec.clone()).await?;
    if let Some(pin) = &what.pin {
        let checked = match pin.process(&process).await {
            Ok(schemas) => schemas.and_then(|()| pin.file()),
            Err(e) => {
                process.shutdown().await;
                return Err(e.into());
            }
        };
        if let Err(b) = checked {
            tracing::warn!(tool, version = what.version, "{}", b.reason());
            process.shutdown().await;
            return Err(StartError::Unpinned(b));
        }
    }
    Ok(process)
}
