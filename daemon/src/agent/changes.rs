//! A run's change sets: listed step by step, their contents read back, and undone; and forks
//! of a run from one of its steps, in its workspace or in a copy as it was then.
//!
//! The change sets live in the run's event log (`changes` events, right after the
//! `tool_finished` of the call that made them), so they are exactly what clients were shown,
//! and survive a restart like every event. A revert reads them back, folds those of the steps
//! to undo into one plan, and runs it on a blocking thread; a live run is never reverted
//! under itself.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use airlock_proto::v1 as pb;

use super::context::Entry;
use super::error::AgentError;
use super::live::LiveRun;
use super::run::LoopState;
use super::runtime::AgentRuntime;
use super::start::{Carried, RunOwner};
use crate::changes::{
    ChangeSet, Changes, Conflict, RelPath, RevertError, RevertPlan, RevertReport, copy_contents,
};
use crate::ids::{CallId, RunId};
use crate::store::RunRecord;
use crate::wire;

/// Events read from the store per query while collecting a run's change sets.
const EVENT_PAGE: usize = 1000;

/// The most file changes one ListChanges page holds: 10,000 changes of 255-byte paths encode
/// to about 4.5 MiB, well within the 16 MiB a reply may be.
pub const MAX_CHANGES_PAGE: u32 = 10_000;

/// One page of `steps`' file changes, counted in order across the steps: the steps with
/// changes in it (each holding only those), the offset of the next page (0 at the end), and
/// how many there are in all.
pub fn changes_page(
    steps: Vec<pb::StepChanges>,
    offset: u64,
    limit: u32,
) -> (Vec<pb::StepChanges>, u64, u64) {
    let limit = u64::from(if limit == 0 {
        MAX_CHANGES_PAGE
    } else {
        limit.min(MAX_CHANGES_PAGE)
    });
    let count = |step: &pb::StepChanges| {
        step.change_set
            .as_ref()
            .map_or(0, |set| set.changes.len() as u64)
    };
    let total: u64 = steps.iter().map(count).sum();
    let end = offset.saturating_add(limit).min(total);
    let mut page = Vec::new();
    let mut at = 0u64;
    for mut step in steps {
        let len = count(&step);
        let (from, to) = (offset.max(at), end.min(at + len));
        // A step with no file changes (only notes) goes on the page its place falls in, the
        // last page holding what comes at its end.
        let shown = from < to || (len == 0 && at >= offset && (at < end || end == total));
        if shown && let Some(set) = step.change_set.as_mut() {
            let keep = usize::try_from(from - at).unwrap_or(usize::MAX)
                ..usize::try_from(to.max(from) - at).unwrap_or(usize::MAX);
            set.changes = set.changes.drain(keep).collect();
            // A page holding a slice of the step's set says how many the set has.
            if to.max(from) - from < len {
                set.total_changes = len;
            }
            page.push(step);
        }
        at += len;
    }
    let next = if end < total { end } else { 0 };
    (page, next, total)
}

impl AgentRuntime {
    /// The run and its change sets, in order, each with its step's 1-based index.
    pub async fn changes(
        &self,
        run_id: &RunId,
    ) -> Result<(RunRecord, Vec<pb::StepChanges>), AgentError> {
        let run = self.run(run_id).await?;
        let mut steps = Vec::new();
        let mut step_ids: Vec<String> = Vec::new();
        self.each_event(run_id, |event| match event.event {
            Some(pb::run_event::Event::StepStarted(_)) => step_ids.push(event.step_id),
            Some(pb::run_event::Event::Changes(changes)) => {
                let step = step_ids
                    .iter()
                    .position(|id| *id == event.step_id)
                    .map_or(0, |index| index + 1);
                steps.push(pb::StepChanges {
                    step: u32::try_from(step).unwrap_or(u32::MAX),
                    step_id: event.step_id,
                    call_id: changes.call_id,
                    tool: changes.tool,
                    change_set: changes.change_set,
                });
            }
            _ => {}
        })
        .await?;
        for step in &mut steps {
            self.whole_set(run_id, step).await?;
        }
        Ok((run, steps))
    }

