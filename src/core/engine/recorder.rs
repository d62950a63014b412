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

use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::{mpsc, watch};

use super::outcome::Attempt;
use super::parts::{Outcome, Parts};
use crate::core::clock::{Clock, Deadline};
use crate::core::model::*;

/// What the recorder tells the producer.
pub(super) enum Durable {
    /// These attempts' answers were written ahead of their records: an instance that takes one
    /// over records its answer, so its lease needs no renewal any more.
    Answers(Vec<JobId>),
    /// These outcomes are recorded.
    Outcomes(Vec<(JobId, Outcome)>),
}

/// The recording side: takes finished attempts from the producer, records them in batches and
/// reports back which answers and outcomes are durable.
pub(super) struct Recorder<'e> {
    pub parts: &'e Parts,
    pub done: mpsc::UnboundedReceiver<Attempt>,
    pub recorded: mpsc::UnboundedSender<Durable>,
    /// How many claimed attempts wait for a slot: records give way to their calls (see
    /// [`Recorder::gives_way`]).
    pub pressing: watch::Receiver<usize>,
    /// Outcomes nothing waits for are gathered ([`RECORD_GATHER`]): `serve`. `tick --once`
    /// ends once every outcome is recorded, so it records each within a step.
    pub gathers: bool,
}

/// How often a recorder giving way to calls looks again.
const GIVE_WAY_POLL: std::time::Duration = std::time::Duration::from_millis(10);

/// The longest a recorder gives way to calls in a row: long enough for a large burst's calls
/// (50,000 take 3-4.5 s on two cores) to go out before its records take the machine; its
/// answers are written ahead meanwhile, so nothing waits for durability.
const GIVE_WAY_MAX: std::time::Duration = std::time::Duration::from_secs(5);

/// An environment's records begin at most this often while one of its waiting outcomes is
/// needed soon ([`needed_soon`]): a retry or a dead letter follows it, its durability rests
/// on the record, or its schedule's next occurrence (or a buffered one) waits for its job to
/// end. Under a steady stream of outcomes one transaction records what a step brought, not one
/// or two outcomes each.
const RECORD_STEP: std::time::Duration = std::time::Duration::from_secs(1);

/// An environment whose waiting outcomes nothing waits for records at most this often: a
/// jittered minute's successes are gathered into a transaction every two seconds, not every
/// second (each transaction is seven statements, whatever it holds). Their answers are
/// durable before (written ahead); their events and the jobs' state in the API follow the
/// call by at most this and a record's time. It stays under the lease a fire's hand-off writes
/// (four seconds from a hand-off a second or more before the call), so a fast call's attempt
/// is recorded before its lease could lapse and another instance take it over.
const RECORD_GATHER: std::time::Duration = std::time::Duration::from_secs(2);

/// A schedule whose next occurrence is at most this far away has its outcomes recorded within
/// [`RECORD_STEP`]: under `skip` (the default) an open job would skip that occurrence.
const NEXT_OCCURRENCE_NEAR: chrono::TimeDelta = chrono::TimeDelta::seconds(5);

