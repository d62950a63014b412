//! From arrivals, records and CPU samples to the per-minute tables.
//!
//! An occurrence is (schedule, due instant): for a `* * * * *` schedule every measured minute
//! boundary, for a one-shot its `run_at`. With a `max_jitter` the due instant is the call
//! instant, the boundary plus the schedule's offset (`jitter_offset` of the library, the one
//! derivation serve uses too), so lateness counts from the instant the scheduler meant to call
//! at, not from the boundary. It fired when a call for it reached the target (`schedule_id` and
//! `scheduled_for` of the envelope, which carries the call instant); lateness is the first
//! arrival minus the due instant. Further arrivals of an occurrence are duplicates: with the
//! same idempotency key (the signature's `jti`; the same job delivered again) or with another
//! (a second job for the same occurrence). An occurrence is recorded when the database holds a
//! job for it (any status, a skipped one included) or a skipped range covering it; it is
//! unclaimed when the schedule's next fire had not yet moved past it when the instances stopped
//! (the instances were that far behind); otherwise it is missing.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use sentin8_cron::core::model::ScheduleId;
use sentin8_cron::core::policies::jitter_offset;

use crate::procstat::{CpuWindow, Sampler};
use crate::records::Records;
use crate::target::Arrival;

pub const MINUTE_US: i64 = 60_000_000;

#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub expected: usize,
    pub fired: usize,
    /// Lateness of each fired occurrence, microseconds, sorted.
    pub late_us: Vec<i64>,
    /// First arrivals before the due instant (a fire claimed ahead must wait for it).
    pub early: usize,
    pub dup_same_key: usize,
    pub dup_new_job: usize,
    /// Occurrences the database holds more than one (not skipped) job for.
    pub db_double: usize,
    pub skipped: usize,
    pub missing: usize,
    pub unclaimed: usize,
    /// First arrivals per serve instance (by the caller's local port); the last is unknown.
    pub per_instance: Vec<usize>,
    pub http2: usize,
}

impl Stats {
    fn merge(&mut self, other: &Stats) {
        self.expected += other.expected;
        self.fired += other.fired;
        self.late_us.extend(&other.late_us);
        self.late_us.sort_unstable();
        self.early += other.early;
        self.dup_same_key += other.dup_same_key;
        self.dup_new_job += other.dup_new_job;
        self.db_double += other.db_double;
        self.skipped += other.skipped;
        self.missing += other.missing;
        self.unclaimed += other.unclaimed;
        if self.per_instance.len() < other.per_instance.len() {
            self.per_instance.resize(other.per_instance.len(), 0);
        }
        for (a, b) in self.per_instance.iter_mut().zip(&other.per_instance) {
            *a += b;
        }
        self.http2 += other.http2;
    }

    /// Nearest-rank percentile of the lateness.
    pub fn percentile(&self, p: f64) -> Option<i64> {
        nearest_rank(&self.late_us, p)
    }
}

/// Nearest-rank percentile of sorted values.
pub fn nearest_rank<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// Per (group name, minute start) statistics, and per group over every minute.
pub struct Analysis {
    pub minutes: BTreeMap<(String, i64), Stats>,
    pub totals: BTreeMap<String, Stats>,
}

pub struct Plan<'a> {
    /// The group each environment belongs to.
    pub group_of_env: HashMap<String, String>,
    pub first_minute_us: i64,
    pub minutes: u32,
    pub instances: usize,
    pub sampler: &'a Sampler,
    /// The schedules' `max_jitter`, when they were declared with one.
    pub max_jitter: Option<Duration>,
    /// Occurrences of each repeating schedule in a minute, evenly spaced from its boundary (1
    /// for `* * * * *`, 60 for `every: 1s`).
    pub per_minute: i64,
}

/// The instant `schedule`'s call for the occurrence at `occurrence_us` is due: the occurrence
/// itself without a jitter (or with an id that is not a UUID, which no schedule has).
pub fn call_instant(schedule: &str, occurrence_us: i64, max_jitter: Option<Duration>) -> i64 {
    let (Some(max), Ok(id), Some(occurrence)) = (
        max_jitter,
        schedule.parse::<ScheduleId>(),
        chrono::DateTime::from_timestamp_micros(occurrence_us),
    ) else {
        return occurrence_us;
    };
    occurrence_us
        + jitter_offset(id, occurrence, max)
            .num_microseconds()
            .unwrap_or(0)
}

