//! Running a suite (`airlock eval run SUITE`): loads and checks the suite, runs every task's attempts against
//! the daemon (up to `--jobs` at a time, each in a fresh copy of its workspace under one of
//! the daemon's workspace roots), grades them, and writes `report.json`, `junit.xml` and
//! `summary.md` under `--results DIR/<suite>/<result id>/` — also when the daemon goes away
//! mid-suite or Ctrl-C stops it, with what did not finish listed as unfinished.
//!
//! Exit codes: 0 every attempt passed (or the suite's `thresholds.pass_rate` was reached) and
//! the thresholds hold; 1 an attempt failed or a threshold was missed; 69 an attempt could not
//! finish (the daemon unreachable or gone); 130 interrupted; 64 and 66 for a suite that
//! cannot be used, before anything runs.

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use airlock_client::{AirlockClient, ClientError, exit_code};
use airlock_render::format_utc;
use futures::StreamExt;

use super::attempt::{self, Env, Plan};
use super::daemon::Daemon;
use super::error::{Console, EvalError};
use super::junit::junit;
use super::report::{
    Aggregate, AttemptRecord, AttemptStatus, FORMAT, GraderInfo, Report, TaskReport,
    ThresholdCheck, Workspaces, grader_summaries,
};
use super::suite::{self, LoadOptions, Suite, safe_name};
use super::summary::summary;
use super::text;

/// Where results go when `--results` is not given, relative to the current directory.
pub const DEFAULT_RESULTS: &str = ".airlock/evals";

/// The directory under a workspace root where attempts' workspaces go by default.
const SCRATCH_DIR: &str = ".airlock-eval";

/// What `run` is asked to do: the suite and how to run it (the flags of `airlock eval run`).
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The suite file (YAML).
    pub suite: PathBuf,
    /// Attempts run at the same time (at least 1).
    pub jobs: u32,
    /// Attempts of every task, over the suite's `repeats`.
    pub repeats: Option<u32>,
    /// Only these tasks (all when empty).
    pub tasks: Vec<String>,
    /// A YAML file of settings applied over every task.
    pub variant: Option<PathBuf>,
    /// The configuration's name in the results; by default the variant file's stem, else `base`.
    pub label: Option<String>,
    /// Where results are written: DIR/<suite>/<result id>/.
    pub results: PathBuf,
    /// Where attempts' workspaces are made; inside one of the daemon's workspace roots.
    pub scratch: Option<PathBuf>,
    /// Keep every attempt's workspace (else only failed and unfinished ones).
    pub keep_workspaces: bool,
    /// Print the report as JSON instead of the summary.
    pub json: bool,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
        })
}

/// The configuration's name: `--label`, else the variant file's stem, else `base`.
fn label(given: Option<&str>, variant: Option<&Path>) -> Result<String, EvalError> {
    if let Some(label) = given {
        if !safe_name(label) {
            return Err(EvalError::Usage(format!(
                "--label {label}: use letters, digits, `.`, `_` and `-` (it names a directory)"
            )));
        }
        return Ok(label.to_owned());
    }
    let stem = variant
        .and_then(Path::file_stem)
        .map(|stem| {
            stem.to_string_lossy()
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || matches!(c, '_' | '-') {
                        c
                    } else {
                        '-'
                    }
                })
                .collect::<String>()
        })
        .filter(|stem| safe_name(stem));
    Ok(stem.unwrap_or_else(|| "base".to_owned()))
}

/// Makes `<results>/<suite>/<started>-<label>[-N]` and returns it with its name.
fn result_dir(
    results: &Path,
    suite: &str,
    started_ms: i64,
    label: &str,
) -> Result<(PathBuf, String), EvalError> {
    let stamp: String = format_utc(started_ms)
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect();
    let parent = results.join(suite);
    std::fs::create_dir_all(&parent).map_err(|error| write_error(&parent, error))?;
    for attempt in 1.. {
        let id = if attempt == 1 {
            format!("{stamp}-{label}")
        } else {
            format!("{stamp}-{label}-{attempt}")
        };
        let dir = parent.join(&id);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok((dir, id)),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(write_error(&dir, error)),
        }
    }
    Err(EvalError::Usage("no free result directory".to_owned()))
}

