//! Cron in words: "At 02:30, Monday through Friday". The description is built from the
//! compiled fields, not the text, so every spelling of one schedule reads the same, and it
//! names every value a restricted field allows (as a list, a range "A through B", or a step
//! "every N … from A through B" whose ends are named).

use super::expr::{
    ALL_WEEKDAYS, CronExpr, DOM_LAST, DOM_STAR, DOW_STAR, HAS_NTH, HOUR_STAR, MINUTE_STAR, NTH_LAST,
};
use super::{OnDstGap, OnDstRepeat};

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const ORDINALS: [&str; 5] = ["first", "second", "third", "fourth", "fifth"];

/// Times are listed one by one ("At 09:00 and 17:30") up to this many.
const MAX_LISTED_TIMES: usize = 6;

impl CronExpr {
    /// The schedule in English, e.g. `At 02:30, Monday through Friday`.
    pub fn describe(&self) -> String {
        if let Some(every) = self.every {
            return every.describe();
        }
        let mut text = self.describe_time();
        for part in [self.describe_days(), self.describe_months()]
            .into_iter()
            .flatten()
        {
            text.push_str(", ");
            text.push_str(&part);
        }
        text
    }

    fn describe_time(&self) -> String {
        let minutes = values(self.minutes, 0, 59);
        let hours = values(u64::from(self.hours), 0, 23);
        let seconds = values(self.seconds, 0, 59);
        let minute_star = self.flags & MINUTE_STAR != 0;
        let hour_star = self.flags & HOUR_STAR != 0;
        if !minute_star
            && !hour_star
            && seconds.len() * minutes.len() * hours.len() <= MAX_LISTED_TIMES
        {
            let seconds = &seconds;
            let times: Vec<String> = hours
                .iter()
                .flat_map(|h| minutes.iter().map(move |m| format!("{h:02}:{m:02}")))
                .flat_map(|hm| {
                    seconds.iter().map(move |s| match s {
                        0 if seconds.len() == 1 => hm.clone(),
                        s => format!("{hm}:{s:02}"),
                    })
                })
                .collect();
            return format!("At {}", join(&times, "and"));
        }
        let mut parts = Vec::new();
        if seconds != [0] {
            parts.push(sixtieths(&seconds, "second", "minute"));
        }
        // "every minute" adds nothing to a phrase of seconds.
        if seconds == [0] || minutes.len() < 60 {
            parts.push(sixtieths(&minutes, "minute", "hour"));
        }
        parts.extend(describe_hours(&hours));
        let text = parts.join(", ");
        let mut chars = text.chars();
        chars.next().map_or_else(String::new, |first| {
            format!("{}{}", first.to_ascii_uppercase(), chars.as_str())
        })
    }

    /// The day-of-month and day-of-week fields, joined as cron joins them: "or" when both are
    /// restricted (neither written with `*`), "and" otherwise.
    fn describe_days(&self) -> Option<String> {
        let days = values(u64::from(self.days), 1, 31);
        let either = self.flags & (DOM_STAR | DOW_STAR) == 0;
        // Under the "or" rule a field that allows every day makes every day match, whatever
        // the other field says (`0 0 1-31 * MON` runs daily).
        if either && (days.len() == 31 || self.weekdays == ALL_WEEKDAYS) {
            return None;
        }
        let mut by_dom = Vec::new();
        match Shape::of(&days, 31) {
            Shape::All => {}
            Shape::List(runs) if runs.is_empty() => {}
            Shape::Step { step, first, last } => by_dom.push(format!(
                "every {step} days from the {} through the {} of the month",
                ordinal(first),
                ordinal(last)
            )),
            Shape::List(runs) => by_dom.push(format!(
                "on the {} of the month",
                list_runs(&runs, 32, 3, ordinal, "through the")
            )),
        }
        if self.flags & DOM_LAST != 0 {
            by_dom.push("on the last day of the month".to_owned());
        }

        let mut by_dow = Vec::new();
        let weekdays = values(u64::from(self.weekdays), 0, 6);
        if !weekdays.is_empty() && self.weekdays != ALL_WEEKDAYS {
            let runs = runs_around(&weekdays, 0, 6);
            let name = |d: u32| WEEKDAYS[d as usize].to_owned();
            by_dow.push(match runs.as_slice() {
                [(from, to)] if run_values(*from, *to, 7).count() >= 3 => {
                    format!("{} through {}", name(*from), name(*to))
                }
                _ => format!("on {}", list_runs(&runs, 7, 3, name, "through")),
            });
        }
        if self.flags & HAS_NTH != 0 {
            for (weekday, &nth) in WEEKDAYS.iter().zip(self.nth.iter()) {
                let mut which: Vec<String> = ORDINALS
                    .iter()
                    .enumerate()
                    .filter(|(n, _)| nth & (1 << n) != 0)
                    .map(|(_, word)| (*word).to_owned())
                    .collect();
                if nth & NTH_LAST != 0 {
                    which.push("last".to_owned());
                }
                if !which.is_empty() {
                    by_dow.push(format!(
                        "on the {} {weekday} of the month",
                        join(&which, "and")
                    ));
                }
            }
        }

        let dom = (!by_dom.is_empty()).then(|| join(&by_dom, "and"));
        let dow = (!by_dow.is_empty()).then(|| join(&by_dow, "and"));
        match (dom, dow) {
            (Some(dom), Some(dow)) if either => Some(format!("{dom}, or {dow}")),
            (Some(dom), Some(dow)) => Some(format!("{dom}, if it is also {dow}")),
            (dom, dow) => dom.or(dow),
        }
    }

