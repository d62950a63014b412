//! Operations on schedules, jobs and the dead-letter queue, shared by the HTTP API, `enroll`
//! and the CLI. Each runs in one tenant transaction together with its outbox event and audit
//! entry, so a change is never visible without its event (and a failed event write undoes the
//! change).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::core::cron::{OnDstGap, OnDstRepeat};
use crate::core::decl::{FieldError, ScheduleDecl, ScheduleSpec, Timing};
use crate::core::events::{self, EventPayload};
use crate::core::model::*;
use crate::core::store::*;
use crate::core::timing;

/// Why an operation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// The resource does not exist in this environment (or is deleted).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The request is invalid; every problem is listed.
    #[error("invalid request: {}", display_fields(.0))]
    Invalid(Vec<FieldError>),
    /// The change conflicts with the current state.
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Store(StoreError),
}

fn display_fields(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl From<StoreError> for OpsError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Conflict(conflict) => OpsError::Conflict(conflict.to_string()),
            other => OpsError::Store(other),
        }
    }
}

/// Result alias for operations.
pub type OpsResult<T> = Result<T, OpsError>;

/// Keys that would smuggle a credential into `target_config` (invariant 9: the M2M token
/// source is the only bearer for proxy-back).
const CREDENTIAL_KEYS: &[&str] = &[
    "authorization",
    "auth",
    "token",
    "accesstoken",
    "bearer",
    "apikey",
    "password",
    "secret",
    "clientsecret",
    "cookie",
    "credentials",
];

/// Validates a `target_config`: an object with an absolute http(s) `baseUrl` and no
/// credentials anywhere in it.
pub fn validate_target_config(value: &Value) -> Result<Map<String, Value>, Vec<FieldError>> {
    let mut errors = Vec::new();
    let Some(map) = value.as_object() else {
        return Err(vec![FieldError::new("target_config", "must be an object")]);
    };
    match map.get("baseUrl") {
        None => errors.push(FieldError::new("target_config.baseUrl", "is required")),
        Some(Value::String(url)) => {
            if let Err(problem) = check_base_url(url) {
                errors.push(FieldError::new("target_config.baseUrl", problem));
            }
        }
        Some(_) => errors.push(FieldError::new("target_config.baseUrl", "must be a string")),
    }
    find_credentials(value, "target_config", &mut errors);
    if errors.is_empty() {
        Ok(map.clone())
    } else {
        Err(errors)
    }
}

fn check_base_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| format!("{url:?} is not an absolute http(s) URL"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err("must not carry credentials (user:password@)".to_owned());
    }
    let host = authority
        .rsplit_once(':')
        .map_or(authority, |(host, port)| {
            if port.chars().all(|c| c.is_ascii_digit()) {
                host
            } else {
                authority
            }
        });
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(format!("{url:?} has no valid host"));
    }
    if url.contains(['?', '#']) {
        return Err("must not have a query or fragment".to_owned());
    }
    Ok(())
}

fn find_credentials(value: &Value, path: &str, errors: &mut Vec<FieldError>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let normalised: String = key
                    .chars()
                    .filter(|c| c.is_ascii_alphanumeric())
                    .map(|c| c.to_ascii_lowercase())
                    .collect();
                let here = format!("{path}.{key}");
                if CREDENTIAL_KEYS.contains(&normalised.as_str()) {
                    errors.push(FieldError::new(
                        here,
                        "credentials are not allowed in target_config; proxy-back authenticates \
                         with sentin8-cron's own M2M token",
                    ));
                } else {
                    find_credentials(inner, &here, errors);
                }
            }
        }
        Value::Array(items) => {
            for (i, inner) in items.iter().enumerate() {
                find_credentials(inner, &format!("{path}[{i}]"), errors);
            }
        }
        Value::String(text)
            if text
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("bearer ") =>
        {
            errors.push(FieldError::new(
                path,
                "looks like a bearer token; credentials are not allowed",
            ));
        }
        _ => {}
    }
}

