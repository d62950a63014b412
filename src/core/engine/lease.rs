//! What an instance knows of the leases of the attempts it holds, and the rules it keeps by
//! them. Pure: the producer passes the readings of its clock.
//!
//! A lease is the store's: `lease_until`, a wall-clock instant other instances compare with
//! their own clocks, under a fence (`lease_epoch`) that changes whenever the job is given to
//! an instance. The holder cannot see the store's clock, so it keeps the lease on its own
//! monotonic clock, measured from when it *sent* the write that set it (the write landed
//! later, so the lease really ends later than the holder believes). A stall of the holder (a
//! freeze, a pause, starvation) is monotonic time passing: after one, the holder finds its
//! lease short and renews it, fenced, before it calls; a renewal that finds the job taken over
//! ends the holder's claim to it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::core::dispatch::CallFence;
use crate::core::model::JobId;
use crate::core::store::HeldLease;

/// A call leaves only while its lease has more than this left on its instance's monotonic
/// clock (a quarter of the lease when that is shorter: [`call_margin`]). It covers the span
/// between that check and the request leaving, and the disagreement of instances' wall clocks
/// (which decide when another instance may take the job over).
pub const CALL_MARGIN: Duration = Duration::from_secs(1);

/// The margin a call's lease must have left for the call to leave, under a lease of `lease`.
pub fn call_margin(lease: Duration) -> Duration {
    CALL_MARGIN.min(lease / 4)
}

/// How long an attempt's lease lasts by default. Its instance renews it a few times per lease
/// while the attempt is held (waiting for a slot, its call in flight, its outcome waiting to
/// be recorded), so a dead instance's attempts are taken over this long after its last
/// renewal: seconds, not a whole call.
pub const ATTEMPT_LEASE: Duration = Duration::from_secs(4);

/// An attempt this instance holds, as it knows its lease.
#[derive(Debug)]
pub(super) struct Lease {
    /// The fence it holds the job under.
    pub epoch: i32,
    /// The lease's end as written (the store's view, on the wall clock): renewals write the
    /// leases that run low by it.
    pub until: DateTime<Utc>,
    /// The same end on this instance's monotonic clock, in microseconds; shared with the
    /// attempt's call, which checks it just before its request leaves.
    deadline: Arc<AtomicU64>,
    /// The attempt's call was started.
    pub called: bool,
    /// The store was told that the call started (a renewal marked it).
    pub marked: bool,
    /// A renewal found the job no longer held under the epoch (taken over elsewhere): never
    /// renewed or called again; an outcome of it is refused by the record's fence.
    pub lost: bool,
    /// The service's answer is durable ahead of the record: an instance that takes the
    /// attempt over records that answer and calls nothing, so the lease is not renewed any
    /// more (a burst's records may lag its calls by seconds without a renewal of each).
    pub answer_durable: bool,
}

impl Lease {
    /// A lease set to end at `until` by a write sent at `sent` (wall clock) and `sent_mono`
    /// (monotonic).
    pub fn written(
        epoch: i32,
        until: DateTime<Utc>,
        sent: DateTime<Utc>,
        sent_mono: Duration,
    ) -> Self {
        Self {
            epoch,
            until,
            deadline: Arc::new(AtomicU64::new(deadline_micros(until, sent, sent_mono))),
            called: false,
            marked: false,
            lost: false,
            answer_durable: false,
        }
    }

    /// A renewal sent at `sent`/`sent_mono` extended the lease to `until`; `marked` when it
    /// told the store the call had started.
    pub fn renewed(
        &mut self,
        until: DateTime<Utc>,
        sent: DateTime<Utc>,
        sent_mono: Duration,
        marked: bool,
    ) {
        self.until = until;
        self.deadline
            .store(deadline_micros(until, sent, sent_mono), Ordering::Release);
        self.marked |= marked;
    }

    /// True while the lease has more than `margin` left at `mono_now`.
    pub fn holds(&self, mono_now: Duration, margin: Duration) -> bool {
        CallFence::holds_at(&self.deadline, mono_now, margin)
    }

    /// The monotonic deadline the attempt's call checks.
    pub fn deadline(&self) -> Arc<AtomicU64> {
        self.deadline.clone()
    }

    /// What a renewal of it says: the job, its fence, and whether to mark its call started.
    pub fn held(&self, id: JobId) -> HeldLease {
        HeldLease {
            id,
            epoch: self.epoch,
            called: self.called && !self.marked,
        }
    }
}

fn deadline_micros(until: DateTime<Utc>, sent: DateTime<Utc>, sent_mono: Duration) -> u64 {
    let left = (until - sent).to_std().unwrap_or_default();
    u64::try_from((sent_mono + left).as_micros()).unwrap_or(u64::MAX)
}

