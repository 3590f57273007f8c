//! A fleet: three real `airlockd` processes over one real PostgreSQL database, each with a
//! state dir of its own, the same workspace root and the same shared dir. The daemon
//! executing a run is killed with SIGKILL after each of the run's events in turn (the
//! durable-runs crash matrix, across nodes), or frozen with SIGSTOP: another takes the run
//! over from its last checkpoint, no acknowledged event is lost or changed, the
//! non-idempotent write happens at most once (exactly once when the run saw it succeed), a
//! frozen owner's process tool still ends at its deadline, and a frozen owner that wakes up
//! writes nothing more for the run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use airlock_proto::v1 as pb;
use airlock_tests::{DaemonProcess, ToolsDir, procs, repo_root, scripted_run, test_module};
use pb::run_event::Event;
use prost::Message as _;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

/// Short, so a takeover takes seconds, not the production default's ten; long enough that
/// a daemon starved of CPU by the rest of the suite still renews it in time (a lapse moves
/// the run on again, correctly, but makes the runs' paths harder to assert).
pub(super) const LEASE_MS: u64 = 2_000;

/// The write's timeout: a takeover waits until a call in flight is past it.
const WRITE_TIMEOUT_MS: u64 = 1_500;

/// How long a run may take to finish once its daemon is gone: a lease, the write's timeout
/// and its margin, and the rest of the run, with room for a loaded CI machine.
const TAKEOVER_WITHIN: Duration = Duration::from_secs(60);

/// The process tool's timeout: long enough that the test freezes its daemon well before it,
/// short enough that the suite does not wait long for the deadline keeper.
const SLEEPER_TIMEOUT_MS: u64 = 3_000;

/// A program that would sleep for a minute, which its deadline does not allow.
fn sleeper_manifest() -> String {
    format!(
        "name = \"sleeper\"\nversion = \"0.1.0\"\ndescription = \"Sleeps for a minute.\"\n\
         risk = \"read_only\"\nengine = \"process\"\ncommand = [\"/usr/bin/sleep\", \"60\"]\n\
         abi = \"argv\"\nprofile = \"process-readonly\"\ntimeout_ms = {SLEEPER_TIMEOUT_MS}\n\
         idempotent = false\ninput_schema = {{ type = \"object\" }}\n"
    )
}

/// How long after its deadline a process tool of a frozen daemon may still be seen running:
/// the keeper kills it at the deadline; this is margin for a loaded machine.
const GONE_AFTER_DEADLINE: Duration = Duration::from_secs(10);

pub(super) struct Fleet {
    /// The fleet's database, for the tests that reach into it.
    database: String,
    dir: tempfile::TempDir,
    _tools: ToolsDir,
    config: PathBuf,
}

impl Fleet {
    pub(super) async fn new() -> Fleet {
        let database = airlock_daemon::testing::fresh_postgres_database().await;
        Fleet::reaching(database.clone(), &database)
    }

    /// A fleet on the fresh database at `database` whose daemons reach it at `url` (through
    /// a [`Link`](airlock_tests::link::Link) the test breaks, say).
    /// The daemons share the tests' module cache (content-addressed): each would otherwise
    /// compile every plugin afresh, seconds of CPU per daemon.
    pub(super) fn reaching(database: String, url: &str) -> Fleet {
        let cache = airlock_tests::shared_module_cache();
        let dir = tempfile::tempdir().unwrap();
        let tools = ToolsDir::new();
        tools.add_file(
            "append",
            &test_module("append_then_sleep"),
            &format!(
                "risk = \"write\"\nprofile = \"workspace-write\"\nidempotent = false\n\
                 timeout_ms = {WRITE_TIMEOUT_MS}\ninput_schema = {{ type = \"object\" }}"
            ),
        );
        tools.write_manifest("sleeper", &sleeper_manifest());
        // Its output is cut to 1000 bytes and kept whole, for ReadOutput.
        tools.add_file(
            "big",
            &test_module("big_result"),
            "[output]\nmax_bytes = 1000\ntruncate = \"head\"",
        );
        std::fs::create_dir_all(dir.path().join("root/project")).unwrap();
        std::fs::write(dir.path().join("root/project/notes.txt"), "alpha\n").unwrap();
        let config = dir.path().join("airlockd.toml");
        std::fs::write(
            &config,
            format!(
                "tools_dirs = [\"{}\", \"{}\"]\nprofiles_dir = \"{}\"\nmodule_cache_dir = \"{}\"\n\
                 workspace_roots = [\"root\"]\n[store]\nurl = \"{url}\"\nlease_ms = {LEASE_MS}\n\
                 shared_dir = \"shared\"\n",
                repo_root().join("plugins").display(),
                tools.path().display(),
                repo_root().join("sandbox-profiles").display(),
                cache.display(),
            ),
        )
        .unwrap();
        Fleet {
            database,
            dir,
            _tools: tools,
            config,
        }
    }