/// Validates a domain name: 1–128 characters of ASCII letters, digits, `_ - .`.
pub fn validate_domain(domain: &str) -> Result<(), FieldError> {
    let ok = !domain.is_empty()
        && domain.len() <= 128
        && domain
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(FieldError::new(
            "domain",
            "must be 1-128 characters of ASCII letters, digits, '_', '-' and '.'",
        ))
    }
}

/// The columns a validated spec sets on a schedule.
struct SpecColumns {
    kind: ScheduleKind,
    cron_expr: Option<String>,
    timezone: String,
    run_at: Option<DateTime<Utc>>,
    on_dst_gap: OnDstGap,
    on_dst_repeat: OnDstRepeat,
    payload: Value,
    max_retries: i32,
}

fn spec_columns(spec: &ScheduleSpec) -> SpecColumns {
    let (kind, cron_expr, timezone, run_at, gap, repeat) = match &spec.timing {
        Timing::Cron(cron) => (
            ScheduleKind::Cron,
            Some(cron.expression.clone()),
            cron.timezone.clone(),
            None,
            cron.schedule.on_dst_gap,
            cron.schedule.on_dst_repeat,
        ),
        Timing::Once { run_at } => (
            ScheduleKind::Once,
            None,
            "UTC".to_owned(),
            Some(*run_at),
            OnDstGap::default(),
            OnDstRepeat::default(),
        ),
    };
    SpecColumns {
        kind,
        cron_expr,
        timezone,
        run_at,
        on_dst_gap: gap,
        on_dst_repeat: repeat,
        payload: Value::Object(spec.payload.clone()),
        max_retries: i32::try_from(spec.max_retries).unwrap_or(i32::MAX),
    }
}

/// `schedule` with its definition (timing, payload, max_retries) replaced by `spec`'s. Status,
/// `next_run_at`, target and bookkeeping columns are left to the caller.
pub fn with_spec(schedule: &Schedule, spec: &ScheduleSpec) -> Schedule {
    let columns = spec_columns(spec);
    Schedule {
        schedule_type: spec.schedule_type.clone(),
        kind: columns.kind,
        cron_expr: columns.cron_expr,
        timezone: columns.timezone,
        run_at: columns.run_at,
        on_dst_gap: columns.on_dst_gap,
        on_dst_repeat: columns.on_dst_repeat,
        payload: columns.payload,
        max_retries: columns.max_retries,
        ..schedule.clone()
    }
}

/// The declaration a stored schedule corresponds to (for patching and for enroll's diff).
pub fn schedule_as_decl(schedule: &Schedule) -> ScheduleDecl {
    ScheduleDecl {
        schedule_type: schedule.schedule_type.clone(),
        cron: schedule.cron_expr.clone(),
        run_at: schedule
            .run_at
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)),
        timezone: (schedule.kind == ScheduleKind::Cron).then(|| schedule.timezone.clone()),
        payload: Some(schedule.payload.clone()),
        max_retries: u32::try_from(schedule.max_retries).ok(),
        on_dst_gap: (schedule.kind == ScheduleKind::Cron).then_some(schedule.on_dst_gap),
        on_dst_repeat: (schedule.kind == ScheduleKind::Cron).then_some(schedule.on_dst_repeat),
    }
}

/// Who is acting and when: recorded in audit entries and event payloads.
#[derive(Debug, Clone)]
pub struct Actor {
    pub name: String,
    pub correlation_id: Option<String>,
    pub now: DateTime<Utc>,
}

impl Actor {
    fn audit(
        &self,
        action: &str,
        resource_type: &str,
        resource_id: String,
        before: Option<Value>,
        after: Option<Value>,
    ) -> NewAudit {
        NewAudit {
            actor: self.name.clone(),
            action: action.to_owned(),
            resource_type: resource_type.to_owned(),
            resource_id,
            before,
            after,
            correlation_id: self.correlation_id.clone(),
            now: self.now,
        }
    }
}

fn snapshot<T: serde::Serialize>(value: &T) -> Option<Value> {
    serde_json::to_value(value).ok()
}

