//! One fire's states, as the producer holds it from its claim to its end, with the job status
//! the store holds beside each, and the one transition function every change goes through.
//! ARCHITECTURE.md draws the same table (between its `fire-states` markers); a test fails when
//! the drawing and [`TRANSITIONS`] disagree, and another that [`next`] allows exactly those.
//!
//! The producer keeps the state of every attempt it holds in [`Fires`]; a transition the
//! table does not have is a bug, caught by a debug assertion in tests and logged in release.

use std::collections::HashMap;

use crate::core::model::JobId;

/// Where a fire is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum FireState {
    /// Claimed ahead of its instant and held for its hand-off (`scheduled` in the store).
    Waiting,
    /// Its hand-off write is in flight (`scheduled`, or `running` once it lands).
    HandingOff,
    /// Handed off: `running` under a call lease from its instant; it waits for the instant.
    HandedOff,
    /// Handed off, but its schedule changed since the claim: read again before the call.
    Rereading,
    /// Its instant came (or it was claimed at its instant, or is a retry): it waits for a
    /// slot, `running` under a lease this instance renews.
    Ready,
    /// Its lease was not known to hold when its call was to leave: it waits for a renewal.
    Unsure,
    /// Its call is in flight.
    Calling,
    /// Its outcome waits for the recorder (also an attempt taken over from a stopped
    /// instance, on its way to its record).
    Recording,
    /// Over for this instance: recorded, withdrawn by a change, taken over by another
    /// instance, or let go (a stopping instance, a lost task).
    Done,
}

/// What happens to a fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum FireEvent {
    ClaimedAhead,
    ClaimedNow,
    TakenOver,
    HandOffSent,
    HandOffFailed,
    HandedOff,
    HandedOffChanged,
    Withdrawn,
    RereadFire,
    InstantCame,
    SlotTaken,
    LeaseUnsure,
    LeaseConfirmed,
    LeaseLost,
    CallEnded,
    Recorded,
    LetGo,
}

/// Every transition: (from, event, to). `None` as the origin is a fire not held yet.
pub(super) const TRANSITIONS: &[(Option<FireState>, FireEvent, FireState)] = {
    use FireEvent as E;
    use FireState as S;
    &[
        (None, E::ClaimedAhead, S::Waiting),
        (None, E::ClaimedNow, S::Ready),
        (None, E::TakenOver, S::Recording),
        (Some(S::Waiting), E::HandOffSent, S::HandingOff),
        (Some(S::Waiting), E::LetGo, S::Done),
        (Some(S::HandingOff), E::HandOffFailed, S::Waiting),
        (Some(S::HandingOff), E::HandedOff, S::HandedOff),
        (Some(S::HandingOff), E::HandedOffChanged, S::Rereading),
        (Some(S::HandingOff), E::Withdrawn, S::Done),
        (Some(S::HandingOff), E::LetGo, S::Done),
        (Some(S::Rereading), E::RereadFire, S::HandedOff),
        (Some(S::Rereading), E::Withdrawn, S::Done),
        (Some(S::Rereading), E::LetGo, S::Done),
        (Some(S::HandedOff), E::InstantCame, S::Ready),
        (Some(S::Ready), E::SlotTaken, S::Calling),
        (Some(S::Ready), E::LeaseUnsure, S::Unsure),
        (Some(S::Ready), E::LeaseLost, S::Done),
        (Some(S::Unsure), E::LeaseConfirmed, S::Ready),
        (Some(S::Unsure), E::LeaseLost, S::Done),
        (Some(S::Calling), E::LeaseUnsure, S::Unsure),
        (Some(S::Calling), E::CallEnded, S::Recording),
        (Some(S::Recording), E::Recorded, S::Done),
    ]
};

/// The transition function: where `event` takes a fire in `from`, if the table allows it.
pub(super) fn next(from: Option<FireState>, event: FireEvent) -> Option<FireState> {
    TRANSITIONS
        .iter()
        .find(|(f, e, _)| *f == from && *e == event)
        .map(|(_, _, to)| *to)
}

