//! Section 14, telemetry (issue 52): what metrics and the audit log cost a warm call and a
//! loop step. Two daemons serve the same tools: one as shipped (metrics recorded and served
//! on an endpoint of their own, every act in the audit log) and one with `[metrics] record =
//! false` and `[audit] enabled = false`, a fresh pair each round. Each round measures the
//! warm no-op call (section 1's) and section 3's run (seven times; each tool step's span read
//! from the trace) on both, in alternating order; the verdict is on the medians of the
//! rounds' medians, so one noisy round decides nothing.

use std::time::Duration;

use airlock_proto::v1 as pb;
use pb::tools_client::ToolsClient;

use crate::Bench;
use crate::agent_loop::tool_steps as tool_steps_of;
use crate::client;
use crate::daemon::Airlockd;
use crate::fixtures::ECHO;
use crate::report::{Check, Report};
use crate::runs::{self, RunStream};
use crate::stats::Samples;

const SECTION: &str = "14 telemetry";

/// Section 1's no-op call's arguments.
const ARGUMENTS: &str = "{}";

/// The largest slowdown the issue allows: 3 %.
const MAX_COST: f64 = 1.03;

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values.get(values.len() / 2).copied().unwrap_or_default()
}

pub async fn run(bench: &Bench, report: &mut Report) -> anyhow::Result<()> {
    let rounds = bench.count(10, 1);
    let calls = bench.count(1500, 20);
    let warmup = bench.count(50, 2);
    let tool_steps = u32::try_from(bench.count(24, 2))?;
    let runs_per_round = bench.count(7, 1);
    let start = runs::start(
        &bench.fixtures.workspace,
        ECHO,
        tool_steps,
        pb::ApprovalPolicy::Auto,
    );
    let labels = ["on", "off"];
    let mut call_samples = [Samples::default(), Samples::default()];
    let mut call_medians: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    let mut steps: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    let mut step_medians: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    let mut step_wall = [Duration::ZERO; 2];
    eprintln!(
        "{SECTION}: warm call and loop step, metrics and audit on and off, {rounds} alternating rounds"
    );
    for round in 0..rounds {
        // A fresh pair of daemons each round: a daemon's own luck (where its store and its
        // memory landed) moves a step by more than what is measured, and averages out over
        // pairs, not over rounds on one pair.
        let mut on_spec = bench.daemon_spec("telemetry-on-")?;
        // `AIRLOCK_BENCH_TELEMETRY_ON`: the on side's own tables instead.
        on_spec.config_tables = std::env::var("AIRLOCK_BENCH_TELEMETRY_ON").map_or_else(
            |_| "[metrics]\nlisten = \"127.0.0.1:0\"\n".to_owned(),
            |tables| tables.replace("\\n", "\n"),
        );
        let mut off_spec = bench.daemon_spec("telemetry-off-")?;
        // `AIRLOCK_BENCH_TELEMETRY_AA=1`: both sides on, to see what the comparison reads
        // when there is no difference to find (the A/A check of the figures' noise).
        // `AIRLOCK_BENCH_TELEMETRY_OFF`: the off side's own tables instead (one of the two
        // turned off, to tell their costs apart).
        off_spec.config_tables = if std::env::var_os("AIRLOCK_BENCH_TELEMETRY_AA").is_some() {
            on_spec.config_tables.clone()
        } else if let Ok(tables) = std::env::var("AIRLOCK_BENCH_TELEMETRY_OFF") {
            tables.replace("\\n", "\n")
        } else {
            "[metrics]\nrecord = false\n\n[audit]\nenabled = false\n".to_owned()
        };
        // Started in turn too: the daemon started first is faster in its round (by up to a
        // tenth, in the A/A check), whatever its settings.
        let (on, off) = if round % 2 == 0 {
            let on = Airlockd::start(&on_spec).await?;
            (on, Airlockd::start(&off_spec).await?)
        } else {
            let off = Airlockd::start(&off_spec).await?;
            (Airlockd::start(&on_spec).await?, off)
        };
        let daemons = [&on, &off];
        // Alternate which side goes first: a machine warming up or cooling down in a round
        // then favours neither.
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for index in order {
            let daemon = daemons[index];
            let samples = client::load(daemon, 1, warmup, calls, |channel| async move {
                client::execute(&mut ToolsClient::new(channel), ECHO, ARGUMENTS, None, "{}").await
            })
            .await?;
            call_medians[index].push(samples.p50());
            call_samples[index].append(samples);
            // Each tool step's span, from the runs' traces: the loop's own time per step, where
            // the metrics are recorded, without the run's start and end (a few fsyncs that
            // move a 24-step run's time per step by more than what is measured).
            let channel = daemon.channel().await?;
            let mut round_steps = Vec::new();
            for _ in 0..runs_per_round {
                let times = RunStream::open(channel.clone(), start.clone())
                    .await?
                    .follow(tool_steps + 1)
                    .await?;
                step_wall[index] += times.finished.duration_since(times.opened);
                for traced in tool_steps_of(&channel, &times.run_id).await? {
                    round_steps.push(traced.step);
                }
            }
            step_medians[index].push(median(round_steps.clone()));
            steps[index].extend(round_steps);
        }
    }
    for (index, label) in labels.iter().enumerate() {
        report.measured(
            SECTION,
            &format!("call-{label}"),
            &format!("ExecuteTool no-op wasm, c=1, metrics and audit {label}"),
            std::mem::take(&mut call_samples[index]),
        );
        report.measured(
            SECTION,
            &format!("step-{label}"),
            &format!("a tool step's span, scripted model + no-op tool, metrics and audit {label}"),
            Samples::new(steps[index].clone(), step_wall[index]),
        );
    }
    report.compare("call-on", "call-off");
    report.compare("step-on", "step-off");
    for (what, medians) in [("warm call", &call_medians), ("loop step", &step_medians)] {
        let (on_median, off_median) = (median(medians[0].clone()), median(medians[1].clone()));
        let cost = crate::report::cost(on_median, off_median);
        report.target(
            &format!("{what} with metrics and audit ≤ {MAX_COST}× without (medians of {rounds} rounds' medians)"),
            Check::Verdict {
                met: cost <= MAX_COST,
                measured: format!(
                    "{cost:.3}× ({} on, {} off)",
                    crate::stats::format_duration(on_median),
                    crate::stats::format_duration(off_median)
                ),
            },
        );
    }
    Ok(())
}
