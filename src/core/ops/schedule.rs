//! Schedule operations: create, patch, pause, resume, delete and trigger, and the
//! transaction-level helpers `enroll` shares with them.

use serde_json::Value;

use super::audit::snapshot;
use super::calendar::check_calendars;
use super::job::ensure_no_open_job;
use super::patch::{self, SchedulePatch};
pub use super::pause::{MAX_NOTE_CHARS, PauseRecord};
pub(super) use super::pause::{check_note, pause_record, paused_detail};
use super::{Actor, CreateSchedule, Ops, OpsError, OpsResult};
use crate::core::buffered::release_buffered;
use crate::core::decl::{FieldError, ScheduleSpec};
use crate::core::events::{self, EventPayload};
use crate::core::model::*;
use crate::core::store::*;
use crate::core::target::Target;

impl Ops {
    /// Creates a schedule; its first fire is the first one strictly after now.
    pub async fn schedule_create(
        &self,
        env: EnvId,
        create: CreateSchedule,
        actor: &Actor,
    ) -> OpsResult<Schedule> {
        create
            .target
            .check(self.target_policy())
            .map_err(OpsError::Invalid)?;
        let mut tx = self.store.tenant_begin(env).await?;
        let schedule = insert_schedule(&mut *tx, &create, actor).await?;
        tx.commit().await?;
        Ok(schedule)
    }

    /// Applies a partial update: any declaration field, `target_config`, and `status`
    /// (`active` or `paused`) to the stored record. Only the fields the patch touches are
    /// validated; the next fire is recomputed only when the timing changed (or the schedule was
    /// resumed).
    pub async fn schedule_patch(
        &self,
        env: EnvId,
        id: ScheduleId,
        patch: SchedulePatch,
        actor: &Actor,
    ) -> OpsResult<Schedule> {
        self.schedule_patch_noted(env, id, patch, actor, None).await
    }

    /// [`Ops::schedule_patch`], with why it was made (`note`) recorded as the audit entry's
    /// and the event's `reason`.
    async fn schedule_patch_noted(
        &self,
        env: EnvId,
        id: ScheduleId,
        patch: SchedulePatch,
        actor: &Actor,
        note: Option<&str>,
    ) -> OpsResult<Schedule> {
        // A new target is checked against the egress policy before anything is opened; its
        // structure is validated with the other touched fields.
        if let Some(config) = &patch.target_config
            && let Ok(target) = Target::validate(config)
        {
            target
                .check(self.target_policy())
                .map_err(OpsError::Invalid)?;
        }
        let mut tx = self.store.tenant_begin(env).await?;
        let current = live_for_update(&mut *tx, id).await?;
        let saved = patch_schedule(&mut *tx, current, patch, actor, note).await?;
        tx.commit().await?;
        Ok(saved)
    }
}

/// [`Ops::schedule_patch`] in the caller's transaction, on `current` (read and locked in it):
/// the change written with its event and audit entry, the held fire it withdraws, the
/// occurrences a resume releases. `note` is why, when said.
pub(super) async fn patch_schedule(
    tx: &mut dyn TenantTx,
    current: Schedule,
    patch: SchedulePatch,
    actor: &Actor,
    note: Option<&str>,
) -> OpsResult<Schedule> {
    let id = current.id;
    let open_job = resumes_with_open_job(&mut *tx, &current, patch.status).await?;
    let (updated, event) = patch::apply(&current, patch, actor, open_job)?;
    if updated == current {
        return Ok(current);
    }
    let saved = tx
        .schedule_set_definition(&ScheduleSetDefinition::to_match(
            &updated,
            &actor.name,
            actor.now,
        ))
        .await?;
    if let Some(event_type) = event {
        let mut payload = EventPayload::for_schedule(event_type, &saved, actor.now)
            .with_changes(&current, &saved)
            .by(&actor.name);
        if let Some(note) = note {
            payload = payload.with_reason(note);
        }
        tx.outbox_insert(&payload.into_event(&saved)).await?;
    }
    let saved = withdraw_held_fire(&mut *tx, &current, saved, actor).await?;
    if saved.status == ScheduleStatus::Active && current.status != ScheduleStatus::Active {
        // A buffered or backfilled occurrence whose turn came while it was paused.
        release_buffered(&mut *tx, &saved, actor.now).await?;
    }
    let mut after = snapshot(&saved);
    if let (Some(note), Some(Value::Object(fields))) = (note, after.as_mut()) {
        fields.insert("reason".to_owned(), Value::from(note));
    }
    tx.audit_insert(&actor.audit(
        audit_action(event),
        "schedule",
        id.to_string(),
        snapshot(&current),
        after,
    ))
    .await?;
    tx.notify_on_commit(Channel::Schedules);
    Ok(saved)
}

