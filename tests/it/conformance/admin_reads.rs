//! What the admin pages read beyond the API: the hourly job summary (sums and nearest-rank
//! lateness percentiles grouped in SQL), the environments that hold data, and the schedule
//! type search.

use std::sync::Arc;

use chrono::{DateTime, Duration, DurationRound, Utc};
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;

use super::{deleted_by_tester, insert_schedule, new_job, new_schedule};
use crate::support::t0;

/// A finished job scheduled at `at` whose only attempt started `late_ms` later.
fn ran(schedule_id: ScheduleId, status: JobStatus, at: DateTime<Utc>, late_ms: i64) -> NewJob {
    NewJob {
        attempt: 1,
        scheduled_for: at,
        started_at: Some(at + Duration::milliseconds(late_ms)),
        finished_at: Some(at + Duration::milliseconds(late_ms + 10)),
        next_attempt_at: None,
        ..new_job(schedule_id, status)
    }
}

pub async fn job_hours_sum_each_hour_and_rank_lateness(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let other = EnvId::new();
    let hour = t0().duration_trunc(Duration::hours(1)).unwrap();
    let report = insert_schedule(&store, env, new_schedule("report", "billing")).await;
    let sync = insert_schedule(&store, env, new_schedule("sync", "billing")).await;
    let foreign = insert_schedule(&store, other, new_schedule("report", "billing")).await;

    let mut jobs = Vec::new();
    for late in [1_000, 2_000, 3_000, 100_000] {
        jobs.push(ran(
            report.id,
            JobStatus::Succeeded,
            hour + Duration::minutes(5),
            late,
        ));
    }
    jobs.push(ran(
        report.id,
        JobStatus::Failed,
        hour + Duration::minutes(10),
        5_000,
    ));
    jobs.push(ran(
        sync.id,
        JobStatus::Succeeded,
        hour + Duration::minutes(59),
        4_000,
    ));
    // A retried job keeps only its latest start: no lateness. A skip never started.
    jobs.push(NewJob {
        attempt: 3,
        ..ran(
            sync.id,
            JobStatus::Failed,
            hour + Duration::minutes(61),
            900_000,
        )
    });
    jobs.push(NewJob {
        attempt: 0,
        started_at: None,
        ..ran(
            report.id,
            JobStatus::Skipped,
            hour + Duration::minutes(70),
            0,
        )
    });
    // A backfilled occurrence run 39 minutes after its instant: a fire, a success, and no
    // lateness (an operator asked for it late).
    jobs.push(NewJob {
        backfill: true,
        ..ran(
            sync.id,
            JobStatus::Succeeded,
            hour + Duration::minutes(62),
            39 * 60_000,
        )
    });
    // Outside the window, before and after.
    jobs.push(ran(
        report.id,
        JobStatus::Failed,
        hour - Duration::seconds(1),
        1,
    ));
    jobs.push(ran(
        report.id,
        JobStatus::Failed,
        hour + Duration::hours(2),
        1,
    ));
    let mut tx = store.tenant_begin(env).await.unwrap();
    for job in &jobs {
        tx.job_insert(job).await.unwrap();
    }
    tx.commit().await.unwrap();
    let mut tx = store.tenant_begin(other).await.unwrap();
    tx.job_insert(&ran(foreign.id, JobStatus::Failed, hour, 7))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let window = JobHoursQuery {
        schedule_id: None,
        from: hour,
        to: hour + Duration::hours(2),
    };
    let mut tx = store.tenant_begin(env).await.unwrap();
    let all = tx.job_hours(&window).await.unwrap();
    let one = tx
        .job_hours(&JobHoursQuery {
            schedule_id: Some(report.id),
            ..window
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();

    assert_eq!(
        all.hours,
        [
            JobHour {
                hour,
                fires: 6,
                succeeded: 5,
                failures: 1,
                skips: 0,
                // Sorted: 1, 2, 3, 4, 5, 100 s; rank ceil(0.5 × 6) = 3, ceil(0.99 × 6) = 6.
                late_p50_ms: Some(3_000),
                late_p99_ms: Some(100_000),
            },
            JobHour {
                hour: hour + Duration::hours(1),
                fires: 3,
                succeeded: 1,
                failures: 1,
                skips: 1,
                late_p50_ms: None,
                late_p99_ms: None,
            },
        ]
    );
    assert_eq!(
        (all.late_p50_ms, all.late_p99_ms),
        (Some(3_000), Some(100_000))
    );
    // One schedule: 1, 2, 3, 5, 100 s.
    assert_eq!(one.hours.len(), 2);
    assert_eq!(one.hours[0].fires, 5);
    assert_eq!(one.hours[0].late_p50_ms, Some(3_000));
    assert_eq!(one.hours[1].fires, 1);
    assert_eq!(one.hours[1].skips, 1);

    // The other tenant sees only its own job.
    let mut tx = store.tenant_begin(other).await.unwrap();
    let theirs = tx.job_hours(&window).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(theirs.hours.len(), 1);
    assert_eq!((theirs.hours[0].fires, theirs.hours[0].failures), (1, 1));
    assert_eq!(theirs.late_p50_ms, Some(7));

    // An empty window.
    let mut tx = store.tenant_begin(env).await.unwrap();
    let empty = tx
        .job_hours(&JobHoursQuery {
            schedule_id: None,
            from: hour + Duration::hours(5),
            to: hour + Duration::hours(6),
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(empty, JobHours::default());
}

pub async fn envs_with_data_list_ids_and_live_counts(store: Arc<dyn Store>) {
    let a = EnvId::new();
    let b = EnvId::new();
    insert_schedule(&store, a, new_schedule("one", "billing")).await;
    let gone = insert_schedule(&store, a, new_schedule("two", "billing")).await;
    insert_schedule(&store, b, new_schedule("one", "billing")).await;
    let mut tx = store.tenant_begin(a).await.unwrap();
    tx.schedule_set_deleted(&deleted_by_tester(gone.id))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    // An environment whose every schedule is deleted is not offered.
    let emptied = EnvId::new();
    let only = insert_schedule(&store, emptied, new_schedule("one", "billing")).await;
    let mut tx = store.tenant_begin(emptied).await.unwrap();
    tx.schedule_set_deleted(&deleted_by_tester(only.id))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let listed = store.envs_with_data(100).await.unwrap();
    let mut expected = vec![
        EnvSummary {
            env_id: a,
            schedules: 1,
        },
        EnvSummary {
            env_id: b,
            schedules: 1,
        },
    ];
    expected.sort_by_key(|e| e.env_id.0);
    assert_eq!(listed, expected);
    assert_eq!(store.envs_with_data(1).await.unwrap(), expected[..1]);
}

pub async fn schedule_type_search_is_case_insensitive_and_pages(store: Arc<dyn Store>) {
    let env = EnvId::new();
    for schedule_type in ["Nightly-Report", "hourly-sync", "weekly-report", "other"] {
        insert_schedule(&store, env, new_schedule(schedule_type, "billing")).await;
    }
    let mut tx = store.tenant_begin(env).await.unwrap();
    let found = tx
        .schedule_list(&ScheduleQuery {
            type_contains: Some("REPORT".into()),
            limit: 10,
            ..ScheduleQuery::default()
        })
        .await
        .unwrap();
    let first = tx
        .schedule_list(&ScheduleQuery {
            type_contains: Some("report".into()),
            limit: 1,
            ..ScheduleQuery::default()
        })
        .await
        .unwrap();
    let rest = tx
        .schedule_list(&ScheduleQuery {
            type_contains: Some("report".into()),
            after: Some(first[0].id),
            limit: 10,
            ..ScheduleQuery::default()
        })
        .await
        .unwrap();
    // `%` and `_` are plain text, not patterns.
    let literal = tx
        .schedule_list(&ScheduleQuery {
            type_contains: Some("%".into()),
            limit: 10,
            ..ScheduleQuery::default()
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let types = |list: &[Schedule]| {
        list.iter()
            .map(|s| s.schedule_type.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(types(&found), ["Nightly-Report", "weekly-report"]);
    assert_eq!(types(&first), ["Nightly-Report"]);
    assert_eq!(types(&rest), ["weekly-report"]);
    assert!(literal.is_empty());
}

/// Lateness is whole milliseconds rounded down on both backends: 1.7 ms is 1 ms; a job
/// superseded by a successor is not counted, a discarded one is a failure, and a run of missed
/// occurrences counts each.
pub async fn job_hours_round_sub_millisecond_lateness_down(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let hour = t0().duration_trunc(Duration::hours(1)).unwrap();
    let report = insert_schedule(&store, env, new_schedule("report", "billing")).await;
    let at = hour + Duration::minutes(5);
    let mut tx = store.tenant_begin(env).await.unwrap();
    tx.job_insert(&NewJob {
        started_at: Some(at + Duration::microseconds(1_700)),
        ..ran(report.id, JobStatus::Succeeded, at, 0)
    })
    .await
    .unwrap();
    // A running job is a fire but has not succeeded.
    tx.job_insert(&NewJob {
        finished_at: None,
        ..ran(report.id, JobStatus::Running, at, 1)
    })
    .await
    .unwrap();
    // A job superseded by a successor (the successor stands for the occurrence) is not a fire;
    // a discarded one (superseded with no successor) is the failure it was.
    let replaced = tx
        .job_insert(&ran(report.id, JobStatus::Failed, at, 5_000))
        .await
        .unwrap();
    let discarded = tx
        .job_insert(&ran(report.id, JobStatus::Failed, at, 0))
        .await
        .unwrap();
    for (id, successor) in [(replaced.id, Some(JobId::new())), (discarded.id, None)] {
        tx.job_set_superseded(&JobSetSuperseded {
            id,
            superseded_by: successor,
            now: at + Duration::seconds(10),
        })
        .await
        .unwrap()
        .expect("a failed job is superseded");
    }
    // A record of a run of missed occurrences counts each of them.
    tx.job_insert(&NewJob {
        status: JobStatus::Skipped,
        started_at: None,
        missed: Some(MissedOccurrences {
            first: at,
            last: at + Duration::minutes(2),
            count: 3,
        }),
        ..ran(report.id, JobStatus::Skipped, at, 0)
    })
    .await
    .unwrap();
    let found = tx
        .job_hours(&JobHoursQuery {
            schedule_id: None,
            from: hour,
            to: hour + Duration::hours(1),
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(found.hours.len(), 1);
    let hour_found = &found.hours[0];
    assert_eq!(
        (
            hour_found.fires,
            hour_found.succeeded,
            hour_found.failures,
            hour_found.skips
        ),
        (6, 1, 1, 3)
    );
    assert_eq!(found.hours[0].late_p50_ms, Some(1));
    assert_eq!(found.late_p99_ms, Some(1));
}

/// A retried job's lateness is its first attempt's, from the attempt ledger.
pub async fn job_hours_take_a_retried_jobs_first_attempt(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let hour = t0().duration_trunc(Duration::hours(1)).unwrap();
    let report = insert_schedule(&store, env, new_schedule("report", "billing")).await;
    let at = hour + Duration::minutes(5);
    let job = NewJob {
        status: JobStatus::Running,
        finished_at: None,
        ..ran(report.id, JobStatus::Running, at, 2_000)
    };
    let mut tx = store.tenant_begin(env).await.unwrap();
    let job = tx.job_insert(&job).await.unwrap();
    let finish = |attempt, outcome, now, started| JobFinish {
        id: job.id,
        attempt,
        epoch: 0,
        outcome,
        now,
        detail: AttemptDetail {
            started_at: Some(started),
            ..AttemptDetail::default()
        },
        lease_expired_by: None,
    };
    tx.job_finish_many(&[finish(
        1,
        JobOutcome::RetryPending {
            next_attempt_at: at + Duration::seconds(30),
            error: "503".into(),
        },
        at + Duration::seconds(3),
        at + Duration::seconds(2),
    )])
    .await
    .unwrap();
    let claimed = tx
        .job_claim(&JobClaim {
            id: job.id,
            now: at + Duration::seconds(30),
            lease_until: at + Duration::seconds(65),
        })
        .await
        .unwrap()
        .expect("the retry is claimed");
    assert_eq!(claimed.attempt, 2);
    tx.job_finish_many(&[finish(
        2,
        JobOutcome::Succeeded {
            result: serde_json::json!({}),
        },
        at + Duration::seconds(31),
        at + Duration::seconds(30),
    )])
    .await
    .unwrap();
    let found = tx
        .job_hours(&JobHoursQuery {
            schedule_id: None,
            from: hour,
            to: hour + Duration::hours(1),
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(found.hours.len(), 1);
    assert_eq!(found.hours[0].late_p50_ms, Some(2_000));
    assert_eq!(found.late_p99_ms, Some(2_000));
}
