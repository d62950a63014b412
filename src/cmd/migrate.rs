//! `sentin8-cron migrate`: applies pending schema migrations for the chosen backend.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context as _;
use serde::Serialize;

use super::DatabaseUrlArg;
use super::output::{self, OutputFormat};
use crate::store::{self, Backend, redact};

/// Apply pending schema migrations (idempotent), or show what is applied and pending.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  sentin8-cron migrate --database-url postgres://postgres@db/cron
  sentin8-cron migrate --status -o json")]
pub struct Args {
    #[command(flatten)]
    pub database: DatabaseUrlArg,
    /// Only list applied and pending versions; change nothing.
    #[arg(long)]
    pub status: bool,
    /// Say what would be applied without applying it.
    #[arg(long, conflicts_with = "status")]
    pub dry_run: bool,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t, value_name = "FORMAT")]
    pub output: OutputFormat,
}

#[derive(Debug, Serialize)]
struct Row {
    version: i64,
    name: String,
    state: &'static str,
}

#[derive(Debug, Serialize)]
struct Report<'a> {
    backend: &'static str,
    database: String,
    migrations: Vec<Row>,
    notes: &'a [String],
}

pub async fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    let url = &args.database.database_url;
    let backend = Backend::from_url(url)?;
    // Neither --status nor --dry-run changes anything, so neither creates a missing SQLite
    // file: everything is pending in a database that does not exist yet.
    let file = store::sqlite_file(url);
    let named = file
        .as_ref()
        .map_or_else(|| redact(url), |path| path.display().to_string());
    let missing = file.filter(|path| !path.exists());
    store::probe_postgres(url).await?;
    let (rows, notes) = if let (Some(path), true) = (&missing, args.status || args.dry_run) {
        let state = if args.status {
            "pending"
        } else {
            "would apply"
        };
        let rows = backend
            .migrations()
            .iter()
            .map(|m| Row {
                version: m.version,
                name: m.name.to_owned(),
                state,
            })
            .collect();
        let note = format!(
            "no database at {} yet: `migrate` creates it and applies every migration",
            path.display()
        );
        (rows, vec![note])
    } else if args.status {
        let status = store::schema_status(url)
            .await
            .with_context(|| format!("cannot read the schema of {named}"))?;
        let mut rows: Vec<Row> = backend
            .migrations()
            .iter()
            .map(|m| Row {
                version: m.version,
                name: m.name.to_owned(),
                state: if status.applied.contains(&m.version) {
                    "applied"
                } else {
                    "pending"
                },
            })
            .collect();
        rows.extend(status.unknown().into_iter().map(|version| Row {
            version,
            name: "(unknown to this build)".into(),
            state: "applied",
        }));
        (rows, Vec::new())
    } else {
        let outcome = store::migrate(url, args.dry_run)
            .await
            .with_context(|| format!("cannot migrate {named}"))?;
        let rows = outcome
            .migrations
            .into_iter()
            .map(|m| Row {
                version: m.version,
                name: m.name,
                state: match (m.applied, args.dry_run) {
                    (true, true) => "would apply",
                    (true, false) => "applied now",
                    (false, _) => "already applied",
                },
            })
            .collect();
        (rows, outcome.notes)
    };

    let report = Report {
        backend: backend.name(),
        database: redact(url),
        migrations: rows,
        notes: &notes,
    };
    match args.output {
        OutputFormat::Json | OutputFormat::Yaml => {
            output::write_structured(out, args.output, &report)?
        }
        OutputFormat::Table | OutputFormat::Wide => {
            writeln!(out, "{} database {}", report.backend, report.database)?;
            let mut table = output::table(["version", "name", "state"]);
            for row in &report.migrations {
                table.add_row(vec![
                    row.version.to_string(),
                    row.name.clone(),
                    row.state.to_owned(),
                ]);
            }
            writeln!(out, "{table}")?;
            for note in report.notes {
                writeln!(out, "note: {note}")?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
