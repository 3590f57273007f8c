//! `airlock eval`, end to end: the real CLI drives a real daemon. Every grader passes on a run
//! that does what it asks and fails on one that does not (the `command` grader through the
//! sandbox, `llm_judge` through a judge run of its own); a captured run replays as a case and
//! fails once its tool answers otherwise; `compare` finds a known difference between two
//! configurations; a daemon killed mid-suite leaves a report that says which tasks did not
//! finish.

use std::path::Path;

use airlock_proto::v1 as pb;
use airlock_tests::cli::{Cli, CliRun};
use airlock_tests::{
    DaemonOptions, DaemonProcess, ProcessOptions, TestDaemon, ToolsDir, repo_root,
};
use serde_json::{Value, json};

/// A daemon with the first-party plugins (and `extra` tools).
async fn daemon(extra: Option<&ToolsDir>) -> TestDaemon {
    let mut tools_dirs = vec![repo_root().join("plugins")];
    tools_dirs.extend(extra.map(|tools| tools.path().to_owned()));
    TestDaemon::start(DaemonOptions {
        tools_dirs,
        ..DaemonOptions::default()
    })
    .await
}

/// `airlock eval ARGS…` against `endpoint`, in `dir`.
async fn eval(endpoint: &str, token: &str, dir: &Path, args: &[&str]) -> CliRun {
    let mut all = vec!["eval"];
    all.extend_from_slice(args);
    Cli::new(endpoint, &all)
        .token(token)
        .current_dir(dir)
        .run()
        .await
}

/// The report `eval run --json` printed.
fn report(run: &CliRun) -> Value {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}\n{}", run.stdout, run.stderr))
}

