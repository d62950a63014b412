//! The producer's hand-offs: fires claimed ahead are handed off for their calls just before
//! their instants, in one guarded write; a change that came first withdraws them.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};

use super::super::claim::Recheck;
use super::super::fire::FireEvent;
use super::super::held::HAND_OFF_CHUNK;
use super::super::lease::Lease;
use super::super::outcome::run_request;
use super::super::wake;
use super::{HAND_OFF_RETRY, Op, OpKind, Producer};
use crate::core::dispatch::{Dispatcher, PreparedCall};
use crate::core::model::*;
use crate::core::store::*;

/// Calls made ready between yields to the runtime: a burst's thousands are not made ready in
/// one stretch on one worker.
const PREPARE_CHUNK: usize = 64;

/// At most about this many calls are held made ready (about a kilobyte each, their bodies
/// and signatures): as many as the fires an instance holds (`held::HELD_MAX`), so a burst's
/// calls are all signed at their hand-off, before the instant, rather than in the burst
/// (signing was a seventh of a 50,000 burst's CPU in serve). Beyond it, calls are made at
/// their instants.
const PREPARED_MAX: usize = super::super::held::HELD_MAX;

/// Each fire's call as `dispatcher` makes it ready ahead of its instant (none when `prepare`
/// is false).
async fn prepare_calls(
    dispatcher: &dyn Dispatcher,
    fires: &[(Schedule, Job)],
    prepare: bool,
) -> Vec<Option<PreparedCall>> {
    if !prepare {
        return vec![None; fires.len()];
    }
    let mut prepared = Vec::with_capacity(fires.len());
    for chunk in fires.chunks(PREPARE_CHUNK) {
        prepared.extend(
            chunk
                .iter()
                .map(|(schedule, job)| dispatcher.prepare(&run_request(schedule, job))),
        );
        tokio::task::yield_now().await;
    }
    prepared
}

impl Producer {
    /// Starts the next hand-off write once its time has come: one at a time, and after a
    /// failed one not before its retry.
    pub(super) fn start_hand_off(&mut self, now: DateTime<Utc>) {
        if self.handing_off {
            return;
        }
        if let Some(retry) = self.hand_off_retry {
            if !retry.passed(&*self.parts.clock) {
                return;
            }
            self.hand_off_retry = None;
        }
        let fires = self.held.take_to_hand_off(now);
        if fires.is_empty() {
            return;
        }
        debug_assert!(fires.len() <= HAND_OFF_CHUNK);
        for (_, job) in &fires {
            self.fires.step(job.id, FireEvent::HandOffSent);
        }
        self.handing_off = true;
        self.hand_off_started = Some(std::time::Instant::now());
        let ids: Vec<(JobId, EnvId)> = fires.iter().map(|(s, j)| (j.id, s.env_id)).collect();
        let store = self.parts.store.clone();
        // The lease covers the wait of the write's last fire behind the attempts queued before
        // it (one lease for the write: a chunk is called within a fraction of a second).
        let queued = self.held.queued() + self.unsure.len() + fires.len();
        let lease = wake::hand_off_lease(self.parts.config.lease, queued, self.drain.per_second());
        let lease = super::super::parts::chrono_duration(lease);
        let mono = self.parts.clock.monotonic();
        let dispatcher = self.parts.dispatcher.clone();
        // The fires handed off or ready and not called yet hold their calls made ready.
        let prepare = self.held.queued() + fires.len() <= PREPARED_MAX;
        self.spawn(OpKind::HandOff(ids), async move {
            let jobs: Vec<JobId> = fires.iter().map(|(_, j)| j.id).collect();
            // The calls are made ready while the write is out, so their instant costs little
            // more than their sends.
            let (answer, prepared) = tokio::join!(
                store.jobs_hand_off(&jobs, lease, now),
                prepare_calls(&*dispatcher, &fires, prepare)
            );
            Op::HandOff {
                fires,
                lease,
                at: now,
                mono,
                answer,
                prepared,
            }
        });
    }

