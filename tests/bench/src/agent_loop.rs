//! Section 3, the agent loop's overhead: runs of the scripted model calling the no-op tool,
//! each timed from the client's start request to the run's last event and divided by its
//! steps (one figure per run, counted once per step in the table). Policy `auto` runs each call at once;
//! policy `risky` with a `write` tool asks first, and this client approves as soon as it is
//! asked, so the difference is the approval round trip (recorded, streamed, answered).
//!
//! A step includes the model (scripted: no wait), validation, the permission gate, the no-op
//! call, and recording every event in the run's store before streaming it.

use std::time::Duration;

use airlock_proto::v1 as pb;

use crate::Bench;
use crate::daemon::Airlockd;
use crate::fixtures::{ECHO, ECHO_WRITE};
use crate::report::{Check, Report};
use crate::runs::{self, RunStream};
use crate::stats::Samples;

const SECTION: &str = "3 agent loop";

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
        let mut wall = Duration::ZERO;
        for _ in 0..runs {
            let start = runs::start(&bench.fixtures.workspace, tool, tool_steps, policy);
            let times = RunStream::open(channel.clone(), start)
                .await?
                .follow(tool_steps + 1)
                .await?;
            wall += times.finished.duration_since(times.opened);
            latencies.extend(std::iter::repeat_n(times.per_step(), times.steps as usize));
        }
        report.measured(SECTION, key, case, Samples::new(latencies, wall));
    }
    report.compare("loop-auto", "grpc-c1");
    report.target(
        "per-step loop overhead (policy auto, incl. the no-op call) under 1 ms",
        Check::Latency {
            ours: "loop-auto".into(),
            max: Duration::from_millis(1),
        },
    );
    Ok(())
}
