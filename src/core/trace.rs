//! Traces of attempts. A job's attempts form one trace whose id is the job's id, so the trace a
//! target continues from a call's W3C `traceparent` leads back to the job that made it, and
//! every instance names the same spans: each attempt is a span (`attempt`) with a child per
//! step it went through, `claim`, `hand-off`, `call` and `record`, their ids derived from the
//! job, the attempt and the step. The spans go to a [`SpanSink`]; without one (the default)
//! nothing is built.

use chrono::{DateTime, Utc};

use crate::core::model::{EnvId, Job, JobId, ScheduleId};

/// A trace id (16 bytes): a job's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceId(pub [u8; 16]);

/// A span id (8 bytes, never all zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanId(pub [u8; 8]);

impl TraceId {
    /// The trace of job `job`'s attempts.
    pub fn of(job: JobId) -> Self {
        TraceId(*job.0.as_bytes())
    }

    pub fn hex(&self) -> String {
        hex(&self.0)
    }
}

impl SpanId {
    pub fn hex(&self) -> String {
        hex(&self.0)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The steps of an attempt, each a span under the attempt's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Attempt,
    Claim,
    HandOff,
    Call,
    Record,
}

impl Step {
    /// The span's name.
    pub fn name(self) -> &'static str {
        match self {
            Step::Attempt => "attempt",
            Step::Claim => "claim",
            Step::HandOff => "hand-off",
            Step::Call => "call",
            Step::Record => "record",
        }
    }

    fn index(self) -> u64 {
        match self {
            Step::Attempt => 1,
            Step::Claim => 2,
            Step::HandOff => 3,
            Step::Call => 4,
            Step::Record => 5,
        }
    }
}

/// The span id of `step` of attempt `attempt` of `job`: a hash of the three (SplitMix64's
/// finalizer), the same on every instance.
pub fn span_id(job: JobId, attempt: i32, step: Step) -> SpanId {
    let id = job.0.as_u128();
    let mut x = (id as u64) ^ ((id >> 64) as u64).rotate_left(17);
    x ^= (u64::from(attempt.unsigned_abs()) << 8) | step.index();
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    SpanId(x.max(1).to_be_bytes())
}

/// The W3C `traceparent` of a call: the job's trace, the call's span, sampled.
pub fn traceparent(job: JobId, attempt: i32) -> String {
    format!(
        "00-{}-{}-01",
        TraceId::of(job).hex(),
        span_id(job, attempt, Step::Call).hex()
    )
}

/// The W3C `tracestate` of a call: sentin8-cron's entry, naming the attempt.
pub fn tracestate(attempt: i32) -> String {
    format!("sentin8-cron=attempt-{attempt}")
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Text(String),
    Int(i64),
}

/// A finished span.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    /// None for an attempt's own span (the root of its trace).
    pub parent: Option<SpanId>,
    pub name: &'static str,
    /// A call to another service (the proxy-back call), else work of sentin8-cron's own.
    pub client: bool,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub attributes: Vec<(&'static str, AttrValue)>,
    /// Why the step failed, when it did.
    pub error: Option<String>,
}

impl Span {
    /// Step `step` of `job`'s current attempt, from `start` to `end`, with the attempt's
    /// attributes: the schedule, the job, the environment and the attempt.
    pub fn step(
        step: Step,
        schedule: ScheduleId,
        env: EnvId,
        job: &Job,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> Self {
        // A claim opens the first attempt; its span belongs to that one.
        let attempt = job.attempt.max(1);
        Span {
            trace_id: TraceId::of(job.id),
            span_id: span_id(job.id, attempt, step),
            parent: (step != Step::Attempt).then(|| span_id(job.id, attempt, Step::Attempt)),
            name: step.name(),
            client: step == Step::Call,
            start,
            end: end.max(start),
            attributes: vec![
                (
                    "sentin8_cron.schedule_id",
                    AttrValue::Text(schedule.to_string()),
                ),
                ("sentin8_cron.job_id", AttrValue::Text(job.id.to_string())),
                ("sentin8_cron.env_id", AttrValue::Text(env.to_string())),
                ("sentin8_cron.attempt", AttrValue::Int(i64::from(attempt))),
                (
                    "sentin8_cron.scheduled_for",
                    AttrValue::Text(job.scheduled_for.to_rfc3339()),
                ),
            ],
            error: None,
        }
    }

    /// The same span, failed for `reason`.
    pub fn failed(mut self, reason: impl Into<String>) -> Self {
        self.error = Some(reason.into());
        self
    }
}

/// Where finished spans go (an exporter lives outside `core`).
pub trait SpanSink: Send + Sync + std::fmt::Debug {
    /// Whether spans are wanted at all: when not, the engine builds none.
    fn enabled(&self) -> bool;
    /// Takes finished spans; never blocks (a full queue drops them, and counts).
    fn export(&self, spans: Vec<Span>);
}

/// No spans: the default.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSpans;

impl SpanSink for NoSpans {
    fn enabled(&self) -> bool {
        false
    }

    fn export(&self, _spans: Vec<Span>) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calls_traceparent_names_the_jobs_trace_and_the_calls_span() {
        let job = JobId(uuid::Uuid::parse_str("01936f4e-8a4c-7a51-b2c4-6b1f0d2e9a10").unwrap());
        let header = traceparent(job, 2);
        let parts: Vec<&str> = header.split('-').collect();
        assert_eq!(parts.len(), 4);
        assert_eq!(parts[0], "00");
        assert_eq!(parts[1], "01936f4e8a4c7a51b2c46b1f0d2e9a10");
        assert_eq!(parts[2], span_id(job, 2, Step::Call).hex());
        assert_eq!(parts[2].len(), 16);
        assert_eq!(parts[3], "01");
        assert_eq!(tracestate(2), "sentin8-cron=attempt-2");
    }

    #[test]
    fn span_ids_differ_by_step_and_attempt_and_agree_everywhere() {
        let job = JobId(uuid::Uuid::now_v7());
        let mut seen = std::collections::HashSet::new();
        for attempt in 1..=4 {
            for step in [
                Step::Attempt,
                Step::Claim,
                Step::HandOff,
                Step::Call,
                Step::Record,
            ] {
                let id = span_id(job, attempt, step);
                assert_ne!(id.0, [0; 8]);
                assert_eq!(id, span_id(job, attempt, step));
                assert!(seen.insert(id), "{attempt} {step:?}");
            }
        }
    }
}
