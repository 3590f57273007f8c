//! The executor: one tool call from request to normalised result.
//!
//! It checks the call (tool, workspace, arguments), runs it through the tool's engine under
//! the deadline, the caller's cancellation and the profile's output limit, and shapes what
//! came out into a [`ToolResult`] under the tool's output policy. Stopping a call means
//! dropping the engine's future; engines guarantee that stops the tool's work.

use crate::audit::Auditor;
use crate::policy::rules::Verdict;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::changes::{Changes, Refusal, WorkspaceIgnores};
use crate::domain::ExecutionOwner;
use crate::egress::{EgressApprover, Gate, Resolver, Rules};
use crate::engine::mcp::Questions;
use crate::engine::{Exit, Launch, RunStats};
use crate::ids::{self, ExecutionId};
use crate::output::{self, CaptureSummary, KeptOutputs, OutputCapture, OutputChunk};
use crate::profile::{GrantError, NetworkPolicy, Profile};
use crate::secrets::{Redactor, StreamRedactor};
use crate::workspace::{WorkspaceError, WorkspaceRoots};

use super::abi::{self, AbiResult};
use super::executions::Executions;
use super::registry::{Registry, Tool};
use super::result::{ResultMetadata, ToolResult, ToolStatus};
use super::writes::{self, ChangeJournal};
use crate::engine::Abi;

/// A request to run one tool.
#[derive(Debug, Clone, Default)]
pub struct CallRequest {
    pub tool: String,
    pub arguments_json: String,
    /// Absolute host path; none for a call without a workspace.
    pub workspace: Option<String>,
    /// Shortens the tool's timeout; never extends it.
    pub timeout: Option<Duration>,
    /// Run with every file grant of the tool's profile made read-only: how a write tool's
    /// preview is made, so that a preview cannot change anything whatever the tool does.
    pub read_only: bool,
    /// The tenant the call is for (hosted servers keep an instance per tenant).
    pub tenant: Option<String>,
    /// The call is a step of a run: a call whose outcome is lost is then reported as
    /// OUTCOME_UNKNOWN unless the tool is idempotent, so that the run never repeats it blindly.
    pub in_run: bool,
    /// The workspace's ignore files as the run read them when it started; none: read before
    /// the call.
    pub ignores: Option<WorkspaceIgnores>,
}

/// Why a call could not even be prepared (as opposed to a call that ran and failed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("no tool named `{0}`")]
    UnknownTool(String),
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    #[error(transparent)]
    Grant(#[from] GrantError),
}

/// A checked call, ready to run.
#[derive(Clone)]
pub struct Call {
    pub tool: Arc<Tool>,
    /// Every secret a tool of the tool's registry receives, kept out of what the call
    /// reports.
    pub redactor: Redactor,
    /// The tool's profile, or its read-only view.
    pub profile: Arc<Profile>,
    pub arguments_json: String,
    pub workspace: Option<PathBuf>,
    pub timeout: Duration,
    /// Who decides about hosts outside the profile's allow-list, when the profile lets them
    /// be asked about: the run's approvals. `None` (gRPC ExecuteTool) refuses them.
    pub egress_approver: Option<Arc<dyn EgressApprover>>,
    /// As in [`CallRequest`].
    pub tenant: Option<String>,
    pub in_run: bool,
    pub ignores: Option<WorkspaceIgnores>,
    /// Where the call's change set is journaled before it is applied: a run's effect journal.
    /// `None` (gRPC ExecuteTool) applies at once.
    pub change_journal: Option<Arc<dyn ChangeJournal>>,
    /// The MCP client that made the call, when it can answer a hosted server's questions
    /// about it. `None`: airlock answers them (see `engine::mcp::client`).
    pub questions: Option<Arc<dyn Questions>>,
    /// For a call outside any run: what the operator's rules decided of it at admission
    /// (`ask` puts it to a person before it runs). A run's calls are judged by its gate.
    pub verdict: Option<Arc<Verdict>>,
    /// As in [`Launch::trace_parent`].
    pub trace_parent: Option<String>,
}

