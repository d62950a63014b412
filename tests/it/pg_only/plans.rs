//! The plans the engine's statements get, run under `auto_explain` with their actual row counts
//! (each statement inside the SQL functions too). None may read `jobs`, `schedules` or `outbox`
//! whole, read an array of ids once per row of a table (the shape the records of a burst took:
//! seconds each), or read thousands of rows of a table where it planned for a hundredth of
//! that (a plan chosen on a wrong count, which the next batch may pay for).
//!
//! - Two 20,000-fire ticks on tables loaded behind the service's back (as a restore would),
//!   their statistics those of the empty tables after the migration and autovacuum kept from
//!   refreshing them; the engine starts as `serve` starts, after its refresh of the statistics.
//!   The statements run far more than five times on each connection, so a prepared
//!   statement's generic plan is among those checked. Then the count of what falls due
//!   soon, its bound a parameter the planner cannot see, on costs that make reading the
//!   table whole look cheaper (as it looked at a million schedules).
//! - A burst's renewals, answers and records on statistics taken between bursts, when they
//!   counted no running job.

use std::sync::{Arc, Mutex};

use chrono::Duration;
use sentin8_cron::core::clock::ManualClock;
use sentin8_cron::core::engine::{Engine, EngineConfig};
use sentin8_cron::core::metrics::Metrics;
use sentin8_cron::core::model::{EnvId, JobId, ScheduleId};
use sentin8_cron::core::statistics;
use sentin8_cron::core::store::{
    AttemptDetail, HeldLease, JobAnswer, JobFinish, JobOutcome, LeaseRenewal,
};
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
async fn every_statement_of_a_burst_uses_an_index_after_a_bulk_load() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let target = RawServer::start(|_: &Recorded| Reply::json(200, serde_json::json!({}))).await;
    let mut owner = PgConnection::connect(&db.owner_url()).await.unwrap();
    explain_everything(&mut owner, &db.name).await;
    for sql in [
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

    let (plans, _subscriber, store) = explained_store(&db).await;
    // What `serve` does before its ticker starts: the tables loaded since their last
    // statistics get new ones.
    assert_eq!(
        statistics::refresh(store.as_ref()).await,
        ["jobs", "schedules"]
    );
    assert!(statistics::refresh(store.as_ref()).await.is_empty());
    let clock = Arc::new(ManualClock::new(t0() + Duration::minutes(1)));
    let engine = Engine::new(
        store.clone(),
        crate::engine::dispatcher(clock.clone(), std::time::Duration::from_secs(5)),
        clock.clone(),
        EngineConfig::default(),
        Arc::new(Metrics::default()),
    );
    for minute in 1..=2 {
        clock.set(t0() + Duration::minutes(minute));
        // A tick is bounded (`max_batches_per_tick` rounds): on a loaded machine the rows
        // its own records still lock are left to the next tick of the same instant, as
        // `tick --once` run again would take them.
        let (mut fired, mut succeeded, mut summaries) = (0, 0, Vec::new());
        for _ in 0..5 {
            let summary = engine.tick().await.unwrap();
            fired += summary.fired;
            succeeded += summary.succeeded;
            let done = summary.due == 0 || fired >= SCHEDULES;
            summaries.push(summary);
            if done {
                break;
            }
        }
        assert_eq!(
            (fired, succeeded),
            (SCHEDULES, SCHEDULES),
            "minute {minute}: {summaries:?}"
        );
    }

    // A round that claims ahead asks which of its schedules have an open job (under `skip`
    // an open one leaves the next fire for its instant): 500 schedules, each with a history
    // of five finished jobs by now.
    let env = EnvId(uuid::Uuid::parse_str("00000000-0000-7000-8000-000000000000").unwrap());
    let mut owner = PgConnection::connect(&db.owner_url()).await.unwrap();
    // The test's own read is not the service's: not explained.
    owner
        .execute("SET auto_explain.log_min_duration = -1")
        .await
        .unwrap();
    let ids: Vec<uuid::Uuid> =
        sqlx::query_scalar("SELECT id FROM cron.schedules WHERE env_id = $1 LIMIT 500")
            .bind(env.0)
            .fetch_all(&mut owner)
            .await
            .unwrap();
    let ids: Vec<ScheduleId> = ids.into_iter().map(ScheduleId).collect();
    let mut tx = store.tenant_begin(env).await.unwrap();
    assert!(tx.schedules_with_open_job(&ids).await.unwrap().is_empty());
    tx.commit().await.unwrap();

    // A round that claims ahead counts what falls due within the longest lead: between two
    // minutes none, read through the index of next instants, not the whole table. Its bound
    // is a parameter the planner does not see: it expects a third of the table. At 20,000
    // rows the index still looks cheaper, at a million the whole table did (170 ms a round).
    // Here reads out of order are priced so that the whole table looks cheaper already, on
    // new connections.
    owner
        .execute(format!("ALTER DATABASE {} SET random_page_cost = 100", db.name).as_str())
        .await
        .unwrap();
    let costly = store::connect(&db.service_url, &ConnectOptions::default())
        .await
        .unwrap();
    assert_eq!(
        costly
            .schedules_due_count(t0() + Duration::seconds(150), 200_000)
            .await
            .unwrap(),
        0
    );

    let plans = plans.0.lock().unwrap();
    // Each statement and each statement inside a function was explained: the check saw them.
    assert!(plans.len() as u64 > SCHEDULES, "{} plans", plans.len());
    assert_plans_hold(&plans);
}

