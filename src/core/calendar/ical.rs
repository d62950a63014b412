//! Reads an iCalendar (RFC 5545) holiday file and turns each VEVENT into an exclusion spec
//! for the cron scheduler: a date, an inclusive date range, or a yearly cron-like spec.
//! It refuses what it cannot express exactly (any recurrence but a simple yearly rule,
//! EXDATE/RDATE, multi-value BYxxx parts) and malformed or unbalanced calendar structure.

use chrono::{Datelike, Days, NaiveDate, NaiveTime, Weekday};
use std::collections::HashSet;

/// One exclusion read from a calendar file: a spec string in the scheduler's exclusion grammar and the event's summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IcalEntry {
    pub spec: String,
    pub note: Option<String>,
}

/// Why a calendar file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IcalError {
    /// A content line that is malformed, breaks the BEGIN/END nesting, or uses something with
    /// no exact exclusion spec. `line` is the 1-based physical line where it starts; `event`
    /// is the SUMMARY (else UID) of the event it is in, when known.
    #[error("line {line}{}: {reason}", in_event(.event.as_deref()))]
    Rejected {
        line: usize,
        event: Option<String>,
        reason: String,
    },
    /// More than [`MAX_EVENTS`] events; `line` is where the first one too many begins.
    #[error("line {line}: the file holds more than {max} events", max = MAX_EVENTS)]
    TooManyEvents { line: usize },
}

/// The most events one file may hold.
pub const MAX_EVENTS: usize = 1000;

const MAX_NOTE_CHARS: usize = 200;
/// A bounded rule is expanded over at most this many years, so a huge COUNT stays cheap.
const MAX_YEARS: i32 = 200;
/// The exclusion grammar writes four-digit years.
const MAX_YEAR: i32 = 9999;

fn in_event(event: Option<&str>) -> String {
    event.map_or(String::new(), |e| format!(" (event \"{e}\")"))
}

fn rejected(line: usize, event: Option<String>, reason: String) -> IcalError {
    IcalError::Rejected {
        line,
        event,
        reason,
    }
}

/// Reads a whole calendar file. Events come out in file order; a bounded yearly rule yields
/// one entry per date, in year order. A file without events gives `Ok(vec![])`.
pub fn parse_ical(text: &str) -> Result<Vec<IcalEntry>, IcalError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // Open components with the line of their BEGIN, outermost first.
    let mut stack: Vec<(String, usize)> = Vec::new();
    let (mut event, mut out, mut events, mut last_line) = (None::<Event>, Vec::new(), 0, 0);
    for (num, raw) in unfold(text) {
        last_line = num;
        let fail = |why| rejected(num, event.as_ref().and_then(Event::label), why);
        let line = parse_line(num, &raw).map_err(fail)?;
        let comp = line.value.trim().to_ascii_uppercase();
        match line.name.as_str() {
            "BEGIN" if stack.is_empty() && comp != "VCALENDAR" => {
                let why = format!("expected BEGIN:VCALENDAR, found BEGIN:{comp}");
                return Err(fail(why));
            }
            "BEGIN" => {
                if comp == "VEVENT" && stack.len() == 1 {
                    events += 1;
                    if events > MAX_EVENTS {
                        return Err(IcalError::TooManyEvents { line: num });
                    }
                    let props = Vec::new();
                    event = Some(Event { line: num, props });
                }
                stack.push((comp, num));
            }
            "END" => match stack.pop() {
                None => return Err(fail(format!("END:{comp} has no matching BEGIN"))),
                Some((open, at)) if open != comp => {
                    let why = format!("END:{comp} does not match BEGIN:{open} on line {at}");
                    return Err(fail(why));
                }
                Some(_) if comp == "VEVENT" && stack.len() == 1 => {
                    if let Some(ev) = event.take() {
                        out.extend(ev.convert()?);
                    }
                }
                Some(_) => {}
            },
            name if stack.is_empty() => {
                return Err(fail(format!("expected BEGIN:VCALENDAR, found {name}")));
            }
            // Only the event's own properties count, not those of a VALARM inside it.
            _ if stack.len() == 2 => {
                if let Some(ev) = event.as_mut() {
                    ev.props.push(line);
                }
            }
            _ => {}
        }
    }
    if let Some((open, at)) = stack.last() {
        let why = format!("BEGIN:{open} is never closed (the file ends at line {last_line})");
        return Err(rejected(*at, event.as_ref().and_then(Event::label), why));
    }
    if last_line == 0 {
        let why = "the file is empty; expected BEGIN:VCALENDAR";
        return Err(rejected(1, None, why.into()));
    }
    Ok(out)
}

