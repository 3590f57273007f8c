//! Step 8, "decide to continue": the run's budgets and every reason it stops. A stop is typed
//! ([`Stop`], with a [`StopReason`]) and always says why; the loop asks [`Budget::check`]
//! before each model call and [`Budget::guard`] around every wait, so a cancel or the end of
//! the wall time ends a model call, an approval, a preview or a tool call alike.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::Either;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::super::live::CancelSwitch;
use crate::cancel::{Cancelled, or_cancel};
use crate::domain::{StopReason, Usage};
use crate::store::StoreError;

/// The limits of one run, resolved from the client's budgets and the daemon's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct RunLimits {
    pub max_steps: u32,
    pub max_tokens: Option<u64>,
    pub wall_time: Duration,
    pub max_tool_calls: u32,
    pub max_repeated_errors: u32,
    pub context_tokens: u64,
    /// The same call with the same result this many times stops the run (NO_PROGRESS).
    pub max_repeated_calls: u32,
    /// This many steps in a row without progress stop the run (NO_PROGRESS).
    pub max_idle_steps: u32,
    pub approval_timeout: Duration,
    pub max_output_tokens: u32,
    pub temperature: Option<f32>,
}

impl RunLimits {
    /// The budgets as the run's `run_started` event reports them.
    pub fn to_wire(&self) -> airlock_proto::v1::Budgets {
        airlock_proto::v1::Budgets {
            max_steps: self.max_steps,
            max_tokens: self.max_tokens.unwrap_or(0),
            max_wall_time_ms: u64::try_from(self.wall_time.as_millis()).unwrap_or(u64::MAX),
            max_tool_calls: self.max_tool_calls,
            max_repeated_errors: self.max_repeated_errors,
            context_tokens: self.context_tokens,
            max_repeated_calls: self.max_repeated_calls,
            max_idle_steps: self.max_idle_steps,
        }
    }
}

/// How a run stops.
#[derive(Debug, Clone, PartialEq)]
pub struct Stop {
    pub reason: StopReason,
    pub detail: String,
    /// The model's last answer, for [`StopReason::Final`].
    pub final_text: String,
}

/// Why the loop ends: a stop, or a log that cannot be written — after which nothing more may
/// happen, not even an unrecorded side effect.
#[derive(Debug)]
pub enum Halt {
    Stop(Stop),
    Store(StoreError),
}

impl From<StoreError> for Halt {
    fn from(err: StoreError) -> Halt {
        Halt::Store(err)
    }
}

/// A stop for `reason`, saying why.
pub fn stop(reason: StopReason, detail: impl Into<String>) -> Halt {
    Halt::Stop(Stop {
        reason,
        detail: detail.into(),
        final_text: String::new(),
    })
}

/// The same call, as repeated failures count it: a tool and its exact arguments.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailureKey {
    pub tool: String,
    pub arguments: String,
}

/// How a call failed, for the message that stops a run repeating it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Invalid, or it ran and failed.
    Failed,
    /// It was refused (by the policy or an approver).
    Denied,
}

/// What the run has used, against what it may.
pub struct Budget {
    pub limits: RunLimits,
    pub usage: Usage,
    pub steps: u32,
    /// How often each failing call has failed.
    pub failures: BTreeMap<FailureKey, u32>,
    /// Wall time used before this daemon took the run over, and when it did.
    elapsed_before: Duration,
    resumed_at: Instant,
    deadline: Instant,
    cancel: Arc<CancelSwitch>,
}

impl Budget {
    pub fn new(
        limits: RunLimits,
        usage: Usage,
        steps: u32,
        failures: BTreeMap<FailureKey, u32>,
        elapsed_before: Duration,
        cancel: Arc<CancelSwitch>,
    ) -> Budget {
        let now = Instant::now();
        Budget {
            deadline: now + limits.wall_time.saturating_sub(elapsed_before),
            limits,
            usage,
            steps,
            failures,
            elapsed_before,
            resumed_at: now,
            cancel,
        }
    }

