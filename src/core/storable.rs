//! Text every backend can store. PostgreSQL's `text` and `jsonb` cannot hold U+0000 (NUL), so
//! a NUL anywhere in what a request brings in (a payload value or key, `target_config`, a name,
//! a filter, a token subject) is refused here, before any store sees it: both backends answer
//! the same 400 naming the field. Text recorded on a caller's say-so (request ids, token
//! subjects) is also capped.

use serde_json::Value;

use crate::core::decl::FieldError;

/// The most bytes of a client-supplied identifier (a request id, a token subject) recorded in
/// the audit and in events.
pub const MAX_RECORDED_ID_BYTES: usize = 256;

const NUL_MESSAGE: &str = "must not contain NUL (U+0000)";

/// Refuses a NUL in `text`, naming `field`.
pub fn check_text(field: &str, text: &str) -> Result<(), FieldError> {
    if text.contains('\0') {
        Err(FieldError::new(field, NUL_MESSAGE))
    } else {
        Ok(())
    }
}

/// Refuses a NUL in any string or key of `value`, naming the path to it below `field`
/// (`payload.items[2].name`; a key's NUL is reported at the key's own path).
pub fn check_json(field: &str, value: &Value) -> Result<(), FieldError> {
    match nul_path(value, field.to_owned()) {
        Some(path) => Err(FieldError::new(path, NUL_MESSAGE)),
        None => Ok(()),
    }
}

fn nul_path(value: &Value, path: String) -> Option<String> {
    match value {
        Value::String(text) => text.contains('\0').then_some(path),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| nul_path(item, format!("{path}[{i}]"))),
        Value::Object(map) => map.iter().find_map(|(key, item)| {
            let below = format!("{path}.{}", key.replace('\0', "\\u0000"));
            if key.contains('\0') {
                Some(below)
            } else {
                nul_path(item, below)
            }
        }),
        Value::Null | Value::Bool(_) | Value::Number(_) => None,
    }
}

/// `text` cut to at most `max` bytes, on a character boundary.
pub fn capped(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn field(result: Result<(), FieldError>) -> Option<String> {
        result.err().map(|e| e.field)
    }

    #[test]
    fn a_nul_anywhere_is_found_and_named() {
        assert_eq!(field(check_json("payload", &json!({"a": [1, "ok"]}))), None);
        assert_eq!(
            field(check_json("payload", &json!({"a": "x\u{0}y"}))),
            Some("payload.a".to_owned())
        );
        assert_eq!(
            field(check_json("payload", &json!({"a": {"b": [true, "\u{0}"]}}))),
            Some("payload.a.b[1]".to_owned())
        );
        assert_eq!(
            field(check_json("target_config", &json!({"k\u{0}": 1}))),
            Some("target_config.k\\u0000".to_owned())
        );
        assert_eq!(
            field(check_text("domain", "bill\u{0}ing")),
            Some("domain".to_owned())
        );
        assert_eq!(field(check_text("domain", "billing")), None);
    }

    #[test]
    fn recorded_ids_are_capped_on_a_character_boundary() {
        assert_eq!(capped("short", 256), "short");
        assert_eq!(capped(&"x".repeat(300), 256).len(), 256);
        // 'é' is two bytes: the cut never splits it.
        let cut = capped(&"é".repeat(200), 255);
        assert_eq!(cut.len(), 254);
        assert!(cut.chars().all(|c| c == 'é'));
    }
}
