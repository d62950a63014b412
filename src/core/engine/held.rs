//! The fires the producer holds in memory: claimed ahead of their instant, or claimed and
//! waiting for a slot. Plain data owned by the producer's task (no locks); every transition is
//! a method here, called by the producer alone.
//!
//! ```text
//!  claim ahead ─► waiting ──hand-off write──► handed off ──instant──► ready ──slot──► called
//!                  ▲   │                                               ▲
//!    write failed ─┘   └─► withdrawn (a change took it first: skipped) │
//!                          claimed at the instant, or a retry ──────────┘
//! ```
//!
//! A fire in `waiting` is `scheduled` in the store and this instance's alone to hand off
//! (the drain never releases it); from the hand-off on it is `running` under a call lease the
//! producer renews.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::burst::Bursts;
use crate::core::dispatch::PreparedCall;
use crate::core::model::*;

/// At most this many fires are held at once (claimed ahead, or past their instant and waiting
/// for a slot); claiming ahead waits for room beyond it.
pub const HELD_MAX: usize = 50_000;

/// At most this many of them belong to one environment, so one tenant's flood leaves room for
/// the others' fires (beyond it, its occurrences are claimed at their instant, into slots).
pub const HELD_PER_ENV: usize = 20_000;

/// How long before its instant a fire claimed ahead is handed off for its call at the latest:
/// the hand-off of a burst (thousands of rows) is written before it, not in it. A change later
/// than this does not reach the fire. Before a large burst the hand-off begins earlier, as long
/// before as handing off what is held takes (`wake::hand_off_before`, at most
/// [`HAND_OFF_MAX`]).
pub const HAND_OFF_BEFORE: Duration = Duration::from_secs(1);

/// The earliest a fire is handed off before its instant, however large the burst.
pub const HAND_OFF_MAX: Duration = Duration::from_secs(10);

/// At most this many fires are handed off in one write, in instant order: the earliest of a
/// large burst are called while the rest are handed off.
pub(super) const HAND_OFF_CHUNK: usize = 2_000;

/// A hand-off also takes the fires due within this much after those it must take, so a steady
/// stream of fires is handed off a few times a second in one write each, not one write per
/// fire: a fire is handed off between [`HAND_OFF_BEFORE`] and this much more before its
/// instant (or, in a burst larger than a chunk, as soon as the chunks before it are).
pub const HAND_OFF_STEP: Duration = Duration::from_millis(250);

/// How a ready fire came to be claimed: a fire is counted and its lateness observed when it is
/// called; a retry (or a triggered or republished run) is not a fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Start {
    Fire,
    Retry,
}

/// A claimed attempt waiting for a slot.
pub(super) struct Ready {
    pub schedule: Schedule,
    pub job: Job,
    pub start: Start,
    /// Counted among the held fires (claimed ahead) until it is called.
    pub held: bool,
    /// Its call, made ready at its hand-off.
    pub prepared: Option<PreparedCall>,
}

/// A fire handed off, with its call made ready when the dispatcher could.
pub(super) type HandedOffFire = (Schedule, Job, Option<PreparedCall>);

/// The fires held by the producer.
pub(super) struct Held {
    /// By instant (and arrival, to keep keys unique): fires to hand off before their instant.
    waiting: BTreeMap<(DateTime<Utc>, u64), (Schedule, Job)>,
    /// Fires handed off, waiting for their instant.
    handed_off: BTreeMap<(DateTime<Utc>, u64), HandedOffFire>,
    arrivals: u64,
    /// Waiting for a slot: per environment and origin, taken round-robin.
    ready: BTreeMap<String, VecDeque<Ready>>,
    /// The jobs claimed ahead whose hand-off is not confirmed yet (in `waiting`, or in a
    /// hand-off write): still `scheduled` in the store, and this instance's.
    scheduled: HashSet<JobId>,
    /// Fires claimed ahead and not called or withdrawn yet, in all and per environment.
    count: usize,
    per_env: HashMap<EnvId, usize>,
    /// How long before its instant a fire is handed off now ([`HAND_OFF_BEFORE`] unless a
    /// large burst is held).
    hand_off_before: Duration,
    /// The fires handed off per instant, whose calls' moment a hand-off keeps out of.
    bursts: Bursts,
}

