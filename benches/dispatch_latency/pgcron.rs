//! The references run in the same bench: pgbench's TPS on the shared cluster (machines differ
//! several times in commit rate), and pg_cron running the same burst on a private cluster.
//!
//! pg_cron is Debian's `postgresql-15-cron`, installed with apt-get when missing. Its cluster is
//! initialised in a temporary directory as the `postgres` user, listens on its own port (5499
//! unless `BENCH_PGCRON_PORT` says otherwise) and is stopped and removed at the end, so the
//! shared cluster on 5432 is untouched. N jobs `* * * * *` (or `1 seconds`, pg_cron's seconds
//! schedules) each insert `clock_timestamp()`; lateness = the insert's time minus the minute
//! (or second) boundary it falls after.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, bail};
use sqlx::{Connection, Executor, PgConnection, Row};

use crate::procstat::{CpuWindow, Sampler, load_average};
use crate::report::{MINUTE_US, Stats};

const PG_BIN: &str = "/usr/lib/postgresql/15/bin";
const PG_CRON_LIB: &str = "/usr/lib/postgresql/15/lib/pg_cron.so";

pub(crate) fn run(command: &mut Command) -> anyhow::Result<String> {
    let out = command
        .output()
        .with_context(|| format!("cannot run {command:?}"))?;
    if !out.status.success() {
        bail!(
            "{command:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `pgbench -c 4 -T 10` on a scratch database of the shared cluster: its TPS.
pub async fn pgbench(admin_url: &str) -> anyhow::Result<f64> {
    let name = "s8cbench_pgbench";
    let mut admin = PgConnection::connect(admin_url).await?;
    admin
        .execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
        .await?;
    admin
        .execute(format!("CREATE DATABASE {name}").as_str())
        .await?;
    let url = crate::with_database(admin_url, name);
    let result = (|| {
        run(Command::new("pgbench").args(["-i", "-q", "-s", "1", &url]))?;
        let out = run(Command::new("pgbench").args(["-c", "4", "-T", "10", &url]))?;
        out.lines()
            .find_map(|l| l.strip_prefix("tps = "))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|t| t.parse::<f64>().ok())
            .context("no tps line in pgbench's output")
    })();
    admin
        .execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
        .await?;
    result
}

fn ensure_installed() -> anyhow::Result<()> {
    if Path::new(PG_CRON_LIB).exists() {
        return Ok(());
    }
    eprintln!("installing postgresql-15-cron with apt-get");
    let install = || {
        run(Command::new("apt-get")
            .args(["install", "-y", "-q", "postgresql-15-cron"])
            .env("DEBIAN_FRONTEND", "noninteractive"))
    };
    if install().is_err() {
        run(Command::new("apt-get").args(["update", "-q"]))?;
        install()?;
    }
    Ok(())
}

/// The private cluster; stopped and removed on drop.
struct Cluster {
    dir: tempfile::TempDir,
    port: u16,
}

impl Cluster {
    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn as_postgres(&self, program: &str) -> Command {
        let mut command = Command::new("runuser");
        command
            .args(["-u", "postgres", "--"])
            .arg(format!("{PG_BIN}/{program}"));
        command
    }

    fn create(port: u16) -> anyhow::Result<Cluster> {
        let dir = tempfile::Builder::new()
            .prefix("s8cbench-pgcron-")
            .tempdir()?;
        run(Command::new("chown")
            .arg("postgres:postgres")
            .arg(dir.path()))?;
        let cluster = Cluster { dir, port };
        run(cluster
            .as_postgres("initdb")
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
                "-D",
            ])
            .arg(cluster.data()))?;
        let conf = format!(
            "\nport = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
             shared_preload_libraries = 'pg_cron'\ncron.database_name = 'postgres'\n\
             cron.host = '127.0.0.1'\n",
            cluster.dir.path().display()
        );
        let path = cluster.data().join("postgresql.conf");
        let mut text = std::fs::read_to_string(&path)?;
        text.push_str(&conf);
        std::fs::write(&path, text)?;
        run(cluster
            .as_postgres("pg_ctl")
            .args(["-w", "-l"])
            .arg(cluster.dir.path().join("log"))
            .arg("-D")
            .arg(cluster.data())
            .arg("start"))?;
        Ok(cluster)
    }

    fn postmaster(&self) -> Option<u32> {
        std::fs::read_to_string(self.data().join("postmaster.pid"))
            .ok()?
            .lines()
            .next()?
            .trim()
            .parse()
            .ok()
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self
            .as_postgres("pg_ctl")
            .args(["-m", "immediate", "-D"])
            .arg(self.data())
            .arg("stop")
            .output();
    }
}

