//! What both backends share about rows: the column lists and one mapper per record written
//! over [`Cells`] (which each backend implements for its own row type); `write` holds the
//! values each write binds, as backend-neutral [`Val`]s placed by [`Sql`] (`sql`), and
//! `insert` the inserts, one row or a batch.
//!
//! A record's columns are therefore read in one place ([`schedule`], [`job`], ...) and written
//! in one place ([`schedule_insert`], [`schedule_definition`], ...). Backends differ only in how
//! a cell is decoded or a value bound: PostgreSQL natively; SQLite with uuids as text, instants
//! as integer microseconds and JSON as checked text.

mod calendars;
mod cross;
pub(crate) mod hours;
mod insert;
mod labels;
mod leases;
mod shared;
mod sql;
mod tx_macros;
mod write;

pub(crate) use calendars::*;
pub(crate) use cross::*;
pub(crate) use insert::*;
pub(crate) use labels::*;
pub(crate) use leases::*;
pub(crate) use shared::*;
pub(crate) use sql::*;
pub(crate) use tx_macros::*;
pub(crate) use write::*;

use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::core::labels::Labels;
use crate::core::model::*;
use crate::core::policies::Policies;
use crate::core::store::*;
use crate::core::target::Target;
use crate::core::timing::{Timing, TimingColumns};

/// What makes a job open: `scheduled` for a future instant, `pending` its (next) attempt, or
/// `running` an attempt in flight. The index `sentin8_cron_jobs_open` has this predicate (so a
/// read of open jobs does not go through every job of their schedules); at most one of them
/// per schedule is not `concurrent` ([`EXCLUSIVE_OPEN_JOB`]).
pub(crate) const OPEN_JOB: &str = "status IN ('scheduled', 'pending', 'running')";

/// The schedules of a backend's `jobs_per_schedule` answer, without their counts.
pub(crate) fn only_ids(found: Vec<(ScheduleId, u32)>) -> Vec<ScheduleId> {
    found.into_iter().map(|(id, _)| id).collect()
}

/// An open job that excludes others of its schedule (not `concurrent`): the predicate of the
/// unique index `sentin8_cron_jobs_open_per_schedule`, and so of an insert's conflict target.
pub(crate) const EXCLUSIVE_OPEN_JOB: &str =
    "status IN ('scheduled', 'pending', 'running') AND NOT concurrent";

/// A regular job for its schedule's stored next call: that occurrence was already claimed. A
/// skipped record (a withdrawn fire) or a backfilled occurrence does not count.
pub(crate) const JOB_FOR_NEXT_CALL: &str = "status <> 'skipped' AND NOT backfill \
    AND scheduled_for = (SELECT s.next_run_at FROM schedules s WHERE s.id = schedule_id)";

/// What makes a job hold a lease that can run out: a claim ahead (`scheduled`) or an attempt in
/// flight (`running`). The leases index has this predicate.
pub(crate) const LEASED_JOB: &str = "status IN ('scheduled', 'running')";

pub(crate) const SCHEDULE_COLUMNS: &str = "id, env_id, domain, schedule_type, kind, cron_expr, \
    timezone, run_at, on_dst_gap, on_dst_repeat, target_config, payload, status, next_run_at, \
    last_run_at, retry_count, max_retries, overlap, catchup_window_ms, max_jitter_ms, start_at, \
    end_at, pause_on_failure, after_completion, remaining_runs, labels, exclude, created_at, updated_at, \
    created_by, updated_by";
pub(crate) const JOB_COLUMNS: &str = "id, schedule_id, env_id, status, attempt, scheduled_for, \
    next_attempt_at, started_at, finished_at, result, error, idempotency_key, created_at, \
    updated_at, superseded_by, missed_first, missed_last, missed_count, concurrent, backfill, \
    lease_epoch, called_at";
pub(crate) const JOB_ANSWER_COLUMNS: &str = "job_id, attempt, answered_at, answer";
pub(crate) const DLQ_COLUMNS: &str = "id, env_id, schedule_id, job_id, domain, schedule_type, \
    payload, attempts, last_error, scheduled_for, landed_at, backfill";
pub(crate) const OUTBOX_COLUMNS: &str = "seq, id, env_id, schedule_id, event_type, payload, \
    created_at, relayed_at, attempts, last_error, parked_at";
pub(crate) const AUDIT_COLUMNS: &str = "id, env_id, actor, action, resource_type, resource_id, \
    before, after, correlation_id, at, schedule_id";