impl Call {
    /// Lets the call ask `approver` about unlisted hosts (see [`Call::egress_approver`]).
    pub fn with_egress_approver(mut self, approver: Arc<dyn EgressApprover>) -> Call {
        self.egress_approver = Some(approver);
        self
    }

    /// Journals the call's change set with `journal` before applying it.
    pub fn with_change_journal(mut self, journal: Arc<dyn ChangeJournal>) -> Call {
        self.change_journal = Some(journal);
        self
    }

    /// Runs the call under the span `trace_parent` names (a W3C `traceparent`).
    pub fn with_trace_parent(mut self, trace_parent: String) -> Call {
        self.trace_parent = Some(trace_parent);
        self
    }

    /// Puts a hosted server's questions about the call to `questions` (its MCP client).
    pub fn with_questions(mut self, questions: Arc<dyn Questions>) -> Call {
        self.questions = Some(questions);
        self
    }
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("tool", &self.tool)
            .field("profile", &self.profile)
            .field("arguments_json", &self.arguments_json)
            .field("workspace", &self.workspace)
            .field("timeout", &self.timeout)
            .field("egress_approver", &self.egress_approver.is_some())
            .field("tenant", &self.tenant)
            .field("in_run", &self.in_run)
            .field("change_journal", &self.change_journal.is_some())
            .field("questions", &self.questions.is_some())
            .finish()
    }
}

/// What a running call reports, in order: `Started`, any `Output`, then `Finished`. A call
/// refused before it runs reports only `Finished`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutionEvent {
    Started {
        execution_id: ExecutionId,
        tool: String,
        module_digest: String,
    },
    Output(OutputChunk),
    Finished(ToolResult),
}

pub struct Executor {
    /// The tools served now: replaced whole by a reload ([`Executor::replace_registry`]).
    registry: std::sync::RwLock<Arc<Registry>>,
    workspaces: WorkspaceRoots,
    executions: Executions,
    kept: Option<Arc<KeptOutputs>>,
    /// Resolves the hosts of every call's egress, with the operator's overrides.
    resolver: Arc<Resolver>,
    /// Where writing calls' overlays and change sets are made; none where this host cannot
    /// (then such calls are refused, naming the layer).
    changes: Result<Changes, Arc<str>>,
    /// The daemon's audit log, for every part that runs calls.
    auditor: Auditor,
}

/// Why a call stopped before its tool finished.
enum Stopped {
    Cancelled,
    Timeout,
    OutputLimit,
    /// The call wrote past its profile's `[changes]` bounds: why.
    ChangesLimit(String),
}

impl Executor {
    pub fn new(registry: Arc<Registry>, workspaces: WorkspaceRoots) -> Executor {
        Executor {
            registry: std::sync::RwLock::new(registry),
            workspaces,
            executions: Executions::default(),
            kept: None,
            resolver: Arc::default(),
            changes: Err("no change-set store was configured".into()),
            auditor: Auditor::default(),
        }
    }

    /// Records what writing calls change through `changes`, or refuses them with `changes`'
    /// error (why this host cannot).
    pub fn with_changes(mut self, changes: Result<Changes, String>) -> Executor {
        self.changes = changes.map_err(Arc::from);
        self
    }

    pub fn changes(&self) -> Option<&Changes> {
        self.changes.as_ref().ok()
    }

    /// Resolves egress hosts with `resolver` (the daemon's, built once from `[egress]`)
    /// rather than the system's alone.
    /// Records what the calls do in `auditor`'s log.
    pub fn with_auditor(mut self, auditor: Auditor) -> Executor {
        self.auditor = auditor;
        self
    }

    /// The daemon's audit log.
    pub fn auditor(&self) -> &Auditor {
        &self.auditor
    }

    pub fn with_resolver(mut self, resolver: Arc<Resolver>) -> Executor {
        self.resolver = resolver;
        self
    }

    /// Keeps the full output of every call whose result gets cut, for `ReadOutput`.
    pub fn with_kept_outputs(mut self, kept: Arc<KeptOutputs>) -> Executor {
        self.kept = Some(kept);
        self
    }

    pub fn kept_outputs(&self) -> Option<&Arc<KeptOutputs>> {
        self.kept.as_ref()
    }

