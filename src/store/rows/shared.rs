//! The tenant operations both backends run the same way: reads by id and small lists whose SQL
//! differs only in placeholders. `tx_macros.rs` puts them, and the named transitions, into each
//! backend's `TenantTx` implementation, so each is written once.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{
    ATTEMPT_COLUMNS, AUDIT_COLUMNS, Cells, DLQ_COLUMNS, JOB_COLUMNS, OPEN_JOB, OUTBOX_COLUMNS,
    RowCells, SCHEDULE_COLUMNS, Sql, TenantRows, Val, map_row, map_rows,
};
use crate::core::model::*;
use crate::core::store::*;

/// A statement with the transaction's environment as its first value; `text` builds the SQL
/// from that placeholder and the ones it adds.
pub(super) fn scoped<T: TenantRows>(tx: &T, text: impl FnOnce(&str, &mut Sql) -> String) -> Sql {
    let mut sql = Sql::new(T::PLACEHOLDER);
    let env = sql.val(Val::uuid(tx.tenant().0));
    sql.text = text(&env, &mut sql);
    sql
}

/// The row of `table` with `id` in the transaction's environment; `lock` ends the statement
/// (`""`, or a backend's [`TenantRows::FOR_UPDATE`]).
pub(crate) async fn row_by_id<T: TenantRows>(
    tx: &mut T,
    table: &str,
    columns: &str,
    id: Uuid,
    lock: &str,
) -> StoreResult<Option<T::Row>> {
    let sql = scoped(tx, |env, sql| {
        let id = sql.val(Val::uuid(id));
        format!("SELECT {columns} FROM {table} WHERE env_id = {env} AND id = {id}{lock}")
    });
    tx.fetch_optional(&sql).await
}

/// The schedule with `id`, read with `lock` at its end.
pub(crate) async fn schedule_by_id<T: TenantRows>(
    tx: &mut T,
    id: ScheduleId,
    lock: &str,
) -> StoreResult<Option<Schedule>> {
    let row = row_by_id(tx, "schedules", SCHEDULE_COLUMNS, id.0, lock).await?;
    map_row(row.as_ref(), "schedules", super::schedule)
}

