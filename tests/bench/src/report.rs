//! The report: every measured case, the comparisons between an airlock case and its peer
//! measured in the same run, and the targets judged from them. Printed as Markdown
//! tables so that BENCHMARKS.md can hold the output as it is.
//!
//! Ratios are the point: absolute times drift on a shared machine, but two cases measured
//! minutes apart on it drift together.

use std::fmt::Write as _;
use std::time::Duration;

use crate::idle::Quiet;
use crate::stats::{Samples, format_duration};

/// One measured (or skipped) case.
#[derive(Debug)]
struct Row {
    key: String,
    section: &'static str,
    case: String,
    outcome: Outcome,
    note: String,
}

#[derive(Debug)]
enum Outcome {
    Measured(Samples),
    Skipped(String),
}

/// An airlock case against its peer.
#[derive(Debug)]
struct Comparison {
    ours: String,
    peer: String,
}

/// A target from the issue, judged when the report is printed.
#[derive(Debug)]
pub enum Check {
    /// `ours` p50 divided by `peer` p50 is at most `max`.
    Ratio {
        ours: String,
        peer: String,
        max: f64,
    },
    /// `ours` p50 is at most `max`.
    Latency { ours: String, max: Duration },
    /// `ours` p99 is at most `max`.
    TailLatency { ours: String, max: Duration },
    /// `ours` did at least `min` operations per second of wall time.
    Throughput { ours: String, min: f64 },
    /// Judged by the section itself (e.g. every run reached its approval).
    Verdict { met: bool, measured: String },
}

#[derive(Debug)]
struct Target {
    goal: String,
    check: Check,
    /// Why the machine could not be trusted while its section ran; then it is not judged.
    disturbed: Option<String>,
}

#[derive(Debug, Default)]
pub struct Report {
    rows: Vec<Row>,
    comparisons: Vec<Comparison>,
    targets: Vec<Target>,
    /// A section's own summary tables (Markdown), printed after the others.
    tables: Vec<String>,
    /// What the machine was doing around each section, in order.
    machine: Vec<(String, Quiet)>,
}

impl Report {
    /// Records a measured case under `key`, the name comparisons and targets use.
    pub fn measured(&mut self, section: &'static str, key: &str, case: &str, samples: Samples) {
        self.add(section, key, case, Outcome::Measured(samples));
    }

    /// Records a case that could not be measured here, with why.
    pub fn skipped(&mut self, section: &'static str, key: &str, case: &str, why: &str) {
        eprintln!("skipped: {case}: {why}");
        self.add(section, key, case, Outcome::Skipped(why.to_owned()));
    }

    fn add(&mut self, section: &'static str, key: &str, case: &str, outcome: Outcome) {
        if let Outcome::Measured(samples) = &outcome {
            eprintln!(
                "  {case}: p50 {} p99 {} ({} samples)",
                format_duration(samples.p50()),
                format_duration(samples.p99()),
                samples.len()
            );
        }
        self.rows.push(Row {
            key: key.to_owned(),
            section,
            case: case.to_owned(),
            outcome,
            note: String::new(),
        });
    }

    /// Adds a remark to the row `key` (memory per run, module size, ...).
    pub fn note(&mut self, key: &str, note: &str) {
        if let Some(row) = self.rows.iter_mut().find(|row| row.key == key) {
            if !row.note.is_empty() {
                row.note.push_str("; ");
            }
            row.note.push_str(note);
        }
    }

    pub fn compare(&mut self, ours: &str, peer: &str) {
        self.comparisons.push(Comparison {
            ours: ours.to_owned(),
            peer: peer.to_owned(),
        });
    }

    pub fn target(&mut self, goal: &str, check: Check) {
        self.targets.push(Target {
            goal: goal.to_owned(),
            check,
            disturbed: None,
        });
    }

    /// How many targets are set so far: a section's are those set after it started.
    pub fn targets_set(&self) -> usize {
        self.targets.len()
    }

    /// Records what the machine did while `section` ran, whose targets are those set since
    /// `first_target`; when it was busy they are not judged.
    pub fn machine(&mut self, section: &str, first_target: usize, quiet: Quiet) {
        if let Some(why) = quiet.disturbed() {
            eprintln!("{section}: its targets are not judged: {why}");
            for target in self.targets.iter_mut().skip(first_target) {
                target.disturbed = Some(why.clone());
            }
        }
        self.machine.push((section.to_owned(), quiet));
    }

