//! The producer: the one task that owns the dispatch state. It decides every transition of a
//! claimed attempt and nothing else touches that state (no locks, no shared flags):
//!
//! ```text
//!            round ──► held (claimed ahead) ──hand-off──► handed off ──instant──┐
//!              │                                                               ▼
//!              └──────────────► claimed at the instant, or a retry ──► ready ──slot──► call
//!                                                                                        │
//!        recorded ◄── recorder ◄──────────────────────── outcome (the slot is free) ◄────┘
//! ```
//!
//! Database work runs on tasks of its own, started here and answered back here: claim rounds
//! (`round.rs`), hand-off writes and the rereads of changed schedules, lease renewals. Each
//! call runs on a task of its own too and reports its outcome back; the producer frees the
//! call's slot and hands the outcome to the recorder (`recorder.rs`), which reports back what
//! it made durable. The producer `select!`s over those answers, its timers and its signals
//! (a schedule changed, shutdown, a test asking whether it has settled).
//!
//! Timers are instants on the injected clock (the next round, hand-off, instant and lease
//! renewal): a test moves the clock and the producer acts at once, with no wall-clock wait.
//! Waits that are not about schedule time (a retry after the database failed, a pause while
//! work is held elsewhere) also end after the same wall-clock time, so a stopped test clock
//! never stalls them; every decision still reads the injected clock.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use tokio::sync::{mpsc, watch};

use super::claim::Recheck;
use super::fire::{FireEvent, Fires};
use super::held::{Held, Ready};
use super::lease::Lease;
use super::outcome::Attempt;
use super::parts::{EngineError, Parts, Task, TickSummary};
use super::recorder::Durable;
use super::round::{Claimed, Round};
use super::slots::{DrainRate, Slot, Slots};
use super::wake;
use crate::core::breaker::Breakers;
use crate::core::dispatch::PreparedCall;

mod calls;
mod handoff;
mod rounds;
use crate::core::model::*;
use crate::core::store::*;

/// How soon a failed hand-off is tried again.
const HAND_OFF_RETRY: Duration = Duration::from_millis(500);

/// How the producer runs.
#[derive(Debug, Clone, Copy)]
pub(super) enum Mode {
    /// `serve`: rounds go on until shutdown, claiming `lead` ahead of the instant (none when
    /// zero); fires claimed before a shutdown are still called at their instants.
    Serve { lead: Duration },
    /// `tick --once`: due schedules, then due retries, as long as rounds make progress; done
    /// once every attempt it started is recorded.
    Tick,
}

/// A call's end, reported by its task.
pub(super) struct Called {
    pub attempt: Attempt,
    pub slot: Slot,
    /// What the call says about its origin's health (none: it did not reach the origin, or
    /// failed fast while its circuit was open).
    pub health: Option<crate::core::breaker::CallHealth>,
    /// The request never left: its lease was not known to hold when it was about to (the
    /// instance stalled, or could not renew it). Not an attempt: it waits for a renewal.
    pub unsent: Option<super::held::Start>,
}

/// Database work the producer started, answered.
enum Op {
    /// A round's claims, when it started (wall clock), and the instant on the engine's clock
    /// (and its monotonic reading) at or before which the leases it took began.
    Round(Box<Claimed>, Instant, DateTime<Utc>, Duration),
    HandOff {
        fires: Vec<(Schedule, Job)>,
        /// The call lease written, from each fire's instant.
        lease: chrono::Duration,
        /// The instant the hand-off's leases began, and the monotonic reading then.
        at: DateTime<Utc>,
        mono: Duration,
        answer: StoreResult<Vec<HandedOff>>,
        /// Each fire's call, made ready while the write was out (in `fires`' order).
        prepared: Vec<Option<PreparedCall>>,
    },
    Reread {
        env: EnvId,
        fires: Vec<(Schedule, Job)>,
        verdicts: StoreResult<Vec<Recheck>>,
    },
    Renewed {
        leases: Vec<HeldLease>,
        /// When the renewal was sent, on the engine's clock and its monotonic reading.
        at: DateTime<Utc>,
        mono: Duration,
        result: StoreResult<Vec<JobId>>,
    },
    /// The op's task panicked: what it held is given back.
    Lost(OpKind),
}

