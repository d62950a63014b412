//! The engine's spans (see [`crate::core::trace`]): each step of an attempt as it ends, and the
//! attempt itself with its record. Nothing is built unless the sink wants spans.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::outcome::Attempt;
use super::parts::{AttemptResult, Parts};
use crate::core::model::*;
use crate::core::trace::{Span, Step};

impl Parts {
    /// The claims of fires opened by one claim transaction, from its start to its commit.
    pub(super) fn trace_claims(&self, runs: &[(Schedule, Job, bool)], began: DateTime<Utc>) {
        if runs.is_empty() || !self.spans.enabled() {
            return;
        }
        let end = self.clock.now();
        self.spans.export(
            runs.iter()
                .map(|(s, job, _)| Span::step(Step::Claim, s.id, s.env_id, job, began, end))
                .collect(),
        );
    }

    /// The hand-offs of fires claimed ahead, from the write's start to its answer; a fire the
    /// write did not hand off (withdrawn first) ends its trace here.
    pub(super) fn trace_hand_offs<T>(
        &self,
        fires: &[(Schedule, Job)],
        handed: &HashMap<JobId, T>,
        began: DateTime<Utc>,
    ) {
        if fires.is_empty() || !self.spans.enabled() {
            return;
        }
        let end = self.clock.now();
        self.spans.export(
            fires
                .iter()
                .map(|(s, job)| {
                    let span = Span::step(Step::HandOff, s.id, s.env_id, job, began, end);
                    if handed.contains_key(&job.id) {
                        span
                    } else {
                        span.failed("withdrawn before its instant")
                    }
                })
                .collect(),
        );
    }

    /// The records of one environment's attempts, from the transaction's start to its commit,
    /// each with its attempt's own span (from its claim, or its call for a later attempt, to
    /// its record). An attempt recorded elsewhere first has neither.
    pub(super) fn trace_records(
        &self,
        attempts: &[Attempt],
        results: &[AttemptResult],
        began: DateTime<Utc>,
    ) {
        if attempts.is_empty() || !self.spans.enabled() {
            return;
        }
        let end = self.clock.now();
        let mut spans = Vec::with_capacity(attempts.len() * 2);
        for (attempt, result) in attempts.iter().zip(results) {
            if *result == AttemptResult::Superseded {
                continue;
            }
            let (schedule, job) = (&attempt.schedule, &attempt.job);
            let env = schedule.env_id;
            spans.push(Span::step(Step::Record, schedule.id, env, job, began, end));
            let start = if job.attempt <= 1 {
                job.created_at
            } else {
                job.started_at.unwrap_or(began)
            };
            let mut own = Span::step(Step::Attempt, schedule.id, env, job, start, end);
            if let Err(failure) = &attempt.result {
                own = own.failed(failure.message.clone());
            }
            spans.push(own);
        }
        self.spans.export(spans);
    }
}
