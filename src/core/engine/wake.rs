//! When the continuous loop runs its next round, and how often leases are renewed: pure rules
//! the producer applies. After a round, the next one waits until the earliest due instant (a
//! lead before it when claiming ahead), within the safety interval; a change signal (from this
//! or, through the store, another instance) or a freed slot when work was deferred starts it
//! at once.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::round::Round;
use crate::core::store::StoreResult;

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
    tick_interval: Duration,
) -> Wait {
    match next_due {
        Some(Ok(Some(at))) => {
            let until = (at - now).to_std().unwrap_or_default();
            // Claimed a lead ahead, at most every step (a steady stream of fires is claimed a
            // step's worth at a time, not one claim per fire). What is nearer than the lead
            // after a round is looked at again within a step: a fire that came within the lead
            // while the round ran (or that the round could not take) is claimed ahead then,
            // not at its instant; a retry or a lease sooner than that is waited for at its own
            // instant. (A schedule left for its instant because its previous job is open costs
            // a round per step until then.)
            let until = if lead.is_zero() {
                until
            } else if until > lead {
                (until - lead).max(claim_ahead_step(lead))
            } else {
                until.min(claim_ahead_step(lead))
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

/// How often at most the loop claims ahead while nothing else wakes it (a change does): a tenth
/// of the lead, within 100 ms and 1 s, and never more than the lead itself. A fire is claimed
/// between the lead and a step less before its instant, so never after it.
fn claim_ahead_step(lead: Duration) -> Duration {
    (lead / 10)
        .clamp(Duration::from_millis(100), Duration::from_secs(1))
        .min(lead)
}

/// How soon a failed lease renewal is tried again.
pub(super) const RENEW_RETRY: Duration = Duration::from_secs(1);

/// How often leases are renewed: a few times per lease.
pub(super) fn renewal_interval(lease: Duration) -> Duration {
    (lease / 3).max(Duration::from_millis(100))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_claim_ahead_step_is_a_tenth_of_the_lead_within_its_bounds() {
        let ms = Duration::from_millis;
        assert_eq!(claim_ahead_step(Duration::from_secs(10)), ms(1000));
        assert_eq!(claim_ahead_step(ms(4500)), ms(450));
        assert_eq!(claim_ahead_step(Duration::from_secs(60)), ms(1000));
        assert_eq!(claim_ahead_step(ms(500)), ms(100));
        // A lead shorter than the floor: the step is the lead, so a fire is never claimed
        // after its instant.
        assert_eq!(claim_ahead_step(ms(50)), ms(50));
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
        let wait = wait_after(&worked, at(60), now, lead, s(60));
        assert_eq!(
            wait,
            Wait {
                wait: s(50),
                pause: false
            }
        );
        // Due within the lead: looked at again within a step.
        let wait = wait_after(&worked, at(5), now, lead, s(60));
        assert_eq!(
            wait,
            Wait {
                wait: s(1),
                pause: false
            }
        );
        // Due now but not taken (held elsewhere): a short pause, not a spin.
        let wait = wait_after(&idle, at(0), now, lead, s(60));
        assert_eq!(
            wait,
            Wait {
                wait: Duration::from_millis(100),
                pause: true
            }
        );
        // Claiming at the instant: until the instant itself.
        let wait = wait_after(&worked, at(30), now, Duration::ZERO, s(60));
        assert_eq!(wait.wait, s(30));
        // Nothing due: the safety interval; the database failed: a poll every second.
        assert_eq!(
            wait_after(&idle, Some(Ok(None)), now, lead, s(60)).wait,
            s(60)
        );
        assert_eq!(wait_after(&worked, at(600), now, lead, s(60)).wait, s(60));
        let failed = wait_after(
            &idle,
            Some(Err(crate::core::store::StoreError::Database("down".into()))),
            now,
            lead,
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

    proptest! {
        #[test]
        fn the_claim_ahead_step_never_exceeds_the_lead_or_a_second(lead_ms in 1u64..600_000) {
            let lead = Duration::from_millis(lead_ms);
            let step = claim_ahead_step(lead);
            prop_assert!(step <= lead);
            prop_assert!(step <= Duration::from_secs(1));
            prop_assert!(step >= Duration::from_millis(100).min(lead));
        }
    }
}
