//! Section 15, long runs: a scripted run of 1,000 steps, each a `read_file` of a different
//! small file (policy auto), under two context budgets ([`BUDGETS`]), each compacting the
//! conversation whenever it outgrows the budget. It measures the time per step over steps
//! 10–60 against steps 950–1,000 (from the starts of the run's step spans, the daemon's own
//! clock), the prompt's tokens in each window, and what the store grew by per step, per table
//! — SQLite's `dbstat` pages, what the file takes, not the payload — over the run's first
//! tenth and over the rest. A step that rewrites or stores the whole conversation shows as
//! the late window's time and the later steps' growth.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use airlock_proto::v1 as pb;
use anyhow::{Context, bail};
use pb::agent_client::AgentClient;
use pb::run_event::Event;

use crate::Bench;
use crate::daemon::{Airlockd, AuthChannel};
use crate::fixtures::READ_FILE;
use crate::report::{Check, Report};
use crate::runs::RunStream;
use crate::stats::Samples;

const SECTION: &str = "15 long runs";

/// The daemons' ceilings, raised so one run may take its thousand steps.
const LONG_RUNS: &str = "[runs]\nmax_steps = 5000\nmax_tool_calls = 5000\nmax_idle_steps = 5000\n\
    max_repeated_calls = 5000\nwall_time_ms = 3600000\n";

/// The directory of the workspace the run reads, one file per step.
const FILES_DIR: &str = "long-run";

/// Bytes of each file read: a small source file.
const FILE_BYTES: usize = 1024;

/// The runs' context budgets, in tokens, each with its name in the report: the daemon's
/// default (100,000: the prompt grows to it over the first few hundred steps, then compaction
/// holds it there), and about what ten steps' reads make (the prompt is held at one size from
/// the early window on, so a late step differs from an early one only by the history behind
/// it).
const BUDGETS: [(u64, &str); 2] = [(0, "default"), (4_000, "4k")];

/// How much slower a late step may be than an early one (issue 54).
const MAX_LATE_SLOWDOWN: f64 = 1.5;

/// How much more the store may grow per step late in a run than early in it: bounded growth
/// per step means the same amount whatever the step.
const MAX_GROWTH_RATIO: f64 = 1.5;

pub async fn run(bench: &Bench, report: &mut Report) -> anyhow::Result<()> {
    let steps = u32::try_from(bench.count(1000, 120))?;
    let workspace = bench.fixtures.workspace_root.join("long");
    write_files(&workspace, steps)?;
    for (budget, name) in BUDGETS {
        measure(bench, report, &workspace, steps, budget, name).await?;
    }
    Ok(())
}

