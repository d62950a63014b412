//! What a scenario with many schedules that are not due costs besides its calls: quiet
//! schedules' times, the API and admin reads in the last measured minute, serve's memory and
//! the database's bytes per row.
//!
//! Quiet schedules fire once or twice a day at minutes spread over the day, none of them in the
//! hour the bench runs: the minutes measured see only the every-minute groups' calls, and what
//! the quiet ones cost is whatever holding them costs.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use sqlx::{Connection, PgConnection, Row};

use crate::deploy::{Deployment, SeededGroup};
use crate::records::Records;
use crate::report::{MINUTE_US, nearest_rank};
use crate::scenarios::{Backend, Scenario};
use crate::target::Arrival;

/// Minutes of the day (UTC) no quiet schedule may fire in: from ten minutes before the seed to
/// an hour after it, longer than any scenario's seed and measured minutes.
const QUIET_MARGIN_BEFORE: u32 = 10;
const QUIET_MARGIN_AFTER: u32 = 60;

/// The cron expression of quiet schedule `i`: daily for two thirds of them, twice a day for
/// the rest, at minutes of the day spread by a multiplicative hash and kept out of the window
/// around `now_minute` (the minute of the day, UTC, when the seed starts).
pub fn quiet_cron(i: usize, now_minute: u32) -> String {
    let allowed = |minute: u32| {
        let since = (minute + 1440 - now_minute) % 1440;
        since > QUIET_MARGIN_AFTER && since < 1440 - QUIET_MARGIN_BEFORE
    };
    let pick = |salt: usize| {
        let mut minute = ((i.wrapping_mul(7919).wrapping_add(salt * 104_729)) % 1440) as u32;
        while !allowed(minute) {
            minute = (minute + QUIET_MARGIN_AFTER + QUIET_MARGIN_BEFORE) % 1440;
        }
        minute
    };
    let first = pick(0);
    if i % 3 == 2 {
        // Twice a day: the same minute past two hours twelve hours apart, both allowed.
        let second = (first + 720) % 1440;
        if allowed(second) {
            let (a, b) = (first.min(second), first.max(second));
            return format!("{} {},{} * * *", a % 60, a / 60, b / 60);
        }
    }
    format!("{} {} * * *", first % 60, first / 60)
}

/// The minute of the day now (UTC).
pub fn minute_of_day_now() -> u32 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    ((secs / 60) % 1440) as u32
}

/// One kind of read the probe makes, and how long each took.
pub struct ReadKind {
    pub name: &'static str,
    pub path: String,
    pub took: Vec<Duration>,
    pub failed: usize,
}

/// The reads an operator's pages and a platform's tooling make: of the environment `big`
/// (many schedules) and, for the overview, of `busy` (the one whose schedules are called).
pub fn reads(big: &str, busy: &str) -> Vec<ReadKind> {
    [
        (
            "API list",
            format!("/v1/schedules?target_env_id={big}&limit=50"),
        ),
        (
            "API search by type",
            format!("/v1/schedules?target_env_id={big}&type_contains=quiet-0099&limit=50"),
        ),
        (
            "admin schedule list",
            format!("/v1/admin/schedules?target_env_id={big}&limit=50"),
        ),
        (
            "admin overview",
            format!("/v1/admin/overview?target_env_id={big}"),
        ),
        (
            "admin overview, environment called",
            format!("/v1/admin/overview?target_env_id={busy}"),
        ),
    ]
    .into_iter()
    .map(|(name, path)| ReadKind {
        name,
        path,
        took: Vec::new(),
        failed: 0,
    })
    .collect()
}

