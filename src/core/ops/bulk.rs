//! Acting on every live schedule a label selector matches: pause, resume, trigger or delete,
//! all in one transaction, each schedule with its own event and audit entry as if it had been
//! acted on alone. A schedule the action does not apply to (already paused, an open job in the
//! way of a trigger) is reported, not an error, and the others go on. A dry run does the same
//! work in a transaction it then rolls back, so what it reports is exactly what would happen.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use super::patch::SchedulePatch;
use super::schedule::{delete_schedule, patch_schedule, trigger_schedule};
use super::{Actor, Ops, OpsError, OpsResult};
use crate::core::decl::FieldError;
use crate::core::labels::LabelSelector;
use crate::core::model::*;
use crate::core::store::{ScheduleQuery, TenantTx};

/// The most schedules one bulk action takes; a selector that matches more is refused.
pub const BULK_MAX: usize = 1000;
/// Above this many matched schedules an action needs `confirm` set to their number.
pub const BULK_CONFIRM_ABOVE: usize = 10;

/// What a bulk request does to each schedule it selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BulkAction {
    Pause,
    Resume,
    Trigger,
    Delete,
}

impl BulkAction {
    pub const ALL: [BulkAction; 4] = [
        BulkAction::Pause,
        BulkAction::Resume,
        BulkAction::Trigger,
        BulkAction::Delete,
    ];

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

impl FromStr for BulkAction {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        BulkAction::ALL
            .into_iter()
            .find(|a| a.as_str() == text)
            .ok_or_else(|| format!("{text:?} is not pause, resume, trigger or delete"))
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
    /// Already as asked (a pause of a paused schedule).
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
        let matched = tx
            .schedule_list(&ScheduleQuery {
                labels: Some(request.selector.clone()),
                limit: u32::try_from(BULK_MAX + 1).unwrap_or(u32::MAX),
                ..ScheduleQuery::default()
            })
            .await?;
        check_scope(request, matched.len())?;
        let ids: Vec<ScheduleId> = matched.iter().map(|s| s.id).collect();
        // Locked in id order, then read again: a schedule changed or deleted since the list
        // is acted on as it is now.
        let locked = tx.schedule_get_many(&ids, true).await?;
        let mut items = Vec::with_capacity(locked.len());
        for schedule in locked {
            if schedule.status == ScheduleStatus::Deleted {
                continue;
            }
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

/// Refuses a selector that matches too many, and an action on more than a few schedules
/// without the caller's count.
fn check_scope(request: &BulkRequest, matched: usize) -> OpsResult<()> {
    if matched > BULK_MAX {
        return Err(invalid(
            "label_selector",
            format!(
                "matches more than {BULK_MAX} schedules; narrow it (a bulk action takes at most \
                 {BULK_MAX})"
            ),
        ));
    }
    let confirmed = request.confirm == u64::try_from(matched).ok();
    if !request.dry_run && matched > BULK_CONFIRM_ABOVE && !confirmed {
        return Err(invalid(
            "confirm",
            format!(
                "the selector matches {matched} schedules: to {} them, set confirm to {matched} \
                 (a dry run lists them first)",
                request.action
            ),
        ));
    }
    if let Some(confirm) = request.confirm
        && !request.dry_run
        && !confirmed
    {
        return Err(invalid(
            "confirm",
            format!("is {confirm}, but the selector matches {matched} schedules"),
        ));
    }
    Ok(())
}

/// The action on one locked, live schedule, in the bulk's transaction. A refusal of the
/// action itself (a conflict, a resume with no future fire) is checked before anything is
/// written, so it is reported and the transaction goes on.
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
    let done = match (request.action, schedule.status) {
        (BulkAction::Pause, ScheduleStatus::Active) => {
            let note = request.note.as_deref();
            patch_schedule(
                tx,
                schedule,
                status_patch(ScheduleStatus::Paused),
                actor,
                note,
            )
            .await
            .map(|_| BulkOutcome::Paused)
        }
        (BulkAction::Resume, ScheduleStatus::Paused) => patch_schedule(
            tx,
            schedule,
            status_patch(ScheduleStatus::Active),
            actor,
            None,
        )
        .await
        .map(|_| BulkOutcome::Resumed),
        (BulkAction::Pause | BulkAction::Resume, status) => {
            item.detail = Some(format!("it is {status}"));
            Ok(BulkOutcome::Unchanged)
        }
        (BulkAction::Trigger, _) => trigger_schedule(tx, &schedule, actor).await.map(|job| {
            item.job_id = Some(job.id);
            BulkOutcome::Triggered
        }),
        (BulkAction::Delete, _) => delete_schedule(tx, &schedule, actor)
            .await
            .map(|_| BulkOutcome::Deleted),
    };
    item.outcome = match done {
        Ok(outcome) => outcome,
        Err(OpsError::Conflict(why)) => {
            item.detail = Some(why);
            BulkOutcome::Refused
        }
        Err(OpsError::Invalid(problems)) => {
            item.detail = Some(super::display_fields(&problems));
            BulkOutcome::Refused
        }
        Err(other) => return Err(other),
    };
    Ok(item)
}

fn invalid(field: &str, message: impl Into<String>) -> OpsError {
    OpsError::Invalid(vec![FieldError::new(field, message)])
}
