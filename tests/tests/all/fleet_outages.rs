//! A fleet whose database goes away or freezes, and owners that freeze: the daemons reach
//! the test PostgreSQL through a [`Link`] the test cuts (or freezes) at a stage of a run,
//! for less and for more than a lease, and owners are frozen at a stage of their run. Every
//! time the run finishes once, no acknowledged event is lost or changed, no daemon claims a
//! run it executes, the write happens at most once, and the run's own client — through the
//! outage, and on the owner that froze — sees every event to the run's end, and then its
//! stream ends. A daemon whose database froze, or whose client waits, stops when told.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use airlock_proto::v1 as pb;
use airlock_tests::link::{Link, LinkState};
use airlock_tests::{Console, DaemonProcess, ProcessOptions, RunStream, scripted_run};
use pb::run_event::Event;
use prost::Message as _;
use tokio::io::AsyncBufReadExt as _;

use super::fleet::{
    Fleet, LEASE_MS, await_finished, check_finished_once, kind, script, stored_log,
};

/// The database's address in a URL of the test server's (`postgres://user@host:port/db`).
fn server_of(url: &str) -> SocketAddr {
    let authority = url
        .split('@')
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no host in {url}"));
    authority.parse().unwrap()
}

/// `url` with its server replaced by `addr`.
fn through(url: &str, addr: SocketAddr) -> String {
    url.replace(&server_of(url).to_string(), &addr.to_string())
}

/// A fleet of two daemons whose database is behind a link the test cuts.
async fn fleet_behind_a_link() -> (Fleet, Link, DaemonProcess, DaemonProcess) {
    let database = airlock_daemon::testing::fresh_postgres_database().await;
    let link = Link::to(server_of(&database), LinkState::Up).await;
    let url = through(&database, link.addr());
    let fleet = Fleet::reaching(database, &url);
    let (a, b) = tokio::join!(fleet.daemon("a"), fleet.daemon("b"));
    (fleet, link, a, b)
}

/// Where in the run the database goes away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// While the model thinks (for longer than the outage) about its second step.
    ModelCall,
    /// While the non-idempotent write runs: it finishes with the database away.
    ToolInFlight,
    /// While the write waits for a person, who answers through the other daemon once the
    /// database is back.
    ApprovalWait,
    /// Right after the write finished, while the model starts on its final answer.
    ToolFinished,
    /// While the model thinks (for longer than the outage) about its final answer.
    FinalAnswer,
}

impl Stage {
    /// Whether nothing needs writing during the outage: each daemon then keeps its runs.
    fn quiet(self) -> bool {
        matches!(self, Stage::ModelCall | Stage::FinalAnswer)
    }

