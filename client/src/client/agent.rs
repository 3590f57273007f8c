//! The typed calls of the `Agent` service: sessions, runs driven on their bidirectional stream,
//! the approver console, and the bookkeeping calls on runs.
//!
//! A run belongs to the daemon, not to the stream that started it: dropping a [`RunHandle`]
//! stops following the run, and the run goes on (it can be followed again with
//! [`AirlockClient::attach_run`], or cancelled with [`AirlockClient::cancel_run`]).

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use std::sync::Arc;

use super::AirlockClient;
use crate::error::{ClientError, Peer};
use crate::proto::run_event::Event;
use crate::proto::run_request::Request;
use crate::proto::{
    ApprovalDecision, ApprovalRequest, AttachRun, CancelRun, CancelRunRequest,
    CreateSessionRequest, ForkRunRequest, GetCassetteRequest, GetCassetteResponse, GetRunRequest,
    GetSessionRequest, GetTraceRequest, ListChangesRequest, ListChangesResponse, ListRunsRequest,
    ListRunsResponse, ListSessionsRequest, ListSessionsResponse, ReadBlobRequest, RevertRunRequest,
    RevertRunResponse, RunEvent, RunInfo, RunRequest, Session, StartRun, Trace, UserInput,
};

/// Messages queued for the daemon on one stream before sending waits. A client sends a handful
/// at a time (the first message, a decision, a cancel, some input), each in answer to something
/// a person did; the daemon reads them as they come.
const REQUEST_BUFFER: usize = 16;

impl AirlockClient {
    /// Creates a session: a workspace, the settings its runs inherit (model, policy, budgets,
    /// tools, instructions), the approvals granted in it and the conversation its runs carry on.
    pub async fn create_session(
        &self,
        request: CreateSessionRequest,
    ) -> Result<Session, ClientError> {
        let response = self
            .agent
            .clone()
            .create_session(request)
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(response.into_inner())
    }

    /// One session of the caller's tenant: its settings, how many runs it has had, its latest
    /// run, and whether one is going on.
    pub async fn get_session(&self, session_id: &str) -> Result<Session, ClientError> {
        let response = self
            .agent
            .clone()
            .get_session(GetSessionRequest {
                session_id: session_id.to_owned(),
            })
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(response.into_inner())
    }

    /// One page of the caller's tenant's sessions, most recently active first;
    /// `next_page_token` asks for the next.
    pub async fn list_sessions(
        &self,
        request: ListSessionsRequest,
    ) -> Result<ListSessionsResponse, ClientError> {
        let response = self
            .agent
            .clone()
            .list_sessions(request)
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(response.into_inner())
    }

    /// Starts a run and returns the handle that follows it and steers it. The run's id arrives
    /// with its first event ([`RunHandle::run_id`]).
    pub async fn start_run(&self, start: StartRun) -> Result<RunHandle, ClientError> {
        self.open_run(Request::Start(start), None).await
    }

    /// Follows an existing run: every event after `after_seq` (0 for all of them), then the live
    /// ones. The handle can answer the run's approvals, cancel it and send it input, as the
    /// client that started it can.
    pub async fn attach_run(&self, run_id: &str, after_seq: u64) -> Result<RunHandle, ClientError> {
        let attach = AttachRun {
            run_id: run_id.to_owned(),
            after_seq,
        };
        let mut handle = self
            .open_run(Request::Attach(attach), Some(run_id.to_owned()))
            .await?;
        handle.position.last_seq = after_seq;
        Ok(handle)
    }

    async fn open_run(
        &self,
        first: Request,
        run_id: Option<String>,
    ) -> Result<RunHandle, ClientError> {
        let (requests, queued) = mpsc::channel(REQUEST_BUFFER);
        // The daemon answers the call only once it has read the first message, so the message
        // must be queued before the call is made.
        requests
            .send(RunRequest {
                request: Some(first),
            })
            .await
            .map_err(|_| ClientError::StreamClosed {
                endpoint: self.peer.endpoint.clone(),
            })?;
        let response = self
            .agent
            .clone()
            .run(ReceiverStream::new(queued))
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(RunHandle {
            events: response.into_inner(),
            requests,
            peer: self.peer.clone(),
            position: Position {
                run_id,
                last_seq: 0,
                finished: false,
            },
        })
    }

