//! Several instances on one PostgreSQL: a change through one wakes another, a burst of
//! schedules created in the same millisecond is shared between two engines (each fired exactly
//! once), and a schedule row held by another connection delays only that schedule.

use std::time::Duration as StdDuration;

use chrono::Duration;
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;
use sentin8_cron::core::target::Target;
use sqlx::{Connection, Executor, PgConnection};
use uuid::Uuid;

use crate::conformance::new_schedule;
use crate::support::{PgTestDb, t0};

async fn service_conn(db: &PgTestDb) -> PgConnection {
    let mut conn = PgConnection::connect(&db.service_url).await.unwrap();
    conn.execute("SET search_path = cron").await.unwrap();
    conn
}

#[tokio::test]
async fn a_change_through_one_instance_wakes_another() {
    use sentin8_cron::store::{ConnectOptions, postgres::PgStore};

    let Some(db) = PgTestDb::create().await else {
        return;
    };
    // `serve` announces its changes after they commit, coalesced, from a connection of its
    // own (no NOTIFY inside the writer's transaction).
    let serving = |after_commit| {
        let url = db.service_url.clone();
        async move {
            PgStore::connect(
                &url,
                &ConnectOptions {
                    announce_after_commit: after_commit,
                    ..ConnectOptions::default()
                },
            )
            .await
            .unwrap()
        }
    };
    let one = serving(true).await;
    let other = serving(true).await;
    other.signals_listen().await.unwrap();

    // A burst of commits on one instance...
    for n in 0..20 {
        let mut tx = one.tenant_begin(EnvId::new()).await.unwrap();
        tx.schedule_insert(&new_schedule(&format!("s{n}"), "billing"))
            .await
            .unwrap();
        tx.notify_on_commit(Channel::Schedules);
        tx.commit().await.unwrap();
    }
    tokio::time::timeout(
        StdDuration::from_secs(1),
        one.signals().schedules.notified(),
    )
    .await
    .expect("its own process is woken");
    // ...wakes the other one.
    tokio::time::timeout(
        StdDuration::from_secs(2),
        other.signals().schedules.notified(),
    )
    .await
    .expect("the other instance is woken");
    // Coalesced: far fewer notifications than commits reach the other instance (a woken
    // waiter leaves at most one stored wake-up behind).
    let mut more = 0;
    while tokio::time::timeout(
        StdDuration::from_millis(100),
        other.signals().schedules.notified(),
    )
    .await
    .is_ok()
    {
        more += 1;
    }
    assert!(more < 10, "{more} more wake-ups for 20 commits");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_share_a_thousand_schedules_of_one_millisecond() {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use sentin8_cron::core::clock::ManualClock;
    use sentin8_cron::core::engine::{Engine, EngineConfig};
    use sentin8_cron::core::metrics::Metrics;
    use sentin8_cron::store::{ConnectOptions, postgres::PgStore};
    use serde_json::json;

    use crate::engine::dispatcher;
    use crate::raw_http::{RawServer, Recorded, Reply};

    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let calls: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let target = RawServer::start({
        let calls = calls.clone();
        move |req: &Recorded| {
            let id = req.json()["schedule_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            *calls.lock().unwrap().entry(id).or_default() += 1;
            Reply::json(200, json!({"ok": true}))
        }
    })
    .await;

    // 1,000 schedules whose UUIDv7 ids all carry the same millisecond, over ten environments,
    // all due at the same instant.
    let store = db.dyn_store();
    let due = t0() + Duration::minutes(1);
    let ms = Uuid::now_v7().get_timestamp().unwrap();
    let envs: Vec<EnvId> = (0..10).map(|_| EnvId::new()).collect();
    let target_config = Target::validate(&json!({"baseUrl": target.url()})).unwrap();
    for (n, env) in envs.iter().enumerate() {
        let mut tx = store.tenant_begin(*env).await.unwrap();
        for i in 0..100 {
            let mut new = new_schedule(&format!("same-ms-{n}-{i}"), "billing");
            new.id = ScheduleId(Uuid::new_v7(ms));
            new.next_run_at = Some(due);
            new.target = target_config.clone();
            tx.schedule_insert(&new).await.unwrap();
        }
        tx.commit().await.unwrap();
    }

    let clock = Arc::new(ManualClock::new(due));
    let mut engines = Vec::new();
    for seed in [1, 2] {
        let store = PgStore::connect(&db.service_url, &ConnectOptions::default())
            .await
            .unwrap();
        engines.push(Engine::new(
            Arc::new(store),
            dispatcher(clock.clone(), StdDuration::from_secs(10)),
            clock.clone(),
            EngineConfig {
                batch_size: 50,
                claim_seed: seed,
                ..EngineConfig::default()
            },
            Arc::new(Metrics::default()),
        ));
    }
    let mut fired = [0u64; 2];
    for _ in 0..10 {
        let (a, b) = tokio::join!(engines[0].tick(), engines[1].tick());
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(a.errors + b.errors, 0, "{a:?} / {b:?}");
        fired[0] += a.fired;
        fired[1] += b.fired;
        if a.due + b.due == 0 {
            break;
        }
    }
    assert_eq!(fired[0] + fired[1], 1000, "{fired:?}");
    assert!(
        fired.iter().all(|n| *n > 0),
        "both instances did work: {fired:?}"
    );
    let counts = calls.lock().unwrap();
    assert_eq!(counts.len(), 1000);
    assert!(
        counts.values().all(|n| *n == 1),
        "a schedule was called twice"
    );
}

#[tokio::test]
async fn a_schedule_row_held_by_another_connection_delays_only_that_schedule() {
    use sentin8_cron::core::engine::EngineConfig;
    use serde_json::json;

    use crate::engine::{Harness, cron};
    use crate::raw_http::Reply;

    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let config = EngineConfig {
        job_timeout: StdDuration::from_millis(800),
        ..EngineConfig::default()
    };
    let h = Harness::with_config(db.dyn_store(), config).await;
    let mut ids = Vec::new();
    for _ in 0..10 {
        ids.push(h.create(cron("* * * * *", 3)).await.id);
    }
    h.reply((0..10).map(|_| {
        Reply::After(
            StdDuration::from_millis(200),
            Box::new(Reply::json(200, json!({"ok": true}))),
        )
    }));
    // Another connection holds one schedule's row (an operator in psql, say).
    let mut conn = service_conn(&db).await;
    let mut held = conn.begin().await.unwrap();
    sqlx::query("SELECT sentin8_set_tenant_context($1)")
        .bind(h.env.0)
        .execute(&mut *held)
        .await
        .unwrap();
    sqlx::query("SELECT 1 FROM schedules WHERE id = $1 FOR UPDATE")
        .bind(ids[0].0)
        .execute(&mut *held)
        .await
        .unwrap();
    // The tick neither waits for it nor lets it hold up the others: nine fire and are
    // recorded, every one a success.
    let first = tokio::time::timeout(
        StdDuration::from_secs(10),
        h.tick_at(t0() + Duration::minutes(1)),
    )
    .await
    .expect("the tick does not wait for the held row");
    assert_eq!(
        (first.fired, first.succeeded, first.failed),
        (9, 9, 0),
        "{first:?}"
    );
    held.commit().await.unwrap();
    // Released, the held schedule fires late, once; nothing was delivered twice.
    let second = h
        .tick_at(t0() + Duration::minutes(1) + Duration::seconds(5))
        .await;
    assert_eq!(
        (second.fired, second.succeeded, second.failed),
        (1, 1, 0),
        "{second:?}"
    );
    assert_eq!(h.target.requests().len(), 10);
    for id in ids {
        let jobs = h.jobs(id).await;
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].status, JobStatus::Succeeded);
    }
}

