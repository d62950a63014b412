//! The records of the lease methods of the storage seam: a fenced renewal of the leases an
//! instance holds, and the release of an attempt whose call never started.

use chrono::{DateTime, Utc};

use crate::core::model::JobId;

/// Lease renewals, across tenants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRenewal {
    pub leases: Vec<HeldLease>,
    /// The new end of every lease renewed.
    pub until: DateTime<Utc>,
    /// When a call marked as started is recorded to have started at the latest.
    pub now: DateTime<Utc>,
}

/// One lease its holder renews: the job, the epoch it holds it under, and whether its call has
/// started (the store then knows the attempt may have reached the owning service).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldLease {
    pub id: JobId,
    pub epoch: i32,
    pub called: bool,
}

/// A running attempt whose lease lapsed before its call was known to start: released to run
/// again, its attempt still to come. Written only while the lease has lapsed by `now` and the
/// job is still held under `epoch` with no call marked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UncalledRelease {
    pub id: JobId,
    pub epoch: i32,
    pub now: DateTime<Utc>,
}
