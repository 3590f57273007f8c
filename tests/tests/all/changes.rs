//! Change sets end to end: `run_command` and `apply_patch` writing a root-owned workspace
//! through their overlays, what a stopped command leaves (nothing), and a run's changes
//! listed, read back and reverted over gRPC.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use airlock_proto::v1 as pb;
use airlock_proto::v1::ToolStatus;
use airlock_tests::{DaemonOptions, TestDaemon, repo_root, scripted_run};
use serde_json::{Value, json};

pub(crate) async fn first_party() -> TestDaemon {
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        ..DaemonOptions::default()
    })
    .await;
    assert!(daemon.refused().is_empty(), "{:?}", daemon.refused());
    daemon
}

/// A small Python project whose test fails, owned by root (the tests run as root): the
/// case that used to leave a granted write unusable.
fn project(daemon: &TestDaemon) -> PathBuf {
    let workspace = daemon.workspace("calc");
    std::fs::write(
        workspace.join("calc.py"),
        "def add(a, b):\n    return a - b\n",
    )
    .unwrap();
    std::fs::write(
        workspace.join("test_calc.py"),
        "import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n",
    )
    .unwrap();
    std::fs::write(workspace.join("notes.txt"), "keep me\n").unwrap();
    assert_eq!(std::fs::metadata(&workspace).unwrap().uid(), 0);
    workspace
}

fn paths(set: &pb::ChangeSet) -> Vec<(String, i32)> {
    set.changes
        .iter()
        .map(|change| (change.path.clone(), change.kind))
        .collect()
}

const FIX: &str = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n";

#[tokio::test]
async fn run_command_writes_a_root_owned_workspace_and_its_changes_are_recorded() {
    let daemon = first_party().await;
    let workspace = project(&daemon);
    let ran = daemon
        .exec(
            "run_command",
            json!({
                "command": "id -u; echo built > out.txt && mkdir -p bin && printf 'int main(void){return 7;}' > bin/m.c && cc bin/m.c -o bin/m && ./bin/m; echo \"exit $?\"; rm notes.txt; ln -s calc.py link",
                "workdir": "."
            }),
            Some(&workspace),
        )
        .await;
    let result = ran.assert_status(ToolStatus::Ok).result().clone();
    assert!(
        result.content.starts_with("65534\n"),
        "never root: {}",
        result.content
    );
    assert!(
        result.content.contains("exit 7"),
        "a built program runs: {}",
        result.content
    );
    let set = result.changes.expect("a change set");
    assert_eq!(
        paths(&set),
        [
            ("bin".into(), pb::ChangeKind::Added as i32),
            ("bin/m".into(), pb::ChangeKind::Added as i32),
            ("bin/m.c".into(), pb::ChangeKind::Added as i32),
            ("link".into(), pb::ChangeKind::Added as i32),
            ("notes.txt".into(), pb::ChangeKind::Deleted as i32),
            ("out.txt".into(), pb::ChangeKind::Added as i32),
        ]
    );
    assert!(set.changes.iter().all(|change| change.applied));
    assert_eq!(
        std::fs::read_to_string(workspace.join("out.txt")).unwrap(),
        "built\n"
    );
    assert!(!workspace.join("notes.txt").exists());
    assert_eq!(
        std::fs::read_link(workspace.join("link")).unwrap(),
        PathBuf::from("calc.py")
    );
    let meta = std::fs::metadata(workspace.join("bin/m")).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid()),
        (0, 0),
        "added files belong to the workspace's owner"
    );
    assert_eq!(
        meta.mode() & 0o111,
        0o111,
        "the built program keeps its mode"
    );

    // A failing command is reported with its exit code and output, and what it wrote lands.
    let failed = daemon
        .exec(
            "run_command",
            json!({"command": "python3 -m unittest 2>&1; echo tried > tried.txt; exit 3", "workdir": "."}),
            Some(&workspace),
        )
        .await;
    let result = failed.assert_status(ToolStatus::ToolError).result().clone();
    assert_eq!(result.exit_code, Some(3));
    assert!(
        result.content.contains("AssertionError"),
        "{}",
        result.content
    );
    assert!(workspace.join("tried.txt").exists());

    let outside = daemon
        .exec(
            "run_command",
            json!({"command": "pwd", "workdir": "../.."}),
            Some(&workspace),
        )
        .await;
    let result = outside
        .assert_status(ToolStatus::ToolError)
        .result()
        .clone();
    assert_eq!(result.exit_code, Some(125));
}

