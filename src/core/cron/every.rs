//! Interval expressions: `@every 90s`, `@every 1h phase 15m`.
//!
//! An interval fires at the instants `1970-01-01T00:00:00Z + phase + k × period` for every
//! whole `k`: anchored to the Unix epoch, so every instance, every restart and `next-fires`
//! agree on the instants without any stored state, and a period that divides a day (`1s`,
//! `15m`, `1h`, `1d`) falls on the same UTC times every day. Elapsed time decides, never a
//! wall clock: a time zone's clock changes neither move nor repeat a fire.

use std::fmt;

use super::error::CronError;
use crate::util::duration::format_duration;

/// Whole seconds as a duration is written (`1m30s`).
fn secs_text(seconds: u64) -> String {
    format_duration(std::time::Duration::from_secs(seconds))
}

/// The shortest period: a second.
pub const MIN_PERIOD_SECONDS: u32 = 1;
/// The longest period: a year and a day, as the longest catch-up window.
pub const MAX_PERIOD_SECONDS: u32 = 366 * 86_400;

/// A period and its phase, in whole seconds (`phase < period`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Every {
    pub(crate) period: u32,
    pub(crate) phase: u32,
}

impl Every {
    /// An interval of `period` seconds, `phase` seconds past each multiple of it since the
    /// epoch; each checked.
    pub fn new(period: u64, phase: u64) -> Result<Every, CronError> {
        let period = u32::try_from(period)
            .ok()
            .filter(|p| (MIN_PERIOD_SECONDS..=MAX_PERIOD_SECONDS).contains(p))
            .ok_or_else(|| {
                CronError::Interval(format!(
                    "the period {} is out of range 1s-366d",
                    secs_text(period)
                ))
            })?;
        let phase = u32::try_from(phase)
            .ok()
            .filter(|&p| p < period)
            .ok_or_else(|| {
                CronError::Interval(format!(
                    "the phase {} is not shorter than the period {}",
                    secs_text(phase),
                    secs_text(u64::from(period))
                ))
            })?;
        Ok(Every { period, phase })
    }

    /// Parses what follows `@every`: `<duration>` and optionally `phase <duration>`, each of
    /// whole seconds (`90s`, `1m30s`, `2h`, `1d`).
    pub(crate) fn parse(rest: &str) -> Result<Every, CronError> {
        let words: Vec<&str> = rest.split_whitespace().collect();
        let (period, phase) = match words.as_slice() {
            [period] => (*period, None),
            [period, keyword, phase] if keyword.eq_ignore_ascii_case("phase") => {
                (*period, Some(*phase))
            }
            [] => {
                return Err(CronError::Interval(
                    "@every needs a period, e.g. @every 90s".to_owned(),
                ));
            }
            _ => {
                return Err(CronError::Interval(format!(
                    "expected @every <period> [phase <duration>], got {:?}",
                    format!("@every {rest}").trim_end()
                )));
            }
        };
        Every::new(
            whole_seconds("period", period)?,
            phase.map_or(Ok(0), |p| whole_seconds("phase", p))?,
        )
    }

    /// An interval from its two fields as a declaration writes them (`every: 90s`,
    /// `phase: 15s`); an error names the field it is about.
    pub fn from_parts(
        period: &str,
        phase: Option<&str>,
    ) -> Result<Every, (&'static str, CronError)> {
        let period_seconds = whole_seconds("period", period).map_err(|e| ("every", e))?;
        let phase_seconds = phase
            .map_or(Ok(0), |p| whole_seconds("phase", p))
            .map_err(|e| ("phase", e))?;
        Every::new(period_seconds, phase_seconds).map_err(|e| {
            let field = if e.to_string().starts_with("the phase") {
                "phase"
            } else {
                "every"
            };
            (field, e)
        })
    }

    /// The period.
    pub fn period(&self) -> std::time::Duration {
        std::time::Duration::from_secs(u64::from(self.period))
    }

    /// How far past each multiple of the period (since the epoch) it fires.
    pub fn phase(&self) -> std::time::Duration {
        std::time::Duration::from_secs(u64::from(self.phase))
    }

    /// The first instant (Unix seconds) strictly after `t`.
    pub(crate) fn next_after_seconds(&self, t: i64) -> Option<i64> {
        let (period, phase) = (i64::from(self.period), i64::from(self.phase));
        let k = (t - phase).div_euclid(period).checked_add(1)?;
        k.checked_mul(period)?.checked_add(phase)
    }

