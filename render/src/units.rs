//! Sizes, durations and times for people: binary units for bytes, the largest unit that keeps
//! the number readable for durations, RFC 3339 in UTC for points in time.

const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];

/// `512 B`, `1.5 KiB`, `64.0 MiB`.
pub fn format_bytes(bytes: u64) -> String {
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = UNITS[0];
    for next in &UNITS[1..] {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = next;
    }
    format!("{value:.1} {unit}")
}

/// `12 ms`, `1.50 s`.
pub fn format_millis(millis: u64) -> String {
    if millis < 1000 {
        format!("{millis} ms")
    } else {
        format!("{:.2} s", millis as f64 / 1000.0)
    }
}

/// `850 µs`, `3.1 ms`, `2.00 s`.
pub fn format_micros(micros: u64) -> String {
    if micros < 1000 {
        format!("{micros} µs")
    } else if micros < 1_000_000 {
        format!("{:.1} ms", micros as f64 / 1000.0)
    } else {
        format!("{:.2} s", micros as f64 / 1_000_000.0)
    }
}

/// A time left, to the second and in at most two units: `45s`, `4m 30s`, `5m`, `1h 5m`.
/// Parts of a second count as a whole one, so that what is left is never shown as `0s`; nothing
/// left is `0s`.
pub fn format_remaining(millis: i64) -> String {
    let seconds = u64::try_from(millis).unwrap_or(0).div_ceil(1000);
    let (hours, minutes, seconds) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    match (hours, minutes, seconds) {
        (0, 0, seconds) => format!("{seconds}s"),
        (0, minutes, 0) => format!("{minutes}m"),
        (0, minutes, seconds) => format!("{minutes}m {seconds}s"),
        (hours, 0, _) => format!("{hours}h"),
        (hours, minutes, _) => format!("{hours}h {minutes}m"),
    }
}

/// How long ago, in its largest whole unit: `45s ago`, `12m ago`, `3h ago`, `5d ago`. A time
/// in the future (another host's clock) counts as now.
pub fn format_ago(elapsed_millis: i64) -> String {
    let seconds = u64::try_from(elapsed_millis).unwrap_or(0) / 1000;
    match seconds {
        0..60 => format!("{seconds}s ago"),
        60..3600 => format!("{}m ago", seconds / 60),
        3600..86_400 => format!("{}h ago", seconds / 3600),
        _ => format!("{}d ago", seconds / 86_400),
    }
}

/// Unix milliseconds as an RFC 3339 time in UTC to the second: `2025-01-31T23:59:59Z`.
pub fn format_utc(unix_millis: i64) -> String {
    let seconds = unix_millis.div_euclid(1000);
    let (days, second_of_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60
    )
}

/// The proleptic Gregorian date of a day counted from 1970-01-01: Howard Hinnant's
/// `civil_from_days`, exact for every `i64` day a millisecond timestamp can name.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_switch_units_at_each_power_of_1024() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(1023), "1023 B");
        assert_eq!(format_bytes(1024), "1.0 KiB");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(64 * 1024 * 1024), "64.0 MiB");
        assert_eq!(format_bytes(3 * 1024 * 1024 * 1024), "3.0 GiB");
        assert_eq!(format_bytes(u64::MAX), "16777216.0 TiB");
    }

    #[test]
    fn durations_switch_units() {
        assert_eq!(format_millis(0), "0 ms");
        assert_eq!(format_millis(999), "999 ms");
        assert_eq!(format_millis(1500), "1.50 s");
        assert_eq!(format_micros(850), "850 µs");
        assert_eq!(format_micros(3100), "3.1 ms");
        assert_eq!(format_micros(2_000_000), "2.00 s");
    }

    #[test]
    fn remaining_time_is_coarse_and_rounds_up() {
        assert_eq!(format_remaining(-5), "0s");
        assert_eq!(format_remaining(0), "0s");
        assert_eq!(format_remaining(1), "1s");
        assert_eq!(format_remaining(45_000), "45s");
        assert_eq!(format_remaining(299_001), "5m");
        assert_eq!(format_remaining(270_000), "4m 30s");
        assert_eq!(format_remaining(3_600_000), "1h");
        assert_eq!(format_remaining(3_930_000), "1h 5m");
    }

    #[test]
    fn ago_takes_the_largest_whole_unit() {
        assert_eq!(format_ago(-5_000), "0s ago");
        assert_eq!(format_ago(45_999), "45s ago");
        assert_eq!(format_ago(60_000), "1m ago");
        assert_eq!(format_ago(3_599_999), "59m ago");
        assert_eq!(format_ago(3_600_000), "1h ago");
        assert_eq!(format_ago(86_400_000 * 3 + 5), "3d ago");
    }

    #[test]
    fn utc_times_match_known_dates() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(format_utc(1_738_367_999_999), "2025-01-31T23:59:59Z");
        assert_eq!(format_utc(4_107_542_400_000), "2100-03-01T00:00:00Z");
        assert_eq!(format_utc(-1), "1969-12-31T23:59:59Z");
    }
}
