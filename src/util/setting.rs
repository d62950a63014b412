//! Text settings as the configuration conversions read them: trimmed, and empty meaning unset,
//! so `FOO=` in an env file does not half-configure anything.

/// The setting, trimmed; `None` when that leaves nothing.
pub fn given(value: &Option<String>) -> Option<String> {
    value
        .as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

/// The setting, trimmed; `default` when that leaves nothing.
pub fn or_default(value: &str, default: &str) -> String {
    match value.trim() {
        "" => default.to_owned(),
        value => value.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_settings_count_as_unset() {
        assert_eq!(given(&None), None);
        assert_eq!(given(&Some("  ".into())), None);
        assert_eq!(given(&Some(" x ".into())), Some("x".into()));
        assert_eq!(or_default(" ", "d"), "d");
        assert_eq!(or_default(" v", "d"), "v");
    }
}
