//! Next fires recomputed under the time-zone rules this process uses.
//!
//! A schedule's `next_run_at` is computed when it is created, claimed or resumed, with the
//! zone rules of the process doing it. When a process starts with a newer tz database (a
//! government moved its clocks), the stored instants of future fires may be stale. At
//! start-up, before the first tick, every active cron schedule whose next fire is still in
//! the future is evaluated again from now; where the answer differs it is stored, each
//! environment in one tenant transaction with the rows locked, with an audit entry per moved
//! fire (`schedule.rezone`). Due schedules are left to the
//! ticker, so nothing is skipped or fired twice. Schedules in UTC cannot change and are not
//! read.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use serde_json::json;

use crate::core::clock::Clock;
use crate::core::cron::{parse_timezone, tzdb};
use crate::core::model::{EnvId, ScheduleId};
use crate::core::store::{Channel, NewAudit, ScheduleSetNextRun, Store, StoreResult};

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
                let new = match schedule.timing.next_after(now) {
                    Ok(Some(new)) => new,
                    // An expression that no longer parses, or no fire left under the new
                    // rules: the ticker deals with it when the stored instant comes.
                    Ok(None) | Err(_) => continue,
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
                let database = tzdb::database();
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
