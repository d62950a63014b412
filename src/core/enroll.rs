//! Enroll: bring one domain's schedules in an environment in line with a declaration document.
//!
//! The declared schedules are keyed on (environment, domain, `schedule_type`). Enrolling
//!
//! - creates what is declared and not enrolled yet;
//! - updates what is enrolled and declared differently, and reports which fields changed;
//! - leaves identical schedules untouched: no write, no event, no audit entry, so enrolling the
//!   same document twice changes nothing the second time;
//! - with `prune`, soft-deletes the domain's live schedules that are no longer declared, and
//!   otherwise only reports them.
//!
//! Every change goes through [`ops`] and writes its outbox event and audit entry; all of them
//! happen in one tenant transaction, so a failure half-way leaves nothing behind.
//!
//! Timing (cron, time zone, DST policies, run_at) decides the next fire: it is recomputed from
//! now only when the timing changed. A payload, `max_retries` or target change keeps the next
//! fire. The status is not the declaration's business: a paused schedule stays paused (its next
//! fire is recomputed on resume anyway), and a completed one-shot given a new timing runs again.
//!
//! [`plan`] is the pure part (what would change); [`enroll`] reads the current state, plans, and
//! applies the plan unless it is a dry run.

mod calendars;
pub use calendars::CalendarChange;
use calendars::write_calendars;

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, SubsecRound, Utc};
use serde::Serialize;
use serde_json::{Map, Number, Value};

use crate::core::decl::{DeclaredCalendar, FieldError, ScheduleSpec};
use crate::core::model::{EnvId, Schedule, ScheduleId, ScheduleKind, ScheduleStatus};
use crate::core::ops::{self, Actor, CreateSchedule, OpsError, validate_domain};
use crate::core::store::{ScheduleQuery, Store, StoreError, TenantTx};
use crate::core::target::{Target, TargetPolicy};

/// Rows fetched per page when reading a domain's schedules.
const LIST_PAGE: u32 = 500;

/// Schedules locked by one statement before planning.
const LOCK_BATCH: usize = 1_000;

/// Why an enrollment did not happen. Nothing was written in any of these cases.
#[derive(Debug, thiserror::Error)]
pub enum EnrollError {
    /// The domain or the target is unusable; every problem is listed.
    #[error("invalid enrollment: {}", display_fields(.0))]
    Invalid(Vec<FieldError>),
    /// A change could not be made (a conflicting concurrent change, a database failure).
    #[error(transparent)]
    Ops(#[from] OpsError),
}

impl From<StoreError> for EnrollError {
    fn from(err: StoreError) -> Self {
        EnrollError::Ops(OpsError::from(err))
    }
}

fn display_fields(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The target of every enrolled schedule: `{"baseUrl": ...}`, from an explicit base URL or as
/// `https://{domain}.{platform_domain}`. Exactly one of the two must be given; the result is
/// validated like any target (the one base URL parser, no credentials).
pub fn target_config(
    domain: &str,
    base_url: Option<&str>,
    platform_domain: Option<&str>,
) -> Result<Target, Vec<FieldError>> {
    let url = match (base_url, platform_domain) {
        (Some(url), None) => url.to_owned(),
        (None, Some(host)) => {
            check_platform_domain(host)?;
            format!("https://{domain}.{host}")
        }
        (Some(_), Some(_)) => {
            return Err(vec![FieldError::new(
                "base_url",
                "give either a base URL or a platform domain, not both",
            )]);
        }
        (None, None) => {
            return Err(vec![FieldError::new(
                "base_url",
                "a base URL or a platform domain is required",
            )]);
        }
    };
    let mut target = Map::new();
    target.insert("baseUrl".to_owned(), Value::String(url));
    Target::validate(&Value::Object(target))
}

/// A platform domain is a host name with an optional port: `apps.example.com`, `localhost:8443`.
fn check_platform_domain(host: &str) -> Result<(), Vec<FieldError>> {
    let (name, port) = match host.rsplit_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (host, None),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 253
        && !name.starts_with(['.', '-'])
        && !name.ends_with(['.', '-'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.'));
    let port_ok = port.is_none_or(|port| port.parse::<u16>().is_ok_and(|p| p > 0));
    if name_ok && port_ok {
        Ok(())
    } else {
        Err(vec![FieldError::new(
            "platform_domain",
            format!("{host:?} is not a host name (letters, digits, '-' and '.', optional :port)"),
        )])
    }
}

/// What to enroll where.
#[derive(Debug, Clone)]
pub struct EnrollRequest {
    pub env: EnvId,
    pub domain: String,
    /// The validated declarations (unique `schedule_type`s).
    pub specs: Vec<ScheduleSpec>,
    /// The target of every declared schedule (see [`target_config`]).
    pub target: Target,
    /// The egress policy the target must pass, as at create and update.
    pub policy: Arc<dyn TargetPolicy>,
    /// Soft-delete the domain's live schedules that are not declared.
    pub prune: bool,
    /// Plan only: write nothing.
    pub dry_run: bool,
    /// The calendars the document declares (written before the schedules, which may name
    /// them).
    pub calendars: Vec<DeclaredCalendar>,
}

/// What enrolling did (or, in a dry run, would do) to one schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Declared and not enrolled before: created.
    Created,
    /// Enrolled and declared differently: updated.
    Updated,
    /// Enrolled exactly as declared: not touched.
    Unchanged,
    /// Enrolled, no longer declared, and pruning was asked for: soft-deleted.
    Pruned,
    /// Enrolled, no longer declared, and pruning was not asked for: left alone.
    Undeclared,
}

impl Action {
    /// The name shown in tables and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Created => "created",
            Action::Updated => "updated",
            Action::Unchanged => "unchanged",
            Action::Pruned => "pruned",
            Action::Undeclared => "undeclared",
        }
    }
}

/// A declaration field (or the target) that differs between the enrolled and the declared
/// schedule, in the order they are reported: a declaration's own fields.
pub use crate::core::decl::DECLARED_FIELDS as FIELDS;

/// The fields whose change moves the next fire.
const TIMING_FIELDS: &[&str] = &[
    "cron",
    "run_at",
    "timezone",
    "on_dst_gap",
    "on_dst_repeat",
    "max_jitter",
    "start_at",
    "end_at",
];

/// One line of the outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub schedule_type: String,
    pub action: Action,
    /// For updates: the fields that changed, in [`FIELDS`] order. Empty otherwise.
    pub changed_fields: Vec<&'static str>,
    /// `None` only for a schedule a dry run would create.
    pub schedule_id: Option<ScheduleId>,
    /// The next fire after the change (`None` once pruned, or when there is none).
    pub next_run_at: Option<DateTime<Utc>>,
}

