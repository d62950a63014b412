//! Domain events: their type names and payloads. Every event is written to the outbox in the
//! same transaction as the change it describes, and carries everything a consumer needs
//! (payload-complete), so nobody has to call back to find out what happened.

pub mod schema;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::core::labels::Labels;
use crate::core::model::{DlqEntry, Job, Schedule};
use crate::core::store::NewEvent;

/// The reverse-DNS prefix of every event type. A type ends in its version (`.v1`): a change a
/// consumer would have to adapt to gets a new version, published beside the old one.
pub const TYPE_PREFIX: &str = "io.sentin8.cron.";

/// A schedule was created (API or enroll).
pub const SCHEDULE_CREATED: &str = "io.sentin8.cron.schedule.created.v1";
/// A schedule's definition changed (API patch or enroll); `changes` says what, before and after.
pub const SCHEDULE_UPDATED: &str = "io.sentin8.cron.schedule.updated.v1";
/// A schedule was soft-deleted.
pub const SCHEDULE_DELETED: &str = "io.sentin8.cron.schedule.deleted.v1";
/// A schedule was paused (by a person, with their note as `reason`, or by the engine on failure).
pub const SCHEDULE_PAUSED: &str = "io.sentin8.cron.schedule.paused.v1";
/// A schedule was resumed.
pub const SCHEDULE_RESUMED: &str = "io.sentin8.cron.schedule.resumed.v1";
/// A schedule is done: it ran out of runs, reached its end, or (a one-shot) its job ended.
pub const SCHEDULE_COMPLETED: &str = "io.sentin8.cron.schedule.completed.v1";
/// A schedule was run on demand, outside its timing (a pending job due now).
pub const SCHEDULE_TRIGGERED: &str = "io.sentin8.cron.schedule.triggered.v1";
/// An operator asked for a past range of a schedule's occurrences (backfill).
pub const SCHEDULE_BACKFILLED: &str = "io.sentin8.cron.schedule.backfilled.v1";
/// A job's attempt succeeded.
pub const JOB_SUCCEEDED: &str = "io.sentin8.cron.job.succeeded.v1";
/// A job failed for good: its retries are exhausted and it landed in the DLQ (`dlq_id`), or
/// its schedule was deleted meanwhile.
pub const JOB_FAILED: &str = "io.sentin8.cron.job.failed.v1";
/// A job attempt failed and a retry was scheduled (or an operator retried a failed job).
pub const JOB_RETRIED: &str = "io.sentin8.cron.job.retried.v1";
/// An occurrence was not run: the schedule's previous job was still open, or it was missed
/// (an outage) beyond the catch-up window.
pub const JOB_SKIPPED: &str = "io.sentin8.cron.job.skipped.v1";
/// A regular fire waits for the schedule's open job to end (overlap `buffer_one` or
/// `buffer_all`).
pub const JOB_BUFFERED: &str = "io.sentin8.cron.job.buffered.v1";
/// An open job was cancelled for a newer occurrence of its schedule (overlap `cancel_other`):
/// its call in flight, if any, was aborted, and it is not retried.
pub const JOB_CANCELLED: &str = "io.sentin8.cron.job.cancelled.v1";
/// A dead-letter entry was republished as a fresh job (the original job is superseded).
pub const DLQ_REPUBLISHED: &str = "io.sentin8.cron.dlq.republished.v1";
/// A dead-letter entry was discarded by an operator: its occurrence will not run.
pub const DLQ_DISCARDED: &str = "io.sentin8.cron.dlq.discarded.v1";

/// Every event type sentin8-cron produces.
pub const ALL: &[&str] = &[
    SCHEDULE_CREATED,
    SCHEDULE_UPDATED,
    SCHEDULE_DELETED,
    SCHEDULE_PAUSED,
    SCHEDULE_RESUMED,
    SCHEDULE_COMPLETED,
    SCHEDULE_TRIGGERED,
    SCHEDULE_BACKFILLED,
    JOB_SUCCEEDED,
    JOB_FAILED,
    JOB_RETRIED,
    JOB_SKIPPED,
    JOB_BUFFERED,
    JOB_CANCELLED,
    DLQ_REPUBLISHED,
    DLQ_DISCARDED,
];