    fn describe_months(&self) -> Option<String> {
        let months = values(u64::from(self.months), 1, 12);
        (months.len() < 12).then(|| {
            let runs = runs_of(&months);
            let name = |m: u32| MONTHS[m as usize - 1].to_owned();
            format!("in {}", list_runs(&runs, 13, 3, name, "through"))
        })
    }
}

/// The hour field in words, unless it allows every hour: `every 2 hours`, `between 09:00 and
/// 17:59`.
fn describe_hours(hours: &[u32]) -> Option<String> {
    match (Shape::of(hours, 24), whole_cycle_step(hours, 24)) {
        (Shape::All, _) => None,
        (_, Some(step)) => Some(format!("every {step} hours")),
        (Shape::Step { step, first, last }, None) => Some(format!(
            "every {step} hours from {first:02}:00 through {last:02}:00"
        )),
        (Shape::List(_), None) => {
            let parts: Vec<String> = runs_around(hours, 0, 23)
                .iter()
                .map(|&(from, to)| {
                    if from == to {
                        format!("during the {from:02}:00 hour")
                    } else {
                        format!("between {from:02}:00 and {to:02}:59")
                    }
                })
                .collect();
            Some(join(&parts, "and"))
        }
    }
}

/// A field of 60 values (seconds of the minute, minutes of the hour) in words: `every minute`,
/// `every 15 seconds`, `at minutes 5 and 35 past the hour`.
fn sixtieths(set: &[u32], unit: &str, of: &str) -> String {
    match (Shape::of(set, 60), whole_cycle_step(set, 60)) {
        (Shape::All, _) => format!("every {unit}"),
        (_, Some(step)) => format!("every {step} {unit}s"),
        (Shape::Step { step, first, last }, None) => {
            format!("every {step} {unit}s from {unit} {first} through {last} past the {of}")
        }
        (Shape::List(runs), None) => {
            let noun = if set.len() == 1 {
                unit.to_owned()
            } else {
                format!("{unit}s")
            };
            let listed = list_runs(&runs, 60, 3, |v| v.to_string(), "through");
            format!("at {noun} {listed} past the {of}")
        }
    }
}

/// How a field's set of values reads best.
enum Shape {
    /// Every value of the field.
    All,
    /// Four or more evenly spaced values, `step` ≥ 2 apart.
    Step { step: u32, first: u32, last: u32 },
    /// Runs of consecutive values, `(from, to)` inclusive.
    List(Vec<(u32, u32)>),
}

impl Shape {
    /// The shape of `set`, a sorted subset of a field that has `field_len` values.
    fn of(set: &[u32], field_len: usize) -> Shape {
        if set.len() == field_len {
            return Shape::All;
        }
        if let [first, second, .., last] = *set
            && set.len() >= 4
            && second - first >= 2
            && set.windows(2).all(|w| w[1] - w[0] == second - first)
        {
            return Shape::Step {
                step: second - first,
                first,
                last,
            };
        }
        Shape::List(runs_of(set))
    }
}

