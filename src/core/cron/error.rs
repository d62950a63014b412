//! Errors of cron parsing and evaluation.

use std::fmt;

/// One of the fields of a cron expression (the second only in a six-field one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CronField {
    Second,
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
}

impl CronField {
    /// The name used in error messages.
    pub fn as_str(self) -> &'static str {
        match self {
            CronField::Second => "second",
            CronField::Minute => "minute",
            CronField::Hour => "hour",
            CronField::DayOfMonth => "day-of-month",
            CronField::Month => "month",
            CronField::DayOfWeek => "day-of-week",
        }
    }
}

impl fmt::Display for CronField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What is wrong with one field of an expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldProblem {
    #[error("the field is empty")]
    EmptyField,
    #[error("empty list element")]
    EmptyElement,
    #[error("{value} is out of range {min}-{max}")]
    OutOfRange { value: String, min: u32, max: u32 },
    #[error("unknown name {0:?}")]
    UnknownName(String),
    #[error("invalid value {0:?}")]
    InvalidValue(String),
    #[error("step must be at least 1")]
    StepTooSmall,
    #[error("step {step} is out of range 1-{max}")]
    StepOutOfRange { step: String, max: u32 },
    #[error("invalid step {0:?}")]
    InvalidStep(String),
    #[error("reversed range {from}-{to} (wrap-around is only allowed in hour and day-of-week)")]
    ReversedRange { from: u32, to: u32 },
    #[error("nth occurrence {0} is out of range 1-5")]
    NthOutOfRange(String),
    #[error("{0:?} cannot be combined with a range or step")]
    ModifierWithRange(String),
}

/// Why a cron expression or time zone was rejected, or why a schedule cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    #[error(
        "expected 5 fields (minute hour day-of-month month day-of-week), or 6 with a second \
         first, got {0}"
    )]
    FieldCount(usize),
    #[error("unknown alias {0:?}")]
    UnknownAlias(String),
    #[error("alias {0:?} must stand alone, without further fields")]
    AliasWithFields(String),
    #[error("{field}: {problem}")]
    Field {
        field: CronField,
        problem: FieldProblem,
    },
    /// An `@every` interval that does not parse or is out of range.
    #[error("{0}")]
    Interval(String),
    #[error("timezone: unknown time zone {0:?}")]
    UnknownTimeZone(String),
    #[error("no future fire")]
    NoFutureFire,
}

impl CronError {
    /// The message without the leading field name, for reports that name the field separately
    /// (`timezone: unknown time zone "X"` becomes `unknown time zone "X"`).
    pub fn message_without_field(&self) -> String {
        match self {
            CronError::UnknownTimeZone(name) => format!("unknown time zone {name:?}"),
            other => other.to_string(),
        }
    }
}