    /// Makes `step`'s change set whole when its event holds only the first of its changes:
    /// the rest is in the run's journal, kept before the set was applied (and again, with
    /// which paths landed, after a crash stopped the apply).
    async fn whole_set(
        &self,
        run_id: &RunId,
        step: &mut pb::StepChanges,
    ) -> Result<(), AgentError> {
        let Some(set) = step.change_set.as_mut() else {
            return Ok(());
        };
        if set.total_changes == 0 {
            return Ok(());
        }
        let call_id = CallId::from_stored(step.call_id.clone());
        let journaled = self
            .shared
            .store
            .effect(run_id, &call_id)
            .await?
            .and_then(|effect| effect.pending_changes);
        let Some(journaled) = journaled else {
            tracing::warn!(run = %run_id, call = %step.call_id, "a large change set's journal is missing: only its first changes are known");
            return Ok(());
        };
        // Applied whole or not at all: the event says which. A crash's reconciled journal says
        // path by path.
        let landed = set.not_applied.is_empty();
        set.changes = journaled
            .changes
            .into_iter()
            .map(|change| pb::FileChange {
                applied: change.applied || landed,
                ..change
            })
            .collect();
        set.total_changes = 0;
        Ok(())
    }

    /// A content one of the run's change sets names, while the blob store keeps it.
    pub async fn read_blob(&self, run_id: &RunId, digest: &str) -> Result<Vec<u8>, AgentError> {
        let (_, steps) = self.changes(run_id).await?;
        let named = steps
            .iter()
            .filter_map(|step| step.change_set.as_ref())
            .flat_map(|set| &set.changes)
            .flat_map(|change| [&change.before, &change.after])
            .flatten()
            .any(|state| state.digest == digest);
        let unknown = || AgentError::UnknownBlob(digest.to_owned());
        if !named {
            return Err(unknown());
        }
        let changes = self.shared.executor.changes().ok_or_else(unknown)?.clone();
        let digest = digest.to_owned();
        tokio::task::spawn_blocking(move || changes.blobs().read(&digest))
            .await
            .map_err(|err| AgentError::Changes(format!("reading a blob panicked: {err}")))?
            .map_err(|err| AgentError::Changes(format!("cannot read a blob: {err}")))?
            .ok_or_else(unknown)
    }

    /// Puts a finished run's workspace back as it was before step `to_step` (1-based).
    pub async fn revert(
        &self,
        run_id: &RunId,
        to_step: u32,
        force: bool,
    ) -> Result<RevertReport, AgentError> {
        let (plan, workspace, changes) = self.revert_plan(run_id, to_step).await?;
        tokio::task::spawn_blocking(move || {
            let report = plan.execute_at(&workspace, changes.blobs(), force)?;
            // Hosted servers over the workspace are shown what the revert put back.
            if let Ok(root) = crate::changes::open_workspace(&workspace) {
                let paths: Vec<RelPath> = report
                    .restored
                    .iter()
                    .chain(&report.removed)
                    .filter_map(|path| RelPath::new(path.as_bytes()).ok())
                    .collect();
                changes
                    .views()
                    .landed(std::os::fd::AsFd::as_fd(&root), paths.iter());
            }
            Ok(report)
        })
        .await
        .map_err(|err| AgentError::Changes(format!("the revert panicked: {err}")))?
        .map_err(revert_error)
    }

    /// What [`AgentRuntime::revert`] would do now, and the conflicts it would be refused for
    /// without `force`; changes nothing.
    pub async fn preview_revert(
        &self,
        run_id: &RunId,
        to_step: u32,
    ) -> Result<(RevertReport, Vec<Conflict>), AgentError> {
        let (plan, workspace, _) = self.revert_plan(run_id, to_step).await?;
        tokio::task::spawn_blocking(move || plan.preview_at(&workspace))
            .await
            .map_err(|err| AgentError::Changes(format!("the revert's preview panicked: {err}")))?
            .map_err(revert_error)
    }

