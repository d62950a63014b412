//! Due selection at scale (PostgreSQL): `cron.due_schedules(50)` with 50 schedules due among
//! 1,000 and among 1,000,000 active schedules spread over 1,000 environments. Prints the query
//! plan of the function's body and the latency distribution of the call as the service role.
//!
//! Run: `cargo bench --bench due_selection` (PostgreSQL at SENTIN8_CRON_BENCH_DATABASE_URL,
//! default postgres://postgres@127.0.0.1:5432/postgres; about two minutes, mostly seeding).

use std::time::{Duration, Instant};

use chrono::Utc;
use sentin8_cron::store;
use sqlx::{Connection, Executor, PgConnection};

fn admin_url() -> String {
    std::env::var("SENTIN8_CRON_BENCH_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

fn with_user_and_db(url: &str, user: &str, db: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("URL has a scheme");
    let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    let host = host.split('/').next().unwrap_or("127.0.0.1");
    format!("{scheme}://{user}@{host}/{db}")
}

fn admin_user(url: &str) -> String {
    url.split_once("://")
        .and_then(|(_, rest)| rest.rsplit_once('@'))
        .map(|(user, _)| user.split(':').next().unwrap_or("postgres").to_owned())
        .unwrap_or_else(|| "postgres".to_owned())
}

struct Measured {
    schedules: u64,
    median: Duration,
    p99: Duration,
    plan: String,
}

async fn measure(total: u64) -> Measured {
    let admin = admin_url();
    let name = format!("s8c_bench_due_{total}");
    let mut conn = PgConnection::connect(&admin)
        .await
        .expect("PostgreSQL reachable");
    conn.execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
        .await
        .unwrap();
    conn.execute(format!("CREATE DATABASE {name}").as_str())
        .await
        .unwrap();
    let owner_url = with_user_and_db(&admin, &admin_user(&admin), &name);
    store::migrate(&owner_url, false).await.expect("migrate");

    // Seed as the owner (bypasses RLS): 1,000 environments, 50 schedules due, the rest in the
    // future, plus some paused and deleted rows the partial index must ignore.
    let mut owner = PgConnection::connect(&owner_url).await.unwrap();
    let started = Instant::now();
    owner
        .execute(
            format!(
                "INSERT INTO cron.schedules (id, env_id, domain, schedule_type, kind, cron_expr, \
                 timezone, status, next_run_at, created_at, updated_at, created_by, updated_by) \
                 SELECT gen_random_uuid(), \
                        ('00000000-0000-4000-8000-' || lpad((i % 1000)::text, 12, '0'))::uuid, \
                        'bench', 'job-' || i, 'cron', '*/5 * * * *', 'UTC', \
                        CASE WHEN i % 97 = 0 THEN 'paused' ELSE 'active' END, \
                        CASE WHEN i <= 50 THEN now() - (i || ' seconds')::interval \
                             ELSE now() + interval '1 day' + (i % 86400 || ' seconds')::interval END, \
                        now(), now(), 'bench', 'bench' \
                 FROM generate_series(1, {total}) AS i"
            )
            .as_str(),
        )
        .await
        .unwrap();
    owner
        .execute("VACUUM ANALYZE cron.schedules")
        .await
        .unwrap();
    eprintln!("seeded {total} schedules in {:.1?}", started.elapsed());

    let plan_rows: Vec<(String,)> = sqlx::query_as(
        "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) \
         SELECT s.id, s.env_id, s.next_run_at FROM cron.schedules s \
         WHERE s.status = 'active' AND s.next_run_at <= now() ORDER BY s.next_run_at LIMIT 50",
    )
    .fetch_all(&mut owner)
    .await
    .unwrap();
    let plan = plan_rows
        .into_iter()
        .map(|(l,)| l)
        .collect::<Vec<_>>()
        .join("\n");

    let service_url = with_user_and_db(&admin, "sentin8_cron_service", &name);
    let mut service = PgConnection::connect(&service_url).await.unwrap();
    let now = Utc::now();
    let mut samples = Vec::new();
    for i in 0..1_100 {
        let t = Instant::now();
        let rows: Vec<(uuid::Uuid,)> = sqlx::query_as("SELECT id FROM cron.due_schedules(50, $1)")
            .bind(now)
            .fetch_all(&mut service)
            .await
            .unwrap();
        let elapsed = t.elapsed();
        assert_eq!(rows.len(), 50, "50 are due");
        if i >= 100 {
            samples.push(elapsed);
        }
    }
    samples.sort();
    drop(service);
    drop(owner);
    conn.execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
        .await
        .unwrap();
    Measured {
        schedules: total,
        median: samples[samples.len() / 2],
        p99: samples[samples.len() * 99 / 100],
        plan,
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list` / `cargo test --benches` compatibility
    }
    let small = measure(1_000).await;
    let large = measure(1_000_000).await;
    for m in [&small, &large] {
        println!(
            "\n## {} active schedules, 1,000 environments, 50 due\n",
            m.schedules
        );
        println!("plan of the due query:\n```\n{}\n```", m.plan);
        println!(
            "due_schedules(50) as the service role: median {:.3?}, p99 {:.3?}",
            m.median, m.p99
        );
    }
    let ratio = large.median.as_secs_f64() / small.median.as_secs_f64();
    println!("\nmedian at 1,000,000 / median at 1,000 = {ratio:.2}x (target: within 2x)");
}
