//! Internal types as `airlock.v1` messages. Used by the api layer and by the run event log,
//! whose stored format is the wire format.

use airlock_proto::v1 as pb;

use crate::changes::{self, ChangeSet, Kind, Node, RelPath};
pub use crate::domain::{decision, decision_from, stop_reason, stop_reason_from, usage};
use crate::egress::Contact;
use crate::engine::{EngineKind, ToolKind};
use crate::ids::ExecutionId;
use crate::output::{OutputChunk, StreamKind, TruncateMode};
use crate::policy::rules;
use crate::tools::{ExecutionEvent, ResultMetadata, Risk, Tool, ToolResult, ToolStatus};

pub fn tool_info(tool: &Tool) -> pb::ToolInfo {
    let manifest = &tool.manifest;
    pb::ToolInfo {
        name: manifest.name().to_owned(),
        version: manifest.version.clone(),
        description: manifest.description.clone(),
        input_schema_json: tool.arguments.json().to_string(),
        risk: risk(manifest.risk) as i32,
        engine: manifest.engine().as_str().to_owned(),
        profile: tool.profile.name.clone(),
        module_digest: tool.digest().to_owned(),
        timeout_ms: millis(manifest.timeout),
        idempotent: manifest.idempotent,
        output: Some(pb::OutputPolicy {
            max_bytes: manifest.output.max_bytes,
            truncate: truncate_mode(manifest.output.truncate) as i32,
        }),
        needs_workspace: tool.profile.grants_workspace(),
        mcp_server: manifest
            .origin
            .as_ref()
            .map(|origin| origin.server.clone())
            .unwrap_or_default(),
        mcp_tool: manifest
            .origin
            .as_ref()
            .map(|origin| origin.tool.clone())
            .unwrap_or_default(),
        kind: tool_kind(tool.loaded.kind()) as i32,
    }
}

fn tool_kind(kind: ToolKind) -> pb::ToolKind {
    match kind {
        ToolKind::WasmModule => pb::ToolKind::WasmModule,
        ToolKind::WasmCommand => pb::ToolKind::WasmCommand,
        ToolKind::WasmComponent => pb::ToolKind::WasmComponent,
        ToolKind::Program => pb::ToolKind::Program,
        ToolKind::McpTool => pb::ToolKind::Mcp,
    }
}

pub fn execution_event(event: ExecutionEvent) -> pb::ExecuteToolEvent {
    use pb::execute_tool_event::Event;
    let event = match event {
        ExecutionEvent::Started {
            execution_id,
            tool,
            module_digest,
        } => Event::Started(pb::ExecutionStarted {
            execution_id: execution_id.into_string(),
            tool,
            module_digest,
        }),
        ExecutionEvent::Output(chunk) => Event::Output(output(chunk)),
        ExecutionEvent::Finished(result) => Event::Finished(tool_result(result)),
    };
    pb::ExecuteToolEvent { event: Some(event) }
}

pub fn output(chunk: OutputChunk) -> pb::ToolOutput {
    pb::ToolOutput {
        stream: match chunk.stream {
            StreamKind::Stdout => pb::OutputStream::Stdout,
            StreamKind::Stderr => pb::OutputStream::Stderr,
        } as i32,
        data: chunk.data.to_vec(),
    }
}

pub fn tool_result(result: ToolResult) -> pb::ToolResult {
    let metadata = result.metadata;
    pb::ToolResult {
        status: tool_status(result.status) as i32,
        content: result.content,
        truncated: result.truncated,
        original_bytes: result.original_bytes,
        head_bytes: result.head_bytes,
        tail_bytes: result.tail_bytes,
        duration_ms: millis(result.duration),
        retryable: result.retryable,
        exit_code: result.exit_code,
        error_message: result.error_message,
        metadata: Some(pb::ToolResultMetadata {
            peak_memory_bytes: metadata.peak_memory_bytes,
            cpu_time_us: u64::try_from(metadata.cpu_time.as_micros()).unwrap_or(u64::MAX),
            module_digest: metadata.module_digest,
            engine: metadata
                .engine
                .map(EngineKind::as_str)
                .unwrap_or_default()
                .to_owned(),
            profile: metadata.profile,
            stdout_bytes: metadata.stdout_bytes,
            stderr_bytes: metadata.stderr_bytes,
            signal: metadata.signal,
            network: metadata.network.into_iter().map(network_contact).collect(),
        }),
        execution_id: result
            .execution_id
            .map(ExecutionId::into_string)
            .unwrap_or_default(),
        changes: result.changes.as_deref().map(change_set_summary),
    }
}