/// The type names of the envelope before CloudEvents (schema 18 and earlier), with the type
/// each became. `schedule:completed` meant "a job succeeded"; `schedule.completed.v1` now
/// means the schedule is done.
pub const RENAMED: &[(&str, &str)] = &[
    ("sentin8:cron:schedule:created", SCHEDULE_CREATED),
    ("sentin8:cron:schedule:updated", SCHEDULE_UPDATED),
    ("sentin8:cron:schedule:deleted", SCHEDULE_DELETED),
    ("sentin8:cron:schedule:paused", SCHEDULE_PAUSED),
    ("sentin8:cron:schedule:resumed", SCHEDULE_RESUMED),
    ("sentin8:cron:schedule:completed", JOB_SUCCEEDED),
    ("sentin8:cron:schedule:failed", JOB_FAILED),
    ("sentin8:cron:schedule:triggered", SCHEDULE_TRIGGERED),
    ("sentin8:cron:schedule:backfilled", SCHEDULE_BACKFILLED),
    ("sentin8:cron:job:retried", JOB_RETRIED),
    ("sentin8:cron:job:skipped", JOB_SKIPPED),
    ("sentin8:cron:job:buffered", JOB_BUFFERED),
    ("sentin8:cron:dlq:republished", DLQ_REPUBLISHED),
    ("sentin8:cron:dlq:discarded", DLQ_DISCARDED),
];

/// The payload every event carries (its CloudEvents `data`). Fields that do not apply are null.
#[derive(Debug, Clone, Serialize)]
pub struct EventPayload {
    /// The envelope's `type`.
    #[serde(skip)]
    pub event_type: &'static str,
    pub schedule_id: String,
    pub job_id: Option<String>,
    pub domain: String,
    pub schedule_type: String,
    pub env_id: String,
    pub status: String,
    pub retry_count: i32,
    pub attempt: Option<i32>,
    pub scheduled_for: Option<DateTime<Utc>>,
    pub next_run_at: Option<DateTime<Utc>>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub result: Option<Value>,
    pub error: Option<String>,
    pub dlq_id: Option<String>,
    /// Always the schedule id.
    pub correlation_id: String,
    /// `schedule:{schedule_id}:{job_id}` when the event concerns a job.
    pub idempotency_key: Option<String>,
    pub actor: Option<String>,
    /// The schedule's labels, for consumers to route and filter on.
    pub labels: Labels,
    /// Why the engine changed the schedule by itself (a pause on failure); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What a change of definition changed (`schedule.updated`, and a pause or resume made by
    /// a patch that also changed fields): each field's value before and after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changes: Option<BTreeMap<&'static str, FieldChange>>,
    /// The envelope's `time`.
    #[serde(skip)]
    pub at: DateTime<Utc>,
}

/// One changed field of a schedule, in the shape the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldChange {
    pub before: Value,
    pub after: Value,
}

/// The fields of a schedule a change is reported on, under their API names (the stored shape
/// calls the expression `cron_expr`): a declaration's fields, and the state a change moves.
pub fn change_fields() -> impl Iterator<Item = &'static str> {
    crate::core::decl::DECLARED_FIELDS.iter().copied().chain([
        "remaining_runs",
        "status",
        "next_run_at",
    ])
}

/// What changed between two versions of a schedule, field by field (see [`change_fields`]).
pub fn schedule_changes(
    before: &Schedule,
    after: &Schedule,
) -> BTreeMap<&'static str, FieldChange> {
    let shown = |schedule: &Schedule| -> serde_json::Map<String, Value> {
        match serde_json::to_value(schedule) {
            Ok(Value::Object(mut fields)) => {
                if let Some(cron) = fields.remove("cron_expr") {
                    fields.insert("cron".to_owned(), cron);
                }
                fields
            }
            _ => serde_json::Map::new(),
        }
    };
    let (before, after) = (shown(before), shown(after));
    change_fields()
        .filter_map(|field| {
            let was = before.get(field).cloned().unwrap_or(Value::Null);
            let is = after.get(field).cloned().unwrap_or(Value::Null);
            (was != is).then_some((
                field,
                FieldChange {
                    before: was,
                    after: is,
                },
            ))
        })
        .collect()
}