#[tokio::test]
async fn a_row_held_in_one_tenant_never_holds_up_another_tenants_records() {
    use sentin8_cron::core::engine::EngineConfig;
    use serde_json::json;

    use crate::engine::{Harness, cron};
    use crate::raw_http::{RawServer, Recorded, Reply};

    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let h = Harness::with_config(db.dyn_store(), EngineConfig::default()).await;
    let a = h.create(cron("* * * * *", 3)).await;
    h.reply([Reply::After(
        StdDuration::from_millis(300),
        Box::new(Reply::json(200, json!({"ok": true}))),
    )]);
    // Tenant B's target answers later, once A's record is waiting on the held row.
    let slow = RawServer::start(|_: &Recorded| {
        Reply::After(
            StdDuration::from_millis(1500),
            Box::new(Reply::json(200, json!({"ok": true}))),
        )
    })
    .await;
    let other = EnvId::new();
    let b = h.create_in(other, &slow.url(), cron("* * * * *", 3)).await;

    let tick = h.tick_at(t0() + Duration::minutes(1));
    let hold_and_watch = async {
        // A was claimed and called: now another connection takes its schedule row.
        while h.target.requests().is_empty() {
            tokio::time::sleep(StdDuration::from_millis(5)).await;
        }
        let mut conn = service_conn(&db).await;
        let mut held = conn.begin().await.unwrap();
        sqlx::query("SELECT sentin8_set_tenant_context($1)")
            .bind(h.env.0)
            .execute(&mut *held)
            .await
            .unwrap();
        sqlx::query("SELECT 1 FROM schedules WHERE id = $1 FOR UPDATE")
            .bind(a.id.0)
            .execute(&mut *held)
            .await
            .unwrap();
        // B's answer is recorded while A's row is still held (well before the record's lock
        // timeout would free the recorder).
        let recorded = tokio::time::timeout(StdDuration::from_secs(4), async {
            loop {
                let jobs = h.jobs_in(other, b.id).await;
                if jobs
                    .first()
                    .is_some_and(|j| j.status == JobStatus::Succeeded)
                {
                    return;
                }
                tokio::time::sleep(StdDuration::from_millis(50)).await;
            }
        })
        .await;
        let a_still_running = h.jobs(a.id).await[0].status == JobStatus::Running;
        held.commit().await.unwrap();
        (recorded.is_ok(), a_still_running)
    };
    let (summary, (b_recorded, a_held)) = tokio::join!(tick, hold_and_watch);
    assert!(b_recorded, "B's outcome waited for A's held row");
    assert!(a_held, "A's record waited for its row");
    assert_eq!((summary.succeeded, summary.failed), (2, 0), "{summary:?}");
    assert_eq!(h.jobs(a.id).await[0].status, JobStatus::Succeeded);
    assert_eq!(h.target.requests().len() + slow.requests().len(), 2);
}