impl FireState {
    /// The job statuses the store may hold while the fire is here (the drawing's last column).
    #[cfg(test)]
    pub(super) fn store_statuses(self) -> &'static [crate::core::model::JobStatus] {
        use crate::core::model::JobStatus as J;
        match self {
            FireState::Waiting => &[J::Scheduled],
            FireState::HandingOff => &[J::Scheduled, J::Running],
            FireState::HandedOff
            | FireState::Rereading
            | FireState::Ready
            | FireState::Unsure
            | FireState::Calling
            | FireState::Recording => &[J::Running],
            // Recorded (any end), withdrawn (`skipped`), taken over or let go (anything).
            FireState::Done => &[],
        }
    }
}

/// The state of every fire the producer holds.
#[derive(Debug, Default)]
pub(super) struct Fires {
    states: HashMap<JobId, FireState>,
}

impl Fires {
    /// Moves `job` on by `event`. A transition the table lacks is a bug: it fails a debug
    /// build and is logged (the state kept) in a release one. A fire that is `Done` is
    /// forgotten.
    pub(super) fn step(&mut self, job: JobId, event: FireEvent) {
        let from = self.states.get(&job).copied();
        match next(from, event) {
            Some(FireState::Done) => {
                self.states.remove(&job);
            }
            Some(to) => {
                self.states.insert(job, to);
            }
            None => {
                debug_assert!(
                    false,
                    "fire {job}: no transition from {from:?} on {event:?}"
                );
                tracing::error!(job_id = %job, from = ?from, event = ?event, "a fire took a transition its state machine does not have");
            }
        }
    }

    /// Where `job` is (none: not held).
    pub(super) fn state(&self, job: JobId) -> Option<FireState> {
        self.states.get(&job).copied()
    }

