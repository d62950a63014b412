//! `next-fires`: list the upcoming fires of a cron expression, with DST adjustments marked, and
//! with a schedule's jitter and bounds the calls the server would make for it.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use clap::ValueEnum;
use serde::Serialize;
use uuid::Uuid;

use crate::core::calendar::{
    self, Calendar, CalendarDraft, Calendars, Exclude, ExcludeSpec, Exclusion,
};
use crate::core::cron::{DstAdjustment, Fire, ZonedCron};
use crate::core::decl::{CronTiming, FieldError, PolicyDecl, Timing};
use crate::core::model::ScheduleId;
use crate::core::policies::{
    IntervalMemo, Occurrences, Policies, describe_policies, format_duration,
};
use crate::util::duration::duration;

use super::output::{self, OutputFormat, time_text};
use super::schedule_args::{ScheduleArgs, local_text, report_invalid};

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
    /// One UTC RFC 3339 time per line (the call time, with --jitter).
    Text,
}

/// List the next fires of a cron expression.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  sentin8-cron next-fires '30 2 * * *' --tz America/New_York -n 5
  sentin8-cron next-fires '*/15 * * * *' -n 100 -o text | head -3
  sentin8-cron next-fires '*/15 * * * *' --jitter 30s --schedule-id <id> --end 2031-01-01T00:00:00Z
  sentin8-cron next-fires '0 9 * * MON-FRI' --exclude 2031-12-25 --ical holidays.ics -n 20")]
