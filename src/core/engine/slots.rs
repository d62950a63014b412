//! The producer's slots: calls in flight under one global limit and caps per environment and
//! per target origin, and the outcomes waiting to be recorded under the record backlog. Plain
//! counts owned by the producer's task; a claim round works on a copy (its budget).

use std::collections::HashMap;

use super::parts::EngineConfig;
use crate::core::model::*;

/// Finished attempts that may wait to be recorded, per global slot: calls go on while records
/// lag (a burst, a slow database), within this bound. With the default 256 slots it is 65,536:
/// more than the fires an instance holds (`held::HELD_MAX`), so a burst's calls never wait for
/// its records (they hold what the held fires held, moved on).
const RECORD_BACKLOG_PER_SLOT: usize = 256;

/// How many finished attempts may wait to be recorded at once.
pub(super) fn backlog_cap(config: &EngineConfig) -> usize {
    config
        .concurrency
        .max(1)
        .saturating_mul(RECORD_BACKLOG_PER_SLOT)
}

/// How fast calls are assumed to start, per global slot, before it was measured: 25 ms a call
/// (10,240 a second with the default 256 slots; a fast target on loopback takes about 15).
/// Too high a guess costs renewals of a first burst's last fires; too low a one, a dead
/// instance's fires released later than they need be.
const DRAIN_RATE_GUESS_PER_SLOT: f64 = 40.0;

/// A drain rate is measured over this long of waiting attempts at most (or until none wait).
const DRAIN_SAMPLE: std::time::Duration = std::time::Duration::from_millis(500);

/// Fewer calls than this in a window say too little to be a sample.
const DRAIN_SAMPLE_MIN_CALLS: u64 = 100;

/// How fast calls start while attempts wait for a slot (calls a second, a moving average): how
/// fast a burst's queue drains, which sizes the leases of the fires a hand-off queues behind
/// others (`wake::hand_off_lease`). Pure: the producer passes its monotonic clock's readings.
#[derive(Debug, Clone)]
pub(super) struct DrainRate {
    rate: f64,
    /// Since when (monotonic) attempts have waited, and the calls started since.
    window: Option<(std::time::Duration, u64)>,
}

impl DrainRate {
    pub fn new(config: &EngineConfig) -> Self {
        Self {
            rate: config.concurrency.max(1) as f64 * DRAIN_RATE_GUESS_PER_SLOT,
            window: None,
        }
    }

    /// Calls a second, as measured.
    pub fn per_second(&self) -> f64 {
        self.rate
    }

    /// `started` calls started at `now`, and attempts still `waiting` for a slot or not. A
    /// window opens when calls leave a queue behind and closes when it is empty or a sample
    /// long; calls that start with nothing waiting say nothing of a queue's drain.
    pub fn observe(&mut self, now: std::time::Duration, started: usize, waiting: bool) {
        let Some((since, count)) = &mut self.window else {
            if waiting {
                self.window = Some((now, 0));
            }
            return;
        };
        *count += started as u64;
        let elapsed = now.saturating_sub(*since);
        if elapsed < DRAIN_SAMPLE && waiting {
            return;
        }
        if *count >= DRAIN_SAMPLE_MIN_CALLS && !elapsed.is_zero() {
            let sample = *count as f64 / elapsed.as_secs_f64();
            self.rate = (self.rate + sample) / 2.0;
        }
        self.window = waiting.then_some((now, 0));
    }
}

/// The unit of the per-origin cap and of the circuit breaker: the schedule's environment and
/// its target origin (scheme, host and port). Keyed per environment, so one tenant's hanging
/// or refusing endpoint neither opens the circuit for another tenant's calls to the same
/// origin nor takes their slots.
pub(super) fn origin_of(schedule: &Schedule) -> Option<String> {
    let base = schedule.target.base_url().ok()?;
    Some(format!(
        "{} {}",
        schedule.env_id,
        base.as_url().origin().ascii_serialization()
    ))
}

/// The origin part of an [`origin_of`] key, for messages.
pub(super) fn origin_shown(key: &str) -> &str {
    key.split_once(' ').map_or(key, |(_, origin)| origin)
}

/// One call's place: under the global limit, its environment's cap and its origin's.
#[derive(Debug)]
pub(super) struct Slot {
    pub env: EnvId,
    pub origin: Option<String>,
}

#[derive(Debug, Clone)]
pub(super) struct Slots {
    limit: usize,
    env_cap: usize,
    origin_cap: usize,
    backlog_cap: usize,
    calls: usize,
    envs: HashMap<EnvId, usize>,
    origins: HashMap<String, usize>,
    /// Attempts whose call took a slot and whose outcome is not recorded yet.
    unrecorded: usize,
}

impl Slots {
    pub fn new(config: &EngineConfig) -> Self {
        let limit = config.concurrency.max(1);
        Self {
            limit,
            env_cap: config.env_concurrency,
            origin_cap: config.origin_concurrency,
            backlog_cap: backlog_cap(config),
            calls: 0,
            envs: HashMap::new(),
            origins: HashMap::new(),
            unrecorded: 0,
        }
    }

    /// Calls that may start now: free global slots with room in the record backlog.
    pub fn room(&self) -> usize {
        (self.limit - self.calls.min(self.limit))
            .min(self.backlog_cap.saturating_sub(self.unrecorded))
    }