    pub(super) fn workspace(&self) -> PathBuf {
        self.dir.path().join("root/project")
    }

    /// A daemon of the fleet, with its own state dir.
    pub(super) async fn daemon(&self, name: &str) -> DaemonProcess {
        let state = format!("state-{name}");
        DaemonProcess::start(
            &[
                "--config",
                self.config.to_str().unwrap(),
                "--state-dir",
                &state,
            ],
            self.dir.path(),
        )
        .await
    }

    /// A daemon of the fleet for each of `names`, started one after the other.
    async fn daemons(&self, names: &[&str]) -> Vec<DaemonProcess> {
        let mut daemons = Vec::new();
        for name in names {
            daemons.push(self.daemon(name).await);
        }
        daemons
    }

    pub(super) fn effects(&self) -> usize {
        self.effects_in("log.txt")
    }

    pub(super) fn effects_in(&self, file: &str) -> usize {
        std::fs::read_to_string(self.workspace().join(file))
            .map(|text| text.lines().filter(|line| *line == "effect").count())
            .unwrap_or(0)
    }
}

/// A run that reads, thinks for a while, writes with the non-idempotent tool, reads again
/// and finishes.
pub(super) fn script(think_ms: u64, file: &str) -> serde_json::Value {
    json!({"turns": [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"delay_ms": think_ms, "tool_calls": [{"name": "append", "arguments": {"path": file, "line": "effect", "sleep_ms": 400}}]},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": file}}]},
        {"final": "done"}
    ]})
}

pub(super) fn kind(event: &pb::RunEvent) -> &'static str {
    event.event.as_ref().map_or("none", Event::kind)
}

/// Starts the run on `daemon` and reads its events until `stop_at` says so (all of them
/// when it never does).
pub(super) async fn start_and_read(
    daemon: &DaemonProcess,
    workspace: &Path,
    think_ms: u64,
    stop_at: impl Fn(&[pb::RunEvent]) -> bool,
) -> (String, Vec<pb::RunEvent>) {
    start_writing(daemon, workspace, think_ms, "log.txt", stop_at).await
}

/// As [`start_and_read`], the run's write going to `file`.
pub(super) async fn start_writing(
    daemon: &DaemonProcess,
    workspace: &Path,
    think_ms: u64,
    file: &str,
    stop_at: impl Fn(&[pb::RunEvent]) -> bool,
) -> (String, Vec<pb::RunEvent>) {
    start_script(daemon, workspace, &script(think_ms, file), stop_at).await
}

/// As [`start_and_read`], for the run `script` scripts, which asks for no approval.
async fn start_script(
    daemon: &DaemonProcess,
    workspace: &Path,
    script: &serde_json::Value,
    stop_at: impl Fn(&[pb::RunEvent]) -> bool,
) -> (String, Vec<pb::RunEvent>) {
    let mut start = scripted_run(workspace, script);
    start.approval_policy = pb::ApprovalPolicy::Auto as i32;
    start_run(daemon, start, stop_at).await
}

