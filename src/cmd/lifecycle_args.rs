//! `serve`'s settings for the life cycle of rows (retention) and for when health reports
//! `degraded`.

use std::time::Duration;

use crate::core::retention::{RETENTION_FLOOR, RetentionConfig};
use crate::server::system::HealthRules;
use crate::util::duration::{parse_duration, positive_duration};

/// How long finished work and the audit journal are kept.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Retention")]
pub struct RetentionArgs {
    /// Finished jobs (with their attempts) are removed this long after they finished; so are
    /// deleted schedules nothing references any more. Open jobs and jobs a dead letter
    /// references are kept. At least one day.
    #[arg(long, env = "SENTIN8_CRON_JOB_RETENTION", value_name = "DURATION", default_value = "30d", value_parser = retention_duration)]
    pub job_retention: Duration,
    /// Audit entries are removed this long after they were written. At least one day.
    #[arg(long, env = "SENTIN8_CRON_AUDIT_RETENTION", value_name = "DURATION", default_value = "365d", value_parser = retention_duration)]
    pub audit_retention: Duration,
}

impl RetentionArgs {
    /// The retention worker's configuration (batch sizes and pacing at their defaults).
    pub fn config(&self) -> RetentionConfig {
        RetentionConfig {
            jobs: self.job_retention,
            audit: self.audit_retention,
            ..RetentionConfig::default()
        }
    }
}

/// A clap value parser: a retention of at least one day, the floor below which the database
/// keeps rows anyway (so a shorter setting would silently not do what it says).
fn retention_duration(text: &str) -> Result<Duration, String> {
    match parse_duration(text) {
        Some(d) if d >= RETENTION_FLOOR => Ok(d),
        Some(_) => Err("must be at least one day (1d)".to_owned()),
        None => Err(format!(
            "{text:?} is not a duration (examples: 1d, 30d, 36h)"
        )),
    }
}

/// When `/v1/health` reports `degraded`.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Health")]
pub struct HealthArgs {
    /// Health is degraded once the relay has found the bus unreachable for longer than this.
    #[arg(long, env = "SENTIN8_CRON_HEALTH_BUS_UNREACHABLE_AFTER", value_name = "DURATION", default_value = "5m", value_parser = positive_duration)]
    pub health_bus_unreachable_after: Duration,
    /// Health is degraded once the oldest outbox event not relayed yet is older than this.
    #[arg(long, env = "SENTIN8_CRON_HEALTH_OUTBOX_BACKLOG_AGE", value_name = "DURATION", default_value = "10m", value_parser = positive_duration)]
    pub health_outbox_backlog_age: Duration,
}

impl HealthArgs {
    /// The rules of health.
    pub fn rules(&self) -> HealthRules {
        HealthRules {
            bus_unreachable_after: self.health_bus_unreachable_after,
            outbox_backlog_age: self.health_outbox_backlog_age,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retention_under_one_day_is_refused() {
        assert_eq!(
            retention_duration("23h59m59s"),
            Err("must be at least one day (1d)".to_owned())
        );
        assert!(retention_duration("0").is_err());
        assert!(retention_duration("soon").is_err());
        assert_eq!(retention_duration("1d"), Ok(RETENTION_FLOOR));
        assert_eq!(retention_duration("24h"), Ok(RETENTION_FLOOR));
        assert_eq!(
            retention_duration("30d"),
            Ok(Duration::from_secs(30 * 86_400))
        );
    }
}
