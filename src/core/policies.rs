//! A schedule's policies: what happens when occurrences overlap an open job (`overlap`), how
//! late a missed occurrence may still run (`catchup_window`), how far calls are spread past
//! their instants (`max_jitter`), and the bounds of its occurrences (`start_at`, `end_at`).
//!
//! [`Occurrences`] is the one place a schedule's call instants are derived: the timing's
//! occurrences inside the bounds, each shifted by a deterministic offset below `max_jitter`
//! (a hash of the schedule id and the occurrence), so every instance, `next-fires` and the
//! pages agree on when a call is made, and the same occurrence always gets the same offset.
//! `next_run_at` stores the call instant; the occurrence it belongs to is recovered from it,
//! because a jitter never reaches the next occurrence (it is at most the shortest interval).

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::core::cron::CronError;
use crate::core::model::{ScheduleId, UnknownValue};
use crate::core::timing::Timing;
pub use crate::util::duration::format_duration;

/// The policy fields, by the names a declaration, the API and the pages use.
pub const FIELDS: &[&str] = &[
    "overlap",
    "catchup_window",
    "max_jitter",
    "start_at",
    "end_at",
    "pause_on_failure",
    "remaining_runs",
    "after_completion",
];

/// `catchup_window` when a schedule leaves it out.
pub const DEFAULT_CATCHUP_WINDOW: Duration = Duration::from_secs(3600);
/// The shortest accepted `catchup_window`.
pub const MIN_CATCHUP_WINDOW: Duration = Duration::from_secs(1);
/// The longest accepted `catchup_window` (a year and a day).
pub const MAX_CATCHUP_WINDOW: Duration = Duration::from_secs(366 * 86_400);
/// The longest accepted `max_jitter` of a one-shot schedule (a cron schedule's is bounded by
/// its shortest interval).
pub const MAX_ONE_SHOT_JITTER: Duration = Duration::from_secs(86_400);
/// The largest accepted `remaining_runs`.
pub const MAX_REMAINING_RUNS: u32 = 1_000_000;
/// How many occurrences ahead the shortest interval is looked for (a year of an hourly
/// schedule, two weeks of an every-minute one: enough to meet a DST fold of hourly or coarser
/// schedules, the only ones whose intervals vary).
const INTERVAL_SCAN: usize = 20_000;

/// What a due occurrence does while another job of its schedule is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// It is skipped, on the record (a `skipped` job and its event).
    #[default]
    Skip,
    /// One occurrence waits (a `buffered` job) and runs when the open job ends; a further one
    /// meanwhile is skipped.
    BufferOne,
    /// It runs beside the open job, with a job and idempotency key of its own.
    AllowAll,
    /// Every occurrence waits (a `buffered` job each, up to the engine's bound per schedule,
    /// `--max-buffered`; beyond it, skipped on the record) and they run one after another, in
    /// order, as each open job ends.
    BufferAll,
    /// The open job is cancelled (recorded `cancelled`, its call in flight aborted) and the
    /// new occurrence runs in its place.
    CancelOther,
}

impl Overlap {
    /// Every value, in declaration order.
    pub const ALL: &'static [Overlap] = &[
        Overlap::Skip,
        Overlap::BufferOne,
        Overlap::AllowAll,
        Overlap::BufferAll,
        Overlap::CancelOther,
    ];

    /// The stored and serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::BufferOne => "buffer_one",
            Overlap::AllowAll => "allow_all",
            Overlap::BufferAll => "buffer_all",
            Overlap::CancelOther => "cancel_other",
        }
    }
}

impl fmt::Display for Overlap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Overlap {
    type Err = UnknownValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Overlap::ALL
            .iter()
            .copied()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| {
                UnknownValue::new(s, "skip buffer_one allow_all buffer_all cancel_other")
            })
    }
}

/// What becomes of a schedule once it has completed and its last job has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AfterCompletion {
    /// It stays, `completed`, with its jobs and history.
    #[default]
    Keep,
    /// It is soft-deleted by the engine (audited, with its `schedule.deleted` event), so a
    /// fleet of one-shots does not pile up in lists.
    Delete,
}

impl AfterCompletion {
    /// Every value, in declaration order.
    pub const ALL: &'static [AfterCompletion] = &[AfterCompletion::Keep, AfterCompletion::Delete];

