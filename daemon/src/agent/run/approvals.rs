//! Step 5's second half, "ask": one approvals service for every subject a run asks about —
//! a tool call, or a connection a running call makes to a host its profile does not list.
//! Every question is built, persisted, recorded and put to the approvers the same way, and
//! its answer is persisted and recorded the same way: only how the question is bound (its
//! digest) and what an answer covers differ.
//!
//! A question is put to approvers only once it is committed — the request row and its
//! `approval_requested` event — so no approver ever answers a question a crash could lose;
//! and a resumed run waiting on a call's question waits again for the same request, with its
//! deadline.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use airlock_proto::v1 as pb;
use futures::FutureExt as _;
use futures::future::BoxFuture;
use pb::run_event::Event;
use serde_json::Value;

use super::super::log::RunLog;
use crate::domain::{DecidedBy, Decision};
use crate::egress::EgressApprover;
use crate::ids::{self, ApprovalId, CallId, RunId, SessionId, StepId};
use crate::policy::{
    ApprovalBroker, ApprovalPolicy, Asked, Binding, Outcome, binding_digest, connect_digest,
};
use crate::store::{ApprovalResolution, RunState, Store, StoreError};
use crate::tools::{Risk, Tool};
use crate::wire;

/// What a question is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// Whether the call may run at all.
    Call,
    /// Whether the running call may connect to `host:port`.
    Connection { host: String, port: u16 },
}

/// One question about one call.
pub struct Question<'a> {
    pub subject: Subject,
    pub step_id: &'a StepId,
    pub call_id: &'a CallId,
    pub tool: &'a Arc<Tool>,
    /// The call's canonical arguments.
    pub arguments: &'a Value,
    /// Why the policy asks.
    pub why: String,
    pub preview: pb::Preview,
    /// What an answer "for the session" is remembered as.
    pub grant_key: String,
}

/// A question's answer, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered {
    pub approval_id: Option<ApprovalId>,
    pub resolution: ApprovalResolution,
}

impl Answered {
    /// `None` when the subject may go ahead, the refusal (for the model) when not.
    pub fn refusal(&self) -> Option<String> {
        let resolution = &self.resolution;
        if resolution.decision.approves() {
            return None;
        }
        Some(
            match (resolution.decided_by, resolution.reason.is_empty()) {
                (DecidedBy::Deadline, _) => {
                    "nobody approved this call before its deadline, so it did not run".to_owned()
                }
                (by, true) => format!("the {by} denied this call"),
                (by, false) => format!("the {by} denied this call: {}", resolution.reason),
            },
        )
    }
}

/// The hosts approved so far in one run, shared by all its calls.
type ApprovedHosts = Arc<Mutex<HashSet<(String, u16)>>>;

pub struct Approvals {
    broker: Arc<ApprovalBroker>,
    store: Arc<dyn Store>,
    log: Arc<RunLog>,
    run_id: RunId,
    session_id: SessionId,
    policy: ApprovalPolicy,
    timeout: Duration,
    approved_hosts: ApprovedHosts,
}

impl Approvals {
    pub fn new(
        broker: Arc<ApprovalBroker>,
        store: Arc<dyn Store>,
        log: Arc<RunLog>,
        session_id: SessionId,
        policy: ApprovalPolicy,
        timeout: Duration,
    ) -> Approvals {
        Approvals {
            run_id: log.run_id().clone(),
            broker,
            store,
            log,
            session_id,
            policy,
            timeout,
            approved_hosts: ApprovedHosts::default(),
        }
    }

    pub fn broker(&self) -> &Arc<ApprovalBroker> {
        &self.broker
    }