/// The statements a burst runs on the jobs it holds, on statistics taken between bursts (every
/// job finished, none running): renewing 2,000 leases, writing 1,000 answers ahead and
/// recording 2,000 outcomes in two batches, in an environment whose 2,000 jobs of the burst
/// are running. Planned on the statistics' word that no job runs, the records read the batch
/// once per running job (0.4 s a batch).
#[tokio::test]
async fn a_bursts_records_do_not_trust_the_count_of_running_jobs() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    const ENV: &str = "00000000-0000-7000-8000-000000000001";
    let mut owner = PgConnection::connect(&db.owner_url()).await.unwrap();
    explain_everything(&mut owner, &db.name).await;
    for sql in [
        "ALTER TABLE cron.jobs SET (autovacuum_enabled = false)".to_owned(),
        format!(
            "INSERT INTO cron.schedules (id, env_id, domain, schedule_type, kind, cron_expr, \
             target_config, next_run_at, created_at, updated_at, created_by, updated_by) \
             SELECT gen_random_uuid(), '{ENV}', 'bench', 's' || g, 'cron', '* * * * *', \
             '{{}}', now(), now(), now(), 't', 't' FROM generate_series(1, 2000) g"
        ),
        // Three bursts finished, then analyzed...
        "INSERT INTO cron.jobs (id, schedule_id, env_id, status, attempt, scheduled_for, \
         idempotency_key, created_at, updated_at, finished_at) \
         SELECT gen_random_uuid(), s.id, s.env_id, 'succeeded', 1, \
         now() - g * interval '1 minute', 'k' || s.id || g, now(), now(), now() \
         FROM cron.schedules s, generate_series(1, 3) g"
            .to_owned(),
        "ANALYZE cron.schedules".to_owned(),
        "ANALYZE cron.jobs".to_owned(),
        // ... and the fourth running.
        "INSERT INTO cron.jobs (id, schedule_id, env_id, status, attempt, scheduled_for, \
         started_at, idempotency_key, created_at, updated_at, lease_until) \
         SELECT gen_random_uuid(), s.id, s.env_id, 'running', 1, now(), now(), \
         'r' || s.id, now(), now(), now() + interval '1 hour' FROM cron.schedules s"
            .to_owned(),
    ] {
        owner.execute(sql.as_str()).await.unwrap();
    }
    let running: Vec<uuid::Uuid> =
        sqlx::query_scalar("SELECT id FROM cron.jobs WHERE status = 'running' ORDER BY id")
            .fetch_all(&mut owner)
            .await
            .unwrap();
    drop(owner);
    let running: Vec<JobId> = running.into_iter().map(JobId).collect();

    let (plans, _subscriber, store) = explained_store(&db).await;
    let now = chrono::Utc::now();
    let renewal = LeaseRenewal {
        leases: running
            .iter()
            .map(|&id| HeldLease {
                id,
                epoch: 0,
                called: true,
            })
            .collect(),
        until: now + Duration::hours(2),
        now,
    };
    assert_eq!(store.jobs_lease_renew(&renewal).await.unwrap().len(), 2000);
    let answers: Vec<JobAnswer> = running[..1000]
        .iter()
        .map(|&job_id| JobAnswer {
            job_id,
            attempt: 1,
            answered_at: now,
            answer: serde_json::json!({"ok": true}),
        })
        .collect();
    assert_eq!(store.job_answers_put(&answers).await.unwrap(), 1000);
    let env = EnvId(ENV.parse().unwrap());
    for batch in running.chunks(1000) {
        let finishes: Vec<JobFinish> = batch
            .iter()
            .map(|&id| JobFinish {
                id,
                attempt: 1,
                epoch: 0,
                outcome: JobOutcome::Succeeded {
                    result: serde_json::json!({"ok": true}),
                },
                now,
                // A call that started: the record moves its schedule's last run too.
                detail: AttemptDetail {
                    started_at: Some(now),
                    ..AttemptDetail::default()
                },
                lease_expired_by: None,
            })
            .collect();
        let mut tx = store.tenant_begin(env).await.unwrap();
        assert_eq!(tx.job_finish_many(&finishes).await.unwrap().len(), 1000);
        tx.commit().await.unwrap();
    }

    let plans = plans.0.lock().unwrap();
    assert!(plans.len() >= 4, "{} plans", plans.len());
    assert_plans_hold(&plans);
}

