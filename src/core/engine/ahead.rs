//! Fires claimed ahead of their instant. The continuous loop claims what falls due within the
//! lead (`EngineConfig::claim_ahead`), so the claim's database work is done before the
//! instant, not in the burst at it; the claimed fires wait here, and the launcher calls each
//! when its instant comes, as slots allow: round-robin over environments and origins, so a
//! full origin holds back its own fires only.
//!
//! At its instant, a fire claimed ahead has its schedule read again (one read per
//! environment): a schedule paused, deleted or re-timed meanwhile has the fire withdrawn and
//! recorded as skipped; otherwise the call goes out with the schedule as it is now. If that
//! read fails (the database is away), the fire goes out as claimed: the claim is committed
//! and the target does not need the database.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use futures_util::stream;
use tokio::sync::{Notify, watch};

use super::claim::Recheck;
use super::pipeline::{CLAIMS_AT_ONCE, Pipeline};
use crate::core::model::*;

/// At most this many fires are held at once (claimed ahead, or past their instant and waiting
/// for a slot); claiming waits for room beyond it.
pub const HELD_MAX: usize = 50_000;

/// A claimed fire waiting for its instant.
struct HeldFire {
    schedule: Schedule,
    job: Job,
    /// Claimed before its instant: its schedule is read again at the instant.
    recheck: bool,
}

/// The fires held by one pipeline.
#[derive(Default)]
pub(super) struct Held {
    state: Mutex<HeldState>,
    /// Rung when a fire arrives (the launcher looks at the earliest instant again).
    arrived: Notify,
    /// Rung when fires leave (claiming may go on if it waited for room).
    pub left: Notify,
}

#[derive(Default)]
struct HeldState {
    /// By instant (and arrival, to keep keys unique).
    waiting: BTreeMap<(DateTime<Utc>, u64), HeldFire>,
    arrivals: u64,
    /// Past their instant, waiting for a slot: per environment and origin, taken round-robin.
    ready: BTreeMap<String, VecDeque<(Schedule, Job)>>,
    /// Fires in `waiting` and `ready`.
    count: usize,
}

impl Held {
    fn lock(&self) -> std::sync::MutexGuard<'_, HeldState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Room for more claims.
    pub(super) fn room(&self) -> usize {
        HELD_MAX.saturating_sub(self.lock().count)
    }

    /// Holds a claimed fire until its instant.
    pub(super) fn hold(&self, schedule: Schedule, job: Job, recheck: bool) {
        let mut state = self.lock();
        state.arrivals += 1;
        let key = (job.scheduled_for, state.arrivals);
        state.waiting.insert(
            key,
            HeldFire {
                schedule,
                job,
                recheck,
            },
        );
        state.count += 1;
        drop(state);
        self.arrived.notify_one();
    }

    /// Takes the fires whose instant has come.
    fn take_due(&self, now: DateTime<Utc>) -> Vec<HeldFire> {
        let mut state = self.lock();
        let later = state.waiting.split_off(&(now, u64::MAX));
        let due = std::mem::replace(&mut state.waiting, later);
        // Taken fires stay counted until they are launched or withdrawn.
        due.into_values().collect()
    }

    /// The earliest instant still to come, and whether nothing at all is held.
    fn next(&self) -> (Option<DateTime<Utc>>, bool) {
        let state = self.lock();
        (
            state.waiting.keys().next().map(|(at, _)| *at),
            state.count == 0,
        )
    }

    fn forget(&self, n: usize) {
        if n > 0 {
            let mut state = self.lock();
            state.count = state.count.saturating_sub(n);
            drop(state);
            self.left.notify_one();
        }
    }
}

