//! `validate-expr`: check one cron expression, or every entry of a declaration file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use chrono::{DateTime, Utc};
use clap::ArgGroup;
use serde::Serialize;

use crate::core::decl::{
    DeclError, EntryError, FieldError, ScheduleSpec, Timing, check_declarations,
};
use crate::core::target::{BASE_URL_FIELD, BaseUrl};

use super::output::{self, OutputFormat};
use super::schedule_args::{
    EXIT_INVALID, ScheduleArgs, is_json, local_text, report_invalid, utc_text,
};

/// Check a cron expression, or a schedule declaration file.
#[derive(Debug, clap::Args)]
#[command(group(ArgGroup::new("input").required(true).args(["expr", "file"])))]
#[command(after_help = "Exit status: 0 valid, 3 invalid.

Examples:
  sentin8-cron validate-expr '30 2 * * MON-FRI' --tz America/New_York
  sentin8-cron validate-expr --file schedules.yaml --base-url https://billing.internal
  cat schedules.yaml | sentin8-cron validate-expr --file -")]
pub struct Args {
    /// The cron expression, e.g. "30 2 * * MON-FRI" or "@daily" (quote it).
    #[arg(value_name = "EXPR")]
    pub expr: Option<String>,
    /// Check every entry of a declaration file (YAML or JSON) instead; - reads standard input.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["tz", "on_dst_gap", "on_dst_repeat"])]
    pub file: Option<PathBuf>,
    /// With --file: also check the base URL the schedules would be enrolled with, as `enroll
    /// --base-url` and the API check target_config.baseUrl.
    #[arg(long, value_name = "URL", requires = "file", conflicts_with = "expr")]
    pub base_url: Option<String>,
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// Output format (yaml prints the JSON document, which is YAML too).
    #[arg(short = 'o', long, value_enum, default_value_t, value_name = "FORMAT")]
    pub output: OutputFormat,
}

pub fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    let now = Utc::now();
    match (&args.expr, &args.file) {
        (_, Some(path)) => check_file(path, args.base_url.as_deref(), args.output, now, out),
        (Some(expr), None) => check_expression(expr, &args, now, out),
        // clap requires one of the two.
        (None, None) => Ok(ExitCode::from(2)),
    }
}

#[derive(Serialize)]
struct ValidExpression<'a> {
    valid: bool,
    expression: &'a str,
    timezone: &'a str,
    /// The schedule in words, with its zone and DST policies.
    description: String,
    next_fire: NextFire,
}

#[derive(Serialize)]
struct NextFire {
    utc: String,
    local: String,
}

fn check_expression(
    expression: &str,
    args: &Args,
    now: DateTime<Utc>,
    out: &mut (dyn Write + Send),
) -> anyhow::Result<ExitCode> {
    let json = is_json(args.output);
    let schedule = match args.schedule.compile(expression) {
        Ok(schedule) => schedule,
        Err(errors) => return report_invalid(out, json, &errors),
    };
    let Some(fire) = schedule.next_fire_after(now) else {
        let errors = [crate::core::decl::FieldError::new("cron", "no future fire")];
        return report_invalid(out, json, &errors);
    };
    let expression = expression.trim();
    let timezone = schedule.tz.name();
    let next_fire = NextFire {
        utc: utc_text(fire.at),
        local: local_text(&fire.local),
    };
    if json {
        output::write_json(
            out,
            &ValidExpression {
                valid: true,
                expression,
                timezone,
                description: schedule.describe(),
                next_fire,
            },
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let kind = if schedule.expr.is_fixed_time() {
        format!(
            "fixed-time; on DST gap: {}, on DST repeat: {}",
            schedule.on_dst_gap, schedule.on_dst_repeat
        )
    } else {
        "interval; follows elapsed time across DST changes".to_owned()
    };
    writeln!(out, "valid: \"{expression}\" in {timezone} ({kind})")?;
    writeln!(out, "{}", schedule.describe())?;
    let mut table = output::table(["next fire (UTC)", "next fire (local)"]);
    table.add_row([next_fire.utc, next_fire.local]);
    writeln!(out, "{table}")?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct FileReport<'a> {
    valid: bool,
    schedules: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// Problems of the command's own arguments (`--base-url`).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    problems: &'a [FieldError],
    errors: &'a [EntryError],
}

fn check_file(
    path: &Path,
    base_url: Option<&str>,
    format: OutputFormat,
    now: DateTime<Utc>,
    out: &mut (dyn Write + Send),
) -> anyhow::Result<ExitCode> {
    let json = is_json(format);
    let problems: Vec<FieldError> = base_url
        .and_then(|raw| BaseUrl::parse(raw).err())
        .map(|problem| FieldError::new(BASE_URL_FIELD, problem.to_string()))
        .into_iter()
        .collect();
    for problem in &problems {
        eprintln!("error: {problem}");
    }
    let checked = super::enroll::source::read_input(path)
        .map_err(|err| super::message(&err))
        .and_then(|document| {
            check_declarations(&document.text, document.format, now)
                .map_err(|err: DeclError| format!("{}: {err}", document.origin))
        });
    let (specs, errors) = match checked {
        Ok(report) => report,
        Err(message) => {
            eprintln!("error: {message}");
            if json {
                output::write_json(
                    out,
                    &FileReport {
                        valid: false,
                        schedules: 0,
                        error: Some(message),
                        problems: &problems,
                        errors: &[],
                    },
                )?;
            }
            return Ok(ExitCode::from(EXIT_INVALID));
        }
    };

    if !errors.is_empty() {
        for entry in &errors {
            eprintln!("error: {entry}");
        }
        eprintln!(
            "{} of {} schedules in {} are invalid",
            errors.len(),
            errors.len() + specs.len(),
            path.display()
        );
    }
    if json {
        output::write_json(
            out,
            &FileReport {
                valid: errors.is_empty() && problems.is_empty(),
                schedules: specs.len(),
                error: None,
                problems: &problems,
                errors: &errors,
            },
        )?;
    } else if errors.is_empty() && problems.is_empty() {
        write_valid_table(out, path, &specs, now)?;
    }
    Ok(if errors.is_empty() && problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_INVALID)
    })
}

fn write_valid_table(
    out: &mut (dyn Write + Send),
    path: &Path,
    specs: &[ScheduleSpec],
    now: DateTime<Utc>,
) -> anyhow::Result<()> {
    let count = specs.len();
    let noun = if count == 1 {
        "schedule is"
    } else {
        "schedules are"
    };
    writeln!(out, "valid: {count} {noun} valid in {}", path.display())?;
    if specs.is_empty() {
        return Ok(());
    }
    let mut table = output::table(["schedule_type", "timing", "next fire (UTC)"]);
    for spec in specs {
        let timing = match &spec.timing {
            Timing::Cron(cron) => format!("cron \"{}\" in {}", cron.expression, cron.timezone),
            Timing::Once { run_at } => format!("once at {}", utc_text(*run_at)),
        };
        let next = spec
            .first_fire_after(now)
            .map_or_else(|| "-".to_owned(), utc_text);
        table.add_row([spec.schedule_type.clone(), timing, next]);
    }
    writeln!(out, "{table}")?;
    Ok(())
}
