//! `next-fires`: list the upcoming fires of a cron expression, with DST adjustments marked.

use std::io::Write;
use std::process::ExitCode;

use chrono::{DateTime, Utc};
use clap::ValueEnum;
use serde::Serialize;

use crate::core::cron::{DstAdjustment, Fire};

use super::output;
use super::schedule_args::{ScheduleArgs, local_text, report_invalid, utc_text};

/// Most fires one call lists.
pub const MAX_COUNT: u32 = 10_000;

/// How `next-fires` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum NextFiresOutput {
    /// A human table.
    #[default]
    Table,
    /// One JSON document, for machines.
    Json,
    /// One UTC RFC 3339 time per line.
    Text,
}

/// List the next fires of a cron expression.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  sentin8-cron next-fires '30 2 * * *' --tz America/New_York -n 5
  sentin8-cron next-fires '*/15 * * * *' -n 100 -o text | head -3")]
pub struct Args {
    /// The cron expression, e.g. "*/15 * * * *" or "@daily" (quote it).
    #[arg(value_name = "EXPR")]
    pub expr: String,
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// List fires strictly after this RFC 3339 time [default: now].
    #[arg(long, value_name = "RFC3339", value_parser = parse_rfc3339)]
    pub after: Option<DateTime<Utc>>,
    /// How many fires to list (1-10000).
    #[arg(
        short = 'n',
        long,
        value_name = "N",
        default_value_t = 10,
        value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_COUNT))
    )]
    pub count: u32,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t, value_name = "FORMAT")]
    pub output: NextFiresOutput,
}

fn parse_rfc3339(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|parsed| parsed.with_timezone(&Utc))
        .map_err(|err| format!("not an RFC 3339 time such as 2025-03-09T07:00:00Z ({err})"))
}

#[derive(Serialize)]
struct Report<'a> {
    expression: &'a str,
    timezone: &'a str,
    /// The schedule in words, with its zone and DST policies.
    description: String,
    after: String,
    fires: Vec<FireRow>,
}

#[derive(Serialize)]
struct FireRow {
    utc: String,
    local: String,
    dst: Option<DstAdjustment>,
}

impl From<&Fire> for FireRow {
    fn from(fire: &Fire) -> Self {
        FireRow {
            utc: utc_text(fire.at),
            local: local_text(&fire.local),
            dst: fire.dst,
        }
    }
}

pub fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    let json = args.output == NextFiresOutput::Json;
    let schedule = match args.schedule.compile(&args.expr) {
        Ok(schedule) => schedule,
        Err(errors) => return report_invalid(out, json, &errors),
    };
    let after = args.after.unwrap_or_else(Utc::now);
    let fires: Vec<Fire> = schedule
        .fires_after(after)
        .take(args.count as usize)
        .collect();
    let expression = args.expr.trim();

    match args.output {
        NextFiresOutput::Json => output::write_json(
            out,
            &Report {
                expression,
                timezone: schedule.tz.name(),
                description: schedule.describe(),
                after: utc_text(after),
                fires: fires.iter().map(FireRow::from).collect(),
            },
        )?,
        NextFiresOutput::Text => {
            for fire in &fires {
                writeln!(out, "{}", utc_text(fire.at))?;
            }
        }
        NextFiresOutput::Table => {
            writeln!(
                out,
                "next fires of \"{expression}\" in {} after {}",
                schedule.tz.name(),
                utc_text(after)
            )?;
            writeln!(out, "{}", schedule.describe())?;
            if !fires.is_empty() {
                let mut table = output::table(["#", "UTC", "local", "DST"]);
                for (number, fire) in (1..).zip(&fires) {
                    let dst = match fire.dst {
                        Some(DstAdjustment::Shifted) => "shifted (wall time skipped by DST)",
                        Some(DstAdjustment::Repeated) => "repeated (wall time occurs twice)",
                        None => "",
                    };
                    table.add_row([
                        number.to_string(),
                        utc_text(fire.at),
                        local_text(&fire.local),
                        dst.to_owned(),
                    ]);
                }
                writeln!(out, "{table}")?;
            }
            let asked = args.count as usize;
            match fires.last() {
                None => writeln!(
                    out,
                    "no fires: the expression never fires after {}",
                    utc_text(after)
                )?,
                Some(last) if fires.len() < asked => writeln!(
                    out,
                    "only {} of the {asked} requested fires exist: none after {}",
                    fires.len(),
                    utc_text(last.at)
                )?,
                Some(_) => {}
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
