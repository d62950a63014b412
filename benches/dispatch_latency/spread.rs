//! How a burst spread (jittered) or drained (at once): for each measured minute, the calls that reached the target
//! counted by the second they arrived in (from the minute boundary), beside the seconds their
//! call instants fall in. A call belongs to the minute its envelope's `scheduled_for` falls in;
//! the instants are derived as the report derives them (`report::call_instant`), and a call
//! whose `scheduled_for` is not its schedule's derived instant is counted apart.
//!
//! Evenness is the coefficient of variation (standard deviation over mean) of the per-second
//! counts inside the window. Even a perfect hash does not make every second equal: N calls
//! placed at random in k seconds give a CV of about sqrt((k - 1) / N), printed beside it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use crate::records::Records;
use crate::report::{self, MINUTE_US};
use crate::target::Arrival;

const SECOND_US: i64 = 1_000_000;

/// Per-second counts and their evenness.
#[derive(Debug, Clone, Copy)]
pub struct Evenness {
    pub min: usize,
    pub max: usize,
    pub mean: f64,
    pub cv: f64,
}

impl Evenness {
    fn of(counts: &[usize]) -> Evenness {
        let n = counts.len().max(1) as f64;
        let mean = counts.iter().sum::<usize>() as f64 / n;
        let var = counts
            .iter()
            .map(|&c| (c as f64 - mean).powi(2))
            .sum::<f64>()
            / n;
        Evenness {
            min: counts.iter().copied().min().unwrap_or(0),
            max: counts.iter().copied().max().unwrap_or(0),
            mean,
            cv: if mean > 0.0 { var.sqrt() / mean } else { 0.0 },
        }
    }
}

pub struct Spread {
    pub minute_us: i64,
    /// The jitter window in whole seconds.
    pub window_s: i64,
    /// Occurrences expected in the minute.
    pub expected: usize,
    /// Second from the boundary → (call instants in it, calls that arrived in it).
    pub seconds: BTreeMap<i64, (usize, usize)>,
    /// Calls of the minute whose `scheduled_for` is not their schedule's derived instant.
    pub off_instant: usize,
    /// Schedules called exactly once in the minute, never, and more than once (whatever
    /// instant the calls carried: a check that does not lean on the derivation).
    pub once: usize,
    pub never: usize,
    pub more: usize,
    pub arrived: Evenness,
    pub intended: Evenness,
}

impl Spread {
    pub fn arrivals(&self) -> usize {
        self.seconds.values().map(|(_, a)| a).sum()
    }

    /// Calls that arrived before the boundary or after the window.
    fn outside(&self) -> (usize, usize) {
        let before = self.seconds.range(..0).map(|(_, (_, a))| a).sum();
        let after = self
            .seconds
            .range(self.window_s..)
            .map(|(_, (_, a))| a)
            .sum();
        (before, after)
    }

    /// The CV of N calls placed at random over the window's seconds.
    pub fn random_cv(&self) -> f64 {
        ((self.window_s - 1) as f64 / self.expected.max(1) as f64).sqrt()
    }

    /// One line: the figures a summary needs.
    pub fn line(&self) -> String {
        let (before, after) = self.outside();
        format!(
            "{}: {} calls; per second over 0-{} s min {} / max {} (mean {:.1}, expected {:.1}), \
             CV {:.3} (the intended instants' {:.3}; at random ≈ {:.3}); {before} before the \
             boundary, {after} after the window, {} off their derived instant; schedules \
             called once {}, never {}, more than once {}",
            report::utc(self.minute_us),
            self.arrivals(),
            self.window_s - 1,
            self.arrived.min,
            self.arrived.max,
            self.arrived.mean,
            self.expected as f64 / self.window_s as f64,
            self.arrived.cv,
            self.intended.cv,
            self.random_cv(),
            self.off_instant,
            self.once,
            self.never,
            self.more,
        )
    }

    /// The per-second table (markdown).
    pub fn table(&self) -> String {
        let mut out = format!(
            "Calls per second of the {} burst (second from the boundary: call instants in it, \
             calls that arrived in it)\n\n| second | intended | arrived |\n|---|---|---|\n",
            report::utc(self.minute_us)
        );
        for (second, (intended, arrived)) in &self.seconds {
            let label = if *second < 0 {
                format!("{second} (before the boundary)")
            } else if *second >= self.window_s {
                format!("{second} (past the window)")
            } else {
                second.to_string()
            };
            out.push_str(&format!("| {label} | {intended} | {arrived} |\n"));
        }
        out.push('\n');
        out.push_str(&format!("- {}\n", self.line()));
        out
    }
}

/// One [`Spread`] per measured minute. `envs` are the environments of the scenario's schedules.
/// Without a jitter every instant is the boundary and the window is its first second: the
/// table then shows how the burst drained, second by second past it.
pub fn analyse(
    records: &Records,
    arrivals: &[Arrival],
    envs: &HashSet<String>,
    first_minute_us: i64,
    minutes: u32,
    max_jitter: Option<Duration>,
) -> Vec<Spread> {
    let window_s = max_jitter
        .map_or(1, |j| (j.as_micros() as i64 + SECOND_US - 1) / SECOND_US)
        .max(1);
    let schedules: Vec<&str> = records
        .schedules
        .iter()
        .filter(|s| envs.contains(&s.env) && s.run_at_us.is_none())
        .map(|s| s.id.as_str())
        .collect();
    (0..minutes as i64)
        .map(|m| {
            let minute = first_minute_us + m * MINUTE_US;
            let second_of = |us: i64| (us - minute).div_euclid(SECOND_US);
            let mut seconds: BTreeMap<i64, (usize, usize)> =
                (0..window_s).map(|s| (s, (0, 0))).collect();
            let calls: HashMap<&str, i64> = schedules
                .iter()
                .map(|id| (*id, report::call_instant(id, minute, max_jitter)))
                .collect();
            for at in calls.values() {
                seconds.entry(second_of(*at)).or_default().0 += 1;
            }
            let mut off_instant = 0;
            let mut per_schedule: HashMap<&str, usize> = calls.keys().map(|id| (*id, 0)).collect();
            for a in arrivals
                .iter()
                .filter(|a| (minute..minute + MINUTE_US).contains(&a.scheduled_for_us))
            {
                seconds.entry(second_of(a.at_us)).or_default().1 += 1;
                if calls.get(a.schedule_id.as_str()) != Some(&a.scheduled_for_us) {
                    off_instant += 1;
                }
                *per_schedule.entry(a.schedule_id.as_str()).or_default() += 1;
            }
            let called = |n: usize| per_schedule.values().filter(|c| **c == n).count();
            let inside = |pick: fn(&(usize, usize)) -> usize| -> Vec<usize> {
                seconds.range(0..window_s).map(|(_, c)| pick(c)).collect()
            };
            Spread {
                minute_us: minute,
                window_s,
                expected: calls.len(),
                arrived: Evenness::of(&inside(|c| c.1)),
                intended: Evenness::of(&inside(|c| c.0)),
                seconds,
                off_instant,
                once: called(1),
                never: called(0),
                more: per_schedule.values().filter(|c| **c > 1).count(),
            }
        })
        .collect()
}