/// The outcome of an enrollment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnrollReport {
    pub env_id: EnvId,
    pub domain: String,
    pub dry_run: bool,
    /// Declared schedules in declaration order, then undeclared ones by `schedule_type`.
    pub changes: Vec<Change>,
    /// The declared calendars, by name: created, updated or unchanged.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub calendars: Vec<CalendarChange>,
}

impl EnrollReport {
    /// How many changes have this action.
    pub fn count(&self, action: Action) -> usize {
        self.changes.iter().filter(|c| c.action == action).count()
    }
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Create this declared schedule; it first fires at `next_run_at`.
    Create {
        spec: Box<ScheduleSpec>,
        next_run_at: Option<DateTime<Utc>>,
    },
    /// Replace `current` by `updated`.
    Update {
        current: Box<Schedule>,
        updated: Box<Schedule>,
        changed_fields: Vec<&'static str>,
    },
    /// Declared exactly as enrolled.
    Keep(Box<Schedule>),
    /// Not declared any more: delete it.
    Prune(Box<Schedule>),
    /// Not declared any more, and not pruned.
    Leave(Box<Schedule>),
}

impl Step {
    fn schedule_type(&self) -> &str {
        match self {
            Step::Create { spec, .. } => &spec.schedule_type,
            Step::Update { current, .. } => &current.schedule_type,
            Step::Keep(s) | Step::Prune(s) | Step::Leave(s) => &s.schedule_type,
        }
    }

    /// The change this step reports before it is applied (as a dry run shows it).
    fn planned_change(&self) -> Change {
        let (action, changed_fields, schedule_id, next_run_at) = match self {
            Step::Create { next_run_at, .. } => (Action::Created, Vec::new(), None, *next_run_at),
            Step::Update {
                updated,
                changed_fields,
                ..
            } => (
                Action::Updated,
                changed_fields.clone(),
                Some(updated.id),
                updated.next_run_at,
            ),
            Step::Keep(s) => (Action::Unchanged, Vec::new(), Some(s.id), s.next_run_at),
            Step::Prune(s) => (Action::Pruned, Vec::new(), Some(s.id), None),
            Step::Leave(s) => (Action::Undeclared, Vec::new(), Some(s.id), s.next_run_at),
        };
        Change {
            schedule_type: self.schedule_type().to_owned(),
            action,
            changed_fields,
            schedule_id,
            next_run_at,
        }
    }
}