/// The leases a renewal at `now` writes: those not lost, whose answer is not durable yet, that
/// end by `renew_before`, and every one in `force` (attempts whose call waits for a renewal).
pub(super) fn to_renew(
    running: &HashMap<JobId, Lease>,
    renew_before: DateTime<Utc>,
    force: impl Fn(&JobId) -> bool,
) -> Vec<HeldLease> {
    let mut leases: Vec<HeldLease> = running
        .iter()
        .filter(|(id, lease)| {
            !lease.lost && (force(id) || (!lease.answer_durable && lease.until <= renew_before))
        })
        .map(|(id, lease)| lease.held(*id))
        .collect();
    // A stable order: concurrent renewals of overlapping sets lock rows alike.
    leases.sort_by_key(|l| l.id.0);
    leases
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_900_000_000 + secs, 0).unwrap()
    }

    #[test]
    fn a_lease_holds_until_the_margin_before_its_end_measured_from_the_write() {
        // Written at monotonic 100 s for 4 s: believed to end at 104 s.
        let lease = Lease::written(3, t(4), t(0), Duration::from_secs(100));
        assert!(lease.holds(Duration::from_secs(100), CALL_MARGIN));
        assert!(lease.holds(Duration::from_millis(102_999), CALL_MARGIN));
        assert!(
            !lease.holds(Duration::from_secs(103), CALL_MARGIN),
            "within the margin"
        );
        // A freeze of a minute shows as monotonic time passing, whatever the wall clock says.
        assert!(!lease.holds(Duration::from_secs(160), CALL_MARGIN));
    }

    #[test]
    fn a_renewal_moves_the_deadline_the_call_sees() {
        let mut lease = Lease::written(1, t(4), t(0), Duration::ZERO);
        let seen_by_call = lease.deadline();
        lease.called = true;
        assert!(
            lease.held(JobId::new()).called,
            "a started call is marked once"
        );
        lease.renewed(t(7), t(3), Duration::from_secs(3), true);
        assert_eq!(seen_by_call.load(Ordering::Acquire), 7_000_000);
        assert!(lease.holds(Duration::from_secs(5), CALL_MARGIN));
        assert!(!lease.held(JobId::new()).called, "marked already");
    }

    #[test]
    fn a_renewal_takes_the_leases_running_low_and_the_forced_ones_never_a_lost_one() {
        let (a, b, c, d) = (JobId::new(), JobId::new(), JobId::new(), JobId::new());
        let mut running = HashMap::new();
        running.insert(a, Lease::written(0, t(2), t(0), Duration::ZERO));
        running.insert(b, Lease::written(0, t(9), t(0), Duration::ZERO));
        running.insert(c, Lease::written(0, t(9), t(0), Duration::ZERO));
        let mut lost = Lease::written(0, t(1), t(0), Duration::ZERO);
        lost.lost = true;
        running.insert(d, lost);
        // Running low, but its answer is durable: whoever takes it over records the answer.
        let mut answered = Lease::written(0, t(1), t(0), Duration::ZERO);
        answered.answer_durable = true;
        running.insert(JobId::new(), answered);
        let renewed: Vec<JobId> = to_renew(&running, t(3), |id| *id == c)
            .into_iter()
            .map(|l| l.id)
            .collect();
        let mut expected = vec![a, c];
        expected.sort_by_key(|id| id.0);
        assert_eq!(renewed, expected);
    }

    #[test]
    fn a_short_lease_has_a_margin_it_can_meet() {
        assert_eq!(call_margin(Duration::from_secs(4)), CALL_MARGIN);
        assert_eq!(
            call_margin(Duration::from_secs(1)),
            Duration::from_millis(250)
        );
    }

    proptest! {
        /// However long a holder stalls after writing its lease, it never believes in a lease
        /// the store's clock would call lapsed: what it believes ends no later than the write's
        /// end, counted from when the write was sent.
        #[test]
        fn a_holder_never_believes_in_a_lapsed_lease(
            lease_ms in 1u64..60_000,
            stall_ms in 0u64..600_000,
            landed_ms in 0u64..5_000,
        ) {
            let sent = t(0);
            let sent_mono = Duration::from_secs(1_000);
            // The write lands `landed_ms` after it was sent and sets the lease from there.
            let until = sent
                + chrono::Duration::milliseconds(landed_ms as i64)
                + chrono::Duration::milliseconds(lease_ms as i64);
            let lease = Lease::written(0, until, sent, sent_mono);
            let now_mono = sent_mono + Duration::from_millis(stall_ms);
            let store_now = sent + chrono::Duration::milliseconds(stall_ms as i64);
            if lease.holds(now_mono, CALL_MARGIN) {
                // With the margin to spare, by the store's clock too.
                prop_assert!(store_now + chrono::Duration::from_std(CALL_MARGIN).unwrap() < until);
            }
        }
    }
}
