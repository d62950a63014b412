//! The retry rule: exponential backoff (base × 2^retry, capped), with the schedule's own
//! `max_retries` as the only limit. Mechanical on purpose: business meaning stays with the
//! owning service.

use std::time::Duration;

/// Backoff settings. Defaults: 60 s base, 3600 s cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub base: Duration,
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(60),
            cap: Duration::from_secs(3600),
        }
    }
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// Try again after `delay`; the schedule's retry count becomes `retry_count`.
    Retry { delay: Duration, retry_count: i32 },
    /// Retries are exhausted: the job lands in the dead-letter queue.
    Exhausted,
}

impl RetryPolicy {
    /// The wait before retry number `retry + 1` (`retry` retries already made).
    pub fn backoff(&self, retry: u32) -> Duration {
        // 2^retry overflows quickly; once the factor alone passes the cap, the cap wins.
        let factor = 1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// Decides after a failed attempt, given the retries already made for this job and the
    /// schedule's limit.
    pub fn decide(&self, retries_made: i32, max_retries: i32) -> RetryDecision {
        if retries_made >= max_retries {
            RetryDecision::Exhausted
        } else {
            let made = u32::try_from(retries_made.max(0)).unwrap_or(0);
            RetryDecision::Retry {
                delay: self.backoff(made),
                retry_count: retries_made.max(0) + 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn default_backoff_doubles_from_a_minute_up_to_an_hour() {
        let policy = RetryPolicy::default();
        let secs: Vec<u64> = (0..9).map(|r| policy.backoff(r).as_secs()).collect();
        assert_eq!(secs, [60, 120, 240, 480, 960, 1920, 3600, 3600, 3600]);
        assert_eq!(policy.backoff(u32::MAX).as_secs(), 3600);
    }

    #[test]
    fn max_retries_is_the_only_limit() {
        let policy = RetryPolicy::default();
        assert_eq!(
            policy.decide(0, 3),
            RetryDecision::Retry {
                delay: Duration::from_secs(60),
                retry_count: 1
            }
        );
        assert_eq!(
            policy.decide(2, 3),
            RetryDecision::Retry {
                delay: Duration::from_secs(240),
                retry_count: 3
            }
        );
        assert_eq!(policy.decide(3, 3), RetryDecision::Exhausted);
        assert_eq!(
            policy.decide(0, 0),
            RetryDecision::Exhausted,
            "max_retries 0: straight to DLQ"
        );
    }

    #[test]
    fn base_and_cap_are_configurable() {
        let policy = RetryPolicy {
            base: Duration::from_millis(500),
            cap: Duration::from_secs(3),
        };
        let ms: Vec<u128> = (0..5).map(|r| policy.backoff(r).as_millis()).collect();
        assert_eq!(ms, [500, 1000, 2000, 3000, 3000]);
    }

    proptest! {
        #[test]
        fn backoff_is_monotonic_and_capped(base_ms in 1u64..100_000, cap_ms in 1u64..10_000_000, r in 0u32..64) {
            let policy = RetryPolicy { base: Duration::from_millis(base_ms), cap: Duration::from_millis(cap_ms) };
            prop_assert!(policy.backoff(r) <= policy.cap);
            prop_assert!(policy.backoff(r) <= policy.backoff(r + 1));
            prop_assert!(policy.backoff(0) == policy.base.min(policy.cap));
        }

        #[test]
        fn a_job_gets_exactly_max_retries_retries(max in 0i32..50) {
            let policy = RetryPolicy::default();
            let mut made = 0;
            while let RetryDecision::Retry { retry_count, .. } = policy.decide(made, max) {
                prop_assert_eq!(retry_count, made + 1);
                made = retry_count;
            }
            prop_assert_eq!(made, max);
        }
    }
}
