//! Approvals answered in-band, for MCP clients of the 2026-07-28 revision, which has no
//! server-to-client requests: a call that needs a person's approval is answered with an
//! input-required result (SEP-2322, multi-round-trip requests) carrying the question as an
//! elicitation and a request state; the client asks its person and retries the call with
//! the answer and the state.
//!
//! The question itself is held by `direct_approval` — registered with the broker, so the
//! tenant's approvers see it at once and may answer it too — and the retry's answer is
//! recorded there like any approver's: the call runs only on an approval the broker
//! recorded, and the first answer counts.
//!
//! The request state is the client's to echo and so a stranger's: it is sealed with
//! rmcp's `RequestStateCodec` (HMAC-SHA256, a key this daemon drew at start), expires with
//! the question, and is bound — as authenticated data, not stored in it — to the tenant,
//! the tool and its digest, the arguments' digest, the workspace and the profile, so that a
//! state changed, replayed against other arguments, another tool or workspace, or brought
//! by another tenant does not open. What it names, the held question, is taken by the
//! first retry: a replayed state finds nothing.
//!
//! The key is this daemon's alone: a retry that reaches another daemon of a fleet (behind
//! one address, without sticky routing) is refused and the call must be made again. Sharing
//! a key across a fleet needs a fleet-wide record that a question was answered (the held
//! question is this daemon's memory), see SECURITY.md.

use std::time::Duration;

use airlock_proto::v1 as pb;
use rmcp::model::{
    ElicitRequest, ElicitResult, ElicitationAction, InputRequest, InputRequests,
    InputRequiredResult, InputResponses, RequestStateCodec, SealOptions,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::replies::refusal_text;
use crate::api::direct_approval::InBand;
use crate::api::direct_call::DirectCalls;
use crate::api::tenants::Tenant;
use crate::domain::Decision;
use crate::policy::sha256_of;
use crate::tools::Call;

/// The key of the approval question in an input-required result's `inputRequests`, and of
/// its answer in the retry's `inputResponses`.
pub const APPROVAL_INPUT: &str = "airlock_approval";

/// The label every approval state's authenticated data starts with: a state sealed for
/// anything else this key seals (a hosted server's question, `relay.rs`) does not open as an
/// approval's.
const DOMAIN: &str = "airlock/mcp/approval-state/v1";

/// Bytes of the key drawn at start: HMAC-SHA256's block-size-free key, as long as its
/// output, which is rmcp's minimum too.
const KEY_BYTES: usize = 32;

/// The refusal of a retry whose state does not hold, one text for every reason (rmcp's
/// advice: a client learns nothing from which check failed; the daemon's log says).
pub const STALE_STATE: &str = "DENIED: the approval's request state does not hold for this \
    call: it was changed, has expired, was answered already, or belongs to another call, \
    tenant or daemon; call the tool again to be asked again";

/// What a sealed state says, readable by the client (signed, not encrypted): nothing in it
/// is secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Ticket {
    /// The held question (an approval's id, or a parked call's, `relay.rs`).
    approval_id: String,
    tenant: String,
    tool: String,
}

/// The call a state is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    pub tenant: String,
    pub tool: String,
    pub tool_digest: String,
    /// SHA-256 of the canonical (validated) arguments.
    pub arguments: String,
    pub workspace: Option<String>,
    pub profile: String,
}

impl Bound {
    /// The binding of `call` by `tenant`; `None` when its arguments do not validate.
    pub fn of(tenant: &str, call: &Call) -> Option<Bound> {
        let arguments: Value = call.tool.arguments.validate(&call.arguments_json).ok()?;
        Some(Bound {
            tenant: tenant.to_owned(),
            tool: call.tool.name().to_owned(),
            tool_digest: call.tool.digest().to_owned(),
            arguments: sha256_of(&arguments),
            workspace: call
                .workspace
                .as_ref()
                .map(|path| path.display().to_string()),
            profile: call.profile.name.clone(),
        })
    }

    /// The authenticated data: a JSON array, so no field's bytes can pass for another's.
    fn associated_data(&self) -> Vec<u8> {
        json!([
            DOMAIN,
            self.tenant,
            self.tool,
            self.tool_digest,
            self.arguments,
            self.workspace,
            self.profile,
        ])
        .to_string()
        .into_bytes()
    }
}

/// Seals and opens this daemon's request states.
pub struct States {
    codec: RequestStateCodec,
    /// A state's life: its question's.
    ttl: Duration,
}

impl std::fmt::Debug for States {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("States").field("ttl", &self.ttl).finish()
    }
}

impl States {
    /// States under a key drawn now, living `ttl`.
    pub fn new(ttl: Duration) -> Result<States, String> {
        let mut key = [0u8; KEY_BYTES];
        getrandom::fill(&mut key).map_err(|err| err.to_string())?;
        // The key's id names this daemon's start in every state (its log tells a state of
        // another daemon from a forged one); the codec keeps the key itself zeroized.
        let mut kid = [0u8; 8];
        getrandom::fill(&mut kid).map_err(|err| err.to_string())?;
        let states = States::with_key(&hex::encode(kid), &key, ttl);
        key.fill(0);
        states
    }

