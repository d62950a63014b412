//! A restart with a newer time-zone database: stored next fires are recomputed at start-up,
//! through the real binary, on every backend.

use std::sync::Arc;

use chrono::{DateTime, Duration, Timelike, Utc};
use sentin8_cron::callback::signing::SigningKey;
use sentin8_cron::core::clock::ManualClock;
use sentin8_cron::core::cron::{OnDstGap, OnDstRepeat};
use sentin8_cron::core::model::{EnvId, Schedule, ScheduleId, ScheduleStatus};
use sentin8_cron::core::rezone::{Rezoned, recompute_next_fires};
use sentin8_cron::core::store::{NewSchedule, ScheduleQuery, Store};
use sentin8_cron::core::target::Target;
use sentin8_cron::core::timing::{CronTiming, Timing};
use serde_json::json;

use crate::enroll::{Db, Enroll};
use crate::support::t0;

fn tz_fixture(name: &str) -> String {
    format!("{}/tests/fixtures/tz/{name}", env!("CARGO_MANIFEST_DIR"))
}

const DECLARATION: &str = r#"
schedules:
  - schedule_type: spring-report
    cron: "0 12 20 3 *"
    timezone: America/New_York
  - schedule_type: daily-utc
    cron: "0 12 * * *"
"#;

async fn next_runs(enroll: &Enroll) -> Vec<(String, DateTime<Utc>)> {
    let mut tx = enroll.store.tenant_begin(enroll.env).await.unwrap();
    let query = ScheduleQuery {
        limit: 10,
        ..ScheduleQuery::default()
    };
    tx.schedule_list(&query)
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.schedule_type, s.next_run_at.unwrap()))
        .collect()
}

pub async fn a_newer_tz_database_recomputes_next_fires_at_start_up(db: Db) {
    let enroll = Enroll::new(db);
    let file = enroll.write("schedules.yaml", DECLARATION);
    let old = tz_fixture("old");
    let new = tz_fixture("new");
    let env = enroll.env.to_string();
    // `tick` calls out, so outside development mode (PostgreSQL) it needs a signing key.
    let (_, pem) = SigningKey::generate_ed25519().unwrap();
    let key = enroll.write("signing-key.pem", &pem);
    // A private key readable by others is refused outside development mode.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    enroll
        .run_with(
            &[
                "enroll",
                "--env",
                &env,
                "--domain",
                "reports",
                "--file",
                &file,
                "--base-url",
                "http://127.0.0.1:9",
            ],
            &[("SENTIN8_CRON_TZDIR", &old)],
        )
        .await
        .ok();
    let before = next_runs(&enroll).await;
    // Noon on 20 March is standard time by the older rules: 17:00 UTC.
    let spring = &before.iter().find(|(t, _)| t == "spring-report").unwrap().1;
    assert_eq!((spring.hour(), spring.minute()), (17, 0), "{before:?}");

    // A restart with the same rules changes nothing.
    let same = enroll
        .run_with(
            &["tick", "--once"],
            &[
                ("SENTIN8_CRON_TZDIR", &old),
                ("SENTIN8_CRON_SIGNING_KEY_FILE", &key),
                ("RUST_LOG", "warn"),
            ],
        )
        .await
        .ok();
    assert!(!same.stderr.contains("recomputed"), "{}", same.stderr);
    assert_eq!(next_runs(&enroll).await, before);

    // With the newer rules, 20 March is daylight time: 16:00 UTC, one hour earlier.
    let restart = enroll
        .run_with(
            &["tick", "--once"],
            &[
                ("SENTIN8_CRON_TZDIR", &new),
                ("SENTIN8_CRON_SIGNING_KEY_FILE", &key),
                ("RUST_LOG", "warn"),
            ],
        )
        .await
        .ok();
    let after = next_runs(&enroll).await;
    let moved = &after.iter().find(|(t, _)| t == "spring-report").unwrap().1;
    assert_eq!(*moved, *spring - chrono::Duration::hours(1), "{after:?}");
    // The UTC schedule is untouched.
    assert_eq!(
        after.iter().find(|(t, _)| t == "daily-utc"),
        before.iter().find(|(t, _)| t == "daily-utc")
    );
    // The change is logged with the schedule, its zone and both instants.
    let line = restart
        .stderr
        .lines()
        .find(|line| line.contains("recomputed"))
        .unwrap_or_else(|| panic!("no log line:\n{}", restart.stderr));
    for part in [
        "America/New_York",
        &spring.to_rfc3339(),
        &moved.to_rfc3339(),
    ] {
        assert!(line.contains(part), "{part} not in {line}");
    }
    // Dry runs never write.
    enroll
        .run_with(
            &["tick", "--once", "--dry-run"],
            &[("SENTIN8_CRON_TZDIR", &old)],
        )
        .await
        .ok();
    assert_eq!(next_runs(&enroll).await, after);
}

