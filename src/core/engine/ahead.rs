//! Fires claimed ahead of their instant. The continuous loop claims what falls due within the
//! lead (`EngineConfig::claim_ahead`), so the claim's database work is done before the
//! instant, not in the burst at it; the claimed fires wait here, and the launcher calls each
//! when its instant comes, as slots allow: round-robin over environments and origins, so a
//! full origin holds back its own fires only.
//!
//! Just before its instant ([`HAND_OFF_BEFORE`], in steps of [`HAND_OFF_STEP`]), a fire claimed
//! ahead is handed off for its call: one guarded write across environments gives it its start,
//! unless a pause, delete or new timing withdrew it first (the change withdraws a fire not handed
//! off in its own transaction, so exactly one of the two takes it; a change later than the hand-off
//! does not reach the fire, like a change just after the instant). A fire whose schedule changed
//! otherwise since the claim has its schedule read again, so a new payload or target goes out with
//! the call. A fire is called only once its hand-off is confirmed: while the database is away the
//! hand-off is tried again, and the call goes out late, never twice.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::future::{BoxFuture, OptionFuture};
use futures_util::{FutureExt, StreamExt, stream};
use tokio::sync::{Notify, watch};

use super::claim::Recheck;
use super::pipeline::{CLAIMS_AT_ONCE, Pipeline};
use crate::core::model::*;

/// At most this many fires are held at once (claimed ahead, or past their instant and waiting
/// for a slot); claiming ahead waits for room beyond it.
pub const HELD_MAX: usize = 50_000;

/// At most this many of them belong to one environment, so one tenant's flood leaves room for
/// the others' fires (beyond it, its occurrences are claimed at their instant, into slots).
pub const HELD_PER_ENV: usize = 20_000;

/// How long before its instant a fire claimed ahead is handed off for its call at the latest:
/// the hand-off of a burst (thousands of rows) is written before it, not in it. A change later
/// than this does not reach the fire.
pub const HAND_OFF_BEFORE: Duration = Duration::from_secs(1);

/// At most this many fires are handed off in one write, in instant order: the earliest of a
/// large burst are called while the rest are handed off.
const HAND_OFF_CHUNK: usize = 2_000;

/// A hand-off also takes the fires due within this much after those it must take, so a steady
/// stream of fires is handed off a few times a second in one write each, not one write per
/// fire: a fire is handed off between [`HAND_OFF_BEFORE`] and this much more before its
/// instant (or, in a burst larger than a chunk, as soon as the chunks before it are).
pub const HAND_OFF_STEP: Duration = Duration::from_millis(250);

/// How soon a failed hand-off is tried again.
const HAND_OFF_RETRY: Duration = Duration::from_millis(500);

/// A fire claimed ahead, to read again before its instant.
struct HeldFire {
    schedule: Schedule,
    job: Job,
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
    /// By instant (and arrival, to keep keys unique): fires to hand off before their
    /// instant.
    waiting: BTreeMap<(DateTime<Utc>, u64), HeldFire>,
    /// Fires handed off, waiting for their instant.
    handed_off: BTreeMap<(DateTime<Utc>, u64), (Schedule, Job)>,
    arrivals: u64,
    /// Past their instant, waiting for a slot: per environment and origin, taken round-robin.
    ready: BTreeMap<String, VecDeque<(Schedule, Job)>>,
    /// The jobs of fires claimed ahead whose hand-off is not confirmed yet: still `scheduled`
    /// in the store, and this instance's to hand off (its drain never releases them).
    scheduled: HashSet<JobId>,
    /// Fires in `waiting`, `handed_off` and `ready`, in all and per environment.
    count: usize,
    per_env: HashMap<EnvId, usize>,
}

impl HeldState {
    /// A key for a fire at `at`: by instant, then by arrival.
    fn key(&mut self, at: DateTime<Utc>) -> (DateTime<Utc>, u64) {
        self.arrivals += 1;
        (at, self.arrivals)
    }
}

