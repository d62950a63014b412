//! Dispatch latency as a user sees it: real `sentin8-cron serve` processes (one, two or three)
//! on PostgreSQL or the embedded SQLite, schedules enrolled with `sentin8-cron enroll`, and a
//! local HTTP target (its own process) that records when each call arrives. Per minute: fired/N,
//! p50/p99/max of arrival minus the due instant, duplicates, occurrences without a record, and
//! the CPU split between serve, the database and the target. pgbench's TPS and pg_cron on a
//! private cluster run in the same command as references. Schedules declared with a
//! `max_jitter` (`pg-5k-jitter`) are measured from each call's own instant. The report adds the
//! calls per second of every burst: how a jittered one spread, how one at once drained
//! (`spread.rs`).
//!
//! Run: `cargo bench --bench dispatch_latency` (the default set, about 15 minutes), or name
//! what to run: `cargo bench --bench dispatch_latency -- pg-5k noisy` (or `BENCH_SCENARIOS`).
//! Names: `pgbench`, `pgcron`, `pgcron-1s` (pg_cron's seconds schedules, `BENCH_PGCRON_SECONDS_N`
//! jobs, default 1,000), the scenarios of `scenarios.rs`, `failover` (both failover
//! drills), `default`, `all`.
//! Settings: `SENTIN8_CRON_BENCH_BIN` (the binary under test; default the release build of this
//! tree), `SENTIN8_CRON_BENCH_DATABASE_URL` (the shared cluster, default
//! postgres://postgres@127.0.0.1:5432/postgres), `BENCH_SCALE` (schedule counts × this),
//! `BENCH_MINUTES` (measured minutes of every scenario), `BENCH_SERVE_ARGS` (extra flags for
//! serve, space-separated), `BENCH_PGCRON_N` (pg_cron's job count, default pg-5k's N),
//! `BENCH_DB_PARAMS` (appended to serve's PostgreSQL URL, e.g. `?sslmode=disable`),
//! `BENCH_KILL_MS` (when `kill-3k-x2` kills its first instance, after the instant, 500),
//! `BENCH_FAULT_MS` (when `stop-1k-x2` freezes and `kill-1k-x2` kills the first instance,
//! from the instant, -400).
//! Other `SENTIN8_CRON_*` variables of the environment reach serve unchanged. The failover
//! drill's own: `BENCH_FAILOVER_KILL_MS` (the kill after the instant, 400),
//! `BENCH_FAILOVER_PROMOTE_AFTER_MS` (the promotion after the kill, 0),
//! `BENCH_FAILOVER_LAG_MS` (the standby stops receiving this long before the kill, 0) and
//! `BENCH_NATS_URL` (nats://127.0.0.1:4222; without NATS the relay logs and the stream is not
//! counted).
//!
//! Run as root (pg_cron's cluster is created as the `postgres` user; apt-get installs
//! postgresql-15-cron when it is missing). Not run by `cargo test`.

mod deploy;
mod durable;
mod failover;
mod fault;
mod kill;
mod pair;
mod pgcron;
mod procstat;
mod records;
mod report;
mod scale;
mod scenarios;
mod spread;
mod summary;
mod target;
use summary::{print_pgcron, print_summary};

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use sqlx::{Connection, PgConnection};

use deploy::Deployment;
use procstat::{Sampler, load_average};
use report::{MINUTE_US, Plan, Stats};
use scenarios::{Backend, Due, Scenario};
use target::Target;

pub fn now_micros() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

/// The first minute boundary at or after `us`.
pub fn next_boundary(us: i64) -> i64 {
    let rem = us.rem_euclid(MINUTE_US);
    if rem == 0 { us } else { us - rem + MINUTE_US }
}

pub async fn sleep_until(us: i64) {
    let wait = us - now_micros();
    if wait > 0 {
        tokio::time::sleep(std::time::Duration::from_micros(wait as u64)).await;
    }
}

pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The admin URL with another database.
pub fn with_database(admin_url: &str, name: &str) -> String {
    let (scheme, rest) = admin_url
        .split_once("://")
        .unwrap_or(("postgres", admin_url));
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    format!("{scheme}://{authority}/{name}")
}

