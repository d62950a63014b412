//! The calendars a declaration document declares, enrolled before its schedules (which may
//! name them): each written whole when it differs from the stored one, or compared only in a
//! dry run.

use serde::Serialize;

use super::EnrollError;
use crate::core::decl::DeclaredCalendar;
use crate::core::ops::{self, Actor, CalendarWrite};
use crate::core::store::TenantTx;

/// What enrolling did (or would do) to a declared calendar.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CalendarChange {
    pub name: String,
    pub action: CalendarWrite,
}

/// Writes the declared calendars (a dry run only compares them with the stored ones).
pub(super) async fn write_calendars(
    tx: &mut dyn TenantTx,
    declared: &[DeclaredCalendar],
    dry_run: bool,
    actor: &Actor,
) -> Result<Vec<CalendarChange>, EnrollError> {
    let mut changes = Vec::with_capacity(declared.len());
    for calendar in declared {
        let action = if dry_run {
            let stored = tx
                .calendars_named(std::slice::from_ref(&calendar.name), false)
                .await?;
            let entries = calendar.draft.validate().map_err(EnrollError::Invalid)?;
            match stored.first() {
                None => CalendarWrite::Created,
                Some(s)
                    if s.entries() == entries.as_slice()
                        && s.description == calendar.draft.description.trim() =>
                {
                    CalendarWrite::Unchanged
                }
                Some(_) => CalendarWrite::Updated,
            }
        } else {
            ops::put_calendar(tx, &calendar.name, &calendar.draft, actor)
                .await?
                .1
        };
        changes.push(CalendarChange {
            name: calendar.name.clone(),
            action,
        });
    }
    Ok(changes)
}