impl Held {
    fn lock(&self) -> std::sync::MutexGuard<'_, HeldState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Room for more claims.
    pub(super) fn room(&self) -> usize {
        HELD_MAX.saturating_sub(self.lock().count)
    }

    /// Whether one more fire of `env` may be held.
    pub(super) fn admits(&self, env: EnvId) -> bool {
        let state = self.lock();
        state.count < HELD_MAX && state.per_env.get(&env).copied().unwrap_or(0) < HELD_PER_ENV
    }

    /// Holds a fire claimed ahead until its hand-off.
    pub(super) fn hold(&self, schedule: Schedule, job: Job) {
        let job_env = schedule.env_id;
        let mut state = self.lock();
        let key = state.key(job.scheduled_for);
        state.scheduled.insert(job.id);
        state.waiting.insert(key, HeldFire { schedule, job });
        state.count += 1;
        *state.per_env.entry(job_env).or_default() += 1;
        drop(state);
        self.arrived.notify_one();
    }

    /// Whether this instance holds `job`, claimed ahead and not handed off yet.
    pub(super) fn holds_scheduled(&self, job: JobId) -> bool {
        self.lock().scheduled.contains(&job)
    }

    /// The hand-off of `jobs` was answered: each is running now, or no longer ours.
    fn hand_off_answered(&self, jobs: &[JobId]) {
        let mut state = self.lock();
        for job in jobs {
            state.scheduled.remove(job);
        }
    }

    /// Puts fires whose hand-off failed back, to hand off again.
    fn put_back(&self, fires: Vec<HeldFire>) {
        let mut state = self.lock();
        for fire in fires {
            let key = state.key(fire.job.scheduled_for);
            state.waiting.insert(key, fire);
        }
    }

    /// Puts fires handed off back to wait for their instant.
    fn handed_off(&self, fires: Vec<(Schedule, Job)>) {
        let mut state = self.lock();
        for (schedule, job) in fires {
            let key = state.key(job.scheduled_for);
            state.handed_off.insert(key, (schedule, job));
        }
        drop(state);
        // The launcher looks at the earliest instant again (a hand-off still reading changed
        // schedules must not hold back the fires it already handed off).
        self.arrived.notify_one();
    }

    /// Takes the fires to hand off now: when the earliest is at most [`HAND_OFF_BEFORE`] away,
    /// those at most [`HAND_OFF_STEP`] more away too, earliest first, at most
    /// [`HAND_OFF_CHUNK`].
    fn take_to_hand_off(&self, now: DateTime<Utc>) -> Vec<HeldFire> {
        let mut state = self.lock();
        let before = chrono::Duration::from_std(HAND_OFF_BEFORE).unwrap_or_default();
        let until = now + before + chrono::Duration::from_std(HAND_OFF_STEP).unwrap_or_default();
        if state
            .waiting
            .keys()
            .next()
            .is_none_or(|(at, _)| *at > now + before)
        {
            return Vec::new();
        }
        // Taken fires stay counted until they are launched or withdrawn.
        let mut taken = Vec::new();
        while taken.len() < HAND_OFF_CHUNK {
            match state.waiting.first_entry() {
                Some(entry) if entry.key().0 <= until => taken.push(entry.remove()),
                _ => break,
            }
        }
        taken
    }

    /// Takes the handed-off fires whose instant has come.
    fn take_due(&self, now: DateTime<Utc>) -> Vec<(Schedule, Job)> {
        let mut state = self.lock();
        let later = state.handed_off.split_off(&(now, u64::MAX));
        std::mem::replace(&mut state.handed_off, later)
            .into_values()
            .collect()
    }

