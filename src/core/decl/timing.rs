//! The timing fields of a declaration (`cron`, `every` with `phase`, or `run_at`; `timezone`,
//! the DST policies) and their validation: what a schedule's instants will be, checked before
//! anything is stored. An interval (`every: 90s`) is kept as its `@every` expression, which
//! `cron` also takes, so the rest of the system sees one repeating kind.

use chrono::{DateTime, Utc};

use super::{FieldError, parse_instant};
use crate::core::cron::{CronExpr, Every, OnDstGap, OnDstRepeat, ZonedCron, parse_timezone};
use crate::core::timing::{CronTiming, Timing};

/// The timing fields of a declaration (or of a patch's merged timing), before validation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimingDecl {
    pub cron: Option<String>,
    /// An interval (`90s`), instead of `cron`.
    pub every: Option<String>,
    /// How far past each multiple of `every` since the epoch it fires (`15s`; default 0s).
    pub phase: Option<String>,
    pub run_at: Option<String>,
    pub timezone: Option<String>,
    pub on_dst_gap: Option<OnDstGap>,
    pub on_dst_repeat: Option<OnDstRepeat>,
}

impl TimingDecl {
    /// Checks the timing: exactly one of `cron`, `every` and `run_at`, a known zone, policies
    /// only for cron, a run time in the future, an expression that fires after `now`.
    pub fn validate(&self, now: DateTime<Utc>) -> Result<Timing, Vec<FieldError>> {
        let mut errors = Vec::new();
        if self.phase.is_some() && self.every.is_none() {
            errors.push(FieldError::new("phase", "only applies with every"));
        }
        if let Some(every) = &self.every {
            let other = [
                ("cron", self.cron.is_some()),
                ("run_at", self.run_at.is_some()),
            ];
            for (field, _) in other.iter().filter(|(_, set)| *set) {
                errors.push(FieldError::new(
                    *field,
                    "cannot be combined with every: give exactly one of cron, every or run_at",
                ));
            }
            let expression = match Every::from_parts(every, self.phase.as_deref()) {
                Ok(interval) => interval.to_string(),
                Err((field, err)) => {
                    errors.push(FieldError::new(field, err.to_string()));
                    return Err(errors);
                }
            };
            return match self.validate_cron(&expression, now, &mut errors) {
                Some(timing) if errors.is_empty() => Ok(timing),
                _ => Err(errors),
            };
        }
        let timing = match (&self.cron, &self.run_at) {
            (Some(_), Some(_)) => {
                errors.push(FieldError::new(
                    "run_at",
                    "cannot be combined with cron: give exactly one of cron, every or run_at",
                ));
                None
            }
            (None, None) => {
                errors.push(FieldError::new(
                    "cron",
                    "one of cron, every or run_at is required",
                ));
                None
            }
            (Some(cron), None) => self.validate_cron(cron, now, &mut errors),
            (None, Some(run_at)) => self.validate_run_at(run_at, now, &mut errors),
        };
        match timing {
            Some(timing) if errors.is_empty() => Ok(timing),
            _ => Err(errors),
        }
    }

    fn validate_cron(
        &self,
        cron: &str,
        now: DateTime<Utc>,
        errors: &mut Vec<FieldError>,
    ) -> Option<Timing> {
        let timezone = self.timezone.as_deref().unwrap_or("UTC");
        let tz = parse_timezone(timezone)
            .map_err(|err| errors.push(FieldError::new("timezone", err.message_without_field())))
            .ok();
        let expr = CronExpr::parse(cron)
            .map_err(|err| errors.push(FieldError::new("cron", err.to_string())))
            .ok();
        let schedule = ZonedCron::new(
            expr?,
            tz?,
            self.on_dst_gap.unwrap_or_default(),
            self.on_dst_repeat.unwrap_or_default(),
        );
        if let Err(err) = schedule.validate(now) {
            errors.push(FieldError::new("cron", err.to_string()));
            return None;
        }
        Some(Timing::Cron(CronTiming::new(cron, schedule)))
    }

    fn validate_run_at(
        &self,
        run_at: &str,
        now: DateTime<Utc>,
        errors: &mut Vec<FieldError>,
    ) -> Option<Timing> {
        for (field, is_set) in [
            ("timezone", self.timezone.is_some()),
            ("on_dst_gap", self.on_dst_gap.is_some()),
            ("on_dst_repeat", self.on_dst_repeat.is_some()),
        ] {
            if is_set {
                errors.push(FieldError::new(
                    field,
                    "only applies to cron schedules, not to run_at",
                ));
            }
        }
        let run_at_time = match parse_instant("run_at", run_at) {
            Ok(at) => at,
            Err(problem) => {
                errors.push(problem);
                return None;
            }
        };
        if run_at_time <= now {
            errors.push(FieldError::new(
                "run_at",
                format!("{} is not in the future", run_at.trim()),
            ));
            return None;
        }
        Some(Timing::Once {
            run_at: run_at_time,
        })
    }
}
