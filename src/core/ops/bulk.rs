//! Acting on every live schedule a label selector matches: pause, resume, trigger or delete,
//! all in one transaction, each schedule with its own event and audit entry as if it had been
//! acted on alone. A schedule the action does not apply to (already paused, an open job in the
//! way of a trigger) is reported, not an error, and the others go on: that is decided, for
//! each schedule, before anything of it is written, and any failure of a write fails the whole
//! request (nothing is kept). A dry run does the same work in a transaction it then rolls back,
//! so what it reports is exactly what would happen.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::patch::{self, SchedulePatch};
use super::schedule::{
    check_trigger, delete_schedule, patch_schedule, resumes_with_open_job, trigger_schedule,
};
use super::{Actor, Ops, OpsError, OpsResult, display_fields};
use crate::core::decl::FieldError;
use crate::core::labels::LabelSelector;
use crate::core::model::*;
use crate::core::store::{ScheduleQuery, TenantTx};

/// The most schedules one bulk action takes; a selector that matches more is refused.
pub const BULK_MAX: usize = 1000;
/// Above this many matched schedules an action needs `confirm` set to their number.
pub const BULK_CONFIRM_ABOVE: usize = 10;

/// What a bulk request does to each schedule it selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BulkAction {
    Pause,
    Resume,
    Trigger,
    Delete,
}

impl BulkAction {
    pub fn as_str(self) -> &'static str {
        match self {
            BulkAction::Pause => "pause",
            BulkAction::Resume => "resume",
            BulkAction::Trigger => "trigger",
            BulkAction::Delete => "delete",
        }
    }
}

impl fmt::Display for BulkAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A bulk request: the action, which schedules, and the caller's safeguards.
#[derive(Debug, Clone)]
pub struct BulkRequest {
    pub action: BulkAction,
    pub selector: LabelSelector,
    /// Report what would happen and change nothing.
    pub dry_run: bool,
    /// The number of schedules the caller expects to act on; required when more than
    /// [`BULK_CONFIRM_ABOVE`] match, so a selector broader than meant changes nothing.
    pub confirm: Option<u64>,
    /// Why (a pause's note).
    pub note: Option<String>,
}