    /// The request a question becomes: bound by its digest to exactly this call (and host),
    /// with the run's deadline for answers.
    fn request(&self, question: &Question<'_>) -> pb::ApprovalRequest {
        let profile = question.tool.profile.name.clone();
        let binding = Binding {
            run_id: self.run_id.as_str(),
            step_id: question.step_id.as_str(),
            call_id: question.call_id.as_str(),
            tool: question.tool.name(),
            tool_digest: question.tool.digest(),
            arguments: question.arguments,
            profile: &profile,
            policy: self.policy.as_str(),
        };
        let (digest, risk, network) = match &question.subject {
            Subject::Call => (binding_digest(&binding), question.tool.manifest.risk, None),
            // Bound to the call's own binding as well, so an answer cannot be moved to
            // another call or host.
            Subject::Connection { host, port } => (
                connect_digest(&binding, host, *port),
                Risk::Network,
                Some(pb::NetworkAccess {
                    host: host.clone(),
                    port: u32::from(*port),
                }),
            ),
        };
        let timeout_ms = i64::try_from(self.timeout.as_millis()).unwrap_or(i64::MAX);
        pb::ApprovalRequest {
            approval_id: ApprovalId::new().into_string(),
            run_id: self.run_id.to_string(),
            session_id: self.session_id.to_string(),
            step_id: question.step_id.to_string(),
            call_id: question.call_id.to_string(),
            tool: question.tool.name().to_owned(),
            arguments_json: question.arguments.to_string(),
            risk: wire::risk(risk) as i32,
            profile,
            preview: Some(question.preview.clone()),
            deadline_ms: ids::now_ms().saturating_add(timeout_ms),
            digest,
            reason: question.why.clone(),
            state: pb::ApprovalState::Pending as i32,
            detail: String::new(),
            network,
            // A run's requests are owned through the run.
            tenant: String::new(),
        }
    }

    /// A new question: registered, kept, recorded, committed, then put to the approvers.
    pub async fn ask(&self, question: &Question<'_>) -> Result<Answered, StoreError> {
        let request = self.request(question);
        // Registered before its event can be published: the run's own client may answer
        // the moment it reads it.
        let asked = self
            .broker
            .register(request.clone(), question.grant_key.clone());
        let saved = self.store.save_approval(&request);
        self.log
            .append(Some(question.step_id), Approvals::requested(&request));
        saved.await?;
        self.answer(question, asked).await
    }

    /// Waits again for the answer to `request`, asked by a daemon that has since stopped.
    pub async fn wait_again(
        &self,
        question: &Question<'_>,
        request: pb::ApprovalRequest,
    ) -> Result<Answered, StoreError> {
        let asked = self.broker.register(request, question.grant_key.clone());
        self.answer(question, asked).await
    }

    /// Waits for the answer to a registered question, then keeps and records it.
    async fn answer(&self, question: &Question<'_>, asked: Asked) -> Result<Answered, StoreError> {
        // Approvers see only what a crash cannot lose.
        self.log.committed().await?;
        drop(
            self.store
                .set_run_state(&self.run_id, RunState::WaitingForApproval),
        );
        let approval_id = ApprovalId::from_stored(asked.approval_id());
        let outcome = asked.outcome().await;
        drop(self.store.set_run_state(&self.run_id, RunState::Running));
        let resolution = match outcome {
            Outcome::Answered(answer) => ApprovalResolution {
                decision: answer.decision,
                reason: answer.reason,
                decided_by: answer.decided_by,
                resolved_at_ms: ids::now_ms(),
            },
            Outcome::Expired => ApprovalResolution {
                decision: Decision::Deny,
                reason: "no answer by the deadline".into(),
                decided_by: DecidedBy::Deadline,
                resolved_at_ms: ids::now_ms(),
            },
        };
        if resolution.decision == Decision::ApproveSession && question.subject == Subject::Call {
            drop(
                self.store
                    .add_session_grant(&self.session_id, &question.grant_key),
            );
        }
        let kept = self.store.resolve_approval(&approval_id, &resolution);
        let answered = Answered {
            approval_id: Some(approval_id),
            resolution,
        };
        self.log
            .append(Some(question.step_id), self.resolved(question, &answered));
        kept.await?;
        Ok(answered)
    }

    /// The event that records an answer (also one nobody was asked for: a policy's, a
    /// session grant's, one recorded before a restart).
    pub fn resolved(&self, question: &Question<'_>, answered: &Answered) -> Event {
        let network = match &question.subject {
            Subject::Call => None,
            Subject::Connection { host, port } => Some(pb::NetworkAccess {
                host: host.clone(),
                port: u32::from(*port),
            }),
        };
        let resolution = &answered.resolution;
        Event::ApprovalResolved(pb::ApprovalResolved {
            approval_id: answered
                .approval_id
                .as_ref()
                .map(ApprovalId::to_string)
                .unwrap_or_default(),
            call_id: question.call_id.to_string(),
            decision: wire::decision(resolution.decision) as i32,
            reason: resolution.reason.clone(),
            decided_by: resolution.decided_by.as_str().to_owned(),
            network,
        })
    }

