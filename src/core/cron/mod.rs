//! Cron expressions: parsing, evaluation in UTC and in IANA time zones, daylight-saving policy.

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