/// A schedule to create: a validated spec, where it belongs and whom to call.
#[derive(Debug, Clone)]
pub struct CreateSchedule {
    pub domain: String,
    pub spec: ScheduleSpec,
    pub target_config: Map<String, Value>,
}

/// The operations, over one store.
#[derive(Clone)]
pub struct Ops {
    store: Arc<dyn Store>,
}

impl Ops {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Creates a schedule; its first fire is the first one strictly after now.
    pub async fn schedule_create(
        &self,
        env: EnvId,
        create: CreateSchedule,
        actor: &Actor,
    ) -> OpsResult<Schedule> {
        let mut tx = self.store.tenant_begin(env).await?;
        let schedule = insert_schedule(&mut *tx, &create, actor).await?;
        tx.commit().await?;
        Ok(schedule)
    }

    /// A schedule, unless it does not exist here or is deleted.
    pub async fn schedule_get(&self, env: EnvId, id: ScheduleId) -> OpsResult<Schedule> {
        let mut tx = self.store.tenant_begin(env).await?;
        tx.schedule_get(id)
            .await?
            .filter(|s| s.status != ScheduleStatus::Deleted)
            .ok_or(OpsError::NotFound("schedule"))
    }

    /// A page of schedules (deleted ones left out unless the query asks for them).
    pub async fn schedule_list(
        &self,
        env: EnvId,
        query: &ScheduleQuery,
    ) -> OpsResult<Vec<Schedule>> {
        let mut tx = self.store.tenant_begin(env).await?;
        Ok(tx.schedule_list(query).await?)
    }

    /// A job of this environment.
    pub async fn job_get(&self, env: EnvId, id: JobId) -> OpsResult<Job> {
        let mut tx = self.store.tenant_begin(env).await?;
        tx.job_get(id).await?.ok_or(OpsError::NotFound("job"))
    }

    /// A page of jobs, newest first.
    pub async fn job_list(&self, env: EnvId, query: &JobQuery) -> OpsResult<Vec<Job>> {
        let mut tx = self.store.tenant_begin(env).await?;
        Ok(tx.job_list(query).await?)
    }

    /// A dead-letter entry of this environment.
    pub async fn dlq_get(&self, env: EnvId, id: DlqId) -> OpsResult<DlqEntry> {
        let mut tx = self.store.tenant_begin(env).await?;
        tx.dlq_get(id)
            .await?
            .ok_or(OpsError::NotFound("dead-letter entry"))
    }

    /// A page of dead-letter entries, newest first.
    pub async fn dlq_list(&self, env: EnvId, query: &DlqQuery) -> OpsResult<Vec<DlqEntry>> {
        let mut tx = self.store.tenant_begin(env).await?;
        Ok(tx.dlq_list(query).await?)
    }

    /// What the operator's overview shows of one environment, read in one transaction: counts
    /// by status, the latest `failures` failed jobs (each with its schedule, deleted or not,
    /// for a readable label) and the `upcoming` active schedules that fire soonest.
    pub async fn env_overview(
        &self,
        env: EnvId,
        failures: u32,
        upcoming: u32,
    ) -> OpsResult<EnvOverview> {
        let mut tx = self.store.tenant_begin(env).await?;
        let counts = tx.env_counts().await?;
        let failed = tx
            .job_list(&JobQuery {
                status: Some(JobStatus::Failed),
                limit: failures,
                ..JobQuery::default()
            })
            .await?;
        let mut schedules: Vec<Schedule> = Vec::new();
        let mut recent_failures = Vec::with_capacity(failed.len());
        for job in failed {
            let known = schedules.iter().find(|s| s.id == job.schedule_id).cloned();
            let schedule = match known {
                Some(schedule) => Some(schedule),
                None => {
                    let fetched = tx.schedule_get(job.schedule_id).await?;
                    schedules.extend(fetched.clone());
                    fetched
                }
            };
            recent_failures.push((job, schedule));
        }
        let upcoming = tx.schedule_list_upcoming(upcoming).await?;
        Ok(EnvOverview {
            counts,
            recent_failures,
            upcoming,
        })
    }

