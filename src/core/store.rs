//! The storage seam: the one interface between the engine and a database.
//!
//! Tenant data is reachable only through a [`TenantTx`], a transaction opened for exactly one
//! environment: the backend sets the tenant context inside that transaction, and every statement
//! of the transaction runs on the same connection (design §5, transaction-locality rule). The
//! only cross-tenant operations are the engine's narrow reads on [`Store`] (what is due, when to
//! wake up, aggregate counts), which carry ids and instants, never tenant payloads, and the
//! outbox relay's claim/mark/purge methods, which hand event payloads to the relay alone.
//!
//! Time is always a parameter: no implementation calls the database clock for a decision.
//! Methods are named noun + verb and take a params struct where there is more than one input.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::Notify;

use crate::core::model::{
    AuditEntry, DlqEntry, DlqId, EnvId, EventId, Job, JobId, JobStatus, OutboxEvent, Schedule,
    ScheduleId, ScheduleStatus,
};
use crate::core::target::Target;
use crate::core::timing::Timing;

/// A storage error. Database internals are kept as an opaque source: they are logged, never
/// shown to API callers.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness rule of the domain was violated.
    #[error("conflict: {0}")]
    Conflict(Conflict),
    /// An update named a row that does not exist in this environment.
    #[error("{what} {id} not found")]
    NotFound {
        /// The kind of row.
        what: &'static str,
        /// Its id.
        id: String,
    },
    /// The schema is missing, older or newer than this build knows.
    #[error("{0}")]
    Schema(String),
    /// The database URL or configuration cannot be used.
    #[error("{0}")]
    Config(String),
    /// A stored value could not be read back into the domain type.
    #[error("corrupt row in {table}: {detail}")]
    Corrupt {
        /// The table the row came from.
        table: &'static str,
        /// What was wrong with it.
        detail: String,
    },
    /// Any other database failure.
    #[error("database error: {0}")]
    Database(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Which uniqueness rule a write violated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Conflict {
    /// `schedule_type` is unique per (env, domain) among non-deleted schedules.
    #[error("a schedule with this schedule_type already exists in this domain")]
    ScheduleTypeTaken,
    /// At most one pending or running job exists per schedule.
    #[error("the schedule already has an open (pending or running) job")]
    OpenJobExists,
    /// A row with this id already exists.
    #[error("a row with this id already exists")]
    DuplicateId,
}

/// Result alias for storage operations.
pub type StoreResult<T> = Result<T, StoreError>;

/// What a backend can do beyond the common contract. Callers branch on these, never on the
/// backend's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Capabilities {
    /// A short backend name for logs and `migrate` output.
    pub backend: &'static str,
    /// Session-level advisory locks that exclude other processes (PostgreSQL). Without them the
    /// lock is process-local and the claim-conditional UPDATE plus the open-job index exclude
    /// other processes.
    pub advisory_locks: bool,
    /// Change notifications from other processes (PostgreSQL LISTEN/NOTIFY).
    pub listen_notify: bool,
    /// The database enforces tenant isolation itself (row-level security).
    pub row_level_security: bool,
    /// The database could enforce tenant isolation, but the connected role bypasses it (a
    /// superuser or BYPASSRLS role): isolation then rests on the application alone.
    pub rls_bypassed: bool,
    /// The database lives inside this process's reach with no operator to run migrations
    /// (SQLite): commands migrate it on open, and the development token is allowed.
    pub embedded: bool,
}

/// What a committed change may need to wake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Channel {
    /// Schedules changed: the ticker recomputes when to wake.
    Schedules,
    /// Events were appended: the relay drains the outbox.
    Outbox,
}

impl Channel {
    /// The PostgreSQL NOTIFY channel name.
    pub fn name(self) -> &'static str {
        match self {
            Channel::Schedules => "sentin8_cron_schedules",
            Channel::Outbox => "sentin8_cron_outbox",
        }
    }
}

/// In-process wake-up signals, rung after a commit that asked for them, and (on backends with
/// `listen_notify`) when another process commits such a change.
#[derive(Debug, Default)]
pub struct Signals {
    pub schedules: Notify,
    pub outbox: Notify,
}

