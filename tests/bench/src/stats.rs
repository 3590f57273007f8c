//! Latency samples and the figures the table shows: median, 99th percentile, throughput.

use std::time::Duration;

/// The latencies of one measured case, plus the wall time they took (for throughput when
/// calls overlapped).
#[derive(Debug, Clone, Default)]
pub struct Samples {
    latencies: Vec<Duration>,
    /// Wall time of the whole measurement; with concurrency it is less than the sum of the
    /// latencies.
    wall: Duration,
}

impl Samples {
    pub fn new(mut latencies: Vec<Duration>, wall: Duration) -> Samples {
        latencies.sort_unstable();
        Samples { latencies, wall }
    }

    /// Samples taken one after another: the wall time is their sum.
    pub fn sequential(latencies: Vec<Duration>) -> Samples {
        let wall = latencies.iter().sum();
        Samples::new(latencies, wall)
    }

    /// Adds the samples of another round of the same case: its latencies, and its wall time
    /// to this one's (the rounds did not overlap).
    pub fn append(&mut self, round: Samples) {
        self.latencies.extend(round.latencies);
        self.latencies.sort_unstable();
        self.wall += round.wall;
    }

    pub fn len(&self) -> usize {
        self.latencies.len()
    }

    pub fn p50(&self) -> Duration {
        self.percentile(50.0)
    }

    pub fn p99(&self) -> Duration {
        self.percentile(99.0)
    }

    /// Nearest-rank percentile; zero for no samples.
    pub fn percentile(&self, percent: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let rank = (percent / 100.0 * self.latencies.len() as f64).ceil() as usize;
        self.latencies[rank.clamp(1, self.latencies.len()) - 1]
    }

    /// Operations per second over the wall time.
    pub fn per_second(&self) -> f64 {
        let wall = self.wall.as_secs_f64();
        if wall == 0.0 {
            return 0.0;
        }
        self.latencies.len() as f64 / wall
    }
}

/// A duration for the table: µs below 10 ms, ms above.
pub fn format_duration(duration: Duration) -> String {
    let micros = duration.as_secs_f64() * 1e6;
    if micros < 10_000.0 {
        format!("{micros:.0} µs")
    } else {
        format!("{:.1} ms", micros / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn micros(values: &[u64]) -> Vec<Duration> {
        values.iter().copied().map(Duration::from_micros).collect()
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let samples = Samples::sequential(micros(&(1..=100).rev().collect::<Vec<_>>()));
        assert_eq!(samples.p50(), Duration::from_micros(50));
        assert_eq!(samples.p99(), Duration::from_micros(99));
        assert_eq!(samples.percentile(100.0), Duration::from_micros(100));
        let one = Samples::sequential(micros(&[7]));
        assert_eq!(
            (one.p50(), one.p99()),
            (Duration::from_micros(7), Duration::from_micros(7))
        );
        assert_eq!(Samples::default().p50(), Duration::ZERO);
    }

    #[test]
    fn throughput_uses_the_wall_time() {
        let samples = Samples::new(micros(&[1000, 1000, 1000, 1000]), Duration::from_millis(2));
        assert!((samples.per_second() - 2000.0).abs() < 1e-6);
        let sequential = Samples::sequential(micros(&[1000, 1000]));
        assert!((sequential.per_second() - 1000.0).abs() < 1e-6);
    }

    #[test]
    fn rounds_pool_their_latencies_and_add_their_wall_times() {
        let mut samples = Samples::new(micros(&[300, 100]), Duration::from_micros(200));
        samples.append(Samples::new(
            micros(&[200, 400]),
            Duration::from_micros(300),
        ));
        assert_eq!(samples.len(), 4);
        assert_eq!(samples.p50(), Duration::from_micros(200));
        assert_eq!(samples.percentile(100.0), Duration::from_micros(400));
        assert!((samples.per_second() - 8000.0).abs() < 1e-6);
    }

    #[test]
    fn durations_switch_units_at_ten_milliseconds() {
        assert_eq!(format_duration(Duration::from_micros(250)), "250 µs");
        assert_eq!(format_duration(Duration::from_micros(12_340)), "12.3 ms");
    }
}
