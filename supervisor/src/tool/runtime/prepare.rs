//! The runtime made ready in the background: `serve` answers hosts at once while the runtime
//! is prepared on a thread of its own; a call that needs it waits a bounded time, hearing each
//! step, and is otherwise told what is happening and when to call again.
//!
//! - [`Preparer::start`] begins (once; again after a failure) and returns at once.
//! - [`Preparer::wait`] waits for the outcome, at most a given time, reporting every change of
//!   [`State`]; [`Preparer::hold`] is that wait with the answer a host gets when the runtime
//!   is not ready in time.
//! - [`Preparer::shutdown`] stops waiting; a build in this process is stopped (its temporary
//!   directory is removed), a detached one ([`super::detach`]) goes on.
//!
//! A failed preparation is tried again by the next call that needs the runtime, so a network
//! that comes back, or a Python installed meanwhile, needs no restart.

use super::{Cancel, Event, Progress, Python};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a host's call is held for the runtime before it is answered with what is
/// happening: below the 5 s request timeout common clients use (the OpenAI Agents SDK).
pub const HOLD: Duration = Duration::from_millis(3500);
/// A call whose runtime became ready later than this into its hold is answered "ready now,
/// call again" rather than run: what follows (a verification, a tool's start) must fit in what
/// is left of the client's timeout too.
pub const RUN_BY: Duration = Duration::from_millis(2000);

/// The `_meta` key of a refusal that says how many milliseconds to wait before calling again
/// (a number; `0`: call again now). Absent when calling again soon would not help.
pub const META_RETRY_AFTER_MS: &str = "io.autotool/retryAfterMs";
/// The `_meta` key of a refusal that says why the call did not run, one of the `REASON_*`
/// strings.
pub const META_REASON: &str = "io.autotool/reason";
/// The runtime is being built: call again after `retryAfterMs`.
pub const REASON_BUILDING: &str = "runtime-building";
/// The runtime became ready late in the hold: call again now (`retryAfterMs` 0).
pub const REASON_READY: &str = "runtime-ready";
/// The runtime could not be built; the next call tries again (no `retryAfterMs`: a program
/// should not loop on it).
pub const REASON_FAILED: &str = "runtime-failed";

/// A call that did not run because the runtime was not ready: the text for the model, and what
/// a program needs to call again on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotReady {
    pub message: String,
    /// One of the `REASON_*` strings.
    pub reason: &'static str,
    /// When to call again, if calling again soon is the answer.
    pub retry_after: Option<Duration>,
}

/// What preparing is: by default [`super::ensure_runtime_until`] on the preparer's directory.
pub type Work = Box<dyn Fn(&mut dyn Progress, &Cancel) -> Result<Python, String> + Send + Sync>;

/// Where preparation stands.
#[derive(Debug, Clone)]
pub enum State {
    /// Not started.
    Idle,
    /// The runtime is being built (or opened); the latest step and line of output.
    Preparing {
        since: Instant,
        step: Option<(u8, u8, String)>,
        detail: Option<String>,
    },
    Ready(Python),
    /// The build failed; tried again on the next [`Preparer::start`].
    Failed(String),
}

impl State {
    /// One line on where it stands, for logs and for a host's progress notifications.
    pub fn describe(&self) -> String {
        match self {
            State::Idle => "the tool runtime is not prepared yet".into(),
            State::Preparing { step, .. } => match step {
                Some((n, of, what)) => {
                    format!("preparing the tool runtime: step {n} of {of}, {what}")
                }
                None => "preparing the tool runtime".into(),
            },
            State::Ready(_) => "the tool runtime is ready".into(),
            State::Failed(why) => format!("the tool runtime could not be prepared: {why}"),
        }
    }

    /// How far along, as (done, total) steps, when known.
    pub fn fraction(&self) -> Option<(u8, u8)> {
        match self {
            State::Preparing {
                step: Some((n, of, _)),
                ..
            } => Some((n.saturating_sub(1), *of)),
            State::Ready(_) => Some((1, 1)),
            _ => None,
        }
    }
}

/// The runtime of one `serve`, prepared once and shared by every call.
pub struct Preparer {
    dir: PathBuf,
    work: Work,
    state: tokio::sync::watch::Sender<State>,
    /// A thread is working (checking or building).
    running: Mutex<bool>,
    cancel: Mutex<Cancel>,
}

