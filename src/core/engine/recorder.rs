//! The recorder: the one task that writes the outcomes of finished attempts, in tenant
//! transactions per environment with their events, while calls and claims go on, and reports
//! back to the producer what is durable. It holds what waits to be recorded (per environment,
//! oldest first), begins a record once the oldest has waited [`RECORD_GATHER`] (several of one
//! environment at once, each at most [`RECORD_CHUNK`] outcomes), gives way to calls briefly
//! while claimed attempts wait for a slot, and keeps an outcome whose record failed until it
//! lands.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::outcome::Attempt;
use super::{Engine, Outcome};
use crate::core::model::*;

/// The recording side: takes finished attempts from the producer, records them in batches and
/// reports back which outcomes are durable.
pub(super) struct Recorder<'e> {
    pub engine: &'e Engine,
    pub done: mpsc::UnboundedReceiver<Attempt>,
    pub recorded: mpsc::UnboundedSender<Vec<(JobId, Outcome)>>,
    /// True while claimed attempts wait for a slot: records give way to their calls (see
    /// [`Recorder::gives_way`]).
    pub pressing: watch::Receiver<bool>,
}

/// How often a recorder giving way to calls looks again.
const GIVE_WAY_POLL: Duration = Duration::from_millis(10);

/// The longest a recorder gives way to calls in a row.
const GIVE_WAY_MAX: Duration = Duration::from_secs(2);

/// A recorder never gives way while an outcome has waited this long: an answered call's outcome
/// is durable within a quarter of a second even in a burst (a crash loses only what was
/// answered last).
const GIVE_WAY_AGE: Duration = Duration::from_millis(80);

/// An environment's record begins once its oldest waiting outcome has waited this long (or a
/// chunk is full): under a steady stream of outcomes, one transaction records what this time
/// brought, not one or two outcomes each.
const RECORD_GATHER: Duration = Duration::from_millis(40);

/// At most this many outcomes in one record transaction.
const RECORD_CHUNK: usize = 500;

/// At most this many records of one environment at once (their outcomes are of different
/// schedules, so they do not wait on each other's row locks).
const RECORDS_PER_ENV: usize = 4;

/// How soon a record that failed (the database is unreachable, say) is tried again.
const RECORD_RETRY: Duration = Duration::from_millis(500);

/// One environment's outcomes waiting to be recorded.
#[derive(Default)]
struct Queue {
    /// Oldest first, each with when it reached the recorder.
    waiting: VecDeque<(Instant, Attempt)>,
    recording: usize,
    /// After a failed record: not before this.
    not_before: Option<Instant>,
}

impl Queue {
    /// When its next record may begin (`None`: nothing to record, or no room).
    fn due(&self) -> Option<Instant> {
        let (oldest, _) = self.waiting.front()?;
        if self.recording >= RECORDS_PER_ENV {
            return None;
        }
        let gathered = if self.waiting.len() >= RECORD_CHUNK {
            *oldest
        } else {
            *oldest + RECORD_GATHER
        };
        Some(self.not_before.map_or(gathered, |at| at.max(gathered)))
    }
}

impl Recorder<'_> {
    /// Records finished attempts as they come, until every sender is gone. Each environment records on
    /// its own (a row lock held in one tenant never holds up another's records) while receiving
    /// goes on. An outcome whose record failed is kept (its job stays among the in-flight ones
    /// whose leases are renewed) and tried again for as long as this process lives, however long
    /// the database is away: giving up would let recovery call an answered attempt again.
    pub(super) async fn run(mut self) {
        let engine = self.engine;
        let mut ready = Vec::new();
        let mut queues: BTreeMap<EnvId, Queue> = BTreeMap::new();
        let mut recording = FuturesUnordered::new();
        let mut open = true;
        // Outcomes in the records being written.
        let mut in_record = 0usize;
        let mut giving_way_since: Option<Instant> = None;
        loop {
            let now = Instant::now();
            let held: usize = queues.values().map(|q| q.waiting.len()).sum::<usize>() + in_record;
            let oldest = queues
                .values()
                .filter_map(|q| q.waiting.front().map(|(at, _)| *at))
                .min();
            let give_way = self.gives_way(held, oldest, &mut giving_way_since, now);
            for (env, queue) in queues.iter_mut().filter(|_| !give_way) {
                while queue.due().is_some_and(|at| at <= now) {
                    let take = queue.waiting.len().min(RECORD_CHUNK);
                    let attempts: Vec<Attempt> =
                        queue.waiting.drain(..take).map(|(_, a)| a).collect();
                    queue.recording += 1;
                    in_record += attempts.len();
                    let env = *env;
                    recording.push(async move {
                        let count = attempts.len();
                        let answered: Vec<_> = attempts.iter().filter_map(|a| a.ended_at).collect();
                        let recorded = engine.record(env, attempts).await;
                        if recorded.is_ok() {
                            engine.observe_durable(&answered);
                        }
                        (env, count, recorded)
                    });
                }
            }
            queues.retain(|_, q| {
                !q.waiting.is_empty() || q.recording > 0 || q.not_before.is_some_and(|at| at > now)
            });
            if !open && recording.is_empty() && queues.values().all(|q| q.waiting.is_empty()) {
                return;
            }
            // Giving way, the poll below looks again (a time already past would spin here).
            let next = queues
                .values()
                .filter(|_| !give_way)
                .filter_map(Queue::due)
                .min();
            tokio::select! {
                // Giving way: look again soon.
                () = tokio::time::sleep(GIVE_WAY_POLL), if give_way => {}
                n = self.done.recv_many(&mut ready, 1024), if open => {
                    open = n > 0;
                    let now = Instant::now();
                    for attempt in ready.drain(..) {
                        queues.entry(attempt.schedule.env_id).or_default().waiting.push_back((now, attempt));
                    }
                }
                Some((env, count, result)) = recording.next(), if !recording.is_empty() => {
                    in_record -= count;
                    let queue = queues.entry(env).or_default();
                    queue.recording -= 1;
                    match result {
                        Ok(outcomes) => {
                            queue.not_before = None;
                            // The producer may be gone once it has nothing left to wait for.
                            let _ = self.recorded.send(outcomes);
                        }
                        Err((err, attempts)) => {
                            tracing::warn!(env_id = %env, attempts = attempts.len(), error = %err, "recording job outcomes failed; trying again");
                            let now = Instant::now();
                            queue.not_before = Some(now + RECORD_RETRY);
                            for attempt in attempts.into_iter().rev() {
                                queue.waiting.push_front((now, attempt));
                            }
                        }
                    }
                }
                () = sleep_until(next), if next.is_some() => {}
            }
        }
    }

    /// Whether to hold new records back for now: while claimed attempts wait for a slot (a
    /// burst), their calls get the machine first. Bounded: never once an outcome has waited
    /// [`GIVE_WAY_AGE`], never once `held` outcomes fill three-quarters of the record backlog,
    /// and never for longer than [`GIVE_WAY_MAX`] in a row.
    fn gives_way(
        &self,
        held: usize,
        oldest: Option<Instant>,
        since: &mut Option<Instant>,
        now: Instant,
    ) -> bool {
        let backlog = super::slots::backlog_cap(&self.engine.config);
        let pressed = *self.pressing.borrow()
            && held < backlog / 4 * 3
            && oldest.is_none_or(|at| now.duration_since(at) < GIVE_WAY_AGE);
        if !pressed {
            *since = None;
            return false;
        }
        let started = *since.get_or_insert(now);
        now.duration_since(started) < GIVE_WAY_MAX
    }
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}
