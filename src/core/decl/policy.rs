//! The policy fields of a declaration or a patch (`overlap`, `catchup_window`, `max_jitter`,
//! `start_at`, `end_at`, `pause_on_failure`, `remaining_runs`, `after_completion`) and their
//! validation against the schedule's timing.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{FieldError, parse_instant};
use crate::core::policies::{
    AfterCompletion, IntervalMemo, MAX_CATCHUP_WINDOW, MAX_ONE_SHOT_JITTER, MAX_REMAINING_RUNS,
    MIN_CATCHUP_WINDOW, Overlap, Policies, format_duration, shortest_interval,
};
use crate::core::timing::Timing;
use crate::util::duration::parse_duration;

/// The policy fields as written, before validation. `None` keeps what the base has (the
/// defaults for a new schedule, the current policies for a patch); `Some(None)` clears a
/// bound or the run limit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicyDecl {
    pub overlap: Option<Overlap>,
    pub catchup_window: Option<String>,
    pub max_jitter: Option<String>,
    pub start_at: Option<Option<String>>,
    pub end_at: Option<Option<String>>,
    pub pause_on_failure: Option<bool>,
    pub remaining_runs: Option<Option<u32>>,
    pub after_completion: Option<AfterCompletion>,
}

impl PolicyDecl {
    /// True when no policy field is given.
    pub fn is_empty(&self) -> bool {
        *self == PolicyDecl::default()
    }

    /// `base` with these fields applied, checked against `timing`: every problem is reported,
    /// by field. Returns the policies and the run limit.
    pub fn validate(
        &self,
        base: &Policies,
        base_remaining: Option<u32>,
        timing: &Timing,
        now: DateTime<Utc>,
        intervals: &IntervalMemo,
    ) -> Result<(Policies, Option<u32>), Vec<FieldError>> {
        let mut errors = Vec::new();
        let mut policies = *base;
        let mut remaining = base_remaining;
        if let Some(overlap) = self.overlap {
            policies.overlap = overlap;
        }
        if let Some(pause) = self.pause_on_failure {
            policies.pause_on_failure = pause;
        }
        if let Some(after) = self.after_completion {
            policies.after_completion = after;
        }
        if let Some(text) = &self.catchup_window {
            match parse_duration(text) {
                Some(window) if (MIN_CATCHUP_WINDOW..=MAX_CATCHUP_WINDOW).contains(&window) => {
                    policies.catchup_window = window;
                }
                Some(_) => errors.push(FieldError::new(
                    "catchup_window",
                    format!(
                        "{} is out of range {}-{}",
                        text.trim(),
                        format_duration(MIN_CATCHUP_WINDOW),
                        format_duration(MAX_CATCHUP_WINDOW)
                    ),
                )),
                None => errors.push(not_a_duration("catchup_window", text)),
            }
        }
        if let Some(text) = &self.max_jitter {
            match parse_duration(text) {
                Some(jitter) => policies.max_jitter = jitter,
                None => errors.push(not_a_duration("max_jitter", text)),
            }
        }
        if let Some(start) = &self.start_at {
            match start
                .as_deref()
                .map(|t| parse_instant("start_at", t))
                .transpose()
            {
                Ok(start) => policies.start_at = start,
                Err(e) => errors.push(e),
            }
        }
        if let Some(end) = &self.end_at {
            match end
                .as_deref()
                .map(|t| parse_instant("end_at", t))
                .transpose()
            {
                Ok(Some(end)) if end <= now => errors.push(FieldError::new(
                    "end_at",
                    format!("{} is not in the future", end.to_rfc3339()),
                )),
                Ok(end) => policies.end_at = end,
                Err(e) => errors.push(e),
            }
        }
        if let Some(runs) = self.remaining_runs {
            match runs {
                Some(n) if !(1..=MAX_REMAINING_RUNS).contains(&n) => errors.push(FieldError::new(
                    "remaining_runs",
                    format!("{n} is out of range 1-{MAX_REMAINING_RUNS}"),
                )),
                runs => remaining = runs,
            }
        }
        // The rules between fields, for the fields that read well (one complaint a field).
        let mut between = Vec::new();
        check(&policies, remaining, timing, now, intervals, &mut between);
        errors.extend(
            between
                .into_iter()
                .filter(|e| !errors.iter().any(|known| known.field == e.field))
                .collect::<Vec<_>>(),
        );
        if errors.is_empty() {
            Ok((policies, remaining))
        } else {
            Err(errors)
        }
    }
}

