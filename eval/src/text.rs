//! How eval outputs write numbers and tables, the same in the terminal summary, the
//! Markdown summary and the comparison: a rate as `2/3 67% [21%, 94%]`, a mean with one
//! decimal, `-` for what is not known.

use super::price::format_usd;
use super::stats::Rate;

/// `2/3 67% [21%, 94%]`; `-` for no attempts.
pub fn rate(rate: Option<&Rate>) -> String {
    match rate {
        Some(rate) => format!(
            "{}/{} {:.0}% [{:.0}%, {:.0}%]",
            rate.passed,
            rate.attempts,
            rate.rate * 100.0,
            rate.ci95.low * 100.0,
            rate.ci95.high * 100.0
        ),
        None => "-".to_owned(),
    }
}

/// A mean with one decimal; `-` when unknown.
pub fn number(value: Option<f64>) -> String {
    value.map_or("-".to_owned(), |value| format!("{value:.1}"))
}

pub fn seconds(value: Option<f64>) -> String {
    value.map_or("-".to_owned(), |value| format!("{value:.1} s"))
}

pub fn usd(value: Option<f64>) -> String {
    value.map_or("unknown".to_owned(), format_usd)
}

/// `+12.5 pp [-3.0, +28.1]`: a difference of rates in percentage points.
pub fn points(value: f64) -> String {
    format!("{:+.1}", value * 100.0)
}

/// Rows under a header, columns padded to their widest cell, lines without trailing spaces.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|cell| cell.chars().count()).collect();
    for row in rows {
        for (column, cell) in row.iter().enumerate() {
            if let Some(width) = widths.get_mut(column) {
                *width = (*width).max(cell.chars().count());
            }
        }
    }
    let header: Vec<String> = header.iter().map(|cell| (*cell).to_owned()).collect();
    let mut out = String::new();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (cell, width) in row.iter().zip(&widths) {
            line.push_str(&format!("{cell:<width$}  "));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_tables_read_plainly() {
        assert_eq!(rate(Rate::of(8, 10).as_ref()), "8/10 80% [49%, 94%]");
        assert_eq!(rate(None), "-");
        assert_eq!(number(None), "-");
        assert_eq!(usd(Some(0.5)), "$0.5000");
        assert_eq!(points(-0.125), "-12.5");
        assert_eq!(
            table(&["A", "BB"], &[vec!["long".to_owned(), "x".to_owned()]]),
            "A     BB\nlong  x\n"
        );
    }
}
