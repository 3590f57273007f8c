//! The approval broker: pending questions, the approvers who answer them, and the rules that
//! make an answer count.
//!
//! An answer counts only for the request it names, only while that request is pending (so a
//! replayed or late answer is refused), only with the request's digest when it carries one,
//! and only from an approver allowed to answer for the request's run. Requests wait until
//! their deadline; no answer by then is a denial. Approvers come and go: every pending
//! request is sent to an approver when it connects, and an approver that leaves takes
//! nothing with it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use airlock_proto::v1 as pb;
use tokio::sync::{broadcast, oneshot};

use crate::domain::{DecidedBy, Decision};
pub use crate::domain::{DecisionError, Verdict};
use crate::ids::RunId;

/// Updates queued for a slow approver before it is told to catch up.
const UPDATE_BUFFER: usize = 1024;

/// The longest reason an approver may give, in bytes: a sentence or two. It is copied into the
/// run's log, the call's observation, the audit log and notifications, so an answer must not
/// be a way to put megabytes into each.
const MAX_REASON_BYTES: usize = 4096;

/// Who sent a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approver {
    /// The client of a run's own stream: may answer that run's requests only.
    RunClient { run_id: RunId },
    /// A client of the `Approvals` stream: may answer any run's requests.
    Console,
}

impl Approver {
    fn decided_by(&self) -> DecidedBy {
        match self {
            Approver::RunClient { .. } => DecidedBy::RunClient,
            Approver::Console => DecidedBy::Console,
        }
    }
}

/// An accepted decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub decision: Decision,
    pub reason: String,
    pub decided_by: DecidedBy,
    /// For an approval for the session: the command prefix it grants (checked against the
    /// question); empty grants the exact call.
    pub grant_prefix: Vec<String>,
}

/// How a request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Answered(Answer),
    /// Nobody answered by the deadline.
    Expired,
}

struct Pending {
    request: pb::ApprovalRequest,
    /// When it was registered: the metrics' age of the oldest waiting request.
    since: std::time::Instant,
    answer: oneshot::Sender<Answer>,
    /// Whether approver consoles have been told of it ([`Asked::outcome`]); until then it is
    /// answered only by a client that already knows its id (the run's own, from its log).
    announced: bool,
}

#[derive(Default)]
struct State {
    pending: HashMap<String, Pending>,
}

pub struct ApprovalBroker {
    state: Mutex<State>,
    updates: broadcast::Sender<pb::ApprovalRequest>,
}

impl Default for ApprovalBroker {
    fn default() -> Self {
        ApprovalBroker {
            state: Mutex::new(State::default()),
            updates: broadcast::channel(UPDATE_BUFFER).0,
        }
    }
}

impl ApprovalBroker {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers `request`: answers count from now on, while approver consoles learn of it
    /// only when [`Asked::outcome`] is awaited. A run registers a question before its event
    /// can reach the run's own client, which may answer the moment it reads it. Dropping
    /// the [`Asked`] withdraws the request.
    pub fn register(self: &Arc<Self>, request: pb::ApprovalRequest) -> Asked {
        let (answer, answered) = oneshot::channel();
        self.lock().pending.insert(
            request.approval_id.clone(),
            Pending {
                request: request.clone(),
                since: std::time::Instant::now(),
                answer,
                announced: false,
            },
        );
        Asked {
            withdraw: Withdraw {
                broker: self.clone(),
                approval_id: request.approval_id.clone(),
                armed: true,
            },
            request,
            answered,
        }
    }

    /// Puts `request` to the approvers at once and waits for an answer until its deadline.
    pub async fn ask(self: &Arc<Self>, request: pb::ApprovalRequest) -> Outcome {
        self.register(request).outcome().await
    }