    /// One run's record: its state, and once finished its stop reason, final text and usage.
    pub async fn get_run(&self, run_id: &str) -> Result<RunInfo, ClientError> {
        let response = self
            .agent
            .clone()
            .get_run(GetRunRequest {
                run_id: run_id.to_owned(),
            })
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(response.into_inner())
    }

    /// One page of runs, newest first; `next_page_token` asks for the next.
    pub async fn list_runs(
        &self,
        request: ListRunsRequest,
    ) -> Result<ListRunsResponse, ClientError> {
        let response = self
            .agent
            .clone()
            .list_runs(request)
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(response.into_inner())
    }

    /// The spans recorded so far of one run, in start order: run → step → context, model,
    /// validate, permission, tool. The run's own span is recorded when the run ends, so a run
    /// still going has none yet.
    pub async fn get_trace(&self, run_id: &str) -> Result<Trace, ClientError> {
        let response = self
            .agent
            .clone()
            .get_trace(GetTraceRequest {
                run_id: run_id.to_owned(),
            })
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(response.into_inner())
    }

    /// The change sets of a run's tool calls, step by step (`step` 0 for all), whole: the
    /// daemon's pages read one after another, a set that spans pages joined again.
    pub async fn list_changes(
        &self,
        run_id: &str,
        step: u32,
    ) -> Result<ListChangesResponse, ClientError> {
        let mut whole = ListChangesResponse::default();
        let mut offset = 0;
        loop {
            let page = self
                .agent
                .clone()
                .list_changes(ListChangesRequest {
                    run_id: run_id.to_owned(),
                    step,
                    offset,
                    limit: 0,
                })
                .await
                .map_err(|status| ClientError::rpc(&self.peer, status))?
                .into_inner();
            whole.workspace = page.workspace;
            whole.total_changes = page.total_changes;
            for part in page.steps {
                match whole.steps.last_mut() {
                    Some(last) if offset != 0 && last.call_id == part.call_id => {
                        if let (Some(set), Some(more)) = (&mut last.change_set, part.change_set) {
                            set.changes.extend(more.changes);
                        }
                    }
                    _ => whole.steps.push(part),
                }
            }
            if page.next_offset == 0 || page.next_offset <= offset {
                return Ok(whole);
            }
            offset = page.next_offset;
        }
    }

    /// A content one of the run's change sets names (by digest).
    pub async fn read_blob(&self, run_id: &str, digest: &str) -> Result<Vec<u8>, ClientError> {
        let response = self
            .agent
            .clone()
            .read_blob(ReadBlobRequest {
                run_id: run_id.to_owned(),
                digest: digest.to_owned(),
            })
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(response.into_inner().content)
    }

    /// Puts a finished run's workspace back as it was before step `to_step`.
    pub async fn revert_run(
        &self,
        run_id: &str,
        to_step: u32,
        force: bool,
    ) -> Result<RevertRunResponse, ClientError> {
        let response = self
            .agent
            .clone()
            .revert_run(RevertRunRequest {
                run_id: run_id.to_owned(),
                to_step,
                force,
                dry_run: false,
            })
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(response.into_inner())
    }

    /// Starts a run whose conversation is `request.run_id`'s up to a step (see
    /// `ForkRunRequest`); follow it with [`AirlockClient::attach_run`].
    pub async fn fork_run(&self, request: ForkRunRequest) -> Result<RunInfo, ClientError> {
        let response = self
            .agent
            .clone()
            .fork_run(request)
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(response.into_inner())
    }