    /// Adds a section's own summary (a Markdown table), printed after the three tables.
    pub fn table(&mut self, markdown: &str) {
        self.tables.push(markdown.to_owned());
    }

    fn samples(&self, key: &str) -> Option<&Samples> {
        self.rows
            .iter()
            .find(|row| row.key == key)
            .and_then(|row| match &row.outcome {
                Outcome::Measured(samples) => Some(samples),
                Outcome::Skipped(_) => None,
            })
    }

    fn case<'a>(&'a self, key: &'a str) -> &'a str {
        self.rows
            .iter()
            .find(|row| row.key == key)
            .map_or(key, |row| row.case.as_str())
    }

    /// The three tables, in Markdown; targets are judged only when `judge` is set (a smoke
    /// run's counts are too small to mean anything).
    pub fn render(&self, judge: bool) -> String {
        let mut out = String::new();
        out.push_str("| section | case | n | p50 | p99 | per second | note |\n");
        out.push_str("| --- | --- | ---: | ---: | ---: | ---: | --- |\n");
        for row in &self.rows {
            let (n, p50, p99, rate) = match &row.outcome {
                Outcome::Measured(samples) => (
                    samples.len().to_string(),
                    format_duration(samples.p50()),
                    format_duration(samples.p99()),
                    format!("{:.0}", samples.per_second()),
                ),
                Outcome::Skipped(why) => (
                    "–".into(),
                    "–".into(),
                    "–".into(),
                    format!("skipped: {why}"),
                ),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {n} | {p50} | {p99} | {rate} | {} |",
                row.section, row.case, row.note
            );
        }

        out.push_str("\n| airlock | peer | airlock p50 | peer p50 | p50 ratio | p99 ratio |\n");
        out.push_str("| --- | --- | ---: | ---: | ---: | ---: |\n");
        for comparison in &self.comparisons {
            let (ours, peer) = (self.case(&comparison.ours), self.case(&comparison.peer));
            match (
                self.samples(&comparison.ours),
                self.samples(&comparison.peer),
            ) {
                (Some(a), Some(b)) => {
                    let _ = writeln!(
                        out,
                        "| {ours} | {peer} | {} | {} | {} | {} |",
                        format_duration(a.p50()),
                        format_duration(b.p50()),
                        ratio(a.p50(), b.p50()),
                        ratio(a.p99(), b.p99()),
                    );
                }
                _ => {
                    let _ = writeln!(out, "| {ours} | {peer} | – | – | not measured | – |");
                }
            }
        }

        out.push_str("\n| target | measured | verdict |\n| --- | --- | --- |\n");
        for target in &self.targets {
            let (measured, verdict) = match (judge, &target.disturbed) {
                (false, _) => ("–".into(), "not judged (smoke)".into()),
                (true, Some(why)) => (self.judge(&target.check).0, format!("not judged ({why})")),
                (true, None) => {
                    let (measured, verdict) = self.judge(&target.check);
                    (measured, verdict.to_owned())
                }
            };
            let _ = writeln!(out, "| {} | {measured} | {verdict} |", target.goal);
        }
        if !self.machine.is_empty() {
            out.push_str("\n| section | the machine around it | judged |\n| --- | --- | --- |\n");
            for (section, quiet) in &self.machine {
                let judged = match quiet.disturbed() {
                    None => "yes".to_owned(),
                    Some(why) => format!("no: {why}"),
                };
                let _ = writeln!(out, "| {section} | {} | {judged} |", quiet.describe());
            }
        }
        for table in &self.tables {
            out.push('\n');
            out.push_str(table);
        }
        out
    }

