//! Section 12, a fleet on PostgreSQL: the agent loop's step and a warm call with the store on
//! PostgreSQL against the same on the embedded SQLite file, in the same run; how long an
//! event takes to reach a client of another daemon than the run's, against a client of the
//! run's own; how long a run waits for another daemon after its own is killed, against the
//! lease (the floor a takeover cannot beat); and runs per second spread over three daemons
//! against all on one.
//!
//! The PostgreSQL server is the one `AIRLOCK_TEST_POSTGRES` names (scripts/test.sh and
//! scripts/bench.sh start one on loopback); each case gets a fresh database.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use airlock_proto::v1 as pb;
use anyhow::Context;
use futures::future::try_join_all;
use pb::agent_client::AgentClient;
use pb::run_event::Event;
use pb::tools_client::ToolsClient;

use crate::Bench;
use crate::client;
use crate::daemon::{Airlockd, AuthChannel};
use crate::fixtures::ECHO;
use crate::report::{Check, Report};
use crate::runs::{self, RunStream};
use crate::stats::Samples;

const SECTION: &str = "12 fleet";

/// The lease of the takeover case: the production default, so the figure is the one an
/// operator sees.
const LEASE: Duration = Duration::from_secs(10);

/// How long the model of the live-views case thinks before each step after the first.
const MODEL_THINKS_MS: u64 = 20;

/// Runs started at once in the throughput case.
const CONCURRENT_RUNS: usize = 24;

pub async fn run(bench: &Bench, report: &mut Report) -> anyhow::Result<()> {
    if std::env::var_os("AIRLOCK_TEST_POSTGRES").is_none() {
        for (key, case) in [
            (
                "fleet-step-postgres",
                "agent loop step, store on PostgreSQL",
            ),
            (
                "fleet-takeover",
                "a run taken over after its daemon is killed",
            ),
        ] {
            report.skipped(
                SECTION,
                key,
                case,
                "no PostgreSQL server: AIRLOCK_TEST_POSTGRES is unset (scripts/bench.sh starts one)",
            );
        }
        return Ok(());
    }
    store_costs(bench, report).await?;
    views(bench, report).await?;
    takeover(bench, report).await?;
    spread(bench, report).await
}

/// `[store]` of a daemon on a fresh database (or the SQLite file when `database` is none).
fn store_table(database: Option<&str>, lease: Duration) -> String {
    database.map_or_else(String::new, |url| {
        format!(
            "[store]\nurl = \"{url}\"\nlease_ms = {}\n",
            lease.as_millis()
        )
    })
}

async fn daemon(
    bench: &Bench,
    database: Option<&str>,
    lease: Duration,
) -> anyhow::Result<Airlockd> {
    let mut spec = bench.daemon_spec("fleet-")?;
    spec.config_tables = store_table(database, lease);
    Airlockd::start(&spec).await
}

