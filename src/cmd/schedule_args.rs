//! Arguments and reporting shared by the commands that take a cron expression.

use std::io::Write;
use std::process::ExitCode;

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use clap::ValueEnum;
use clap::builder::PossibleValue;
use serde::Serialize;

use crate::core::cron::{CronExpr, OnDstGap, OnDstRepeat, ZonedCron, parse_timezone};
use crate::core::decl::FieldError;

use super::output::{self, OutputFormat};

/// Exit code for invalid input (an expression, a declaration, a request the server refused as
/// invalid) and for a tick whose calls failed: distinct from a runtime failure (1) and a usage
/// error (2).
pub const EXIT_INVALID: u8 = 3;

/// Time zone and DST policies of an expression given on the command line.
#[derive(Debug, Clone, clap::Args)]
pub struct ScheduleArgs {
    /// IANA time zone the expression's fields are matched in [default: UTC].
    #[arg(long, value_name = "ZONE")]
    pub tz: Option<String>,
    /// What a fixed-time schedule does when its wall time falls in a spring-forward gap.
    #[arg(long, value_enum, value_name = "POLICY")]
    pub on_dst_gap: Option<OnDstGap>,
    /// What a fixed-time schedule does when its wall time occurs twice (fall-back).
    #[arg(long, value_enum, value_name = "POLICY")]
    pub on_dst_repeat: Option<OnDstRepeat>,
}

impl ScheduleArgs {
    /// The zone name in use.
    pub fn zone_name(&self) -> &str {
        self.tz.as_deref().unwrap_or("UTC")
    }

    /// Compiles `expression` with these settings, collecting every problem.
    pub fn compile(&self, expression: &str) -> Result<ZonedCron, Vec<FieldError>> {
        let mut errors = Vec::new();
        let expr = CronExpr::parse(expression)
            .map_err(|err| errors.push(FieldError::new("cron", err.to_string())))
            .ok();
        let tz = parse_timezone(self.zone_name())
            .map_err(|err| errors.push(FieldError::new("timezone", err.message_without_field())))
            .ok();
        match (expr, tz) {
            (Some(expr), Some(tz)) => Ok(ZonedCron::new(
                expr,
                tz,
                self.on_dst_gap.unwrap_or_default(),
                self.on_dst_repeat.unwrap_or_default(),
            )),
            _ => Err(errors),
        }
    }
}

impl ValueEnum for OnDstGap {
    fn value_variants<'a>() -> &'a [Self] {
        &[OnDstGap::Shift, OnDstGap::Skip]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            OnDstGap::Shift => PossibleValue::new("shift").help("run once, right after the gap"),
            OnDstGap::Skip => PossibleValue::new("skip").help("do not run"),
        })
    }
}

impl ValueEnum for OnDstRepeat {
    fn value_variants<'a>() -> &'a [Self] {
        &[OnDstRepeat::Once, OnDstRepeat::Twice]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            OnDstRepeat::Once => PossibleValue::new("once").help("run at the first occurrence"),
            OnDstRepeat::Twice => PossibleValue::new("twice").help("run at both occurrences"),
        })
    }
}

/// `2025-03-09T07:00:00Z`
pub fn utc_text(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// `2025-03-09T03:00:00-04:00`
pub fn local_text<Tz: TimeZone>(local: &DateTime<Tz>) -> String
where
    Tz::Offset: std::fmt::Display,
{
    local.to_rfc3339_opts(SecondsFormat::Secs, false)
}

#[derive(Serialize)]
struct InvalidReport<'a> {
    valid: bool,
    errors: &'a [FieldError],
}

/// Reports field errors: always on stderr, and as `{"valid": false, "errors": [...]}` on `out`
/// in JSON mode. Returns the exit code for an invalid input.
pub fn report_invalid(
    out: &mut (dyn Write + Send),
    json: bool,
    errors: &[FieldError],
) -> anyhow::Result<ExitCode> {
    for error in errors {
        eprintln!("error: {error}");
    }
    if json {
        output::write_json(
            out,
            &InvalidReport {
                valid: false,
                errors,
            },
        )?;
    }
    Ok(ExitCode::from(EXIT_INVALID))
}

/// Whether a table/JSON switch asks for JSON.
pub fn is_json(format: OutputFormat) -> bool {
    format.is_structured()
}
