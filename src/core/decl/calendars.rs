//! The calendars a declaration file declares beside its schedules, so that a service keeps the
//! holidays its schedules exclude in the same file:
//!
//! ```yaml
//! calendars:
//!   us-holidays:
//!     description: US public holidays
//!     entries:
//!       - "2031-07-04"                            # a spec alone
//!       - { spec: "* * * 11 THU#4", note: Thanksgiving }
//! schedules:
//!   - schedule_type: payroll.export
//!     cron: "0 9 * * MON-FRI"
//!     exclude: [us-holidays]
//! ```
//!
//! A calendar belongs to the environment, not to the domain: enrolling writes the calendars
//! the file declares (created or replaced whole) and never removes one.

use serde_json::Value;

use super::parse::parse_top;
use super::{DeclError, DeclFormat, FieldError, json_kind};
use crate::core::calendar::{CalendarDraft, CalendarEntryText, check_name};

/// A calendar as a declaration file declares it, checked.
#[derive(Debug, Clone)]
pub struct DeclaredCalendar {
    pub name: String,
    pub draft: CalendarDraft,
}

/// The calendars of a declaration file (none when it declares none), each checked: every
/// problem of every calendar is reported, named by field.
pub fn declared_calendars(
    text: &str,
    format: DeclFormat,
) -> Result<Vec<DeclaredCalendar>, DeclError> {
    let top = parse_top(text, format)?;
    let calendars = match top.get("calendars") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(map)) => map,
        Some(other) => {
            return Err(DeclError::Calendars(vec![FieldError::new(
                "calendars",
                format!(
                    "must be an object of name: calendar, got {}",
                    json_kind(other)
                ),
            )]));
        }
    };
    let mut declared = Vec::new();
    let mut errors = Vec::new();
    for (name, value) in calendars {
        let field = format!("calendars.{name}");
        if let Err(reason) = check_name(name) {
            errors.push(FieldError::new(&field, reason));
            continue;
        }
        match calendar(&field, value) {
            Ok(draft) => match draft.validate() {
                Ok(_) => declared.push(DeclaredCalendar {
                    name: name.clone(),
                    draft,
                }),
                Err(problems) => errors.extend(
                    problems
                        .into_iter()
                        .map(|p| FieldError::new(format!("{field}.{}", p.field), p.message)),
                ),
            },
            Err(mut problems) => errors.append(&mut problems),
        }
    }
    if errors.is_empty() {
        Ok(declared)
    } else {
        Err(DeclError::Calendars(errors))
    }
}

/// One calendar's `description` and `entries` (each a spec, or `{spec, note}`).
fn calendar(field: &str, value: &Value) -> Result<CalendarDraft, Vec<FieldError>> {
    let Value::Object(map) = value else {
        return Err(vec![FieldError::new(
            field,
            format!(
                "must be an object with description and entries, got {}",
                json_kind(value)
            ),
        )]);
    };
    let mut errors = Vec::new();
    let mut draft = CalendarDraft::default();
    for (key, value) in map {
        let at = format!("{field}.{key}");
        match (key.as_str(), value) {
            ("description", Value::String(text)) => draft.description = text.clone(),
            ("description", Value::Null) => {}
            ("entries", Value::Array(list)) => {
                for (i, item) in list.iter().enumerate() {
                    match entry(item) {
                        Ok(entry) => draft.entries.push(entry),
                        Err(reason) => errors.push(FieldError::new(format!("{at}[{i}]"), reason)),
                    }
                }
            }
            ("description" | "entries", other) => errors.push(FieldError::new(
                at,
                format!("has the wrong type: {}", json_kind(other)),
            )),
            _ => errors.push(FieldError::new(at, "unknown field")),
        }
    }
    if errors.is_empty() {
        Ok(draft)
    } else {
        Err(errors)
    }
}

fn entry(value: &Value) -> Result<CalendarEntryText, String> {
    match value {
        Value::String(spec) => Ok(CalendarEntryText {
            spec: spec.clone(),
            note: None,
        }),
        Value::Object(map) => {
            if let Some(unknown) = map.keys().find(|k| !matches!(k.as_str(), "spec" | "note")) {
                return Err(format!(
                    "unknown field {unknown:?} (an entry has spec and note)"
                ));
            }
            let spec = match map.get("spec") {
                Some(Value::String(spec)) => spec.clone(),
                _ => return Err("an entry needs a spec (a string)".to_owned()),
            };
            let note = match map.get("note") {
                None | Some(Value::Null) => None,
                Some(Value::String(note)) => Some(note.clone()),
                Some(other) => {
                    return Err(format!("note must be a string, got {}", json_kind(other)));
                }
            };
            Ok(CalendarEntryText { spec, note })
        }
        other => Err(format!(
            "must be a spec or {{spec, note}}, got {}",
            json_kind(other)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
calendars:
  us-holidays:
    description: US public holidays
    entries:
      - 2031-07-04
      - { spec: "* * * 11 THU#4", note: Thanksgiving }
  freeze:
    entries: ["2031-12-20..2032-01-02"]
schedules: []
"#;

    #[test]
    fn calendars_are_read_beside_the_schedules() {
        let declared = declared_calendars(FILE, DeclFormat::Yaml).unwrap();
        let names: Vec<&str> = declared.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["freeze", "us-holidays"]);
        let holidays = &declared[1].draft;
        assert_eq!(holidays.description, "US public holidays");
        assert_eq!(
            holidays.entries,
            [
                CalendarEntryText {
                    spec: "2031-07-04".into(),
                    note: None
                },
                CalendarEntryText {
                    spec: "* * * 11 THU#4".into(),
                    note: Some("Thanksgiving".into())
                },
            ]
        );
        // The schedules are read as before; a file without calendars declares none.
        assert!(
            super::super::load_declarations(FILE, DeclFormat::Yaml, chrono::Utc::now())
                .unwrap()
                .is_empty()
        );
        assert!(
            declared_calendars("schedules: []", DeclFormat::Yaml)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn every_problem_of_every_calendar_is_named_by_field() {
        let file = r#"
calendars:
  "9bad": { entries: [] }
  holidays:
    entries: ["2031-02-30", { spec: "2031-07-04", when: x }, 5]
    colour: red
schedules: []
"#;
        let Err(DeclError::Calendars(errors)) = declared_calendars(file, DeclFormat::Yaml) else {
            panic!("refused");
        };
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "calendars.9bad",
                "calendars.holidays.colour",
                "calendars.holidays.entries[1]",
                "calendars.holidays.entries[2]",
            ]
        );
        // The spec itself is checked once the structure reads.
        let file = "calendars: { holidays: { entries: [\"2031-02-30\"] } }\nschedules: []\n";
        let Err(DeclError::Calendars(errors)) = declared_calendars(file, DeclFormat::Yaml) else {
            panic!("refused");
        };
        assert_eq!(errors[0].field, "calendars.holidays.entries[0].spec");
    }
}
