//! A partial update applied to the typed record. Only the fields a patch touches are
//! validated, so a payload-only patch or a pause works on a schedule whose stored expression
//! (or target) no longer parses. Timing fields are validated together, because they only make
//! sense together (an expression with its zone and DST policies).

use std::collections::BTreeMap;

use serde_json::Value;

use super::schedule::stored_max_retries;
use super::{Actor, OpsError, OpsResult};
use crate::core::calendar::Exclude;
use crate::core::cron::{OnDstGap, OnDstRepeat};
use crate::core::decl::{
    FieldError, PolicyDecl, TimingDecl, validate_max_retries, validate_payload,
};
use crate::core::events;
use crate::core::labels::Labels;
use crate::core::model::{Schedule, ScheduleKind, ScheduleStatus};
use crate::core::policies::IntervalMemo;
use crate::core::target::Target;
use crate::core::timing::Timing;

/// A partial update of a schedule. `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SchedulePatch {
    pub cron: Option<String>,
    pub run_at: Option<String>,
    pub timezone: Option<String>,
    pub payload: Option<Value>,
    pub max_retries: Option<u32>,
    pub on_dst_gap: Option<OnDstGap>,
    pub on_dst_repeat: Option<OnDstRepeat>,
    pub target_config: Option<Value>,
    pub status: Option<ScheduleStatus>,
    /// The policy fields (overlap, catch-up window, jitter, bounds, pause on failure, runs
    /// left).
    pub policies: PolicyDecl,
    pub labels: Option<LabelsPatch>,
    /// A new list of exclusions (empty: none).
    pub exclude: Option<Vec<String>>,
}

/// How a patch changes a schedule's labels (a JSON merge patch of the map).
#[derive(Debug, Clone, PartialEq)]
pub enum LabelsPatch {
    /// Each named label set to its value, or removed for `None`; the others kept.
    Merge(BTreeMap<String, Option<String>>),
    /// Every label removed (`"labels": null`).
    Clear,
}

impl SchedulePatch {
    /// True when the patch changes when the schedule runs.
    fn touches_timing(&self) -> bool {
        self.cron.is_some()
            || self.run_at.is_some()
            || self.timezone.is_some()
            || self.on_dst_gap.is_some()
            || self.on_dst_repeat.is_some()
    }
}

