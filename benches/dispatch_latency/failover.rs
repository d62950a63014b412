//! The failover drill: two `serve` on a primary and a streaming standby of the bench's own
//! (`pair.rs`), reached through one multi-host URL with `target_session_attrs=read-write`. A
//! fraction of a second into a burst of every-minute schedules the primary is killed outright
//! and the standby promoted; the burst after it runs on the new primary. A probe of
//! one-shots, one every 100 ms through the first 30 s, keeps something due across the
//! failover, so what the outage costs shows in its lateness.
//!
//! Counted afterwards, per occurrence (schedule, due instant), from the target's arrivals and
//! the new primary's tables: calls, duplicates (the same key again: a job delivered twice; a
//! new key: a second job for the occurrence), occurrences without any record, lateness of the
//! burst the failover hit and of the next one, the gap between the last call before the kill
//! and the first after it, and the events: `job.succeeded` events per answered occurrence
//! in the new primary's outbox and, when NATS is reachable, on the JetStream stream the relay
//! published to (an event there that the new primary's outbox does not hold was published
//! from the old primary and lost with it). The old primary's WAL is read past the point where
//! the promoted standby's timeline forked, for the commits the standby never received.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use sqlx::{Connection, PgConnection, Row};

use crate::deploy::Deployment;
use crate::pair::Pair;
use crate::report::{self, MINUTE_US, Plan};
use crate::scenarios::{Replication, Scenario};
use crate::target::{Arrival, Kind};
use crate::{Context, Outcome, next_boundary, now_micros, sleep_until};

mod tables;
use tables::{events_table, failover_table};

const COMPLETED: &str = "io.sentin8.cron.job.succeeded.v1";

/// The drill's timing, from the environment.
struct Timing {
    /// The kill, after the first measured instant.
    kill_ms: u64,
    /// The promotion, after the kill (a failover manager's detection time).
    promote_after_ms: u64,
    /// How long before the kill the standby stops receiving WAL (0: it streams to the end).
    lag_ms: u64,
}

impl Timing {
    fn from_env() -> Timing {
        let ms = |name: &str, default: u64| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        Timing {
            kill_ms: ms("BENCH_FAILOVER_KILL_MS", 400),
            promote_after_ms: ms("BENCH_FAILOVER_PROMOTE_AFTER_MS", 0),
            lag_ms: ms("BENCH_FAILOVER_LAG_MS", 0),
        }
    }
}

/// The JetStream stream of one drill, deleted at the end.
struct Bus {
    js: async_nats::jetstream::Context,
    url: String,
    stream: String,
    prefix: String,
}

impl Bus {
    async fn connect() -> Option<Bus> {
        let url =
            std::env::var("BENCH_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
        let client = async_nats::ConnectOptions::new()
            .connection_timeout(Duration::from_secs(3))
            .connect(url.as_str())
            .await
            .ok()?;
        let id = uuid::Uuid::new_v4().simple().to_string();
        Some(Bus {
            js: async_nats::jetstream::new(client),
            url,
            stream: format!("S8C_DRILL_{}", id.to_uppercase()),
            prefix: format!("s8cdrill.{id}"),
        })
    }

    /// Every message on the stream: (event id, event type, schedule, due instant).
    async fn events(&self) -> anyhow::Result<Vec<Event>> {
        let mut stream = self.js.get_stream(&self.stream).await?;
        let state = stream.info().await?.state.clone();
        let mut out = Vec::new();
        if state.messages == 0 {
            return Ok(out);
        }
        for seq in state.first_sequence..=state.last_sequence {
            let message = stream.get_raw_message(seq).await?;
            let body: serde_json::Value = serde_json::from_slice(&message.payload)?;
            let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
            let due = body["data"]["scheduled_for"]
                .as_str()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.timestamp_micros());
            out.push(Event {
                id: text(&body["id"]),
                event_type: text(&body["type"]),
                schedule_id: text(&body["data"]["schedule_id"]),
                due_us: due,
                relayed: true,
            });
        }
        Ok(out)
    }