    /// The event that records a question.
    pub fn requested(request: &pb::ApprovalRequest) -> Event {
        Event::ApprovalRequested(pb::ApprovalRequested {
            request: Some(request.clone()),
        })
    }

    /// The asker for the unlisted hosts of one running call.
    pub fn for_connections(
        self: &Arc<Self>,
        step_id: StepId,
        call_id: CallId,
        tool: Arc<Tool>,
        arguments: Value,
    ) -> Arc<dyn EgressApprover> {
        Arc::new(Connections {
            approvals: self.clone(),
            step_id,
            call_id,
            tool,
            arguments,
        })
    }
}

/// Asks about the unlisted hosts of one call: when its profile has `ask_for_unlisted`, a
/// connect to a host outside the allow-list waits for an approval. An approval holds for the
/// rest of the run only; a denial, or no answer by the deadline, fails that connection and
/// the tool sees the gate's refusal. Under the `never` policy nobody is asked: the
/// connection is refused at once.
struct Connections {
    approvals: Arc<Approvals>,
    step_id: StepId,
    call_id: CallId,
    tool: Arc<Tool>,
    arguments: Value,
}

impl Connections {
    async fn ask_once(&self, host: String, port: u16) -> bool {
        let approvals = &self.approvals;
        let key = (host, port);
        let approved = || {
            approvals
                .approved_hosts
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        };
        if approved().contains(&key) {
            return true;
        }
        // `never` asks nobody: a run left unattended must not wait on a question no one
        // will answer, so what would need asking is refused at once.
        if approvals.policy == ApprovalPolicy::Never {
            return false;
        }
        let (host, port) = (key.0.clone(), key.1);
        let question = Question {
            preview: pb::Preview {
                kind: "connect".into(),
                text: format!(
                    "{tool} wants to connect to {host}:{port}, which profile `{profile}` does not \
                     list; an approval lets this run connect to it until the run ends",
                    tool = self.tool.name(),
                    profile = self.tool.profile.name,
                ),
                truncated: false,
                error: String::new(),
            },
            why: format!("a connection to {host}:{port}, outside the allow-list"),
            // "Approve for the session" must not outlive the run for a connection.
            grant_key: format!("connect:{}:{host}:{port}", approvals.run_id),
            subject: Subject::Connection { host, port },
            step_id: &self.step_id,
            call_id: &self.call_id,
            tool: &self.tool,
            arguments: &self.arguments,
        };
        match approvals.ask(&question).await {
            Ok(answered) if answered.resolution.decision.approves() => {
                approved().insert(key);
                true
            }
            Ok(_) => false,
            Err(err) => {
                // A question that cannot be recorded is not asked: the connection is refused.
                tracing::warn!(run = %approvals.run_id, error = %err, "cannot record a connection's approval");
                false
            }
        }
    }
}

impl EgressApprover for Connections {
    fn ask(&self, host: &str, port: u16) -> BoxFuture<'_, bool> {
        self.ask_once(host.to_ascii_lowercase(), port).boxed()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::super::testing::{Follower, Harness, finished, kinds};
    use super::*;
    use crate::policy::{Approver, Verdict};

    /// The first request approvers are shown, once there is one.
    async fn next_request(broker: &ApprovalBroker) -> pb::ApprovalRequest {
        let (pending, mut updates) = broker.subscribe();
        if let Some(request) = pending.into_iter().next() {
            return request;
        }
        loop {
            let update = tokio::time::timeout(Duration::from_secs(60), updates.recv())
                .await
                .expect("a request comes")
                .expect("updates");
            if update.state == pb::ApprovalState::Pending as i32 {
                return update;
            }
        }
    }

    fn verdict(request: &pb::ApprovalRequest, decision: Decision) -> Verdict {
        Verdict {
            approval_id: request.approval_id.clone(),
            decision: Some(decision),
            reason: String::new(),
            digest: request.digest.clone(),
        }
    }