/// `current` with `patch` applied, and the event the change publishes (`None` when nothing
/// changed). Every problem of the touched fields is reported together. `open_job` says whether
/// the schedule has an open job (a retry a pause holds, say): a one-shot whose occurrence was
/// claimed may still be resumed to finish it.
pub(super) fn apply(
    current: &Schedule,
    patch: SchedulePatch,
    actor: &Actor,
    open_job: bool,
) -> OpsResult<(Schedule, Option<&'static str>)> {
    let mut errors = Vec::new();
    let mut updated = current.clone();
    let timing_touched = patch.touches_timing();
    match patch.status {
        None => {}
        Some(s @ (ScheduleStatus::Active | ScheduleStatus::Paused)) => updated.status = s,
        Some(other) => errors.push(FieldError::new(
            "status",
            format!("{other} cannot be set directly (use active or paused; delete to delete)"),
        )),
    }
    // What ended a cron schedule (its end, its run limit) may be moved; a one-shot needs a
    // new run_at.
    let extends_cron = current.kind() == ScheduleKind::Cron
        && (patch.policies.end_at.is_some() || patch.policies.remaining_runs.is_some());
    if current.status == ScheduleStatus::Completed
        && patch.status == Some(ScheduleStatus::Active)
        && !timing_touched
        && !extends_cron
    {
        errors.push(FieldError::new(
            "status",
            match current.kind() {
                ScheduleKind::Once => {
                    "a completed one-shot schedule cannot be resumed; give it a new run_at"
                }
                ScheduleKind::Cron => {
                    "a completed schedule cannot be resumed as it is; give it a later end_at or \
                     more remaining_runs"
                }
            },
        ));
    }
    if timing_touched {
        match patched_timing(&current.timing, &patch).and_then(|t| t.validate(actor.now)) {
            Ok(timing) => updated.timing = timing,
            Err(mut problems) => errors.append(&mut problems),
        }
    }
    if (timing_touched || !patch.policies.is_empty()) && errors.is_empty() {
        let runs = current.remaining_runs.and_then(|n| u32::try_from(n).ok());
        match patch.policies.validate(
            &current.policies,
            runs,
            &updated.timing,
            actor.now,
            &IntervalMemo::default(),
        ) {
            Ok((policies, runs)) => {
                updated.policies = policies;
                updated.remaining_runs = runs.map(stored_max_retries);
            }
            Err(mut problems) => errors.append(&mut problems),
        }
    }
    if let Some(payload) = &patch.payload {
        match validate_payload(payload) {
            Ok(map) => updated.payload = Value::Object(map),
            Err(problem) => errors.push(problem),
        }
    }
    if let Some(max_retries) = patch.max_retries {
        match validate_max_retries(max_retries) {
            Ok(n) => updated.max_retries = stored_max_retries(n),
            Err(problem) => errors.push(problem),
        }
    }
    match &patch.labels {
        None => {}
        Some(LabelsPatch::Clear) => updated.labels = Labels::default(),
        Some(LabelsPatch::Merge(changes)) => match current.labels.merged("labels", changes) {
            Ok(labels) => updated.labels = labels,
            Err(mut problems) => errors.append(&mut problems),
        },
    }
    if let Some(list) = &patch.exclude {
        if updated.kind() == ScheduleKind::Once && !list.is_empty() {
            errors.push(FieldError::new(
                "exclude",
                "only a repeating schedule (cron or every) has exclusions",
            ));
        } else {
            match Exclude::validate("exclude", list) {
                Ok(exclude) => updated.exclude = exclude,
                Err(mut problems) => errors.append(&mut problems),
            }
        }
    }
    if let Some(config) = &patch.target_config {
        match Target::validate(config) {
            Ok(target) => updated.target = target,
            Err(mut problems) => errors.append(&mut problems),
        }
    }
    if !errors.is_empty() {
        return Err(OpsError::Invalid(errors));
    }

    if updated.status == ScheduleStatus::Completed
        && ((timing_touched && updated.kind() == ScheduleKind::Once) || extends_cron)
    {
        // A completed one-shot given a new run_at runs again, as does a completed cron
        // schedule given a later end or more runs.
        updated.status = ScheduleStatus::Active;
    }
    let resumed =
        current.status != ScheduleStatus::Active && updated.status == ScheduleStatus::Active;
    // Jitter and bounds move the calls as the timing does.
    let calls_moved = timing_touched || updated.policies.moves_calls_from(&current.policies);
    if calls_moved || resumed {
        updated.next_run_at = match updated.occurrences().first_after(actor.now) {
            Ok(next) => next,
            // Resuming a schedule whose stored expression no longer parses: like the engine,
            // look at it again in an hour instead of refusing (a new expression fixes it).
            Err(_) if !timing_touched => Some(actor.now + chrono::Duration::hours(1)),
            Err(e) => {
                return Err(OpsError::Invalid(vec![FieldError::new(
                    "cron",
                    e.to_string(),
                )]));
            }
        };
        // A one-shot paused during its retries has no fire ahead (its occurrence was claimed)
        // but that occurrence's job is still open: resuming re-arms the job (the engine drains
        // it), so it is no error. A job triggered by hand while the occurrence was still ahead
        // does not stand for it.
        let re_arms_open_job = open_job
            && resumed
            && !timing_touched
            && updated.kind() == ScheduleKind::Once
            && current.next_run_at.is_none();
        if updated.status == ScheduleStatus::Active
            && updated.next_run_at.is_none()
            && !re_arms_open_job
        {
            return Err(OpsError::Invalid(vec![FieldError::new(
                if updated.kind() == ScheduleKind::Once {
                    "run_at"
                } else if updated.policies.end_at.is_some() {
                    "end_at"
                } else {
                    "cron"
                },
                "no future fire",
            )]));
        }
    }
    if updated == *current {
        return Ok((updated, None));
    }
    updated.updated_at = actor.now;
    updated.updated_by = actor.name.clone();
    let event = if current.status != updated.status {
        match updated.status {
            ScheduleStatus::Paused => events::SCHEDULE_PAUSED,
            _ => events::SCHEDULE_RESUMED,
        }
    } else {
        events::SCHEDULE_UPDATED
    };
    Ok((updated, Some(event)))
}

