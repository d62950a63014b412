//! Operations on schedules, jobs and the dead-letter queue, shared by the HTTP API, `enroll`
//! and the CLI. Each runs in one tenant transaction together with its outbox event and audit
//! entry, so a change is never visible without its event (and a failed event write undoes the
//! change).
//!
//! By concern: `validate` (request checks beyond the declaration format), `schedule`
//! (create, patch, pause, resume, delete, trigger), `bulk` (one of those on every schedule a
//! label selector matches), `backfill` (a past range of occurrences), `patch` (applying a partial update to the
//! typed record), `job` (job retry, DLQ republish), `read` (gets, lists, the overview) and
//! `audit` (the actor and its audit entries).

use std::sync::Arc;

use crate::core::decl::{FieldError, ScheduleSpec};
use crate::core::model::JobId;
use crate::core::store::{Store, StoreError};
use crate::core::target::{AnyTarget, Target, TargetPolicy};

mod audit;
mod backfill;
mod bulk;
mod calendar;
mod describe;
mod job;
mod patch;
mod pause;
mod read;
mod schedule;
mod validate;

pub use audit::Actor;
pub use backfill::Backfilled;
pub use bulk::{
    BULK_CONFIRM_ABOVE, BULK_MAX, BulkAction, BulkItem, BulkOutcome, BulkReport, BulkRequest,
};
pub use calendar::{CalendarWrite, put_calendar};
pub use describe::{
    DESCRIBE_RECENT, DESCRIBE_UPCOMING, DESCRIBE_WINDOW, ScheduleDescription, UpcomingCall,
};
pub use patch::{LabelsPatch, SchedulePatch};
pub use read::EnvOverview;
pub use schedule::{
    MAX_NOTE_CHARS, PauseRecord, delete_schedule, insert_schedule, insert_schedules,
    update_schedule, with_spec,
};
pub use validate::validate_domain;

/// Why an operation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// The resource does not exist in this environment (or is deleted).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The request is invalid; every problem is listed.
    #[error("invalid request: {}", display_fields(.0))]
    Invalid(Vec<FieldError>),
    /// The change conflicts with the current state.
    #[error("{0}")]
    Conflict(String),
    /// A retry of a job another job replaced (its dead letter was republished): a conflict
    /// that names the successor, so a caller can follow it without reading prose.
    #[error(
        "this job was superseded by job {successor} (its dead letter was republished); \
         retrying it would deliver the occurrence twice"
    )]
    Superseded { successor: JobId },
    #[error(transparent)]
    Store(StoreError),
}

fn display_fields(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl From<StoreError> for OpsError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Conflict(conflict) => OpsError::Conflict(conflict.to_string()),
            other => OpsError::Store(other),
        }
    }
}

/// Result alias for operations.
pub type OpsResult<T> = Result<T, OpsError>;

/// A schedule to create: a validated spec, where it belongs and whom to call.
#[derive(Debug, Clone)]
pub struct CreateSchedule {
    pub domain: String,
    pub spec: ScheduleSpec,
    pub target: Target,
}

/// The operations, over one store.
#[derive(Clone)]
pub struct Ops {
    store: Arc<dyn Store>,
    targets: Arc<dyn TargetPolicy>,
    /// At most this many jobs of an environment wait their turn (see
    /// [`Ops::with_waiting_cap`]).
    waiting_cap: u64,
}

/// How many jobs of one environment may wait their turn (backfilled occurrences), unless
/// `serve` is told otherwise: ten full backfills.
pub const DEFAULT_WAITING_CAP: u64 = 10_000;

impl Ops {
    /// Operations accepting any base URL (see [`Ops::with_target_policy`]).
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            targets: Arc::new(AnyTarget),
            waiting_cap: DEFAULT_WAITING_CAP,
        }
    }

    /// A backfill that would leave more than `cap` jobs of its environment waiting their turn
    /// is refused (one tenant's backfills cannot queue without bound).
    pub fn with_waiting_cap(mut self, cap: u64) -> Self {
        self.waiting_cap = cap;
        self
    }

    /// Refuses to create or update a schedule whose base URL `policy` refuses.
    pub fn with_target_policy(mut self, policy: Arc<dyn TargetPolicy>) -> Self {
        self.targets = policy;
        self
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The policy base URLs are checked against at create and update.
    pub fn target_policy(&self) -> &dyn TargetPolicy {
        self.targets.as_ref()
    }
}