    fn judge(&self, check: &Check) -> (String, &'static str) {
        let verdict = |met: bool| if met { "met" } else { "MISSED" };
        match check {
            Check::Ratio { ours, peer, max } => match (self.samples(ours), self.samples(peer)) {
                (Some(a), Some(b)) => {
                    let value = cost(a.p50(), b.p50());
                    (
                        format!("{value:.3} × the peer (target ≤ {max})"),
                        verdict(value <= *max),
                    )
                }
                _ => ("not measured".into(), "not measured"),
            },
            Check::Latency { ours, max } => match self.samples(ours) {
                Some(samples) => (
                    format!(
                        "p50 {} (target ≤ {})",
                        format_duration(samples.p50()),
                        format_duration(*max)
                    ),
                    verdict(samples.p50() <= *max),
                ),
                None => ("not measured".into(), "not measured"),
            },
            Check::TailLatency { ours, max } => match self.samples(ours) {
                Some(samples) => (
                    format!(
                        "p99 {} (target ≤ {})",
                        format_duration(samples.p99()),
                        format_duration(*max)
                    ),
                    verdict(samples.p99() <= *max),
                ),
                None => ("not measured".into(), "not measured"),
            },
            Check::Throughput { ours, min } => match self.samples(ours) {
                Some(samples) => (
                    format!("{:.0} per second (target ≥ {min:.0})", samples.per_second()),
                    verdict(samples.per_second() >= *min),
                ),
                None => ("not measured".into(), "not measured"),
            },
            Check::Verdict { met, measured } => (measured.clone(), verdict(*met)),
        }
    }
}

/// airlock's time as a multiple of the peer's.
pub fn cost(ours: Duration, peer: Duration) -> f64 {
    if peer.is_zero() {
        return f64::INFINITY;
    }
    ours.as_secs_f64() / peer.as_secs_f64()
}

/// The cost ratio with its plain reading: "0.04 (25.0× faster)".
fn ratio(ours: Duration, peer: Duration) -> String {
    let value = cost(ours, peer);
    if value <= 1.0 {
        format!("{value:.3} ({:.1}× faster)", 1.0 / value)
    } else {
        format!("{value:.3} ({value:.1}× slower)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(micros: u64) -> Samples {
        Samples::sequential(vec![Duration::from_micros(micros); 3])
    }

    #[test]
    fn ratios_read_as_cost_against_the_peer() {
        assert_eq!(
            ratio(Duration::from_micros(100), Duration::from_micros(2500)),
            "0.040 (25.0× faster)"
        );
        assert_eq!(
            ratio(Duration::from_micros(300), Duration::from_micros(100)),
            "3.000 (3.0× slower)"
        );
    }

    #[test]
    fn targets_are_judged_from_the_rows() {
        let mut report = Report::default();
        report.measured("wasm", "ours", "call", samples(100));
        report.measured("wasm", "peer", "cli", samples(1000));
        report.skipped("wasm", "gone", "absent peer", "not installed");
        report.compare("ours", "peer");
        report.compare("ours", "gone");
        report.target(
            "20× faster",
            Check::Ratio {
                ours: "ours".into(),
                peer: "peer".into(),
                max: 0.05,
            },
        );
        report.target(
            "under 50 µs",
            Check::Latency {
                ours: "ours".into(),
                max: Duration::from_micros(50),
            },
        );
        report.target(
            "a thousand a second",
            Check::Throughput {
                ours: "ours".into(),
                min: 1000.0,
            },
        );
        report.target(
            "vs absent",
            Check::Ratio {
                ours: "ours".into(),
                peer: "gone".into(),
                max: 1.0,
            },
        );
        let rendered = report.render(true);
        assert!(
            report
                .render(false)
                .contains("| 20× faster | – | not judged (smoke) |")
        );
        assert!(rendered.contains("| 20× faster | 0.100 × the peer (target ≤ 0.05) | MISSED |"));
        assert!(rendered.contains("| under 50 µs | p50 100 µs (target ≤ 50 µs) | MISSED |"));
        assert!(rendered.contains("| vs absent | not measured | not measured |"));
        assert!(
            rendered.contains("| a thousand a second | 10000 per second (target ≥ 1000) | met |")
        );
        assert!(rendered.contains("| call | cli | 100 µs | 1000 µs | 0.100 (10.0× faster) |"));
        assert!(rendered.contains("| call | absent peer | – | – | not measured | – |"));
        assert!(rendered.contains("skipped: not installed"));
        report.table("| language | size |\n| --- | ---: |\n| c | 53 KiB |\n");
        assert!(report.render(false).ends_with(
            "not judged (smoke) |\n\n| language | size |\n| --- | ---: |\n| c | 53 KiB |\n"
        ));
    }
}