impl Ops {
    /// Pauses a schedule (idempotent), with why (`note`, recorded as the pause's reason).
    pub async fn schedule_pause(
        &self,
        env: EnvId,
        id: ScheduleId,
        actor: &Actor,
        note: Option<&str>,
    ) -> OpsResult<Schedule> {
        if let Some(note) = note {
            check_note(note)?;
        }
        self.schedule_patch_noted(
            env,
            id,
            SchedulePatch {
                status: Some(ScheduleStatus::Paused),
                ..SchedulePatch::default()
            },
            actor,
            note,
        )
        .await
    }

    /// Who paused a paused schedule, when and why (the latest pause in the audit journal:
    /// the engine's on failure, or a person's with a note); `None` unless it is paused.
    pub async fn schedule_paused_by(
        &self,
        env: EnvId,
        schedule: &Schedule,
    ) -> OpsResult<Option<PauseRecord>> {
        if schedule.status != ScheduleStatus::Paused {
            return Ok(None);
        }
        let mut tx = self.store.tenant_read(env).await?;
        pause_record(&mut *tx, schedule).await
    }

    /// Resumes a schedule: its next fire is recomputed from now (idempotent).
    pub async fn schedule_resume(
        &self,
        env: EnvId,
        id: ScheduleId,
        actor: &Actor,
    ) -> OpsResult<Schedule> {
        self.schedule_patch(
            env,
            id,
            SchedulePatch {
                status: Some(ScheduleStatus::Active),
                ..SchedulePatch::default()
            },
            actor,
        )
        .await
    }

    /// Soft-deletes a schedule. Its row is kept so jobs, DLQ entries and audit entries still
    /// resolve; a pending retry is cancelled.
    pub async fn schedule_delete(
        &self,
        env: EnvId,
        id: ScheduleId,
        actor: &Actor,
    ) -> OpsResult<Schedule> {
        let mut tx = self.store.tenant_begin(env).await?;
        let current = live_for_update(&mut *tx, id).await?;
        let saved = delete_schedule(&mut *tx, &current, actor).await?;
        tx.commit().await?;
        Ok(saved)
    }

    /// Runs a schedule now, outside its timing: a pending job due immediately, with its
    /// `triggered` event. Refused while the schedule has an open job (one open job per
    /// schedule), and while it is paused: a paused schedule runs nothing, so a triggered job
    /// would only wait for the resume; the conflict says how to resume it.
    pub async fn schedule_trigger(
        &self,
        env: EnvId,
        id: ScheduleId,
        actor: &Actor,
    ) -> OpsResult<Job> {
        let mut tx = self.store.tenant_begin(env).await?;
        let schedule = live_for_update(&mut *tx, id).await?;
        check_trigger(&mut *tx, &schedule).await?;
        let job = trigger_schedule(&mut *tx, &schedule, actor).await?;
        tx.commit().await?;
        Ok(job)
    }
}

/// Whether setting `status` on `schedule` resumes a one-shot that has an open job to finish:
/// `patch::apply`'s rule takes it, and the job is looked up only when that rule can use it.
pub(super) async fn resumes_with_open_job(
    tx: &mut dyn TenantTx,
    schedule: &Schedule,
    status: Option<ScheduleStatus>,
) -> OpsResult<bool> {
    let resuming_one_shot = status == Some(ScheduleStatus::Active)
        && schedule.status == ScheduleStatus::Paused
        && schedule.kind() == ScheduleKind::Once
        && schedule.next_run_at.is_none();
    Ok(resuming_one_shot && tx.job_get_open(schedule.id).await?.is_some())
}

