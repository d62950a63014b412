//! The simulated world: instances of the engine over one store, each on a clock of its own,
//! the operations a user makes and the faults a machine has, in virtual time moved in small
//! steps (each one followed by every running instance settling).

use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Utc};
use sentin8_cron::core::calendar::{CalendarDraft, CalendarEntryText};
use sentin8_cron::core::decl::ScheduleDecl;
use sentin8_cron::core::engine::{Engine, EngineConfig};
use sentin8_cron::core::metrics::Metrics;
use sentin8_cron::core::model::*;
use sentin8_cron::core::ops::{Actor, CreateSchedule, Ops, SchedulePatch};
use sentin8_cron::core::policies::Overlap;
use sentin8_cron::core::retry::RetryPolicy;
use sentin8_cron::core::store::Store;
use sentin8_cron::core::target::Target;
use serde_json::json;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::target::{Ledger, Service, SimClock, SimTarget};
use super::{Plant, Rng, SimConfig};
use crate::engine::FaultyStore;

/// The timings schedules are created with and re-timed to: cron expressions, and intervals of
/// seconds (which fall due between whole minutes and within the claim lead of each other).
const TIMINGS: [&str; 4] = [
    "* * * * *",
    "*/2 * * * *",
    "@every 20s",
    "@every 30s phase 10s",
];
/// The calendar every world has, which some schedules name.
pub const SIM_CALENDAR: &str = "sim-quiet";
/// What a schedule may exclude: minutes, seconds of each minute, or the calendar's minutes.
const EXCLUSIONS: [&str; 3] = ["*/3 * * * *", "0-29 * * * * *", SIM_CALENDAR];
/// The longest step of virtual time between two looks: well inside a lease, so an instance
/// that runs keeps its leases (a longer step would stall every instance at once).
const MAX_STEP_MS: u64 = 1_500;

/// How long (real time) an instance may take to settle before the world moves on anyway. An
/// instance that has not settled is mostly waiting out a pause (after a store refused it,
/// between two records) that ends on its clock or the wall clock, whichever first: moving the
/// clock ends it. One that is really busy sees time pass while it works, as on a slow machine,
/// but never as much as a lease between two looks.
const SETTLE_WAIT: StdDuration = StdDuration::from_millis(20);

enum State {
    Running,
    /// Stopped (SIGSTOP): its clock stands still and nothing it sends goes out until `until`.
    Frozen {
        until: DateTime<Utc>,
        since: DateTime<Utc>,
    },
    /// Killed; a new instance takes its place at `restart_at`.
    Dead {
        restart_at: DateTime<Utc>,
    },
}

struct Instance {
    /// Which instance it is, for the ledger: every start (and restart) is a new one.
    id: usize,
    clock: Arc<SimClock>,
    store: Arc<FaultyStore>,
    engine: Engine,
    task: Option<JoinHandle<()>>,
    stop: Option<oneshot::Sender<()>>,
    state: State,
    /// How far its wall clock is off the world's, in milliseconds.
    skew_ms: i64,
}

/// A schedule the world made, and what it did to it since.
pub struct Tracked {
    pub id: ScheduleId,
    /// Nothing but the engine touches it (no pause, patch, trigger, backfill or delete): its
    /// occurrences are accounted for exactly at the end.
    pub observed: bool,
    pub runs: Option<u32>,
}

pub struct World {
    pub rng: Rng,
    pub store: Arc<dyn Store>,
    pub ops: Ops,
    pub env: EnvId,
    pub now: DateTime<Utc>,
    pub ledger: Ledger,
    pub schedules: Vec<Tracked>,
    pub unsettled: usize,
    /// What happened, for a replay's account: operations, kills, freezes.
    pub tally: [usize; 3],
    /// Instances started so far.
    started: usize,
    /// An instance did not finish its stop in time and was killed instead: its jobs may be
    /// left running.
    pub stop_cut_short: bool,
    instances: Vec<Instance>,
    config: SimConfig,
    engine: EngineConfig,
}

