//! Section 3, the agent loop's overhead: runs of the scripted model calling the no-op tool,
//! each timed from the client's start request to the run's last event and divided by its
//! steps (one figure per run, counted once per step in the table). Policy `auto` runs each
//! call at once; policy `risky` with a `write` tool asks first, and this client approves as
//! soon as it is asked, so the difference is the approval round trip (recorded, streamed,
//! answered).
//!
//! A step includes the model (scripted: no wait), validation, the permission gate, the no-op
//! call, and recording every event in the run's store before streaming it. What the loop
//! itself costs is read from the runs' own traces: each tool step's span less its tool
//! span. And 16 runs step at once, for the loop's throughput.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use airlock_proto::v1 as pb;
use anyhow::Context;
use futures::future::try_join_all;

use crate::Bench;
use crate::daemon::{Airlockd, AuthChannel};
use crate::fixtures::{ECHO, ECHO_WRITE};
use crate::report::{Check, Report};
use crate::runs::{self, RunStream};
use crate::stats::Samples;

const SECTION: &str = "3 agent loop";

/// Runs stepping at once in the throughput case, each on its own connection.
const CONCURRENT_RUNS: usize = 16;

pub async fn run(bench: &Bench, daemon: &Airlockd, report: &mut Report) -> anyhow::Result<()> {
    let tool_steps = u32::try_from(bench.count(24, 2))?;
    let runs = bench.count(20, 1);
    let cases = [
        (
            "loop-auto",
            "per step, scripted model + no-op tool, policy auto",
            ECHO,
            pb::ApprovalPolicy::Auto,
        ),
        (
            "loop-risky",
            "per step, policy risky, approver answers at once",
            ECHO_WRITE,
            pb::ApprovalPolicy::Risky,
        ),
    ];
    let channel = daemon.channel().await?;
    for (key, case, tool, policy) in cases {
        eprintln!("{SECTION}: {case}");
        // One unmeasured run warms the store and the tool.
        let warm = runs::start(&bench.fixtures.workspace, tool, tool_steps, policy);
        RunStream::open(channel.clone(), warm)
            .await?
            .follow(tool_steps + 1)
            .await?;
        let mut latencies = Vec::new();
        let mut overheads = Vec::new();
        let mut stages = Stages::default();
        let mut wall = Duration::ZERO;
        for _ in 0..runs {
            let start = runs::start(&bench.fixtures.workspace, tool, tool_steps, policy);
            let times = RunStream::open(channel.clone(), start)
                .await?
                .follow(tool_steps + 1)
                .await?;
            wall += times.finished.duration_since(times.opened);
            latencies.extend(std::iter::repeat_n(times.per_step(), times.steps as usize));
            if policy == pb::ApprovalPolicy::Auto {
                overheads.extend(loop_overheads(&channel, &times.run_id, &mut stages).await?);
            }
        }
        report.measured(SECTION, key, case, Samples::new(latencies, wall));
        if !overheads.is_empty() {
            report.measured(
                SECTION,
                "loop-overhead",
                "per tool step, the loop alone: step span less its tool span (auto)",
                Samples::sequential(overheads),
            );
            report.note("loop-overhead", &stages.medians());
        }
    }

    eprintln!("{SECTION}: {CONCURRENT_RUNS} runs stepping at once");
    let mut channels = Vec::new();
    for _ in 0..CONCURRENT_RUNS {
        channels.push(daemon.channel().await?);
    }
    let started = Instant::now();
    let all = try_join_all(channels.into_iter().map(|channel| {
        let start = runs::start(
            &bench.fixtures.workspace,
            ECHO,
            tool_steps,
            pb::ApprovalPolicy::Auto,
        );
        async move {
            RunStream::open(channel, start)
                .await?
                .follow(tool_steps + 1)
                .await
        }
    }))
    .await
    .context("the concurrent runs")?;
    let wall = started.elapsed();
    let latencies = all
        .iter()
        .flat_map(|times| std::iter::repeat_n(times.per_step(), times.steps as usize))
        .collect();
    report.measured(
        SECTION,
        "loop-16",
        &format!("per step, {CONCURRENT_RUNS} runs at once (policy auto)"),
        Samples::new(latencies, wall),
    );

    report.compare("loop-auto", "grpc-c1");
    report.target(
        "the loop's own cost per tool step (its span less its tool span, policy auto) ≤ 300 µs",
        Check::Latency {
            ours: "loop-overhead".into(),
            max: Duration::from_micros(300),
        },
    );
    report.target(
        "a whole step, the no-op call included, within 1.5× a bare ExecuteTool of that tool",
        Check::Ratio {
            ours: "loop-auto".into(),
            peer: "grpc-c1".into(),
            max: 1.5,
        },
    );
    report.target(
        "16 runs stepping at once: at least 5,000 steps a second in all",
        Check::Throughput {
            ours: "loop-16".into(),
            min: 5000.0,
        },
    );
    Ok(())
}

/// Where a tool step's time goes, from the runs' traces: each stage's span under the step
/// (context, model, validate, permission, tool), and what the step spends outside them
/// (recording, the checkpoint, handing the call over). Section 8 reads its steps the same way.
#[derive(Default)]
pub(crate) struct Stages(BTreeMap<String, Vec<Duration>>);

impl Stages {
    pub(crate) fn add(&mut self, stage: &str, time: Duration) {
        self.0.entry(stage.to_owned()).or_default().push(time);
    }

