//! The proxy-back calls as an operator watches them: each call's duration by the class of what
//! came back, and the circuit breakers (how many circuits are not closed, how often one opened,
//! how many calls they failed fast).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use super::Histogram;
use crate::core::dispatch::DispatchError;

/// What came back from a call, as a label: the HTTP status class, or why there was none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallClass {
    Status2xx,
    Status3xx,
    Status4xx,
    Status5xx,
    /// No answer within the job timeout.
    Timeout,
    /// The connection failed (refused, reset, TLS).
    ConnectionError,
    /// The call never left: the target or the credentials are misconfigured, or the egress
    /// policy refused it.
    NotSent,
}

impl CallClass {
    const ALL: [CallClass; 7] = [
        CallClass::Status2xx,
        CallClass::Status3xx,
        CallClass::Status4xx,
        CallClass::Status5xx,
        CallClass::Timeout,
        CallClass::ConnectionError,
        CallClass::NotSent,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            CallClass::Status2xx => "2xx",
            CallClass::Status3xx => "3xx",
            CallClass::Status4xx => "4xx",
            CallClass::Status5xx => "5xx",
            CallClass::Timeout => "timeout",
            CallClass::ConnectionError => "connection_error",
            CallClass::NotSent => "not_sent",
        }
    }

    /// The class of a failed call. A body that did not decode came with a success status.
    pub fn of_error(err: &DispatchError) -> Self {
        match err {
            DispatchError::Status(code, _) => match code / 100 {
                2 => CallClass::Status2xx,
                3 => CallClass::Status3xx,
                4 => CallClass::Status4xx,
                _ => CallClass::Status5xx,
            },
            DispatchError::Decode(_) => CallClass::Status2xx,
            DispatchError::Timeout(_) => CallClass::Timeout,
            DispatchError::Transport(_) => CallClass::ConnectionError,
            DispatchError::MissingBaseUrl
            | DispatchError::InvalidBaseUrl(_)
            | DispatchError::EgressRefused
            | DispatchError::NoTokenSource
            | DispatchError::Token(_)
            | DispatchError::LeaseUnsure => CallClass::NotSent,
        }
    }

    fn index(self) -> usize {
        Self::ALL.iter().position(|c| *c == self).unwrap_or(0)
    }
}

const CALL_BOUNDS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// The calls' and the breakers' metrics.
#[derive(Debug)]
pub struct CallMetrics {
    durations: Vec<Histogram>,
    /// Origins whose circuit is not closed (open, or waiting for a probe to close it), as of
    /// the last call to a troubled origin.
    pub breakers_open: AtomicI64,
    pub breaker_openings: AtomicU64,
    pub breaker_rejections: AtomicU64,
    /// Calls in flight aborted by their instance: the job was no longer its own.
    pub aborted: AtomicU64,
}

impl Default for CallMetrics {
    fn default() -> Self {
        Self {
            durations: CallClass::ALL
                .iter()
                .map(|_| Histogram::new(CALL_BOUNDS))
                .collect(),
            breakers_open: AtomicI64::new(0),
            breaker_openings: AtomicU64::new(0),
            breaker_rejections: AtomicU64::new(0),
            aborted: AtomicU64::new(0),
        }
    }
}

impl CallMetrics {
    /// Records one call that ended as `class` after `took`.
    pub fn observe(&self, class: CallClass, took: Duration) {
        self.durations[class.index()].observe(took);
    }

    /// Calls so far that ended as `class`.
    pub fn count(&self, class: CallClass) -> u64 {
        self.durations[class.index()].count()
    }

    pub(super) fn render(&self, out: &mut String) {
        let name = "sentin8_cron_call_duration_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Proxy-back calls by what came back (status_class: 2xx to 5xx, timeout, connection_error, not_sent), from the request leaving to its answer.\n# TYPE {name} histogram"
        );
        for (class, histogram) in CallClass::ALL.iter().zip(&self.durations) {
            histogram.render_series(out, name, &format!("status_class=\"{}\",", class.as_str()));
        }
        let _ = writeln!(
            out,
            "# HELP sentin8_cron_breakers_open Target origins whose circuit is not closed (open, or waiting for a probe), as of the last call to one.\n\
             # TYPE sentin8_cron_breakers_open gauge\n\
             sentin8_cron_breakers_open {}\n\
             # HELP sentin8_cron_breaker_openings_total Circuits opened after consecutive timeouts or refusals (or a failed probe).\n\
             # TYPE sentin8_cron_breaker_openings_total counter\n\
             sentin8_cron_breaker_openings_total {}\n\
             # HELP sentin8_cron_breaker_rejections_total Calls failed fast because their origin's circuit was open.\n\
             # TYPE sentin8_cron_breaker_rejections_total counter\n\
             sentin8_cron_breaker_rejections_total {}\n\
             # HELP sentin8_cron_calls_aborted_total Calls in flight aborted because their job was no longer the instance's (cancelled for a newer occurrence, or taken over).\n\
             # TYPE sentin8_cron_calls_aborted_total counter\n\
             sentin8_cron_calls_aborted_total {}",
            self.breakers_open.load(Ordering::Relaxed),
            self.breaker_openings.load(Ordering::Relaxed),
            self.breaker_rejections.load(Ordering::Relaxed),
            self.aborted.load(Ordering::Relaxed),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_fall_in_their_class() {
        let class = |e: DispatchError| CallClass::of_error(&e).as_str();
        assert_eq!(class(DispatchError::Status(503, String::new())), "5xx");
        assert_eq!(class(DispatchError::Status(404, String::new())), "4xx");
        assert_eq!(class(DispatchError::Status(308, String::new())), "3xx");
        assert_eq!(class(DispatchError::Decode("x".into())), "2xx");
        assert_eq!(
            class(DispatchError::Timeout(Duration::from_secs(1))),
            "timeout"
        );
        assert_eq!(
            class(DispatchError::Transport("tls".into())),
            "connection_error"
        );
        assert_eq!(class(DispatchError::EgressRefused), "not_sent");
    }

    #[test]
    fn every_class_renders_its_series_under_one_family() {
        let calls = CallMetrics::default();
        calls.observe(CallClass::Status5xx, Duration::from_millis(30));
        let mut text = String::new();
        calls.render(&mut text);
        assert_eq!(
            text.matches("# TYPE sentin8_cron_call_duration_seconds histogram")
                .count(),
            1
        );
        assert!(text.contains(
            "sentin8_cron_call_duration_seconds_bucket{status_class=\"5xx\",le=\"0.05\"} 1\n"
        ));
        assert!(
            text.contains("sentin8_cron_call_duration_seconds_count{status_class=\"5xx\"} 1\n")
        );
        assert!(
            text.contains("sentin8_cron_call_duration_seconds_count{status_class=\"2xx\"} 0\n")
        );
    }
}
