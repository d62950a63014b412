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
    /// An audit entry of this actor's change of one resource.
    pub(crate) fn audit(
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

/// A record as the audit journal keeps it.
pub(crate) fn snapshot<T: serde::Serialize>(value: &T) -> Option<Value> {
    serde_json::to_value(value).ok()
}