    /// Wall time used, not counting time the daemon was down.
    pub fn elapsed(&self) -> Duration {
        self.elapsed_before + self.resumed_at.elapsed()
    }

    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the run was cancelled or ran out of wall time.
    pub fn check_stopped(&self) -> Result<(), Halt> {
        if self.cancel.is_pulled() {
            return Err(self.cancelled());
        }
        if Instant::now() >= self.deadline {
            return Err(self.wall_time_exhausted());
        }
        Ok(())
    }

    /// Whether the run may take another step.
    pub fn check(&self) -> Result<(), Halt> {
        self.check_stopped()?;
        if self.steps >= self.limits.max_steps {
            return Err(stop(
                StopReason::MaxSteps,
                format!("the run took its {} steps", self.limits.max_steps),
            ));
        }
        self.check_tokens()
    }

    pub fn check_tokens(&self) -> Result<(), Halt> {
        let used = self.usage.tokens();
        match self.limits.max_tokens {
            Some(max) if used >= max => Err(stop(
                StopReason::BudgetExhausted,
                format!("tokens: {used} used of a budget of {max}"),
            )),
            _ => Ok(()),
        }
    }

    /// Whether the run may execute one more tool call.
    pub fn check_tool_calls(&self) -> Result<(), Halt> {
        if self.usage.tool_calls >= self.limits.max_tool_calls {
            return Err(stop(
                StopReason::BudgetExhausted,
                format!(
                    "tool calls: the run's {} are used up",
                    self.limits.max_tool_calls
                ),
            ));
        }
        Ok(())
    }

    /// Counts a failure of this exact call; the same call failing too often ends the run.
    pub fn count_failure(
        &mut self,
        key: FailureKey,
        kind: FailureKind,
        error: &str,
    ) -> Result<(), Halt> {
        let what = match kind {
            FailureKind::Failed => format!("`{}` with the same arguments", key.tool),
            FailureKind::Denied => "the same call".to_owned(),
        };
        let count = self.failures.entry(key).or_insert(0);
        *count += 1;
        if *count >= self.limits.max_repeated_errors {
            return Err(stop(
                StopReason::RepeatedErrors,
                format!("{what} failed {count} times; last: {error}"),
            ));
        }
        Ok(())
    }

    pub fn cancelled(&self) -> Halt {
        stop(StopReason::Cancelled, self.cancel.reason())
    }

    pub fn wall_time_exhausted(&self) -> Halt {
        stop(
            StopReason::BudgetExhausted,
            format!(
                "wall time: the run's budget of {} ms is used up",
                self.limits.wall_time.as_millis()
            ),
        )
    }

