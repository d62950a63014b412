//! When a schedule runs: a cron expression compiled once with its zone and DST policies, or a
//! one-shot instant. A declaration validates to a [`Timing`]; a stored schedule carries one, so
//! the ticker, resume and the API never re-parse the expression and agree on the next fire.
//!
//! A stored row whose expression (or zone) no longer parses still loads: the text is kept with
//! the parse failure, and the ticker looks at such a schedule again in an hour instead of
//! hot-looping on it.

use chrono::{DateTime, Utc};

use crate::core::cron::{
    CronError, CronExpr, Every, OnDstGap, OnDstRepeat, Zone, ZonedCron, parse_timezone,
};
use crate::core::model::ScheduleKind;

/// When a schedule runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Timing {
    /// Repeatedly, by a cron expression in a time zone.
    Cron(CronTiming),
    /// Once.
    Once { run_at: DateTime<Utc> },
}

/// A cron timing: the text it came from and its compiled, zoned expression.
#[derive(Debug, Clone, PartialEq)]
pub struct CronTiming {
    /// The expression as declared (surrounding whitespace removed).
    pub expression: String,
    /// The IANA zone name.
    pub timezone: String,
    pub on_dst_gap: OnDstGap,
    pub on_dst_repeat: OnDstRepeat,
    compiled: Compiled,
}

#[derive(Debug, Clone, PartialEq)]
enum Compiled {
    Ready(ZonedCron),
    /// The stored zone name is unknown to this build's tz database: evaluated in UTC.
    UtcFallback(ZonedCron),
    /// The stored expression no longer parses.
    Unparseable(CronError),
}

impl CronTiming {
    /// A validated timing: `schedule` compiled from `expression`.
    pub fn new(expression: &str, schedule: ZonedCron) -> CronTiming {
        CronTiming {
            expression: expression.trim().to_owned(),
            timezone: schedule.tz.name().to_owned(),
            on_dst_gap: schedule.on_dst_gap,
            on_dst_repeat: schedule.on_dst_repeat,
            compiled: Compiled::Ready(schedule),
        }
    }

    /// A stored timing, compiled once. Never fails: an expression that no longer parses keeps
    /// its failure (see [`CronTiming::zoned`]), and a zone name the tz database no longer knows
    /// falls back to UTC evaluation.
    pub fn from_stored(
        expression: &str,
        timezone: &str,
        on_dst_gap: OnDstGap,
        on_dst_repeat: OnDstRepeat,
    ) -> CronTiming {
        let compiled = match CronExpr::parse(expression) {
            Err(err) => Compiled::Unparseable(err),
            Ok(expr) => match parse_timezone(timezone) {
                Ok(tz) => Compiled::Ready(ZonedCron::new(expr, tz, on_dst_gap, on_dst_repeat)),
                Err(_) => Compiled::UtcFallback(ZonedCron::new(
                    expr,
                    Zone::utc(),
                    on_dst_gap,
                    on_dst_repeat,
                )),
            },
        };
        CronTiming {
            expression: expression.to_owned(),
            timezone: timezone.to_owned(),
            on_dst_gap,
            on_dst_repeat,
            compiled,
        }
    }

    /// The compiled expression, or why the stored text does not parse.
    pub fn zoned(&self) -> Result<&ZonedCron, &CronError> {
        match &self.compiled {
            Compiled::Ready(zoned) | Compiled::UtcFallback(zoned) => Ok(zoned),
            Compiled::Unparseable(err) => Err(err),
        }
    }

    /// True when the stored zone is unknown and the expression is evaluated in UTC.
    pub fn zone_fell_back_to_utc(&self) -> bool {
        matches!(self.compiled, Compiled::UtcFallback(_))
    }
}

