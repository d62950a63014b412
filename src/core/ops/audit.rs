//! Who is acting and when, and the audit entries and snapshots recorded for a change.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::core::store::NewAudit;

/// Who is acting and when: recorded in audit entries and event payloads.
#[derive(Debug, Clone)]
pub struct Actor {
    pub name: String,
    pub correlation_id: Option<String>,
    pub now: DateTime<Utc>,
}

impl Actor {
    /// An audit entry of this actor's change of one resource. An entry about a schedule is
    /// recorded as concerning it (see [`NewAudit::on_schedule`] for other resources).
    pub(crate) fn audit(
        &self,
        action: &str,
        resource_type: &str,
        resource_id: String,
        before: Option<Value>,
        after: Option<Value>,
    ) -> NewAudit {
        let schedule_id = (resource_type == "schedule")
            .then(|| uuid::Uuid::parse_str(&resource_id).ok())
            .flatten()
            .map(crate::core::model::ScheduleId);
        let entry = NewAudit {
            actor: self.name.clone(),
            action: action.to_owned(),
            resource_type: resource_type.to_owned(),
            resource_id,
            before,
            after,
            correlation_id: self.correlation_id.clone(),
            now: self.now,
            schedule_id: None,
        };
        match schedule_id {
            Some(id) => entry.on_schedule(id),
            None => entry,
        }
    }
}

/// A record as the audit journal keeps it.
pub(crate) fn snapshot<T: serde::Serialize>(value: &T) -> Option<Value> {
    serde_json::to_value(value).ok()
}