/// The service's store on `db`, with the plans its statements get collected while the guard
/// lives.
async fn explained_store(
    db: &PgTestDb,
) -> (
    Plans,
    tracing::subscriber::DefaultGuard,
    Arc<dyn sentin8_cron::core::store::Store>,
) {
    let plans = Plans::default();
    let guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(plans.clone()));
    let store = store::connect(&db.service_url, &ConnectOptions::default())
        .await
        .unwrap();
    (plans, guard, store)
}

/// Makes every new session of database `name` explain each statement it runs (the statements
/// inside functions too) to its client, with actual rows and loops (not timings: they cost,
/// and the checks need none).
async fn explain_everything(owner: &mut PgConnection, name: &str) {
    for setting in [
        "session_preload_libraries = 'auto_explain'",
        "auto_explain.log_min_duration = 0",
        "auto_explain.log_nested_statements = on",
        "auto_explain.log_level = notice",
        "auto_explain.log_analyze = on",
        "auto_explain.log_timing = off",
    ] {
        owner
            .execute(format!("ALTER DATABASE {name} SET {setting}").as_str())
            .await
            .unwrap();
    }
}

/// A property of a plan that fails the test.
type PlanCheck = fn(&str) -> bool;

/// Fails on any plan that [`reads_whole`] `jobs`, `schedules` or `outbox`, [`misjudges`] one
/// of them, [`rescans`], or [`reads_history`].
fn assert_plans_hold(plans: &[String]) {
    let checks: [(&str, PlanCheck); 4] = [
        ("read a whole table", reads_whole),
        (
            "read many more jobs than they wanted and filtered them",
            reads_history,
        ),
        (
            "were planned on a count of rows off by a hundred times",
            misjudges,
        ),
        ("read an array or a table once per row of another", rescans),
    ];
    for (what, fails) in checks {
        let failing: Vec<&String> = plans.iter().filter(|plan| fails(plan)).collect();
        assert!(
            failing.is_empty(),
            "{} statements {what}, the first:\n{}",
            failing.len(),
            failing.first().map(|p| p.as_str()).unwrap_or_default()
        );
    }
}

/// A plan that reads `jobs`, `schedules` or `outbox` whole.
fn reads_whole(plan: &str) -> bool {
    ["jobs", "schedules", "outbox"]
        .iter()
        .any(|table| plan.contains(&format!("Seq Scan on {table} ")))
}

/// A plan (with actual rows) whose scan of `jobs` threw more than a thousand rows away by a
/// filter: it reached the jobs it wanted through an index that holds many more (every job of
/// their schedules, so its cost grew with the history kept: the check of a batch's open jobs
/// until open jobs had an index of their own; or every open job of a burst: the sweep for
/// unleased running attempts beside that index, until they had theirs).
fn reads_history(plan: &str) -> bool {
    let mut on_jobs = false;
    plan.lines().any(|line| {
        if line.contains("Scan") {
            on_jobs = line.contains(" on jobs ");
        }
        let removed = line
            .trim()
            .strip_prefix("Rows Removed by Filter: ")
            .and_then(|n| n.parse::<u64>().ok());
        on_jobs && removed.is_some_and(|n| n > 1000)
    })
}

