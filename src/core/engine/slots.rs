//! The producer's slots: calls in flight under one global limit and caps per environment and
//! per target origin, and the outcomes waiting to be recorded under the record backlog. Plain
//! counts owned by the producer's task; a claim round works on a copy (its budget).

use std::collections::HashMap;

use super::parts::EngineConfig;
use crate::core::model::*;

/// Finished attempts that may wait to be recorded, per global slot: calls go on while records
/// lag (a burst, a slow database), within this bound.
const RECORD_BACKLOG_PER_SLOT: usize = 64;

/// How many finished attempts may wait to be recorded at once.
pub(super) fn backlog_cap(config: &EngineConfig) -> usize {
    config
        .concurrency
        .max(1)
        .saturating_mul(RECORD_BACKLOG_PER_SLOT)
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
}
