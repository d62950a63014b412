//! PostgreSQL-only behaviour of whole engines and relays: two engines racing fire each
//! schedule once, the outbox changes only through the relay's functions, health answers at once
//! when the database stops answering.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_racing_fire_every_schedule_exactly_once() {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use sentin8_cron::core::clock::{Clock, ManualClock};
    use sentin8_cron::core::decl::ScheduleDecl;
    use sentin8_cron::core::engine::{Engine, EngineConfig};
    use sentin8_cron::core::metrics::Metrics;
    use sentin8_cron::core::ops::{Actor, CreateSchedule, Ops};
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

    let clock = Arc::new(ManualClock::new(t0()));
    let ops = Ops::new(db.dyn_store());
    let envs: Vec<EnvId> = (0..4).map(|_| EnvId::new()).collect();
    let schedules = 240;
    for i in 0..schedules {
        let spec = ScheduleDecl {
            schedule_type: format!("race-{i}"),
            cron: Some("*/10 * * * *".into()),
            ..ScheduleDecl::default()
        }
        .validate(t0())
        .unwrap();
        ops.schedule_create(
            envs[i % envs.len()],
            CreateSchedule {
                domain: "race".into(),
                spec,
                target: Target::validate(&json!({"baseUrl": target.url()})).unwrap(),
            },
            &Actor {
                name: "tester".into(),
                correlation_id: None,
                now: t0(),
            },
        )
        .await
        .unwrap();
    }

    // Two engines with their own pools stand in for two processes.
    let mut engines = Vec::new();
    for _ in 0..2 {
        let store = PgStore::connect(&db.service_url, &ConnectOptions::default())
            .await
            .unwrap();
        engines.push(Engine::new(
            Arc::new(store),
            dispatcher(clock.clone(), StdDuration::from_secs(10)),
            clock.clone(),
            // Small batches: many claim rounds, so the engines keep running into each other.
            EngineConfig {
                batch_size: 10,
                concurrency: 4,
                ..EngineConfig::default()
            },
            Arc::new(Metrics::default()),
        ));
    }

    let mut worked = [0u64; 2];
    for round in 1..=2 {
        clock.set(t0() + Duration::minutes(10 * round));
        // Like the serve loop, tick again while work is left: a tick whose whole batch was
        // held by the other engine stops early rather than spin.
        let mut fired = 0;
        for _ in 0..10 {
            let (a, b) = tokio::join!(engines[0].tick(), engines[1].tick());
            let (a, b) = (a.unwrap(), b.unwrap());
            assert_eq!(a.errors + b.errors, 0, "round {round}: {a:?} / {b:?}");
            fired += a.fired + b.fired;
            worked[0] += a.fired;
            worked[1] += b.fired;
            if a.due + b.due == 0 {
                break;
            }
        }
        assert_eq!(
            fired, schedules as u64,
            "round {round}: every due schedule fired once between the two"
        );
        let counts = calls.lock().unwrap();
        assert_eq!(
            counts.len(),
            schedules,
            "round {round}: every schedule was called"
        );
        assert!(
            counts.values().all(|n| *n == round as usize),
            "round {round}: some schedule was called twice or not at all"
        );
    }
    // Both did work: instances add capacity.
    assert!(worked.iter().all(|n| *n > 0), "{worked:?}");
    // Each schedule has exactly one job per round, all succeeded.
    let store = db.dyn_store();
    for env in &envs {
        let mut tx = store.tenant_begin(*env).await.unwrap();
        let jobs = tx
            .job_list(&JobQuery {
                limit: 1000,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(jobs.len(), 2 * schedules / envs.len());
        assert!(jobs.iter().all(|j| j.status == JobStatus::Succeeded));
    }
    assert_eq!(clock.now(), t0() + Duration::minutes(20));
}

#[tokio::test]
async fn the_outbox_changes_only_through_the_relay_functions() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let store = db.dyn_store();
    let env = EnvId::new();
    crate::conformance::insert_event(&store, env, None, "x").await;
    let mut conn = service_conn(&db).await;

    // Not even inside the tenant's own context may the service touch outbox rows directly.
    let mut tx = conn.begin().await.unwrap();
    sqlx::query("SELECT sentin8_set_tenant_context($1)")
        .bind(env.0)
        .execute(&mut *tx)
        .await
        .unwrap();
    let err = tx
        .execute("UPDATE outbox SET relayed_at = now()")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("permission denied"), "{err}");
    drop(tx);
    let err = conn.execute("DELETE FROM outbox").await.unwrap_err();
    assert!(err.to_string().contains("permission denied"), "{err}");

    // The relay and retention functions are SECURITY DEFINER with a pinned search_path (and
    // no other setting but the planner's), and nobody but the service role may execute them.
    let functions: Vec<(String, bool, String, String)> = sqlx::query_as(
        "SELECT proname::text, prosecdef, array_to_string(proconfig, ','), \
                array_to_string(proacl, ',') \
           FROM pg_proc WHERE pronamespace = 'cron'::regnamespace \
            AND (proname LIKE 'outbox_%' OR proname LIKE 'purge_%') \
          ORDER BY proname",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let names: Vec<&str> = functions.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "outbox_claim",
            "outbox_mark_failed",
            "outbox_mark_relayed",
            "outbox_oldest_unrelayed",
            "outbox_purge",
            "outbox_release",
            "outbox_stats",
            "purge_audit",
            "purge_jobs",
            "purge_schedules"
        ]
    );
    for (name, definer, config, acl) in &functions {
        assert!(definer, "{name} is SECURITY DEFINER");
        let planner = config
            .strip_prefix("search_path=pg_catalog, pg_temp")
            .unwrap_or_else(|| panic!("{name}: {config}"));
        assert!(
            planner.split(',').filter(|s| !s.is_empty()).all(|setting| {
                setting.starts_with("plan_cache_mode=") || setting.starts_with("enable_seqscan=")
            }),
            "{name}: {config}"
        );
        assert!(acl.contains("sentin8_cron_service=X/"), "{name}: {acl}");
        // A PUBLIC grant is an entry with an empty grantee: "=X/owner".
        assert!(
            !acl.split(',').any(|entry| entry.starts_with("=")),
            "{name}: {acl}"
        );
    }
    // And they work for it.
    let claimed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM outbox_claim('r1', now(), now() + interval '30 seconds', 10)",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(claimed, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_answers_503_at_once_when_the_database_stops_answering() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let upstream: std::net::SocketAddr = {
        let url = url::Url::parse(&db.service_url).unwrap();
        let host = url.host_str().unwrap().replace("localhost", "127.0.0.1");
        format!("{host}:{}", url.port().unwrap_or(5432))
            .parse()
            .unwrap()
    };
    let proxy = crate::stalling_proxy::StallingProxy::start(upstream).await;
    let mut through_proxy = url::Url::parse(&db.service_url).unwrap();
    through_proxy.set_host(Some("127.0.0.1")).unwrap();
    through_proxy.set_port(Some(proxy.addr.port())).unwrap();
    // The default pool settings: a 10 s acquire timeout is what a probe would otherwise wait.
    let store = sentin8_cron::store::connect(
        through_proxy.as_str(),
        &sentin8_cron::store::ConnectOptions::default(),
    )
    .await
    .unwrap();
    let api = crate::api::Api::start(store).await;
    let (status, health, _) = api
        .call(reqwest::Method::GET, "/v1/health", None, None)
        .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{health}");

    proxy.stall(true);
    // Past the time a probe's answer is trusted (PROBE_FRESH), so the next request probes the
    // stalled database itself and says so at once.
    api.clock.advance(Duration::seconds(4));
    let answered = tokio::time::timeout(
        StdDuration::from_secs(5),
        api.call(reqwest::Method::GET, "/v1/health", None, None),
    )
    .await;
    proxy.stall(false);
    let (status, health, _) = answered.expect("health answered before the pool's 10 s timeout");
    assert_eq!(status, reqwest::StatusCode::SERVICE_UNAVAILABLE, "{health}");
    assert_eq!(health["status"], "unavailable");
}
