//! What the database recorded, read back after the instances stopped: every schedule of the
//! run, every job (one per fire, a skipped fire included), and, where a schema keeps runs of
//! skipped occurrences as ranges, those ranges.
//!
//! A range table is recognised by its shape, not its name, so a later schema is read without
//! changing the bench: a table with a `schedule_id` column and one instant column whose name
//! starts with `first` and one with `last` (an occurrence between the two, inclusive, counts as
//! recorded). The report names the sources it used.

use anyhow::Context as _;
use sqlx::{Connection, PgConnection, Row, SqliteConnection};

use crate::deploy::Deployment;
use crate::scenarios::Backend;

pub struct ScheduleRow {
    pub id: String,
    pub env: String,
    pub next_run_us: Option<i64>,
    pub run_at_us: Option<i64>,
}

pub struct JobRow {
    pub schedule_id: String,
    pub scheduled_for_us: i64,
    pub status: String,
}

pub struct Records {
    pub schedules: Vec<ScheduleRow>,
    pub jobs: Vec<JobRow>,
    /// (schedule, first, last) of recorded runs of skipped occurrences.
    pub ranges: Vec<(String, i64, i64)>,
    /// Where records were read from, for the report.
    pub sources: Vec<String>,
}

const PG_US: &str = "(extract(epoch FROM {}) * 1000000)::int8";

fn pg_us(column: &str) -> String {
    PG_US.replace("{}", column)
}

/// Picks (table, first column, last column) out of (table, column) pairs of instant columns.
fn range_tables(columns: &[(String, String)]) -> Vec<(String, String, String)> {
    let mut tables: Vec<&str> = columns.iter().map(|(t, _)| t.as_str()).collect();
    tables.sort_unstable();
    tables.dedup();
    tables
        .into_iter()
        .filter_map(|t| {
            let cols: Vec<&str> = columns
                .iter()
                .filter(|(table, _)| table == t)
                .map(|(_, c)| c.as_str())
                .collect();
            // `first…`/`…_first` and `last…`/`…_last`: the jobs table's `missed_first` and
            // `missed_last` (a run of missed occurrences) among them.
            let first = cols
                .iter()
                .find(|c| c.starts_with("first") || c.ends_with("_first"))?;
            let last = cols
                .iter()
                .find(|c| c.starts_with("last") || c.ends_with("_last"))?;
            cols.contains(&"schedule_id")
                .then(|| (t.to_owned(), first.to_string(), last.to_string()))
        })
        .collect()
}

/// Transactions committed on the deployment's PostgreSQL database so far (`xact_commit`, which
/// a backend publishes within about a second); none on SQLite or when it cannot be read.
pub async fn commits(deployment: &Deployment) -> Option<i64> {
    if deployment.backend != Backend::Postgres {
        return None;
    }
    let mut conn = PgConnection::connect(&deployment.owner_url).await.ok()?;
    sqlx::query_scalar(
        "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(&mut conn)
    .await
    .ok()
}

pub async fn read(deployment: &Deployment) -> anyhow::Result<Records> {
    match deployment.backend {
        Backend::Postgres => read_postgres(&deployment.owner_url).await,
        Backend::Sqlite => read_sqlite(&deployment.owner_url).await,
    }
}

async fn read_postgres(url: &str) -> anyhow::Result<Records> {
    let mut conn = PgConnection::connect(url)
        .await
        .context("cannot read the records")?;
    let schedules = sqlx::query(&format!(
        "SELECT id::text, env_id::text, {}, {} FROM cron.schedules",
        pg_us("next_run_at"),
        pg_us("run_at")
    ))
    .fetch_all(&mut conn)
    .await?
    .into_iter()
    .map(|r| ScheduleRow {
        id: r.get(0),
        env: r.get(1),
        next_run_us: r.get(2),
        run_at_us: r.get(3),
    })
    .collect();
    let jobs = sqlx::query(&format!(
        "SELECT schedule_id::text, {}, status FROM cron.jobs",
        pg_us("scheduled_for")
    ))
    .fetch_all(&mut conn)
    .await?
    .into_iter()
    .map(|r| JobRow {
        schedule_id: r.get(0),
        scheduled_for_us: r.get(1),
        status: r.get(2),
    })
    .collect();
    let columns: Vec<(String, String)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text FROM information_schema.columns \
         WHERE table_schema = 'cron' AND (column_name = 'schedule_id' \
           OR data_type = 'timestamp with time zone')",
    )
    .fetch_all(&mut conn)
    .await?;
    let mut sources = vec!["cron.jobs (scheduled_for, any status)".to_owned()];
    let mut ranges = Vec::new();
    for (table, first, last) in range_tables(&columns) {
        let rows = sqlx::query(&format!(
            "SELECT schedule_id::text, {}, {} FROM cron.{table}",
            pg_us(&first),
            pg_us(&last)
        ))
        .fetch_all(&mut conn)
        .await?;
        ranges.extend(rows.into_iter().filter_map(|r| {
            Some((
                r.get::<String, _>(0),
                r.get::<Option<i64>, _>(1)?,
                r.get::<Option<i64>, _>(2)?,
            ))
        }));
        sources.push(format!("cron.{table} ({first} to {last})"));
    }
    Ok(Records {
        schedules,
        jobs,
        ranges,
        sources,
    })
}

async fn read_sqlite(url: &str) -> anyhow::Result<Records> {
    let mut conn = SqliteConnection::connect(url)
        .await
        .context("cannot read the records")?;
    let schedules = sqlx::query("SELECT id, env_id, next_run_at, run_at FROM schedules")
        .fetch_all(&mut conn)
        .await?
        .into_iter()
        .map(|r| ScheduleRow {
            id: r.get(0),
            env: r.get(1),
            next_run_us: r.get(2),
            run_at_us: r.get(3),
        })
        .collect();
    let jobs = sqlx::query("SELECT schedule_id, scheduled_for, status FROM jobs")
        .fetch_all(&mut conn)
        .await?
        .into_iter()
        .map(|r| JobRow {
            schedule_id: r.get(0),
            scheduled_for_us: r.get(1),
            status: r.get(2),
        })
        .collect();
    let columns: Vec<(String, String)> = sqlx::query_as(
        "SELECT m.name, p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p \
         WHERE m.type = 'table' AND (p.name = 'schedule_id' OR p.type = 'INTEGER')",
    )
    .fetch_all(&mut conn)
    .await?;
    let mut sources = vec!["jobs (scheduled_for, any status)".to_owned()];
    let mut ranges = Vec::new();
    for (table, first, last) in range_tables(&columns) {
        let rows: Vec<(String, Option<i64>, Option<i64>)> =
            sqlx::query_as(&format!("SELECT schedule_id, {first}, {last} FROM {table}"))
                .fetch_all(&mut conn)
                .await?;
        ranges.extend(rows.into_iter().filter_map(|(s, f, l)| Some((s, f?, l?))));
        sources.push(format!("{table} ({first} to {last})"));
    }
    Ok(Records {
        schedules,
        jobs,
        ranges,
        sources,
    })
}