    fn resolutions(log: &[pb::RunEvent]) -> Vec<pb::ApprovalResolved> {
        log.iter()
            .filter_map(|event| match &event.event {
                Some(Event::ApprovalResolved(resolved)) => Some(resolved.clone()),
                _ => None,
            })
            .collect()
    }

    fn risky(harness: &Harness, script: &Value, timeout_ms: u64) -> pb::StartRun {
        let mut start = harness.scripted(script, &["touch"]);
        start.approval_policy = pb::ApprovalPolicy::Risky as i32;
        start.approval_timeout_ms = timeout_ms;
        start
    }

    #[tokio::test]
    async fn approvers_see_only_committed_questions_and_answers_are_kept() {
        let harness = Harness::new();
        let script = json!({"turns": [
            {"tool_calls": [{"name": "touch", "arguments": {}}]},
            {"final": "done"}
        ]});
        let (run_id, mut follower) = harness.start(risky(&harness, &script, 0)).await;
        let request = next_request(harness.runtime.approvals()).await;
        // What the approver sees is already in the store and in the log.
        let call_id = CallId::from_stored(request.call_id.clone());
        let (kept, resolution) = harness
            .store
            .approval_for_call(&run_id, &call_id)
            .await
            .expect("read")
            .expect("the request is kept");
        assert_eq!(kept, request);
        assert_eq!(resolution, None);
        let seen = follower
            .until(|event| matches!(event, Event::ApprovalRequested(_)))
            .await;
        assert_eq!(kinds(&seen).last(), Some(&"approval_requested"));

        harness
            .runtime
            .decide(&verdict(&request, Decision::ApproveOnce))
            .await
            .expect("decides");
        let log = follower.rest().await;
        assert!(kinds(&log).contains(&"tool_started"));
        assert_eq!(finished(&log).final_text, "done");
        let (_, resolution) = harness
            .store
            .approval_for_call(&run_id, &call_id)
            .await
            .expect("read")
            .expect("kept");
        let resolution = resolution.expect("answered");
        assert_eq!(resolution.decision, Decision::ApproveOnce);
        assert_eq!(resolution.decided_by, DecidedBy::Console);
    }