/// Answers are written ahead at most this often: calls that end close together share one
/// write, and an answer is durable within this and one write's time of its arrival (the
/// target is 250 ms).
const WRITE_AHEAD_STEP: std::time::Duration = std::time::Duration::from_millis(200);

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
        let engine = self.parts;
        let mut ready = Vec::new();
        let mut queue = Queue {
            gathers: self.gathers,
            ..Queue::default()
        };
        let mut recording = FuturesUnordered::new();
        let mut open = true;
        let mut giving_way_since: Option<tokio::time::Instant> = None;
        let mut writing = FuturesUnordered::new();
        let clock = &*engine.clock;
        let mut next_write: Option<Deadline> = None;
        loop {
            let write_due = next_write.is_none_or(|d| d.passed(clock));
            if writing.is_empty() && !queue.ahead.is_empty() && write_due {
                // What answered while the last write ran, or since its step began, goes in
                // the next one.
                next_write = Some(Deadline::after(clock, WRITE_AHEAD_STEP));
                writing.push(engine.write_ahead(std::mem::take(&mut queue.ahead)));
            }
            let now = tokio::time::Instant::now();
            let give_way = self.gives_way(queue.held(), &mut giving_way_since, now);
            for env in queue.startable(clock, give_way) {
                let attempts = queue.start(env);
                recording.push(async move {
                    // What finishes meanwhile is recorded together, a step (or, when nothing
                    // waits for it, a gathering) after this began.
                    let next_step = Steps::after(clock);
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
                    (env, next_step, count, recorded)
                });
            }
            if !open && recording.is_empty() && queue.is_drained() {
                return;
            }
            // Giving way, the poll below looks again (a time already past would spin here).
            let write_at = next_write.filter(|_| writing.is_empty() && !queue.ahead.is_empty());
            let retry_at = Deadline::earliest(queue.retry_at(give_way).into_iter().chain(write_at));
            tokio::select! {
                // Giving way: look again soon.
                () = tokio::time::sleep(GIVE_WAY_POLL), if give_way => {}
                n = self.done.recv_many(&mut ready, 1024), if open => {
                    open = n > 0;
                    let now = clock.now();
                    for attempt in ready.drain(..) {
                        queue.received(attempt, now);
                    }
                }
                Some(written) = writing.next(), if !writing.is_empty() => {
                    let durable: Vec<JobId> = written
                        .iter()
                        .filter(|a| a.written_ahead)
                        .map(|a| a.job.id)
                        .collect();
                    if !durable.is_empty() {
                        let _ = self.recorded.send(Durable::Answers(durable));
                    }
                    queue.written_ahead(written, clock.now());
                }
                Some((env, next_step, count, result)) = recording.next(), if !recording.is_empty() => {
                    if let Some(outcomes) = queue.record_done(clock, env, next_step, count, result) {
                        // The producer may be gone once it has nothing left to wait for.
                        let _ = self.recorded.send(Durable::Outcomes(outcomes));
                    }
                }
                () = wait_for(clock, retry_at), if retry_at.is_some() => {}
            }
        }
    }

    /// Whether to hold new records back for now: while claimed attempts wait for a slot (a
    /// burst), their calls get the machine first, as long as [`may_give_way`] and never for
    /// longer than [`GIVE_WAY_MAX`] in a row.
    fn gives_way(
        &self,
        held: usize,
        since: &mut Option<tokio::time::Instant>,
        now: tokio::time::Instant,
    ) -> bool {
        let config = &self.parts.config;
        let waiting = *self.pressing.borrow();
        let backlog = super::slots::backlog_cap(config);
        if !may_give_way(waiting, held, config.concurrency.max(1), backlog) {
            *since = None;
            return false;
        }
        let started = *since.get_or_insert(now);
        now.duration_since(started) < GIVE_WAY_MAX
    }
}

/// Whether records may wait for the calls of the `waiting` attempts queued for a slot, with
/// `held` outcomes waiting to be recorded already, at most `limit` calls in flight and room
/// for `backlog` outcomes. While the rest of the burst (those waiting and those in flight)
/// fits in the backlog beside what is held, its records all wait for its calls: starting them
/// sooner takes the CPU its last calls need (a 50,000 burst's last thousand used to wait a
/// second for the records its first three-quarters started). A burst larger than the backlog
/// gives way only until held outcomes fill three-quarters of it, so that its records free
/// room while its last calls go on.
fn may_give_way(waiting: usize, held: usize, limit: usize, backlog: usize) -> bool {
    if waiting == 0 {
        return false;
    }
    let rest_fits = held.saturating_add(waiting).saturating_add(limit) <= backlog;
    rest_fits || held < backlog / 4 * 3
}

async fn wait_for(clock: &dyn Clock, deadline: Option<Deadline>) {
    if let Some(deadline) = deadline {
        deadline.wait(clock).await;
    }
}

/// A record's answer: the outcomes it made durable, or why it failed with the attempts to try
/// again.
type RecordResult = Result<Vec<(JobId, Outcome)>, (crate::core::store::StoreError, Vec<Attempt>)>;

/// What waits to be recorded: per environment, with when each may be tried next, which are
/// being written, and the answered attempts whose answers wait to be written ahead.
#[derive(Default)]
struct Queue {
    waiting: BTreeMap<EnvId, Vec<Attempt>>,
    /// When each environment's next record may begin, as [`Steps`].
    not_before: HashMap<EnvId, Steps>,
    /// Environments with a waiting outcome [`needed_soon`] (every one that waits, when the
    /// recorder does not gather).
    soon: HashSet<EnvId>,
    gathers: bool,
    busy: HashSet<EnvId>,
    /// Attempts in the records being written.
    in_record: usize,
    /// Answered attempts whose answers wait to be written ahead, or are being written.
    ahead: Vec<Attempt>,
    in_ahead: usize,
}

impl Queue {
    /// Outcomes held: waiting, being recorded, or being written ahead.
    fn held(&self) -> usize {
        self.waiting.values().map(Vec::len).sum::<usize>() + self.in_record + self.in_ahead
    }