    /// How many fires are held in `state`.
    #[cfg(test)]
    pub(super) fn count(&self, state: FireState) -> usize {
        self.states.values().filter(|s| **s == state).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_STATES: [FireState; 9] = [
        FireState::Waiting,
        FireState::HandingOff,
        FireState::HandedOff,
        FireState::Rereading,
        FireState::Ready,
        FireState::Unsure,
        FireState::Calling,
        FireState::Recording,
        FireState::Done,
    ];

    const ALL_EVENTS: [FireEvent; 17] = [
        FireEvent::ClaimedAhead,
        FireEvent::ClaimedNow,
        FireEvent::TakenOver,
        FireEvent::HandOffSent,
        FireEvent::HandOffFailed,
        FireEvent::HandedOff,
        FireEvent::HandedOffChanged,
        FireEvent::Withdrawn,
        FireEvent::RereadFire,
        FireEvent::InstantCame,
        FireEvent::SlotTaken,
        FireEvent::LeaseUnsure,
        FireEvent::LeaseConfirmed,
        FireEvent::LeaseLost,
        FireEvent::CallEnded,
        FireEvent::Recorded,
        FireEvent::LetGo,
    ];

    #[test]
    fn the_transition_function_allows_exactly_the_table() {
        let origins = std::iter::once(None).chain(ALL_STATES.iter().map(|s| Some(*s)));
        let mut allowed = 0;
        for from in origins {
            for event in ALL_EVENTS {
                let expected: Vec<_> = TRANSITIONS
                    .iter()
                    .filter(|(f, e, _)| *f == from && *e == event)
                    .collect();
                assert!(expected.len() <= 1, "{from:?} {event:?} is ambiguous");
                assert_eq!(next(from, event), expected.first().map(|(_, _, to)| *to));
                allowed += expected.len();
            }
        }
        assert_eq!(allowed, TRANSITIONS.len());
        // Nothing leaves `Done`, and every state is reached and (but `Done`) left.
        for state in ALL_STATES {
            let reached = TRANSITIONS.iter().any(|(_, _, to)| *to == state);
            let left = TRANSITIONS.iter().any(|(f, _, _)| *f == Some(state));
            assert!(reached, "{state:?} is never reached");
            assert_eq!(left, state != FireState::Done, "{state:?}");
        }
        // Every event is used.
        for event in ALL_EVENTS {
            assert!(TRANSITIONS.iter().any(|(_, e, _)| *e == event), "{event:?}");
        }
    }

    #[test]
    fn every_held_fire_ends_only_through_done() {
        // From every state some path of transitions reaches `Done`: nothing is held for ever.
        for state in ALL_STATES {
            let mut seen = vec![state];
            let mut frontier = vec![state];
            while let Some(s) = frontier.pop() {
                for (f, _, to) in TRANSITIONS {
                    if *f == Some(s) && !seen.contains(to) {
                        seen.push(*to);
                        frontier.push(*to);
                    }
                }
            }
            assert!(seen.contains(&FireState::Done), "{state:?} cannot end");
        }
    }

    /// The drawing in ARCHITECTURE.md, between `<!-- fire-states -->` and
    /// `<!-- /fire-states -->`: a table of `| from | event | to | store |` rows.
    #[test]
    fn the_drawing_in_architecture_md_is_the_state_machine() {
        let doc = include_str!("../../../ARCHITECTURE.md");
        let start = doc
            .find("<!-- fire-states -->")
            .expect("the drawing's start marker");
        let end = doc
            .find("<!-- /fire-states -->")
            .expect("the drawing's end marker");
        let name = |s: Option<FireState>| match s {
            None => "(claimed)".to_owned(),
            Some(s) => format!("{s:?}"),
        };
        let store = |s: FireState| {
            let statuses: Vec<&str> = s.store_statuses().iter().map(|j| j.as_str()).collect();
            if statuses.is_empty() {
                "-".to_owned()
            } else {
                statuses.join(", ")
            }
        };
        let mut drawn: Vec<(String, String, String, String)> = doc[start..end]
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| from"))
            .map(|l| {
                let cells: Vec<String> = l
                    .trim_matches('|')
                    .split('|')
                    .map(|c| c.trim().trim_matches('`').to_owned())
                    .collect();
                (
                    cells[0].clone(),
                    cells[1].clone(),
                    cells[2].clone(),
                    cells[3].clone(),
                )
            })
            .collect();
        let mut coded: Vec<(String, String, String, String)> = TRANSITIONS
            .iter()
            .map(|(f, e, to)| (name(*f), format!("{e:?}"), format!("{to:?}"), store(*to)))
            .collect();
        drawn.sort();
        coded.sort();
        assert_eq!(
            drawn, coded,
            "ARCHITECTURE.md's fire-state table and fire::TRANSITIONS disagree"
        );
    }

    #[test]
    #[should_panic(expected = "no transition")]
    fn a_transition_the_table_lacks_fails_a_debug_build() {
        let mut fires = Fires::default();
        let job = JobId::new();
        fires.step(job, FireEvent::ClaimedAhead);
        // A fire still to hand off is never called.
        fires.step(job, FireEvent::SlotTaken);
    }

    #[test]
    fn fires_follow_the_table_and_are_forgotten_when_done() {
        let mut fires = Fires::default();
        let job = JobId::new();
        for event in [
            FireEvent::ClaimedAhead,
            FireEvent::HandOffSent,
            FireEvent::HandedOff,
            FireEvent::InstantCame,
            FireEvent::SlotTaken,
            FireEvent::LeaseUnsure,
            FireEvent::LeaseConfirmed,
            FireEvent::SlotTaken,
            FireEvent::CallEnded,
        ] {
            fires.step(job, event);
        }
        assert_eq!(fires.state(job), Some(FireState::Recording));
        assert_eq!(fires.count(FireState::Recording), 1);
        fires.step(job, FireEvent::Recorded);
        assert_eq!(fires.state(job), None);
    }
}
