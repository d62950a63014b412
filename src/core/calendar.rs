//! Exclusions: the days and times a schedule does not run ("09:00 on weekdays, except public
//! holidays"). A schedule's `exclude` lists dates (`2026-12-25`), inclusive date ranges
//! (`2026-12-24..2026-12-26`), cron-like specs read as sets of times (`* * * * SAT,SUN`, every
//! Christmas `* * 25 12 *`), and names of calendars: named lists of the same specs shared
//! within an environment, which may be loaded from an iCalendar file of holidays (`ical.rs`).
//!
//! Exclusions are read on the wall clock of the schedule's own zone, at each occurrence before
//! its jitter. They never move an occurrence: an excluded one is recorded as skipped, with the
//! calendar that excluded it, and counts no run.

pub mod ical;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::core::cron::{CronExpr, WallTime};
use crate::core::decl::FieldError;

/// The most entries of a schedule's own `exclude`.
pub const MAX_SCHEDULE_EXCLUDES: usize = 100;
/// The most entries of one calendar (an iCalendar file's events, expanded).
pub const MAX_CALENDAR_ENTRIES: usize = 2_000;
/// The longest date range, in days: longer pauses are what `pause` and `end_at` are for.
pub const MAX_RANGE_DAYS: i64 = 366;
/// The longest calendar name.
pub const MAX_NAME_LEN: usize = 63;
/// The longest note or description.
pub const MAX_NOTE_LEN: usize = 200;

/// One exclusion: a date, an inclusive range of dates, or a cron-like set of times, all on
/// the schedule's wall clock. Its text is kept as written (normalised for dates).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExcludeSpec {
    Date(NaiveDate),
    Range(NaiveDate, NaiveDate),
    Cron(Box<CronExpr>, String),
}

impl ExcludeSpec {
    /// Reads a date, `first..last`, or a five- or six-field cron expression.
    pub fn parse(text: &str) -> Result<ExcludeSpec, String> {
        let text = text.trim();
        if let Some((first, last)) = text.split_once("..") {
            let (first, last) = (date(first)?, date(last)?);
            if last <= first {
                return Err(format!(
                    "the range {text:?} must end after it starts (a single day is written as a date)"
                ));
            }
            if (last - first).num_days() >= MAX_RANGE_DAYS {
                return Err(format!(
                    "the range {text:?} spans more than {MAX_RANGE_DAYS} days; pause the schedule or set its end_at instead"
                ));
            }
            return Ok(ExcludeSpec::Range(first, last));
        }
        if text.contains(char::is_whitespace) {
            if text.starts_with('@') {
                return Err(format!(
                    "{text:?}: an interval names no days or times to exclude"
                ));
            }
            let expr = CronExpr::parse(text).map_err(|e| format!("{text:?}: {e}"))?;
            return Ok(ExcludeSpec::Cron(Box::new(expr), text.to_owned()));
        }
        Ok(ExcludeSpec::Date(date(text)?))
    }

    /// Whether the wall time `wall` is excluded.
    pub fn covers(&self, wall: NaiveDateTime) -> bool {
        self.covers_parts(wall.date(), &WallTime::of(wall))
    }

    /// [`ExcludeSpec::covers`] of a wall time already taken apart (its date, its fields).
    fn covers_parts(&self, date: NaiveDate, wall: &WallTime) -> bool {
        match self {
            ExcludeSpec::Date(d) => date == *d,
            ExcludeSpec::Range(first, last) => (*first..=*last).contains(&date),
            ExcludeSpec::Cron(expr, _) => expr.covers(wall),
        }
    }
}

fn date(text: &str) -> Result<NaiveDate, String> {
    let text = text.trim();
    NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| {
        format!("{text:?} is neither a date (YYYY-MM-DD), a range (YYYY-MM-DD..YYYY-MM-DD), a cron expression nor a calendar name")
    })
}

impl fmt::Display for ExcludeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExcludeSpec::Date(d) => write!(f, "{d}"),
            ExcludeSpec::Range(first, last) => write!(f, "{first}..{last}"),
            ExcludeSpec::Cron(_, text) => f.write_str(text),
        }
    }
}

