//! Claiming ahead (the `serve` loop): a fire is claimed before its instant and called at it,
//! never before; a schedule paused, deleted or re-timed in between is not called, and the
//! withdrawn fire is on the record; a new payload goes out with the call.

use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::Duration;
use futures_util::FutureExt;
use sentin8_cron::core::clock::Clock;
use sentin8_cron::core::engine::EngineConfig;
use sentin8_cron::core::model::*;
use sentin8_cron::core::ops::SchedulePatch;
use sentin8_cron::core::store::*;
use serde_json::json;

use super::faulty::FaultyStore;
use super::{Harness, cron, settled_until, until};
use crate::raw_http::Reply;

/// A job timeout of 4 s gives a 9 s lease, so the lead is 4.5 s.
pub(super) fn ahead_config() -> EngineConfig {
    EngineConfig {
        job_timeout: StdDuration::from_secs(4),
        claim_ahead: StdDuration::from_secs(10),
        ..EngineConfig::default()
    }
}

/// Runs the serve loop beside `scenario`, stopping it when the scenario ends.
pub(super) async fn serving<Fut: std::future::Future<Output = ()>>(h: &Harness, scenario: Fut) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serve = h.engine.run(async {
        let _ = stopped.await;
    });
    let scenario = async {
        scenario.await;
        let _ = stop.send(());
    };
    tokio::join!(serve, scenario);
}

/// Runs the serve loop while the clock moves from now to `end` in steps of 250 ms, each step
/// settled: until the engine has nothing to do but wait (`beside_calls`: but wait for its
/// calls in flight too, for scenarios with a hanging call).
pub(super) async fn serve_through(
    h: &Harness,
    end: chrono::DateTime<chrono::Utc>,
    beside_calls: bool,
) {
    serving(h, async {
        let mut at = h.now();
        while at < end {
            at += Duration::milliseconds(250);
            h.clock.set(at);
            if beside_calls {
                h.engine.settled_beside_calls().await;
            } else {
                h.engine.settled().await;
            }
        }
    })
    .await;
}

/// Waits until the schedule's call arrives and its outcome is recorded.
pub(super) async fn called_and_recorded(h: &Harness, id: ScheduleId) {
    settled_until(&h.engine, "the call arrives", || async {
        !h.target.requests().is_empty()
    })
    .await;
    settled_until(&h.engine, "the outcome is recorded", || async {
        h.jobs(id).await[0].status == JobStatus::Succeeded
    })
    .await;
}

/// Asserts one job and one call for the schedule, the job started at its instant (handed off);
/// returns the jobs.
async fn called_once_from_its_instant(
    h: &Harness,
    id: ScheduleId,
    due: chrono::DateTime<chrono::Utc>,
) -> Vec<Job> {
    let jobs = h.jobs(id).await;
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(
        jobs[0].started_at,
        Some(due),
        "handed off, it starts at its instant"
    );
    assert_eq!(h.target.requests().len(), 1);
    jobs
}

/// The schedule's fire claimed ahead and not handed off yet.
pub(super) async fn scheduled_job(h: &Harness, id: ScheduleId) -> Option<Job> {
    h.jobs(id)
        .await
        .into_iter()
        .find(|j| j.status == JobStatus::Scheduled)
}

pub async fn a_fire_claimed_ahead_is_called_at_its_instant_not_before(store: Arc<dyn Store>) {
    let h = Harness::with_config(store, ahead_config()).await;
    let s = h.create(cron("*/5 * * * *", 3)).await;
    let due = s.next_run_at.unwrap();
    h.clock.set(due - Duration::seconds(3));
    serving(&h, async {
        settled_until(&h.engine, "the fire is claimed ahead", || async {
            scheduled_job(&h, s.id).await.is_some()
        })
        .await;
        let job = scheduled_job(&h, s.id).await.unwrap();
        assert_eq!(job.scheduled_for, due);
        assert_eq!(
            (job.attempt, job.started_at),
            (1, None),
            "held: not handed off for its call yet"
        );
        assert_eq!(
            h.store.wakeup_next().await.unwrap(),
            Some(due + Duration::seconds(2)),
            "its claim lease lapses two seconds past its instant"
        );
        let claimed = h.schedule(s.id).await;
        assert_eq!(
            claimed.next_run_at,
            Some(due + Duration::minutes(5)),
            "the claim advanced the schedule past the held occurrence"
        );
        assert_eq!(claimed.last_run_at, None, "not run yet: only claimed");
        // Held for its instant: with the clock a moment before it, the engine settles without
        // a call.
        h.clock.set(due - Duration::milliseconds(1));
        h.engine.settled().await;
        assert!(h.target.requests().is_empty(), "called before its instant");
        h.clock.set(due);
        called_and_recorded(&h, s.id).await;
    })
    .await;
    let jobs = called_once_from_its_instant(&h, s.id, due).await;
    assert_eq!(h.target.requests()[0].json()["job_id"], json!(jobs[0].id));
    assert_eq!(
        h.schedule(s.id).await.last_run_at,
        Some(due),
        "its call's instant"
    );
    let metrics = h.engine.metrics().render(None);
    assert!(
        metrics.contains("sentin8_cron_fires_total 1\n"),
        "{metrics}"
    );
}

