//! `serve`'s settings for the life cycle of rows (retention) and for when health reports
//! `degraded`.

use std::time::Duration;

use crate::core::retention::RetentionConfig;
use crate::server::system::HealthRules;
use crate::util::duration::positive_duration;

/// How long finished work and the audit journal are kept.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Retention")]
pub struct RetentionArgs {
    /// Finished jobs (with their attempts) are removed this long after they finished; so are
    /// deleted schedules nothing references any more. Open jobs and jobs a dead letter
    /// references are kept.
    #[arg(long, env = "SENTIN8_CRON_JOB_RETENTION", value_name = "DURATION", default_value = "30d", value_parser = positive_duration)]
    pub job_retention: Duration,
    /// Audit entries are removed this long after they were written.
    #[arg(long, env = "SENTIN8_CRON_AUDIT_RETENTION", value_name = "DURATION", default_value = "365d", value_parser = positive_duration)]
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
    /// The rules, given whether a proxy-back credential source is configured.
    pub fn rules(&self, credential_source: bool) -> HealthRules {
        HealthRules {
            credential_source,
            bus_unreachable_after: self.health_bus_unreachable_after,
            outbox_backlog_age: self.health_outbox_backlog_age,
        }
    }
}
