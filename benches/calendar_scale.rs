//! What a shared holiday calendar costs 10,000 schedules: their next fires computed with the
//! exclusions checked (as a claim checks each occurrence, and as `next-fires` and the pages
//! find the next call that runs) beside the same without, and `enroll` of the same 10,000
//! written with `exclude: [holidays]` beside without, with the real binary, on PostgreSQL
//! (a fresh database, the service role) and on the embedded SQLite.
//!
//! `cargo build --release && cargo bench --bench calendar_scale`; `SENTIN8_CRON_BENCH_BIN`
//! names the binary (default `target/release/sentin8-cron`), `SENTIN8_CRON_BENCH_PG` the
//! PostgreSQL server's admin URL (default `postgres://postgres@127.0.0.1:5432/postgres`;
//! `none` leaves PostgreSQL out), `CALENDAR_SCHEDULES` the count (10,000).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sentin8_cron::core::calendar::{Calendar, Calendars};
use sentin8_cron::core::decl::{DeclFormat, ScheduleSpec, declared_calendars, load_declarations};
use sentin8_cron::core::model::ScheduleId;
use sentin8_cron::core::policies::Occurrences;
use sqlx::{Connection, Executor, PgConnection};

#[path = "support/bench_env.rs"]
#[allow(dead_code)]
mod bench_env;

/// US federal holidays, as a holiday feed gives them: the yearly ones as cron-like specs, the
/// observed days of ten years as dates, and a year-end freeze as a range.
fn holidays() -> Vec<(String, &'static str)> {
    let mut entries: Vec<(String, &'static str)> = [
        ("* * 1 1 *", "New Year's Day"),
        ("* * * 1 MON#3", "Martin Luther King Jr. Day"),
        ("* * * 2 MON#3", "Washington's Birthday"),
        ("* * * 5 MONL", "Memorial Day"),
        ("* * 19 6 *", "Juneteenth"),
        ("* * 4 7 *", "Independence Day"),
        ("* * * 9 MON#1", "Labor Day"),
        ("* * * 10 MON#2", "Columbus Day"),
        ("* * 11 11 *", "Veterans Day"),
        ("* * * 11 THU#4", "Thanksgiving Day"),
        ("* * 25 12 *", "Christmas Day"),
    ]
    .map(|(spec, note)| (spec.to_owned(), note))
    .to_vec();
    for year in 2026..2036 {
        entries.push((format!("{year}-07-03"), "Independence Day (observed)"));
        entries.push((format!("{year}-12-24"), "Christmas Eve"));
        entries.push((format!("{year}-12-27..{year}-12-31"), "year-end freeze"));
    }
    entries
}

const EXPRESSIONS: &[&str] = &[
    "0 9 * * MON-FRI",
    "30 18 * * MON-FRI",
    "*/15 * * * *",
    "0 2 * * *",
    "15 6 1 * *",
    "0 */4 * * *",
];
const ZONES: &[&str] = &[
    "UTC",
    "America/New_York",
    "Europe/Berlin",
    "Asia/Tokyo",
    "America/Los_Angeles",
];