/// What enrolling `specs` over the domain's live schedules `current` would do at `now`.
/// Declared schedules come first, in declaration order; undeclared ones follow by
/// `schedule_type`.
pub fn plan(
    current: &[Schedule],
    specs: &[ScheduleSpec],
    target: &Target,
    prune: bool,
    now: DateTime<Utc>,
) -> Result<Vec<Step>, EnrollError> {
    let mut enrolled: HashMap<&str, &Schedule> = HashMap::new();
    for schedule in current {
        enrolled
            .entry(schedule.schedule_type.as_str())
            .or_insert(schedule);
    }
    let mut steps = Vec::with_capacity(specs.len());
    let mut declared: Vec<&str> = Vec::with_capacity(specs.len());
    for spec in specs {
        declared.push(&spec.schedule_type);
        let Some(current) = enrolled.get(spec.schedule_type.as_str()) else {
            steps.push(Step::Create {
                spec: Box::new(spec.clone()),
                next_run_at: spec.first_occurrence_after(now),
            });
            continue;
        };
        steps.push(plan_update(current, spec, target, now)?);
    }
    let mut undeclared: Vec<&Schedule> = current
        .iter()
        .filter(|s| !declared.contains(&s.schedule_type.as_str()))
        .collect();
    undeclared.sort_by(|a, b| a.schedule_type.cmp(&b.schedule_type).then(a.id.cmp(&b.id)));
    steps.extend(undeclared.into_iter().map(|s| {
        if prune {
            Step::Prune(Box::new(s.clone()))
        } else {
            Step::Leave(Box::new(s.clone()))
        }
    }));
    Ok(steps)
}

fn plan_update(
    current: &Schedule,
    spec: &ScheduleSpec,
    target: &Target,
    now: DateTime<Utc>,
) -> Result<Step, EnrollError> {
    let mut updated = ops::with_spec(current, spec);
    updated.target = target.clone();
    let changed_fields = changed_fields(current, &updated);
    if changed_fields.is_empty() {
        return Ok(Step::Keep(Box::new(current.clone())));
    }
    if changed_fields.iter().any(|f| TIMING_FIELDS.contains(f)) {
        if updated.status == ScheduleStatus::Completed {
            // A one-shot that has run, given a new timing, runs again.
            updated.status = ScheduleStatus::Active;
        }
        updated.next_run_at = spec.first_fire_after(now, current.id);
        if updated.status == ScheduleStatus::Active && updated.next_run_at.is_none() {
            let field = if spec.run_at().is_some() {
                "run_at"
            } else {
                "cron"
            };
            return Err(EnrollError::Invalid(vec![FieldError::new(
                format!("{}.{field}", spec.schedule_type),
                "no future fire",
            )]));
        }
    }
    Ok(Step::Update {
        current: Box::new(current.clone()),
        updated: Box::new(updated),
        changed_fields,
    })
}

/// The declaration fields (and the target) in which `updated` differs from `current`, in
/// [`FIELDS`] order. Payloads and targets compare as JSON values (numbers by value, so a
/// database's number normalisation is not a change); instants to the microsecond (the
/// databases' precision).
pub fn changed_fields(current: &Schedule, updated: &Schedule) -> Vec<&'static str> {
    let (before, after) = (&current.timing, &updated.timing);
    let micros = |t: Option<DateTime<Utc>>| t.map(|t| t.trunc_subsecs(6));
    // The zone and DST policies belong to cron timing; a switch between cron and one-shot is
    // reported as the cron and run_at change it is.
    let both_cron = current.kind() == ScheduleKind::Cron && updated.kind() == ScheduleKind::Cron;
    let differs = [
        before.cron_expression() != after.cron_expression(),
        micros(before.run_at()) != micros(after.run_at()),
        both_cron && before.timezone() != after.timezone(),
        both_cron && before.on_dst_gap() != after.on_dst_gap(),
        both_cron && before.on_dst_repeat() != after.on_dst_repeat(),
        !same_json(&current.payload, &updated.payload),
        current.max_retries != updated.max_retries,
        !same_json(current.target.config(), updated.target.config()),
        current.policies.overlap != updated.policies.overlap,
        current.policies.catchup_window != updated.policies.catchup_window,
        current.policies.max_jitter != updated.policies.max_jitter,
        micros(current.policies.start_at) != micros(updated.policies.start_at),
        micros(current.policies.end_at) != micros(updated.policies.end_at),
        current.policies.pause_on_failure != updated.policies.pause_on_failure,
        current.policies.after_completion != updated.policies.after_completion,
        current.labels != updated.labels,
        current.exclude != updated.exclude,
    ];
    // A declared field without its comparison here would never be reported (nor applied).
    debug_assert_eq!(
        differs.len(),
        FIELDS.len(),
        "a declared field is not compared"
    );
    FIELDS
        .iter()
        .zip(differs)
        .filter_map(|(field, differs)| differs.then_some(*field))
        .collect()
}

