//! What the executor does around a call that may write the workspace: the overlay it writes
//! through, made before the engine runs it, and afterwards its change set — captured,
//! journaled when the call has a journal (a run's), applied; or dropped whole when the call
//! was stopped. How each of those is done is `crate::changes`'s; this module decides when.

use std::sync::Arc;

use std::os::fd::OwnedFd;
use std::time::Instant;

use crate::changes::{
    CallRules, ChangeError, ChangeSet, Changes, Deadline, Exclusions, Modes, Overlay, Refusal,
    SURVEY_INTERVAL_MIN, WorkspaceIgnores,
};
use crate::engine::EngineKind;
use crate::ids::ExecutionId;
use crate::profile::{Access, GrantPath, Profile};

use super::registry::Tool;

/// Keeps a call's change set durably before it reaches the workspace, so that after a crash
/// in the middle of applying it, which paths landed can be told (see `changes::reconcile`).
#[async_trait::async_trait]
pub trait ChangeJournal: Send + Sync {
    /// Returns once `changes` is committed.
    async fn pending(&self, changes: &ChangeSet) -> Result<(), String>;
}

/// The overlay a call writes through, when its profile lets it write the workspace (a
/// preview's profile is read-only, so a preview gets none), with the rules its changes are
/// recorded and applied by. A hosted MCP server is long-lived and keeps an overlay of its
/// own, recorded after each call (`engine::mcp`); its calls get none here.
pub(super) async fn overlay(
    changes: &Result<Changes, Arc<str>>,
    tool: &Tool,
    profile: &Profile,
    workspace: Option<&std::path::Path>,
    ignores: Option<WorkspaceIgnores>,
    execution_id: &ExecutionId,
    deadline: Instant,
) -> Result<Option<(Arc<Overlay>, CallRules)>, String> {
    let writes = profile.files.iter().any(|grant| {
        grant.access == Access::ReadWrite && matches!(grant.path, GrantPath::Workspace(_))
    });
    let (true, Some(workspace), false) =
        (writes, workspace, tool.manifest.engine() == EngineKind::Mcp)
    else {
        return Ok(None);
    };
    let changes = match changes {
        Ok(changes) => changes.clone(),
        Err(reason) => {
            return Err(format!(
                "`{}` may write the workspace, and this daemon cannot record what a call changes: {reason}",
                tool.name()
            ));
        }
    };
    let workspace = workspace.to_owned();
    let patterns = profile.change_exclusions.clone();
    let name = execution_id.to_string();
    // WASI cannot set a file's mode: a rewritten file keeps its own.
    let modes = match tool.manifest.engine() {
        EngineKind::Wasm => Modes::Kept,
        EngineKind::Process | EngineKind::Mcp => Modes::Tool,
    };
    let rules = profile.change_rules;
    tokio::task::spawn_blocking(move || {
        let ignores = ignores.unwrap_or_else(|| WorkspaceIgnores::read(&workspace));
        let call = CallRules {
            exclusions: Exclusions::new(&patterns, ignores),
            modes,
            rules,
            deadline: Deadline(Some(deadline)),
        };
        changes
            .overlay(&workspace, &name)
            .map(|overlay| Some((Arc::new(overlay), call)))
    })
    .await
    .map_err(|err| format!("the overlay's set-up panicked: {err}"))?
    .map_err(|err| err.to_string())
}

/// Applies what a finished call wrote (journaled first, when the call has a journal), or
/// throws it away.
pub(super) async fn settle(
    changes: &Result<Changes, Arc<str>>,
    overlay: Arc<Overlay>,
    call: CallRules,
    finished: bool,
    journal: Option<Arc<dyn ChangeJournal>>,
) -> ChangeSet {
    let Ok(changes) = changes.clone() else {
        return ChangeSet::default();
    };
    let Ok(overlay) = Arc::try_unwrap(overlay) else {
        return ChangeSet {
            not_applied: Some(
                "the engine still held the workspace overlay; nothing was applied".into(),
            ),
            refusal: Some(Refusal::Failed),
            ..ChangeSet::default()
        };
    };
    let panicked = |err: tokio::task::JoinError| ChangeSet {
        not_applied: Some(format!("recording the call's changes panicked: {err}")),
        refusal: Some(Refusal::Failed),
        ..ChangeSet::default()
    };
    if !finished {
        let _ = tokio::task::spawn_blocking(move || drop(overlay.finish())).await;
        return ChangeSet::default();
    }
    let capturing = changes.clone();
    let deadline = call.deadline;
    let captured = tokio::task::spawn_blocking(move || capturing.capture(overlay, &call)).await;
    let (upper, set) = match captured {
        Ok(Ok(captured)) => captured,
        Ok(Err(set)) => return set,
        Err(err) => return panicked(err),
    };
    if let Some(journal) = journal
        && !set.changes.is_empty()
        && let Err(err) = journal.pending(&set).await
    {
        // Applied unjournaled, a crash halfway could not be told apart from a change
        // someone else made: apply nothing.
        let _ = tokio::task::spawn_blocking(move || drop(upper)).await;
        return ChangeSet {
            not_applied: Some(format!(
                "the change set could not be journaled, so nothing was applied: {err}"
            )),
            refusal: Some(Refusal::Failed),
            ..set
        };
    }
    tokio::task::spawn_blocking(move || changes.apply(&upper, set, deadline))
        .await
        .unwrap_or_else(panicked)
}

/// Resolves, saying why, once the call behind `overlay` has written past its profile's
/// bounds; never otherwise. The upper layer is surveyed every [`SURVEY_INTERVAL_MIN`], or ten
/// times as long as the last survey took, so that watching costs a tenth of a core at most.
pub(super) async fn exceeded(overlay: &Overlay, call: &CallRules) -> String {
    let rules = call.rules;
    let root: Option<Arc<OwnedFd>> = std::fs::File::open(&overlay.upper().path)
        .ok()
        .map(|dir| Arc::new(dir.into()));
    let Some(root) = root else {
        // Capture surveys it again and says what is wrong.
        return std::future::pending().await;
    };
    let mut wait = SURVEY_INTERVAL_MIN;
    loop {
        tokio::time::sleep(wait).await;
        let started = Instant::now();
        let root = root.clone();
        let surveyed = tokio::task::spawn_blocking(move || {
            crate::changes::survey(&root, &rules, Deadline::none())
        })
        .await;
        if let Ok(Err(ChangeError::Exceeded(why))) = surveyed {
            return why;
        }
        wait = SURVEY_INTERVAL_MIN.max(started.elapsed() * 10);
    }
}