impl std::fmt::Debug for Preparer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Preparer")
            .field("dir", &self.dir)
            .field("state", &*self.state.borrow())
            .finish_non_exhaustive()
    }
}

/// Passes a build's events into the shared [`State`] and the log.
struct ToState<'a> {
    state: &'a tokio::sync::watch::Sender<State>,
    since: Instant,
}

impl Progress for ToState<'_> {
    fn event(&mut self, event: Event) {
        match &event {
            Event::Detail(line) => tracing::debug!("runtime: {line}"),
            other => tracing::info!("{}", super::plain_line(other)),
        }
        let since = self.since;
        self.state.send_modify(|s| {
            let (mut step, mut detail) = match s {
                State::Preparing { step, detail, .. } => (step.take(), detail.take()),
                _ => (None, None),
            };
            match event {
                Event::Step { n, of, what } => {
                    step = Some((n, of, what));
                    detail = None;
                }
                Event::Detail(line) => detail = Some(line),
                Event::Waiting { .. } => {
                    detail = Some("another autotool process is building it".into())
                }
                Event::Started { .. } | Event::Ready { .. } => {}
            }
            *s = State::Preparing {
                since,
                step,
                detail,
            };
        });
    }
}

impl Preparer {
    /// The runtime at `dir` (or `$AUTOTOOL_RUNTIME`), not started; built by a detached
    /// `autotool runtime install` writing to `log` (see [`super::detach`]).
    pub fn new(dir: PathBuf, log: PathBuf) -> Arc<Preparer> {
        let at = dir.clone();
        Preparer::with_work(
            dir,
            Box::new(move |progress, cancel| super::detach::ensure(&at, &log, progress, cancel)),
        )
    }

    /// A preparer doing `work` instead of building at `dir` (tests).
    pub fn with_work(dir: PathBuf, work: Work) -> Arc<Preparer> {
        let (state, _) = tokio::sync::watch::channel(State::Idle);
        Arc::new(Preparer {
            dir,
            work,
            state,
            running: Mutex::new(false),
            cancel: Mutex::new(Cancel::default()),
        })
    }

    /// Where it stands now.
    pub fn state(&self) -> State {
        self.state.borrow().clone()
    }

    /// Begin preparing on a thread of its own, unless it is ready or under way; returns at once.
    pub fn start(self: &Arc<Self>) {
        {
            let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
            if *running || matches!(*self.state.borrow(), State::Ready(_)) {
                return;
            }
            *running = true;
        }
        let cancel = Cancel::default();
        *self.cancel.lock().unwrap_or_else(|p| p.into_inner()) = cancel.clone();
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("autotool-runtime".into())
            .spawn(move || {
                let outcome = me.prepare(&cancel);
                // The outcome and the end of the run together, so a waiter that sees a failure
                // knows whether it is this run's.
                let mut running = me.running.lock().unwrap_or_else(|p| p.into_inner());
                me.state.send_replace(outcome);
                *running = false;
            });
        if let Err(e) = spawned {
            self.state.send_replace(State::Failed(format!(
                "cannot start a thread to prepare it: {e}"
            )));
            *self.running.lock().unwrap_or_else(|p| p.into_inner()) = false;
        }
    }

    fn prepare(&self, cancel: &Cancel) -> State {
        let since = Instant::now();
        self.state.send_replace(State::Preparing {
            since,
            step: None,
            detail: None,
        });
        let mut progress = ToState {
            state: &self.state,
            since,
        };
        match (self.work)(&mut progress, cancel) {
            Ok(python) => State::Ready(python),
            Err(e) => {
                tracing::error!(dir = %self.dir.display(), "the tool runtime could not be prepared: {e}");
                State::Failed(e)
            }
        }
    }

