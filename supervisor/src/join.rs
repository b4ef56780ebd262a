//! Waiting on several futures at once in the current task, their outputs in the order given:
//! candidates verified side by side, one model request per candidate.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

/// Run every future of `futures` concurrently in this task; their outputs, in order.
pub async fn all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut pending: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut done: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut waiting = false;
        for (future, out) in pending.iter_mut().zip(done.iter_mut()) {
            if out.is_some() {
                continue;
            }
            match future.as_mut().poll(cx) {
                Poll::Ready(v) => *out = Some(v),
                Poll::Pending => waiting = true,
            }
        }
        if waiting {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    done.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn outputs_come_in_order_and_the_futures_run_side_by_side() {
        let started = tokio::time::Instant::now();
        let outs = all([30u64, 10, 20]
            .into_iter()
            .map(|ms| async move {
                tokio::time::sleep(Duration::from_millis(ms * 10)).await;
                ms
            })
            .collect())
        .await;
        assert_eq!(outs, [30, 10, 20]);
        // Side by side: about the longest, not the sum (600 ms).
        assert!(
            started.elapsed() < Duration::from_millis(550),
            "{:?}",
            started.elapsed()
        );
        assert!(all(Vec::<std::future::Ready<u8>>::new()).await.is_empty());
    }
}