    /// The run's own client reads a question as soon as it is committed, possibly before the
    /// loop that asked it has gone on: its answer must count all the same. Several runs,
    /// each answered the moment the question is read, on a runtime of several threads.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_runs_own_client_may_answer_the_moment_it_reads_the_question() {
        let harness = Harness::new();
        let script = json!({"turns": [
            {"tool_calls": [{"name": "touch", "arguments": {}}]},
            {"final": "done"}
        ]});
        for _ in 0..20 {
            let (run_id, mut follower) = harness.start(risky(&harness, &script, 0)).await;
            let seen = follower
                .until(|event| matches!(event, Event::ApprovalRequested(_)))
                .await;
            let Some(Event::ApprovalRequested(requested)) =
                seen.last().and_then(|event| event.event.clone())
            else {
                unreachable!("until stops at the question");
            };
            let request = requested.request.expect("the request");
            harness
                .runtime
                .decide_for_run(&run_id, &verdict(&request, Decision::ApproveOnce))
                .await;
            let log = follower.rest().await;
            assert!(!kinds(&log).contains(&"decision_rejected"), "{log:#?}");
            assert_eq!(finished(&log).final_text, "done");
        }
    }

    #[tokio::test]
    async fn no_answer_by_the_deadline_is_a_denial_the_model_is_told_about() {
        let harness = Harness::new();
        let script = json!({"turns": [
            {"tool_calls": [{"name": "touch", "arguments": {}}]},
            {"final": "nobody came"}
        ]});
        let log = harness.run(risky(&harness, &script, 50)).await;
        let resolved = resolutions(&log);
        assert_eq!(resolved.len(), 1);
        assert_eq!(resolved[0].decided_by, "deadline");
        assert_eq!(resolved[0].decision, pb::Decision::Deny as i32);
        assert!(!kinds(&log).contains(&"tool_started"));
        assert_eq!(finished(&log).final_text, "nobody came");
    }

    #[tokio::test]
    async fn approval_for_the_session_answers_the_same_call_again_without_asking() {
        let harness = Harness::new();
        let call = json!({"tool_calls": [{"name": "touch", "arguments": {"a": 1}}]});
        let script = json!({"turns": [call, call, {"final": "twice"}]});
        let (_, mut follower) = harness.start(risky(&harness, &script, 0)).await;
        let request = next_request(harness.runtime.approvals()).await;
        harness
            .runtime
            .decide(&verdict(&request, Decision::ApproveSession))
            .await
            .expect("decides");
        let log = follower.rest().await;
        let resolved = resolutions(&log);
        let by: Vec<&str> = resolved.iter().map(|r| r.decided_by.as_str()).collect();
        assert_eq!(by, ["approver", "session grant"]);
        assert_eq!(
            kinds(&log)
                .iter()
                .filter(|kind| **kind == "approval_requested")
                .count(),
            1
        );
        assert_eq!(
            harness.store.session_grants().await.expect("grants").len(),
            1
        );
    }

    /// A connection's question goes the way of a call's — kept, recorded, committed, then
    /// asked — and its approval holds for the rest of the run.
    #[tokio::test]
    async fn a_connection_is_asked_about_like_a_call_and_approved_for_the_run() {
        let harness = Harness::new();
        let run = crate::store::recorded_run(harness.store.as_ref(), "default", 1).await;
        let log = Arc::new(RunLog::new(
            run.run_id.clone(),
            harness.store.clone(),
            1,
            &crate::ids::TurnId::new(),
            Default::default(),
        ));
        let broker = harness.runtime.approvals().clone();
        let approvals = Arc::new(Approvals::new(
            broker.clone(),
            harness.store.clone(),
            log.clone(),
            run.session_id.clone(),
            ApprovalPolicy::Risky,
            Duration::from_secs(60),
        ));
        let tool = harness.runtime.registry().get("noop").expect("noop");
        let asker = approvals.for_connections(StepId::new(), CallId::new(), tool, json!({}));
        let asking = tokio::spawn({
            let asker = asker.clone();
            async move { asker.ask("API.Example.com", 443).await }
        });
        let request = next_request(&broker).await;
        assert_eq!(
            request.network,
            Some(pb::NetworkAccess {
                host: "api.example.com".into(),
                port: 443
            })
        );
        assert_eq!(request.risk, pb::Risk::Network as i32);
        broker
            .decide(
                &verdict(&request, Decision::ApproveOnce),
                &Approver::Console,
            )
            .expect("decides");
        assert!(asking.await.expect("join"));
        // Approved for the run: asked no more.
        assert!(asker.ask("api.example.com", 443).await);
        assert_eq!(broker.pending_count(), 0);

        log.committed().await.expect("committed");
        let mut follower = Follower::of(log.follow(0, None));
        let mut events = Vec::new();
        while events.len() < 3 {
            events.push(follower.next().await.expect("an event"));
        }
        assert_eq!(
            kinds(&events),
            ["model_text", "approval_requested", "approval_resolved"]
        );
        let resolved = resolutions(&events);
        assert_eq!(resolved[0].network, request.network);
        assert_eq!(resolved[0].decided_by, "approver");
        // Not a call's question: the call's own approval is still unasked.
        assert_eq!(
            harness
                .store
                .approval_for_call(&run.run_id, &CallId::from_stored(request.call_id))
                .await
                .expect("read"),
            None
        );
    }

    #[tokio::test]
    async fn under_never_a_connection_is_refused_without_asking() {
        let harness = Harness::new();
        let run = crate::store::recorded_run(harness.store.as_ref(), "default", 1).await;
        let log = Arc::new(RunLog::new(
            run.run_id.clone(),
            harness.store.clone(),
            1,
            &crate::ids::TurnId::new(),
            Default::default(),
        ));
        let approvals = Arc::new(Approvals::new(
            harness.runtime.approvals().clone(),
            harness.store.clone(),
            log.clone(),
            run.session_id.clone(),
            ApprovalPolicy::Never,
            Duration::from_secs(60),
        ));
        let tool = harness.runtime.registry().get("noop").expect("noop");
        let asker = approvals.for_connections(StepId::new(), CallId::new(), tool, json!({}));
        assert!(!asker.ask("example.com", 443).await);
        assert_eq!(log.last_seq(), 1, "nothing recorded");
    }
}