impl Signals {
    /// Rings one channel. A permit is stored when nobody waits, so a waiter never misses it.
    pub fn ring(&self, channel: Channel) {
        match channel {
            Channel::Schedules => self.schedules.notify_one(),
            Channel::Outbox => self.outbox.notify_one(),
        }
    }
}

/// A schedule that is due, as returned by the cross-tenant due selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DueSchedule {
    pub id: ScheduleId,
    pub env_id: EnvId,
    pub next_run_at: DateTime<Utc>,
}

/// A job whose next attempt is due (pending and `next_attempt_at <= now`), or a running job
/// whose attempt went stale (its process died mid-call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DueJob {
    pub id: JobId,
    pub schedule_id: ScheduleId,
    pub env_id: EnvId,
    pub status: JobStatus,
}

/// Aggregate counts across all tenants, for health and metrics. Carries no tenant data.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StoreStats {
    pub schedules_active: i64,
    pub schedules_paused: i64,
    pub jobs_pending: i64,
    pub jobs_running: i64,
    pub dlq_entries: i64,
    /// Events not relayed yet, parked ones included.
    pub outbox_unrelayed: i64,
    /// Events the relay gave up on (see [`Store::outbox_mark_failed`]); an operator must look.
    pub outbox_parked: i64,
}

/// One environment's counts by status, for the operator's overview. Read inside a tenant
/// transaction, so it covers that environment only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EnvCounts {
    pub schedules_active: i64,
    pub schedules_paused: i64,
    pub schedules_completed: i64,
    pub jobs_pending: i64,
    pub jobs_running: i64,
    pub jobs_succeeded: i64,
    pub jobs_failed: i64,
    pub jobs_skipped: i64,
    pub dlq_entries: i64,
}

/// Applied and known schema versions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SchemaStatus {
    pub applied: Vec<i64>,
    pub known: Vec<i64>,
}

impl SchemaStatus {
    /// Versions this build knows that the database has not applied yet.
    pub fn pending(&self) -> Vec<i64> {
        self.known
            .iter()
            .copied()
            .filter(|v| !self.applied.contains(v))
            .collect()
    }

    /// Versions the database has that this build does not know (a newer build migrated it).
    pub fn unknown(&self) -> Vec<i64> {
        self.applied
            .iter()
            .copied()
            .filter(|v| !self.known.contains(v))
            .collect()
    }

    /// Refuses a schema that a newer build migrated (versions this build does not know).
    pub fn ensure_known(&self) -> StoreResult<()> {
        let unknown = self.unknown();
        if !unknown.is_empty() {
            return Err(StoreError::Schema(format!(
                "the database schema has versions {unknown:?} that this build does not know; \
                 run a newer sentin8-cron"
            )));
        }
        Ok(())
    }

    /// Refuses a schema that is not exactly the one this build expects.
    pub fn ensure_current(&self) -> StoreResult<()> {
        self.ensure_known()?;
        let pending = self.pending();
        if !pending.is_empty() {
            return Err(StoreError::Schema(format!(
                "the database schema is not migrated (pending versions {pending:?}); \
                 run `sentin8-cron migrate` first"
            )));
        }
        Ok(())
    }
}

/// One migration applied (or that would be applied) by [`Store::migrate`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigrationReport {
    pub version: i64,
    pub name: String,
    pub applied: bool,
}

/// A schedule to insert. The caller has validated it and computed `next_run_at`.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSchedule {
    pub id: ScheduleId,
    pub domain: String,
    pub schedule_type: String,
    pub timing: Timing,
    pub target: Target,
    pub payload: Value,
    pub status: ScheduleStatus,
    pub next_run_at: Option<DateTime<Utc>>,
    pub max_retries: i32,
    pub actor: String,
    pub now: DateTime<Utc>,
}

/// Filters for listing schedules, with keyset pagination on the (time-ordered) id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScheduleQuery {
    pub domain: Option<String>,
    pub status: Option<ScheduleStatus>,
    /// Deleted schedules are left out unless asked for.
    pub include_deleted: bool,
    /// Only ids greater than this one (the previous page's last id).
    pub after: Option<ScheduleId>,
    pub limit: u32,
}

/// A claim-conditional advance of a due schedule: it succeeds only if the schedule is still
/// active and still due at the instant the caller saw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScheduleClaim {
    pub id: ScheduleId,
    pub expected_next_run_at: DateTime<Utc>,
    /// The next fire after this one; `None` completes nothing by itself (one-shot schedules
    /// stay active until their job finishes) but leaves no next fire.
    pub next_run_at: Option<DateTime<Utc>>,
    pub now: DateTime<Utc>,
}