/// Makes `kinds` one after another, five rounds a second, until `until`.
pub async fn probe_reads(
    base: String,
    token: Option<String>,
    mut kinds: Vec<ReadKind>,
    until: Instant,
) -> Vec<ReadKind> {
    let client = reqwest::Client::new();
    while Instant::now() < until {
        let round = Instant::now();
        for kind in &mut kinds {
            let started = Instant::now();
            let mut request = client.get(format!("{base}{}", kind.path));
            if let Some(token) = &token {
                request = request.bearer_auth(token);
            }
            let answer = request.send().await;
            match answer {
                Ok(response) if response.status().is_success() => {
                    let _ = response.bytes().await;
                    kind.took.push(started.elapsed());
                }
                _ => kind.failed += 1,
            }
        }
        tokio::time::sleep(Duration::from_millis(200).saturating_sub(round.elapsed())).await;
    }
    kinds
}

/// The probe's table.
pub fn reads_table(kinds: &[ReadKind]) -> String {
    let ms = |d: Option<Duration>| {
        d.map_or("–".to_owned(), |d| {
            format!("{:.1} ms", d.as_secs_f64() * 1000.0)
        })
    };
    let mut out = String::from(
        "| read (one environment, in the last measured minute) | requests | failed | p50 | p99 | max |\n|---|---|---|---|---|---|\n",
    );
    for kind in kinds {
        let mut took = kind.took.clone();
        took.sort_unstable();
        out.push_str(&format!(
            "| {} `{}` | {} | {} | {} | {} | {} |\n",
            kind.name,
            kind.path.split('?').next().unwrap_or_default(),
            kind.took.len(),
            kind.failed,
            ms(nearest_rank(&took, 0.5)),
            ms(nearest_rank(&took, 0.99)),
            ms(took.last().copied()),
        ));
    }
    out
}

/// A process's resident memory and its peak, in MiB, from `/proc`.
pub fn memory_mib(pid: u32) -> Option<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))?
            .split_whitespace()
            .nth(1)?
            .parse::<f64>()
            .ok()
            .map(|kib| kib / 1024.0)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// The database's bytes per schedule and per job (tables with their indexes and TOAST).
pub async fn bytes_per_row(owner_url: &str) -> anyhow::Result<String> {
    let mut conn = PgConnection::connect(owner_url)
        .await
        .context("cannot read the table sizes")?;
    let mut lines = Vec::new();
    for table in ["schedules", "jobs", "outbox", "audit_journal"] {
        let row = sqlx::query(&format!(
            "SELECT count(*), pg_total_relation_size('cron.{table}') FROM cron.{table}"
        ))
        .fetch_one(&mut conn)
        .await?;
        let (rows, bytes): (i64, i64) = (row.get(0), row.get(1));
        lines.push(format!(
            "`{table}` {rows} rows, {:.0} MiB, {} bytes a row",
            bytes as f64 / 1_048_576.0,
            if rows > 0 { bytes / rows } else { 0 }
        ));
    }
    Ok(format!(
        "- database size (with indexes): {}",
        lines.join("; ")
    ))
}

/// The reads of a scale scenario, made in its last measured minute.
pub struct Probe {
    minute: i64,
    reads: tokio::task::JoinHandle<Vec<ReadKind>>,
}

impl Probe {
    /// Starts the reads when the scenario has quiet schedules: they wait for the last measured
    /// minute (of those from `first`), then read for a minute.
    pub async fn start(
        scenario: &Scenario,
        seeded: &[SeededGroup],
        deployment: &Deployment,
        first: i64,
    ) -> anyhow::Result<Option<Probe>> {
        let (Some(big), Some(busy), Some(base)) = (
            seeded_envs(scenario, seeded, true).first().copied(),
            seeded_envs(scenario, seeded, false).first().copied(),
            deployment.urls.first().cloned(),
        ) else {
            return Ok(None);
        };
        let token = deployment.read_token(&[big, busy]).await?;
        let kinds = reads(big, busy);
        let minute = first + i64::from(scenario.minutes.max(1) - 1) * MINUTE_US;
        let reads = tokio::spawn(async move {
            crate::sleep_until(minute).await;
            probe_reads(base, token, kinds, Instant::now() + Duration::from_secs(60)).await
        });
        Ok(Some(Probe { minute, reads }))
    }
}

