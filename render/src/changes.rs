//! Change sets as people read them: one line per path, `git status` style, and a run's change
//! sets step by step; their JSON view is in `run_json`.

use serde::Serialize;

use crate::proto::{ChangeKind, ChangeSet, FileChange, ListChangesResponse, RevertRunResponse};

/// The letter `git status --short` would show, and the kind's name.
pub fn change_kind_name(kind: i32) -> (&'static str, &'static str) {
    match ChangeKind::try_from(kind) {
        Ok(ChangeKind::Added) => ("A", "added"),
        Ok(ChangeKind::Modified) => ("M", "modified"),
        Ok(ChangeKind::Deleted) => ("D", "deleted"),
        Ok(ChangeKind::Renamed) => ("R", "renamed"),
        Ok(ChangeKind::Unspecified) | Err(_) => ("?", "unknown"),
    }
}

/// One line: `M src/calc.py`, `R old.txt -> new.txt`, with what keeps it from being undone.
pub fn change_line(change: &FileChange) -> String {
    let (letter, _) = change_kind_name(change.kind);
    let mut line = if change.from.is_empty() {
        format!("{letter} {}", change.path)
    } else {
        format!("{letter} {} -> {}", change.from, change.path)
    };
    let mode = |state: &Option<crate::proto::FileState>| state.as_ref().map(|state| state.mode);
    if let (Some(before), Some(after)) = (mode(&change.before), mode(&change.after))
        && before != after
    {
        line.push_str(&format!(" (mode {before:o} -> {after:o})"));
    }
    if !change.digest_only.is_empty() {
        line.push_str(&format!(" [digest only: {}]", change.digest_only));
    }
    if !change.applied {
        line.push_str(" [not applied]");
    }
    line
}

/// A change set's lines, each indented by `indent`.
pub fn change_set_lines(set: &ChangeSet, indent: &str) -> Vec<String> {
    let mut lines: Vec<String> = set
        .changes
        .iter()
        .map(|change| format!("{indent}{}", change_line(change)))
        .collect();
    let shown = set.changes.len() as u64;
    if set.total_changes > shown {
        lines.push(format!(
            "{indent}… and {} more (`airlock changes RUN_ID` lists a run's sets whole)",
            set.total_changes - shown
        ));
    }
    for skipped in &set.skipped {
        lines.push(format!("{indent}! not applied: {skipped}"));
    }
    if !set.not_applied.is_empty() {
        lines.push(format!("{indent}! not applied: {}", set.not_applied));
    }
    lines
}

/// `airlock changes RUN_ID [--step N]`: every step (or step N) that changed something.
pub fn changes_lines(
    run_id: &str,
    step: Option<u32>,
    changes: &ListChangesResponse,
) -> Vec<String> {
    if changes.steps.is_empty() {
        return vec![match step {
            Some(step) => format!("step {step} of run {run_id} changed nothing in its workspace"),
            None => format!("run {run_id} changed nothing in its workspace"),
        }];
    }
    let mut lines = vec![format!("workspace {}", changes.workspace)];
    for step in &changes.steps {
        lines.push(format!(
            "step {}: {} ({})",
            step.step, step.tool, step.call_id
        ));
        if let Some(set) = &step.change_set {
            lines.extend(change_set_lines(set, "  "));
        }
    }
    lines
}

/// What `airlock revert` did.
pub fn revert_lines(revert: &RevertRunResponse) -> Vec<String> {
    let mut lines: Vec<String> = revert
        .restored
        .iter()
        .map(|path| format!("restored {path}"))
        .chain(revert.removed.iter().map(|path| format!("removed  {path}")))
        .collect();
    for path in &revert.unrestorable {
        lines.push(format!("cannot restore {}: {}", path.path, path.reason));
    }
    if lines.is_empty() {
        lines.push("nothing to revert: the workspace is already as it was".into());
    }
    lines
}

/// One path of a change set.
#[derive(Serialize)]
pub(super) struct ChangeView<'a> {
    path: &'a str,
    kind: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    from: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    before_digest: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    after_digest: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    digest_only: &'a str,
    applied: bool,
}

impl<'a> From<&'a crate::proto::FileChange> for ChangeView<'a> {
    fn from(change: &'a crate::proto::FileChange) -> Self {
        let digest = |state: &'a Option<crate::proto::FileState>| {
            state.as_ref().map_or("", |state| state.digest.as_str())
        };
        ChangeView {
            path: &change.path,
            kind: change_kind_name(change.kind).1,
            from: &change.from,
            before_digest: digest(&change.before),
            after_digest: digest(&change.after),
            digest_only: &change.digest_only,
            applied: change.applied,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{FileState, StepChanges};

    #[test]
    fn lines_say_what_changed_and_what_cannot_be_undone() {
        let state = |mode| {
            Some(FileState {
                mode,
                ..Default::default()
            })
        };
        let set = ChangeSet {
            changes: vec![
                FileChange {
                    path: "src/calc.py".into(),
                    kind: ChangeKind::Modified as i32,
                    before: state(0o644),
                    after: state(0o755),
                    applied: true,
                    ..Default::default()
                },
                FileChange {
                    path: "src/new.py".into(),
                    from: "old.py".into(),
                    kind: ChangeKind::Renamed as i32,
                    applied: true,
                    ..Default::default()
                },
                FileChange {
                    path: "target/app".into(),
                    kind: ChangeKind::Added as i32,
                    digest_only: "excluded by the profile".into(),
                    applied: false,
                    ..Default::default()
                },
            ],
            not_applied: "disk full".into(),
            skipped: vec!["fifo".into()],
            ..Default::default()
        };
        let listed = ListChangesResponse {
            workspace: "/ws".into(),
            steps: vec![StepChanges {
                step: 2,
                tool: "run_command".into(),
                call_id: "call_1".into(),
                change_set: Some(set),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            changes_lines("run_1", None, &listed),
            [
                "workspace /ws",
                "step 2: run_command (call_1)",
                "  M src/calc.py (mode 644 -> 755)",
                "  R old.py -> src/new.py",
                "  A target/app [digest only: excluded by the profile] [not applied]",
                "  ! not applied: fifo",
                "  ! not applied: disk full",
            ]
        );
        assert_eq!(
            changes_lines("run_1", None, &ListChangesResponse::default()),
            ["run run_1 changed nothing in its workspace"]
        );
        assert_eq!(
            changes_lines("run_1", Some(3), &ListChangesResponse::default()),
            ["step 3 of run run_1 changed nothing in its workspace"]
        );
    }
}
