//! PostgreSQL's retention functions cross tenants as SECURITY DEFINER, so they keep a floor of
//! their own: whatever cut-off the service role passes, nothing younger than one day by the
//! database's clock is removed, and older rows still go.

use chrono::{Duration, Utc};
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;
use sqlx::{Connection, Executor, PgConnection};

use crate::conformance::{insert_schedule, new_job, new_schedule};
use crate::support::PgTestDb;

#[tokio::test]
async fn the_purge_functions_never_remove_the_last_day() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let store = db.dyn_store();
    let env = EnvId::new();
    let now = Utc::now();
    let schedule = insert_schedule(&store, env, new_schedule("kept", "billing")).await;
    let mut tx = store.tenant_begin(env).await.unwrap();
    let mut ids = Vec::new();
    for (at, what) in [
        (now - Duration::hours(1), "recent"),
        (now - Duration::days(2), "old"),
    ] {
        tx.audit_insert(&NewAudit {
            actor: "tester".into(),
            action: what.into(),
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
        let mut job = new_job(schedule.id, JobStatus::Succeeded);
        job.now = at;
        ids.push((what, tx.job_insert(&job).await.unwrap().id));
    }
    for (at, what) in [
        (now - Duration::hours(1), "recent"),
        (now - Duration::days(2), "old"),
    ] {
        let gone = tx
            .schedule_insert(&new_schedule(what, "billing"))
            .await
            .unwrap();
        tx.schedule_set_deleted(&ScheduleSetDeleted {
            id: gone.id,
            actor: "tester".into(),
            now: at,
        })
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();

    // The service role, asking for everything: only the rows older than a day go.
    let mut conn = PgConnection::connect(&db.service_url).await.unwrap();
    conn.execute("SET search_path = cron").await.unwrap();
    for function in ["purge_audit", "purge_jobs", "purge_schedules"] {
        let removed: i64 =
            sqlx::query_scalar(&format!("SELECT cron.{function}('infinity', 10000)"))
                .fetch_one(&mut conn)
                .await
                .unwrap();
        assert_eq!(removed, 1, "{function} removed the old row only");
    }
    // Through the store's seam too: a cut-off in the future keeps the last day.
    let ahead = RetentionPurge {
        before: now + Duration::days(365),
        limit: 100,
    };
    assert_eq!(store.audit_purge(&ahead).await.unwrap(), 0);
    assert_eq!(store.jobs_purge(&ahead).await.unwrap(), 0);
    assert_eq!(store.schedules_purge(&ahead).await.unwrap(), 0);

    let mut tx = store.tenant_begin(env).await.unwrap();
    let journal = tx.audit_list(10).await.unwrap();
    assert_eq!(
        journal
            .iter()
            .map(|e| e.action.as_str())
            .collect::<Vec<_>>(),
        ["recent"]
    );
    for (what, id) in ids {
        assert_eq!(tx.job_get(id).await.unwrap().is_some(), what == "recent");
    }
    let deleted = tx
        .schedule_list(&ScheduleQuery {
            status: Some(ScheduleStatus::Deleted),
            include_deleted: true,
            limit: 100,
            ..ScheduleQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(
        deleted
            .iter()
            .map(|s| s.schedule_type.as_str())
            .collect::<Vec<_>>(),
        ["recent"]
    );
}

/// An answer written ahead has no foreign key to its job (its check locked the job's row in
/// every burst), so the purge deletes a purged job's answer itself; an answer whose job stays
/// stays too.
#[tokio::test]
async fn a_purged_job_takes_its_answer_written_ahead_with_it() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let store = db.dyn_store();
    let env = EnvId::new();
    let old = Utc::now() - Duration::days(2);
    let schedule = insert_schedule(&store, env, new_schedule("answered", "billing")).await;
    let mut tx = store.tenant_begin(env).await.unwrap();
    let mut finished = new_job(schedule.id, JobStatus::Succeeded);
    finished.now = old;
    let finished = tx.job_insert(&finished).await.unwrap().id;
    let mut recent = new_job(schedule.id, JobStatus::Succeeded);
    recent.now = Utc::now();
    let recent = tx.job_insert(&recent).await.unwrap().id;
    tx.commit().await.unwrap();

    // Answers left behind by a job that ended another way than its record (written as the
    // owner: the service role writes them only through `job_answers_put`).
    let mut owner = PgConnection::connect(&db.owner_url()).await.unwrap();
    for job in [finished, recent] {
        sqlx::query(
            "INSERT INTO cron.job_answers (job_id, env_id, attempt, answered_at, answer) \
             VALUES ($1, $2, 1, now(), '{\"succeeded\": {}}')",
        )
        .bind(job.0)
        .bind(env.0)
        .execute(&mut owner)
        .await
        .unwrap();
    }
    let purge = RetentionPurge {
        before: Utc::now() - Duration::days(1),
        limit: 100,
    };
    assert_eq!(store.jobs_purge(&purge).await.unwrap(), 1);
    let left: Vec<uuid::Uuid> =
        sqlx::query_scalar("SELECT job_id FROM cron.job_answers ORDER BY job_id")
            .fetch_all(&mut owner)
            .await
            .unwrap();
    assert_eq!(left, [recent.0], "the purged job's answer went with it");
}