impl Pipeline<'_> {
    /// Calls held fires at their instants, until `stop` is set and nothing is held (fires
    /// claimed before a shutdown are still called at their instants, at most a lead later).
    pub(super) async fn launch_loop(&self, mut stop: watch::Receiver<bool>) {
        let clock = self.engine.clock.clone();
        loop {
            // Listen before looking, so no wake-up between the two is lost.
            let arrived = self.held.arrived.notified();
            let freed = self.inflight.launch_freed.notified();
            tokio::pin!(arrived, freed);
            arrived.as_mut().enable();
            freed.as_mut().enable();

            let due = self.held.take_due(clock.now());
            if !due.is_empty() {
                self.make_ready(due).await;
            }
            let blocked = self.launch_ready();
            let (next, empty) = self.held.next();
            let stopping = *stop.borrow();
            if stopping && empty {
                return;
            }
            let sleep = next.map(|at| (at - clock.now()).to_std().unwrap_or(Duration::ZERO));
            tokio::select! {
                () = &mut arrived => {}
                () = &mut freed, if blocked => {}
                () = sleep_for(sleep), if sleep.is_some() => {}
                _ = stop.changed(), if !stopping => {}
            }
        }
    }

    /// Reads again the schedules of fires claimed ahead (per environment, a few at once),
    /// withdraws those whose schedule changed, and queues the rest for a slot.
    async fn make_ready(&self, due: Vec<HeldFire>) {
        let mut direct = Vec::new();
        let mut by_env: BTreeMap<EnvId, Vec<HeldFire>> = BTreeMap::new();
        for fire in due {
            if fire.recheck {
                by_env.entry(fire.schedule.env_id).or_default().push(fire);
            } else {
                direct.push((fire.schedule, fire.job));
            }
        }
        self.queue(direct);
        let mut checked = stream::iter(by_env)
            .map(|(env, fires)| self.recheck(env, fires))
            .buffer_unordered(CLAIMS_AT_ONCE);
        while let Some(ready) = checked.next().await {
            self.queue(ready);
            // Fires of the environments checked so far need not wait for the rest.
            self.launch_ready();
        }
    }

    async fn recheck(&self, env: EnvId, fires: Vec<HeldFire>) -> Vec<(Schedule, Job)> {
        let pairs: Vec<(&Schedule, &Job)> = fires.iter().map(|f| (&f.schedule, &f.job)).collect();
        let verdicts = match self.engine.recheck_held(env, &pairs).await {
            Ok(verdicts) => verdicts,
            Err(err) => {
                tracing::warn!(env_id = %env, fires = fires.len(), error = %err, "cannot read schedules again at their instant; calling as claimed");
                return fires.into_iter().map(|f| (f.schedule, f.job)).collect();
            }
        };
        let mut ready = Vec::with_capacity(fires.len());
        let mut withdrawn = 0;
        for (fire, verdict) in fires.into_iter().zip(verdicts) {
            match verdict {
                Recheck::Fire(schedule) => ready.push((*schedule, fire.job)),
                Recheck::Withdrawn => {
                    withdrawn += 1;
                    self.inflight_forget(fire.job.id);
                }
            }
        }
        self.account(|s| s.skipped += withdrawn as u64);
        self.held.forget(withdrawn);
        ready
    }

    fn queue(&self, fires: Vec<(Schedule, Job)>) {
        if fires.is_empty() {
            return;
        }
        let mut state = self.held.lock();
        for (schedule, job) in fires {
            let key = super::pipeline::origin_of(&schedule)
                .unwrap_or_else(|| schedule.env_id.to_string());
            state
                .ready
                .entry(key)
                .or_default()
                .push_back((schedule, job));
        }
    }

    /// Starts ready fires as slots allow, one per environment and origin in turn. True when
    /// some are left waiting for a slot.
    fn launch_ready(&self) -> bool {
        let mut launched = 0;
        let mut blocked: HashSet<String> = HashSet::new();
        loop {
            let keys: Vec<String> = {
                let state = self.held.lock();
                state
                    .ready
                    .keys()
                    .filter(|k| !blocked.contains(*k))
                    .cloned()
                    .collect()
            };
            if keys.is_empty() {
                break;
            }
            let mut progress = false;
            for key in keys {
                let mut state = self.held.lock();
                let Some(queue) = state.ready.get_mut(&key) else {
                    continue;
                };
                let Some((schedule, _)) = queue.front() else {
                    state.ready.remove(&key);
                    continue;
                };
                let Some(slot) = self.reserve(schedule) else {
                    blocked.insert(key);
                    continue;
                };
                let (schedule, job) = queue.pop_front().expect("a front was just seen");
                if queue.is_empty() {
                    state.ready.remove(&key);
                }
                drop(state);
                self.fire(schedule, job, slot);
                launched += 1;
                progress = true;
            }
            if !progress || self.room() == 0 {
                break;
            }
        }
        self.held.forget(launched);
        !self.held.lock().ready.is_empty()
    }
}

async fn sleep_for(wait: Option<Duration>) {
    if let Some(wait) = wait {
        tokio::time::sleep(wait).await;
    }
}
