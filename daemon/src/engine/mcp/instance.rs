//! One running instance of a hosted server: its sandbox (or, for a remote server, the
//! daemon-local egress proxy its connection goes through), the MCP connection to it, what
//! it last listed, and the tail of what it wrote to stderr.
//!
//! It outlives its calls, and so do its egress gate (whose ledger is the instance's) and its
//! cgroup: a call is accounted what they gained while it was in flight (see `tool`).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult,
    CancelledNotificationParam, ClientCapabilities, ClientRequest, ElicitationCapability,
    ErrorData, FormElicitationCapability, InputRequest, InputRequests, InputResponses,
    RequestMetaObject, ServerResult, Tool as McpTool,
};
use rmcp::service::{PeerRequestOptions, RoleClient, RunningService, ServiceError};
use tokio_util::sync::CancellationToken;

use super::client::Client;
use super::questions::{self, Callers, MAX_ROUNDS, Questions};
use super::trust::tool_digest;
use crate::egress::Gate;
use crate::engine::contract::Exit;
use crate::engine::process::{Armed, RunningServer, Usage, UsageWindow};

mod start;

/// How long a server gets to list its tools.
const LIST_TIMEOUT: Duration = Duration::from_secs(30);

/// The first pause before a call is sent again on a server's `input_required` result that
/// asks nothing (it is still working), growing by as much each time.
const STATE_ONLY_PAUSE: Duration = Duration::from_millis(50);

/// What a server listed: its tools by name, with their digests.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    pub tools: Vec<McpTool>,
    pub digests: BTreeMap<String, String>,
}

impl Listing {
    fn new(tools: Vec<McpTool>) -> Listing {
        let digests = tools
            .iter()
            .map(|tool| (tool.name.to_string(), tool_digest(tool)))
            .collect();
        Listing { tools, digests }
    }
}

/// What an instance's connection runs over.
enum Link {
    /// A process in the sandbox, talked to over its standard streams.
    Process(Arc<RunningServer>),
    /// A remote server, reached through a proxy on the host's loopback that only its
    /// egress gate lets out; stopped with the instance.
    Remote(tokio::task::JoinHandle<()>),
}

pub struct Instance {
    service: RunningService<RoleClient, Client>,
    /// The calls in flight, and who can answer the server's questions about each.
    callers: Arc<Callers>,
    link: Link,
    /// Cancelled when the server's process has ended.
    ended: CancellationToken,
    exit: Arc<Mutex<Option<Exit>>>,
    listing: Mutex<Arc<Listing>>,
    tools_changed: Arc<AtomicBool>,
    stderr: Arc<Mutex<VecDeque<u8>>>,
    /// Calls in flight, and when the last one ended: the idle reaper's inputs.
    pub in_flight: AtomicUsize,
    pub last_used: Mutex<Instant>,
    pub started_at: Instant,
    /// Held by each call of a server that may write its workspace: one at a time.
    pub serial: Option<tokio::sync::Mutex<()>>,
    /// The overlay a writing server's workspace is, whose changes are recorded after each
    /// call (see `changes`).
    pub recording: Option<Arc<Recording>>,
    /// The gate every connection of the instance goes through (none when its profile has no
    /// network): its ledger holds all the instance's contacts, for calls to take theirs.
    egress: Option<Arc<Gate>>,
}

/// A writing server's overlay, and how its changes are recorded.
pub struct Recording {
    pub changes: crate::changes::Changes,
    pub overlay: crate::changes::Overlay,
    /// The workspace's exclusions as they were when the instance started, and the
    /// profile's bounds.
    pub call: crate::changes::CallRules,
    /// What the server wrote in earlier calls, so that a call's set is its own.
    pub writes: Arc<crate::changes::ServerWrites>,
    /// Held by a refresh or a sync for as long as it runs. A call dropped at its deadline
    /// lets its turn go while its blocking work goes on; the next call's refresh waits for
    /// that work here rather than running beside it.
    pub busy: Mutex<()>,
    /// When the last survey between calls ended, and how long it took.
    pub surveyed: Mutex<Option<(Instant, Duration)>>,
}

impl Recording {
    /// Before a call: shows the server the workspace as it is now (see `changes::sync`), by
    /// the call's `deadline`.
    pub async fn refresh(self: &Arc<Self>, deadline: Instant) -> Result<(), String> {
        let recording = self.clone();
        tokio::task::spawn_blocking(move || {
            let _busy = recording
                .busy
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            recording
                .writes
                .refresh(
                    &recording.overlay,
                    &recording.call.rules,
                    crate::changes::Deadline(Some(deadline)),
                )
                .map_err(|err| err.to_string())
        })
        .await
        .unwrap_or_else(|err| Err(format!("showing the server the workspace panicked: {err}")))
    }