fn write_error(path: &Path, error: io::Error) -> EvalError {
    EvalError::Output(io::Error::new(
        error.kind(),
        format!("{}: {error}", path.display()),
    ))
}

/// Where attempts' workspaces go: `--scratch`, which must lie inside a workspace root, or
/// `<first root>/.airlock-eval/<result id>`.
fn scratch_dir(
    given: Option<&Path>,
    roots: &[String],
    endpoint: &str,
    result_id: &str,
) -> Result<PathBuf, EvalError> {
    let Some(first) = roots.first() else {
        return Err(EvalError::Usage(format!(
            "airlockd at {endpoint} serves no workspace root to this client, and an eval's \
             attempts need workspaces: start airlockd with a workspace root (`airlock info` \
             shows the roots)"
        )));
    };
    let Some(dir) = given else {
        // The workspaces are made here and used there: the two must share the filesystem.
        if !Path::new(first).is_dir() {
            return Err(EvalError::Usage(format!(
                "airlockd at {endpoint} serves the workspace root {first}, which is not a                  directory here: airlock eval copies workspaces, so it runs on the daemon's                  host (or give --scratch DIR, a directory both see)"
            )));
        }
        return Ok(Path::new(first).join(SCRATCH_DIR).join(result_id));
    };
    std::fs::create_dir_all(dir)
        .map_err(|error| EvalError::Usage(format!("--scratch {}: {error}", dir.display())))?;
    let resolved = std::fs::canonicalize(dir)
        .map_err(|error| EvalError::Usage(format!("--scratch {}: {error}", dir.display())))?;
    if !roots.iter().any(|root| resolved.starts_with(root)) {
        return Err(EvalError::Usage(format!(
            "--scratch {}: not inside the daemon's workspace roots ({}), where the daemon \
             would refuse the attempts' workspaces",
            dir.display(),
            roots.join(", ")
        )));
    }
    // Each result's attempts in a directory of their own: the workspaces an earlier result
    // kept there (its failed attempts') are never in the way of this one's.
    Ok(resolved.join(result_id))
}

/// Runs the suite `args` names against the daemon `connect` reaches (at `endpoint`, the
/// address it is asked for; the suite is loaded and checked first): every attempt graded, the report written, its summary (or the
/// report as JSON) on `out`. `interrupts` is called as the attempts start and resolves at the
/// next Ctrl-C (before, Ctrl-C ends the command as usual): the runs in flight are
/// cancelled and the report says what did not finish. The exit code: the report's.
pub async fn run<C: Console, I: Future<Output = ()>>(
    args: RunOptions,
    connect: impl Future<Output = Result<AirlockClient, ClientError>>,
    endpoint: &str,
    interrupts: impl FnOnce() -> I,
    out: &mut C,
) -> Result<u8, EvalError> {
    let suite = suite::load(
        &args.suite,
        &LoadOptions {
            variant: args.variant.as_deref(),
            repeats: args.repeats,
            tasks: &args.tasks,
        },
    )?;
    let label = label(args.label.as_deref(), args.variant.as_deref())?;
    let started_ms = now_ms();

    // A daemon that cannot be reached fails every attempt, which the report says; a daemon
    // that refuses this client (token, certificate) is an error before anything runs.
    let connected = match connect.await {
        Ok(client) => match client.daemon_info().await {
            Ok(info) => Ok((client, info.workspace_roots)),
            Err(error) => Err(error),
        },
        Err(error) => Err(error),
    };
    let (daemon, roots, unreachable) = match connected {
        Ok((client, roots)) => (Some(Daemon::new(client)), roots, None),
        Err(error) if error.exit_code() == exit_code::UNAVAILABLE => {
            (None, Vec::new(), Some(error))
        }
        Err(error) => return Err(error.into()),
    };
    let endpoint = daemon.as_ref().map_or_else(
        || endpoint.to_owned(),
        |daemon| daemon.client().endpoint().to_owned(),
    );
    let (results, result_id) = result_dir(&args.results, &suite.name, started_ms, &label)?;
    let scratch = match &unreachable {
        None => scratch_dir(args.scratch.as_deref(), &roots, &endpoint, &result_id)?,
        Some(_) => args.scratch.clone().unwrap_or_default(),
    };

    let plans = plan(&suite, &scratch);
    let (records, interrupted) = match (&daemon, &unreachable) {
        (Some(daemon), _) => attempts(&suite, &plans, daemon, args.jobs, interrupts, out).await?,
        (None, error) => {
            let error = error.as_ref().map_or(String::new(), ClientError::to_string);
            out.line(&format!("airlock: {error}; no attempt can run"))?;
            let mut records = Vec::with_capacity(plans.len());
            for plan in &plans {
                let record = attempt::unfinished(
                    plan,
                    format!("{}{error}", attempt::NOT_RUN),
                    Default::default(),
                );
                out.line(&plan.ended_line(&record))?;
                records.push(record);
            }
            (records, false)
        }
    };
    let records = clean_up(records, args.keep_workspaces);
    // Only the directory this command made (the result's own), and only when nothing was
    // kept in it.
    if unreachable.is_none() {
        let _ = std::fs::remove_dir(&scratch);
    }

    let report = build_report(
        &suite,
        Meta {
            result_id,
            label,
            started_ms,
            endpoint,
            workspaces: Workspaces {
                root: scratch.to_string_lossy().into_owned(),
                kept: if args.keep_workspaces {
                    "all"
                } else {
                    "failed"
                }
                .to_owned(),
            },
            interrupted,
        },
        records,
    );
    let paths = write(&results, &report)?;
    if args.json {
        let json = serde_json::to_string_pretty(&report)
            .map_err(|error| EvalError::Output(io::Error::other(error)))?;
        out.stdout(&format!("{json}\n"))?;
        for line in paths_lines(&paths) {
            out.line(&line)?;
        }
    } else {
        out.stdout(&terminal_summary(&report, &paths))?;
    }
    Ok(report.exit_code)
}