    /// When an environment's record may begin: at once after none, else after its step (a
    /// retry's, or the gathering when nothing waiting is needed soon).
    fn begins_at(&self, env: &EnvId) -> Option<Deadline> {
        let steps = self.not_before.get(env)?;
        Some(if self.soon.contains(env) {
            steps.step
        } else {
            steps.gathered
        })
    }

    /// The environments whose records may begin now: not giving way, none of theirs in
    /// progress, their step or retry passed.
    fn startable(&self, clock: &dyn Clock, give_way: bool) -> Vec<EnvId> {
        if give_way {
            return Vec::new();
        }
        self.waiting
            .keys()
            .filter(|env| !self.busy.contains(*env))
            .filter(|env| self.begins_at(env).is_none_or(|d| d.passed(clock)))
            .copied()
            .collect()
    }

    /// Takes an environment's waiting attempts into a record.
    fn start(&mut self, env: EnvId) -> Vec<Attempt> {
        let attempts = self.waiting.remove(&env).unwrap_or_default();
        self.soon.remove(&env);
        self.in_record += attempts.len();
        self.busy.insert(env);
        attempts
    }

    /// When a waiting environment may be tried next (none while giving way: the poll looks).
    fn retry_at(&self, give_way: bool) -> Option<Deadline> {
        if give_way {
            return None;
        }
        Deadline::earliest(
            self.waiting
                .keys()
                .filter(|env| !self.busy.contains(*env))
                .filter_map(|env| self.begins_at(env)),
        )
    }

    /// A finished attempt: an answer not yet written ahead is written first.
    fn received(&mut self, attempt: Attempt, now: DateTime<Utc>) {
        if attempt.was_answered() && !attempt.written_ahead {
            self.in_ahead += 1;
            self.ahead.push(attempt);
        } else {
            self.wait(attempt, now);
        }
    }

    /// Answers written ahead: their attempts wait for their records.
    fn written_ahead(&mut self, written: Vec<Attempt>, now: DateTime<Utc>) {
        self.in_ahead -= written.len();
        for attempt in written {
            self.wait(attempt, now);
        }
    }

    fn wait(&mut self, attempt: Attempt, now: DateTime<Utc>) {
        let env = attempt.schedule.env_id;
        if !self.gathers || needed_soon(&attempt, now) {
            self.soon.insert(env);
        }
        self.waiting.entry(env).or_default().push(attempt);
    }

    /// A record ended: what it made durable, or, when it failed, its attempts wait again
    /// (first in line) for a retry.
    fn record_done(
        &mut self,
        clock: &dyn Clock,
        env: EnvId,
        next_step: Steps,
        count: usize,
        result: RecordResult,
    ) -> Option<Vec<(JobId, Outcome)>> {
        self.busy.remove(&env);
        self.in_record -= count;
        match result {
            Ok(outcomes) => {
                self.not_before.insert(env, next_step);
                Some(outcomes)
            }
            Err((err, attempts)) => {
                tracing::warn!(env_id = %env, attempts = attempts.len(), error = %err, "recording job outcomes failed; trying again");
                let retry = Deadline::after(clock, RECORD_RETRY);
                self.not_before.insert(
                    env,
                    Steps {
                        step: retry,
                        gathered: retry,
                    },
                );
                self.waiting.entry(env).or_default().splice(0..0, attempts);
                None
            }
        }
    }

    /// Nothing waits and nothing is being written ahead.
    fn is_drained(&self) -> bool {
        self.waiting.is_empty() && self.in_ahead == 0
    }
}

/// When an environment's next record may begin after one that began at some instant: a step
/// after it when an outcome waiting is [`needed_soon`], a gathering after it otherwise.
#[derive(Debug, Clone, Copy)]
struct Steps {
    step: Deadline,
    gathered: Deadline,
}

impl Steps {
    fn after(clock: &dyn Clock) -> Self {
        Self {
            step: Deadline::after(clock, RECORD_STEP),
            gathered: Deadline::after(clock, RECORD_GATHER),
        }
    }
}

