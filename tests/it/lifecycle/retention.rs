//! Retention driven by an injected clock, on the store seam: finished jobs (with their
//! attempts), audit entries and long-deleted schedules go; open jobs, jobs a dead letter
//! references, referenced schedules and anything recent stay. And the attempt ledger written
//! by `job_finish_many` itself.

use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, TimeZone, Utc};
use sentin8_cron::core::clock::ManualClock;
use sentin8_cron::core::model::*;
use sentin8_cron::core::retention::{Retention, RetentionConfig, RetentionSummary};
use sentin8_cron::core::store::*;
use serde_json::json;

use crate::conformance::{insert_schedule, new_job, new_schedule};
use crate::support::t0;

/// A running job of `schedule` started at `at`, finished at `at` + 1 s with `outcome`.
async fn finished_job(
    store: &Arc<dyn Store>,
    env: EnvId,
    schedule: ScheduleId,
    at: DateTime<Utc>,
    outcome: JobOutcome,
) -> Job {
    let mut tx = store.tenant_begin(env).await.unwrap();
    let mut new = new_job(schedule, JobStatus::Running);
    new.started_at = Some(at);
    new.now = at;
    let job = tx.job_insert(&new).await.unwrap();
    let written = tx
        .job_finish_many(&[JobFinish {
            id: job.id,
            attempt: job.attempt,
            epoch: job.lease_epoch,
            outcome,
            now: at + Duration::seconds(1),
            detail: AttemptDetail {
                started_at: Some(at),
                ended_at: None,
                http_status: Some(200),
                error_class: None,
                response_excerpt: AttemptDetail::excerpt(&"x".repeat(600)),
            },
            lease_expired_by: None,
        }])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    written.into_iter().next().unwrap()
}

fn ok() -> JobOutcome {
    JobOutcome::Succeeded {
        result: json!({"ok": true}),
    }
}

pub async fn the_attempt_ledger_is_written_with_the_outcome(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let schedule = insert_schedule(&store, env, new_schedule("ledger", "billing")).await;
    let job = finished_job(&store, env, schedule.id, t0(), ok()).await;
    let mut tx = store.tenant_begin(env).await.unwrap();
    let attempts = tx.job_attempts_list(job.id).await.unwrap();
    assert_eq!(
        attempts,
        [JobAttempt {
            job_id: job.id,
            attempt: 1,
            started_at: Some(t0()),
            finished_at: t0() + Duration::seconds(1),
            duration_ms: Some(1000),
            outcome: AttemptOutcome::Succeeded,
            http_status: Some(200),
            error_class: None,
            error: None,
            response_excerpt: Some("x".repeat(512)),
        }]
    );
    // A late outcome of the same attempt is not written, and gets no second ledger row.
    let late = tx
        .job_finish_many(&[JobFinish {
            id: job.id,
            attempt: 1,
            epoch: 0,
            outcome: JobOutcome::Failed {
                error: "late".into(),
            },
            now: t0() + Duration::seconds(9),
            detail: AttemptDetail::default(),
            lease_expired_by: None,
        }])
        .await
        .unwrap();
    assert!(late.is_empty());
    assert_eq!(tx.job_attempts_list(job.id).await.unwrap().len(), 1);
    // Another environment sees no attempts of this job.
    drop(tx);
    let mut other = store.tenant_begin(EnvId::new()).await.unwrap();
    assert!(other.job_attempts_list(job.id).await.unwrap().is_empty());
}