    /// Applies a partial update: any declaration field, `target_config`, and `status`
    /// (`active` or `paused`). The merged result is validated like a new schedule; the next fire
    /// is recomputed only when the timing changed (or the schedule was resumed).
    pub async fn schedule_patch(
        &self,
        env: EnvId,
        id: ScheduleId,
        patch: SchedulePatch,
        actor: &Actor,
    ) -> OpsResult<Schedule> {
        let mut tx = self.store.tenant_begin(env).await?;
        let current = live_for_update(&mut *tx, id).await?;
        let (updated, event) = apply_patch(&current, patch, actor)?;
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
            let payload = EventPayload::for_schedule(event_type, &saved, actor.now).by(&actor.name);
            tx.outbox_insert(&payload.into_event(&saved)).await?;
        }
        tx.audit_insert(&actor.audit(
            "schedule.update",
            "schedule",
            id.to_string(),
            snapshot(&current),
            snapshot(&saved),
        ))
        .await?;
        tx.notify_on_commit(Channel::Schedules);
        tx.commit().await?;
        Ok(saved)
    }

    /// Pauses a schedule (idempotent).
    pub async fn schedule_pause(
        &self,
        env: EnvId,
        id: ScheduleId,
        actor: &Actor,
    ) -> OpsResult<Schedule> {
        self.schedule_patch(
            env,
            id,
            SchedulePatch {
                status: Some(ScheduleStatus::Paused),
                ..SchedulePatch::default()
            },
            actor,
        )
        .await
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

    /// Runs a schedule now, outside its timing: a pending job due immediately. Refused while
    /// the schedule has an open job (one open job per schedule).
    pub async fn schedule_trigger(
        &self,
        env: EnvId,
        id: ScheduleId,
        actor: &Actor,
    ) -> OpsResult<Job> {
        let mut tx = self.store.tenant_begin(env).await?;
        let schedule = live_for_update(&mut *tx, id).await?;
        ensure_no_open_job(&mut *tx, id).await?;
        let job = tx
            .job_insert(&pending_now(schedule.id, actor.now, actor.now))
            .await?;
        tx.audit_insert(&actor.audit(
            "schedule.trigger",
            "schedule",
            id.to_string(),
            None,
            snapshot(&job),
        ))
        .await?;
        tx.notify_on_commit(Channel::Schedules);
        tx.commit().await?;
        Ok(job)
    }

    /// Retries a failed job now. Its dead-letter entry, if any, is removed in the same
    /// transaction (it has been dealt with).
    pub async fn job_retry(&self, env: EnvId, id: JobId, actor: &Actor) -> OpsResult<Job> {
        let mut tx = self.store.tenant_begin(env).await?;
        let job = tx.job_get(id).await?.ok_or(OpsError::NotFound("job"))?;
        let schedule = live_for_update(&mut *tx, job.schedule_id).await?;
        if job.status != JobStatus::Failed {
            return Err(OpsError::Conflict(format!(
                "only failed jobs can be retried; this one is {}",
                job.status
            )));
        }
        ensure_no_open_job(&mut *tx, job.schedule_id).await?;
        let retried = tx
            .job_set_pending(&JobSetPending {
                id: job.id,
                next_attempt_at: actor.now,
                now: actor.now,
            })
            .await?
            .ok_or_else(|| OpsError::Conflict("the job changed while retrying it".to_owned()))?;
        let entries = tx
            .dlq_list(&DlqQuery {
                job_id: Some(job.id),
                limit: 1000,
                ..DlqQuery::default()
            })
            .await?;
        for entry in &entries {
            tx.dlq_delete(entry.id).await?;
        }
        let event = EventPayload::for_schedule(events::JOB_RETRIED, &schedule, actor.now)
            .with_job(&retried)
            .by(&actor.name);
        tx.outbox_insert(&event.into_event(&schedule)).await?;
        tx.audit_insert(&actor.audit(
            "job.retry",
            "job",
            id.to_string(),
            snapshot(&job),
            snapshot(&retried),
        ))
        .await?;
        tx.notify_on_commit(Channel::Schedules);
        tx.commit().await?;
        Ok(retried)
    }

    /// Republishes a dead-letter entry: a fresh pending job due now, and the entry removed, in
    /// one transaction.
    pub async fn dlq_republish(&self, env: EnvId, id: DlqId, actor: &Actor) -> OpsResult<Job> {
        let mut tx = self.store.tenant_begin(env).await?;
        let entry = tx
            .dlq_get(id)
            .await?
            .ok_or(OpsError::NotFound("dead-letter entry"))?;
        let schedule = live_for_update(&mut *tx, entry.schedule_id).await?;
        ensure_no_open_job(&mut *tx, entry.schedule_id).await?;
        let job = tx
            .job_insert(&pending_now(schedule.id, entry.scheduled_for, actor.now))
            .await?;
        if !tx.dlq_delete(id).await? {
            return Err(OpsError::NotFound("dead-letter entry"));
        }
        let event = EventPayload::for_schedule(events::DLQ_REPUBLISHED, &schedule, actor.now)
            .with_job(&job)
            .with_dlq(&entry)
            .by(&actor.name);
        tx.outbox_insert(&event.into_event(&schedule)).await?;
        tx.audit_insert(&actor.audit(
            "dlq.republish",
            "dlq",
            id.to_string(),
            snapshot(&entry),
            snapshot(&job),
        ))
        .await?;
        tx.notify_on_commit(Channel::Schedules);
        tx.commit().await?;
        Ok(job)
    }
}

