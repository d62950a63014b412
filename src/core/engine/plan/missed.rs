//! Missed occurrences: after an outage the latest occurrence fires (late) and the ones before
//! it are one skipped run (first, last, count), counted up to [`MISSED_COUNT_CAP`].

use chrono::{DateTime, Utc};

use super::MISSED_COUNT_CAP;
use crate::core::policies::{Occurrences, format_duration};
use crate::core::timing::Timing;

#[derive(Debug, Clone, PartialEq, Eq)]
/// A run of a schedule's missed occurrences (first, last, count), recorded as one skipped job.
pub(in crate::core::engine) struct MissedRun {
    pub first: DateTime<Utc>,
    pub last: DateTime<Utc>,
    pub count: u32,
    capped: bool,
    /// The run ends with the latest occurrence, which was older than the catch-up window
    /// and did not run either.
    beyond_window: Option<std::time::Duration>,
}

/// The missed-occurrence rule: of a schedule's occurrences from its stored next fire up to
/// `now`, the latest runs (late, once) and the ones before it are missed, one skipped run
/// (first, last, count; never replayed). Returns the occurrence to fire and the missed run.
/// A schedule claimed on time (or ahead) has nothing missed and fires its stored next fire.
pub(super) fn catch_up(
    timing: &Occurrences<'_>,
    stored: DateTime<Utc>,
    now: DateTime<Utc>,
) -> (DateTime<Utc>, Option<MissedRun>) {
    let Some(after) = missed_between(timing, stored, now) else {
        return (stored, None);
    };
    // The stored fire and every occurrence after it but the latest: as many as `after` holds.
    let last = if after.count > 1 || after.capped {
        last_up_to(
            timing,
            stored,
            after.last - chrono::Duration::microseconds(1),
        )
    } else {
        stored
    };
    let missed = MissedRun {
        first: stored,
        last,
        count: after.count,
        capped: after.capped,
        beyond_window: None,
    };
    (after.last, Some(missed))
}

