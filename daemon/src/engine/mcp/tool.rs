//! One tool of a hosted server, as the executor calls it.
//!
//! A call leases an instance for its tenant and workspace, checks that the tool's current
//! listing is the trusted one, sends `tools/call`, and writes the answer to stdout in the
//! JSON ABI's form (`{"ok": …}` or `{"error": …}`) so that output policies, kept outputs
//! and results work as for every other tool.
//!
//! What the instance did while the call was in flight — hosts contacted and refused, CPU
//! time, peak memory — is the call's, in its metadata, span and trace (`account.rs` says
//! how calls in flight together share it).
//!
//! A call the executor stops (deadline, cancel, output limit) is dropped: rmcp then sends
//! the server `notifications/cancelled`. A server that takes turns (it may write its
//! workspace), or that no longer answers a ping a moment later, is killed with its whole
//! process tree: a call that was given up on must not go on acting.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ErrorCode, JsonObject, RequestMetaObject,
};
use rmcp::service::ServiceError;
use serde_json::{Value, json};

mod account;

use account::Account;

use super::host::{Host, Lease};
use super::instance::Instance;
use crate::engine::contract::{Exit, Launch, LoadedTool, ToolKind};
use crate::output::StreamKind;

/// How long after its connection failed a server's exit is waited for, to tell a crash from
/// an error.
const DEATH_NOTICE: Duration = Duration::from_secs(2);

/// How long a server gets, after a call is abandoned, to show it still answers.
const ABANDON_GRACE: Duration = Duration::from_millis(500);

/// How long after a call's deadline the deadline keeper kills the server of a call the
/// daemon has not ended. A daemon that runs ends it at the deadline (which tells the keeper)
/// within milliseconds, and the server may be serving other calls, so the keeper waits a
/// little; it must still act well within the second a fleet's takeover waits past a call's
/// timeout (`CALL_START_MARGIN_MS` of the PostgreSQL store).
const KEEPER_GRACE: Duration = Duration::from_millis(250);

pub struct McpTool {
    pub host: Arc<Host>,
    /// The tool's name on the server.
    pub tool: String,
    /// The digest of the tool's trusted listing.
    pub digest: String,
}

impl LoadedTool for McpTool {
    fn digest(&self) -> &str {
        &self.digest
    }

    fn kind(&self) -> ToolKind {
        ToolKind::McpTool
    }

    fn run(&self, launch: Launch) -> BoxFuture<'_, Exit> {
        Box::pin(self.call(launch))
    }

    fn withheld(&self) -> Option<String> {
        self.host
            .trust
            .withheld(&self.tool, &self.digest)
            .map(|verdict| verdict.explain(&self.host.name, &self.tool))
    }
}

impl McpTool {
    async fn call(&self, launch: Launch) -> Exit {
        let arguments: JsonObject = match serde_json::from_slice(&launch.stdin) {
            Ok(arguments) => arguments,
            Err(err) => {
                return Exit::SandboxError(format!("the arguments are not an object: {err}"));
            }
        };
        let lease = match self
            .host
            .lease(
                launch.tenant.clone(),
                launch.workspace.clone(),
                launch.egress.as_ref(),
            )
            .await
        {
            Ok(lease) => lease,
            Err(message) => return Exit::SandboxError(message),
        };
        let instance = lease.instance.clone();
        let _turn = match &instance.serial {
            Some(turns) => Some(turns.lock().await),
            None => None,
        };
        // Opened once the call has its turn, so that a writing server's previous call is not
        // this one's; settled (dropped) before the turn is let go, however the call ends.
        let _account = Account::open(
            instance.clone(),
            lease.started,
            launch.stats.clone(),
            launch.egress.clone(),
        );
        if let Err(reason) = self.host.distrust(&instance, &self.tool).await {
            return Exit::Refused(reason);
        }
        // Should the daemon freeze or hang past the deadline, the server ends by the deadline
        // keeper's hand: nothing of the call acts on while a fleet hands its run on.
        let _kept = match instance.keep_until(launch.deadline + KEEPER_GRACE) {
            Ok(kept) => kept,
            Err(message) => {
                return Exit::SandboxError(format!("{message}; the call was not sent"));
            }
        };
        // What the server holds a copy of is shown as the workspace has it now: a person may
        // have edited it since the server's last call. A server whose view could not be made
        // current is stopped, and the next call starts it afresh, over the workspace as it is.
        if let Some(recording) = &instance.recording
            && let Err(message) = recording.refresh(launch.deadline).await
        {
            instance.kill();
            return Exit::SandboxError(format!(
                "{message}; the call was not sent, and the server was stopped (the next call starts it again)"
            ));
        }
        let mut params = CallToolRequestParams::new(self.tool.clone());
        params.arguments = Some(arguments);
        // The run's trace goes on in the server, for a server that traces (the MCP
        // semantic conventions' propagation: `traceparent` in the request's `_meta`).
        if let Some(trace_parent) = &launch.trace_parent {
            let mut meta = RequestMetaObject::default();
            meta.insert(
                "traceparent".to_owned(),
                serde_json::Value::String(trace_parent.clone()),
            );
            params.meta = Some(meta);
        }
        let mut watch = Abandoned {
            lease: Some(lease),
            serial: instance.serial.is_some(),
        };
        let answer = tokio::select! {
            answer = instance.call_tool(params, launch.questions.clone()) => answer,
            () = instance.ended() => {
                watch.lease = None;
                return self.gone(&instance, launch.deadline);
            }
        };
        watch.lease = None;
        match answer {
            Ok(result) => {
                // Still this call's turn: what the server wrote since the last call is this
                // call's doing.
                if let Some(recording) = &instance.recording {
                    let _ = launch.changed.set(recording.sync(launch.deadline).await);
                }
                let document = abi_document(result);
                // Over the limit, the executor reports it; nothing else to do here.
                let _ = launch
                    .capture
                    .write(StreamKind::Stdout, document.to_string().as_bytes());
                Exit::Code(0)
            }
            // The server refused the call: an answer, not a death. One that says the client
            // lacks a capability it needs (-32021) is about the calling MCP client, which
            // is told so as the protocol says (`Questions::lacks`).
            Err(ServiceError::McpError(error)) => {
                if error.code == ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
                    && let Some(questions) = &launch.questions
                {
                    questions.lacks(&error);
                }
                Exit::Trap(format!(
                    "MCP server `{}` answered the call with an error: {}",
                    self.host.name, error.message
                ))
            }
            // A server that died answers with a closed transport a moment before its end is
            // seen: wait for that moment before calling it an error of the server's.
            Err(_)
                if tokio::time::timeout(DEATH_NOTICE, instance.ended())
                    .await
                    .is_ok() =>
            {
                self.gone(&instance, launch.deadline)
            }
            Err(err) => Exit::Trap(format!(
                "MCP server `{}` answered the call with an error: {err}",
                self.host.name
            )),
        }
    }

