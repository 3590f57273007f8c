//! The kill -9 matrix at the engines' setup stages: the real daemon is stopped at a test
//! pause point (`AIRLOCK_TEST_PAUSE`, debug builds only) — each stage of building a process
//! sandbox, a WebAssembly compile and instantiate, a store commit — and killed with SIGKILL
//! there. Each time the pause line proves the stage was reached, and then: no process of the
//! old daemon remains, a new daemon binds the same address and state dir at once, and the
//! run resumes and finishes with every event a client had already received unchanged.

use std::path::{Path, PathBuf};
use std::time::Duration;

use airlock_proto::v1 as pb;
use airlock_tests::{
    DaemonProcess, ProcessOptions, airlockd_command, procs, repo_root, scripted_run,
};
use pb::run_event::Event;
use prost::Message as _;
use serde_json::json;
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

/// How long processes of a killed daemon may take to be gone: the kernel delivers the
/// parent-death signal at once; this is margin for a loaded machine.
const GONE_WITHIN: Duration = Duration::from_secs(10);

/// What a pause point's run calls.
#[derive(Debug, Clone, Copy)]
enum Call {
    /// `sleep_30`, a process tool that is not idempotent: a call the crash interrupts is
    /// reported as OUTCOME_UNKNOWN, not run again — and a sandbox that wrongly survived its
    /// daemon would be seen running the program.
    Process,
    /// `read_file`, an idempotent WebAssembly tool: run again after the restart.
    Wasm,
}

/// The tool of [`Call::Process`].
const SLEEP_TOOL: &str = r#"name = "sleep_30"
version = "0.1.0"
description = "Sleeps for 30 seconds."
risk = "read_only"
engine = "process"
command = ["/usr/bin/sleep", "30"]
abi = "argv"
profile = "process-readonly"
timeout_ms = 60000
idempotent = false
input_schema = { type = "object" }
"#;

struct Scenario {
    dir: tempfile::TempDir,
    config: PathBuf,
    /// A free loopback address both lives of the daemon listen on.
    listen: String,
}

impl Scenario {
    fn new(cache: &Path) -> Scenario {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("root/project")).unwrap();
        std::fs::write(dir.path().join("root/project/notes.txt"), "alpha\nbeta\n").unwrap();
        std::fs::create_dir_all(dir.path().join("tools/sleep_30")).unwrap();
        std::fs::write(dir.path().join("tools/sleep_30/tool.toml"), SLEEP_TOOL).unwrap();
        let config = dir.path().join("airlockd.toml");
        std::fs::write(
            &config,
            format!(
                "tools_dirs = [\"{}\", \"tools\"]\nprofiles_dir = \"{}\"\nstate_dir = \"state\"\nmodule_cache_dir = \"{}\"\nworkspace_roots = [\"root\"]\n",
                repo_root().join("plugins").display(),
                repo_root().join("sandbox-profiles").display(),
                cache.display(),
            ),
        )
        .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Scenario {
            dir,
            config,
            listen: format!("127.0.0.1:{port}"),
        }
    }

    fn workspace(&self) -> PathBuf {
        self.dir.path().join("root/project")
    }

    fn args(&self) -> [&str; 2] {
        ["--config", self.config.to_str().unwrap()]
    }

    fn options(&self, pause: Option<&str>) -> ProcessOptions {
        ProcessOptions {
            listen: self.listen.clone(),
            env: pause
                .map(|point| vec![("AIRLOCK_TEST_PAUSE".to_owned(), point.to_owned())])
                .unwrap_or_default(),
        }
    }

    async fn daemon(&self, pause: Option<&str>) -> DaemonProcess {
        DaemonProcess::start_with(&self.args(), self.dir.path(), &self.options(pause)).await
    }
}

fn script(call: Call) -> serde_json::Value {
    let tool_call = match call {
        Call::Process => json!({"name": "sleep_30", "arguments": {}}),
        Call::Wasm => json!({"name": "read_file", "arguments": {"path": "notes.txt"}}),
    };
    json!({"turns": [{"tool_calls": [tool_call]}, {"final": "done"}]})
}