/// The patchable definition of a schedule: what [`TenantTx::schedule_set_definition`]
/// writes besides status and next fire.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleDefinition {
    pub schedule_type: String,
    pub timing: Timing,
    pub target: Target,
    pub payload: Value,
    pub max_retries: i32,
}

impl ScheduleDefinition {
    /// The definition a schedule record carries.
    pub fn of(schedule: &Schedule) -> Self {
        Self {
            schedule_type: schedule.schedule_type.clone(),
            timing: schedule.timing.clone(),
            target: schedule.target.clone(),
            payload: schedule.payload.clone(),
            max_retries: schedule.max_retries,
        }
    }
}

/// A new definition, status and next fire for a schedule (a patch or an enrolled update).
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleSetDefinition {
    pub id: ScheduleId,
    pub definition: ScheduleDefinition,
    pub status: ScheduleStatus,
    pub next_run_at: Option<DateTime<Utc>>,
    pub actor: String,
    pub now: DateTime<Utc>,
}

impl ScheduleSetDefinition {
    /// The change that makes the stored row match `updated` in every patchable field.
    pub fn to_match(updated: &Schedule, actor: &str, now: DateTime<Utc>) -> Self {
        Self {
            id: updated.id,
            definition: ScheduleDefinition::of(updated),
            status: updated.status,
            next_run_at: updated.next_run_at,
            actor: actor.to_owned(),
            now,
        }
    }
}

/// A new status for a schedule, stamped with `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleSetStatus {
    pub id: ScheduleId,
    pub status: ScheduleStatus,
    pub now: DateTime<Utc>,
}

/// A new next fire for an active schedule (recomputed under new time-zone rules), stamped
/// with `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleSetNextRun {
    pub id: ScheduleId,
    pub next_run_at: DateTime<Utc>,
    pub now: DateTime<Utc>,
}

/// A time zone that active cron schedules of one environment use.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ZoneInUse {
    pub env_id: EnvId,
    pub timezone: String,
}

/// A soft delete of a schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleSetDeleted {
    pub id: ScheduleId,
    pub actor: String,
    pub now: DateTime<Utc>,
}

/// What an attempt's outcome does to its schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleSetOutcome {
    pub id: ScheduleId,
    pub retry_count: i32,
    /// Completes the schedule (status `completed`, no next fire).
    pub complete: bool,
    pub now: DateTime<Utc>,
}

/// How an attempt ended, as recorded on its job.
#[derive(Debug, Clone, PartialEq)]
pub enum JobOutcome {
    /// The owning service answered: status `succeeded`, finished now, its answer as `result`,
    /// no error.
    Succeeded { result: Value },
    /// Failed and tried again later: status `pending`, due at `next_attempt_at`, the error
    /// kept; `finished_at` and `result` untouched.
    RetryPending {
        next_attempt_at: DateTime<Utc>,
        error: String,
    },
    /// Failed for good: status `failed`, finished now, the error kept.
    Failed { error: String },
}

impl JobOutcome {
    /// The status this outcome leaves the job in.
    pub fn status(&self) -> JobStatus {
        match self {
            JobOutcome::Succeeded { .. } => JobStatus::Succeeded,
            JobOutcome::RetryPending { .. } => JobStatus::Pending,
            JobOutcome::Failed { .. } => JobStatus::Failed,
        }
    }
}

/// The outcome of one attempt, written only if the job is still running that attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct JobFinish {
    pub id: JobId,
    /// The attempt the outcome belongs to.
    pub attempt: i32,
    pub outcome: JobOutcome,
    pub now: DateTime<Utc>,
}

/// A manual retry of a failed job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobSetPending {
    pub id: JobId,
    pub next_attempt_at: DateTime<Utc>,
    pub now: DateTime<Utc>,
}

/// The cancellation of a pending job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobCancel {
    pub id: JobId,
    pub error: String,
    pub now: DateTime<Utc>,
}

/// A job to insert.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    pub id: JobId,
    pub schedule_id: ScheduleId,
    pub status: JobStatus,
    pub attempt: i32,
    pub scheduled_for: DateTime<Utc>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub error: Option<String>,
    pub now: DateTime<Utc>,
}