/// Joins folded physical lines into content lines, each with the 1-based number of the
/// physical line where it starts. Blank lines are skipped: exporters often end with one.
fn unfold(text: &str) -> impl Iterator<Item = (usize, String)> + '_ {
    let lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let mut lines = lines.enumerate().peekable();
    std::iter::from_fn(move || {
        let (idx, first) = lines.by_ref().find(|(_, l)| !l.is_empty())?;
        let mut line = first.to_string();
        while let Some((_, next)) = lines.next_if(|(_, l)| l.starts_with([' ', '\t'])) {
            line.push_str(next.get(1..).unwrap_or(""));
        }
        Some((idx.saturating_add(1), line))
    })
}

/// A content line: upper-cased name, parameters (upper-cased names, unquoted values), value.
struct Line {
    num: usize,
    name: String,
    params: Vec<(String, String)>,
    value: String,
}

fn parse_line(num: usize, text: &str) -> Result<Line, String> {
    let (mut segments, mut current, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = text.chars();
    // Quoted parameter values may hold ':' and ';', so only unquoted ones split.
    let value = loop {
        match chars.next() {
            None => return Err("expected NAME:VALUE but found no ':'".into()),
            Some(':') if !quoted => break chars.as_str().to_string(),
            Some(';') if !quoted => segments.push(std::mem::take(&mut current)),
            Some(c) => {
                quoted ^= c == '"';
                current.push(c);
            }
        }
    };
    segments.push(current);
    let is_name = |s: &str| s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    let mut segments = segments.into_iter();
    let name = segments.next().unwrap_or_default().to_ascii_uppercase();
    if name.is_empty() || !is_name(&name) {
        return Err(format!("'{name}' is not a valid property name"));
    }
    let params = segments
        .map(|seg| match seg.split_once('=') {
            Some((k, v)) if is_name(k) => Ok((k.to_ascii_uppercase(), v.trim_matches('"').into())),
            _ => Err(format!("{name} has a malformed parameter '{seg}'")),
        })
        .collect::<Result<_, _>>()?;
    Ok(Line {
        num,
        name,
        params,
        value,
    })
}

/// The properties of one VEVENT, with the line of its BEGIN.
struct Event {
    line: usize,
    props: Vec<Line>,
}

/// A DTSTART/DTEND value. Holiday calendars are all-day, so a date-time only matters through
/// its date as written (a TZID or Z is not converted) and whether its time is past midnight.
#[derive(Clone, Copy)]
struct When {
    date: NaiveDate,
    time: Option<NaiveTime>,
}

impl Event {
    fn get(&self, name: &str) -> Option<&Line> {
        self.props.iter().find(|p| p.name == name)
    }

    fn label(&self) -> Option<String> {
        let named = |n| self.get(n).and_then(|p| clean_text(&p.value));
        named("SUMMARY").or_else(|| named("UID"))
    }

    fn convert(&self) -> Result<Vec<IcalEntry>, IcalError> {
        let fail = |line| move |why| rejected(line, self.label(), why);
        // A cancelled event excludes nothing, so the rest of it need not be readable.
        let status = self.get("STATUS").map(|p| p.value.trim());
        if status.is_some_and(|s| s.eq_ignore_ascii_case("CANCELLED")) {
            return Ok(Vec::new());
        }
        let mut seen = HashSet::new();
        for p in &self.props {
            let name = p.name.as_str();
            if matches!(name, "EXDATE" | "RDATE" | "EXRULE") {
                let why = format!("{name} is not supported; list each date as its own event");
                return Err(fail(p.num)(why));
            }
            if matches!(name, "DTSTART" | "DTEND" | "DURATION" | "RRULE") && !seen.insert(name) {
                return Err(fail(p.num)(format!("{name} appears twice")));
            }
        }
        let no_start = || fail(self.line)("the event has no DTSTART".into());
        let start_p = self.get("DTSTART").ok_or_else(no_start)?;
        let start = parse_when(start_p).map_err(fail(start_p.num))?;
        // Without DTEND or DURATION the event covers its start day only.
        let end = match (self.get("DTEND"), self.get("DURATION")) {
            (Some(_), Some(d)) => return Err(fail(d.num)("DURATION conflicts with DTEND".into())),
            (Some(e), None) => {
                let end = parse_when(e).map_err(fail(e.num))?;
                let instant = |w: When| (w.date, w.time.unwrap_or_default());
                if instant(end) < instant(start) {
                    let (ev, sv) = (e.value.trim(), start_p.value.trim());
                    return Err(fail(e.num)(format!("DTEND {ev} is before DTSTART {sv}")));
                }
                end
            }
            (None, Some(d)) => {
                let date = add_duration(start.date, &d.value).map_err(fail(d.num))?;
                When { date, ..start }
            }
            (None, None) => start,
        };
        // The end is exclusive: an end at midnight, or a DATE end, stops at the day before.
        let last = match end.time {
            Some(t) if t > NaiveTime::MIN => end.date,
            _ => end.date.pred_opt().unwrap_or(end.date),
        };
        let last = last.max(start.date);
        let specs = match self.get("RRULE") {
            None if last == start.date => vec![start.date.to_string()],
            None => vec![format!("{}..{last}", start.date)],
            Some(r) if last != start.date => {
                let why = "RRULE on an event spanning several days is not supported";
                return Err(fail(r.num)(why.into()));
            }
            Some(r) => parse_rrule(&r.value)
                .and_then(|rule| rule_specs(start.date, &rule))
                .map_err(fail(r.num))?,
        };
        let note = self.get("SUMMARY").and_then(|p| clean_text(&p.value));
        let entry = |spec| IcalEntry {
            spec,
            note: note.clone(),
        };
        Ok(specs.into_iter().map(entry).collect())
    }
}

/// Unescapes a TEXT value into one trimmed line of at most [`MAX_NOTE_CHARS`] characters.
fn clean_text(raw: &str) -> Option<String> {
    let (mut out, mut chars) = (String::new(), raw.chars());
    while let Some(c) = chars.next() {
        out.push(match c {
            '\\' => match chars.next() {
                Some('n' | 'N') => ' ',
                Some(escaped) => escaped,
                None => '\\',
            },
            c if c.is_control() => ' ',
            c => c,
        });
    }
    let short: String = out.trim().chars().take(MAX_NOTE_CHARS).collect();
    Some(short.trim_end().to_string()).filter(|s| !s.is_empty())
}

/// Parses ASCII digits only; `str::parse` alone would also take a sign.
fn digits<T: std::str::FromStr>(s: &str) -> Option<T> {
    let all_digits = s.bytes().all(|b| b.is_ascii_digit());
    s.parse().ok().filter(|_| all_digits)
}

/// Parses `YYYYMMDD` or `YYYYMMDDTHHMMSS[Z]`.
fn parse_when_str(s: &str) -> Result<When, String> {
    let s = s.trim();
    let bad = || format!("'{s}' is not a valid date (expected YYYYMMDD or YYYYMMDDTHHMMSS)");
    let mut parts = s.splitn(2, ['T', 't']);
    let (d, t) = (parts.next().unwrap_or(""), parts.next());
    let t = t.map(|t| t.strip_suffix(['Z', 'z']).unwrap_or(t));
    // chrono alone would also take fewer digits, so the widths are checked first.
    let shape = |v: &str, n| v.len() == n && digits::<u32>(v).is_some();
    if !shape(d, 8) || t.is_some_and(|t| !shape(t, 6)) {
        return Err(bad());
    }
    let date = NaiveDate::parse_from_str(d, "%Y%m%d").map_err(|_| bad())?;
    let time = t.map(|t| NaiveTime::parse_from_str(t, "%H%M%S"));
    let time = time.transpose().map_err(|_| bad())?;
    Ok(When { date, time })
}

fn parse_when(p: &Line) -> Result<When, String> {
    let when = parse_when_str(&p.value)?;
    let kind = p.params.iter().find(|(k, _)| k == "VALUE");
    let kind = kind.map(|(_, v)| v.to_ascii_uppercase());
    match (kind.as_deref(), when.time) {
        (None, _) | (Some("DATE"), None) | (Some("DATE-TIME"), Some(_)) => Ok(when),
        (Some(k @ ("DATE" | "DATE-TIME")), _) => Err(format!("'{}' is not a {k}", p.value.trim())),
        (Some(k), _) => Err(format!("{} with VALUE={k} is not supported", p.name)),
    }
}

/// Adds a DURATION of whole days or weeks to a date.
fn add_duration(start: NaiveDate, value: &str) -> Result<NaiveDate, String> {
    let v = value.trim().to_ascii_uppercase();
    let body = v.strip_prefix('+').unwrap_or(&v).strip_prefix('P');
    let days = match body.map(|b| (b.strip_suffix('D'), b.strip_suffix('W'))) {
        Some((Some(n), _)) => digits::<u32>(n).map(u64::from),
        Some((_, Some(n))) => digits::<u32>(n).map(|n| u64::from(n) * 7),
        _ => None,
    };
    let why = format!("DURATION {v} is not supported; only whole days (PnD) or weeks (PnW) are");
    let days = days.ok_or(why)?;
    let end = start.checked_add_days(Days::new(days));
    end.filter(|e| e.year() <= MAX_YEAR)
        .ok_or_else(|| format!("DURATION {v} runs past the year {MAX_YEAR}"))
}

#[derive(Default)]
struct Rule {
    month: Option<u32>,
    monthday: Option<u32>,
    /// The ordinal (1 to 5, or -1 for the last) and the weekday.
    byday: Option<(i8, Weekday)>,
    count: Option<u32>,
    until: Option<NaiveDate>,
}

fn parse_rrule(value: &str) -> Result<Rule, String> {
    let (mut rule, mut seen) = (Rule::default(), HashSet::new());
    for part in value.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((key, val)) = part.split_once('=') else {
            return Err(format!("RRULE part '{part}' has no '='"));
        };
        let key = key.trim().to_ascii_uppercase();
        let val = val.trim().to_ascii_uppercase();
        let refuse = |why: &str| format!("RRULE {key}={val} is not supported; {why}");
        let in_range = |lo, hi| digits(&val).filter(|n| (lo..=hi).contains(n));
        let ranged = |lo, hi, why| in_range(lo, hi).ok_or_else(|| refuse(why));
        if !seen.insert(key.clone()) {
            return Err(format!("RRULE has {key} twice"));
        }
        if key.starts_with("BY") && val.contains(',') {
            return Err(refuse("only a single value is"));
        }
        match key.as_str() {
            "FREQ" if val == "YEARLY" => {}
            "FREQ" => return Err(refuse("only yearly rules are")),
            "INTERVAL" if val == "1" => {}
            "INTERVAL" => return Err(refuse("only every year (INTERVAL=1) is")),
            "BYMONTH" => rule.month = Some(ranged(1, 12, "only a month 1-12 is")?),
            "BYMONTHDAY" => rule.monthday = Some(ranged(1, 31, "only a day 1-31 is")?),
            "COUNT" => rule.count = Some(ranged(1, u32::MAX, "only a positive number is")?),
            "BYDAY" => {
                let why = "only one weekday with an ordinal 1 to 5 or -1 is, such as 4TH or -1MO";
                rule.byday = Some(parse_byday(&val).ok_or_else(|| refuse(why))?);
            }
            "UNTIL" => rule.until = Some(parse_when_str(&val)?.date),
            // The week start cannot change which yearly dates these rules pick.
            "WKST" => {}
            _ => return Err(format!("RRULE part {key} is not supported")),
        }
    }
    if !seen.contains("FREQ") {
        return Err("RRULE has no FREQ".into());
    }
    if rule.count.is_some() && rule.until.is_some() {
        return Err("RRULE may have COUNT or UNTIL, not both".into());
    }
    if rule.monthday.is_some() && rule.byday.is_some() {
        return Err("RRULE with both BYMONTHDAY and BYDAY is not supported".into());
    }
    // Without BYMONTH, RFC 5545 makes a yearly BYMONTHDAY repeat every month and a yearly
    // BYDAY count weekdays through the whole year: neither is one day of one month.
    if rule.month.is_none() && (rule.monthday.is_some() || rule.byday.is_some()) {
        let why = "a yearly RRULE with BYMONTHDAY or BYDAY but no BYMONTH is not supported";
        return Err(why.into());
    }
    Ok(rule)
}