/// Each verdict of the task's first attempt: (grader label, passed, detail).
fn verdicts(report: &Value, task: &str) -> Vec<(String, bool, String)> {
    let task = report["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == task)
        .unwrap_or_else(|| panic!("no task {task} in {report:#}"));
    task["attempts"][0]["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["label"].as_str().unwrap().to_owned(),
                v["passed"].as_bool().unwrap(),
                v["detail"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A fixture workspace: a README and a test that passes.
fn fixture(dir: &Path) {
    write(dir, "fixture/README.md", "# demo\n");
    write(dir, "fixture/check.sh", "test -f NOTES.md\n");
}

const GOOD_SCRIPT: &str = r#"
turns:
  - tool_calls:
      - name: write_file
        arguments: {path: NOTES.md, content: "hello\n"}
  - final: '{"ok": true, "notes": "NOTES.md"}'
"#;

/// Writes NOTES.md (approved), asks for a command (denied), reads a file that is not there
/// (a tool error), then answers in prose.
const BAD_SCRIPT: &str = r#"
turns:
  - tool_calls:
      - name: write_file
        arguments: {path: NOTES.md, content: "hello\n"}
  - tool_calls:
      - name: run_command
        arguments: {command: "rm README.md", workdir: "."}
  - tool_calls:
      - name: read_file
        arguments: {path: missing.txt}
  - final: "I wrote some notes."
"#;

#[tokio::test]
async fn every_grader_passes_and_fails_against_a_real_run() {
    let daemon = daemon(None).await;
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    fixture(dir);
    write(dir, "expected/README.md", "# demo\n");
    write(dir, "expected/check.sh", "test -f NOTES.md\n");
    write(dir, "expected/NOTES.md", "hello\n");
    write(dir, "good.yaml", GOOD_SCRIPT);
    write(dir, "bad.yaml", BAD_SCRIPT);
    write(
        dir,
        "judge-pass.yaml",
        "turns:\n  - final: \"PASS\\nThe notes were written.\"\n",
    );
    write(
        dir,
        "judge-fail.yaml",
        "turns:\n  - final: \"FAIL\\nNo notes.\"\n",
    );
    write(
        dir,
        "suite.yaml",
        r#"
suite: graders
defaults:
  policy: risky
  tools: [write_file, run_command, read_file]
prices:
  scripted: {input: 1.0, output: 1.0}
tasks:
  - id: good
    input: Write hello to NOTES.md and answer in JSON.
    model: {scripted: good.yaml}
    approver: approve_all
    workspace: fixture
    graders:
      - answer_contains: '"ok": true'
      - answer_matches: '^\{.*NOTES\.md'
      - answer_json: {schema: {type: object, required: [ok], properties: {ok: {const: true}}}}
      - file_equals: {path: NOTES.md, content: "hello\n"}
      - tree_equals: expected
      - command: {run: "sh check.sh", workdir: "."}
      - tool_called: {tool: write_file, status: OK}
      - tool_not_called: run_command
      - no_denied_call: true
      - no_tool_error: true
      - max_steps: 2
      - stop_reason: final
      - budget: {max_tokens: 100000, max_cost_usd: 1.0, max_wall_s: 600}
      - no_egress: true
      - llm_judge: {model: {scripted: judge-pass.yaml}, rubric: "Were notes written?"}
  - id: bad
    input: Write hello to NOTES.md and answer in JSON.
    model: {scripted: bad.yaml}
    approver: {script: [approve, deny]}
    workspace: fixture
    graders:
      - answer_contains: '"ok": true'
      - answer_matches: '^\{'
      - answer_json: {schema: {type: object}}
      - file_equals: {path: NOTES.md, content: "goodbye\n"}
      - tree_equals: fixture
      - command: {run: "test -f missing.txt", workdir: "."}
      - tool_called: {tool: run_command, status: OK}
      - tool_not_called: write_file
      - no_denied_call: true
      - no_tool_error: true
      - max_steps: 2
      - stop_reason: max_steps
      - budget: {max_tokens: 10}
      - llm_judge: {model: {scripted: judge-fail.yaml}, rubric: "Were notes written?"}
"#,
    );
    let run = eval(
        &daemon.endpoint,
        &daemon.token,
        dir,
        &["run", "suite.yaml", "--json", "--results", "results"],
    )
    .await;
    assert_eq!(run.code, 1, "one task fails: {}", run.stderr);
    let report = report(&run);

    let good = verdicts(&report, "good");
    assert_eq!(good.len(), 15);
    for (label, passed, detail) in &good {
        assert!(passed, "{label}: {detail}");
    }
    let bad = verdicts(&report, "bad");
    assert_eq!(bad.len(), 14);
    for (label, passed, detail) in &bad {
        assert!(!passed, "{label} passed: {detail}");
    }
    // The judge is marked as what it is, in the report and in the task's summary.
    let tasks = report["tasks"].as_array().unwrap();
    assert!(tasks.iter().all(|task| task["nondeterministic"] == true));
    let judge = &tasks[0]["attempts"][0]["verdicts"][14];
    assert_eq!(judge["deterministic"], false);
    assert_eq!(report["status"], "failed");
    assert_eq!(tasks[0]["summary"]["passed"], 1);
    assert_eq!(tasks[1]["summary"]["failed"], 1);
    // Each attempt links to its run's trace.
    let attempt = &tasks[0]["attempts"][0];
    let run_id = attempt["run_id"].as_str().unwrap();
    assert!(run_id.starts_with("run_"));
    assert_eq!(
        attempt["trace"]["command"],
        format!("airlock runs trace {run_id}")
    );
    // And the files CI reads are there.
    let result = std::fs::read_dir(dir.join("results/graders"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let junit = std::fs::read_to_string(result.join("junit.xml")).unwrap();
    assert!(
        junit.contains(r#"classname="graders.bad" name="bad #1""#),
        "{junit}"
    );
    assert!(junit.contains("<failure"), "{junit}");
    let summary = std::fs::read_to_string(result.join("summary.md")).unwrap();
    assert!(summary.contains("| `good` | 1/1 100%"), "{summary}");
}

/// A tool that answers with a fixed word (`echo WORD`), in its own tools dir.
fn answer_tool(word: &str) -> ToolsDir {
    let tools = ToolsDir::new();
    tools.write_manifest(
        "answer",
        &format!(
            r#"name = "answer"
version = "0.1.0"
description = "Gives the answer."
risk = "read_only"
engine = "process"
command = ["/bin/echo", "{word}"]
abi = "argv"
profile = "process-readonly"
timeout_ms = 20000
idempotent = true
input_schema = {{ type = "object" }}
"#
        ),
    );
    tools
}

#[tokio::test]
async fn a_captured_run_replays_as_a_case_until_its_tool_changes() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    fixture(dir);
    let tools = answer_tool("forty-two");
    let recorder = daemon(Some(&tools)).await;
    let script = json!({"turns": [
        {"tool_calls": [{"name": "answer", "arguments": {}}]},
        {"final": "The answer is forty-two."}
    ]});
    let mut start = airlock_tests::scripted_run(&recorder.workspace("rec"), &script);
    start.tools = vec!["answer".into()];
    start.input = "What is the answer?".into();
    let mut recorded = recorder.start_run(start).await;
    recorded.finished().await;
    let run_id = recorded.run_id().to_owned();

    let captured = eval(
        &recorder.endpoint,
        &recorder.token,
        dir,
        &["capture", &run_id, "-o", "cassettes/answer.json"],
    )
    .await;
    assert_eq!(captured.code, 0, "{}", captured.stderr);
    // The stanza it prints pins what the run did.
    assert!(
        captured
            .stdout
            .contains(r#"model: {replay: "cassettes/answer.json"}"#),
        "{}",
        captured.stdout
    );
    assert!(
        captured.stdout.contains("stop_reason: final"),
        "{}",
        captured.stdout
    );
    assert!(captured.stdout.contains("answer"), "{}", captured.stdout);
    let cassette: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("cassettes/answer.json")).unwrap())
            .unwrap();
    assert_eq!(cassette["exchanges"].as_array().unwrap().len(), 2);

    write(
        dir,
        "suite.yaml",
        r#"
suite: regression
tasks:
  - id: answer
    input: What is the answer?
    workspace: fixture
    model: {replay: cassettes/answer.json}
    tools: [answer]
    graders:
      - stop_reason: final
      - answer_contains: forty-two
"#,
    );
    let args = ["run", "suite.yaml", "--json", "--results", "results"];
    let passed = eval(&recorder.endpoint, &recorder.token, dir, &args).await;
    assert_eq!(passed.code, 0, "{}", passed.stderr);

    // The same tool, now answering otherwise: the replay stops where the run asks the model
    // something it was never asked.
    let changed_tools = answer_tool("forty-three");
    let changed = daemon(Some(&changed_tools)).await;
    let failed = eval(&changed.endpoint, &changed.token, dir, &args).await;
    assert_eq!(failed.code, 1, "{}", failed.stderr);
    let report = report(&failed);
    let attempt = &report["tasks"][0]["attempts"][0];
    assert_eq!(attempt["status"], "failed");
    let stop = &verdicts(&report, "answer")[0];
    assert!(!stop.1);
    assert!(stop.2.contains("model_error"), "{}", stop.2);
    let detail = attempt["outcome"]["stop_detail"].as_str().unwrap();
    assert!(detail.contains("diverged from its cassette"), "{detail}");
    assert!(detail.contains("forty-three"), "{detail}");
}

#[tokio::test]
async fn compare_reports_a_known_difference() {
    let daemon = daemon(None).await;
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    fixture(dir);
    write(dir, "good.yaml", GOOD_SCRIPT);
    write(
        dir,
        "suite.yaml",
        r#"
suite: notes
defaults:
  model: {scripted: good.yaml}
  approver: approve_all
  tools: [write_file]
  repeats: 3
tasks:
  - id: notes
    input: Write hello to NOTES.md.
    workspace: fixture
    graders:
      - file_equals: {path: NOTES.md, content: "hello\n"}
  - id: answer
    input: Answer in JSON.
    workspace: fixture
    graders:
      - answer_json: {schema: {type: object}}
"#,
    );
    // B: the approver denies every call, so no note gets written.
    write(dir, "deny.yaml", "approver: deny_all\n");
    let base = eval(
        &daemon.endpoint,
        &daemon.token,
        dir,
        &["run", "suite.yaml", "--results", "results", "--label", "a"],
    )
    .await;
    assert_eq!(base.code, 0, "{}", base.stderr);
    let variant = eval(
        &daemon.endpoint,
        &daemon.token,
        dir,
        &[
            "run",
            "suite.yaml",
            "--results",
            "results",
            "--variant",
            "deny.yaml",
        ],
    )
    .await;
    assert_eq!(variant.code, 1, "{}", variant.stderr);

    let compared = eval(
        &daemon.endpoint,
        &daemon.token,
        dir,
        &["compare", "a", "deny", "--results", "results", "--json"],
    )
    .await;
    assert_eq!(compared.code, 0, "{}", compared.stderr);
    let comparison: Value = serde_json::from_str(&compared.stdout).unwrap();
    // The notes task went from 3/3 to 0/3, a significant difference; the answer task did
    // not change.
    let task = |id: &str| {
        comparison["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|task| task["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no {id} in {comparison:#}"))
    };
    let notes = task("notes");
    assert_eq!(notes["difference"]["difference"], -1.0, "{notes:#}");
    assert_eq!(notes["difference"]["significant"], true, "{notes:#}");
    let answer = task("answer");
    assert_eq!(answer["difference"]["difference"], 0.0, "{answer:#}");
    assert_eq!(answer["difference"]["significant"], false, "{answer:#}");
    assert_eq!(comparison["overall"]["difference"]["difference"], -0.5);
    let human = eval(
        &daemon.endpoint,
        &daemon.token,
        dir,
        &["compare", "a", "deny", "--results", "results"],
    )
    .await;
    assert_eq!(human.code, 0, "{}", human.stderr);
    let notes_line = human
        .stdout
        .lines()
        .find(|line| line.starts_with("notes ~"))
        .unwrap_or_else(|| panic!("{}", human.stdout));
    assert!(notes_line.contains("3/3"), "{notes_line}");
    assert!(notes_line.contains("0/3"), "{notes_line}");
    assert!(
        notes_line.contains("-100.0 [-100.0, -20.6] *"),
        "{notes_line}"
    );
    let answer_line = human
        .stdout
        .lines()
        .find(|line| line.starts_with("answer ~"))
        .unwrap_or_else(|| panic!("{}", human.stdout));
    assert!(
        answer_line.contains("+0.0 [-56.1, +56.1] "),
        "{answer_line}"
    );
    assert!(!answer_line.contains('*'), "{answer_line}");
}

#[tokio::test]
async fn a_daemon_killed_mid_suite_leaves_a_report_of_what_did_not_finish() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    std::fs::create_dir_all(dir.join("root")).unwrap();
    let config = dir.join("airlockd.toml");
    std::fs::write(
        &config,
        format!(
            "tools_dirs = [\"{}\"]\nprofiles_dir = \"{}\"\nstate_dir = \"state\"\nworkspace_roots = [\"root\"]\n",
            repo_root().join("plugins").display(),
            repo_root().join("sandbox-profiles").display(),
        ),
    )
    .unwrap();
    let daemon = DaemonProcess::start_with(
        &["--config", config.to_str().unwrap()],
        dir,
        &ProcessOptions::default(),
    )
    .await;
    fixture(dir);
    write(dir, "quick.yaml", "turns:\n  - final: done\n");
    // The second task's model answers after a minute: the daemon is killed before.
    write(
        dir,
        "slow.yaml",
        "turns:\n  - final: done\n    delay_ms: 60000\n",
    );
    write(
        dir,
        "suite.yaml",
        r#"
suite: crash
tasks:
  - id: quick
    input: Say done.
    model: {scripted: quick.yaml}
    graders: [{stop_reason: final}]
  - id: slow
    input: Say done, slowly.
    model: {scripted: slow.yaml}
    graders: [{stop_reason: final}]
  - id: later
    input: Say done.
    model: {scripted: quick.yaml}
    graders: [{stop_reason: final}]
"#,
    );
    let suite = Cli::new(
        &daemon.endpoint,
        &[
            "eval",
            "run",
            "suite.yaml",
            "--json",
            "--jobs",
            "1",
            "--results",
            "results",
        ],
    )
    .token(&daemon.token)
    .current_dir(dir)
    .output();
    // Killed once the slow run is going.
    let killer = async {
        let channel = airlock_tests::connect(&daemon.endpoint).await.unwrap();
        let mut agent = pb::agent_client::AgentClient::new(channel);
        for tries in 0.. {
            assert!(tries < 1200, "the suite started no second run in a minute");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let runs = agent
                .list_runs(pb::ListRunsRequest::default())
                .await
                .unwrap()
                .into_inner()
                .runs;
            if runs.len() >= 2 {
                break;
            }
        }
        daemon.signal(libc::SIGKILL);
    };
    let (output, ()) = tokio::join!(suite, killer);
    let run = CliRun {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert_eq!(run.code, 69, "{}", run.stderr);
    let report = report(&run);
    assert_eq!(report["status"], "unfinished");
    let status = |task: &str| {
        report["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == task)
            .map(|t| t["attempts"][0]["status"].clone())
            .unwrap()
    };
    assert_eq!(status("quick"), "passed");
    assert_eq!(status("slow"), "unfinished");
    assert_eq!(status("later"), "unfinished");
    // The report is on disk too, for CI to read after the fact.
    assert!(dir.join("results/crash").is_dir());
}

/// `--scratch DIR` a second time, after an attempt failed and its workspace was kept there:
/// each result's attempts get a directory of their own, so the second run runs every attempt
/// again (it used to fail them all with "File exists", and exit as if the daemon were down).
#[tokio::test]
async fn a_scratch_dir_is_used_again_after_a_failed_attempt_kept_its_workspace() {
    let daemon = daemon(None).await;
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    fixture(dir);
    write(dir, "good.yaml", GOOD_SCRIPT);
    write(
        dir,
        "suite.yaml",
        r#"
suite: scratch
defaults:
  model: {scripted: good.yaml}
  approver: deny_all
  tools: [write_file]
tasks:
  - id: notes
    input: Write hello to NOTES.md.
    workspace: fixture
    graders:
      - file_equals: {path: NOTES.md, content: "hello\n"}
"#,
    );
    let scratch = daemon.workspace("scratch");
    let mut roots = Vec::new();
    for _ in 0..2 {
        let run = eval(
            &daemon.endpoint,
            &daemon.token,
            dir,
            &[
                "run",
                "suite.yaml",
                "--results",
                "results",
                "--scratch",
                scratch.to_str().unwrap(),
                "--json",
            ],
        )
        .await;
        assert_eq!(run.code, 1, "the attempt fails its grader\n{}", run.stderr);
        let report = report(&run);
        let attempt = &report["tasks"][0]["attempts"][0];
        assert_eq!(attempt["status"], "failed", "{attempt:#}");
        assert!(attempt["error"].is_null(), "{attempt:#}");
        assert_eq!(attempt["workspace_kept"], true, "{attempt:#}");
        let root = report["workspaces"]["root"].as_str().unwrap().to_owned();
        assert!(root.starts_with(scratch.to_str().unwrap()), "{root}");
        roots.push(root);
    }
    assert_ne!(roots[0], roots[1], "each result in a directory of its own");
}