/// Whether `schedule` (read and locked in the caller's transaction) may be triggered: a
/// conflict that says why not (paused, or an open job). Reads only, so a refusal leaves the
/// transaction as it was.
pub(super) async fn check_trigger(tx: &mut dyn TenantTx, schedule: &Schedule) -> OpsResult<()> {
    if schedule.status == ScheduleStatus::Paused {
        return Err(OpsError::Conflict(paused_trigger_detail(schedule.id)));
    }
    ensure_no_open_job(tx, schedule.id).await
}

/// [`Ops::schedule_trigger`]'s writes in the caller's transaction, on `schedule` (read and
/// locked in it, and let through by [`check_trigger`]).
pub(super) async fn trigger_schedule(
    tx: &mut dyn TenantTx,
    schedule: &Schedule,
    actor: &Actor,
) -> OpsResult<Job> {
    let id = schedule.id;
    let job = tx
        .job_insert(&NewJob::pending(schedule.id, actor.now, actor.now))
        .await?;
    let event = EventPayload::for_schedule(events::SCHEDULE_TRIGGERED, schedule, actor.now)
        .with_job(&job)
        .by(&actor.name);
    tx.outbox_insert(&event.into_event(schedule)).await?;
    tx.audit_insert(&actor.audit(
        "schedule.trigger",
        "schedule",
        id.to_string(),
        None,
        snapshot(&job),
    ))
    .await?;
    tx.notify_on_commit(Channel::Schedules);
    Ok(job)
}

/// Why a trigger of a paused schedule is refused, and how to resume it.
fn paused_trigger_detail(id: ScheduleId) -> String {
    paused_detail(id, "a triggered run", "trigger it")
}

/// The audit action of a patch, after the event it publishes: a change of status is recorded
/// as `schedule.pause` or `schedule.resume` (with the rest of the patch in its snapshots),
/// anything else as `schedule.update`. Entries written before pause and resume had their own
/// actions are `schedule.update` with the status change in their snapshots.
fn audit_action(event: Option<&str>) -> &'static str {
    match event {
        Some(events::SCHEDULE_PAUSED) => "schedule.pause",
        Some(events::SCHEDULE_RESUMED) => "schedule.resume",
        _ => "schedule.update",
    }
}

pub(super) async fn live_for_update(tx: &mut dyn TenantTx, id: ScheduleId) -> OpsResult<Schedule> {
    tx.schedule_get_for_update(id)
        .await?
        .filter(|s| s.status != ScheduleStatus::Deleted)
        .ok_or(OpsError::NotFound("schedule"))
}

/// `schedule` with its definition (type, timing, payload, max_retries, policies, labels)
/// replaced by `spec`'s. Status, `next_run_at`, target, bookkeeping and the runs left (a declaration's
/// `remaining_runs` is where a new schedule starts, not a reset) are left to the caller.
pub fn with_spec(schedule: &Schedule, spec: &ScheduleSpec) -> Schedule {
    Schedule {
        schedule_type: spec.schedule_type.clone(),
        timing: spec.timing.clone(),
        payload: Value::Object(spec.payload.clone()),
        max_retries: stored_max_retries(spec.max_retries),
        policies: spec.policies,
        labels: spec.labels.clone(),
        exclude: spec.exclude.clone(),
        ..schedule.clone()
    }
}

/// A validated count (`max_retries`, `remaining_runs`) as stored.
pub(super) fn stored_max_retries(max_retries: u32) -> i32 {
    i32::try_from(max_retries).unwrap_or(i32::MAX)
}

/// Inserts a validated schedule with its event and audit entry (in the caller's transaction).
pub async fn insert_schedule(
    tx: &mut dyn TenantTx,
    create: &CreateSchedule,
    actor: &Actor,
) -> OpsResult<Schedule> {
    let mut created = insert_schedules(tx, std::slice::from_ref(create), actor).await?;
    Ok(created.remove(0))
}