    /// The run of this stage's case: it reads, writes once with the non-idempotent tool,
    /// and finishes; the model thinks for `think_ms` where the stage needs it.
    fn run(self, workspace: &Path, file: &str, think_ms: u64) -> pb::StartRun {
        let script = match self {
            Stage::ModelCall => script(think_ms, file),
            Stage::ToolInFlight => script(0, file),
            Stage::ApprovalWait | Stage::ToolFinished | Stage::FinalAnswer => {
                let answer_ms = match self {
                    Stage::FinalAnswer => think_ms,
                    // Long enough that the owner is stopped (at once) before it answers,
                    // however loaded the machine.
                    Stage::ToolFinished => 1_000,
                    _ => 0,
                };
                serde_json::json!({"turns": [
                    {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
                    {"tool_calls": [{"name": "append", "arguments": {"path": file, "line": "effect", "sleep_ms": 0}}]},
                    {"delay_ms": answer_ms, "final": "done"}
                ]})
            }
        };
        let mut start = scripted_run(workspace, &script);
        start.approval_policy = if self == Stage::ApprovalWait {
            pb::ApprovalPolicy::Risky
        } else {
            pb::ApprovalPolicy::Auto
        } as i32;
        start
    }

    /// Whether a run has reached this stage, by the events its client saw.
    fn reached(self, seen: &[pb::RunEvent]) -> bool {
        let models = seen.iter().filter(|e| kind(e) == "context_built").count();
        match self {
            Stage::ModelCall => models == 2,
            Stage::FinalAnswer => models == 3,
            Stage::ToolInFlight => seen.iter().any(|e| match &e.event {
                Some(Event::ToolStarted(started)) => started.tool == "append",
                _ => false,
            }),
            Stage::ApprovalWait => seen.iter().any(|e| kind(e) == "approval_requested"),
            Stage::ToolFinished => seen.iter().any(|e| match &e.event {
                Some(Event::ToolFinished(finished)) => finished.tool == "append",
                _ => false,
            }),
        }
    }
}

/// A run on `a`, its database cut (or frozen, as `how` says) at `stage` for `away`: the run
/// finishes once, with every promise of a takeover kept. Where nothing needs writing during
/// the outage, b runs one too, and neither may take the other's over (after a long outage
/// each sees the other's lease lapsed, as its own).
async fn outage(stage: Stage, away: Duration, how: LinkState) {
    let (fleet, link, a, b) = fleet_behind_a_link().await;
    let think_ms = u64::try_from(away.as_millis()).unwrap() + 1_000;
    let workspace = fleet.workspace();
    // Each run's own client, read up to the stage; kept open through the outage.
    let (a_txt, b_txt) = (
        stage.run(&workspace, "a.txt", think_ms),
        stage.run(&workspace, "b.txt", think_ms),
    );
    let mut runs = if stage.quiet() {
        let (on_a, on_b) = tokio::join!(started(&a, a_txt, stage), started(&b, b_txt, stage));
        vec![(on_a, "a.txt"), (on_b, "b.txt")]
    } else {
        vec![(started(&a, a_txt, stage).await, "a.txt")]
    };
    link.set(how);
    tokio::time::sleep(away).await;
    link.set(LinkState::Up);
    if stage == Stage::ApprovalWait {
        let ((_, (run_id, received)), _) = &runs[0];
        let Some(Event::ApprovalRequested(pb::ApprovalRequested {
            request: Some(request),
        })) = received.last().and_then(|event| event.event.clone())
        else {
            panic!("no approval request: {received:?}");
        };
        assert_eq!(&request.run_id, run_id);
        approve_once_on(&b, &request).await;
    }
    for ((stream, (run_id, received)), file) in &mut runs {
        let context = format!("{stage:?} {how:?} for {away:?}, run writing {file}");
        await_finished(&b, run_id).await;
        let log = stored_log(&a, run_id).await;
        // The client that started the run saw it to its end, through the outage, whichever
        // daemon finished it: every stored event once, in order, and then the stream's end.
        stream.drain().await;
        let streamed: Vec<Vec<u8>> = stream
            .seen()
            .iter()
            .filter(|event| !event.delta)
            .map(|event| event.encode_to_vec())
            .collect();
        let stored: Vec<Vec<u8>> = log.iter().map(|event| event.encode_to_vec()).collect();
        assert!(
            streamed == stored,
            "{context}: the run's own client saw another log"
        );
        check_finished_once(&context, received, &log, fleet.effects_in(file));
        let resumed = log.iter().filter(|e| kind(e) == "run_resumed").count();
        if stage.quiet() || stage == Stage::ApprovalWait {
            // Nothing failed to be written: the run stays with its daemon.
            assert_eq!(resumed, 0, "{context}: {log:#?}");
        } else {
            // Given back once its log failed, and resumed once.
            assert!(resumed <= 1, "{context}: {log:#?}");
        }
        if stage == Stage::ApprovalWait {
            assert_eq!(fleet.effects_in(file), 1, "{context}: the approved write");
        }
    }
    for daemon in [&a, &b] {
        let log = daemon.log();
        for sign in ["out of order", "duplicate key"] {
            assert!(!log.contains(sign), "{stage:?}: `{sign}` in:\n{log}");
        }
        if stage.quiet() || stage == Stage::ApprovalWait {
            assert!(
                !log.contains("taking the run over"),
                "{stage:?} {how:?} for {away:?}: a live daemon's run was taken over:\n{log}"
            );
        }
    }
}

/// Approves `request` once through `daemon`, as soon as it takes the answer: after an
/// outage or a takeover the request waits there again only once the run is back.
async fn approve_once_on(daemon: &DaemonProcess, request: &pb::ApprovalRequest) {
    let answer = pb::ApprovalDecision {
        approval_id: request.approval_id.clone(),
        decision: pb::Decision::ApproveOnce as i32,
        reason: String::new(),
        digest: request.digest.clone(),
        grant_prefix: Vec::new(),
    };
    let mut agent = daemon.agent().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while let Err(status) = agent.decide_approval(answer.clone()).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the answer was never taken: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts `start` on `daemon` and reads its client's stream until the run reaches `stage`:
/// the stream, kept open, and the run's id and events so far.
async fn started(
    daemon: &DaemonProcess,
    start: pb::StartRun,
    stage: Stage,
) -> (RunStream, (String, Vec<pb::RunEvent>)) {
    let mut stream = RunStream::open(daemon.agent().await, pb::run_request::Request::Start(start))
        .await
        .unwrap();
    while !stage.reached(stream.seen()) {
        stream.next().await.expect("the run's stream is open");
    }
    let received = stream.seen().to_vec();
    let run_id = received[0].run_id.clone();
    (stream, (run_id, received))
}

/// Longer than a lease: every lease lapses, the live owner's too.
const LONG: Duration = Duration::from_millis(LEASE_MS + 1_500);

/// Shorter than a lease: leases hold, writes in the meantime fail.
const SHORT: Duration = Duration::from_millis(LEASE_MS / 2);

/// Longer than a request waits for the server (two leases, five seconds at least): what
/// waited on the frozen server fails, as when it is down.
const FROZEN: Duration = Duration::from_millis(7_000);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_away_for_less_than_a_lease_while_the_model_thinks() {
    outage(Stage::ModelCall, SHORT, LinkState::Down).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_away_for_more_than_a_lease_while_the_model_thinks() {
    outage(Stage::ModelCall, LONG, LinkState::Down).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_finishes_while_the_database_is_away_briefly_leaves_no_run_running() {
    outage(Stage::ToolInFlight, SHORT, LinkState::Down).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_finishes_while_the_database_is_away_for_long_leaves_no_run_running() {
    outage(Stage::ToolInFlight, LONG, LinkState::Down).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_away_for_less_than_a_lease_while_a_run_waits_for_a_person() {
    outage(Stage::ApprovalWait, SHORT, LinkState::Down).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_away_for_more_than_a_lease_while_a_run_waits_for_a_person() {
    outage(Stage::ApprovalWait, LONG, LinkState::Down).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_away_for_less_than_a_lease_while_the_model_thinks_of_its_answer() {
    outage(Stage::FinalAnswer, SHORT, LinkState::Down).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_away_for_more_than_a_lease_while_the_model_thinks_of_its_answer() {
    outage(Stage::FinalAnswer, LONG, LinkState::Down).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_frozen_while_the_model_thinks_takes_no_live_run_away() {
    outage(Stage::ModelCall, FROZEN, LinkState::Frozen).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_finishes_while_the_database_is_frozen_leaves_no_run_running() {
    outage(Stage::ToolInFlight, FROZEN, LinkState::Frozen).await;
}

/// A run on `a`, whose daemon is frozen (SIGSTOP) at `stage`: b takes the run over and
/// finishes it (a person answering its request there, when it waits for one); a, woken,
/// learns it lost the run: its client's stream goes on to the run's end as b recorded it,
/// and — when the run waited for a person — its console shows the request approved.
async fn frozen_owner(stage: Stage) {
    let fleet = Fleet::new().await;
    let (a, b) = tokio::join!(fleet.daemon("a"), fleet.daemon("b"));
    let mut console = Console::on(a.agent().await).await;
    let mut start = stage.run(&fleet.workspace(), "log.txt", 1_000);
    // Far beyond the test's patience: a client still waiting for the deadline fails it.
    start.approval_timeout_ms = 600_000;
    let (mut on_a, (run_id, received)) = started(&a, start, stage).await;
    let request = if stage == Stage::ApprovalWait {
        let Some(Event::ApprovalRequested(pb::ApprovalRequested {
            request: Some(request),
        })) = received.last().and_then(|event| event.event.clone())
        else {
            panic!("no approval request: {received:?}");
        };
        let shown = console.next_in(pb::ApprovalState::Pending).await;
        assert_eq!(shown.approval_id, request.approval_id);
        Some(request)
    } else {
        None
    };

    // The owner freezes; b takes the run over (the request waits again there under the
    // same id, and a person answers it on b).
    a.signal(libc::SIGSTOP);
    b.await_log("taking the run over").await;
    if let Some(request) = &request {
        approve_once_on(&b, request).await;
    }
    await_finished(&b, &run_id).await;

    // Woken, the old owner learns it lost the run.
    a.signal(libc::SIGCONT);
    on_a.drain().await;
    let log = stored_log(&b, &run_id).await;
    let streamed: Vec<Vec<u8>> = on_a
        .seen()
        .iter()
        .filter(|event| !event.delta)
        .map(|event| event.encode_to_vec())
        .collect();
    let stored: Vec<Vec<u8>> = log.iter().map(|event| event.encode_to_vec()).collect();
    assert_eq!(
        streamed, stored,
        "{stage:?}: the frozen owner's client saw another run"
    );
    let context = format!("frozen at {stage:?}");
    check_finished_once(&context, &received, &log, fleet.effects());
    assert_eq!(fleet.effects(), 1, "{context}");
    if let Some(request) = request {
        let ended = loop {
            let update = console.next().await;
            if update.approval_id == request.approval_id
                && update.state != pb::ApprovalState::Pending as i32
            {
                break update;
            }
        };
        assert_eq!(
            (ended.state, ended.detail.as_str()),
            (
                pb::ApprovalState::Resolved as i32,
                "approved once by the approver"
            ),
            "{ended:?}"
        );
    }
    if stage == Stage::ApprovalWait {
        // A loop that waits writes nothing that would tell it: the fleet's round does.
        a.await_log("taken over by another daemon while this one could not renew")
            .await;
    }
    for sign in ["out of order", "duplicate key"] {
        for daemon in [&a, &b] {
            let log = daemon.log();
            assert!(!log.contains(sign), "{context}: `{sign}` in:\n{log}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_frozen_while_its_run_waits_for_a_person_sees_the_run_end_where_it_went_on() {
    frozen_owner(Stage::ApprovalWait).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_frozen_as_its_write_finished_sees_the_run_end_where_it_went_on() {
    frozen_owner(Stage::ToolFinished).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_frozen_while_its_model_thinks_of_the_answer_sees_the_run_end_where_it_went_on() {
    frozen_owner(Stage::FinalAnswer).await;
}

/// `airlockd` with `config`, to its exit; its standard error.
async fn start_to_exit(
    cwd: &Path,
    config: &Path,
    until: impl FnOnce(i32) -> tokio::task::JoinHandle<()>,
) -> (std::process::ExitStatus, String) {
    let mut child = airlock_tests::airlockd_command(
        &["--config", config.to_str().unwrap(), "--state-dir", "state"],
        cwd,
        &ProcessOptions::default(),
    )
    .spawn()
    .unwrap();
    let stderr = child.stderr.take().unwrap();
    let reading = tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        let mut log = String::new();
        while let Ok(Some(line)) = lines.next_line().await {
            log.push_str(&line);
            log.push('\n');
        }
        log
    });
    let acting = until(i32::try_from(child.id().unwrap()).unwrap());
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("airlockd ends within a minute")
        .unwrap();
    acting.abort();
    (status, reading.await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_never_answers_stops_the_start_in_words_and_a_signal_ends_the_wait() {
    let database = airlock_daemon::testing::fresh_postgres_database().await;
    let link = Link::to(server_of(&database), LinkState::Silent).await;
    let url = through(&database, link.addr());
    let dir = tempfile::tempdir().unwrap();
    let config = |name: &str, url: &str| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            format!("[store]\nurl = \"{url}\"\nlease_ms = {LEASE_MS}\n"),
        )
        .unwrap();
        path
    };

    // Bounded by the URL's connect_timeout, and named.
    let bounded = config("bounded.toml", &format!("{url}?connect_timeout=2"));
    let (status, log) = start_to_exit(dir.path(), &bounded, |_| tokio::spawn(async {})).await;
    assert!(!status.success(), "{log}");
    let name = format!("postgres://{}/", link.addr());
    assert!(log.contains(&name), "the store is not named:\n{log}");
    assert!(log.contains("did not answer within 2 s"), "{log}");

    // Unbounded by the URL (30 s by default): SIGTERM stops the wait, cleanly.
    let waiting = config("waiting.toml", &url);
    let (status, log) = start_to_exit(dir.path(), &waiting, |pid| {
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            // SAFETY: signalling the test's own child.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        })
    })
    .await;
    assert!(status.success(), "{status:?}\n{log}");
    assert!(log.contains("opening the store"), "{log}");
    assert!(log.contains("stopped while starting"), "{log}");
}

/// SIGTERM to `daemon`, and how long it took to exit; it must exit cleanly.
async fn stopped(daemon: &mut DaemonProcess) -> Duration {
    let asked = std::time::Instant::now();
    daemon.signal(libc::SIGTERM);
    let status = daemon.wait().await;
    assert!(status.success(), "{status:?}\n{}", daemon.log());
    asked.elapsed()
}

/// The calls' grace at stop (the daemon's default `shutdown_grace_ms`): a daemon that waits
/// it out with no call running held its stop for the sake of an open stream.
const CALLS_GRACE: Duration = Duration::from_secs(10);

/// How long a stop may take with the database frozen: the final drain (2 s), the lease's
/// release waiting out its request deadline (5 s at this lease), and room for one request
/// already under way (a command being applied) to wait out its own.
const FROZEN_STOP_BOUND: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_stops_when_told_while_its_clients_wait_and_while_its_database_is_frozen() {
    let (fleet, link, mut a, mut b) = fleet_behind_a_link().await;
    let start = Stage::ApprovalWait.run(&fleet.workspace(), "a.txt", 0);
    let (_waiting_on_a, (run_id, _)) = started(&a, start, Stage::ApprovalWait).await;

    // A run's client waits for a person: no call runs, so the calls' grace is not waited
    // out for the stream's sake.
    let took = stopped(&mut a).await;
    eprintln!("stopped with a client waiting in {took:?}");
    assert!(took < CALLS_GRACE, "a took {took:?} to stop");
    a.await_log("closing the connections still open").await;

    // b takes the run over, and it waits there; then the database freezes. The stop waits
    // for the store at most a request's deadline, and gives the lease up or says why not.
    b.await_log("taking the run over").await;
    let _waiting_on_b = RunStream::open(
        b.agent().await,
        pb::run_request::Request::Attach(pb::AttachRun {
            run_id,
            after_seq: 0,
        }),
    )
    .await
    .unwrap();
    link.set(LinkState::Frozen);
    tokio::time::sleep(Duration::from_millis(LEASE_MS)).await;
    let took = stopped(&mut b).await;
    eprintln!("stopped with its database frozen in {took:?}");
    assert!(
        took < FROZEN_STOP_BOUND,
        "b took {took:?} to stop, its database frozen"
    );
    // The release waited out its deadline on the frozen database, and said so.
    let log = b.log();
    assert!(
        log.contains("cannot give the lease up; it lapses by itself"),
        "{log}"
    );
    link.set(LinkState::Up);
}
