//! Faults of the first instance at a moment relative to the first measured instant, and what
//! they did to the burst they hit: the kill (SIGKILL) and the freeze (SIGSTOP, then SIGCONT).
//! Per occurrence of that burst: how many calls arrived (more than one is an occurrence called
//! twice), when the last one arrived after the instant (every call the fault cost made
//! again), how many attempts the ledger records as not succeeded, and how many jobs of the
//! next minute were skipped.

use std::collections::HashMap;

use sqlx::{Connection, PgConnection, Row};

use crate::deploy::Deployment;
use crate::target::Arrival;
use crate::{now_micros, sleep_until};

/// What happens to the first instance, `at_ms` from the first measured instant (negative:
/// before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Kill { at_ms: i64 },
    Stop { at_ms: i64, for_ms: u64 },
}

impl Fault {
    pub fn at_ms(self) -> i64 {
        match self {
            Fault::Kill { at_ms } | Fault::Stop { at_ms, .. } => at_ms,
        }
    }

    /// Waits for the moment and strikes; a freeze is lifted in the background after its time.
    /// Returns when it struck.
    pub async fn strike(self, deployment: &mut Deployment, first_us: i64) -> i64 {
        sleep_until(first_us + self.at_ms() * 1000).await;
        let at = now_micros();
        match self {
            Fault::Kill { .. } => deployment.kill_first(),
            Fault::Stop { for_ms, .. } => {
                deployment.signal_first(rustix::process::Signal::STOP);
                let pid = deployment.first_pid();
                tokio::spawn(async move {
                    tokio::time::sleep(std::time::Duration::from_millis(for_ms)).await;
                    if let Some(pid) = pid {
                        let _ = rustix::process::kill_process(pid, rustix::process::Signal::CONT);
                    }
                });
            }
        }
        at
    }

    fn shown(self) -> String {
        let when = |ms: i64| {
            if ms < 0 {
                format!("{} ms before the instant", -ms)
            } else {
                format!("{ms} ms after the instant")
            }
        };
        match self {
            Fault::Kill { at_ms } => format!("killed (SIGKILL) {}", when(at_ms)),
            Fault::Stop { at_ms, for_ms } => format!(
                "frozen (SIGSTOP) {} for {:.1} s, then continued (SIGCONT)",
                when(at_ms),
                for_ms as f64 / 1000.0
            ),
        }
    }
}

/// What the fault did to the burst it hit.
#[derive(Debug, Default)]
pub struct FaultCount {
    pub occurrences: usize,
    pub called_once: usize,
    pub called_twice_or_more: usize,
    pub never_called: usize,
    /// The latest last call of an occurrence after its instant, in ms.
    pub last_call_max_ms: i64,
    /// Occurrences whose last call came more than 5 s after the instant.
    pub last_call_over_5s: usize,
    pub attempts_not_succeeded: i64,
    pub skipped_next_minute: i64,
}

/// Counts the burst at `first_us` (the schedules seeded: `expected` of them).
pub async fn count(
    owner_url: &str,
    arrivals: &[Arrival],
    first_us: i64,
    expected: usize,
) -> anyhow::Result<FaultCount> {
    let mut by_schedule: HashMap<&str, Vec<i64>> = HashMap::new();
    for arrival in arrivals.iter().filter(|a| a.scheduled_for_us == first_us) {
        by_schedule
            .entry(arrival.schedule_id.as_str())
            .or_default()
            .push(arrival.at_us);
    }
    let mut count = FaultCount {
        occurrences: expected,
        never_called: expected.saturating_sub(by_schedule.len()),
        ..FaultCount::default()
    };
    for calls in by_schedule.values() {
        if calls.len() == 1 {
            count.called_once += 1;
        } else {
            count.called_twice_or_more += 1;
        }
        let last = calls.iter().max().copied().unwrap_or(first_us) - first_us;
        count.last_call_max_ms = count.last_call_max_ms.max(last / 1000);
        if last > 5_000_000 {
            count.last_call_over_5s += 1;
        }
    }
    let mut conn = PgConnection::connect(owner_url).await?;
    let first = chrono::DateTime::from_timestamp_micros(first_us).unwrap_or_default();
    let row = sqlx::query(
        "SELECT (SELECT count(*) FROM cron.job_attempts a JOIN cron.jobs j ON j.id = a.job_id \
                  WHERE j.scheduled_for = $1 AND a.outcome <> 'succeeded'), \
                (SELECT count(*) FROM cron.jobs \
                  WHERE scheduled_for = $1 + interval '1 minute' AND status = 'skipped')",
    )
    .bind(first)
    .fetch_one(&mut conn)
    .await?;
    count.attempts_not_succeeded = row.get(0);
    count.skipped_next_minute = row.get(1);
    Ok(count)
}

pub fn table(fault: Fault, count: &FaultCount) -> String {
    format!(
        "The first instance was {}.\n\n\
         | occurrences | called once | called twice or more | never called | last call after the instant, max | last call > 5 s | attempts recorded as not succeeded | next minute's jobs skipped |\n\
         |---|---|---|---|---|---|---|---|\n\
         | {} | {} | {} | {} | {:.2} s | {} | {} | {} |\n",
        fault.shown(),
        count.occurrences,
        count.called_once,
        count.called_twice_or_more,
        count.never_called,
        count.last_call_max_ms as f64 / 1000.0,
        count.last_call_over_5s,
        count.attempts_not_succeeded,
        count.skipped_next_minute,
    )
}
