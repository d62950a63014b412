//! The calendars a document declares, applied through the API before its schedules (which
//! may name them): each read, compared, and written whole when it differs.

use reqwest::Method;
use serde_json::{Value, json};

use crate::client::{ApiClient, ClientError};
use crate::cmd::remote::env_query;
use crate::core::decl::DeclaredCalendar;
use crate::core::enroll::CalendarChange;
use crate::core::model::EnvId;
use crate::core::ops::CalendarWrite;

/// Creates or replaces each declared calendar that differs from the server's (only compares
/// in a dry run).
pub(super) async fn apply_calendars(
    client: &ApiClient,
    env: EnvId,
    declared: &[DeclaredCalendar],
    dry_run: bool,
) -> Result<Vec<CalendarChange>, ClientError> {
    let mut changes = Vec::with_capacity(declared.len());
    for calendar in declared {
        let path = format!("/v1/calendars/{}", calendar.name);
        let stored = match client.get(&path, &env_query(env)).await {
            Ok(stored) => Some(stored),
            Err(err) if err.status() == Some(404) => None,
            Err(err) => return Err(err),
        };
        let body = json!({
            "description": calendar.draft.description.trim(),
            "entries": calendar.draft.entries,
        });
        let action = match &stored {
            None => CalendarWrite::Created,
            Some(stored) if same(stored, &body) => CalendarWrite::Unchanged,
            Some(_) => CalendarWrite::Updated,
        };
        if !dry_run && action != CalendarWrite::Unchanged {
            client
                .call(Method::PUT, &path, &env_query(env), Some(&body))
                .await?;
        }
        changes.push(CalendarChange {
            name: calendar.name.clone(),
            action,
        });
    }
    Ok(changes)
}

/// Whether the server's calendar has the declared description and entries (notes included).
fn same(stored: &Value, declared: &Value) -> bool {
    let entries = |v: &Value| -> Vec<(String, Option<String>)> {
        v["entries"]
            .as_array()
            .map(|list| {
                list.iter()
                    .map(|e| {
                        (
                            e["spec"].as_str().unwrap_or_default().to_owned(),
                            e["note"].as_str().map(str::to_owned),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    stored["description"] == declared["description"] && entries(stored) == entries(declared)
}
