//! Durations as people write them on a command line: `90s`, `5m`, `1h30m`, `250ms`, `30d`, or
//! a bare number of milliseconds (what the API's `*_ms` fields take).

use std::time::Duration;

/// The units a duration may be written in, longest suffix first so that `ms` is not read as
/// `m` followed by garbage.
const UNITS: [(&str, u64); 5] = [
    ("ms", 1),
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
];

/// Why a duration could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("empty duration; write e.g. 90s, 5m, 1h30m or a number of milliseconds")]
    Empty,
    #[error("invalid duration {0:?}; write e.g. 90s, 5m, 1h30m or a number of milliseconds")]
    Invalid(String),
    #[error("duration {0:?} is too long")]
    TooLong(String),
}

/// Parses `text`: a bare number of milliseconds, or one or more `<number><unit>` parts with
/// units `d`, `h`, `m`, `s` and `ms` (`1h30m`, `2m30s`, `1500ms`, `30d`). Surrounding whitespace is
/// ignored; numbers are whole.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    let invalid = || DurationError::Invalid(text.to_owned());
    let too_long = || DurationError::TooLong(text.to_owned());
    if text.bytes().all(|byte| byte.is_ascii_digit()) {
        let millis: u64 = text.parse().map_err(|_| too_long())?;
        return Ok(Duration::from_millis(millis));
    }
    let mut total: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(invalid());
        }
        let (number, after) = rest.split_at(digits);
        let number: u64 = number.parse().map_err(|_| too_long())?;
        let Some((suffix, scale)) = UNITS.iter().find(|(suffix, _)| after.starts_with(suffix))
        else {
            return Err(invalid());
        };
        let part = number.checked_mul(*scale).ok_or_else(too_long)?;
        total = total.checked_add(part).ok_or_else(too_long)?;
        rest = &after[suffix.len()..];
    }
    Ok(Duration::from_millis(total))
}

/// [`parse_duration`] in whole milliseconds, the unit of the API. Saturates rather than fails:
/// [`parse_duration`] never produces more than `u64::MAX` milliseconds.
pub fn parse_millis(text: &str) -> Result<u64, DurationError> {
    let duration = parse_duration(text)?;
    Ok(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn millis(text: &str) -> u64 {
        match parse_millis(text) {
            Ok(millis) => millis,
            Err(error) => panic!("{text:?} did not parse: {error}"),
        }
    }

    #[test]
    fn bare_numbers_are_milliseconds() {
        assert_eq!(millis("0"), 0);
        assert_eq!(millis("1500"), 1500);
        assert_eq!(millis(" 42 "), 42);
    }

    #[test]
    fn each_unit_scales() {
        assert_eq!(millis("250ms"), 250);
        assert_eq!(millis("90s"), 90_000);
        assert_eq!(millis("5m"), 300_000);
        assert_eq!(millis("2h"), 7_200_000);
        assert_eq!(millis("30d"), 2_592_000_000);
        assert_eq!(millis("1d12h"), 129_600_000);
    }

    #[test]
    fn parts_add_up() {
        assert_eq!(millis("1h30m"), 5_400_000);
        assert_eq!(millis("2m30s"), 150_000);
        assert_eq!(millis("1s500ms"), 1_500);
        assert_eq!(millis("1m1m"), 120_000);
    }

    #[test]
    fn malformed_text_is_refused_with_a_hint() {
        for text in ["s", "5x", "5 s", "-5s", "1.5s", "5sm", "m5", "5ms3"] {
            assert_eq!(
                parse_duration(text),
                Err(DurationError::Invalid(text.to_owned())),
                "{text:?}"
            );
        }
        assert_eq!(parse_duration("  "), Err(DurationError::Empty));
        let Err(error) = parse_duration("soon") else {
            panic!("\"soon\" parsed");
        };
        assert_eq!(
            error.to_string(),
            "invalid duration \"soon\"; write e.g. 90s, 5m, 1h30m or a number of milliseconds"
        );
    }

    #[test]
    fn overflow_is_too_long_not_a_wrap() {
        assert_eq!(
            parse_duration("99999999999999999999"),
            Err(DurationError::TooLong("99999999999999999999".to_owned()))
        );
        assert_eq!(
            parse_duration("9999999999999999h"),
            Err(DurationError::TooLong("9999999999999999h".to_owned()))
        );
    }
}
