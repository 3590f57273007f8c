//! Sizes and durations for people: binary units for bytes, the largest unit that keeps the
//! number readable for times.

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
}
