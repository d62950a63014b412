//! The storage seam: the one interface between the engine and a database.
//!
//! Tenant data is reachable only through a [`TenantTx`], a transaction opened for exactly one
//! environment: the backend sets the tenant context inside that transaction, and every statement
//! of the transaction runs on the same connection, so the context can never apply to a statement
//! of another transaction. The only cross-tenant operations are the engine's narrow reads on
//! [`Store`] (what is due, when to wake up, aggregate counts), which carry ids and instants, never
//! tenant payloads, and the outbox relay's claim/mark/purge methods, which hand event payloads to
//! the relay alone.
//!
//! Time is always a parameter: no implementation calls the database clock for a decision.
//! Methods are named noun + verb and take a params struct where there is more than one input.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::core::calendar::Calendar;
use crate::core::model::{
    AuditEntry, DlqEntry, DlqId, EnvId, Job, JobAttempt, JobId, JobStatus, OutboxEvent, Schedule,
    ScheduleId,
};

mod errors;
mod lease_params;
mod new_job;
mod outbox_params;
mod params;
mod report_params;
mod signals;
pub use errors::*;
pub use lease_params::*;
pub use new_job::*;
pub use outbox_params::*;
pub use params::*;
pub use report_params::*;
pub use signals::*;

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

/// A store: the entry point to one database.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// What this backend can do.
    fn capabilities(&self) -> Capabilities;

    /// The wake-up signals of this store.
    fn signals(&self) -> Arc<Signals>;

    /// Why the store is searching for a database host to use, while it is: its host failed or
    /// turned read-only and none of the hosts it was given fits yet (a failover under way).
    /// Health reports it as `degraded`; `None` on backends with one host.
    fn host_search(&self) -> Option<String> {
        None
    }

    /// Starts relaying other processes' change notifications into [`Store::signals`], where the
    /// backend can (LISTEN/NOTIFY). A no-op elsewhere.
    async fn signals_listen(&self) -> StoreResult<()> {
        Ok(())
    }

    /// Opens a transaction scoped to one environment. Every tenant read and write goes through
    /// it; dropping it without [`TenantTx::commit`] rolls it back.
    async fn tenant_begin(&self, env_id: EnvId) -> StoreResult<Box<dyn TenantTx>>;

    /// A tenant transaction whose statements wait at most `lock_timeout` for a row lock
    /// another transaction holds: past it, the statement fails (and the caller may try again)
    /// instead of waiting for ever. The bound is set as the transaction begins, in the same
    /// round trip (a record is one of several dozen transactions a second in a jittered
    /// minute). By default [`Store::tenant_begin`]: a backend whose transactions never wait on
    /// row locks (SQLite's one writer) has nothing to bound.
    async fn tenant_begin_bounded(
        &self,
        env_id: EnvId,
        _lock_timeout: std::time::Duration,
    ) -> StoreResult<Box<dyn TenantTx>> {
        self.tenant_begin(env_id).await
    }

    /// A tenant transaction for reads only (a write in it fails). A backend with one writer
    /// serves it beside the writer, so a read never waits behind a long write (SQLite: its own
    /// connections, `query_only`, reading the last committed state in WAL mode); by default it
    /// is [`Store::tenant_begin`].
    async fn tenant_read(&self, env_id: EnvId) -> StoreResult<Box<dyn TenantTx>> {
        self.tenant_begin(env_id).await
    }

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

    /// Due active schedules across tenants, at most `limit`, round-robin across environments:
    /// each environment's earliest first, then each one's second, and so on (so one
    /// environment's backlog cannot push another's schedule back). Schedules due at the same
    /// instant in one environment are ordered by a hash of their id and `seed`, so instances
    /// with different seeds start on different ones. With a `share`, of the schedules due
    /// after `share.ahead_after` (claimed ahead) only the share's are returned.
    async fn schedules_due(
        &self,
        now: DateTime<Utc>,
        limit: u32,
        seed: u32,
        share: Option<Share>,
    ) -> StoreResult<Vec<DueSchedule>>;

    /// Jobs whose next attempt is due, whose running attempt's lease ran out before `now` (a
    /// running attempt without a lease counts as expired when it started before
    /// `stale_before`), or whose claim ahead (`scheduled`) lapsed before `now`, across tenants,
    /// at most `limit`.
    async fn jobs_due(
        &self,
        now: DateTime<Utc>,
        stale_before: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<DueJob>>;

    /// Extends the leases of running attempts (ids only, across tenants) to `renewal.until`,
    /// each only while it is still running under the epoch its holder names, and marks those
    /// whose call has started. Returns the ids extended: a job left out is no longer the
    /// holder's (recovered, released or recorded elsewhere), and its call must not start.
    async fn jobs_lease_renew(&self, renewal: &LeaseRenewal) -> StoreResult<Vec<JobId>>;

    /// Records that instance `id` is alive at `now`, forgets instances last seen before
    /// `stale_before`, and returns the ids of the instances alive, in order (so each knows its
    /// place among them). Ids only; no tenant data.
    async fn instance_beat(
        &self,
        id: uuid::Uuid,
        now: DateTime<Utc>,
        stale_before: DateTime<Utc>,
    ) -> StoreResult<Vec<uuid::Uuid>>;

    /// Forgets instance `id` (it is stopping), so the others take its share at once.
    async fn instance_leave(&self, id: uuid::Uuid) -> StoreResult<()>;

    /// Hands off fires claimed ahead for their calls (ids only, across tenants): each of `ids`
    /// still `scheduled` becomes `running`, its instant its start and its call lease `lease`
    /// past its instant, or past `now` for one handed off late (a lease already run out would
    /// let another instance recover a call about to be made). Returns those handed off; any
    /// other was withdrawn or released meanwhile and must not be called. One already handed
    /// off (`running`, its first attempt started at its instant) is taken again with a fresh
    /// lease: only the instance holding a fire hands it off, so it is that instance's own
    /// earlier hand-off whose answer was lost.
    async fn jobs_hand_off(
        &self,
        ids: &[JobId],
        lease: chrono::Duration,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<HandedOff>>;

    /// The earliest instant at which something becomes due (a schedule's next fire, a job's
    /// next attempt, a running attempt's lease expiry or a claim ahead lapsing), across
    /// tenants.
    async fn wakeup_next(&self) -> StoreResult<Option<DateTime<Utc>>>;

    /// Refreshes the planner's statistics of the tables that changed a lot since they were
    /// last taken (a bulk enroll, a burst's first jobs), so that the next statements are
    /// planned for the rows there are. Returns the tables refreshed; none when another
    /// instance is refreshing at the time. Cheap when nothing changed: `enroll` calls it after
    /// its writes, `serve` at start-up and every half minute.
    async fn statistics_refresh(&self) -> StoreResult<Vec<String>>;

    /// Writes answers ahead of their records, across environments, in one statement. Only an
    /// attempt still running under the answer's number takes it (each in its job's own
    /// environment); returns how many were written.
    async fn job_answers_put(&self, answers: &[JobAnswer]) -> StoreResult<u64>;

    /// How many active schedules are due by `until`, counting at most `cap`: the continuous
    /// loop sizes how far ahead it claims by what falls due soon. A count; no tenant data.
    async fn schedules_due_count(&self, until: DateTime<Utc>, cap: u32) -> StoreResult<u64>;

    /// The environments that have dead-letter entries (ids only), for the operator's
    /// cross-environment DLQ listing.
    async fn dlq_envs(&self) -> StoreResult<Vec<EnvId>>;

    /// Aggregate counts across tenants.
    async fn stats_get(&self) -> StoreResult<StoreStats>;

    /// How many outbox events are parked (as [`StoreStats::outbox_parked`]), without the
    /// other counts: the relay's gauge asks for it after each retention pass, and the counts
    /// of schedules grow with everything held.
    async fn outbox_parked_count(&self) -> StoreResult<i64>;

    /// The distinct (environment, zone) pairs of active cron schedules, in that order: ids and
    /// zone names only, for the start-up recompute under new time-zone rules.
    async fn schedule_zones_active(&self) -> StoreResult<Vec<ZoneInUse>>;

    /// The environments that hold schedules (deleted or not), in id order, at most `limit`:
    /// ids and counts only, for an admin's environment picker.
    async fn envs_with_data(&self, limit: u32) -> StoreResult<Vec<EnvSummary>>;

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

    /// Retention: deletes at most `limit` finished jobs (succeeded, failed, skipped or
    /// superseded) last changed before `before`, oldest first, with their attempts. An open
    /// job, or one a dead-letter entry references, is never deleted. Returns how many were.
    async fn jobs_purge(&self, purge: &RetentionPurge) -> StoreResult<u64>;

    /// Retention: deletes at most `limit` audit entries written before `before`, oldest
    /// first. Returns how many were deleted.
    async fn audit_purge(&self, purge: &RetentionPurge) -> StoreResult<u64>;

    /// Retention: deletes at most `limit` schedules soft-deleted before `before` that no job
    /// and no dead-letter entry references any more. Returns how many were deleted.
    async fn schedules_purge(&self, purge: &RetentionPurge) -> StoreResult<u64>;

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
    /// Inserts schedules in few statements, returned in the order given.
    async fn schedule_insert_many(&mut self, news: &[NewSchedule]) -> StoreResult<Vec<Schedule>>;
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
    /// writers until this transaction ends. Rows another transaction holds locked are left out
    /// (where the backend has row locks), so the call never waits on a claim in progress.
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
    /// Schedules by id like [`TenantTx::schedule_get_many`] with `for_update`, leaving out
    /// (instead of waiting for) rows another transaction holds locked, where the backend has
    /// row locks.
    async fn schedule_get_many_skip_locked(
        &mut self,
        ids: &[ScheduleId],
    ) -> StoreResult<Vec<Schedule>> {
        self.schedule_get_many(ids, false).await
    }
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
    /// Inserts jobs in a few statements, returned in the order given; as [`job_insert`] each.
    ///
    /// [`job_insert`]: TenantTx::job_insert
    async fn job_insert_many(&mut self, new: &[NewJob]) -> StoreResult<Vec<Job>>;
    /// Inserts open (pending or running) jobs, leaving out, without an error, any whose
    /// schedule already has an open job; returns those inserted.
    async fn job_open_many(&mut self, new: &[NewJob]) -> StoreResult<Vec<Job>>;
    /// Records the outcomes of attempts, each only if its job is still running that attempt
    /// (River's "set state if running"): status, `next_attempt_at`, `finished_at`, `result`,
    /// `error` and `updated_at` as [`JobOutcome`] says. For each job written: one row of the
    /// attempt ledger (see [`TenantTx::job_attempts_list`]); its schedule's `last_run_at`
    /// becomes the later of its value and the attempt's start, when the attempt was this
    /// instance's own (`lease_expired_by` is `None`: one recovered from a stopped instance may
    /// never have left; a record of an older attempt never moves it back); and the answer
    /// written ahead of the record is deleted, the record now holding it. Returns the jobs
    /// written (the others were recorded elsewhere first, and get none of that).
    async fn job_finish_many(&mut self, finishes: &[JobFinish]) -> StoreResult<Vec<Job>>;
    /// Every recorded attempt of a job, first attempt first.
    async fn job_attempts_list(&mut self, job_id: JobId) -> StoreResult<Vec<JobAttempt>>;
    /// Marks a failed job `superseded` by another job, stamping `updated_at`; `None` when the
    /// job is not failed (or does not exist).
    async fn job_set_superseded(&mut self, change: &JobSetSuperseded) -> StoreResult<Option<Job>>;
    /// A job by id.
    async fn job_get(&mut self, id: JobId) -> StoreResult<Option<Job>>;

    /// The answer written ahead of its record for this attempt of the job, if any.
    async fn job_answer_get(&mut self, id: JobId, attempt: i32) -> StoreResult<Option<JobAnswer>>;

    /// Those of the schedules `ids` that have an open (pending or running) job.
    async fn schedules_with_open_job(&mut self, ids: &[ScheduleId])
    -> StoreResult<Vec<ScheduleId>>;
    /// Those of the schedules `ids` whose stored next call already has its regular job (not a
    /// skipped record, not a backfill): a last occurrence claimed ahead, the schedule kept due
    /// at it until it completes.
    async fn schedules_with_job_for_next_call(
        &mut self,
        ids: &[ScheduleId],
    ) -> StoreResult<Vec<ScheduleId>>;
    /// Those of the schedules `ids` that have a buffered occurrence.
    async fn schedules_with_buffered(&mut self, ids: &[ScheduleId])
    -> StoreResult<Vec<ScheduleId>>;
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
    /// Withdraws a fire claimed ahead and never called: status `skipped`, no `started_at` or
    /// lease, `finished_at` and `updated_at` now, the reason as its error. `None` when the job
    /// is not `scheduled` (or, with `handed_off`, not running its first attempt), or does not
    /// exist.
    async fn job_withdraw(&mut self, change: &JobWithdraw) -> StoreResult<Option<Job>>;
    /// Cancels an open job (not one running beside others) for a newer occurrence, unless its
    /// answer is durable already; `None` when it is not open any more, or answered.
    async fn job_replace(&mut self, change: &JobReplace) -> StoreResult<Option<Job>>;
    /// Releases a fire claimed ahead and never handed off (`scheduled`): status `pending`,
    /// attempt 0, due now, no lease. `None` when it is no longer `scheduled` (it was handed off,
    /// withdrawn or released meanwhile).
    async fn job_release(&mut self, change: &JobRelease) -> StoreResult<Option<Job>>;
    /// The jobs of a schedule in `statuses`: regular occurrences before backfilled ones, each
    /// oldest first.
    async fn jobs_of_schedule(
        &mut self,
        schedule_id: ScheduleId,
        statuses: &[JobStatus],
    ) -> StoreResult<Vec<Job>>;
    /// The first `limit` buffered jobs of a schedule whose `concurrent` flag is `concurrent`:
    /// regular occurrences before backfilled ones, each oldest first. Read through the index
    /// of buffered jobs, so its cost does not grow with the backlog.
    async fn jobs_buffered_first(
        &mut self,
        schedule_id: ScheduleId,
        concurrent: bool,
        limit: usize,
    ) -> StoreResult<Vec<Job>>;
    /// Releases a buffered occurrence to run: status `pending`, due now. `None` when it is not
    /// `buffered`, or when it excludes others (not `concurrent`) and its schedule has an open
    /// job that does too.
    async fn job_release_buffered(&mut self, change: &JobRelease) -> StoreResult<Option<Job>>;
    /// Drops a buffered occurrence (its schedule was deleted): status `skipped`, finished now,
    /// the reason as its error. `None` when it is not `buffered`.
    async fn job_drop_buffered(&mut self, change: &JobCancel) -> StoreResult<Option<Job>>;
    /// Starts the next attempt of a pending, due job: status becomes running, `attempt` grows
    /// by one, `started_at` is now. `None` when someone else claimed it first.
    async fn job_claim(&mut self, claim: &JobClaim) -> StoreResult<Option<Job>>;
    /// Releases a running attempt whose lease lapsed before its call was marked as started:
    /// status `pending`, due now, its attempt still to come (`attempt` one lower, so the next
    /// claim starts the same attempt again under a new epoch), no lease. `None` unless the job
    /// is still running under `change.epoch`, with no call marked and its lease lapsed.
    async fn job_release_uncalled(&mut self, change: &UncalledRelease) -> StoreResult<Option<Job>>;
    /// Of `ids`, the schedules with a fire claimed ahead and not handed off yet (a
    /// `scheduled` job).
    async fn schedules_with_held_fire(
        &mut self,
        ids: &[ScheduleId],
    ) -> StoreResult<Vec<ScheduleId>>;
    /// Of `ids`, the schedules with buffered regular occurrences (not backfilled ones), with
    /// how many wait.
    async fn buffered_occurrence_counts(
        &mut self,
        ids: &[ScheduleId],
    ) -> StoreResult<Vec<(ScheduleId, u32)>>;
    /// The open jobs of the schedules `ids`, in one read.
    async fn jobs_open_of(&mut self, ids: &[ScheduleId]) -> StoreResult<Vec<Job>>;

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

    /// The jobs of schedule `id`: its occurrences since `since` by outcome, and its open jobs
    /// by state (see [`ScheduleJobCounts`]).
    async fn schedule_job_counts(
        &mut self,
        id: ScheduleId,
        since: DateTime<Utc>,
    ) -> StoreResult<ScheduleJobCounts>;

    /// This environment's jobs waiting their turn (`buffered`: backfilled occurrences, and a
    /// buffered fire per schedule at most): what a backfill adds to, and is capped by. Until
    /// the transaction ends, another transaction's count of this environment waits, so that
    /// concurrent backfills cannot together pass the cap.
    async fn jobs_waiting_count(&mut self) -> StoreResult<u64>;

    /// This environment's jobs scheduled in a window, summed up per hour in the store (one row
    /// per hour that had jobs, so the answer is bounded by the window's length).
    async fn job_hours(&mut self, query: &JobHoursQuery) -> StoreResult<JobHours>;

    /// Appends events to the outbox, in the order given.
    async fn outbox_insert_many(&mut self, events: &[NewEvent]) -> StoreResult<()>;
    /// Appends an event to the outbox.
    async fn outbox_insert(&mut self, event: &NewEvent) -> StoreResult<()> {
        self.outbox_insert_many(std::slice::from_ref(event)).await
    }
    /// This environment's outbox events in sequence order, after sequence `after_seq`.
    async fn outbox_list(&mut self, after_seq: i64, limit: u32) -> StoreResult<Vec<OutboxEvent>>;

    /// The environment's calendars named in `names` (those that exist), by name; `lock` locks
    /// their rows until the transaction ends (a removal locks the row first, so none is
    /// removed under a schedule being written).
    async fn calendars_named(&mut self, names: &[String], lock: bool)
    -> StoreResult<Vec<Calendar>>;
    /// Every calendar of the environment, by name.
    async fn calendar_list(&mut self) -> StoreResult<Vec<Calendar>>;
    /// Inserts a calendar, or replaces the description and entries of the one of its name.
    async fn calendar_put(&mut self, calendar: &Calendar) -> StoreResult<()>;
    /// Removes a calendar; whether there was one.
    async fn calendar_delete(&mut self, name: &str) -> StoreResult<bool>;
    /// The live (not deleted) schedules whose exclusions name the calendar `name`, in id order.
    async fn schedules_naming_calendar(&mut self, name: &str) -> StoreResult<Vec<ScheduleId>>;

    /// Appends audit entries, in the order given.
    async fn audit_insert_many(&mut self, entries: &[NewAudit]) -> StoreResult<()>;
    /// Appends an audit entry.
    async fn audit_insert(&mut self, entry: &NewAudit) -> StoreResult<()> {
        self.audit_insert_many(std::slice::from_ref(entry)).await
    }
    /// This environment's audit entries, oldest first.
    async fn audit_list(&mut self, limit: u32) -> StoreResult<Vec<AuditEntry>>;
    /// This environment's audit entries matching the query, newest first.
    async fn audit_query(&mut self, query: &AuditQuery) -> StoreResult<Vec<AuditEntry>>;

    /// Commits the transaction.
    async fn commit(self: Box<Self>) -> StoreResult<()>;
}