/// A cron schedule whose stored next fire is `next_run_at`, whatever its rules say.
fn stored(schedule_type: &str, zone: &str, next_run_at: DateTime<Utc>) -> NewSchedule {
    NewSchedule {
        id: ScheduleId::new(),
        domain: "reports".into(),
        schedule_type: schedule_type.into(),
        timing: Timing::Cron(CronTiming::from_stored(
            "0 12 * * *",
            zone,
            OnDstGap::Shift,
            OnDstRepeat::Once,
        )),
        target: Target::from_stored(json!({"baseUrl": "http://127.0.0.1:9"})),
        payload: json!({}),
        status: ScheduleStatus::Active,
        next_run_at: Some(next_run_at),
        max_retries: 0,
        policies: Default::default(),
        remaining_runs: None,
        labels: Default::default(),
        exclude: Default::default(),
        actor: "tester".into(),
        now: t0(),
    }
}

/// The recompute itself, with an injected clock: future fires that the rules in use place
/// elsewhere move, due ones stay for the ticker, other tenants and zones are untouched.
pub async fn only_future_fires_move(store: Arc<dyn Store>) {
    let clock = ManualClock::new(t0());
    let (env, other) = (EnvId::new(), EnvId::new());
    // 2030-01-01 noon in New York is 17:00Z; these were stored an hour off, as older rules
    // might have had it.
    let stale = t0() + Duration::hours(18);
    let due = t0() - Duration::minutes(1);
    let mut tx = store.tenant_begin(env).await.unwrap();
    let future = tx
        .schedule_insert(&stored("future", "America/New_York", stale))
        .await
        .unwrap();
    let overdue = tx
        .schedule_insert(&stored("due", "America/New_York", due))
        .await
        .unwrap();
    let right = tx
        .schedule_insert(&stored(
            "right",
            "Europe/Berlin",
            t0() + Duration::hours(11),
        ))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.tenant_begin(other).await.unwrap();
    let elsewhere = tx
        .schedule_insert(&stored("elsewhere", "Mars/Olympus", stale))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let moved = recompute_next_fires(store.as_ref(), &clock).await.unwrap();
    assert_eq!(
        moved,
        [Rezoned {
            schedule_id: future.id,
            env_id: env,
            timezone: "America/New_York".into(),
            old_next_run_at: stale,
            new_next_run_at: t0() + Duration::hours(17),
        }]
    );
    let mut tx = store.tenant_begin(env).await.unwrap();
    let next = |s: Option<Schedule>| s.unwrap().next_run_at.unwrap();
    assert_eq!(
        next(tx.schedule_get(future.id).await.unwrap()),
        t0() + Duration::hours(17)
    );
    assert_eq!(next(tx.schedule_get(overdue.id).await.unwrap()), due);
    assert_eq!(
        next(tx.schedule_get(right.id).await.unwrap()),
        t0() + Duration::hours(11)
    );
    // The move is in the audit journal, with the rules it came from.
    let audit = tx.audit_list(100).await.unwrap();
    let entry = audit
        .iter()
        .find(|entry| entry.action == "schedule.rezone")
        .expect("an audit entry");
    assert_eq!(entry.resource_id, future.id.to_string());
    assert_eq!(entry.actor, "system:tz-database");
    assert_eq!(
        entry.after.as_ref().unwrap()["tz_database"]["source"],
        "bundled"
    );
    assert_eq!(
        audit
            .iter()
            .filter(|e| e.action == "schedule.rezone")
            .count(),
        1
    );
    drop(tx);
    let mut tx = store.tenant_begin(other).await.unwrap();
    // A zone the database does not know is left alone.
    assert_eq!(next(tx.schedule_get(elsewhere.id).await.unwrap()), stale);
    drop(tx);
    // Running it again changes nothing.
    assert!(
        recompute_next_fires(store.as_ref(), &clock)
            .await
            .unwrap()
            .is_empty()
    );
}

#[macro_export]
macro_rules! tz_restart_suite {
    ($backend:ident, $make:expr, $store:expr) => {
        mod $backend {
            #[tokio::test]
            async fn only_future_fires_move() {
                let Some((store, _guard)) = $store.await else {
                    return;
                };
                $crate::tz_restart::only_future_fires_move(store).await;
            }

            #[tokio::test]
            async fn a_newer_tz_database_recomputes_next_fires_at_start_up() {
                let Some((db, _guard)) = $make.await else {
                    return;
                };
                $crate::tz_restart::a_newer_tz_database_recomputes_next_fires_at_start_up(db).await;
            }
        }
    };
}
