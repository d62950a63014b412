//! Health's database probe runs in the background once a second: requests at any rate answer
//! from memory and never run a query each; a store that stops answering shows once no probe
//! was answered for three seconds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sentin8_cron::core::clock::SystemClock;
use sentin8_cron::core::snapshot::{PROBE_FRESH, PROBE_TIMEOUT, StatsSnapshot};

use crate::engine::FaultyStore;

#[tokio::test]
async fn health_answers_from_the_background_probe_at_any_request_rate() {
    let faulty = FaultyStore::new(crate::support::sqlite_store().await);
    let stats = Arc::new(StatsSnapshot::new(Duration::from_secs(3600)));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let prober = tokio::spawn({
        let (stats, store) = (stats.clone(), faulty.clone());
        async move {
            stats
                .probe_every_second(store.as_ref(), &SystemClock, async {
                    let _ = stopped.await;
                })
                .await;
        }
    });
    // The first probe comes at once.
    let started = Instant::now();
    while faulty.schema_reads() == 0 && started.elapsed() < Duration::from_secs(5) {
        tokio::task::yield_now().await;
    }
    // 5,000 requests at once, a burst a load balancer's probes never reach: every one is
    // answered from memory.
    let before = faulty.schema_reads();
    let answers = futures_util::future::join_all(
        (0..5000).map(|_| stats.reachable(faulty.as_ref(), &SystemClock)),
    )
    .await;
    assert!(answers.iter().all(|reachable| *reachable));
    assert!(
        faulty.schema_reads() - before <= 1,
        "the requests ran {} probes",
        faulty.schema_reads() - before
    );
    // The store stops answering: its probes give up after their timeout, and once none was
    // answered for PROBE_FRESH health says so (one slow probe would not), still without a
    // query per request. Bounded with room for a loaded machine.
    faulty.freeze(true);
    let deadline = Instant::now() + PROBE_FRESH * 2 + PROBE_TIMEOUT;
    let mut said = false;
    while Instant::now() < deadline {
        if !stats.reachable(faulty.as_ref(), &SystemClock).await {
            said = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        said,
        "health says the database does not answer within a probe and its timeout"
    );
    faulty.freeze(false);
    let _ = stop.send(());
    prober.await.unwrap();
}
