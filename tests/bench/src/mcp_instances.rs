//! Section 4's hosted MCP instances: a hundred instances of one hosted server alive at once,
//! one per workspace, as a hundred people's sessions start them (`engine/mcp/host.rs` keys
//! an instance by tenant and workspace). It reports what an instance costs — in the daemon's
//! resident memory, and in its own sandboxed processes' proportional memory — and measures
//! another run's step with them alive against the same run's step on a daemon hosting none,
//! in alternating rounds, as the waiting runs' levels do.
//!
//! Alive means started and idle: a hundred servers busy at once on two cores would measure
//! the cores, not the daemon. The daemon's processes are listed after the rounds and again
//! after every instance is called once more, so that an instance reaped or restarted
//! meanwhile fails the case rather than flattering it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use airlock_proto::v1::tools_client::ToolsClient;
use anyhow::Context;
use futures::{StreamExt as _, TryStreamExt as _};

use crate::Bench;
use crate::client;
use crate::daemon::{Airlockd, DaemonSpec};
use crate::mcp_call::{self, NOT_INSTALLED};
use crate::report::{Check, Report};
use crate::scale::{self, ROUNDS, SECTION};
use crate::stats::Samples;

/// Instances alive at once (issue 54).
const INSTANCES: usize = 100;

/// Instances started at a time: each is a Python interpreter importing the SDK, a few
/// hundred milliseconds of one core, so more at once would only queue on two cores.
const STARTS_AT_ONCE: usize = 4;

/// How long the daemon is given after the last start before its memory is read: the last
/// calls' events are being written.
const SETTLE: Duration = Duration::from_millis(300);

/// How much slower another run's step may be with the instances alive (issue 54), on the
/// alternating rounds.
const MAX_SLOWDOWN: f64 = 1.1;

/// The hosted server's tool, as the daemon serves it.
const TOOL: &str = "echo__echo";

pub async fn run(bench: &Bench, report: &mut Report) -> anyhow::Result<()> {
    let instances = bench.count(INSTANCES, 3);
    let (key, idle_key) = ("probe-mcp", "probe-mcp-idle");
    let case = format!("per step of another run, {instances} hosted MCP instances alive");
    let idle_case = "… the same run's step on a daemon hosting none, in rounds alternating with it";
    let Some(server) = mcp_call::install(bench)? else {
        report.skipped(SECTION, key, &case, NOT_INSTALLED);
        report.skipped(SECTION, idle_key, idle_case, NOT_INSTALLED);
        return Ok(());
    };
    let spec = |prefix: &str| -> anyhow::Result<DaemonSpec> {
        Ok(DaemonSpec {
            tools_dirs: vec![bench.fixtures.tools_dir.clone(), server.tools_dir.clone()],
            profiles_dir: server.profiles_dir.clone(),
            ..bench.daemon_spec(prefix)?
        })
    };
    let daemon = Airlockd::start(&spec("scale-mcp-")?).await?;
    let channel = daemon.channel().await?;
    let idle_daemon = Airlockd::start(&spec("scale-mcp-idle-")?).await?;
    let idle_channel = idle_daemon.channel().await?;
    let probe_steps = u32::try_from(bench.count(24, 2))?;
    let probe_runs = bench.count(5, 1);
    scale::probe(bench, &idle_channel, probe_steps, 1).await?;
    scale::probe(bench, &channel, probe_steps, 1).await?;

    let workspaces = (0..instances)
        .map(|index| {
            let dir = bench
                .fixtures
                .workspace_root
                .join(format!("mcp-instance-{index:03}"));
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            Ok(dir)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;

    eprintln!("{SECTION}: {instances} hosted MCP instances, {STARTS_AT_ONCE} started at a time");
    let rss_before = daemon.rss_bytes()?;
    let before = daemon.descendants()?;
    let started = Instant::now();
    call_each(&daemon, &workspaces, STARTS_AT_ONCE).await?;
    let ramp = started.elapsed();
    tokio::time::sleep(SETTLE).await;
    let rss_after = daemon.rss_bytes()?;
    let alive = daemon.descendants()?;

    let (mut loaded, mut unloaded) = (Samples::default(), Samples::default());
    for _ in 0..bench.count(ROUNDS, 1) {
        loaded.append(scale::probe(bench, &channel, probe_steps, probe_runs).await?);
        unloaded.append(scale::probe(bench, &idle_channel, probe_steps, probe_runs).await?);
    }
    // The same processes after the rounds (none reaped), and after a call in each
    // workspace again (each served by the instance it had, none started anew).
    let after_rounds = daemon.descendants()?.pids;
    call_each(&daemon, &workspaces, instances).await?;
    let after_calls = daemon.descendants()?.pids;
    anyhow::ensure!(
        after_rounds == alive.pids && after_calls == alive.pids,
        "the instances did not stay alive while measured: of the {} processes under the \
         daemon, {} were gone after the rounds and {} after the calls",
        alive.pids.len(),
        alive.pids.difference(&after_rounds).count(),
        alive.pids.difference(&after_calls).count()
    );

    report.measured(SECTION, key, &case, loaded);
    report.measured(SECTION, idle_key, idle_case, unloaded);
    report.compare(key, idle_key);
    let per_instance = |bytes: u64| bytes as f64 / 1024.0 / instances as f64;
    let daemon_growth = rss_after.saturating_sub(rss_before);
    let servers = alive.pss_bytes.saturating_sub(before.pss_bytes);
    report.note(
        key,
        &format!(
            "daemon RSS {} (+{} = {:.1} KiB per instance); the instances' processes {} PSS \
             ({:.1} MiB per instance, {} processes); all {instances} started after {:.2} s",
            scale::mib(rss_after),
            scale::mib(daemon_growth),
            per_instance(daemon_growth),
            scale::mib(servers),
            per_instance(servers) / 1024.0,
            alive.pids.len().saturating_sub(before.pids.len()),
            ramp.as_secs_f64()
        ),
    );
    report.target(
        &format!(
            "another run's step with {instances} hosted MCP instances alive ≤ {MAX_SLOWDOWN}× on \
             a daemon hosting none"
        ),
        Check::Ratio {
            ours: key.into(),
            peer: idle_key.into(),
            max: MAX_SLOWDOWN,
        },
    );
    idle_daemon.stop().await?;
    daemon.stop().await
}

/// Calls the hosted echo once in each workspace, `at_once` calls at a time, over
/// connections of at most [`scale::RUNS_PER_CONNECTION`] calls each.
async fn call_each(
    daemon: &Airlockd,
    workspaces: &[PathBuf],
    at_once: usize,
) -> anyhow::Result<()> {
    let mut connections = Vec::new();
    for _ in 0..workspaces.len().div_ceil(scale::RUNS_PER_CONNECTION) {
        connections.push(daemon.channel().await?);
    }
    futures::stream::iter(workspaces.iter().enumerate())
        .map(|(index, workspace)| {
            let channel = connections[index / scale::RUNS_PER_CONNECTION].clone();
            async move {
                client::execute(
                    &mut ToolsClient::new(channel),
                    TOOL,
                    r#"{"text": "ping"}"#,
                    Some(workspace),
                    "ping",
                )
                .await
                .with_context(|| format!("calling {TOOL} in {}", workspace.display()))
            }
        })
        .buffer_unordered(at_once)
        .try_collect()
        .await
}
