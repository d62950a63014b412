//! When a stored schedule fires next. Shared by the ticker, resume and the API, so a schedule's
//! next fire means the same thing everywhere.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::core::cron::{CronError, CronExpr, ZonedCron, parse_timezone};
use crate::core::model::{Schedule, ScheduleKind};

/// The evaluator of a stored cron schedule. A zone name that no longer parses (a tz database
/// that dropped it) falls back to UTC evaluation; an expression that no longer parses is an
/// error the caller handles.
pub fn zoned(schedule: &Schedule) -> Result<Option<ZonedCron>, CronError> {
    let Some(text) = schedule.cron_expr.as_deref() else {
        return Ok(None);
    };
    let expr = CronExpr::parse(text)?;
    let tz = parse_timezone(&schedule.timezone).unwrap_or_else(|_| {
        tracing::warn!(
            schedule_id = %schedule.id,
            timezone = %schedule.timezone,
            "stored time zone is unknown; evaluating in UTC"
        );
        Tz::UTC
    });
    Ok(Some(ZonedCron::new(
        expr,
        tz,
        schedule.on_dst_gap,
        schedule.on_dst_repeat,
    )))
}

/// The first fire strictly after `after`: `Ok(None)` when there is none (a one-shot schedule
/// whose instant has passed, an expression that never fires again).
pub fn next_fire_after(
    schedule: &Schedule,
    after: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, CronError> {
    match schedule.kind {
        ScheduleKind::Once => Ok(schedule.run_at.filter(|run_at| *run_at > after)),
        ScheduleKind::Cron => Ok(zoned(schedule)?.and_then(|z| z.next_after(after))),
    }
}
