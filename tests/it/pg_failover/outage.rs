//! A real database outage (the server stopped, then started): a fire older than the
//! catch-up window is skipped, not replayed.

use super::*;

/// A real outage: the database server is down from 00:19 to 00:27. The 00:20
/// occurrence of a `*/10` schedule with a 5-minute catch-up window is then 7 minutes old: it
/// is recorded as missed and not called; the next one, 00:30, runs on time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_database_outage_skips_a_fire_older_than_the_catchup_window() {
    use chrono::Duration as Minutes;
    use sentin8_cron::core::decl::ScheduleDecl;
    use sentin8_cron::core::engine::EngineConfig;
    use sentin8_cron::core::model::{JobStatus, MissedOccurrences};

    use crate::engine::{Harness, cron};
    use crate::support::t0;

    let Some(mut pair) = Pair::start().await else {
        return;
    };
    let url = format!(
        "postgres://sentin8_cron_service@127.0.0.1:{}/postgres",
        pair.primary.port
    );
    let store = Arc::new(PgStore::connect(&url, &options()).await.expect("connect"));
    let h = Harness::with_config(store, EngineConfig::default()).await;
    let minute = |m: i64| t0() + Minutes::minutes(m);
    let s = h
        .create(ScheduleDecl {
            catchup_window: Some("5m".into()),
            ..cron("*/10 * * * *", 3)
        })
        .await;
    assert_eq!(h.tick_at(minute(10)).await.fired, 1);

    pair.primary.stop();
    for m in [19, 20, 25] {
        h.clock.set(minute(m));
        assert!(h.engine.tick().await.is_err(), "the database is down");
    }
    pair.primary.restart();
    h.clock.set(minute(27));
    let summary = within(
        FAILOVER_BOUND,
        "a tick once the database is back",
        || async { h.engine.tick().await.ok() },
    )
    .await;
    assert_eq!((summary.fired, summary.skipped), (0, 1), "{summary:?}");
    let jobs = h.jobs(s.id).await;
    let late = jobs
        .iter()
        .find(|j| j.scheduled_for == minute(20))
        .unwrap_or_else(|| panic!("the missed occurrence is on the record: {jobs:#?}"));
    assert_eq!(late.status, JobStatus::Skipped);
    assert_eq!(
        late.missed,
        Some(MissedOccurrences {
            first: minute(20),
            last: minute(20),
            count: 1
        })
    );
    assert_eq!(
        h.target.requests().len(),
        1,
        "the stale fire was not called"
    );
    assert_eq!(
        h.tick_at(minute(30)).await.fired,
        1,
        "the next one runs on time"
    );
}
