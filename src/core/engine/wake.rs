//! When the continuous loop runs its next round, and how often leases are renewed: pure rules
//! the producer applies. After a round, the next one waits until the earliest due instant (a
//! lead before it when claiming ahead), within the safety interval; a change signal (from this
//! or, through the store, another instance) or a freed slot when work was deferred starts it
//! at once.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::held::{HAND_OFF_BEFORE, HAND_OFF_MAX};
use crate::core::store::StoreResult;

/// What one round did, as the claim loop decides by it.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Round {
    /// Something was fired, retried or recorded as skipped.
    pub progress: bool,
    /// The selection came back full: more may be due.
    pub full: bool,
    /// Due work left for later because no slot was free for it.
    pub deferred: bool,
    /// Fires due ahead left for their instants because their schedules' previous jobs were
    /// open.
    pub busy_ahead: bool,
}

impl Round {
    pub(super) fn and(self, other: Round) -> Round {
        Round {
            progress: self.progress || other.progress,
            full: self.full || other.full,
            deferred: self.deferred || other.deferred,
            busy_ahead: self.busy_ahead || other.busy_ahead,
        }
    }
}

/// How long the producer waits before its next round, and whether the wait is a pause with
/// work pending (work due that could not be taken, or the database failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Wait {
    pub wait: Duration,
    pub pause: bool,
}

/// How long to wait after a round, given the earliest due instant the round read: until that
/// instant (a lead before it when claiming ahead), within the safety interval, and never
/// spinning on work that is due but cannot be taken now.
pub(super) fn wait_after(
    round: &Round,
    next_due: Option<StoreResult<Option<DateTime<Utc>>>>,
    now: DateTime<Utc>,
    lead: Duration,
    step: Duration,
    tick_interval: Duration,
) -> Wait {
    match next_due {
        Some(Ok(Some(at))) => {
            let until = (at - now).to_std().unwrap_or_default();
            // Claimed a lead ahead, at most every `step` (`Pace::step`: a steady stream of fires
            // is claimed a step's worth at a time, not one claim per fire). What is nearer than
            // the lead after a round is looked at again within a step: a fire that came within
            // the lead while the round ran (or that the round could not take) is claimed ahead
            // then, not at its instant; a retry or a lease sooner than that is waited for at its
            // own instant. A schedule left for its instant because its previous job is open is
            // looked at again sooner, once that job's outcome is likely recorded: a schedule
            // that repeats every few seconds is then claimed ahead and called at its instant,
            // rather than claimed at it (late) or skipped for a job whose answer is in.
            let until = if lead.is_zero() {
                until
            } else if until > lead {
                (until - lead).max(step)
            } else {
                until.min(step)
            };
            // Work that is already due but could not be taken (another instance holds it, or
            // it waits for a slot) must not spin the loop.
            let pause = !round.progress || round.deferred;
            let floor = if pause {
                Duration::from_millis(100)
            } else {
                Duration::ZERO
            };
            Wait {
                wait: until.max(floor).min(tick_interval),
                pause: pause && until <= floor,
            }
        }
        Some(Ok(None)) | None => Wait {
            wait: tick_interval,
            pause: false,
        },
        Some(Err(err)) => {
            tracing::warn!(error = %err, "cannot compute the next wake-up; polling");
            Wait {
                wait: Duration::from_secs(1).min(tick_interval),
                pause: true,
            }
        }
    }
}

/// How soon schedules left for their instants behind an open job are looked at again: about
/// the time an answered job's outcome takes to be recorded (outcomes are grouped for at most a
/// quarter of a second).
pub(super) const BUSY_RECHECK: Duration = Duration::from_millis(250);

/// The longest lead the loop claims with, however large the coming burst.
pub const LEAD_MAX: Duration = Duration::from_secs(60);

/// What falls due within [`LEAD_MAX`] is counted up to this many.
pub(super) const DUE_COUNT_CAP: u32 = 200_000;

/// How fast claims are assumed to go before one was measured (fires per second).
pub(super) const CLAIM_RATE_GUESS: f64 = 1_000.0;

/// How fast hand-offs are assumed to go before one was measured (fires per second).
pub(super) const HAND_OFF_RATE_GUESS: f64 = 5_000.0;

/// How long claiming what falls due within [`LEAD_MAX`] (`due_soon`, shared among
/// `instances`) takes at `rate` fires a second, with half as much again to spare, and then
/// handing it off ([`hand_off_before`] at `hand_off_rate`), with a second to spare.
pub(super) fn claim_needed(
    due_soon: u64,
    rate: f64,
    hand_off_rate: f64,
    instances: u32,
) -> Duration {
    let share = due_soon as f64 / f64::from(instances.max(1));
    let claiming = share / rate.max(1.0) * 1.5;
    Duration::try_from_secs_f64(claiming).unwrap_or(LEAD_MAX)
        + hand_off_before(share as usize, hand_off_rate)
        + Duration::from_secs(1)
}

