//! Splicing two connections, with an idle timeout over both directions.

use super::BUFFER;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// When anything last moved on a connection, for the idle timeout.
pub(super) struct Activity {
    start: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    pub(super) fn new() -> Self {
        Activity {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    pub(super) fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// Returns once nothing has moved for `limit`.
    pub(super) async fn idle(&self, limit: Duration) {
        loop {
            let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let deadline = self.start + last + limit;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }
}

/// Copy `from` to `to` until `from` ends, then end `to`'s direction (half-close).
pub(super) async fn pump<R, W>(from: &mut R, to: &mut W, activity: &Activity) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    // Filled through `read_buf`, so the buffer is never zeroed: a new connection costs an
    // allocation, not a 64 KiB memset per direction.
    let mut buf = Vec::with_capacity(BUFFER);
    loop {
        buf.clear();
        let n = from.read_buf(&mut buf).await?;
        if n == 0 {
            return to.shutdown().await;
        }
        activity.touch();
        to.write_all(&buf).await?;
    }
}

/// Both directions until both have ended, either fails, or the connection is idle too long.
pub(super) async fn splice(a: &mut TcpStream, b: &mut TcpStream, idle: Duration) {
    let activity = Activity::new();
    let (mut a_read, mut a_write) = a.split();
    let (mut b_read, mut b_write) = b.split();
    let both = async {
        tokio::try_join!(
            pump(&mut a_read, &mut b_write, &activity),
            pump(&mut b_read, &mut a_write, &activity),
        )
    };
    tokio::select! {
        _ = both => {}
        () = activity.idle(idle) => {}
    }
}