/// One environment at a glance (see [`Ops::env_overview`]).
#[derive(Debug, Clone, PartialEq)]
pub struct EnvOverview {
    pub counts: EnvCounts,
    /// Failed jobs, newest first, with their schedule when it still exists in any state.
    pub recent_failures: Vec<(Job, Option<Schedule>)>,
    /// Active schedules, soonest next fire first.
    pub upcoming: Vec<Schedule>,
}

/// A partial update of a schedule. `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SchedulePatch {
    pub cron: Option<String>,
    pub run_at: Option<String>,
    pub timezone: Option<String>,
    pub payload: Option<Value>,
    pub max_retries: Option<u32>,
    pub on_dst_gap: Option<OnDstGap>,
    pub on_dst_repeat: Option<OnDstRepeat>,
    pub target_config: Option<Value>,
    pub status: Option<ScheduleStatus>,
}

fn apply_patch(
    current: &Schedule,
    patch: SchedulePatch,
    actor: &Actor,
) -> OpsResult<(Schedule, Option<&'static str>)> {
    let mut errors = Vec::new();
    let mut decl = schedule_as_decl(current);
    // Switching between cron and one-shot replaces the other timing.
    if patch.cron.is_some() {
        decl.run_at = None;
        decl.timezone = decl.timezone.or_else(|| Some("UTC".to_owned()));
    }
    if patch.run_at.is_some() {
        decl.cron = None;
        decl.timezone = None;
        decl.on_dst_gap = None;
        decl.on_dst_repeat = None;
    }
    let timing_touched = patch.cron.is_some()
        || patch.run_at.is_some()
        || patch.timezone.is_some()
        || patch.on_dst_gap.is_some()
        || patch.on_dst_repeat.is_some();
    decl.cron = patch.cron.or(decl.cron);
    decl.run_at = patch.run_at.or(decl.run_at);
    decl.timezone = patch.timezone.or(decl.timezone);
    decl.payload = patch.payload.or(decl.payload);
    decl.max_retries = patch.max_retries.or(decl.max_retries);
    decl.on_dst_gap = patch.on_dst_gap.or(decl.on_dst_gap);
    decl.on_dst_repeat = patch.on_dst_repeat.or(decl.on_dst_repeat);

    let mut updated = current.clone();
    match patch.status {
        None => {}
        Some(s @ (ScheduleStatus::Active | ScheduleStatus::Paused)) => updated.status = s,
        Some(other) => errors.push(FieldError::new(
            "status",
            format!("{other} cannot be set directly (use active or paused; delete to delete)"),
        )),
    }
    if current.status == ScheduleStatus::Completed
        && patch.status == Some(ScheduleStatus::Active)
        && !timing_touched
    {
        errors.push(FieldError::new(
            "status",
            "a completed one-shot schedule cannot be resumed; give it a new run_at",
        ));
    }
    // Untouched timing is checked as of the schedule's creation, so a one-shot whose instant
    // has passed can still have its payload edited.
    let as_of = if timing_touched {
        actor.now
    } else {
        current.created_at.min(actor.now)
    };
    let spec = match decl.validate(as_of) {
        Ok(spec) => Some(spec),
        Err(mut problems) => {
            errors.append(&mut problems);
            None
        }
    };
    if let Some(target) = &patch.target_config {
        match validate_target_config(target) {
            Ok(map) => updated.target_config = Value::Object(map),
            Err(mut problems) => errors.append(&mut problems),
        }
    }
    if !errors.is_empty() {
        return Err(OpsError::Invalid(errors));
    }
    if let Some(spec) = &spec {
        let columns = spec_columns(spec);
        updated.kind = columns.kind;
        updated.cron_expr = columns.cron_expr;
        updated.timezone = columns.timezone;
        updated.run_at = columns.run_at;
        updated.on_dst_gap = columns.on_dst_gap;
        updated.on_dst_repeat = columns.on_dst_repeat;
        updated.payload = columns.payload;
        updated.max_retries = columns.max_retries;
    }
    let resumed =
        current.status != ScheduleStatus::Active && updated.status == ScheduleStatus::Active;
    if timing_touched
        && updated.kind == ScheduleKind::Once
        && updated.status == ScheduleStatus::Completed
    {
        // A completed one-shot given a new run_at runs again.
        updated.status = ScheduleStatus::Active;
    }
    if timing_touched || resumed {
        updated.next_run_at = timing::next_fire_after(&updated, actor.now)
            .map_err(|e| OpsError::Invalid(vec![FieldError::new("cron", e.to_string())]))?;
        if updated.status == ScheduleStatus::Active && updated.next_run_at.is_none() {
            return Err(OpsError::Invalid(vec![FieldError::new(
                if updated.kind == ScheduleKind::Once {
                    "run_at"
                } else {
                    "cron"
                },
                "no future fire",
            )]));
        }
    }
    if updated == *current {
        return Ok((updated, None));
    }
    updated.updated_at = actor.now;
    updated.updated_by = actor.name.clone();
    let event = if current.status != updated.status {
        Some(match updated.status {
            ScheduleStatus::Paused => events::SCHEDULE_PAUSED,
            _ => events::SCHEDULE_RESUMED,
        })
    } else {
        Some(events::SCHEDULE_UPDATED)
    };
    Ok((updated, event))
}