/// How far ahead to claim: the configured lead, or longer when what falls due soon needs
/// longer to be claimed and handed off ([`claim_needed`]); at most [`LEAD_MAX`]. So the claims
/// and the hand-off of a burst are done before its instant, not in it.
pub(super) fn lead_for(configured: Duration, needed: Duration) -> Duration {
    if configured.is_zero() {
        return configured;
    }
    needed.clamp(configured, LEAD_MAX.max(configured))
}

/// The longest a fire's hand-off lease reaches past the call lease for the wait behind its
/// burst: a fire expected to wait longer has its lease renewed while it waits.
pub(super) const QUEUE_LEASE_MAX: Duration = Duration::from_secs(60);

/// The call lease a hand-off writes for fires with `ahead` attempts queued before the last of
/// them, while calls start at `rate` a second: the lease, plus the wait with half as much again to spare
/// (at most [`QUEUE_LEASE_MAX`]). A burst's last fires then hold their leases until their
/// calls leave without a renewal of each; a fire whose instance died is released at its own
/// lease's end, about when it would have been called, plus the lease.
pub(super) fn hand_off_lease(lease: Duration, ahead: usize, rate: f64) -> Duration {
    let wait = Duration::try_from_secs_f64(ahead as f64 / rate.max(1.0) * 1.5)
        .unwrap_or(QUEUE_LEASE_MAX)
        .min(QUEUE_LEASE_MAX);
    lease + wait
}

/// How long before their instant to begin handing off `held` fires at `rate` fires a second:
/// as long as it takes with half as much again to spare, within [`HAND_OFF_BEFORE`] and
/// [`HAND_OFF_MAX`], so a burst's hand-off is written before its instant.
pub(super) fn hand_off_before(held: usize, rate: f64) -> Duration {
    let needed = held as f64 / rate.max(1.0) * 1.5;
    Duration::try_from_secs_f64(needed)
        .unwrap_or(HAND_OFF_MAX)
        .clamp(HAND_OFF_BEFORE, HAND_OFF_MAX)
}

/// How often at most the loop claims ahead while nothing asks it to (a change does): the time
/// the lead leaves beyond what claiming and handing off what falls due needs (`needed`), at
/// most half the lead; at least a fifth of the lead within 100 ms and 2 s; never more than the
/// lead. A fire is claimed between the lead and a step less before its instant: at least
/// `needed` before it, or a fifth of the lead less than the lead when all of it is needed.
/// Each claim is one transaction per environment with fires due: under a steady stream (a
/// jittered minute) a longer step claims more fires in each.
fn claim_ahead_step(lead: Duration, needed: Duration) -> Duration {
    let floor = (lead / 5)
        .clamp(Duration::from_millis(100), Duration::from_secs(2))
        .min(lead);
    lead.saturating_sub(needed).min(lead / 2).max(floor)
}

/// How the continuous loop paces its claims: what it measured of claims and hand-offs, how
/// far ahead it claims now, and when a round next claims ahead. Rounds between those (woken
/// by a lease's end or a retry's instant) claim only what is already due, and drain.
#[derive(Debug, Clone)]
pub(super) struct Pace {
    /// How far ahead rounds claim now: the configured lead, longer before a large burst.
    pub lead_now: Duration,
    /// What claiming and handing off what falls due soon takes ([`claim_needed`]); the whole
    /// lead until counted.
    needed: Duration,
    /// Fires claimed per second of a round, as measured (a moving average).
    pub claim_rate: f64,
    /// Fires handed off per second of a hand-off write, as measured (a moving average).
    pub hand_off_rate: f64,
    /// When a round next claims ahead (`None`: the next one does).
    claim_at: Option<DateTime<Utc>>,
    /// When the round in flight began, if it claims ahead.
    began: Option<DateTime<Utc>>,
    /// A claim ahead was asked for while that round ran: the round after it claims ahead too.
    asked: bool,
}

impl Pace {
    pub(super) fn new(lead: Duration) -> Self {
        Self {
            lead_now: lead,
            needed: LEAD_MAX,
            claim_rate: CLAIM_RATE_GUESS,
            hand_off_rate: HAND_OFF_RATE_GUESS,
            claim_at: None,
            began: None,
            asked: false,
        }
    }