    /// When the launcher has something to do next: the next hand-off (a lead of
    /// [`HAND_OFF_BEFORE`] before an instant) and the next instant of a fire handed off; and
    /// whether nothing at all is held.
    fn next(&self) -> Next {
        let state = self.lock();
        let before = chrono::Duration::from_std(HAND_OFF_BEFORE).unwrap_or_default();
        Next {
            hand_off: state.waiting.keys().next().map(|(at, _)| *at - before),
            instant: state.handed_off.keys().next().map(|(at, _)| *at),
            empty: state.count == 0,
        }
    }

    /// True while fires whose instant has come wait for a slot (the recorder gives way).
    pub(super) fn pressing(&self) -> bool {
        !self.lock().ready.is_empty()
    }

    /// Fires that left (launched, or withdrawn), by environment.
    fn forget(&self, envs: impl IntoIterator<Item = EnvId>) {
        let mut state = self.lock();
        let mut left = false;
        for env in envs {
            left = true;
            state.count = state.count.saturating_sub(1);
            if let Some(n) = state.per_env.get_mut(&env) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    state.per_env.remove(&env);
                }
            }
        }
        drop(state);
        if left {
            self.left.notify_one();
        }
    }
}

/// What [`Held::next`] tells the launcher.
struct Next {
    hand_off: Option<DateTime<Utc>>,
    instant: Option<DateTime<Utc>>,
    empty: bool,
}