    /// The hand-off of fires claimed ahead was answered (see
    /// [`crate::core::store::Store::jobs_hand_off`]): a fire withdrawn meanwhile is dropped;
    /// one whose schedule changed since the claim has its schedule read again (its new payload
    /// goes out, or a change that bypassed the withdrawal withdraws it there); the rest wait
    /// for their instant. A failed write puts the fires back, to hand off again: a fire is
    /// called once its hand-off is confirmed, late, never twice.
    pub(super) fn hand_off_done(
        &mut self,
        fires: Vec<(Schedule, Job)>,
        lease: chrono::Duration,
        at: DateTime<Utc>,
        mono: std::time::Duration,
        answer: StoreResult<Vec<HandedOff>>,
        prepared: Vec<Option<PreparedCall>>,
    ) {
        self.handing_off = false;
        if let Some(started) = self.hand_off_started.take()
            && fires.len() >= 200
            && answer.is_ok()
        {
            let sample = fires.len() as f64 / started.elapsed().as_secs_f64().max(1e-3);
            self.pace.hand_off_rate = (self.pace.hand_off_rate + sample) / 2.0;
        }
        let handed = match answer {
            Ok(handed) => handed,
            Err(err) => {
                tracing::warn!(fires = fires.len(), error = %err, "cannot hand off fires claimed ahead; trying again");
                for (_, job) in &fires {
                    self.fires.step(job.id, FireEvent::HandOffFailed);
                }
                self.held.put_back(fires);
                self.hand_off_retry = Some(crate::core::clock::Deadline::after(
                    &*self.parts.clock,
                    HAND_OFF_RETRY,
                ));
                return;
            }
        };
        self.held.hand_off_answered(fires.iter().map(|(_, j)| j.id));
        let handed: HashMap<JobId, DateTime<Utc>> = handed
            .into_iter()
            .map(|h| (h.job_id, h.schedule_updated_at))
            .collect();
        self.parts.trace_hand_offs(&fires, &handed, at);
        let mut ready = Vec::with_capacity(fires.len());
        let mut changed: BTreeMap<EnvId, Vec<(Schedule, Job)>> = BTreeMap::new();
        debug_assert_eq!(
            prepared.len(),
            fires.len(),
            "one made ready or none per fire"
        );
        for ((schedule, mut job), prepared) in fires.into_iter().zip(prepared) {
            let Some(updated_at) = handed.get(&job.id) else {
                // Withdrawn by a change (or released elsewhere) first: not ours to call.
                tracing::info!(schedule_id = %schedule.id, job_id = %job.id, "a fire claimed ahead was withdrawn before its instant");
                self.fires.step(job.id, FireEvent::Withdrawn);
                self.summary.skipped += 1;
                self.held.forget(schedule.env_id);
                self.freed();
                continue;
            };
            job.status = JobStatus::Running;
            job.started_at = Some(job.scheduled_for);
            // From here on its lease is renewed with the calls in flight. The hand-off leased
            // it from its instant (or from `at`, if later), for its wait in the queue too.
            let until = job.scheduled_for.max(at) + lease;
            self.running
                .insert(job.id, Lease::written(job.lease_epoch, until, at, mono));
            if *updated_at == schedule.updated_at {
                self.fires.step(job.id, FireEvent::HandedOff);
                ready.push((schedule, job, prepared));
            } else {
                // Its call is made again from the schedule as it is read again.
                self.fires.step(job.id, FireEvent::HandedOffChanged);
                changed
                    .entry(schedule.env_id)
                    .or_default()
                    .push((schedule, job));
            }
        }
        self.held.handed_off(ready);
        for (env, fires) in changed {
            let ids = fires.iter().map(|(_, j)| (j.id, env)).collect();
            let engine = self.parts.clone();
            self.spawn(OpKind::Reread(ids), async move {
                let pairs: Vec<(&Schedule, &Job)> = fires.iter().map(|(s, j)| (s, j)).collect();
                let verdicts = engine.reread_handed_off(env, &pairs).await;
                Op::Reread {
                    env,
                    fires,
                    verdicts,
                }
            });
        }
    }

    /// The schedules of handed-off fires that changed since their claim were read again.
    pub(super) fn reread_done(
        &mut self,
        env: EnvId,
        fires: Vec<(Schedule, Job)>,
        verdicts: StoreResult<Vec<Recheck>>,
    ) {
        let verdicts = match verdicts {
            Ok(verdicts) => verdicts,
            Err(err) => {
                // Handed off, and a change that decides (status, timing) would have withdrawn
                // it: what changed is the payload or target, or nothing that matters.
                tracing::warn!(env_id = %env, fires = fires.len(), error = %err, "cannot read changed schedules again; calling them as claimed");
                for (_, job) in &fires {
                    self.fires.step(job.id, FireEvent::RereadFire);
                }
                self.held
                    .handed_off(fires.into_iter().map(|(s, j)| (s, j, None)).collect());
                return;
            }
        };
        let mut ready = Vec::with_capacity(fires.len());
        for ((_, job), verdict) in fires.into_iter().zip(verdicts) {
            match verdict {
                Recheck::Fire(schedule) => {
                    self.fires.step(job.id, FireEvent::RereadFire);
                    ready.push((*schedule, job, None));
                }
                Recheck::Withdrawn => {
                    self.fires.step(job.id, FireEvent::Withdrawn);
                    self.summary.skipped += 1;
                    self.running.remove(&job.id);
                    self.held.forget(env);
                    self.freed();
                }
            }
        }
        self.held.handed_off(ready);
    }
}
