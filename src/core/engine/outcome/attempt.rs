//! What one attempt is on its way to its record: its call's result (`Failure` when it
//! failed, with its class and what the ledger keeps of it), the attempt itself (`Attempt`),
//! and the answer written ahead of the record (`encode_answer`, `answered`).

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::core::dispatch::{DispatchError, FailureClass};
use crate::core::model::*;
use crate::core::store::*;

/// What the attempt ledger records of a call beyond its outcome: when it started, the status
/// and an excerpt of the answer (the stored result on success), and the failure's kind.
pub(in crate::core::engine) fn attempt_detail(
    job: &Job,
    result: &Result<Value, Failure>,
    ended_at: Option<DateTime<Utc>>,
) -> AttemptDetail {
    match result {
        Ok(answer) => AttemptDetail {
            started_at: job.started_at,
            ended_at,
            http_status: None,
            error_class: None,
            response_excerpt: match answer {
                Value::Null => None,
                other => AttemptDetail::excerpt(&other.to_string()),
            },
        },
        Err(failure) => AttemptDetail {
            started_at: job.started_at,
            ended_at,
            http_status: failure.http_status,
            error_class: Some(failure.kind.to_owned()),
            response_excerpt: failure.excerpt.as_deref().and_then(AttemptDetail::excerpt),
        },
    }
}

/// A failed attempt: its class decides between retrying and dead-lettering at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::core::engine) struct Failure {
    pub class: FailureClass,
    /// What the job and a DLQ entry record; a configuration failure starts with
    /// `configuration: `.
    pub message: String,
    /// Retry at once rather than after the backoff (the attempt was lost, not refused).
    pub retry_now: bool,
    /// The attempt ledger's error class (see [`DispatchError::kind`]).
    pub kind: &'static str,
    /// The status the service answered with, if it answered.
    pub http_status: Option<u16>,
    /// The start of the answer's body, if it answered with one.
    pub excerpt: Option<String>,
}

impl Failure {
    pub(in crate::core::engine) fn of(err: &DispatchError) -> Failure {
        let class = err.class();
        let message = match class {
            FailureClass::Configuration => format!("{}: {err}", FailureClass::CONFIGURATION),
            FailureClass::Retryable => err.to_string(),
        };
        let (http_status, excerpt) = match err {
            DispatchError::Status(code, excerpt) => (Some(*code), Some(excerpt.clone())),
            _ => (None, None),
        };
        Failure {
            class,
            message,
            retry_now: false,
            kind: err.kind(),
            http_status,
            excerpt,
        }
    }

    /// Whether this failure stands for an attempt recovered from a stopped instance.
    pub(in crate::core::engine) fn is_abandoned(&self) -> bool {
        self.kind == Self::ABANDONED
    }

    /// An attempt whose instance stopped before recording it: retried at once (it was lost,
    /// not refused).
    pub(in crate::core::engine) fn abandoned(message: String) -> Failure {
        Failure {
            class: FailureClass::Retryable,
            message,
            retry_now: true,
            kind: Self::ABANDONED,
            http_status: None,
            excerpt: None,
        }
    }

    /// A call not made because its origin's circuit is open.
    pub(in crate::core::engine) fn circuit_open(message: String) -> Failure {
        Failure {
            class: FailureClass::Retryable,
            message,
            retry_now: false,
            kind: Self::CIRCUIT_OPEN,
            http_status: None,
            excerpt: None,
        }
    }

    /// A call aborted by its instance, which no longer holds the job: cancelled for a newer
    /// occurrence (overlap `cancel_other`) or taken over elsewhere. Its record is refused by
    /// the job's fence; nothing is retried because of it.
    pub(in crate::core::engine) fn aborted() -> Failure {
        Failure {
            class: FailureClass::Retryable,
            message: "the call was aborted: this instance no longer holds the job".to_owned(),
            retry_now: false,
            kind: Self::ABORTED,
            http_status: None,
            excerpt: None,
        }
    }

    /// A call that panicked (a defect, not the target's doing): retried after the backoff.
    pub(in crate::core::engine) fn panicked() -> Failure {
        Failure {
            class: FailureClass::Retryable,
            message: "the call failed inside the scheduler (an internal error)".to_owned(),
            retry_now: false,
            kind: Self::INTERNAL,
            http_status: None,
            excerpt: None,
        }
    }

    /// The ledger's error class of a call that failed inside the scheduler.
    pub(in crate::core::engine) const INTERNAL: &'static str = "internal";
    /// The ledger's error class of an abandoned attempt.
    pub(in crate::core::engine) const ABANDONED: &'static str = "abandoned";
    /// The ledger's error class of a call its instance aborted.
    pub(in crate::core::engine) const ABORTED: &'static str = "aborted";
    /// The ledger's error class of a call the open circuit refused.
    pub(in crate::core::engine) const CIRCUIT_OPEN: &'static str = "circuit_open";
    /// The ledger's error class of an error status (see [`DispatchError::kind`]).
    pub(in crate::core::engine) const STATUS: &'static str = "status";
    /// The ledger's error class of an answer that could not be decoded.
    pub(in crate::core::engine) const DECODE: &'static str = "decode";
}