    /// Each stage's median, in the order of a step.
    fn medians(&self) -> String {
        self.medians_of(
            &[
                "context",
                "model",
                "validate",
                "permission",
                "tool",
                "outside the stages",
            ],
            "medians per tool step",
        )
    }

    /// The medians of the stages named in `order`, after `label`.
    pub(crate) fn medians_of(&self, order: &[&str], label: &str) -> String {
        let median = |times: &[Duration]| {
            let mut times = times.to_vec();
            times.sort();
            times[times.len() / 2]
        };
        let parts: Vec<String> = order
            .iter()
            .filter_map(|stage| {
                let times = self.0.get(*stage).filter(|times| !times.is_empty())?;
                Some(format!("{stage} {} µs", median(times).as_micros()))
            })
            .collect();
        format!("{label}: {}", parts.join(", "))
    }
}

/// A tool step of a run, from its trace: the step span's duration and each of the spans
/// directly under it, by name.
pub(crate) struct TracedStep {
    pub(crate) step: Duration,
    pub(crate) stages: Vec<(String, Duration)>,
}

/// The tool steps of run `run_id` (the last step answers and calls no tool: it is not one).
pub(crate) async fn tool_steps(
    channel: &AuthChannel,
    run_id: &str,
) -> anyhow::Result<Vec<TracedStep>> {
    let trace = pb::agent_client::AgentClient::new(channel.clone())
        .get_trace(pb::GetTraceRequest {
            run_id: run_id.to_owned(),
        })
        .await
        .context("the run's trace")?
        .into_inner();
    let duration = |span: &pb::Span| {
        Duration::from_nanos(
            u64::try_from(span.end_unix_nano.saturating_sub(span.start_unix_nano)).unwrap_or(0),
        )
    };
    Ok(trace
        .spans
        .iter()
        .filter(|span| span.name == "step")
        .map(|step| TracedStep {
            step: duration(step),
            stages: trace
                .spans
                .iter()
                .filter(|span| span.parent_span_id == step.span_id)
                .map(|span| (span.name.clone(), duration(span)))
                .collect(),
        })
        .filter(|step| step.stages.iter().any(|(name, _)| name == "tool"))
        .collect())
}

/// For each tool step of run `run_id`, the step span's duration less its tool span's: the
/// time the loop spends on a step besides running the tool. Adds each stage's time to
/// `stages`.
async fn loop_overheads(
    channel: &AuthChannel,
    run_id: &str,
    stages: &mut Stages,
) -> anyhow::Result<Vec<Duration>> {
    let mut overheads = Vec::new();
    for traced in tool_steps(channel, run_id).await? {
        let tool = traced
            .stages
            .iter()
            .find(|(name, _)| name == "tool")
            .map_or(Duration::ZERO, |(_, time)| *time);
        overheads.push(traced.step.saturating_sub(tool));
        let mut inside = Duration::ZERO;
        for (name, time) in &traced.stages {
            stages.add(name, *time);
            inside += *time;
        }
        stages.add("outside the stages", traced.step.saturating_sub(inside));
    }
    Ok(overheads)
}

/// Adds the tool steps of run `run_id` to `stages`: each step's whole span and each of its
/// stages' spans.
pub(crate) async fn add_steps(
    stages: &mut Stages,
    channel: &AuthChannel,
    run_id: &str,
) -> anyhow::Result<()> {
    for traced in tool_steps(channel, run_id).await? {
        stages.add("step", traced.step);
        for (name, time) in &traced.stages {
            stages.add(name, *time);
        }
    }
    Ok(())
}

/// One side of a comparison of whole runs: its report key and case, the daemon it runs on
/// and the run it starts.
pub(crate) struct Side {
    pub key: &'static str,
    pub case: &'static str,
    pub channel: AuthChannel,
    pub start: pb::StartRun,
}

/// Runs each side's run `runs` times, one run of each side in turn (so that a change in the
/// machine's load hits all alike), then reports each side's time per step with the medians
/// of its steps' stages from the runs' traces. The runs have `tool_steps` tool steps.
pub(crate) async fn steps_in_turn(
    report: &mut Report,
    section: &'static str,
    sides: &[Side],
    runs: usize,
    tool_steps: u32,
) -> anyhow::Result<()> {
    let mut per_step: Vec<Vec<Duration>> = vec![Vec::new(); sides.len()];
    let mut stages: Vec<Stages> = (0..sides.len()).map(|_| Stages::default()).collect();
    let mut wall = vec![Duration::ZERO; sides.len()];
    for _ in 0..runs {
        for (index, side) in sides.iter().enumerate() {
            let times = RunStream::open(side.channel.clone(), side.start.clone())
                .await?
                .follow(tool_steps + 1)
                .await?;
            wall[index] += times.finished.duration_since(times.opened);
            per_step[index].extend(std::iter::repeat_n(times.per_step(), times.steps as usize));
            add_steps(&mut stages[index], &side.channel, &times.run_id).await?;
        }
    }
    for (index, (side, latencies)) in sides.iter().zip(per_step).enumerate() {
        report.measured(
            section,
            side.key,
            side.case,
            Samples::new(latencies, wall[index]),
        );
        report.note(
            side.key,
            &stages[index].medians_of(
                &["step", "context", "model", "tool"],
                "medians per tool step (trace)",
            ),
        );
    }
    Ok(())
}
