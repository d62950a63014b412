//! The pipeline under trouble: a record held up, hanging targets beside healthy ones, a
//! database outage, and the per-origin circuit breaker.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Utc};
use sentin8_cron::core::breaker::BreakerConfig;
use sentin8_cron::core::engine::EngineConfig;
use sentin8_cron::core::model::*;
use sentin8_cron::core::retry::RetryPolicy;
use sentin8_cron::core::store::*;
use serde_json::json;

use super::{FaultyStore, Harness, cron};
use crate::raw_http::{RawServer, Reply};
use crate::support::t0;

fn minute(m: i64) -> DateTime<Utc> {
    t0() + Duration::minutes(m)
}

pub async fn a_slow_record_never_turns_answers_into_timeouts(store: Arc<dyn Store>) {
    let faulty = FaultyStore::new(store);
    let config = EngineConfig {
        job_timeout: StdDuration::from_millis(800),
        ..EngineConfig::default()
    };
    let h = Harness::with_config(faulty.clone(), config).await;
    let mut ids = Vec::new();
    for _ in 0..10 {
        ids.push(h.create(cron("* * * * *", 3)).await.id);
    }
    // The target answers every call in 200 ms, well within the job timeout...
    h.reply((0..10).map(|_| {
        Reply::After(
            StdDuration::from_millis(200),
            Box::new(Reply::json(200, json!({"ok": true}))),
        )
    }));
    // ...while recording is held up for three times the job timeout: once every call is
    // answered, the clock moves 2.4 s on with the records still held.
    faulty.hold_tenant_transactions(true);
    let release = async {
        super::until("every call is answered", || async {
            h.engine
                .metrics()
                .render(None)
                .contains("sentin8_cron_job_successes_total 10\n")
        })
        .await;
        h.clock.advance(Duration::milliseconds(2400));
        faulty.hold_tenant_transactions(false);
    };
    let (summary, ()) = tokio::join!(h.tick_at(minute(1)), release);
    assert_eq!(
        (summary.fired, summary.succeeded, summary.failed),
        (10, 10, 0),
        "{summary:?}"
    );
    for id in &ids {
        let jobs = h.jobs(*id).await;
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].status, JobStatus::Succeeded, "{:?}", jobs[0].error);
    }
    // Nothing is retried: each call was delivered exactly once.
    let again = h.tick_at(minute(1) + Duration::seconds(59)).await;
    assert_eq!((again.fired, again.retried_attempts), (0, 0));
    assert_eq!(h.target.requests().len(), 10);
}

pub async fn an_outcome_is_recorded_after_the_database_comes_back(store: Arc<dyn Store>) {
    let faulty = FaultyStore::new(store);
    // A lease shorter than the outage: the answers must be kept however long it lasts.
    let config = EngineConfig {
        lease: StdDuration::from_secs(1),
        ..EngineConfig::default()
    };
    let h = Harness::with_config(faulty.clone(), config).await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(h.create(cron("* * * * *", 3)).await.id);
    }
    h.reply((0..5).map(|_| {
        Reply::After(
            StdDuration::from_millis(300),
            Box::new(Reply::json(200, json!({"ok": true}))),
        )
    }));
    // The calls are out; then recording fails for a while (the database went away): a record
    // is refused, and the clock moves 2.5 s on, over two leases, before the database is back.
    // The answers were written ahead (outside the tenant transactions refused), so their
    // leases need no renewal: whoever took them over would record the answers.
    let outage = async {
        h.target.arrived(5).await;
        faulty.refuse_tenant_transactions(true);
        let refused = faulty.refused();
        super::until("a record is refused", || async {
            faulty.refused() > refused
        })
        .await;
        for _ in 0..5 {
            let refused = faulty.refused();
            h.clock.advance(Duration::milliseconds(500));
            super::until("the record is tried again", || async {
                faulty.refused() > refused
            })
            .await;
        }
        faulty.refuse_tenant_transactions(false);
    };
    let (summary, ()) = tokio::join!(h.tick_at(minute(1)), outage);
    // The answers were kept and recorded once the database answered again: nothing is
    // retried, nothing delivered twice.
    assert_eq!((summary.succeeded, summary.failed), (5, 0), "{summary:?}");
    for id in &ids {
        assert_eq!(h.jobs(*id).await[0].status, JobStatus::Succeeded);
    }
    // Past every lease, nothing is left to recover and call again.
    let later = h.tick_at(minute(1) + Duration::seconds(30)).await;
    assert_eq!((later.fired, later.retried_attempts), (0, 0), "{later:?}");
    assert_eq!(h.target.requests().len(), 5);
}