/// One attempt's call, waiting to be recorded.
#[derive(Clone)]
pub(in crate::core::engine) struct Attempt {
    pub schedule: Schedule,
    pub job: Job,
    pub result: Result<Value, Failure>,
    /// When the call returned (`None` for an attempt recovered from another instance): the
    /// attempt ledger's end and duration are the call's, not its record's.
    pub ended_at: Option<DateTime<Utc>>,
    /// Its answer was written ahead of the record (see [`Attempt::answer`]): the record
    /// deletes it.
    pub written_ahead: bool,
}

impl Attempt {
    /// A call just made, with what it returned.
    pub(in crate::core::engine) fn called(
        schedule: Schedule,
        job: Job,
        result: Result<Value, Failure>,
        ended_at: DateTime<Utc>,
    ) -> Self {
        Self {
            schedule,
            job,
            result,
            ended_at: Some(ended_at),
            written_ahead: false,
        }
    }

    /// Whether the service answered this call (see [`encode_answer`]).
    pub(in crate::core::engine) fn was_answered(&self) -> bool {
        self.ended_at.is_some() && is_answer(&self.result)
    }

    /// The answer to write ahead of the record, if the service answered.
    pub(in crate::core::engine) fn answer(&self) -> Option<JobAnswer> {
        Some(JobAnswer {
            job_id: self.job.id,
            attempt: self.job.attempt,
            answered_at: self.ended_at?,
            answer: encode_answer(&self.result)?,
        })
    }
}

/// Whether a call's result is the service's answer: a result, an error status, or a body it
/// could not decode. A timeout, a refused connection or a call never made leaves nothing to
/// keep: recovering such an attempt as abandoned loses nothing the service said.
fn is_answer(result: &Result<Value, Failure>) -> bool {
    match result {
        Ok(_) => true,
        Err(failure) => failure.http_status.is_some() || failure.kind == Failure::DECODE,
    }
}

/// How an answer is written ahead of its record; [`answered`] reads it back.
pub(in crate::core::engine) fn encode_answer(result: &Result<Value, Failure>) -> Option<Value> {
    if !is_answer(result) {
        return None;
    }
    Some(match result {
        Ok(result) => serde_json::json!({ "succeeded": result }),
        Err(failure) => serde_json::json!({ "failed": {
            "kind": failure.kind,
            "message": failure.message,
            "http_status": failure.http_status,
            "excerpt": failure.excerpt,
        }}),
    })
}

/// What an answer written ahead says the call returned: the outcome the instance that made
/// the call would have recorded. `None` for an encoding this version does not know.
pub(in crate::core::engine) fn answered(answer: &Value) -> Option<Result<Value, Failure>> {
    if let Some(result) = answer.get("succeeded") {
        return Some(Ok(result.clone()));
    }
    let failed = answer.get("failed")?;
    let text = |key: &str| failed.get(key).and_then(Value::as_str).map(str::to_owned);
    let kind = match text("kind").as_deref() {
        Some(Failure::DECODE) => Failure::DECODE,
        _ => Failure::STATUS,
    };
    Some(Err(Failure {
        class: FailureClass::Retryable,
        message: text("message")?,
        retry_now: false,
        kind,
        http_status: failed
            .get("http_status")
            .and_then(Value::as_u64)
            .and_then(|s| u16::try_from(s).ok()),
        excerpt: text("excerpt"),
    }))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn failure(kind: &'static str, http_status: Option<u16>, excerpt: Option<String>) -> Failure {
        Failure {
            class: FailureClass::Retryable,
            message: format!("the service answered {http_status:?}"),
            retry_now: false,
            kind,
            http_status,
            excerpt,
        }
    }

    #[test]
    fn what_the_service_did_not_say_is_not_written_ahead() {
        let timeout = Err(failure("timeout", None, None));
        assert_eq!(encode_answer(&timeout), None);
        let abandoned = Err(Failure::abandoned("lost".into()));
        assert_eq!(encode_answer(&abandoned), None);
        let circuit = Err(Failure::circuit_open("open".into()));
        assert_eq!(encode_answer(&circuit), None);
    }

    #[test]
    fn an_unknown_encoding_is_not_an_answer() {
        assert_eq!(answered(&json!({"maybe": 1})), None);
        assert_eq!(answered(&json!({"failed": {"kind": "status"}})), None);
    }

    proptest! {
        /// Whatever the service answered reads back as the outcome its instance would have
        /// recorded.
        #[test]
        fn an_answer_reads_back_as_it_was_written(
            ok in any::<bool>(),
            n in any::<i64>(),
            text in ".{0,40}",
            status in proptest::option::of(100u16..600),
            excerpt in proptest::option::of(".{0,40}"),
        ) {
            let result = if ok {
                Ok(json!({"n": n, "text": text}))
            } else {
                let kind = if status.is_some() { Failure::STATUS } else { Failure::DECODE };
                Err(failure(kind, status, excerpt))
            };
            let encoded = encode_answer(&result).expect("an answer");
            prop_assert_eq!(answered(&encoded), Some(result));
        }
    }
}
