//! The recorder: the one task that writes the outcomes of finished attempts, in one tenant
//! transaction per environment with their events, while calls and claims go on. It holds what
//! waits to be recorded (per environment, with when each may be tried next), gives way to calls
//! while fires past their instant wait for a slot, and keeps an outcome whose record failed
//! until it lands.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::{Semaphore, mpsc};

use super::ahead::Held;
use super::outcome::Attempt;
use super::pipeline::InFlight;
use super::{Engine, Outcome, TickSummary};
use crate::core::model::*;

/// The recording side: drains finished attempts and records them in batches.
pub(super) struct Recorder<'e> {
    pub engine: &'e Engine,
    pub done: mpsc::UnboundedReceiver<Attempt>,
    pub inflight: Arc<InFlight>,
    pub summary: Arc<Mutex<TickSummary>>,
    /// The pipeline's held fires and record backlog: records give way to calls while fires
    /// past their instant wait for a slot (see [`Recorder::gives_way`]).
    pub held: Arc<Held>,
    pub records: Arc<Semaphore>,
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
        let mut giving_way_since: Option<tokio::time::Instant> = None;
        loop {
            let now = tokio::time::Instant::now();
            let give_way = self.gives_way(&mut giving_way_since, now);
            let startable: Vec<EnvId> = waiting
                .keys()
                .filter(|_| !give_way)
                .filter(|env| !busy.contains(*env))
                .filter(|env| not_before.get(*env).is_none_or(|at| *at <= now))
                .copied()
                .collect();
            for env in startable {
                let attempts = waiting.remove(&env).unwrap_or_default();
                busy.insert(env);
                recording.push(async move {
                    let started = tokio::time::Instant::now();
                    let answered: Vec<_> = attempts.iter().filter_map(|a| a.ended_at).collect();
                    let recorded = engine.record(env, attempts).await;
                    if recorded.is_ok() {
                        engine.observe_durable(&answered);
                    }
                    (env, started, recorded)
                });
            }
            if !open && recording.is_empty() && waiting.is_empty() {
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
                        waiting.entry(attempt.schedule.env_id).or_default().push(attempt);
                    }
                }
                Some((env, started, result)) = recording.next(), if !recording.is_empty() => {
                    busy.remove(&env);
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
                    self.done_with(&outcomes);
                }
                () = sleep_until(retry_at), if retry_at.is_some() => {}
            }
        }
    }

    /// Whether to hold new records back for now: while fires past their instant wait for a
    /// slot (a burst), their calls get the machine first. Bounded: never once the backlog is
    /// three-quarters full, and never for longer than [`GIVE_WAY_MAX`] in a row.
    fn gives_way(
        &self,
        since: &mut Option<tokio::time::Instant>,
        now: tokio::time::Instant,
    ) -> bool {
        let backlog = self.engine.record_backlog();
        let used = backlog.saturating_sub(self.records.available_permits());
        let pressed = self.held.pressing() && used < backlog / 4 * 3;
        if !pressed {
            *since = None;
            return false;
        }
        let started = *since.get_or_insert(now);
        now.duration_since(started) < GIVE_WAY_MAX
    }

    fn done_with(&self, outcomes: &[(JobId, Outcome)]) {
        for (id, _) in outcomes {
            self.inflight.recorded(*id);
        }
        let mut summary = self.summary.lock().unwrap_or_else(|p| p.into_inner());
        for (_, outcome) in outcomes {
            summary.add(outcome);
        }
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}