    /// The plan of a revert of a finished run to before `to_step`, its workspace, and the
    /// change sets' store.
    async fn revert_plan(
        &self,
        run_id: &RunId,
        to_step: u32,
    ) -> Result<(RevertPlan, PathBuf, Changes), AgentError> {
        if self.live_run(run_id).is_some() {
            return Err(AgentError::RunLive(run_id.to_string()));
        }
        if to_step == 0 {
            return Err(AgentError::Invalid {
                field: "to_step",
                reason: "steps count from 1: revert to the state before which step?".into(),
            });
        }
        let (run, steps) = self.changes(run_id).await?;
        if to_step > run.steps {
            return Err(AgentError::Invalid {
                field: "to_step",
                reason: format!("run {run_id} has {} steps", run.steps),
            });
        }
        let workspace = run.workspace.ok_or_else(|| AgentError::Invalid {
            field: "run_id",
            reason: "the run has no workspace, so it changed nothing".into(),
        })?;
        let workspace = self
            .shared
            .executor
            .workspaces()
            .resolve(Some(&workspace))?
            .ok_or_else(|| AgentError::Invalid {
                field: "run_id",
                reason: "the run has no workspace, so it changed nothing".into(),
            })?;
        let sets: Vec<_> = steps
            .iter()
            .filter(|step| step.step >= to_step)
            .filter_map(|step| step.change_set.as_ref())
            .map(wire::change_set_from)
            .collect();
        let plan = RevertPlan::new(&sets);
        let Some(changes) = self.shared.executor.changes().cloned() else {
            return Err(AgentError::Changes(
                "this daemon keeps no change sets (its change-set store is unavailable)".into(),
            ));
        };
        Ok((plan, workspace, changes))
    }
}

fn revert_error(err: RevertError) -> AgentError {
    match err {
        RevertError::Conflicts(_) => AgentError::RevertConflicts(err.to_string()),
        RevertError::Io { .. } => AgentError::Changes(err.to_string()),
    }
}

/// A fork of a run, planned: what the new run starts with, and the workspace copy to make.
pub struct Fork {
    /// The new run's request: the old run's, in the same session or (once it is made) in the
    /// copy.
    pub start: pb::StartRun,
    /// The run forked, and its conversation up to the step forked at.
    carried: Carried,
    copy: Option<WorkspaceCopy>,
}

impl Fork {
    /// The directory the copy is to be made in, when the fork has one.
    pub fn copy_parent(&self) -> Option<&Path> {
        self.copy.as_ref().and_then(|copy| copy.to.parent())
    }
}

/// Removes a fork's copy, never following a symlink out of it (blocking). A copy that was
/// never made is no error.
fn remove_copy(copy: &Path) -> std::io::Result<()> {
    match copy.symlink_metadata() {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(copy),
        Ok(_) => std::fs::remove_file(copy),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(err),
    }
}

struct WorkspaceCopy {
    from: PathBuf,
    to: PathBuf,
    /// The change sets of the steps from the fork's on, undone in the copy.
    undo: Vec<ChangeSet>,
}