/// Parses `4TH`, `+4TH` or `-1MO`; `None` for anything else.
fn parse_byday(val: &str) -> Option<(i8, Weekday)> {
    let split = val.len().checked_sub(2)?;
    let (ord, day) = (val.get(..split)?, val.get(split..)?);
    let mut week = (0..7u8).filter_map(|i| Weekday::try_from(i).ok());
    let weekday = week.find(|d| d.to_string().to_ascii_uppercase().starts_with(day))?;
    let n = match ord {
        "-1" => -1,
        n => digits(n.strip_prefix('+').unwrap_or(n)).filter(|n| (1..=5).contains(n))?,
    };
    Some((n, weekday))
}

/// Turns a yearly rule into specs. Holiday files start in the past, so an unbounded rule is
/// taken as every year, those before DTSTART too, and becomes one cron-like spec. A bounded
/// rule (COUNT or UNTIL) becomes its individual dates from DTSTART on instead.
fn rule_specs(start: NaiveDate, rule: &Rule) -> Result<Vec<String>, String> {
    let month = rule.month.unwrap_or(start.month());
    let day = rule.monthday.unwrap_or(start.day());
    let dow = |wd: Weekday| wd.to_string().to_ascii_uppercase();
    let cron = match rule.byday {
        None if NaiveDate::from_ymd_opt(2000, month, day).is_none() => {
            return Err(format!("RRULE day {day} never occurs in month {month}"));
        }
        None => format!("* * {day} {month} *"),
        Some((-1, wd)) => format!("* * * {month} {}L", dow(wd)),
        Some((n, wd)) => format!("* * * {month} {}#{n}", dow(wd)),
    };
    if rule.count.is_none() && rule.until.is_none() {
        return Ok(vec![cron]);
    }
    let nth = |year, wd, n| NaiveDate::from_weekday_of_month_opt(year, month, wd, n);
    let on = |year| match rule.byday {
        None => NaiveDate::from_ymd_opt(year, month, day),
        // Every month has four of each weekday and some have a fifth.
        Some((-1, wd)) => nth(year, wd, 5).or_else(|| nth(year, wd, 4)),
        Some((n, wd)) => u8::try_from(n).ok().and_then(|n| nth(year, wd, n)),
    };
    // Years without the date (Feb 29, a missing 5th weekday) are skipped, not counted.
    let years = start.year()..start.year().saturating_add(MAX_YEARS).min(MAX_YEAR + 1);
    let dates = years.filter_map(on).filter(|d| *d >= start);
    let dates = dates.take_while(|d| rule.until.is_none_or(|u| *d <= u));
    let count = rule.count.map_or(usize::MAX, |c| c as usize);
    Ok(dates.take(count).map(|d| d.to_string()).collect())
}

#[cfg(test)]
#[path = "ical_error_tests.rs"]
mod error_tests;
#[cfg(test)]
#[path = "ical_tests.rs"]
mod tests;