/// The occurrences of a schedule strictly after `fired` and up to `now`: fires nobody made.
/// Counting stops at [`MISSED_COUNT_CAP`] ("at least"), but the last is always the true last
/// occurrence up to now.
fn missed_between(
    timing: &Occurrences<'_>,
    fired: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Option<MissedRun> {
    let mut run = missed_counted(timing, fired, now)?;
    if run.capped {
        run.last = last_up_to(timing, run.last, now);
    }
    Some(run)
}

/// The last occurrence in `(floor, now]`, or `floor` if there is none: searched in windows
/// ending at `now` that double until one holds an occurrence, so the work follows the
/// distance from the last occurrence to now, not the length of the outage.
fn last_up_to(timing: &Occurrences<'_>, floor: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
    let mut window = chrono::Duration::minutes(1);
    loop {
        let from = (now - window).max(floor);
        let mut last = None;
        let mut at = from;
        for _ in 0..MISSED_COUNT_CAP {
            match timing.next_after(at) {
                Ok(Some(next)) if next <= now && next > at => {
                    last = Some(next);
                    at = next;
                }
                _ => break,
            }
        }
        if let Some(last) = last {
            return last;
        }
        if from <= floor {
            return floor;
        }
        window = window * 2;
    }
}

fn missed_counted(
    timing: &Occurrences<'_>,
    fired: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Option<MissedRun> {
    if !matches!(timing.timing, Timing::Cron(_)) {
        return None;
    }
    let mut run: Option<MissedRun> = None;
    let mut at = fired;
    while let Ok(Some(next)) = timing.next_after(at) {
        if next > now || next <= at {
            break;
        }
        match &mut run {
            Some(run) if run.count >= MISSED_COUNT_CAP => {
                run.capped = true;
                break;
            }
            Some(run) => {
                run.last = next;
                run.count += 1;
            }
            None => {
                run = Some(MissedRun {
                    first: next,
                    last: next,
                    count: 1,
                    capped: false,
                    beyond_window: None,
                })
            }
        }
        at = next;
    }
    run
}

/// `missed` with the occurrence `fire_at` added at its end: the latest occurrence, found
/// older than the catch-up window `window`, does not run either.
pub(super) fn beyond_window(
    missed: Option<MissedRun>,
    fire_at: DateTime<Utc>,
    window: std::time::Duration,
) -> MissedRun {
    let mut run = missed.unwrap_or(MissedRun {
        first: fire_at,
        last: fire_at,
        count: 0,
        capped: false,
        beyond_window: None,
    });
    run.last = fire_at;
    run.count = run.count.saturating_add(1);
    run.beyond_window = Some(window);
    run
}

pub(in crate::core::engine) fn missed_reason(run: &MissedRun) -> String {
    let count = if run.capped {
        format!("at least {}", run.count)
    } else {
        run.count.to_string()
    };
    let why = match run.beyond_window {
        None => "no instance could fire them in time".to_owned(),
        Some(window) => format!(
            "the latest was older than the catch-up window of {}, so none ran",
            format_duration(window)
        ),
    };
    format!(
        "skipped: {count} occurrence(s) from {} to {} were missed ({why})",
        run.first.to_rfc3339(),
        run.last.to_rfc3339()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::cron::{OnDstGap, OnDstRepeat};
    use crate::core::model::ScheduleId;
    use crate::core::policies::Policies;
    use crate::core::timing::CronTiming;
    use chrono::TimeZone;

    /// A timing with the default policies, whose calls the rules walk.
    struct Calls(Timing, Policies);

    impl Calls {
        fn calls(&self) -> Occurrences<'_> {
            Occurrences {
                timing: &self.0,
                policies: &self.1,
                seed: ScheduleId(uuid::Uuid::nil()),
            }
        }
    }

    fn every_minute() -> Calls {
        Calls(
            Timing::Cron(CronTiming::from_stored(
                "* * * * *",
                "UTC",
                OnDstGap::Skip,
                OnDstRepeat::Once,
            )),
            Policies::default(),
        )
    }

    #[test]
    fn a_capped_run_of_missed_occurrences_ends_at_the_last_one_up_to_now() {
        let fired = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        // Thirty days of an every-minute schedule: far more than the cap.
        let now = fired + chrono::Duration::days(30) + chrono::Duration::seconds(30);
        let run = missed_between(&every_minute().calls(), fired, now).unwrap();
        assert!(run.capped);
        assert_eq!(run.count, MISSED_COUNT_CAP);
        assert_eq!(run.first, fired + chrono::Duration::minutes(1));
        assert_eq!(run.last, fired + chrono::Duration::days(30));
        assert!(missed_reason(&run).contains("at least 10000"));
    }

    #[test]
    fn after_missed_occurrences_the_latest_fires_and_the_rest_are_one_run() {
        let stored = Utc.with_ymd_and_hms(2026, 1, 1, 0, 2, 0).unwrap();
        let minute = chrono::Duration::minutes(1);
        // On time, or claimed ahead: the stored fire, nothing missed.
        for now in [
            stored,
            stored + chrono::Duration::seconds(59),
            stored - minute,
        ] {
            let (fire, missed) = catch_up(&every_minute().calls(), stored, now);
            assert_eq!(fire, stored);
            assert!(missed.is_none());
        }
        // Down from before 00:02 until 00:04:30: 00:04 fires, 00:02 and 00:03 were missed.
        let (fire, missed) = catch_up(
            &every_minute().calls(),
            stored,
            stored + minute * 2 + minute / 2,
        );
        assert_eq!(fire, stored + minute * 2);
        let missed = missed.unwrap();
        assert_eq!(
            (missed.first, missed.last, missed.count, missed.capped),
            (stored, stored + minute, 2, false)
        );
        // One occurrence late: the stored one alone is missed.
        let (fire, missed) = catch_up(&every_minute().calls(), stored, stored + minute);
        assert_eq!(fire, stored + minute);
        let missed = missed.unwrap();
        assert_eq!(
            (missed.first, missed.last, missed.count),
            (stored, stored, 1)
        );
        // Thirty days down: the latest fires, the count stops at the cap.
        let now = stored + chrono::Duration::days(30) + chrono::Duration::seconds(30);
        let (fire, missed) = catch_up(&every_minute().calls(), stored, now);
        assert_eq!(fire, stored + chrono::Duration::days(30));
        let missed = missed.unwrap();
        assert!(missed.capped);
        assert_eq!(missed.last, fire - minute);
    }

    #[test]
    fn an_uncapped_run_counts_every_occurrence() {
        let fired = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let now = fired + chrono::Duration::minutes(5);
        let run = missed_between(&every_minute().calls(), fired, now).unwrap();
        assert!(!run.capped);
        assert_eq!((run.count, run.last), (5, now));
    }
}