    /// A finished run's model exchanges as a cassette (`GetCassetteResponse.cassette`, JSON),
    /// for a `replay` model to play back. The daemon refuses (`FAILED_PRECONDITION`) a run still
    /// going, and one that continued an earlier run of its session.
    pub async fn get_cassette(&self, run_id: &str) -> Result<GetCassetteResponse, ClientError> {
        let response = self
            .agent
            .clone()
            .get_cassette(GetCassetteRequest {
                run_id: run_id.to_owned(),
            })
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(response.into_inner())
    }

    /// Asks the daemon to stop a run: its model call and any running tool stop at once, and
    /// the run ends `CANCELLED` with `reason` as its detail.
    pub async fn cancel_run(&self, run_id: &str, reason: &str) -> Result<(), ClientError> {
        self.agent
            .clone()
            .cancel_run(CancelRunRequest {
                run_id: run_id.to_owned(),
                reason: reason.to_owned(),
            })
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(())
    }

    /// Opens an approver console: every approval request pending now, then every new request
    /// and every update on one, for all runs; decisions sent on it answer for any run.
    pub async fn approvals(&self) -> Result<ApprovalConsole, ClientError> {
        let (decisions, queued) = mpsc::channel(REQUEST_BUFFER);
        let response = self
            .agent
            .clone()
            .approvals(ReceiverStream::new(queued))
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        Ok(ApprovalConsole {
            updates: response.into_inner(),
            decisions,
            peer: self.peer.clone(),
        })
    }
}

/// One run's stream: its numbered events, and the messages that steer it.
///
/// Dropping the handle stops following the run; the run itself goes on in the daemon.
#[derive(Debug)]
pub struct RunHandle {
    events: tonic::Streaming<RunEvent>,
    requests: mpsc::Sender<RunRequest>,
    peer: Arc<Peer>,
    position: Position,
}

/// Where a followed run stands, from the events received so far.
#[derive(Debug)]
struct Position {
    run_id: Option<String>,
    /// The last committed event's seq.
    last_seq: u64,
    /// `run_finished` has arrived: the end of the stream is then the run's end.
    finished: bool,
}

impl Position {
    fn record(&mut self, event: &RunEvent) {
        if self.run_id.is_none() && !event.run_id.is_empty() {
            self.run_id = Some(event.run_id.clone());
        }
        // A delta's seq is that of the committed event still to come: attaching after it
        // would skip that event.
        if !event.delta {
            self.last_seq = self.last_seq.max(event.seq);
        }
        if matches!(event.event, Some(Event::RunFinished(_))) {
            self.finished = true;
        }
    }
}

impl RunHandle {
    /// The run's id: known from the start for an attached run, from the first event for a run
    /// this handle started.
    pub fn run_id(&self) -> Option<&str> {
        self.position.run_id.as_deref()
    }

    /// The sequence number of the last committed event received (the `after_seq` to attach
    /// with to resume after it); for an attached run, `after_seq` until an event arrives.
    /// Deltas do not count: one carries the seq of the event it leads up to, which has not
    /// arrived yet.
    pub fn last_seq(&self) -> u64 {
        self.position.last_seq
    }