/// A plan (with actual rows) that joins by reading one side again for every row of the other:
/// a function scan (an `unnest` of ids) run more than once, or a join filter that threw away
/// more than a thousand rows. Its cost grows with the product of the two sides.
fn rescans(plan: &str) -> bool {
    plan.lines().any(|line| {
        let loops = || {
            line.split("loops=")
                .nth(1)
                .and_then(|rest| rest.trim_end_matches(')').parse::<u64>().ok())
        };
        let removed = line
            .trim()
            .strip_prefix("Rows Removed by Join Filter: ")
            .and_then(|n| n.parse::<u64>().ok());
        (line.contains("Function Scan") && loops().is_some_and(|n| n > 1))
            || removed.is_some_and(|n| n > 1000)
    })
}

/// A plan (with actual rows) that read a hundred rows or more of `jobs`, `schedules` or
/// `outbox` where it expected a hundredth of that or fewer: whatever it chose, it chose on a
/// wrong count, and the same statement on a larger batch may choose a plan that costs the
/// product of its sides (what the records of a burst did when the statistics counted no
/// running job). A hundred, not thousands: a burst's batches are a few hundred on a quiet
/// machine and thousands on a busy one, and the check must not depend on which.
fn misjudges(plan: &str) -> bool {
    plan.lines().any(|line| {
        let on_table = ["jobs", "schedules", "outbox"]
            .iter()
            .any(|table| line.contains(&format!(" on {table} ")));
        if !line.contains("Scan") || !on_table {
            return false;
        }
        let number = |key: &str| {
            let rest = line.split(key).nth(1)?;
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<u64>().ok()
        };
        let estimated = line
            .split("(cost=")
            .nth(1)
            .and_then(|rest| rest.split(" rows=").nth(1))
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse::<u64>().ok());
        match (estimated, number("actual rows=")) {
            (Some(estimated), Some(actual)) => actual >= 100 && actual > 100 * estimated,
            _ => false,
        }
    })
}

#[test]
fn a_scan_planned_for_one_row_that_read_thousands_is_misjudged() {
    let misjudged = "  ->  Bitmap Heap Scan on jobs j  (cost=125.85..545.97 rows=1 width=38) \
                     (actual rows=2000 loops=1)";
    let judged = "  ->  Bitmap Heap Scan on jobs j  (cost=125.85..545.97 rows=1808 width=38) \
                  (actual rows=2000 loops=1)";
    let small = "  ->  Index Scan using jobs_pkey on jobs j  (cost=0.29..8.31 rows=1 width=38) \
                 (actual rows=1 loops=1344)";
    assert!(misjudges(misjudged));
    assert!(!misjudges(judged));
    assert!(!misjudges(small));
}

#[test]
fn a_rescanned_array_is_told_from_a_join_by_index() {
    let rescanned = "Nested Loop  (cost=4.49..66.91 rows=1 width=302) (actual rows=1344 loops=1)
  Join Filter: (j.id = u.id)
  Rows Removed by Join Filter: 2686656
  ->  Bitmap Heap Scan on jobs j  (cost=4.45..66.57 rows=1 width=38) (actual rows=2000 loops=1)
  ->  Function Scan on u  (cost=0.02..0.12 rows=10 width=328) (actual rows=1344 loops=2000)";
    let by_index = "Nested Loop  (cost=0.32..83.39 rows=1 width=302) (actual rows=1344 loops=1)
  ->  Function Scan on u  (cost=0.02..0.12 rows=10 width=328) (actual rows=1344 loops=1)
  ->  Index Scan using jobs_pkey on jobs j  (cost=0.29..8.31 rows=1 width=38) (actual rows=1 loops=1344)";
    assert!(rescans(rescanned));
    assert!(!rescans(by_index));
    assert!(rescans(&rescanned.replace("loops=2000", "loops=1")));
}