/// Filters for listing jobs, newest first, with keyset pagination.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobQuery {
    pub schedule_id: Option<ScheduleId>,
    pub status: Option<JobStatus>,
    /// Only ids smaller than this one (the previous page's last id).
    pub before: Option<JobId>,
    pub limit: u32,
}

/// A claim-conditional start of a retry: it succeeds only if the job is still pending and due.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobClaim {
    pub id: JobId,
    pub now: DateTime<Utc>,
}

/// A dead-letter entry to insert.
#[derive(Debug, Clone, PartialEq)]
pub struct NewDlqEntry {
    pub id: DlqId,
    pub schedule_id: ScheduleId,
    pub job_id: JobId,
    pub domain: String,
    pub schedule_type: String,
    pub payload: Value,
    pub attempts: i32,
    pub last_error: String,
    pub scheduled_for: DateTime<Utc>,
    pub now: DateTime<Utc>,
}

/// Filters for listing dead-letter entries, newest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DlqQuery {
    pub domain: Option<String>,
    pub schedule_id: Option<ScheduleId>,
    /// Only the entry of this job (a job lands in the DLQ at most once between retries).
    pub job_id: Option<JobId>,
    pub before: Option<DlqId>,
    pub limit: u32,
}

/// An event to append to the outbox.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub id: EventId,
    pub schedule_id: Option<ScheduleId>,
    pub event_type: String,
    pub payload: Value,
    pub now: DateTime<Utc>,
}

/// An audit entry to append.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAudit {
    pub actor: String,
    pub action: String,
    pub resource_type: String,
    pub resource_id: String,
    pub before: Option<Value>,
    pub after: Option<Value>,
    pub correlation_id: Option<String>,
    pub now: DateTime<Utc>,
}

/// A relay's claim on pending outbox events (see [`Store::outbox_claim`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxClaim {
    /// Who claims: recorded as the lease holder, and required to record a failure.
    pub relay_id: String,
    pub now: DateTime<Utc>,
    /// Until when the claimed events are leased to this relay.
    pub lease_until: DateTime<Utc>,
    pub limit: u32,
}

/// Outbox events the bus acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRelayed {
    pub seqs: Vec<i64>,
    pub now: DateTime<Utc>,
}

/// One failed publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxFailure {
    pub seq: i64,
    pub error: String,
    /// True when the bus answered and refused this event, which counts towards parking. False
    /// when the bus could not be reached: an outage never parks anything.
    pub parkable: bool,
}

/// Failed publishes of one relay (see [`Store::outbox_mark_failed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxFailed {
    pub relay_id: String,
    pub failures: Vec<OutboxFailure>,
    pub now: DateTime<Utc>,
    /// The failed events are not claimed again before this instant.
    pub retry_at: DateTime<Utc>,
    /// A parkable failure that brings an event's attempts to this many parks it.
    pub max_attempts: i32,
}

/// What recording one failure did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxFailureRecorded {
    pub seq: i64,
    /// Failed attempts so far, this one included.
    pub attempts: i32,
    pub parked: bool,
}

/// Claimed events a relay gives back without having tried to publish them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRelease {
    pub relay_id: String,
    pub seqs: Vec<i64>,
}

/// A retention pass over relayed outbox events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxPurge {
    /// Relayed events relayed before this instant are deleted.
    pub relayed_before: DateTime<Utc>,
    /// At most this many per call, oldest first.
    pub limit: u32,
}