    /// The stored and serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            AfterCompletion::Keep => "keep",
            AfterCompletion::Delete => "delete",
        }
    }
}

impl fmt::Display for AfterCompletion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AfterCompletion {
    type Err = UnknownValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AfterCompletion::ALL
            .iter()
            .copied()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| UnknownValue::new(s, "keep delete"))
    }
}

/// A schedule's policies (see the module documentation). The default is what a schedule
/// declared without any gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policies {
    pub overlap: Overlap,
    /// How late the latest missed occurrence may still run; older ones are recorded as
    /// skipped.
    pub catchup_window: Duration,
    /// Calls are spread over `[instant, instant + max_jitter)`; zero for none.
    pub max_jitter: Duration,
    /// No occurrence before this instant.
    pub start_at: Option<DateTime<Utc>>,
    /// No occurrence after this instant: the schedule then completes.
    pub end_at: Option<DateTime<Utc>>,
    /// A job of the schedule that dead-letters pauses the schedule.
    pub pause_on_failure: bool,
    /// Whether the schedule is kept or deleted once it has completed.
    pub after_completion: AfterCompletion,
}

impl Default for Policies {
    fn default() -> Self {
        Policies {
            overlap: Overlap::Skip,
            catchup_window: DEFAULT_CATCHUP_WINDOW,
            max_jitter: Duration::ZERO,
            start_at: None,
            end_at: None,
            pause_on_failure: false,
            after_completion: AfterCompletion::Keep,
        }
    }
}

impl Policies {
    /// Whether these policies put calls elsewhere than `before` did (a new jitter or bounds):
    /// a fire claimed under `before` is withdrawn and the new policies decide. Overlap, the
    /// catch-up window and pause on failure act on fires as they come, and leave a claimed
    /// one alone.
    pub fn moves_calls_from(&self, before: &Policies) -> bool {
        self.max_jitter != before.max_jitter
            || self.start_at != before.start_at
            || self.end_at != before.end_at
    }

    /// Whether an occurrence that was due at `instant` may still run at `now`.
    pub fn in_catchup_window(&self, instant: DateTime<Utc>, now: DateTime<Utc>) -> bool {
        now - instant <= chrono_of(self.catchup_window)
    }
}

/// An occurrence and the instant of its call.
pub type Call = (DateTime<Utc>, DateTime<Utc>);

/// A schedule's call instants: its timing's occurrences inside the policies' bounds, each
/// shifted by its jitter.
#[derive(Debug, Clone, Copy)]
pub struct Occurrences<'a> {
    pub timing: &'a Timing,
    pub policies: &'a Policies,
    /// Seeds the jitter: the schedule's id.
    pub seed: ScheduleId,
}