pub async fn retention_removes_only_what_it_may(store: Arc<dyn Store>) {
    let env = EnvId::new();
    // Long past by the database's own clock too: PostgreSQL's purge functions never remove a
    // row younger than a day by it, whatever the injected clock says.
    let old = Utc.with_ymd_and_hms(2020, 1, 1, 0, 0, 0).unwrap();
    let schedule = insert_schedule(&store, env, new_schedule("kept", "billing")).await;
    let expired = finished_job(&store, env, schedule.id, old, ok()).await;
    let failed = JobOutcome::Failed {
        error: "proxy-back status 500".into(),
    };
    let expired_failed = finished_job(&store, env, schedule.id, old, failed.clone()).await;
    let dead_letter = finished_job(&store, env, schedule.id, old, failed).await;
    let recent = finished_job(&store, env, schedule.id, old + Duration::days(20), ok()).await;
    let mut tx = store.tenant_begin(env).await.unwrap();
    tx.dlq_insert(&NewDlqEntry {
        id: DlqId::new(),
        schedule_id: schedule.id,
        job_id: dead_letter.id,
        domain: "billing".into(),
        schedule_type: "kept".into(),
        payload: json!({}),
        attempts: 1,
        last_error: "proxy-back status 500".into(),
        scheduled_for: old,
        backfill: false,
        now: old,
    })
    .await
    .unwrap();
    // An open job created long ago (a retry still waiting) is never removed.
    let mut pending = new_job(schedule.id, JobStatus::Pending);
    pending.now = old;
    let open = tx.job_insert(&pending).await.unwrap();
    // A schedule deleted long ago that nothing references, and one whose job is recent.
    let gone = tx
        .schedule_insert(&new_schedule("gone", "billing"))
        .await
        .unwrap();
    tx.schedule_set_deleted(&ScheduleSetDeleted {
        id: gone.id,
        actor: "tester".into(),
        now: old,
    })
    .await
    .unwrap();
    let referenced = tx
        .schedule_insert(&new_schedule("referenced", "billing"))
        .await
        .unwrap();
    tx.schedule_set_deleted(&ScheduleSetDeleted {
        id: referenced.id,
        actor: "tester".into(),
        now: old,
    })
    .await
    .unwrap();
    for (at, action) in [(old, "old"), (old + Duration::days(400), "recent")] {
        tx.audit_insert(&NewAudit {
            actor: "tester".into(),
            action: action.into(),
            resource_type: "schedule".into(),
            resource_id: schedule.id.to_string(),
            before: None,
            after: None,
            correlation_id: None,
            now: at,
            schedule_id: Some(schedule.id),
        })
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();
    let referencing =
        finished_job(&store, env, referenced.id, old + Duration::days(20), ok()).await;

    // 31 days later, with batches of one (repeated while full, within the pass's budget).
    let clock = Arc::new(ManualClock::new(old + Duration::days(31)));
    let config = RetentionConfig {
        batch: 1,
        budget: StdDuration::from_secs(600),
        pause: StdDuration::ZERO,
        ..RetentionConfig::default()
    };
    let retention = Retention::new(store.clone(), clock.clone(), config);
    let done = retention.pass().await;
    assert_eq!(
        done,
        RetentionSummary {
            jobs: 2,
            audit: 0,
            schedules: 1,
            errors: 0
        }
    );
    let mut tx = store.tenant_begin(env).await.unwrap();
    for job in [&expired, &expired_failed] {
        assert!(tx.job_get(job.id).await.unwrap().is_none(), "{job:?}");
        assert!(tx.job_attempts_list(job.id).await.unwrap().is_empty());
    }
    for job in [&dead_letter, &recent, &open, &referencing] {
        assert!(tx.job_get(job.id).await.unwrap().is_some(), "{job:?} kept");
    }
    assert_eq!(tx.job_attempts_list(recent.id).await.unwrap().len(), 1);
    assert!(tx.schedule_get(gone.id).await.unwrap().is_none());
    assert!(tx.schedule_get(referenced.id).await.unwrap().is_some());
    assert!(tx.schedule_get(schedule.id).await.unwrap().is_some());
    assert_eq!(
        tx.audit_list(10).await.unwrap().len(),
        2,
        "the journal keeps a year"
    );
    drop(tx);

    // Nothing more to do at the same instant; a year on the old audit entry goes too, and
    // the referenced schedule once its job has gone.
    assert_eq!(retention.pass().await, RetentionSummary::default());
    clock.set(old + Duration::days(400));
    let done = retention.pass().await;
    assert_eq!(
        done,
        RetentionSummary {
            jobs: 2,
            audit: 1,
            schedules: 1,
            errors: 0
        }
    );
    let mut tx = store.tenant_begin(env).await.unwrap();
    let journal = tx.audit_list(10).await.unwrap();
    assert!(journal.iter().all(|e| e.action != "old"));
    assert!(tx.job_get(dead_letter.id).await.unwrap().is_some());
    assert!(tx.job_get(open.id).await.unwrap().is_some());
}

/// Old rows of every kind, the jobs' purge made to fail by a trigger (`refuse_job_deletes`):
/// the schedules and the audit journal are still purged, and the failure is counted.
async fn a_failing_kind_leaves_the_others_to_run(
    store: Arc<dyn Store>,
    refuse_job_deletes: impl std::future::Future<Output = ()>,
) {
    let env = EnvId::new();
    let old = Utc.with_ymd_and_hms(2020, 1, 1, 0, 0, 0).unwrap();
    let schedule = insert_schedule(&store, env, new_schedule("kept", "billing")).await;
    let job = finished_job(&store, env, schedule.id, old, ok()).await;
    let mut tx = store.tenant_begin(env).await.unwrap();
    let gone = tx
        .schedule_insert(&new_schedule("gone", "billing"))
        .await
        .unwrap();
    tx.schedule_set_deleted(&ScheduleSetDeleted {
        id: gone.id,
        actor: "tester".into(),
        now: old,
    })
    .await
    .unwrap();
    tx.audit_insert(&NewAudit {
        actor: "tester".into(),
        action: "old".into(),
        resource_type: "schedule".into(),
        resource_id: schedule.id.to_string(),
        before: None,
        after: None,
        correlation_id: None,
        now: old,
        schedule_id: Some(schedule.id),
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();
    refuse_job_deletes.await;

    let clock = Arc::new(ManualClock::new(old + Duration::days(400)));
    let retention = Retention::new(store.clone(), clock, RetentionConfig::default());
    assert_eq!(
        retention.pass().await,
        RetentionSummary {
            jobs: 0,
            audit: 1,
            schedules: 1,
            errors: 1
        }
    );
    let mut tx = store.tenant_begin(env).await.unwrap();
    assert!(tx.job_get(job.id).await.unwrap().is_some());
    assert!(tx.schedule_get(gone.id).await.unwrap().is_none());
    assert!(tx.audit_list(10).await.unwrap().is_empty());
}

#[tokio::test]
async fn sqlite_a_failing_retention_kind_leaves_the_others_to_run() {
    let (store, url, _dir) = crate::support::sqlite_file_store().await;
    a_failing_kind_leaves_the_others_to_run(store, async {
        use sqlx::{Connection, Executor};
        let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
        conn.execute(
            "CREATE TRIGGER jobs_kept BEFORE DELETE ON jobs \
             BEGIN SELECT RAISE(ABORT, 'jobs are kept'); END",
        )
        .await
        .unwrap();
    })
    .await;
}

#[tokio::test]
async fn postgres_a_failing_retention_kind_leaves_the_others_to_run() {
    let Some(db) = crate::support::PgTestDb::create().await else {
        return;
    };
    let owner = db.owner_url();
    a_failing_kind_leaves_the_others_to_run(db.dyn_store(), async {
        use sqlx::{Connection, Executor};
        let mut conn = sqlx::PgConnection::connect(&owner).await.unwrap();
        conn.execute(
            "CREATE FUNCTION cron.jobs_kept() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN RAISE EXCEPTION 'jobs are kept'; END $$; \
             CREATE TRIGGER jobs_kept BEFORE DELETE ON cron.jobs \
             FOR EACH ROW EXECUTE FUNCTION cron.jobs_kept()",
        )
        .await
        .unwrap();
    })
    .await;
}
