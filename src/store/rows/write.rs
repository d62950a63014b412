//! The write side of the rows: the values each insert and named transition binds (through
//! the statement builder of [`super::sql`]).

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::sql::{Placeholder, Sql, Val};
use super::{JOB_COLUMNS, RowCells, SCHEDULE_COLUMNS};
use crate::core::model::*;
use crate::core::store::*;

/// The one place a new schedule's columns are bound.
pub(crate) fn schedule_insert(env: EnvId, new: &NewSchedule) -> Vec<(&'static str, Val)> {
    let mut columns = vec![
        ("id", Val::uuid(new.id.0)),
        ("env_id", Val::uuid(env.0)),
        ("domain", Val::text(&new.domain)),
    ];
    columns.extend(schedule_definition(&ScheduleDefinition {
        schedule_type: new.schedule_type.clone(),
        timing: new.timing.clone(),
        target: new.target.clone(),
        payload: new.payload.clone(),
        max_retries: new.max_retries,
        policies: new.policies,
        remaining_runs: new.remaining_runs,
        labels: new.labels.clone(),
        exclude: new.exclude.clone(),
    }));
    columns.extend([
        ("status", Val::text(new.status.as_str())),
        ("next_run_at", Val::Ts(new.next_run_at)),
        ("retry_count", Val::I32(0)),
        ("created_at", Val::ts(new.now)),
        ("updated_at", Val::ts(new.now)),
        ("created_by", Val::text(&new.actor)),
        ("updated_by", Val::text(&new.actor)),
    ]);
    columns
}

/// The one place a schedule's definition columns are bound.
pub(crate) fn schedule_definition(d: &ScheduleDefinition) -> Vec<(&'static str, Val)> {
    // The typed timing is stored flat; a one-shot stores UTC and the default DST policies.
    let timing = d.timing.columns();
    vec![
        ("schedule_type", Val::text(&d.schedule_type)),
        ("kind", Val::text(timing.kind.as_str())),
        ("cron_expr", Val::Text(timing.cron_expr)),
        ("timezone", Val::text(&timing.timezone)),
        ("run_at", Val::Ts(timing.run_at)),
        ("on_dst_gap", Val::text(timing.on_dst_gap.as_str())),
        ("on_dst_repeat", Val::text(timing.on_dst_repeat.as_str())),
        ("target_config", Val::json(d.target.config())),
        ("payload", Val::json(&d.payload)),
        ("max_retries", Val::I32(d.max_retries)),
        ("overlap", Val::text(d.policies.overlap.as_str())),
        (
            "catchup_window_ms",
            Val::I64(millis(d.policies.catchup_window)),
        ),
        ("max_jitter_ms", Val::I64(millis(d.policies.max_jitter))),
        ("start_at", Val::Ts(d.policies.start_at)),
        ("end_at", Val::Ts(d.policies.end_at)),
        ("pause_on_failure", Val::Bool(d.policies.pause_on_failure)),
        (
            "after_completion",
            Val::text(d.policies.after_completion.as_str()),
        ),
        ("remaining_runs", Val::Opt32(d.remaining_runs)),
        ("labels", Val::json(&d.labels.to_json())),
        ("exclude", Val::json(&super::exclude_json(&d.exclude))),
    ]
}