#[tokio::test]
async fn instances_with_different_seeds_start_on_different_schedules_of_a_burst() {
    use crate::conformance::insert_schedule;

    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let store = db.dyn_store();
    let env = EnvId::new();
    // One environment, 60 schedules due at the same instant: more than 2 x limit candidates.
    for i in 0..60 {
        insert_schedule(&store, env, new_schedule(&format!("burst-{i}"), "billing")).await;
    }
    let now = t0() + Duration::minutes(5);
    let picked = |seed| {
        let store = store.clone();
        async move {
            let mut ids: Vec<ScheduleId> = store
                .schedules_due(now, 5, seed, None)
                .await
                .unwrap()
                .into_iter()
                .map(|d| d.id)
                .collect();
            ids.sort();
            ids
        }
    };
    let seeds: Vec<Vec<ScheduleId>> = futures_util::future::join_all((1..=4).map(picked)).await;
    assert!(seeds.iter().all(|ids| ids.len() == 5));
    // The same seed picks the same; different seeds pick (mostly) different schedules, from
    // the whole burst rather than the same first 10 candidates.
    assert_eq!(picked(1).await, seeds[0]);
    let distinct: std::collections::HashSet<ScheduleId> = seeds.iter().flatten().copied().collect();
    assert!(
        distinct.len() > 10,
        "{} distinct of 20 picks",
        distinct.len()
    );
}
