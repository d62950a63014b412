//! Request rate limits of the API: a token bucket per client (the token's subject) and one per
//! environment, so one tenant's flood is answered 429 quickly instead of queueing everyone's
//! requests behind it. A request takes one token from its client's bucket when it is
//! authenticated and one from its environment's bucket when the environment is resolved; an
//! empty bucket answers `429 Too Many Requests` with `Retry-After`. Work a request queues
//! beyond itself (a backfill's occurrences) is charged to its environment afterwards. Buckets refill on the
//! injected clock, so tests move time rather than wait.
//!
//! Memory: one small entry per client and environment seen; once there are more than
//! [`PRUNE_ABOVE`], the entries whose bucket has refilled (idle ones) are dropped.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::Hash;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};

use crate::core::model::EnvId;

/// Entries kept before idle ones are dropped.
pub const PRUNE_ABOVE: usize = 10_000;

/// A sustained rate and the burst above it; `per_second == 0` turns the limit off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub per_second: f64,
    pub burst: f64,
}

impl Rate {
    /// No limit.
    pub const OFF: Rate = Rate {
        per_second: 0.0,
        burst: 0.0,
    };

    /// `per_second` sustained, with bursts of up to twice as many.
    pub fn per_second(per_second: u32) -> Rate {
        Rate {
            per_second: f64::from(per_second),
            burst: f64::from(per_second) * 2.0,
        }
    }

    fn is_on(&self) -> bool {
        self.per_second > 0.0
    }
}

/// The API's rate limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateSettings {
    /// Per client: the authenticated token's subject.
    pub per_client: Rate,
    /// Per environment, whoever the clients are.
    pub per_env: Rate,
}

impl Default for RateSettings {
    fn default() -> Self {
        Self {
            per_client: Rate::per_second(100),
            per_env: Rate::per_second(200),
        }
    }
}

impl RateSettings {
    /// No limits at all.
    pub const OFF: RateSettings = RateSettings {
        per_client: Rate::OFF,
        per_env: Rate::OFF,
    };
}

/// Which limit refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limited {
    Client,
    Environment,
}

/// A refusal: which limit, and when a token will be there again (whole seconds, at least 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimited {
    pub limit: Limited,
    pub retry_after_secs: u64,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: DateTime<Utc>,
}

/// Token buckets by key, under one rate.
#[derive(Debug)]
struct Buckets<K> {
    rate: Rate,
    buckets: Mutex<HashMap<K, Bucket>>,
}

impl<K: Eq + Hash + Clone> Buckets<K> {
    fn new(rate: Rate) -> Self {
        Self {
            rate,
            buckets: Mutex::default(),
        }
    }

    /// Takes one token of `key`'s bucket at `now`, or says how long until one is there.
    fn take(&self, key: &K, now: DateTime<Utc>) -> Result<(), u64> {
        let Rate { per_second, burst } = self.rate;
        if per_second <= 0.0 {
            return Ok(());
        }
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() > PRUNE_ABOVE {
            buckets.retain(|_, b| refilled(b, per_second, burst, now) < burst);
        }
        let bucket = buckets.entry(key.clone()).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        bucket.tokens = refilled(bucket, per_second, burst, now);
        // A clock that went back refills nothing and keeps the later instant.
        bucket.at = bucket.at.max(now);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(());
        }
        let wait = (1.0 - bucket.tokens) / per_second;
        Err((wait.ceil() as u64).max(1))
    }
}

impl<K: Eq + Hash + Clone> Buckets<K> {
    /// Spends `units` more of `key`'s bucket at `now` for work already let through, as far as
    /// the bucket holds (it empties, never goes below empty): the next requests wait for the
    /// refill.
    fn spend(&self, key: &K, units: f64, now: DateTime<Utc>) {
        let Rate { per_second, burst } = self.rate;
        if per_second <= 0.0 || units <= 0.0 {
            return;
        }
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(bucket) = buckets.get_mut(key) {
            bucket.tokens = (refilled(bucket, per_second, burst, now) - units).max(0.0);
            bucket.at = bucket.at.max(now);
        }
    }
}

