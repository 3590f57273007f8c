//! What an eval asks of airlockd, behind one trait so that the attempt logic and the graders
//! that need the daemon (`command`, `llm_judge`) can be exercised with a stand-in: start a run
//! and follow it to its end on its own stream — answering its approvals as the approver says,
//! cancelling it past its timeout — and execute one tool.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::time::Duration;

use airlock_client::answer::decision_for;
use airlock_client::proto::run_event::Event;
use airlock_client::proto::{ApprovalRequested, ExecuteToolRequest, StartRun, ToolResult};
use airlock_client::{AirlockClient, ClientError, ExecutionEvent, RunHandle, exit_code};
use async_trait::async_trait;
use tokio::time::Instant;

use super::approver::{Approver, DENY_REASON};
use super::outcome::{Outcome, Recorder};

/// How long a run cancelled for its timeout gets to report its end before the attempt is
/// given up as unfinished: a cancel stops the model call and the tools at once.
const CANCEL_GRACE: Duration = Duration::from_secs(30);

/// The detail a run cancelled for its timeout ends with.
pub const TIMEOUT_REASON: &str = "cancelled by airlock eval: the task's timeout_s passed";

/// How following a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEnd {
    /// The run finished by itself.
    Finished,
    /// The run passed its timeout, was cancelled and finished `cancelled`.
    TimedOut,
    /// The run could not be followed to its end; the error says why.
    Unfinished(Failure),
}

/// Why an attempt could not finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub error: String,
    /// The daemon is gone (unreachable, went away, unavailable): later attempts would fail
    /// the same way.
    pub unavailable: bool,
}

impl Failure {
    pub fn of(error: &ClientError) -> Failure {
        Failure {
            error: error.to_string(),
            unavailable: error.exit_code() == exit_code::UNAVAILABLE,
        }
    }
}

/// A run followed as far as it went.
#[derive(Debug, Clone)]
pub struct Followed {
    pub outcome: Outcome,
    pub end: RunEnd,
}

#[async_trait(?Send)]
pub trait EvalDaemon {
    /// Starts a run and follows it to its end (or `timeout`, when it is cancelled).
    async fn run(&self, start: StartRun, approver: &Approver, timeout: Duration) -> Followed;

    /// Runs one tool to its result.
    async fn execute_tool(&self, request: ExecuteToolRequest) -> Result<ToolResult, ClientError>;
}

/// The daemon itself.
pub struct Daemon {
    client: AirlockClient,
    /// The runs being followed, to cancel when the eval is interrupted.
    live: RefCell<BTreeSet<String>>,
}

impl Daemon {
    pub fn new(client: AirlockClient) -> Daemon {
        Daemon {
            client,
            live: RefCell::new(BTreeSet::new()),
        }
    }

    pub fn client(&self) -> &AirlockClient {
        &self.client
    }

    /// Cancels every run being followed (the eval was interrupted); returns their ids.
    pub async fn cancel_live(&self, reason: &str) -> Vec<String> {
        let live: Vec<String> = self.live.borrow().iter().cloned().collect();
        for run_id in &live {
            // Best effort: a run that cannot be cancelled now ends by its own budgets.
            let _ = self.client.cancel_run(run_id, reason).await;
        }
        live
    }

    async fn follow(
        &self,
        start: StartRun,
        approver: &Approver,
        timeout: Duration,
        recorder: &mut Recorder,
    ) -> RunEnd {
        let mut run = match self.client.start_run(start).await {
            Ok(run) => run,
            Err(error) => return RunEnd::Unfinished(Failure::of(&error)),
        };
        let mut deadline = Instant::now() + timeout;
        let mut timed_out = false;
        let mut asked = 0;
        let mut registered = None;
        let end = loop {
            let event = match tokio::time::timeout_at(deadline, run.next_event()).await {
                Ok(Ok(Some(event))) => event,
                // The stream ends only after `run_finished`, which ends the loop below.
                Ok(Ok(None)) => break RunEnd::Finished,
                Ok(Err(error)) => break RunEnd::Unfinished(Failure::of(&error)),
                Err(_) if timed_out => {
                    break RunEnd::Unfinished(Failure {
                        error: format!(
                            "the run passed its timeout ({} s) and did not end within {} s of \
                             its cancel",
                            timeout.as_secs(),
                            CANCEL_GRACE.as_secs()
                        ),
                        unavailable: false,
                    });
                }
                Err(_) => {
                    timed_out = true;
                    deadline = Instant::now() + CANCEL_GRACE;
                    if let Err(error) = run.cancel(TIMEOUT_REASON).await {
                        break RunEnd::Unfinished(Failure::of(&error));
                    }
                    continue;
                }
            };
            if registered.is_none()
                && let Some(run_id) = run.run_id()
            {
                self.live.borrow_mut().insert(run_id.to_owned());
                registered = Some(run_id.to_owned());
            }
            recorder.on_event(&event);
            if !event.delta
                && let Some(Event::ApprovalRequested(ApprovalRequested {
                    request: Some(request),
                })) = &event.event
            {
                let decision = approver.answer(asked);
                asked += 1;
                recorder.answered(&request.approval_id, decision);
                answer(&run, decision_for(request, decision, DENY_REASON)).await;
            }
            if recorder.finished() {
                break if timed_out {
                    RunEnd::TimedOut
                } else {
                    RunEnd::Finished
                };
            }
        };
        if let Some(run_id) = registered {
            self.live.borrow_mut().remove(&run_id);
        }
        end
    }
}

/// Sends a decision. A stream already closed means the run is over, which its events say.
async fn answer(run: &RunHandle, decision: airlock_client::proto::ApprovalDecision) {
    let _ = run.decide(decision).await;
}

#[async_trait(?Send)]
impl EvalDaemon for Daemon {
    async fn run(&self, start: StartRun, approver: &Approver, timeout: Duration) -> Followed {
        let started = Instant::now();
        let mut recorder = Recorder::default();
        let end = self.follow(start, approver, timeout, &mut recorder).await;
        let mut outcome = recorder.into_outcome();
        outcome.wall_s = started.elapsed().as_secs_f64();
        Followed { outcome, end }
    }

    async fn execute_tool(&self, request: ExecuteToolRequest) -> Result<ToolResult, ClientError> {
        let mut execution = self.client.execute_tool(request).await?;
        loop {
            match execution.next_event().await? {
                ExecutionEvent::Finished(result) => return Ok(result),
                // The output comes whole in the result; no approval is asked for.
                ExecutionEvent::Started(_)
                | ExecutionEvent::Output(_)
                | ExecutionEvent::Approval(_) => {}
            }
        }
    }
}