impl Timing {
    /// The first fire strictly after `after`: `Ok(None)` when there is none (a one-shot
    /// schedule whose instant has passed, an expression that never fires again); `Err` for a
    /// stored expression that no longer parses.
    pub fn next_after(&self, after: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, CronError> {
        match self {
            Timing::Once { run_at } => Ok((*run_at > after).then_some(*run_at)),
            Timing::Cron(cron) => Ok(cron.zoned().map_err(Clone::clone)?.next_after(after)),
        }
    }

    /// The wall-clock time of `at` in the schedule's zone (exclusions are read on it); none for
    /// a one-shot or an expression that no longer parses.
    pub fn wall_time(&self, at: DateTime<Utc>) -> Option<chrono::NaiveDateTime> {
        Some(self.cron()?.zoned().ok()?.local_time(at).naive_local())
    }

    /// Whether this is a cron or a one-shot timing.
    pub fn kind(&self) -> ScheduleKind {
        match self {
            Timing::Cron(_) => ScheduleKind::Cron,
            Timing::Once { .. } => ScheduleKind::Once,
        }
    }

    /// The cron timing, for cron schedules.
    pub fn cron(&self) -> Option<&CronTiming> {
        match self {
            Timing::Cron(cron) => Some(cron),
            Timing::Once { .. } => None,
        }
    }

    /// The interval, for a schedule that repeats on one (`@every`).
    pub fn interval(&self) -> Option<Every> {
        self.cron()?.zoned().ok()?.expr.every()
    }

    /// Whether two fires may come less than a minute apart: a seconds field with more than
    /// one second (an interval is not counted here; [`Timing::interval`] says it).
    pub fn fires_within_a_minute(&self) -> bool {
        self.cron()
            .and_then(|cron| cron.zoned().ok())
            .is_some_and(|zoned| zoned.expr.seconds_per_minute() > 1)
    }

    /// The cron expression, for cron schedules.
    pub fn cron_expression(&self) -> Option<&str> {
        self.cron().map(|cron| cron.expression.as_str())
    }

    /// The zone name, for cron schedules.
    pub fn timezone(&self) -> Option<&str> {
        self.cron().map(|cron| cron.timezone.as_str())
    }

    /// The gap policy, for cron schedules.
    pub fn on_dst_gap(&self) -> Option<OnDstGap> {
        self.cron().map(|cron| cron.on_dst_gap)
    }

    /// The repeat policy, for cron schedules.
    pub fn on_dst_repeat(&self) -> Option<OnDstRepeat> {
        self.cron().map(|cron| cron.on_dst_repeat)
    }

    /// The run time, for one-shot schedules.
    pub fn run_at(&self) -> Option<DateTime<Utc>> {
        match self {
            Timing::Cron(_) => None,
            Timing::Once { run_at } => Some(*run_at),
        }
    }

    /// The flat columns a timing is stored in.
    pub fn columns(&self) -> TimingColumns {
        match self {
            Timing::Cron(cron) => TimingColumns {
                kind: ScheduleKind::Cron,
                cron_expr: Some(cron.expression.clone()),
                timezone: cron.timezone.clone(),
                run_at: None,
                on_dst_gap: cron.on_dst_gap,
                on_dst_repeat: cron.on_dst_repeat,
            },
            Timing::Once { run_at } => TimingColumns {
                kind: ScheduleKind::Once,
                cron_expr: None,
                timezone: "UTC".to_owned(),
                run_at: Some(*run_at),
                on_dst_gap: OnDstGap::default(),
                on_dst_repeat: OnDstRepeat::default(),
            },
        }
    }

    /// The timing stored in `columns`. Fails only when the columns contradict each other (a
    /// one-shot row without `run_at`); an expression that no longer parses still loads.
    pub fn from_columns(columns: TimingColumns) -> Result<Timing, String> {
        match columns.kind {
            ScheduleKind::Cron => Ok(Timing::Cron(CronTiming::from_stored(
                columns.cron_expr.as_deref().unwrap_or_default(),
                &columns.timezone,
                columns.on_dst_gap,
                columns.on_dst_repeat,
            ))),
            ScheduleKind::Once => columns
                .run_at
                .map(|run_at| Timing::Once { run_at })
                .ok_or_else(|| "a one-shot schedule without run_at".to_owned()),
        }
    }
}

/// A timing as stored: the schedule table's timing columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimingColumns {
    pub kind: ScheduleKind,
    pub cron_expr: Option<String>,
    pub timezone: String,
    pub run_at: Option<DateTime<Utc>>,
    pub on_dst_gap: OnDstGap,
    pub on_dst_repeat: OnDstRepeat,
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2030, 1, 1, h, m, 0).unwrap()
    }

    #[test]
    fn a_stored_cron_timing_is_compiled_once_and_round_trips_its_columns() {
        let columns = TimingColumns {
            kind: ScheduleKind::Cron,
            cron_expr: Some("*/15 * * * *".to_owned()),
            timezone: "Europe/Berlin".to_owned(),
            run_at: None,
            on_dst_gap: OnDstGap::Skip,
            on_dst_repeat: OnDstRepeat::Twice,
        };
        let timing = Timing::from_columns(columns.clone()).unwrap();
        let zoned = timing.cron().unwrap().zoned().unwrap();
        assert_eq!(zoned.tz.name(), "Europe/Berlin");
        assert_eq!(zoned.on_dst_gap, OnDstGap::Skip);
        assert_eq!(timing.next_after(at(10, 1)).unwrap(), Some(at(10, 15)));
        assert_eq!(timing.columns(), columns);
    }

    #[test]
    fn an_unparseable_stored_expression_still_loads_with_its_failure() {
        let timing = Timing::Cron(CronTiming::from_stored(
            "61 * * * *",
            "UTC",
            OnDstGap::Shift,
            OnDstRepeat::Once,
        ));
        assert_eq!(timing.cron_expression(), Some("61 * * * *"));
        let err = timing.next_after(at(0, 0)).unwrap_err();
        assert!(err.to_string().contains("out of range"), "{err}");
    }

    #[test]
    fn an_unknown_stored_zone_falls_back_to_utc() {
        let cron = CronTiming::from_stored(
            "0 * * * *",
            "Mars/Olympus",
            OnDstGap::Shift,
            OnDstRepeat::Once,
        );
        assert!(cron.zone_fell_back_to_utc());
        assert_eq!(cron.timezone, "Mars/Olympus");
        assert_eq!(
            Timing::Cron(cron).next_after(at(3, 30)).unwrap(),
            Some(at(4, 0))
        );
    }

    #[test]
    fn a_one_shot_fires_only_before_its_instant() {
        let timing = Timing::Once { run_at: at(12, 0) };
        assert_eq!(timing.next_after(at(11, 0)).unwrap(), Some(at(12, 0)));
        assert_eq!(timing.next_after(at(12, 0)).unwrap(), None);
        let columns = timing.columns();
        assert_eq!(
            (columns.kind, columns.timezone.as_str()),
            (ScheduleKind::Once, "UTC")
        );
        assert_eq!(Timing::from_columns(columns).unwrap(), timing);
        let broken = TimingColumns {
            run_at: None,
            ..timing.columns()
        };
        assert!(Timing::from_columns(broken).is_err());
    }
}