/// What an op was about, to give back its part of the state if its task is lost.
enum OpKind {
    Round,
    HandOff(Vec<(JobId, EnvId)>),
    Reread(Vec<(JobId, EnvId)>),
    Renewal,
}

/// When the next round runs: when the injected clock reaches `at`, or after the same wait in
/// wall-clock time, whichever comes first.
#[derive(Debug, Clone, Copy)]
struct NextRound {
    at: DateTime<Utc>,
    real: tokio::time::Instant,
    /// A short pause while due work could not be taken (held elsewhere, or the database
    /// failed): work is pending, the producer has not settled.
    pause: bool,
}

impl NextRound {
    /// `wait` from `now` on the engine's clock, and from now on the wall clock.
    fn after(now: DateTime<Utc>, wait: Duration, pause: bool) -> Self {
        Self {
            at: now + super::parts::chrono_duration(wait),
            real: tokio::time::Instant::now() + wait,
            pause,
        }
    }
}

/// Where `tick` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Due,
    Drain,
    Done,
}

/// How a tick goes through its phases.
#[derive(Debug)]
struct TickState {
    phase: Phase,
    rounds: u32,
    /// The last round left work for want of a slot: the next waits for one.
    wait_for_slot: bool,
    /// A slot was freed while the running round ran, after its budget was taken.
    freed_in_round: bool,
    error: Option<EngineError>,
}

/// What the producer says of itself (the engine's `settled` waits on it).
#[derive(Debug, Default)]
pub(super) struct Probe {
    pokes: std::sync::atomic::AtomicU64,
    poke: tokio::sync::Notify,
    /// (the last poke seen when the state was looked at, how quiet it was then)
    state: watch::Sender<(u64, Quiet)>,
}

/// How quiet the producer is at its clock's instant, from least to most (the order matters:
/// [`Probe::quiet`] waits for a state at least as quiet as asked).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Quiet {
    /// It has work of its own: database work, a record, something ready or due.
    #[default]
    Busy,
    /// Nothing to do but wait for the calls in flight (or a timer, or a signal).
    CallsOut,
    /// Nothing to do until a timer or a signal.
    Settled,
}

impl Probe {
    /// Resolves once the producer has looked at its state after this call and found it at
    /// least `quiet`.
    pub(super) async fn quiet(&self, quiet: Quiet) {
        let poke = self.pokes.fetch_add(1, Ordering::SeqCst) + 1;
        let mut state = self.state.subscribe();
        self.poke.notify_one();
        let _ = state
            .wait_for(|(seen, now)| *seen >= poke && *now >= quiet)
            .await;
    }
}

