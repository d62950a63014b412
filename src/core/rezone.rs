//! Next fires recomputed under the time-zone rules this process uses.
//!
//! A schedule's `next_run_at` is computed when it is created, claimed or resumed, with the
//! zone rules of the process doing it. When a process starts with a newer tz database (a
//! government moved its clocks), the stored instants of future fires may be stale. At
//! start-up, before the first tick, every active cron schedule whose next fire is still in
//! the future is evaluated again; where the answer differs it is stored, each environment in
//! one tenant transaction with the rows locked, with an audit entry per moved fire
//! (`schedule.rezone`). Schedules in UTC cannot change and are not read.
//!
//! The new instant is the same occurrence as the stored one, not simply the next fire after
//! now: the stored instant is some wall-clock occurrence under the old rules, and new rules
//! move it by at most a few hours, so the occurrence is the new-rule fire nearest to it within
//! [`RULE_SHIFT_WINDOW`]. Anchoring on the stored occurrence is what keeps a change of rules from
//! skipping a fire (its new instant already passed: it becomes due now and runs late) or
//! repeating one (the occurrence that ran under the old rules is not found again after now).
//! Due schedules are left to the ticker.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};

use serde_json::json;

use crate::core::clock::Clock;
use crate::core::cron::{parse_timezone, tzdb};
use crate::core::model::{EnvId, ScheduleId};
use crate::core::store::{Channel, NewAudit, ScheduleSetNextRun, Store, StoreResult};

/// How far new zone rules can move a wall-clock occurrence: offset changes are at most a few
/// hours (two is the largest in the tz database's history).
pub const RULE_SHIFT_WINDOW: Duration = Duration::hours(3);

/// At most this many candidate fires are looked at around a stored one (an every-minute
/// expression has 360 in the window; the nearest is reached well before this bound).
const MAX_CANDIDATES: usize = 1_000;

/// The actor recorded in the audit journal for a recomputed fire.
pub const ACTOR: &str = "system:tz-database";

/// A schedule whose next fire moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rezoned {
    pub schedule_id: ScheduleId,
    pub env_id: EnvId,
    pub timezone: String,
    pub old_next_run_at: DateTime<Utc>,
    pub new_next_run_at: DateTime<Utc>,
}

/// Recomputes the future next fires of active cron schedules in every zone in use, stores
/// those that changed, and returns them (each is also logged).
pub async fn recompute_next_fires(
    store: &dyn Store,
    clock: &dyn Clock,
) -> StoreResult<Vec<Rezoned>> {
    let mut zones_by_env: BTreeMap<EnvId, Vec<String>> = BTreeMap::new();
    for zone in store.schedule_zones_active().await? {
        // UTC has no rules to change.
        if zone.timezone != "UTC" {
            zones_by_env
                .entry(zone.env_id)
                .or_default()
                .push(zone.timezone);
        }
    }
    let database = tzdb::database();
    let mut changed = Vec::new();
    for (env_id, zones) in zones_by_env {
        let now = clock.now();
        let mut tx = store.tenant_begin(env_id).await?;
        for timezone in zones {
            if parse_timezone(&timezone).is_err() {
                tracing::warn!(
                    env_id = %env_id,
                    timezone,
                    "active schedules use a time zone the tz database does not know; they are \
                     evaluated in UTC from their next fire on"
                );
                continue;
            }
            for schedule in tx.schedule_list_in_zone(&timezone).await? {
                let Some(old) = schedule.next_run_at.filter(|&at| at > now) else {
                    continue;
                };
                // Call instants: the occurrences inside the bounds, with their jitter.
                let calls = schedule.occurrences();
                let new = match same_occurrence(|after| calls.next_after(after), old) {
                    // Already passed under the new rules: due now, late rather than never.
                    Some(at) => at.max(now),
                    // No fire near the stored one under the new rules: the next one after now.
                    None => match calls.next_after(now) {
                        Ok(Some(at)) => at,
                        // An expression that no longer parses, or no fire left: the ticker
                        // deals with it when the stored instant comes.
                        Ok(None) | Err(_) => continue,
                    },
                };
                if new == old {
                    continue;
                }
                let change = ScheduleSetNextRun {
                    id: schedule.id,
                    next_run_at: new,
                    now,
                };
                if tx.schedule_set_next_run(&change).await?.is_none() {
                    continue;
                }
                tx.audit_insert(&NewAudit {
                    actor: ACTOR.to_owned(),
                    action: "schedule.rezone".to_owned(),
                    resource_type: "schedule".to_owned(),
                    resource_id: schedule.id.to_string(),
                    before: Some(json!({ "next_run_at": old })),
                    after: Some(json!({
                        "next_run_at": new,
                        "tz_database": { "version": database.version(), "source": database.source() },
                    })),
                    correlation_id: None,
                    now,
                    schedule_id: Some(schedule.id),
                })
                .await?;
                // A fire may have moved earlier: running tickers recompute when to wake.
                tx.notify_on_commit(Channel::Schedules);
                changed.push(Rezoned {
                    schedule_id: schedule.id,
                    env_id,
                    timezone: timezone.clone(),
                    old_next_run_at: old,
                    new_next_run_at: new,
                });
            }
        }
        tx.commit().await?;
    }
    // Logged after the commits, so every line is a change that happened.
    for moved in &changed {
        tracing::warn!(
            schedule_id = %moved.schedule_id,
            env_id = %moved.env_id,
            timezone = moved.timezone,
            old = %moved.old_next_run_at.to_rfc3339(),
            new = %moved.new_next_run_at.to_rfc3339(),
            "next fire recomputed under the time-zone rules in use"
        );
    }
    Ok(changed)
}