pub struct Args {
    /// The cron expression, e.g. "*/15 * * * *", "@daily" or "@every 90s" (quote it).
    #[arg(value_name = "EXPR")]
    pub expr: String,
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// List fires strictly after this RFC 3339 time [default: now]. With --jitter, the calls
    /// after it (an occurrence just before it whose call comes after it included).
    #[arg(long, value_name = "RFC3339", value_parser = parse_rfc3339)]
    pub after: Option<DateTime<Utc>>,
    /// A schedule's max_jitter: each call comes up to this long after its occurrence (e.g.
    /// 30s; at most the expression's shortest interval, as the API requires).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub jitter: Option<Duration>,
    /// The schedule whose calls to list: its id seeds the jitter, so the call times are the
    /// ones the server makes for it [default: the nil id].
    #[arg(long, value_name = "UUID", value_parser = parse_uuid)]
    pub schedule_id: Option<Uuid>,
    /// A schedule's start_at: no fire before this RFC 3339 time.
    #[arg(long, value_name = "RFC3339", value_parser = parse_rfc3339)]
    pub start: Option<DateTime<Utc>>,
    /// A schedule's end_at: no fire after this RFC 3339 time (after --start).
    #[arg(long, value_name = "RFC3339", value_parser = parse_rfc3339)]
    pub end: Option<DateTime<Utc>>,
    /// A schedule's exclusion: a date (2031-12-25), a range (2031-12-24..2031-12-26) or a
    /// cron-like spec ('* * * * SAT,SUN'), on the zone's wall clock. Excluded occurrences are
    /// listed, marked with what excludes them. Repeatable.
    #[arg(long = "exclude", value_name = "SPEC")]
    pub exclude: Vec<String>,
    /// A calendar of exclusions from an iCalendar (RFC 5545) file of holidays, named after the
    /// file, as a schedule would name a calendar loaded from it.
    #[arg(long, value_name = "FILE")]
    pub ical: Option<std::path::PathBuf>,
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

fn parse_uuid(text: &str) -> Result<Uuid, String> {
    Uuid::parse_str(text.trim()).map_err(|err| {
        format!("not a schedule id such as 0190b6c4-8f7e-7cc2-9a41-3d1f0c1e2b3a ({err})")
    })
}

/// A call instant: to the millisecond, the precision of a jitter.
fn call_text(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[derive(Serialize)]
struct Report<'a> {
    expression: &'a str,
    timezone: &'a str,
    /// The schedule in words, with its zone, DST policies, jitter and bounds.
    description: String,
    after: String,
    /// The jitter, when one is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    max_jitter: Option<String>,
    /// The id that seeded the jitter (the nil id unless --schedule-id), when one is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    schedule_id: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    start: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    end: Option<String>,
    fires: Vec<FireRow>,
}

#[derive(Serialize)]
struct FireRow {
    /// The occurrence.
    utc: String,
    local: String,
    dst: Option<DstAdjustment>,
    /// With a jitter: when the call is made.
    #[serde(skip_serializing_if = "Option::is_none")]
    call: Option<String>,
    /// With a jitter: how long after its occurrence, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    jitter_ms: Option<i64>,
    /// What excludes the occurrence (it is recorded as skipped, not called): the calendar,
    /// the entry and its note.
    #[serde(skip_serializing_if = "Option::is_none")]
    excluded: Option<String>,
}

/// One listed fire: the occurrence (with its wall time and DST mark) and its call.
struct Listed {
    fire: Fire,
    call: DateTime<Utc>,
    excluded: Option<Exclusion>,
}

impl Listed {
    fn row(&self, jittered: bool) -> FireRow {
        FireRow {
            utc: time_text(self.fire.at),
            local: local_text(&self.fire.local),
            dst: self.fire.dst,
            call: jittered.then(|| call_text(self.call)),
            jitter_ms: jittered.then(|| (self.call - self.fire.at).num_milliseconds()),
            excluded: self.excluded.as_ref().map(ToString::to_string),
        }
    }
}

/// The policies the flags describe, validated as the API validates a schedule's (from `after`
/// rather than now, the point the listing starts); each error names its flag.
fn policies(
    args: &Args,
    timing: &Timing,
    after: DateTime<Utc>,
) -> Result<Policies, Vec<FieldError>> {
    let mut errors = Vec::new();
    // The API also refuses an end that is not in the future; a listing may look at the past,
    // so only the order of the bounds is checked here.
    if let (Some(start), Some(end)) = (args.start, args.end)
        && end <= start
    {
        errors.push(FieldError::new(
            "--end",
            format!(
                "{} is not after --start ({})",
                time_text(end),
                time_text(start)
            ),
        ));
    }
    let decl = PolicyDecl {
        max_jitter: args.jitter.map(format_duration),
        start_at: args.start.map(|start| Some(start.to_rfc3339())),
        ..PolicyDecl::default()
    };
    match decl.validate(
        &Policies::default(),
        None,
        timing,
        after,
        &IntervalMemo::default(),
    ) {
        Ok((mut policies, _)) if errors.is_empty() => {
            policies.end_at = args.end;
            Ok(policies)
        }
        Ok(_) => Err(errors),
        Err(problems) => {
            errors.extend(problems.into_iter().map(|problem| FieldError {
                field: flag_of(&problem.field).to_owned(),
                message: problem.message,
            }));
            Err(errors)
        }
    }
}

/// The flag that sets a policy field.
fn flag_of(field: &str) -> &str {
    match field {
        "max_jitter" => "--jitter",
        "start_at" => "--start",
        "end_at" => "--end",
        other => other,
    }
}

/// The first `count` calls after `after`, each with its occurrence: the engine's own walk from
/// call to call, so the jitter and the bounds are the server's.
fn list(
    zoned: &ZonedCron,
    occurrences: &Occurrences<'_>,
    exclusions: &(Exclude, Calendars),
    after: DateTime<Utc>,
    count: usize,
) -> anyhow::Result<Vec<Listed>> {
    let first = occurrences.next_with_occurrence(after)?;
    let (exclude, calendars) = exclusions;
    Ok(occurrences
        .walk(first)
        .take(count)
        .map(|(occurrence, call)| {
            let fire = zoned.fire_at(occurrence);
            Listed {
                excluded: exclude.excluding(fire.local.naive_local(), calendars),
                fire,
                call,
            }
        })
        .collect())
}

/// The exclusions the flags give: `--exclude` specs and the calendar of an `--ical` file
/// (named after the file), each problem named by its flag.
fn exclusions(args: &Args) -> Result<(Exclude, Calendars), Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut texts = Vec::new();
    for (i, text) in args.exclude.iter().enumerate() {
        match ExcludeSpec::parse(text) {
            Ok(spec) => texts.push(spec.to_string()),
            Err(reason) => errors.push(FieldError::new(format!("--exclude[{i}]"), reason)),
        }
    }
    let mut calendars = Calendars::new();
    if let Some(file) = &args.ical {
        let name = file
            .file_stem()
            .and_then(|s| s.to_str())
            .filter(|s| calendar::check_name(s).is_ok())
            .unwrap_or("ical")
            .to_owned();
        let read = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))
            .and_then(|text| calendar::ical::parse_ical(&text).map_err(|e| e.to_string()));
        match read {
            Ok(entries) => {
                let draft = CalendarDraft {
                    description: String::new(),
                    entries: entries.into_iter().map(Into::into).collect(),
                };
                match draft.validate() {
                    Ok(entries) => {
                        let calendar =
                            Calendar::new(name.clone(), String::new(), entries, "cli", Utc::now());
                        calendars.insert(name.clone(), calendar);
                        texts.push(name);
                    }
                    Err(problems) => {
                        errors.extend(problems.into_iter().map(|p| {
                            FieldError::new("--ical", format!("{}: {}", p.field, p.message))
                        }))
                    }
                }
            }
            Err(reason) => errors.push(FieldError::new("--ical", reason)),
        }
    }
    match Exclude::validate("--exclude", &texts) {
        Ok(exclude) if errors.is_empty() => Ok((exclude, calendars)),
        Ok(_) => Err(errors),
        Err(mut problems) => {
            errors.append(&mut problems);
            Err(errors)
        }
    }
}

