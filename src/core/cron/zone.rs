//! Evaluation in IANA time zones with the daylight-saving policies.
//!
//! Time is cut into segments of constant UTC offset at the zone's transitions. Inside a
//! segment wall time and UTC move together, so the first match is one naive search over the
//! segment's wall-time range. At a transition the clock jumps: forward (a gap of wall times
//! that never happen) or back (a fold of wall times that happen twice). The search walks the
//! segments from `t` on and applies the policies at those edges.

use chrono::{DateTime, FixedOffset, Utc};
use serde::{Deserialize, Serialize};

use super::error::CronError;
use super::expr::{CronExpr, SEARCH_HORIZON_MINUTES};
use super::tzdb::{Zone, database};
use super::{OnDstGap, OnDstRepeat};

/// Looks up an IANA time zone name such as `Europe/London` in the process's tz database.
pub fn parse_timezone(name: &str) -> Result<Zone, CronError> {
    database()
        .zone(name)
        .ok_or_else(|| CronError::UnknownTimeZone(name.to_owned()))
}

/// How far ahead a search looks, in seconds: the wall-time search's full calendar cycle plus
/// two days for the largest offset difference between wall time and UTC.
const HORIZON_SECONDS: i64 = SEARCH_HORIZON_MINUTES * 60 + 2 * 86_400;

/// How daylight saving changed a fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DstAdjustment {
    /// The scheduled wall time fell in a spring-forward gap; the fire runs at the first instant
    /// after the gap.
    Shifted,
    /// The wall time occurs twice (fall-back) and this is its second occurrence.
    Repeated,
}

impl DstAdjustment {
    /// The name used in output and storage.
    pub fn as_str(self) -> &'static str {
        match self {
            DstAdjustment::Shifted => "shifted",
            DstAdjustment::Repeated => "repeated",
        }
    }
}

impl std::fmt::Display for DstAdjustment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One run of a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fire {
    /// When it runs.
    pub at: DateTime<Utc>,
    /// The same instant on the schedule's wall clock, with the zone's offset at that instant.
    pub local: DateTime<FixedOffset>,
    /// Set when daylight saving moved or repeated this fire.
    pub dst: Option<DstAdjustment>,
}

/// A cron expression bound to a time zone and DST policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZonedCron {
    pub expr: CronExpr,
    pub tz: Zone,
    pub on_dst_gap: OnDstGap,
    pub on_dst_repeat: OnDstRepeat,
}

impl ZonedCron {
    pub fn new(expr: CronExpr, tz: Zone, on_dst_gap: OnDstGap, on_dst_repeat: OnDstRepeat) -> Self {
        ZonedCron {
            expr,
            tz,
            on_dst_gap,
            on_dst_repeat,
        }
    }

    /// `expr` in UTC with the default policies (which never apply in UTC).
    pub fn utc(expr: CronExpr) -> Self {
        ZonedCron::new(
            expr,
            Zone::utc(),
            OnDstGap::default(),
            OnDstRepeat::default(),
        )
    }

    /// The first fire strictly after `t`.
    pub fn next_fire_after(&self, t: DateTime<Utc>) -> Option<Fire> {
        let found = self.next_instant(t.timestamp())?;
        let at = DateTime::from_timestamp(found.at, 0)?;
        // The search knows the offset; asking the tz database again would cost a lookup.
        let offset = FixedOffset::east_opt(found.offset)?;
        Some(Fire {
            at,
            local: at.with_timezone(&offset),
            dst: found.dst,
        })
    }