    /// The tools served now. A reload may replace them the next moment: what is taken from
    /// this one registry stays consistent (a call keeps the tool it was prepared with).
    pub fn registry(&self) -> Arc<Registry> {
        // A panic while the lock was held cannot leave a half-made registry behind: the
        // write is one assignment.
        self.registry
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Serves `registry` in place of the tools served now, which are returned. Calls
    /// already prepared keep their tools (and those tools' redactions).
    pub fn replace_registry(&self, registry: Arc<Registry>) -> Arc<Registry> {
        let mut served = self
            .registry
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        std::mem::replace(&mut *served, registry)
    }

    pub fn workspaces(&self) -> &WorkspaceRoots {
        &self.workspaces
    }

    /// Checks that the tool exists and the workspace is allowed.
    pub fn prepare(&self, request: CallRequest) -> Result<Call, CallError> {
        let registry = self.registry();
        let tool = registry
            .get(&request.tool)
            .ok_or_else(|| CallError::UnknownTool(request.tool.clone()))?;
        let workspace = self.workspaces.resolve(request.workspace.as_deref())?;
        if workspace.is_none() && tool.profile.grants_workspace() {
            return Err(GrantError::WorkspaceRequired {
                profile: tool.profile.name.clone(),
            }
            .into());
        }
        let mut timeout = tool.timeout();
        if let Some(requested) = request.timeout.filter(|t| !t.is_zero()) {
            timeout = timeout.min(requested);
        }
        let profile = if request.read_only {
            Arc::new(tool.profile.read_only())
        } else {
            tool.profile.clone()
        };
        Ok(Call {
            tool,
            redactor: registry.redactor().clone(),
            profile,
            arguments_json: request.arguments_json,
            workspace,
            timeout,
            egress_approver: None,
            tenant: request.tenant,
            in_run: request.in_run,
            ignores: request.ignores,
            change_journal: None,
            questions: None,
            verdict: None,
            trace_parent: None,
        })
    }

    /// Cancels a running call by its execution id; false if none is running.
    pub fn cancel(&self, execution_id: &ExecutionId) -> bool {
        self.executions.cancel(execution_id)
    }

    /// Cancels every running call (at shutdown).
    pub fn cancel_all(&self) {
        self.executions.cancel_all();
    }

    /// The tenant a running call was started for (see [`Executions::tenant`]).
    pub fn running_tenant(&self, execution_id: &ExecutionId) -> Option<String> {
        self.executions.tenant(execution_id)
    }

    /// How many calls are running.
    pub fn running(&self) -> usize {
        self.executions.len()
    }

    /// Runs `call` to its end, reporting progress on `events`.
    pub async fn run(
        &self,
        call: Call,
        events: mpsc::UnboundedSender<ExecutionEvent>,
        cancel: CancellationToken,
    ) -> ToolResult {
        let tool = call.tool;
        let redactor = call.redactor;
        let arguments = match tool.arguments.validate(&call.arguments_json) {
            Ok(arguments) => arguments,
            Err(err) => {
                let result = ToolResult::refused(ToolStatus::InvalidArguments, err.to_string());
                crate::metrics::global().tool_call(
                    tool.name(),
                    tool.manifest.engine().as_str(),
                    call.tenant.as_deref(),
                    result.status.as_str(),
                    Duration::ZERO,
                );
                let _ = events.send(ExecutionEvent::Finished(result.clone()));
                return result;
            }
        };
        let execution_id = ExecutionId::new();
        let started_at_ms = ids::now_ms();
        let _registration =
            self.executions
                .register(execution_id.clone(), cancel.clone(), call.tenant.clone());
        let _ = events.send(ExecutionEvent::Started {
            execution_id: execution_id.clone(),
            tool: tool.name().to_owned(),
            module_digest: tool.digest().to_owned(),
        });

        let output_events = events.clone();
        let profile = call.profile;
        let streamed = Arc::new(StreamRedactor::new(redactor.clone()));
        let redacting = !redactor.is_empty();
        let stream_redactor = streamed.clone();
        let capture = OutputCapture::new(
            profile.limits.output_bytes,
            Some(Box::new(move |mut chunk: OutputChunk| {
                if redacting {
                    chunk.data = Bytes::from(stream_redactor.feed(chunk.stream, &chunk.data));
                    if chunk.data.is_empty() {
                        return;
                    }
                }
                let _ = output_events.send(ExecutionEvent::Output(chunk));
            })),
        );
        let stats = Arc::new(RunStats::default());
        let egress = match &profile.network {
            NetworkPolicy::None => None,
            NetworkPolicy::AllowList { .. } => Some(Arc::new(
                Gate::new(
                    Rules::for_profile(&profile),
                    self.resolver.clone(),
                    call.egress_approver.clone(),
                )
                .with_audit(self.auditor.clone(), call.tenant.clone()),
            )),
        };
        let changed = Arc::new(std::sync::OnceLock::new());
        // The tool reads the arguments as validated, re-serialised: a parser of its own can
        // never see a document (duplicate keys, odd escapes) that differs from what passed.
        let launch = Launch {
            stdin: Bytes::from(arguments.to_string()),
            workspace: call.workspace,
            overlay: None,
            changed: changed.clone(),
            profile: profile.clone(),
            capture: capture.clone(),
            stats: stats.clone(),
            egress: egress.clone(),
            secrets: tool.manifest.image.secrets.clone(),
            tenant: call.tenant.clone(),
            call_id: execution_id.clone(),
            deadline: Instant::now() + call.timeout,
            questions: call.questions.clone(),
            trace_parent: call.trace_parent.clone(),
        };
        let metrics_tenant = call.tenant.clone();
        let tenant = call.tenant;
        let started = Instant::now();
        let workspace = launch.workspace.clone();
        let (overlay, outcome) = match writes::overlay(
            &self.changes,
            &tool,
            &profile,
            workspace.as_deref(),
            call.ignores.clone(),
            &execution_id,
            launch.deadline,
        )
        .await
        {
            Err(message) => (None, Ok(Exit::SandboxError(message))),
            Ok(overlay) => {
                let launch = Launch {
                    overlay: overlay.as_ref().map(|(overlay, _)| overlay.clone()),
                    ..launch
                };
                let deadline = launch.deadline;
                let run = tool.loaded.run(launch);
                // Only a call with an overlay is watched, and only once its first poll did
                // not end it: the survey's timer is polled after the call.
                let exceeded = async {
                    match &overlay {
                        Some((overlay, rules)) => writes::exceeded(overlay, rules).await,
                        None => std::future::pending().await,
                    }
                };
                // The deadline's timer is polled last: a call that ends in its first poll (a
                // warm WebAssembly call does) then never registers one, and registering one
                // costs a wake of the thread that waits on the timer wheel. A call that ends
                // in the same poll as its deadline passes has ended on its own.
                let outcome = tokio::select! {
                    biased;
                    () = cancel.cancelled() => Err(Stopped::Cancelled),
                    () = capture.overflowed() => Err(Stopped::OutputLimit),
                    exit = run => Ok(exit),
                    why = exceeded => Err(Stopped::ChangesLimit(why)),
                    () = tokio::time::sleep_until(deadline.into()) => Err(Stopped::Timeout),
                };
                (overlay, outcome)
            }
        };
        // What the call wrote reaches the workspace only if the tool ended on its own; a
        // call that was stopped (or crashed out of its sandbox) leaves it untouched.
        let changes = match overlay {
            None => Arc::into_inner(changed).and_then(std::sync::OnceLock::into_inner),
            Some((overlay, rules)) => {
                let finished = matches!(outcome, Ok(Exit::Code(_))) && !capture.has_overflowed();
                let journal = call.change_journal.clone();
                Some(writes::settle(&self.changes, overlay, rules, finished, journal).await)
            }
        };
        let duration = started.elapsed();
        // A tool that crossed the output limit is reported as such even when it went on to
        // exit (typically by failing its next write).
        let outcome = match outcome {
            Ok(_) if capture.has_overflowed() => Err(Stopped::OutputLimit),
            other => other,
        };
        let mut summary = capture.finish();
        for (stream, data) in streamed.flush() {
            let _ = events.send(ExecutionEvent::Output(OutputChunk {
                stream,
                data: Bytes::from(data),
            }));
        }
        if !redactor.is_empty() {
            summary.stdout = redactor.redact_bytes(&summary.stdout);
            summary.stderr_tail = redactor.redact_bytes(&summary.stderr_tail);
        }
        let (mut result, whole) = shape_result(
            &tool,
            &profile,
            call.timeout,
            call.in_run,
            outcome,
            &summary,
        );
        if !redactor.is_empty() {
            result.error_message = redactor.redact(&result.error_message);
        }
        // The whole output, exactly what the shown part was cut from, so that reading it from
        // where the shown part ends continues it. Its owner is recorded with it: the one
        // thing in the store a direct call needs, and only when it kept something.
        let owner = tenant.map(|tenant| ExecutionOwner {
            tenant,
            // A run records its own calls' owners, naming the run, when they start.
            run_id: None,
            started_at_ms,
        });
        if let Some(whole) = whole
            && result.truncated
            && let Some(kept) = &self.kept
            && let Err(err) = kept
                .keep(&execution_id, owner.as_ref(), whole.into_bytes())
                .await
        {
            tracing::warn!(execution = %execution_id, error = %err, "cannot keep the full output");
        }
        result.duration = duration;
        result.execution_id = Some(execution_id);
        // A call whose writes did not land did not succeed, whatever the tool said.
        if let Some(set) = &changes
            && let (Some(refusal), Some(why)) = (set.refusal, &set.not_applied)
            && result.status == ToolStatus::Ok
        {
            result.status = match refusal {
                Refusal::Limit => ToolStatus::LimitExceeded,
                Refusal::Deadline => ToolStatus::Timeout,
                Refusal::Failed => ToolStatus::SandboxError,
            };
            result.error_message = why.clone();
        }
        result.changes = changes.filter(|set| !set.is_empty()).map(Box::new);
        result.metadata = ResultMetadata {
            peak_memory_bytes: stats.peak_memory_bytes(),
            cpu_time: stats.cpu_time(),
            module_digest: tool.digest().to_owned(),
            engine: Some(tool.manifest.engine()),
            profile: profile.name.clone(),
            stdout_bytes: summary.stdout_bytes,
            stderr_bytes: summary.stderr_bytes,
            signal: result.metadata.signal,
            network: egress
                .map(|gate| gate.ledger().snapshot())
                .unwrap_or_default(),
        };
        crate::metrics::global().tool_call(
            tool.name(),
            tool.manifest.engine().as_str(),
            metrics_tenant.as_deref(),
            result.status.as_str(),
            duration,
        );
        let _ = events.send(ExecutionEvent::Finished(result.clone()));
        result
    }
}

/// Turns how a call ended into its result (status, content, message), before timing and
/// metadata are added; with it, the whole output its content was cut from, if it has one.
fn shape_result(
    tool: &Tool,
    profile: &Profile,
    timeout: Duration,
    in_run: bool,
    outcome: Result<Exit, Stopped>,
    summary: &CaptureSummary,
) -> (ToolResult, Option<String>) {
    let stderr_tail = String::from_utf8_lossy(&summary.stderr_tail)
        .trim()
        .to_owned();
    let with_stderr = |message: String| {
        if stderr_tail.is_empty() {
            message
        } else {
            format!("{message}\nstderr (end):\n{stderr_tail}")
        }
    };
    // Plain output as text: what is shown and what is kept are this same text (a byte that
    // is not UTF-8 becomes U+FFFD in both).
    let plain = || String::from_utf8_lossy(&summary.stdout).into_owned();
    let timed_out = || {
        ToolResult::refused(
            ToolStatus::Timeout,
            with_stderr(format!(
                "the call ran past its deadline of {} ms and was stopped",
                timeout.as_millis()
            )),
        )
    };
    let exit = match outcome {
        Err(Stopped::Cancelled) => {
            return (
                ToolResult::refused(ToolStatus::Cancelled, "the call was cancelled"),
                None,
            );
        }
        Err(Stopped::Timeout) => return (timed_out(), None),
        Err(Stopped::ChangesLimit(why)) => {
            return (
                ToolResult::refused(
                    ToolStatus::LimitExceeded,
                    format!(
                        "{why}, in profile `{}`: the call was stopped and nothing it wrote was applied",
                        profile.name
                    ),
                ),
                None,
            );
        }
        Err(Stopped::OutputLimit) => {
            // What was captured up to the limit is the whole output there is.
            let whole = plain();
            let mut result = ToolResult::refused(
                ToolStatus::LimitExceeded,
                format!(
                    "the tool wrote more than {} bytes of output (limits.output of profile `{}`) and was stopped",
                    profile.limits.output_bytes, profile.name
                ),
            );
            with_view(&mut result, output::shape(&whole, &tool.manifest.output));
            result.truncated = true;
            return (result, Some(whole));
        }
        Ok(exit) => exit,
    };
    let result = match exit {
        Exit::Code(0) => match tool.manifest.abi() {
            Abi::JsonStdio => match abi::parse_result(&summary.stdout) {
                Ok(AbiResult::Ok(json)) => return ok_result(json, &tool.manifest.output),
                Ok(AbiResult::Error { message, retryable }) => {
                    let mut result = ToolResult::refused(ToolStatus::ToolError, message);
                    result.retryable = retryable;
                    result.exit_code = Some(0);
                    result
                }
                Err(violation) => {
                    let mut result = ToolResult::refused(
                        ToolStatus::ToolError,
                        with_stderr(format!("the tool broke the ABI: {violation}")),
                    );
                    result.exit_code = Some(0);
                    result
                }
            },
            Abi::Argv => return ok_result(plain(), &tool.manifest.output),
        },
        Exit::Code(code) => {
            let mut result = ToolResult::refused(
                ToolStatus::ToolError,
                with_stderr(format!("the tool exited with code {code}")),
            );
            result.exit_code = Some(code);
            if tool.manifest.abi() == Abi::Argv {
                let whole = plain();
                with_view(&mut result, output::shape(&whole, &tool.manifest.output));
                return (result, Some(whole));
            }
            result
        }
        Exit::Signal(signal) => {
            let mut result = ToolResult::refused(
                ToolStatus::ToolError,
                with_stderr(format!("the tool was killed by signal {signal}")),
            );
            result.metadata.signal = Some(signal);
            result
        }
        Exit::Trap(trap) => ToolResult::refused(
            ToolStatus::ToolError,
            with_stderr(format!("the tool crashed: {trap}")),
        ),
        Exit::LimitExceeded(message) => {
            ToolResult::refused(ToolStatus::LimitExceeded, with_stderr(message))
        }
        Exit::AbiViolation(message) => {
            let mut result = ToolResult::refused(
                ToolStatus::ToolError,
                with_stderr(format!("the tool broke the ABI: {message}")),
            );
            result.exit_code = Some(0);
            result
        }
        Exit::Lost(message) => {
            // Inside a run, a call that may have acted must not look like one that failed
            // cleanly: the run would try it again.
            let status = if in_run && !tool.manifest.idempotent {
                ToolStatus::OutcomeUnknown
            } else {
                ToolStatus::ToolError
            };
            ToolResult::refused(status, message)
        }
        Exit::Refused(message) => ToolResult::refused(ToolStatus::Denied, message),
        Exit::SandboxError(message) => ToolResult::refused(ToolStatus::SandboxError, message),
        // The keeper's kill at the deadline (a process tool whose daemon was stopped, or that
        // the keeper reached first) ends the call as the executor's stop does.
        Exit::PastDeadline => timed_out(),
    };
    (result, None)
}

/// An OK result showing `whole` as its output policy says; `whole` is returned to be kept.
fn ok_result(whole: String, policy: &output::OutputPolicy) -> (ToolResult, Option<String>) {
    let mut result = ToolResult::refused(ToolStatus::Ok, "");
    with_view(&mut result, output::shape(&whole, policy));
    result.exit_code = Some(0);
    (result, Some(whole))
}

/// Puts the shown part of an output, and where it comes from, into `result`.
fn with_view(result: &mut ToolResult, view: output::Shaped) {
    result.content = view.text;
    result.truncated = view.truncated;
    result.original_bytes = view.original_bytes;
    result.head_bytes = view.head_bytes;
    result.tail_bytes = view.tail_bytes;
}