/// Refuses to open a second job while the schedule has one (one open job per schedule), with a
/// message that says which job is in the way.
async fn ensure_no_open_job(tx: &mut dyn TenantTx, schedule_id: ScheduleId) -> OpsResult<()> {
    match tx.job_get_open(schedule_id).await? {
        Some(open) => Err(OpsError::Conflict(format!(
            "the schedule already has an open job ({}, {}); try again when it has finished",
            open.id, open.status
        ))),
        None => Ok(()),
    }
}

async fn live_for_update(tx: &mut dyn TenantTx, id: ScheduleId) -> OpsResult<Schedule> {
    tx.schedule_get_for_update(id)
        .await?
        .filter(|s| s.status != ScheduleStatus::Deleted)
        .ok_or(OpsError::NotFound("schedule"))
}

fn pending_now(
    schedule_id: ScheduleId,
    scheduled_for: DateTime<Utc>,
    now: DateTime<Utc>,
) -> NewJob {
    NewJob {
        id: JobId::new(),
        schedule_id,
        status: JobStatus::Pending,
        attempt: 0,
        scheduled_for,
        next_attempt_at: Some(now),
        started_at: None,
        finished_at: None,
        error: None,
        now,
    }
}

/// Inserts a validated schedule with its event and audit entry (in the caller's transaction).
pub async fn insert_schedule(
    tx: &mut dyn TenantTx,
    create: &CreateSchedule,
    actor: &Actor,
) -> OpsResult<Schedule> {
    let next_run_at = create.spec.first_fire_after(actor.now);
    if next_run_at.is_none() {
        let field = if create.spec.run_at().is_some() {
            "run_at"
        } else {
            "cron"
        };
        return Err(OpsError::Invalid(vec![FieldError::new(
            field,
            "no future fire",
        )]));
    }
    let columns = spec_columns(&create.spec);
    let schedule = tx
        .schedule_insert(&NewSchedule {
            id: ScheduleId::new(),
            domain: create.domain.clone(),
            schedule_type: create.spec.schedule_type.clone(),
            kind: columns.kind,
            cron_expr: columns.cron_expr,
            timezone: columns.timezone,
            run_at: columns.run_at,
            on_dst_gap: columns.on_dst_gap,
            on_dst_repeat: columns.on_dst_repeat,
            target_config: Value::Object(create.target_config.clone()),
            payload: columns.payload,
            status: ScheduleStatus::Active,
            next_run_at,
            max_retries: columns.max_retries,
            actor: actor.name.clone(),
            now: actor.now,
        })
        .await?;
    let event =
        EventPayload::for_schedule(events::SCHEDULE_CREATED, &schedule, actor.now).by(&actor.name);
    tx.outbox_insert(&event.into_event(&schedule)).await?;
    tx.audit_insert(&actor.audit(
        "schedule.create",
        "schedule",
        schedule.id.to_string(),
        None,
        snapshot(&schedule),
    ))
    .await?;
    tx.notify_on_commit(Channel::Schedules);
    Ok(schedule)
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
    let saved = tx
        .schedule_set_definition(&ScheduleSetDefinition::to_match(
            updated,
            &actor.name,
            actor.now,
        ))
        .await?;
    let event =
        EventPayload::for_schedule(events::SCHEDULE_UPDATED, &saved, actor.now).by(&actor.name);
    tx.outbox_insert(&event.into_event(&saved)).await?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn target_config_needs_an_absolute_http_base_url() {
        assert!(validate_target_config(&json!({"baseUrl": "https://billing.example.com"})).is_ok());
        assert!(validate_target_config(&json!({"baseUrl": "http://127.0.0.1:8081/api"})).is_ok());
        for bad in [
            "billing.example.com",
            "ftp://x",
            "https://",
            "/relative",
            "https://h/p?q=1",
        ] {
            let errors = validate_target_config(&json!({"baseUrl": bad})).unwrap_err();
            assert_eq!(errors[0].field, "target_config.baseUrl", "{bad}");
        }
        let errors = validate_target_config(&json!({})).unwrap_err();
        assert_eq!(errors[0].to_string(), "target_config.baseUrl: is required");
        let errors = validate_target_config(&json!("https://x")).unwrap_err();
        assert_eq!(errors[0].to_string(), "target_config: must be an object");
    }

    #[test]
    fn target_config_may_not_carry_credentials() {
        let cases = [
            json!({"baseUrl": "https://x", "headers": {"Authorization": "Bearer abc"}}),
            json!({"baseUrl": "https://x", "api_key": "k"}),
            json!({"baseUrl": "https://x", "client-secret": "s"}),
            json!({"baseUrl": "https://user:pw@x"}),
            json!({"baseUrl": "https://x", "extra": ["Bearer abc"]}),
        ];
        for case in cases {
            let errors = validate_target_config(&case).unwrap_err();
            assert!(
                errors.iter().any(|e| e.message.contains("credentials")),
                "{case}: {errors:?}"
            );
        }
        // Ordinary settings are fine.
        assert!(validate_target_config(&json!({"baseUrl": "https://x", "region": "eu"})).is_ok());
    }

    #[test]
    fn domains_are_simple_names() {
        assert!(validate_domain("billing").is_ok());
        assert!(validate_domain("billing-v2.eu").is_ok());
        assert!(validate_domain("").is_err());
        assert!(validate_domain("bill ing").is_err());
        assert!(validate_domain(&"x".repeat(129)).is_err());
    }
}