/// A declaration document of `n` schedules, each naming the calendar when `excluded`, with the
/// calendar declared beside them.
fn document(n: usize, excluded: bool) -> String {
    let mut text = String::new();
    if excluded {
        text.push_str(
            "calendars:\n  holidays:\n    description: US federal holidays\n    entries:\n",
        );
        for (spec, note) in holidays() {
            let _ = writeln!(text, "      - {{ spec: \"{spec}\", note: \"{note}\" }}");
        }
    }
    text.push_str("schedules:\n");
    for i in 0..n {
        let expr = EXPRESSIONS[i % EXPRESSIONS.len()];
        let zone = ZONES[(i / EXPRESSIONS.len()) % ZONES.len()];
        let _ = writeln!(
            text,
            "  - schedule_type: report.r{i}\n    cron: \"{expr}\"\n    timezone: {zone}"
        );
        if excluded {
            text.push_str("    exclude: [holidays]\n");
        }
    }
    text
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// The next call of each schedule after `now`: alone (`None`), checked against the calendar
/// (the claim's work), or walked to the first that is not excluded (what `next-fires` shows).
#[derive(Clone, Copy, PartialEq)]
enum Work {
    NextCall,
    Checked,
    FirstRunning,
}

fn next_fires(
    specs: &[(ScheduleSpec, ScheduleId)],
    calendars: &Calendars,
    now: DateTime<Utc>,
    work: Work,
) -> usize {
    let mut excluded = 0;
    for (spec, id) in specs {
        let occurrences = Occurrences {
            timing: &spec.timing,
            policies: &spec.policies,
            seed: *id,
        };
        let mut after = now;
        while let Ok(Some((occurrence, call))) = occurrences.next_with_occurrence(after) {
            if work == Work::NextCall {
                std::hint::black_box(call);
                break;
            }
            let wall = spec.timing.wall_time(occurrence);
            let hit = wall.and_then(|w| spec.exclude.excluding(w, calendars));
            if hit.is_none() || work == Work::Checked {
                excluded += usize::from(hit.is_some());
                break;
            }
            excluded += 1;
            after = call;
        }
    }
    excluded
}

fn pure(n: usize) {
    let now = Utc::now();
    let plain = load_declarations(&document(n, false), DeclFormat::Yaml, now).unwrap();
    let text = document(n, true);
    let with = load_declarations(&text, DeclFormat::Yaml, now).unwrap();
    let declared = declared_calendars(&text, DeclFormat::Yaml).unwrap();
    let entries = declared[0].draft.validate().unwrap();
    let calendars: Calendars = [(
        "holidays".to_owned(),
        Calendar::new("holidays".into(), String::new(), entries, "bench", now),
    )]
    .into();
    let ids: Vec<ScheduleId> = (0..n).map(|_| ScheduleId::new()).collect();
    let plain: Vec<(ScheduleSpec, ScheduleId)> = plain.into_iter().zip(ids.clone()).collect();
    let with: Vec<(ScheduleSpec, ScheduleId)> = with.into_iter().zip(ids).collect();
    // Instants spread over a year, so holidays, weekends and ordinary days all come up.
    let starts: Vec<DateTime<Utc>> = (0..12)
        .map(|m| now + chrono::Duration::days(30 * m) + chrono::Duration::minutes(37 * m))
        .collect();
    println!(
        "## Next fires of {n} schedules with one shared calendar of {} entries (median of 7 rounds of 12 instants)\n",
        holidays().len()
    );
    println!("| work | without the calendar | with it | ratio |\n|---|---|---|---|");
    for (label, work) in [
        ("next call (`next_run_at`)", Work::NextCall),
        ("next call, its occurrence checked (a claim)", Work::Checked),
        (
            "first call that runs (`next-fires`, the pages)",
            Work::FirstRunning,
        ),
    ] {
        let mut without = Vec::new();
        let mut within = Vec::new();
        let mut excluded = 0;
        for _ in 0..7 {
            let started = Instant::now();
            for at in &starts {
                next_fires(&plain, &calendars, *at, work);
            }
            without.push(started.elapsed() / (starts.len() * n) as u32);
            let started = Instant::now();
            excluded = 0;
            for at in &starts {
                excluded += next_fires(&with, &calendars, *at, work);
            }
            within.push(started.elapsed() / (starts.len() * n) as u32);
        }
        let (a, b) = (median(without), median(within));
        println!(
            "| {label} | {:.0} ns | {:.0} ns | {:.2}x ({excluded} of {} excluded) |",
            a.as_nanos(),
            b.as_nanos(),
            b.as_secs_f64() / a.as_secs_f64(),
            starts.len() * n
        );
    }
    println!();
}

fn run(bin: &Path, args: &[&str]) -> Duration {
    let started = Instant::now();
    let output = Command::new(bin)
        .args(args)
        .env("RUST_LOG", "error")
        .output()
        .expect("the binary runs");
    let took = started.elapsed();
    assert!(
        output.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    took
}

/// Times `enroll` of the two documents into fresh environments, three times each.
fn enroll(bin: &Path, url: &str, dir: &Path, n: usize, label: &str) {
    let files: Vec<PathBuf> = [false, true]
        .iter()
        .map(|excluded| {
            let path = dir.join(format!("bench-{excluded}.yaml"));
            std::fs::write(&path, document(n, *excluded)).unwrap();
            path
        })
        .collect();
    let mut times = [Vec::new(), Vec::new()];
    for _ in 0..3 {
        for (which, file) in files.iter().enumerate() {
            let env = uuid::Uuid::now_v7().to_string();
            let file = file.to_str().unwrap();
            times[which].push(run(
                bin,
                &[
                    "enroll",
                    "--env",
                    &env,
                    "--domain",
                    "reports",
                    "--file",
                    file,
                    "--platform-domain",
                    "apps.example.test",
                    "--database-url",
                    url,
                ],
            ));
        }
    }
    let [without, with] = times.map(median);
    println!(
        "| {label} | {:.2} s | {:.2} s | {:.2}x |",
        without.as_secs_f64(),
        with.as_secs_f64(),
        with.as_secs_f64() / without.as_secs_f64()
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let n = bench_env::count("CALENDAR_SCHEDULES", 10_000);
    pure(n);
    let bin = PathBuf::from(bench_env::env_or(
        "SENTIN8_CRON_BENCH_BIN",
        "target/release/sentin8-cron",
    ));
    if !bin.exists() {
        println!(
            "(enroll left out: no binary at {}; build it with cargo build --release)",
            bin.display()
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    println!("## `enroll` of {n} new schedules (median of 3, a fresh environment each)\n");
    println!(
        "| store | without `exclude` | with `exclude: [holidays]` | ratio |\n|---|---|---|---|"
    );
    let sqlite = format!("sqlite://{}", dir.path().join("bench.db").display());
    run(&bin, &["migrate", "--database-url", &sqlite]);
    enroll(&bin, &sqlite, dir.path(), n, "SQLite (embedded)");
    let admin = bench_env::env_or(
        "SENTIN8_CRON_BENCH_PG",
        "postgres://postgres@127.0.0.1:5432/postgres",
    );
    if admin == "none" {
        return;
    }
    let Ok(mut conn) = PgConnection::connect(&admin).await else {
        println!("(PostgreSQL left out: {admin} is not reachable)");
        return;
    };
    let name = format!("s8c_calendar_bench_{}", std::process::id());
    conn.execute(format!("CREATE DATABASE {name}").as_str())
        .await
        .unwrap();
    let host = admin
        .split_once('@')
        .and_then(|(_, rest)| rest.split('/').next())
        .unwrap_or("127.0.0.1:5432")
        .to_owned();
    run(
        &bin,
        &[
            "migrate",
            "--database-url",
            &format!("postgres://postgres@{host}/{name}"),
        ],
    );
    let service = format!("postgres://sentin8_cron_service@{host}/{name}");
    enroll(&bin, &service, dir.path(), n, "PostgreSQL (service role)");
    let _ = conn
        .execute(format!("DROP DATABASE {name} WITH (FORCE)").as_str())
        .await;
}
