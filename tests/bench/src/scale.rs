//! Section 4, scale: N runs at once, each stopped at an approval nobody answers yet. It
//! measures the daemon's resident memory per waiting run (its own process, so the client's
//! memory is not counted) and the per-step latency of another run, which must go on while
//! they wait. Then every waiting run is approved and must finish as scripted.
//!
//! Once they have finished, the other run's steps are measured again the same way: the
//! store still holds every run, the daemon waits on none, which separates what the waiting
//! runs cost another run from what a store that many runs larger does.
//!
//! Then it does the same with a hundred hosted MCP instances alive (`mcp_instances.rs`).
//!
//! A fresh daemon serves this section alone, so its memory is not that of earlier sections.
//! A second one, as fresh, serves nothing else: the other run's steps are measured on both
//! in alternating rounds, so that the ratio with and without the load does not follow the
//! machine's drift over the seconds a level takes.

use std::time::{Duration, Instant};

use crate::daemon::AuthChannel;
use airlock_proto::v1 as pb;
use anyhow::Context;
use futures::future::try_join_all;

use crate::Bench;
use crate::daemon::Airlockd;
use crate::fixtures::{ECHO, ECHO_WRITE};
use crate::report::{Check, Report};
use crate::runs::{self, RunStream};
use crate::stats::Samples;

pub(crate) const SECTION: &str = "4 scale";

/// Runs sharing one HTTP/2 connection: clients spread over connections as separate
/// clients would, and well under servers' default stream limits (hyper's is 200).
pub(crate) const RUNS_PER_CONNECTION: usize = 50;

/// What a run waiting on an approval may cost in the daemon's resident memory.
const MAX_BYTES_PER_WAITING_RUN: u64 = 100 * 1024;

/// How long the daemon is given to settle after the last run starts waiting, before its
/// memory is read: the last events are being written.
const SETTLE: Duration = Duration::from_millis(300);

/// How long the daemon may take to finish what the approved runs left behind before the
/// rounds after them start anyway (and say so).
const SETTLE_LONGEST: Duration = Duration::from_secs(60);

/// Rounds of the probe, alternating between the loaded daemon and the idle one.
pub(crate) const ROUNDS: usize = 6;

/// How much slower another run's step may be with the most runs waiting (issue 54), on the
/// medians of the alternating rounds.
const MAX_SLOWDOWN: f64 = 1.1;