/// Each serve's resident memory and its peak (MiB), read before it stops.
pub fn memory_of(deployment: &Deployment) -> Vec<(f64, f64)> {
    deployment
        .pids()
        .into_iter()
        .filter_map(memory_mib)
        .collect()
}

/// What a scale scenario reports besides lateness and CPU.
pub struct Held {
    /// Quiet schedules, and the calls any of them got.
    quiet: Option<(usize, usize)>,
    memory: Vec<(f64, f64)>,
    sizes: Option<String>,
    /// The probed minute and its reads.
    reads: Option<(i64, Vec<ReadKind>)>,
    minutes: u32,
}

impl Held {
    /// Gathers it once the instances have stopped and the records are read.
    pub async fn gather(
        scenario: &Scenario,
        seeded: &[SeededGroup],
        deployment: &Deployment,
        (records, arrivals): (&Records, &[Arrival]),
        memory: Vec<(f64, f64)>,
        probe: Option<Probe>,
    ) -> anyhow::Result<Held> {
        let reads = match probe {
            Some(probe) => Some((probe.minute, probe.reads.await?)),
            None => None,
        };
        let sizes = match (scenario.backend, reads.is_some()) {
            (Backend::Postgres, true) => Some(bytes_per_row(&deployment.owner_url).await?),
            _ => None,
        };
        let quiet_envs: HashSet<&str> = seeded_envs(scenario, seeded, true).into_iter().collect();
        let quiet = (!quiet_envs.is_empty()).then(|| {
            let schedules: HashSet<&str> = records
                .schedules
                .iter()
                .filter(|s| quiet_envs.contains(s.env.as_str()))
                .map(|s| s.id.as_str())
                .collect();
            let calls = arrivals
                .iter()
                .filter(|a| schedules.contains(a.schedule_id.as_str()))
                .count();
            (schedules.len(), calls)
        });
        Ok(Held {
            quiet,
            memory,
            sizes,
            reads,
            minutes: scenario.minutes,
        })
    }

    pub fn print(&self) {
        if let Some((schedules, calls)) = self.quiet {
            println!(
                "- calls of quiet schedules (none due in the measured minutes): {calls} of \
                 {schedules} schedules"
            );
        }
        for (i, (rss, peak)) in self.memory.iter().enumerate() {
            println!(
                "- serve #{i} resident memory at the end: {rss:.0} MiB (peak {peak:.0} MiB, VmHWM)"
            );
        }
        if let Some(sizes) = &self.sizes {
            println!("{sizes}");
        }
        if let Some((_, reads)) = &self.reads {
            println!("\n{}", reads_table(reads));
        }
    }

    /// The minutes whose CPU counts as the scenario's cost: all but the one the reads were
    /// made in (when there were others).
    pub fn costed<'w, W>(&self, windows: &'w [(i64, W, String)]) -> Vec<&'w (i64, W, String)> {
        let probed = self.reads.as_ref().map(|(minute, _)| *minute);
        let leave_out = probed.filter(|_| self.minutes >= 2);
        if let Some(minute) = leave_out {
            println!(
                "- the reads above were made in the last minute ({}); the summary's CPU per \
                 minute counts the minutes before it\n",
                crate::report::utc(minute)
            );
        }
        windows
            .iter()
            .filter(|(minute, _, _)| Some(*minute) != leave_out)
            .collect()
    }
}

/// The environments of the quiet groups (`quiet`), or of the others, in seed order.
fn seeded_envs<'a>(scenario: &Scenario, seeded: &'a [SeededGroup], quiet: bool) -> Vec<&'a str> {
    scenario
        .groups
        .iter()
        .zip(seeded)
        .filter(|(group, _)| group.quiet == quiet)
        .flat_map(|(_, seeded)| seeded.envs.iter().map(String::as_str))
        .collect()
}