/// The loop's step and a warm call on each backend.
async fn store_costs(bench: &Bench, report: &mut Report) -> anyhow::Result<()> {
    let tool_steps = u32::try_from(bench.count(24, 2))?;
    let runs = bench.count(10, 1);
    let calls = bench.count(200, 3);
    let database = airlock_daemon::testing::fresh_postgres_database().await;
    for (backend, store) in [("sqlite", None), ("postgres", Some(database.as_str()))] {
        eprintln!("{SECTION}: the store on {backend}");
        let metrics = free_port()?;
        let mut spec = bench.daemon_spec("fleet-")?;
        spec.config_tables = format!(
            "{}[metrics]\nlisten = \"127.0.0.1:{metrics}\"\n",
            store_table(store, LEASE)
        );
        let daemon = Airlockd::start(&spec).await?;
        let channel = daemon.channel().await?;
        // One unmeasured run and call warm the store, its statements and the tool.
        let warm = runs::start(
            &bench.fixtures.workspace,
            ECHO,
            tool_steps,
            pb::ApprovalPolicy::Auto,
        );
        RunStream::open(channel.clone(), warm)
            .await?
            .follow(tool_steps + 1)
            .await?;
        let mut steps = Vec::new();
        let before = StoreCounts::read(metrics, backend).await?;
        for _ in 0..runs {
            let start = runs::start(
                &bench.fixtures.workspace,
                ECHO,
                tool_steps,
                pb::ApprovalPolicy::Auto,
            );
            let times = RunStream::open(channel.clone(), start)
                .await?
                .follow(tool_steps + 1)
                .await?;
            steps.extend(std::iter::repeat_n(times.per_step(), times.steps as usize));
        }
        let counts = StoreCounts::read(metrics, backend).await? - before;
        let stepped = steps.len() as f64;
        report.measured(
            SECTION,
            &format!("fleet-step-{backend}"),
            &format!("agent loop step, store on {backend}"),
            Samples::sequential(steps),
        );
        report.note(
            &format!("fleet-step-{backend}"),
            &format!(
                "{:.2} commits a step, {:.1} statements a commit (its writes'), a commit {:.0} µs on average",
                counts.commits / stepped,
                counts.statements / counts.commits.max(1.0),
                counts.committing * 1e6 / counts.commits.max(1.0),
            ),
        );
        let mut tools = ToolsClient::new(channel);
        client::execute(&mut tools, ECHO, "{}", None, "{}").await?;
        let mut latencies = Vec::with_capacity(calls);
        for _ in 0..calls {
            let started = Instant::now();
            client::execute(&mut tools, ECHO, "{}", None, "{}").await?;
            latencies.push(started.elapsed());
        }
        report.measured(
            SECTION,
            &format!("fleet-call-{backend}"),
            &format!("warm call, store on {backend}"),
            Samples::sequential(latencies),
        );
        daemon.stop().await?;
    }
    report.compare("fleet-step-postgres", "fleet-step-sqlite");
    report.compare("fleet-call-postgres", "fleet-call-sqlite");
    Ok(())
}

/// A free loopback port, for a daemon's metrics endpoint (it logs no address of its own).
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The run store's commits and their statements so far, from a daemon's metrics endpoint.
#[derive(Debug, Clone, Copy)]
struct StoreCounts {
    commits: f64,
    /// Seconds the commits took, in all.
    committing: f64,
    statements: f64,
}

impl StoreCounts {
    async fn read(port: u16, backend: &str) -> anyhow::Result<StoreCounts> {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        stream
            .write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .await?;
        let mut text = String::new();
        stream.read_to_string(&mut text).await?;
        let value = |family: &str| -> anyhow::Result<f64> {
            let series = format!("{family}{{backend=\"{backend}\"}} ");
            text.lines()
                .find_map(|line| line.strip_prefix(&series))
                .map_or(Ok(0.0), |value| Ok(value.trim().parse()?))
        };
        Ok(StoreCounts {
            commits: value("airlock_store_commit_duration_seconds_count")?,
            committing: value("airlock_store_commit_duration_seconds_sum")?,
            statements: value("airlock_store_commit_statements_total")?,
        })
    }
}

impl std::ops::Sub for StoreCounts {
    type Output = StoreCounts;

    fn sub(self, before: StoreCounts) -> StoreCounts {
        StoreCounts {
            commits: self.commits - before.commits,
            committing: self.committing - before.committing,
            statements: self.statements - before.statements,
        }
    }
}