pub async fn run(bench: &Bench, report: &mut Report) -> anyhow::Result<()> {
    let levels: Vec<usize> = if bench.smoke {
        vec![3]
    } else {
        bench.scale_levels.clone()
    };
    let probe_steps = u32::try_from(bench.count(24, 2))?;
    let probe_runs = bench.count(5, 1);
    let daemon = Airlockd::start(&bench.daemon_spec("scale-")?).await?;
    let channel = daemon.channel().await?;
    let idle_daemon = Airlockd::start(&bench.daemon_spec("scale-idle-")?).await?;
    let idle_channel = idle_daemon.channel().await?;
    probe(bench, &idle_channel, probe_steps, 1).await?;

    eprintln!("{SECTION}: probe with nothing waiting");
    probe(bench, &channel, probe_steps, 1).await?;
    let idle = probe(bench, &channel, probe_steps, probe_runs).await?;
    report.measured(
        SECTION,
        "probe-0",
        "per step of another run, 0 runs waiting",
        idle,
    );
    report.note(
        "probe-0",
        &format!("daemon RSS {}", mib(daemon.rss_bytes()?)),
    );

    let mut largest = None;
    for &waiting in &levels {
        eprintln!("{SECTION}: {waiting} runs waiting on an approval");
        let before = daemon.rss_bytes()?;
        let started = Instant::now();
        let mut connections = Vec::new();
        for _ in 0..waiting.div_ceil(RUNS_PER_CONNECTION) {
            connections.push(daemon.channel().await?);
        }
        let opened = try_join_all((0..waiting).map(|index| {
            let channel = connections[index / RUNS_PER_CONNECTION].clone();
            let start = runs::start(
                &bench.fixtures.workspace,
                ECHO_WRITE,
                1,
                pb::ApprovalPolicy::Risky,
            );
            async move {
                let mut stream = RunStream::open(channel, start).await?;
                let request = stream.until_approval().await?;
                anyhow::Ok((stream, request))
            }
        }))
        .await
        .with_context(|| format!("starting {waiting} waiting runs"))?;
        let ramp = started.elapsed();
        tokio::time::sleep(SETTLE).await;
        let after = daemon.rss_bytes()?;
        let per_run = after.saturating_sub(before) / waiting as u64;

        let key = format!("probe-{waiting}");
        let (loaded, unloaded) =
            alternating(bench, &channel, &idle_channel, probe_steps, probe_runs).await?;
        report.measured(
            SECTION,
            &key,
            &format!("per step of another run, {waiting} runs waiting"),
            loaded,
        );
        let idle_key = format!("probe-idle-{waiting}");
        report.measured(
            SECTION,
            &idle_key,
            "… the same run's step on an idle daemon, in rounds alternating with it",
            unloaded,
        );
        report.compare(&key, &idle_key);
        report.note(
            &key,
            &format!(
                "daemon RSS {} (+{} = {:.1} KiB per waiting run); all {waiting} waiting after {:.2} s",
                mib(after),
                mib(after.saturating_sub(before)),
                per_run as f64 / 1024.0,
                ramp.as_secs_f64()
            ),
        );
        report.compare(&key, "probe-0");

        try_join_all(opened.into_iter().map(|(stream, request)| async move {
            stream.approve(&request)?;
            stream.follow(2).await
        }))
        .await
        .with_context(|| format!("finishing {waiting} approved runs"))?;
        // The same rounds once the load has finished: the store still holds its runs, the
        // daemon no longer waits on them. What is left of the slowdown here is the store's
        // size; what went with the runs was theirs.
        let after_key = format!("probe-after-{waiting}");
        let idle_after_key = format!("probe-idle-after-{waiting}");
        // Each finished run's last checkpoint is written after its end is told.
        let settled = daemon.settle(SETTLE_LONGEST).await?;
        let (loaded, unloaded) =
            alternating(bench, &channel, &idle_channel, probe_steps, probe_runs).await?;
        report.measured(
            SECTION,
            &after_key,
            &format!("per step of another run, the {waiting} runs finished (the store keeps them)"),
            loaded,
        );
        report.measured(
            SECTION,
            &idle_after_key,
            "… the same run's step on the idle daemon, in rounds alternating with it",
            unloaded,
        );
        if !settled {
            report.note(
                &after_key,
                &format!(
                    "the daemon was still busy after {} s",
                    SETTLE_LONGEST.as_secs()
                ),
            );
        }
        report.compare(&after_key, &idle_after_key);
        largest = Some((waiting, per_run));
    }
    if let Some((waiting, _)) = largest {
        report.target(
            &format!(
                "another run's step with {waiting} runs waiting ≤ {MAX_SLOWDOWN}× on an idle daemon"
            ),
            Check::Ratio {
                ours: format!("probe-{waiting}"),
                peer: format!("probe-idle-{waiting}"),
                max: MAX_SLOWDOWN,
            },
        );
    }

    let (met, measured) = match largest {
        Some((waiting, per_run)) => (
            waiting >= 10_000 && per_run <= MAX_BYTES_PER_WAITING_RUN,
            format!(
                "{waiting} runs waited and then finished; {:.1} KiB RSS per waiting run",
                per_run as f64 / 1024.0
            ),
        ),
        None => (false, "no level measured".into()),
    };
    report.target(
        "ten thousand waiting runs on this 2-core machine, at most 100 KiB of memory each",
        Check::Verdict { met, measured },
    );
    idle_daemon.stop().await?;
    daemon.stop().await?;
    crate::mcp_instances::run(bench, report).await
}

/// The probe's rounds, alternating between the loaded daemon's `channel` and the idle one's:
/// each side's per-step latencies.
async fn alternating(
    bench: &Bench,
    channel: &AuthChannel,
    idle_channel: &AuthChannel,
    steps: u32,
    runs: usize,
) -> anyhow::Result<(Samples, Samples)> {
    let (mut loaded, mut unloaded) = (Samples::default(), Samples::default());
    for _ in 0..bench.count(ROUNDS, 1) {
        loaded.append(probe(bench, channel, steps, runs).await?);
        unloaded.append(probe(bench, idle_channel, steps, runs).await?);
    }
    Ok((loaded, unloaded))
}

/// Per-step latencies of `runs` runs of the no-op tool under policy auto, one at a time.
pub(crate) async fn probe(
    bench: &Bench,
    channel: &AuthChannel,
    steps: u32,
    runs: usize,
) -> anyhow::Result<Samples> {
    let mut latencies = Vec::new();
    let mut wall = Duration::ZERO;
    for _ in 0..runs {
        let start = runs::start(
            &bench.fixtures.workspace,
            ECHO,
            steps,
            pb::ApprovalPolicy::Auto,
        );
        let times = RunStream::open(channel.clone(), start)
            .await?
            .follow(steps + 1)
            .await?;
        wall += times.finished.duration_since(times.opened);
        latencies.extend(std::iter::repeat_n(times.per_step(), times.steps as usize));
    }
    Ok(Samples::new(latencies, wall))
}

pub(crate) fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}
