//! `validate-expr`: check one cron expression, or every entry of a declaration file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use chrono::{DateTime, Utc};
use clap::ArgGroup;
use serde::Serialize;

use crate::core::decl::{
    EntryError, FieldError, Position, ScheduleSpec, Timing, check_declarations, declared_calendars,
};
use crate::core::target::{BASE_URL_FIELD, BaseUrl, TargetPolicy as _};

use super::checks::{CheckFormat, PolicyArgs, Problem, annotate};
use super::output::{self, time_text};
use super::schedule_args::{EXIT_INVALID, ScheduleArgs, is_json, local_text, report_invalid};

/// Check a cron expression, or a schedule declaration file.
#[derive(Debug, clap::Args)]
#[command(group(ArgGroup::new("input").required(true).args(["expr", "file"])))]
#[command(after_help = "Exit status: 0 valid, 3 invalid.

Examples:
  sentin8-cron validate-expr '30 2 * * MON-FRI' --tz America/New_York
  sentin8-cron validate-expr --file schedules.yaml --base-url https://billing.internal
  cat schedules.yaml | sentin8-cron validate-expr --file -")]
pub struct Args {
    /// The cron expression, e.g. "30 2 * * MON-FRI", "@daily" or "@every 90s" (quote it).
    #[arg(value_name = "EXPR")]
    pub expr: Option<String>,
    /// Check every entry of a declaration file (YAML or JSON) instead; - reads standard input.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["tz", "on_dst_gap", "on_dst_repeat"])]
    pub file: Option<PathBuf>,
    /// With --file: also check the base URL the schedules would be enrolled with, as `enroll
    /// --base-url` and the API check target_config.baseUrl: parsed, then judged by the egress
    /// policy `serve` would build from the same settings (--target-allow, --platform-domain,
    /// development mode from --database-url and the authentication settings).
    #[arg(long, value_name = "URL", requires = "file", conflicts_with = "expr")]
    pub base_url: Option<String>,
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// With --base-url: the egress policy `serve` applies, from the same settings.
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Output format (yaml prints the JSON document, which is YAML too; github adds an
    /// `::error file=F,line=L,col=C::message` line per problem, for CI annotations).
    #[arg(short = 'o', long, value_enum, default_value_t, value_name = "FORMAT")]
    pub output: CheckFormat,
}

pub fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    let now = Utc::now();
    match (&args.expr, &args.file) {
        (_, Some(path)) => check_file(path, &args, now, out),
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
    let format = args.output.format();
    let json = is_json(format);
    let invalid = |out: &mut (dyn Write + Send), errors: &[FieldError]| {
        let code = report_invalid(out, format, errors)?;
        if args.output.is_github() {
            let problems: Vec<Problem> = errors.iter().map(Problem::field).collect();
            annotate(out, None, &problems)?;
        }
        Ok(code)
    };
    let schedule = match args.schedule.compile(expression) {
        Ok(schedule) => schedule,
        Err(errors) => return invalid(out, &errors),
    };
    let Some(fire) = schedule.next_fire_after(now) else {
        let errors = [FieldError::new("cron", "no future fire")];
        return invalid(out, &errors);
    };
    let expression = expression.trim();
    let timezone = schedule.tz.name();
    let next_fire = NextFire {
        utc: time_text(fire.at),
        local: local_text(&fire.local),
    };
    if json {
        output::write_structured(
            out,
            format,
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
    /// The entries the file declares, valid or not.
    schedules: usize,
    /// Of those, how many are valid and how many invalid.
    valid_schedules: usize,
    invalid_schedules: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// Where `error` is in the file, when the parser said.
    #[serde(skip_serializing_if = "Option::is_none")]
    position: Option<Position>,
    /// Problems of the command's own arguments (`--base-url`).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    problems: &'a [FieldError],
    errors: &'a [EntryError],
    /// Which egress policy `--base-url` was checked against.
    #[serde(skip_serializing_if = "Option::is_none")]
    egress_policy: Option<String>,
}

fn check_file(
    path: &Path,
    args: &Args,
    now: DateTime<Utc>,
    out: &mut (dyn Write + Send),
) -> anyhow::Result<ExitCode> {
    let format = args.output.format();
    let json = is_json(format);
    // The base URL as `serve` would judge it: parsed, then the egress policy built from the
    // same settings (allow list, platform domain, development mode).
    let mut egress_note = None;
    let mut problems: Vec<FieldError> = Vec::new();
    if let Some(raw) = args.base_url.as_deref() {
        match BaseUrl::parse(raw) {
            Err(problem) => problems.push(FieldError::new(BASE_URL_FIELD, problem.to_string())),
            Ok(url) => {
                let (policy, note) = args.policy.policy()?;
                if let Err(problem) = policy.check(&url) {
                    problems.push(FieldError::new(BASE_URL_FIELD, problem));
                }
                egress_note = Some(note);
            }
        }
    }
    if let Some(note) = &egress_note
        && !json
    {
        eprintln!("note: --base-url checked against {note}");
    }
    for problem in &problems {
        eprintln!("error: {problem}");
    }
    let mut annotations: Vec<Problem> = problems.iter().map(Problem::field).collect();
    // A file that cannot be read is a runtime failure (1), as everywhere a file is read; one
    // that does not parse is invalid input (3), with its report.
    let document = super::enroll::source::read_input(path)?;
    // The declared calendars are checked too: a problem of one is the document's.
    let checked = check_declarations(&document.text, document.format, now)
        .and_then(|report| declared_calendars(&document.text, document.format).map(|_| report));
    let (specs, errors) = match checked {
        Ok(report) => report,
        Err(err) => {
            let problem = Problem::document(&err);
            eprintln!("error: {}", problem.located(&document.origin));
            if json {
                output::write_structured(
                    out,
                    format,
                    &FileReport {
                        valid: false,
                        schedules: 0,
                        valid_schedules: 0,
                        invalid_schedules: 0,
                        error: Some(format!("{}: {err}", document.origin)),
                        position: err.position(),
                        problems: &problems,
                        errors: &[],
                        egress_policy: egress_note,
                    },
                )?;
            }
            annotations.push(problem);
            if args.output.is_github() {
                annotate(out, Some(path), &annotations)?;
            }
            return Ok(ExitCode::from(EXIT_INVALID));
        }
    };

    let declared = errors.len() + specs.len();
    if !errors.is_empty() {
        for entry in &errors {
            let problem = Problem::entry(entry);
            eprintln!("error: {}", problem.located(&document.origin));
            annotations.push(problem);
        }
        eprintln!(
            "{} of {declared} schedules in {} are invalid",
            errors.len(),
            document.origin
        );
    }
    let valid = errors.is_empty() && problems.is_empty();
    if json {
        output::write_structured(
            out,
            format,
            &FileReport {
                valid,
                schedules: declared,
                valid_schedules: specs.len(),
                invalid_schedules: errors.len(),
                error: None,
                position: None,
                problems: &problems,
                errors: &errors,
                egress_policy: egress_note,
            },
        )?;
    } else if valid {
        write_valid_table(out, path, &specs, now)?;
    }
    if args.output.is_github() {
        annotate(out, Some(path), &annotations)?;
    }
    Ok(if valid {
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
            Timing::Once { run_at } => format!("once at {}", time_text(*run_at)),
        };
        let next = spec
            .first_occurrence_after(now)
            .map_or_else(|| "-".to_owned(), time_text);
        table.add_row([spec.schedule_type.clone(), timing, next]);
    }
    writeln!(out, "{table}")?;
    Ok(())
}