/// The rules between fields: bounds in order, a jitter within the interval, cron-only
/// policies on cron schedules.
fn check(
    policies: &Policies,
    remaining: Option<u32>,
    timing: &Timing,
    now: DateTime<Utc>,
    intervals: &IntervalMemo,
    errors: &mut Vec<FieldError>,
) {
    if let (Some(start), Some(end)) = (policies.start_at, policies.end_at)
        && end <= start
    {
        errors.push(FieldError::new(
            "end_at",
            format!(
                "{} is not after start_at ({})",
                end.to_rfc3339(),
                start.to_rfc3339()
            ),
        ));
    }
    // Deleting once completed needs a schedule that completes.
    if policies.after_completion == AfterCompletion::Delete
        && matches!(timing, Timing::Cron(_))
        && policies.end_at.is_none()
        && remaining.is_none()
    {
        errors.push(FieldError::new(
            "after_completion",
            "delete applies to a schedule that completes: a one-shot (run_at), or a cron \
             schedule with end_at or remaining_runs",
        ));
    }
    match timing {
        Timing::Once { .. } => {
            for (field, set) in [
                ("overlap", policies.overlap != Overlap::Skip),
                ("start_at", policies.start_at.is_some()),
                ("end_at", policies.end_at.is_some()),
                ("pause_on_failure", policies.pause_on_failure),
                ("remaining_runs", remaining.is_some()),
            ] {
                if set {
                    errors.push(FieldError::new(
                        field,
                        "only applies to cron schedules, not to run_at",
                    ));
                }
            }
            if policies.max_jitter > MAX_ONE_SHOT_JITTER {
                errors.push(FieldError::new(
                    "max_jitter",
                    format!(
                        "{} is longer than {}, the longest jitter of a one-shot schedule",
                        format_duration(policies.max_jitter),
                        format_duration(MAX_ONE_SHOT_JITTER)
                    ),
                ));
            }
        }
        // An interval's occurrences are its period apart, exactly.
        Timing::Cron(_) if let Some(every) = timing.interval() => {
            if policies.max_jitter > every.period() {
                errors.push(FieldError::new(
                    "max_jitter",
                    format!(
                        "{} is longer than the schedule's interval ({}): a call must come \
                         before the next occurrence",
                        format_duration(policies.max_jitter),
                        format_duration(every.period())
                    ),
                ));
            }
        }
        // Occurrences fall on one second of whole minutes (zone offsets are whole minutes),
        // so any two are at least a minute apart: a jitter up to a minute always fits without
        // a scan. Several seconds a minute are scanned whatever the jitter.
        Timing::Cron(_)
            if policies.max_jitter > Duration::from_secs(60)
                || (!policies.max_jitter.is_zero() && timing.fires_within_a_minute()) =>
        {
            let from = policies.start_at.map_or(now, |start| start.max(now));
            if let Some(interval) = shortest_interval(timing, from, policies.max_jitter, intervals)
                && interval.to_std().is_ok_and(|i| policies.max_jitter > i)
            {
                errors.push(FieldError::new(
                    "max_jitter",
                    format!(
                        "{} is longer than the schedule's interval ({} between fires at the \
                         shortest): a call must come before the next occurrence",
                        format_duration(policies.max_jitter),
                        interval.to_std().map(format_duration).unwrap_or_default()
                    ),
                ));
            }
        }
        Timing::Cron(_) => {}
    }
}

fn not_a_duration(field: &str, text: &str) -> FieldError {
    FieldError::new(
        field,
        format!("{text:?} is not a duration (examples: 30s, 5m, 1h)"),
    )
}
