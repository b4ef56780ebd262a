//! Why a process stops serving: the first cause recorded and shared by the handle, the monitor,
//! the stdout guard and the stderr pump; the monitor that reaps the process and publishes its
//! exit; the slot its egress proxy lives in until then.

use super::stdio::{self, StderrLog};
use super::{Misuse, STDERR_DRAIN, SandboxMode, child, link};
use crate::egress::EgressProxy;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

/// The first reason the process stopped serving.
#[derive(Debug, Clone)]
pub(super) enum Cause {
    Exited(Option<ExitStatus>),
    TimedOut {
        request: u64,
        operation: String,
        after: Duration,
    },
    /// Something other than MCP on stdout, or an answer MCP does not allow.
    Violation(String),
    /// The tool link stopped it.
    Misused(Misuse),
    /// The `initialize` handshake failed while the process kept running.
    Refused(String),
    ShutDown,
}

/// The process was reaped (and its stderr drained, within [`STDERR_DRAIN`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Exit(pub(super) Option<ExitStatus>);

/// State shared by the handle, the monitor, the stdout guard and the stderr pump.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) sandbox: SandboxMode,
    pub(super) stderr: Arc<StderrLog>,
    pub(super) cause: watch::Sender<Option<Cause>>,
    pub(super) exit: watch::Sender<Option<Exit>>,
    /// Ask the monitor to SIGKILL the process.
    pub(super) kill: Notify,
    pub(super) stdin: link::StdinLink,
    /// The process's egress proxy; dropped (stopped) once the process has exited.
    pub(super) egress: std::sync::Mutex<EgressSlot>,
}

/// Where a process's egress proxy lives.
#[derive(Debug)]
pub(super) enum EgressSlot {
    /// None yet (or none asked for).
    Empty,
    Running(EgressProxy),
    /// The process has exited: a proxy arriving now is stopped at once.
    Closed,
}

impl Shared {
    /// Record why the process stops serving (the first reason wins) and, unless it is already
    /// gone or going, kill it.
    pub(super) fn fail(&self, cause: Cause) {
        let kill = matches!(
            cause,
            Cause::TimedOut { .. } | Cause::Violation(_) | Cause::Misused(_) | Cause::Refused(_)
        );
        self.cause.send_if_modified(|c| {
            if c.is_none() {
                *c = Some(cause);
                true
            } else {
                false
            }
        });
        if kill {
            self.kill.notify_one();
        }
    }

    pub(super) fn cause(&self) -> Option<Cause> {
        self.cause.borrow().clone()
    }

    /// The reason, once there is one.
    pub(super) async fn next_cause(&self) -> Cause {
        let mut rx = self.cause.subscribe();
        let cause = rx
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|c| c.clone());
        // The sender lives in `self`, so the wait cannot end without a value.
        cause.unwrap_or(Cause::ShutDown)
    }

    pub(super) async fn cause_within(&self, bound: Duration) -> Option<Cause> {
        tokio::time::timeout(bound, self.next_cause()).await.ok()
    }

    /// The exit, waiting for it at most `bound`.
    pub(super) async fn exited(&self, bound: Duration) -> Option<Exit> {
        let mut rx = self.exit.subscribe();
        let waited = tokio::time::timeout(bound, rx.wait_for(Option::is_some)).await;
        waited.ok()?.ok().and_then(|e| *e)
    }

    pub(super) fn tail(&self) -> String {
        self.stderr.tail(stdio::STDERR_IN_ERRORS)
    }

    /// Keep `proxy` running until the process exits (stop it at once if it already has).
    pub(super) fn hold_egress(&self, proxy: EgressProxy) {
        let mut slot = self
            .egress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if matches!(*slot, EgressSlot::Empty) {
            *slot = EgressSlot::Running(proxy);
        }
    }

    /// The process has exited: stop its proxy, and any that arrives later.
    pub(super) fn stop_egress(&self) {
        let old = std::mem::replace(
            &mut *self
                .egress
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            EgressSlot::Closed,
        );
        drop(old);
    }
}

/// Owns the OS process: waits for it, kills it on request, and publishes its exit.
pub(super) async fn monitor(
    mut child: child::Child,
    shared: Arc<Shared>,
    stderr: tokio::task::JoinHandle<()>,
) {
    let status = loop {
        let waited = tokio::select! {
            r = child.wait() => Some(r),
            () = shared.kill.notified() => None,
        };
        match waited {
            Some(Ok(status)) => break Some(status),
            Some(Err(e)) => {
                tracing::warn!(%e, "waiting for a tool process failed; killing it");
                child.kill();
                break None;
            }
            None => child.kill(),
        }
    };
    child.kill_leftovers();
    shared.stop_egress();
    // Its last words (a traceback) are usually still in the pipe.
    let _ = tokio::time::timeout(STDERR_DRAIN, stderr).await;
    shared.exit.send_replace(Some(Exit(status)));
    shared.fail(Cause::Exited(status));
}