impl Default for Held {
    fn default() -> Self {
        Self {
            waiting: BTreeMap::new(),
            handed_off: BTreeMap::new(),
            arrivals: 0,
            ready: BTreeMap::new(),
            scheduled: HashSet::new(),
            count: 0,
            per_env: HashMap::new(),
            hand_off_before: HAND_OFF_BEFORE,
            bursts: Bursts::default(),
        }
    }
}

impl Held {
    fn key(&mut self, at: DateTime<Utc>) -> (DateTime<Utc>, u64) {
        self.arrivals += 1;
        (at, self.arrivals)
    }

    /// Room for more fires claimed ahead.
    pub fn room(&self) -> usize {
        HELD_MAX.saturating_sub(self.count)
    }

    /// Fires held now per environment.
    pub fn per_env(&self) -> &HashMap<EnvId, usize> {
        &self.per_env
    }

    /// Fires held now.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Holds a fire claimed ahead until its hand-off.
    pub fn hold(&mut self, schedule: Schedule, job: Job) {
        let key = self.key(job.scheduled_for);
        self.scheduled.insert(job.id);
        self.count += 1;
        *self.per_env.entry(schedule.env_id).or_default() += 1;
        self.waiting.insert(key, (schedule, job));
    }

    /// The jobs this instance claimed ahead and has not handed off yet.
    pub fn scheduled(&self) -> &HashSet<JobId> {
        &self.scheduled
    }

    /// Hands fires off `before` their instants from now on (within [`HAND_OFF_BEFORE`] and
    /// [`HAND_OFF_MAX`]).
    pub fn set_hand_off_before(&mut self, before: Duration) {
        self.hand_off_before = before.clamp(HAND_OFF_BEFORE, HAND_OFF_MAX);
    }

    /// When the next hand-off is due: the earliest fire still to hand off, a hand-off lead
    /// before its instant; or, when that falls in the moment a burst's calls go out, up to
    /// [`HAND_OFF_STEP`] earlier (`burst.rs`), so its write is not beside them.
    pub fn next_hand_off(&self) -> Option<DateTime<Utc>> {
        let before = chrono::Duration::from_std(self.hand_off_before).unwrap_or_default();
        let step = chrono::Duration::from_std(HAND_OFF_STEP).unwrap_or_default();
        let due = self.waiting.keys().next().map(|(at, _)| *at - before)?;
        Some(self.bursts.hand_off_at(due, due - step))
    }

    /// The fires handed off per instant.
    pub fn bursts(&self) -> &Bursts {
        &self.bursts
    }

    pub fn next_instant(&self) -> Option<DateTime<Utc>> {
        self.handed_off.keys().next().map(|(at, _)| *at)
    }

    /// Takes the fires to hand off now: when the earliest is at most the hand-off lead away,
    /// those at most [`HAND_OFF_STEP`] more away too, earliest first, at most
    /// [`HAND_OFF_CHUNK`]. They stay counted (and `scheduled`) until the write is answered.
    pub fn take_to_hand_off(&mut self, now: DateTime<Utc>) -> Vec<(Schedule, Job)> {
        let before = chrono::Duration::from_std(self.hand_off_before).unwrap_or_default();
        let step = chrono::Duration::from_std(HAND_OFF_STEP).unwrap_or_default();
        if self.next_hand_off().is_none_or(|at| at > now) {
            return Vec::new();
        }
        let until = now + before + step;
        let mut taken = Vec::new();
        while taken.len() < HAND_OFF_CHUNK {
            match self.waiting.first_entry() {
                Some(entry) if entry.key().0 <= until => taken.push(entry.remove()),
                _ => break,
            }
        }
        taken
    }

    /// The hand-off write of `jobs` was answered: each is running now, or no longer ours.
    pub fn hand_off_answered(&mut self, jobs: impl IntoIterator<Item = JobId>) {
        for job in jobs {
            self.scheduled.remove(&job);
        }
    }

    /// Puts fires whose hand-off write failed back, to hand off again.
    pub fn put_back(&mut self, fires: Vec<(Schedule, Job)>) {
        for fire in fires {
            let key = self.key(fire.1.scheduled_for);
            self.waiting.insert(key, fire);
        }
    }

    /// Fires handed off: they wait for their instant.
    pub fn handed_off(&mut self, fires: Vec<HandedOffFire>) {
        for fire in fires {
            let key = self.key(fire.1.scheduled_for);
            self.bursts.add(fire.1.scheduled_for);
            self.handed_off.insert(key, fire);
        }
    }