/// From an event's making (its `time_ms`, on the run's daemon) to its arrival at a client of
/// that daemon, and at a client of another daemon of the fleet, which learns of it through the
/// database's notifications and reads it from the store. Both daemons and the bench share
/// one machine and clock; `time_ms` has a millisecond's resolution, the same for both.
async fn views(bench: &Bench, report: &mut Report) -> anyhow::Result<()> {
    let tool_steps = u32::try_from(bench.count(16, 2))?;
    let runs = bench.count(10, 1);
    eprintln!("{SECTION}: events followed on the run's daemon and on another ({runs} runs)");
    let database = airlock_daemon::testing::fresh_postgres_database().await;
    let owner = daemon(bench, Some(&database), LEASE).await?;
    let other = daemon(bench, Some(&database), LEASE).await?;
    let (mut local, mut remote) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let mut start = runs::start(
            &bench.fixtures.workspace,
            ECHO,
            tool_steps,
            pb::ApprovalPolicy::Auto,
        );
        // The model thinks before its first step, so both clients are attached before the
        // run's events after its start are made; and 20 ms before each later one, as a model
        // does (far less than a real one), so the case measures delivery rather than a run
        // that keeps the two cores busy with PostgreSQL, two daemons and this client.
        if let Some(model) = &mut start.model {
            let mut script: serde_json::Value = serde_json::from_str(&model.script)?;
            if let Some(turns) = script["turns"].as_array_mut() {
                for (index, turn) in turns.iter_mut().enumerate() {
                    turn["delay_ms"] =
                        serde_json::json!(if index == 0 { 300 } else { MODEL_THINKS_MS });
                }
            }
            model.script = script.to_string();
        }
        let (requests, receiver) = tokio::sync::mpsc::unbounded_channel();
        requests.send(pb::RunRequest {
            request: Some(pb::run_request::Request::Start(start)),
        })?;
        let mut on_owner = AgentClient::new(owner.channel().await?)
            .run(tokio_stream::wrappers::UnboundedReceiverStream::new(
                receiver,
            ))
            .await?
            .into_inner();
        let first = on_owner
            .message()
            .await?
            .context("the run's stream ended at once")?;
        let on_other = AgentClient::new(other.channel().await?)
            .watch_run(pb::AttachRun {
                run_id: first.run_id.clone(),
                after_seq: first.seq,
            })
            .await?
            .into_inner();
        let (here, there) = tokio::try_join!(lags(on_owner), lags(on_other))?;
        drop(requests);
        anyhow::ensure!(
            here.len() == there.len(),
            "the other daemon's client got {} events, the owner's {}",
            there.len(),
            here.len()
        );
        local.extend(here);
        remote.extend(there);
    }
    owner.stop().await?;
    other.stop().await?;
    report.measured(
        SECTION,
        "fleet-view-local",
        "an event, made to read by a client of the run's daemon",
        Samples::sequential(local),
    );
    let remote = Samples::sequential(remote);
    let p99 = remote.p99();
    report.measured(
        SECTION,
        "fleet-view-remote",
        "an event, made to read by a client of another daemon",
        remote,
    );
    report.compare("fleet-view-remote", "fleet-view-local");
    report.target(
        "events reach clients on any daemon within 100 ms p99 on loopback",
        Check::Verdict {
            met: p99 <= Duration::from_millis(100),
            measured: format!("p99 {} ms", p99.as_millis()),
        },
    );
    Ok(())
}

/// For each stored event a stream brings (streamed pieces left out), how long after its
/// making it arrived.
async fn lags(mut events: tonic::Streaming<pb::RunEvent>) -> anyhow::Result<Vec<Duration>> {
    let mut lags = Vec::new();
    while let Some(event) = events.message().await? {
        if event.delta {
            continue;
        }
        let now_us = SystemTime::now().duration_since(UNIX_EPOCH)?.as_micros();
        let made_us = u128::try_from(event.time_ms)? * 1000;
        lags.push(Duration::from_micros(
            u64::try_from(now_us.saturating_sub(made_us)).unwrap_or(u64::MAX),
        ));
    }
    Ok(lags)
}

/// A script that thinks for a minute: the run is in the middle of a step, nothing in flight,
/// when its daemon dies.
fn thinking_run(bench: &Bench) -> pb::StartRun {
    pb::StartRun {
        workspace: bench.fixtures.workspace.to_string_lossy().into_owned(),
        input: "think".into(),
        model: Some(pb::ModelConfig {
            model: "scripted".into(),
            script: serde_json::json!({"turns": [{"delay_ms": 60_000, "final": "done"}]})
                .to_string(),
            ..Default::default()
        }),
        approval_policy: pb::ApprovalPolicy::Auto as i32,
        ..Default::default()
    }
}

