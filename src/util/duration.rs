//! Humane durations for settings: plain seconds (`45`), or `<integer><unit>` parts with units
//! `ms`, `s`, `m`, `h`, `d` (`500ms`, `30s`, `2m`, `1m30s`, `7d`).

use std::time::Duration;

/// Parses a humane duration: plain seconds (`45`), or one or more `<integer><unit>` parts with
/// units `ms`, `s`, `m`, `h`, `d` (`500ms`, `30s`, `2m`, `1m30s`, `7d`). `None` when it is not
/// one (overflow included).
pub fn parse_duration(input: &str) -> Option<Duration> {
    let s = input.trim();
    if s.is_empty() {
        return None;
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse::<u64>().ok().map(Duration::from_secs);
    }

    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let (number, tail) = rest.split_at(digits);
        let number: u64 = number.parse().ok()?;
        let unit_len = tail.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (unit, tail) = tail.split_at(unit_len);
        let part = match unit {
            "ms" => Duration::from_millis(number),
            "s" => Duration::from_secs(number),
            "m" => Duration::from_secs(number.checked_mul(60)?),
            "h" => Duration::from_secs(number.checked_mul(3600)?),
            "d" => Duration::from_secs(number.checked_mul(86_400)?),
            _ => return None,
        };
        total = total.checked_add(part)?;
        rest = tail;
    }
    Some(total)
}

/// A duration as text, in the largest units that say it exactly (`90s` is `1m30s`).
pub fn format_duration(d: Duration) -> String {
    if d.is_zero() {
        return "0s".to_owned();
    }
    let mut ms = d.as_millis();
    let mut text = String::new();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms >= size {
            text.push_str(&format!("{}{unit}", ms / size));
            ms %= size;
        }
    }
    if ms > 0 {
        text.push_str(&format!("{ms}ms"));
    }
    text
}

/// A clap value parser: a duration, zero included.
pub fn duration(text: &str) -> Result<Duration, String> {
    parse_duration(text)
        .ok_or_else(|| format!("{text:?} is not a duration (examples: 30s, 2m, 500ms, 0s)"))
}

/// A clap value parser: a duration greater than zero.
pub fn positive_duration(text: &str) -> Result<Duration, String> {
    match parse_duration(text) {
        Some(d) if !d.is_zero() => Ok(d),
        Some(_) => Err("must be greater than zero".to_owned()),
        None => Err(format!(
            "{text:?} is not a duration (examples: 30s, 2m, 500ms)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("7d"), Some(Duration::from_secs(7 * 86_400)));
        assert_eq!(
            parse_duration("1d12h"),
            Some(Duration::from_secs(36 * 3600))
        );
        assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_duration("45"), Some(Duration::from_secs(45)));
        assert_eq!(parse_duration(" 10s "), Some(Duration::from_secs(10)));
        assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("0"), Some(Duration::ZERO));
    }

    #[test]
    fn non_durations_are_rejected() {
        for bad in [
            "", "abc", "s", "10x", "1.5s", "-5s", "10 s", "ms10", "30S", "5m3",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad:?} should not parse");
        }
        // Overflow is an error, not a wrap or a panic.
        assert_eq!(parse_duration("99999999999999999999s"), None);
        assert_eq!(parse_duration("18446744073709551615h"), None);
    }

    #[test]
    fn settings_take_positive_durations_only() {
        assert_eq!(positive_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(
            positive_duration("0s").unwrap_err(),
            "must be greater than zero"
        );
        assert_eq!(
            positive_duration("abc").unwrap_err(),
            r#""abc" is not a duration (examples: 30s, 2m, 500ms)"#
        );
    }
}