/// JSON equality with numbers compared by value (`100` equals `1e2`).
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => same_number(x, y),
        (Value::Array(xs), Value::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(xs), Value::Object(ys)) => {
            xs.len() == ys.len()
                && xs
                    .iter()
                    .all(|(key, x)| ys.get(key).is_some_and(|y| same_json(x, y)))
        }
        _ => a == b,
    }
}

fn same_number(x: &Number, y: &Number) -> bool {
    if x == y {
        return true;
    }
    let integer = |n: &Number| {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    match (integer(x), integer(y)) {
        (Some(a), Some(b)) => a == b,
        _ => match (x.as_f64(), y.as_f64()) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        },
    }
}

/// Enrolls in one tenant transaction: reads (and, unless it is a dry run, locks) the domain's
/// live schedules, plans, applies the plan and commits. A dry run writes nothing: its
/// transaction is only read from and then rolled back.
pub async fn enroll(
    store: &dyn Store,
    request: &EnrollRequest,
    actor: &Actor,
) -> Result<EnrollReport, EnrollError> {
    let mut problems = Vec::new();
    if let Err(problem) = validate_domain(&request.domain) {
        problems.push(problem);
    }
    if let Err(mut target) = Target::validate_for(request.target.config(), &*request.policy) {
        problems.append(&mut target);
    }
    if !problems.is_empty() {
        return Err(EnrollError::Invalid(problems));
    }

    let mut tx = store.tenant_begin(request.env).await?;
    let listed = live_schedules(&mut *tx, &request.domain).await?;
    let current = if request.dry_run {
        listed
    } else {
        // Lock in id order (the listing's, and each batch's), so concurrent enrollments cannot
        // deadlock, and plan from the locked rows: a tick that advanced a schedule meanwhile
        // is not undone.
        let mut locked = Vec::with_capacity(listed.len());
        for batch in listed.chunks(LOCK_BATCH) {
            let ids: Vec<ScheduleId> = batch.iter().map(|schedule| schedule.id).collect();
            locked.extend(
                tx.schedule_get_many(&ids, true)
                    .await?
                    .into_iter()
                    .filter(|row| {
                        row.status != ScheduleStatus::Deleted && row.domain == request.domain
                    }),
            );
        }
        locked
    };
    let steps = plan(
        &current,
        &request.specs,
        &request.target,
        request.prune,
        actor.now,
    )?;

    let mut report = EnrollReport {
        env_id: request.env,
        domain: request.domain.clone(),
        dry_run: request.dry_run,
        changes: Vec::with_capacity(steps.len()),
        calendars: write_calendars(&mut *tx, &request.calendars, request.dry_run, actor).await?,
    };
    if request.dry_run {
        report.changes = steps.iter().map(Step::planned_change).collect();
        return Ok(report);
    }
    // The new schedules are written together, after the updates and prunes; each change
    // keeps its place in the report.
    let mut creates = Vec::new();
    let mut created_changes = Vec::new();
    for step in &steps {
        let mut change = step.planned_change();
        match step {
            Step::Create { spec, .. } => {
                creates.push(CreateSchedule {
                    domain: request.domain.clone(),
                    spec: (**spec).clone(),
                    target: request.target.clone(),
                });
                created_changes.push(report.changes.len());
            }
            Step::Update {
                current, updated, ..
            } => {
                let saved = ops::update_schedule(&mut *tx, current, updated, actor).await?;
                change.next_run_at = saved.next_run_at;
            }
            Step::Prune(current) => {
                ops::delete_schedule(&mut *tx, current, actor).await?;
            }
            Step::Keep(_) | Step::Leave(_) => {}
        }
        report.changes.push(change);
    }
    let created = ops::insert_schedules(&mut *tx, &creates, actor).await?;
    for (index, schedule) in created_changes.into_iter().zip(created) {
        report.changes[index].schedule_id = Some(schedule.id);
        report.changes[index].next_run_at = schedule.next_run_at;
    }
    tx.commit().await?;
    Ok(report)
}

/// Every live (not deleted) schedule of a domain, by id.
async fn live_schedules(tx: &mut dyn TenantTx, domain: &str) -> Result<Vec<Schedule>, StoreError> {
    let mut all = Vec::new();
    let mut after = None;
    loop {
        let page = tx
            .schedule_list(&ScheduleQuery {
                domain: Some(domain.to_owned()),
                status: None,
                include_deleted: false,
                type_contains: None,
                labels: None,
                after,
                limit: LIST_PAGE,
            })
            .await?;
        let full = page.len() >= LIST_PAGE as usize;
        after = page.last().map(|s| s.id);
        all.extend(page);
        if !full {
            return Ok(all);
        }
    }
}

#[cfg(test)]
mod tests;