impl World {
    pub async fn new(
        store: Arc<dyn Store>,
        seed: u64,
        start: DateTime<Utc>,
        config: SimConfig,
    ) -> Self {
        let mut rng = Rng::new(seed);
        let engine = EngineConfig {
            job_timeout: StdDuration::from_secs(5),
            claim_ahead: StdDuration::from_secs(10),
            retry: RetryPolicy {
                base: StdDuration::from_secs(1),
                cap: StdDuration::from_secs(4),
            },
            claim_seed: rng.below(u64::from(u32::MAX)) as u32,
            ..EngineConfig::default()
        };
        let mut world = Self {
            ledger: Ledger::new(seed),
            ops: Ops::new(store.clone()),
            store,
            env: EnvId::new(),
            now: start,
            schedules: Vec::new(),
            unsettled: 0,
            tally: [0; 3],
            started: 0,
            stop_cut_short: false,
            instances: Vec::new(),
            config,
            engine,
            rng,
        };
        for _ in 0..world.config.instances {
            let instance = world.instance();
            world.instances.push(instance);
        }
        // A calendar some schedules name: every fifth minute is a holiday.
        let quiet = CalendarDraft {
            description: "every fifth minute".into(),
            entries: vec![CalendarEntryText {
                spec: "*/5 * * * *".into(),
                note: Some("quiet".into()),
            }],
        };
        let actor = world.actor();
        world
            .ops
            .calendar_put(world.env, SIM_CALENDAR, &quiet, &actor)
            .await
            .expect("calendar written");
        world
    }

    fn instance(&mut self) -> Instance {
        self.started += 1;
        let index = self.started;
        let clock = Arc::new(SimClock::new(self.now));
        let store = FaultyStore::new(self.store.clone());
        let target = SimTarget {
            instance: index,
            clock: clock.clone(),
            gate: store.gate(),
            ledger: self.ledger.clone(),
        };
        // An instance that cannot renew may lose its leases while its calls are out: the
        // window the README names for an instance that cannot reach the database.
        store.when_renewal_refused({
            let ledger = self.ledger.clone();
            move || ledger.excuse(index)
        });
        let engine = Engine::new(
            store.clone(),
            Arc::new(target),
            clock.clone(),
            self.engine.clone(),
            Arc::new(Metrics::default()),
        );
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn({
            let engine = engine.clone();
            async move {
                engine
                    .run(async {
                        let _ = stopped.await;
                    })
                    .await;
            }
        });
        Instance {
            id: index,
            clock,
            store,
            engine,
            task: Some(task),
            stop: Some(stop),
            state: State::Running,
            skew_ms: 0,
        }
    }

    pub fn actor(&self) -> Actor {
        Actor {
            name: "simulator".into(),
            correlation_id: None,
            now: self.now,
        }
    }

    /// One step: perhaps an operation, perhaps a fault, then time moves on in small steps.
    pub async fn step(&mut self, faults: bool) {
        if self.rng.chance(350) {
            self.tally[0] += 1;
            self.operate().await;
        }
        if faults && self.rng.chance(self.config.fault_permille) {
            self.fault().await;
        }
        let total = [100, 400, 1_000, 3_000, 8_000, 20_000][self.rng.below(6) as usize];
        let mut left = self.rng.below(total) + 50;
        while left > 0 {
            let step = left.min(MAX_STEP_MS);
            left -= step;
            self.advance(Duration::milliseconds(step as i64)).await;
        }
    }

    /// Moves the world `by`, wakes and restarts what is due, and lets every running instance
    /// settle.
    pub async fn advance(&mut self, by: Duration) {
        self.now += by;
        let now = self.now;
        let mut restart = Vec::new();
        for (index, instance) in self.instances.iter_mut().enumerate() {
            match instance.state {
                State::Running => instance
                    .clock
                    .inner
                    .set(now + Duration::milliseconds(instance.skew_ms)),
                State::Frozen { until, since } if until <= now => {
                    if self.config.plant == Plant::StallUnseen {
                        instance
                            .clock
                            .hide((now - since).to_std().unwrap_or_default());
                    }
                    instance
                        .clock
                        .inner
                        .set(now + Duration::milliseconds(instance.skew_ms));
                    instance.store.freeze(false);
                    instance.state = State::Running;
                    self.ledger
                        .note(format!("{now} instance {} wakes", instance.id));
                }
                State::Dead { restart_at } if restart_at <= now => restart.push(index),
                _ => {}
            }
        }
        for index in restart {
            let mut fresh = self.instance();
            self.ledger.note(format!(
                "{now} instance {} starts in place of {}",
                fresh.id, self.instances[index].id
            ));
            std::mem::swap(&mut self.instances[index], &mut fresh);
        }
        for instance in &self.instances {
            if matches!(instance.state, State::Running)
                && tokio::time::timeout(SETTLE_WAIT, instance.engine.settled_beside_calls())
                    .await
                    .is_err()
            {
                // Time moved on without it: to it, a stall (its calls out are in the window
                // the README names for an instance that stalls past its lease).
                self.unsettled += 1;
                self.ledger.excuse(instance.id);
                self.ledger
                    .note(format!("{now} instance {} has not settled", instance.id));
            }
        }
    }