    /// Sizes the lead by what falls due soon (`due_soon`, shared among `instances`).
    pub(super) fn size(&mut self, configured: Duration, due_soon: u64, instances: u32) {
        self.needed = claim_needed(due_soon, self.claim_rate, self.hand_off_rate, instances);
        self.lead_now = lead_for(configured, self.needed);
    }

    /// The lead is the configured one again (what falls due soon could not be counted).
    pub(super) fn uncounted(&mut self, configured: Duration) {
        self.needed = LEAD_MAX;
        self.lead_now = configured;
    }

    /// The step between claims ahead after `round`, claiming `lead` ahead: shorter when fires
    /// due ahead were left behind an open job ([`BUSY_RECHECK`]).
    pub(super) fn step(&self, round: &Round, lead: Duration) -> Duration {
        let step = claim_ahead_step(lead, self.needed);
        if round.busy_ahead {
            step.min(BUSY_RECHECK)
        } else {
            step
        }
    }

    /// A round starts at `now`: whether it claims ahead.
    pub(super) fn round_starts(&mut self, now: DateTime<Utc>) -> bool {
        let ahead = self.claim_at.is_none_or(|at| at <= now);
        if ahead {
            self.began = Some(now);
            self.asked = false;
        }
        ahead
    }

    /// The round ended: one that claimed ahead sets the next claim `step` after it began,
    /// unless another was asked for meanwhile.
    pub(super) fn round_ended(&mut self, step: Duration) {
        if let Some(began) = self.began.take()
            && !self.asked
        {
            self.claim_at = Some(began + super::parts::chrono_duration(step));
        }
    }

    /// The next round claims ahead, whenever it runs (a change, a full round, a freed slot).
    pub(super) fn claim_next(&mut self) {
        self.claim_at = None;
        self.asked = true;
    }

    /// How long at most until a round must claim ahead again, from `now`.
    pub(super) fn until_claim(&self, now: DateTime<Utc>) -> Option<Duration> {
        self.claim_at
            .map(|at| (at - now).to_std().unwrap_or_default())
    }
}

/// How soon a failed lease renewal is tried again.
pub(super) const RENEW_RETRY: Duration = Duration::from_secs(1);

/// How often leases are renewed: a few times per lease.
pub(super) fn renewal_interval(lease: Duration) -> Duration {
    (lease / 3).max(Duration::from_millis(100))
}