/// The instants a schedule's records cover: each job's occurrence, and every occurrence of a
/// run of missed ones (every-minute schedules, so a run covers each minute in it).
fn covered(jobs: &[Job]) -> BTreeSet<DateTime<Utc>> {
    let mut at = BTreeSet::new();
    for job in jobs {
        at.insert(job.scheduled_for);
        if let Some(missed) = job.missed {
            let mut t = missed.first;
            while t <= missed.last {
                at.insert(t);
                t += Duration::minutes(1);
            }
        }
    }
    at
}

pub async fn hanging_targets_cost_their_own_tenant_and_every_occurrence_is_recorded(
    store: Arc<dyn Store>,
) {
    // No hanging call ends by itself while the test looks (the harness's longest timeout):
    // the target is closed instead, once the healthy calls are all out.
    let job_timeout = StdDuration::from_secs(5);
    let config = EngineConfig {
        job_timeout,
        concurrency: 32,
        env_concurrency: 8,
        ..EngineConfig::default()
    };
    let h = Harness::with_config(store, config).await;
    let hanging = RawServer::start(|_| Reply::Hang).await;
    let hanging_url = hanging.url();
    let mut hanging = Some(hanging);
    let noisy = EnvId::new();
    let mut hung = Vec::new();
    for _ in 0..40 {
        hung.push(
            h.create_in(noisy, &hanging_url, cron("* * * * *", 5))
                .await
                .id,
        );
    }
    // As many healthy schedules as their environment's cap: all of them go out in the first
    // round, beside the hanging tenant's first eight.
    let mut healthy = Vec::new();
    for _ in 0..8 {
        healthy.push(h.create(cron("* * * * *", 5)).await.id);
    }
    // All 8 healthy calls arrive while the hanging calls are still out: none of the healthy
    // ones waited for a slot the hanging tenant held (no hanging call has ended yet). Then the
    // hanging target closes its connections, so the rest of the noisy tenant's calls fail.
    let watch = async {
        h.target.arrived(8).await;
        let out = hanging.as_ref().map_or(0, |t| t.requests().len());
        let ended = h.engine.metrics().failures.load(Ordering::Relaxed);
        drop(hanging.take());
        (out, ended)
    };
    let (summary, (hanging_out, ended)) = tokio::join!(h.tick_at(minute(1)), watch);
    assert_eq!(summary.errors, 0, "minute 1: {summary:?}");
    assert!(hanging_out >= 1, "the hanging calls went out beside them");
    assert_eq!(
        ended, 0,
        "a hanging call ended before the healthy calls had all arrived"
    );
    for m in 2..=3 {
        let summary = h.tick_at(minute(m)).await;
        assert_eq!(summary.errors, 0, "minute {m}: {summary:?}");
    }
    // Every healthy fire was made at the tick that found it due, and answered.
    for id in &healthy {
        let jobs = h.jobs(*id).await;
        let fired: Vec<_> = jobs
            .iter()
            .map(|j| (j.scheduled_for, j.started_at, j.status))
            .collect();
        let expected: Vec<_> = (1..=3)
            .map(|m| (minute(m), Some(minute(m)), JobStatus::Succeeded))
            .collect();
        assert_eq!(fired, expected);
    }
    assert_eq!(h.target.requests().len(), 24);
    // Every occurrence of every hanging schedule has a job or a skipped record.
    for id in &hung {
        let jobs = h.jobs_in(noisy, *id).await;
        let at = covered(&jobs);
        for m in 1..=3 {
            assert!(
                at.contains(&minute(m)),
                "minute {m} of {id} left no record: {jobs:?}"
            );
        }
    }
}