fn refilled(bucket: &Bucket, per_second: f64, burst: f64, now: DateTime<Utc>) -> f64 {
    let elapsed = (now - bucket.at)
        .num_microseconds()
        .unwrap_or(i64::MAX)
        .max(0) as f64
        / 1e6;
    (bucket.tokens + elapsed * per_second).min(burst)
}

/// The API's buckets and the count of each outcome (no tenant labels).
#[derive(Debug)]
pub struct RateLimits {
    clients: Buckets<String>,
    envs: Buckets<EnvId>,
    allowed: AtomicU64,
    limited_client: AtomicU64,
    limited_env: AtomicU64,
}

impl RateLimits {
    pub fn new(settings: RateSettings) -> Self {
        Self {
            clients: Buckets::new(settings.per_client),
            envs: Buckets::new(settings.per_env),
            allowed: AtomicU64::new(0),
            limited_client: AtomicU64::new(0),
            limited_env: AtomicU64::new(0),
        }
    }

    /// Takes one request of `subject`'s budget.
    pub fn client(&self, subject: &str, now: DateTime<Utc>) -> Result<(), RateLimited> {
        if !self.clients.rate.is_on() {
            return Ok(());
        }
        self.clients
            .take(&subject.to_owned(), now)
            .map_err(|retry_after_secs| {
                self.limited_client.fetch_add(1, Ordering::Relaxed);
                RateLimited {
                    limit: Limited::Client,
                    retry_after_secs,
                }
            })
    }

    /// Takes one request of `env`'s budget; a request let through both limits is counted
    /// as allowed here.
    pub fn env(&self, env: EnvId, now: DateTime<Utc>) -> Result<(), RateLimited> {
        let taken = self.envs.take(&env, now).map_err(|retry_after_secs| {
            self.limited_env.fetch_add(1, Ordering::Relaxed);
            RateLimited {
                limit: Limited::Environment,
                retry_after_secs,
            }
        });
        if taken.is_ok() {
            self.allowed.fetch_add(1, Ordering::Relaxed);
        }
        taken
    }

    /// Charges `env` for `units` requests' worth of work beyond the request that asked for it
    /// (a backfill pays for each occurrence it queued), as far as its bucket holds.
    pub fn charge_env(&self, env: EnvId, units: u64, now: DateTime<Utc>) {
        self.envs.spend(&env, units as f64, now);
    }