    async fn delete(&self) {
        let _ = self.js.delete_stream(&self.stream).await;
    }
}

struct Event {
    id: String,
    event_type: String,
    schedule_id: String,
    due_us: Option<i64>,
    relayed: bool,
}

/// What happened around the failover.
struct Moments {
    kill_us: i64,
    killed_processes: usize,
    promoted_us: i64,
}

pub async fn run(ctx: &Context, scenario: &Scenario, mode: Replication) -> anyhow::Result<Outcome> {
    let timing = Timing::from_env();
    let synchronous = mode == Replication::Synchronous;
    let db = "s8cdrill";
    let mut pair = Pair::start_primary(synchronous, db)
        .await
        .context("the primary")?;
    // The schema is migrated on the primary before the standby is copied from it.
    let mut deployment = Deployment::configure(
        &ctx.bin,
        &pair.primary.url("postgres"),
        scenario,
        &ctx.target,
        &ctx.serve_args,
        None,
        format!(
            "postgres://sentin8_cron_service@127.0.0.1:{}/{db}",
            pair.primary.port
        ),
        pair.primary.url(db),
    )
    .await?;
    pair.start_standby().await.context("the standby")?;
    deployment.url = format!(
        "postgres://sentin8_cron_service@127.0.0.1:{},127.0.0.1:{}/{db}\
         ?target_session_attrs=read-write",
        pair.primary.port, pair.standby.port
    );
    let bus = Bus::connect().await;
    if let Some(bus) = &bus {
        for (name, value) in [
            ("SENTIN8_CRON_BUS_URL", &bus.url),
            ("SENTIN8_CRON_BUS_STREAM", &bus.stream),
            ("SENTIN8_CRON_BUS_SUBJECT_PREFIX", &bus.prefix),
        ] {
            deployment
                .env
                .push((name.into(), value.clone(), value.clone()));
        }
    }
    let result = drill(
        ctx,
        scenario,
        &timing,
        &mut pair,
        &mut deployment,
        bus.as_ref(),
    )
    .await;
    ctx.sampler.watch_serve(&[], None);
    deployment.stop().await;
    if let Some(bus) = &bus {
        bus.delete().await;
    }
    drop(pair);
    result
}