    /// Between calls (blocking): whether what the server has written is still within its
    /// profile's `[changes]` bounds. A server writes from background tasks too, and nothing
    /// else looks at its upper layer until its next call. Surveys at most once a second, and
    /// no more often than ten times its own last duration; skipped while a refresh or sync
    /// runs (they survey it themselves).
    pub fn within_bounds(&self) -> Result<(), String> {
        let Ok(_busy) = self.busy.try_lock() else {
            return Ok(());
        };
        let mut surveyed = self
            .surveyed
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if let Some((ended, took)) = *surveyed
            && ended.elapsed() < (took * 10).max(Duration::from_secs(1))
        {
            return Ok(());
        }
        let started = Instant::now();
        let upper = self
            .overlay
            .upper()
            .open()
            .map_err(|err| format!("cannot open the server's upper layer: {err}"))?;
        let verdict =
            crate::changes::survey(&upper, &self.call.rules, crate::changes::Deadline::none());
        *surveyed = Some((Instant::now(), started.elapsed()));
        verdict.map(|_| ()).map_err(|err| err.to_string())
    }

    /// What the server changed in the call, applied to the workspace, by the call's
    /// `deadline`: a sync still running when the call is given up stops there, nothing of it
    /// applied (nothing would record it).
    pub async fn sync(self: &Arc<Self>, deadline: Instant) -> crate::changes::ChangeSet {
        let recording = self.clone();
        tokio::task::spawn_blocking(move || {
            let _busy = recording
                .busy
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            recording.changes.sync(
                &recording.overlay,
                &recording.call,
                &recording.writes,
                crate::changes::Deadline(Some(deadline)),
            )
        })
        .await
        .unwrap_or_else(|err| crate::changes::ChangeSet {
            not_applied: Some(format!("recording the call's changes panicked: {err}")),
            refusal: Some(crate::changes::Refusal::Failed),
            ..Default::default()
        })
    }
}

impl Instance {
    /// Lists the server's tools again and keeps the listing.
    pub async fn relist(&self, name: &str) -> Result<Arc<Listing>, String> {
        self.tools_changed.store(false, Ordering::SeqCst);
        let tools = tokio::select! {
            listed = tokio::time::timeout(LIST_TIMEOUT, self.service.peer().list_all_tools()) => listed,
            () = self.ended.cancelled() => return Err(self.died(name)),
        };
        let tools = match tools {
            Ok(Ok(tools)) => tools,
            Ok(Err(err)) => {
                return Err(format!("MCP server `{name}` did not list its tools: {err}"));
            }
            Err(_) => {
                return Err(format!(
                    "MCP server `{name}` did not list its tools within {} s",
                    LIST_TIMEOUT.as_secs()
                ));
            }
        };
        let listing = Arc::new(Listing::new(tools));
        if let Ok(mut kept) = self.listing.lock() {
            *kept = listing.clone();
        }
        Ok(listing)
    }

    /// The listing, listed again first if the server said it changed. Shared, not copied:
    /// every call of a hosted tool reads it.
    pub async fn current_listing(&self, name: &str) -> Result<Arc<Listing>, String> {
        if self.tools_changed.load(Ordering::SeqCst) {
            return self.relist(name).await;
        }
        Ok(self.kept_listing())
    }

    /// The listing as last listed, not listed again: right after the start, the first
    /// listing the instance gave.
    pub fn kept_listing(&self) -> Arc<Listing> {
        self.listing
            .lock()
            .map(|listing| listing.clone())
            .unwrap_or_default()
    }

