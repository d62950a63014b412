//! Migrations on an embedded store that already holds work: SQLite rebuilds the jobs table to
//! admit the `superseded` status (version 5) and the `scheduled` one (version 10), and every
//! row, column, index and foreign key survives it; version 19 renames the events already
//! written to their CloudEvents types.

use std::str::FromStr;

use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;
use sentin8_cron::store::migrations::SQLITE;
use sentin8_cron::store::{self, ConnectOptions};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions as _, Executor, Row, SqliteConnection};
use uuid::Uuid;

/// The jobs table's columns (name, type, not null, default, key position).
async fn columns(conn: &mut SqliteConnection) -> Vec<(String, String, i64, Option<String>, i64)> {
    sqlx::query(
        "SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info('jobs') ORDER BY cid",
    )
    .fetch_all(conn)
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
    .collect()
}

/// The jobs table's declared indexes (name, unique, partial) with their SQL, whitespace folded.
async fn indexes(conn: &mut SqliteConnection) -> Vec<(String, i64, i64, String)> {
    let mut found: Vec<(String, i64, i64, String)> = sqlx::query(
        "SELECT l.name, l.\"unique\", l.partial, m.sql FROM pragma_index_list('jobs') l \
           JOIN sqlite_master m ON m.type = 'index' AND m.name = l.name \
          WHERE l.origin = 'c'",
    )
    .fetch_all(conn)
    .await
    .unwrap()
    .iter()
    .map(|r| {
        let sql: String = r.get(3);
        (
            r.get(0),
            r.get(1),
            r.get(2),
            sql.split_whitespace().collect::<Vec<_>>().join(" "),
        )
    })
    .collect();
    found.sort();
    found
}

/// A fresh embedded database at schema `version`, as the migrations up to it left it.
async fn sqlite_at(version: i64) -> (tempfile::TempDir, String, SqliteConnection) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("old.db").display());
    let mut conn = SqliteConnectOptions::from_str(&url)
        .unwrap()
        .create_if_missing(true)
        .foreign_keys(true)
        .connect()
        .await
        .unwrap();
    conn.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, \
         checksum TEXT NOT NULL, applied_at INTEGER NOT NULL)",
    )
    .await
    .unwrap();
    let before: Vec<_> = SQLITE.iter().filter(|m| m.version <= version).collect();
    assert_eq!(before.last().map(|m| m.version), Some(version));
    for migration in before {
        sqlx::raw_sql(migration.sql)
            .execute(&mut conn)
            .await
            .unwrap();
        sqlx::query("INSERT INTO schema_migrations VALUES (?1, ?2, ?3, 0)")
            .bind(migration.version)
            .bind(migration.name)
            .bind(migration.checksum())
            .execute(&mut conn)
            .await
            .unwrap();
    }
    (dir, url, conn)
}