impl AgentRuntime {
    /// Plans a new run whose conversation is `run_id`'s up to the start of step `at_step`
    /// (1-based; 0 for all of it), then `input` (the old run's input when empty); in the same
    /// session, or — with `copy_workspace` — in a copy of the workspace as it was before that
    /// step, made in `copy_into` or next to it (a workspace is its session's, so the copy gets
    /// a new session). The plan's start names the original workspace until the copy is made:
    /// [`Fork::copy_parent`] is where the caller's roots must allow it.
    pub async fn plan_fork(
        &self,
        run_id: &RunId,
        at_step: u32,
        copy_workspace: bool,
        input: String,
        copy_into: Option<PathBuf>,
    ) -> Result<Fork, AgentError> {
        let (run, steps) = self.changes(run_id).await?;
        let (step_ids, call_steps) = self.step_map(run_id).await?;
        if at_step as usize > step_ids.len() {
            return Err(AgentError::Invalid {
                field: "at_step",
                reason: format!("run {run_id} has {} steps", step_ids.len()),
            });
        }
        let checkpoint = self
            .shared
            .store
            .latest_checkpoint(run_id)
            .await?
            .ok_or_else(|| AgentError::Invalid {
                field: "run_id",
                reason: "the run has no checkpoint yet to fork from".into(),
            })?;
        let state = LoopState::decode(&checkpoint.state, &checkpoint.entries)
            .map_err(AgentError::Unresumable)?;
        // Where an entry came from: its step's 1-based index (0 for the run's input).
        let step_of = |source: &str| -> usize {
            let step_id = call_steps.get(source).map_or(source, String::as_str);
            step_ids
                .iter()
                .position(|id| id == step_id)
                .map_or(0, |index| index + 1)
        };
        let earlier: Vec<Entry> = state
            .conversation
            .into_iter()
            .take_while(|entry| at_step == 0 || step_of(&entry.source) < at_step as usize)
            .collect();
        let mut start = run.start.clone();
        if !input.trim().is_empty() {
            start.input = input;
        }
        let copy = match (copy_workspace, &run.workspace) {
            (false, _) => {
                start.session_id = run.session_id.to_string();
                None
            }
            (true, None) => {
                return Err(AgentError::Invalid {
                    field: "copy_workspace",
                    reason: "the run has no workspace to copy".into(),
                });
            }
            (true, Some(workspace)) => {
                let from = PathBuf::from(workspace);
                let name = from
                    .file_name()
                    .map(|name| name.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "workspace".into());
                let parent = match copy_into {
                    Some(dir) => dir,
                    None => from.parent().map(PathBuf::from).unwrap_or_default(),
                };
                if parent.starts_with(&from) {
                    return Err(AgentError::Invalid {
                        field: "copy_into",
                        reason: format!(
                            "{} is inside the workspace the fork copies",
                            parent.display()
                        ),
                    });
                }
                // An id's last eight digits are random (its first are the time it was made).
                let id = RunId::new().into_string();
                let to = parent.join(format!("{name}-fork-run_{}", &id[id.len() - 8..]));
                start.session_id = String::new();
                let undo = steps
                    .iter()
                    .filter(|step| at_step != 0 && step.step >= at_step)
                    .filter_map(|step| step.change_set.as_ref())
                    .map(wire::change_set_from)
                    .collect();
                Some(WorkspaceCopy { from, to, undo })
            }
        };
        Ok(Fork {
            start,
            carried: Carried {
                from: run_id.clone(),
                earlier,
            },
            copy,
        })
    }

    /// Makes the fork's workspace copy, if it has one, checks it with `allowed` (the caller's
    /// roots) now that it exists, and starts the fork in it. A copy that fails, or is refused,
    /// is removed: nothing of it is left behind.
    pub async fn start_fork(
        &self,
        mut fork: Fork,
        owner: &RunOwner,
        allowed: impl FnOnce(&Path) -> Result<(), String> + Send + 'static,
    ) -> Result<Arc<LiveRun>, AgentError> {
        // Before the copy: a fork over its tenant's cap is refused without copying anything.
        let slot = self.hold(owner)?;
        if let Some(copy) = fork.copy {
            let blobs = self
                .shared
                .executor
                .changes()
                .map(|changes| changes.blobs().clone());
            let to = copy.to.clone();
            tokio::task::spawn_blocking(move || -> Result<(), String> {
                let cannot = |err: std::io::Error| {
                    format!("cannot copy the workspace to {}: {err}", copy.to.display())
                };
                // Made here, or it is not this fork's to remove.
                std::fs::create_dir(&copy.to).map_err(cannot)?;
                let made = (|| {
                    // Checked as soon as it exists, before anything is copied into it.
                    allowed(&copy.to)?;
                    copy_contents(&copy.from, &copy.to).map_err(cannot)?;
                    if copy.undo.is_empty() {
                        return Ok(());
                    }
                    let blobs = blobs.ok_or("this daemon keeps no change sets to undo")?;
                    RevertPlan::new(&copy.undo)
                        .execute_at(&copy.to, &blobs, true)
                        .map(|_| ())
                        .map_err(|err| err.to_string())
                })();
                if made.is_err()
                    && let Err(err) = remove_copy(&copy.to)
                {
                    tracing::warn!(copy = %copy.to.display(), error = %err, "cannot remove a refused workspace copy");
                }
                made
            })
            .await
            .map_err(|err| AgentError::Changes(format!("the workspace copy panicked: {err}")))?
            .map_err(AgentError::Changes)?;
            fork.start.workspace = to.to_string_lossy().into_owned();
        }
        Ok(self
            .start_from(fork.start, owner, Some(fork.carried), Some(slot))
            .await?
            .live)
    }