    /// The interval in English: `every 90 seconds`, `every 15 minutes, from 00:05:00 UTC`.
    pub fn describe(&self) -> String {
        let mut text = format!("every {}", in_words(self.period));
        if self.phase == 0 {
            return text;
        }
        if 86_400u32.is_multiple_of(self.period) {
            // The multiples fall on UTC midnight: the phase is the first time of each day.
            let p = self.phase;
            text.push_str(&format!(
                ", from {:02}:{:02}:{:02} UTC",
                p / 3600,
                p / 60 % 60,
                p % 60
            ));
        } else {
            text.push_str(&format!(
                ", {} past each multiple of the period since 1970-01-01 00:00 UTC",
                secs_text(u64::from(self.phase))
            ));
        }
        text
    }
}

impl fmt::Display for Every {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@every {}", secs_text(u64::from(self.period)))?;
        if self.phase != 0 {
            write!(f, " phase {}", secs_text(u64::from(self.phase)))?;
        }
        Ok(())
    }
}

/// A duration's text in whole seconds, or why it is not one.
fn whole_seconds(what: &str, text: &str) -> Result<u64, CronError> {
    let duration = crate::util::duration::parse_duration(text).ok_or_else(|| {
        CronError::Interval(format!(
            "the {what} {text:?} is not a duration (examples: 90s, 15m, 1h, 1d)"
        ))
    })?;
    if duration.subsec_nanos() != 0 {
        return Err(CronError::Interval(format!(
            "the {what} {text:?} is not a whole number of seconds"
        )));
    }
    Ok(duration.as_secs())
}

/// `second`, `90 seconds`, `15 minutes`, `2 hours`, `day`, `1h30m`.
fn in_words(period: u32) -> String {
    for (size, one, many) in [
        (86_400, "day", "days"),
        (3_600, "hour", "hours"),
        (60, "minute", "minutes"),
        (1, "second", "seconds"),
    ] {
        if period.is_multiple_of(size) {
            let n = period / size;
            // 90 seconds reads better than 1m30s; 90 minutes than 1h30m.
            return if n == 1 {
                one.to_owned()
            } else {
                format!("{n} {many}")
            };
        }
    }
    unreachable!("every period is a whole number of seconds")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_are_anchored_to_the_epoch_with_the_phase() {
        let every = Every::parse("90s phase 15s").unwrap();
        assert_eq!((every.period, every.phase), (90, 15));
        assert_eq!(every.next_after_seconds(0), Some(15));
        assert_eq!(every.next_after_seconds(15), Some(105));
        assert_eq!(every.next_after_seconds(14), Some(15));
        assert_eq!(every.next_after_seconds(-100), Some(-75));
        let hourly = Every::parse("1h").unwrap();
        assert_eq!(hourly.next_after_seconds(3_599), Some(3_600));
        assert_eq!(hourly.next_after_seconds(3_600), Some(7_200));
    }

    #[test]
    fn bad_intervals_say_what_is_wrong() {
        let message = |text: &str| Every::parse(text).unwrap_err().to_string();
        assert_eq!(message(""), "@every needs a period, e.g. @every 90s");
        assert!(
            message("0s").contains("out of range 1s-366d"),
            "{}",
            message("0s")
        );
        assert!(message("367d").contains("out of range"));
        assert!(message("1500ms").contains("not a whole number of seconds"));
        assert!(message("soon").contains("is not a duration"));
        assert!(message("1m phase 1m").contains("not shorter than the period 1m"));
        assert!(message("1m offset 5s").contains("expected @every <period>"));
    }

    #[test]
    fn it_prints_back_canonically_and_reads_as_words() {
        for (text, shown, words) in [
            ("90s", "@every 1m30s", "every 90 seconds"),
            ("1m30s", "@every 1m30s", "every 90 seconds"),
            (
                "15m phase 5m",
                "@every 15m phase 5m",
                "every 15 minutes, from 00:05:00 UTC",
            ),
            (
                "1d phase 9h",
                "@every 1d phase 9h",
                "every day, from 09:00:00 UTC",
            ),
            ("1s", "@every 1s", "every second"),
            (
                "7h PHASE 1h",
                "@every 7h phase 1h",
                "every 7 hours, 1h past each multiple of the period since 1970-01-01 00:00 UTC",
            ),
        ] {
            let every = Every::parse(text).unwrap();
            assert_eq!(every.to_string(), shown, "{text}");
            assert_eq!(every.describe(), words, "{text}");
            assert_eq!(Every::parse(&shown["@every ".len()..]).unwrap(), every);
        }
    }
}