/// Whether something waits for this outcome's record, so it is recorded within
/// [`RECORD_STEP`] rather than gathered for [`RECORD_GATHER`]: its answer is not durable
/// before it (not written ahead: a timeout, a refused connection); it failed (a retry or a dead
/// letter follows, decided by the record); its schedule buffers occurrences behind an open
/// job, or it is a backfilled run (the next one waits for it to end); or its schedule's next
/// occurrence is near (under `skip` the open job would skip it).
fn needed_soon(attempt: &Attempt, now: DateTime<Utc>) -> bool {
    use crate::core::policies::Overlap;
    if !attempt.written_ahead || attempt.result.is_err() || attempt.job.backfill {
        return true;
    }
    let schedule = &attempt.schedule;
    if matches!(
        schedule.policies.overlap,
        Overlap::BufferOne | Overlap::BufferAll
    ) {
        return true;
    }
    schedule
        .next_run_at
        .is_some_and(|next| next - now <= NEXT_OCCURRENCE_NEAR)
}

#[cfg(test)]
mod tests {
    use chrono::{TimeDelta, TimeZone};

    use super::*;
    use crate::core::engine::held::tests::fire;
    use crate::core::engine::outcome::Failure;
    use crate::core::policies::Overlap;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap()
    }

    /// A call answered at `t0` with a success written ahead, whose schedule next runs `next`
    /// after it.
    fn answered(next: Option<TimeDelta>) -> Attempt {
        let (mut schedule, job) = fire(EnvId::new(), t0());
        schedule.next_run_at = next.map(|d| t0() + d);
        let mut attempt = Attempt::called(schedule, job, Ok(serde_json::json!({})), t0());
        attempt.written_ahead = true;
        attempt
    }

    #[test]
    fn records_wait_for_a_burst_that_fits_in_the_backlog_until_its_calls_are_out() {
        let (limit, backlog) = (256, 65_536);
        assert!(!may_give_way(0, 0, limit, backlog), "no call waits");
        assert!(may_give_way(50_000, 0, limit, backlog), "a burst begins");
        // A 50,000 burst's last calls: three-quarters of the backlog held, the rest fits.
        assert!(may_give_way(700, 49_300, limit, backlog));
        assert!(
            !may_give_way(1, backlog - limit, limit, backlog),
            "the backlog is full"
        );
    }

    #[test]
    fn a_burst_larger_than_the_backlog_records_from_three_quarters_on() {
        let (limit, backlog) = (256, 65_536);
        assert!(
            may_give_way(60_000, 40_000, limit, backlog),
            "under three-quarters"
        );
        assert!(
            !may_give_way(50_800, 49_200, limit, backlog),
            "past them, the rest does not fit"
        );
    }

    proptest::proptest! {
        /// Giving way never lets the outcomes held and the calls still to come outgrow the
        /// backlog, except below three-quarters of it; and more held never gives way where
        /// fewer did not.
        #[test]
        fn giving_way_is_bounded_by_the_backlog(
            waiting in 0usize..200_000,
            held in 0usize..200_000,
            more in 0usize..10_000,
        ) {
            let (limit, backlog) = (256, 65_536);
            if may_give_way(waiting, held, limit, backlog) {
                proptest::prop_assert!(waiting > 0);
                proptest::prop_assert!(held + waiting + limit <= backlog || held < backlog / 4 * 3);
            }
            if may_give_way(waiting, held + more, limit, backlog) {
                proptest::prop_assert!(may_give_way(waiting, held, limit, backlog));
            }
        }
    }

    #[test]
    fn a_success_written_ahead_whose_schedule_runs_again_later_is_gathered() {
        assert!(!needed_soon(&answered(Some(TimeDelta::minutes(1))), t0()));
        assert!(!needed_soon(&answered(None), t0()), "a one-shot that ran");
    }

    #[test]
    fn an_outcome_something_waits_for_is_recorded_within_a_step() {
        let near = answered(Some(TimeDelta::seconds(1)));
        assert!(needed_soon(&near, t0()), "an occurrence a second away");
        assert!(needed_soon(&answered(Some(TimeDelta::seconds(5))), t0()));
        let mut unanswered = answered(Some(TimeDelta::minutes(1)));
        unanswered.written_ahead = false;
        assert!(needed_soon(&unanswered, t0()), "durable only by its record");
        let mut failed = answered(Some(TimeDelta::minutes(1)));
        failed.result = Err(Failure::circuit_open("open".into()));
        assert!(needed_soon(&failed, t0()), "a retry follows");
        let mut backfilled = answered(Some(TimeDelta::minutes(1)));
        backfilled.job.backfill = true;
        assert!(
            needed_soon(&backfilled, t0()),
            "the next backfilled run waits"
        );
        for overlap in [Overlap::BufferOne, Overlap::BufferAll] {
            let mut buffering = answered(Some(TimeDelta::minutes(1)));
            buffering.schedule.policies.overlap = overlap;
            assert!(needed_soon(&buffering, t0()), "{overlap:?}");
        }
    }
}