    /// Applies a decision, or says why it does not count.
    pub fn decide(&self, verdict: &Verdict, approver: &Approver) -> Result<(), DecisionError> {
        let id = &verdict.approval_id;
        let (pending, decision) = {
            let mut state = self.lock();
            let Some(pending) = state.pending.get(id) else {
                return Err(DecisionError::NotPending(id.clone()));
            };
            if let Approver::RunClient { run_id } = approver
                && run_id.as_str() != pending.request.run_id
            {
                return Err(DecisionError::OtherRun {
                    approval_id: id.clone(),
                    run_id: run_id.to_string(),
                });
            }
            if !verdict.digest.is_empty() && verdict.digest != pending.request.digest {
                return Err(DecisionError::DigestMismatch(id.clone()));
            }
            if deadline_of(&pending.request).is_zero() {
                return Err(DecisionError::PastDeadline(id.clone()));
            }
            let Some(decision) = verdict.decision else {
                return Err(DecisionError::NoDecision(id.clone()));
            };
            check_reason(id, &verdict.reason)?;
            check_grant(&pending.request, decision, &verdict.grant_prefix)?;
            let Some(pending) = state.pending.remove(id) else {
                return Err(DecisionError::NotPending(id.clone()));
            };
            (pending, decision)
        };
        let decided_by = approver.decided_by();
        let detail = answered_detail(decision, decided_by);
        if pending.announced {
            let mut update = pending.request;
            update.state = pb::ApprovalState::Resolved as i32;
            update.detail = detail;
            let _ = self.updates.send(update);
        }
        let _ = pending.answer.send(Answer {
            decision,
            reason: verdict.reason.clone(),
            decided_by,
            grant_prefix: verdict.grant_prefix.clone(),
        });
        Ok(())
    }

    /// The requests pending now, and every update from here on.
    pub fn subscribe(
        &self,
    ) -> (
        Vec<pb::ApprovalRequest>,
        broadcast::Receiver<pb::ApprovalRequest>,
    ) {
        let state = self.lock();
        let receiver = self.updates.subscribe();
        let mut pending: Vec<_> = state
            .pending
            .values()
            .filter(|pending| pending.announced)
            .map(|pending| pending.request.clone())
            .collect();
        pending.sort_by_key(|request| request.deadline_ms);
        (pending, receiver)
    }

    /// A pending request, as its approvers see it; none when `approval_id` is not pending.
    pub fn pending(&self, approval_id: &str) -> Option<pb::ApprovalRequest> {
        self.lock()
            .pending
            .get(approval_id)
            .map(|pending| pending.request.clone())
    }

    /// The requests pending for `run_id`.
    pub fn pending_of(&self, run_id: &RunId) -> Vec<String> {
        self.lock()
            .pending
            .values()
            .filter(|pending| pending.request.run_id == run_id.as_str())
            .map(|pending| pending.request.approval_id.clone())
            .collect()
    }

    /// Hands a request over to another daemon of the fleet, which took its run over: it
    /// stops being pending here, without an answer and without a word to the approvers
    /// (the caller tells them how it stands where the run went on, with [`Self::tell`]).
    /// The request, when approvers were shown it.
    pub fn hand_over(&self, approval_id: &str) -> Option<pb::ApprovalRequest> {
        let removed = self.lock().pending.remove(approval_id);
        removed
            .filter(|pending| pending.announced)
            .map(|pending| pending.request)
    }

    /// Tells the approvers `update` of a request this broker no longer holds.
    pub fn tell(&self, update: pb::ApprovalRequest) {
        let _ = self.updates.send(update);
    }

    pub fn pending_count(&self) -> usize {
        self.lock().pending.len()
    }

    /// How many runs wait for at least one answer.
    pub fn runs_waiting(&self) -> usize {
        self.lock()
            .pending
            .values()
            .filter(|pending| !pending.request.run_id.is_empty())
            .map(|pending| pending.request.run_id.as_str())
            .collect::<std::collections::HashSet<_>>()
            .len()
    }

    /// How long the oldest pending request has waited; zero when none waits.
    pub fn oldest_pending_age(&self) -> std::time::Duration {
        self.lock()
            .pending
            .values()
            .map(|pending| pending.since.elapsed())
            .max()
            .unwrap_or_default()
    }