/// Starts the run and collects its events in the background, for as long as the daemon
/// serves them.
async fn start_run(
    daemon: &DaemonProcess,
    workspace: &Path,
    call: Call,
) -> tokio::task::JoinHandle<Vec<pb::RunEvent>> {
    start_script(daemon, workspace, &script(call), pb::ApprovalPolicy::Never).await
}

/// Starts a run of the scripted model playing `script` under `policy`, collecting its events
/// as [`start_run`] does.
async fn start_script(
    daemon: &DaemonProcess,
    workspace: &Path,
    script: &serde_json::Value,
    policy: pb::ApprovalPolicy,
) -> tokio::task::JoinHandle<Vec<pb::RunEvent>> {
    let (requests, receiver) = mpsc::unbounded_channel();
    let mut start = scripted_run(workspace, script);
    start.approval_policy = policy as i32;
    requests
        .send(pb::RunRequest {
            request: Some(pb::run_request::Request::Start(start)),
        })
        .unwrap();
    let mut agent = pb::agent_client::AgentClient::new(daemon.channel().await);
    // The call itself may never be answered: a pause can stop the daemon before it replies.
    tokio::spawn(async move {
        let _requests = requests;
        let mut seen = Vec::new();
        let Ok(response) = agent.run(UnboundedReceiverStream::new(receiver)).await else {
            return seen;
        };
        let mut events = response.into_inner();
        while let Ok(Some(event)) = events.message().await {
            seen.push(event);
        }
        seen
    })
}

/// The id of the only run the daemon has.
async fn only_run(daemon: &DaemonProcess) -> String {
    let runs = pb::agent_client::AgentClient::new(daemon.channel().await)
        .list_runs(pb::ListRunsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .runs;
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0].run_id.clone()
}

/// Follows run `run_id` from its first event to its end.
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

/// Kills `daemon` with SIGKILL and checks that nothing it started is left running.
async fn kill_and_check_nothing_remains(daemon: DaemonProcess, context: &str) -> Vec<procs::Proc> {
    let before = procs::descendants(daemon.pid());
    daemon.kill().await;
    let left = procs::await_gone(&before, GONE_WITHIN).await;
    assert!(
        left.is_empty(),
        "{context}: processes of the killed daemon are still running after {GONE_WITHIN:?}: {left:?}"
    );
    before
}

/// The run's log after the restart: contiguous from the run's start, holding every event the
/// first life's client received unchanged, finished for its final answer; and the call ended
/// with a result of its own: `expected`, or (for a kill before the call was proposed) OK.
fn check_resumed(
    context: &str,
    received: &[pb::RunEvent],
    log: &[pb::RunEvent],
    expected: pb::ToolStatus,
) {
    for (index, event) in log.iter().enumerate() {
        assert_eq!(event.seq, index as u64 + 1, "{context}: seq");
    }
    for (before, after) in received.iter().zip(log) {
        assert_eq!(
            before.encode_to_vec(),
            after.encode_to_vec(),
            "{context}: event {} changed",
            before.seq
        );
    }
    assert!(received.len() <= log.len(), "{context}: events were lost");
    assert!(
        matches!(
            log.first().and_then(|e| e.event.as_ref()),
            Some(Event::RunStarted(_))
        ),
        "{context}: the log does not start with the run's start: {log:#?}"
    );
    let Some(Event::RunFinished(finished)) = log.last().and_then(|e| e.event.clone()) else {
        panic!("{context}: the run did not finish: {log:#?}");
    };
    assert_eq!(
        finished.reason,
        pb::StopReason::Final as i32,
        "{context}: {finished:?}"
    );
    let results: Vec<pb::ToolStatus> = log
        .iter()
        .filter_map(|e| match &e.event {
            Some(Event::ToolFinished(f)) => f.result.as_ref(),
            _ => None,
        })
        .map(|r| pb::ToolStatus::try_from(r.status).unwrap())
        .collect();
    assert_eq!(
        results.len(),
        1,
        "{context}: one call, one result: {results:?}"
    );
    assert_eq!(results[0], expected, "{context}");
}