pub(super) struct Producer {
    parts: Parts,
    /// What it says of itself, for `Engine::settled`.
    probe: Arc<Probe>,
    mode: Mode,
    slots: Slots,
    held: Held,
    /// This instance's attempts claimed to run and not recorded yet, with what it knows of
    /// their leases (`lease.rs`), which it renews as they run low.
    running: HashMap<JobId, Lease>,
    /// Where each fire it holds is (`fire.rs`): every change above goes through it.
    fires: Fires,
    /// The per-origin circuit breakers, fed with what each call said when it ended; taken
    /// from the engine when the producer starts and given back when it ends (so `tick`
    /// keeps them across ticks), never shared with the call tasks.
    breakers: Breakers,
    /// Attempts whose call did not start because their lease was not known to hold: they wait
    /// for the next renewal, which confirms them (they are called) or finds them taken over
    /// (they are dropped).
    unsure: Vec<Ready>,
    /// Abandoned attempts (another instance's lapsed lease) sent to the recorder, not recorded
    /// yet: not sent again.
    recovering: HashSet<JobId>,
    summary: TickSummary,
    ops: FuturesUnordered<BoxFuture<'static, Op>>,
    round_running: bool,
    handing_off: bool,
    renewing: bool,
    next_round: Option<NextRound>,
    /// The last round left work for want of a slot or of room among held fires: the next
    /// starts when one frees.
    deferred: bool,
    /// After a failed hand-off write, when the next may be tried.
    hand_off_retry: Option<crate::core::clock::Deadline>,
    next_renewal: DateTime<Utc>,
    tick: TickState,
    stopping: bool,
    calls_tx: mpsc::UnboundedSender<Called>,
    calls_rx: mpsc::UnboundedReceiver<Called>,
    /// The call tasks: aborted with the producer, so an engine whose future is dropped (a
    /// process dying, as the simulator models it) leaves no call behind.
    call_tasks: tokio::task::JoinSet<()>,
    /// How to abort each call in flight, for a job this instance no longer holds.
    call_aborts: HashMap<JobId, tokio::sync::oneshot::Sender<()>>,
    to_recorder: Option<mpsc::UnboundedSender<Attempt>>,
    recorded: mpsc::UnboundedReceiver<Durable>,
    /// How many claimed attempts wait for a slot (the recorder gives way to their calls).
    pressing: watch::Sender<usize>,
    /// This instance's place among the instances alive (`share.rs`).
    share: watch::Receiver<(u32, u32)>,
    /// How far ahead rounds claim now, how fast claims and hand-offs go, and when a round next
    /// claims ahead (`wake::Pace`).
    pace: wake::Pace,
    /// When the hand-off in progress began.
    hand_off_started: Option<Instant>,
    /// How fast calls start while attempts wait for a slot: sizes the leases of fires a
    /// hand-off queues behind others.
    drain: DrainRate,
}

/// The producer's ways to the recorder and to the heartbeat.
pub struct Links {
    pub to_recorder: mpsc::UnboundedSender<Attempt>,
    pub recorded: mpsc::UnboundedReceiver<Durable>,
    pub pressing: watch::Sender<usize>,
    pub share: watch::Receiver<(u32, u32)>,
}

impl Producer {
    pub fn new(
        parts: Parts,
        probe: Arc<Probe>,
        breakers: Breakers,
        mode: Mode,
        links: Links,
    ) -> Self {
        let Links {
            to_recorder,
            recorded,
            pressing,
            share,
        } = links;
        let (calls_tx, calls_rx) = mpsc::unbounded_channel();
        let now = parts.clock.now();
        let renew_every = wake::renewal_interval(parts.config.lease);
        Self {
            slots: Slots::new(&parts.config),
            mode,
            held: Held::default(),
            running: HashMap::new(),
            fires: Fires::default(),
            breakers,
            unsure: Vec::new(),
            recovering: HashSet::new(),
            summary: TickSummary::default(),
            ops: FuturesUnordered::new(),
            round_running: false,
            handing_off: false,
            renewing: false,
            next_round: Some(NextRound::after(now, Duration::ZERO, false)),
            deferred: false,
            hand_off_retry: None,
            next_renewal: now + super::parts::chrono_duration(renew_every),
            tick: TickState {
                phase: Phase::Due,
                rounds: 0,
                wait_for_slot: false,
                freed_in_round: false,
                error: None,
            },
            stopping: false,
            calls_tx,
            calls_rx,
            call_tasks: tokio::task::JoinSet::new(),
            call_aborts: HashMap::new(),
            to_recorder: Some(to_recorder),
            recorded,
            pressing,
            share,
            pace: wake::Pace::new(match mode {
                Mode::Serve { lead } => lead,
                Mode::Tick => Duration::ZERO,
            }),
            hand_off_started: None,
            drain: DrainRate::new(&parts.config),
            parts,
            probe,
        }
    }

