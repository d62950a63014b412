//! The report's closing tables: pg_cron's run beside ours, and the summary of every scenario.

use super::*;

pub(crate) fn print_pgcron(run: &pgcron::PgCronRun) {
    println!(
        "pg_cron {}; failed runs: {}\n",
        run.version, run.failed_runs
    );
    println!(
        "| minute (UTC) | fired/N | p50 | p99 | max | twice in one period (minute or second) | CPU of the pg_cron cluster | machine busy | load avg |\n|---|---|---|---|---|---|---|---|---|"
    );
    for (minute, s, cpu, load) in &run.minutes {
        println!(
            "| {} | {}/{} | {} | {} | {} | {} | {:.1} s | {:.1} s of {:.0} | {load} |",
            report::utc(*minute),
            s.fired,
            s.expected,
            report::duration(s.percentile(0.5)),
            report::duration(s.percentile(0.99)),
            report::duration(s.late_us.last().copied()),
            s.dup_same_key,
            cpu.get("pgcron"),
            cpu.machine,
            60.0 * cores() as f64
        );
    }
    println!();
}

pub(crate) fn print_summary(
    outcomes: &[Outcome],
    pgcron_runs: &[pgcron::PgCronRun],
    tps: Option<f64>,
) {
    println!("## Summary\n");
    println!(
        "| scenario | backend | serve | N | fired | p50 | p99 | max | early | duplicates | missing / unclaimed | serve CPU per minute | database CPU per minute | serve + database CPU per call | seed |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for o in outcomes {
        let s = &o.headline;
        let backend = match o.scenario.backend {
            Backend::Postgres => "PostgreSQL",
            Backend::Sqlite => "SQLite",
        };
        let n: usize = o.scenario.groups.iter().map(|g| g.schedules).sum();
        let label = if o.scenario.headline == "all" {
            o.scenario.name.to_owned()
        } else {
            format!("{} (group {})", o.scenario.name, o.scenario.headline)
        };
        // Calls a measured minute made, on average, and what each cost serve and the database.
        let calls_per_minute = s.fired as f64 / f64::from(o.scenario.minutes.max(1));
        let per_call_ms =
            1000.0 * (o.serve_cpu_per_minute + o.db_cpu_per_minute) / calls_per_minute.max(1.0);
        println!(
            "| {label} | {backend} | {} | {n} | {}/{} | {} | {} | {} | {} | {} | {} / {} | {:.1} s | {:.1} s | {per_call_ms:.2} ms | {:.0} s |",
            o.scenario.instances,
            s.fired,
            s.expected,
            report::duration(s.percentile(0.5)),
            report::duration(s.percentile(0.99)),
            report::duration(s.late_us.last().copied()),
            s.early,
            s.dup_same_key + s.dup_new_job + s.db_double,
            s.missing,
            s.unclaimed,
            o.serve_cpu_per_minute,
            o.db_cpu_per_minute,
            o.seed_seconds,
        );
    }
    for run in pgcron_runs {
        let mut all = Stats::default();
        for (_, s, _, _) in &run.minutes {
            all.expected += s.expected;
            all.fired += s.fired;
            all.late_us.extend(&s.late_us);
        }
        all.late_us.sort_unstable();
        // pg_cron's work is its cluster's (the scheduler and a backend per job).
        let cluster: f64 = run
            .minutes
            .iter()
            .map(|(_, _, cpu, _)| cpu.get("pgcron"))
            .sum();
        let per_call_ms = 1000.0 * cluster / (all.fired as f64).max(1.0);
        let per_minute = cluster / run.minutes.len().max(1) as f64;
        println!(
            "| pg_cron {} `{}` (reference) | PostgreSQL, private cluster | – | {} | {}/{} | {} | {} | {} | – | – | – | – | {per_minute:.1} s (its cluster) | {per_call_ms:.2} ms | – |",
            run.version,
            run.schedule,
            run.n,
            all.fired,
            all.expected,
            report::duration(all.percentile(0.5)),
            report::duration(all.percentile(0.99)),
            report::duration(all.late_us.last().copied()),
        );
    }
    for o in outcomes {
        for line in &o.spread {
            println!("\n{} spread, {line}", o.scenario.name);
        }
    }
    if let Some(tps) = tps {
        println!("\npgbench TPS in this run: {tps:.0}");
    }
    println!("\nload average at the end: {}", load_average());
}