    /// Calls `tool` on the server for a client that can answer its questions (`questions`)
    /// or not. A server of 2026-07-28 may answer with an `input_required` result (SEP-2322)
    /// instead of the tool's: the questions that client can answer are put to it, the rest
    /// answered as the instance's [`Client`] answers them (an elicitation to the tenant's
    /// approvers, roots the sandbox's, sampling refused), and the call is sent again with
    /// the answers and the server's `requestState` as it gave it, for up to [`MAX_ROUNDS`]
    /// rounds. An older server's questions arrive at the [`Client`], which finds the call's
    /// client through the same registration.
    pub async fn call_tool(
        &self,
        mut params: CallToolRequestParams,
        questions: Option<Arc<dyn Questions>>,
    ) -> Result<CallToolResult, ServiceError> {
        let _in_flight = self.callers.enter(questions.clone());
        if params.input_responses.is_none() {
            params.input_responses = questions.as_ref().and_then(|q| q.opening_answers());
        }
        let mut waits = 0u32;
        for _round in 0..MAX_ROUNDS {
            let required = match self.call_once(params.clone(), questions.as_deref()).await? {
                CallToolResponse::Complete(result) => return Ok(result),
                CallToolResponse::InputRequired(required) => required,
                // airlock declares no tasks extension: a task is not an answer it asked for,
                // nor is a kind of answer newer than airlock.
                _ => return Err(ServiceError::UnexpectedResponse),
            };
            let requests = required.input_requests.unwrap_or_default();
            if requests.is_empty() {
                // Only a state: the server is still working; ask again after a pause that
                // grows, as rmcp's own loop does.
                if required.request_state.is_none() {
                    return Err(ServiceError::UnexpectedResponse);
                }
                waits += 1;
                tokio::time::sleep(STATE_ONLY_PAUSE * waits).await;
            }
            params.input_responses = Some(self.answer(requests, questions.as_deref()).await?)
                .filter(|answers| !answers.is_empty());
            params.request_state = required.request_state;
        }
        Err(ServiceError::InputRequiredRoundsExceeded {
            max_rounds: MAX_ROUNDS,
        })
    }

    /// Sends `tools/call` once. A server of 2026-07-28 reads the client's capabilities in
    /// each request's `_meta`: for a call from an MCP client it is told what that client
    /// offers to answer (and roots, which airlock answers), so that it asks only what the
    /// client can answer; for any other call, what airlock offers (see `client.rs`).
    async fn call_once(
        &self,
        params: CallToolRequestParams,
        questions: Option<&dyn Questions>,
    ) -> Result<CallToolResponse, ServiceError> {
        let peer = self.service.peer();
        let modern = peer
            .peer_info()
            .is_some_and(|info| !info.protocol_version.has_initialize());
        let Some(questions) = questions.filter(|_| modern) else {
            return peer.call_tool_once(params).await;
        };
        let mut capabilities = ClientCapabilities::default();
        capabilities.roots = Some(Default::default());
        if questions.elicits() {
            let mut elicitation = ElicitationCapability::new();
            elicitation.form = Some(FormElicitationCapability::default());
            capabilities.elicitation = Some(elicitation);
        }
        if questions.samples() {
            capabilities.sampling = Some(Default::default());
        }
        let mut meta = RequestMetaObject::default();
        meta.set_client_capabilities(capabilities);
        let mut options = PeerRequestOptions::no_options();
        options.meta = Some(meta);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = peer.send_request_with_option(request, options).await?;
        // A call given up on tells the server, as rmcp's own `call_tool_once` does.
        let mut abandoned = Abandoned {
            peer: Some(peer.clone()),
            id: handle.id.clone(),
        };
        let answer = handle.await_response().await;
        abandoned.peer = None;
        match answer? {
            ServerResult::CallToolResult(result) => Ok(CallToolResponse::Complete(result)),
            ServerResult::InputRequiredResult(result) => {
                Ok(CallToolResponse::InputRequired(result))
            }
            _ => Err(ServiceError::UnexpectedResponse),
        }
    }

    /// The answers to one round of a server's questions: those `questions` can answer
    /// from its client, the others from the instance's [`Client`].
    async fn answer(
        &self,
        requests: InputRequests,
        questions: Option<&dyn Questions>,
    ) -> Result<InputResponses, ServiceError> {
        let (theirs, ours): (InputRequests, InputRequests) =
            requests.into_iter().partition(|(_, request)| {
                questions.is_some_and(|questions| questions::answers(questions, request))
            });
        let forwarded = async {
            match questions {
                Some(questions) if !theirs.is_empty() => {
                    let server = &self.service.service().server;
                    questions.ask(questions::attributed(server, theirs)).await
                }
                _ => Ok(InputResponses::new()),
            }
        };
        let client = self.service.service();
        let here = futures::future::join_all(ours.into_iter().map(|(key, request)| async move {
            let answer = match request {
                InputRequest::Elicitation(request) => {
                    serde_json::to_value(client.elicit_here(request.params).await)
                }
                InputRequest::ListRoots(_) => serde_json::to_value(client.roots()),
                InputRequest::CreateMessage(_) => return Err(Client::no_sampling()),
                _ => {
                    return Err(ErrorData::invalid_request(
                        format!("airlock cannot answer the server's question `{key}`"),
                        None,
                    ));
                }
            };
            answer
                .map(|answer| (key, answer))
                .map_err(|err| ErrorData::internal_error(err.to_string(), None))
        }));
        let (forwarded, here) = tokio::join!(forwarded, here);
        let mut answers = forwarded
            .map_err(|err| ServiceError::McpError(ErrorData::internal_error(err, None)))?;
        for answer in here {
            let (key, answer) = answer.map_err(ServiceError::McpError)?;
            answers.insert(key, answer);
        }
        Ok(answers)
    }