impl Pipeline<'_> {
    /// Calls held fires at their instants, until `stop` is set and nothing is held (fires
    /// claimed before a shutdown are still called at their instants, at most a lead later).
    /// A hand-off's write runs beside the launches: fires already handed off leave at their
    /// instants while the next ones are handed off.
    pub(super) async fn launch_loop(&self, mut stop: watch::Receiver<bool>) {
        let clock = self.engine.clock.clone();
        // After a failed hand-off (the database is away), when to try again.
        let mut hand_off_after: Option<tokio::time::Instant> = None;
        // The hand-off in progress (one at a time); true when it succeeded.
        let mut handing: Option<BoxFuture<'_, bool>> = None;
        loop {
            // Listen before looking, so no wake-up between the two is lost.
            let arrived = self.held.arrived.notified();
            let freed = self.inflight.launch_freed.notified();
            tokio::pin!(arrived, freed);
            arrived.as_mut().enable();
            freed.as_mut().enable();

            if handing.is_none()
                && hand_off_after.is_none_or(|at| at <= tokio::time::Instant::now())
            {
                hand_off_after = None;
                let fires = self.held.take_to_hand_off(clock.now());
                if !fires.is_empty() {
                    handing = Some(self.hand_off(fires).boxed());
                }
            }
            let due = self.held.take_due(clock.now());
            self.queue(due);
            let blocked = self.launch_ready();
            let next = self.held.next();
            let stopping = *stop.borrow();
            if stopping && next.empty {
                return;
            }
            let until = |at: DateTime<Utc>| (at - clock.now()).to_std().unwrap_or(Duration::ZERO);
            // While a hand-off is in progress the next one waits for it to end.
            let mut hand_off = next.hand_off.filter(|_| handing.is_none()).map(until);
            if let Some(at) = hand_off_after {
                // No hand-off before the retry; fires already handed off keep their instants.
                let retry = at.saturating_duration_since(tokio::time::Instant::now());
                hand_off = hand_off.map(|h| h.max(retry));
            }
            let sleep = match (hand_off, next.instant.map(until)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            tokio::select! {
                Some(handed) = OptionFuture::from(handing.as_mut()), if handing.is_some() => {
                    handing = None;
                    if !handed {
                        hand_off_after = Some(tokio::time::Instant::now() + HAND_OFF_RETRY);
                    }
                }
                () = &mut arrived => {}
                () = &mut freed, if blocked => {}
                () = sleep_for(sleep), if sleep.is_some() => {}
                _ = stop.changed(), if !stopping => {}
            }
        }
    }

    /// Hands off fires claimed ahead for their calls, in one write across environments (see
    /// [`crate::core::store::Store::jobs_hand_off`]): a fire withdrawn meanwhile is dropped;
    /// one whose schedule changed since the claim has its schedule read again (its new
    /// payload goes out, or a change that bypassed the withdrawal withdraws it here); the rest
    /// wait for their instant. False when the hand-off failed: the fires are put back, and
    /// called once it succeeds (never unconfirmed).
    async fn hand_off(&self, fires: Vec<HeldFire>) -> bool {
        let ids: Vec<JobId> = fires.iter().map(|f| f.job.id).collect();
        let lease = super::chrono_duration(self.engine.config.lease);
        let now = self.engine.clock.now();
        let handed = match self.engine.store.jobs_hand_off(&ids, lease, now).await {
            Ok(handed) => {
                self.held.hand_off_answered(&ids);
                handed
            }
            Err(err) => {
                tracing::warn!(fires = fires.len(), error = %err, "cannot hand off fires claimed ahead; trying again");
                self.held.put_back(fires);
                return false;
            }
        };
        let handed: HashMap<JobId, DateTime<Utc>> = handed
            .into_iter()
            .map(|h| (h.job_id, h.schedule_updated_at))
            .collect();
        let mut ready = Vec::with_capacity(fires.len());
        let mut changed: BTreeMap<EnvId, Vec<(Schedule, Job)>> = BTreeMap::new();
        let mut dropped = Vec::new();
        for HeldFire { schedule, mut job } in fires {
            let Some(updated_at) = handed.get(&job.id) else {
                // Withdrawn by a change (or released elsewhere) first: not ours to call.
                tracing::info!(schedule_id = %schedule.id, job_id = %job.id, "a fire claimed ahead was withdrawn before its instant");
                dropped.push(schedule.env_id);
                continue;
            };
            job.status = JobStatus::Running;
            job.started_at = Some(job.scheduled_for);
            // From here on its lease is renewed with the calls in flight, and the drain leaves
            // it alone.
            self.inflight_track(job.id);
            if *updated_at == schedule.updated_at {
                ready.push((schedule, job));
            } else {
                changed
                    .entry(schedule.env_id)
                    .or_default()
                    .push((schedule, job));
            }
        }
        self.account(|s| s.skipped += dropped.len() as u64);
        self.held.forget(dropped);
        self.held.handed_off(ready);
        let mut reread = stream::iter(changed)
            .map(|(env, fires)| self.reread(env, fires))
            .buffer_unordered(CLAIMS_AT_ONCE);
        while let Some(ready) = reread.next().await {
            self.held.handed_off(ready);
        }
        true
    }

    /// Reads again the schedules of handed-off fires that changed since their claim.
    async fn reread(&self, env: EnvId, fires: Vec<(Schedule, Job)>) -> Vec<(Schedule, Job)> {
        let pairs: Vec<(&Schedule, &Job)> = fires.iter().map(|(s, j)| (s, j)).collect();
        let verdicts = match self.engine.reread_handed_off(env, &pairs).await {
            Ok(verdicts) => verdicts,
            Err(err) => {
                // Handed off, and a change that decides (status, timing) would have withdrawn
                // it: what changed is the payload or target, or nothing that matters.
                tracing::warn!(env_id = %env, fires = fires.len(), error = %err, "cannot read changed schedules again; calling them as claimed");
                return fires;
            }
        };
        let mut ready = Vec::with_capacity(fires.len());
        let mut withdrawn = Vec::new();
        for ((_, job), verdict) in fires.into_iter().zip(verdicts) {
            match verdict {
                Recheck::Fire(schedule) => ready.push((*schedule, job)),
                Recheck::Withdrawn => {
                    withdrawn.push(env);
                    self.inflight_forget(job.id);
                }
            }
        }
        self.account(|s| s.skipped += withdrawn.len() as u64);
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
        let mut launched = Vec::new();
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
                launched.push(schedule.env_id);
                self.fire(schedule, job, slot);
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
