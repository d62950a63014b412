//! The coalescing announcer of a serving process: tells other processes (NOTIFY) about changes
//! after they committed, at most one notification per channel per short window, sent on a
//! pooled connection of its own. Writers never NOTIFY inside their transaction, where
//! PostgreSQL would serialise their commits on the notification queue.

use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::mpsc;

use crate::core::store::Channel;

/// Requests that land within this window after the first share one notification.
const COALESCE: Duration = Duration::from_millis(20);

/// A handle to the announcer task; the task ends when every handle is gone.
#[derive(Debug, Clone)]
pub(crate) struct Announcer {
    requests: mpsc::UnboundedSender<Channel>,
}

impl Announcer {
    /// Starts the announcer on `pool`.
    pub(super) fn start(pool: PgPool) -> Self {
        let (requests, rx) = mpsc::unbounded_channel();
        tokio::spawn(announce(pool, rx));
        Self { requests }
    }

    /// Asks for `channel` to be announced soon.
    pub(crate) fn request(&self, channel: Channel) {
        let _ = self.requests.send(channel);
    }
}

async fn announce(pool: PgPool, mut rx: mpsc::UnboundedReceiver<Channel>) {
    let mut channels = Vec::new();
    while let Some(first) = rx.recv().await {
        tokio::time::sleep(COALESCE).await;
        channels.clear();
        channels.push(first);
        while let Ok(more) = rx.try_recv() {
            if !channels.contains(&more) {
                channels.push(more);
            }
        }
        for channel in &channels {
            if let Err(err) = sqlx::query("SELECT pg_notify($1, '')")
                .bind(channel.name())
                .execute(&pool)
                .await
            {
                // Other processes fall back on their safety poll.
                tracing::warn!(error = %err, channel = channel.name(), "announcing a change failed");
            }
        }
    }
}