/// What happened to one selected schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BulkOutcome {
    Paused,
    Resumed,
    Triggered,
    Deleted,
    /// Already as asked (a pause of a paused schedule), or nothing to pause (a completed one).
    Unchanged,
    /// The action does not apply to it now; `detail` says why.
    Refused,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BulkItem {
    pub schedule_id: ScheduleId,
    pub domain: String,
    pub schedule_type: String,
    /// Its status before the action.
    pub status: ScheduleStatus,
    pub outcome: BulkOutcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The job a trigger created.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<JobId>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BulkReport {
    pub action: BulkAction,
    /// The selector, in its canonical form.
    pub label_selector: String,
    pub dry_run: bool,
    pub matched: usize,
    /// Schedules the action changed (or would change, in a dry run).
    pub changed: usize,
    pub items: Vec<BulkItem>,
}

impl Ops {
    /// Runs `request` on the live schedules of `env` its selector matches (see the module
    /// documentation).
    pub async fn schedules_bulk(
        &self,
        env: EnvId,
        request: &BulkRequest,
        actor: &Actor,
    ) -> OpsResult<BulkReport> {
        if request.selector.is_empty() {
            return Err(invalid(
                "label_selector",
                "name at least one requirement (an empty selector would select every schedule)",
            ));
        }
        if let Some(note) = &request.note {
            super::schedule::check_note(note)?;
        }
        let mut tx = self.store.tenant_begin(env).await?;
        let listed = tx
            .schedule_list(&ScheduleQuery {
                labels: Some(request.selector.clone()),
                limit: u32::try_from(BULK_MAX + 1).unwrap_or(u32::MAX),
                ..ScheduleQuery::default()
            })
            .await?;
        if listed.len() > BULK_MAX {
            return Err(invalid(
                "label_selector",
                format!(
                    "matches more than {BULK_MAX} schedules; narrow it (a bulk action takes at \
                     most {BULK_MAX})"
                ),
            ));
        }
        let ids: Vec<ScheduleId> = listed.iter().map(|s| s.id).collect();
        // Locked in id order and read again: one deleted or relabelled since the list is left
        // out, and the rest are acted on as they are now.
        let selected: Vec<Schedule> = tx
            .schedule_get_many(&ids, true)
            .await?
            .into_iter()
            .filter(|s| s.status != ScheduleStatus::Deleted && request.selector.matches(&s.labels))
            .collect();
        check_confirmed(request, selected.len())?;
        let mut items = Vec::with_capacity(selected.len());
        for schedule in selected {
            items.push(act(&mut *tx, request, schedule, actor).await?);
        }
        if !request.dry_run {
            tx.commit().await?;
        }
        // A dry run's transaction is dropped here, which rolls it back.
        let changed = items
            .iter()
            .filter(|i| !matches!(i.outcome, BulkOutcome::Unchanged | BulkOutcome::Refused))
            .count();
        Ok(BulkReport {
            action: request.action,
            label_selector: request.selector.to_string(),
            dry_run: request.dry_run,
            matched: items.len(),
            changed,
            items,
        })
    }
}

/// Refuses an action on more than a few schedules without the caller's count of them, and
/// one whose count is not theirs.
fn check_confirmed(request: &BulkRequest, matched: usize) -> OpsResult<()> {
    if request.dry_run || request.confirm == u64::try_from(matched).ok() {
        return Ok(());
    }
    if matched > BULK_CONFIRM_ABOVE {
        return Err(invalid(
            "confirm",
            format!(
                "the selector matches {matched} schedules: to {} them, set confirm to {matched} \
                 (a dry run lists them first)",
                request.action
            ),
        ));
    }
    match request.confirm {
        Some(confirm) => Err(invalid(
            "confirm",
            format!("is {confirm}, but the selector matches {matched} schedules"),
        )),
        None => Ok(()),
    }
}

/// The action on one locked, live schedule, in the bulk's transaction. Whether it applies is
/// decided first, from the schedule (and its open job) alone; once it is being written, any
/// error is the whole request's.
async fn act(
    tx: &mut dyn TenantTx,
    request: &BulkRequest,
    schedule: Schedule,
    actor: &Actor,
) -> OpsResult<BulkItem> {
    let mut item = BulkItem {
        schedule_id: schedule.id,
        domain: schedule.domain.clone(),
        schedule_type: schedule.schedule_type.clone(),
        status: schedule.status,
        outcome: BulkOutcome::Unchanged,
        detail: None,
        job_id: None,
    };
    let status_patch = |status| SchedulePatch {
        status: Some(status),
        ..SchedulePatch::default()
    };
    match (request.action, schedule.status) {
        (BulkAction::Pause, ScheduleStatus::Paused)
        | (BulkAction::Resume, ScheduleStatus::Active) => {
            item.detail = Some(format!("it is already {}", schedule.status));
        }
        (BulkAction::Pause, status @ ScheduleStatus::Completed) => {
            item.detail = Some(format!("it is {status}: nothing is left to pause"));
        }
        (action @ (BulkAction::Pause | BulkAction::Resume), _) => {
            let status = if action == BulkAction::Pause {
                ScheduleStatus::Paused
            } else {
                ScheduleStatus::Active
            };
            // The single pause's and resume's own rule, applied without writing.
            let open_job = resumes_with_open_job(tx, &schedule, Some(status)).await?;
            match patch::apply(&schedule, status_patch(status), actor, open_job) {
                Err(OpsError::Invalid(problems)) => refuse(&mut item, display_fields(&problems)),
                Err(other) => return Err(other),
                Ok(_) => {
                    let note = request
                        .note
                        .as_deref()
                        .filter(|_| status == ScheduleStatus::Paused);
                    patch_schedule(tx, schedule, status_patch(status), actor, note).await?;
                    item.outcome = if status == ScheduleStatus::Paused {
                        BulkOutcome::Paused
                    } else {
                        BulkOutcome::Resumed
                    };
                }
            }
        }
        (BulkAction::Trigger, _) => match check_trigger(tx, &schedule).await {
            Err(OpsError::Conflict(why)) => refuse(&mut item, why),
            Err(other) => return Err(other),
            Ok(()) => {
                let job = trigger_schedule(tx, &schedule, actor).await?;
                item.job_id = Some(job.id);
                item.outcome = BulkOutcome::Triggered;
            }
        },
        (BulkAction::Delete, _) => {
            delete_schedule(tx, &schedule, actor).await?;
            item.outcome = BulkOutcome::Deleted;
        }
    }
    Ok(item)
}

fn refuse(item: &mut BulkItem, why: String) {
    item.outcome = BulkOutcome::Refused;
    item.detail = Some(why);
}

fn invalid(field: &str, message: impl Into<String>) -> OpsError {
    OpsError::Invalid(vec![FieldError::new(field, message)])
}