    /// Moves the handed-off fires whose instant has come to the ready queue; returns their
    /// jobs.
    pub fn instant_came(&mut self, now: DateTime<Utc>) -> Vec<JobId> {
        let later = self.handed_off.split_off(&(now, u64::MAX));
        let due = std::mem::replace(&mut self.handed_off, later);
        self.bursts.prune(now);
        let mut came = Vec::with_capacity(due.len());
        for (schedule, job, prepared) in due.into_values() {
            came.push(job.id);
            self.queue(Ready {
                schedule,
                job,
                start: Start::Fire,
                held: true,
                prepared,
            });
        }
        came
    }

    /// Queues a claimed attempt for a slot.
    pub fn queue(&mut self, ready: Ready) {
        let key = Self::queue_key(&ready);
        self.ready.entry(key).or_default().push_back(ready);
    }

    /// Queues an attempt that had its turn already (its call waited for a renewal) first in
    /// its queue, so it does not wait behind everything queued meanwhile.
    pub fn queue_first(&mut self, ready: Ready) {
        let key = Self::queue_key(&ready);
        self.ready.entry(key).or_default().push_front(ready);
    }

    fn queue_key(ready: &Ready) -> String {
        super::slots::origin_of(&ready.schedule)
            .unwrap_or_else(|| ready.schedule.env_id.to_string())
    }

    /// Attempts that will be called before a fire handed off now: those handed off and
    /// waiting for their instants (earlier or the same, as hand-offs go in instant order) and
    /// those waiting for a slot.
    pub fn queued(&self) -> usize {
        self.handed_off.len() + self.waiting_for_slot()
    }

    /// True while claimed attempts wait for a slot.
    pub fn pressing(&self) -> bool {
        !self.ready.is_empty()
    }

    /// How many claimed attempts wait for a slot.
    pub fn waiting_for_slot(&self) -> usize {
        self.ready.values().map(VecDeque::len).sum()
    }

    /// Takes ready attempts, one per environment and origin in turn, as long as `reserve`
    /// finds each a slot (it returns false when the attempt's caps are full; that queue is
    /// passed over for now). Returns the attempts with what `reserve` gave.
    pub fn take_ready<S>(
        &mut self,
        mut reserve: impl FnMut(&Schedule) -> Option<S>,
    ) -> Vec<(Ready, S)> {
        let mut taken = Vec::new();
        let mut blocked: HashSet<String> = HashSet::new();
        loop {
            let keys: Vec<String> = self
                .ready
                .keys()
                .filter(|k| !blocked.contains(*k))
                .cloned()
                .collect();
            if keys.is_empty() {
                break;
            }
            let mut progress = false;
            for key in keys {
                let Some(queue) = self.ready.get_mut(&key) else {
                    continue;
                };
                let Some(front) = queue.front() else {
                    self.ready.remove(&key);
                    continue;
                };
                let Some(slot) = reserve(&front.schedule) else {
                    blocked.insert(key);
                    continue;
                };
                let ready = queue.pop_front().expect("a front was just seen");
                if queue.is_empty() {
                    self.ready.remove(&key);
                }
                if ready.held {
                    self.forget(ready.schedule.env_id);
                }
                taken.push((ready, slot));
                progress = true;
            }
            if !progress {
                break;
            }
        }
        taken
    }

    /// Lets go of the fires still to hand off whose instant is after `cutoff` (a stopping
    /// instance): they stay `scheduled` in the store, and whichever instance runs releases each
    /// to run once its claim lease lapses, 2 s past its instant. Returns their jobs.
    pub fn leave_after(&mut self, cutoff: DateTime<Utc>) -> Vec<JobId> {
        let later = self.waiting.split_off(&(cutoff, u64::MAX));
        let mut left = Vec::with_capacity(later.len());
        for (schedule, job) in later.into_values() {
            self.scheduled.remove(&job.id);
            self.forget(schedule.env_id);
            left.push(job.id);
        }
        left
    }

    /// A fire claimed ahead left without a call (withdrawn).
    pub fn forget(&mut self, env: EnvId) {
        self.count = self.count.saturating_sub(1);
        if let Some(n) = self.per_env.get_mut(&env) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_env.remove(&env);
            }
        }
    }

    /// True when nothing at all is held or queued.
    pub fn is_empty(&self) -> bool {
        self.count == 0 && self.ready.is_empty()
    }
}

#[cfg(test)]
pub(super) mod tests;