    /// Waits for `work` unless the run is cancelled or its wall time ends first; the one way
    /// the loop waits for anything. Built of futures that hold `work` once, not an `async fn`
    /// (see [`or_cancel`]): a run waits for an approval inside it.
    ///
    /// A cancel reads as one whatever else is ready; then `work`'s outcome wins over the
    /// deadline. Past the deadline `work` is not started at all, since its first poll may
    /// already act (an approval's question is registered and recorded before it waits).
    pub fn guard<F: Future>(&self, work: F) -> impl Future<Output = Result<F::Output, Halt>> {
        if Instant::now() >= self.deadline && !self.cancel.token().is_cancelled() {
            return Either::Left(std::future::ready(Err(self.wall_time_exhausted())));
        }
        Either::Right(
            tokio::time::timeout_at(self.deadline, or_cancel(self.cancel.token(), work)).map(
                move |outcome| match outcome {
                    Ok(Ok(output)) => Ok(output),
                    Ok(Err(Cancelled)) => Err(self.cancelled()),
                    Err(_elapsed) => Err(self.wall_time_exhausted()),
                },
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> RunLimits {
        RunLimits {
            max_steps: 3,
            max_tokens: Some(100),
            wall_time: Duration::from_secs(60),
            max_tool_calls: 2,
            max_repeated_errors: 2,
            context_tokens: 1000,
            max_repeated_calls: 5,
            max_idle_steps: 8,
            approval_timeout: Duration::from_secs(1),
            max_output_tokens: 10,
            temperature: None,
        }
    }

    fn budget() -> Budget {
        Budget::new(
            limits(),
            Usage::default(),
            0,
            BTreeMap::new(),
            Duration::ZERO,
            Arc::default(),
        )
    }

    fn reason(outcome: Result<(), Halt>) -> Option<StopReason> {
        match outcome {
            Ok(()) => None,
            Err(Halt::Stop(stop)) => Some(stop.reason),
            Err(Halt::Store(err)) => panic!("a store error from a budget: {err}"),
        }
    }

    #[tokio::test]
    async fn each_budget_stops_the_run_for_its_own_reason() {
        let mut budget = budget();
        assert_eq!(reason(budget.check()), None);
        budget.steps = 3;
        assert_eq!(reason(budget.check()), Some(StopReason::MaxSteps));
        budget.steps = 0;
        budget.usage.input_tokens = 60;
        budget.usage.output_tokens = 40;
        assert_eq!(reason(budget.check()), Some(StopReason::BudgetExhausted));
        budget.usage = Usage::default();
        budget.usage.tool_calls = 2;
        assert_eq!(
            reason(budget.check_tool_calls()),
            Some(StopReason::BudgetExhausted)
        );
        budget.cancel.pull("stop".into());
        assert_eq!(reason(budget.check()), Some(StopReason::Cancelled));
    }

    #[tokio::test]
    async fn the_same_failing_call_stops_the_run_and_another_does_not() {
        let mut budget = budget();
        let key = |arguments: &str| FailureKey {
            tool: "grep".into(),
            arguments: arguments.into(),
        };
        let failed = FailureKind::Failed;
        assert_eq!(reason(budget.count_failure(key("a"), failed, "bad")), None);
        assert_eq!(reason(budget.count_failure(key("b"), failed, "bad")), None);
        assert_eq!(
            reason(budget.count_failure(key("a"), failed, "bad")),
            Some(StopReason::RepeatedErrors)
        );
    }

    #[tokio::test]
    async fn a_guarded_wait_ends_with_a_cancel_or_the_wall_time() {
        let budget = budget();
        assert_eq!(budget.guard(async { 7 }).await.ok(), Some(7));
        budget.cancel.pull("stop".into());
        let waited = budget.guard(std::future::pending::<()>()).await;
        assert!(matches!(
            waited,
            Err(Halt::Stop(Stop {
                reason: StopReason::Cancelled,
                ..
            }))
        ));

        let mut short = limits();
        short.wall_time = Duration::from_millis(20);
        let budget = Budget::new(
            short,
            Usage::default(),
            0,
            BTreeMap::new(),
            Duration::ZERO,
            Arc::default(),
        );
        let waited = budget.guard(std::future::pending::<()>()).await;
        assert!(matches!(
            waited,
            Err(Halt::Stop(Stop {
                reason: StopReason::BudgetExhausted,
                ..
            }))
        ));
    }

    /// Past the deadline the work is never polled (its first poll may ask a question), and a
    /// cancel still reads as a cancel.
    #[tokio::test]
    async fn past_its_deadline_a_guarded_wait_starts_nothing() {
        let mut spent = limits();
        spent.wall_time = Duration::ZERO;
        let budget = || {
            Budget::new(
                spent.clone(),
                Usage::default(),
                0,
                BTreeMap::new(),
                Duration::ZERO,
                Arc::default(),
            )
        };
        let polled = std::sync::atomic::AtomicBool::new(false);
        let work = async {
            polled.store(true, std::sync::atomic::Ordering::SeqCst);
            7
        };
        let waited = budget().guard(work).await;
        assert!(matches!(
            waited,
            Err(Halt::Stop(Stop {
                reason: StopReason::BudgetExhausted,
                ..
            }))
        ));
        assert!(!polled.load(std::sync::atomic::Ordering::SeqCst));

        let cancelled = budget();
        cancelled.cancel.pull("stop".into());
        let waited = cancelled.guard(async { 7 }).await;
        assert!(matches!(
            waited,
            Err(Halt::Stop(Stop {
                reason: StopReason::Cancelled,
                ..
            }))
        ));
    }
}
