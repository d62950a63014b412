//! The records the relay's outbox methods of the storage seam take and return: claims, marks,
//! releases and the purge.

use chrono::{DateTime, Utc};

/// A relay's claim on pending outbox events (see [`Store::outbox_claim`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxClaim {
    /// Who claims: recorded as the lease holder, and required to record a failure.
    pub relay_id: String,
    pub now: DateTime<Utc>,
    /// Until when the claimed events are leased to this relay.
    pub lease_until: DateTime<Utc>,
    pub limit: u32,
}

/// Outbox events the bus acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRelayed {
    pub seqs: Vec<i64>,
    pub now: DateTime<Utc>,
}

/// One failed publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxFailure {
    pub seq: i64,
    pub error: String,
    /// True when the bus answered and refused this event, which counts towards parking. False
    /// when the bus could not be reached: an outage never parks anything.
    pub parkable: bool,
}

/// Failed publishes of one relay (see [`Store::outbox_mark_failed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxFailed {
    pub relay_id: String,
    pub failures: Vec<OutboxFailure>,
    pub now: DateTime<Utc>,
    /// The failed events are not claimed again before this instant.
    pub retry_at: DateTime<Utc>,
    /// A parkable failure that brings an event's attempts to this many parks it.
    pub max_attempts: i32,
}

/// What recording one failure did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxFailureRecorded {
    pub seq: i64,
    /// Failed attempts so far, this one included.
    pub attempts: i32,
    pub parked: bool,
}

/// Claimed events a relay gives back without having tried to publish them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRelease {
    pub relay_id: String,
    pub seqs: Vec<i64>,
}

/// A retention pass over relayed outbox events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxPurge {
    /// Relayed events relayed before this instant are deleted.
    pub relayed_before: DateTime<Utc>,
    /// At most this many per call, oldest first.
    pub limit: u32,
}