    /// True while a call holds a slot or an outcome waits to be recorded (one will be freed).
    pub fn busy(&self) -> bool {
        self.calls > 0 || self.unrecorded > 0
    }

    /// True while no finished call's outcome waits to be recorded (calls may be in flight).
    pub fn all_recorded(&self) -> bool {
        self.unrecorded == self.calls
    }

    /// A slot for a call to `env` (and `origin`, when known), or `None` when the global limit,
    /// the backlog or either cap is full.
    pub fn reserve(&mut self, env: EnvId, origin: Option<String>) -> Option<Slot> {
        if self.room() == 0 || self.envs.get(&env).copied().unwrap_or(0) >= self.env_cap {
            return None;
        }
        if let Some(origin) = &origin
            && self.origins.get(origin).copied().unwrap_or(0) >= self.origin_cap
        {
            return None;
        }
        self.calls += 1;
        self.unrecorded += 1;
        *self.envs.entry(env).or_default() += 1;
        if let Some(origin) = &origin {
            *self.origins.entry(origin.clone()).or_default() += 1;
        }
        Some(Slot { env, origin })
    }

    /// A slot for a call to `schedule`'s target.
    pub fn reserve_for(&mut self, schedule: &Schedule) -> Option<Slot> {
        self.reserve(schedule.env_id, origin_of(schedule))
    }

    /// The call in `slot` ended: its places are free; its outcome still waits to be recorded.
    pub fn call_ended(&mut self, slot: Slot) {
        self.calls = self.calls.saturating_sub(1);
        decrement(&mut self.envs, &slot.env);
        if let Some(origin) = &slot.origin {
            decrement(&mut self.origins, origin);
        }
    }

    /// An outcome that took a slot is recorded.
    /// A slot whose call never started: its call and its backlog place are free again.
    pub fn give_back(&mut self, slot: Slot) {
        self.call_ended(slot);
        self.recorded();
    }

    pub fn recorded(&mut self) {
        self.unrecorded = self.unrecorded.saturating_sub(1);
    }
}

fn decrement<K: std::hash::Hash + Eq>(map: &mut HashMap<K, usize>, key: &K) {
    if let Some(n) = map.get_mut(key) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            map.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(concurrency: usize, env: usize, origin: usize) -> EngineConfig {
        EngineConfig {
            concurrency,
            env_concurrency: env,
            origin_concurrency: origin,
            ..EngineConfig::default()
        }
    }

    #[test]
    fn a_slot_is_held_under_every_cap_and_its_backlog_place_until_recorded() {
        let mut slots = Slots::new(&config(3, 2, 1));
        let (a, b) = (EnvId::new(), EnvId::new());
        let one = slots.reserve(a, Some("a x".into())).unwrap();
        assert!(slots.reserve(a, Some("a x".into())).is_none(), "origin cap");
        let two = slots.reserve(a, None).unwrap();
        assert!(slots.reserve(a, None).is_none(), "environment cap");
        let three = slots.reserve(b, None).unwrap();
        assert!(slots.reserve(b, None).is_none(), "global limit");
        assert_eq!(slots.room(), 0);
        slots.call_ended(one);
        assert_eq!(slots.room(), 1);
        assert!(slots.busy());
        slots.call_ended(two);
        slots.call_ended(three);
        assert!(slots.busy(), "three outcomes wait to be recorded");
        for _ in 0..3 {
            slots.recorded();
        }
        assert!(!slots.busy());
        assert_eq!(slots.room(), 3);
    }

    #[test]
    fn a_full_backlog_stops_calls_although_slots_are_free() {
        let mut slots = Slots::new(&config(1, 1, 1));
        let env = EnvId::new();
        for _ in 0..RECORD_BACKLOG_PER_SLOT {
            let slot = slots.reserve(env, None).unwrap();
            slots.call_ended(slot);
        }
        assert_eq!(slots.room(), 0);
        assert!(slots.reserve(env, None).is_none());
        slots.recorded();
        assert!(slots.reserve(env, None).is_some());
    }

    #[test]
    fn the_drain_rate_is_measured_only_while_attempts_wait() {
        let ms = std::time::Duration::from_millis;
        let mut drain = DrainRate::new(&config(100, 100, 100));
        assert_eq!(drain.per_second(), 4_000.0, "the guess: 40 a second a slot");
        // Calls with nothing left waiting say nothing.
        drain.observe(ms(0), 500, false);
        assert_eq!(drain.per_second(), 4_000.0);
        // A queue: 3,000 calls over the next 500 ms (6,000 a second) is a sample.
        drain.observe(ms(1_000), 100, true);
        drain.observe(ms(1_250), 1_500, true);
        assert_eq!(drain.per_second(), 4_000.0, "half a sample so far");
        drain.observe(ms(1_500), 1_500, true);
        assert_eq!(drain.per_second(), (4_000.0 + 6_000.0) / 2.0);
        // The queue empties 100 ms later with 1,000 more: 10,000 a second.
        drain.observe(ms(1_600), 1_000, false);
        assert_eq!(drain.per_second(), (5_000.0 + 10_000.0) / 2.0);
        // Too few calls in a window to say anything.
        drain.observe(ms(2_000), 10, true);
        drain.observe(ms(2_600), 10, false);
        assert_eq!(drain.per_second(), 7_500.0);
    }
}