struct Context {
    bin: PathBuf,
    admin_url: String,
    scale: f64,
    minutes: Option<u32>,
    serve_args: Vec<String>,
    sampler: Sampler,
    target: Target,
    /// The shared cluster's postmaster, when it runs on this machine.
    postmaster: Option<u32>,
}

struct Outcome {
    scenario: Scenario,
    headline: Stats,
    serve_cpu_per_minute: f64,
    /// The scenario database's backends' CPU per measured minute (PostgreSQL; 0 on SQLite,
    /// whose work is serve's own).
    db_cpu_per_minute: f64,
    seed_seconds: f64,
    /// How each measured minute's burst spread (or drained), one line each.
    spread: Vec<String>,
}

fn selection(args: &[String]) -> Vec<String> {
    let mut names: Vec<String> = args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .cloned()
        .collect();
    if let Ok(env) = std::env::var("BENCH_SCENARIOS") {
        names.extend(
            env.split([',', ' '])
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        );
    }
    if names.is_empty() {
        names.push("default".into());
    }
    let all = scenarios::all();
    let mut out = Vec::new();
    for name in names {
        match name.as_str() {
            "default" => {
                out.extend(["pgbench".to_owned(), "pgcron".to_owned()]);
                out.extend(all.iter().filter(|s| s.default).map(|s| s.name.to_owned()));
            }
            "failover" => out.extend(["failover-sync".to_owned(), "failover-async".to_owned()]),
            "all" => {
                out.extend(["pgbench".to_owned(), "pgcron".to_owned()]);
                out.extend(all.iter().map(|s| s.name.to_owned()));
            }
            other => out.push(other.to_owned()),
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|n| seen.insert(n.clone()));
    out
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--target") {
        let runtime = tokio::runtime::Runtime::new().expect("a runtime");
        return match runtime.block_on(target::run_process()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("target: {err:#}");
                ExitCode::FAILURE
            }
        };
    }
    if args.iter().any(|a| a == "--list") {
        return ExitCode::SUCCESS;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    // Ctrl-C drops the run: serve and the target are killed (`kill_on_drop`), the pg_cron
    // cluster is stopped and temporary directories are removed; a scenario's database stays.
    let interrupted = async {
        let _ = tokio::signal::ctrl_c().await;
        anyhow::bail!("interrupted; drop the s8cbench_* databases it leaves")
    };
    let outcome = runtime.block_on(async {
        tokio::select! {
            outcome = run(&args) => outcome,
            outcome = interrupted => outcome,
        }
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("dispatch_latency: {err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: &[String]) -> anyhow::Result<()> {
    let names = selection(args);
    let known: Vec<&str> = scenarios::all().iter().map(|s| s.name).collect();
    for name in &names {
        anyhow::ensure!(
            ["pgbench", "pgcron", "pgcron-1s"].contains(&name.as_str())
                || known.contains(&name.as_str()),
            "unknown scenario {name:?}; known: pgbench, pgcron, pgcron-1s, {}, failover, default, \
             all",
            known.join(", ")
        );
    }
    let bin = PathBuf::from(
        std::env::var("SENTIN8_CRON_BENCH_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_sentin8-cron").to_owned()),
    );
    let version = std::process::Command::new(&bin)
        .arg("--version")
        .output()
        .with_context(|| format!("cannot run {}", bin.display()))?;
    let admin_url = std::env::var("SENTIN8_CRON_BENCH_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    let scale: f64 = std::env::var("BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let minutes = std::env::var("BENCH_MINUTES")
        .ok()
        .and_then(|s| s.parse().ok());
    let serve_args: Vec<String> = std::env::var("BENCH_SERVE_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();

    let sampler = Sampler::start();
    let target = Target::start().await?;
    sampler.watch_target(target.pid);
    let postmaster = match PgConnection::connect(&admin_url).await {
        Ok(mut conn) => {
            let backend: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
                .fetch_one(&mut conn)
                .await?;
            procstat::parent(backend as u32)
        }
        Err(_) => None,
    };
    println!("# Dispatch latency");
    println!();
    println!(
        "- started {} UTC; {} cores; load average {}",
        chrono::Utc::now().format("%Y-%m-%d %H:%M:%S"),
        cores(),
        load_average()
    );
    println!(
        "- binary: {} ({})",
        bin.display(),
        String::from_utf8_lossy(&version.stdout)
            .lines()
            .collect::<Vec<_>>()
            .join("; ")
    );
    println!(
        "- target: one process, listeners on 127.0.0.1:{} (200 at once), :{} (200 after 1 s), \
         :{} (never answers); HTTP/1.1 and h2c",
        target.fast, target.slow, target.hang
    );
    println!("- scale {scale}; running: {}", names.join(", "));
    println!();

    let ctx = Context {
        bin,
        admin_url,
        scale,
        minutes,
        serve_args,
        sampler,
        target,
        postmaster,
    };
    let all = scenarios::all();
    let pg5k_n = all
        .iter()
        .find(|s| s.name == "pg-5k")
        .map(|s| scenarios::scaled(s.clone(), scale, None).groups[0].schedules)
        .unwrap_or(5_000);
    let pgcron_n = std::env::var("BENCH_PGCRON_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(pg5k_n);
    let pgcron_seconds_n = std::env::var("BENCH_PGCRON_SECONDS_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000);

    let mut tps = None;
    let mut pgcron_runs = Vec::new();
    let mut outcomes = Vec::new();
    for name in &names {
        match name.as_str() {
            "pgbench" => match pgcron::pgbench(&ctx.admin_url).await {
                Ok(t) => {
                    println!(
                        "## pgbench\n\n`pgbench -c 4 -T 10` on a scratch database of the shared \
                         cluster (scale 1): **{t:.0} TPS** (load average {})\n",
                        load_average()
                    );
                    tps = Some(t);
                }
                Err(err) => println!("## pgbench\n\nfailed: {err:#}\n"),
            },
            "pgcron" | "pgcron-1s" => {
                let (schedule, n) = if name == "pgcron" {
                    (pgcron::EVERY_MINUTE, pgcron_n)
                } else {
                    (pgcron::EVERY_SECOND, pgcron_seconds_n)
                };
                println!("## pg_cron reference: {n} jobs `{}`\n", schedule.text);
                println!("{}\n", pgcron::describe());
                let minutes = ctx.minutes.unwrap_or(1);
                match pgcron::burst(n, minutes, schedule, &ctx.sampler).await {
                    Ok(run) => {
                        print_pgcron(&run);
                        pgcron_runs.push(run);
                    }
                    Err(err) => println!("failed: {err:#}\n"),
                }
            }
            scenario => {
                let s = all
                    .iter()
                    .find(|s| s.name == scenario)
                    .cloned()
                    .expect("checked above");
                let s = scenarios::scaled(s, ctx.scale, ctx.minutes);
                match run_scenario(&ctx, s.clone()).await {
                    Ok(outcome) => outcomes.push(outcome),
                    Err(err) => println!("## {}\n\nfailed: {err:#}\n", s.name),
                }
            }
        }
    }
    print_summary(&outcomes, &pgcron_runs, tps);
    Ok(())
}

async fn run_scenario(ctx: &Context, scenario: Scenario) -> anyhow::Result<Outcome> {
    if let Some(mode) = scenario.failover {
        return failover::run(ctx, &scenario, mode).await;
    }
    let mut deployment = Deployment::prepare(
        &ctx.bin,
        &ctx.admin_url,
        &scenario,
        &ctx.target,
        &ctx.serve_args,
    )
    .await?;
    let result = measure(ctx, &scenario, &mut deployment).await;
    ctx.sampler.watch_serve(&[], None);
    deployment.remove().await;
    result
}

async fn start_instances(
    ctx: &Context,
    scenario: &Scenario,
    deployment: &mut Deployment,
) -> anyhow::Result<()> {
    let mut pids = Vec::new();
    for _ in 0..scenario.instances {
        pids.push(deployment.start_instance().await?);
    }
    let postgres = match (&deployment.db_name, ctx.postmaster) {
        (Some(db), Some(pm)) => Some((pm, db.clone())),
        _ => None,
    };
    ctx.sampler.watch_serve(&pids, postgres);
    Ok(())
}

async fn measure(
    ctx: &Context,
    scenario: &Scenario,
    deployment: &mut Deployment,
) -> anyhow::Result<Outcome> {
    let total: usize = scenario.groups.iter().map(|g| g.schedules).sum();
    // One-shots need their instants before they are enrolled: far enough ahead for the seed.
    let spread_from = next_boundary(now_micros() + 30_000_000 + total as i64 * 3_000);
    // On PostgreSQL the instances run while the schedules are enrolled, as in production;
    // the embedded store is seeded first (enroll and serve would contend for its one writer).
    if scenario.backend == Backend::Postgres {
        start_instances(ctx, scenario, deployment).await?;
    }
    let (seeded, seed_seconds) = deployment.seed(scenario, &ctx.target, spread_from).await?;
    if scenario.backend == Backend::Sqlite {
        start_instances(ctx, scenario, deployment).await?;
    }
    let first = match scenario.due {
        Due::EveryMinute | Due::EverySecond => next_boundary(now_micros() + 3_000_000),
        Due::SpreadOverMinute => {
            anyhow::ensure!(
                now_micros() < spread_from - 1_000_000,
                "the seed took {seed_seconds:.0} s, past the one-shots' first instant; \
                 run with a smaller BENCH_SCALE"
            );
            spread_from
        }
    };
    ctx.target.take();
    // Read after the seed and before the boundary (not at it: the bench's own query stays out
    // of the burst), so the burst's claims ahead are counted.
    let commits_before = records::commits(deployment).await;
    if let Some(fault) = scenario.fault.filter(|f| f.at_ms() < 0) {
        fault.strike(deployment, first).await;
    }
    sleep_until(first).await;
    ctx.sampler.sample_now();
    if let Some(fault) = scenario.fault.filter(|f| f.at_ms() >= 0) {
        fault.strike(deployment, first).await;
    }
    let killed_at = match scenario.kill_first_after_ms {
        Some(ms) => {
            let at = first + ms as i64 * 1000;
            sleep_until(at).await;
            deployment.kill_first();
            Some(now_micros())
        }
        None => None,
    };
    // Scenarios with quiet schedules read the API and the admin pages in the last measured
    // minute; the minutes before it give the cost per minute, the reads' own cost left out.
    let probe = scale::Probe::start(scenario, &seeded, deployment, first).await?;
    let mut loads = Vec::new();
    for m in 1..=scenario.minutes as i64 {
        sleep_until(first + m * MINUTE_US).await;
        ctx.sampler.sample_now();
        loads.push((first + (m - 1) * MINUTE_US, load_average()));
    }
    let commits_after = records::commits(deployment).await;
    // Calls of the last minute's occurrences still arriving get a second more.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let mut durable_lines = Vec::new();
    for (i, url) in deployment.urls.iter().enumerate() {
        durable_lines.push(match durable::read(url).await {
            Ok(d) => d.line(i),
            Err(err) => format!("- answers made durable, serve #{i}: not read ({err:#})"),
        });
    }
    let memory = scale::memory_of(deployment);
    deployment.stop().await;
    let arrivals = ctx.target.take();
    let records = records::read(deployment).await?;
    let held = scale::Held::gather(
        scenario,
        &seeded,
        deployment,
        (&records, &arrivals),
        memory,
        probe,
    )
    .await?;
    // Quiet schedules are not due in the measured minutes: `held` counts any call of one.
    let mut group_of_env = HashMap::new();
    for (group, seeded) in scenario.groups.iter().zip(&seeded) {
        for env in seeded.envs.iter().filter(|_| !group.quiet) {
            group_of_env.insert(env.clone(), group.name.to_owned());
        }
    }
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
    let windows: Vec<_> = loads
        .into_iter()
        .map(|(minute, load)| (minute, ctx.sampler.window(minute, minute + MINUTE_US), load))
        .collect();

    let scaled = if ctx.scale == 1.0 {
        String::new()
    } else {
        format!(" (sizes × {}, below)", ctx.scale)
    };
    println!("## {}: {}{scaled}\n", scenario.name, scenario.about);
    for group in &scenario.groups {
        println!(
            "- group {}: {} schedules over {} environment{}, target {}",
            group.name,
            group.schedules,
            group.envs,
            if group.envs == 1 { "" } else { "s" },
            group.target.name()
        );
    }
    println!(
        "- serve ×{}: `{}`",
        scenario.instances,
        deployment.serve_command_shown()
    );
    println!(
        "- seeded with `sentin8-cron enroll` (one per environment) in {seed_seconds:.1} s \
         ({:.0} schedules a second), before the first measured minute; records read from {}",
        scenario.groups.iter().map(|g| g.schedules).sum::<usize>() as f64 / seed_seconds.max(0.001),
        records.sources.join(", ")
    );
    held.print();
    let counted = scenario
        .fault
        .or(scenario.kill_first_after_ms.map(|ms| fault::Fault::Kill {
            at_ms: i64::try_from(ms).unwrap_or(i64::MAX),
        }));
    if let Some(fault) = counted {
        let expected = scenario.groups.iter().map(|g| g.schedules).sum();
        let count = fault::count(&deployment.owner_url, &arrivals, first, expected).await?;
        println!("{}", fault::table(fault, &count));
    }
    if let (Some(at), Some(ms)) = (killed_at, scenario.kill_first_after_ms) {
        let count = kill::count(&deployment.owner_url, &arrivals, first, at).await?;
        println!("{}", kill::table(&count, ms));
    }
    let http2: usize = analysis.totals.values().map(|s| s.http2).sum();
    let fired: usize = analysis.totals.values().map(|s| s.fired).sum();
    println!("- calls over HTTP/2: {http2} of {fired}");
    if let (Some(before), Some(after)) = (commits_before, commits_after) {
        // Fires that share an instant share their writes; this shows how well they did.
        println!(
            "- transactions committed on the database from the end of the seed to the end of the \
             last measured minute (claims ahead of the burst after it included): {} \
             (pg_stat_database)",
            after - before
        );
    }
    println!();
    if let Some(jitter) = scenario.max_jitter {
        println!(
            "- every schedule declared with `max_jitter: {}s`: p50/p99/max below count from \
             each call's own instant (the boundary plus its offset), not from the boundary\n",
            jitter.as_secs()
        );
    }
    println!("{}", report::lateness_table(&analysis, scenario.instances));
    if scenario.due == Due::EverySecond {
        let to = first + i64::from(scenario.minutes) * 60_000_000;
        println!("{}", report::slowest_instants(&arrivals, first, to, 8));
    }
    for line in &durable_lines {
        println!("{line}");
    }
    println!();
    let envs = plan.group_of_env.keys().cloned().collect();
    let spreads = spread::analyse(
        &records,
        &arrivals,
        &envs,
        first,
        scenario.minutes,
        scenario.max_jitter,
    );
    for s in &spreads {
        println!("{}", s.table());
    }
    println!(
        "{}",
        report::cpu_table(
            &windows,
            scenario.instances,
            scenario.backend == Backend::Sqlite
        )
    );
    let costed = held.costed(&windows);
    let per_minute = |cpu: &dyn Fn(&procstat::CpuWindow) -> f64| {
        costed.iter().map(|(_, w, _)| cpu(w)).sum::<f64>() / costed.len().max(1) as f64
    };
    let serve_cpu = per_minute(&|w| w.sum("serve#"));
    let db_cpu = per_minute(&|w| w.get("db"));
    let headline = analysis
        .totals
        .get(scenario.headline)
        .cloned()
        .unwrap_or_default();
    Ok(Outcome {
        scenario: scenario.clone(),
        headline,
        serve_cpu_per_minute: serve_cpu,
        db_cpu_per_minute: db_cpu,
        seed_seconds,
        spread: spreads.iter().map(spread::Spread::line).collect(),
    })
}