#[tokio::test]
async fn sqlite_keeps_jobs_dead_letters_and_keys_across_the_jobs_rebuild() {
    let (_dir, url, mut conn) = sqlite_at(4).await;
    let (env, schedule, job, dlq) = (
        Uuid::now_v7().to_string(),
        Uuid::now_v7().to_string(),
        Uuid::now_v7().to_string(),
        Uuid::now_v7().to_string(),
    );
    let (other, missed_job, leased_job) = (
        Uuid::now_v7().to_string(),
        Uuid::now_v7().to_string(),
        Uuid::now_v7().to_string(),
    );
    for statement in [
        format!(
            "INSERT INTO schedules (id, env_id, domain, schedule_type, kind, cron_expr, status, \
             next_run_at, created_at, updated_at, created_by, updated_by) VALUES ('{schedule}', \
             '{env}', 'billing', 'nightly', 'cron', '0 2 * * *', 'active', 10, 1, 1, 't', 't')"
        ),
        format!(
            "INSERT INTO jobs (id, schedule_id, env_id, status, attempt, scheduled_for, \
             finished_at, error, idempotency_key, created_at, updated_at) VALUES ('{job}', \
             '{schedule}', '{env}', 'failed', 1, 5, 6, 'proxy-back status 500', 'k', 5, 6)"
        ),
        format!(
            "INSERT INTO schedules (id, env_id, domain, schedule_type, kind, cron_expr, status, \
             next_run_at, created_at, updated_at, created_by, updated_by) VALUES ('{other}', \
             '{env}', 'billing', 'hourly', 'cron', '0 * * * *', 'active', 10, 1, 1, 't', 't')"
        ),
        format!(
            "INSERT INTO jobs (id, schedule_id, env_id, status, attempt, scheduled_for, \
             finished_at, error, idempotency_key, created_at, updated_at, missed_first, \
             missed_last, missed_count) VALUES ('{missed_job}', '{other}', '{env}', 'skipped', \
             0, 3, 4, 'missed', 'm', 4, 4, 3, 7, 5)"
        ),
        format!(
            "INSERT INTO jobs (id, schedule_id, env_id, status, attempt, scheduled_for, \
             started_at, idempotency_key, created_at, updated_at, lease_until) VALUES \
             ('{leased_job}', '{other}', '{env}', 'running', 1, 8, 8, 'l', 8, 8, 99)"
        ),
        format!(
            "INSERT INTO dlq (id, env_id, schedule_id, job_id, domain, schedule_type, attempts, \
             last_error, scheduled_for, landed_at) VALUES ('{dlq}', '{env}', '{schedule}', \
             '{job}', 'billing', 'nightly', 1, 'proxy-back status 500', 5, 6)"
        ),
        format!(
            "INSERT INTO audit_journal (id, env_id, actor, action, resource_type, resource_id, \
             at) VALUES ('{}', '{env}', 't', 'schedule.create', 'schedule', '{schedule}', 1)",
            Uuid::now_v7()
        ),
    ] {
        conn.execute(statement.as_str()).await.unwrap();
    }
    let (columns_v4, indexes_v4) = (columns(&mut conn).await, indexes(&mut conn).await);
    for kept in ["missed_first", "missed_last", "missed_count", "lease_until"] {
        assert!(
            columns_v4.iter().any(|c| c.0 == kept),
            "{kept} at version 4"
        );
    }
    assert!(
        indexes_v4.iter().any(|i| i.0 == "sentin8_cron_jobs_leases"),
        "{indexes_v4:?}"
    );
    drop(conn);

    let outcome = store::migrate(&url, false).await.unwrap();
    assert!(
        outcome
            .migrations
            .iter()
            .any(|m| m.version == 5 && m.applied)
    );
    let mut conn = SqliteConnectOptions::from_str(&url)
        .unwrap()
        .connect()
        .await
        .unwrap();
    // Every version-4 column, in order and with its type, null rule and default, then the new
    // one; every version-4 index unchanged but the index of running jobs by start (version 9
    // drops it), plus the new ones.
    let columns_v5 = columns(&mut conn).await;
    assert_eq!(columns_v5[..columns_v4.len()], columns_v4[..]);
    assert_eq!(
        columns_v5[columns_v4.len()..]
            .iter()
            .map(|c| c.0.as_str())
            .collect::<Vec<_>>(),
        // 0017 adds the overlap and backfill flags, 0018 the lease's fence and call mark.
        [
            "superseded_by",
            "concurrent",
            "backfill",
            "lease_epoch",
            "called_at"
        ]
    );
    let indexes_v5 = indexes(&mut conn).await;
    // Version 10 widens two partial indexes to take `scheduled` jobs in.
    let widened = [
        "sentin8_cron_jobs_open_per_schedule",
        "sentin8_cron_jobs_leases",
    ];
    for index in indexes_v4
        .iter()
        .filter(|i| i.0 != "sentin8_cron_jobs_running" && !widened.contains(&i.0.as_str()))
    {
        assert!(indexes_v5.contains(index), "{index:?} kept: {indexes_v5:?}");
    }
    for name in widened {
        let [old, new] = [&indexes_v4, &indexes_v5].map(|all| {
            all.iter()
                .find(|i| i.0 == name)
                .unwrap_or_else(|| panic!("{name}: {all:?}"))
        });
        assert_eq!((old.1, old.2), (new.1, new.2), "{name}");
        assert!(new.3.contains("'scheduled'"), "{new:?}");
    }
    assert!(
        !indexes_v5
            .iter()
            .any(|i| i.0 == "sentin8_cron_jobs_running"),
        "{indexes_v5:?}"
    );
    // The migration runs to the latest version: 0005 adds the retention index, 0006 the admin
    // read models' two, 0017 the buffered jobs', 0026 the open jobs' and the
    // unleased running ones'.
    let mut added: Vec<&str> = indexes_v5
        .iter()
        .filter(|index| !indexes_v4.contains(index) && !widened.contains(&index.0.as_str()))
        .map(|index| index.0.as_str())
        .collect();
    added.sort_unstable();
    assert_eq!(
        added,
        [
            "sentin8_cron_jobs_buffered",
            "sentin8_cron_jobs_by_env_schedule_scheduled",
            "sentin8_cron_jobs_by_env_scheduled",
            "sentin8_cron_jobs_finished",
            "sentin8_cron_jobs_open",
            "sentin8_cron_jobs_running_unleased",
        ],
        "{indexes_v5:?}"
    );
    let (first, last, count, lease): (Option<i64>, Option<i64>, i64, Option<i64>) = sqlx::query_as(
        "SELECT (SELECT missed_first FROM jobs WHERE id = ?1), \
                (SELECT missed_last FROM jobs WHERE id = ?1), \
                (SELECT missed_count FROM jobs WHERE id = ?1), \
                (SELECT lease_until FROM jobs WHERE id = ?2)",
    )
    .bind(&missed_job)
    .bind(&leased_job)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!((first, last, count, lease), (Some(3), Some(7), 5, Some(99)));
    drop(conn);
    let store = store::connect(&url, &ConnectOptions::default())
        .await
        .unwrap();
    let env = EnvId(env.parse().unwrap());
    let (schedule, job) = (
        ScheduleId(schedule.parse().unwrap()),
        JobId(job.parse().unwrap()),
    );
    let mut tx = store.tenant_begin(env).await.unwrap();
    let kept = tx.job_get(job).await.unwrap().expect("the job survived");
    assert_eq!(kept.status, JobStatus::Failed);
    assert_eq!(kept.superseded_by, None);
    let entry = tx
        .dlq_get(DlqId(dlq.parse().unwrap()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(entry.job_id, job);
    let journal = tx
        .audit_query(&AuditQuery {
            schedule_id: Some(schedule),
            limit: 10,
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(journal.len(), 1, "old entries are filterable by schedule");
    // The rebuilt table still enforces one open job per schedule and its foreign key.
    let pending = |id: JobId| NewJob {
        id,
        schedule_id: schedule,
        status: JobStatus::Pending,
        attempt: 0,
        scheduled_for: kept.scheduled_for,
        next_attempt_at: Some(kept.scheduled_for),
        started_at: None,
        finished_at: None,
        error: None,
        now: kept.scheduled_for,
        lease_until: None,
        missed: None,
        concurrent: false,
        backfill: false,
    };
    tx.job_insert(&pending(JobId::new())).await.unwrap();
    assert!(matches!(
        tx.job_insert(&pending(JobId::new())).await,
        Err(StoreError::Conflict(Conflict::OpenJobExists))
    ));
    drop(tx);
    let mut tx = store.tenant_begin(env).await.unwrap();
    let mut orphan = pending(JobId::new());
    orphan.schedule_id = ScheduleId::new();
    assert!(
        tx.job_insert(&orphan).await.is_err(),
        "the schedule key holds"
    );
}

/// Version 10 on an embedded store that holds a fire claimed ahead by the previous version (a
/// running first attempt with no start): it becomes `scheduled`, and every other job keeps its
/// status.
#[tokio::test]
async fn sqlite_turns_fires_held_by_the_previous_version_into_scheduled_jobs() {
    let (_dir, url, mut conn) = sqlite_at(9).await;
    let env = Uuid::now_v7().to_string();
    let (schedule, other, held, started) = (
        Uuid::now_v7().to_string(),
        Uuid::now_v7().to_string(),
        Uuid::now_v7().to_string(),
        Uuid::now_v7().to_string(),
    );
    for (id, name) in [(&schedule, "held"), (&other, "started")] {
        conn.execute(
            format!(
                "INSERT INTO schedules (id, env_id, domain, schedule_type, kind, cron_expr, \
                 status, next_run_at, created_at, updated_at, created_by, updated_by) VALUES \
                 ('{id}', '{env}', 'billing', '{name}', 'cron', '0 2 * * *', 'active', 10, 1, 1, \
                 't', 't')"
            )
            .as_str(),
        )
        .await
        .unwrap();
    }
    for (id, schedule, started_at) in [(&held, &schedule, "NULL"), (&started, &other, "8")] {
        conn.execute(
            format!(
                "INSERT INTO jobs (id, schedule_id, env_id, status, attempt, scheduled_for, \
                 started_at, idempotency_key, created_at, updated_at, lease_until) VALUES \
                 ('{id}', '{schedule}', '{env}', 'running', 1, 8, {started_at}, 'k{id}', 5, 5, 99)"
            )
            .as_str(),
        )
        .await
        .unwrap();
    }
    drop(conn);
    store::migrate(&url, false).await.unwrap();
    let store = store::connect(&url, &ConnectOptions::default())
        .await
        .unwrap();
    let mut tx = store
        .tenant_begin(EnvId(env.parse().unwrap()))
        .await
        .unwrap();
    let status = |job: Option<Job>| job.map(|j| (j.status, j.attempt, j.started_at.is_some()));
    assert_eq!(
        status(tx.job_get(JobId(held.parse().unwrap())).await.unwrap()),
        Some((JobStatus::Scheduled, 1, false))
    );
    assert_eq!(
        status(tx.job_get(JobId(started.parse().unwrap())).await.unwrap()),
        Some((JobStatus::Running, 1, true))
    );
    // Still the schedule's one open job.
    let open = tx
        .job_get_open(ScheduleId(schedule.parse().unwrap()))
        .await
        .unwrap();
    assert_eq!(open.map(|j| j.status), Some(JobStatus::Scheduled));
}

/// Version 19 on an embedded store whose outbox holds events of the envelope before
/// CloudEvents, relayed and not: each takes its new type, its payload loses the two fields
/// the envelope now carries, and an event of a type it does not know is left as it was.
#[tokio::test]
async fn sqlite_renames_the_events_already_written_to_their_cloudevents_types() {
    let (_dir, url, mut conn) = sqlite_at(18).await;
    let env = Uuid::now_v7().to_string();
    let schedule = Uuid::now_v7().to_string();
    let mut written = Vec::new();
    for (i, (old, _)) in sentin8_cron::core::events::RENAMED.iter().enumerate() {
        let id = Uuid::now_v7().to_string();
        let relayed = if i % 2 == 0 { "NULL" } else { "9" };
        conn.execute(
            format!(
                "INSERT INTO outbox (id, env_id, schedule_id, event_type, payload, created_at, \
                 relayed_at) VALUES ('{id}', '{env}', '{schedule}', '{old}', \
                 '{{\"event_type\": \"{old}\", \"at\": \"2030-01-01T00:00:00Z\", \"status\": \
                 \"active\"}}', 5, {relayed})"
            )
            .as_str(),
        )
        .await
        .unwrap();
        written.push(id);
    }
    conn.execute(
        format!(
            "INSERT INTO outbox (id, env_id, schedule_id, event_type, payload, created_at) VALUES \
             ('{}', '{env}', '{schedule}', 'acme:other', '{{\"at\": 1}}', 5)",
            Uuid::now_v7()
        )
        .as_str(),
    )
    .await
    .unwrap();
    drop(conn);
    store::migrate(&url, false).await.unwrap();
    let mut conn = SqliteConnectOptions::from_str(&url)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let rows = sqlx::query("SELECT id, event_type, payload FROM outbox ORDER BY seq")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert_eq!(rows.len(), written.len() + 1);
    for ((row, id), (_, new)) in rows
        .iter()
        .zip(&written)
        .zip(sentin8_cron::core::events::RENAMED)
    {
        assert_eq!(row.get::<String, _>(0), *id);
        assert_eq!(row.get::<String, _>(1), *new);
        let payload: serde_json::Value = serde_json::from_str(&row.get::<String, _>(2)).unwrap();
        assert_eq!(payload, serde_json::json!({"status": "active"}));
    }
    let foreign = rows.last().unwrap();
    assert_eq!(foreign.get::<String, _>(1), "acme:other");
    assert_eq!(foreign.get::<String, _>(2), "{\"at\": 1}");
}
