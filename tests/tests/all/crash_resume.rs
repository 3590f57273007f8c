//! Crash and resume: the real daemon binary is killed with SIGKILL at every point of a
//! scripted run — during a model call, during a non-idempotent write, while an approval is
//! pending, between steps — then started again. Each time: every event a client received is
//! still in the log, no event is duplicated, the write's side effect happened at most once,
//! and the run finishes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use airlock_proto::v1 as pb;
use airlock_tests::{DaemonProcess, ToolsDir, approver, repo_root, scripted_run, test_module};
use pb::run_event::Event;
use prost::Message as _;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

/// A run that reads, writes with a non-idempotent tool that needs approval, thinks for a
/// while, reads again and finishes.
fn script() -> serde_json::Value {
    json!({"turns": [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"tool_calls": [{"name": "append", "arguments": {"path": "log.txt", "line": "effect", "sleep_ms": 400}}]},
        {"delay_ms": 400, "tool_calls": [{"name": "read_file", "arguments": {"path": "log.txt"}}]},
        {"final": "done"}
    ]})
}

struct Scenario {
    dir: tempfile::TempDir,
    _tools: ToolsDir,
    config: PathBuf,
}

impl Scenario {
    fn new(cache: &Path) -> Scenario {
        let dir = tempfile::tempdir().unwrap();
        let tools = ToolsDir::new();
        tools.add_file(
            "append",
            &test_module("append_then_sleep"),
            "risk = \"write\"\nprofile = \"workspace-write\"\nidempotent = false\ninput_schema = { type = \"object\" }",
        );
        std::fs::create_dir_all(dir.path().join("root/project")).unwrap();
        std::fs::write(dir.path().join("root/project/notes.txt"), "alpha\n").unwrap();
        let config = dir.path().join("airlockd.toml");
        std::fs::write(
            &config,
            format!(
                "tools_dirs = [\"{}\", \"{}\"]\nprofiles_dir = \"{}\"\nstate_dir = \"state\"\nmodule_cache_dir = \"{}\"\nworkspace_roots = [\"root\"]\n",
                repo_root().join("plugins").display(),
                tools.path().display(),
                repo_root().join("sandbox-profiles").display(),
                cache.display(),
            ),
        )
        .unwrap();
        Scenario {
            dir,
            _tools: tools,
            config,
        }
    }

    fn workspace(&self) -> PathBuf {
        self.dir.path().join("root/project")
    }

    async fn daemon(&self) -> DaemonProcess {
        DaemonProcess::start(
            &["--config", self.config.to_str().unwrap()],
            self.dir.path(),
        )
        .await
    }

    fn effects(&self) -> usize {
        std::fs::read_to_string(self.workspace().join("log.txt"))
            .map(|text| text.lines().filter(|line| *line == "effect").count())
            .unwrap_or(0)
    }
}

/// Starts the run and reads `kill_after` events (all of them when `None`).
async fn first_life(
    daemon: &DaemonProcess,
    workspace: &Path,
    kill_after: Option<usize>,
) -> (String, Vec<pb::RunEvent>) {
    let (requests, receiver) = mpsc::unbounded_channel();
    let mut start = scripted_run(workspace, &script());
    start.approval_policy = pb::ApprovalPolicy::Risky as i32;
    requests
        .send(pb::RunRequest {
            request: Some(pb::run_request::Request::Start(start)),
        })
        .unwrap();
    let mut events = pb::agent_client::AgentClient::new(daemon.channel().await)
        .run(UnboundedReceiverStream::new(receiver))
        .await
        .unwrap()
        .into_inner();
    let mut seen = Vec::new();
    while kill_after.is_none_or(|limit| seen.len() < limit) {
        match tokio::time::timeout(Duration::from_secs(60), events.message()).await {
            Ok(Ok(Some(event))) => seen.push(event),
            Ok(Ok(None)) => break,
            other => panic!("the first life's stream failed: {other:?}"),
        }
    }
    drop(requests);
    (seen[0].run_id.clone(), seen)
}