/// A result as it was recorded (the effect journal keeps the wire form). A status this
/// daemon does not know reads as OUTCOME_UNKNOWN: whatever it was, the daemon cannot vouch
/// for it.
pub fn tool_result_from(result: &pb::ToolResult) -> ToolResult {
    let status = pb::ToolStatus::try_from(result.status)
        .ok()
        .and_then(tool_status_from)
        .unwrap_or(ToolStatus::OutcomeUnknown);
    let metadata = result.metadata.clone().unwrap_or_default();
    ToolResult {
        status,
        content: result.content.clone(),
        truncated: result.truncated,
        original_bytes: result.original_bytes,
        head_bytes: result.head_bytes,
        tail_bytes: result.tail_bytes,
        duration: std::time::Duration::from_millis(result.duration_ms),
        retryable: result.retryable,
        exit_code: result.exit_code,
        error_message: result.error_message.clone(),
        metadata: ResultMetadata {
            peak_memory_bytes: metadata.peak_memory_bytes,
            cpu_time: std::time::Duration::from_micros(metadata.cpu_time_us),
            module_digest: metadata.module_digest,
            engine: EngineKind::parse(&metadata.engine),
            profile: metadata.profile,
            stdout_bytes: metadata.stdout_bytes,
            stderr_bytes: metadata.stderr_bytes,
            signal: metadata.signal,
            network: metadata
                .network
                .into_iter()
                .map(network_contact_from)
                .collect(),
        },
        execution_id: (!result.execution_id.is_empty())
            .then(|| ExecutionId::from_stored(result.execution_id.clone())),
        changes: result
            .changes
            .as_ref()
            .map(|set| Box::new(change_set_from(set))),
    }
}

/// How much of a change set's file changes a record that clients read carries (a run's
/// `changes` event, a call's result): a quarter of a MiB holds a thousand changes of long
/// paths, and keeps every event far under the 16 MiB message limit.
pub const CHANGE_SUMMARY_BYTES: usize = 256 * 1024;
/// How many `skipped` notes a record carries; a last one counts the rest.
pub const MAX_SKIPPED_NOTES: usize = 100;

/// A change set as clients read it in events and results: its first changes, up to
/// [`CHANGE_SUMMARY_BYTES`], with `total_changes` set when the rest is left to ListChanges.
pub fn change_set_summary(set: &ChangeSet) -> pb::ChangeSet {
    let mut whole = change_set(set);
    let mut used = 0;
    let fits = whole
        .changes
        .iter()
        .take_while(|change| {
            used += prost::Message::encoded_len(*change) + 4;
            used <= CHANGE_SUMMARY_BYTES
        })
        .count();
    if fits < whole.changes.len() {
        whole.total_changes = whole.total_changes.max(whole.changes.len() as u64);
        whole.changes.truncate(fits);
    }
    if whole.skipped.len() > MAX_SKIPPED_NOTES {
        let more = whole.skipped.len() - (MAX_SKIPPED_NOTES - 1);
        whole.skipped.truncate(MAX_SKIPPED_NOTES - 1);
        whole.skipped.push(format!("… and {more} more"));
    }
    whole
}

/// A change set whole, as the run's journal keeps it.
pub fn change_set(set: &ChangeSet) -> pb::ChangeSet {
    let state = |state: &changes::State| pb::FileState {
        node: match state.node {
            Node::File => pb::NodeKind::File,
            Node::Symlink => pb::NodeKind::Symlink,
            Node::Dir => pb::NodeKind::Dir,
        } as i32,
        digest: state.digest.clone().unwrap_or_default(),
        mode: state.mode,
        size: state.size,
    };
    pb::ChangeSet {
        changes: set
            .changes
            .iter()
            .map(|change| pb::FileChange {
                path: change.path.to_string(),
                path_bytes: raw_bytes(&change.path),
                from_bytes: change.from.as_ref().map(raw_bytes).unwrap_or_default(),
                kind: match change.kind {
                    Kind::Added => pb::ChangeKind::Added,
                    Kind::Modified => pb::ChangeKind::Modified,
                    Kind::Deleted => pb::ChangeKind::Deleted,
                    Kind::Renamed => pb::ChangeKind::Renamed,
                } as i32,
                from: change
                    .from
                    .as_ref()
                    .map(RelPath::to_string)
                    .unwrap_or_default(),
                before: change.before.as_ref().map(state),
                after: change.after.as_ref().map(state),
                digest_only: change.digest_only.clone().unwrap_or_default(),
                applied: change.applied,
            })
            .collect(),
        not_applied: set.not_applied.clone().unwrap_or_default(),
        skipped: set.skipped.clone(),
        total_changes: set.total_changes,
    }
}