impl Occurrences<'_> {
    /// The first occurrence (unshifted) strictly after `after` inside the bounds.
    pub fn occurrence_after(
        &self,
        after: DateTime<Utc>,
    ) -> Result<Option<DateTime<Utc>>, CronError> {
        let from = match self.policies.start_at {
            // The start itself is an allowed occurrence.
            Some(start) if start > after => start - chrono::Duration::microseconds(1),
            _ => after,
        };
        let next = self.timing.next_after(from)?;
        Ok(next.filter(|n| self.policies.end_at.is_none_or(|end| *n <= end)))
    }

    /// The offset of `occurrence`'s call past its instant: below `max_jitter`, in whole
    /// milliseconds, the same for the same schedule and occurrence on every instance.
    pub fn jitter_of(&self, occurrence: DateTime<Utc>) -> chrono::Duration {
        jitter_offset(self.seed, occurrence, self.policies.max_jitter)
    }

    /// The call instant of `occurrence`.
    pub fn call_at(&self, occurrence: DateTime<Utc>) -> DateTime<Utc> {
        occurrence + self.jitter_of(occurrence)
    }

    /// The call of the first occurrence strictly after `now`: where a new, resumed or re-timed
    /// schedule starts (an occurrence at or before `now` is not its own, even while its
    /// jittered call is still to come).
    pub fn first_after(&self, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, CronError> {
        Ok(self.occurrence_after(now)?.map(|o| self.call_at(o)))
    }

    /// The first call instant strictly after `after`: how the engine moves on from a call.
    /// Call instants keep the occurrences' order (a jitter is shorter than the interval after
    /// its occurrence), so this is the call of the first occurrence whose call comes after
    /// `after`.
    pub fn next_after(&self, after: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, CronError> {
        Ok(self.next_with_occurrence(after)?.map(|(_, call)| call))
    }

    /// [`Occurrences::next_after`] with the occurrence the call belongs to.
    pub fn next_with_occurrence(&self, after: DateTime<Utc>) -> Result<Option<Call>, CronError> {
        // An occurrence whose call comes after `after` is later than `after - max_jitter`.
        let mut at = after - chrono_of(self.policies.max_jitter);
        loop {
            let Some(occurrence) = self.occurrence_after(at)? else {
                return Ok(None);
            };
            let call = self.call_at(occurrence);
            if call > after {
                return Ok(Some((occurrence, call)));
            }
            at = occurrence;
        }
    }

    /// The calls from `first` on, each with its occurrence, moving on from call to call as the
    /// engine does (what `next-fires` and the pages list).
    pub fn walk(&self, first: Option<Call>) -> impl Iterator<Item = Call> + '_ {
        std::iter::successors(first, move |(_, call)| {
            self.next_with_occurrence(*call).ok().flatten()
        })
    }

    /// The occurrence a stored call instant belongs to (the instant itself without a jitter).
    pub fn occurrence_of(&self, call: DateTime<Utc>) -> DateTime<Utc> {
        if self.policies.max_jitter.is_zero() {
            return call;
        }
        let before = call - chrono_of(self.policies.max_jitter);
        match self.occurrence_after(before) {
            Ok(Some(occurrence)) if occurrence <= call && self.call_at(occurrence) == call => {
                occurrence
            }
            // Not a call instant of these occurrences (written before the policies changed):
            // taken as its own occurrence.
            _ => call,
        }
    }
}

/// Jittered calls fall on instants this far apart ([`jitter_offset`]) when the jitter is a
/// second or more.
pub const JITTER_GRAIN: Duration = Duration::from_millis(100);

/// The jitter of one occurrence: a hash of the schedule id and the occurrence's instant,
/// reduced below `max` in whole tenths of a second ([`JITTER_GRAIN`]; in whole milliseconds
/// when `max` is under a second). SplitMix64's finalizer, written out so the offsets never
/// change with a library or compiler version.
///
/// Why a grain: the schedules that share a minute still spread evenly over the window (ten
/// instants a second), and the calls that land on one instant leave together: they share the
/// engine's wake-up, their answers arrive close together, and their writes are grouped.
/// Offsets to the millisecond gave each call an instant of its own, and each call woke the
/// engine alone.
pub fn jitter_offset(
    seed: ScheduleId,
    occurrence: DateTime<Utc>,
    max: Duration,
) -> chrono::Duration {
    let max_ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
    if max_ms == 0 {
        return chrono::Duration::zero();
    }
    let grain_ms = if max >= Duration::from_secs(1) {
        u64::try_from(JITTER_GRAIN.as_millis()).unwrap_or(1)
    } else {
        1
    };
    // At least one slot, and the last one (slots - 1) * grain stays below `max`.
    let slots = max_ms / grain_ms;
    let id = seed.0.as_u128();
    let mut x = (id as u64) ^ ((id >> 64) as u64) ^ (occurrence.timestamp_micros() as u64);
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    chrono::Duration::milliseconds(i64::try_from((x % slots) * grain_ms).unwrap_or(0))
}

