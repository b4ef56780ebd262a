//! Warm tool processes: one per mounted tool, started on first call, kept warm, stopped when
//! idle, started again after a crash.
//!
//! The process that passed verification is handed over as the first warm instance, so the first
//! call after `create_tool` pays no start-up. A new version replaces the old one's process only
//! once it is mounted; the old process is shut down in the background. So does a process
//! started with other keys than the call should have (an approval revoked or given, a key or an
//! allowlist changed): a process keeps the environment and egress rules it started with.
//!
//! Every process the pool starts is held to its version's pin ([`crate::pin`]): the file is
//! hashed before the start and again once the process answered, and the functions it lists
//! must be the ones verification recorded. A process that fails either is stopped before any
//! call reaches it.

use crate::pin::{Break, FileState};
use crate::tool::process::{ToolProcError, ToolProcess, ToolSpec};
use crate::version::{FunctionSpec, Functions};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
}

#[derive(Debug)]
struct Running {
    version: u32,
    grants: u64,
    process: Arc<ToolProcess>,
    last_used: Instant,
}

/// One slot per tool name; the async mutex makes concurrent first calls wait for one start.
type Slot = Arc<tokio::sync::Mutex<Option<Running>>>;

/// The pool of warm processes.
#[derive(Debug, Default)]
pub struct Pool {
    slots: Mutex<HashMap<String, Slot>>,
}

impl Pool {
    fn slot(&self, tool: &str) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.entry(tool.to_string()).or_default().clone()
    }

    /// Adopt an already running process (the one that passed verification) for `tool`. A
    /// process of an older version is shut down in the background.
    pub async fn adopt(&self, tool: &str, version: u32, grants: u64, process: ToolProcess) {
        let slot = self.slot(tool);
        let mut guard = slot.lock().await;
        let old = guard.replace(Running {
            version,
            grants,
            process: Arc::new(process),
            last_used: Instant::now(),
        });
        drop(guard);
        if let Some(old) = old {
            tokio::spawn(async move { old.process.shutdown().await });
        }
    }

    /// A live process for `tool` at `what.version` holding `what.grants`, starting one when
    /// there is none, it died, or it runs another version or holds other keys.
    pub async fn get(&self, tool: &str, what: &Launchable) -> Result<Arc<ToolProcess>, StartError> {
        let slot = self.slot(tool);
        let mut guard = slot.lock().await;
        if let Some(running) = guard.as_mut()
            && running.version == what.version
            && running.grants == what.grants
            && running.process.is_alive()
        {
            running.last_used = Instant::now();
            return Ok(running.process.clone());
        }
        if let Some(old) = guard.take() {
            tracing::info!(
                tool,
                version = old.version,
                alive = old.process.is_alive(),
                "replacing tool process"
            );
            tokio::spawn(async move { old.process.shutdown().await });
        }
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
        let process = Arc::new(process);
        tracing::info!(tool, version = what.version, started_in = ?process.started_in(), "tool process started");
        *guard = Some(Running {
            version: what.version,
            grants: what.grants,
            process: process.clone(),
            last_used: Instant::now(),
        });
        Ok(process)
    }

    /// Stop `tool`'s process, if any (the tool was removed).
    pub async fn stop(&self, tool: &str) {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.remove(tool)
        };
        if let Some(slot) = slot
            && let Some(running) = slot.lock().await.take()
        {
            running.process.shutdown().await;
        }
    }

    /// Stop processes idle for longer than `idle` (and forget dead ones). Returns how many.
    pub async fn reap(&self, idle: Duration) -> usize {
        let slots: Vec<(String, Slot)> = {
            let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        };
        let mut stopped = 0;
        for (tool, slot) in slots {
            // A slot busy starting a process is not idle.
            let Ok(mut guard) = slot.try_lock() else {
                continue;
            };
            let stale = guard.as_ref().is_some_and(|r| {
                !r.process.is_alive()
                    || (Arc::strong_count(&r.process) == 1 && r.last_used.elapsed() > idle)
            });
            if stale && let Some(running) = guard.take() {
                tracing::info!(
                    tool,
                    version = running.version,
                    "stopping idle tool process"
                );
                running.process.shutdown().await;
                stopped += 1;
            }
        }
        stopped
    }

    /// Stop everything (the server is shutting down).
    pub async fn shutdown(&self) {
        let slots: Vec<Slot> = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.drain().map(|(_, v)| v).collect()
        };
        for slot in slots {
            if let Some(running) = slot.lock().await.take() {
                running.process.shutdown().await;
            }
        }
    }

    /// Tools with a process right now (for tests and `tools list`).
    pub fn warm(&self) -> Vec<String> {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let mut names: Vec<String> = slots
            .iter()
            .filter(|(_, s)| s.try_lock().map(|g| g.is_some()).unwrap_or(true))
            .map(|(k, _)| k.clone())
            .collect();
        names.sort();
        names
    }
}