/// A change set as it was recorded. A kind this daemon does not know makes the change read
/// as not applied: a revert then leaves the path alone rather than guess.
pub fn change_set_from(set: &pb::ChangeSet) -> ChangeSet {
    let state = |state: &pb::FileState| {
        let node = match pb::NodeKind::try_from(state.node) {
            Ok(pb::NodeKind::Symlink) => Node::Symlink,
            Ok(pb::NodeKind::Dir) => Node::Dir,
            Ok(pb::NodeKind::File | pb::NodeKind::Unspecified) | Err(_) => Node::File,
        };
        changes::State {
            node,
            digest: non_empty(&state.digest).map(str::to_owned),
            mode: state.mode,
            size: state.size,
        }
    };
    ChangeSet {
        changes: set
            .changes
            .iter()
            .map(|change| {
                let kind = match pb::ChangeKind::try_from(change.kind) {
                    Ok(pb::ChangeKind::Added) => Some(Kind::Added),
                    Ok(pb::ChangeKind::Modified) => Some(Kind::Modified),
                    Ok(pb::ChangeKind::Deleted) => Some(Kind::Deleted),
                    Ok(pb::ChangeKind::Renamed) => Some(Kind::Renamed),
                    Ok(pb::ChangeKind::Unspecified) | Err(_) => None,
                };
                // A path that is not one (a record written by hand, or by a daemon with a
                // bug) reads as not applied, under an empty path: a revert leaves it alone.
                let path = rel_path(&change.path, &change.path_bytes);
                let from = non_empty(&change.from)
                    .map(|from| rel_path(from, &change.from_bytes))
                    .transpose();
                let (valid, path, from) = match (path, from) {
                    (Ok(path), Ok(from)) => (true, path, from),
                    _ => (false, RelPath::root(), None),
                };
                changes::Change {
                    path,
                    kind: kind.unwrap_or(Kind::Modified),
                    from,
                    before: change.before.as_ref().map(state),
                    after: change.after.as_ref().map(state),
                    digest_only: non_empty(&change.digest_only).map(str::to_owned),
                    applied: change.applied && kind.is_some() && valid,
                }
            })
            .collect(),
        not_applied: non_empty(&set.not_applied).map(str::to_owned),
        refusal: None,
        skipped: set.skipped.clone(),
        total_changes: set.total_changes,
    }
}

/// A path's bytes for the wire's `*_bytes` fields: empty when the path is UTF-8 (its text
/// says it all).
fn raw_bytes(path: &RelPath) -> Vec<u8> {
    match path.to_str() {
        Some(_) => Vec::new(),
        None => path.as_bytes().to_vec(),
    }
}

/// A recorded path: its bytes when the record has them, else its text.
fn rel_path(text: &str, bytes: &[u8]) -> Result<RelPath, changes::NotRelative> {
    if bytes.is_empty() {
        RelPath::entry(text)
    } else {
        RelPath::entry(bytes)
    }
}

fn network_contact_from(contact: pb::NetworkContact) -> Contact {
    Contact {
        host: contact.host,
        port: u16::try_from(contact.port).unwrap_or(0),
        connections: contact.connections,
        bytes_sent: contact.bytes_sent,
        bytes_received: contact.bytes_received,
        refused: contact.refused,
        refusal: contact.refusal,
    }
}

pub fn network_contact(contact: Contact) -> pb::NetworkContact {
    pb::NetworkContact {
        host: contact.host,
        port: u32::from(contact.port),
        connections: contact.connections,
        bytes_sent: contact.bytes_sent,
        bytes_received: contact.bytes_received,
        refused: contact.refused,
        refusal: contact.refusal,
    }
}