    /// Removes a request without an answer and tells the approvers who saw it.
    fn finish(&self, approval_id: &str, state: pb::ApprovalState, detail: &str) {
        let removed = self.lock().pending.remove(approval_id);
        if let Some(pending) = removed.filter(|pending| pending.announced) {
            let mut update = pending.request;
            update.state = state as i32;
            update.detail = detail.to_owned();
            let _ = self.updates.send(update);
        }
    }
}

/// A reason an approver may give: at most [`MAX_REASON_BYTES`], and no NUL (which no text
/// column of PostgreSQL holds, and no person types).
fn check_reason(approval_id: &str, reason: &str) -> Result<(), DecisionError> {
    let why = if reason.len() > MAX_REASON_BYTES {
        format!(
            "is {} bytes, over the {MAX_REASON_BYTES} allowed",
            reason.len()
        )
    } else if reason.contains('\0') {
        "holds a NUL character".to_owned()
    } else {
        return Ok(());
    };
    Err(DecisionError::BadReason {
        approval_id: approval_id.to_owned(),
        why,
    })
}

/// What approvers are told of a request answered with `decision`.
pub fn answered_detail(decision: Decision, decided_by: DecidedBy) -> String {
    match decision {
        Decision::ApproveOnce => format!("approved once by the {decided_by}"),
        Decision::ApproveSession => format!("approved for the session by the {decided_by}"),
        Decision::Deny => format!("denied by the {decided_by}"),
    }
}

/// A registered request (see [`ApprovalBroker::register`]).
pub struct Asked {
    request: pb::ApprovalRequest,
    answered: oneshot::Receiver<Answer>,
    withdraw: Withdraw,
}

impl Asked {
    pub fn approval_id(&self) -> &str {
        &self.request.approval_id
    }

    /// Tells the approver consoles and waits for an answer until the request's deadline.
    /// Dropping the future withdraws the request.
    pub async fn outcome(self) -> Outcome {
        let Asked {
            request,
            answered,
            withdraw,
        } = self;
        let broker = withdraw.broker.clone();
        let approval_id = request.approval_id.clone();
        let deadline = deadline_of(&request);
        let still_pending = match broker.lock().pending.get_mut(&approval_id) {
            Some(pending) => {
                pending.announced = true;
                true
            }
            // Answered already, by the run's own client.
            None => false,
        };
        if still_pending {
            let _ = broker.updates.send(request);
        }
        // A request removed without an answer (handed over to the daemon that took its run
        // over) is not answered here: its asker waits for the deadline, or for the cancel
        // that follows the hand-over, and records nothing of it.
        let outcome = tokio::select! {
            Ok(answer) = answered => Outcome::Answered(answer),
            () = tokio::time::sleep(deadline) => {
                broker.finish(&approval_id, pb::ApprovalState::Expired, "no answer by the deadline");
                Outcome::Expired
            }
        };
        withdraw.disarm();
        outcome
    }
}

/// Withdraws a request whose asker went away (its run was cancelled).
struct Withdraw {
    broker: Arc<ApprovalBroker>,
    approval_id: String,
    armed: bool,
}

impl Withdraw {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        if self.armed {
            self.broker.finish(
                &self.approval_id,
                pb::ApprovalState::Resolved,
                "withdrawn: the run no longer waits for it",
            );
        }
    }
}

/// Time left until the request's deadline (zero once past).
fn deadline_of(request: &pb::ApprovalRequest) -> Duration {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let deadline = u128::try_from(request.deadline_ms).unwrap_or(0);
    Duration::from_millis(u64::try_from(deadline.saturating_sub(now)).unwrap_or(u64::MAX))
}