impl EventPayload {
    /// The `schedule.completed` event of a schedule the engine found done, with why: a
    /// one-shot whose job (`job`) ended or whose occurrence passed unrun, a last run called,
    /// no occurrence left before the end.
    pub fn completed(schedule: &Schedule, job: Option<&Job>, at: DateTime<Utc>) -> Self {
        use crate::core::model::ScheduleKind;
        let reason = match (schedule.kind(), job) {
            (ScheduleKind::Once, Some(_)) => "its one-shot job ended",
            (ScheduleKind::Once, None) => "its one occurrence passed beyond the catch-up window",
            _ if schedule.remaining_runs == Some(0) => {
                "its last run was called (remaining_runs reached 0)"
            }
            _ if schedule.policies.end_at.is_some() => "no occurrence is left before its end_at",
            _ => "its expression has no occurrence left",
        };
        let payload = Self::for_schedule(SCHEDULE_COMPLETED, schedule, at).with_reason(reason);
        match job {
            Some(job) => payload.with_job(job),
            None => payload,
        }
    }

    /// An event about a schedule, with nothing job-specific yet.
    pub fn for_schedule(event_type: &'static str, schedule: &Schedule, at: DateTime<Utc>) -> Self {
        Self {
            event_type,
            schedule_id: schedule.id.to_string(),
            job_id: None,
            domain: schedule.domain.clone(),
            schedule_type: schedule.schedule_type.clone(),
            env_id: schedule.env_id.to_string(),
            status: schedule.status.to_string(),
            retry_count: schedule.retry_count,
            attempt: None,
            scheduled_for: None,
            next_run_at: schedule.next_run_at,
            next_attempt_at: None,
            result: None,
            error: None,
            dlq_id: None,
            correlation_id: schedule.id.to_string(),
            idempotency_key: None,
            actor: None,
            labels: schedule.labels.clone(),
            reason: None,
            changes: None,
            at,
        }
    }

    /// Adds what is known about a job.
    pub fn with_job(mut self, job: &Job) -> Self {
        self.job_id = Some(job.id.to_string());
        self.attempt = Some(job.attempt);
        self.scheduled_for = Some(job.scheduled_for);
        self.next_attempt_at = job.next_attempt_at;
        self.result = job.result.clone();
        self.error = job.error.clone();
        self.idempotency_key = Some(job.idempotency_key.clone());
        self
    }

    /// Adds the dead-letter entry a job landed in (or was republished from).
    pub fn with_dlq(mut self, entry: &DlqEntry) -> Self {
        self.dlq_id = Some(entry.id.to_string());
        self
    }

    /// Says why the engine made the change.
    pub fn with_reason(mut self, reason: &str) -> Self {
        self.reason = Some(reason.to_owned());
        self
    }

    /// Says what a change of definition changed, when it changed anything.
    pub fn with_changes(mut self, before: &Schedule, after: &Schedule) -> Self {
        let changes = schedule_changes(before, after);
        self.changes = (!changes.is_empty()).then_some(changes);
        self
    }

    /// Records who caused the event.
    pub fn by(mut self, actor: &str) -> Self {
        self.actor = Some(actor.to_owned());
        self
    }

