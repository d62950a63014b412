//! The recorder: the one task that writes the outcomes of finished attempts, in one tenant
//! transaction per environment with their events, while calls and claims go on. It holds what
//! waits to be recorded (per environment, with when each may be tried next), gives way to calls
//! while fires past their instant wait for a slot, and keeps an outcome whose record failed
//! until it lands.
//!
//! What a service answered is written first, ahead of its record, in one small statement per
//! batch that never gives way: an instance killed while its records wait for a burst leaves
//! the answers for whichever instance recovers the attempts, which records them as they were
//! (not as abandoned calls to be made again). The record deletes them.

use std::collections::{BTreeMap, HashMap, HashSet};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::{mpsc, watch};

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
const GIVE_WAY_POLL: std::time::Duration = std::time::Duration::from_millis(10);

/// The longest a recorder gives way to calls in a row.
const GIVE_WAY_MAX: std::time::Duration = std::time::Duration::from_secs(2);

/// An environment's records begin at most this often: under a steady stream of outcomes, one
/// transaction records what a step brought, not one or two outcomes each.
const RECORD_STEP: std::time::Duration = std::time::Duration::from_millis(100);

/// How soon a record that failed (the database is unreachable, say) is tried again.
const RECORD_RETRY: std::time::Duration = std::time::Duration::from_millis(500);

impl Recorder<'_> {
    /// Records finished attempts as they come, whatever is ready in one transaction per environment
    /// (at most one every [`RECORD_STEP`]), until every sender is gone. Each environment records on
    /// its own (a row lock held in one tenant never holds up another's records) while receiving
    /// goes on. An outcome whose record failed is kept (its job stays among the in-flight ones
    /// whose leases are renewed) and tried again for as long as this process lives, however long
    /// the database is away: giving up would let recovery call an answered attempt again.
    pub(super) async fn run(mut self) {
        let engine = self.engine;
        let mut ready = Vec::new();
        // Attempts waiting to be recorded, per environment, and when each may be tried next.
        let mut waiting: BTreeMap<EnvId, Vec<Attempt>> = BTreeMap::new();
        let mut not_before: HashMap<EnvId, tokio::time::Instant> = HashMap::new();
        let mut recording = FuturesUnordered::new();
        let mut busy: HashSet<EnvId> = HashSet::new();
        let mut open = true;
        // Attempts in the records being written.
        let mut in_record = 0usize;
        let mut giving_way_since: Option<tokio::time::Instant> = None;
        // Answered attempts whose answers wait to be written ahead of their records, the
        // one write in flight, and how many attempts both hold.
        let mut ahead: Vec<Attempt> = Vec::new();
        let mut writing = FuturesUnordered::new();
        let mut in_ahead = 0usize;
        loop {
            if writing.is_empty() && !ahead.is_empty() {
                // What answered while the last write ran goes in the next one.
                writing.push(engine.write_ahead(std::mem::take(&mut ahead)));
            }
            let now = tokio::time::Instant::now();
            let held: usize = waiting.values().map(Vec::len).sum::<usize>() + in_record + in_ahead;
            let give_way = self.gives_way(held, &mut giving_way_since, now);
            let startable: Vec<EnvId> = waiting
                .keys()
                .filter(|_| !give_way)
                .filter(|env| !busy.contains(*env))
                .filter(|env| not_before.get(*env).is_none_or(|at| *at <= now))
                .copied()
                .collect();
            for env in startable {
                let attempts = waiting.remove(&env).unwrap_or_default();
                in_record += attempts.len();
                busy.insert(env);
                recording.push(async move {
                    let started = tokio::time::Instant::now();
                    let count = attempts.len();
                    // Answers written ahead were durable before their records.
                    let answered: Vec<_> = attempts
                        .iter()
                        .filter(|a| !a.written_ahead)
                        .filter_map(|a| a.ended_at)
                        .collect();
                    let recorded = engine.record(env, attempts).await;
                    if recorded.is_ok() {
                        engine.observe_durable(&answered);
                    }
                    (env, started, count, recorded)
                });
            }
            if !open && recording.is_empty() && waiting.is_empty() && in_ahead == 0 {
                return;
            }
            // Giving way, the poll below looks again (a time already past would spin here).
            let retry_at = waiting
                .keys()
                .filter(|_| !give_way)
                .filter(|env| !busy.contains(*env))
                .filter_map(|env| not_before.get(env).copied())
                .min();
            tokio::select! {
                // Giving way: look again soon.
                () = tokio::time::sleep(GIVE_WAY_POLL), if give_way => {}
                n = self.done.recv_many(&mut ready, 1024), if open => {
                    open = n > 0;
                    for attempt in ready.drain(..) {
                        if attempt.was_answered() && !attempt.written_ahead {
                            in_ahead += 1;
                            ahead.push(attempt);
                        } else {
                            waiting.entry(attempt.schedule.env_id).or_default().push(attempt);
                        }
                    }
                }
                Some(written) = writing.next(), if !writing.is_empty() => {
                    in_ahead -= written.len();
                    for attempt in written {
                        waiting.entry(attempt.schedule.env_id).or_default().push(attempt);
                    }
                }
                Some((env, started, count, result)) = recording.next(), if !recording.is_empty() => {
                    busy.remove(&env);
                    in_record -= count;
                    let outcomes = match result {
                        Ok(outcomes) => {
                            // What finished meanwhile is recorded together, a step after this
                            // record began.
                            not_before.insert(env, started + RECORD_STEP);
                            outcomes
                        }
                        Err((err, attempts)) => {
                            tracing::warn!(env_id = %env, attempts = attempts.len(), error = %err, "recording job outcomes failed; trying again");
                            not_before.insert(env, tokio::time::Instant::now() + RECORD_RETRY);
                            let queued = waiting.entry(env).or_default();
                            queued.splice(0..0, attempts);
                            continue;
                        }
                    };
                    // The producer may be gone once it has nothing left to wait for.
                    let _ = self.recorded.send(outcomes);
                }
                () = sleep_until(retry_at), if retry_at.is_some() => {}
            }
        }
    }

    /// Whether to hold new records back for now: while claimed attempts wait for a slot (a
    /// burst), their calls get the machine first. Bounded: never once `held` outcomes fill
    /// three-quarters of the record backlog, and never for longer than [`GIVE_WAY_MAX`] in a
    /// row.
    fn gives_way(
        &self,
        held: usize,
        since: &mut Option<tokio::time::Instant>,
        now: tokio::time::Instant,
    ) -> bool {
        let backlog = super::slots::backlog_cap(&self.engine.config);
        let pressed = *self.pressing.borrow() && held < backlog / 4 * 3;
        if !pressed {
            *since = None;
            return false;
        }
        let started = *since.get_or_insert(now);
        now.duration_since(started) < GIVE_WAY_MAX
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}
