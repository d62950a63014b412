//! Calendars: named lists of exclusions, one row per calendar and environment, written and
//! read the same way on both backends.

use super::shared::scoped;
use super::{Cells, RowCells, TenantRows, Val, map_rows};
use crate::core::calendar::{Calendar, CalendarEntryText, Exclude};
use crate::core::model::ScheduleId;
use crate::core::store::StoreResult;

const CALENDAR_COLUMNS: &str =
    "name, description, entries, created_at, updated_at, created_by, updated_by";

fn calendar(c: &impl Cells) -> StoreResult<Calendar> {
    let name = c.text("name")?;
    let entries: Vec<CalendarEntryText> = serde_json::from_value(c.json("entries")?)
        .map_err(|e| c.corrupt("entries", format!("not a list of entries: {e}")))?;
    Ok(Calendar::from_stored(
        name,
        c.text("description")?,
        entries,
        (c.ts("created_at")?, c.ts("updated_at")?),
        (c.text("created_by")?, c.text("updated_by")?),
    ))
}

/// The environment's calendars named in `names` (those that exist), their rows locked with
/// `lock` (a backend's `FOR_UPDATE`, or `""`).
pub(crate) async fn calendars_named<T: TenantRows>(
    tx: &mut T,
    names: &[String],
    lock: &str,
) -> StoreResult<Vec<Calendar>> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let sql = scoped(tx, |env, sql| {
        let list: Vec<String> = names.iter().map(|n| sql.val(Val::text(n))).collect();
        format!(
            "SELECT {CALENDAR_COLUMNS} FROM calendars WHERE env_id = {env} AND name IN ({}) \
             ORDER BY name{lock}",
            list.join(", ")
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "calendars", calendar)
}

/// Every calendar of the environment, by name.
pub(crate) async fn calendar_list<T: TenantRows>(tx: &mut T) -> StoreResult<Vec<Calendar>> {
    let sql = scoped(tx, |env, _| {
        format!("SELECT {CALENDAR_COLUMNS} FROM calendars WHERE env_id = {env} ORDER BY name")
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "calendars", calendar)
}

/// Inserts `calendar`, or replaces the description and entries of the one of its name.
pub(crate) async fn calendar_put<T: TenantRows>(
    tx: &mut T,
    calendar: &Calendar,
) -> StoreResult<()> {
    let entries = serde_json::to_value(calendar.entry_texts()).unwrap_or_default();
    let sql = scoped(tx, |env, sql| {
        let name = sql.val(Val::text(&calendar.name));
        let description = sql.val(Val::text(&calendar.description));
        let entries = sql.val(Val::json(&entries));
        let created_at = sql.val(Val::ts(calendar.created_at));
        let updated_at = sql.val(Val::ts(calendar.updated_at));
        let created_by = sql.val(Val::text(&calendar.created_by));
        let updated_by = sql.val(Val::text(&calendar.updated_by));
        format!(
            "INSERT INTO calendars (env_id, {CALENDAR_COLUMNS}) \
             VALUES ({env}, {name}, {description}, {entries}, {created_at}, {updated_at}, \
                     {created_by}, {updated_by}) \
             ON CONFLICT (env_id, name) DO UPDATE SET description = excluded.description, \
               entries = excluded.entries, updated_at = excluded.updated_at, \
               updated_by = excluded.updated_by"
        )
    });
    tx.execute(&sql).await?;
    Ok(())
}

/// Removes the calendar `name`; whether there was one.
pub(crate) async fn calendar_delete<T: TenantRows>(tx: &mut T, name: &str) -> StoreResult<bool> {
    let sql = scoped(tx, |env, sql| {
        let name = sql.val(Val::text(name));
        format!("DELETE FROM calendars WHERE env_id = {env} AND name = {name}")
    });
    Ok(tx.execute(&sql).await? == 1)
}

/// The live (not deleted) schedules whose exclusions name the calendar `name`, in id order.
/// Only schedules with exclusions are read, and the names are matched here, the same way on
/// both backends.
pub(crate) async fn schedules_naming_calendar<T: TenantRows>(
    tx: &mut T,
    name: &str,
) -> StoreResult<Vec<ScheduleId>> {
    let sql = scoped(tx, |env, _| {
        format!(
            "SELECT id, exclude FROM schedules WHERE env_id = {env} AND status <> 'deleted' \
             AND exclude <> '[]' ORDER BY id"
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    let mut naming = Vec::new();
    for row in &rows {
        let c = row.cells("schedules");
        let exclude = super::stored_exclude(&c)?;
        if exclude.calendar_names().any(|n| n == name) {
            naming.push(ScheduleId(c.uuid("id")?));
        }
    }
    Ok(naming)
}

/// A schedule's exclusions as bound: a JSON array of strings.
pub(crate) fn exclude_json(exclude: &Exclude) -> serde_json::Value {
    serde_json::Value::from(exclude.texts())
}