    async fn operate(&mut self) {
        let live: Vec<usize> = (0..self.schedules.len())
            .filter(|i| !self.schedules[*i].observed)
            .collect();
        let choice = self.rng.below(10);
        if choice < 3 || live.is_empty() {
            self.create().await;
            return;
        }
        let id = self.schedules[live[self.rng.below(live.len() as u64) as usize]].id;
        let actor = self.actor();
        let env = self.env;
        // Refusals (a trigger beside an open job, a paused schedule) are answers, not faults.
        let _ = match choice {
            3 => self
                .ops
                .schedule_pause(env, id, &actor, None)
                .await
                .map(drop),
            4 => self.ops.schedule_resume(env, id, &actor).await.map(drop),
            5 => {
                let patch = SchedulePatch {
                    cron: Some(TIMINGS[self.rng.below(TIMINGS.len() as u64) as usize].into()),
                    ..SchedulePatch::default()
                };
                self.ops
                    .schedule_patch(env, id, patch, &actor)
                    .await
                    .map(drop)
            }
            6 => self.ops.schedule_delete(env, id, &actor).await.map(drop),
            7 | 8 => self.ops.schedule_trigger(env, id, &actor).await.map(drop),
            _ => {
                let from = self.now - Duration::minutes(1 + self.rng.below(4) as i64);
                // The schedule's default, or a policy the backfill names (not cancel_other).
                let overlap = [
                    None,
                    Some(Overlap::Skip),
                    Some(Overlap::BufferOne),
                    Some(Overlap::BufferAll),
                    Some(Overlap::AllowAll),
                ][self.rng.below(5) as usize];
                self.ops
                    .schedule_backfill(env, id, (from, self.now), overlap, &actor)
                    .await
                    .map(drop)
            }
        };
    }

    pub async fn create(&mut self) {
        let overlap = Overlap::ALL[self.rng.below(Overlap::ALL.len() as u64) as usize];
        let runs = self.rng.chance(300).then(|| 1 + self.rng.below(3) as u32);
        let decl = ScheduleDecl {
            schedule_type: format!("sim-{}", self.schedules.len()),
            cron: Some(TIMINGS[self.rng.below(TIMINGS.len() as u64) as usize].into()),
            max_retries: Some(self.rng.below(3) as u32),
            overlap: Some(overlap),
            catchup_window: Some(["20s", "1m", "5m"][self.rng.below(3) as usize].into()),
            remaining_runs: runs,
            payload: Some(json!({"n": self.schedules.len()})),
            exclude: self
                .rng
                .chance(300)
                .then(|| vec![EXCLUSIONS[self.rng.below(EXCLUSIONS.len() as u64) as usize].into()]),
            ..ScheduleDecl::default()
        };
        let spec = decl.validate(self.now).expect("a valid declaration");
        let create = CreateSchedule {
            domain: "sim".into(),
            spec,
            target: Target::validate(&json!({"baseUrl": "http://127.0.0.1:9/sim"})).unwrap(),
        };
        let schedule = self
            .ops
            .schedule_create(self.env, create, &self.actor())
            .await
            .expect("schedule created");
        let observed = self.rng.chance(500);
        self.schedules.push(Tracked {
            id: schedule.id,
            observed,
            runs,
        });
    }