/// A store: the entry point to one database.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// What this backend can do.
    fn capabilities(&self) -> Capabilities;

    /// The wake-up signals of this store.
    fn signals(&self) -> Arc<Signals>;

    /// Starts relaying other processes' change notifications into [`Store::signals`], where the
    /// backend can (LISTEN/NOTIFY). A no-op elsewhere.
    async fn signals_listen(&self) -> StoreResult<()> {
        Ok(())
    }

    /// Opens a transaction scoped to one environment. Every tenant read and write goes through
    /// it; dropping it without [`TenantTx::commit`] rolls it back.
    async fn tenant_begin(&self, env_id: EnvId) -> StoreResult<Box<dyn TenantTx>>;

    /// Tries to take the exclusive processing locks of several schedules, on one connection.
    /// The returned set holds those it got ([`ScheduleLock::held`]; maybe none); the claim
    /// transaction runs on the set's own connection.
    async fn schedule_locks_try(&self, ids: &[ScheduleId]) -> StoreResult<Box<dyn ScheduleLock>>;

    /// Tries to take the exclusive processing lock of one schedule. `None` when someone else
    /// holds it.
    async fn schedule_lock_try(
        &self,
        id: ScheduleId,
    ) -> StoreResult<Option<Box<dyn ScheduleLock>>> {
        let set = self.schedule_locks_try(&[id]).await?;
        if set.held().is_empty() {
            set.release().await?;
            Ok(None)
        } else {
            Ok(Some(set))
        }
    }

    /// Due active schedules across tenants, earliest first, at most `limit`.
    async fn schedules_due(&self, now: DateTime<Utc>, limit: u32) -> StoreResult<Vec<DueSchedule>>;

    /// Jobs whose next attempt is due, or whose running attempt started before
    /// `stale_before`, across tenants, at most `limit`.
    async fn jobs_due(
        &self,
        now: DateTime<Utc>,
        stale_before: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<DueJob>>;

    /// The earliest instant at which something becomes due (a schedule's next fire or a job's
    /// next attempt), across tenants.
    async fn wakeup_next(&self) -> StoreResult<Option<DateTime<Utc>>>;

    /// The environments that have dead-letter entries (ids only), for the operator's
    /// cross-environment DLQ listing.
    async fn dlq_envs(&self) -> StoreResult<Vec<EnvId>>;

    /// Aggregate counts across tenants.
    async fn stats_get(&self) -> StoreResult<StoreStats>;

    /// The distinct (environment, zone) pairs of active cron schedules, in that order: ids and
    /// zone names only, for the start-up recompute under new time-zone rules.
    async fn schedule_zones_active(&self) -> StoreResult<Vec<ZoneInUse>>;

    /// Claims up to `limit` pending outbox events for one relay, across tenants, in `seq`
    /// order, leasing them until `lease_until`. This is the one cross-tenant read of event
    /// payloads; only the relay uses it.
    ///
    /// An event is claimable when it is neither relayed nor parked, its lease (anyone's) has
    /// expired, its failure backoff has elapsed, and no earlier event of the same schedule is
    /// still pending (neither relayed nor parked), whoever holds that one. A claim therefore
    /// holds at most one event per schedule, and a relay can publish a claim's events in any
    /// order. Events without a schedule are not ordered. Two concurrent claims never return
    /// the same event.
    async fn outbox_claim(&self, claim: &OutboxClaim) -> StoreResult<Vec<OutboxEvent>>;

    /// Marks events relayed and drops their leases. Idempotent; returns how many changed.
    async fn outbox_mark_relayed(&self, relayed: &OutboxRelayed) -> StoreResult<u64>;

    /// Records failed publishes: one more attempt each, the error, no claim before `retry_at`,
    /// and the lease dropped; a parkable failure that reaches `max_attempts` parks the event
    /// (a parked event no longer holds back later events of its schedule). Only events still
    /// leased to `relay_id` and still pending change; the result lists those.
    async fn outbox_mark_failed(
        &self,
        failed: &OutboxFailed,
    ) -> StoreResult<Vec<OutboxFailureRecorded>>;

    /// Drops the leases `relay_id` holds on these events, untouched otherwise, so any relay
    /// may claim them at once. Returns how many were released.
    async fn outbox_release(&self, release: &OutboxRelease) -> StoreResult<u64>;

    /// Deletes at most `limit` events relayed before `relayed_before`, oldest first; pending
    /// and parked events are kept. Returns how many were deleted.
    async fn outbox_purge(&self, purge: &OutboxPurge) -> StoreResult<u64>;

    /// Applied and known schema versions.
    async fn schema_status(&self) -> StoreResult<SchemaStatus>;
}

/// The exclusive processing locks of some schedules, holding their own connection.
#[async_trait]
pub trait ScheduleLock: Send {
    /// The schedules whose locks this set holds.
    fn held(&self) -> &[ScheduleId];

    /// Opens a tenant transaction on the lock's connection.
    async fn tenant_begin(&mut self, env_id: EnvId) -> StoreResult<Box<dyn TenantTx + '_>>;