/// A policy duration as stored: whole milliseconds.
fn millis(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The one place a new job's columns are bound.
pub(crate) fn job_insert(env: EnvId, new: &NewJob) -> Vec<(&'static str, Val)> {
    vec![
        ("id", Val::uuid(new.id.0)),
        ("schedule_id", Val::uuid(new.schedule_id.0)),
        ("env_id", Val::uuid(env.0)),
        ("status", Val::text(new.status.as_str())),
        ("attempt", Val::I32(new.attempt)),
        ("scheduled_for", Val::ts(new.scheduled_for)),
        ("next_attempt_at", Val::Ts(new.next_attempt_at)),
        ("started_at", Val::Ts(new.started_at)),
        ("finished_at", Val::Ts(new.finished_at)),
        ("error", Val::Text(new.error.clone())),
        (
            "idempotency_key",
            Val::text(Job::idempotency_key_for(new.schedule_id, new.id)),
        ),
        ("created_at", Val::ts(new.now)),
        ("updated_at", Val::ts(new.now)),
        ("lease_until", Val::Ts(new.lease_until)),
        ("concurrent", Val::Bool(new.concurrent)),
        ("backfill", Val::Bool(new.backfill)),
        ("missed_first", Val::Ts(new.missed.map(|m| m.first))),
        ("missed_last", Val::Ts(new.missed.map(|m| m.last))),
        (
            "missed_count",
            Val::I32(
                new.missed
                    .map_or(0, |m| i32::try_from(m.count).unwrap_or(i32::MAX)),
            ),
        ),
    ]
}

/// The one place a new dead-letter entry's columns are bound.
pub(crate) fn dlq_insert(env: EnvId, new: &NewDlqEntry) -> Vec<(&'static str, Val)> {
    vec![
        ("id", Val::uuid(new.id.0)),
        ("env_id", Val::uuid(env.0)),
        ("schedule_id", Val::uuid(new.schedule_id.0)),
        ("job_id", Val::uuid(new.job_id.0)),
        ("domain", Val::text(&new.domain)),
        ("schedule_type", Val::text(&new.schedule_type)),
        ("payload", Val::json(&new.payload)),
        ("attempts", Val::I32(new.attempts)),
        ("last_error", Val::text(&new.last_error)),
        ("scheduled_for", Val::ts(new.scheduled_for)),
        ("landed_at", Val::ts(new.now)),
        ("backfill", Val::Bool(new.backfill)),
    ]
}

/// The one place an audit entry's columns are bound (its id is minted here).
pub(crate) fn audit_insert(env: EnvId, entry: &NewAudit) -> Vec<(&'static str, Val)> {
    vec![
        ("id", Val::uuid(Uuid::now_v7())),
        ("env_id", Val::uuid(env.0)),
        ("actor", Val::text(&entry.actor)),
        ("action", Val::text(&entry.action)),
        ("resource_type", Val::text(&entry.resource_type)),
        ("resource_id", Val::text(&entry.resource_id)),
        ("before", Val::Json(entry.before.clone())),
        ("after", Val::Json(entry.after.clone())),
        ("correlation_id", Val::Text(entry.correlation_id.clone())),
        ("at", Val::ts(entry.now)),
        ("schedule_id", Val::Uuid(entry.schedule_id.map(|id| id.0))),
    ]
}

/// A new outbox event's columns (one row; PostgreSQL appends batches with its own statement).
pub(crate) fn outbox_insert(env: EnvId, event: &NewEvent) -> Vec<(&'static str, Val)> {
    vec![
        ("id", Val::uuid(event.id.0)),
        ("env_id", Val::uuid(env.0)),
        ("schedule_id", Val::Uuid(event.schedule_id.map(|id| id.0))),
        ("event_type", Val::text(&event.event_type)),
        ("payload", Val::json(&event.payload)),
        ("created_at", Val::ts(event.now)),
    ]
}

/// A named change of one row: the columns it writes and the rows it may touch.
pub(crate) struct Transition {
    pub(crate) assignments: Vec<(&'static str, Val)>,
    pub(crate) guard: Option<&'static str>,
}

pub(crate) fn schedule_set_definition(c: &ScheduleSetDefinition) -> Transition {
    let mut assignments = schedule_definition(&c.definition);
    assignments.extend([
        ("status", Val::text(c.status.as_str())),
        ("next_run_at", Val::Ts(c.next_run_at)),
        ("updated_at", Val::ts(c.now)),
        ("updated_by", Val::text(&c.actor)),
    ]);
    Transition {
        assignments,
        guard: None,
    }
}

pub(crate) fn schedule_set_status(c: &ScheduleSetStatus) -> Transition {
    Transition {
        assignments: vec![
            ("status", Val::text(c.status.as_str())),
            ("updated_at", Val::ts(c.now)),
        ],
        guard: None,
    }
}

pub(crate) fn schedule_set_next_run(c: &ScheduleSetNextRun) -> Transition {
    Transition {
        assignments: vec![
            ("next_run_at", Val::ts(c.next_run_at)),
            ("updated_at", Val::ts(c.now)),
        ],
        guard: Some("status = 'active'"),
    }
}

pub(crate) fn schedule_set_deleted(c: &ScheduleSetDeleted) -> Transition {
    Transition {
        assignments: vec![
            ("status", Val::text(ScheduleStatus::Deleted.as_str())),
            ("next_run_at", Val::Ts(None)),
            ("retry_count", Val::I32(0)),
            ("updated_at", Val::ts(c.now)),
            ("updated_by", Val::text(&c.actor)),
        ],
        guard: None,
    }
}

pub(crate) fn schedule_set_outcome(c: &ScheduleSetOutcome) -> Transition {
    let mut assignments = vec![
        ("retry_count", Val::I32(c.retry_count)),
        ("updated_at", Val::ts(c.now)),
    ];
    match c.status {
        Some(ScheduleStatus::Completed) => {
            assignments.push(("status", Val::text(ScheduleStatus::Completed.as_str())));
            assignments.push(("next_run_at", Val::Ts(None)));
        }
        Some(status) => assignments.push(("status", Val::text(status.as_str()))),
        None => {}
    }
    Transition {
        assignments,
        guard: None,
    }
}

pub(crate) fn job_set_pending(c: &JobSetPending) -> Transition {
    Transition {
        assignments: vec![
            ("status", Val::text(JobStatus::Pending.as_str())),
            ("next_attempt_at", Val::ts(c.next_attempt_at)),
            ("finished_at", Val::Ts(None)),
            ("updated_at", Val::ts(c.now)),
        ],
        guard: Some("status = 'failed'"),
    }
}

pub(crate) fn job_set_superseded(c: &JobSetSuperseded) -> Transition {
    Transition {
        assignments: vec![
            ("status", Val::text(JobStatus::Superseded.as_str())),
            ("superseded_by", Val::Uuid(c.superseded_by.map(|id| id.0))),
            ("updated_at", Val::ts(c.now)),
        ],
        guard: Some("status = 'failed'"),
    }
}

pub(crate) fn job_cancel(c: &JobCancel) -> Transition {
    Transition {
        assignments: vec![
            ("status", Val::text(JobStatus::Failed.as_str())),
            ("finished_at", Val::ts(c.now)),
            ("error", Val::text(&c.error)),
            ("updated_at", Val::ts(c.now)),
        ],
        guard: Some("status = 'pending'"),
    }
}

pub(crate) fn job_release_buffered(c: &JobRelease) -> Transition {
    Transition {
        assignments: vec![
            ("status", Val::text(JobStatus::Pending.as_str())),
            ("next_attempt_at", Val::ts(c.now)),
            ("updated_at", Val::ts(c.now)),
        ],
        // One that excludes others waits while its schedule has such an open job (the unique
        // index would refuse it).
        guard: Some(
            "status = 'buffered' AND (concurrent OR NOT EXISTS (\
             SELECT 1 FROM jobs o WHERE o.schedule_id = jobs.schedule_id \
             AND o.status IN ('scheduled', 'pending', 'running') AND NOT o.concurrent))",
        ),
    }
}

pub(crate) fn job_drop_buffered(c: &JobCancel) -> Transition {
    Transition {
        assignments: vec![
            ("status", Val::text(JobStatus::Skipped.as_str())),
            ("finished_at", Val::ts(c.now)),
            ("error", Val::text(&c.error)),
            ("updated_at", Val::ts(c.now)),
        ],
        guard: Some("status = 'buffered'"),
    }
}

pub(crate) fn job_withdraw(c: &JobWithdraw) -> Transition {
    Transition {
        assignments: vec![
            ("status", Val::text(JobStatus::Skipped.as_str())),
            ("started_at", Val::Ts(None)),
            ("lease_until", Val::Ts(None)),
            ("finished_at", Val::ts(c.now)),
            ("error", Val::text(&c.reason)),
            ("updated_at", Val::ts(c.now)),
        ],
        guard: Some(if c.handed_off {
            "status = 'running' AND attempt = 1"
        } else {
            "status = 'scheduled'"
        }),
    }
}

pub(crate) fn job_replace(c: &JobReplace) -> Transition {
    Transition {
        assignments: vec![
            ("status", Val::text(JobStatus::Cancelled.as_str())),
            ("lease_until", Val::Ts(None)),
            ("finished_at", Val::ts(c.now)),
            ("error", Val::text(&c.reason)),
            ("updated_at", Val::ts(c.now)),
        ],
        // The answer's attempt is the job's: an older attempt's answer was recorded already.
        guard: Some(
            "status IN ('scheduled', 'pending', 'running') AND NOT concurrent AND NOT EXISTS (\
             SELECT 1 FROM job_answers a WHERE a.job_id = jobs.id AND a.attempt = jobs.attempt)",
        ),
    }
}

pub(crate) fn job_release(c: &JobRelease) -> Transition {
    Transition {
        assignments: vec![
            ("status", Val::text(JobStatus::Pending.as_str())),
            ("attempt", Val::I32(0)),
            ("next_attempt_at", Val::ts(c.now)),
            ("lease_until", Val::Ts(None)),
            ("updated_at", Val::ts(c.now)),
        ],
        guard: Some("status = 'scheduled'"),
    }
}

/// The columns [`TenantTx::job_finish_many`] writes for one outcome.
pub(crate) struct FinishColumns {
    pub(crate) status: &'static str,
    pub(crate) next_attempt_at: Option<DateTime<Utc>>,
    pub(crate) finished_at: Option<DateTime<Utc>>,
    pub(crate) result: Option<Value>,
    pub(crate) error: Option<String>,
}

pub(crate) fn job_finish(f: &JobFinish) -> FinishColumns {
    let status = f.outcome.status().as_str();
    match &f.outcome {
        JobOutcome::Succeeded { result } => FinishColumns {
            status,
            next_attempt_at: None,
            finished_at: Some(f.now),
            result: Some(result.clone()),
            error: None,
        },
        JobOutcome::RetryPending {
            next_attempt_at,
            error,
        } => FinishColumns {
            status,
            next_attempt_at: Some(*next_attempt_at),
            finished_at: None,
            result: None,
            error: Some(error.clone()),
        },
        JobOutcome::Failed { error } => FinishColumns {
            status,
            next_attempt_at: None,
            finished_at: Some(f.now),
            result: None,
            error: Some(error.clone()),
        },
    }
}

/// `job_finish`'s one-row statement: the outcome columns of a job still running `attempt`.
pub(crate) fn job_finish_sql(placeholder: Placeholder, env: Val, id: Val, f: &JobFinish) -> Sql {
    let columns = job_finish(f);
    let mut sql = Sql::new(placeholder);
    let env = sql.val(env);
    let id = sql.val(id);
    let attempt = sql.val(Val::I32(f.attempt));
    let epoch = sql.val(Val::I32(f.epoch));
    let status = sql.val(Val::text(columns.status));
    let next = sql.val(Val::Ts(columns.next_attempt_at));
    let finished = sql.val(Val::Ts(columns.finished_at));
    let result = sql.val(Val::Json(columns.result));
    let error = sql.val(Val::Text(columns.error));
    let now = sql.val(Val::ts(f.now));
    let lease_by = sql.val(Val::Ts(f.lease_expired_by));
    sql.text = format!(
        "UPDATE jobs SET status = {status}, next_attempt_at = {next}, finished_at = {finished}, \
         result = {result}, error = {error}, updated_at = {now} \
         WHERE env_id = {env} AND id = {id} AND status = 'running' AND attempt = {attempt} \
           AND lease_epoch = {epoch} \
           AND ({lease_by} IS NULL OR lease_until IS NULL OR lease_until < {lease_by}) \
         RETURNING {JOB_COLUMNS}"
    );
    sql
}

/// What the shared tenant writes below need from a backend's tenant transaction.
pub(crate) trait TenantRows: Send {
    type Row: RowCells + Send;
    /// How the backend writes placeholders.
    const PLACEHOLDER: Placeholder;
    /// SQL testing whether `column` contains the text of `needle` (a placeholder), ignoring
    /// ASCII case.
    const CONTAINS_IGNORING_CASE: fn(&str, &str) -> String;
    /// SQL reading the value of the schedule label `key` (NULL when it has none), binding
    /// what it needs to `sql`.
    const LABEL_VALUE: fn(&mut Sql, &str) -> String;
    /// The clause that ends a read whose rows the transaction locks until it ends (empty
    /// where a plain read is already exclusive).
    const FOR_UPDATE: &'static str;
    /// The same, leaving out rows locked elsewhere instead of waiting for them.
    const FOR_UPDATE_SKIP_LOCKED: &'static str;
    /// How the backend writes the hour and the lateness of the hourly job summary.
    const HOURS: super::hours::HoursDialect;
    /// The environment the transaction is scoped to.
    fn tenant(&self) -> EnvId;
    async fn fetch_optional(&mut self, sql: &Sql) -> StoreResult<Option<Self::Row>>;
    async fn fetch_one(&mut self, sql: &Sql) -> StoreResult<Self::Row>;
    async fn fetch_all(&mut self, sql: &Sql) -> StoreResult<Vec<Self::Row>>;
    /// Runs a statement; the rows it touched.
    async fn execute(&mut self, sql: &Sql) -> StoreResult<u64>;
}

/// Applies a named transition to one row of `table` in the transaction's environment.
async fn transition<T: TenantRows>(
    tx: &mut T,
    table: &'static str,
    returning: &str,
    id: Uuid,
    change: Transition,
) -> StoreResult<Option<T::Row>> {
    let sql = Sql::update_one(
        T::PLACEHOLDER,
        table,
        Val::uuid(tx.tenant().0),
        Val::uuid(id),
        change.assignments,
        change.guard,
        returning,
    );
    tx.fetch_optional(&sql).await
}

/// Applies a named transition to a schedule; [`StoreError::NotFound`] when the id names no
/// row of this environment.
pub(crate) async fn set_schedule<T: TenantRows>(
    tx: &mut T,
    id: ScheduleId,
    change: Transition,
) -> StoreResult<Schedule> {
    let row = transition(tx, "schedules", SCHEDULE_COLUMNS, id.0, change).await?;
    match row {
        Some(row) => super::schedule(&row.cells("schedules")),
        None => Err(StoreError::NotFound {
            what: "schedule",
            id: id.to_string(),
        }),
    }
}

/// Applies a named transition to a schedule; `None` when no schedule of this environment
/// matched its guard.
pub(crate) async fn set_schedule_guarded<T: TenantRows>(
    tx: &mut T,
    id: ScheduleId,
    change: Transition,
) -> StoreResult<Option<Schedule>> {
    let row = transition(tx, "schedules", SCHEDULE_COLUMNS, id.0, change).await?;
    row.map(|row| super::schedule(&row.cells("schedules")))
        .transpose()
}

/// Applies a named transition to a job; `None` when no job of this environment matched its
/// guard.
pub(crate) async fn set_job<T: TenantRows>(
    tx: &mut T,
    id: JobId,
    change: Transition,
) -> StoreResult<Option<Job>> {
    let row = transition(tx, "jobs", JOB_COLUMNS, id.0, change).await?;
    row.map(|row| super::job(&row.cells("jobs"))).transpose()
}