#[tokio::test]
async fn a_command_stopped_mid_write_leaves_the_workspace_untouched() {
    let daemon = first_party().await;
    let workspace = project(&daemon);
    let stopped = daemon
        .exec_request(pb::ExecuteToolRequest {
            tool: "run_command".into(),
            arguments_json: json!({
                "command": "echo half > calc.py; echo new > new.txt; rm notes.txt; sleep 60",
                "workdir": "."
            })
            .to_string(),
            workspace: workspace.to_str().unwrap().to_owned(),
            timeout_ms: 1500,
            require_approval: false,
        })
        .await
        .unwrap();
    let result = stopped.assert_status(ToolStatus::Timeout).result().clone();
    assert!(result.changes.is_none());
    assert_eq!(
        std::fs::read_to_string(workspace.join("calc.py")).unwrap(),
        "def add(a, b):\n    return a - b\n"
    );
    assert!(!workspace.join("new.txt").exists());
    assert!(workspace.join("notes.txt").exists());
}

#[tokio::test]
async fn a_patch_that_does_not_apply_changes_nothing() {
    let daemon = first_party().await;
    let workspace = project(&daemon);
    let broken =
        format!("{FIX}--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-not what is there\n+x\n");
    let refused = daemon
        .exec("apply_patch", json!({"patch": broken}), Some(&workspace))
        .await;
    let result = refused
        .assert_status(ToolStatus::ToolError)
        .result()
        .clone();
    assert!(
        result.error_message.contains("notes.txt"),
        "{}",
        result.error_message
    );
    assert!(result.changes.is_none(), "{:?}", result.changes);
    assert_eq!(
        std::fs::read_to_string(workspace.join("calc.py")).unwrap(),
        "def add(a, b):\n    return a - b\n"
    );

    // WASI cannot set modes: a patched executable stays executable.
    std::fs::set_permissions(
        workspace.join("calc.py"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let applied = daemon
        .exec("apply_patch", json!({"patch": FIX}), Some(&workspace))
        .await;
    let set = applied
        .assert_status(ToolStatus::Ok)
        .result()
        .clone()
        .changes
        .unwrap();
    assert_eq!(
        paths(&set),
        [("calc.py".into(), pb::ChangeKind::Modified as i32)]
    );
    let meta = std::fs::metadata(workspace.join("calc.py")).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o755);
    assert!(
        std::fs::read_to_string(workspace.join("calc.py"))
            .unwrap()
            .contains("a + b")
    );
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"name": name, "arguments": arguments})
}

