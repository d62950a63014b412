//! Records as the API shows them, read back into the domain's types where a command reasons
//! about them (`schedules apply` plans over the schedules the server holds).

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use crate::core::cron::{OnDstGap, OnDstRepeat};
use crate::core::model::{EnvId, Schedule, ScheduleId, ScheduleKind, ScheduleStatus};
use crate::core::policies::Policies;
use crate::core::target::Target;
use crate::core::timing::{Timing, TimingColumns};
use crate::util::duration::parse_duration;

/// A schedule as `GET /v1/schedules` lists it.
#[derive(Debug, Clone, Deserialize)]
pub struct ScheduleRecord {
    pub id: Uuid,
    pub env_id: Uuid,
    pub domain: String,
    pub schedule_type: String,
    pub kind: String,
    pub cron: Option<String>,
    pub run_at: Option<DateTime<Utc>>,
    pub timezone: String,
    pub on_dst_gap: OnDstGap,
    pub on_dst_repeat: OnDstRepeat,
    pub target_config: Value,
    pub payload: Value,
    pub status: String,
    pub next_run_at: Option<DateTime<Utc>>,
    pub last_run_at: Option<DateTime<Utc>>,
    pub retry_count: i32,
    pub max_retries: i32,
    // Policies: absent from a server older than schedule policies, read as the defaults.
    #[serde(default)]
    pub overlap: Option<String>,
    #[serde(default)]
    pub catchup_window: Option<String>,
    #[serde(default)]
    pub max_jitter: Option<String>,
    #[serde(default)]
    pub start_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub end_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub pause_on_failure: bool,
    #[serde(default)]
    pub remaining_runs: Option<i32>,
    /// `keep` or `delete` (absent from a server older than schema 23).
    #[serde(default)]
    pub after_completion: Option<String>,
    /// Labels (absent from a server older than schema 22).
    #[serde(default)]
    pub labels: crate::core::labels::Labels,
    /// Exclusions (absent from a server older than schema 25).
    #[serde(default)]
    pub exclude: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub created_by: String,
    pub updated_by: String,
}

impl ScheduleRecord {
    /// The domain's schedule this record shows; a record the domain cannot read back (an
    /// unknown kind or status) is described.
    pub fn into_schedule(self) -> Result<Schedule, String> {
        let kind: ScheduleKind = self.kind.parse().map_err(|e| format!("kind: {e}"))?;
        let status: ScheduleStatus = self.status.parse().map_err(|e| format!("status: {e}"))?;
        let timing = Timing::from_columns(TimingColumns {
            kind,
            cron_expr: self.cron,
            timezone: self.timezone,
            run_at: self.run_at,
            on_dst_gap: self.on_dst_gap,
            on_dst_repeat: self.on_dst_repeat,
        })?;
        let defaults = Policies::default();
        let duration = |text: Option<&str>, default, field: &str| match text {
            None => Ok(default),
            Some(text) => parse_duration(text).ok_or_else(|| format!("{field}: {text:?}")),
        };
        let policies = Policies {
            overlap: match self.overlap.as_deref() {
                None => defaults.overlap,
                Some(text) => text.parse().map_err(|e| format!("overlap: {e}"))?,
            },
            catchup_window: duration(
                self.catchup_window.as_deref(),
                defaults.catchup_window,
                "catchup_window",
            )?,
            max_jitter: duration(
                self.max_jitter.as_deref(),
                defaults.max_jitter,
                "max_jitter",
            )?,
            start_at: self.start_at,
            end_at: self.end_at,
            pause_on_failure: self.pause_on_failure,
            after_completion: match self.after_completion.as_deref() {
                None => defaults.after_completion,
                Some(text) => text.parse().map_err(|e| format!("after_completion: {e}"))?,
            },
        };
        Ok(Schedule {
            id: ScheduleId(self.id),
            env_id: EnvId(self.env_id),
            domain: self.domain,
            schedule_type: self.schedule_type,
            timing,
            target: Target::from_stored(self.target_config),
            payload: self.payload,
            status,
            next_run_at: self.next_run_at,
            last_run_at: self.last_run_at,
            retry_count: self.retry_count,
            max_retries: self.max_retries,
            policies,
            remaining_runs: self.remaining_runs,
            labels: self.labels,
            exclude: crate::core::calendar::Exclude::from_stored(self.exclude),
            created_at: self.created_at,
            updated_at: self.updated_at,
            created_by: self.created_by,
            updated_by: self.updated_by,
        })
    }
}
