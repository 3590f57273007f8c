//! Driving agent runs: a scripted transcript of no-op tool calls, the bidirectional `Run`
//! stream, and a reader that timestamps each step as the client sees it and approves at
//! once when asked.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::daemon::AuthChannel;
use airlock_proto::v1 as pb;
use anyhow::{Context, bail};
use pb::agent_client::AgentClient;
use pb::run_event::Event;
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::Streaming;

/// How long an approval may wait: longer than any benchmark keeps runs waiting.
const APPROVAL_TIMEOUT_MS: u64 = 30 * 60 * 1000;

/// How long a benchmark waits for the next event of a run before calling it stuck.
const EVENT_TIMEOUT: Duration = Duration::from_secs(120);

/// A run of `tool_steps` calls of `tool` (each with different arguments, so none repeats),
/// then a final answer: `tool_steps + 1` steps.
pub fn start(
    workspace: &Path,
    tool: &str,
    tool_steps: u32,
    policy: pb::ApprovalPolicy,
) -> pb::StartRun {
    let mut turns: Vec<serde_json::Value> = (0..tool_steps)
        .map(
            |step| serde_json::json!({"tool_calls": [{"name": tool, "arguments": {"step": step}}]}),
        )
        .collect();
    turns.push(serde_json::json!({"final": "done"}));
    pb::StartRun {
        workspace: workspace.to_string_lossy().into_owned(),
        input: "call the no-op tool".into(),
        model: Some(pb::ModelConfig {
            model: "scripted".into(),
            script: serde_json::json!({ "turns": turns }).to_string(),
            ..Default::default()
        }),
        tools: vec![tool.to_owned()],
        approval_policy: policy as i32,
        budgets: Some(pb::Budgets {
            max_steps: tool_steps + 1,
            max_tool_calls: tool_steps.max(1),
            ..Default::default()
        }),
        approval_timeout_ms: APPROVAL_TIMEOUT_MS,
        ..Default::default()
    }
}

/// The client side of one `Agent.Run` stream.
pub struct RunStream {
    requests: UnboundedSender<pb::RunRequest>,
    events: Streaming<pb::RunEvent>,
    opened: Instant,
}

/// How a run went, as the client saw it.
#[derive(Debug)]
pub struct RunTimes {
    pub run_id: String,
    /// When the client sent the start.
    pub opened: Instant,
    /// Steps the run took.
    pub steps: u32,
    /// When the client read the run's end.
    pub finished: Instant,
}

impl RunTimes {
    /// The run's time per step, from the start request to the last event read. Arrival
    /// times of single events are not used: the server may deliver a run's events in one
    /// burst (see BENCHMARKS.md on TCP_NODELAY), which makes gaps between them meaningless.
    pub fn per_step(&self) -> Duration {
        self.finished.duration_since(self.opened) / self.steps.max(1)
    }
}

impl RunStream {
    pub async fn open(channel: AuthChannel, start: pb::StartRun) -> anyhow::Result<RunStream> {
        let opened = Instant::now();
        let (requests, receiver) = mpsc::unbounded_channel();
        requests.send(pb::RunRequest {
            request: Some(pb::run_request::Request::Start(start)),
        })?;
        let events = AgentClient::new(channel)
            .run(UnboundedReceiverStream::new(receiver))
            .await
            .context("the run was refused")?
            .into_inner();
        Ok(RunStream {
            requests,
            events,
            opened,
        })
    }

    /// The run's next event; none when the stream ended.
    pub async fn next(&mut self) -> anyhow::Result<Option<pb::RunEvent>> {
        Ok(tokio::time::timeout(EVENT_TIMEOUT, self.events.message())
            .await
            .context("no event from the run for two minutes")??)
    }

    pub fn approve(&self, request: &pb::ApprovalRequest) -> anyhow::Result<()> {
        self.requests.send(pb::RunRequest {
            request: Some(pb::run_request::Request::Decision(pb::ApprovalDecision {
                approval_id: request.approval_id.clone(),
                decision: pb::Decision::ApproveOnce as i32,
                reason: String::new(),
                digest: request.digest.clone(),
                grant_prefix: Vec::new(),
            })),
        })?;
        Ok(())
    }

    /// Reads until the run has asked its model (its context is built), and returns the run's
    /// id.
    pub async fn until_model_asked(&mut self) -> anyhow::Result<String> {
        while let Some(event) = self.next().await? {
            match event.event {
                Some(Event::ContextBuilt(_)) => return Ok(event.run_id),
                Some(Event::RunFinished(finished)) => {
                    bail!("the run finished before asking its model: {finished:?}")
                }
                _ => {}
            }
        }
        bail!("the run's stream ended before it asked its model")
    }

    /// Reads until the run asks for an approval, and returns the request.
    pub async fn until_approval(&mut self) -> anyhow::Result<pb::ApprovalRequest> {
        while let Some(event) = self.next().await? {
            match event.event {
                Some(Event::ApprovalRequested(requested)) => {
                    return requested
                        .request
                        .context("an approval event without a request");
                }
                Some(Event::RunFinished(finished)) => {
                    bail!("the run finished before asking: {finished:?}")
                }
                _ => {}
            }
        }
        bail!("the run's stream ended before it asked for an approval")
    }

    /// Reads the run to its end, approving every request at once, and checks that it gave
    /// its final answer after `steps` steps.
    pub async fn follow(mut self, steps: u32) -> anyhow::Result<RunTimes> {
        let mut run_id = String::new();
        while let Some(event) = self.next().await? {
            if run_id.is_empty() {
                run_id = event.run_id.clone();
            }
            match event.event {
                Some(Event::ApprovalRequested(requested)) => {
                    self.approve(
                        requested
                            .request
                            .as_ref()
                            .context("an approval event without a request")?,
                    )?;
                }
                Some(Event::RunFinished(finished)) => {
                    if finished.reason != pb::StopReason::Final as i32 || finished.steps != steps {
                        bail!("the run did not end as scripted after {steps} steps: {finished:?}");
                    }
                    return Ok(RunTimes {
                        run_id,
                        opened: self.opened,
                        steps,
                        finished: Instant::now(),
                    });
                }
                _ => {}
            }
        }
        bail!("the run's stream ended before the run finished")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_has_one_step_per_call_then_the_answer() {
        let start = start(Path::new("/w"), "echo", 3, pb::ApprovalPolicy::Auto);
        let script: serde_json::Value =
            serde_json::from_str(&start.model.expect("a model").script).expect("JSON");
        let turns = script["turns"].as_array().expect("turns");
        assert_eq!(turns.len(), 4);
        assert_eq!(turns[2]["tool_calls"][0]["arguments"]["step"], 2);
        assert_eq!(turns[3]["final"], "done");
        assert_eq!(start.budgets.expect("budgets").max_steps, 4);
    }

    #[test]
    fn time_per_step_spans_the_whole_run() {
        let opened = Instant::now();
        let times = RunTimes {
            run_id: "run_1".into(),
            opened,
            steps: 4,
            finished: opened + Duration::from_millis(10),
        };
        assert_eq!(times.per_step(), Duration::from_micros(2500));
    }
}