#[tokio::test]
async fn a_run_tests_patches_and_passes_and_its_changes_are_listed_and_reverted() {
    let daemon = first_party().await;
    let workspace = project(&daemon);
    let test = call(
        "run_command",
        json!({"command": "python3 -m unittest -v", "workdir": "."}),
    );
    let script = json!({"turns": [
        {"tool_calls": [test.clone()]},
        {"tool_calls": [call("apply_patch", json!({"patch": FIX}))]},
        {"tool_calls": [call("run_command", json!({"command": "python3 -m unittest -v && echo passed > status.txt", "workdir": "."}))]},
        {"final": "Fixed add; the tests pass."}
    ]});
    let mut start = scripted_run(&workspace, &script);
    start.approval_policy = pb::ApprovalPolicy::Auto as i32;
    let mut run = daemon.start_run(start).await;
    let finished = run.finished().await;
    assert_eq!(
        finished.reason,
        pb::StopReason::Final as i32,
        "{finished:?}"
    );
    let results: Vec<pb::ToolResult> = run.of(|event| match event {
        pb::run_event::Event::ToolFinished(finished) => finished.result.clone(),
        _ => None,
    });
    assert_eq!(
        results[0].status,
        ToolStatus::ToolError as i32,
        "the test fails first"
    );
    assert_eq!(results[2].status, ToolStatus::Ok as i32, "then passes");
    assert!(
        results.iter().all(|result| result.changes.is_none()),
        "not repeated in results"
    );
    let run_id = run.run_id().to_owned();

    let mut agent = daemon.agent().await;
    let listed = agent
        .list_changes(pb::ListChangesRequest {
            run_id: run_id.clone(),
            step: 0,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let steps: Vec<(u32, String)> = listed
        .steps
        .iter()
        .map(|s| (s.step, s.tool.clone()))
        .collect();
    assert_eq!(
        steps,
        [(2, "apply_patch".into()), (3, "run_command".into())]
    );
    let patch = listed.steps[0].change_set.as_ref().unwrap();
    let before = patch.changes[0].before.as_ref().unwrap().digest.clone();
    let blob = agent
        .read_blob(pb::ReadBlobRequest {
            run_id: run_id.clone(),
            digest: before,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(blob.content, b"def add(a, b):\n    return a - b\n");
    let unknown = agent
        .read_blob(pb::ReadBlobRequest {
            run_id: run_id.clone(),
            digest: "0".repeat(64),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);

    // A fork from step 2 in a copy of the workspace as it was then: the conversation carries
    // step 1 over (so the scripted model goes on with its second turn, the patch), and the
    // patch applies in the copy, where step 2 is undone.
    let forked = agent
        .fork_run(pb::ForkRunRequest {
            run_id: run_id.clone(),
            at_step: 2,
            copy_workspace: true,
            input: "once more".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_ne!(forked.workspace, workspace.to_str().unwrap());
    let copy = PathBuf::from(&forked.workspace);
    let mut fork = daemon
        .open_run(pb::run_request::Request::Attach(pb::AttachRun {
            run_id: forked.run_id.clone(),
            after_seq: 0,
        }))
        .await
        .unwrap();
    assert_eq!(fork.finished().await.reason, pb::StopReason::Final as i32);
    let fork_results: Vec<(String, i32)> = fork.of(|event| match event {
        pb::run_event::Event::ToolFinished(finished) => {
            Some((finished.tool.clone(), finished.result.as_ref()?.status))
        }
        _ => None,
    });
    assert_eq!(
        fork_results,
        [
            ("apply_patch".into(), ToolStatus::Ok as i32),
            ("run_command".into(), ToolStatus::Ok as i32)
        ],
        "the patch applies to the copy as it was before step 2"
    );
    let first_context = |run: &airlock_tests::RunStream| {
        run.of(|event| match event {
            pb::run_event::Event::ContextBuilt(report) => Some(report.items.len()),
            _ => None,
        })[0]
    };
    assert!(
        first_context(&fork) > first_context(&run),
        "step 1 carried over"
    );
    // The fork says what it carried: the run it forks, and that run's messages before step 2
    // (the input, the first call and its result).
    let started = fork.of(|event| match event {
        pb::run_event::Event::RunStarted(started) => Some(started.clone()),
        _ => None,
    })[0]
        .clone();
    assert_eq!(started.continues_run_id, run_id);
    assert_eq!(started.history_messages, 3, "{started:?}");
    // So its cassette is refused as a continued run's is: it could never replay.
    let cassette = agent
        .get_cassette(pb::GetCassetteRequest {
            run_id: forked.run_id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(cassette.code(), tonic::Code::FailedPrecondition);
    assert!(
        cassette.message().contains(&run_id),
        "{}",
        cassette.message()
    );
    assert!(copy.join("status.txt").exists());
    assert!(std::fs::read_to_string(workspace.join("status.txt")).is_ok());

    // A dry run says what undoing the last step would do, and does nothing.
    let preview = agent
        .revert_run(pb::RevertRunRequest {
            run_id: run_id.clone(),
            to_step: 3,
            dry_run: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(preview.removed, ["status.txt"]);
    assert!(preview.restored.is_empty() && preview.conflicts.is_empty());
    assert!(
        workspace.join("status.txt").exists(),
        "a dry run changes nothing"
    );
    // Undo the last step only: the patch stays.
    agent
        .revert_run(pb::RevertRunRequest {
            run_id: run_id.clone(),
            to_step: 3,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(!workspace.join("status.txt").exists());
    assert!(
        std::fs::read_to_string(workspace.join("calc.py"))
            .unwrap()
            .contains("a + b")
    );

    // Someone edits the patched file: undoing the patch is refused, naming it, unless forced.
    std::fs::write(workspace.join("calc.py"), "edited by hand\n").unwrap();
    let preview = agent
        .revert_run(pb::RevertRunRequest {
            run_id: run_id.clone(),
            to_step: 1,
            dry_run: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        preview
            .conflicts
            .iter()
            .map(|conflict| (conflict.path.as_str(), conflict.reason.as_str()))
            .collect::<Vec<_>>(),
        [("calc.py", "changed since the run wrote it")]
    );
    assert_eq!(preview.restored, ["calc.py"]);
    let refused = agent
        .revert_run(pb::RevertRunRequest {
            run_id: run_id.clone(),
            to_step: 1,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert!(
        refused.message().contains("calc.py"),
        "{}",
        refused.message()
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("calc.py")).unwrap(),
        "edited by hand\n"
    );
    let forced = agent
        .revert_run(pb::RevertRunRequest {
            run_id: run_id.clone(),
            to_step: 1,
            force: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(forced.restored, ["calc.py"]);
    assert_eq!(
        std::fs::read_to_string(workspace.join("calc.py")).unwrap(),
        "def add(a, b):\n    return a - b\n"
    );
}

/// A second language: a Node.js project whose test fails, patched until `node --test` passes.
#[tokio::test]
async fn a_javascript_project_is_tested_patched_and_passes() {
    let daemon = first_party().await;
    let workspace = daemon.workspace("js-calc");
    std::fs::create_dir_all(workspace.join("test")).unwrap();
    std::fs::write(
        workspace.join("package.json"),
        "{\"name\": \"calc\", \"version\": \"1.0.0\", \"scripts\": {\"test\": \"node --test test/\"}}\n",
    )
    .unwrap();
    std::fs::write(
        workspace.join("calc.js"),
        "exports.max = (values) => values.reduce((a, b) => (a < b ? a : b));\n",
    )
    .unwrap();
    std::fs::write(
        workspace.join("test/calc.test.js"),
        "const test = require('node:test');\nconst assert = require('node:assert');\nconst { max } = require('../calc.js');\n\ntest('max', () => assert.strictEqual(max([3, 9, 4]), 9));\n",
    )
    .unwrap();
    let test = json!({"command": "node --test test/", "workdir": "."});
    let failing = daemon
        .exec("run_command", test.clone(), Some(&workspace))
        .await;
    let result = failing
        .assert_status(ToolStatus::ToolError)
        .result()
        .clone();
    assert!(result.content.contains("fail 1"), "{}", result.content);
    let fix = "--- a/calc.js\n+++ b/calc.js\n@@ -1 +1 @@\n-exports.max = (values) => values.reduce((a, b) => (a < b ? a : b));\n+exports.max = (values) => values.reduce((a, b) => (a > b ? a : b));\n";
    daemon
        .exec("apply_patch", json!({"patch": fix}), Some(&workspace))
        .await
        .assert_status(ToolStatus::Ok);
    let passing = daemon.exec("run_command", test, Some(&workspace)).await;
    let result = passing.assert_status(ToolStatus::Ok).result().clone();
    assert!(result.content.contains("pass 1"), "{}", result.content);
}

/// The workspace's ignore files count as they were when the run started: a step that adds a
/// path to `.gitignore` cannot make a later step's writes there unrecorded.
#[tokio::test]
async fn a_run_cannot_hide_its_changes_by_rewriting_gitignore() {
    let daemon = first_party().await;
    let workspace = project(&daemon);
    std::fs::write(workspace.join(".gitignore"), "build/\n").unwrap();
    let command = |line: &str| json!({"tool_calls": [call("run_command", json!({"command": line, "workdir": "."}))]});
    let script = json!({"turns": [
        command("echo 'hidden/' >> .gitignore"),
        command("mkdir -p hidden build && echo secret > hidden/x && echo out > build/app"),
        {"final": "done"}
    ]});
    let mut start = scripted_run(&workspace, &script);
    start.approval_policy = pb::ApprovalPolicy::Auto as i32;
    let mut run = daemon.start_run(start).await;
    assert_eq!(run.finished().await.reason, pb::StopReason::Final as i32);
    let sets: Vec<pb::ChangeSet> = run.of(|event| match event {
        pb::run_event::Event::Changes(changes) => changes.change_set.clone(),
        _ => None,
    });
    assert_eq!(sets.len(), 2);
    let second = &sets[1];
    let digest_only = |path: &str| {
        second
            .changes
            .iter()
            .find(|change| change.path == path)
            .map(|change| change.digest_only.clone())
            .unwrap_or_else(|| panic!("{path} recorded: {second:#?}"))
    };
    assert_eq!(
        digest_only("hidden/x"),
        "",
        "kept whole: ignored only since the run began"
    );
    assert_eq!(
        digest_only("build/app"),
        "ignored by the workspace's ignore files"
    );
}