pub async fn a_schedule_paused_before_its_claimed_instant_is_not_called(store: Arc<dyn Store>) {
    let h = Harness::with_config(store, ahead_config()).await;
    let paused = h.create(cron("*/5 * * * *", 3)).await;
    let deleted = h.create(cron("*/5 * * * *", 3)).await;
    let retimed = h.create(cron("*/5 * * * *", 3)).await;
    let kept = h.create(cron("*/5 * * * *", 3)).await;
    // Paused under the operations' feet (straight in the store, as another tool might): the
    // engine's own read at the instant withdraws it.
    let raw = h.create(cron("*/5 * * * *", 3)).await;
    let due = kept.next_run_at.unwrap();
    h.clock.set(due - Duration::seconds(3));
    serving(&h, async {
        for s in [&paused, &deleted, &retimed, &kept, &raw] {
            settled_until(&h.engine, "every fire is claimed ahead", || async {
                scheduled_job(&h, s.id).await.is_some()
            })
            .await;
        }
        // The changes come a little after the claims.
        h.clock.set(due - Duration::milliseconds(2900));
        let actor = h.actor();
        // Each change withdraws the held fire in its own transaction, at once.
        let withdrawn_now = |id: ScheduleId| {
            let h = &h;
            async move {
                let jobs = h.jobs(id).await;
                assert_eq!(jobs.len(), 1, "{jobs:?}");
                assert_eq!(jobs[0].status, JobStatus::Skipped, "{jobs:?}");
            }
        };
        h.ops
            .schedule_pause(h.env, paused.id, &actor, None)
            .await
            .unwrap();
        withdrawn_now(paused.id).await;
        h.ops
            .schedule_delete(h.env, deleted.id, &actor)
            .await
            .unwrap();
        withdrawn_now(deleted.id).await;
        // The same expression again: the timing is re-applied, so the occurrence is pending
        // once more and the new definition fires it.
        let retime = SchedulePatch {
            cron: Some("*/5 * * * *".into()),
            ..SchedulePatch::default()
        };
        h.ops
            .schedule_patch(h.env, retimed.id, retime, &actor)
            .await
            .unwrap();
        assert_eq!(h.jobs(retimed.id).await[0].status, JobStatus::Skipped);
        let new_payload = SchedulePatch {
            payload: Some(json!({"report": "weekly"})),
            ..SchedulePatch::default()
        };
        h.ops
            .schedule_patch(h.env, kept.id, new_payload, &actor)
            .await
            .unwrap();
        let mut tx = h.store.tenant_begin(h.env).await.unwrap();
        tx.schedule_set_status(&ScheduleSetStatus {
            id: raw.id,
            status: ScheduleStatus::Paused,
            now: h.now(),
        })
        .await
        .unwrap();
        tx.commit().await.unwrap();
        // Neither the payload change nor the pause that bypassed the operations withdrew
        // anything: the engine's hand-off decides those.
        assert!(scheduled_job(&h, kept.id).await.is_some());
        assert!(scheduled_job(&h, raw.id).await.is_some());
        h.clock.set(due);
        settled_until(
            &h.engine,
            "the kept and the re-timed schedules are called",
            || async { h.target.requests().len() >= 2 },
        )
        .await;
        settled_until(
            &h.engine,
            "both are recorded, and the raw pause withdrawn",
            || async {
                h.jobs(kept.id).await[0].status == JobStatus::Succeeded
                    && h.jobs(retimed.id)
                        .await
                        .iter()
                        .any(|j| j.status == JobStatus::Succeeded)
                    && h.jobs(raw.id).await[0].status == JobStatus::Skipped
            },
        )
        .await;
    })
    .await;

    let calls = h.target.requests();
    let called: Vec<_> = calls
        .iter()
        .map(|c| c.json()["schedule_id"].clone())
        .collect();
    assert_eq!(calls.len(), 2, "{called:?}");
    assert!(called.contains(&json!(kept.id)) && called.contains(&json!(retimed.id)));
    let kept_call = calls
        .iter()
        .find(|c| c.json()["schedule_id"] == json!(kept.id))
        .unwrap();
    assert_eq!(
        kept_call.json()["payload"],
        json!({"report": "weekly"}),
        "the call carries the schedule as it is at the instant"
    );

    for (s, says) in [
        (&paused, "became paused"),
        (&deleted, "became deleted"),
        (&retimed, "timing changed"),
        (&raw, "became paused"),
    ] {
        let jobs = h.jobs(s.id).await;
        let withdrawn = &jobs[0];
        assert_eq!(withdrawn.status, JobStatus::Skipped, "{jobs:?}");
        assert_eq!(withdrawn.scheduled_for, due);
        assert!(withdrawn.started_at.is_none());
        let error = withdrawn.error.as_deref().unwrap_or_default();
        assert!(error.contains(says), "{error}");
    }
    // The re-timed schedule fired its occurrence under the new definition: one skipped record
    // and one call, never two calls.
    let retimed_jobs = h.jobs(retimed.id).await;
    assert_eq!(retimed_jobs.len(), 2, "{retimed_jobs:?}");
    assert_eq!(retimed_jobs[1].scheduled_for, due);

    // Each withdrawal wrote its event.
    let mut tx = h.store.tenant_begin(h.env).await.unwrap();
    let events = tx.outbox_list(0, 1000).await.unwrap();
    drop(tx);
    let skipped: Vec<_> = events
        .iter()
        .filter(|e| e.event_type == "io.sentin8.cron.job.skipped.v1")
        .filter_map(|e| e.schedule_id)
        .collect();
    for s in [&paused, &deleted, &retimed, &raw] {
        assert!(skipped.contains(&s.id), "no skipped event for {}", s.id);
    }
    assert!(h.clock.now() >= due);
}

