//! A deterministic simulator that hunts for broken promises. A seed fixes everything the world
//! does: two or three engine instances over one store (SQLite or PostgreSQL), each on a clock
//! of its own moved in virtual time; schedules on cron expressions and on intervals of seconds
//! (which repeat within the claim lead), under every overlap policy; a user's operations
//! (create, patch, pause, resume, delete, trigger, backfill); and faults (a kill at whatever await point each task is, a freeze longer
//! than any lease, store refusals, a slow, failing or hanging service, steps of a wall clock).
//! After every step the store is held against a reference model (`model.rs`), and every call
//! against the promises about calls as it is made (`target.rs`):
//!
//! - no call before its instant, on its instance's clock;
//! - no call of a job after its success was recorded, and no two calls of one job in flight at
//!   once, outside the window the README names (its first caller stalled or died mid-call);
//! - at most one open job per schedule that does not run side by side, and at most one
//!   occurrence buffered under `buffer_one`;
//! - for schedules the user leaves alone: `remaining_runs` exact, no occurrence fired past its
//!   catch-up window, no occurrence with two jobs, and at the end every occurrence with exactly
//!   one job or in exactly one run of missed ones, and nothing left claimed or mid-call.
//!
//! `cargo test` runs a few hundred seeds; `SIM_SEEDS=100000 cargo test --release sim::long --
//! --ignored --nocapture` runs many and reports seeds per second and the seeds that failed;
//! `SIM_SEED=n` replays one seed and prints what it found. The world's decisions replay
//! exactly; the store and the tasks of one instance still interleave as the machine runs them,
//! so a replay checks the same world, not the same schedule of threads.
//!
//! The planted defect (`Plant::StallUnseen`) hides a freeze from the frozen instance's
//! monotonic clock, as the engine behaved before leases were fenced: it trusts a lease it
//! holds after a stall. The simulator finds it (`finds_the_planted_stall`).

use std::sync::Arc;

use chrono::{Duration, TimeZone, Utc};
use sentin8_cron::core::store::Store;

mod model;
mod target;
mod world;

use world::World;

/// A small, fast generator (SplitMix64): the seed fixes every draw.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    /// A draw in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True `permille` times in a thousand.
    pub fn chance(&mut self, permille: u64) -> bool {
        self.below(1000) < permille
    }
}

/// SplitMix64's finaliser: a well-spread value of `x`.
pub fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A defect planted on purpose, to show the simulator finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plant {
    None,
    /// A frozen instance does not see the freeze on its monotonic clock.
    StallUnseen,
}

#[derive(Debug, Clone, Copy)]
pub struct SimConfig {
    pub instances: usize,
    /// Steps with operations and faults, before the world heals.
    pub steps: usize,
    /// The chance of a fault in a step, per thousand.
    pub fault_permille: u64,
    pub plant: Plant,
}

/// What one seed found.
#[derive(Debug)]
pub struct Report {
    pub seed: u64,
    pub violations: Vec<String>,
    pub calls: u64,
    pub unsettled: usize,
    /// What happened, when something broke.
    pub trace: Vec<String>,
}

/// The chance of a fault in a step, per thousand, in the runs of many seeds.
const FAULTS: u64 = 200;

