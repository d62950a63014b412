//! The small statement builder: values to bind, before a backend converts them, and
//! statements that number their placeholders in the backend's style.

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

/// A value to bind, before a backend converts it to its own representation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Val {
    Uuid(Option<Uuid>),
    Text(Option<String>),
    I32(i32),
    Opt32(Option<i32>),
    I64(i64),
    Bool(bool),
    Ts(Option<DateTime<Utc>>),
    Json(Option<Value>),
}

impl Val {
    pub(crate) fn uuid(id: Uuid) -> Self {
        Val::Uuid(Some(id))
    }

    pub(crate) fn text(text: impl Into<String>) -> Self {
        Val::Text(Some(text.into()))
    }

    pub(crate) fn ts(at: DateTime<Utc>) -> Self {
        Val::Ts(Some(at))
    }

    pub(crate) fn json(value: &Value) -> Self {
        Val::Json(Some(value.clone()))
    }
}

/// How a backend writes the n-th (1-based) placeholder.
pub(crate) type Placeholder = fn(usize) -> String;

/// A statement with its values, placeholders numbered as they are added.
pub(crate) struct Sql {
    pub(crate) text: String,
    pub(crate) vals: Vec<Val>,
    placeholder: Placeholder,
}

impl Sql {
    pub(crate) fn new(placeholder: Placeholder) -> Self {
        Self {
            text: String::new(),
            vals: Vec::new(),
            placeholder,
        }
    }

    /// Adds a value and returns its placeholder.
    pub(crate) fn val(&mut self, val: Val) -> String {
        self.vals.push(val);
        (self.placeholder)(self.vals.len())
    }

    /// `INSERT INTO table (columns) VALUES (placeholders) RETURNING returning`.
    pub(crate) fn insert(
        placeholder: Placeholder,
        table: &str,
        columns: Vec<(&str, Val)>,
        returning: &str,
    ) -> Self {
        Self::insert_many(placeholder, table, vec![columns], returning)
    }

    /// `INSERT INTO table (columns) VALUES (...), (...) RETURNING returning`: several rows of
    /// the same columns in one statement.
    pub(crate) fn insert_many(
        placeholder: Placeholder,
        table: &str,
        rows: Vec<Vec<(&str, Val)>>,
        returning: &str,
    ) -> Self {
        let mut sql = Self::new(placeholder);
        let names: Vec<&str> = rows
            .first()
            .map(|row| row.iter().map(|(name, _)| *name).collect())
            .unwrap_or_default();
        let tuples: Vec<String> = rows
            .into_iter()
            .map(|row| {
                let marks: Vec<String> = row.into_iter().map(|(_, v)| sql.val(v)).collect();
                format!("({})", marks.join(", "))
            })
            .collect();
        sql.text = format!(
            "INSERT INTO {table} ({}) VALUES {}",
            names.join(", "),
            tuples.join(", ")
        );
        if !returning.is_empty() {
            sql.text.push_str(" RETURNING ");
            sql.text.push_str(returning);
        }
        sql
    }

    /// `UPDATE table SET assignments WHERE env_id = ? AND id = ? [AND guard] RETURNING
    /// returning`: one row of one environment, changed only where `guard` (plain SQL without
    /// values) holds.
    pub(crate) fn update_one(
        placeholder: Placeholder,
        table: &str,
        env: Val,
        id: Val,
        assignments: Vec<(&str, Val)>,
        guard: Option<&str>,
        returning: &str,
    ) -> Self {
        let mut sql = Self::new(placeholder);
        let env = sql.val(env);
        let id = sql.val(id);
        let sets: Vec<String> = assignments
            .into_iter()
            .map(|(column, v)| format!("{column} = {}", sql.val(v)))
            .collect();
        let guard = guard.map(|g| format!(" AND {g}")).unwrap_or_default();
        sql.text = format!(
            "UPDATE {table} SET {} WHERE env_id = {env} AND id = {id}{guard} RETURNING {returning}",
            sets.join(", ")
        );
        sql
    }
}
