//! Approvals for connections: when a running call's profile has `ask_for_unlisted`, a connect
//! to a host outside its allow-list is put to the run's approvers through the same broker,
//! events and deadlines as a call's approval, while the call waits. An approval holds for the
//! rest of the run only; a denial, or no answer by the deadline, fails that connection and
//! the tool sees the gate's refusal. Under the `never` policy nobody is asked: the connection
//! is refused at once.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use airlock_proto::v1 as pb;
use futures::FutureExt as _;
use futures::future::BoxFuture;
use pb::run_event::Event;

use super::log::RunLog;
use crate::egress::EgressApprover;
use crate::ids;
use crate::policy::{ApprovalBroker, ApprovalPolicy, Binding, Outcome, connect_digest};
use crate::tools::{Risk, Tool};
use crate::wire;

/// The hosts approved so far in one run, shared by all its calls.
pub type ApprovedHosts = Arc<Mutex<HashSet<(String, u16)>>>;

/// Asks about the unlisted hosts of one call.
pub struct NetworkApprover {
    pub approvals: Arc<ApprovalBroker>,
    pub log: Arc<RunLog>,
    pub approved: ApprovedHosts,
    pub session_id: String,
    pub step_id: String,
    pub call_id: String,
    pub tool: Arc<Tool>,
    /// The call's arguments, canonical JSON.
    pub arguments: String,
    pub policy: ApprovalPolicy,
    pub timeout: Duration,
}

impl NetworkApprover {
    fn is_approved(&self, key: &(String, u16)) -> bool {
        self.approved
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(key)
    }

    fn request(&self, host: &str, port: u16) -> pb::ApprovalRequest {
        let arguments: serde_json::Value =
            serde_json::from_str(&self.arguments).unwrap_or(serde_json::Value::Null);
        let profile = self.tool.profile.name.clone();
        let binding = Binding {
            run_id: self.log.run_id(),
            step_id: &self.step_id,
            call_id: &self.call_id,
            tool: self.tool.name(),
            tool_digest: self.tool.digest(),
            arguments: &arguments,
            profile: &profile,
            policy: self.policy.as_str(),
        };
        // Bound to the call's own binding as well, so an answer cannot be moved to another
        // call or host.
        let digest = connect_digest(&binding, host, port);
        let timeout_ms = i64::try_from(self.timeout.as_millis()).unwrap_or(i64::MAX);
        pb::ApprovalRequest {
            approval_id: ids::approval_id(),
            run_id: self.log.run_id().to_owned(),
            session_id: self.session_id.clone(),
            step_id: self.step_id.clone(),
            call_id: self.call_id.clone(),
            tool: self.tool.name().to_owned(),
            arguments_json: self.arguments.clone(),
            risk: wire::risk(Risk::Network) as i32,
            preview: Some(pb::Preview {
                kind: "connect".into(),
                text: format!(
                    "{tool} wants to connect to {host}:{port}, which profile `{profile}` does not list; \
                     an approval lets this run connect to it until the run ends",
                    tool = self.tool.name(),
                ),
                truncated: false,
                error: String::new(),
            }),
            deadline_ms: ids::now_ms().saturating_add(timeout_ms),
            digest,
            reason: format!("a connection to {host}:{port}, outside the allow-list"),
            state: pb::ApprovalState::Pending as i32,
            detail: String::new(),
            network: Some(pb::NetworkAccess {
                host: host.to_owned(),
                port: u32::from(port),
            }),
            profile,
        }
    }

    async fn ask_once(&self, host: String, port: u16) -> bool {
        let key = (host, port);
        if self.is_approved(&key) {
            return true;
        }
        // `never` asks nobody: a run left unattended must not wait on a question no one
        // will answer, so what would need asking is refused at once.
        if self.policy == ApprovalPolicy::Never {
            return false;
        }
        let (host, port) = (&key.0, key.1);
        let request = self.request(host, port);
        let approval_id = request.approval_id.clone();
        let requested = Event::ApprovalRequested(pb::ApprovalRequested {
            request: Some(request.clone()),
        });
        if let Err(err) = self.log.append(&self.step_id, requested) {
            // A question that cannot be recorded is not asked: the connection is refused.
            tracing::warn!(run = %self.log.run_id(), error = %err, "cannot record a connection's approval request");
            return false;
        }
        // A grant key of this run and host alone: "approve for the session" must not outlive
        // the run for a connection.
        let grant_key = format!("connect:{}:{approval_id}", self.log.run_id());
        let (decision, reason, decided_by) = match self.approvals.ask(request, grant_key).await {
            Outcome::Answered(answer) => (answer.decision, answer.reason, answer.decided_by),
            Outcome::Expired => (
                pb::Decision::Deny,
                "no answer by the deadline".to_owned(),
                "deadline".to_owned(),
            ),
        };
        let approved = match decision {
            pb::Decision::ApproveOnce | pb::Decision::ApproveSession => true,
            pb::Decision::Deny | pb::Decision::Unspecified => false,
        };
        let resolved = Event::ApprovalResolved(pb::ApprovalResolved {
            approval_id,
            call_id: self.call_id.clone(),
            decision: decision as i32,
            reason,
            decided_by,
        });
        if let Err(err) = self.log.append(&self.step_id, resolved) {
            tracing::warn!(run = %self.log.run_id(), error = %err, "cannot record a connection's approval");
            return false;
        }
        if approved {
            self.approved
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(key);
        }
        approved
    }
}

impl EgressApprover for NetworkApprover {
    fn ask(&self, host: &str, port: u16) -> BoxFuture<'_, bool> {
        self.ask_once(host.to_ascii_lowercase(), port).boxed()
    }
}