    /// Waits for the run's next event; `None` once the stream has ended after the run's
    /// `run_finished`.
    ///
    /// A stream that ends before `run_finished` is [`ClientError::IncompleteRun`]. An event of a
    /// kind added to the API after this client was built arrives with no `event`; it still
    /// counts for [`RunHandle::last_seq`].
    ///
    /// Streamed pieces (`delta` set: the model's text and tool calls as they arrive) come in
    /// order with the committed events. They are never stored: a client that attaches later
    /// gets the committed event they led up to instead, which repeats them whole.
    pub async fn next_event(&mut self) -> Result<Option<RunEvent>, ClientError> {
        let message = self
            .events
            .message()
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))?;
        let Some(event) = message else {
            if self.position.finished {
                return Ok(None);
            }
            return Err(ClientError::IncompleteRun {
                endpoint: self.peer.endpoint.clone(),
                run_id: self.position.run_id.clone().unwrap_or_default(),
                last_seq: self.position.last_seq,
            });
        };
        self.position.record(&event);
        Ok(Some(event))
    }

    /// Answers one of the run's approval requests. A decision the daemon refuses (another
    /// run's request, one already answered, past its deadline, a digest that does not match)
    /// comes back as a `decision_rejected` event.
    pub async fn decide(&self, decision: ApprovalDecision) -> Result<(), ClientError> {
        self.send(Request::Decision(decision)).await
    }

    /// Asks the daemon to stop the run; it ends `CANCELLED`, which this stream then reports.
    pub async fn cancel(&self, reason: &str) -> Result<(), ClientError> {
        self.send(Request::Cancel(CancelRun {
            reason: reason.to_owned(),
        }))
        .await
    }

    /// More input from the user, read before the run's next model call.
    pub async fn send_input(&self, text: &str) -> Result<(), ClientError> {
        self.send(Request::Input(UserInput {
            text: text.to_owned(),
        }))
        .await
    }

    async fn send(&self, request: Request) -> Result<(), ClientError> {
        self.requests
            .send(RunRequest {
                request: Some(request),
            })
            .await
            .map_err(|_| ClientError::StreamClosed {
                endpoint: self.peer.endpoint.clone(),
            })
    }
}

/// An approver console's stream: approval requests and the updates on them, for every run.
#[derive(Debug)]
pub struct ApprovalConsole {
    updates: tonic::Streaming<ApprovalRequest>,
    decisions: mpsc::Sender<ApprovalDecision>,
    peer: Arc<Peer>,
}

impl ApprovalConsole {
    /// Waits for the next request or update; `None` when the daemon ends the stream.
    ///
    /// `state` says which: `PENDING` (a request to answer; those pending when the console
    /// connected come first), `RESOLVED` (answered, here or elsewhere), `EXPIRED` (nobody
    /// answered by the deadline) or `DECISION_REJECTED` (a decision sent on this console was
    /// refused; `detail` says why).
    pub async fn next(&mut self) -> Result<Option<ApprovalRequest>, ClientError> {
        self.updates
            .message()
            .await
            .map_err(|status| ClientError::rpc(&self.peer, status))
    }

    /// Answers a request of any run.
    pub async fn decide(&self, decision: ApprovalDecision) -> Result<(), ClientError> {
        self.decisions
            .send(decision)
            .await
            .map_err(|_| ClientError::StreamClosed {
                endpoint: self.peer.endpoint.clone(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{ModelText, ModelTextDelta, RunFinished, StepStarted};

    fn event(seq: u64, delta: bool, kind: Event) -> RunEvent {
        RunEvent {
            run_id: "run_1".to_owned(),
            seq,
            delta,
            event: Some(kind),
            ..RunEvent::default()
        }
    }

    #[test]
    fn deltas_never_move_the_point_to_attach_after() {
        let mut position = Position {
            run_id: None,
            last_seq: 0,
            finished: false,
        };
        position.record(&event(
            3,
            false,
            Event::StepStarted(StepStarted { index: 1 }),
        ));
        assert_eq!(position.run_id.as_deref(), Some("run_1"));
        // Both pieces lead up to event 4, which has not arrived: attaching after 4 would
        // lose it.
        for piece in ["Hel", "lo"] {
            let delta = Event::TextDelta(ModelTextDelta {
                text: piece.to_owned(),
            });
            position.record(&event(4, true, delta));
            assert_eq!(position.last_seq, 3);
        }
        let text = Event::ModelText(ModelText {
            text: "Hello".to_owned(),
        });
        position.record(&event(4, false, text));
        assert_eq!(position.last_seq, 4);
        assert!(!position.finished);
        position.record(&event(5, false, Event::RunFinished(RunFinished::default())));
        assert!(position.finished);
    }
}