pub async fn an_open_job_does_not_skip_a_fire_claimed_ahead(store: Arc<dyn Store>) {
    let h = Harness::with_config(store, ahead_config()).await;
    let s = h.create(cron("*/5 * * * *", 3)).await;
    let due = s.next_run_at.unwrap();
    h.clock.set(due - Duration::seconds(3));
    // A run triggered a second before the instant is still in flight when the occurrence
    // comes within the lead; it ends before the instant.
    h.reply([Reply::After(
        StdDuration::from_millis(600),
        Box::new(Reply::json(200, json!({"ok": true}))),
    )]);
    let triggered = h
        .ops
        .schedule_trigger(h.env, s.id, &h.actor())
        .await
        .unwrap();
    serving(&h, async {
        settled_until(&h.engine, "the triggered run succeeds", || async {
            h.jobs(s.id).await[0].status == JobStatus::Succeeded
        })
        .await;
        h.clock.set(due);
        settled_until(&h.engine, "the occurrence is called", || async {
            h.target.requests().len() == 2
        })
        .await;
        settled_until(&h.engine, "and recorded", || async {
            h.jobs(s.id).await.len() == 2 && h.jobs(s.id).await[1].status == JobStatus::Succeeded
        })
        .await;
    })
    .await;
    let jobs = h.jobs(s.id).await;
    assert_eq!(jobs[0].id, triggered.id);
    let statuses: Vec<_> = jobs.iter().map(|j| j.status).collect();
    assert_eq!(
        statuses,
        [JobStatus::Succeeded, JobStatus::Succeeded],
        "the occurrence was not skipped for a run that ended before it: {jobs:?}"
    );
    assert_eq!(jobs[1].scheduled_for, due);
}

