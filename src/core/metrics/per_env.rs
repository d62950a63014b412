//! An opt-in breakdown of the engine's counters by environment. Off by default (no labels, no
//! cost); on, the first `cap` environments seen get series of their own and the rest are
//! summed under `env_id="other"`, so a tenant creating environments cannot grow the scrape.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Mutex;

use crate::core::model::EnvId;

/// What is counted per environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvCounter {
    Fires,
    Successes,
    Failures,
    DlqLandings,
}

const FAMILIES: [(EnvCounter, &str, &str); 4] = [
    (
        EnvCounter::Fires,
        "sentin8_cron_env_fires_total",
        "Schedules fired (jobs started), by environment.",
    ),
    (
        EnvCounter::Successes,
        "sentin8_cron_env_job_successes_total",
        "Job attempts that succeeded, by environment.",
    ),
    (
        EnvCounter::Failures,
        "sentin8_cron_env_job_failures_total",
        "Job attempts that failed, by environment.",
    ),
    (
        EnvCounter::DlqLandings,
        "sentin8_cron_env_dlq_landings_total",
        "Jobs that exhausted their retries, by environment.",
    ),
];

/// The per-environment counters.
#[derive(Debug, Default)]
pub struct EnvBreakdown {
    cap: usize,
    counts: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    envs: HashMap<EnvId, [u64; 4]>,
    other: [u64; 4],
}

impl EnvBreakdown {
    /// A breakdown of at most `cap` environments (0: off).
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            counts: Mutex::default(),
        }
    }

    /// Adds one to `counter` of `env`.
    pub fn inc(&self, env: EnvId, counter: EnvCounter) {
        if self.cap == 0 {
            return;
        }
        let index = counter as usize;
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let room = counts.envs.len() < self.cap;
        match counts.envs.get_mut(&env) {
            Some(row) => row[index] += 1,
            None if room => {
                let mut row = [0; 4];
                row[index] = 1;
                counts.envs.insert(env, row);
            }
            None => counts.other[index] += 1,
        }
    }

    pub(super) fn render(&self, out: &mut String) {
        if self.cap == 0 {
            return;
        }
        let counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let mut envs: Vec<(String, [u64; 4])> = counts
            .envs
            .iter()
            .map(|(env, row)| (env.to_string(), *row))
            .collect();
        envs.sort();
        envs.push(("other".to_owned(), counts.other));
        for (counter, name, help) in FAMILIES {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (env, row) in &envs {
                let _ = writeln!(out, "{name}{{env_id=\"{env}\"}} {}", row[counter as usize]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_renders_nothing_and_counts_nothing() {
        let off = EnvBreakdown::new(0);
        off.inc(EnvId::new(), EnvCounter::Fires);
        let mut text = String::new();
        off.render(&mut text);
        assert!(text.is_empty());
    }

    #[test]
    fn environments_past_the_cap_are_summed_as_other() {
        let breakdown = EnvBreakdown::new(2);
        let envs: Vec<EnvId> = (0..5).map(|_| EnvId::new()).collect();
        for env in &envs {
            breakdown.inc(*env, EnvCounter::Fires);
        }
        breakdown.inc(envs[0], EnvCounter::Fires);
        breakdown.inc(envs[4], EnvCounter::DlqLandings);
        let mut text = String::new();
        breakdown.render(&mut text);
        assert!(text.contains(&format!(
            "sentin8_cron_env_fires_total{{env_id=\"{}\"}} 2\n",
            envs[0]
        )));
        assert!(
            text.contains("sentin8_cron_env_fires_total{env_id=\"other\"} 3\n"),
            "{text}"
        );
        assert!(text.contains("sentin8_cron_env_dlq_landings_total{env_id=\"other\"} 1\n"));
        // Two environments and `other`, per family.
        assert_eq!(text.matches("sentin8_cron_env_fires_total{").count(), 3);
    }
}