/// The timing fields to validate: the patch's, completed from the current cron timing. A new
/// `cron` or `run_at` replaces the other kind of timing; a zone or DST policy alone only
/// applies to a cron schedule.
fn patched_timing(current: &Timing, patch: &SchedulePatch) -> Result<TimingDecl, Vec<FieldError>> {
    let current_cron = current.cron();
    if patch.run_at.is_some() {
        // The zone and policies belong to the cron timing being replaced; only the patch's own
        // are checked (and refused alongside run_at).
        return Ok(TimingDecl {
            cron: patch.cron.clone(),
            every: None,
            phase: None,
            run_at: patch.run_at.clone(),
            timezone: patch.timezone.clone(),
            on_dst_gap: patch.on_dst_gap,
            on_dst_repeat: patch.on_dst_repeat,
        });
    }
    let cron = match (&patch.cron, current_cron) {
        (Some(cron), _) => cron.clone(),
        (None, Some(current)) => current.expression.clone(),
        (None, None) => {
            // A one-shot schedule given only a zone or DST policy.
            let given = [
                ("timezone", patch.timezone.is_some()),
                ("on_dst_gap", patch.on_dst_gap.is_some()),
                ("on_dst_repeat", patch.on_dst_repeat.is_some()),
            ];
            return Err(given
                .into_iter()
                .filter(|(_, is_set)| *is_set)
                .map(|(field, _)| {
                    FieldError::new(field, "only applies to cron schedules, not to run_at")
                })
                .collect());
        }
    };
    Ok(TimingDecl {
        cron: Some(cron),
        every: None,
        phase: None,
        run_at: None,
        timezone: patch
            .timezone
            .clone()
            .or_else(|| current_cron.map(|c| c.timezone.clone())),
        on_dst_gap: patch.on_dst_gap.or(current_cron.map(|c| c.on_dst_gap)),
        on_dst_repeat: patch
            .on_dst_repeat
            .or(current_cron.map(|c| c.on_dst_repeat)),
    })
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Duration, TimeZone, Utc};
    use serde_json::json;

    use super::*;
    use crate::core::model::{EnvId, ScheduleId};
    use crate::core::timing::CronTiming;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2030, 1, 1, 12, 0, 0).unwrap()
    }

    fn actor() -> Actor {
        Actor {
            name: "tester".into(),
            correlation_id: None,
            now: now(),
        }
    }

    fn stored(timing: Timing) -> Schedule {
        Schedule {
            id: ScheduleId::new(),
            env_id: EnvId::new(),
            domain: "billing".into(),
            schedule_type: "a.job".into(),
            next_run_at: timing.next_after(now()).ok().flatten(),
            timing,
            target: Target::from_stored(json!({"baseUrl": "https://billing.internal"})),
            payload: json!({}),
            status: ScheduleStatus::Active,
            last_run_at: None,
            retry_count: 0,
            max_retries: 3,
            policies: Default::default(),
            remaining_runs: None,
            labels: Default::default(),
            exclude: Default::default(),
            created_at: now() - Duration::days(1),
            updated_at: now() - Duration::days(1),
            created_by: "tester".into(),
            updated_by: "tester".into(),
        }
    }

    fn berlin(expression: &str) -> Timing {
        Timing::Cron(CronTiming::from_stored(
            expression,
            "Europe/Berlin",
            OnDstGap::Skip,
            OnDstRepeat::Twice,
        ))
    }

    fn fields(result: OpsResult<(Schedule, Option<&'static str>)>) -> Vec<String> {
        match result {
            Err(OpsError::Invalid(errors)) => errors.into_iter().map(|e| e.field).collect(),
            other => panic!("expected field errors, got {other:?}"),
        }
    }

    #[test]
    fn a_new_expression_keeps_the_zone_and_policies() {
        let current = stored(berlin("0 6 * * *"));
        let patch = SchedulePatch {
            cron: Some("30 7 * * *".into()),
            ..SchedulePatch::default()
        };
        let (updated, event) = apply(&current, patch, &actor(), false).unwrap();
        let cron = updated.timing.cron().unwrap();
        assert_eq!(cron.expression, "30 7 * * *");
        assert_eq!(cron.timezone, "Europe/Berlin");
        assert_eq!(
            (cron.on_dst_gap, cron.on_dst_repeat),
            (OnDstGap::Skip, OnDstRepeat::Twice)
        );
        assert_eq!(event, Some(events::SCHEDULE_UPDATED));
        assert_eq!(
            updated.next_run_at,
            updated.timing.next_after(now()).unwrap()
        );
        assert_ne!(updated.next_run_at, current.next_run_at);
    }

    #[test]
    fn run_at_replaces_a_cron_timing_and_refuses_cron_only_fields() {
        let current = stored(berlin("0 6 * * *"));
        let patch = SchedulePatch {
            run_at: Some("2030-02-01T00:00:00Z".into()),
            ..SchedulePatch::default()
        };
        let (updated, _) = apply(&current, patch, &actor(), false).unwrap();
        let run_at = Utc.with_ymd_and_hms(2030, 2, 1, 0, 0, 0).unwrap();
        assert_eq!(updated.timing, Timing::Once { run_at });
        assert_eq!(updated.next_run_at, Some(run_at));

        let patch = SchedulePatch {
            run_at: Some("2030-02-01T00:00:00Z".into()),
            timezone: Some("UTC".into()),
            ..SchedulePatch::default()
        };
        assert_eq!(
            fields(apply(&current, patch, &actor(), false)),
            ["timezone"]
        );
    }

    #[test]
    fn zone_or_policies_alone_apply_only_to_cron() {
        let once = stored(Timing::Once {
            run_at: now() + Duration::days(2),
        });
        let patch = SchedulePatch {
            timezone: Some("Europe/Paris".into()),
            on_dst_gap: Some(OnDstGap::Skip),
            ..SchedulePatch::default()
        };
        assert_eq!(
            fields(apply(&once, patch, &actor(), false)),
            ["timezone", "on_dst_gap"]
        );

        let cron = stored(berlin("0 6 * * *"));
        let patch = SchedulePatch {
            timezone: Some("Europe/Paris".into()),
            ..SchedulePatch::default()
        };
        let (updated, _) = apply(&cron, patch, &actor(), false).unwrap();
        assert_eq!(updated.timing.timezone(), Some("Europe/Paris"));
        assert_eq!(updated.timing.cron_expression(), Some("0 6 * * *"));
    }

    #[test]
    fn untouched_fields_are_not_revalidated_and_an_unchanged_patch_is_a_no_op() {
        // A one-shot whose instant has passed, with a target that no longer parses.
        let mut current = stored(Timing::Once {
            run_at: now() - Duration::hours(1),
        });
        current.target = Target::from_stored(json!({"baseUrl": "http://h:99999"}));
        current.status = ScheduleStatus::Completed;
        let patch = SchedulePatch {
            payload: Some(json!({"n": 1})),
            ..SchedulePatch::default()
        };
        let (updated, event) = apply(&current, patch, &actor(), false).unwrap();
        assert_eq!(updated.payload, json!({"n": 1}));
        assert_eq!(updated.target, current.target);
        assert_eq!(event, Some(events::SCHEDULE_UPDATED));

        let patch = SchedulePatch {
            payload: Some(json!({})),
            ..SchedulePatch::default()
        };
        let (same, event) = apply(&current, patch, &actor(), false).unwrap();
        assert_eq!((same, event), (current, None));
    }

    #[test]
    fn a_stored_expression_that_no_longer_parses_can_be_paused_and_resumed() {
        let current = stored(berlin("61 * * * *"));
        let pause = SchedulePatch {
            status: Some(ScheduleStatus::Paused),
            payload: Some(json!({"n": 1})),
            ..SchedulePatch::default()
        };
        let (paused, event) = apply(&current, pause, &actor(), false).unwrap();
        assert_eq!(paused.status, ScheduleStatus::Paused);
        assert_eq!(event, Some(events::SCHEDULE_PAUSED));
        let resume = SchedulePatch {
            status: Some(ScheduleStatus::Active),
            ..SchedulePatch::default()
        };
        let (resumed, event) = apply(&paused, resume, &actor(), false).unwrap();
        assert_eq!(resumed.next_run_at, Some(now() + Duration::hours(1)));
        assert_eq!(event, Some(events::SCHEDULE_RESUMED));
        // A new expression that does not parse either is still refused, naming the field.
        let broken = SchedulePatch {
            cron: Some("61 * * * *".into()),
            ..SchedulePatch::default()
        };
        assert_eq!(fields(apply(&paused, broken, &actor(), false)), ["cron"]);
    }

    #[test]
    fn a_one_shot_past_its_instant_resumes_only_to_finish_its_open_job() {
        let mut paused = stored(Timing::Once {
            run_at: now() - Duration::minutes(5),
        });
        paused.status = ScheduleStatus::Paused;
        paused.next_run_at = None;
        let resume = || SchedulePatch {
            status: Some(ScheduleStatus::Active),
            ..SchedulePatch::default()
        };
        // Its retry waits for the resume: resuming re-arms it, with no fire of its own ahead.
        let (resumed, event) = apply(&paused, resume(), &actor(), true).unwrap();
        assert_eq!(resumed.status, ScheduleStatus::Active);
        assert_eq!(resumed.next_run_at, None);
        assert_eq!(event, Some(events::SCHEDULE_RESUMED));
        // Nothing left to run: still refused, naming the field.
        assert_eq!(
            fields(apply(&paused, resume(), &actor(), false)),
            ["run_at"]
        );
        // Its instant passed while paused, never claimed: an open job (a run triggered by
        // hand) does not stand for the occurrence, so it is refused too.
        let missed = Schedule {
            next_run_at: Some(now() - Duration::minutes(5)),
            ..paused.clone()
        };
        assert_eq!(fields(apply(&missed, resume(), &actor(), true)), ["run_at"]);
        // A new instant in the past is refused whatever is open.
        let moved = SchedulePatch {
            run_at: Some("2029-01-01T00:00:00Z".into()),
            ..resume()
        };
        assert_eq!(fields(apply(&paused, moved, &actor(), true)), ["run_at"]);
    }

    #[test]
    fn every_touched_field_problem_is_reported_together() {
        let current = stored(berlin("0 6 * * *"));
        let patch = SchedulePatch {
            cron: Some("61 * * * *".into()),
            payload: Some(json!([1])),
            max_retries: Some(101),
            target_config: Some(json!({"baseUrl": "ftp://x"})),
            status: Some(ScheduleStatus::Deleted),
            ..SchedulePatch::default()
        };
        assert_eq!(
            fields(apply(&current, patch, &actor(), false)),
            [
                "status",
                "cron",
                "payload",
                "max_retries",
                "target_config.baseUrl"
            ]
        );
    }
}
