//! Next-fire and parse timings of the cron engine next to the `cron` and `croner` crates.
//!
//! Every implementation gets the same expressions (spelled in its own dialect: `cron` wants a
//! seconds field and names for weekdays) and the same start instant, in UTC and in
//! America/New_York.

use std::hint::black_box;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use sentin8_cron::core::cron::{CronExpr, OnDstGap, OnDstRepeat, ZonedCron, parse_timezone};

/// (label, ours and croner, `cron` crate with seconds)
const EXPRESSIONS: &[(&str, &str, Option<&str>)] = &[
    ("every-minute", "* * * * *", Some("0 * * * * *")),
    ("every-15-min", "*/15 * * * *", Some("0 */15 * * * *")),
    ("daily-midnight", "0 0 * * *", Some("0 0 0 * * *")),
    ("weekdays-0230", "30 2 * * 1-5", Some("0 30 2 * * Mon-Fri")),
    ("monthly-first", "0 0 1 * *", Some("0 0 0 1 * *")),
    ("second-monday", "0 9 * * MON#2", None),
    ("leap-day", "0 0 29 2 *", Some("0 0 0 29 2 *")),
    // Six fields, a second first: the same text for every implementation that reads it.
    ("every-15-sec", "*/15 * * * * *", Some("*/15 * * * * *")),
    (
        "weekdays-023010",
        "10 30 2 * * 1-5",
        Some("10 30 2 * * Mon-Fri"),
    ),
];

fn start() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2025-06-15T10:17:23Z")
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_default()
}

fn next_fire(c: &mut Criterion) {
    let t = start();
    // A zone's first use parses its TZif data and builds its transition table: a one-off cost
    // per zone and process, outside the figures below, reported once.
    let started = std::time::Instant::now();
    let paris = parse_timezone("Europe/Paris").unwrap();
    let first = ZonedCron::new(
        CronExpr::parse("0 0 * * *").unwrap(),
        paris,
        OnDstGap::Shift,
        OnDstRepeat::Once,
    )
    .next_after(t);
    eprintln!(
        "first use of a zone (Europe/Paris, next fire {first:?}): {:?}",
        started.elapsed()
    );
    // The peers read zones from chrono-tz; ours come from the process's tz database.
    let ny = parse_timezone("America/New_York").unwrap();
    let t_ny = t.with_timezone(&Tz::America__New_York);

    let mut utc = c.benchmark_group("next_utc");
    for &(label, text, cron_text) in EXPRESSIONS {
        let ours = CronExpr::parse(text).unwrap();
        utc.bench_function(BenchmarkId::new("sentin8", label), |b| {
            b.iter(|| black_box(&ours).next_after(black_box(t)))
        });
        if let Some(cron_text) = cron_text {
            let schedule = cron::Schedule::from_str(cron_text).unwrap();
            utc.bench_function(BenchmarkId::new("cron", label), |b| {
                b.iter(|| black_box(&schedule).after(black_box(&t)).next())
            });
        }
        if let Ok(croner) = croner::Cron::from_str(text) {
            utc.bench_function(BenchmarkId::new("croner", label), |b| {
                b.iter(|| black_box(&croner).find_next_occurrence(black_box(&t), false))
            });
        }
    }
    utc.finish();

    let mut zoned = c.benchmark_group("next_new_york");
    for &(label, text, cron_text) in EXPRESSIONS {
        let ours = ZonedCron::new(
            CronExpr::parse(text).unwrap(),
            ny,
            OnDstGap::Shift,
            OnDstRepeat::Once,
        );
        // Build the zone's transition table outside the measurement.
        black_box(ours.next_fire_after(t));
        zoned.bench_function(BenchmarkId::new("sentin8", label), |b| {
            b.iter(|| black_box(&ours).next_fire_after(black_box(t)))
        });
        if let Some(cron_text) = cron_text {
            let schedule = cron::Schedule::from_str(cron_text).unwrap();
            zoned.bench_function(BenchmarkId::new("cron", label), |b| {
                b.iter(|| black_box(&schedule).after(black_box(&t_ny)).next())
            });
        }
        if let Ok(croner) = croner::Cron::from_str(text) {
            zoned.bench_function(BenchmarkId::new("croner", label), |b| {
                b.iter(|| black_box(&croner).find_next_occurrence(black_box(&t_ny), false))
            });
        }
    }
    zoned.finish();
}

fn parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse");
    for &(label, text, cron_text) in EXPRESSIONS {
        group.bench_function(BenchmarkId::new("sentin8", label), |b| {
            b.iter(|| CronExpr::parse(black_box(text)))
        });
        if let Some(cron_text) = cron_text {
            group.bench_function(BenchmarkId::new("cron", label), |b| {
                b.iter(|| cron::Schedule::from_str(black_box(cron_text)))
            });
        }
        if croner::Cron::from_str(text).is_ok() {
            group.bench_function(BenchmarkId::new("croner", label), |b| {
                b.iter(|| croner::Cron::from_str(black_box(text)))
            });
        }
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50)
}

criterion_group! {
    name = benches;
    config = config();
    targets = next_fire, parse
}
criterion_main!(benches);