pub fn tool_status(status: ToolStatus) -> pb::ToolStatus {
    match status {
        ToolStatus::Ok => pb::ToolStatus::Ok,
        ToolStatus::ToolError => pb::ToolStatus::ToolError,
        ToolStatus::InvalidArguments => pb::ToolStatus::InvalidArguments,
        ToolStatus::Denied => pb::ToolStatus::Denied,
        ToolStatus::Timeout => pb::ToolStatus::Timeout,
        ToolStatus::Cancelled => pb::ToolStatus::Cancelled,
        ToolStatus::LimitExceeded => pb::ToolStatus::LimitExceeded,
        ToolStatus::SandboxError => pb::ToolStatus::SandboxError,
        ToolStatus::OutcomeUnknown => pb::ToolStatus::OutcomeUnknown,
    }
}

fn tool_status_from(status: pb::ToolStatus) -> Option<ToolStatus> {
    match status {
        pb::ToolStatus::Unspecified => None,
        pb::ToolStatus::Ok => Some(ToolStatus::Ok),
        pb::ToolStatus::ToolError => Some(ToolStatus::ToolError),
        pb::ToolStatus::InvalidArguments => Some(ToolStatus::InvalidArguments),
        pb::ToolStatus::Denied => Some(ToolStatus::Denied),
        pb::ToolStatus::Timeout => Some(ToolStatus::Timeout),
        pb::ToolStatus::Cancelled => Some(ToolStatus::Cancelled),
        pb::ToolStatus::LimitExceeded => Some(ToolStatus::LimitExceeded),
        pb::ToolStatus::SandboxError => Some(ToolStatus::SandboxError),
        pb::ToolStatus::OutcomeUnknown => Some(ToolStatus::OutcomeUnknown),
    }
}

pub fn risk(risk: Risk) -> pb::Risk {
    match risk {
        Risk::ReadOnly => pb::Risk::ReadOnly,
        Risk::Write => pb::Risk::Write,
        Risk::Network => pb::Risk::Network,
        Risk::Install => pb::Risk::Install,
        Risk::Exec => pb::Risk::Exec,
        Risk::Destructive => pb::Risk::Destructive,
    }
}

fn truncate_mode(mode: TruncateMode) -> pb::TruncateMode {
    match mode {
        TruncateMode::Head => pb::TruncateMode::Head,
        TruncateMode::Tail => pb::TruncateMode::Tail,
        TruncateMode::HeadTail => pb::TruncateMode::HeadTail,
    }
}

fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A proto3 string field whose empty value means "none".
pub fn non_empty(text: &str) -> Option<&str> {
    Some(text).filter(|text| !text.is_empty())
}

pub fn policy_decision(decision: rules::Decision) -> pb::PolicyDecision {
    match decision {
        rules::Decision::Allow => pb::PolicyDecision::Allow,
        rules::Decision::Ask => pb::PolicyDecision::Ask,
        rules::Decision::Deny => pb::PolicyDecision::Deny,
    }
}

pub fn policy_layer(layer: rules::Layer) -> pb::PolicyLayer {
    match layer {
        rules::Layer::Operator => pb::PolicyLayer::Operator,
        rules::Layer::Session => pb::PolicyLayer::Session,
        rules::Layer::Run => pb::PolicyLayer::Run,
        rules::Layer::Grant => pb::PolicyLayer::Grant,
    }
}

pub fn policy_rule(rule: &rules::RuleRef) -> pb::PolicyRule {
    pb::PolicyRule {
        name: rule.name.clone(),
        decision: policy_decision(rule.decision) as i32,
        grantable: rule.grantable,
        layer: policy_layer(rule.origin.layer) as i32,
        source: rule.origin.source.clone(),
        line: rule.origin.line,
        ..pb::PolicyRule::default()
    }
}

/// A decision with every part of it and what made each.
pub fn policy_verdict(verdict: &rules::Verdict) -> pb::PolicyVerdict {
    pb::PolicyVerdict {
        decision: policy_decision(verdict.decision) as i32,
        reason: verdict.reason.clone(),
        grantable: verdict.grantable,
        parts: verdict
            .judged
            .iter()
            .map(|judged| {
                let (rule, why) = match &judged.by {
                    rules::By::Rule(rule) => (Some(policy_rule(rule)), rule.to_string()),
                    other => (None, other.to_string()),
                };
                pb::PolicyPart {
                    subject: judged.subject.clone(),
                    decision: policy_decision(judged.decision) as i32,
                    rule,
                    why,
                    words: judged.words.clone(),
                }
            })
            .collect(),
        rule: verdict.rule().map(policy_rule),
    }
}
