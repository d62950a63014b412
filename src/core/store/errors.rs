//! The storage layer's errors: what a backend reports, and the uniqueness rules a write can
//! break.

/// A storage error. Database internals are kept as an opaque source: they are logged, never
/// shown to API callers.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness rule of the domain was violated.
    #[error("conflict: {0}")]
    Conflict(Conflict),
    /// An update named a row that does not exist in this environment.
    #[error("{what} {id} not found")]
    NotFound {
        /// The kind of row.
        what: &'static str,
        /// Its id.
        id: String,
    },
    /// The schema is missing, older or newer than this build knows.
    #[error("{0}")]
    Schema(String),
    /// The database URL or configuration cannot be used.
    #[error("{0}")]
    Config(String),
    /// A stored value could not be read back into the domain type.
    #[error("corrupt row in {table}: {detail}")]
    Corrupt {
        /// The table the row came from.
        table: &'static str,
        /// What was wrong with it.
        detail: String,
    },
    /// Any other database failure.
    #[error("database error: {0}")]
    Database(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Which uniqueness rule a write violated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Conflict {
    /// `schedule_type` is unique per (env, domain) among non-deleted schedules.
    #[error("a schedule with this schedule_type already exists in this domain")]
    ScheduleTypeTaken,
    /// At most one pending or running job exists per schedule.
    #[error("the schedule already has an open (pending or running) job")]
    OpenJobExists,
    /// A row with this id already exists.
    #[error("a row with this id already exists")]
    DuplicateId,
}

/// Result alias for storage operations.
pub type StoreResult<T> = Result<T, StoreError>;
