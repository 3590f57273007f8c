//! Section 9, cassettes (issue 19): what keeping every model exchange costs a step, and what
//! a replayed step costs beside a scripted one.
//!
//! Section 3's run (24 calls of the no-op tool, then an answer, the scripted model) on a
//! daemon that keeps each model call's exchange with its run (the default) and on one with
//! `[runs] keep_exchanges = false`, run for run in turn; then the cassette of one of the
//! first daemon's runs replayed on it (each call's request rebuilt and compared with the
//! recorded one before the recorded answer is read). Timed per step as section 3 does, each
//! stage's median read from the runs' traces.

use airlock_proto::v1 as pb;
use anyhow::Context;
use pb::agent_client::AgentClient;

use crate::Bench;
use crate::agent_loop::{Side, steps_in_turn};
use crate::daemon::Airlockd;
use crate::fixtures::ECHO;
use crate::report::Report;
use crate::runs::{self, RunStream};

const SECTION: &str = "9 cassettes";

pub async fn run(bench: &Bench, report: &mut Report) -> anyhow::Result<()> {
    let tool_steps = u32::try_from(bench.count(24, 2))?;
    let step_runs = bench.count(20, 1);
    let kept = Airlockd::start(&bench.daemon_spec("exchanges-kept-")?).await?;
    let mut spec = bench.daemon_spec("exchanges-off-")?;
    spec.config_tables = "[runs]\nkeep_exchanges = false\n".to_owned();
    let off = Airlockd::start(&spec).await?;

    let scripted = runs::start(
        &bench.fixtures.workspace,
        ECHO,
        tool_steps,
        pb::ApprovalPolicy::Auto,
    );
    // One unmeasured run on each daemon warms it; the kept one's is the cassette replayed.
    let kept_channel = kept.channel().await?;
    let recorded = RunStream::open(kept_channel.clone(), scripted.clone())
        .await?
        .follow(tool_steps + 1)
        .await?;
    RunStream::open(off.channel().await?, scripted.clone())
        .await?
        .follow(tool_steps + 1)
        .await?;
    let cassette = AgentClient::new(kept_channel.clone())
        .get_cassette(pb::GetCassetteRequest {
            run_id: recorded.run_id.clone(),
        })
        .await
        .context("the recorded run has no cassette")?
        .into_inner();
    let replay = pb::StartRun {
        model: Some(pb::ModelConfig {
            model: "replay".into(),
            cassette: cassette.cassette,
            ..Default::default()
        }),
        ..scripted.clone()
    };

    eprintln!(
        "{SECTION}: per step with exchanges kept, not kept, and replayed, {step_runs} runs each"
    );
    let replayed_bytes = replay
        .model
        .as_ref()
        .map_or(0, |model| model.cassette.len());
    let sides = [
        Side {
            key: "kept",
            case: "per step, scripted model + no-op tool, exchanges kept (the default)",
            channel: kept_channel.clone(),
            start: scripted.clone(),
        },
        Side {
            key: "not-kept",
            case: "per step, scripted model + no-op tool, [runs] keep_exchanges = false",
            channel: off.channel().await?,
            start: scripted,
        },
        Side {
            key: "replayed",
            case: "per step, the kept run's cassette replayed + no-op tool",
            channel: kept_channel,
            start: replay,
        },
    ];
    steps_in_turn(report, SECTION, &sides, step_runs, tool_steps).await?;
    report.note(
        "kept",
        &format!(
            "cassette of one run: {} exchanges, {} bytes",
            cassette.exchanges, replayed_bytes
        ),
    );
    report.compare("kept", "not-kept");
    report.compare("replayed", "kept");

    kept.stop().await?;
    off.stop().await
}
