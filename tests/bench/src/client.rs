//! The gRPC client side of the benchmarks: one checked `ExecuteTool` call, one health check,
//! and a load generator that keeps a number of them in flight, each worker on its own
//! connection as separate clients would be.

use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::daemon::AuthChannel;
use airlock_proto::v1 as pb;
use anyhow::{Context, bail};
use pb::execute_tool_event::Event;
use pb::tools_client::ToolsClient;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use crate::daemon::Airlockd;
use crate::stats::Samples;

/// Runs `tool` once and checks that it returned `OK` with content containing `expect`.
pub async fn execute(
    client: &mut ToolsClient<AuthChannel>,
    tool: &str,
    arguments: &str,
    workspace: Option<&Path>,
    expect: &str,
) -> anyhow::Result<()> {
    let request = pb::ExecuteToolRequest {
        tool: tool.to_owned(),
        arguments_json: arguments.to_owned(),
        workspace: workspace
            .map(|dir| dir.to_string_lossy().into_owned())
            .unwrap_or_default(),
        timeout_ms: 0,
        require_approval: false,
    };
    let mut stream = client.execute_tool(request).await?.into_inner();
    let mut result = None;
    while let Some(event) = stream.message().await? {
        match event.event {
            Some(Event::Finished(finished)) => result = Some(finished),
            Some(Event::Started(_) | Event::Output(_) | Event::Approval(_)) | None => {}
        }
    }
    let result = result.context("the call's stream ended without a result")?;
    if result.status != pb::ToolStatus::Ok as i32 || !result.content.contains(expect) {
        bail!("{tool} did not return OK with {expect:?}: {result:?}");
    }
    Ok(())
}

/// One health check of the whole server; it must say SERVING.
pub async fn health(client: &mut HealthClient<AuthChannel>) -> anyhow::Result<()> {
    let response = client
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await?
        .into_inner();
    if response.status != ServingStatus::Serving as i32 {
        bail!("the health check says {:?}", response.status);
    }
    Ok(())
}

/// Measures `calls` calls made by `concurrency` workers, each on its own connection, after
/// `warmup` calls per worker. `call` makes one call on the channel it is given.
pub async fn load<F, Fut>(
    daemon: &Airlockd,
    concurrency: usize,
    warmup: usize,
    calls: usize,
    call: F,
) -> anyhow::Result<Samples>
where
    F: Fn(AuthChannel) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let per_worker = calls.div_ceil(concurrency);
    let mut channels = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let channel = daemon.channel().await?;
        for _ in 0..warmup {
            call(channel.clone()).await?;
        }
        channels.push(channel);
    }
    // Every worker starts at once, so the calls overlap for the whole measurement.
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(concurrency + 1));
    let mut workers = Vec::with_capacity(concurrency);
    for channel in channels {
        let call = call.clone();
        let barrier = barrier.clone();
        workers.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut latencies = Vec::with_capacity(per_worker);
            for _ in 0..per_worker {
                let started = Instant::now();
                call(channel.clone()).await?;
                latencies.push(started.elapsed());
            }
            anyhow::Ok(latencies)
        }));
    }
    barrier.wait().await;
    let started = Instant::now();
    let mut latencies: Vec<Duration> = Vec::with_capacity(per_worker * concurrency);
    for worker in workers {
        latencies.extend(worker.await??);
    }
    Ok(Samples::new(latencies, started.elapsed()))
}