/// The section's rows, targets and growth table for runs under one context budget.
async fn measure(
    bench: &Bench,
    report: &mut Report,
    workspace: &Path,
    steps: u32,
    budget: u64,
    name: &str,
) -> anyhow::Result<()> {
    let rounds = bench.count(3, 1);
    let budget_words = match budget {
        0 => "the default context budget".to_owned(),
        tokens => format!("a context budget of {tokens} tokens"),
    };

    let early = (steps / 100, steps * 6 / 100);
    let late = (steps - steps / 20, steps);
    let tenth = steps / 10;
    // The daemon keeps its store to itself (SQLite's exclusive locking), so its pages are
    // read once it stopped: of a store with no run, one with a run of a tenth of the steps,
    // and one with the whole run (the first round's).
    let empty = measured_store(bench, workspace, budget, None).await?.2;
    let short = measured_store(bench, workspace, budget, Some(tenth))
        .await?
        .2;
    let (mut early_steps, mut late_steps) = (Samples::default(), Samples::default());
    let (mut whole, mut prompts) = (None, None);
    for round in 1..=rounds {
        eprintln!(
            "{SECTION}: run {round} of {rounds}, {steps} steps of `read_file` under {budget_words}"
        );
        let (started, prompt, pages) =
            measured_store(bench, workspace, budget, Some(steps)).await?;
        early_steps.append(Samples::sequential(vec![per_step(&started, early)?]));
        late_steps.append(Samples::sequential(vec![per_step(&started, late)?]));
        whole.get_or_insert(pages);
        prompts.get_or_insert((mean(&prompt, early), mean(&prompt, late)));
    }
    let (early_prompt, late_prompt) = prompts.context("no run was measured")?;
    let whole = whole.context("no run was measured")?;
    let (first, rest) = (diff(&short, &empty), diff(&whole, &short));

    let early_key = &format!("long-{name}-early");
    let late_key = &format!("long-{name}-late");
    report.measured(
        SECTION,
        early_key,
        &format!(
            "per step of a {steps}-step `read_file` run under {budget_words}, steps {}–{} \
             (median of {rounds} runs)",
            early.0, early.1
        ),
        early_steps,
    );
    report.measured(
        SECTION,
        late_key,
        &format!("… the same runs, steps {}–{}", late.0, late.1),
        late_steps,
    );
    report.compare(late_key, early_key);
    report.note(
        early_key,
        &format!("prompt {early_prompt:.0} tokens on average"),
    );
    report.note(
        late_key,
        &format!("prompt {late_prompt:.0} tokens on average"),
    );
    report.target(
        &format!("a step late in a long run ≤ {MAX_LATE_SLOWDOWN}× an early one, {budget_words}"),
        Check::Ratio {
            ours: late_key.into(),
            peer: early_key.into(),
            max: MAX_LATE_SLOWDOWN,
        },
    );

    // What the store grew by per table, over the first tenth of the steps and the rest.
    let first_steps = f64::from(tenth);
    let rest_steps = f64::from(steps - tenth);
    let mut table = String::from(
        "| table | grew per step, steps 1–{t} | per step, steps {t}–{s} | over the run |\n\
         | --- | ---: | ---: | ---: |\n",
    )
    .replace("{t}", &tenth.to_string())
    .replace("{s}", &steps.to_string());
    let names: BTreeSet<&String> = first.keys().chain(rest.keys()).collect();
    let (mut first_total, mut rest_total) = (0i64, 0i64);
    for name in names {
        let (a, b) = (
            first.get(name).copied().unwrap_or(0),
            rest.get(name).copied().unwrap_or(0),
        );
        first_total += a;
        rest_total += b;
        if a == 0 && b == 0 {
            continue;
        }
        table.push_str(&format!(
            "| {name} | {} | {} | {} |\n",
            bytes(a as f64 / first_steps),
            bytes(b as f64 / rest_steps),
            bytes((a + b) as f64)
        ));
    }
    let first_rate = first_total as f64 / first_steps;
    let rest_rate = rest_total as f64 / rest_steps;
    table.push_str(&format!(
        "| **every table** | {} | {} | {} |\n",
        bytes(first_rate),
        bytes(rest_rate),
        bytes((first_total + rest_total) as f64)
    ));
    eprintln!("{table}");
    report.table(&format!(
        "Section {SECTION}: what the store (SQLite, `dbstat` pages) grew by per step of a \
         {steps}-step run under {budget_words}\n\n{table}"
    ));
    let ratio = rest_rate / first_rate.max(1.0);
    report.target(
        &format!(
            "the store grows by a bounded amount per step, {budget_words}: steps \
             {tenth}–{steps} ≤ {MAX_GROWTH_RATIO}× steps 1–{tenth}"
        ),
        Check::Verdict {
            met: ratio <= MAX_GROWTH_RATIO,
            measured: format!(
                "{} against {} ({ratio:.2}×)",
                bytes(rest_rate),
                bytes(first_rate)
            ),
        },
    );
    Ok(())
}

/// A fresh daemon that ran a run of `steps` steps (none: no run) and stopped: when each of
/// the run's steps started, the prompt's tokens at each, and its store's pages per table.
async fn measured_store(
    bench: &Bench,
    workspace: &Path,
    budget: u64,
    steps: Option<u32>,
) -> anyhow::Result<(Vec<Option<i64>>, Vec<u64>, BTreeMap<String, i64>)> {
    let mut spec = bench.daemon_spec("long-")?;
    spec.config_tables = LONG_RUNS.to_owned();
    let store = spec.state_dir.join("airlock.db");
    let daemon = Airlockd::start(&spec).await?;
    let (mut started, mut prompt) = (Vec::new(), Vec::new());
    if let Some(steps) = steps {
        prompt = vec![0; steps as usize + 1];
        let mut step_index = 0;
        let channel = daemon.channel().await?;
        let mut stream = RunStream::open(channel.clone(), start(workspace, steps, budget)).await?;
        loop {
            let Some(event) = stream.next().await? else {
                bail!("the run's stream ended before the run finished");
            };
            match event.event {
                Some(Event::StepStarted(step)) => {
                    step_index = usize::try_from(step.index)?;
                }
                Some(Event::ContextBuilt(built)) => {
                    if let Some(slot) = prompt.get_mut(step_index) {
                        *slot = built.tokens;
                    }
                }
                Some(Event::RunFinished(finished)) => {
                    if finished.reason != pb::StopReason::Final as i32 || finished.steps != steps {
                        bail!("the run did not end as scripted after {steps} steps: {finished:?}");
                    }
                    let run_id = event.run_id;
                    started = step_starts(&channel, &run_id, steps).await?;
                    break;
                }
                _ => {}
            }
        }
    }
    daemon.stop().await?;
    Ok((started, prompt, table_pages(&store)?))
}