pub fn analyse(plan: &Plan, records: &Records, arrivals: &[Arrival]) -> Analysis {
    let window = plan.first_minute_us..plan.first_minute_us + plan.minutes as i64 * MINUTE_US;
    let mut by_occurrence: HashMap<(&str, i64), Vec<&Arrival>> = HashMap::new();
    for a in arrivals {
        by_occurrence
            .entry((a.schedule_id.as_str(), a.scheduled_for_us))
            .or_default()
            .push(a);
    }
    let mut jobs: HashMap<(&str, i64), Vec<&str>> = HashMap::new();
    for j in &records.jobs {
        jobs.entry((j.schedule_id.as_str(), j.scheduled_for_us))
            .or_default()
            .push(j.status.as_str());
    }
    let mut ranges: HashMap<&str, Vec<(i64, i64)>> = HashMap::new();
    for (s, first, last) in &records.ranges {
        ranges.entry(s.as_str()).or_default().push((*first, *last));
    }

    let mut minutes: BTreeMap<(String, i64), Stats> = BTreeMap::new();
    for schedule in &records.schedules {
        let Some(group) = plan.group_of_env.get(&schedule.env) else {
            continue;
        };
        let occurrences: Vec<i64> = match schedule.run_at_us {
            Some(at) => vec![at],
            None => (0..plan.minutes as i64 * plan.per_minute)
                .map(|i| {
                    let instant = plan.first_minute_us + i * MINUTE_US / plan.per_minute;
                    call_instant(&schedule.id, instant, plan.max_jitter)
                })
                .collect(),
        };
        for due in occurrences.into_iter().filter(|t| window.contains(t)) {
            let minute = due - due.rem_euclid(MINUTE_US);
            let stats = minutes.entry((group.clone(), minute)).or_default();
            if stats.per_instance.is_empty() {
                stats.per_instance = vec![0; plan.instances + 1];
            }
            stats.expected += 1;
            if let Some(list) = by_occurrence.get_mut(&(schedule.id.as_str(), due)) {
                list.sort_by_key(|a| a.at_us);
                let first = list[0];
                stats.fired += 1;
                stats.late_us.push(first.at_us - due);
                if first.at_us < due {
                    stats.early += 1;
                }
                stats.http2 += usize::from(first.http2);
                let keys: HashSet<&str> = list.iter().map(|a| a.key.as_str()).collect();
                stats.dup_same_key += list.len() - keys.len();
                stats.dup_new_job += keys.len() - 1;
                let instance = plan
                    .sampler
                    .instance_of_port(first.peer_port)
                    .unwrap_or(plan.instances);
                stats.per_instance[instance.min(plan.instances)] += 1;
            }
            let statuses = jobs
                .get(&(schedule.id.as_str(), due))
                .map(Vec::as_slice)
                .unwrap_or_default();
            let fired_jobs = statuses.iter().filter(|s| **s != "skipped").count();
            stats.db_double += fired_jobs.saturating_sub(1);
            let skipped = statuses.contains(&"skipped")
                || ranges
                    .get(schedule.id.as_str())
                    .is_some_and(|r| r.iter().any(|(f, l)| (*f..=*l).contains(&due)));
            stats.skipped += usize::from(skipped && fired_jobs == 0);
            if statuses.is_empty() && !skipped {
                if schedule.next_run_us.is_some_and(|next| next <= due) {
                    stats.unclaimed += 1;
                } else {
                    stats.missing += 1;
                }
            }
        }
    }
    for stats in minutes.values_mut() {
        stats.late_us.sort_unstable();
    }
    let mut totals: BTreeMap<String, Stats> = BTreeMap::new();
    for ((group, _), stats) in &minutes {
        totals.entry(group.clone()).or_default().merge(stats);
    }
    Analysis { minutes, totals }
}

/// "87 ms", "4.12 s".
pub fn duration(us: Option<i64>) -> String {
    match us {
        None => "–".into(),
        Some(us) if us.abs() < 1_000_000 => format!("{} ms", us / 1000),
        Some(us) => format!("{:.2} s", us as f64 / 1e6),
    }
}

pub fn utc(us: i64) -> String {
    chrono::DateTime::from_timestamp_micros(us)
        .map(|t| t.format("%H:%M").to_string())
        .unwrap_or_default()
}