/// One point of the matrix reached by a run: pause there, kill, restart on the same address,
/// and check the run.
async fn kill_during_run(
    cache: &Path,
    point: &str,
    call: Call,
    expected: pb::ToolStatus,
) -> String {
    let scenario = Scenario::new(cache);
    let daemon = scenario.daemon(Some(point)).await;
    let collecting = start_run(&daemon, &scenario.workspace(), call).await;
    let name = point.split('@').next().unwrap_or(point);
    daemon
        .await_log(&format!("airlock test pause: reached {name}"))
        .await;
    let processes = kill_and_check_nothing_remains(daemon, point).await;
    let received = tokio::time::timeout(Duration::from_secs(30), collecting)
        .await
        .expect("the first life's stream ends with the daemon")
        .unwrap();
    // The same address and state dir, at once.
    let daemon = scenario.daemon(None).await;
    // A kill before the first event committed leaves the client without the run's id.
    let run_id = match received.first() {
        Some(event) => event.run_id.clone(),
        None => only_run(&daemon).await,
    };
    let log = whole_log(&daemon, &run_id).await;
    check_resumed(point, &received, &log, expected);
    daemon.kill().await;
    format!(
        "{point:<18} killed with {} process(es) of the daemon: {}",
        processes.len(),
        processes
            .iter()
            .map(|p| format!("{}({})", p.comm, p.state))
            .collect::<Vec<_>>()
            .join(" ")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_killed_in_any_setup_stage_leaves_nothing_and_restarts_on_its_address() {
    let cache = tempfile::tempdir().unwrap();
    let mut report = Vec::new();
    for point in [
        "process:clone",
        "process:uid-map",
        "process:identity",
        "process:mounts",
        "process:pivot",
        "process:landlock",
        "process:seccomp",
        "process:exec",
    ] {
        let line = kill_during_run(
            cache.path(),
            point,
            Call::Process,
            pb::ToolStatus::OutcomeUnknown,
        )
        .await;
        // The sandbox's first process existed when the daemon was killed.
        assert!(
            line.contains("process(es)") && !line.contains(" 0 process"),
            "{line}"
        );
        report.push(line);
    }
    report.push(
        kill_during_run(
            cache.path(),
            "wasm:instantiate",
            Call::Wasm,
            pb::ToolStatus::Ok,
        )
        .await,
    );
    // Commits of the run's events after its start: the first, and the call's start.
    report.push(
        kill_during_run(
            cache.path(),
            "store:commit@1",
            Call::Wasm,
            pb::ToolStatus::Ok,
        )
        .await,
    );
    report.push(
        kill_during_run(
            cache.path(),
            "store:commit@4",
            Call::Process,
            pb::ToolStatus::OutcomeUnknown,
        )
        .await,
    );
    println!("{}", report.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_killed_while_compiling_a_module_restarts_on_its_address() {
    // An empty module cache: the tools compile as the daemon starts, before it serves.
    let cache = tempfile::tempdir().unwrap();
    let scenario = Scenario::new(cache.path());
    let mut child = airlockd_command(
        &scenario.args(),
        scenario.dir.path(),
        &scenario.options(Some("wasm:compile")),
    )
    .spawn()
    .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    let mut log = String::new();
    loop {
        let line = tokio::time::timeout(Duration::from_secs(120), lines.next_line())
            .await
            .expect("the daemon reaches the compile")
            .unwrap()
            .unwrap_or_else(|| panic!("the daemon exited before compiling:\n{log}"));
        log.push_str(&line);
        log.push('\n');
        if line.contains("airlock test pause: reached wasm:compile") {
            break;
        }
    }
    let pid = i32::try_from(child.id().unwrap()).unwrap();
    let before = procs::descendants(pid);
    // SAFETY: signalling our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    child.wait().await.unwrap();
    let left = procs::await_gone(&before, GONE_WITHIN).await;
    assert!(left.is_empty(), "still running: {left:?}");

    // The same address and state dir at once; the interrupted compile left nothing in the
    // cache that the next start could trip on.
    let daemon = scenario.daemon(None).await;
    let collecting = start_run(&daemon, &scenario.workspace(), Call::Wasm).await;
    tokio::time::timeout(Duration::from_secs(60), collecting)
        .await
        .expect("the run finishes")
        .unwrap();
    let run_id = only_run(&daemon).await;
    check_resumed(
        "wasm:compile",
        &[],
        &whole_log(&daemon, &run_id).await,
        pb::ToolStatus::Ok,
    );
    daemon.kill().await;
}

/// A daemon killed in the middle of applying a change set: every path is whole — as it was
/// or as the call left it — and the resumed run's journal says which landed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_killed_while_applying_changes_leaves_each_path_whole_and_says_which_landed() {
    let cache = tempfile::tempdir().unwrap();
    // Removals land first, then the rest in path order: gone.txt, a.txt, b.txt, notes.txt.
    for landed in [1_usize, 3] {
        let scenario = Scenario::new(cache.path());
        let workspace = scenario.workspace();
        std::fs::write(workspace.join("gone.txt"), "bye\n").unwrap();
        let daemon = scenario
            .daemon(Some(&format!("changes:apply@{landed}")))
            .await;
        let script = json!({"turns": [
            {"tool_calls": [{"name": "run_command", "arguments": {
                "command": "echo one > a.txt; echo two > b.txt; echo changed > notes.txt; rm gone.txt",
                "workdir": "."
            }}]},
            {"final": "done"}
        ]});
        let collecting = start_script(&daemon, &workspace, &script, pb::ApprovalPolicy::Auto).await;
        daemon
            .await_log("airlock test pause: reached changes:apply")
            .await;
        kill_and_check_nothing_remains(daemon, "changes:apply").await;
        let received = tokio::time::timeout(Duration::from_secs(30), collecting)
            .await
            .expect("the stream ends with the daemon")
            .unwrap();

        let daemon = scenario.daemon(None).await;
        let run_id = received.first().expect("the run started").run_id.clone();
        let log = whole_log(&daemon, &run_id).await;
        check_resumed(
            "changes:apply",
            &received,
            &log,
            pb::ToolStatus::OutcomeUnknown,
        );
        let set = log
            .iter()
            .find_map(|event| match &event.event {
                Some(Event::Changes(changes)) => changes.change_set.clone(),
                _ => None,
            })
            .expect("the journal's change set, reconciled");
        let applied: Vec<&str> = set
            .changes
            .iter()
            .filter(|change| change.applied)
            .map(|change| change.path.as_str())
            .collect();
        let expected = ["gone.txt", "a.txt", "b.txt", "notes.txt"];
        let mut expected_landed = expected[..landed].to_vec();
        expected_landed.sort_unstable();
        assert_eq!(applied, expected_landed, "{set:#?}");
        assert!(
            set.not_applied.contains("stopped while applying"),
            "{set:?}"
        );
        // Each path is one side or the other, as the journal says.
        let read = |name: &str| std::fs::read_to_string(workspace.join(name)).ok();
        let landed_path = |name: &str| applied.contains(&name);
        assert_eq!(
            read("gone.txt"),
            (!landed_path("gone.txt")).then(|| "bye\n".to_owned())
        );
        assert_eq!(
            read("a.txt"),
            landed_path("a.txt").then(|| "one\n".to_owned())
        );
        assert_eq!(
            read("b.txt"),
            landed_path("b.txt").then(|| "two\n".to_owned())
        );
        assert_eq!(
            read("notes.txt").as_deref(),
            Some(if landed_path("notes.txt") {
                "changed\n"
            } else {
                "alpha\nbeta\n"
            })
        );
        daemon.kill().await;
    }
}
