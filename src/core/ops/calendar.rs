//! Calendar operations: list, read, write (create or replace) and remove an environment's
//! named exclusion lists, each write with its audit entry. A calendar that a live schedule
//! names is not removed.

use serde_json::{Value, json};

use super::{Actor, Ops, OpsError, OpsResult};
use crate::core::calendar::{self, Calendar, CalendarDraft, Exclude};
use crate::core::decl::FieldError;
use crate::core::model::EnvId;
use crate::core::store::{Channel, TenantTx};

/// How many of the schedules that name a calendar a refused removal lists.
const NAMED_BY_SHOWN: usize = 5;

impl Ops {
    /// The environment's calendars, by name.
    pub async fn calendar_list(&self, env: EnvId) -> OpsResult<Vec<Calendar>> {
        let mut tx = self.store.tenant_begin(env).await?;
        let calendars = tx.calendar_list().await?;
        tx.commit().await?;
        Ok(calendars)
    }

    /// The calendar `name`.
    pub async fn calendar_get(&self, env: EnvId, name: &str) -> OpsResult<Calendar> {
        let mut tx = self.store.tenant_begin(env).await?;
        let found = tx.calendars_named(&[name.to_owned()], false).await?;
        tx.commit().await?;
        found
            .into_iter()
            .next()
            .ok_or(OpsError::NotFound("calendar"))
    }

    /// Creates the calendar `name`, or replaces its description and entries; whether it was
    /// created. The schedules that name it see the new entries from their next claim on.
    pub async fn calendar_put(
        &self,
        env: EnvId,
        name: &str,
        draft: &CalendarDraft,
        actor: &Actor,
    ) -> OpsResult<(Calendar, bool)> {
        let mut tx = self.store.tenant_begin(env).await?;
        let (calendar, written) = put_calendar(&mut *tx, name, draft, actor).await?;
        tx.commit().await?;
        Ok((calendar, written == CalendarWrite::Created))
    }

    /// Removes the calendar `name`, refused while a live schedule names it.
    pub async fn calendar_delete(&self, env: EnvId, name: &str, actor: &Actor) -> OpsResult<()> {
        let mut tx = self.store.tenant_begin(env).await?;
        // Locked first: a schedule written meanwhile that names it waits for this decision.
        let Some(before) = tx
            .calendars_named(&[name.to_owned()], true)
            .await?
            .into_iter()
            .next()
        else {
            return Err(OpsError::NotFound("calendar"));
        };
        let naming = tx.schedules_naming_calendar(name).await?;
        if !naming.is_empty() {
            let shown: Vec<String> = naming
                .iter()
                .take(NAMED_BY_SHOWN)
                .map(ToString::to_string)
                .collect();
            let more = naming.len().saturating_sub(NAMED_BY_SHOWN);
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            return Err(OpsError::Conflict(format!(
                "calendar {name:?} is named by {} schedule(s) ({}{more}); remove it from their exclude first",
                naming.len(),
                shown.join(", ")
            )));
        }
        tx.calendar_delete(name).await?;
        tx.audit_insert(&actor.audit(
            "calendar.delete",
            "calendar",
            name.to_owned(),
            Some(snapshot(&before)),
            None,
        ))
        .await?;
        tx.commit().await?;
        Ok(())
    }
}

/// Refuses exclusions that name a calendar the environment does not have. The calendars found
/// stay locked until the transaction ends, so none is removed under a schedule that names it.
pub(super) async fn check_calendars<'a>(
    tx: &mut dyn TenantTx,
    excludes: impl IntoIterator<Item = &'a Exclude>,
) -> OpsResult<()> {
    let mut names: Vec<String> = excludes
        .into_iter()
        .flat_map(|e| e.calendar_names().map(str::to_owned))
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    names.sort_unstable();
    names.dedup();
    let found = tx.calendars_named(&names, true).await?;
    let missing: Vec<FieldError> = names
        .iter()
        .filter(|n| !found.iter().any(|c| &c.name == *n))
        .map(|n| {
            FieldError::new(
                "exclude",
                format!("no calendar named {n:?} in this environment (create it first)"),
            )
        })
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(OpsError::Invalid(missing))
    }
}

/// What writing a calendar did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CalendarWrite {
    Created,
    Updated,
    /// Written exactly as it was: nothing written, no audit entry.
    Unchanged,
}

/// Checks `draft` and writes it as the calendar `name` in the caller's transaction (created,
/// or replaced whole), with its audit entry; the same calendar written again is left alone.
pub async fn put_calendar(
    tx: &mut dyn TenantTx,
    name: &str,
    draft: &CalendarDraft,
    actor: &Actor,
) -> OpsResult<(Calendar, CalendarWrite)> {
    let mut errors = Vec::new();
    if let Err(reason) = calendar::check_name(name) {
        errors.push(FieldError::new("name", reason));
    }
    let entries = match draft.validate() {
        Ok(entries) => Some(entries),
        Err(mut problems) => {
            errors.append(&mut problems);
            None
        }
    };
    let Some(entries) = entries.filter(|_| errors.is_empty()) else {
        return Err(OpsError::Invalid(errors));
    };
    let before = tx
        .calendars_named(&[name.to_owned()], true)
        .await?
        .into_iter()
        .next();
    let mut calendar = Calendar::new(
        name.to_owned(),
        draft.description.trim().to_owned(),
        entries,
        &actor.name,
        actor.now,
    );
    if let Some(before) = &before {
        if before.description == calendar.description && before.entries() == calendar.entries() {
            return Ok((before.clone(), CalendarWrite::Unchanged));
        }
        calendar.created_at = before.created_at;
        calendar.created_by = before.created_by.clone();
    }
    tx.calendar_put(&calendar).await?;
    let (action, written) = if before.is_some() {
        ("calendar.update", CalendarWrite::Updated)
    } else {
        ("calendar.create", CalendarWrite::Created)
    };
    tx.audit_insert(&actor.audit(
        action,
        "calendar",
        name.to_owned(),
        before.as_ref().map(snapshot),
        Some(snapshot(&calendar)),
    ))
    .await?;
    // Schedules that name it are claimed under the new entries: wake the tickers.
    tx.notify_on_commit(Channel::Schedules);
    Ok((calendar, written))
}

/// A calendar as its audit entries record it.
pub fn snapshot(calendar: &Calendar) -> Value {
    json!({
        "name": calendar.name,
        "description": calendar.description,
        "entries": calendar.entry_texts(),
    })
}