    /// Releases the locks on the connection that took them. Returns false (and the caller
    /// warns) when a lock was not held any more.
    async fn release(self: Box<Self>) -> StoreResult<bool>;
}

/// A transaction scoped to one environment. All methods see and touch only that environment's
/// rows.
///
/// After any error the transaction must be abandoned (dropped, which rolls it back):
/// PostgreSQL refuses further statements in a failed transaction, and callers must not rely on
/// SQLite being more lenient.
#[async_trait]
pub trait TenantTx: Send {
    /// The environment this transaction is scoped to.
    fn env_id(&self) -> EnvId;

    /// Asks that `channel` be rung when (and only if) this transaction commits, in this process
    /// and, where the backend can, in every other process. Appending to the outbox rings
    /// [`Channel::Outbox`] in this process by itself.
    fn notify_on_commit(&mut self, channel: Channel);

    /// Inserts a schedule.
    async fn schedule_insert(&mut self, new: &NewSchedule) -> StoreResult<Schedule>;
    /// A schedule by id, whatever its status.
    async fn schedule_get(&mut self, id: ScheduleId) -> StoreResult<Option<Schedule>>;
    /// A schedule by id, locked against concurrent writers until this transaction ends.
    async fn schedule_get_for_update(&mut self, id: ScheduleId) -> StoreResult<Option<Schedule>>;
    /// The non-deleted schedule of a domain with this `schedule_type`.
    async fn schedule_get_by_type(
        &mut self,
        domain: &str,
        schedule_type: &str,
    ) -> StoreResult<Option<Schedule>>;
    /// Schedules matching the query, by id ascending.
    async fn schedule_list(&mut self, query: &ScheduleQuery) -> StoreResult<Vec<Schedule>>;
    /// Active schedules that have a next fire, soonest first, at most `limit`.
    async fn schedule_list_upcoming(&mut self, limit: u32) -> StoreResult<Vec<Schedule>>;
    /// Active cron schedules in the zone named `timezone`, by id, locked against concurrent
    /// writers until this transaction ends.
    async fn schedule_list_in_zone(&mut self, timezone: &str) -> StoreResult<Vec<Schedule>>;
    /// Sets an active schedule's next fire and `updated_at`, nothing else. `None` when the id
    /// names no active schedule of this environment.
    async fn schedule_set_next_run(
        &mut self,
        change: &ScheduleSetNextRun,
    ) -> StoreResult<Option<Schedule>>;
    /// Replaces a schedule's definition (the patchable fields), its status and its next fire,
    /// stamping `updated_at`/`updated_by`. `last_run_at`, `retry_count`, the domain and the
    /// creation columns are untouched. [`StoreError::NotFound`] when the id names no row.
    async fn schedule_set_definition(
        &mut self,
        change: &ScheduleSetDefinition,
    ) -> StoreResult<Schedule>;
    /// Sets a schedule's status and `updated_at`, nothing else (the engine pauses a cron
    /// schedule with no fire left). [`StoreError::NotFound`] when the id names no row.
    async fn schedule_set_status(&mut self, change: &ScheduleSetStatus) -> StoreResult<Schedule>;
    /// Soft-deletes a schedule: status `deleted`, no next fire, `retry_count` 0, stamped
    /// `updated_at`/`updated_by`. [`StoreError::NotFound`] when the id names no row.
    async fn schedule_set_deleted(&mut self, change: &ScheduleSetDeleted) -> StoreResult<Schedule>;
    /// Records what an attempt did to its schedule: the new `retry_count` and, with
    /// `complete`, status `completed` and no next fire (a one-shot that has run).
    /// [`StoreError::NotFound`] when the id names no row.
    async fn schedule_set_outcome(&mut self, change: &ScheduleSetOutcome) -> StoreResult<Schedule>;
    /// Schedules by id (whatever their status), in id order; with `for_update`, locked against
    /// concurrent writers until this transaction ends (in id order, so lockers never deadlock).
    async fn schedule_get_many(
        &mut self,
        ids: &[ScheduleId],
        for_update: bool,
    ) -> StoreResult<Vec<Schedule>>;
    /// Advances due schedules that are still due at the expected instant; returns those
    /// claimed (the others were claimed elsewhere, paused or changed).
    async fn schedule_claim_many(&mut self, claims: &[ScheduleClaim])
    -> StoreResult<Vec<Schedule>>;
    /// Advances a due schedule if it is still due at the expected instant.
    async fn schedule_claim(&mut self, claim: &ScheduleClaim) -> StoreResult<Option<Schedule>> {
        Ok(self
            .schedule_claim_many(std::slice::from_ref(claim))
            .await?
            .pop())
    }