pub fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    let json = args.output == NextFiresOutput::Json;
    let format = if json {
        OutputFormat::Json
    } else {
        OutputFormat::Table
    };
    let zoned = match args.schedule.compile(&args.expr) {
        Ok(zoned) => zoned,
        Err(errors) => return report_invalid(out, format, &errors),
    };
    let after = args.after.unwrap_or_else(Utc::now);
    let expression = args.expr.trim();
    let timing = Timing::Cron(CronTiming::new(expression, zoned));
    let policies = match policies(&args, &timing, after) {
        Ok(policies) => policies,
        Err(errors) => return report_invalid(out, format, &errors),
    };
    let exclusions = match exclusions(&args) {
        Ok(exclusions) => exclusions,
        Err(errors) => return report_invalid(out, format, &errors),
    };
    let jittered = !policies.max_jitter.is_zero();
    let seed = ScheduleId(args.schedule_id.unwrap_or(Uuid::nil()));
    let occurrences = Occurrences {
        timing: &timing,
        policies: &policies,
        seed,
    };
    let fires = list(
        &zoned,
        &occurrences,
        &exclusions,
        after,
        args.count as usize,
    )?;
    let mut description = match describe_policies(&policies, None) {
        Some(words) => format!("{}; {words}", zoned.describe()),
        None => zoned.describe(),
    };
    if !exclusions.0.is_empty() {
        description = format!("{description}; except {}", exclusions.0.texts().join(", "));
    }
    let excluding = !exclusions.0.is_empty();

    match args.output {
        NextFiresOutput::Json => output::write_json(
            out,
            &Report {
                expression,
                timezone: zoned.tz.name(),
                description,
                after: time_text(after),
                max_jitter: jittered.then(|| format_duration(policies.max_jitter)),
                schedule_id: jittered.then_some(seed.0),
                start: args.start.map(time_text),
                end: args.end.map(time_text),
                fires: fires.iter().map(|listed| listed.row(jittered)).collect(),
            },
        )?,
        NextFiresOutput::Text => {
            if jittered && args.schedule_id.is_none() {
                // Standard output stays one time a line; the caveat goes where people read it.
                eprintln!(
                    "note: calls of the nil schedule id; a schedule's own come elsewhere within {} \
                     of each occurrence (pass --schedule-id)",
                    format_duration(policies.max_jitter)
                );
            }
            // Calls only: an excluded occurrence is not called.
            for listed in fires.iter().filter(|l| l.excluded.is_none()) {
                let at = if jittered {
                    call_text(listed.call)
                } else {
                    time_text(listed.call)
                };
                writeln!(out, "{at}")?;
            }
        }
        NextFiresOutput::Table => {
            writeln!(
                out,
                "next fires of \"{expression}\" in {} after {}",
                zoned.tz.name(),
                time_text(after)
            )?;
            writeln!(out, "{description}")?;
            if jittered {
                let max = format_duration(policies.max_jitter);
                match args.schedule_id {
                    Some(id) => writeln!(out, "calls of schedule {id}, each up to {max} late")?,
                    None => writeln!(
                        out,
                        "calls of the nil schedule id: each schedule's calls fall elsewhere in \
                         [occurrence, occurrence + {max}); pass --schedule-id for a schedule's own"
                    )?,
                }
            }
            if !fires.is_empty() {
                let mut headers = if jittered {
                    vec!["#", "occurrence (UTC)", "call (UTC)", "local", "DST"]
                } else {
                    vec!["#", "UTC", "local", "DST"]
                };
                if excluding {
                    headers.push("excluded (skipped, not called)");
                }
                let mut table = output::table(headers);
                for (number, listed) in (1..).zip(&fires) {
                    let fire = &listed.fire;
                    let dst = match fire.dst {
                        Some(DstAdjustment::Shifted) => "shifted (wall time skipped by DST)",
                        Some(DstAdjustment::Repeated) => "repeated (wall time occurs twice)",
                        None => "",
                    };
                    let mut row = vec![number.to_string(), time_text(fire.at)];
                    if jittered {
                        row.push(call_text(listed.call));
                    }
                    row.extend([local_text(&fire.local), dst.to_owned()]);
                    if excluding {
                        row.push(
                            listed
                                .excluded
                                .as_ref()
                                .map(ToString::to_string)
                                .unwrap_or_default(),
                        );
                    }
                    table.add_row(row);
                }
                writeln!(out, "{table}")?;
            }
            let asked = args.count as usize;
            match (fires.last(), args.end) {
                (None, None) => writeln!(
                    out,
                    "no fires: the expression never fires after {}",
                    time_text(after)
                )?,
                (None, Some(end)) => writeln!(
                    out,
                    "no fires: none after {} up to --end {}",
                    time_text(after),
                    time_text(end)
                )?,
                (Some(last), None) if fires.len() < asked => writeln!(
                    out,
                    "only {} of the {asked} requested fires exist: none after {}",
                    fires.len(),
                    time_text(last.fire.at)
                )?,
                (Some(_), Some(end)) if fires.len() < asked => writeln!(
                    out,
                    "only {} of the {asked} requested fires come by --end {}",
                    fires.len(),
                    time_text(end)
                )?,
                (Some(_), _) => {}
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