    /// The outbox row for this event.
    pub fn into_event(self, schedule: &Schedule) -> NewEvent {
        let at = self.at;
        let event_type = self.event_type.to_owned();
        NewEvent {
            id: crate::core::model::EventId::new(),
            schedule_id: Some(schedule.id),
            event_type,
            payload: serde_json::to_value(&self).unwrap_or(Value::Null),
            now: at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_type_is_reverse_dns_versioned_and_unique() {
        let mut seen = std::collections::HashSet::new();
        for name in ALL {
            let rest = name.strip_prefix(TYPE_PREFIX).expect("namespaced");
            let parts: Vec<&str> = rest.split('.').collect();
            assert_eq!(parts.len(), 3, "{name}: subject, action, version");
            assert!(
                parts[2]
                    .strip_prefix('v')
                    .is_some_and(|v| v.parse::<u32>().is_ok()),
                "{name}"
            );
            assert!(
                rest.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '_'),
                "{name}"
            );
            assert!(seen.insert(name), "{name} listed twice");
        }
    }

    #[test]
    fn every_former_type_has_one_new_name_and_every_new_name_but_those_since_a_former_one() {
        let former: std::collections::HashSet<_> = RENAMED.iter().map(|(old, _)| old).collect();
        assert_eq!(former.len(), RENAMED.len());
        for (_, new) in RENAMED {
            assert!(ALL.contains(new), "{new}");
        }
        let renamed: std::collections::HashSet<_> = RENAMED.iter().map(|(_, new)| *new).collect();
        let fresh: Vec<_> = ALL.iter().filter(|t| !renamed.contains(*t)).collect();
        assert_eq!(fresh, [&SCHEDULE_COMPLETED, &JOB_CANCELLED]);
    }

    fn a_schedule() -> Schedule {
        use crate::core::cron::{OnDstGap, OnDstRepeat};
        use crate::core::timing::{CronTiming, Timing};
        let at = chrono::TimeZone::with_ymd_and_hms(&Utc, 2030, 1, 1, 0, 0, 0).unwrap();
        Schedule {
            id: crate::core::model::ScheduleId::new(),
            env_id: crate::core::model::EnvId::new(),
            domain: "billing".into(),
            schedule_type: "invoice".into(),
            timing: Timing::Cron(CronTiming::from_stored(
                "0 2 * * *",
                "UTC",
                OnDstGap::Skip,
                OnDstRepeat::Once,
            )),
            target: crate::core::target::Target::from_stored(
                serde_json::json!({ "baseUrl": "http://127.0.0.1:9" }),
            ),
            payload: serde_json::json!({"region": "eu"}),
            status: crate::core::model::ScheduleStatus::Active,
            next_run_at: Some(at),
            last_run_at: None,
            retry_count: 0,
            max_retries: 3,
            policies: crate::core::policies::Policies::default(),
            remaining_runs: None,
            labels: Default::default(),
            exclude: Default::default(),
            created_at: at,
            updated_at: at,
            created_by: "test".into(),
            updated_by: "test".into(),
        }
    }

    #[test]
    fn changes_name_each_changed_field_with_its_api_name_and_both_values() {
        let before = a_schedule();
        let mut after = before.clone();
        assert!(schedule_changes(&before, &after).is_empty());
        after.timing =
            crate::core::timing::Timing::Cron(crate::core::timing::CronTiming::from_stored(
                "30 3 * * 1-5",
                "Europe/Paris",
                crate::core::cron::OnDstGap::Skip,
                crate::core::cron::OnDstRepeat::Once,
            ));
        after.payload = serde_json::json!({"region": "us"});
        after.policies.max_jitter = std::time::Duration::from_secs(90);
        // Bookkeeping is not a change of definition.
        after.updated_by = "someone else".into();
        after.retry_count = 2;
        let changes = schedule_changes(&before, &after);
        assert_eq!(
            changes.keys().copied().collect::<Vec<_>>(),
            ["cron", "max_jitter", "payload", "timezone"]
        );
        assert_eq!(
            changes["cron"],
            FieldChange {
                before: Value::from("0 2 * * *"),
                after: Value::from("30 3 * * 1-5")
            }
        );
        assert_eq!(changes["timezone"].after, "Europe/Paris");
        assert_eq!(changes["max_jitter"].before, "0s");
        assert_eq!(changes["max_jitter"].after, "1m30s");
        assert_eq!(
            changes["payload"].before,
            serde_json::json!({"region": "eu"})
        );

        let payload = EventPayload::for_schedule(SCHEDULE_UPDATED, &after, after.updated_at)
            .with_changes(&before, &after);
        let data = serde_json::to_value(&payload).unwrap();
        assert_eq!(data["changes"]["payload"]["after"]["region"], "us");
        assert!(
            data.get("event_type").is_none() && data.get("at").is_none(),
            "{data}"
        );
        let unchanged = EventPayload::for_schedule(SCHEDULE_UPDATED, &before, before.updated_at)
            .with_changes(&before, &before);
        assert!(
            serde_json::to_value(&unchanged)
                .unwrap()
                .get("changes")
                .is_none()
        );
    }

    #[test]
    fn a_completion_says_why_the_schedule_is_done() {
        let reason = |schedule: &Schedule| {
            EventPayload::completed(schedule, None, schedule.updated_at)
                .reason
                .unwrap()
        };
        let mut cron = a_schedule();
        assert_eq!(reason(&cron), "its expression has no occurrence left");
        cron.policies.end_at = Some(cron.updated_at);
        assert_eq!(reason(&cron), "no occurrence is left before its end_at");
        cron.remaining_runs = Some(0);
        assert_eq!(
            reason(&cron),
            "its last run was called (remaining_runs reached 0)"
        );
        let mut once = a_schedule();
        once.timing = crate::core::timing::Timing::Once {
            run_at: once.updated_at,
        };
        assert_eq!(
            reason(&once),
            "its one occurrence passed beyond the catch-up window"
        );
    }
}
