//! Cron expressions: parsing, evaluation in UTC and in IANA time zones, daylight-saving policy.
//!
//! # Grammar
//!
//! An expression is five fields separated by runs of spaces or tabs (leading and trailing
//! whitespace is ignored): `minute hour day-of-month month day-of-week`.
//!
//! | field        | values                                   |
//! |--------------|------------------------------------------|
//! | minute       | 0-59                                     |
//! | hour         | 0-23                                     |
//! | day-of-month | 1-31                                     |
//! | month        | 1-12 or `JAN`..`DEC`                     |
//! | day-of-week  | 0-7 or `SUN`..`SAT` (0 and 7 are Sunday) |
//!
//! Each field is a comma-separated list of elements: `*`, a value `a`, a range `a-b`, or any
//! of these with a step: `*/n`, `a-b/n`, and `a/n` meaning `a-max/n`. Names are
//! case-insensitive. A reversed range wraps around in hour and day-of-week (`22-2` is
//! 22,23,0,1,2; `FRI-MON` is Friday to Monday) and is an error elsewhere. Aliases, also
//! case-insensitive: `@yearly` / `@annually` (`0 0 1 1 *`), `@monthly` (`0 0 1 * *`),
//! `@weekly` (`0 0 * * 0`), `@daily` / `@midnight` (`0 0 * * *`) and `@hourly` (`0 * * * *`).
//!
//! Day-of-month and day-of-week combine as in Vixie cron: a field whose text starts with `*`
//! counts as unrestricted. When both are restricted a day matches if either field matches;
//! otherwise both must match. The `*` only decides this: `*/2` in day-of-month is
//! "unrestricted" for the rule yet still matches odd days only.
//!
//! Extensions beyond crontab:
//! - `L` in day-of-month: the last day of the month;
//! - `DOW#n` in day-of-week (n = 1..5): the n-th such weekday of the month (`MON#2`);
//! - `DOWL` in day-of-week: the last such weekday of the month (`FRIL`, `5L`);
//! - wrap-around ranges in hour and day-of-week.
//!
//! # Time zones and daylight saving
//!
//! Fields match the local wall time of the schedule's zone (IANA names, UTC by default).
//! A schedule is *fixed-time* when neither its minute nor its hour field starts with `*`
//! ([`CronExpr::is_fixed_time`]); otherwise it is an *interval* schedule.
//!
//! - Interval schedules follow elapsed time. Wall times skipped by a spring-forward gap never
//!   fire; wall times that occur twice in a fall-back fold fire at both instants, the second
//!   marked [`DstAdjustment::Repeated`].
//! - Fixed-time schedules follow the policies. [`OnDstGap::Shift`] (default): matching wall
//!   times inside a gap produce one fire at the first instant after the gap (the transition),
//!   marked [`DstAdjustment::Shifted`]; if the first wall time after the gap matches as well,
//!   that is the same single fire. [`OnDstGap::Skip`]: they do not fire. [`OnDstRepeat::Once`]
//!   (default): a wall time in a fold fires at its earlier instant only. [`OnDstRepeat::Twice`]:
//!   at both, the second marked [`DstAdjustment::Repeated`].
//!
//! These rules apply to every offset change of a zone, not only to DST. Zone rules come from
//! the process's tz database ([`tzdb`]: the bundled copy or a directory of TZif files); after
//! the transitions a zone's file lists, its footer rule continues them with no end year.
//!
//! # Evaluation
//!
//! [`CronExpr::next_after`] searches UTC wall time and [`ZonedCron::next_fire_after`] a zone's
//! wall time. Both look at most one full 400-year Gregorian cycle ahead, which is complete: if
//! no fire is found, the schedule never fires again.

mod civil;
mod describe;
mod error;
mod every;
mod expr;
mod parse;
mod transitions;
pub mod tzdb;
mod zone;

#[cfg(test)]
mod rule_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod zone_tests;

pub use describe::describe_zoned;
pub use error::{CronError, CronField, FieldProblem};
pub use every::Every;
pub use expr::{CronExpr, WallTime};
pub use tzdb::{TzDatabase, TzDatabaseError, Zone};
pub use zone::{DstAdjustment, Fire, ZonedCron, parse_timezone};

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What a fixed-time schedule does when its wall time falls in a spring-forward gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnDstGap {
    /// Run once, at the first instant after the gap.
    #[default]
    Shift,
    /// Do not run that day.
    Skip,
}

/// What a fixed-time schedule does when its wall time occurs twice (fall-back).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnDstRepeat {
    /// Run at the earliest of the two instants.
    #[default]
    Once,
    /// Run at both instants.
    Twice,
}

impl OnDstGap {
    /// The name used in storage, the API and declarations.
    pub fn as_str(self) -> &'static str {
        match self {
            OnDstGap::Shift => "shift",
            OnDstGap::Skip => "skip",
        }
    }
}

impl OnDstRepeat {
    /// The name used in storage, the API and declarations.
    pub fn as_str(self) -> &'static str {
        match self {
            OnDstRepeat::Once => "once",
            OnDstRepeat::Twice => "twice",
        }
    }
}

impl fmt::Display for OnDstGap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for OnDstRepeat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A DST policy name that is not one of the known values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown value {value:?}, expected one of: {expected}")]
pub struct UnknownPolicy {
    value: String,
    expected: &'static str,
}

impl FromStr for OnDstGap {
    type Err = UnknownPolicy;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "shift" => Ok(OnDstGap::Shift),
            "skip" => Ok(OnDstGap::Skip),
            other => Err(UnknownPolicy {
                value: other.to_owned(),
                expected: "shift, skip",
            }),
        }
    }
}

impl FromStr for OnDstRepeat {
    type Err = UnknownPolicy;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "once" => Ok(OnDstRepeat::Once),
            "twice" => Ok(OnDstRepeat::Twice),
            other => Err(UnknownPolicy {
                value: other.to_owned(),
                expected: "once, twice",
            }),
        }
    }
}