/// The run: `steps - 1` calls of `read_file`, each of its own file, then the answer.
fn start(workspace: &Path, steps: u32, context_tokens: u64) -> pb::StartRun {
    let mut turns: Vec<serde_json::Value> = (1..steps)
        .map(|step| {
            serde_json::json!({"tool_calls": [{
                "name": READ_FILE,
                "arguments": {"path": file_name(step)},
            }]})
        })
        .collect();
    turns.push(serde_json::json!({"final": "done"}));
    pb::StartRun {
        workspace: workspace.to_string_lossy().into_owned(),
        input: "read every file of the long-run directory".into(),
        model: Some(pb::ModelConfig {
            model: "scripted".into(),
            script: serde_json::json!({ "turns": turns }).to_string(),
            ..Default::default()
        }),
        tools: vec![READ_FILE.to_owned()],
        approval_policy: pb::ApprovalPolicy::Auto as i32,
        budgets: Some(pb::Budgets {
            max_steps: steps,
            max_tool_calls: steps,
            max_repeated_calls: steps,
            max_idle_steps: steps,
            context_tokens,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn file_name(step: u32) -> String {
    format!("{FILES_DIR}/file_{step:05}.txt")
}

/// One file per step, each of [`FILE_BYTES`] with its own first line.
fn write_files(workspace: &Path, steps: u32) -> anyhow::Result<()> {
    std::fs::create_dir_all(workspace.join(FILES_DIR))?;
    let filler = "Lines of a file the long run reads, one of many alike.\n";
    for step in 1..steps {
        let mut text = format!("file {step} of the long run\n");
        while text.len() + filler.len() <= FILE_BYTES {
            text.push_str(filler);
        }
        std::fs::write(workspace.join(file_name(step)), text)?;
    }
    Ok(())
}

/// When each step of the run started, as its trace has it (index 0 unused): the daemon's
/// own clock, not when the client read an event, which a burst of delivery would move.
async fn step_starts(
    channel: &AuthChannel,
    run_id: &str,
    steps: u32,
) -> anyhow::Result<Vec<Option<i64>>> {
    let trace = AgentClient::new(channel.clone())
        .get_trace(pb::GetTraceRequest {
            run_id: run_id.to_owned(),
        })
        .await?
        .into_inner();
    let mut starts: Vec<i64> = trace
        .spans
        .iter()
        .filter(|span| span.name == "step")
        .map(|span| span.start_unix_nano)
        .collect();
    starts.sort_unstable();
    if starts.len() != steps as usize {
        bail!("the run's trace has {} steps, not {steps}", starts.len());
    }
    Ok(std::iter::once(None)
        .chain(starts.into_iter().map(Some))
        .collect())
}

/// The time per step from the start of step `from` to the start of step `to`.
fn per_step(started: &[Option<i64>], (from, to): (u32, u32)) -> anyhow::Result<Duration> {
    let at = |step: u32| {
        started
            .get(step as usize)
            .copied()
            .flatten()
            .with_context(|| format!("step {step} has no start"))
    };
    let nanos = u64::try_from(at(to)? - at(from)?)?;
    Ok(Duration::from_nanos(nanos) / (to - from).max(1))
}

/// The mean of `values` over the steps of a window.
fn mean(values: &[u64], (from, to): (u32, u32)) -> f64 {
    let window = values.get(from as usize..=to as usize).unwrap_or_default();
    window.iter().sum::<u64>() as f64 / window.len().max(1) as f64
}

/// Bytes of pages per table (its indexes counted with it), as a reader of the store sees it.
fn table_pages(store: &Path) -> anyhow::Result<BTreeMap<String, i64>> {
    let db = rusqlite::Connection::open_with_flags(
        store,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("cannot open {}", store.display()))?;
    let mut statement = db.prepare(
        "SELECT COALESCE(m.tbl_name, d.name), SUM(d.pgsize) FROM dbstat AS d \
         LEFT JOIN sqlite_master AS m ON m.name = d.name GROUP BY 1",
    )?;
    let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn diff(after: &BTreeMap<String, i64>, before: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    after
        .iter()
        .map(|(name, size)| (name.clone(), size - before.get(name).copied().unwrap_or(0)))
        .collect()
}

fn bytes(value: f64) -> String {
    match value.abs() {
        v if v >= 1024.0 * 1024.0 => format!("{:.1} MiB", value / (1024.0 * 1024.0)),
        v if v >= 1024.0 => format!("{:.1} KiB", value / 1024.0),
        _ => format!("{value:.0} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_step_reads_its_own_file_then_the_run_answers() {
        let start = start(Path::new("/w"), 4, 0);
        let script: serde_json::Value =
            serde_json::from_str(&start.model.expect("a model").script).expect("JSON");
        let turns = script["turns"].as_array().expect("turns");
        assert_eq!(turns.len(), 4);
        assert_eq!(
            turns[0]["tool_calls"][0]["arguments"]["path"],
            "long-run/file_00001.txt"
        );
        assert_eq!(
            turns[2]["tool_calls"][0]["arguments"]["path"],
            "long-run/file_00003.txt"
        );
        assert_eq!(turns[3]["final"], "done");
    }

    #[test]
    fn a_window_is_timed_from_its_first_steps_start_to_its_last() {
        // Nanoseconds since the epoch, as a span's start is.
        let started = vec![None, Some(1_000_000), Some(3_000_000), Some(7_000_000)];
        assert_eq!(
            per_step(&started, (1, 3)).unwrap(),
            Duration::from_millis(3)
        );
        assert!(per_step(&started, (0, 3)).is_err());
    }
}
