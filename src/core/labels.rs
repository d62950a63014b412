//! Labels: `key=value` pairs a schedule carries for people and tools to select it by
//! (`team=billing`, `tier in (gold,silver)`), with the key and value rules of Kubernetes so a
//! selector written for one reads the same here. Labels never change when or how a schedule
//! runs; they are declared, patched, shown, carried in events and matched by selectors.

mod selector;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::core::decl::FieldError;

pub use selector::{LabelSelector, Requirement, SelectorError, SelectorOp};

/// The most labels one schedule carries.
pub const MAX_LABELS: usize = 64;
/// The longest label name (the part of a key after its prefix) and the longest value.
pub const MAX_NAME_LEN: usize = 63;
/// The longest key prefix (a DNS subdomain, before the `/`).
pub const MAX_PREFIX_LEN: usize = 253;

/// A schedule's labels, valid by construction (through [`Labels::parse`] or
/// [`Labels::validate`]), in key order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Labels(BTreeMap<String, String>);

impl Labels {
    /// Checks every key and value of `map` against the label rules, reporting each problem
    /// under `field.key` (or `field` for too many labels).
    pub fn validate(field: &str, map: BTreeMap<String, String>) -> Result<Labels, Vec<FieldError>> {
        let mut errors = Vec::new();
        if map.len() > MAX_LABELS {
            errors.push(FieldError::new(
                field,
                format!("at most {MAX_LABELS} labels ({} given)", map.len()),
            ));
        }
        for (key, value) in &map {
            if let Err(reason) = check_key(key) {
                errors.push(FieldError::new(format!("{field}.{key}"), reason));
            } else if let Err(reason) = check_value(value) {
                errors.push(FieldError::new(format!("{field}.{key}"), reason));
            }
        }
        if errors.is_empty() {
            Ok(Labels(map))
        } else {
            Err(errors)
        }
    }

    /// Labels as the store holds them, taken as they are: a row edited by hand against the
    /// rules still loads (and its schedule still runs); only writes are checked.
    pub fn from_stored(map: BTreeMap<String, String>) -> Labels {
        Labels(map)
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The labels as a JSON object (as stored and as events carry them).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Object(
            self.0
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect(),
        )
    }

    /// These labels with `changes` merged in: a value sets its key, `None` removes it (a JSON
    /// merge patch of the map). The result is checked as a whole.
    pub fn merged(
        &self,
        field: &str,
        changes: &BTreeMap<String, Option<String>>,
    ) -> Result<Labels, Vec<FieldError>> {
        let mut map = self.0.clone();
        for (key, value) in changes {
            match value {
                Some(value) => {
                    map.insert(key.clone(), value.clone());
                }
                None => {
                    map.remove(key);
                }
            }
        }
        Labels::validate(field, map)
    }
}

impl fmt::Display for Labels {
    /// `a=1,b=2`: the form `--label` and a selector's equalities take.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (key, value)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{key}={value}")?;
        }
        Ok(())
    }
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name.
pub fn check_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        check_prefix(prefix).map_err(|reason| format!("key prefix {prefix:?} {reason}"))?;
    }
    if name.is_empty() {
        return Err("a key needs a name (1-63 characters)".to_owned());
    }
    check_name(name).map_err(|reason| format!("key name {name:?} {reason}"))
}

/// A label value: empty, or a name.
pub fn check_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    check_name(value).map_err(|reason| format!("value {value:?} {reason}"))
}

fn check_name(name: &str) -> Result<(), String> {
    if name.len() > MAX_NAME_LEN {
        return Err(format!("is longer than {MAX_NAME_LEN} characters"));
    }
    let bytes = name.as_bytes();
    let inner_ok = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    if !bytes.iter().all(inner_ok) {
        return Err("may hold only ASCII letters, digits, '-', '_' and '.'".to_owned());
    }
    let ends_ok = bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric);
    if !ends_ok {
        return Err("must begin and end with a letter or a digit".to_owned());
    }
    Ok(())
}

fn check_prefix(prefix: &str) -> Result<(), String> {
    if prefix.is_empty() || prefix.len() > MAX_PREFIX_LEN {
        return Err(format!("must be 1-{MAX_PREFIX_LEN} characters"));
    }
    let part_ok = |part: &str| {
        let bytes = part.as_bytes();
        !bytes.is_empty()
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
            && bytes[0] != b'-'
            && bytes[bytes.len() - 1] != b'-'
    };
    if prefix.split('.').all(part_ok) {
        Ok(())
    } else {
        Err("must be a DNS subdomain (lowercase letters, digits, '-' and '.')".to_owned())
    }
}

#[cfg(test)]
mod tests;