pub(crate) const ATTEMPT_COLUMNS: &str = "job_id, attempt, started_at, finished_at, duration_ms, \
    outcome, http_status, error_class, error, response_excerpt";

/// A column list with every column qualified by `alias` (for statements that join).
pub(crate) fn prefixed(columns: &str, alias: &str) -> String {
    columns
        .split(',')
        .map(|c| format!("{alias}.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Typed access to the cells of one row, with errors that name the table and column. Each
/// backend implements the primitive reads for its row type; the rest is shared.
pub(crate) trait Cells {
    /// The table the row came from (for error messages).
    fn table(&self) -> &'static str;
    fn i32(&self, column: &str) -> StoreResult<i32>;
    fn i64(&self, column: &str) -> StoreResult<i64>;
    fn bool(&self, column: &str) -> StoreResult<bool>;
    fn text(&self, column: &str) -> StoreResult<String>;
    fn opt_text(&self, column: &str) -> StoreResult<Option<String>>;
    fn opt_i32(&self, column: &str) -> StoreResult<Option<i32>>;
    fn opt_i64(&self, column: &str) -> StoreResult<Option<i64>>;
    fn opt_uuid(&self, column: &str) -> StoreResult<Option<Uuid>>;
    fn opt_ts(&self, column: &str) -> StoreResult<Option<DateTime<Utc>>>;
    fn opt_json(&self, column: &str) -> StoreResult<Option<Value>>;

    /// A corruption error for `column`.
    fn corrupt(&self, column: &str, detail: impl std::fmt::Display) -> StoreError {
        StoreError::Corrupt {
            table: self.table(),
            detail: format!("{column}: {detail}"),
        }
    }

    fn uuid(&self, column: &str) -> StoreResult<Uuid> {
        self.opt_uuid(column)?
            .ok_or_else(|| self.corrupt(column, "unexpected NULL"))
    }

    fn ts(&self, column: &str) -> StoreResult<DateTime<Utc>> {
        self.opt_ts(column)?
            .ok_or_else(|| self.corrupt(column, "unexpected NULL"))
    }

    fn json(&self, column: &str) -> StoreResult<Value> {
        self.opt_json(column)?
            .ok_or_else(|| self.corrupt(column, "unexpected NULL"))
    }

    /// A text cell parsed into one of the domain's stored names.
    fn parse<T>(&self, column: &str) -> StoreResult<T>
    where
        T: FromStr,
        T::Err: std::fmt::Display,
    {
        self.text(column)?
            .parse()
            .map_err(|e: T::Err| self.corrupt(column, e))
    }
}

/// A backend's row type, read through its [`Cells`].
pub(crate) trait RowCells {
    type Cells<'r>: Cells
    where
        Self: 'r;

    /// The row's cells, as a row of `table`.
    fn cells(&self, table: &'static str) -> Self::Cells<'_>;
}

/// A backend's cells type over its row type, `$row` of database `$db`, with the reads that
/// decode natively written once: `row_cells! { Cells for Backend(Row, Db) { the other reads } }`
/// (the uuid, instant and JSON reads, which each backend stores its own way).
macro_rules! row_cells {
    ($(#[$doc:meta])* Cells for $cells:ident($row:ty, $db:ty) { $($own:tt)* }) => {
        $(#[$doc])*
        pub(crate) struct $cells<'r>(&'r $row, &'static str);

        impl<'r> $cells<'r> {
            fn get<T>(&self, column: &str) -> StoreResult<T>
            where
                T: sqlx::Decode<'r, $db> + sqlx::Type<$db>,
            {
                sqlx::Row::try_get(self.0, column).map_err(|e| self.corrupt(column, e))
            }
        }

        impl $crate::store::rows::Cells for $cells<'_> {
            fn table(&self) -> &'static str {
                self.1
            }
            fn i32(&self, column: &str) -> StoreResult<i32> {
                self.get(column)
            }
            fn i64(&self, column: &str) -> StoreResult<i64> {
                self.get(column)
            }
            fn bool(&self, column: &str) -> StoreResult<bool> {
                self.get(column)
            }
            fn text(&self, column: &str) -> StoreResult<String> {
                self.get(column)
            }
            fn opt_text(&self, column: &str) -> StoreResult<Option<String>> {
                self.get(column)
            }
            fn opt_i32(&self, column: &str) -> StoreResult<Option<i32>> {
                self.get(column)
            }
            fn opt_i64(&self, column: &str) -> StoreResult<Option<i64>> {
                self.get(column)
            }
            $($own)*
        }

        impl $crate::store::rows::RowCells for $row {
            type Cells<'r> = $cells<'r>;

            fn cells(&self, table: &'static str) -> $cells<'_> {
                $cells(self, table)
            }
        }
    };
}
pub(crate) use row_cells;

/// Maps rows of `table` with one of the mappers below.
pub(crate) fn map_rows<'r, R: RowCells, T>(
    rows: &'r [R],
    table: &'static str,
    mapper: fn(&R::Cells<'r>) -> StoreResult<T>,
) -> StoreResult<Vec<T>> {
    rows.iter().map(|row| mapper(&row.cells(table))).collect()
}

/// Maps an optional row of `table` with one of the mappers below.
pub(crate) fn map_row<'r, R: RowCells, T>(
    row: Option<&'r R>,
    table: &'static str,
    mapper: fn(&R::Cells<'r>) -> StoreResult<T>,
) -> StoreResult<Option<T>> {
    row.map(|row| mapper(&row.cells(table))).transpose()
}

/// Microseconds since the epoch as an instant (SQLite's storage of instants).
pub(crate) fn from_micros(micros: i64, table: &'static str) -> StoreResult<DateTime<Utc>> {
    DateTime::from_timestamp_micros(micros).ok_or_else(|| StoreError::Corrupt {
        table,
        detail: format!("instant {micros} is out of range"),
    })
}

/// The one place a schedule record is built from its columns.
pub(crate) fn schedule(c: &impl Cells) -> StoreResult<Schedule> {
    Ok(Schedule {
        id: ScheduleId(c.uuid("id")?),
        env_id: EnvId(c.uuid("env_id")?),
        domain: c.text("domain")?,
        schedule_type: c.text("schedule_type")?,
        // A stored expression or target that no longer parses still loads: the engine and
        // dispatch report it instead of the whole listing failing.
        timing: Timing::from_columns(TimingColumns {
            kind: c.parse("kind")?,
            cron_expr: c.opt_text("cron_expr")?,
            timezone: c.text("timezone")?,
            run_at: c.opt_ts("run_at")?,
            on_dst_gap: c.parse("on_dst_gap")?,
            on_dst_repeat: c.parse("on_dst_repeat")?,
        })
        .map_err(|detail| c.corrupt("run_at", detail))?,
        target: Target::from_stored(c.json("target_config")?),
        payload: c.json("payload")?,
        status: c.parse("status")?,
        next_run_at: c.opt_ts("next_run_at")?,
        last_run_at: c.opt_ts("last_run_at")?,
        retry_count: c.i32("retry_count")?,
        max_retries: c.i32("max_retries")?,
        policies: Policies {
            overlap: c.parse("overlap")?,
            catchup_window: stored_millis(c, "catchup_window_ms")?,
            max_jitter: stored_millis(c, "max_jitter_ms")?,
            start_at: c.opt_ts("start_at")?,
            end_at: c.opt_ts("end_at")?,
            pause_on_failure: c.bool("pause_on_failure")?,
            after_completion: c.parse("after_completion")?,
        },
        remaining_runs: c.opt_i32("remaining_runs")?,
        labels: stored_labels(c)?,
        exclude: stored_exclude(c)?,
        created_at: c.ts("created_at")?,
        updated_at: c.ts("updated_at")?,
        created_by: c.text("created_by")?,
        updated_by: c.text("updated_by")?,
    })
}

/// Labels as stored: a JSON object of strings.
fn stored_labels(c: &impl Cells) -> StoreResult<Labels> {
    serde_json::from_value(c.json("labels")?)
        .map(Labels::from_stored)
        .map_err(|e| c.corrupt("labels", format!("not an object of strings: {e}")))
}

/// Exclusions as stored: a JSON array of strings.
pub(crate) fn stored_exclude(c: &impl Cells) -> StoreResult<crate::core::calendar::Exclude> {
    serde_json::from_value(c.json("exclude")?)
        .map(crate::core::calendar::Exclude::from_stored)
        .map_err(|e| c.corrupt("exclude", format!("not a list of strings: {e}")))
}

/// A policy duration stored in whole milliseconds.
fn stored_millis(c: &impl Cells, column: &str) -> StoreResult<std::time::Duration> {
    let ms = c.i64(column)?;
    u64::try_from(ms)
        .map(std::time::Duration::from_millis)
        .map_err(|_| c.corrupt(column, format!("{ms} is negative")))
}

pub(crate) fn job_answer(c: &impl Cells) -> StoreResult<JobAnswer> {
    Ok(JobAnswer {
        job_id: JobId(c.uuid("job_id")?),
        attempt: c.i32("attempt")?,
        answered_at: c.ts("answered_at")?,
        answer: c.json("answer")?,
    })
}

pub(crate) fn job(c: &impl Cells) -> StoreResult<Job> {
    Ok(Job {
        id: JobId(c.uuid("id")?),
        schedule_id: ScheduleId(c.uuid("schedule_id")?),
        env_id: EnvId(c.uuid("env_id")?),
        status: c.parse("status")?,
        attempt: c.i32("attempt")?,
        scheduled_for: c.ts("scheduled_for")?,
        next_attempt_at: c.opt_ts("next_attempt_at")?,
        started_at: c.opt_ts("started_at")?,
        finished_at: c.opt_ts("finished_at")?,
        result: c.opt_json("result")?,
        error: c.opt_text("error")?,
        idempotency_key: c.text("idempotency_key")?,
        created_at: c.ts("created_at")?,
        updated_at: c.ts("updated_at")?,
        superseded_by: c.opt_uuid("superseded_by")?.map(JobId),
        missed: missed(c)?,
        concurrent: c.bool("concurrent")?,
        backfill: c.bool("backfill")?,
        lease_epoch: c.i32("lease_epoch")?,
        called_at: c.opt_ts("called_at")?,
    })
}

pub(crate) fn attempt(c: &impl Cells) -> StoreResult<JobAttempt> {
    Ok(JobAttempt {
        job_id: JobId(c.uuid("job_id")?),
        attempt: c.i32("attempt")?,
        started_at: c.opt_ts("started_at")?,
        finished_at: c.ts("finished_at")?,
        duration_ms: c.opt_i64("duration_ms")?,
        outcome: c.parse("outcome")?,
        http_status: c.opt_i32("http_status")?,
        error_class: c.opt_text("error_class")?,
        error: c.opt_text("error")?,
        response_excerpt: c.opt_text("response_excerpt")?,
    })
}

/// A skipped record's missed occurrences: a count above zero with both instants.
fn missed(c: &impl Cells) -> StoreResult<Option<MissedOccurrences>> {
    let count = c.i32("missed_count")?;
    if count <= 0 {
        return Ok(None);
    }
    let (Some(first), Some(last)) = (c.opt_ts("missed_first")?, c.opt_ts("missed_last")?) else {
        return Err(c.corrupt("missed_first", "a missed count without its instants"));
    };
    Ok(Some(MissedOccurrences {
        first,
        last,
        count: u32::try_from(count).unwrap_or_default(),
    }))
}

pub(crate) fn dlq(c: &impl Cells) -> StoreResult<DlqEntry> {
    Ok(DlqEntry {
        id: DlqId(c.uuid("id")?),
        env_id: EnvId(c.uuid("env_id")?),
        schedule_id: ScheduleId(c.uuid("schedule_id")?),
        job_id: JobId(c.uuid("job_id")?),
        domain: c.text("domain")?,
        schedule_type: c.text("schedule_type")?,
        payload: c.json("payload")?,
        attempts: c.i32("attempts")?,
        last_error: c.text("last_error")?,
        scheduled_for: c.ts("scheduled_for")?,
        landed_at: c.ts("landed_at")?,
        backfill: c.bool("backfill")?,
    })
}

pub(crate) fn outbox(c: &impl Cells) -> StoreResult<OutboxEvent> {
    Ok(OutboxEvent {
        seq: c.i64("seq")?,
        id: EventId(c.uuid("id")?),
        env_id: EnvId(c.uuid("env_id")?),
        schedule_id: c.opt_uuid("schedule_id")?.map(ScheduleId),
        event_type: c.text("event_type")?,
        payload: c.json("payload")?,
        created_at: c.ts("created_at")?,
        relayed_at: c.opt_ts("relayed_at")?,
        attempts: c.i32("attempts")?,
        last_error: c.opt_text("last_error")?,
        parked_at: c.opt_ts("parked_at")?,
    })
}

pub(crate) fn audit(c: &impl Cells) -> StoreResult<AuditEntry> {
    Ok(AuditEntry {
        id: c.uuid("id")?,
        env_id: EnvId(c.uuid("env_id")?),
        actor: c.text("actor")?,
        action: c.text("action")?,
        resource_type: c.text("resource_type")?,
        resource_id: c.text("resource_id")?,
        before: c.opt_json("before")?,
        after: c.opt_json("after")?,
        correlation_id: c.opt_text("correlation_id")?,
        at: c.ts("at")?,
        schedule_id: c.opt_uuid("schedule_id")?.map(ScheduleId),
    })
}

pub(crate) fn due_schedule(c: &impl Cells) -> StoreResult<DueSchedule> {
    Ok(DueSchedule {
        id: ScheduleId(c.uuid("id")?),
        env_id: EnvId(c.uuid("env_id")?),
        next_run_at: c.ts("next_run_at")?,
    })
}

pub(crate) fn due_job(c: &impl Cells) -> StoreResult<DueJob> {
    Ok(DueJob {
        id: JobId(c.uuid("id")?),
        schedule_id: ScheduleId(c.uuid("schedule_id")?),
        env_id: EnvId(c.uuid("env_id")?),
        status: c.parse("status")?,
    })
}

pub(crate) fn stats(c: &impl Cells) -> StoreResult<StoreStats> {
    Ok(StoreStats {
        schedules_active: c.i64("schedules_active")?,
        schedules_paused: c.i64("schedules_paused")?,
        jobs_scheduled: c.i64("jobs_scheduled")?,
        jobs_pending: c.i64("jobs_pending")?,
        jobs_running: c.i64("jobs_running")?,
        jobs_buffered: c.i64("jobs_buffered")?,
        dlq_entries: c.i64("dlq_entries")?,
        outbox_unrelayed: c.i64("outbox_unrelayed")?,
        outbox_parked: c.i64("outbox_parked")?,
        outbox_oldest_unrelayed_at: c.opt_ts("outbox_oldest_unrelayed_at")?,
    })
}

pub(crate) fn env_counts(c: &impl Cells) -> StoreResult<EnvCounts> {
    Ok(EnvCounts {
        schedules_active: c.i64("schedules_active")?,
        schedules_paused: c.i64("schedules_paused")?,
        schedules_completed: c.i64("schedules_completed")?,
        jobs_scheduled: c.i64("jobs_scheduled")?,
        jobs_pending: c.i64("jobs_pending")?,
        jobs_running: c.i64("jobs_running")?,
        jobs_buffered: c.i64("jobs_buffered")?,
        jobs_succeeded: c.i64("jobs_succeeded")?,
        jobs_failed: c.i64("jobs_failed")?,
        jobs_skipped: c.i64("jobs_skipped")?,
        jobs_superseded: c.i64("jobs_superseded")?,
        dlq_entries: c.i64("dlq_entries")?,
    })
}

pub(crate) fn schedule_job_counts_of(c: &impl Cells) -> StoreResult<ScheduleJobCounts> {
    Ok(ScheduleJobCounts {
        succeeded: c.i64("succeeded")?,
        failed: c.i64("failed")?,
        skipped: c.i64("skipped")?,
        missed: c.i64("missed")?,
        backfilled: c.i64("backfilled")?,
        scheduled: c.i64("scheduled")?,
        pending: c.i64("pending")?,
        running: c.i64("running")?,
        buffered: c.i64("buffered")?,
    })
}

pub(crate) fn failure_recorded(c: &impl Cells) -> StoreResult<OutboxFailureRecorded> {
    Ok(OutboxFailureRecorded {
        seq: c.i64("seq")?,
        attempts: c.i32("attempts")?,
        parked: c.bool("parked")?,
    })
}

/// The per-environment count query of both backends; `env` is the placeholder that binds the
/// environment id. Deleted schedules are not counted.
pub(crate) fn env_counts_sql(env: &str) -> String {
    let count = |table: &str, status: Option<&str>| match status {
        Some(status) => {
            format!("(SELECT count(*) FROM {table} WHERE env_id = {env} AND status = '{status}')")
        }
        None => format!("(SELECT count(*) FROM {table} WHERE env_id = {env})"),
    };
    let columns = [
        ("schedules_active", count("schedules", Some("active"))),
        ("schedules_paused", count("schedules", Some("paused"))),
        ("schedules_completed", count("schedules", Some("completed"))),
        ("jobs_scheduled", count("jobs", Some("scheduled"))),
        ("jobs_pending", count("jobs", Some("pending"))),
        ("jobs_running", count("jobs", Some("running"))),
        ("jobs_buffered", count("jobs", Some("buffered"))),
        ("jobs_succeeded", count("jobs", Some("succeeded"))),
        ("jobs_failed", count("jobs", Some("failed"))),
        ("jobs_skipped", count("jobs", Some("skipped"))),
        ("jobs_superseded", count("jobs", Some("superseded"))),
        ("dlq_entries", count("dlq", None)),
    ];
    let select: Vec<String> = columns
        .iter()
        .map(|(name, expr)| format!("{expr} AS {name}"))
        .collect();
    format!("SELECT {}", select.join(", "))
}