    /// When the first fire strictly after `t` runs.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        DateTime::from_timestamp(self.next_instant(t.timestamp())?.at, 0)
    }

    /// All fires strictly after `t`, in time order.
    pub fn fires_after(&self, t: DateTime<Utc>) -> impl Iterator<Item = Fire> + use<> {
        let schedule = *self;
        std::iter::successors(schedule.next_fire_after(t), move |previous| {
            schedule.next_fire_after(previous.at)
        })
    }

    /// The fire at `at`, with its wall time and DST mark; an instant that is no fire of this
    /// schedule gets its wall time and no mark. For callers that hold an instant the schedule
    /// produced (a stored next fire, an occurrence) and want to show it.
    pub fn fire_at(&self, at: DateTime<Utc>) -> Fire {
        // Searched from a minute before: a fire shifted out of a spring-forward gap sits on the
        // transition itself, and a search starting a second before it would begin past the
        // transition and never see the gap.
        self.fires_after(at - chrono::Duration::seconds(60))
            .take_while(|fire| fire.at <= at)
            .find(|fire| fire.at == at)
            .unwrap_or_else(|| Fire {
                at,
                local: self.local_time(at),
                dst: None,
            })
    }

    /// Checks that the schedule fires at least once after `now`.
    pub fn validate(&self, now: DateTime<Utc>) -> Result<(), CronError> {
        match self.next_after(now) {
            Some(_) => Ok(()),
            None => Err(CronError::NoFutureFire),
        }
    }

    /// The local wall time of `at` in this schedule's zone.
    pub fn local_time(&self, at: DateTime<Utc>) -> DateTime<FixedOffset> {
        self.tz.local_time(at)
    }

    /// The first fire strictly after `t` (seconds since the epoch): a later second of a
    /// matching minute that `t` lies in, or the first second of the next matching minute. A
    /// minute's seconds share its offset and DST mark (offsets change at whole minutes; a
    /// minute shifted out of a spring-forward gap keeps its seconds after the transition).
    fn next_instant(&self, t: i64) -> Option<FoundFire> {
        // Fires at the start of each matching minute: one search.
        if self.expr.every.is_some() || self.expr.seconds == 1 {
            return self.next_minute_instant(t);
        }
        let first = i64::from(self.expr.first_second());
        // The first matching minute that starts after `t - 60`: the one `t` lies in, if any.
        let minute = self.next_minute_instant(t.checked_sub(60)?)?;
        if minute.at > t {
            return Some(FoundFire {
                at: minute.at + first,
                ..minute
            });
        }
        let into = u32::try_from(t - minute.at).unwrap_or(59);
        if let Some(second) = self.expr.second_after(into) {
            return Some(FoundFire {
                at: minute.at + i64::from(second),
                ..minute
            });
        }
        let next = self.next_minute_instant(minute.at)?;
        Some(FoundFire {
            at: next.at + first,
            ..next
        })
    }

    /// The first matching minute (or `@every` instant) strictly after `t`, at its start.
    fn next_minute_instant(&self, t: i64) -> Option<FoundFire> {
        if let Some(every) = self.expr.every {
            // Elapsed time alone: the zone only says what the wall clock shows then.
            let at = every.next_after_seconds(t)?;
            let table = self.tz.table();
            return Some(FoundFire::new(
                at,
                table.segment_offset(table.segment_index(at)),
                None,
            ));
        }
        let fixed_time = self.expr.is_fixed_time();
        let table = self.tz.table();
        let mut search = MemoSearch::new(&self.expr);
        // Earliest instant still allowed; fires are whole seconds, so "after t" is ">= t+1".
        let mut lower = t.checked_add(1)?;
        // Rules repeat for ever: past one full calendar cycle nothing new can match.
        let horizon = lower.saturating_add(HORIZON_SECONDS);
        let mut index = table.segment_index(lower);
        loop {
            let offset = table.segment_offset(index);
            let wide_offset = i64::from(offset);
            let transition = table.transition(index);
            // The first matching wall time from `lower` on, if it falls in this segment.
            let in_segment = search
                .first_at_or_after(lower + wide_offset)
                .map(|wall| wall - wide_offset)
                .filter(|&at| transition.is_none_or(|next| at < next.at));
            if let Some(at) = in_segment {
                // Second pass through a fold: the clock was set back at the start of this
                // segment and has not yet caught up with where it was.
                let repeated = table.segment_start(index).is_some_and(|start| {
                    start.after < start.before
                        && at < start.at + i64::from(start.before - start.after)
                });
                if !repeated {
                    return Some(FoundFire::new(at, offset, None));
                }
                if fixed_time && self.on_dst_repeat == OnDstRepeat::Once {
                    lower = at + 1;
                    continue;
                }
                return Some(FoundFire::new(at, offset, Some(DstAdjustment::Repeated)));
            }
            let next = transition?;
            if fixed_time && self.on_dst_gap == OnDstGap::Shift && next.after > next.before {
                // Wall times skipped by the jump: [at + before, at + after).
                let gap_end = next.at + i64::from(next.after);
                if search
                    .first_at_or_after(next.at + i64::from(next.before))
                    .is_some_and(|wall| wall < gap_end)
                {
                    return Some(FoundFire::new(
                        next.at,
                        next.after,
                        Some(DstAdjustment::Shifted),
                    ));
                }
            }
            lower = next.at;
            if lower > horizon {
                return None;
            }
            index += 1;
        }
    }
}

/// A fire found by the search: instant (seconds), the offset there, the DST mark.
struct FoundFire {
    at: i64,
    offset: i32,
    dst: Option<DstAdjustment>,
}

impl FoundFire {
    fn new(at: i64, offset: i32, dst: Option<DstAdjustment>) -> Self {
        FoundFire { at, offset, dst }
    }
}

/// Wall-time searches that remember their last answer.
///
/// The zoned search asks "first matching wall time at or after w" once per segment and once
/// per gap, with w mostly moving forward. One search answers every later question whose w
/// lies inside the range it proved empty, so a yearly schedule crossing many transitions
/// searches the calendar once rather than once per transition.
struct MemoSearch<'a> {
    expr: &'a CronExpr,
    /// No wall time in `[searched_from, next)` matches; `next` is the first that does, in
    /// naive seconds (`None`: nothing within the search horizon).
    searched_from: i64,
    next: Option<i64>,
}

impl<'a> MemoSearch<'a> {
    fn new(expr: &'a CronExpr) -> Self {
        MemoSearch {
            expr,
            searched_from: i64::MAX,
            next: None,
        }
    }

    /// The first matching wall minute at or after `wall` (naive seconds), in naive seconds.
    fn first_at_or_after(&mut self, wall: i64) -> Option<i64> {
        if self.searched_from <= wall {
            match self.next {
                Some(next) if next >= wall => return Some(next),
                // The horizon is a full calendar cycle: nothing then means never.
                None => return None,
                _ => {}
            }
        }
        let from = ceil_minute(wall);
        self.searched_from = wall;
        self.next = self
            .expr
            .next_match(from, from.saturating_add(SEARCH_HORIZON_MINUTES))
            .and_then(|minute| minute.checked_mul(60));
        self.next
    }
}

/// The first whole minute at or after `seconds`, counted in minutes.
fn ceil_minute(seconds: i64) -> i64 {
    seconds.div_euclid(60) + i64::from(seconds.rem_euclid(60) != 0)
}