/// A calendar's name: a letter, then letters, digits, `_` or `-` (so it never reads as a date
/// or a cron expression).
pub fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let starts_with_letter = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    if !starts_with_letter
        || name.len() > MAX_NAME_LEN
        || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "{name:?} is not a calendar name: a letter, then up to {} letters, digits, '_' or '-'",
            MAX_NAME_LEN - 1
        ));
    }
    Ok(())
}

/// One entry of a schedule's `exclude`: a spec of its own, or a calendar's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExcludeEntry {
    Spec(ExcludeSpec),
    Calendar(String),
}

impl ExcludeEntry {
    pub fn parse(text: &str) -> Result<ExcludeEntry, String> {
        let text = text.trim();
        if text.starts_with(|c: char| c.is_ascii_alphabetic())
            && !text.contains(char::is_whitespace)
        {
            check_name(text)?;
            return Ok(ExcludeEntry::Calendar(text.to_owned()));
        }
        ExcludeSpec::parse(text).map(ExcludeEntry::Spec)
    }
}

impl fmt::Display for ExcludeEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExcludeEntry::Spec(spec) => spec.fmt(f),
            ExcludeEntry::Calendar(name) => f.write_str(name),
        }
    }
}

/// A schedule's exclusions, in the order written; stored and shown as a list of strings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exclude(Vec<ExcludeEntry>);

impl Exclude {
    /// Checks every entry, reporting each problem under `field[i]`.
    pub fn validate(field: &str, texts: &[String]) -> Result<Exclude, Vec<FieldError>> {
        let mut errors = Vec::new();
        if texts.len() > MAX_SCHEDULE_EXCLUDES {
            errors.push(FieldError::new(
                field,
                format!(
                    "at most {MAX_SCHEDULE_EXCLUDES} entries ({} given); share them in a calendar",
                    texts.len()
                ),
            ));
        }
        let mut entries = Vec::new();
        for (i, text) in texts.iter().enumerate() {
            match ExcludeEntry::parse(text) {
                Ok(entry) => entries.push(entry),
                Err(reason) => errors.push(FieldError::new(format!("{field}[{i}]"), reason)),
            }
        }
        if errors.is_empty() {
            Ok(Exclude(entries))
        } else {
            Err(errors)
        }
    }

    /// Exclusions as the store holds them: an entry that no longer reads (edited by hand) is
    /// dropped with a warning rather than stopping the schedule.
    pub fn from_stored(texts: Vec<String>) -> Exclude {
        Exclude(
            texts
                .iter()
                .filter_map(|text| match ExcludeEntry::parse(text) {
                    Ok(entry) => Some(entry),
                    Err(reason) => {
                        tracing::warn!(entry = %text, %reason, "stored exclusion does not read; ignored");
                        None
                    }
                })
                .collect(),
        )
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn entries(&self) -> &[ExcludeEntry] {
        &self.0
    }

    /// The entries as text, as stored and shown.
    pub fn texts(&self) -> Vec<String> {
        self.0.iter().map(ToString::to_string).collect()
    }

    /// The calendars it names.
    pub fn calendar_names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().filter_map(|e| match e {
            ExcludeEntry::Calendar(name) => Some(name.as_str()),
            ExcludeEntry::Spec(_) => None,
        })
    }

    /// What excludes the wall time `wall`, if anything: the first entry that covers it, a
    /// calendar through its first entry that does. A calendar missing from `calendars` (removed
    /// meanwhile) excludes nothing.
    pub fn excluding(&self, wall: NaiveDateTime, calendars: &Calendars) -> Option<Exclusion> {
        if self.0.is_empty() {
            return None;
        }
        let (date, parts) = (wall.date(), WallTime::of(wall));
        self.0.iter().find_map(|entry| match entry {
            ExcludeEntry::Spec(spec) => spec.covers_parts(date, &parts).then(|| Exclusion {
                calendar: None,
                spec: spec.to_string(),
                note: None,
            }),
            ExcludeEntry::Calendar(name) => {
                let found = calendars.get(name)?.excluding_parts(date, &parts)?;
                Some(Exclusion {
                    calendar: Some(name.clone()),
                    spec: found.spec.to_string(),
                    note: found.note.clone(),
                })
            }
        })
    }
}