/// Follows the run from its first event to its end.
async fn whole_log(daemon: &DaemonProcess, run_id: &str) -> Vec<pb::RunEvent> {
    let (requests, receiver) = mpsc::unbounded_channel();
    requests
        .send(pb::RunRequest {
            request: Some(pb::run_request::Request::Attach(pb::AttachRun {
                run_id: run_id.into(),
                after_seq: 0,
            })),
        })
        .unwrap();
    let mut events = pb::agent_client::AgentClient::new(daemon.channel().await)
        .run(UnboundedReceiverStream::new(receiver))
        .await
        .unwrap()
        .into_inner();
    let mut log = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(60), events.message()).await {
            Ok(Ok(Some(event))) => log.push(event),
            Ok(Ok(None)) => return log,
            other => panic!("following the resumed run failed: {other:?}\nso far: {log:#?}"),
        }
    }
}

fn kind(event: &pb::RunEvent) -> &'static str {
    event.event.as_ref().map_or("none", Event::kind)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_at_any_point_resumes_without_losing_or_repeating_anything() {
    let cache = tempfile::tempdir().unwrap();

    // A run that is never killed gives the points to kill the others at.
    let clean = Scenario::new(cache.path());
    let daemon = clean.daemon().await;
    let _approver = approver(&daemon, Duration::from_millis(300));
    let (_, events) = first_life(&daemon, &clean.workspace(), None).await;
    daemon.kill().await;
    let kinds: Vec<&str> = events.iter().map(kind).collect();
    assert_eq!(kinds.last(), Some(&"run_finished"), "{kinds:?}");
    assert_eq!(clean.effects(), 1);
    for point in [
        "approval_requested",
        "tool_started",
        "context_built",
        "tool_finished",
    ] {
        assert!(
            kinds.contains(&point),
            "the clean run has no {point}: {kinds:?}"
        );
    }

    let mut outcomes = Vec::new();
    for kill_after in 1..events.len() {
        let scenario = Scenario::new(cache.path());
        let daemon = scenario.daemon().await;
        let approver_task = approver(&daemon, Duration::from_millis(300));
        let (run_id, received) = first_life(&daemon, &scenario.workspace(), Some(kill_after)).await;
        let last_kind = kind(received.last().unwrap());
        daemon.kill().await;
        approver_task.abort();

        let daemon = scenario.daemon().await;
        let _approver = approver(&daemon, Duration::ZERO);
        let log = whole_log(&daemon, &run_id).await;
        let context = format!("killed after event {kill_after} ({last_kind})");

        // Every event any client received is still there, unchanged; no gaps, no repeats.
        for (index, event) in log.iter().enumerate() {
            assert_eq!(event.seq, index as u64 + 1, "{context}: seq");
        }
        for (before, after) in received.iter().zip(&log) {
            assert_eq!(
                before.encode_to_vec(),
                after.encode_to_vec(),
                "{context}: event {} changed",
                before.seq
            );
        }
        // It finished, for a reason.
        let Some(Event::RunFinished(finished)) = log.last().and_then(|e| e.event.clone()) else {
            panic!(
                "{context}: the run did not finish: {:?}",
                log.iter().map(kind).collect::<Vec<_>>()
            );
        };
        assert_eq!(
            finished.reason,
            pb::StopReason::Final as i32,
            "{context}: {finished:?}"
        );
        // The side effect happened at most once; and exactly once when the run saw it succeed.
        let appended = log
            .iter()
            .filter_map(|e| match &e.event {
                Some(Event::ToolFinished(f)) if f.tool == "append" => f.result.clone(),
                _ => None,
            })
            .collect::<Vec<_>>();
        assert!(
            appended.len() <= 1,
            "{context}: the write was observed twice"
        );
        let effects = scenario.effects();
        assert!(
            effects <= 1,
            "{context}: the write happened {effects} times"
        );
        let status = appended
            .first()
            .map(|r| pb::ToolStatus::try_from(r.status).unwrap());
        if status == Some(pb::ToolStatus::Ok) {
            assert_eq!(effects, 1, "{context}");
        }
        let resumed = log.iter().filter(|e| kind(e) == "run_resumed").count();
        outcomes.push(format!(
            "{kill_after:>2} {last_kind:<20} resumed={resumed} append={status:?} effects={effects}"
        ));
        daemon.kill().await;
    }
    // The points the issue names were all among the kills.
    let report = outcomes.join("\n");
    for point in [
        "approval_requested",
        "tool_started",
        "context_built",
        "tool_finished",
    ] {
        assert!(report.contains(point), "no kill at {point}:\n{report}");
    }
    assert!(
        report.contains("OutcomeUnknown"),
        "no kill caught the write in flight:\n{report}"
    );
    println!("{report}");
}