pub async fn a_database_outage_is_recorded_as_missed_occurrences(store: Arc<dyn Store>) {
    let faulty = FaultyStore::new(store);
    let h = Harness::with_config(faulty.clone(), EngineConfig::default()).await;
    let s = h.create(cron("* * * * *", 3)).await;
    assert_eq!(h.tick_at(minute(1)).await.fired, 1);
    // The database is unreachable for three and a half minutes.
    faulty.set_down(true);
    for m in 2..=4 {
        h.clock.set(minute(m));
        assert!(h.engine.tick().await.is_err());
    }
    faulty.set_down(false);
    let summary = h.tick_at(minute(4) + Duration::seconds(30)).await;
    assert_eq!((summary.fired, summary.skipped), (1, 1), "{summary:?}");
    let mut jobs = h.jobs(s.id).await;
    jobs.sort_by_key(|j| j.scheduled_for);
    let shape: Vec<_> = jobs.iter().map(|j| (j.scheduled_for, j.status)).collect();
    assert_eq!(
        shape,
        vec![
            (minute(1), JobStatus::Succeeded),
            // The ones nobody could fire, from the stored next fire on, in one record; then
            // the latest, late, once.
            (minute(2), JobStatus::Skipped),
            (minute(4), JobStatus::Succeeded),
        ]
    );
    assert_eq!(
        jobs[1].missed,
        Some(MissedOccurrences {
            first: minute(2),
            last: minute(3),
            count: 2,
        })
    );
    let skipped_events = h
        .event_types()
        .await
        .into_iter()
        .filter(|t| t == sentin8_cron::core::events::JOB_SKIPPED)
        .count();
    assert_eq!(skipped_events, 1);
    let metrics = h.engine.metrics().render(None);
    assert!(
        metrics.contains("sentin8_cron_fires_skipped_total 1\n"),
        "{metrics}"
    );
    assert_eq!(
        h.schedule(s.id).await.next_run_at,
        Some(minute(5)),
        "no catch-up storm"
    );
}

pub async fn the_breaker_fails_fast_and_a_good_probe_closes_it(store: Arc<dyn Store>) {
    // Generous margins under load: the hanging calls time out after 3 s, the probe answers
    // in 1 s (well within the timeout, and long enough to still be out when the other retry
    // is admitted).
    let config = EngineConfig {
        job_timeout: StdDuration::from_secs(3),
        breaker: BreakerConfig {
            threshold: 2,
            cooldown: StdDuration::from_secs(90),
        },
        retry: RetryPolicy {
            base: StdDuration::from_secs(60),
            cap: StdDuration::from_secs(60),
        },
        ..EngineConfig::default()
    };
    let h = Harness::with_config(store, config).await;
    let a = h.create(cron("* * * * *", 5)).await;
    let b = h.create(cron("* * * * *", 5)).await;
    // The origin hangs for the first two calls, then answers (the first answer takes a
    // moment, so the probe is still out when the other retry is due).
    h.reply([
        Reply::Hang,
        Reply::Hang,
        Reply::After(
            StdDuration::from_secs(1),
            Box::new(Reply::json(200, json!({"ok": true}))),
        ),
    ]);
    let first = h.tick_at(minute(1)).await;
    assert_eq!((first.failed, first.retried), (2, 2), "{first:?}");
    assert_eq!(h.target.requests().len(), 2);

    // Two timeouts in a row opened the circuit: the retries fail fast, no call is made.
    let open = h.tick_at(minute(2)).await;
    assert_eq!((open.retried_attempts, open.failed), (2, 2), "{open:?}");
    assert_eq!(h.target.requests().len(), 2);
    for id in [a.id, b.id] {
        let job = h
            .jobs(id)
            .await
            .into_iter()
            .find(|j| j.status == JobStatus::Pending)
            .unwrap();
        assert!(
            job.error.as_deref().unwrap().starts_with("circuit open"),
            "{:?}",
            job.error
        );
    }

    // After the cool-down exactly one probe goes out; it succeeds and closes the circuit.
    let probe = h.tick_at(minute(3)).await;
    assert_eq!((probe.succeeded, probe.failed), (1, 1), "{probe:?}");
    assert_eq!(h.target.requests().len(), 3);
    let closed = h.tick_at(minute(4)).await;
    assert_eq!((closed.succeeded, closed.failed), (2, 0), "{closed:?}");
    assert_eq!(h.target.requests().len(), 5);
}

