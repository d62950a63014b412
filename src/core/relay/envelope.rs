//! The envelope every sink sends: a CloudEvents 1.0 event in the structured JSON format.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::SinkError;
use crate::core::model::{EnvId, EventId, OutboxEvent, ScheduleId};

/// The message a sink delivers for one event, what consumers see: a CloudEvents 1.0 event in
/// the structured JSON format. `source` names the environment, `subject` the schedule, `time`
/// is when the change was made (by the clock of the instance that made it) and `data` is the
/// event's payload ([`crate::core::events::EventPayload`]). Order comes from the bus (the
/// stream sequence, per schedule), never from `time`: instances' clocks differ, and a change
/// made earlier may commit later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventEnvelope {
    /// Always [`CLOUDEVENTS_VERSION`].
    pub specversion: String,
    /// The event id: also the bus message id, so a re-send is recognisable as a duplicate.
    pub id: EventId,
    /// `/sentin8-cron/envs/{env_id}`.
    pub source: String,
    /// The event type, e.g. `io.sentin8.cron.job.succeeded.v1`.
    #[serde(rename = "type")]
    pub event_type: String,
    /// `schedules/{schedule_id}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    pub time: DateTime<Utc>,
    /// Always [`DATA_CONTENT_TYPE`].
    pub datacontenttype: String,
    pub data: Value,
}

/// The CloudEvents version of the envelope.
pub const CLOUDEVENTS_VERSION: &str = "1.0";
/// The media type of an event's `data`.
pub const DATA_CONTENT_TYPE: &str = "application/json";
/// The media type of a whole event in the structured format (CloudEvents' JSON format), for
/// the sinks whose protocol carries one.
pub const STRUCTURED_CONTENT_TYPE: &str = "application/cloudevents+json; charset=utf-8";

/// The `source` of an environment's events.
pub fn event_source(env: EnvId) -> String {
    format!("/sentin8-cron/envs/{env}")
}

/// The `subject` of a schedule's events.
pub fn event_subject(schedule: ScheduleId) -> String {
    format!("schedules/{schedule}")
}

impl EventEnvelope {
    /// The envelope of an outbox event. An event written under a former type name (by a
    /// process of the previous version still running beside this one during an upgrade) goes
    /// out under its new name, without the fields the envelope now carries.
    pub fn of(event: &OutboxEvent) -> Self {
        let renamed = crate::core::events::RENAMED
            .iter()
            .find(|(old, _)| *old == event.event_type);
        let mut data = event.payload.clone();
        if let (Some(_), Value::Object(fields)) = (renamed, &mut data) {
            fields.remove("event_type");
            fields.remove("at");
        }
        Self {
            specversion: CLOUDEVENTS_VERSION.to_owned(),
            id: event.id,
            source: event_source(event.env_id),
            event_type: renamed.map_or(event.event_type.clone(), |(_, new)| (*new).to_owned()),
            subject: event.schedule_id.map(event_subject),
            time: event.created_at,
            datacontenttype: DATA_CONTENT_TYPE.to_owned(),
            data,
        }
    }

    /// The JSON body sinks send.
    pub fn to_json(&self) -> Result<Vec<u8>, SinkError> {
        serde_json::to_vec(self)
            .map_err(|e| SinkError::Rejected(format!("cannot encode the event: {e}")))
    }
}