    /// How a call whose server went away ended: lost, or, past the call's deadline (when the
    /// deadline keeper kills the server of a daemon that did not end the call), out of time
    /// as if the executor had stopped it.
    fn gone(&self, instance: &Instance, deadline: Instant) -> Exit {
        if Instant::now() >= deadline {
            Exit::PastDeadline
        } else {
            Exit::Lost(instance.died(&self.host.name))
        }
    }
}

/// A call's result in the JSON ABI's form: structured content when the server gave it, else
/// the text of its content blocks (one block: its text; several: the blocks as JSON).
fn abi_document(result: CallToolResult) -> Value {
    let texts: Option<Vec<&str>> = result
        .content
        .iter()
        .map(|block| block.as_text().map(|text| text.text.as_str()))
        .collect();
    if result.is_error == Some(true) {
        let message = match &texts {
            Some(texts) if !texts.is_empty() => texts.join("\n"),
            _ => serde_json::to_string(&result.content)
                .unwrap_or_else(|_| "the tool reported an error".into()),
        };
        return json!({"error": {"message": message, "retryable": false}});
    }
    if let Some(structured) = result.structured_content {
        return json!({ "ok": structured });
    }
    let ok = match texts {
        Some(texts) if texts.len() == 1 => Value::String(texts[0].to_owned()),
        Some(texts) if texts.is_empty() => Value::Null,
        _ => serde_json::to_value(&result.content).unwrap_or(Value::Null),
    };
    json!({ "ok": ok })
}

/// Armed while a call waits for its answer: dropped armed (the executor gave up on the
/// call), it checks that the server has let go of it, and kills the instance otherwise.
struct Abandoned {
    lease: Option<Lease>,
    serial: bool,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        let Some(lease) = self.lease.take() else {
            return;
        };
        let instance = lease.instance.clone();
        drop(lease);
        if self.serial {
            // One call at a time: the abandoned call may still be changing the workspace
            // the next call sees.
            instance.kill();
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            // The server may still be at work on the abandoned call: a question it asks
            // meanwhile must not go to the next call's client as if it were that call's.
            let held = instance.hold_questions();
            runtime.spawn(async move {
                check_alive(instance).await;
                drop(held);
            });
        } else {
            instance.kill();
        }
    }
}

async fn check_alive(instance: Arc<Instance>) {
    tokio::time::sleep(ABANDON_GRACE).await;
    // A listing, not a ping: every revision has `tools/list`, and 2026-07-28 has no ping
    // (rmcp refuses to send one to such a server, which would read as a hang).
    let answered = tokio::time::timeout(ABANDON_GRACE, instance.peer().list_tools(None)).await;
    if !matches!(answered, Ok(Ok(_))) {
        tracing::warn!("an MCP server did not answer after a call was abandoned; killing it");
        instance.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;

    #[test]
    fn results_take_the_abi_shape() {
        let text = CallToolResult::success(vec![ContentBlock::text("hello")]);
        assert_eq!(abi_document(text), json!({"ok": "hello"}));
        let error = CallToolResult::error(vec![ContentBlock::text("no such file")]);
        assert_eq!(
            abi_document(error),
            json!({"error": {"message": "no such file", "retryable": false}})
        );
        let mut structured = CallToolResult::success(vec![ContentBlock::text("{\"n\":1}")]);
        structured.structured_content = Some(json!({"n": 1}));
        assert_eq!(abi_document(structured), json!({"ok": {"n": 1}}));
        let two = CallToolResult::success(vec![ContentBlock::text("a"), ContentBlock::text("b")]);
        assert!(abi_document(two)["ok"].is_array());
    }
}