/// Inserts validated schedules with their events and audit entries (in the caller's
/// transaction), each kind of row in few statements; returned in the order given. Nothing is
/// written when one of them has no future fire.
pub async fn insert_schedules(
    tx: &mut dyn TenantTx,
    creates: &[CreateSchedule],
    actor: &Actor,
) -> OpsResult<Vec<Schedule>> {
    let mut news = Vec::with_capacity(creates.len());
    for create in creates {
        let id = ScheduleId::new();
        let Some(next_run_at) = create.spec.first_fire_after(actor.now, id) else {
            let field = if create.spec.run_at().is_some() {
                "run_at"
            } else if create.spec.policies.end_at.is_some() {
                "end_at"
            } else {
                "cron"
            };
            return Err(OpsError::Invalid(vec![FieldError::new(
                field,
                "no future fire",
            )]));
        };
        news.push(NewSchedule {
            id,
            domain: create.domain.clone(),
            schedule_type: create.spec.schedule_type.clone(),
            timing: create.spec.timing.clone(),
            target: create.target.clone(),
            payload: Value::Object(create.spec.payload.clone()),
            status: ScheduleStatus::Active,
            next_run_at: Some(next_run_at),
            max_retries: stored_max_retries(create.spec.max_retries),
            policies: create.spec.policies,
            remaining_runs: create.spec.remaining_runs.map(stored_max_retries),
            labels: create.spec.labels.clone(),
            exclude: create.spec.exclude.clone(),
            actor: actor.name.clone(),
            now: actor.now,
        });
    }
    check_calendars(tx, news.iter().map(|n| &n.exclude)).await?;
    let mut schedules = Vec::with_capacity(news.len());
    for chunk in news.chunks(WRITTEN_TOGETHER) {
        schedules.extend(insert_chunk(tx, chunk, actor).await?);
    }
    if !schedules.is_empty() {
        tx.notify_on_commit(Channel::Schedules);
    }
    Ok(schedules)
}

/// New schedules written with their events and audit entries before the next ones are built:
/// an event or an audit entry is a document of a few kilobytes that takes several times that
/// in memory, so an enrolment of a hundred thousand schedules built them all at once in
/// gigabytes.
const WRITTEN_TOGETHER: usize = 1000;

async fn insert_chunk(
    tx: &mut dyn TenantTx,
    news: &[NewSchedule],
    actor: &Actor,
) -> OpsResult<Vec<Schedule>> {
    let schedules = tx.schedule_insert_many(news).await?;
    let events: Vec<_> = schedules
        .iter()
        .map(|schedule| {
            EventPayload::for_schedule(events::SCHEDULE_CREATED, schedule, actor.now)
                .by(&actor.name)
                .into_event(schedule)
        })
        .collect();
    tx.outbox_insert_many(&events).await?;
    drop(events);
    let audits: Vec<_> = schedules
        .iter()
        .map(|schedule| {
            actor.audit(
                "schedule.create",
                "schedule",
                schedule.id.to_string(),
                None,
                snapshot(schedule),
            )
        })
        .collect();
    tx.audit_insert_many(&audits).await?;
    Ok(schedules)
}

/// Writes a changed definition of a live schedule with its `updated` event and audit entry (in
/// the caller's transaction). `current` is the row as read (locked) in this transaction; the
/// caller has computed `updated` from it, including `next_run_at`.
pub async fn update_schedule(
    tx: &mut dyn TenantTx,
    current: &Schedule,
    updated: &Schedule,
    actor: &Actor,
) -> OpsResult<Schedule> {
    check_calendars(tx, [&updated.exclude]).await?;
    let saved = tx
        .schedule_set_definition(&ScheduleSetDefinition::to_match(
            updated,
            &actor.name,
            actor.now,
        ))
        .await?;
    let event = EventPayload::for_schedule(events::SCHEDULE_UPDATED, &saved, actor.now)
        .with_changes(current, &saved)
        .by(&actor.name);
    tx.outbox_insert(&event.into_event(&saved)).await?;
    let saved = withdraw_held_fire(tx, current, saved, actor).await?;
    tx.audit_insert(&actor.audit(
        "schedule.update",
        "schedule",
        current.id.to_string(),
        snapshot(current),
        snapshot(&saved),
    ))
    .await?;
    tx.notify_on_commit(Channel::Schedules);
    Ok(saved)
}

