//! The statistics of a pass rate: the Wilson score interval of one rate, and Newcombe's hybrid
//! Wilson score interval of the difference between two.
//!
//! A handful of attempts is the normal size of an eval, and there the textbook "p ± 1.96·SE"
//! interval is useless: it collapses to a point at 0/n and n/n and leaves [0, 1]. Wilson's
//! interval stays inside [0, 1] and is honest at the edges (10/10 still only says "at least
//! 0.72"), which is what tells a person whether a change of pass rate means anything.
//! References: Wilson (1927); Newcombe, "Interval estimation for the difference between
//! independent proportions", Statistics in Medicine 17 (1998), method 10.

use serde::{Deserialize, Serialize};

/// The normal quantile of a two-sided 95% interval.
const Z95: f64 = 1.959_963_984_540_054;

/// A closed interval of proportions (or of a difference of proportions).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

impl Interval {
    /// Whether the interval leaves out 0: a difference it bounds is significant.
    pub fn excludes_zero(&self) -> bool {
        self.low > 0.0 || self.high < 0.0
    }
}

/// A pass rate with its 95% Wilson interval; `None` for no attempts, where there is no rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rate {
    pub passed: u32,
    pub attempts: u32,
    pub rate: f64,
    pub ci95: Interval,
}

impl Rate {
    pub fn of(passed: u32, attempts: u32) -> Option<Rate> {
        let ci95 = wilson(passed, attempts)?;
        Some(Rate {
            passed,
            attempts,
            rate: f64::from(passed) / f64::from(attempts),
            ci95,
        })
    }
}

/// The 95% Wilson score interval of `passed` successes in `attempts` trials; `None` when
/// `attempts` is 0 (or fewer than `passed`, which is no proportion).
pub fn wilson(passed: u32, attempts: u32) -> Option<Interval> {
    if attempts == 0 || passed > attempts {
        return None;
    }
    let n = f64::from(attempts);
    let p = f64::from(passed) / n;
    let z2 = Z95 * Z95;
    let centre = p + z2 / (2.0 * n);
    let spread = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    let denominator = 1.0 + z2 / n;
    Some(Interval {
        low: ((centre - spread) / denominator).clamp(0.0, 1.0),
        high: ((centre + spread) / denominator).clamp(0.0, 1.0),
    })
}

/// The difference `b - a` of two pass rates with its 95% interval (Newcombe's method 10, the
/// hybrid Wilson score interval): the rates' own Wilson intervals combined, which keeps the
/// good behaviour of Wilson's at small counts and at 0 and 1.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Difference {
    pub difference: f64,
    pub ci95: Interval,
    /// The interval leaves out 0.
    pub significant: bool,
}

/// `b - a` with its interval.
pub fn newcombe(a: Rate, b: Rate) -> Difference {
    let (p1, p2) = (b.rate, a.rate);
    let (l1, u1) = (b.ci95.low, b.ci95.high);
    let (l2, u2) = (a.ci95.low, a.ci95.high);
    let difference = p1 - p2;
    let ci95 = Interval {
        low: difference - ((p1 - l1).powi(2) + (u2 - p2).powi(2)).sqrt(),
        high: difference + ((u1 - p1).powi(2) + (p2 - l2).powi(2)).sqrt(),
    };
    Difference {
        difference,
        significant: ci95.excludes_zero(),
        ci95,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(actual: f64, expected: f64) {
        assert!(
            (actual - expected).abs() < 5e-4,
            "{actual} is not {expected}"
        );
    }

    #[test]
    fn wilson_matches_published_values() -> anyhow::Result<()> {
        let interval = wilson(8, 10).ok_or_else(|| anyhow::anyhow!("no interval"))?;
        close(interval.low, 0.490);
        close(interval.high, 0.943);
        let none = wilson(0, 10).ok_or_else(|| anyhow::anyhow!("no interval"))?;
        assert_eq!(none.low, 0.0);
        close(none.high, 0.278);
        let all = wilson(10, 10).ok_or_else(|| anyhow::anyhow!("no interval"))?;
        close(all.low, 0.722);
        close(all.high, 1.0);
        // Newcombe (1998), table I: 81/263 → [0.2553, 0.3662].
        let table = wilson(81, 263).ok_or_else(|| anyhow::anyhow!("no interval"))?;
        close(table.low, 0.2553);
        close(table.high, 0.3662);
        Ok(())
    }

    #[test]
    fn no_attempts_have_no_rate() {
        assert_eq!(wilson(0, 0), None);
        assert_eq!(wilson(3, 2), None);
        assert_eq!(Rate::of(0, 0), None);
    }

    #[test]
    fn newcombe_matches_the_textbook_example() -> anyhow::Result<()> {
        // Newcombe (1998), method 10: 56/70 against 48/80 → 0.2 in [0.0524, 0.3339].
        let a = Rate::of(48, 80).ok_or_else(|| anyhow::anyhow!("no rate"))?;
        let b = Rate::of(56, 70).ok_or_else(|| anyhow::anyhow!("no rate"))?;
        let difference = newcombe(a, b);
        close(difference.difference, 0.2);
        close(difference.ci95.low, 0.0524);
        close(difference.ci95.high, 0.3339);
        assert!(difference.significant);
        // The other way round: the same interval, negated.
        let reverse = newcombe(b, a);
        close(reverse.ci95.low, -0.3339);
        close(reverse.ci95.high, -0.0524);
        Ok(())
    }

    #[test]
    fn a_small_difference_on_few_attempts_is_not_significant() -> anyhow::Result<()> {
        let a = Rate::of(4, 5).ok_or_else(|| anyhow::anyhow!("no rate"))?;
        let b = Rate::of(5, 5).ok_or_else(|| anyhow::anyhow!("no rate"))?;
        let difference = newcombe(a, b);
        close(difference.difference, 0.2);
        assert!(difference.ci95.low < 0.0 && difference.ci95.high > 0.0);
        assert!(!difference.significant);
        Ok(())
    }
}
