//! The structural step of reading a declaration file: syntax, the top-level shape, and each
//! entry's keys and value types, with every problem named by field.

use serde_json::Value;

use serde::Deserialize;
use serde::de::IgnoredAny;

use super::{
    DeclError, DeclFormat, FieldError, MAX_RETRIES_LIMIT, Position, ScheduleDecl, json_kind,
};

/// An entry read as far as its structure allows, with the structural problems found.
pub(super) struct ParsedEntry {
    pub decl: ScheduleDecl,
    pub schedule_type: Option<String>,
    pub errors: Vec<FieldError>,
    /// Where the entry starts in the document, when known.
    pub location: Option<Position>,
}

pub(super) fn parse_entries(text: &str, format: DeclFormat) -> Result<Vec<ParsedEntry>, DeclError> {
    let top = parse_top(text, format)?;
    let schedules = match top.get("schedules") {
        None => return Err(DeclError::MissingSchedules),
        Some(Value::Array(list)) => list,
        Some(_) => return Err(DeclError::SchedulesNotAList),
    };
    let mut locations = entry_locations(text).into_iter();
    Ok(schedules
        .iter()
        .map(|value| ParsedEntry {
            location: locations.next().flatten(),
            ..parse_entry(value)
        })
        .collect())
}

/// The document's top-level object: `schedules`, and the `calendars` beside them.
pub(super) fn parse_top(
    text: &str,
    format: DeclFormat,
) -> Result<serde_json::Map<String, Value>, DeclError> {
    let document: Value = match format {
        DeclFormat::Json => serde_json::from_str(text).map_err(|err| DeclError::Json {
            line: err.line(),
            column: err.column(),
            message: strip_json_position(&err.to_string()),
        })?,
        DeclFormat::Yaml => serde_saphyr::from_str(text).map_err(|err: serde_saphyr::Error| {
            let location = err.location();
            DeclError::Yaml {
                line: location.map(|location| location.line()),
                column: location.map(|location| location.column()),
                message: err.to_string(),
            }
        })?,
    };
    let Value::Object(top) = document else {
        return Err(DeclError::NotAnObject);
    };
    if let Some(unknown) = top
        .keys()
        .find(|key| !matches!(key.as_str(), "schedules" | "calendars"))
    {
        return Err(DeclError::UnknownTopLevelKey(unknown.clone()));
    }
    Ok(top)
}

/// Only what locating the entries needs: the `schedules` list, each entry skipped over with
/// where it starts.
#[derive(Deserialize)]
struct Located {
    #[serde(default)]
    schedules: Vec<serde_saphyr::Spanned<IgnoredAny>>,
}

/// Where each entry of the `schedules` list starts. JSON is read by the YAML parser too (a
/// JSON document is YAML flow syntax), so both formats get the same positions; a document
/// the YAML parser reads differently from serde_json gets none (errors then name the entry
/// by number alone).
fn entry_locations(text: &str) -> Vec<Option<Position>> {
    let Ok(located) = serde_saphyr::from_str::<Located>(text) else {
        return Vec::new();
    };
    located
        .schedules
        .iter()
        .map(|entry| {
            let at = entry.referenced;
            (at.line() > 0).then(|| Position {
                line: at.line(),
                column: at.column(),
            })
        })
        .collect()
}

/// serde_json appends " at line L column C" to its messages; the error reports those apart.
fn strip_json_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(position) => message.get(..position).unwrap_or(message).to_owned(),
        None => message.to_owned(),
    }
}