    async fn fault(&mut self) {
        let index = self.rng.below(self.instances.len() as u64) as usize;
        let now = self.now;
        let choice = self.rng.below(10);
        let running = matches!(self.instances[index].state, State::Running);
        match choice {
            // A kill, at whatever await point each of its tasks is.
            0..=2 if running => {
                self.tally[1] += 1;
                self.ledger.excuse(self.instances[index].id);
                self.ledger.note(format!(
                    "{now} instance {} killed",
                    self.instances[index].id
                ));
                let instance = &mut self.instances[index];
                if let Some(task) = instance.task.take() {
                    task.abort();
                    let _ = task.await;
                }
                let down = Duration::milliseconds(200 + self.rng.below(20_000) as i64);
                self.instances[index].state = State::Dead {
                    restart_at: now + down,
                };
            }
            // A freeze, at times longer than any lease.
            3..=5 if running => {
                self.tally[2] += 1;
                self.ledger.excuse(self.instances[index].id);
                self.ledger.note(format!(
                    "{now} instance {} frozen",
                    self.instances[index].id
                ));
                let span = Duration::milliseconds(500 + self.rng.below(60_000) as i64);
                let instance = &mut self.instances[index];
                instance.store.freeze(true);
                instance.state = State::Frozen {
                    until: now + span,
                    since: now,
                };
            }
            // The store refuses a share of what the instance asks (or stops refusing), and
            // is slow for some of it.
            6 => {
                let permille = [0, 0, 50, 200][self.rng.below(4) as usize];
                let seed = self.rng.next();
                self.instances[index].store.fail_some(permille, seed);
                // A slow store only when asked (`SIM_SLOW_STORE=1`): with it, seed 790 of the
                // long mode shows a second call of a job whose first is still out, not yet
                // explained (BENCHMARKS, the simulator's seeds). The draw is made either way,
                // so a seed's world is the same with and without it.
                let slow = [0, 100, 300][self.rng.below(3) as usize];
                if std::env::var("SIM_SLOW_STORE").is_ok_and(|v| v == "1") {
                    self.instances[index].store.slow_some(slow);
                }
                self.ledger.note(format!(
                    "{now} instance {}'s store refuses {permille}/1000",
                    self.instances[index].id
                ));
            }
            // The wall clock steps, within the margin the README names.
            7 => {
                self.instances[index].skew_ms = self.rng.below(601) as i64 - 300;
            }
            // The service changes.
            _ => self.ledger.set_service(Service {
                fail_permille: [0, 100, 400][self.rng.below(3) as usize],
                hang_permille: [0, 0, 30, 100][self.rng.below(4) as usize],
                slowest_ms: [50, 500, 3_000, 8_000][self.rng.below(4) as usize] as i64,
            }),
        }
    }

    /// Ends every fault: frozen instances wake, dead ones come back, the store answers, the
    /// service is healthy and the clocks agree.
    pub async fn heal(&mut self) {
        self.ledger.set_service(Service::HEALTHY);
        for instance in &mut self.instances {
            instance.store.fail_some(0, 0);
            instance.store.slow_some(0);
            instance.skew_ms = 0;
            match &mut instance.state {
                State::Frozen { until, .. } => *until = self.now,
                State::Dead { restart_at } => *restart_at = self.now,
                State::Running => {}
            }
        }
        self.advance(Duration::milliseconds(1)).await;
    }

    /// Stops every instance as `serve` stops on a signal: what they hold is called and
    /// recorded.
    pub async fn stop(&mut self) {
        for instance in &mut self.instances {
            if let Some(stop) = instance.stop.take() {
                let _ = stop.send(());
            }
        }
        // Virtual time moves on (claimed fires reach their instants, calls their timeouts)
        // while the instances finish, in real time as long as their database work takes.
        for step in 0..400 {
            if step < 40 {
                self.now += Duration::milliseconds(500);
                for instance in &self.instances {
                    instance.clock.inner.set(self.now);
                }
            }
            let all_done = self
                .instances
                .iter()
                .all(|i| i.task.as_ref().is_none_or(JoinHandle::is_finished));
            if all_done {
                break;
            }
            tokio::time::sleep(StdDuration::from_millis(5)).await;
        }
        for instance in &mut self.instances {
            if let Some(task) = instance.task.take() {
                if !task.is_finished() {
                    self.stop_cut_short = true;
                }
                task.abort();
                let _ = task.await;
            }
        }
    }

    /// Deletes the world's schedules, so a store that runs the next seed calls none of them.
    pub async fn clean_up(&self) {
        let actor = self.actor();
        for tracked in &self.schedules {
            let _ = self.ops.schedule_delete(self.env, tracked.id, &actor).await;
        }
    }
}
