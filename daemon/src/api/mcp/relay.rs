//! A call in flight at the MCP endpoint, and a hosted server's questions about it on their
//! way to the client that made the call.
//!
//! Every call carries a [`Relay`] down to the hosted server's engine, which puts to it the
//! questions the client offered to answer — elicitation, sampling; `engine::mcp::questions`
//! says when a question is the call's — and a refusal for a capability the client lacks
//! (-32021), which the client gets as that error.
//! The endpoint drives the call ([`Flight::drive`]) until it ends or a question comes up,
//! then puts the question to the client at the revision it speaks:
//!
//! - 2025-11-25 and before: as a request of the server's, from the call's own task, so it
//!   rides the call's POST stream; the answer goes back and the call drives on.
//! - 2026-07-28, which has no server-to-client requests: the call is parked ([`Parked`])
//!   and the client gets an input-required result with the question, keyed as the server
//!   keyed it, and a request state sealed like an approval's (`mrtr.rs`: this daemon's HMAC
//!   key, bound to the tenant, the tool, the arguments' digest and the workspace, expiring
//!   with the approvals' timeout). The client's retry names the parked call; its answers go
//!   to the server and the call drives on — to its end, or to the next question. A state
//!   that was changed, replayed, is another tenant's, call's or daemon's, or has expired
//!   opens nothing, and the retry is refused with a JSON-RPC error.
//!
//! A parked call keeps its admission slot, so a tenant parks at most as many calls as it
//! may have in flight; it goes on running towards its own deadline while parked, and is
//! stopped (with the server's question unanswered) when the client does not come back
//! within the state's life.
//!
//! Logging and sampling are deprecated by the newest MCP revision (SEP-2577) and still what
//! clients of every earlier one, and the servers airlock hosts, use.
#![expect(deprecated)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use futures::future::BoxFuture;
use rmcp::model::{
    ClientCapabilities, CreateMessageResult, ElicitResult, ErrorCode, ErrorData, InputRequest,
    InputRequests, InputRequiredResult, InputResponses, ListRootsResult, LoggingLevel,
    LoggingMessageNotificationParam, ProgressNotificationParam,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::mrtr::States;
use crate::api::quota::Slot;
use crate::engine::mcp::Questions;
use crate::output::StreamKind;
use crate::policy::sha256_of;
use crate::tools::{Call, ExecutionEvent, Executor, ToolResult};

/// The label of a parked call's state's authenticated data (see `mrtr.rs`).
const DOMAIN: &str = "airlock/mcp/question-state/v1";

/// Questions a call may have on their way at once: a server asks one round at a time.
const QUESTIONS_IN_FLIGHT: usize = 1;

/// The refusal of a retry whose state names no parked call of this daemon.
pub const STALE_QUESTION: &str = "the request state does not hold for this call: it was \
    changed, has expired, was answered already, or belongs to another call, tenant or daemon; \
    call the tool again";

/// A question on its way to the client, and where its answers go.
pub struct Asked {
    pub requests: InputRequests,
    answer: oneshot::Sender<InputResponses>,
}

impl Asked {
    /// Gives the server the client's answers to its requests, nothing else.
    pub fn answer(self, mut answers: InputResponses) {
        answers.retain(|key, _| self.requests.contains_key(key));
        let _ = self.answer.send(answers);
    }

    /// Whether `answers` holds an answer of the right kind to every request (a form's to a
    /// form, a completion to a sampling request).
    pub fn answered_by(&self, answers: &InputResponses) -> bool {
        self.requests.iter().all(|(key, request)| {
            answers
                .get(key)
                .is_some_and(|answer| answers_kind(request, answer))
        })
    }
}

/// The client of one call, as the hosted server's engine sees it.
pub struct Relay {
    asked: mpsc::Sender<Asked>,
    elicits: bool,
    samples: bool,
    /// Answers the client sent with its first request (a 2026-07-28 client may answer a
    /// stateless server's question before it is asked), for the server's first round.
    opening: Mutex<Option<InputResponses>>,
    /// The capabilities the server said the client lacks, when it refused the call so.
    lacked: Mutex<Option<ClientCapabilities>>,
}

impl Questions for Relay {
    fn elicits(&self) -> bool {
        self.elicits
    }

    fn samples(&self) -> bool {
        self.samples
    }

    fn opening_answers(&self) -> Option<InputResponses> {
        self.opening
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    fn lacks(&self, error: &ErrorData) {
        // Only the capabilities are kept, read as capabilities: the server's own words and
        // data do not reach the client through an error of the endpoint's.
        let required = error
            .data
            .as_ref()
            .and_then(|data| data.get("requiredCapabilities"))
            .and_then(|required| serde_json::from_value(required.clone()).ok())
            .unwrap_or_default();
        *self.lacked.lock().unwrap_or_else(PoisonError::into_inner) = Some(required);
    }

    fn ask(&self, requests: InputRequests) -> BoxFuture<'static, Result<InputResponses, String>> {
        let asked = self.asked.clone();
        Box::pin(async move {
            let (answer, answered) = oneshot::channel();
            asked
                .send(Asked { requests, answer })
                .await
                .map_err(|_| "the MCP client's call has ended".to_owned())?;
            answered
                .await
                .map_err(|_| "the MCP client did not answer".to_owned())
        })
    }
}

/// What the client offers to answer, read from its request.
#[derive(Debug, Clone, Copy, Default)]
pub struct Offers {
    pub elicits: bool,
    pub samples: bool,
}

/// A call the executor runs for the endpoint.
pub struct Flight {
    running: tokio::task::JoinHandle<ToolResult>,
    reports: mpsc::UnboundedReceiver<ExecutionEvent>,
    asked: mpsc::Receiver<Asked>,
    /// Output bytes reported as progress so far, across every request that drove the call.
    written: u64,
    /// When the executor ends the call: a question still unanswered then is given up.
    pub deadline: Instant,
    /// Cancelled once the call has ended, however it ended.
    done: CancellationToken,
    /// The call's client, as its server's engine sees it.
    relay: Arc<Relay>,
    cancel: CancellationToken,
    /// Stops the call when the flight is dropped (its client went away, or never retried).
    _stop: DropGuard,
    /// The tenant's admission, held for as long as the call is.
    _slot: Slot,
}

/// Where a call's drive stopped.
pub enum Landed {
    Done(Box<ToolResult>),
    Asked(Asked),
}

impl Flight {
    /// Starts `call`, its server's questions relayed when the client `offers` to answer
    /// them, `opening` the answers its request carried.
    pub fn start(
        executor: Arc<Executor>,
        call: Call,
        slot: Slot,
        offers: Offers,
        opening: Option<InputResponses>,
    ) -> Flight {
        let (asking, asked) = mpsc::channel(QUESTIONS_IN_FLIGHT);
        // Every MCP client's call carries one: a server that needs what the client lacks
        // says so to the client, whatever it offers.
        let relay = Arc::new(Relay {
            asked: asking,
            elicits: offers.elicits,
            samples: offers.samples,
            opening: Mutex::new(opening),
            lacked: Mutex::default(),
        });
        let call = call.with_questions(relay.clone());
        let deadline = Instant::now() + call.timeout;
        let (events, reports) = mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        let done = CancellationToken::new();
        let running = tokio::spawn({
            let cancel = cancel.clone();
            let done = done.clone().drop_guard();
            async move {
                let result = executor.run(call, events, cancel).await;
                drop(done);
                result
            }
        });
        Flight {
            running,
            reports,
            asked,
            written: 0,
            deadline,
            done,
            relay,
            _stop: cancel.clone().drop_guard(),
            cancel,
            _slot: slot,
        }
    }

    /// The error to answer the client with instead of the call's result: the server
    /// refused the call because the client lacks what it names.
    pub fn lacked(&self) -> Option<ErrorData> {
        let required = self
            .relay
            .lacked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        Some(ErrorData::new(
            ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
            "the tool's server needs a capability the client did not declare",
            Some(json!({ "requiredCapabilities": required })),
        ))
    }

    /// Drives the call for the request of `context` until it ends or its server asks
    /// something: its output as progress (when the request asked for it), its stderr lines
    /// as log messages of `tool` (when `logs`). The request's cancellation stops the call.
    pub async fn drive(
        &mut self,
        context: &RequestContext<RoleServer>,
        tool: &str,
        logs: bool,
    ) -> Result<Landed, ErrorData> {
        let progress = context.meta.get_progress_token();
        loop {
            let event = tokio::select! {
                event = self.reports.recv() => event,
                Some(asked) = self.asked.recv() => return Ok(Landed::Asked(asked)),
                () = context.ct.cancelled() => {
                    self.cancel.cancel();
                    return Err(ErrorData::internal_error("cancelled by the client", None));
                }
            };
            let chunk = match &event {
                Some(ExecutionEvent::Output(chunk)) => chunk,
                Some(ExecutionEvent::Started { .. }) => continue,
                // The call's last event. The channel may stay open a little longer: a
                // finished WebAssembly call's store, which still holds the capture and so a
                // sender, is torn down when its worker thread next parks.
                Some(ExecutionEvent::Finished(_)) | None => break,
            };
            if let Some(token) = &progress {
                self.written += chunk.data.len() as u64;
                let mut update = ProgressNotificationParam::new(token.clone(), self.written as f64);
                update.message = Some(format!("{} bytes of output", self.written));
                let _ = context.peer.notify_progress(update).await;
            }
            if logs && chunk.stream == StreamKind::Stderr {
                for line in String::from_utf8_lossy(&chunk.data).lines() {
                    if line.trim().is_empty() {
                        continue;
                    }
                    let message = LoggingMessageNotificationParam::new(
                        LoggingLevel::Info,
                        Value::String(line.to_owned()),
                    )
                    .with_logger(tool.to_owned());
                    let _ = context.peer.notify_logging_message(message).await;
                }
            }
        }
        let result = (&mut self.running)
            .await
            .map_err(|err| ErrorData::internal_error(format!("the call failed: {err}"), None))?;
        Ok(Landed::Done(Box::new(result)))
    }
}

impl Flight {
    /// Puts `asked` to a client of 2025-11-25 or before, as requests of the server's on the
    /// stream of the request of `context`, one at a time, and gives the server the answers.
    /// A request the client failed or refused to answer has none (the server's engine takes
    /// that as a decline). Given up — the server reads no answer — when the call ends (it
    /// crashed, or its deadline passed) or the server stops waiting; an error when the
    /// client cancels the request.
    pub async fn ask_in_stream(
        &self,
        context: &RequestContext<RoleServer>,
        mut asked: Asked,
    ) -> Result<(), ErrorData> {
        let Asked { requests, answer } = &mut asked;
        let asking = async {
            let mut answers = InputResponses::new();
            for (key, request) in requests.iter() {
                let answer = match request {
                    InputRequest::Elicitation(request) => context
                        .peer
                        .create_elicitation(request.params.clone())
                        .await
                        .ok()
                        .and_then(|answer| serde_json::to_value(answer).ok()),
                    InputRequest::CreateMessage(request) => context
                        .peer
                        .create_message(request.params.clone())
                        .await
                        .ok()
                        .and_then(|answer| serde_json::to_value(answer).ok()),
                    // Never relayed (`engine::mcp::questions::answers`).
                    _ => None,
                };
                if let Some(answer) = answer {
                    answers.insert(key.clone(), answer);
                }
            }
            answers
        };
        let answers = tokio::select! {
            answers = asking => answers,
            () = self.done.cancelled() => return Ok(()),
            () = tokio::time::sleep_until(self.deadline.into()) => return Ok(()),
            () = answer.closed() => return Ok(()),
            () = context.ct.cancelled() => {
                self.cancel.cancel();
                return Err(ErrorData::internal_error("cancelled by the client", None));
            }
        };
        asked.answer(answers);
        Ok(())
    }
}

/// Whether `answer` is of the kind `request` asks for.
fn answers_kind(request: &InputRequest, answer: &Value) -> bool {
    match request {
        InputRequest::Elicitation(_) => {
            serde_json::from_value::<ElicitResult>(answer.clone()).is_ok()
        }
        InputRequest::CreateMessage(_) => {
            serde_json::from_value::<CreateMessageResult>(answer.clone()).is_ok()
        }
        // Never relayed (`engine::mcp::questions::answers`): no answer is the client's.
        _ => false,
    }
}

/// The answers a client sent with its first request that a server may be given: those of
/// a kind the client offers to answer (a form's, a completion), never a roots listing
/// (roots are airlock's to answer).
pub fn opening(answers: Option<InputResponses>, offers: Offers) -> Option<InputResponses> {
    let mut answers = answers?;
    answers.retain(|_, answer| {
        (offers.elicits && serde_json::from_value::<ElicitResult>(answer.clone()).is_ok())
            || (offers.samples
                && serde_json::from_value::<CreateMessageResult>(answer.clone()).is_ok())
    });
    (!answers.is_empty()).then_some(answers)
}

/// The key of the first of `answers` that is no answer to any kind of input request (an
/// elicitation's, a sampling's or a roots listing's), when one is not: a client's answers
/// are checked before anything of them reaches a server, which may trust their shape.
pub fn malformed(answers: &InputResponses) -> Option<&str> {
    answers
        .iter()
        .find(|(_, answer)| {
            serde_json::from_value::<ElicitResult>((*answer).clone()).is_err()
                && serde_json::from_value::<CreateMessageResult>((*answer).clone()).is_err()
                && serde_json::from_value::<ListRootsResult>((*answer).clone()).is_err()
        })
        .map(|(key, _)| key.as_str())
}

/// The call a parked call's state is bound to: the tenant's call of the tool with these
/// arguments in this workspace, as the retry names it.
#[derive(Debug, Clone)]
pub struct Asking {
    pub tenant: String,
    pub tool: String,
    /// SHA-256 of the arguments as the client sent them.
    pub arguments: String,
    pub workspace: Option<String>,
    /// The tool is a hosted server's (not bound: what the tool is, found when it was
    /// admitted).
    pub hosted: bool,
}

impl Asking {
    pub fn new(tenant: &str, tool: &str, arguments: &Value, workspace: Option<&str>) -> Asking {
        Asking {
            tenant: tenant.to_owned(),
            tool: tool.to_owned(),
            arguments: sha256_of(arguments),
            workspace: workspace.map(str::to_owned),
            hosted: false,
        }
    }

    /// Whether `other` names the same call: every bound field alike.
    fn same_call(&self, other: &Asking) -> bool {
        self.associated_data() == other.associated_data()
    }

    /// The authenticated data: a JSON array, so no field's bytes can pass for another's.
    fn associated_data(&self) -> Vec<u8> {
        json!([
            DOMAIN,
            self.tenant,
            self.tool,
            self.arguments,
            self.workspace
        ])
        .to_string()
        .into_bytes()
    }
}

/// Calls waiting for their client's retry, by id. (Generic over what a call is so that its
/// states can be tested without running one.)
pub struct Parked<F = Flight> {
    waiting: Mutex<HashMap<String, Waiting<F>>>,
}

impl<F> Default for Parked<F> {
    fn default() -> Self {
        Parked {
            waiting: Mutex::default(),
        }
    }
}

struct Waiting<F> {
    asking: Asking,
    flight: F,
    asked: Asked,
    /// When the call is let go, however often it is parked again.
    until: Instant,
    /// Removes the call when its state expires.
    _expiry: AbortOnDrop,
}

/// A parked call its client's retry took.
pub struct Resumed<F> {
    pub flight: F,
    /// The question it waited on.
    pub asked: Asked,
    /// The call as it was parked.
    pub asking: Asking,
    /// When it is let go if parked again.
    pub until: Instant,
}

/// When a call parked now is let go: when its state expires or the call's own deadline
/// passes, whichever is first (a parked call never holds its slot past its deadline).
pub fn park_until(states: &States, deadline: Instant) -> Instant {
    (Instant::now() + states.ttl()).min(deadline)
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<F: Send + 'static> Parked<F> {
    /// Parks `flight` until the client answers `asked`, at the latest `until` (for a call
    /// parked again, the time its first parking set); the input-required result that asks
    /// it. `None` when no state could be sealed or `until` has passed (the call is then
    /// stopped, dropped).
    pub fn park(
        self: &Arc<Self>,
        states: &States,
        asking: Asking,
        flight: F,
        asked: Asked,
        until: Instant,
    ) -> Option<InputRequiredResult> {
        let life = until.checked_duration_since(Instant::now())?;
        if life.is_zero() {
            return None;
        }
        let mut id = [0u8; 16];
        getrandom::fill(&mut id).ok()?;
        let id = hex::encode(id);
        let state = states.seal_ticket(
            life,
            &id,
            &asking.tenant,
            &asking.tool,
            &asking.associated_data(),
        )?;
        let result = InputRequiredResult::new(Some(asked.requests.clone()), Some(state));
        let expiry = tokio::spawn({
            let parked = Arc::downgrade(self);
            let id = id.clone();
            async move {
                tokio::time::sleep_until(until.into()).await;
                if let Some(parked) = parked.upgrade() {
                    let gone = parked.lock().remove(&id);
                    if gone.is_some() {
                        tracing::info!(
                            "a parked MCP call's client did not come back; the call is stopped"
                        );
                    }
                }
            }
        });
        self.lock().insert(
            id,
            Waiting {
                asking,
                flight,
                asked,
                until,
                _expiry: AbortOnDrop(expiry.abort_handle()),
            },
        );
        Some(result)
    }

    /// The parked call `sealed` names, taken (with the question it waits on, and the call as
    /// it was parked), when the state opens for `asking` and the call is still parked.
    pub fn take(&self, states: &States, asking: &Asking, sealed: &str) -> Option<Resumed<F>> {
        let id = states.open_ticket(
            sealed,
            &asking.tenant,
            &asking.tool,
            &asking.associated_data(),
        )?;
        let mut waiting = self.lock();
        // Checked again against what was parked: the state's binding and the record's must
        // agree, or neither is trusted.
        if waiting
            .get(&id)
            .is_none_or(|waiting| !waiting.asking.same_call(asking))
        {
            return None;
        }
        let waiting = waiting.remove(&id)?;
        Some(Resumed {
            flight: waiting.flight,
            asked: waiting.asked,
            asking: waiting.asking,
            until: waiting.until,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting<F>>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
#[path = "relay_tests.rs"]
mod tests;
