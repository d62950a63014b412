//! Engine and relay counters, and their Prometheus text rendering. Lock-free: the hot path only
//! increments atomics.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use crate::core::model::EnvId;
use crate::core::store::StoreStats;

mod calls;
mod per_env;

pub use calls::{CallClass, CallMetrics};
pub use per_env::{EnvBreakdown, EnvCounter};

/// A histogram with fixed bucket bounds (seconds).
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<AtomicU64>,
    sum_micros: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
            sum_micros: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    /// Records one observation.
    pub fn observe(&self, value: Duration) {
        let secs = value.as_secs_f64();
        if let Some(index) = self.bounds.iter().position(|bound| secs <= *bound) {
            self.counts[index].fetch_add(1, Ordering::Relaxed);
        }
        let micros = u64::try_from(value.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} histogram");
        self.render_series(out, name, "");
    }

    /// The series of one histogram of a family, its labels (`key="value",` pairs, each
    /// followed by a comma; empty for none) before `le`.
    fn render_series(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        for (bound, count) in self.bounds.iter().zip(&self.counts) {
            cumulative += count.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels}le=\"{bound}\"}} {cumulative}");
        }
        let total = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels}le=\"+Inf\"}} {total}");
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let plain = labels.trim_end_matches(',');
        let braces = if plain.is_empty() {
            String::new()
        } else {
            format!("{{{plain}}}")
        };
        let _ = writeln!(out, "{name}_sum{braces} {sum}");
        let _ = writeln!(out, "{name}_count{braces} {total}");
    }
}

const LATENESS_BOUNDS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];
const TICK_BOUNDS: &[f64] = &[
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0,
];

/// Counters shared by the ticker, the relay and the API.
#[derive(Debug)]
pub struct Metrics {
    pub fires: AtomicU64,
    pub successes: AtomicU64,
    pub failures: AtomicU64,
    pub retries: AtomicU64,
    pub dlq_landings: AtomicU64,
    pub skipped: AtomicU64,
    pub lost_claims: AtomicU64,
    pub tick_errors: AtomicU64,
    pub ticks: AtomicU64,
    pub events_relayed: AtomicU64,
    pub relay_failures: AtomicU64,
    /// Spans an OTLP endpoint took, and spans dropped (a full queue, a batch not taken).
    pub spans_exported: AtomicU64,
    pub spans_dropped: AtomicU64,
    pub events_parked: AtomicI64,
    /// Unix seconds of the last completed tick (0: none yet).
    pub last_tick_unix: AtomicI64,
    /// Unix seconds since which the relay has found the bus unreachable (0: reachable, or
    /// not known to be unreachable).
    pub bus_unreachable_since_unix: AtomicI64,
    /// Fire instant minus due instant.
    pub lateness: Histogram,
    pub tick_duration: Histogram,
    /// From a call's answer to the commit of its outcome: how much a process killed now
    /// would leave to be called again.
    pub outcome_durable: Histogram,
    /// The proxy-back calls and the circuit breakers.
    pub calls: CallMetrics,
    /// The opt-in breakdown by environment.
    pub per_env: EnvBreakdown,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            fires: AtomicU64::new(0),
            successes: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            dlq_landings: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            lost_claims: AtomicU64::new(0),
            tick_errors: AtomicU64::new(0),
            ticks: AtomicU64::new(0),
            events_relayed: AtomicU64::new(0),
            relay_failures: AtomicU64::new(0),
            spans_exported: AtomicU64::new(0),
            spans_dropped: AtomicU64::new(0),
            events_parked: AtomicI64::new(0),
            last_tick_unix: AtomicI64::new(0),
            bus_unreachable_since_unix: AtomicI64::new(0),
            lateness: Histogram::new(LATENESS_BOUNDS),
            tick_duration: Histogram::new(TICK_BOUNDS),
            outcome_durable: Histogram::new(LATENESS_BOUNDS),
            calls: CallMetrics::default(),
            per_env: EnvBreakdown::default(),
        }
    }
}