/// Whether `decision` (with `prefix`) may answer `request`: an approval for the session only
/// where the policy's question is grantable, and a prefix only of a command it asks about.
fn check_grant(
    request: &pb::ApprovalRequest,
    decision: Decision,
    prefix: &[String],
) -> Result<(), DecisionError> {
    let id = || request.approval_id.clone();
    let policy = request.policy.as_ref();
    if decision == Decision::ApproveSession && policy.is_some_and(|policy| !policy.grantable) {
        return Err(DecisionError::NotGrantable(id()));
    }
    if prefix.is_empty() {
        return Ok(());
    }
    let bad = || DecisionError::BadGrantPrefix {
        approval_id: id(),
        prefix: prefix.to_vec(),
    };
    if decision != Decision::ApproveSession || prefix.iter().any(String::is_empty) {
        return Err(bad());
    }
    let covers = policy.is_some_and(|policy| {
        policy.parts.iter().any(|part| {
            part.decision == pb::PolicyDecision::Ask as i32
                && part.words.len() >= prefix.len()
                && part
                    .words
                    .iter()
                    .zip(prefix)
                    .all(|(word, want)| word == want)
        })
    });
    if covers { Ok(()) } else { Err(bad()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(id: &str, run_id: &str, in_ms: i64) -> pb::ApprovalRequest {
        let now = i64::try_from(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .expect("clock")
                .as_millis(),
        )
        .expect("fits");
        pb::ApprovalRequest {
            approval_id: id.into(),
            run_id: run_id.into(),
            digest: format!("digest-{id}"),
            deadline_ms: now + in_ms,
            state: pb::ApprovalState::Pending as i32,
            ..Default::default()
        }
    }

    fn decision(id: &str, kind: Option<Decision>) -> Verdict {
        Verdict {
            approval_id: id.into(),
            decision: kind,
            reason: "because".into(),
            digest: String::new(),
            grant_prefix: Vec::new(),
        }
    }

    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn an_answer_counts_once_and_only_for_its_request() {
        let broker = Arc::new(ApprovalBroker::default());
        let asking = tokio::spawn({
            let broker = broker.clone();
            async move { broker.ask(request("a1", "r1", 60_000)).await }
        });
        settle().await;
        assert_eq!(
            broker.decide(
                &decision("a2", Some(Decision::ApproveOnce)),
                &Approver::Console
            ),
            Err(DecisionError::NotPending("a2".into()))
        );
        let mut wrong_digest = decision("a1", Some(Decision::ApproveOnce));
        wrong_digest.digest = "digest-of-something-else".into();
        assert_eq!(
            broker.decide(&wrong_digest, &Approver::Console),
            Err(DecisionError::DigestMismatch("a1".into()))
        );
        assert!(matches!(
            broker.decide(
                &decision("a1", Some(Decision::ApproveOnce)),
                &Approver::RunClient {
                    run_id: RunId::from_stored("r2")
                }
            ),
            Err(DecisionError::OtherRun { .. })
        ));
        // A reason no text column holds, or one of megabytes, is refused and changes nothing.
        for reason in ["fine\0".to_owned(), "x".repeat(MAX_REASON_BYTES + 1)] {
            let mut bad = decision("a1", Some(Decision::ApproveOnce));
            bad.reason = reason;
            assert!(matches!(
                broker.decide(&bad, &Approver::Console),
                Err(DecisionError::BadReason { .. })
            ));
        }
        let mut right = decision("a1", Some(Decision::ApproveOnce));
        right.reason = "y".repeat(MAX_REASON_BYTES);
        right.digest = "digest-a1".into();
        broker
            .decide(
                &right,
                &Approver::RunClient {
                    run_id: RunId::from_stored("r1"),
                },
            )
            .expect("accepted");
        let outcome = asking.await.expect("task");
        assert!(matches!(
            outcome,
            Outcome::Answered(Answer {
                decision: Decision::ApproveOnce,
                ..
            })
        ));
        // Replayed: the request is no longer pending.
        assert_eq!(
            broker.decide(&right, &Approver::Console),
            Err(DecisionError::NotPending("a1".into()))
        );
    }

    #[tokio::test]
    async fn no_answer_by_the_deadline_expires_the_request() {
        let broker = Arc::new(ApprovalBroker::default());
        let (_, mut updates) = broker.subscribe();
        let outcome = broker.ask(request("a1", "r1", 50)).await;
        assert_eq!(outcome, Outcome::Expired);
        assert_eq!(broker.pending_count(), 0);
        let first = updates.recv().await.expect("pending update");
        assert_eq!(first.state, pb::ApprovalState::Pending as i32);
        let second = updates.recv().await.expect("expiry update");
        assert_eq!(second.state, pb::ApprovalState::Expired as i32);
        assert!(matches!(
            broker.decide(
                &decision("a1", Some(Decision::ApproveOnce)),
                &Approver::Console
            ),
            Err(DecisionError::NotPending(_))
        ));
    }

    /// A question the policy asked with `command`'s words, grantable or not.
    fn asked_by_policy(grantable: bool, words: &[&str]) -> pb::ApprovalRequest {
        pb::ApprovalRequest {
            policy: Some(pb::PolicyVerdict {
                decision: pb::PolicyDecision::Ask as i32,
                grantable,
                parts: vec![pb::PolicyPart {
                    decision: pb::PolicyDecision::Ask as i32,
                    words: words.iter().map(|w| (*w).to_owned()).collect(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..request("a1", "r1", 60_000)
        }
    }

    #[tokio::test]
    async fn a_session_grant_needs_a_grantable_question_and_a_prefix_of_what_it_asks() {
        let broker = Arc::new(ApprovalBroker::default());
        let _held = broker.register(asked_by_policy(false, &["git", "push", "origin"]));
        let refused = broker
            .decide(
                &decision("a1", Some(Decision::ApproveSession)),
                &Approver::Console,
            )
            .expect_err("an always-ask rule is never granted");
        assert!(
            matches!(refused, DecisionError::NotGrantable(_)),
            "{refused:?}"
        );

        let broker = Arc::new(ApprovalBroker::default());
        let _held = broker.register(asked_by_policy(true, &["git", "push", "origin"]));
        for (prefix, decision_kind) in [
            (vec!["git", "pull"], Decision::ApproveSession),
            (
                vec!["git", "push", "origin", "main"],
                Decision::ApproveSession,
            ),
            (vec!["git", ""], Decision::ApproveSession),
            (vec!["git", "push"], Decision::ApproveOnce),
        ] {
            let mut verdict = decision("a1", Some(decision_kind));
            verdict.grant_prefix = prefix.iter().map(|w| (*w).to_owned()).collect();
            let refused = broker
                .decide(&verdict, &Approver::Console)
                .expect_err("not a prefix of the question's command");
            assert!(
                matches!(refused, DecisionError::BadGrantPrefix { .. }),
                "{prefix:?}: {refused:?}"
            );
        }
        let mut verdict = decision("a1", Some(Decision::ApproveSession));
        verdict.grant_prefix = vec!["git".into(), "push".into()];
        broker
            .decide(&verdict, &Approver::Console)
            .expect("a prefix of the command it asks about");
    }

    #[tokio::test]
    async fn a_late_approver_gets_what_is_pending_and_a_withdrawn_request_is_announced() {
        let broker = Arc::new(ApprovalBroker::default());
        let asking = tokio::spawn({
            let broker = broker.clone();
            async move { broker.ask(request("a1", "r1", 60_000)).await }
        });
        settle().await;
        let (pending, mut updates) = broker.subscribe();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].approval_id, "a1");
        asking.abort();
        let _ = asking.await;
        let update = updates.recv().await.expect("withdrawn");
        assert_eq!(update.state, pb::ApprovalState::Resolved as i32);
        assert!(update.detail.contains("withdrawn"));
        assert_eq!(broker.pending_count(), 0);
    }

    #[tokio::test]
    async fn a_decision_without_a_verdict_is_refused() {
        let broker = Arc::new(ApprovalBroker::default());
        let _asking = tokio::spawn({
            let broker = broker.clone();
            async move { broker.ask(request("a1", "r1", 60_000)).await }
        });
        settle().await;
        assert_eq!(
            broker.decide(&decision("a1", None), &Approver::Console),
            Err(DecisionError::NoDecision("a1".into()))
        );
        assert_eq!(broker.pending_count(), 1);
    }
}