/// Runs seed `seed` on `store`, starting `day` days after the simulation's epoch (a store
/// that runs several seeds keeps its time moving forward), with a fault in `faults` steps of
/// a thousand.
pub async fn run_seed(
    store: Arc<dyn Store>,
    seed: u64,
    day: i64,
    faults: u64,
    plant: Plant,
) -> Report {
    let mut rng = Rng::new(seed);
    let config = SimConfig {
        instances: 2 + rng.below(2) as usize,
        steps: 20 + rng.below(30) as usize,
        fault_permille: faults,
        plant,
    };
    // 50 s past a minute: the first fires come soon.
    let start = Utc.with_ymd_and_hms(2026, 3, 2, 9, 0, 50).unwrap()
        + Duration::days(day)
        + Duration::seconds(rng.below(10) as i64);
    let mut world = World::new(store, rng.next(), start, config).await;
    world.create().await;
    let mut violations = Vec::new();
    for _ in 0..config.steps {
        world.step(true).await;
        look_and_check(&mut world, &mut violations).await;
    }
    world.heal().await;
    // Long enough for every retry, lapsed lease and buffered occurrence to play out.
    let healed = world.now;
    while world.now < healed + Duration::seconds(90) {
        world.step(false).await;
        look_and_check(&mut world, &mut violations).await;
    }
    let until = world.now - Duration::seconds(15);
    world.stop().await;
    if let Some(seen) = model::look(&world).await {
        violations.extend(model::check_end(&world, &seen, until));
    }
    violations.extend(world.ledger.violations());
    if std::env::var("SIM_SEED").is_ok() {
        let seen = model::look(&world).await;
        let jobs = seen
            .as_ref()
            .map_or(0, |s| s.jobs.values().map(Vec::len).sum());
        let [ops, kills, freezes] = world.tally;
        eprintln!(
            "seed {seed}: {} instances, {} steps, {} schedules, {jobs} jobs, {} calls; {ops} operations, {kills} kills, {freezes} freezes; until {}",
            config.instances,
            config.steps,
            world.schedules.len(),
            world.ledger.calls(),
            world.now
        );
    }
    world.clean_up().await;
    let trace = if violations.is_empty() {
        Vec::new()
    } else {
        world.ledger.trace()
    };
    Report {
        seed,
        trace,
        violations,
        calls: world.ledger.calls(),
        unsettled: world.unsettled,
    }
}

async fn look_and_check(world: &mut World, violations: &mut Vec<String>) {
    let Some(seen) = model::look(world).await else {
        return;
    };
    world.ledger.succeeded(
        seen.jobs
            .values()
            .flatten()
            .filter(|j| j.status == sentin8_cron::core::model::JobStatus::Succeeded)
            .map(|j| j.id),
    );
    for violation in model::check_step(world, &seen) {
        if !violations.contains(&violation) {
            violations.push(violation);
        }
    }
}

/// A store runs at most this many seeds (each in an environment of its own, a day after the
/// last, so its time only moves forward): a fresh one costs more than a seed.
const SEEDS_PER_STORE: usize = 500;

/// Runs seeds `from..from + count`, on a fresh store from `store` every
/// [`SEEDS_PER_STORE`] seeds, returning the reports of those that found anything. Runs of
/// thousands print their progress, and every failing seed as it fails.
async fn run_many(
    store: impl Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = Arc<dyn Store>>>>,
    from: u64,
    count: u64,
    plant: Plant,
) -> (Vec<Report>, u64) {
    let started = std::time::Instant::now();
    let mut failed = Vec::new();
    let mut calls = 0;
    let mut unsettled = 0;
    let mut shared: Option<Arc<dyn Store>> = None;
    for (n, seed) in (from..from + count).enumerate() {
        if n % SEEDS_PER_STORE == 0 {
            shared = Some(store().await);
        }
        let store = shared.clone().expect("a store");
        let report = run_seed(store, seed, n as i64, FAULTS, plant).await;
        calls += report.calls;
        unsettled += report.unsettled;
        if !report.violations.is_empty() {
            fail_with_report(&report);
            failed.push(report);
        }
        if count >= 1000 && (n + 1) % 1000 == 0 {
            let secs = started.elapsed().as_secs_f64();
            eprintln!(
                "{} seeds in {secs:.0} s ({:.1} seeds/s, {calls} calls): {} with violations",
                n + 1,
                (n + 1) as f64 / secs,
                failed.len()
            );
        }
    }
    if unsettled > 0 {
        eprintln!(
            "{unsettled} steps moved on before an instance settled (a refusing store, a wall-clock wait)"
        );
    }
    (failed, calls)
}

fn seeds_from_env(default: u64) -> (u64, u64) {
    let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    match var("SIM_SEED") {
        Some(seed) => (seed, 1),
        None => (
            var("SIM_FROM").unwrap_or(1),
            var("SIM_SEEDS").unwrap_or(default),
        ),
    }
}

