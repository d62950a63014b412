//! A schedule's pause, as its journal records it: the latest pause (who, when, why), the
//! note's rules, and why a run asked of a paused schedule is refused.

use serde_json::Value;

use super::{OpsError, OpsResult};
use crate::core::decl::FieldError;
use crate::core::model::*;
use crate::core::store::*;

/// Why a run asked of a paused schedule is refused, and how to resume it first: `what` would
/// only wait for the resume, and `then` is what to do after it.
pub(super) fn paused_detail(id: ScheduleId, what: &str, then: &str) -> String {
    format!(
        "schedule {id} is paused, and a paused schedule runs nothing ({what} would only wait \
         for the resume): resume it first (POST /v1/schedules/{id}/resume, \
         `sentin8-cron schedules resume {id}`, or Resume on its admin page), then {then}"
    )
}

/// How far back the journal is read for a schedule's latest pause.
const PAUSE_LOOKBACK: u32 = 50;

/// The longest pause note.
pub const MAX_NOTE_CHARS: usize = 500;

/// [`Ops::schedule_paused_by`] in the caller's transaction.
pub(super) async fn pause_record(
    tx: &mut dyn TenantTx,
    schedule: &Schedule,
) -> OpsResult<Option<PauseRecord>> {
    if schedule.status != ScheduleStatus::Paused {
        return Ok(None);
    }
    let entries = tx
        .audit_query(&AuditQuery {
            schedule_id: Some(schedule.id),
            limit: PAUSE_LOOKBACK,
            ..AuditQuery::default()
        })
        .await?;
    Ok(entries
        .into_iter()
        .find(|e| matches!(e.action.as_str(), "schedule.pause" | "schedule.resume"))
        .filter(|e| e.action == "schedule.pause")
        .map(|e| PauseRecord {
            reason: e
                .after
                .as_ref()
                .and_then(|after| after.get("reason"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            by: e.actor,
            at: e.at,
        }))
}

/// A schedule's latest pause: who, when, and why when it was said.
#[derive(Debug, Clone, PartialEq)]
pub struct PauseRecord {
    pub by: String,
    pub at: chrono::DateTime<chrono::Utc>,
    pub reason: Option<String>,
}

pub(super) fn check_note(note: &str) -> OpsResult<()> {
    crate::core::storable::check_text("note", note).map_err(|e| OpsError::Invalid(vec![e]))?;
    if note.chars().count() > MAX_NOTE_CHARS {
        return Err(OpsError::Invalid(vec![FieldError::new(
            "note",
            format!("at most {MAX_NOTE_CHARS} characters"),
        )]));
    }
    Ok(())
}
