//! The poll round ([`Library::poll`]): changes made by other processes sharing the home (a new
//! version, a removal, a state change, a key added), autotool's own model coming or going, every
//! mounted version held to its pin ([`crate::pin`]), versions queued to be verified again, and
//! tools placed by hand.

use super::Library;
use super::create::CreateRequest;
use crate::ledger::{Event, State};
use crate::pin::{Break, FileStamp, FileState};
use crate::verify::Thoroughness;
use crate::version::Version;
use autotool_policy::names::ToolName;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// A mounted version's `tool.py` as the watcher last saw it.
#[derive(Debug, Clone)]
struct Seen {
    version: u32,
    stamp: Option<FileStamp>,
    state: FileState,
}

/// What the poll round remembers between rounds.
#[derive(Debug, Default)]
pub(super) struct Watched {
    /// Each mounted version's file as last seen, by tool.
    files: Mutex<HashMap<ToolName, Seen>>,
    /// Versions whose process broke their pin, to verify again at the next round.
    reverify: Mutex<Vec<(ToolName, u32)>>,
    /// Hand-placed files that failed verification, by path, with the size and mtime seen.
    rejected: Mutex<HashMap<PathBuf, (u64, Option<std::time::SystemTime>)>>,
    /// Of those, the ones waiting for the user's yes to their package set: (tool, set digest),
    /// tried again once it is given.
    awaiting: Mutex<HashMap<PathBuf, (String, String)>>,
    /// Changed code of a mounted version waiting for the user's yes to its package set:
    /// (tool, version, code sha256, set digest), verified again once it is given.
    awaiting_again: Mutex<Vec<(ToolName, u32, String, String)>>,
    /// Changed code of a mounted version of a tool the user pinned: (version, code sha256) by
    /// tool, verified as a new version once the tool is unpinned.
    held: Mutex<HashMap<ToolName, (u32, String)>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Library {
    /// One round of the watcher: pick up changes made by other processes and tools placed by
    /// hand. Returns whether the mounted list changed.
    pub async fn poll(&self) -> bool {
        let before = self.snapshot();
        let names_changed = self.refresh_keys();
        let model_changed = self.refresh_model();
        let changed = match self.reload_with(names_changed || model_changed) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("reading the registry: {e}");
                false
            }
        };
        if changed {
            let after = self.snapshot();
            for name in before.tools.keys() {
                if !after.tools.contains_key(name) {
                    self.pool.stop(name.as_str()).await;
                }
            }
            self.changed();
        }
        self.check_pins().await;
        self.verify_unpinned().await;
        self.verify_queued().await;
        self.verify_approved_again().await;
        self.verify_hand_placed().await;
        changed
    }

    /// Hold every mounted version to its file: a `stat` each round, a hash when the stat moved
    /// (or is too recent to trust). A changed or missing file takes the version off the list at
    /// once and stops its process; changed code is verified again as a new version (by one
    /// supervisor of those sharing the home); a file put back as it was puts its version back
    /// on probation.
    async fn check_pins(&self) {
        let snapshot = self.snapshot();
        let mut moved = Vec::new();
        {
            let mut files = lock(&self.watch.files);
            files.retain(|name, _| snapshot.tools.contains_key(name));
            for t in snapshot.tools.values() {
                let path = self.registry.file_of(t);
                let stamp = FileStamp::of(&path);
                let seen = files.get(&t.name).filter(|w| w.version == t.version);
                if let Some(w) = seen
                    && w.stamp == stamp
                    && stamp.is_some_and(|s| s.settled())
                {
                    continue;
                }
                let state = match stamp {
                    Some(_) => crate::pin::file_state(&path, &t.code_hash),
                    None => FileState::Missing("it is gone".into()),
                };
                let before = seen.map(|w| w.state.clone());
                files.insert(
                    t.name.clone(),
                    Seen {
                        version: t.version,
                        stamp,
                        state: state.clone(),
                    },
                );
                if before.as_ref() != Some(&state) {
                    moved.push((t.clone(), before, state));
                }
            }
        }
        for (t, before, state) in moved {
            lock(&self.watch.held).remove(&t.name);
            match state {
                FileState::Pinned => {
                    if t.state != State::Draft {
                        continue;
                    }
                    if before.is_some() {
                        self.restore_pin(&t).await;
                    } else {
                        // Off the list since before this process looked (a schema change, or a
                        // verification nobody finished): verify it again.
                        self.verify_again_claimed(&t, None).await;
                    }
                }
                FileState::Changed(now) => {
                    let b = Break::FileChanged { now: now.clone() };
                    if t.state != State::Draft {
                        self.break_pin(&t, &b).await;
                    }
                    self.pool.stop(t.name.as_str()).await;
                    if self.held_by_pin(&t, &now) {
                        lock(&self.watch.held).insert(t.name.clone(), (t.version, now));
                    } else {
                        self.verify_again_claimed(&t, Some(now)).await;
                    }
                }
                FileState::Missing(why) => {
                    if t.state != State::Draft {
                        self.break_pin(&t, &Break::FileMissing { why }).await;
                    }
                    self.pool.stop(t.name.as_str()).await;
                }
            }
        }
    }

    /// Whether the user's pin of `t`'s tool refuses the code now in its file (sha256 `now`) as
    /// a new version; the refusal is recorded (once per code and pin).
    fn held_by_pin(&self, t: &Version, now: &str) -> bool {
        let held = self
            .registry
            .ledger()
            .held(t.name.as_str(), now, &t.description);
        match held {
            Ok(Some(held)) => {
                self.pin_refused(held, now);
                true
            }
            Ok(None) => false,
            Err(e) => {
                // Not known to be free: left waiting, and looked at again next round.
                tracing::warn!(tool = %t.name, "reading the tool's pin: {e}");
                true
            }
        }
    }

    /// Changed files of pinned tools whose pin is gone since: verified now, as any changed
    /// file is. A version no longer mounted (rolled back, removed) waits no more.
    async fn verify_unpinned(&self) {
        let waiting: Vec<(ToolName, u32, String)> = lock(&self.watch.held)
            .iter()
            .map(|(name, (version, hash))| (name.clone(), *version, hash.clone()))
            .collect();
        if waiting.is_empty() {
            return;
        }
        let snapshot = self.snapshot();
        for (name, version, hash) in waiting {
            let Some(t) = snapshot.tools.get(&name).filter(|t| t.version == version) else {
                lock(&self.watch.held).remove(&name);
                continue;
            };
            if let Ok(None) = self.registry.ledger().pin_of(name.as_str()) {
                lock(&self.watch.held).remove(&name);
                self.verify_again_claimed(t, Some(hash)).await;
            }
        }
    }

    /// A version whose file is back to its pin: on probation again.
    async fn restore_pin(&self, t: &Version) {
        match self.registry.ledger().set_state_from(
            t.name.as_str(),
            t.version,
            State::Draft,
            State::Probation,
            "its tool.py is back to the code it was verified with",
        ) {
            Ok(true) => {
                tracing::info!(tool = %t.name, version = t.version, "pin restored");
                if let Err(e) = self.reload() {
                    tracing::warn!("reloading the registry: {e}");
                }
                self.changed();
            }
            Ok(false) => {}
            Err(e) => tracing::warn!("recording the state change: {e}"),
        }
    }

    /// Whether this process takes on verifying `t` again for this change (`what`): one of the
    /// supervisors sharing the home does, once.
    pub(super) fn claim(&self, t: &Version, what: &str) -> bool {
        self.registry
            .ledger()
            .claim_once(
                t.name.as_str(),
                Event::VerifyingAgain,
                &format!("version {}: {what}", t.version),
            )
            .unwrap_or_else(|e| {
                tracing::warn!("claiming a verification: {e}");
                false
            })
    }

    /// Queue `t` to be verified again at the next round.
    pub(super) fn queue_reverify(&self, t: &Version) {
        lock(&self.watch.reverify).push((t.name.clone(), t.version));
    }

    /// Verify `t`'s file again (its code now, whose sha256 is `now`; `None`: the pinned code)
    /// when this process claims it.
    async fn verify_again_claimed(&self, t: &Arc<Version>, now: Option<String>) {
        let hash = now.unwrap_or_else(|| t.code_hash.clone());
        if self.claim(t, &format!("code {hash}")) {
            self.verify_again(t, &hash).await;
        }
    }

    /// Versions whose process reported other schemas: verify their code again.
    async fn verify_queued(&self) {
        let queued = std::mem::take(&mut *lock(&self.watch.reverify));
        for (name, version) in queued {
            let snapshot = self.snapshot();
            let Some(t) = snapshot.tools.get(&name) else {
                continue;
            };
            if t.version == version && t.state == State::Draft {
                self.verify_again(t, &t.code_hash).await;
            }
        }
    }

    /// Verify the code in `t`'s file (if its sha256 is still `hash`) as a new version of the
    /// tool, like a tool placed by hand. A failure is an audit event and a log line; the
    /// version stays off the list.
    async fn verify_again(&self, t: &Arc<Version>, hash: &str) {
        let path = self.registry.file_of(t);
        let Ok(code) = std::fs::read_to_string(&path) else {
            return;
        };
        if crate::version::code_hash(code.as_bytes()) != hash {
            // Changed again meanwhile: the next round sees it.
            return;
        }
        tracing::info!(tool = %t.name, version = t.version, "verifying a changed version again");
        // New code entering (a file changed on disk) passes the full gate, probes included,
        // like a tool placed by hand. The pinned code itself (its process reported other
        // schemas) passed the gate when it entered, at the level it was created with, which is
        // not recorded: its schemas are read again without probing it a second time.
        let thoroughness = if hash == t.code_hash {
            Thoroughness::Quick
        } else {
            Thoroughness::default()
        };
        let request = CreateRequest {
            name: t.name.clone(),
            code,
            description: t.description.clone(),
            smoke_test: None,
            thoroughness,
        };
        let created = match self.prepare(request) {
            Ok(prepared) => self.create(prepared).await,
            Err(e) => Err(e),
        };
        if let Err(why) = created {
            tracing::warn!(
                tool = %t.name,
                "the changed version failed verification and stays off the list: {}",
                self.secrets().redact(&why.to_string())
            );
            if let super::CreateError::PackagesConsent { digest, .. } = why {
                let mut waiting = lock(&self.watch.awaiting_again);
                // Only the newest change of a tool waits.
                waiting.retain(|(name, ..)| *name != t.name);
                waiting.push((t.name.clone(), t.version, hash.to_string(), digest));
            }
        }
    }

    /// Changed code whose package set the user has approved since it waited: verify it again,
    /// if its version is still the one mounted.
    async fn verify_approved_again(&self) {
        let ready: Vec<(ToolName, u32, String)> = {
            let mut waiting = lock(&self.watch.awaiting_again);
            let ledger = self.registry.ledger();
            let (ready, still): (Vec<_>, Vec<_>) = waiting
                .drain(..)
                .partition(|(t, _, _, d)| ledger.packages_approved(t.as_str(), d).unwrap_or(false));
            *waiting = still;
            ready.into_iter().map(|(t, v, h, _)| (t, v, h)).collect()
        };
        for (name, version, hash) in ready {
            let snapshot = self.snapshot();
            if let Some(t) = snapshot.tools.get(&name)
                && t.version == version
            {
                self.verify_again(t, &hash).await;
            }
        }
    }

    /// Verify each `tools/<name>/tool.py` placed by hand that is not a version yet (once per
    /// size and mtime when it fails).
    async fn verify_hand_placed(&self) {
        let placed = match self.registry.hand_placed() {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("listing hand-placed tools: {e}");
                return;
            }
        };
        for (name, path) in placed {
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            let seen = (meta.len(), meta.modified().ok());
            if lock(&self.watch.rejected).get(&path) == Some(&seen) && !self.now_approved(&path) {
                continue;
            }
            let code = match std::fs::read_to_string(&path) {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(tool = %name, path = %path.display(), "a tool placed by hand cannot be read: {e}");
                    lock(&self.watch.rejected).insert(path, seen);
                    continue;
                }
            };
            tracing::info!(tool = %name, path = %path.display(), "verifying a tool placed by hand");
            let request = CreateRequest {
                name: name.clone(),
                code,
                description: String::new(),
                smoke_test: None,
                thoroughness: Thoroughness::default(),
            };
            let created = match self.prepare(request) {
                Ok(prepared) => self.create(prepared).await,
                Err(e) => Err(e),
            };
            if let Err(super::CreateError::PinHeld(held)) = &created {
                // Not rejected: looked at again each round, and verified once it is unpinned.
                tracing::debug!(tool = %name, "a tool placed by hand waits: {held}");
                continue;
            }
            if let Err(why) = created {
                tracing::warn!(
                    tool = %name,
                    "hand-placed tool failed verification: {}",
                    self.secrets().redact(&why.to_string())
                );
                if let super::CreateError::PackagesConsent { tool, digest, .. } = &why {
                    lock(&self.watch.awaiting).insert(path.clone(), (tool.clone(), digest.clone()));
                }
                lock(&self.watch.rejected).insert(path, seen);
            }
        }
    }

    /// Whether the hand-placed file at `path` waited for a package set the user has approved
    /// since (`autotool tools approve TOOL --packages`): then it is verified again.
    fn now_approved(&self, path: &std::path::Path) -> bool {
        let Some((tool, digest)) = lock(&self.watch.awaiting).get(path).cloned() else {
            return false;
        };
        let approved = self
            .registry
            .ledger()
            .packages_approved(&tool, &digest)
            .unwrap_or(false);
        if approved {
            lock(&self.watch.awaiting).remove(path);
        }
        approved
    }
}