/// From the kill of a run's daemon to the run's `RunResumed` in the store.
async fn takeover(bench: &Bench, report: &mut Report) -> anyhow::Result<()> {
    let samples = bench.count(4, 1);
    // A short lease in smoke mode: the case must run in seconds there.
    let lease = if bench.smoke {
        Duration::from_millis(500)
    } else {
        LEASE
    };
    eprintln!(
        "{SECTION}: takeover after a kill, lease {} ms ({samples} runs)",
        lease.as_millis()
    );
    let database = airlock_daemon::testing::fresh_postgres_database().await;
    let survivor = daemon(bench, Some(&database), lease).await?;
    let mut waits = Vec::new();
    for _ in 0..samples {
        let owner = daemon(bench, Some(&database), lease).await?;
        let mut stream = RunStream::open(owner.channel().await?, thinking_run(bench)).await?;
        let run_id = stream.until_model_asked().await?;
        // Thinking now; the owner dies.
        owner.stop().await?;
        let killed = Instant::now();
        wait_for_resumed(&survivor.channel().await?, &run_id).await?;
        waits.push(killed.elapsed());
        AgentClient::new(survivor.channel().await?)
            .cancel_run(pb::CancelRunRequest {
                run_id,
                reason: "benchmark done".into(),
            })
            .await?;
    }
    survivor.stop().await?;
    let samples = Samples::sequential(waits);
    let ratio = samples.p50().as_secs_f64() / lease.as_secs_f64();
    report.measured(
        SECTION,
        "fleet-takeover",
        "a run taken over after its daemon is killed",
        samples,
    );
    // The floor: the lease was renewed at most a third of it before the kill, and the
    // survivor claims on a timer of a third of it.
    report.note(
        "fleet-takeover",
        &format!(
            "p50 {ratio:.2}× the lease of {} ms (a takeover comes between ⅔ and 4⁄3 of it)",
            lease.as_millis()
        ),
    );
    Ok(())
}

/// Reads the run's stored log through `channel` until it holds a `RunResumed`.
async fn wait_for_resumed(channel: &AuthChannel, run_id: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut after_seq = 0;
    while Instant::now() < deadline {
        let mut events = AgentClient::new(channel.clone())
            .watch_run(pb::AttachRun {
                run_id: run_id.to_owned(),
                after_seq,
            })
            .await?
            .into_inner();
        while let Some(event) = events.message().await? {
            after_seq = event.seq;
            if matches!(event.event, Some(Event::RunResumed(_))) {
                return Ok(());
            }
        }
        // The bench polls; the daemon does not (its takeover runs on its lease's timer).
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    anyhow::bail!("run {run_id} was not taken over within two minutes")
}

/// Runs per second, all started at once: spread over three daemons of a fleet, and all on
/// one of them.
async fn spread(bench: &Bench, report: &mut Report) -> anyhow::Result<()> {
    let tool_steps = u32::try_from(bench.count(4, 1))?;
    let runs = bench.count(CONCURRENT_RUNS, 3);
    let database = airlock_daemon::testing::fresh_postgres_database().await;
    let mut daemons = Vec::new();
    for _ in 0..3 {
        daemons.push(daemon(bench, Some(&database), LEASE).await?);
    }
    let mut channels = Vec::new();
    for daemon in &daemons {
        channels.push(daemon.channel().await?);
    }
    for (key, case, used) in [
        ("fleet-runs-one", "runs at once, all on one daemon", 1),
        (
            "fleet-runs-three",
            "runs at once, spread over three daemons",
            3,
        ),
    ] {
        eprintln!("{SECTION}: {case} ({runs} runs)");
        let started = Instant::now();
        let times = try_join_all((0..runs).map(|index| {
            let channel = channels[index % used].clone();
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
        .context("a run of the fleet failed")?;
        let wall = started.elapsed();
        let latencies = times
            .iter()
            .map(|times| times.finished.duration_since(times.opened))
            .collect();
        report.measured(SECTION, key, case, Samples::new(latencies, wall));
    }
    for daemon in daemons {
        daemon.stop().await?;
    }
    report.compare("fleet-runs-three", "fleet-runs-one");
    Ok(())
}