fn fail_with_report(report: &Report) {
    for line in &report.trace {
        eprintln!("    {line}");
    }
    eprintln!(
        "seed {} broke {} promise(s); replay with SIM_SEED={}:",
        report.seed,
        report.violations.len(),
        report.seed
    );
    for violation in report.violations.iter().take(10) {
        eprintln!("  - {violation}");
    }
}

fn fail_with(failed: &[Report]) {
    assert!(failed.is_empty(), "{} seed(s) broke promises", failed.len());
}

fn sqlite() -> std::pin::Pin<Box<dyn std::future::Future<Output = Arc<dyn Store>>>> {
    Box::pin(crate::support::sqlite_store())
}

/// One PostgreSQL database for every seed (each in an environment of its own).
fn the_same(
    store: Arc<dyn Store>,
) -> impl Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = Arc<dyn Store>>>> {
    move || {
        let store = store.clone();
        Box::pin(async move { store })
    }
}

#[tokio::test]
async fn seeds_keep_every_promise_on_sqlite() {
    let (from, count) = seeds_from_env(120);
    let (failed, calls) = run_many(sqlite, from, count, Plant::None).await;
    assert!(calls > count, "the seeds made calls ({calls})");
    fail_with(&failed);
}

#[tokio::test]
async fn seeds_keep_every_promise_on_postgres() {
    let Some(db) = crate::support::PgTestDb::create().await else {
        return;
    };
    let (from, count) = seeds_from_env(50);
    let (failed, calls) = run_many(the_same(db.dyn_store()), from, count, Plant::None).await;
    assert!(calls > count, "the seeds made calls ({calls})");
    fail_with(&failed);
}

/// The SIGSTOP case of the audit, planted: an instance that does not see its own freeze calls
/// an occurrence another instance took over. The simulator finds a seed that shows it, and the
/// same seed keeps every promise with the fence in place.
#[tokio::test]
async fn finds_the_planted_stall() {
    // The hunt makes faults likelier than the runs of many seeds do; the defect is the same.
    const HUNT: u64 = 600;
    let mut found = None;
    for seed in 1..=400 {
        let report = run_seed(
            crate::support::sqlite_store().await,
            seed,
            0,
            HUNT,
            Plant::StallUnseen,
        )
        .await;
        if report
            .violations
            .iter()
            .any(|v| v.contains("after its success") || v.contains("in flight"))
        {
            found = Some(report);
            break;
        }
    }
    let found = found.expect("the simulator finds the planted stall within 400 seeds");
    eprintln!(
        "seed {} finds the planted stall: {:?}",
        found.seed,
        found.violations.first()
    );
    let fixed = run_seed(
        crate::support::sqlite_store().await,
        found.seed,
        0,
        HUNT,
        Plant::None,
    )
    .await;
    fail_with(
        &[fixed]
            .into_iter()
            .filter(|r| !r.violations.is_empty())
            .collect::<Vec<_>>(),
    );
}

/// The long mode: `SIM_SEEDS` seeds from `SIM_FROM` (`SIM_BACKEND=postgres` for PostgreSQL).
#[tokio::test]
#[ignore = "long: run on demand with SIM_SEEDS"]
async fn long() {
    let (from, count) = seeds_from_env(100_000);
    let started = std::time::Instant::now();
    let postgres = std::env::var("SIM_BACKEND").is_ok_and(|b| b == "postgres");
    let db = if postgres {
        crate::support::PgTestDb::create().await
    } else {
        None
    };
    let (failed, calls) = match &db {
        Some(db) => run_many(the_same(db.dyn_store()), from, count, Plant::None).await,
        None => run_many(sqlite, from, count, Plant::None).await,
    };
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "simulated {count} seeds from {from} on {} in {secs:.0} s ({:.1} seeds/s, {calls} calls): {} with violations",
        if db.is_some() { "PostgreSQL" } else { "SQLite" },
        count as f64 / secs,
        failed.len()
    );
    fail_with(&failed);
}
