//! A JSON Schema (draft 2020-12) for each event type: the whole CloudEvent as a consumer
//! receives it, with the `data` this type carries. Served at `/v1/events/schemas/{type}` and
//! kept in `docs/events/` (a test holds the two equal). The schemas are open: a consumer should
//! ignore a field it does not know, and a field added to a type keeps its version. What the
//! server emits is held to them strictly in the tests (no field left undescribed).

use serde_json::{Value, json};

use super::*;

/// Where the schemas are served.
pub const SCHEMAS_PATH: &str = "/v1/events/schemas";

/// The draft the schemas follow.
const DRAFT: &str = "https://json-schema.org/draft/2020-12/schema";

const UUID_PATTERN: &str = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";

/// What a type's `data` always has, beyond what every event has.
#[derive(Debug, Clone, Copy, Default)]
struct Carries {
    /// A job: its id, attempt, occurrence and idempotency key.
    job: bool,
    /// A dead-letter entry's id.
    dlq: bool,
    /// The schedule's status after the event.
    status: Option<&'static str>,
    /// Why (`reason`).
    reason: bool,
    /// What changed (`changes`).
    changes: bool,
}

/// What `data` of `event_type` always carries; `None` for a type sentin8-cron does not emit.
fn carries(event_type: &str) -> Option<Carries> {
    let job = Carries {
        job: true,
        ..Carries::default()
    };
    Some(match event_type {
        SCHEDULE_CREATED | SCHEDULE_BACKFILLED => Carries::default(),
        SCHEDULE_UPDATED => Carries {
            changes: true,
            ..Carries::default()
        },
        SCHEDULE_DELETED => Carries {
            status: Some("deleted"),
            ..Carries::default()
        },
        SCHEDULE_PAUSED => Carries {
            status: Some("paused"),
            ..Carries::default()
        },
        SCHEDULE_RESUMED => Carries {
            status: Some("active"),
            ..Carries::default()
        },
        SCHEDULE_COMPLETED => Carries {
            status: Some("completed"),
            reason: true,
            ..Carries::default()
        },
        SCHEDULE_TRIGGERED | JOB_SUCCEEDED | JOB_FAILED | JOB_RETRIED | JOB_SKIPPED
        | JOB_BUFFERED | JOB_CANCELLED => job,
        DLQ_REPUBLISHED => Carries { dlq: true, ..job },
        DLQ_DISCARDED => Carries {
            dlq: true,
            ..Carries::default()
        },
        _ => return None,
    })
}

/// What each type means, for the schema's description (the constants' own documentation).
fn about(event_type: &str) -> &'static str {
    match event_type {
        SCHEDULE_CREATED => "A schedule was created (API or enroll).",
        SCHEDULE_UPDATED => {
            "A schedule's definition changed (API patch or enroll); `changes` says what, \
             before and after."
        }
        SCHEDULE_DELETED => "A schedule was soft-deleted.",
        SCHEDULE_PAUSED => {
            "A schedule was paused: by a person (their note as `reason`) or by the engine on \
             failure (`reason` says which job)."
        }
        SCHEDULE_RESUMED => "A schedule was resumed.",
        SCHEDULE_COMPLETED => {
            "A schedule is done: it ran out of runs, reached its end, or (a one-shot) its job \
             ended. `reason` says which."
        }
        SCHEDULE_TRIGGERED => "A schedule was run on demand, outside its timing.",
        SCHEDULE_BACKFILLED => "An operator asked for a past range of a schedule's occurrences.",
        JOB_SUCCEEDED => "A job's attempt succeeded; `result` is the target's answer.",
        JOB_FAILED => {
            "A job failed for good: its retries are exhausted and it landed in the dead-letter \
             queue (`dlq_id`), or its schedule was deleted meanwhile."
        }
        JOB_RETRIED => {
            "A job's attempt failed and a retry was scheduled (`next_attempt_at`), or an \
             operator retried a failed job."
        }
        JOB_SKIPPED => {
            "An occurrence was not run: the schedule's previous job was still open, or it was \
             missed beyond the catch-up window."
        }
        JOB_BUFFERED => {
            "A regular fire waits for the schedule's open job to end (buffer_one, buffer_all)."
        }
        JOB_CANCELLED => {
            "An open job was cancelled for a newer occurrence of its schedule (cancel_other): \
             its call in flight, if any, was aborted; `error` says which occurrence replaced it."
        }
        DLQ_REPUBLISHED => "A dead-letter entry was republished as a fresh job.",
        DLQ_DISCARDED => "A dead-letter entry was discarded: its occurrence will not run.",
        _ => "",
    }
}

fn nullable(schema: Value) -> Value {
    json!({ "anyOf": [schema, { "type": "null" }] })
}

fn uuid() -> Value {
    json!({ "type": "string", "pattern": format!("^{UUID_PATTERN}$") })
}

fn instant() -> Value {
    json!({ "type": "string", "format": "date-time" })
}

