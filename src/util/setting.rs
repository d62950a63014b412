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

/// Parses `flags` into a settings group as the command line would, but ignoring the process
/// environment, so tests neither depend on nor change it.
#[cfg(test)]
pub(crate) fn parse_flags<T: clap::Args + clap::FromArgMatches>(
    flags: &[&str],
) -> Result<T, clap::Error> {
    let command =
        T::augment_args(clap::Command::new("test")).mut_args(|arg| arg.env(None::<&'static str>));
    let matches =
        command.try_get_matches_from(std::iter::once("test").chain(flags.iter().copied()))?;
    T::from_arg_matches(&matches)
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
