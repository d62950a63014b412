//! The plans the engine's statements get on a loaded database whose statistics are stale: every
//! statement of a 20,000-fire tick (the due selection, the claims, the jobs' inserts, the
//! hand-offs, the answers written ahead, the records, and each statement inside the SQL
//! functions) is planned by `auto_explain` and none reads `jobs`, `schedules` or `outbox`
//! whole. The tables' statistics are those of the empty tables after the migration, and
//! autovacuum is kept from refreshing them, as when `serve` starts right after a bulk `enroll`.

use std::sync::{Arc, Mutex};

use chrono::Duration;
use sentin8_cron::core::clock::ManualClock;
use sentin8_cron::core::engine::{Engine, EngineConfig};
use sentin8_cron::core::metrics::Metrics;
use sentin8_cron::store::{self, ConnectOptions};
use sqlx::{Connection, Executor, PgConnection};
use tracing_subscriber::layer::SubscriberExt;

use crate::raw_http::{RawServer, Recorded, Reply};
use crate::support::{PgTestDb, t0};

const SCHEDULES: u64 = 20_000;

/// Collects the notices PostgreSQL sends the store's connections (sqlx reports each as an
/// event of target `sqlx::postgres::notice`): `auto_explain`'s plans.
#[derive(Clone, Default)]
struct Plans(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Plans {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() != "sqlx::postgres::notice" {
            return;
        }
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                if field.name() == "message" {
                    self.0 = value.to_owned();
                }
            }
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        self.0.lock().unwrap().push(message.0);
    }
}

#[tokio::test]
async fn every_statement_of_a_tick_uses_an_index_on_a_loaded_database_with_stale_statistics() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let target = RawServer::start(|_: &Recorded| Reply::json(200, serde_json::json!({}))).await;
    let mut owner = PgConnection::connect(&db.owner_url()).await.unwrap();
    for sql in [
        // Every new session of this database explains each statement to its client.
        format!(
            "ALTER DATABASE {} SET session_preload_libraries = 'auto_explain'",
            db.name
        ),
        format!(
            "ALTER DATABASE {} SET auto_explain.log_min_duration = 0",
            db.name
        ),
        format!(
            "ALTER DATABASE {} SET auto_explain.log_nested_statements = on",
            db.name
        ),
        format!(
            "ALTER DATABASE {} SET auto_explain.log_level = notice",
            db.name
        ),
        "ALTER TABLE cron.schedules SET (autovacuum_enabled = false)".to_owned(),
        "ALTER TABLE cron.jobs SET (autovacuum_enabled = false)".to_owned(),
        "ANALYZE cron.schedules".to_owned(),
        "ANALYZE cron.jobs".to_owned(),
        // Every-minute schedules over 10 environments, all due at the next minute...
        format!(
            "INSERT INTO cron.schedules (id, env_id, domain, schedule_type, kind, cron_expr, \
             target_config, next_run_at, created_at, updated_at, created_by, updated_by) \
             SELECT gen_random_uuid(), ('00000000-0000-7000-8000-00000000000' || (g % 10))::uuid, \
             'bench', 's' || g, 'cron', '* * * * *', \
             jsonb_build_object('baseUrl', '{}'), '{}'::timestamptz + interval '1 minute', \
             now(), now(), 't', 't' FROM generate_series(1, {SCHEDULES}) g",
            target.url(),
            t0().to_rfc3339()
        ),
        // ... with a history of three finished jobs each.
        "INSERT INTO cron.jobs (id, schedule_id, env_id, status, attempt, scheduled_for, \
         idempotency_key, created_at, updated_at, finished_at) \
         SELECT gen_random_uuid(), s.id, s.env_id, 'succeeded', 1, \
         s.next_run_at - g * interval '1 minute', 'k' || s.id || g, now(), now(), now() \
         FROM cron.schedules s, generate_series(1, 3) g"
            .to_owned(),
    ] {
        owner.execute(sql.as_str()).await.unwrap();
    }
    drop(owner);

    let plans = Plans::default();
    let _subscriber =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(plans.clone()));
    let store = store::connect(&db.service_url, &ConnectOptions::default())
        .await
        .unwrap();
    let clock = Arc::new(ManualClock::new(t0() + Duration::minutes(1)));
    let engine = Engine::new(
        store,
        crate::engine::dispatcher(clock.clone(), std::time::Duration::from_secs(5)),
        clock,
        EngineConfig::default(),
        Arc::new(Metrics::default()),
    );
    let summary = engine.tick().await.unwrap();
    assert_eq!(
        (summary.fired, summary.succeeded),
        (SCHEDULES, SCHEDULES),
        "{summary:?}"
    );

    let plans = plans.0.lock().unwrap();
    // Each statement and each statement inside a function was explained: the check saw them.
    assert!(plans.len() as u64 > SCHEDULES, "{} plans", plans.len());
    let whole: Vec<&String> = plans
        .iter()
        .filter(|plan| {
            ["jobs", "schedules", "outbox"]
                .iter()
                .any(|table| plan.contains(&format!("Seq Scan on {table} ")))
        })
        .collect();
    assert!(
        whole.is_empty(),
        "{} statements read a whole table, the first:\n{}",
        whole.len(),
        whole.first().map(|p| p.as_str()).unwrap_or_default()
    );
}