/// The fire under the rules in use nearest to `stored` (a fire computed under other rules),
/// within [`RULE_SHIFT_WINDOW`] either side; `None` when there is none. On a tie the earlier
/// one wins, so a fire never moves later than it must.
fn same_occurrence<E>(
    next_after: impl Fn(DateTime<Utc>) -> Result<Option<DateTime<Utc>>, E>,
    stored: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let mut best: Option<DateTime<Utc>> = None;
    let mut after = stored - RULE_SHIFT_WINDOW - Duration::seconds(1);
    for _ in 0..MAX_CANDIDATES {
        let Ok(Some(fire)) = next_after(after) else {
            break;
        };
        if fire > stored + RULE_SHIFT_WINDOW {
            break;
        }
        let closer = best.is_none_or(|b| (fire - stored).abs() < (b - stored).abs());
        if closer {
            best = Some(fire);
        }
        if fire >= stored {
            // Later fires are only further away.
            break;
        }
        after = fire;
    }
    best
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::core::cron::{OnDstGap, OnDstRepeat};
    use crate::core::timing::{CronTiming, Timing};

    fn timing(expression: &str, zone: &str) -> Timing {
        Timing::Cron(CronTiming::from_stored(
            expression,
            zone,
            OnDstGap::Shift,
            OnDstRepeat::Once,
        ))
    }

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
    }

    // 10:00 in Berlin in January is 09:00Z under the rules in use. The stored instants below
    // are what other rules (one hour off either way) would have computed for that occurrence.

    #[test]
    fn an_occurrence_stored_under_other_rules_maps_to_the_same_wall_time() {
        let berlin = timing("0 10 * * *", "Europe/Berlin");
        // Stored an hour late (old rules +0): the same morning, not the next day.
        assert_eq!(
            same_occurrence(|t| berlin.next_after(t), utc(2030, 1, 15, 10, 0)),
            Some(utc(2030, 1, 15, 9, 0))
        );
        // Stored an hour early (old rules +2): the same morning, not an earlier day.
        assert_eq!(
            same_occurrence(|t| berlin.next_after(t), utc(2030, 1, 15, 8, 0)),
            Some(utc(2030, 1, 15, 9, 0))
        );
        // Already right: unchanged.
        assert_eq!(
            same_occurrence(|t| berlin.next_after(t), utc(2030, 1, 15, 9, 0)),
            Some(utc(2030, 1, 15, 9, 0))
        );
    }

    #[test]
    fn a_moved_fire_is_neither_skipped_nor_repeated() {
        let berlin = timing("0 10 * * *", "Europe/Berlin");
        // Skip: stored 10:00Z, restart at 09:30Z. The next fire after now would be tomorrow;
        // the same occurrence is 09:00Z today, which becomes due now (late, not lost).
        let now = utc(2030, 1, 15, 9, 30);
        assert_eq!(
            berlin.next_after(now).unwrap(),
            Some(utc(2030, 1, 16, 9, 0))
        );
        let moved = same_occurrence(|t| berlin.next_after(t), utc(2030, 1, 15, 10, 0))
            .map(|at| at.max(now));
        assert_eq!(moved, Some(now));
        // Repeat: today's occurrence ran at 08:00Z under the old rules, so the stored fire is
        // tomorrow's (08:00Z). The next fire after now would be 09:00Z today, a second run of
        // today's occurrence; the same occurrence is tomorrow's.
        let now = utc(2030, 1, 15, 8, 30);
        assert_eq!(
            berlin.next_after(now).unwrap(),
            Some(utc(2030, 1, 15, 9, 0))
        );
        assert_eq!(
            same_occurrence(|t| berlin.next_after(t), utc(2030, 1, 16, 8, 0)),
            Some(utc(2030, 1, 16, 9, 0))
        );
    }

    #[test]
    fn frequent_expressions_keep_their_aligned_fires() {
        let every_minute = timing("* * * * *", "Europe/Berlin");
        let stored = utc(2030, 1, 15, 10, 7);
        assert_eq!(
            same_occurrence(|t| every_minute.next_after(t), stored),
            Some(stored)
        );
        // Nothing within the window: the caller falls back to the next fire after now.
        let yearly = timing("0 10 1 7 *", "Europe/Berlin");
        assert_eq!(
            same_occurrence(|t| yearly.next_after(t), utc(2030, 1, 15, 10, 0)),
            None
        );
    }
}