/// Adds one to a counter.
pub fn inc(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Metrics {
    /// Counts one fire, success, failure or dead-letter landing of `env`: in its total and, when
    /// the breakdown is on, in the environment's own.
    pub fn count(&self, env: EnvId, counter: EnvCounter) {
        inc(match counter {
            EnvCounter::Fires => &self.fires,
            EnvCounter::Successes => &self.successes,
            EnvCounter::Failures => &self.failures,
            EnvCounter::DlqLandings => &self.dlq_landings,
        });
        self.per_env.inc(env, counter);
    }

    /// Metrics with the breakdown by environment on for at most `envs` environments (0: off).
    pub fn with_env_breakdown(envs: usize) -> Self {
        Self {
            per_env: EnvBreakdown::new(envs),
            ..Self::default()
        }
    }

    /// The Prometheus text exposition of every metric, plus store-wide gauges.
    pub fn render(&self, stats: Option<&StoreStats>) -> String {
        let mut out = String::with_capacity(4096);
        let counters: [(&str, &str, &AtomicU64); 13] = [
            (
                "sentin8_cron_fires_total",
                "Schedules fired (jobs started).",
                &self.fires,
            ),
            (
                "sentin8_cron_job_successes_total",
                "Job attempts that succeeded.",
                &self.successes,
            ),
            (
                "sentin8_cron_job_failures_total",
                "Job attempts that failed.",
                &self.failures,
            ),
            (
                "sentin8_cron_job_retries_total",
                "Retries scheduled after a failed attempt.",
                &self.retries,
            ),
            (
                "sentin8_cron_dlq_landings_total",
                "Jobs that exhausted their retries.",
                &self.dlq_landings,
            ),
            (
                "sentin8_cron_fires_skipped_total",
                "Skipped records written: a fire overlapping an open job, or one run of missed occurrences (one record whatever its count).",
                &self.skipped,
            ),
            (
                "sentin8_cron_claims_lost_total",
                "Due schedules or retries another ticker claimed first (its conditional write found them no longer due); one busy elsewhere is left for a later round, not counted.",
                &self.lost_claims,
            ),
            (
                "sentin8_cron_tick_errors_total",
                "Ticks that ended in an error.",
                &self.tick_errors,
            ),
            ("sentin8_cron_ticks_total", "Completed ticks.", &self.ticks),
            (
                "sentin8_cron_events_relayed_total",
                "Outbox events acknowledged by the bus.",
                &self.events_relayed,
            ),
            (
                "sentin8_cron_relay_failures_total",
                "Failed attempts to relay an outbox event.",
                &self.relay_failures,
            ),
            (
                "sentin8_cron_spans_exported_total",
                "Spans the OTLP endpoint took (0 without --otlp-endpoint).",
                &self.spans_exported,
            ),
            (
                "sentin8_cron_spans_dropped_total",
                "Spans dropped: the export queue was full, or the OTLP endpoint did not take their batch.",
                &self.spans_dropped,
            ),
        ];
        for (name, help, counter) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            let _ = writeln!(out, "{name} {}", counter.load(Ordering::Relaxed));
        }
        let gauges = [
            (
                "sentin8_cron_last_tick_timestamp_seconds",
                "Unix time of the last completed tick.",
                self.last_tick_unix.load(Ordering::Relaxed),
            ),
            (
                "sentin8_cron_outbox_parked",
                "Outbox events parked after too many failed attempts.",
                self.events_parked.load(Ordering::Relaxed),
            ),
        ];
        for (name, help, value) in gauges {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
            );
        }
        self.lateness.render(
            &mut out,
            "sentin8_cron_fire_lateness_seconds",
            "Fire instant minus due instant.",
        );
        self.tick_duration.render(
            &mut out,
            "sentin8_cron_tick_duration_seconds",
            "Wall time of one tick.",
        );
        self.outcome_durable.render(
            &mut out,
            "sentin8_cron_outcome_durable_seconds",
            "From a call's answer to the commit of its outcome (what a crash at that moment would leave to be called again).",
        );
        self.calls.render(&mut out);
        self.per_env.render(&mut out);
        if let Some(stats) = stats {
            let gauges = [
                (
                    "sentin8_cron_schedules_active",
                    "Active schedules.",
                    stats.schedules_active,
                ),
                (
                    "sentin8_cron_schedules_paused",
                    "Paused schedules.",
                    stats.schedules_paused,
                ),
                (
                    "sentin8_cron_jobs_scheduled",
                    "Fires claimed ahead, waiting for their instant.",
                    stats.jobs_scheduled,
                ),
                (
                    "sentin8_cron_jobs_pending",
                    "Jobs waiting for an attempt.",
                    stats.jobs_pending,
                ),
                (
                    "sentin8_cron_jobs_running",
                    "Job attempts in flight.",
                    stats.jobs_running,
                ),
                (
                    "sentin8_cron_jobs_buffered",
                    "Occurrences waiting for their schedule's open job to end (buffer_one, a backfill).",
                    stats.jobs_buffered,
                ),
                (
                    "sentin8_cron_dlq_entries",
                    "Dead-letter entries.",
                    stats.dlq_entries,
                ),
                (
                    "sentin8_cron_outbox_backlog",
                    "Outbox events not yet relayed.",
                    stats.outbox_unrelayed,
                ),
            ];
            for (name, help, value) in gauges {
                let _ = writeln!(
                    out,
                    "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let metrics = Metrics::default();
        metrics.lateness.observe(Duration::from_millis(3));
        metrics.lateness.observe(Duration::from_millis(700));
        metrics.lateness.observe(Duration::from_secs(3600));
        let text = metrics.render(None);
        assert!(
            text.contains("sentin8_cron_fire_lateness_seconds_bucket{le=\"0.005\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("sentin8_cron_fire_lateness_seconds_bucket{le=\"1\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("sentin8_cron_fire_lateness_seconds_bucket{le=\"300\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("sentin8_cron_fire_lateness_seconds_bucket{le=\"+Inf\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("sentin8_cron_fire_lateness_seconds_count 3\n"),
            "{text}"
        );
    }

    #[test]
    fn counters_and_store_gauges_render() {
        let metrics = Metrics::default();
        inc(&metrics.fires);
        inc(&metrics.fires);
        let stats = StoreStats {
            outbox_unrelayed: 7,
            ..StoreStats::default()
        };
        let text = metrics.render(Some(&stats));
        assert!(
            text.contains("# TYPE sentin8_cron_fires_total counter\nsentin8_cron_fires_total 2\n")
        );
        assert!(text.contains("sentin8_cron_outbox_backlog 7\n"));
    }
}