pub async fn one_tenants_open_circuit_leaves_other_tenants_calls_alone(store: Arc<dyn Store>) {
    let config = EngineConfig {
        breaker: BreakerConfig {
            threshold: 1,
            cooldown: StdDuration::from_secs(3 * 3600),
        },
        retry: RetryPolicy {
            base: StdDuration::from_secs(60),
            cap: StdDuration::from_secs(60),
        },
        ..EngineConfig::default()
    };
    let h = Harness::with_config(store, config).await;
    // An origin that refuses connections, shared by two tenants.
    let refused = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let a = h.create_in(h.env, &refused, cron("0 * * * *", 5)).await;
    let first = h.tick_at(t0() + Duration::hours(1)).await;
    assert_eq!(first.failed, 1, "{first:?}");

    // Tenant A's refusal opened A's circuit for that origin; tenant B's calls still go out.
    let other = EnvId::new();
    let b = h.create_in(other, &refused, cron("0 * * * *", 5)).await;
    let second = h.tick_at(t0() + Duration::hours(2)).await;
    assert_eq!(second.failed, 2, "{second:?}");
    let error = |jobs: Vec<Job>| {
        jobs.into_iter()
            .find(|j| j.status == JobStatus::Pending)
            .and_then(|j| j.error)
            .unwrap()
    };
    let a_error = error(h.jobs(a.id).await);
    assert!(a_error.starts_with("circuit open"), "{a_error}");
    let b_error = error(h.jobs_in(other, b.id).await);
    assert!(b_error.starts_with("proxy-back"), "called: {b_error}");
}

pub async fn a_retry_waits_for_a_slot_under_its_environments_cap(store: Arc<dyn Store>) {
    // The longest timeout the harness allows: the hanging call ends when the test moves the
    // clock past it, long before the same wait on the wall clock.
    let job_timeout = StdDuration::from_secs(5);
    let config = EngineConfig {
        job_timeout,
        env_concurrency: 1,
        retry: RetryPolicy {
            base: StdDuration::from_secs(10),
            cap: StdDuration::from_secs(10),
        },
        ..EngineConfig::default()
    };
    let h = Harness::with_config(store, config).await;
    let hanging = RawServer::start(|_| Reply::Hang).await;
    // No retries for the hanging schedule: each minute it fires afresh.
    h.create_in(h.env, &hanging.url(), cron("* * * * *", 0))
        .await;
    h.create(cron("* * * * *", 5)).await;
    // Minute 1: the healthy target refuses once, leaving a retry due 10 s later.
    h.reply([Reply::status(500)]);
    let first = h.tick_at(minute(1)).await;
    assert_eq!((first.retried, first.dead_lettered), (1, 1), "{first:?}");

    // Minute 2: the hanging schedule takes the environment's only slot; the due retry waits
    // for it (the call times out) instead of running beside it.
    let scenario = async {
        hanging.arrived(2).await;
        h.engine.settled_beside_calls().await;
        assert_eq!(
            h.target.requests().len(),
            1,
            "the retry ran beside the hanging call"
        );
        // The hanging call times out on the clock: its slot frees and the retry runs.
        h.clock
            .set(minute(2) + Duration::from_std(job_timeout).unwrap() + Duration::milliseconds(1));
    };
    let (second, ()) = tokio::join!(h.tick_at(minute(2)), scenario);
    assert_eq!(second.retried_attempts, 1, "{second:?}");
    assert_eq!(
        h.target.requests().len(),
        2,
        "the retry ran after the timeout"
    );
}