pub struct PgCronRun {
    pub n: usize,
    /// What its jobs were scheduled on.
    pub schedule: &'static str,
    pub version: String,
    pub minutes: Vec<(i64, Stats, CpuWindow, String)>,
    pub failed_runs: i64,
}

/// What pg_cron's jobs are scheduled on: `* * * * *`, or `1 seconds` (per_minute 60).
#[derive(Debug, Clone, Copy)]
pub struct PgCronSchedule {
    pub text: &'static str,
    pub per_minute: i64,
}

pub const EVERY_MINUTE: PgCronSchedule = PgCronSchedule {
    text: "* * * * *",
    per_minute: 1,
};
pub const EVERY_SECOND: PgCronSchedule = PgCronSchedule {
    text: "1 seconds",
    per_minute: 60,
};

pub async fn burst(
    n: usize,
    minutes: u32,
    schedule: PgCronSchedule,
    sampler: &Sampler,
) -> anyhow::Result<PgCronRun> {
    ensure_installed()?;
    let port = std::env::var("BENCH_PGCRON_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(5499);
    let cluster = Cluster::create(port)?;
    sampler.watch_pgcron(cluster.postmaster());
    let mut conn = PgConnection::connect(&cluster.url()).await?;
    conn.execute("CREATE EXTENSION pg_cron").await?;
    let version =
        run(Command::new("dpkg-query").args(["-W", "-f", "${Version}", "postgresql-15-cron"]))
            .unwrap_or_else(|_| "(version unknown)".into());
    conn.execute(
        "CREATE TABLE bench_hits (job int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())",
    )
    .await?;
    sqlx::query(
        "SELECT cron.schedule('bench-' || g, $2, \
                format('INSERT INTO bench_hits (job) VALUES (%s)', g)) \
           FROM generate_series(1, $1) g",
    )
    .bind(n as i32)
    .bind(schedule.text)
    .execute(&mut conn)
    .await?;
    let first = crate::next_boundary(crate::now_micros() + 5_000_000);
    crate::sleep_until(first).await;
    sampler.sample_now();
    let mut windows = Vec::new();
    for m in 1..=minutes as i64 {
        crate::sleep_until(first + m * MINUTE_US).await;
        sampler.sample_now();
        windows.push((first + (m - 1) * MINUTE_US, load_average()));
    }
    // Inserts due in the last minute that are still running get a few seconds more.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let rows = sqlx::query(
        "SELECT job, (extract(epoch FROM at) * 1000000)::int8 FROM bench_hits ORDER BY at",
    )
    .fetch_all(&mut conn)
    .await?;
    let failed_runs: i64 =
        sqlx::query_scalar("SELECT count(*) FROM cron.job_run_details WHERE status = 'failed'")
            .fetch_one(&mut conn)
            .await?;
    drop(conn);
    sampler.watch_pgcron(None);
    drop(cluster);

    let mut result = PgCronRun {
        n,
        schedule: schedule.text,
        version,
        minutes: Vec::new(),
        failed_runs,
    };
    let period = MINUTE_US / schedule.per_minute;
    for (minute, load) in windows {
        // An insert belongs to the period (minute or second) it falls in: lateness is assumed
        // under a period.
        let mut seen = std::collections::HashSet::new();
        let mut stats = Stats {
            expected: n * schedule.per_minute as usize,
            ..Stats::default()
        };
        for r in &rows {
            let (job, at): (i32, i64) = (r.get(0), r.get(1));
            if at - at.rem_euclid(MINUTE_US) != minute {
                continue;
            }
            let occurrence = at - at.rem_euclid(period);
            if seen.insert((job, occurrence)) {
                stats.fired += 1;
                stats.late_us.push(at - occurrence);
            } else {
                stats.dup_same_key += 1;
            }
        }
        stats.late_us.sort_unstable();
        let cpu = sampler.window(minute, minute + MINUTE_US);
        result.minutes.push((minute, stats, cpu, load));
    }
    Ok(result)
}

/// How the reference is set up, for the report.
pub fn describe() -> String {
    format!(
        "pg_cron from Debian's postgresql-15-cron ({PG_CRON_LIB}), on a private cluster \
         initialised in a temporary directory (initdb -A trust, shared_preload_libraries = \
         'pg_cron', otherwise the defaults: cron.max_running_jobs 32, jobs run over libpq \
         connections), stopped and removed afterwards"
    )
}
