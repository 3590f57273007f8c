//! Comparing results (`airlock eval compare A B`): two results of the same suite side by side — per task and
//! pooled over every task both ran, each side's pass rate with its 95% Wilson interval, the
//! difference B − A with its 95% Newcombe interval (significant when it leaves out 0), the
//! means of steps, tokens, cost and wall time with their ratio B / A, and how the stop reasons
//! changed. Tasks whose attempts may end differently (repeats, a judge, a live model) are
//! marked: there one attempt's result says little, the interval says how much.
//!
//! A and B are a `report.json`, a result directory, or a label (`--label` of `eval run`),
//! which means the latest result with that label under `--results`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::error::{Console, EvalError};
use super::report::{self, Aggregate, AttemptRecord, Report};
use super::run::REPORT_FILE;
use super::stats::{Difference, Rate, newcombe};
use super::text;

/// What `run` compares (the arguments of `airlock eval compare`).
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// The first result (the baseline): a report.json, a result directory, or a label.
    pub a: String,
    /// The second result, compared with the first.
    pub b: String,
    /// Where labels are looked for: DIR/<suite>/<result id>/report.json.
    pub results: PathBuf,
    /// The suite whose results a label names, when labels of several suites are there.
    pub suite: Option<String>,
    /// Print the comparison as JSON.
    pub json: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub suite: String,
    pub a: Side,
    pub b: Side,
    pub tasks: Vec<TaskComparison>,
    /// Over the attempts of every task both ran, pooled.
    pub overall: TaskComparison,
    pub only_in_a: Vec<String>,
    pub only_in_b: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    pub label: String,
    pub result_id: String,
    pub report: String,
    pub started_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskComparison {
    pub id: String,
    /// Either side's attempts may end differently from run to run.
    pub nondeterministic: bool,
    pub a: SideSummary,
    pub b: SideSummary,
    /// B − A of the pass rates; `None` when a side has no attempts.
    pub difference: Option<Difference>,
    /// B / A of the means; `None` when either is unknown or A's is 0.
    pub ratios: Ratios,
    /// `final: 3 → 1` for each stop reason whose count differs.
    pub stop_reason_changes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideSummary {
    pub pass_rate: Option<Rate>,
    pub mean_steps: Option<f64>,
    pub mean_tokens: Option<f64>,
    pub mean_cost_usd: Option<f64>,
    pub mean_wall_s: Option<f64>,
    pub stop_reasons: BTreeMap<String, u32>,
}

impl From<&Aggregate> for SideSummary {
    fn from(aggregate: &Aggregate) -> Self {
        SideSummary {
            pass_rate: aggregate.pass_rate,
            mean_steps: aggregate.mean_steps,
            mean_tokens: aggregate.mean_tokens,
            mean_cost_usd: aggregate.mean_cost_usd,
            mean_wall_s: aggregate.mean_wall_s,
            stop_reasons: aggregate.stop_reasons.clone(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Ratios {
    pub steps: Option<f64>,
    pub tokens: Option<f64>,
    pub cost_usd: Option<f64>,
    pub wall_s: Option<f64>,
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if a > 0.0 => Some(b / a),
        _ => None,
    }
}

fn compare_attempts(
    id: &str,
    nondeterministic: bool,
    a: &[&AttemptRecord],
    b: &[&AttemptRecord],
) -> TaskComparison {
    let (a, b) = (
        Aggregate::of(a.iter().copied()),
        Aggregate::of(b.iter().copied()),
    );
    let reasons: BTreeSet<&String> = a.stop_reasons.keys().chain(b.stop_reasons.keys()).collect();
    let stop_reason_changes = reasons
        .into_iter()
        .filter_map(|reason| {
            let before = a.stop_reasons.get(reason).copied().unwrap_or(0);
            let after = b.stop_reasons.get(reason).copied().unwrap_or(0);
            (before != after).then(|| format!("{reason}: {before} → {after}"))
        })
        .collect();
    TaskComparison {
        id: id.to_owned(),
        nondeterministic,
        difference: match (a.pass_rate, b.pass_rate) {
            (Some(rate_a), Some(rate_b)) => Some(newcombe(rate_a, rate_b)),
            _ => None,
        },
        ratios: Ratios {
            steps: ratio(a.mean_steps, b.mean_steps),
            tokens: ratio(a.mean_tokens, b.mean_tokens),
            cost_usd: ratio(a.mean_cost_usd, b.mean_cost_usd),
            wall_s: ratio(a.mean_wall_s, b.mean_wall_s),
        },
        stop_reason_changes,
        a: SideSummary::from(&a),
        b: SideSummary::from(&b),
    }
}

fn side(report: &Report, path: &Path) -> Side {
    Side {
        label: report.label.clone(),
        result_id: report.result_id.clone(),
        report: path.to_string_lossy().into_owned(),
        started_at: report.started_at.clone(),
    }
}

/// Compares two reports of the same suite.
pub fn compare(a: (&Report, &Path), b: (&Report, &Path)) -> Result<Comparison, EvalError> {
    let ((report_a, path_a), (report_b, path_b)) = (a, b);
    if report_a.suite != report_b.suite {
        return Err(EvalError::Usage(format!(
            "{} is a result of suite `{}` and {} of suite `{}`: only results of the same \
             suite compare",
            path_a.display(),
            report_a.suite,
            path_b.display(),
            report_b.suite
        )));
    }
    let mut tasks = Vec::new();
    let mut pooled_a = Vec::new();
    let mut pooled_b = Vec::new();
    let mut any_nondeterministic = false;
    for task_a in &report_a.tasks {
        let Some(task_b) = report_b.tasks.iter().find(|task| task.id == task_a.id) else {
            continue;
        };
        let attempts_a: Vec<&AttemptRecord> = task_a.attempts.iter().collect();
        let attempts_b: Vec<&AttemptRecord> = task_b.attempts.iter().collect();
        let nondeterministic = task_a.nondeterministic || task_b.nondeterministic;
        any_nondeterministic |= nondeterministic;
        tasks.push(compare_attempts(
            &task_a.id,
            nondeterministic,
            &attempts_a,
            &attempts_b,
        ));
        pooled_a.extend(attempts_a);
        pooled_b.extend(attempts_b);
    }
    let ids = |report: &Report| -> BTreeSet<String> {
        report.tasks.iter().map(|task| task.id.clone()).collect()
    };
    let (ids_a, ids_b) = (ids(report_a), ids(report_b));
    Ok(Comparison {
        suite: report_a.suite.clone(),
        a: side(report_a, path_a),
        b: side(report_b, path_b),
        overall: compare_attempts("all", any_nondeterministic, &pooled_a, &pooled_b),
        tasks,
        only_in_a: ids_a.difference(&ids_b).cloned().collect(),
        only_in_b: ids_b.difference(&ids_a).cloned().collect(),
    })
}

/// The report a reference names: a report.json, a result directory, or the latest result
/// with that label under `results` (of `suite`, when given).
pub fn resolve(
    reference: &str,
    results: &Path,
    suite: Option<&str>,
) -> Result<(PathBuf, Report), EvalError> {
    let path = Path::new(reference);
    let file = if path.is_dir() {
        path.join(REPORT_FILE)
    } else {
        path.to_owned()
    };
    if file.is_file() {
        let report = report::read(&file).map_err(EvalError::Usage)?;
        return Ok((file, report));
    }
    let mut found: Vec<(PathBuf, Report)> = Vec::new();
    let suites = std::fs::read_dir(results).map_err(|error| {
        EvalError::Usage(format!(
            "{reference}: not a report.json or result directory, and {} cannot be read to look \
             for the label: {error}",
            results.display()
        ))
    })?;
    for suite_dir in suites.flatten() {
        let name = suite_dir.file_name().to_string_lossy().into_owned();
        if suite.is_some_and(|wanted| wanted != name) {
            continue;
        }
        for result in std::fs::read_dir(suite_dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let file = result.path().join(REPORT_FILE);
            // A result being written, or of another airlock, is not this label's.
            if let Ok(report) = report::read(&file)
                && report.label == reference
            {
                found.push((file, report));
            }
        }
    }
    let suites: BTreeSet<&str> = found
        .iter()
        .map(|(_, report)| report.suite.as_str())
        .collect();
    if suites.len() > 1 {
        return Err(EvalError::Usage(format!(
            "{reference}: results of several suites have this label ({}): pass --suite NAME",
            suites.into_iter().collect::<Vec<_>>().join(", ")
        )));
    }
    found
        .into_iter()
        .max_by(|(_, x), (_, y)| {
            (x.started_at.as_str(), x.result_id.as_str())
                .cmp(&(y.started_at.as_str(), y.result_id.as_str()))
        })
        .ok_or_else(|| {
            EvalError::Usage(format!(
                "{reference}: no such report.json or result directory, and no result labelled \
                 `{reference}` under {}",
                results.display()
            ))
        })
}

/// Compares the two results `args` names and prints the comparison on `out`.
pub async fn run<C: Console>(args: CompareOptions, out: &mut C) -> Result<u8, EvalError> {
    // A label may name results of several suites; the other side says which is meant.
    let is_path = |reference: &str| Path::new(reference).exists();
    let hint = args.suite.as_deref();
    let first_a = resolve(&args.a, &args.results, hint);
    let first_b = resolve(&args.b, &args.results, hint);
    let (a, b) = match (first_a, first_b) {
        (Ok(a), Ok(b)) if a.1.suite == b.1.suite || hint.is_some() => (a, b),
        (Ok(a), _) if !is_path(&args.b) => {
            let suite = a.1.suite.clone();
            let b = resolve(&args.b, &args.results, Some(&suite))?;
            (a, b)
        }
        (_, Ok(b)) if !is_path(&args.a) => {
            let suite = b.1.suite.clone();
            (resolve(&args.a, &args.results, Some(&suite))?, b)
        }
        // Two paths to results of different suites, which `compare` refuses by name.
        (Ok(a), Ok(b)) => (a, b),
        (Err(error), _) | (_, Err(error)) => return Err(error),
    };
    let comparison = compare((&a.1, &a.0), (&b.1, &b.0))?;
    if args.json {
        let json = serde_json::to_string_pretty(&comparison)
            .map_err(|error| EvalError::Output(std::io::Error::other(error)))?;
        out.stdout(&format!("{json}\n"))?;
    } else {
        out.stdout(&render(&comparison))?;
    }
    Ok(0)
}

fn means(
    a: Option<f64>,
    b: Option<f64>,
    ratio: Option<f64>,
    show: fn(Option<f64>) -> String,
) -> String {
    let ratio = ratio.map_or(String::new(), |ratio| format!(" ({ratio:.2}×)"));
    format!("{} → {}{ratio}", show(a), show(b))
}

fn difference(difference: Option<&Difference>) -> String {
    match difference {
        Some(difference) => format!(
            "{} [{}, {}]{}",
            text::points(difference.difference),
            text::points(difference.ci95.low),
            text::points(difference.ci95.high),
            if difference.significant { " *" } else { "" }
        ),
        None => "-".to_owned(),
    }
}

fn row(task: &TaskComparison) -> Vec<String> {
    let marker = if task.nondeterministic { " ~" } else { "" };
    vec![
        format!("{}{marker}", task.id),
        text::rate(task.a.pass_rate.as_ref()),
        text::rate(task.b.pass_rate.as_ref()),
        difference(task.difference.as_ref()),
        means(
            task.a.mean_steps,
            task.b.mean_steps,
            task.ratios.steps,
            text::number,
        ),
        means(
            task.a.mean_tokens,
            task.b.mean_tokens,
            task.ratios.tokens,
            text::number,
        ),
        means(
            task.a.mean_cost_usd,
            task.b.mean_cost_usd,
            task.ratios.cost_usd,
            text::usd,
        ),
        means(
            task.a.mean_wall_s,
            task.b.mean_wall_s,
            task.ratios.wall_s,
            text::seconds,
        ),
    ]
}

/// The comparison as text.
pub fn render(comparison: &Comparison) -> String {
    let mut out = format!(
        "{}: A = {} ({}), B = {} ({})\n",
        comparison.suite,
        comparison.a.label,
        comparison.a.result_id,
        comparison.b.label,
        comparison.b.result_id
    );
    let mut rows: Vec<Vec<String>> = comparison.tasks.iter().map(row).collect();
    rows.push(row(&comparison.overall));
    out.push_str(&text::table(
        &[
            "TASK",
            "A PASSED [95% CI]",
            "B PASSED [95% CI]",
            "B-A PP [95% CI]",
            "STEPS A → B",
            "TOKENS A → B",
            "COST A → B",
            "WALL A → B",
        ],
        &rows,
    ));
    out.push_str(
        "pp: percentage points; * significant (the 95% interval leaves out 0); (×) B / A\n",
    );
    if comparison.tasks.iter().any(|task| task.nondeterministic) {
        out.push_str("~ non-deterministic (repeats, a judge or a live model): read the intervals, not single results\n");
    }
    for task in comparison.tasks.iter().chain([&comparison.overall]) {
        if !task.stop_reason_changes.is_empty() {
            out.push_str(&format!(
                "stop reasons of {}: {}\n",
                task.id,
                task.stop_reason_changes.join(", ")
            ));
        }
    }
    if !comparison.only_in_a.is_empty() {
        out.push_str(&format!("only in A: {}\n", comparison.only_in_a.join(", ")));
    }
    if !comparison.only_in_b.is_empty() {
        out.push_str(&format!("only in B: {}\n", comparison.only_in_b.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::report::AttemptStatus;
    use super::super::report::tests::attempt;
    use super::super::run::tests::sample_report;
    use super::*;

    fn with_attempts(label: &str, passed: u32, failed: u32) -> Report {
        let mut report = sample_report();
        report.label = label.to_owned();
        report.result_id = format!("20250101T000000Z-{label}");
        let attempts: Vec<AttemptRecord> = (1..=passed)
            .map(|n| attempt("read", n, AttemptStatus::Passed, 2))
            .chain((1..=failed).map(|n| attempt("read", passed + n, AttemptStatus::Failed, 4)))
            .collect();
        report.tasks[0].summary = Aggregate::of(&attempts);
        report.tasks[0].attempts = attempts;
        report
    }

    #[test]
    fn a_comparison_gives_the_difference_with_its_interval() -> anyhow::Result<()> {
        // Newcombe's example again, as two results of one task.
        let a = with_attempts("base", 48, 32);
        let b = with_attempts("new", 56, 14);
        let comparison = compare((&a, Path::new("a.json")), (&b, Path::new("b.json")))?;
        let task = &comparison.tasks[0];
        let difference = task
            .difference
            .ok_or_else(|| anyhow::anyhow!("no difference"))?;
        assert!((difference.difference - 0.2).abs() < 1e-9);
        assert!(
            (difference.ci95.low - 0.0524).abs() < 5e-4,
            "{difference:?}"
        );
        assert!(
            (difference.ci95.high - 0.3339).abs() < 5e-4,
            "{difference:?}"
        );
        assert!(difference.significant);
        assert_eq!(
            task.stop_reason_changes,
            ["final: 48 → 56", "max_steps: 32 → 14"]
        );
        let steps = task
            .ratios
            .steps
            .ok_or_else(|| anyhow::anyhow!("no ratio"))?;
        assert!(steps < 1.0);
        assert_eq!(comparison.overall.difference, task.difference);
        let text = render(&comparison);
        assert!(text.contains("+20.0 [+5.2, +33.4] *"), "{text}");
        Ok(())
    }

    #[test]
    fn different_suites_do_not_compare() {
        let a = sample_report();
        let mut b = sample_report();
        b.suite = "other".to_owned();
        let Err(error) = compare((&a, Path::new("a")), (&b, Path::new("b"))) else {
            panic!("two suites were compared");
        };
        assert!(
            error
                .to_string()
                .contains("only results of the same suite compare")
        );
        assert!(matches!(error, EvalError::Usage(_)), "{error:?}");
    }

    #[test]
    fn references_are_paths_directories_or_the_latest_result_of_a_label() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let write = |result: &str, report: &Report| -> anyhow::Result<PathBuf> {
            let path = dir.path().join("coding-basics").join(result);
            std::fs::create_dir_all(&path)?;
            std::fs::write(path.join(REPORT_FILE), serde_json::to_string(report)?)?;
            Ok(path)
        };
        let mut old = with_attempts("new", 1, 1);
        old.started_at = "2025-01-01T00:00:00Z".to_owned();
        let mut latest = with_attempts("new", 2, 0);
        latest.started_at = "2025-02-01T00:00:00Z".to_owned();
        let old_dir = write("old", &old)?;
        write("latest", &latest)?;
        let (_, found) = resolve("new", dir.path(), None)?;
        assert_eq!(found.started_at, "2025-02-01T00:00:00Z");
        let (path, found) = resolve(&old_dir.to_string_lossy(), dir.path(), None)?;
        assert_eq!(path, old_dir.join(REPORT_FILE));
        assert_eq!(found, old);
        let Err(error) = resolve("nope", dir.path(), None) else {
            panic!("an unknown label resolved");
        };
        assert!(matches!(error, EvalError::Usage(_)), "{error:?}");
        assert!(
            error.to_string().contains("no result labelled `nope`"),
            "{error}"
        );
        Ok(())
    }
}