/// The JSON Schema of `event_type`, or `None` for a type sentin8-cron does not emit.
pub fn schema(event_type: &str) -> Option<Value> {
    let carries = carries(event_type)?;
    let statuses = ["active", "paused", "completed", "deleted"];
    let mut data_required = vec![
        "schedule_id",
        "job_id",
        "domain",
        "schedule_type",
        "env_id",
        "status",
        "retry_count",
        "attempt",
        "scheduled_for",
        "next_run_at",
        "next_attempt_at",
        "result",
        "error",
        "dlq_id",
        "correlation_id",
        "idempotency_key",
        "actor",
    ];
    let job_id = if carries.job || carries.dlq {
        uuid()
    } else {
        nullable(uuid())
    };
    let attempt = json!({ "type": "integer", "minimum": 0 });
    let key = json!({ "type": "string", "minLength": 1 });
    let mut data = json!({
        "type": "object",
        "description": "The event's payload: everything a consumer needs, so nobody has to call \
                        back. Fields that do not apply are null.",
        "properties": {
            "schedule_id": uuid(),
            "job_id": job_id,
            "domain": { "type": "string" },
            "schedule_type": { "type": "string" },
            "env_id": uuid(),
            "status": match carries.status {
                Some(status) => json!({ "const": status }),
                None => json!({ "enum": statuses }),
            },
            "retry_count": { "type": "integer", "minimum": 0 },
            "attempt": if carries.job { attempt } else { nullable(attempt) },
            "scheduled_for": if carries.job || carries.dlq { instant() } else { nullable(instant()) },
            "next_run_at": nullable(instant()),
            "next_attempt_at": nullable(instant()),
            "result": { "description": "The target's answer (a job that succeeded); any JSON." },
            "error": nullable(json!({ "type": "string" })),
            "dlq_id": if carries.dlq { uuid() } else { nullable(uuid()) },
            "correlation_id": {
                "description": "The schedule id.",
                "type": "string",
                "pattern": format!("^{UUID_PATTERN}$"),
            },
            "idempotency_key": if carries.job {
                key
            } else {
                nullable(key)
            },
            "actor": {
                "description": "Who caused the event: a token's subject, or `engine`.",
                "type": "string",
            },
            "labels": {
                "description": "The schedule's labels (absent from events written before \
                                schema 22).",
                "type": "object",
                "additionalProperties": { "type": "string", "maxLength": 63 },
            },
            "reason": {
                "description": "Why: a pause's note, what paused a schedule on failure, what \
                                completed a schedule.",
                "type": "string",
            },
            "changes": {
                "description": "Each changed field, under its API name, with its value before \
                                and after.",
                "type": "object",
                "propertyNames": { "enum": change_fields().collect::<Vec<_>>() },
                "additionalProperties": {
                    "type": "object",
                    "required": ["before", "after"],
                    "properties": { "before": {}, "after": {} },
                    "additionalProperties": false,
                },
            },
        },
    });
    if carries.reason {
        data_required.push("reason");
    }
    if carries.changes {
        data_required.push("changes");
        data["properties"]["changes"]["minProperties"] = json!(1);
    }
    data["required"] = json!(data_required);
    Some(json!({
        "$schema": DRAFT,
        "$id": format!("urn:sentin8-cron:event-schema:{event_type}"),
        "title": event_type,
        "description": format!(
            "{} A CloudEvents 1.0 event in the structured JSON format.",
            about(event_type)
        ),
        "type": "object",
        "required": ["specversion", "id", "source", "type", "subject", "time", "datacontenttype", "data"],
        "properties": {
            "specversion": { "const": "1.0" },
            "id": {
                "description": "The event id, also the bus message id: a re-send carries the same.",
                "type": "string",
                "pattern": format!("^{UUID_PATTERN}$"),
            },
            "source": {
                "description": "The environment the event belongs to.",
                "type": "string",
                "pattern": format!("^/sentin8-cron/envs/{UUID_PATTERN}$"),
            },
            "type": { "const": event_type },
            "subject": {
                "description": "The schedule the event is about.",
                "type": "string",
                "pattern": format!("^schedules/{UUID_PATTERN}$"),
            },
            "time": {
                "description": "When the change was made, by the clock of the instance that \
                                made it. Not an order: the stream's sequence orders a \
                                schedule's events.",
                "type": "string",
                "format": "date-time",
            },
            "datacontenttype": { "const": "application/json" },
            "data": data,
        },
    }))
}

/// The published list: each type with where its schema is served.
pub fn index() -> Value {
    json!({
        "specversion": "1.0",
        "types": ALL
            .iter()
            .map(|t| json!({ "type": t, "schema": format!("{SCHEMAS_PATH}/{t}") }))
            .collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_has_a_schema_that_names_it_and_nothing_else_has_one() {
        for event_type in ALL {
            let schema = schema(event_type).expect(event_type);
            assert_eq!(schema["properties"]["type"]["const"], *event_type);
            assert!(!about(event_type).is_empty(), "{event_type}");
        }
        assert!(schema("io.sentin8.cron.schedule.created.v2").is_none());
        assert!(schema("sentin8:cron:schedule:created").is_none());
        assert_eq!(index()["types"].as_array().unwrap().len(), ALL.len());
    }

    #[test]
    fn what_a_type_always_carries_is_required_and_not_null() {
        let data = |t: &str| schema(t).unwrap()["properties"]["data"].clone();
        let succeeded = data(JOB_SUCCEEDED);
        assert_eq!(succeeded["properties"]["job_id"]["type"], "string");
        assert!(
            succeeded["properties"]["changes"]
                .get("minProperties")
                .is_none()
        );
        let updated = data(SCHEDULE_UPDATED);
        assert!(
            updated["required"]
                .as_array()
                .unwrap()
                .contains(&json!("changes"))
        );
        assert!(updated["properties"]["job_id"].get("anyOf").is_some());
        assert_eq!(
            data(SCHEDULE_COMPLETED)["properties"]["status"]["const"],
            "completed"
        );
        assert_eq!(
            data(DLQ_DISCARDED)["properties"]["dlq_id"]["type"],
            "string"
        );
    }
}
