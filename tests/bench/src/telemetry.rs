//! Section 14, telemetry (issue 52): what metrics and the audit log cost a warm call and a
//! loop step. Two daemons serve the same tools: one as shipped (metrics recorded and served
//! on an endpoint of their own, every act in the audit log) and one with `[metrics] record =
//! false` and `[audit] enabled = false`. Each round measures the warm no-op call (section 1's)
//! and section 3's run on both, in alternating order; the verdict is on the medians of the
//! rounds' medians, so one noisy round decides nothing.

use std::time::Duration;

use airlock_proto::v1 as pb;
use pb::tools_client::ToolsClient;

use crate::Bench;
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
    let rounds = bench.count(9, 1);
    let calls = bench.count(1500, 20);
    let warmup = bench.count(50, 2);
    let tool_steps = u32::try_from(bench.count(24, 2))?;
    let mut on_spec = bench.daemon_spec("telemetry-on-")?;
    on_spec.config_tables = "[metrics]\nlisten = \"127.0.0.1:0\"\n".to_owned();
    let on = Airlockd::start(&on_spec).await?;
    let mut off_spec = bench.daemon_spec("telemetry-off-")?;
    off_spec.config_tables = "[metrics]\nrecord = false\n\n[audit]\nenabled = false\n".to_owned();
    let off = Airlockd::start(&off_spec).await?;
    let start = runs::start(
        &bench.fixtures.workspace,
        ECHO,
        tool_steps,
        pb::ApprovalPolicy::Auto,
    );
    let daemons = [("on", &on), ("off", &off)];
    let mut call_samples = [Samples::default(), Samples::default()];
    let mut call_medians: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    let mut steps: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    let mut step_wall = [Duration::ZERO; 2];
    eprintln!(
        "{SECTION}: warm call and loop step, metrics and audit on and off, {rounds} alternating rounds"
    );
    for round in 0..rounds {
        // Alternate which side goes first: a machine warming up or cooling down in a round
        // then favours neither.
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for index in order {
            let (_, daemon) = daemons[index];
            let samples = client::load(daemon, 1, warmup, calls, |channel| async move {
                client::execute(&mut ToolsClient::new(channel), ECHO, ARGUMENTS, None, "{}").await
            })
            .await?;
            call_medians[index].push(samples.p50());
            call_samples[index].append(samples);
            let times = RunStream::open(daemon.channel().await?, start.clone())
                .await?
                .follow(tool_steps + 1)
                .await?;
            step_wall[index] += times.finished.duration_since(times.opened);
            steps[index].push(times.per_step());
        }
    }
    for (index, (label, _)) in daemons.iter().enumerate() {
        report.measured(
            SECTION,
            &format!("call-{label}"),
            &format!("ExecuteTool no-op wasm, c=1, metrics and audit {label}"),
            std::mem::take(&mut call_samples[index]),
        );
        report.measured(
            SECTION,
            &format!("step-{label}"),
            &format!("per step, scripted model + no-op tool, metrics and audit {label}"),
            Samples::new(steps[index].clone(), step_wall[index]),
        );
    }
    report.compare("call-on", "call-off");
    report.compare("step-on", "step-off");
    for (what, medians) in [("warm call", &call_medians), ("loop step", &steps)] {
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