    /// Inserts a job. A second open job of one schedule is [`Conflict::OpenJobExists`].
    async fn job_insert(&mut self, new: &NewJob) -> StoreResult<Job>;
    /// Inserts open (pending or running) jobs, leaving out, without an error, any whose
    /// schedule already has an open job; returns those inserted.
    async fn job_open_many(&mut self, new: &[NewJob]) -> StoreResult<Vec<Job>>;
    /// Records the outcomes of attempts, each only if its job is still running that attempt
    /// (River's "set state if running"): status, `next_attempt_at`, `finished_at`, `result`,
    /// `error` and `updated_at` as [`JobOutcome`] says. Returns the jobs written (the others
    /// were recorded elsewhere first).
    async fn job_finish_many(&mut self, finishes: &[JobFinish]) -> StoreResult<Vec<Job>>;
    /// A job by id.
    async fn job_get(&mut self, id: JobId) -> StoreResult<Option<Job>>;
    /// The open (pending or running) job of a schedule, if any.
    async fn job_get_open(&mut self, schedule_id: ScheduleId) -> StoreResult<Option<Job>>;
    /// Jobs matching the query, newest first.
    async fn job_list(&mut self, query: &JobQuery) -> StoreResult<Vec<Job>>;
    /// Makes a failed job pending again (a manual retry): status `pending`, `next_attempt_at`,
    /// no `finished_at`, `updated_at`; `attempt`, `error` and `result` are kept. `None` when the
    /// job is not failed (or does not exist).
    async fn job_set_pending(&mut self, change: &JobSetPending) -> StoreResult<Option<Job>>;
    /// Cancels a pending job: status `failed`, `finished_at` and `updated_at` now, the given
    /// error; `attempt` and `next_attempt_at` are kept. `None` when the job is not pending (or
    /// does not exist).
    async fn job_cancel(&mut self, change: &JobCancel) -> StoreResult<Option<Job>>;
    /// Starts the next attempt of a pending, due job: status becomes running, `attempt` grows
    /// by one, `started_at` is now. `None` when someone else claimed it first.
    async fn job_claim(&mut self, claim: &JobClaim) -> StoreResult<Option<Job>>;

    /// Inserts a dead-letter entry.
    async fn dlq_insert(&mut self, new: &NewDlqEntry) -> StoreResult<DlqEntry>;
    /// A dead-letter entry by id.
    async fn dlq_get(&mut self, id: DlqId) -> StoreResult<Option<DlqEntry>>;
    /// Dead-letter entries matching the query, newest first.
    async fn dlq_list(&mut self, query: &DlqQuery) -> StoreResult<Vec<DlqEntry>>;
    /// Removes a dead-letter entry. False when it did not exist.
    async fn dlq_delete(&mut self, id: DlqId) -> StoreResult<bool>;

    /// This environment's schedules (deleted ones left out), jobs and dead letters, counted by
    /// status.
    async fn env_counts(&mut self) -> StoreResult<EnvCounts>;

    /// Appends events to the outbox, in the order given.
    async fn outbox_insert_many(&mut self, events: &[NewEvent]) -> StoreResult<()>;
    /// Appends an event to the outbox.
    async fn outbox_insert(&mut self, event: &NewEvent) -> StoreResult<()> {
        self.outbox_insert_many(std::slice::from_ref(event)).await
    }
    /// This environment's outbox events in sequence order, after sequence `after_seq`.
    async fn outbox_list(&mut self, after_seq: i64, limit: u32) -> StoreResult<Vec<OutboxEvent>>;

    /// Appends an audit entry.
    async fn audit_insert(&mut self, entry: &NewAudit) -> StoreResult<()>;
    /// This environment's audit entries, oldest first.
    async fn audit_list(&mut self, limit: u32) -> StoreResult<Vec<AuditEntry>>;

    /// Commits the transaction.
    async fn commit(self: Box<Self>) -> StoreResult<()>;
}