/// Soft-deletes a live schedule with its event and audit entry (in the caller's transaction).
pub async fn delete_schedule(
    tx: &mut dyn TenantTx,
    current: &Schedule,
    actor: &Actor,
) -> OpsResult<Schedule> {
    let saved = tx
        .schedule_set_deleted(&ScheduleSetDeleted {
            id: current.id,
            actor: actor.name.clone(),
            now: actor.now,
        })
        .await?;
    if let Some(open) = tx.job_get_open(current.id).await?
        && open.status == JobStatus::Pending
    {
        tx.job_cancel(&JobCancel {
            id: open.id,
            error: "cancelled: the schedule was deleted".to_owned(),
            now: actor.now,
        })
        .await?;
    }
    let saved = withdraw_held_fire(tx, current, saved, actor).await?;
    // Occurrences waiting their turn (buffered, backfilled) will not run.
    for waiting in tx
        .jobs_of_schedule(current.id, &[JobStatus::Buffered])
        .await?
    {
        tx.job_drop_buffered(&JobCancel {
            id: waiting.id,
            error: "skipped: the schedule was deleted before this occurrence's turn".to_owned(),
            now: actor.now,
        })
        .await?;
    }
    let event =
        EventPayload::for_schedule(events::SCHEDULE_DELETED, &saved, actor.now).by(&actor.name);
    tx.outbox_insert(&event.into_event(&saved)).await?;
    tx.audit_insert(&actor.audit(
        "schedule.delete",
        "schedule",
        current.id.to_string(),
        snapshot(current),
        snapshot(&saved),
    ))
    .await?;
    tx.notify_on_commit(Channel::Schedules);
    Ok(saved)
}

/// Withdraws the schedule's fire claimed ahead and not handed off for its call yet, when the
/// change from `before` to `after` decides it (a new status, timing or next fire: paused,
/// deleted, resumed, re-timed). In the change's own transaction, so no instance calls it and
/// the new timing may claim the occurrence again at once; the guarded write and the engine's
/// hand-off (`Store::jobs_hand_off`) decide which comes first. A fire handed off (its call
/// may be in flight) is left alone. A withdrawn fire had counted its schedule's
/// `remaining_runs` down (a fire claimed ahead always runs): the run is given back. Returns the
/// schedule as it is now.
async fn withdraw_held_fire(
    tx: &mut dyn TenantTx,
    before: &Schedule,
    after: Schedule,
    actor: &Actor,
) -> OpsResult<Schedule> {
    let Some(reason) = after.withdraws_fire_of(before) else {
        return Ok(after);
    };
    let Some(open) = tx.job_get_open(after.id).await? else {
        return Ok(after);
    };
    if open.status != JobStatus::Scheduled {
        return Ok(after);
    }
    let withdraw = JobWithdraw {
        id: open.id,
        reason,
        now: actor.now,
        handed_off: false,
    };
    if let Some(record) = tx.job_withdraw(&withdraw).await? {
        let event = EventPayload::for_schedule(events::JOB_SKIPPED, &after, actor.now)
            .with_job(&record)
            .by(&actor.name);
        tx.outbox_insert(&event.into_event(&after)).await?;
        // An occurrence that waited behind the withdrawn fire (a backfill) may run now.
        if after.status == ScheduleStatus::Active {
            release_buffered(tx, &after, actor.now).await?;
        }
        if let Some(left) = after.remaining_runs {
            let given_back = Schedule {
                remaining_runs: Some(left + 1),
                ..after
            };
            return Ok(tx
                .schedule_set_definition(&ScheduleSetDefinition::to_match(
                    &given_back,
                    &actor.name,
                    actor.now,
                ))
                .await?);
        }
    }
    Ok(after)
}