impl Serialize for Exclude {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.texts().serialize(serializer)
    }
}

/// Why an occurrence does not run: the calendar (none for the schedule's own entry), the spec
/// that covers it and that entry's note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exclusion {
    pub calendar: Option<String>,
    pub spec: String,
    pub note: Option<String>,
}

impl Exclusion {
    /// The skipped record's reason: names the calendar, the entry and its note.
    pub fn reason(&self) -> String {
        let note = self
            .note
            .as_deref()
            .map(|n| format!(", {n}"))
            .unwrap_or_default();
        match &self.calendar {
            Some(calendar) => format!(
                "skipped: excluded by calendar {calendar} ({}{note})",
                self.spec
            ),
            None => format!("skipped: excluded by the schedule's exclude {}", self.spec),
        }
    }
}

impl fmt::Display for Exclusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.calendar {
            Some(calendar) => write!(f, "{calendar}: {}", self.spec)?,
            None => f.write_str(&self.spec)?,
        }
        if let Some(note) = &self.note {
            write!(f, " ({note})")?;
        }
        Ok(())
    }
}

/// One entry of a calendar: a spec and what it is (a holiday's name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarEntry {
    pub spec: ExcludeSpec,
    pub note: Option<String>,
}

/// An entry as written and stored: its spec as text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CalendarEntryText {
    pub spec: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl From<ical::IcalEntry> for CalendarEntryText {
    fn from(entry: ical::IcalEntry) -> Self {
        CalendarEntryText {
            spec: entry.spec,
            note: entry.note,
        }
    }
}

/// A named list of exclusions shared by an environment's schedules.
#[derive(Debug, Clone, PartialEq)]
pub struct Calendar {
    pub name: String,
    pub description: String,
    entries: Vec<CalendarEntry>,
    /// The date entries as day ranges sorted by their first day, each with the latest last day
    /// of it and all before it, so a date is looked up by a binary search.
    days: Vec<(NaiveDate, NaiveDate, NaiveDate, usize)>,
    /// The cron-like entries, in the order written, each with its index.
    crons: Vec<(CronExpr, usize)>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub created_by: String,
    pub updated_by: String,
}

/// The calendars of an environment that a claim or a listing needs, by name.
pub type Calendars = HashMap<String, Calendar>;

/// A calendar's fields as a writer gives them, before they are checked.
#[derive(Debug, Clone, Default)]
pub struct CalendarDraft {
    pub description: String,
    pub entries: Vec<CalendarEntryText>,
}

impl CalendarDraft {
    /// Checks the entries and the description, each problem under its field
    /// (`entries[i].spec`).
    pub fn validate(&self) -> Result<Vec<CalendarEntry>, Vec<FieldError>> {
        let mut errors = Vec::new();
        if self.description.chars().count() > MAX_NOTE_LEN {
            errors.push(FieldError::new(
                "description",
                format!("at most {MAX_NOTE_LEN} characters"),
            ));
        }
        if self.entries.len() > MAX_CALENDAR_ENTRIES {
            errors.push(FieldError::new(
                "entries",
                format!(
                    "at most {MAX_CALENDAR_ENTRIES} entries ({} given)",
                    self.entries.len()
                ),
            ));
        }
        let mut entries = Vec::new();
        for (i, entry) in self.entries.iter().enumerate() {
            if entry
                .note
                .as_ref()
                .is_some_and(|n| n.chars().count() > MAX_NOTE_LEN)
            {
                errors.push(FieldError::new(
                    format!("entries[{i}].note"),
                    format!("at most {MAX_NOTE_LEN} characters"),
                ));
            }
            match ExcludeSpec::parse(&entry.spec) {
                Ok(spec) => entries.push(CalendarEntry {
                    spec,
                    note: entry.note.clone().filter(|n| !n.trim().is_empty()),
                }),
                Err(reason) => errors.push(FieldError::new(format!("entries[{i}].spec"), reason)),
            }
        }
        if errors.is_empty() {
            Ok(entries)
        } else {
            Err(errors)
        }
    }
}