/// The shortest interval between consecutive occurrences of `timing` after `from`, looked for
/// over the next [`INTERVAL_SCAN`] occurrences; the search stops early once one is shorter
/// than `at_least`. `None` when fewer than two occurrences come.
///
/// A whole scan (about a millisecond for an every-minute schedule) is remembered in `memo` for
/// the day by expression, zone and DST policies, so enrolling many schedules that share an
/// expression scans it once.
pub fn shortest_interval(
    timing: &Timing,
    from: DateTime<Utc>,
    at_least: Duration,
    memo: &IntervalMemo,
) -> Option<chrono::Duration> {
    let key = timing.cron().map(|cron| {
        format!(
            "{}|{}|{}|{}|{}",
            cron.expression,
            cron.timezone,
            cron.on_dst_gap.as_str(),
            cron.on_dst_repeat.as_str(),
            from.date_naive()
        )
    });
    if let Some(key) = &key
        && let Some(known) = memo.known(key)
    {
        return known;
    }
    let at_least = chrono_of(at_least);
    let mut previous = timing.next_after(from).ok().flatten()?;
    let mut shortest: Option<chrono::Duration> = None;
    let mut whole = true;
    for _ in 0..INTERVAL_SCAN {
        let Some(next) = timing.next_after(previous).ok().flatten() else {
            break;
        };
        let gap = next - previous;
        if shortest.is_none_or(|s| gap < s) {
            shortest = Some(gap);
        }
        if gap < at_least {
            whole = false;
            break;
        }
        previous = next;
    }
    if whole && let Some(key) = key {
        memo.remember(key, shortest);
    }
    shortest
}

/// Whole scans of [`shortest_interval`], by expression, zone, DST policies and day. Whoever
/// checks many declarations at once (an enrollment) holds one and passes it to each check;
/// a single check passes a fresh one.
#[derive(Debug, Default)]
pub struct IntervalMemo(Mutex<HashMap<String, Option<chrono::Duration>>>);

impl IntervalMemo {
    /// At most this many scans are remembered; the next one starts the memo afresh.
    const CAPACITY: usize = 4096;

    fn known(&self, key: &str) -> Option<Option<chrono::Duration>> {
        self.0.lock().ok()?.get(key).copied()
    }

    fn remember(&self, key: String, shortest: Option<chrono::Duration>) {
        if let Ok(mut known) = self.0.lock() {
            if known.len() >= Self::CAPACITY {
                known.clear();
            }
            known.insert(key, shortest);
        }
    }

    /// How many scans it holds.
    pub fn len(&self) -> usize {
        self.0.lock().map_or(0, |known| known.len())
    }

    /// True when it holds no scan.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The policies that differ from the defaults, in words (`None` when none do): what a
/// schedule's description adds after its timing.
pub fn describe_policies(policies: &Policies, remaining_runs: Option<i32>) -> Option<String> {
    let mut parts = Vec::new();
    if !policies.max_jitter.is_zero() {
        parts.push(format!(
            "each call up to {} after its instant (jitter)",
            format_duration(policies.max_jitter)
        ));
    }
    match policies.overlap {
        Overlap::Skip => {}
        Overlap::BufferOne => {
            parts.push("a fire due while a job runs waits for it (one at most)".to_owned())
        }
        Overlap::AllowAll => parts.push("fires run side by side with open jobs".to_owned()),
        Overlap::BufferAll => parts
            .push("fires due while a job runs wait for it and run one after another".to_owned()),
        Overlap::CancelOther => {
            parts.push("a fire due while a job runs cancels that job and runs instead".to_owned())
        }
    }
    if policies.catchup_window != DEFAULT_CATCHUP_WINDOW {
        parts.push(format!(
            "a missed fire runs only within {} of its instant",
            format_duration(policies.catchup_window)
        ));
    }
    match (policies.start_at, policies.end_at) {
        (Some(start), Some(end)) => parts.push(format!(
            "from {} until {}",
            start.format("%Y-%m-%d %H:%M:%S UTC"),
            end.format("%Y-%m-%d %H:%M:%S UTC")
        )),
        (Some(start), None) => parts.push(format!(
            "starting {}",
            start.format("%Y-%m-%d %H:%M:%S UTC")
        )),
        (None, Some(end)) => parts.push(format!("until {}", end.format("%Y-%m-%d %H:%M:%S UTC"))),
        (None, None) => {}
    }
    if let Some(left) = remaining_runs {
        parts.push(match left {
            1 => "1 run left".to_owned(),
            n => format!("{n} runs left"),
        });
    }
    if policies.pause_on_failure {
        parts.push("pauses when a job lands in the dead-letter queue".to_owned());
    }
    if policies.after_completion == AfterCompletion::Delete {
        parts.push("deleted once completed and its last job has ended".to_owned());
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn chrono_of(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

#[cfg(test)]
mod tests;