    /// Hands every event of a run, in order, to `visit`, a page at a time.
    async fn each_event(
        &self,
        run_id: &RunId,
        mut visit: impl FnMut(pb::RunEvent),
    ) -> Result<(), AgentError> {
        let mut after = 0;
        loop {
            let events = self
                .shared
                .store
                .events_after(run_id, after, EVENT_PAGE)
                .await?;
            let Some(last) = events.last() else {
                return Ok(());
            };
            after = last.seq;
            events.into_iter().for_each(&mut visit);
        }
    }

    /// A run's step ids in order, and the step of each of its calls.
    async fn step_map(
        &self,
        run_id: &RunId,
    ) -> Result<(Vec<String>, HashMap<String, String>), AgentError> {
        let mut step_ids = Vec::new();
        let mut calls = HashMap::new();
        self.each_event(run_id, |event| match event.event {
            Some(pb::run_event::Event::StepStarted(_)) => step_ids.push(event.step_id),
            Some(pb::run_event::Event::ToolCallProposed(proposed)) => {
                calls.insert(proposed.call_id, event.step_id);
            }
            _ => {}
        })
        .await?;
        Ok((step_ids, calls))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(call: &str, changes: usize) -> pb::StepChanges {
        pb::StepChanges {
            call_id: call.into(),
            change_set: Some(pb::ChangeSet {
                changes: (0..changes)
                    .map(|n| pb::FileChange {
                        path: format!("{call}/{n}"),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn shown(page: &[pb::StepChanges]) -> Vec<(String, usize)> {
        page.iter()
            .map(|step| {
                let set = step.change_set.as_ref().expect("a set");
                (step.call_id.clone(), set.changes.len())
            })
            .collect()
    }

    #[test]
    fn pages_cover_every_change_once_in_order() {
        let steps = vec![step("a", 3), step("notes", 0), step("b", 5), step("c", 0)];
        let (page, next, total) = changes_page(steps.clone(), 0, 4);
        assert_eq!(
            (shown(&page), next, total),
            (
                vec![("a".into(), 3), ("notes".into(), 0), ("b".into(), 1)],
                4,
                8
            )
        );
        // A step cut by the page says how many its set has; a whole one needs not.
        let totals: Vec<u64> = page
            .iter()
            .map(|step| step.change_set.as_ref().expect("set").total_changes)
            .collect();
        assert_eq!(totals, [0, 0, 5]);
        let (page, next, _) = changes_page(steps.clone(), 4, 4);
        assert_eq!(
            (shown(&page), next),
            (vec![("b".into(), 4), ("c".into(), 0)], 0)
        );
        let first = &page[0].change_set.as_ref().expect("set").changes[0];
        assert_eq!(
            first.path, "b/1",
            "the page starts where the last one ended"
        );
        let (page, next, total) = changes_page(steps.clone(), 0, 0);
        assert_eq!((page.len(), next, total), (4, 0, 8));
        let (page, next, _) = changes_page(steps, 100, 4);
        assert_eq!((page.len(), next), (0, 0));
        let (page, _, total) = changes_page(vec![step("only-notes", 0)], 0, 0);
        assert_eq!((page.len(), total), (1, 0));
    }
}