    /// Keeps the instance's questions from reaching any one client while the returned
    /// guard lives: for a call given up on, whose server may still be at work on it.
    pub fn hold_questions(&self) -> questions::InFlight {
        self.callers.enter(None)
    }

    pub fn peer(&self) -> &rmcp::Peer<RoleClient> {
        self.service.peer()
    }

    /// Resolves when the server's process has ended.
    pub async fn ended(&self) {
        self.ended.cancelled().await;
    }

    pub fn is_alive(&self) -> bool {
        !self.ended.is_cancelled() && !self.service.is_closed()
    }

    /// Why a call could not finish: the server went away. With how it ended and the end of
    /// its stderr.
    pub fn died(&self, name: &str) -> String {
        let how = match self.exit.lock().ok().and_then(|exit| exit.clone()) {
            Some(Exit::Code(code)) => format!("exited with code {code}"),
            Some(Exit::Signal(signal)) => format!("was killed by signal {signal}"),
            Some(Exit::LimitExceeded(message)) => message,
            Some(other) => format!("ended: {other:?}"),
            None => "closed its connection".to_owned(),
        };
        format!(
            "MCP server `{name}` {how} while the call was in flight{}",
            tail_note(&self.stderr)
        )
    }

    /// Has the deadline keeper kill the server at `deadline` unless the returned guard is
    /// dropped first. A remote server runs nothing here: nothing to keep.
    pub fn keep_until(&self, deadline: Instant) -> Result<Option<Armed>, String> {
        match &self.link {
            Link::Process(server) => server.keep_until(deadline).map(Some),
            Link::Remote(_) => Ok(None),
        }
    }

    /// The gate the instance's connections go through, when it has one.
    pub fn egress(&self) -> Option<&Arc<Gate>> {
        self.egress.as_ref()
    }

    /// Opens a window over what the instance's sandbox uses (see `process::usage`): from
    /// now, or `from_start`, since it started. None for a remote server (nothing of it runs
    /// here) and without cgroups.
    pub fn usage_window(&self, from_start: bool) -> Option<UsageWindow> {
        match &self.link {
            Link::Process(server) => server.usage_window(from_start),
            Link::Remote(_) => None,
        }
    }

    /// What the instance's sandbox used since `window` opened.
    pub fn usage(&self, window: &UsageWindow) -> Usage {
        match &self.link {
            Link::Process(server) => server.usage(window),
            Link::Remote(_) => Usage::default(),
        }
    }

    /// Stops the server and everything it started (a remote one: its connection).
    pub fn kill(&self) {
        match &self.link {
            Link::Process(server) => server.kill(),
            Link::Remote(proxy) => {
                proxy.abort();
                self.ended.cancel();
            }
        }
    }

    /// The end of the server's stderr, for its logs.
    pub fn stderr_tail(&self) -> String {
        tail(&self.stderr)
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Tells the server a request was given up on, when dropped armed (`peer` set).
struct Abandoned {
    peer: Option<rmcp::Peer<RoleClient>>,
    id: rmcp::model::RequestId,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else {
            return;
        };
        let id = self.id.clone();
        // Dropped outside a runtime only when the daemon ends, and the server with it.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(
                        Some(id),
                        Some("request abandoned by the caller".into()),
                    ))
                    .await;
            });
        }
    }
}

fn tail(kept: &Mutex<VecDeque<u8>>) -> String {
    let bytes: Vec<u8> = kept
        .lock()
        .map(|kept| kept.iter().copied().collect())
        .unwrap_or_default();
    String::from_utf8_lossy(&bytes).trim().to_owned()
}

fn tail_note(kept: &Mutex<VecDeque<u8>>) -> String {
    let tail = tail(kept);
    if tail.is_empty() {
        String::new()
    } else {
        // The last lines are what says why.
        let lines: Vec<&str> = tail.lines().rev().take(10).collect();
        let lines: Vec<&str> = lines.into_iter().rev().collect();
        format!("\nstderr (end):\n{}", lines.join("\n"))
    }
}