/// Every attempt of the suite, in order: each task's repeats.
fn plan<'a>(suite: &'a Suite, scratch: &Path) -> Vec<Plan<'a>> {
    let total: usize = suite
        .tasks
        .iter()
        .map(|task| task.settings.repeats as usize)
        .sum();
    let mut plans = Vec::with_capacity(total);
    for task in &suite.tasks {
        for repeat in 1..=task.settings.repeats {
            plans.push(Plan {
                number: plans.len() + 1,
                total,
                task,
                repeat,
                workspace: scratch.join(format!("{}-{repeat}", task.id)),
            });
        }
    }
    plans
}

/// Runs the attempts, `jobs` at a time, printing progress as they start and end; Ctrl-C
/// cancels the runs in flight and stops. The records in plan order, and whether it was
/// interrupted.
async fn attempts<C: Console, I: Future<Output = ()>>(
    suite: &Suite,
    plans: &[Plan<'_>],
    daemon: &Daemon,
    jobs: u32,
    interrupts: impl FnOnce() -> I,
    out: &mut C,
) -> Result<(Vec<AttemptRecord>, bool), EvalError> {
    let (progress, mut lines) = tokio::sync::mpsc::unbounded_channel();
    let gone = RefCell::new(None);
    let env = Env {
        daemon,
        prices: &suite.prices,
        gone: &gone,
        progress: &progress,
    };
    let mut records: Vec<Option<AttemptRecord>> = plans.iter().map(|_| None).collect();
    let mut interrupted = std::pin::pin!(interrupts());
    let mut stopped = false;
    {
        let env = &env;
        let mut running = futures::stream::iter(plans)
            .map(|plan| async move { (plan.number, attempt::run(plan, env).await) })
            .buffer_unordered(jobs as usize);
        loop {
            tokio::select! {
                biased;
                Some(line) = lines.recv() => out.line(&line)?,
                next = running.next() => {
                    let Some((number, record)) = next else { break };
                    while let Ok(line) = lines.try_recv() {
                        out.line(&line)?;
                    }
                    if let Some(plan) = plans.get(number - 1) {
                        out.line(&plan.ended_line(&record))?;
                    }
                    if let Some(slot) = records.get_mut(number - 1) {
                        *slot = Some(record);
                    }
                }
                () = &mut interrupted => {
                    stopped = true;
                    break;
                }
            }
        }
    }
    if stopped {
        let cancelled = daemon
            .cancel_live("airlock eval was interrupted (Ctrl-C)")
            .await;
        out.line(&format!(
            "airlock: interrupted; cancelled {} run(s) in flight; writing the report",
            cancelled.len()
        ))?;
    }
    let records = records
        .into_iter()
        .zip(plans)
        .map(|(record, plan)| {
            record.unwrap_or_else(|| {
                attempt::unfinished(plan, "interrupted (Ctrl-C)".to_owned(), Default::default())
            })
        })
        .collect();
    Ok((records, stopped))
}

/// Removes the workspaces of passed attempts (all are kept with `keep_all`) and says which
/// remain.
fn clean_up(mut records: Vec<AttemptRecord>, keep_all: bool) -> Vec<AttemptRecord> {
    for record in &mut records {
        let path = Path::new(&record.workspace);
        if !keep_all && record.status == AttemptStatus::Passed && !record.workspace.is_empty() {
            let _ = std::fs::remove_dir_all(path);
        }
        record.workspace_kept = !record.workspace.is_empty() && path.exists();
    }
    records
}

/// The exit code of a result with unfinished attempts: an I/O error here when one of them
/// failed on this machine (its workspace could not be made, so it never reached the daemon),
/// else the daemon's unavailability (an attempt never run for it, or a run that got no
/// further).
fn unfinished_code(records: &[AttemptRecord]) -> u8 {
    if records.iter().any(|record| record.failed_here) {
        exit_code::IO_ERROR
    } else {
        exit_code::UNAVAILABLE
    }
}

/// What a report says about its run besides the attempts.
pub struct Meta {
    pub result_id: String,
    pub label: String,
    pub started_ms: i64,
    pub endpoint: String,
    pub workspaces: Workspaces,
    pub interrupted: bool,
}

pub fn build_report(suite: &Suite, meta: Meta, records: Vec<AttemptRecord>) -> Report {
    let tasks: Vec<TaskReport> = suite
        .tasks
        .iter()
        .map(|task| {
            let attempts: Vec<AttemptRecord> = records
                .iter()
                .filter(|record| record.task == task.id)
                .cloned()
                .collect();
            let reasons = task.nondeterministic();
            TaskReport {
                id: task.id.clone(),
                input: task.input.clone(),
                model: task.settings.model.name.clone(),
                policy: airlock_render::policy_name(task.settings.policy as i32).to_lowercase(),
                approver: task.settings.approver.describe(),
                repeats: task.settings.repeats,
                nondeterministic: !reasons.is_empty(),
                nondeterministic_reasons: reasons,
                graders: task
                    .graders
                    .iter()
                    .map(|grader| GraderInfo {
                        kind: grader.kind().to_owned(),
                        label: grader.label(),
                        deterministic: grader.deterministic(),
                    })
                    .collect(),
                summary: Aggregate::of(&attempts),
                attempts,
            }
        })
        .collect();
    let totals = Aggregate::of(&records);
    let thresholds = check_thresholds(suite, &totals);
    let (status, code) = if meta.interrupted {
        (AttemptStatus::Unfinished, exit_code::INTERRUPTED)
    } else if totals.unfinished > 0 {
        (AttemptStatus::Unfinished, unfinished_code(&records))
    } else if thresholds.iter().all(|check| check.passed) {
        (AttemptStatus::Passed, exit_code::OK)
    } else {
        (AttemptStatus::Failed, 1)
    };
    Report {
        format: FORMAT,
        suite: suite.name.clone(),
        description: suite.description.clone(),
        suite_file: std::fs::canonicalize(&suite.file)
            .unwrap_or_else(|_| suite.file.clone())
            .to_string_lossy()
            .into_owned(),
        result_id: meta.result_id,
        label: meta.label,
        variant: suite
            .variant
            .as_ref()
            .map(|variant| variant.to_string_lossy().into_owned()),
        started_at: format_utc(meta.started_ms),
        finished_at: format_utc(now_ms()),
        endpoint: meta.endpoint,
        status,
        exit_code: code,
        workspaces: meta.workspaces,
        thresholds,
        graders: grader_summaries(&records),
        totals,
        tasks,
    }
}

/// The suite's thresholds against the totals; without `pass_rate`, every attempt must pass.
fn check_thresholds(suite: &Suite, totals: &Aggregate) -> Vec<ThresholdCheck> {
    let rate = totals.pass_rate.map(|rate| rate.rate);
    let mut checks = Vec::new();
    let (limit, what) = match suite.thresholds.pass_rate {
        Some(limit) => (limit, format!("at least {limit:.2} needed")),
        None => (
            1.0,
            "every attempt must pass (the suite sets no thresholds.pass_rate)".to_owned(),
        ),
    };
    checks.push(ThresholdCheck {
        name: "pass_rate".to_owned(),
        limit,
        actual: rate,
        passed: rate.is_some_and(|rate| rate >= limit),
        detail: format!(
            "{} of {} attempts passed ({}); {what}",
            totals.passed,
            totals.attempts,
            text::number(rate.map(|rate| rate * 100.0)) + "%"
        ),
    });
    if let Some(limit) = suite.thresholds.max_cost_usd {
        let known = totals.cost_unknown == 0;
        checks.push(ThresholdCheck {
            name: "max_cost_usd".to_owned(),
            limit,
            actual: known.then_some(totals.cost_usd),
            passed: known && totals.cost_usd <= limit,
            detail: if known {
                format!(
                    "cost {} of at most {}",
                    text::usd(Some(totals.cost_usd)),
                    text::usd(Some(limit))
                )
            } else {
                format!(
                    "cost unknown for {} attempt(s) (no price for their model in `prices`): \
                     {} known, at most {} allowed",
                    totals.cost_unknown,
                    text::usd(Some(totals.cost_usd)),
                    text::usd(Some(limit))
                )
            },
        });
    }
    checks
}

/// The files a result is written to.
pub struct Paths {
    pub report: PathBuf,
    pub junit: PathBuf,
    pub summary: PathBuf,
}

pub const REPORT_FILE: &str = "report.json";

fn write(dir: &Path, report: &Report) -> Result<Paths, EvalError> {
    let paths = Paths {
        report: dir.join(REPORT_FILE),
        junit: dir.join("junit.xml"),
        summary: dir.join("summary.md"),
    };
    let json = serde_json::to_string_pretty(report)
        .map_err(|error| EvalError::Output(io::Error::other(error)))?;
    for (path, text) in [
        (&paths.report, format!("{json}\n")),
        (&paths.junit, junit(report)),
        (&paths.summary, summary(report)),
    ] {
        std::fs::write(path, text).map_err(|error| write_error(path, error))?;
    }
    Ok(paths)
}

fn paths_lines(paths: &Paths) -> Vec<String> {
    vec![
        format!("report: {}", paths.report.display()),
        format!("junit: {}", paths.junit.display()),
        format!("summary: {}", paths.summary.display()),
    ]
}

/// What stdout shows at the end: a row per task, the totals, the thresholds, the verdict and
/// where the files are.
fn terminal_summary(report: &Report, paths: &Paths) -> String {
    let row = |name: String, aggregate: &Aggregate| {
        vec![
            name,
            text::rate(aggregate.pass_rate.as_ref()),
            text::number(aggregate.mean_steps),
            text::number(aggregate.mean_tokens),
            if aggregate.cost_unknown > 0 {
                "unknown".to_owned()
            } else {
                text::usd(Some(aggregate.cost_usd))
            },
            text::seconds(aggregate.mean_wall_s),
        ]
    };
    let mut rows: Vec<Vec<String>> = report
        .tasks
        .iter()
        .map(|task| {
            let marker = if task.nondeterministic { " *" } else { "" };
            row(format!("{}{marker}", task.id), &task.summary)
        })
        .collect();
    rows.push(row("all".to_owned(), &report.totals));
    let mut out = format!("{} ({})\n", report.suite, report.label);
    out.push_str(&text::table(
        &["TASK", "PASSED [95% CI]", "STEPS", "TOKENS", "COST", "WALL"],
        &rows,
    ));
    if report.nondeterministic() {
        out.push_str("* non-deterministic: compare pass rates by their intervals\n");
    }
    for check in &report.thresholds {
        out.push_str(&format!(
            "{} {}: {}\n",
            if check.passed { "ok  " } else { "MISS" },
            check.name,
            check.detail
        ));
    }
    let verdict = match report.status {
        AttemptStatus::Passed => "passed",
        AttemptStatus::Failed => "failed",
        AttemptStatus::Unfinished => "unfinished",
    };
    out.push_str(&format!("{verdict} (exit {})\n", report.exit_code));
    for line in paths_lines(paths) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
#[path = "run_tests.rs"]
pub mod tests;
