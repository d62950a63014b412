//! What is wrong with a declaration: one field, one entry, or the whole file.

use std::fmt;

use serde::Serialize;

/// A problem with one field of a declaration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// The problems of one entry of a declaration file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EntryError {
    /// Position in the `schedules` list, from 0.
    pub index: usize,
    /// The entry's number as people count, from 1 (`schedule #1` is the first entry).
    pub entry: usize,
    /// Where the entry starts in the document (line and column from 1), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<u64>,
    /// The entry's `schedule_type`, when it has a readable one.
    pub schedule_type: Option<String>,
    pub errors: Vec<FieldError>,
}

impl EntryError {
    pub(super) fn new(
        index: usize,
        location: Option<Position>,
        schedule_type: Option<String>,
    ) -> Self {
        EntryError {
            index,
            entry: index + 1,
            line: location.map(|p| p.line),
            column: location.map(|p| p.column),
            schedule_type,
            errors: Vec::new(),
        }
    }
}

/// A place in a declaration document: line and column, both from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Position {
    pub line: u64,
    pub column: u64,
}

impl fmt::Display for EntryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "schedule #{}", self.entry)?;
        if let Some(schedule_type) = &self.schedule_type {
            write!(f, " ({schedule_type})")?;
        }
        for (position, error) in self.errors.iter().enumerate() {
            f.write_str(if position == 0 { ": " } else { "; " })?;
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

/// Why a declaration file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeclError {
    #[error("invalid JSON at line {line}, column {column}: {message}")]
    Json {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("invalid YAML: {message}")]
    Yaml {
        line: Option<u64>,
        column: Option<u64>,
        message: String,
    },
    #[error("the top level must be an object with a \"schedules\" list")]
    NotAnObject,
    #[error("missing top-level key \"schedules\"")]
    MissingSchedules,
    #[error("unknown top-level key {0:?} (expected \"schedules\" and \"calendars\")")]
    UnknownTopLevelKey(String),
    #[error("\"schedules\" must be a list")]
    SchedulesNotAList,
    #[error("{} invalid schedule {}", .0.len(), if .0.len() == 1 { "entry" } else { "entries" })]
    Entries(Vec<EntryError>),
    /// The declared calendars' problems, each named by field (`calendars.NAME.entries[1]`).
    #[error("invalid calendars: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Calendars(Vec<FieldError>),
}

impl DeclError {
    /// Where in the document the problem is, when the parser said.
    pub fn position(&self) -> Option<Position> {
        match self {
            DeclError::Json { line, column, .. } => Some(Position {
                line: u64::try_from(*line).ok()?,
                column: u64::try_from(*column).ok()?,
            })
            .filter(|p| p.line > 0),
            DeclError::Yaml { line, column, .. } => Some(Position {
                line: (*line)?,
                column: (*column)?,
            })
            .filter(|p| p.line > 0),
            _ => None,
        }
    }
}