impl Calendar {
    /// A calendar of checked entries.
    pub fn new(
        name: String,
        description: String,
        entries: Vec<CalendarEntry>,
        by: &str,
        now: DateTime<Utc>,
    ) -> Calendar {
        let mut calendar = Calendar {
            name,
            description,
            entries: Vec::new(),
            days: Vec::new(),
            crons: Vec::new(),
            created_at: now,
            updated_at: now,
            created_by: by.to_owned(),
            updated_by: by.to_owned(),
        };
        calendar.set_entries(entries);
        calendar
    }

    /// A calendar as stored; an entry that no longer reads is dropped with a warning.
    pub fn from_stored(
        name: String,
        description: String,
        entries: Vec<CalendarEntryText>,
        times: (DateTime<Utc>, DateTime<Utc>),
        by: (String, String),
    ) -> Calendar {
        let entries = entries
            .into_iter()
            .filter_map(|e| match ExcludeSpec::parse(&e.spec) {
                Ok(spec) => Some(CalendarEntry { spec, note: e.note }),
                Err(reason) => {
                    tracing::warn!(calendar = %name, entry = %e.spec, %reason, "stored calendar entry does not read; ignored");
                    None
                }
            })
            .collect();
        let mut calendar = Calendar::new(name, description, entries, &by.0, times.0);
        calendar.updated_at = times.1;
        calendar.updated_by = by.1;
        calendar
    }

    pub fn set_entries(&mut self, entries: Vec<CalendarEntry>) {
        let mut days: Vec<(NaiveDate, NaiveDate, NaiveDate, usize)> = entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| match e.spec {
                ExcludeSpec::Date(d) => Some((d, d, d, i)),
                ExcludeSpec::Range(first, last) => Some((first, last, last, i)),
                ExcludeSpec::Cron(..) => None,
            })
            .collect();
        days.sort_by_key(|&(first, _, _, i)| (first, i));
        let mut reach = NaiveDate::MIN;
        for day in &mut days {
            reach = reach.max(day.1);
            day.2 = reach;
        }
        self.crons = entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| match &e.spec {
                ExcludeSpec::Cron(expr, _) => Some((**expr, i)),
                _ => None,
            })
            .collect();
        self.entries = entries;
        self.days = days;
    }

    pub fn entries(&self) -> &[CalendarEntry] {
        &self.entries
    }

    /// The entries as text, as stored and shown.
    pub fn entry_texts(&self) -> Vec<CalendarEntryText> {
        self.entries
            .iter()
            .map(|e| CalendarEntryText {
                spec: e.spec.to_string(),
                note: e.note.clone(),
            })
            .collect()
    }

    /// The entry that excludes `wall`, if any: of the dates and ranges the one written first,
    /// else the first cron-like spec that covers it.
    pub fn excluding(&self, wall: NaiveDateTime) -> Option<&CalendarEntry> {
        self.excluding_parts(wall.date(), &WallTime::of(wall))
    }

    fn excluding_parts(&self, day: NaiveDate, wall: &WallTime) -> Option<&CalendarEntry> {
        // Ranges starting on or before the day; walk back while one of them may reach it.
        let upto = self.days.partition_point(|&(first, ..)| first <= day);
        let by_date = self.days[..upto]
            .iter()
            .rev()
            .take_while(|&&(_, _, reach, _)| reach >= day)
            .filter(|&&(_, last, _, _)| last >= day)
            .map(|&(.., i)| i)
            .min();
        if let Some(i) = by_date {
            return self.entries.get(i);
        }
        self.crons
            .iter()
            .find(|(expr, _)| expr.covers(wall))
            .and_then(|&(_, i)| self.entries.get(i))
    }
}