    /// States under `key` (named `kid` in every state it seals), living `ttl`.
    pub fn with_key(kid: &str, key: &[u8], ttl: Duration) -> Result<States, String> {
        let codec = RequestStateCodec::new_with_keyring(kid, [(kid, key.to_vec())])
            .map_err(|err| err.to_string())?;
        Ok(States { codec, ttl })
    }

    /// A state's life.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The state of held question `approval_id` about `bound`.
    pub fn seal(&self, bound: &Bound, approval_id: &str) -> Option<String> {
        self.seal_ticket(
            self.ttl,
            approval_id,
            &bound.tenant,
            &bound.tool,
            &bound.associated_data(),
        )
    }

    /// The held question a retry of `bound` names in `sealed`, when the state is this
    /// daemon's, unchanged, unexpired and about this very call.
    pub fn open(&self, bound: &Bound, sealed: &str) -> Option<String> {
        self.open_ticket(sealed, &bound.tenant, &bound.tool, &bound.associated_data())
    }

    /// The state naming `held`, for `tenant`'s call of `tool`, bound to `data` (which starts
    /// with the label of what it seals), living `ttl`.
    pub(super) fn seal_ticket(
        &self,
        ttl: Duration,
        held: &str,
        tenant: &str,
        tool: &str,
        data: &[u8],
    ) -> Option<String> {
        let ticket = Ticket {
            approval_id: held.to_owned(),
            tenant: tenant.to_owned(),
            tool: tool.to_owned(),
        };
        let options = SealOptions::new().associated_data(data).ttl(ttl);
        self.codec.seal_json_with(&ticket, &options).ok()
    }

    /// What [`States::seal_ticket`] sealed in `sealed`, when it opens with `data` and is
    /// `tenant`'s call of `tool`.
    pub(super) fn open_ticket(
        &self,
        sealed: &str,
        tenant: &str,
        tool: &str,
        data: &[u8],
    ) -> Option<String> {
        let ticket: Ticket = self
            .codec
            .open_json_with(sealed, data)
            .inspect_err(|err| tracing::debug!(error = %err, "an MCP request state refused"))
            .ok()?;
        // Authenticated already through the data; checked again so that a future change to
        // the data cannot quietly drop a binding.
        (ticket.tenant == tenant && ticket.tool == tool).then_some(ticket.approval_id)
    }
}

/// What a retry brought back.
#[derive(Debug, Default)]
pub struct Retry {
    pub state: Option<String>,
    pub responses: Option<InputResponses>,
}

impl Retry {
    /// The person's answer to the approval question: accepted, or declined or cancelled
    /// (a denial); `None` when the retry carries none that reads as one.
    fn answer(&self) -> Option<Decision> {
        let answer = self.responses.as_ref()?.get(APPROVAL_INPUT)?;
        let answer: ElicitResult = serde_json::from_value(answer.clone()).ok()?;
        Some(if answer.action == ElicitationAction::Accept {
            Decision::ApproveOnce
        } else {
            Decision::Deny
        })
    }
}

/// How the call goes on.
#[derive(Debug)]
pub enum Step {
    /// Ask the person: the client retries with the answer.
    Ask(InputRequiredResult),
    /// Approved (or not asked: arguments that do not validate fail on their own).
    Proceed,
    /// Refused: the call's failed result says why.
    Refused(String),
}

/// The approval of `call` by `tenant` for a client of the 2026-07-28 revision: asked on the
/// first round, answered on the retry.
pub async fn approve(
    calls: &DirectCalls,
    in_band: &InBand,
    states: &States,
    tenant: &Tenant,
    call: &Call,
    retry: Retry,
    cancel: &CancellationToken,
) -> Step {
    let Some(bound) = Bound::of(&tenant.name, call) else {
        return Step::Proceed;
    };
    let Some(sealed) = retry.state.as_deref() else {
        let question = match in_band.ask(&calls.approvals, tenant, call, cancel).await {
            Ok(Some(question)) => question,
            Ok(None) => return Step::Proceed,
            Err(err) => return Step::Refused(refusal_text(err)),
        };
        return match states.seal(&bound, &question.approval_id) {
            Some(state) => Step::Ask(input_required(&question, state)),
            None => {
                Step::Refused("INTERNAL: the approval could not be put to the MCP client".into())
            }
        };
    };
    let Some(approval_id) = states.open(&bound, sealed) else {
        return Step::Refused(STALE_STATE.to_owned());
    };
    let outcome = in_band
        .answer(
            &calls.approvals,
            &tenant.name,
            call,
            &approval_id,
            retry.answer(),
            cancel,
        )
        .await;
    let settled = outcome.map(|outcome| {
        calls
            .approvals
            .settle(&tenant.name, call, &approval_id, outcome)
    });
    match settled {
        None => Step::Refused(STALE_STATE.to_owned()),
        Some(None) => Step::Proceed,
        Some(Some(result)) => Step::Refused(format!("DENIED: {}", result.error_message)),
    }
}

/// The input-required result that puts `question` to the person at the client.
fn input_required(question: &pb::ApprovalRequest, state: String) -> InputRequiredResult {
    let mut requests = InputRequests::new();
    requests.insert(
        APPROVAL_INPUT.to_owned(),
        InputRequest::Elicitation(ElicitRequest::new(airlock_mcp_bridge::question(question))),
    );
    InputRequiredResult::new(Some(requests), Some(state))
}

#[cfg(test)]
#[path = "mrtr_tests.rs"]
mod tests;