    /// The outcomes as Prometheus text.
    pub fn render(&self, out: &mut String) {
        let name = "sentin8_cron_api_rate_limit_total";
        let _ = writeln!(
            out,
            "# HELP {name} API requests by rate-limit outcome: allowed (environment-scoped requests let through both limits), limited_client, limited_environment.\n# TYPE {name} counter"
        );
        for (outcome, count) in [
            ("allowed", &self.allowed),
            ("limited_client", &self.limited_client),
            ("limited_environment", &self.limited_env),
        ] {
            let _ = writeln!(
                out,
                "{name}{{outcome=\"{outcome}\"}} {}",
                count.load(Ordering::Relaxed)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::{Duration, TimeZone};
    use proptest::prelude::*;

    use super::*;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 4, 12, 0, 0).unwrap()
    }

    #[test]
    fn a_bucket_allows_its_burst_then_its_rate() {
        let buckets = Buckets::new(Rate {
            per_second: 2.0,
            burst: 4.0,
        });
        let key = "svc".to_owned();
        for _ in 0..4 {
            buckets.take(&key, t0()).unwrap();
        }
        assert_eq!(buckets.take(&key, t0()), Err(1));
        // Half a second later, one token has come back.
        let later = t0() + Duration::milliseconds(500);
        buckets.take(&key, later).unwrap();
        assert_eq!(buckets.take(&key, later), Err(1));
        // Another key has its own bucket.
        buckets.take(&"other".to_owned(), later).unwrap();
        // A long pause refills to the burst, never beyond it.
        let much_later = later + Duration::hours(1);
        for _ in 0..4 {
            buckets.take(&key, much_later).unwrap();
        }
        assert!(buckets.take(&key, much_later).is_err());
    }

    #[test]
    fn a_charge_empties_the_environment_s_bucket_and_no_further() {
        let limits = RateLimits::new(RateSettings {
            per_client: Rate::OFF,
            per_env: Rate::per_second(10),
        });
        let (env, other) = (EnvId::new(), EnvId::new());
        limits.env(env, t0()).unwrap();
        limits.env(other, t0()).unwrap();
        // A thousand occurrences' worth: the burst of 20 is spent, not a debt of 980.
        limits.charge_env(env, 999, t0());
        let refused = limits.env(env, t0()).unwrap_err();
        assert_eq!(refused.retry_after_secs, 1);
        assert!(
            limits.env(other, t0()).is_ok(),
            "another environment pays nothing"
        );
        let later = t0() + chrono::Duration::milliseconds(100);
        assert!(limits.env(env, later).is_ok(), "refilled at the rate");
    }

    #[test]
    fn retry_after_is_the_wait_for_one_token_in_whole_seconds() {
        let slow = Buckets::new(Rate {
            per_second: 0.25,
            burst: 1.0,
        });
        let key = 1u8;
        slow.take(&key, t0()).unwrap();
        assert_eq!(slow.take(&key, t0()), Err(4));
        assert_eq!(slow.take(&key, t0() + Duration::seconds(3)), Err(1));
        slow.take(&key, t0() + Duration::seconds(4)).unwrap();
    }

    #[test]
    fn a_clock_that_goes_back_refills_nothing() {
        let buckets = Buckets::new(Rate {
            per_second: 1.0,
            burst: 1.0,
        });
        buckets.take(&0u8, t0()).unwrap();
        assert!(buckets.take(&0u8, t0() - Duration::seconds(30)).is_err());
        assert!(buckets.take(&0u8, t0()).is_err());
        buckets.take(&0u8, t0() + Duration::seconds(1)).unwrap();
    }

    #[test]
    fn off_means_unlimited_and_idle_entries_are_pruned() {
        let limits = RateLimits::new(RateSettings::OFF);
        for _ in 0..10_000 {
            limits.client("svc", t0()).unwrap();
            limits.env(EnvId::new(), t0()).unwrap();
        }
        let buckets = Buckets::new(Rate::per_second(1));
        for n in 0..=PRUNE_ABOVE {
            buckets.take(&n, t0()).unwrap();
        }
        // All of them full again a few seconds later: the next take prunes them.
        buckets.take(&0, t0() + Duration::seconds(5)).unwrap();
        assert_eq!(buckets.buckets.lock().unwrap().len(), 1);
    }

    #[test]
    fn outcomes_are_counted_without_tenant_labels() {
        let limits = RateLimits::new(RateSettings {
            per_client: Rate {
                per_second: 1.0,
                burst: 1.0,
            },
            per_env: Rate {
                per_second: 1.0,
                burst: 2.0,
            },
        });
        let env = EnvId::new();
        limits.client("a", t0()).unwrap();
        limits.env(env, t0()).unwrap();
        assert!(limits.client("a", t0()).is_err());
        limits.client("b", t0()).unwrap();
        limits.env(env, t0()).unwrap();
        limits.client("c", t0()).unwrap();
        let refused = limits.env(env, t0()).unwrap_err();
        assert_eq!(refused.limit, Limited::Environment);
        let mut text = String::new();
        limits.render(&mut text);
        assert!(text.contains("outcome=\"allowed\"} 2"), "{text}");
        assert!(text.contains("outcome=\"limited_client\"} 1"), "{text}");
        assert!(
            text.contains("outcome=\"limited_environment\"} 1"),
            "{text}"
        );
        assert!(!text.contains(&env.to_string()));
    }

    proptest! {
        /// Whatever the pattern of requests, a bucket never lets through more than its burst
        /// plus what its rate refilled over the span.
        #[test]
        fn never_more_than_burst_plus_rate_times_span(
            steps in proptest::collection::vec(0i64..400, 1..300),
            per_second in 1u32..20,
        ) {
            let rate = Rate::per_second(per_second);
            let buckets = Buckets::new(rate);
            let mut now = t0();
            let mut allowed = 0u32;
            for step in &steps {
                now += Duration::milliseconds(*step);
                if buckets.take(&0u8, now).is_ok() {
                    allowed += 1;
                }
            }
            let span = (now - t0()).num_milliseconds() as f64 / 1000.0;
            prop_assert!(f64::from(allowed) <= rate.burst + span * rate.per_second + 1e-9);
        }
    }
}
