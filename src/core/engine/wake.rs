//! The wake-up loop of `serve`: ticks, then sleeps until the earliest due instant, a change
//! signal or the safety interval.

use std::time::Duration;

use super::Engine;

impl Engine {
    /// Loops ticks until `shutdown` resolves: waking at the earliest due instant, on a change
    /// signal, or at the safety interval, whichever comes first. An in-flight tick finishes
    /// before the loop returns.
    pub async fn run(&self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let signals = self.store.signals();
        loop {
            let summary = self.tick().await;
            let made_progress = summary
                .as_ref()
                .is_ok_and(|s| s.fired + s.retried_attempts + s.skipped > 0);
            let wait = match self.store.wakeup_next().await {
                Ok(Some(at)) => {
                    let until = (at - self.clock.now()).to_std().unwrap_or_default();
                    // Work that is already due but could not be taken (another ticker holds it)
                    // must not spin this loop.
                    let floor = if made_progress {
                        Duration::ZERO
                    } else {
                        Duration::from_millis(100)
                    };
                    until.max(floor).min(self.config.tick_interval)
                }
                Ok(None) => self.config.tick_interval,
                Err(err) => {
                    tracing::warn!(error = %err, "cannot compute the next wake-up; polling");
                    Duration::from_secs(1).min(self.config.tick_interval)
                }
            };
            tokio::select! {
                biased;
                () = &mut shutdown => return,
                () = signals.schedules.notified() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}