/// A renewal writes the leases that run out within this of it: those that would otherwise run
/// low before the next renewal ([`renewal_interval`] later), with half an interval to spare
/// for the write itself. A lease with longer left waits for a later renewal, so an attempt
/// recorded soon after its lease began (a burst's) is never renewed at all.
pub(super) fn renew_within(lease: Duration) -> Duration {
    // Half a lease is one and a half intervals, without the interval's rounding.
    (lease / 2).max(renewal_interval(lease) * 3 / 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A lease a renewal leaves alone still has half a renewal interval left when the next
        /// renewal comes, and one it renews would not have lasted two intervals.
        #[test]
        fn a_lease_left_alone_lasts_until_the_next_renewal(
            lease_ms in 300u64..600_000,
            left_ms in 0u64..600_000,
        ) {
            let lease = Duration::from_millis(lease_ms);
            let left = Duration::from_millis(left_ms.min(lease_ms));
            let every = renewal_interval(lease);
            if left > renew_within(lease) {
                prop_assert!(left >= every + every / 2);
            } else {
                prop_assert!(left <= every * 2);
            }
        }
    }

    #[test]
    fn a_fire_queued_behind_its_burst_gets_its_wait_on_top_of_the_lease() {
        let lease = Duration::from_secs(4);
        assert_eq!(hand_off_lease(lease, 0, 10_000.0), lease);
        // 20,000 ahead at 10,000 calls a second: 2 s of wait, 3 s with the spare.
        assert_eq!(
            hand_off_lease(lease, 20_000, 10_000.0),
            Duration::from_secs(7)
        );
        // However slow the calls, the wait on top is bounded; a rate of zero is no panic.
        assert_eq!(hand_off_lease(lease, 50_000, 10.0), lease + QUEUE_LEASE_MAX);
        assert_eq!(
            hand_off_lease(lease, 5, 0.0),
            lease + Duration::from_millis(7_500),
            "no rate counts as one call a second"
        );
    }

    #[test]
    fn the_claim_ahead_step_is_what_the_lead_leaves_within_its_bounds() {
        let ms = Duration::from_millis;
        let s = Duration::from_secs;
        // All of the lead needed: a fifth of it, within 100 ms and 2 s.
        assert_eq!(claim_ahead_step(s(10), LEAD_MAX), ms(2000));
        assert_eq!(claim_ahead_step(ms(4500), s(5)), ms(900));
        assert_eq!(claim_ahead_step(s(60), s(60)), ms(2000));
        assert_eq!(claim_ahead_step(ms(400), s(1)), ms(100));
        // A lead shorter than the floor: the step is the lead, so a fire is never claimed
        // after its instant.
        assert_eq!(claim_ahead_step(ms(50), s(1)), ms(50));
        // A sparse stream needs little of the lead: what it leaves, at most half of it.
        assert_eq!(claim_ahead_step(s(10), ms(2500)), s(5));
        assert_eq!(claim_ahead_step(s(10), ms(6500)), ms(3500));
        assert_eq!(claim_ahead_step(s(10), ms(7900)), ms(2100));
    }

    #[test]
    fn rounds_between_steps_do_not_claim_ahead_and_a_change_does() {
        let t0 = chrono::DateTime::parse_from_rfc3339("2030-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let at = |ms: i64| t0 + chrono::Duration::milliseconds(ms);
        let lead = Duration::from_secs(10);
        let mut pace = Pace::new(lead);
        assert!(pace.round_starts(t0), "the first round claims ahead");
        // Little falls due soon, claimed and handed off fast: the step is half the lead.
        pace.claim_rate = 10_000.0;
        pace.hand_off_rate = 10_000.0;
        pace.size(lead, 1_000, 1);
        assert_eq!(pace.lead_now, lead);
        let step = pace.step(&Round::default(), lead);
        assert_eq!(step, Duration::from_secs(5));
        pace.round_ended(step);
        assert_eq!(pace.until_claim(at(1_000)), Some(Duration::from_secs(4)));
        // A round woken before the step (a lease's end) does not claim ahead, and does not
        // move the next claim.
        assert!(!pace.round_starts(at(4_999)));
        pace.round_ended(step);
        assert!(pace.round_starts(at(5_000)));
        // A change while that round runs: the round after it claims ahead too.
        pace.claim_next();
        pace.round_ended(step);
        assert!(pace.round_starts(at(5_001)));
        pace.round_ended(step);
        assert!(!pace.round_starts(at(5_002)));
        // A change between rounds: the next one claims ahead.
        pace.claim_next();
        assert!(pace.round_starts(at(5_003)));
        // A large burst soon needs the whole (longer) lead: back to the short step.
        pace.size(lead, 200_000, 1);
        assert_eq!(pace.lead_now, Duration::from_secs(41), "30 s, 10 s and 1 s");
        assert_eq!(
            pace.step(&Round::default(), pace.lead_now),
            Duration::from_secs(2)
        );
        // Uncounted: the configured lead, and the short step.
        pace.uncounted(lead);
        assert_eq!(pace.lead_now, lead);
        assert_eq!(pace.step(&Round::default(), lead), Duration::from_secs(2));
    }

    #[test]
    fn the_next_round_waits_for_the_earliest_due_instant_a_lead_before_it() {
        let now = chrono::DateTime::parse_from_rfc3339("2030-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let s = Duration::from_secs;
        let lead = s(10);
        let idle = Round::default();
        let worked = Round {
            progress: true,
            ..Round::default()
        };
        let at = |secs: i64| Some(Ok(Some(now + chrono::Duration::seconds(secs))));
        // Due in a minute: claimed a lead before it.
        let wait = wait_after(&worked, at(60), now, lead, s(2), s(60));
        assert_eq!(
            wait,
            Wait {
                wait: s(50),
                pause: false
            }
        );
        // Due within the lead: looked at again within a step.
        let wait = wait_after(&worked, at(5), now, lead, s(2), s(60));
        assert_eq!(
            wait,
            Wait {
                wait: s(2),
                pause: false
            }
        );
        // Due now but not taken (held elsewhere): a short pause, not a spin.
        let wait = wait_after(&idle, at(0), now, lead, s(2), s(60));
        assert_eq!(
            wait,
            Wait {
                wait: Duration::from_millis(100),
                pause: true
            }
        );
        // Due within the lead behind an open job: looked at again once its outcome is likely
        // recorded, not a whole step later.
        let behind = Round {
            progress: true,
            busy_ahead: true,
            ..Round::default()
        };
        let busy_step = Pace::new(lead).step(&behind, lead);
        assert_eq!(busy_step, BUSY_RECHECK);
        assert_eq!(
            wait_after(&behind, at(5), now, lead, busy_step, s(60)).wait,
            BUSY_RECHECK
        );
        assert_eq!(
            wait_after(&behind, at(60), now, lead, busy_step, s(60)).wait,
            s(50),
            "a lead before what is due later"
        );
        // Claiming at the instant: until the instant itself.
        let wait = wait_after(&worked, at(30), now, Duration::ZERO, Duration::ZERO, s(60));
        assert_eq!(wait.wait, s(30));
        // Nothing due: the safety interval; the database failed: a poll every second.
        assert_eq!(
            wait_after(&idle, Some(Ok(None)), now, lead, s(2), s(60)).wait,
            s(60)
        );
        assert_eq!(
            wait_after(&worked, at(600), now, lead, s(2), s(60)).wait,
            s(60)
        );
        let failed = wait_after(
            &idle,
            Some(Err(crate::core::store::StoreError::Database("down".into()))),
            now,
            lead,
            s(2),
            s(60),
        );
        assert_eq!(
            failed,
            Wait {
                wait: s(1),
                pause: true
            }
        );
    }

    #[test]
    fn a_large_burst_is_claimed_far_enough_ahead_to_be_claimed_before_its_instant() {
        let s = Duration::from_secs;
        // A few hundred due soon: the configured lead is plenty.
        assert_eq!(
            lead_for(s(10), claim_needed(500, 2_000.0, 10_000.0, 1)),
            s(10)
        );
        // 20,000 at 2,000 a second take 10 s: 15 s with the margin; handing them off at
        // 10,000 a second 3 s, and a second to spare.
        assert_eq!(
            lead_for(s(10), claim_needed(20_000, 2_000.0, 10_000.0, 1)),
            s(19)
        );
        // Two instances each claim and hand off their half: 7.5 + 1.5 + 1 s.
        assert_eq!(
            lead_for(s(5), claim_needed(20_000, 2_000.0, 10_000.0, 2)),
            s(10)
        );
        // Never beyond the bound; never ahead when the configuration claims at the instant.
        assert_eq!(
            lead_for(s(10), claim_needed(200_000, 1_000.0, 10_000.0, 1)),
            LEAD_MAX
        );
        assert_eq!(
            lead_for(Duration::ZERO, claim_needed(200_000, 1_000.0, 10_000.0, 1)),
            Duration::ZERO
        );
    }

    #[test]
    fn a_burst_is_handed_off_early_enough_to_be_handed_off_before_its_instant() {
        let s = Duration::from_secs;
        assert_eq!(hand_off_before(100, 5_000.0), HAND_OFF_BEFORE);
        assert_eq!(hand_off_before(20_000, 10_000.0), s(3));
        assert_eq!(hand_off_before(1_000_000, 1_000.0), HAND_OFF_MAX);
    }

    proptest! {
        /// A fire further back in the queue never gets a shorter lease, and none gets less
        /// than the call lease.
        #[test]
        fn hand_off_leases_grow_with_the_queue(
            ahead in 0usize..200_000,
            more in 0usize..200_000,
            rate in 0.0f64..100_000.0,
        ) {
            let lease = Duration::from_secs(4);
            let first = hand_off_lease(lease, ahead, rate);
            prop_assert!(first >= lease);
            prop_assert!(hand_off_lease(lease, ahead + more, rate) >= first);
        }

        #[test]
        fn the_lead_stays_between_the_configured_one_and_the_bound(
            configured_s in 1u64..120,
            due in 0u64..1_000_000,
            rate in 1.0f64..100_000.0,
            instances in 1u32..8,
        ) {
            let configured = Duration::from_secs(configured_s);
            let lead = lead_for(configured, claim_needed(due, rate, 5_000.0, instances));
            prop_assert!(lead >= configured);
            prop_assert!(lead <= LEAD_MAX.max(configured));
            // More due never shortens it.
            prop_assert!(
                lead_for(configured, claim_needed(due + 1_000, rate, 5_000.0, instances)) >= lead
            );
        }

        /// The step never exceeds the lead, and a fire is claimed at least what claiming and
        /// handing off needs before its instant unless that is all of the lead (then the floor
        /// step, within 2 s).
        #[test]
        fn the_claim_ahead_step_leaves_what_is_needed(
            lead_ms in 1u64..600_000,
            needed_ms in 0u64..600_000,
        ) {
            let lead = Duration::from_millis(lead_ms);
            let needed = Duration::from_millis(needed_ms);
            let step = claim_ahead_step(lead, needed);
            prop_assert!(step <= lead);
            prop_assert!(step >= Duration::from_millis(100).min(lead));
            prop_assert!(step <= (lead / 2).max(Duration::from_secs(2)));
            // A step longer than the floor's bound only where it leaves what is needed.
            prop_assert!(lead - step >= needed || step <= Duration::from_secs(2));
        }
    }
}