/// Another instance claimed a fire ahead and stopped before handing it off: the fire is
/// released and called within three seconds of its instant (its claim lease, not the call
/// lease), as its first attempt, and never recorded as a failed one.
pub async fn a_fire_held_by_a_stopped_instance_is_released_not_failed(store: Arc<dyn Store>) {
    let h = Harness::with_config(store, ahead_config()).await;
    // No retries allowed: recorded as a failed attempt, it would be dead-lettered uncalled.
    let s = h.create(cron("*/5 * * * *", 0)).await;
    let due = s.next_run_at.unwrap();
    // Another instance claimed the fire ahead (as the engine does: `scheduled`, its claim
    // lease two seconds past the instant), then stopped.
    let claimed_at = due - Duration::seconds(5);
    let held = h
        .claimed_elsewhere(
            &s,
            due,
            due + Duration::minutes(5),
            NewJob::scheduled(
                s.id,
                due,
                due + Duration::from_std(sentin8_cron::core::engine::CLAIM_LEASE_PAST_INSTANT)
                    .unwrap(),
                claimed_at,
            ),
        )
        .await;

    // Still claimed by its instance a second past the instant.
    let early = h.tick_at(due + Duration::seconds(1)).await;
    assert_eq!(early.retried_attempts, 0, "{early:?}");
    assert_eq!(h.jobs(s.id).await[0].status, JobStatus::Scheduled);

    let found = h.tick_at(due + Duration::milliseconds(2100)).await;
    assert_eq!(
        (found.failed, found.dead_lettered),
        (0, 0),
        "never called, so not a failed attempt: {found:?}"
    );
    let released = h.jobs(s.id).await;
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].id, held.id);
    assert_eq!(
        (released[0].status, released[0].attempt),
        (JobStatus::Pending, 0)
    );

    let ran = h.tick_at(due + Duration::milliseconds(2200)).await;
    assert_eq!((ran.retried_attempts, ran.succeeded), (1, 1), "{ran:?}");
    let calls = h.target.requests();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].json()["attempt"], 1, "its first attempt");
    assert_eq!(calls[0].json()["job_id"], json!(held.id));
    let mut tx = h.store.tenant_begin(h.env).await.unwrap();
    let attempts = tx.job_attempts_list(held.id).await.unwrap();
    drop(tx);
    assert_eq!(attempts.len(), 1, "one attempt, the call: {attempts:?}");
    assert!(h.dlq().await.is_empty());
}

/// A claim that chose to hold a fire (its instant still to come) but reached the database after
/// the instant: the fire is still handed off and called once, not left with a start no hand-off
/// can take (uncalled until its lease ran out).
pub async fn a_fire_held_by_a_claim_that_crosses_its_instant_is_called_once(store: Arc<dyn Store>) {
    let faulty = FaultyStore::new(store);
    let h = Harness::with_config(faulty.clone(), ahead_config()).await;
    let s = h.create(cron("*/5 * * * *", 3)).await;
    let due = s.next_run_at.unwrap();
    h.clock.set(due - Duration::seconds(3));
    let clock = h.clock.clone();
    faulty.when_claim_locks(move || clock.set(due + Duration::milliseconds(10)));
    serving(&h, async {
        called_and_recorded(&h, s.id).await;
    })
    .await;
    called_once_from_its_instant(&h, s.id, due).await;
}