fn parse_entry(value: &Value) -> ParsedEntry {
    let mut entry = ParsedEntry {
        decl: ScheduleDecl::default(),
        schedule_type: None,
        errors: Vec::new(),
        location: None,
    };
    let Value::Object(map) = value else {
        entry.errors.push(FieldError::new(
            "entry",
            format!("must be an object, got {}", json_kind(value)),
        ));
        return entry;
    };
    let decl = &mut entry.decl;
    let errors = &mut entry.errors;
    for (key, value) in map {
        match key.as_str() {
            "schedule_type" => match value {
                Value::String(text) => {
                    decl.schedule_type = text.clone();
                    entry.schedule_type = Some(text.clone());
                }
                other => errors.push(FieldError::new(
                    key,
                    format!("must be a string, got {}", json_kind(other)),
                )),
            },
            "cron" => decl.cron = optional_string(key, value, errors),
            "run_at" => decl.run_at = optional_string(key, value, errors),
            "timezone" => decl.timezone = optional_string(key, value, errors),
            "payload" => decl.payload = (!value.is_null()).then(|| value.clone()),
            "max_retries" => {
                decl.max_retries = match value {
                    Value::Null => None,
                    Value::Number(number) => match number.as_u64() {
                        Some(n) if n <= u64::from(MAX_RETRIES_LIMIT) => u32::try_from(n).ok(),
                        _ => {
                            errors.push(FieldError::new(
                                key,
                                format!("{number} is out of range 0-{MAX_RETRIES_LIMIT}"),
                            ));
                            None
                        }
                    },
                    other => {
                        errors.push(FieldError::new(
                            key,
                            format!("must be an integer, got {}", json_kind(other)),
                        ));
                        None
                    }
                }
            }
            "on_dst_gap" => {
                decl.on_dst_gap = optional_string(key, value, errors).and_then(|text| {
                    text.parse()
                        .map_err(|err| errors.push(FieldError::new(key, format!("{err}"))))
                        .ok()
                })
            }
            "on_dst_repeat" => {
                decl.on_dst_repeat = optional_string(key, value, errors).and_then(|text| {
                    text.parse()
                        .map_err(|err| errors.push(FieldError::new(key, format!("{err}"))))
                        .ok()
                })
            }
            "overlap" => {
                decl.overlap = optional_string(key, value, errors).and_then(|text| {
                    text.parse()
                        .map_err(|err| errors.push(FieldError::new(key, format!("{err}"))))
                        .ok()
                })
            }
            "after_completion" => {
                decl.after_completion = optional_string(key, value, errors).and_then(|text| {
                    text.parse()
                        .map_err(|err| errors.push(FieldError::new(key, format!("{err}"))))
                        .ok()
                })
            }
            "every" => decl.every = optional_string(key, value, errors),
            "phase" => decl.phase = optional_string(key, value, errors),
            "catchup_window" => decl.catchup_window = optional_string(key, value, errors),
            "max_jitter" => decl.max_jitter = optional_string(key, value, errors),
            "start_at" => decl.start_at = optional_string(key, value, errors),
            "end_at" => decl.end_at = optional_string(key, value, errors),
            "pause_on_failure" => match value {
                Value::Null => {}
                Value::Bool(b) => decl.pause_on_failure = Some(*b),
                other => errors.push(FieldError::new(
                    key,
                    format!("must be true or false, got {}", json_kind(other)),
                )),
            },
            "remaining_runs" => match value {
                Value::Null => {}
                Value::Number(number) => {
                    match number.as_u64().and_then(|n| u32::try_from(n).ok()) {
                        Some(n) => decl.remaining_runs = Some(n),
                        None => errors.push(FieldError::new(
                            key,
                            format!("{number} is not a whole number of runs"),
                        )),
                    }
                }
                other => errors.push(FieldError::new(
                    key,
                    format!("must be an integer, got {}", json_kind(other)),
                )),
            },
            "labels" => decl.labels = labels(key, value, errors),
            "exclude" => decl.exclude = strings(key, value, errors),
            _ => errors.push(FieldError::new(key, "unknown field")),
        }
    }
    if !map.contains_key("schedule_type") {
        errors.push(FieldError::new("schedule_type", "is required"));
    }
    entry
}

/// A list of strings; YAML's unquoted dates are strings already (a number is refused).
fn strings(key: &str, value: &Value, errors: &mut Vec<FieldError>) -> Option<Vec<String>> {
    let list = match value {
        Value::Null => return None,
        Value::Array(list) => list,
        other => {
            errors.push(FieldError::new(
                key,
                format!("must be a list of strings, got {}", json_kind(other)),
            ));
            return None;
        }
    };
    let mut texts = Vec::new();
    for (i, value) in list.iter().enumerate() {
        match value {
            Value::String(text) => texts.push(text.clone()),
            other => errors.push(FieldError::new(
                format!("{key}[{i}]"),
                format!("must be a string (quote it), got {}", json_kind(other)),
            )),
        }
    }
    Some(texts)
}

/// An object of strings; a number or a boolean is refused by its label (YAML reads `tier: 1`
/// as a number: quote it).
fn labels(
    key: &str,
    value: &Value,
    errors: &mut Vec<FieldError>,
) -> Option<std::collections::BTreeMap<String, String>> {
    let map = match value {
        Value::Null => return None,
        Value::Object(map) => map,
        other => {
            errors.push(FieldError::new(
                key,
                format!("must be an object of key: value, got {}", json_kind(other)),
            ));
            return None;
        }
    };
    let mut labels = std::collections::BTreeMap::new();
    for (name, value) in map {
        match value {
            Value::String(text) => {
                labels.insert(name.clone(), text.clone());
            }
            other => errors.push(FieldError::new(
                format!("{key}.{name}"),
                format!("must be a string (quote it), got {}", json_kind(other)),
            )),
        }
    }
    Some(labels)
}

fn optional_string(key: &str, value: &Value, errors: &mut Vec<FieldError>) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(text) => Some(text.clone()),
        other => {
            errors.push(FieldError::new(
                key,
                format!("must be a string, got {}", json_kind(other)),
            ));
            None
        }
    }
}