/// The active cron schedules in `timezone`, in id order, their rows locked. A row another
/// transaction holds (a claim moving that schedule's next fire itself) is left out rather than
/// waited for, so this never waits on, or deadlocks with, a claim.
pub(crate) async fn schedules_in_zone<T: TenantRows>(
    tx: &mut T,
    timezone: &str,
) -> StoreResult<Vec<Schedule>> {
    let sql = scoped(tx, |env, sql| {
        let timezone = sql.val(Val::text(timezone));
        format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules \
             WHERE env_id = {env} AND status = 'active' AND kind = 'cron' \
               AND timezone = {timezone} \
             ORDER BY id{}",
            T::FOR_UPDATE_SKIP_LOCKED
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "schedules", super::schedule)
}

/// Deletes the row of `table` with `id`; whether there was one.
pub(crate) async fn delete_by_id<T: TenantRows>(
    tx: &mut T,
    table: &str,
    id: Uuid,
) -> StoreResult<bool> {
    let sql = scoped(tx, |env, sql| {
        let id = sql.val(Val::uuid(id));
        format!("DELETE FROM {table} WHERE env_id = {env} AND id = {id}")
    });
    Ok(tx.execute(&sql).await? == 1)
}

/// The answer written ahead of its record for `attempt` of job `id`.
pub(crate) async fn answer_of<T: TenantRows>(
    tx: &mut T,
    id: JobId,
    attempt: i32,
) -> StoreResult<Option<JobAnswer>> {
    let sql = scoped(tx, |env, sql| {
        let id = sql.val(Val::uuid(id.0));
        let attempt = sql.val(Val::I32(attempt));
        format!(
            "SELECT {} FROM job_answers WHERE env_id = {env} AND job_id = {id} \
             AND attempt = {attempt}",
            super::JOB_ANSWER_COLUMNS
        )
    });
    let row = tx.fetch_optional(&sql).await?;
    map_row(row.as_ref(), "job_answers", super::job_answer)
}

/// Deletes the answers written ahead for `ids`, in statements of a bounded number of values.
pub(crate) async fn answers_forget<T: TenantRows>(tx: &mut T, ids: &[JobId]) -> StoreResult<u64> {
    let mut forgotten = 0;
    for chunk in ids.chunks(500) {
        let sql = scoped(tx, |env, sql| {
            let list: Vec<String> = chunk.iter().map(|id| sql.val(Val::uuid(id.0))).collect();
            format!(
                "DELETE FROM job_answers WHERE env_id = {env} AND job_id IN ({})",
                list.join(", ")
            )
        });
        forgotten += tx.execute(&sql).await?;
    }
    Ok(forgotten)
}

/// Active schedules with a next fire, soonest first.
pub(crate) async fn schedules_upcoming<T: TenantRows>(
    tx: &mut T,
    limit: u32,
) -> StoreResult<Vec<Schedule>> {
    let sql = scoped(tx, |env, sql| {
        let limit = sql.val(Val::I64(i64::from(limit)));
        format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules \
             WHERE env_id = {env} AND status = 'active' AND next_run_at IS NOT NULL \
             ORDER BY next_run_at, id LIMIT {limit}"
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "schedules", super::schedule)
}

/// The first audit entries, oldest first.
pub(crate) async fn audit_first<T: TenantRows>(
    tx: &mut T,
    limit: u32,
) -> StoreResult<Vec<AuditEntry>> {
    let sql = scoped(tx, |env, sql| {
        let limit = sql.val(Val::I64(i64::from(limit)));
        format!(
            "SELECT {AUDIT_COLUMNS} FROM audit_journal WHERE env_id = {env} \
             ORDER BY at, id LIMIT {limit}"
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "audit_journal", super::audit)
}

/// Outbox events after `after_seq`, in order.
pub(crate) async fn outbox_after<T: TenantRows>(
    tx: &mut T,
    after_seq: i64,
    limit: u32,
) -> StoreResult<Vec<OutboxEvent>> {
    let sql = scoped(tx, |env, sql| {
        let after = sql.val(Val::I64(after_seq));
        let limit = sql.val(Val::I64(i64::from(limit)));
        format!(
            "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE env_id = {env} AND seq > {after} \
             ORDER BY seq LIMIT {limit}"
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "outbox", super::outbox)
}

/// The environment's counts.
pub(crate) async fn counts<T: TenantRows>(tx: &mut T) -> StoreResult<EnvCounts> {
    let sql = scoped(tx, |env, _| super::env_counts_sql(env));
    let row = tx.fetch_one(&sql).await?;
    super::env_counts(&row.cells("counts"))
}

/// Schedule `id`'s jobs: its occurrences since `since` by outcome, and its open jobs.
pub(crate) async fn schedule_job_counts<T: TenantRows>(
    tx: &mut T,
    id: ScheduleId,
    since: DateTime<Utc>,
) -> StoreResult<ScheduleJobCounts> {
    let sql = scoped(tx, |env, sql| {
        let id = sql.val(Val::uuid(id.0));
        let since = sql.val(Val::ts(since));
        let recent = |condition: &str, what: &str| {
            format!(
                "coalesce(sum(CASE WHEN scheduled_for >= {since} AND {condition} THEN {what} \
                 ELSE 0 END), 0)"
            )
        };
        let open = |status: &str| {
            format!("coalesce(sum(CASE WHEN status = '{status}' THEN 1 ELSE 0 END), 0)")
        };
        format!(
            "SELECT {} AS succeeded, {} AS failed, {} AS skipped, {} AS missed, \
                    {} AS backfilled, {} AS scheduled, {} AS pending, {} AS running, \
                    {} AS buffered \
             FROM jobs WHERE env_id = {env} AND schedule_id = {id}",
            recent("status = 'succeeded'", "1"),
            recent("status = 'failed'", "1"),
            recent("status = 'skipped' AND missed_count = 0", "1"),
            recent("missed_count > 0", "missed_count"),
            recent("backfill", "1"),
            open("scheduled"),
            open("pending"),
            open("running"),
            open("buffered"),
        )
    });
    let row = tx.fetch_one(&sql).await?;
    super::schedule_job_counts_of(&row.cells("jobs"))
}

/// This environment's jobs waiting their turn (`buffered`).
pub(crate) async fn waiting_count<T: TenantRows>(tx: &mut T) -> StoreResult<u64> {
    let sql = scoped(tx, |env, _| {
        format!("SELECT count(*) AS waiting FROM jobs WHERE env_id = {env} AND status = 'buffered'")
    });
    let row = tx.fetch_one(&sql).await?;
    let waiting = row.cells("jobs").i64("waiting")?;
    Ok(u64::try_from(waiting).unwrap_or(0))
}

/// The live schedule of `domain` and `schedule_type`.
pub(crate) async fn schedule_by_type<T: TenantRows>(
    tx: &mut T,
    domain: &str,
    schedule_type: &str,
) -> StoreResult<Option<Schedule>> {
    let sql = scoped(tx, |env, sql| {
        let domain = sql.val(Val::text(domain));
        let schedule_type = sql.val(Val::text(schedule_type));
        format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE env_id = {env} AND domain = {domain} \
             AND schedule_type = {schedule_type} AND status <> 'deleted'"
        )
    });
    let row = tx.fetch_optional(&sql).await?;
    map_row(row.as_ref(), "schedules", super::schedule)
}

/// A page of jobs, newest first, filtered as `query` says.
pub(crate) async fn jobs_page<T: TenantRows>(
    tx: &mut T,
    query: &JobQuery,
) -> StoreResult<Vec<Job>> {
    let sql = scoped(tx, |env, sql| {
        let schedule = sql.val(Val::Uuid(query.schedule_id.map(|id| id.0)));
        let status = sql.val(Val::Text(query.status.map(|s| s.as_str().to_owned())));
        let before = sql.val(Val::Uuid(query.before.map(|id| id.0)));
        let limit = sql.val(Val::I64(i64::from(query.limit)));
        let labelled = super::of_selected_schedules::<T>(sql, env, query.schedule_labels.as_ref());
        format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE env_id = {env} \
               AND ({schedule} IS NULL OR schedule_id = {schedule}) \
               AND ({status} IS NULL OR status = {status}){labelled} \
               AND ({before} IS NULL OR id < {before}) \
             ORDER BY id DESC LIMIT {limit}"
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "jobs", super::job)
}

/// A page of dead letters, newest first, filtered as `query` says.
pub(crate) async fn dlq_page<T: TenantRows>(
    tx: &mut T,
    query: &DlqQuery,
) -> StoreResult<Vec<DlqEntry>> {
    let sql = scoped(tx, |env, sql| {
        let domain = sql.val(Val::Text(query.domain.clone()));
        let schedule = sql.val(Val::Uuid(query.schedule_id.map(|id| id.0)));
        let job = sql.val(Val::Uuid(query.job_id.map(|id| id.0)));
        let before = sql.val(Val::Uuid(query.before.map(|id| id.0)));
        let limit = sql.val(Val::I64(i64::from(query.limit)));
        let labelled = super::of_selected_schedules::<T>(sql, env, query.schedule_labels.as_ref());
        format!(
            "SELECT {DLQ_COLUMNS} FROM dlq WHERE env_id = {env} \
               AND ({domain} IS NULL OR domain = {domain}) \
               AND ({schedule} IS NULL OR schedule_id = {schedule}) \
               AND ({job} IS NULL OR job_id = {job}){labelled} \
               AND ({before} IS NULL OR id < {before}) \
             ORDER BY id DESC LIMIT {limit}"
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "dlq", super::dlq)
}

/// Claims a pending retry that is due: it becomes the next running attempt, leased.
pub(crate) async fn claim_retry<T: TenantRows>(
    tx: &mut T,
    claim: &JobClaim,
) -> StoreResult<Option<Job>> {
    let sql = scoped(tx, |env, sql| {
        let id = sql.val(Val::uuid(claim.id.0));
        let now = sql.val(Val::ts(claim.now));
        let lease = sql.val(Val::ts(claim.lease_until));
        format!(
            "UPDATE jobs SET status = 'running', attempt = attempt + 1, started_at = {now}, \
             next_attempt_at = NULL, updated_at = {now}, lease_until = {lease}, \
             lease_epoch = lease_epoch + 1, called_at = NULL \
             WHERE env_id = {env} AND id = {id} AND status = 'pending' \
               AND next_attempt_at <= {now} \
             RETURNING {JOB_COLUMNS}"
        )
    });
    let row = tx.fetch_optional(&sql).await?;
    map_row(row.as_ref(), "jobs", super::job)
}

/// An open job of a schedule: its fire claimed ahead if it has one, else its oldest (one
/// unless the schedule lets jobs run side by side).
pub(crate) async fn open_job<T: TenantRows>(
    tx: &mut T,
    schedule_id: ScheduleId,
) -> StoreResult<Option<Job>> {
    let sql = scoped(tx, |env, sql| {
        let schedule = sql.val(Val::uuid(schedule_id.0));
        format!(
            "SELECT {JOB_COLUMNS} FROM jobs \
             WHERE env_id = {env} AND schedule_id = {schedule} AND {OPEN_JOB} \
             ORDER BY status = 'scheduled' DESC, scheduled_for LIMIT 1"
        )
    });
    let row = tx.fetch_optional(&sql).await?;
    map_row(row.as_ref(), "jobs", super::job)
}

/// A schedule's jobs in `statuses`: regular occurrences before backfilled ones, oldest first.
pub(crate) async fn jobs_in_status<T: TenantRows>(
    tx: &mut T,
    schedule_id: ScheduleId,
    statuses: &[JobStatus],
) -> StoreResult<Vec<Job>> {
    if statuses.is_empty() {
        return Ok(Vec::new());
    }
    let sql = scoped(tx, |env, sql| {
        let schedule = sql.val(Val::uuid(schedule_id.0));
        let names: Vec<String> = statuses
            .iter()
            .map(|s| sql.val(Val::text(s.as_str())))
            .collect();
        format!(
            "SELECT {JOB_COLUMNS} FROM jobs \
             WHERE env_id = {env} AND schedule_id = {schedule} AND status IN ({}) \
             ORDER BY backfill, scheduled_for, id",
            names.join(", ")
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "jobs", super::job)
}

/// The first `limit` buffered jobs of a schedule with the given `concurrent` flag, in the order
/// they are released. The status is written into the statement, not bound, so that both
/// databases read the partial index of buffered jobs (`schedule_id, backfill, scheduled_for`)
/// and stop after `limit` rows, however long the backlog.
pub(crate) async fn buffered_first<T: TenantRows>(
    tx: &mut T,
    schedule_id: ScheduleId,
    concurrent: bool,
    limit: usize,
) -> StoreResult<Vec<Job>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let sql = scoped(tx, |env, sql| {
        let schedule = sql.val(Val::uuid(schedule_id.0));
        let concurrent = sql.val(Val::Bool(concurrent));
        let limit = sql.val(Val::I64(i64::try_from(limit).unwrap_or(i64::MAX)));
        format!(
            "SELECT {JOB_COLUMNS} FROM jobs \
             WHERE schedule_id = {schedule} AND status = 'buffered' AND env_id = {env} \
             AND concurrent = {concurrent} \
             ORDER BY backfill, scheduled_for, id LIMIT {limit}"
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "jobs", super::job)
}

/// A job's attempts, first to last.
pub(crate) async fn attempts_of<T: TenantRows>(
    tx: &mut T,
    job_id: JobId,
) -> StoreResult<Vec<JobAttempt>> {
    let sql = scoped(tx, |env, sql| {
        let job = sql.val(Val::uuid(job_id.0));
        format!(
            "SELECT {ATTEMPT_COLUMNS} FROM job_attempts WHERE env_id = {env} AND job_id = {job} \
             ORDER BY attempt"
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "job_attempts", super::attempt)
}

/// A page of the audit journal, newest first, filtered as `query` says.
pub(crate) async fn audit_page<T: TenantRows>(
    tx: &mut T,
    query: &AuditQuery,
) -> StoreResult<Vec<AuditEntry>> {
    let sql = scoped(tx, |env, sql| {
        let schedule = sql.val(Val::Uuid(query.schedule_id.map(|id| id.0)));
        let actor = sql.val(Val::Text(query.actor.clone()));
        let since = sql.val(Val::Ts(query.since));
        let before = sql.val(Val::Uuid(query.before));
        let limit = sql.val(Val::I64(i64::from(query.limit)));
        format!(
            "SELECT {AUDIT_COLUMNS} FROM audit_journal WHERE env_id = {env} \
               AND ({schedule} IS NULL OR schedule_id = {schedule}) \
               AND ({actor} IS NULL OR actor = {actor}) \
               AND ({since} IS NULL OR at >= {since}) \
               AND ({before} IS NULL OR id < {before}) \
             ORDER BY id DESC LIMIT {limit}"
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "audit_journal", super::audit)
}

/// A page of schedules in id order, filtered as `query` says.
pub(crate) async fn schedules_page<T: TenantRows>(
    tx: &mut T,
    query: &ScheduleQuery,
) -> StoreResult<Vec<Schedule>> {
    let sql = scoped(tx, |env, sql| {
        let domain = sql.val(Val::Text(query.domain.clone()));
        let status = sql.val(Val::Text(query.status.map(|s| s.as_str().to_owned())));
        let deleted = sql.val(Val::Bool(query.include_deleted));
        let after = sql.val(Val::Uuid(query.after.map(|id| id.0)));
        let limit = sql.val(Val::I64(i64::from(query.limit)));
        let needle = sql.val(Val::Text(query.type_contains.clone()));
        let contains = (T::CONTAINS_IGNORING_CASE)("schedule_type", &needle);
        let labels = super::selector_conditions::<T>(sql, query.labels.as_ref());
        format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE env_id = {env} \
               AND ({domain} IS NULL OR domain = {domain}) \
               AND ({status} IS NULL OR status = {status}) \
               AND ({deleted} OR status <> 'deleted') \
               AND ({after} IS NULL OR id > {after}) \
               AND ({needle} IS NULL OR {contains}){labels} \
             ORDER BY id LIMIT {limit}"
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "schedules", super::schedule)
}
