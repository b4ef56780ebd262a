//! A `create_tool` whose verification outlasts what a client waits: the verification runs on
//! its own task, the call is held at most [`crate::tool::runtime::prepare::HOLD`] (as a call
//! waiting for the runtime is), and then answered that verification continues. The same
//! request again (same tool name, code and description) joins that verification rather than
//! starting another: it is held again, and gets the outcome once there is one.
//!
//! - [`Verifying::join_or_start`]: the verification of a request, under way or finished and not
//!   yet collected, else a new one.
//! - [`Verifying::hold`]: wait for it until a deadline, ticking once a second for progress.
//! - [`continues`]: the answer when it is still running, with `_meta` for programs
//!   (`io.autotool/reason` = `verification-continues`, `io.autotool/retryAfterMs`).

use rmcp::model::CallToolResult;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// `_meta` `io.autotool/reason` of an answer saying verification continues.
pub const REASON_VERIFYING: &str = "verification-continues";
/// When a client is told to ask again for the outcome.
pub const ASK_AGAIN: Duration = Duration::from_secs(2);
/// How long an outcome nobody came back for is kept.
const KEEP: Duration = Duration::from_secs(15 * 60);

/// What makes two `create_tool` calls the same request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub tool: String,
    pub code_hash: String,
    pub description: String,
}

#[derive(Debug)]
struct Running {
    started: Instant,
    outcome: watch::Receiver<Option<(Instant, CallToolResult)>>,
}

/// The verifications of one `serve`, shared by every connection.
#[derive(Debug, Default)]
pub struct Verifying {
    running: Mutex<HashMap<Key, Running>>,
}

/// One verification as a call sees it.
#[derive(Debug)]
pub struct Joined {
    pub key: Key,
    /// When the verification began (earlier than this call when it was joined).
    pub started: Instant,
    /// Whether it was under way before this call.
    pub joined: bool,
    outcome: watch::Receiver<Option<(Instant, CallToolResult)>>,
}

impl Verifying {
    /// The verification of `key` (under way, or finished and not collected yet), else a new one
    /// running `verify` on a task of its own: it finishes even when no call waits for it.
    pub fn join_or_start<F>(&self, key: Key, verify: F) -> Joined
    where
        F: Future<Output = CallToolResult> + Send + 'static,
    {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running.retain(|_, r| {
            r.outcome
                .borrow()
                .as_ref()
                .is_none_or(|(done, _)| done.elapsed() < KEEP)
        });
        if let Some(r) = running.get(&key) {
            return Joined {
                key,
                started: r.started,
                joined: true,
                outcome: r.outcome.clone(),
            };
        }
        let (tx, rx) = watch::channel(None);
        tokio::spawn(async move {
            let result = verify.await;
            tx.send_replace(Some((Instant::now(), result)));
        });
        let started = Instant::now();
        running.insert(
            key.clone(),
            Running {
                started,
                outcome: rx.clone(),
            },
        );
        Joined {
            key,
            started,
            joined: false,
            outcome: rx,
        }
    }

    /// Wait for `joined`'s outcome until `deadline`, calling `tick` with the time it has run,
    /// once a second. `Some` is the outcome, then no longer kept; `None`: still running.
    pub async fn hold(
        &self,
        mut joined: Joined,
        deadline: tokio::time::Instant,
        mut tick: impl FnMut(Duration),
    ) -> Option<CallToolResult> {
        loop {
            if let Some((_, result)) = joined.outcome.borrow_and_update().clone() {
                self.running
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&joined.key);
                return Some(result);
            }
            let next = (tokio::time::Instant::now() + Duration::from_secs(1)).min(deadline);
            match tokio::time::timeout_at(next, joined.outcome.changed()).await {
                Ok(Ok(())) => {}
                // The task ended without an outcome (the runtime is shutting down).
                Ok(Err(_)) => return None,
                Err(_) if tokio::time::Instant::now() >= deadline => return None,
                Err(_) => tick(joined.started.elapsed()),
            }
        }
    }
}

/// The answer to a `create_tool` still being verified when its hold ends.
pub fn continues(tool: &str, running_for: Duration) -> CallToolResult {
    let message = format!(
        "create_tool {tool} is still being verified ({:.1} s so far: the tool is slow to start, \
         or its checks take long). Nothing has failed, and verification continues in autotool. \
         When it passes, the tool list changes and its functions are mounted. To learn the \
         outcome, call create_tool again with the same name, code and description in about {} \
         seconds: that call waits for this verification (it does not start another) and \
         returns its result.",
        running_for.as_secs_f64(),
        ASK_AGAIN.as_secs()
    );
    super::render::retry_later(message, REASON_VERIFYING, Some(ASK_AGAIN))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn key() -> Key {
        Key {
            tool: "slow".into(),
            code_hash: "abc".into(),
            description: String::new(),
        }
    }

    #[tokio::test]
    async fn a_slow_verification_is_held_then_joined_and_its_outcome_returned_once() {
        let v = Verifying::default();
        let runs = Arc::new(AtomicUsize::new(0));
        let start = |runs: Arc<AtomicUsize>| async move {
            runs.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(600)).await;
            CallToolResult::success(vec![])
        };
        let t0 = Instant::now();
        let first = v.join_or_start(key(), start(runs.clone()));
        assert!(!first.joined);
        let mut ticks = 0;
        let deadline = tokio::time::Instant::now() + Duration::from_millis(200);
        assert!(v.hold(first, deadline, |_| ticks += 1).await.is_none());
        assert!(
            t0.elapsed() < Duration::from_millis(500),
            "{:?}",
            t0.elapsed()
        );
        // The same request joins the one under way and gets its outcome.
        let again = v.join_or_start(key(), start(runs.clone()));
        assert!(again.joined);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let outcome = v.hold(again, deadline, |_| {}).await;
        assert_eq!(outcome.and_then(|r| r.is_error), Some(false));
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        // Collected: a third call is a new verification.
        let third = v.join_or_start(key(), start(runs.clone()));
        assert!(!third.joined);
    }

    #[test]
    fn the_answer_says_it_continues_and_how_to_learn_the_outcome() {
        let r = continues("slow", Duration::from_millis(3400));
        let meta = serde_json::to_value(&r).unwrap()["_meta"].clone();
        assert_eq!(meta["io.autotool/reason"], "verification-continues");
        assert_eq!(meta["io.autotool/retryAfterMs"], 2000);
        let text = serde_json::to_string(&r.content).unwrap();
        assert!(text.contains("3.4 s so far"), "{text}");
        assert!(text.contains("Nothing has failed"), "{text}");
        assert!(text.contains("the tool list changes"), "{text}");
    }
}