/// Two instances claiming ahead share a small burst: each claims about its half of the forty
/// fires due at one instant (by a hash of the schedule), both make calls, and every fire is
/// called once.
pub async fn two_instances_share_a_small_burst(store: Arc<dyn Store>) {
    use std::sync::atomic::Ordering;

    let h = Harness::with_config(store, ahead_config()).await;
    let mut ids = Vec::new();
    for _ in 0..40 {
        ids.push(h.create(cron("*/5 * * * *", 3)).await.id);
    }
    let due = h.schedule(ids[0]).await.next_run_at.unwrap();
    let other = h.another_instance(ahead_config());
    // Nothing within the lead yet while the instances learn of each other.
    h.clock.set(due - Duration::seconds(60));
    let alive = |probe: uuid::Uuid| {
        let store = h.store.clone();
        let now = h.clock.now();
        async move {
            let alive = store
                .instance_beat(probe, now, now - Duration::seconds(10))
                .await
                .unwrap();
            store.instance_leave(probe).await.unwrap();
            alive.len() - 1
        }
    };
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let stopped_too = stopped.clone();
    let serve_other = other.run(async move {
        let mut stopped = stopped_too;
        let _ = stopped.wait_for(|s| *s).await;
    });
    let scenario = async {
        until("the other instance beats", || {
            alive(uuid::Uuid::new_v4()).then(|n| async move { n == 1 })
        })
        .await;
        serving(&h, async {
            until("both instances beat", || {
                alive(uuid::Uuid::new_v4()).then(|n| async move { n == 2 })
            })
            .await;
            // Each has beaten since the other came: each claims its share only.
            until("each instance knows of the other", || async {
                h.engine.instances_sharing() == 2 && other.instances_sharing() == 2
            })
            .await;
            h.clock.set(due - Duration::seconds(3));
            for _ in 0..2 {
                h.store.signals().ring(Channel::Schedules);
            }
            until("every fire is claimed ahead", || async {
                let mut all = true;
                for id in &ids {
                    all &= scheduled_job(&h, *id).await.is_some();
                }
                all
            })
            .await;
            h.clock.set(due);
            until("every fire is called and recorded", || async {
                let mut all = h.target.requests().len() >= 40;
                for id in &ids {
                    all &= h.jobs(*id).await[0].status == JobStatus::Succeeded;
                }
                all
            })
            .await;
        })
        .await;
        let _ = stop.send(true);
    };
    tokio::join!(serve_other, scenario);
    drop(stopped);

    let fired = [&h.engine, &other].map(|e| e.metrics().fires.load(Ordering::Relaxed));
    assert_eq!(fired[0] + fired[1], 40, "{fired:?}");
    assert!(
        fired[0] > 0 && fired[1] > 0,
        "both instances call: {fired:?}"
    );
    let mut called: Vec<String> = h
        .target
        .requests()
        .iter()
        .map(|r| r.json()["job_id"].to_string())
        .collect();
    called.sort();
    called.dedup();
    assert_eq!(called.len(), 40, "each fire called once");
    for id in &ids {
        let jobs = h.jobs(*id).await;
        assert_eq!(jobs.len(), 1, "{jobs:?}");
        assert_eq!(
            jobs[0].started_at,
            Some(due),
            "handed off, called at its instant"
        );
    }
}

/// A trigger made while a round runs, after the round read what is due, is not lost: its
/// signal starts another round once that one ends, instead of waiting out the safety interval.
pub async fn a_change_while_a_round_runs_starts_another_round(store: Arc<dyn Store>) {
    let faulty = FaultyStore::new(store);
    let h = Harness::new(faulty.clone()).await;
    let s = h.create(cron("0 0 1 1 *", 0)).await;
    serving(&h, async {
        h.engine.settled().await;
        faulty.hold_wakeup(true);
        let before = faulty.wakeups();
        // A change starts a round; the answer of its last read is held.
        h.create(cron("0 0 1 1 *", 0)).await;
        until("a round read its wake-up", || async {
            faulty.wakeups() > before
        })
        .await;
        h.ops
            .schedule_trigger(h.env, s.id, &h.actor())
            .await
            .unwrap();
        faulty.hold_wakeup(false);
        // Nothing moves the clock: the run is taken by a round the trigger asked for.
        h.engine.settled().await;
        assert_eq!(
            h.target.requests().len(),
            1,
            "the triggered run waited for the next safety round"
        );
    })
    .await;
}

/// A hand-off whose commit landed but whose answer was lost (the connection or the primary went
/// away in between) is tried again and takes back its own fire: called once, as its first
/// attempt, not left `running` uncalled until its call lease lapses.
pub async fn a_hand_off_whose_answer_was_lost_is_taken_back(store: Arc<dyn Store>) {
    let faulty = FaultyStore::new(store);
    let h = Harness::with_config(faulty.clone(), ahead_config()).await;
    let s = h.create(cron("*/5 * * * *", 3)).await;
    let due = s.next_run_at.unwrap();
    faulty.lose_hand_off_answers(1);
    h.clock.set(due - Duration::seconds(3));
    serving(&h, async {
        settled_until(&h.engine, "the fire is claimed ahead", || async {
            !h.jobs(s.id).await.is_empty()
        })
        .await;
        // Within the hand-off's second before the instant.
        h.clock.set(due - Duration::milliseconds(500));
        settled_until(&h.engine, "the fire is handed off", || async {
            h.jobs(s.id)
                .await
                .first()
                .is_some_and(|j| j.status == JobStatus::Running)
        })
        .await;
        h.clock.set(due);
        called_and_recorded(&h, s.id).await;
    })
    .await;
    let jobs = called_once_from_its_instant(&h, s.id, due).await;
    assert_eq!(jobs[0].attempt, 1);
    assert_eq!(h.target.requests()[0].json()["attempt"], 1);
}