/// The step of a set that is `0, step, 2 × step, …` to the end of a `cycle` that starts at 0
/// (`*/step`), with at least two values.
fn whole_cycle_step(set: &[u32], cycle: u32) -> Option<u32> {
    let [0, step, ..] = *set else {
        return None;
    };
    let even = step >= 2 && set.windows(2).all(|w| w[1] - w[0] == step);
    (even && set.last().is_some_and(|&last| last + step >= cycle)).then_some(step)
}

/// Maximal runs of consecutive values in a sorted set.
fn runs_of(set: &[u32]) -> Vec<(u32, u32)> {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &value in set {
        match runs.last_mut() {
            Some((_, to)) if *to + 1 == value => *to = value,
            _ => runs.push((value, value)),
        }
    }
    runs
}

/// Runs in a cycle (`min..=max`): a run that ends at `max` and one that starts at `min` are
/// one run across the end, kept last with `from > to` (`22-2` is 22:00 through 02:59).
fn runs_around(set: &[u32], min: u32, max: u32) -> Vec<(u32, u32)> {
    let mut runs = runs_of(set);
    if runs.len() >= 2
        && runs.first().is_some_and(|r| r.0 == min)
        && runs.last().is_some_and(|r| r.1 == max)
    {
        let (_, to) = runs.remove(0);
        if let Some(last) = runs.last_mut() {
            last.1 = to;
        }
    }
    runs
}

/// The values of a run in order, across the end of a `cycle`-long field when `from > to`.
fn run_values(from: u32, to: u32, cycle: u32) -> impl Iterator<Item = u32> {
    let length = if from <= to {
        to - from + 1
    } else {
        to + cycle - from + 1
    };
    (0..length).map(move |i| (from + i) % cycle)
}

/// Runs in words: a run of at least `range_from` values is "A through B", shorter ones are
/// listed value by value; `cycle` is the field's length, for a run across its end.
fn list_runs(
    runs: &[(u32, u32)],
    cycle: u32,
    range_from: usize,
    name: impl Fn(u32) -> String,
    through: &str,
) -> String {
    let mut parts = Vec::new();
    for &(from, to) in runs {
        if run_values(from, to, cycle).count() >= range_from {
            parts.push(format!("{} {through} {}", name(from), name(to)));
        } else {
            parts.extend(run_values(from, to, cycle).map(&name));
        }
    }
    join(&parts, "and")
}

impl super::ZonedCron {
    /// The schedule in English with its zone and, where clocks change, its DST policies.
    pub fn describe(&self) -> String {
        describe_zoned(
            &self.expr,
            self.tz.name(),
            self.on_dst_gap,
            self.on_dst_repeat,
        )
    }
}

/// A zoned schedule in words: the expression, its zone, and what the DST policies do.
pub fn describe_zoned(expr: &CronExpr, zone: &str, gap: OnDstGap, repeat: OnDstRepeat) -> String {
    let mut text = format!("{} ({zone})", expr.describe());
    if zone == "UTC" || zone == "Etc/UTC" {
        return text;
    }
    if !expr.is_fixed_time() {
        text.push_str("; across clock changes it keeps to elapsed time");
        return text;
    }
    text.push_str(match gap {
        OnDstGap::Shift => "; a time skipped when clocks go forward runs when the gap ends",
        OnDstGap::Skip => "; a time skipped when clocks go forward does not run",
    });
    text.push_str(match repeat {
        OnDstRepeat::Once => ", and a time that repeats when clocks go back runs once",
        OnDstRepeat::Twice => ", and a time that repeats when clocks go back runs twice",
    });
    text
}

/// The values `min..=max` whose bits are set.
fn values(bits: u64, min: u32, max: u32) -> Vec<u32> {
    (min..=max).filter(|v| bits & (1 << v) != 0).collect()
}

/// `1st`, `2nd`, `23rd`, `11th`.
fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// `a`, `a and b`, `a, b and c`.
fn join(items: &[String], word: &str) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} {word} {last}", init.join(", ")),
    }
}

#[cfg(test)]
#[path = "describe_tests.rs"]
mod tests;