    /// Wait until it is ready or has failed, at most `bound` (`None`: as long as it takes),
    /// starting it if need be. `on_change` hears every state it passes through while waiting.
    /// `Err` is the state it was in when the wait ended: failed, or still under way.
    pub async fn wait(
        self: &Arc<Self>,
        bound: Option<Duration>,
        mut on_change: impl FnMut(&State),
    ) -> Result<Python, State> {
        let mut rx = self.state.subscribe();
        // A failure this wait has not seen yet is tried again.
        self.start();
        let deadline = bound.map(|b| tokio::time::Instant::now() + b);
        loop {
            let now = rx.borrow_and_update().clone();
            let running = *self.running.lock().unwrap_or_else(|p| p.into_inner());
            match now {
                State::Ready(python) => return Ok(python),
                State::Failed(_) if !running => return Err(now),
                ref other => on_change(other),
            }
            let changed = rx.changed();
            match deadline {
                Some(d) => match tokio::time::timeout_at(d, changed).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) | Err(_) => return Err(self.state()),
                },
                None => {
                    if changed.await.is_err() {
                        return Err(self.state());
                    }
                }
            }
        }
    }

    /// Hold a call of `what` (a tool name) for the runtime at most `bound` ([`HOLD`]), passing
    /// each step to `progress`. `Err` is the answer for the host when the call should not run
    /// now: the runtime is still being prepared (what is happening, and when to call again),
    /// it became ready only after `run_by` ([`RUN_BY`]: call again now), or it failed (why).
    pub async fn hold(
        self: &Arc<Self>,
        what: &str,
        bound: Duration,
        run_by: Duration,
        mut progress: impl FnMut(&State),
    ) -> Result<(), NotReady> {
        let t0 = Instant::now();
        match self.wait(Some(bound), |s| progress(s)).await {
            Ok(_) if t0.elapsed() <= run_by => Ok(()),
            Ok(_) => Err(NotReady {
                message: format!(
                    "{what} did not run yet: the Python runtime tools run on became ready just \
                     now (after {:.1} s). Call {what} again with the same arguments now.",
                    t0.elapsed().as_secs_f64()
                ),
                reason: REASON_READY,
                retry_after: Some(Duration::ZERO),
            }),
            Err(State::Failed(why)) => Err(NotReady {
                message: format!(
                    "{what} cannot run yet: the Python runtime tools run on could not be \
                     prepared: {why}\nIt is tried again on the next call; `autotool runtime \
                     install` shows the whole build, and `autotool doctor` what this machine \
                     lacks."
                ),
                reason: REASON_FAILED,
                retry_after: None,
            }),
            Err(state) => {
                let elapsed = match &state {
                    State::Preparing { since, .. } => since.elapsed().as_secs(),
                    _ => 0,
                };
                // A first build takes about 5-10 s; a rebuild with a warm cache 1-3 s.
                let again = 8u64.saturating_sub(elapsed).clamp(2, 5);
                Err(NotReady {
                    message: format!(
                        "{what} did not run yet: autotool is {} ({elapsed} s so far; the first \
                         build on a machine takes about 5-10 s, and happens once). Nothing is \
                         wrong with the request: call {what} again with the same arguments in \
                         about {again} seconds. (`autotool runtime install` prepares the runtime \
                         ahead of time.)",
                        lowercase_first(&state.describe()),
                    ),
                    reason: REASON_BUILDING,
                    retry_after: Some(Duration::from_secs(again)),
                })
            }
        }
    }

    /// Stop a preparation under way and wait up to `grace` for it to clean up.
    pub async fn shutdown(&self, grace: Duration) {
        self.cancel
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .cancel();
        let deadline = Instant::now() + grace;
        while *self.running.lock().unwrap_or_else(|p| p.into_inner()) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn lowercase_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn python() -> Python {
        Python {
            interpreter: "/r/bin/python3".into(),
            runtime_dirs: Vec::new(),
            venv: Some("/r".into()),
            version: "3.12".into(),
        }
    }

    /// A build that reports two steps, waits for `release` (at most 20 s), then ends as told.
    fn gated(
        release: std::sync::mpsc::Receiver<Result<(), String>>,
        runs: Arc<AtomicUsize>,
    ) -> Work {
        let release = Mutex::new(release);
        Box::new(move |progress, cancel| {
            runs.fetch_add(1, Ordering::SeqCst);
            progress.event(Event::Step {
                n: 1,
                of: 2,
                what: "getting uv".into(),
            });
            progress.event(Event::Step {
                n: 2,
                of: 2,
                what: "installing".into(),
            });
            let t0 = Instant::now();
            loop {
                if cancel.is_cancelled() {
                    return Err("stopped".into());
                }
                let got = release
                    .lock()
                    .ok()
                    .and_then(|r| r.recv_timeout(Duration::from_millis(20)).ok());
                match got {
                    Some(Ok(())) => return Ok(python()),
                    Some(Err(why)) => return Err(why),
                    None if t0.elapsed() > Duration::from_secs(20) => {
                        return Err("never released".into());
                    }
                    None => {}
                }
            }
        })
    }

    #[tokio::test]
    async fn a_call_is_held_only_its_bound_hears_each_step_and_is_told_when_to_call_again() {
        let (release, gate) = std::sync::mpsc::channel();
        let runs = Arc::new(AtomicUsize::new(0));
        let p = Preparer::with_work("/h/runtime".into(), gated(gate, runs.clone()));
        p.start();
        let mut seen = Vec::new();
        let t0 = Instant::now();
        let answer = p
            .hold("create_tool", Duration::from_millis(300), RUN_BY, |s| {
                seen.push(s.describe())
            })
            .await
            .unwrap_err();
        let held = t0.elapsed();
        assert!(held >= Duration::from_millis(300), "{held:?}");
        assert!(held < Duration::from_secs(3), "{held:?}");
        assert_eq!(answer.reason, REASON_BUILDING);
        let again = answer.retry_after.unwrap();
        let answer = answer.message;
        assert!(answer.contains("call create_tool again"), "{answer}");
        assert!(
            answer.contains(&format!("in about {} seconds", again.as_secs())),
            "{answer}"
        );
        assert!(answer.contains("step 2 of 2, installing"), "{answer}");
        assert!(seen.iter().any(|s| s.contains("step 2 of 2")), "{seen:?}");
        // Once ready, a call goes through at once; preparation ran once.
        let _ = release.send(Ok(()));
        p.hold("create_tool", Duration::from_secs(10), RUN_BY, |_| {})
            .await
            .unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert!(matches!(p.state(), State::Ready(_)));
    }

    #[tokio::test]
    async fn a_runtime_ready_late_in_the_hold_is_answered_call_again_now() {
        let (release, gate) = std::sync::mpsc::channel();
        let p = Preparer::with_work("/h/runtime".into(), gated(gate, Arc::default()));
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(400));
            let _ = release.send(Ok(()));
        });
        let answer = p
            .hold(
                "create_tool",
                Duration::from_secs(10),
                Duration::from_millis(100),
                |_| {},
            )
            .await
            .unwrap_err();
        assert_eq!(answer.reason, REASON_READY);
        assert_eq!(answer.retry_after, Some(Duration::ZERO));
        let answer = answer.message;
        assert!(answer.contains("became ready just now"), "{answer}");
        assert!(
            answer.contains("again with the same arguments now"),
            "{answer}"
        );
    }

    #[tokio::test]
    async fn a_failure_is_the_answer_and_the_next_call_tries_again() {
        let (release, gate) = std::sync::mpsc::channel();
        let runs = Arc::new(AtomicUsize::new(0));
        let p = Preparer::with_work("/h/runtime".into(), gated(gate, runs.clone()));
        let _ = release.send(Err("PyPI is unreachable".into()));
        let answer = p
            .hold("create_tool", Duration::from_secs(10), RUN_BY, |_| {})
            .await
            .unwrap_err();
        assert_eq!((answer.reason, answer.retry_after), (REASON_FAILED, None));
        let answer = answer.message;
        assert!(answer.contains("PyPI is unreachable"), "{answer}");
        assert!(answer.contains("tried again on the next call"), "{answer}");
        let _ = release.send(Ok(()));
        p.hold("create_tool", Duration::from_secs(10), RUN_BY, |_| {})
            .await
            .unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn shutdown_stops_a_build_under_way() {
        let (_release, gate) = std::sync::mpsc::channel();
        let p = Preparer::with_work("/h/runtime".into(), gated(gate, Arc::default()));
        p.start();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let t0 = Instant::now();
        p.shutdown(Duration::from_secs(5)).await;
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        assert!(
            matches!(p.state(), State::Failed(ref why) if why == "stopped"),
            "{:?}",
            p.state()
        );
    }
}