    /// Runs until done: in `tick` mode when its phases are over, in `serve` mode once
    /// `shutdown` resolved and the fires it held are called; either way once every attempt it
    /// started is recorded. Returns what it did.
    pub async fn run(
        mut self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> (TickSummary, Option<EngineError>, Breakers) {
        tokio::pin!(shutdown);
        let clock = self.parts.clock.clone();
        let signals = self.parts.store.signals();
        let probe = self.probe.clone();
        loop {
            // Read before looking at anything: a test's change made before its poke is seen.
            let poke = probe.pokes.load(Ordering::SeqCst);
            if signals.schedules.notified().now_or_never().is_some() {
                self.wake_round();
            }
            let now = clock.now();
            self.step(now);
            if self.finished() {
                break;
            }
            let quiet = self.quiet();
            probe.state.send_replace((poke, quiet));
            let at = self.next_instant();
            let real = self.next_real();
            tokio::select! {
                biased;
                Some(op) = self.ops.next(), if !self.ops.is_empty() => self.op_done(op),
                Some(called) = self.calls_rx.recv() => self.call_done(called),
                Some(durable) = self.recorded.recv() => match durable {
                    Durable::Answers(jobs) => self.answers_durable(jobs),
                    Durable::Outcomes(outcomes) => self.recorded(outcomes),
                },
                () = signals.schedules.notified(), if self.serving() => self.wake_round(),
                () = &mut shutdown, if !self.stopping => self.stop(),
                () = sleep_on_clock(&*clock, at) => {}
                () = sleep_real(real) => {}
                () = probe.poke.notified() => {}
            }
        }
        // Dropping the sender lets the recorder end.
        self.to_recorder = None;
        (self.summary, self.tick.error, self.breakers)
    }

    fn serving(&self) -> bool {
        matches!(self.mode, Mode::Serve { .. }) && !self.stopping
    }

    fn lead(&self) -> Option<Duration> {
        match self.mode {
            Mode::Serve { lead } if !lead.is_zero() => Some(self.pace.lead_now.max(lead)),
            _ => None,
        }
    }

    /// Stops claiming. The fires held within the configured lead are still called at their
    /// instants; those a longer lead claimed before a large burst are let go, so stopping takes
    /// no longer than the configured lead (another instance, or this one restarted, calls them
    /// a few seconds late).
    fn stop(&mut self) {
        self.stopping = true;
        if let Mode::Serve { lead } = self.mode {
            let cutoff = self.parts.clock.now() + super::parts::chrono_duration(lead);
            let left = self.held.leave_after(cutoff);
            for job in &left {
                self.fires.step(*job, FireEvent::LetGo);
            }
            if !left.is_empty() {
                tracing::info!(
                    fires = left.len(),
                    "stopping: fires claimed further ahead than the configured lead are left to be released at their instants"
                );
            }
        }
    }

    /// A change or a freed slot: the next round runs now.
    fn wake_round(&mut self) {
        self.pace.claim_next();
        if self.serving() {
            self.next_round = Some(NextRound::after(
                self.parts.clock.now(),
                Duration::ZERO,
                false,
            ));
        }
    }

    /// A slot, a backlog place or room among the held fires was freed.
    fn freed(&mut self) {
        if self.deferred {
            self.deferred = false;
            self.wake_round();
        }
        self.tick.wait_for_slot = false;
        self.tick.freed_in_round |= self.round_running;
    }

    /// Everything whose time has come at `now`.
    fn step(&mut self, now: DateTime<Utc>) {
        // Launch first: a round's budget then sees the slots those calls took.
        for job in self.held.instant_came(now) {
            self.fires.step(job, FireEvent::InstantCame);
        }
        self.launch_ready();
        self.start_round(now);
        self.start_hand_off(now);
        self.start_renewal(now);
        let waiting = self.held.waiting_for_slot();
        self.pressing
            .send_if_modified(|p| std::mem::replace(p, waiting) != waiting);
    }

    fn finished(&self) -> bool {
        let quiet = self.ops.is_empty()
            && self.held.is_empty()
            && self.unsure.is_empty()
            && self.running.is_empty()
            && self.recovering.is_empty()
            && !self.slots.busy();
        match self.mode {
            Mode::Tick => self.tick.phase == Phase::Done && quiet,
            Mode::Serve { .. } => self.stopping && quiet,
        }
    }

    /// How much is left to do at the clock's instant.
    fn quiet(&self) -> Quiet {
        let own_work = !self.ops.is_empty()
            || !self.slots.all_recorded()
            || !self.recovering.is_empty()
            || self.held.pressing()
            || !self.unsure.is_empty()
            || self.hand_off_retry.is_some()
            || self.next_round.is_some_and(|n| n.pause);
        if own_work {
            Quiet::Busy
        } else if self.slots.busy() {
            Quiet::CallsOut
        } else {
            Quiet::Settled
        }
    }

    /// The earliest instant on the clock the producer waits for.
    fn next_instant(&self) -> Option<DateTime<Utc>> {
        let round = self
            .next_round
            .filter(|_| !self.round_running && self.serving())
            .map(|n| n.at);
        let hand_off = self
            .held
            .next_hand_off()
            .filter(|_| !self.handing_off && self.hand_off_retry.is_none());
        let renewal = (!self.renewing).then_some(self.next_renewal);
        let hand_off_retry = self.hand_off_retry.map(|d| d.at);
        [
            round,
            hand_off,
            hand_off_retry,
            self.held.next_instant(),
            renewal,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The earliest wall-clock instant the producer waits for.
    fn next_real(&self) -> Option<tokio::time::Instant> {
        let round = self
            .next_round
            .filter(|_| !self.round_running && self.serving())
            .map(|n| n.real);
        let hand_off_retry = self.hand_off_retry.map(|d| d.real);
        [round, hand_off_retry].into_iter().flatten().min()
    }

    /// Runs `op` on a task of its own; its answer (or, if the task is lost, `kind`) comes back
    /// through `ops`.
    fn spawn(&mut self, kind: OpKind, op: impl std::future::Future<Output = Op> + Send + 'static) {
        let mut task = Task(tokio::spawn(op));
        self.ops.push(
            async move {
                match (&mut task.0).await {
                    Ok(op) => op,
                    Err(err) => {
                        tracing::error!(error = %err, "an engine task was lost");
                        Op::Lost(kind)
                    }
                }
            }
            .boxed(),
        );
    }

    fn op_done(&mut self, op: Op) {
        match op {
            Op::Round(claimed, started, leased_from, mono) => {
                self.round_done(*claimed, started, leased_from, mono);
            }
            Op::HandOff {
                fires,
                lease,
                at,
                mono,
                answer,
                prepared,
            } => self.hand_off_done(fires, lease, at, mono, answer, prepared),
            Op::Reread {
                env,
                fires,
                verdicts,
            } => self.reread_done(env, fires, verdicts),
            Op::Renewed {
                leases,
                at,
                mono,
                result,
            } => self.renewed(leases, at, mono, result),
            Op::Lost(kind) => match kind {
                OpKind::Round => {
                    self.round_running = false;
                    self.schedule_round_after(Round::default(), None);
                }
                // Their jobs stay `scheduled` or `running` in the store: no longer ours, the
                // drain releases or recovers them once their leases lapse.
                OpKind::HandOff(jobs) => {
                    self.handing_off = false;
                    self.held.hand_off_answered(jobs.iter().map(|(j, _)| *j));
                    for (job, env) in jobs {
                        self.running.remove(&job);
                        self.held.forget(env);
                        self.fires.step(job, FireEvent::LetGo);
                    }
                }
                OpKind::Reread(jobs) => {
                    for (job, env) in jobs {
                        self.running.remove(&job);
                        self.held.forget(env);
                        self.fires.step(job, FireEvent::LetGo);
                    }
                }
                OpKind::Renewal => self.renewing = false,
            },
        }
    }
}

async fn sleep_on_clock(clock: &dyn crate::core::clock::Clock, at: Option<DateTime<Utc>>) {
    match at {
        Some(at) => clock.sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn sleep_real(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
