//! The continuous loop of `serve`: claim rounds while there is due work and free slots, then
//! a sleep until the earliest due instant, a change signal (from this or, through the store,
//! another instance), a freed slot when work was deferred, or the safety interval. Beside it
//! the recorder records outcomes as they complete, and the lease keeper renews the leases of
//! this instance's running attempts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::pipeline::{InFlight, Round};
use super::{Engine, share};
use crate::core::clock::Clock;
use crate::core::store::Store;

impl Engine {
    /// Runs the pipeline until `shutdown` resolves. Claiming stops at once; calls in flight
    /// finish (each bounded by the job timeout) and are recorded before this returns.
    pub async fn run(&self, shutdown: impl std::future::Future<Output = ()>) {
        let lead = self.config.lead();
        let (pipeline, recorder) = self.pipeline((!lead.is_zero()).then_some(lead));
        let inflight = pipeline.inflight.clone();
        // The first round already claims this instance's share only.
        let share = pipeline.share.clone();
        share::beat(&*self.store, &*self.clock, self.instance, &share).await;
        let (stop_beats, beats_stopped) = tokio::sync::watch::channel(false);
        let beats = tokio::spawn(share::keep_share(
            self.store.clone(),
            self.clock.clone(),
            self.instance,
            share,
            beats_stopped,
        ));
        let (stop_leases, leases_stopped) = tokio::sync::watch::channel(false);
        let (stop_claims, claims_stopped) = tokio::sync::watch::channel(false);
        let claiming = async move {
            let claim = async {
                self.claim_loop(&pipeline, shutdown).await;
                let _ = stop_claims.send(true);
            };
            tokio::join!(claim, pipeline.launch_loop(claims_stopped));
            // No more claims: the others take this instance's share.
            let _ = stop_beats.send(true);
            // Dropping the pipeline closes the recorder's channel once the calls are done.
            drop(pipeline);
        };
        let recording = async move {
            recorder.run().await;
            let _ = stop_leases.send(true);
        };
        // The lease keeper runs on a task of its own: a claim busy computing missed
        // occurrences, or a slow record, must not delay a renewal.
        let keeper = tokio::spawn(keep_leases(
            self.store.clone(),
            self.clock.clone(),
            self.config.lease,
            inflight,
            leases_stopped,
        ));
        tokio::join!(claiming, recording);
        if let Err(err) = keeper.await {
            tracing::error!(error = %err, "the lease keeper stopped");
        }
        if let Err(err) = beats.await {
            tracing::error!(error = %err, "the heartbeat stopped");
        }
    }

    async fn claim_loop(
        &self,
        pipeline: &super::pipeline::Pipeline<'_>,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        let signals = self.store.signals();
        loop {
            let started = Instant::now();
            let round = pipeline.round().await;
            self.observe_round(started, &round);
            let round = round.unwrap_or_default();
            let freed = &pipeline.inflight.freed;
            // More is due and there is room for it: go on at once.
            if round.progress && round.full && pipeline.claim_room() > 0 {
                tokio::select! {
                    biased;
                    () = &mut shutdown => return,
                    () = tokio::task::yield_now() => continue,
                }
            }
            let wait = self
                .wait_after(&round, pipeline.ahead.unwrap_or_default())
                .await;
            tokio::select! {
                biased;
                () = &mut shutdown => return,
                () = signals.schedules.notified() => {}
                // Work waits for a slot: a finished call frees one; or for room among the
                // held fires: a launched one makes it.
                () = freed.notified(), if round.deferred => {}
                () = pipeline.held.left.notified(), if round.deferred => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// How long to sleep after a round: until the earliest due instant (a lead before it when
    /// claiming ahead), within the safety interval, and never spinning on work that is due but
    /// cannot be taken now.
    async fn wait_after(&self, round: &Round, lead: Duration) -> Duration {
        match self.store.wakeup_next().await {
            Ok(Some(at)) => {
                let until = (at - self.clock.now()).to_std().unwrap_or_default();
                // Claimed a lead ahead, at most every step (a steady stream of fires is
                // claimed a step's worth at a time, not one claim per fire). What is nearer
                // than the lead after a round is looked at again within a step: a fire that
                // came within the lead while the round ran (or that the round could not take)
                // is claimed ahead then, not at its instant; a retry or a lease sooner than
                // that is waited for at its own instant. (A schedule left for its instant
                // because its previous job is open costs a round per step until then.)
                let until = if lead.is_zero() {
                    until
                } else if until > lead {
                    (until - lead).max(claim_ahead_step(lead))
                } else {
                    until.min(claim_ahead_step(lead))
                };
                // Work that is already due but could not be taken (another instance holds it,
                // or it waits for a slot) must not spin this loop.
                let floor = if round.progress && !round.deferred {
                    Duration::ZERO
                } else {
                    Duration::from_millis(100)
                };
                until.max(floor).min(self.config.tick_interval)
            }
            Ok(None) => self.config.tick_interval,
            Err(err) => {
                tracing::warn!(error = %err, "cannot compute the next wake-up; polling");
                Duration::from_secs(1).min(self.config.tick_interval)
            }
        }
    }
}

/// Renews the leases of this instance's unrecorded attempts a few times per lease, until the
/// recorder is done. A renewal that failed is tried again after [`RENEW_RETRY`], not a third of
/// a lease later, so a short outage does not let the leases run out.
pub(super) async fn keep_leases(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    lease: Duration,
    inflight: Arc<InFlight>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    // On the injected clock: leases are judged by it, so renewals keep time with it (a test
    // moves the clock past a renewal and the renewal happens, with no wall-clock wait).
    let every = renewal_interval(lease);
    let mut next = clock.now() + super::chrono_duration(every);
    loop {
        // Stopping comes first: a keeper whose pipeline is gone (its instance stopped, or its
        // tick was dropped) must not renew once more because the clock moved meanwhile.
        tokio::select! {
            biased;
            _ = stopped.wait_for(|s| *s) => return,
            () = clock.sleep_until(next) => {}
        }
        let jobs = inflight.jobs();
        let now = clock.now();
        if jobs.is_empty() {
            next = now + super::chrono_duration(every);
            continue;
        }
        let until = now + super::chrono_duration(lease);
        let after = match store.jobs_lease_renew(&jobs, until).await {
            Ok(_) => every,
            Err(err) => {
                tracing::warn!(error = %err, jobs = jobs.len(), "renewing attempt leases failed; trying again");
                RENEW_RETRY.min(every)
            }
        };
        next = now + super::chrono_duration(after);
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
const RENEW_RETRY: Duration = Duration::from_secs(1);

/// How often leases are renewed: a few times per lease.
fn renewal_interval(lease: Duration) -> Duration {
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