pub fn lateness_table(analysis: &Analysis, instances: usize) -> String {
    let mut out = String::from(
        "| minute (UTC) | group | fired/N | p50 | p99 | max | early | dup same key | dup new job | db double | skipped | missing | unclaimed |",
    );
    if instances > 1 {
        out.push_str(" first calls per instance |");
    }
    out.push_str("\n|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    if instances > 1 {
        out.push_str("---|");
    }
    out.push('\n');
    for ((group, minute), s) in &analysis.minutes {
        out.push_str(&format!(
            "| {} | {group} | {}/{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            utc(*minute),
            s.fired,
            s.expected,
            duration(s.percentile(0.50)),
            duration(s.percentile(0.99)),
            duration(s.late_us.last().copied()),
            s.early,
            s.dup_same_key,
            s.dup_new_job,
            s.db_double,
            s.skipped,
            s.missing,
            s.unclaimed,
        ));
        if instances > 1 {
            let mut parts: Vec<String> = s.per_instance[..instances]
                .iter()
                .map(|n| n.to_string())
                .collect();
            if s.per_instance[instances] > 0 {
                parts.push(format!("{} unattributed", s.per_instance[instances]));
            }
            out.push_str(&format!(" {} |", parts.join(" / ")));
        }
        out.push('\n');
    }
    out
}

pub fn cpu_table(windows: &[(i64, CpuWindow, String)], instances: usize, sqlite: bool) -> String {
    let mut out = String::from(
        "| minute (UTC) | serve | database | db background (shared) | target | rest of the machine | machine busy | load avg |\n|---|---|---|---|---|---|---|---|\n",
    );
    for (minute, w, load) in windows {
        let serve = w.sum("serve#");
        let ours = serve + w.get("db") + w.get("db-aux") + w.get("target");
        let serve_text = if instances > 1 {
            let each: Vec<String> = (0..instances)
                .map(|i| format!("{:.1}", w.get(&format!("serve#{i}"))))
                .collect();
            format!("{serve:.1} s ({})", each.join(" + "))
        } else {
            format!("{serve:.1} s")
        };
        let db = if sqlite {
            "in serve".to_owned()
        } else {
            format!("{:.1} s", w.get("db"))
        };
        out.push_str(&format!(
            "| {} | {serve_text} | {db} | {:.1} s | {:.1} s | {:.1} s | {:.1} s of {:.0} | {load} |\n",
            utc(*minute),
            w.get("db-aux"),
            w.get("target"),
            (w.machine - ours).max(0.0),
            w.machine,
            60.0 * crate::cores() as f64,
        ));
    }
    out
}

/// For schedules that share their instants (`every: 1s`): the instants whose calls came latest
/// (each instant's p99 and slowest call), so a late minute shows whether it was one instant
/// (something beside the burst) or all of them.
pub fn slowest_instants(arrivals: &[Arrival], from_us: i64, to_us: i64, shown: usize) -> String {
    let mut per_instant: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for a in arrivals {
        if (from_us..to_us).contains(&a.scheduled_for_us) {
            per_instant
                .entry(a.scheduled_for_us)
                .or_default()
                .push(a.at_us - a.scheduled_for_us);
        }
    }
    let mut rows: Vec<(i64, i64, i64)> = per_instant
        .into_iter()
        .map(|(instant, mut late)| {
            late.sort_unstable();
            let p99 = nearest_rank(&late, 0.99).unwrap_or_default();
            (instant, p99, *late.last().unwrap_or(&0))
        })
        .collect();
    let instants = rows.len();
    let over_50ms = rows.iter().filter(|(_, p99, _)| *p99 > 50_000).count();
    rows.sort_by_key(|(_, p99, _)| std::cmp::Reverse(*p99));
    let mut out = format!(
        "The {shown} instants with the latest calls of {instants} (instants with p99 over 50 ms: \
         {over_50ms})\n\n| instant (UTC) | p99 | slowest |\n|---|---|---|\n"
    );
    for (instant, p99, max) in rows.into_iter().take(shown) {
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            chrono::DateTime::from_timestamp_micros(instant)
                .map(|t| t.format("%H:%M:%S").to_string())
                .unwrap_or_default(),
            duration(Some(p99)),
            duration(Some(max))
        ));
    }
    out
}