/// Starts `start` on `daemon` and reads its events until `stop_at` says so (all of them
/// when it never does).
async fn start_run(
    daemon: &DaemonProcess,
    start: pb::StartRun,
    stop_at: impl Fn(&[pb::RunEvent]) -> bool,
) -> (String, Vec<pb::RunEvent>) {
    let (requests, receiver) = mpsc::unbounded_channel();
    requests
        .send(pb::RunRequest {
            request: Some(pb::run_request::Request::Start(start)),
        })
        .unwrap();
    let mut events = daemon
        .agent()
        .await
        .run(UnboundedReceiverStream::new(receiver))
        .await
        .unwrap()
        .into_inner();
    let mut seen = Vec::new();
    while !stop_at(&seen) {
        match tokio::time::timeout(Duration::from_secs(60), events.message()).await {
            Ok(Ok(Some(event))) => seen.push(event),
            Ok(Ok(None)) => break,
            other => panic!("the run's stream failed: {other:?}"),
        }
    }
    (seen[0].run_id.clone(), seen)
}

/// Waits until the run is finished in the shared store, asking `daemon`.
pub(super) async fn await_finished(daemon: &DaemonProcess, run_id: &str) {
    let deadline = tokio::time::Instant::now() + TAKEOVER_WITHIN;
    let mut agent = daemon.agent().await;
    loop {
        let run = agent
            .get_run(pb::GetRunRequest {
                run_id: run_id.into(),
            })
            .await
            .unwrap()
            .into_inner();
        if run.state == pb::RunState::Finished as i32 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run did not finish within {TAKEOVER_WITHIN:?} of its daemon's end: {run:?}\n\
             the daemon's log:\n{}",
            daemon.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The run's whole log as the shared store has it, read through `daemon`.
pub(super) async fn stored_log(daemon: &DaemonProcess, run_id: &str) -> Vec<pb::RunEvent> {
    read_to_end(follow(daemon, run_id).await).await
}

/// A run's events through `daemon` from the first.
pub(super) async fn follow(daemon: &DaemonProcess, run_id: &str) -> tonic::Streaming<pb::RunEvent> {
    daemon
        .agent()
        .await
        .watch_run(pb::AttachRun {
            run_id: run_id.into(),
            after_seq: 0,
        })
        .await
        .unwrap()
        .into_inner()
}

/// What `events` brings, to the stream's end (the run's, in a fleet).
pub(super) async fn read_to_end(mut events: tonic::Streaming<pb::RunEvent>) -> Vec<pb::RunEvent> {
    let mut seen = Vec::new();
    loop {
        match tokio::time::timeout(TAKEOVER_WITHIN, events.message()).await {
            Ok(Ok(Some(event))) => seen.push(event),
            Ok(Ok(None)) => return seen,
            other => panic!("reading the run's events failed: {other:?}\nso far: {seen:#?}"),
        }
    }
}

/// What every takeover must leave: the events a client saw, unchanged, in a log without gaps
/// or repeats that says the run was resumed and finished; the write at most once, and
/// exactly once when the log says it succeeded.
pub(super) fn check_taken_over(
    context: &str,
    received: &[pb::RunEvent],
    log: &[pb::RunEvent],
    effects: usize,
) {
    check_finished_once(context, received, log, effects);
    let kinds: Vec<&str> = log.iter().map(kind).collect();
    assert!(kinds.contains(&"run_resumed"), "{context}: {kinds:?}");
}

/// The log without gaps or repeats, starting with what a client saw, finished once for the
/// model's final answer; the write at most once, and exactly once when it succeeded.
pub(super) fn check_finished_once(
    context: &str,
    received: &[pb::RunEvent],
    log: &[pb::RunEvent],
    effects: usize,
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
    let kinds: Vec<&str> = log.iter().map(kind).collect();
    assert_eq!(
        kinds.iter().filter(|kind| **kind == "run_finished").count(),
        1,
        "{context}: {kinds:?}"
    );
    let Some(Event::RunFinished(finished)) = log.last().and_then(|e| e.event.clone()) else {
        panic!("{context}: the run did not finish: {kinds:?}");
    };
    assert_eq!(
        finished.reason,
        pb::StopReason::Final as i32,
        "{context}: {finished:?}"
    );
    let appended: Vec<_> = log
        .iter()
        .filter_map(|e| match &e.event {
            Some(Event::ToolFinished(f)) if f.tool == "append" => f.result.clone(),
            _ => None,
        })
        .collect();
    assert!(
        appended.len() <= 1,
        "{context}: the write was recorded twice"
    );
    assert!(
        effects <= 1,
        "{context}: the write happened {effects} times"
    );
    if appended
        .first()
        .is_some_and(|r| r.status == pb::ToolStatus::Ok as i32)
    {
        assert_eq!(effects, 1, "{context}");
    }
}

/// Checks that one of `daemons` took the run over, by their logs. (More than one may have:
/// a daemon starved long enough to let its lease lapse loses the run to another, and is
/// fenced; the log's checks above hold either way.)
fn taken_over_by_one_of(daemons: &[&DaemonProcess], context: &str) {
    assert!(
        daemons
            .iter()
            .any(|daemon| daemon.log().contains("taking the run over")),
        "{context}: no daemon took the run over:\n{}",
        daemons
            .iter()
            .map(|daemon| daemon.log())
            .collect::<Vec<_>>()
            .join("\n----\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_owner_is_fenced_and_writes_nothing_when_it_wakes() {
    let fleet = Fleet::new().await;
    let (a, b, c) = tokio::join!(fleet.daemon("a"), fleet.daemon("b"), fleet.daemon("c"));
    // Frozen while the model thinks for three seconds, the owner loses its lease; another
    // daemon takes the run over and finishes it (writing once).
    let (run_id, received) = start_and_read(&a, &fleet.workspace(), 3_000, |seen| {
        seen.iter().filter(|e| kind(e) == "context_built").count() == 2
    })
    .await;
    a.signal(libc::SIGSTOP);
    await_finished(&b, &run_id).await;
    let before_waking = stored_log(&c, &run_id).await;
    check_taken_over("frozen", &received, &before_waking, fleet.effects());
    taken_over_by_one_of(&[&b, &c], "frozen");
    let written = fleet.effects();
    // Woken, the old owner's model call ends and it tries to record it: refused, it stops
    // the run on its side without writing or running anything.
    a.signal(libc::SIGCONT);
    a.await_log("was taken over by another daemon").await;
    let after_waking = stored_log(&c, &run_id).await;
    assert_eq!(
        after_waking.len(),
        before_waking.len(),
        "the woken owner added to the log"
    );
    assert_eq!(fleet.effects(), written, "the woken owner wrote");
}

/// The run of the crash matrix: reads, writes with the non-idempotent tool once approved,
/// thinks, reads again and finishes — the durable-runs matrix's run (see `crash_resume`).
fn approved_write(file: &str) -> serde_json::Value {
    json!({"turns": [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"tool_calls": [{"name": "append", "arguments": {"path": file, "line": "effect", "sleep_ms": 400}}]},
        {"delay_ms": 400, "tool_calls": [{"name": "read_file", "arguments": {"path": file}}]},
        {"delay_ms": 400, "final": "done"}
    ]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_daemon_is_killed_after_any_of_its_events_is_finished_by_another() {
    let fleet = Fleet::new().await;
    let names = ["a", "b", "c"];
    let mut daemons = fleet.daemons(&names).await;
    let approved = |file: &str| {
        let mut start = scripted_run(&fleet.workspace(), &approved_write(file));
        start.approval_policy = pb::ApprovalPolicy::Risky as i32;
        start
    };
    // A run that is never killed gives the points to kill the others at. Its approval is
    // answered through another daemon than the run's.
    let answering = airlock_tests::approver(&daemons[1], Duration::from_millis(300));
    let (_, clean) = start_run(&daemons[0], approved("clean.txt"), |_| false).await;
    answering.abort();
    let kinds: Vec<&str> = clean.iter().map(kind).collect();
    assert_eq!(kinds.last(), Some(&"run_finished"), "{kinds:?}");
    assert_eq!(fleet.effects_in("clean.txt"), 1);

    let mut outcomes = Vec::new();
    for kill_after in 1..clean.len() {
        // Each daemon executes runs in turn; the next one answers approvals.
        let owner = kill_after % names.len();
        let answerer = (owner + 1) % names.len();
        let file = format!("log-{kill_after}.txt");
        let answering = airlock_tests::approver(&daemons[answerer], Duration::from_millis(300));
        let (run_id, received) = start_run(&daemons[owner], approved(&file), |seen| {
            seen.len() == kill_after
        })
        .await;
        let last_kind = kind(received.last().unwrap());
        let killed = daemons.remove(owner);
        killed.kill().await;
        // Back at once, as a new member of the fleet: it may be the one to take the run.
        daemons.insert(owner, fleet.daemon(names[owner]).await);
        let context = format!("killed after event {kill_after} ({last_kind})");
        await_finished(&daemons[answerer], &run_id).await;
        answering.abort();
        let log = stored_log(&daemons[answerer], &run_id).await;
        let effects = fleet.effects_in(&file);
        check_finished_once(&context, &received, &log, effects);
        let appended = log.iter().find_map(|event| match &event.event {
            Some(Event::ToolFinished(finished)) if finished.tool == "append" => finished
                .result
                .as_ref()
                .and_then(|result| pb::ToolStatus::try_from(result.status).ok()),
            _ => None,
        });
        let resumed = log.iter().any(|event| kind(event) == "run_resumed");
        outcomes.push((
            last_kind,
            format!(
                "{kill_after:>2} {last_kind:<20} resumed={resumed} append={appended:?} effects={effects}"
            ),
        ));
    }
    let report = outcomes
        .iter()
        .map(|(_, line)| line.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    // Killed at each of the durable-runs matrix's points, the run moved to another daemon
    // (a kill after a run's last events may come when it has already finished).
    for point in [
        "approval_requested",
        "tool_started",
        "context_built",
        "tool_finished",
    ] {
        let at_point: Vec<_> = outcomes.iter().filter(|(kind, _)| *kind == point).collect();
        assert!(!at_point.is_empty(), "no kill at {point}:\n{report}");
        assert!(
            at_point
                .iter()
                .all(|(_, line)| line.contains("resumed=true")),
            "a kill at {point} was not taken over:\n{report}"
        );
    }
    assert!(
        report.contains("OutcomeUnknown"),
        "no kill caught the write in flight:\n{report}"
    );
    println!("{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_sent_through_another_daemon_for_a_frozen_owners_run_is_said_not_applied() {
    let fleet = Fleet::new().await;
    let (a, b) = tokio::join!(fleet.daemon("a"), fleet.daemon("b"));
    let mut start = scripted_run(&fleet.workspace(), &approved_write("log.txt"));
    start.approval_policy = pb::ApprovalPolicy::Risky as i32;
    let (run_id, received) = start_run(&a, start, |seen| {
        seen.iter().any(|event| kind(event) == "approval_requested")
    })
    .await;
    let Some(Event::ApprovalRequested(pb::ApprovalRequested {
        request: Some(request),
    })) = received.last().and_then(|event| event.event.clone())
    else {
        panic!("no approval request: {received:?}");
    };
    let answer = pb::ApprovalDecision {
        approval_id: request.approval_id.clone(),
        decision: pb::Decision::ApproveOnce as i32,
        reason: String::new(),
        digest: request.digest.clone(),
        grant_prefix: Vec::new(),
    };
    // The owner freezes, and no other daemon can take the run over meanwhile (none sees its
    // workspace): an answer sent through b waits a lease for the owner, in vain.
    let away = fleet.dir.path().join("root/moved");
    std::fs::rename(fleet.workspace(), &away).unwrap();
    a.signal(libc::SIGSTOP);
    let status = b
        .agent()
        .await
        .decide_approval(answer.clone())
        .await
        .expect_err("an answer nobody took was accepted");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(status.message().contains("was not applied"), "{status:?}");
    // It was not: once the workspace is back, a new daemon takes the run over, the request
    // waits again under the same id, and an answer is applied — the first and only one.
    std::fs::rename(&away, fleet.workspace()).unwrap();
    let c = fleet.daemon("c").await;
    c.await_log("taking the run over").await;
    let mut agent = c.agent().await;
    let deadline = tokio::time::Instant::now() + TAKEOVER_WITHIN;
    loop {
        match agent.decide_approval(answer.clone()).await {
            Ok(_) => break,
            // Not yet waiting again on c.
            Err(status) if tokio::time::Instant::now() < deadline => {
                retry_after(&status).await;
            }
            Err(status) => panic!("the request never waited again: {status:?}"),
        }
    }
    let log = stored_log(&c, &run_id).await;
    check_taken_over("answered while frozen", &received, &log, fleet.effects());
    assert_eq!(fleet.effects(), 1, "the approved write did not happen once");
    let resolved: Vec<_> = log
        .iter()
        .filter(|event| kind(event) == "approval_resolved")
        .collect();
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    a.signal(libc::SIGCONT);
}

/// A pause before trying an answer again that `status` refused.
async fn retry_after(status: &tonic::Status) {
    assert!(
        matches!(
            status.code(),
            tonic::Code::NotFound | tonic::Code::Unavailable
        ),
        "{status:?}"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// The running program `name` among `daemon`'s sandboxes, once there is one.
async fn sandboxed(daemon: &DaemonProcess, name: &str) -> procs::Proc {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(found) = procs::descendants(daemon.pid())
            .into_iter()
            .find(|proc| proc.comm == name)
        {
            return found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "`{name}` never ran in a sandbox of the daemon"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_owners_process_tool_ends_at_its_deadline_while_the_owner_stays_frozen() {
    let fleet = Fleet::new().await;
    let (a, b) = tokio::join!(fleet.daemon("a"), fleet.daemon("b"));
    let script = json!({"turns": [
        {"tool_calls": [{"name": "sleeper", "arguments": {}}]},
        {"final": "done"}
    ]});
    let (run_id, received) = start_script(&a, &fleet.workspace(), &script, |seen| {
        seen.iter().any(|event| kind(event) == "tool_started")
    })
    .await;
    let sleeper = sandboxed(&a, "sleep").await;
    // Frozen, the owner cannot stop its call at the deadline: the deadline keeper does, and
    // the program is gone while the owner is still frozen (a zombie its parent will reap).
    a.signal(libc::SIGSTOP);
    let left = procs::await_gone(
        std::slice::from_ref(&sleeper),
        Duration::from_millis(SLEEPER_TIMEOUT_MS) + GONE_AFTER_DEADLINE,
    )
    .await;
    assert!(
        left.is_empty(),
        "the frozen daemon's tool ran on past its deadline: {left:?}"
    );
    assert_eq!(
        procs::stat(a.pid()).map(|proc| proc.state),
        Some('T'),
        "the daemon is no longer stopped: the test proves nothing"
    );
    // Another daemon takes the run over once the lease and the call's deadline have passed,
    // and records the call's outcome as unknown: it was not idempotent.
    await_finished(&b, &run_id).await;
    let log = stored_log(&b, &run_id).await;
    check_taken_over(
        "frozen with a process tool",
        &received,
        &log,
        fleet.effects(),
    );
    let results: Vec<_> = log
        .iter()
        .filter_map(|event| match &event.event {
            Some(Event::ToolFinished(finished)) if finished.tool == "sleeper" => {
                finished.result.clone()
            }
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(
        results[0].status,
        pb::ToolStatus::OutcomeUnknown as i32,
        "{results:?}"
    );
    // Woken, the old owner's executor ends the call and tries to record it: refused.
    a.signal(libc::SIGCONT);
    a.await_log("was taken over by another daemon").await;
    assert_eq!(stored_log(&b, &run_id).await.len(), log.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_daemon_takes_over_a_run_whose_workspace_it_cannot_see() {
    let fleet = Fleet::new().await;
    let (a, b) = tokio::join!(fleet.daemon("a"), fleet.daemon("b"));
    let (run_id, _) = start_and_read(&a, &fleet.workspace(), 3_000, |seen| {
        seen.iter().filter(|e| kind(e) == "context_built").count() == 2
    })
    .await;
    a.kill().await;
    // The shared storage goes away from under the fleet (here: the workspace is moved).
    let away = fleet.dir.path().join("root/moved");
    std::fs::rename(fleet.workspace(), &away).unwrap();
    b.await_log("its workspace is not visible on this machine")
        .await;
    assert!(b.log().contains(&run_id), "{}", b.log());
    let mut agent = b.agent().await;
    let run = agent
        .get_run(pb::GetRunRequest {
            run_id: run_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_ne!(run.state, pb::RunState::Finished as i32, "{run:?}");
    assert!(!b.log().contains("taking the run over"), "{}", b.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_of_every_daemon_loses_and_repeats_nothing() {
    let fleet = Fleet::new().await;
    let names = ["a", "b", "c"];
    let mut daemons = fleet.daemons(&names).await;
    // A run on each daemon, each past its first step and thinking before its write.
    let mut runs = Vec::new();
    for (index, daemon) in daemons.iter().enumerate() {
        let file = format!("log-{index}.txt");
        let (run_id, received) = start_writing(daemon, &fleet.workspace(), 1_500, &file, |seen| {
            seen.iter().filter(|e| kind(e) == "context_built").count() == 2
        })
        .await;
        runs.push((run_id, received, file));
    }
    // Each daemon in turn stops (SIGTERM: it gives its lease up) and comes back.
    for (index, name) in names.iter().enumerate() {
        let mut stopping = daemons.remove(index);
        stopping.signal(libc::SIGTERM);
        assert!(stopping.wait().await.success(), "{}", stopping.log());
        assert!(
            stopping.log().contains("left the fleet"),
            "{}",
            stopping.log()
        );
        daemons.insert(index, fleet.daemon(name).await);
    }
    for (run_id, received, file) in &runs {
        await_finished(&daemons[0], run_id).await;
        let log = stored_log(&daemons[1], run_id).await;
        check_finished_once(
            &format!("run {run_id}"),
            received,
            &log,
            fleet.effects_in(file),
        );
    }
}

/// Runs `sql` on the fleet's database, as an operator (or a failing server) would.
async fn on_database(fleet: &Fleet, sql: &str) {
    let (client, connection) = tokio_postgres::connect(&fleet.database, tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(connection);
    client.batch_execute(sql).await.unwrap();
    drop(client);
    let _ = driver.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_log_cannot_be_written_is_given_back_and_resumed() {
    let fleet = Fleet::new().await;
    let (a, b) = tokio::join!(fleet.daemon("a"), fleet.daemon("b"));
    let (run_id, received) = start_and_read(&a, &fleet.workspace(), 2_000, |seen| {
        seen.iter().filter(|e| kind(e) == "context_built").count() == 2
    })
    .await;
    // The event log's table goes away while the model thinks: the run's next event cannot
    // be written, and its loop stops. Its daemon is alive and keeps its lease, so no other
    // would take the run: it must give the run back itself.
    on_database(&fleet, "ALTER TABLE events RENAME TO events_away").await;
    a.await_log("the run's log cannot be written").await;
    on_database(&fleet, "ALTER TABLE events_away RENAME TO events").await;
    a.await_log("gave the run back to the fleet").await;
    await_finished(&b, &run_id).await;
    let log = stored_log(&b, &run_id).await;
    // The write's intent may have been recorded in the batch whose events failed: then the
    // resumed run reports its outcome as unknown rather than run it (at most once).
    check_taken_over("log unwritable", &received, &log, fleet.effects());
}