async fn drill(
    ctx: &Context,
    scenario: &Scenario,
    timing: &Timing,
    pair: &mut Pair,
    deployment: &mut Deployment,
    bus: Option<&Bus>,
) -> anyhow::Result<Outcome> {
    let mut pids = Vec::new();
    for _ in 0..scenario.instances {
        pids.push(deployment.start_instance().await?);
    }
    ctx.sampler.watch_serve(&pids, None);
    let (seeded, seed_seconds) = deployment.seed(scenario, &ctx.target, 0).await?;
    // Far enough ahead that the burst is claimed ahead as usual (the lead is 10 s).
    let first = next_boundary(now_micros() + 12_000_000);
    let probe_env = uuid::Uuid::new_v4().to_string();
    let probes: Vec<serde_json::Value> = (0..300)
        .map(|i| {
            let at = chrono::DateTime::from_timestamp_micros(first + i * 100_000)
                .expect("an instant in range");
            serde_json::json!({
                "schedule_type": format!("probe-{i:04}"),
                "payload": {"probe": i},
                "run_at": at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            })
        })
        .collect();
    deployment
        .enroll(
            &probe_env,
            "probe",
            probes,
            &ctx.target.base_url(Kind::Fast),
        )
        .await
        .context("the probe")?;
    anyhow::ensure!(
        now_micros() < first - 2_000_000,
        "the seed ran past the first instant; run with a smaller BENCH_SCALE"
    );

    ctx.target.take();
    sleep_until(first).await;
    ctx.sampler.sample_now();
    let kill_at = first + timing.kill_ms as i64 * 1000;
    if timing.lag_ms > 0 {
        sleep_until(kill_at - timing.lag_ms as i64 * 1000).await;
        anyhow::ensure!(pair.stall_replication()?, "the primary has no WAL sender");
    }
    sleep_until(kill_at).await;
    let killed_processes = pair.crash_primary()?;
    let kill_us = now_micros();
    tokio::time::sleep(Duration::from_millis(timing.promote_after_ms)).await;
    let promoting = Instant::now();
    // Blocks the bench's thread for the promotion; the target times arrivals itself.
    pair.promote().context("pg_ctl promote")?;
    let promoted_us = now_micros();
    let promote_seconds = promoting.elapsed().as_secs_f64();
    let moments = Moments {
        kill_us,
        killed_processes,
        promoted_us,
    };

    // The burst the failover hit and the next one; then the outbox is given time to drain.
    let end = first + scenario.minutes as i64 * MINUTE_US;
    sleep_until(first + MINUTE_US).await;
    ctx.sampler.sample_now();
    sleep_until(end - MINUTE_US + 20_000_000).await;
    deployment.owner_url = pair.standby.url(db_of(pair));
    let mut owner = PgConnection::connect(&deployment.owner_url).await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut waiting: i64;
    loop {
        waiting = sqlx::query_scalar(
            "SELECT (SELECT count(*) FROM cron.outbox WHERE relayed_at IS NULL) \
                  + (SELECT count(*) FROM cron.jobs \
                      WHERE status IN ('scheduled', 'pending', 'running') \
                        AND scheduled_for < to_timestamp($1::float8 / 1e6))",
        )
        .bind(end as f64)
        .fetch_one(&mut owner)
        .await?;
        if waiting == 0 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    deployment.stop().await;
    let arrivals = ctx.target.take();
    let records = crate::records::read(deployment).await?;

    let mut group_of_env = HashMap::new();
    for (group, seeded) in scenario.groups.iter().zip(&seeded) {
        for env in &seeded.envs {
            group_of_env.insert(env.clone(), group.name.to_owned());
        }
    }
    group_of_env.insert(probe_env.clone(), "probe".to_owned());
    let plan = Plan {
        group_of_env,
        first_minute_us: first,
        minutes: scenario.minutes,
        instances: scenario.instances,
        sampler: &ctx.sampler,
        max_jitter: scenario.max_jitter,
        per_minute: scenario.due.per_minute(),
    };
    let analysis = report::analyse(&plan, &records, &arrivals);
    let group_of_schedule: HashMap<String, String> = records
        .schedules
        .iter()
        .filter_map(|s| Some((s.id.clone(), plan.group_of_env.get(&s.env)?.clone())))
        .collect();

    let outbox = outbox_events(&mut owner).await?;
    let stream = match bus {
        Some(bus) => Some(bus.events().await.context("reading the stream")?),
        None => None,
    };
    let resumed = first_writes_after(&mut owner, kill_us).await?;
    let fork = fork_point(pair);
    let lost_wal = fork
        .as_deref()
        .map(|lsn| pair.commits_past(lsn))
        .transpose()?;

    println!("## {}: {}\n", scenario.name, scenario.about);
    println!(
        "- the pair: PostgreSQL clusters of the drill's own on loopback ports {} (primary) and \
         {} (standby from `pg_basebackup -R`, streaming), {}",
        pair.primary.port,
        pair.standby.port,
        if pair.synchronous {
            "the primary set to `synchronous_standby_names = '*'` and `synchronous_commit = on` \
             once the standby streamed"
        } else {
            "asynchronous (`synchronous_standby_names` empty)"
        }
    );
    println!(
        "- serve ×{}: `{}`",
        scenario.instances,
        deployment.serve_command_shown()
    );
    println!(
        "- seeded with `sentin8-cron enroll` in {seed_seconds:.1} s; a probe of 300 one-shots, \
         one every 100 ms from the first instant, in an environment of its own; records read \
         from the new primary: {}",
        records.sources.join(", ")
    );
    println!(
        "- bus: {}",
        match bus {
            Some(bus) => format!(
                "NATS JetStream at {}, stream `{}` (deleted afterwards)",
                bus.url, bus.stream
            ),
            None => "log (NATS not reachable: the stream is not counted)".to_owned(),
        }
    );
    println!(
        "- the primary's postmaster and its {} other processes were killed (SIGKILL) {} ms after \
         the instant {}; `pg_ctl promote` began {} ms after the kill and returned in {:.2} s; \
         left to relay and record after the wait: {waiting}",
        moments.killed_processes - 1,
        (moments.kill_us - first) / 1000,
        report::utc(first),
        timing.promote_after_ms,
        promote_seconds,
    );
    if timing.lag_ms > 0 {
        println!(
            "- the standby lagged on purpose: the primary's WAL sender was stopped (SIGSTOP) {} ms \
             before the kill (`BENCH_FAILOVER_LAG_MS`)",
            timing.lag_ms
        );
    }
    println!();
    println!(
        "{}",
        failover_table(
            &analysis,
            &group_of_schedule,
            &arrivals,
            first,
            end,
            &moments,
            resumed,
            fork.as_deref(),
            lost_wal
        )
    );
    println!(
        "{}",
        events_table(&arrivals, first, end, &outbox, stream.as_deref())
    );
    println!("{}", report::lateness_table(&analysis, scenario.instances));
    let headline = analysis
        .totals
        .get(scenario.headline)
        .cloned()
        .unwrap_or_default();
    let window = ctx.sampler.window(first, first + MINUTE_US);
    let (serve_cpu, db_cpu) = (window.sum("serve#"), window.get("db"));
    Ok(Outcome {
        scenario: scenario.clone(),
        headline,
        serve_cpu_per_minute: serve_cpu,
        db_cpu_per_minute: db_cpu,
        seed_seconds,
        spread: Vec::new(),
    })
}

fn db_of(pair: &Pair) -> &str {
    &pair.db
}

/// Where the promoted standby's timeline left the old one (`00000002.history`).
fn fork_point(pair: &Pair) -> Option<String> {
    let text = std::fs::read_to_string(pair.standby_wal_file("00000002.history")).ok()?;
    let line = text
        .lines()
        .find(|l| !l.starts_with('#') && !l.trim().is_empty())?;
    line.split_whitespace().nth(1).map(str::to_owned)
}

/// The first claim (a job created) and the first outcome recorded (a `schedule:completed`
/// event written) on the new primary after the kill, in microseconds.
async fn first_writes_after(
    conn: &mut PgConnection,
    kill_us: i64,
) -> anyhow::Result<(Option<i64>, Option<i64>)> {
    let at = |column: &str, table: &str| {
        format!(
            "SELECT (extract(epoch FROM min({column})) * 1000000)::int8 FROM cron.{table} \
             WHERE {column} > to_timestamp($1::float8 / 1e6)"
        )
    };
    let claimed: Option<i64> = sqlx::query_scalar(&at("created_at", "jobs"))
        .bind(kill_us as f64)
        .fetch_one(&mut *conn)
        .await?;
    // An outcome's event is written in its record's transaction, stamped then (an attempt's
    // own `finished_at` is the call's end, not the record's).
    let recorded: Option<i64> = sqlx::query_scalar(&format!(
        "{} AND event_type = '{COMPLETED}'",
        at("created_at", "outbox")
    ))
    .bind(kill_us as f64)
    .fetch_one(&mut *conn)
    .await?;
    Ok((claimed, recorded))
}

async fn outbox_events(conn: &mut PgConnection) -> anyhow::Result<Vec<Event>> {
    let rows = sqlx::query(
        "SELECT id::text, event_type, coalesce(schedule_id::text, ''), \
                (extract(epoch FROM (payload->>'scheduled_for')::timestamptz) * 1000000)::int8, \
                relayed_at IS NOT NULL \
           FROM cron.outbox",
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Event {
            id: r.get(0),
            event_type: r.get(1),
            schedule_id: r.get(2),
            due_us: r.get(3),
            relayed: r.get(4),
        })
        .collect())
}
