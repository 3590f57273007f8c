//! Who may connect, end to end: the access token, tenants that never see each other's runs,
//! approvals or executions, TLS and mutual TLS, the Unix socket, and the bounds on what a
//! client may send.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use airlock_daemon::Daemon;
use airlock_daemon::config::{
    ApprovalRights, AuthSettings, ConfigFile, DaemonConfig, ListenAddr, Overrides, TlsFiles,
};
use airlock_proto::v1 as pb;
use airlock_tests::cli::Cli;
use airlock_tests::{
    AuthedChannel, BearerToken, DaemonOptions, TestDaemon, ToolsDir, cargo_bin, private_file,
    repo_root, scripted_run, tenant, test_module,
};
use serde_json::json;
use tempfile::TempDir;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::Code;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

pub(crate) const ALICE: &str = "alice-token-0123456789";
pub(crate) const BOB: &str = "bob-token-9876543210";

/// A daemon with tenants `alice` (every tool) and `bob` (read_file, write_file and spin, in
/// his own root, one call and one run at a time).
pub(crate) struct TwoTenants {
    pub(crate) daemon: TestDaemon,
    /// Inside the daemon's roots; bob's root is `bob/` in it.
    shared: TempDir,
    _tools: ToolsDir,
    _secrets: TempDir,
}

impl TwoTenants {
    pub(crate) async fn start() -> TwoTenants {
        let secrets = tempfile::tempdir().unwrap();
        let shared = tempfile::tempdir().unwrap();
        std::fs::create_dir(shared.path().join("bob")).unwrap();
        std::fs::create_dir(shared.path().join("alice")).unwrap();
        let tools = ToolsDir::new();
        tools.add_file("spin", &test_module("spin"), "");
        let alice = tenant(
            "alice",
            private_file(secrets.path(), "alice", ALICE),
            &["*"],
            ApprovalRights::Own,
        );
        let mut bob = tenant(
            "bob",
            private_file(secrets.path(), "bob", BOB),
            &["read_file", "write_file", "spin"],
            ApprovalRights::Own,
        );
        bob.workspace_roots = vec![shared.path().join("bob")];
        bob.max_concurrent_executions = Some(1);
        bob.max_concurrent_runs = Some(1);
        let daemon = TestDaemon::start(DaemonOptions {
            tools_dirs: vec![repo_root().join("plugins"), tools.path().to_owned()],
            auth: AuthSettings {
                unix_socket_trust: false,
                tenants: vec![alice, bob],
            },
            extra_workspace_roots: vec![shared.path().to_owned()],
            // The MCP edge holds the same walls (mcp_edge.rs).
            mcp_listen: Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
            ..DaemonOptions::default()
        })
        .await;
        assert!(daemon.refused().is_empty(), "{:?}", daemon.refused());
        TwoTenants {
            daemon,
            shared,
            _tools: tools,
            _secrets: secrets,
        }
    }

    pub(crate) fn workspace(&self, tenant: &str) -> PathBuf {
        let dir = self.shared.path().join(tenant);
        std::fs::write(dir.join("notes.txt"), "hello\n").unwrap();
        dir
    }

    pub(crate) async fn tools(&self, token: &str) -> pb::tools_client::ToolsClient<AuthedChannel> {
        pb::tools_client::ToolsClient::new(self.daemon.channel_with_token(token).await)
    }

    pub(crate) async fn agent(&self, token: &str) -> pb::agent_client::AgentClient<AuthedChannel> {
        pb::agent_client::AgentClient::new(self.daemon.channel_with_token(token).await)
    }
}

/// A run stream of one tenant.
struct Run {
    requests: mpsc::UnboundedSender<pb::RunRequest>,
    events: tonic::Streaming<pb::RunEvent>,
}

impl Run {
    async fn open(
        agent: &mut pb::agent_client::AgentClient<AuthedChannel>,
        first: pb::run_request::Request,
    ) -> Result<Run, tonic::Status> {
        let (requests, receiver) = mpsc::unbounded_channel();
        requests
            .send(pb::RunRequest {
                request: Some(first),
            })
            .unwrap();
        let events = agent
            .run(UnboundedReceiverStream::new(receiver))
            .await?
            .into_inner();
        Ok(Run { requests, events })
    }

    async fn until<T>(&mut self, mut pick: impl FnMut(&pb::run_event::Event) -> Option<T>) -> T {
        loop {
            let event = tokio::time::timeout(Duration::from_secs(60), self.events.message())
                .await
                .expect("an event within a minute")
                .expect("a healthy stream")
                .expect("the awaited event before the end");
            if let Some(found) = event.event.as_ref().and_then(&mut pick) {
                return found;
            }
        }
    }

    async fn approval(&mut self) -> pb::ApprovalRequest {
        self.until(|event| match event {
            pb::run_event::Event::ApprovalRequested(requested) => requested.request.clone(),
            _ => None,
        })
        .await
    }

    async fn finished(&mut self) -> pb::RunFinished {
        self.until(|event| match event {
            pb::run_event::Event::RunFinished(finished) => Some(finished.clone()),
            _ => None,
        })
        .await
    }
}

/// A run that writes a file under the `risky` policy: it waits for an approval.
fn risky_write(workspace: &Path) -> pb::StartRun {
    let script = json!({"turns": [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "x\n"}}]},
        {"final": "done"}
    ]});
    let mut start = scripted_run(workspace, &script);
    start.approval_policy = pb::ApprovalPolicy::Risky as i32;
    start
}

fn execute(tool: &str, workspace: &Path) -> pb::ExecuteToolRequest {
    pb::ExecuteToolRequest {
        tool: tool.into(),
        arguments_json: json!({"path": "notes.txt"}).to_string(),
        workspace: workspace.to_str().unwrap().into(),
        timeout_ms: 0,
        require_approval: false,
    }
}

#[tokio::test]
async fn without_a_token_only_health_answers() {
    let daemon = TestDaemon::start(DaemonOptions::default()).await;
    let mut health = tonic_health::pb::health_client::HealthClient::new(daemon.channel().await);
    let reply = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "airlock.v1.Agent".into(),
        })
        .await
        .expect("health is open")
        .into_inner();
    assert_eq!(
        reply.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
    let status = pb::tools_client::ToolsClient::new(daemon.channel().await)
        .list_tools(pb::ListToolsRequest {})
        .await
        .expect_err("no token");
    assert_eq!(status.code(), Code::Unauthenticated);
    assert!(status.message().contains("token"), "{status:?}");
    let status = pb::agent_client::AgentClient::new(daemon.channel().await)
        .list_runs(pb::ListRunsRequest::default())
        .await
        .expect_err("no token");
    assert_eq!(status.code(), Code::Unauthenticated);
    for wrong in ["not-the-token", &daemon.token[1..]] {
        let status = pb::tools_client::ToolsClient::new(daemon.channel_with_token(wrong).await)
            .list_tools(pb::ListToolsRequest {})
            .await
            .expect_err("wrong token");
        assert_eq!(status.code(), Code::Unauthenticated, "{wrong}");
    }
    daemon
        .tools()
        .await
        .list_tools(pb::ListToolsRequest {})
        .await
        .expect("the right token");
}

#[tokio::test]
async fn the_token_file_is_private_and_a_readable_one_stops_the_daemon() {
    let daemon = TestDaemon::start(DaemonOptions::default()).await;
    let path = daemon.state_dir.join("token");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(daemon.token.len(), 64, "256 bits, hex");

    let state = tempfile::tempdir().unwrap();
    let exposed = state.path().join("token");
    std::fs::write(&exposed, "a-token-others-can-read\n").unwrap();
    std::fs::set_permissions(&exposed, std::fs::Permissions::from_mode(0o644)).unwrap();
    let config = DaemonConfig::resolve(
        ConfigFile::default(),
        Overrides {
            state_dir: Some(state.path().to_owned()),
            workspace_roots: vec![state.path().to_owned()],
            profiles_dir: Some(repo_root().join("sandbox-profiles")),
            ..Overrides::default()
        },
    )
    .unwrap();
    let Err(err) = Daemon::build(config).await else {
        panic!("a daemon started with a world-readable token file");
    };
    let message = err.to_string();
    assert!(
        message.contains(&exposed.display().to_string()) && message.contains("chmod 600"),
        "{message}"
    );
}

#[tokio::test]
async fn a_tenant_never_sees_or_answers_another_tenants_runs() {
    let tenants = TwoTenants::start().await;
    let mut bob = tenants.agent(BOB).await;
    let mut alice = tenants.agent(ALICE).await;
    let mut bobs_run = Run::open(
        &mut bob,
        pb::run_request::Request::Start(risky_write(&tenants.workspace("bob"))),
    )
    .await
    .expect("bob starts a run");
    let bobs_request = bobs_run.approval().await;
    let run_id = bobs_request.run_id.clone();

    let not_found = |result: Result<_, tonic::Status>, what: &str| {
        let status = result.expect_err(what);
        assert_eq!(status.code(), Code::NotFound, "{what}: {status:?}");
        assert!(!status.message().contains("bob"), "{what}: {status:?}");
    };
    not_found(
        alice
            .get_run(pb::GetRunRequest {
                run_id: run_id.clone(),
            })
            .await
            .map(|_| ()),
        "get",
    );
    not_found(
        alice
            .get_trace(pb::GetTraceRequest {
                run_id: run_id.clone(),
            })
            .await
            .map(|_| ()),
        "trace",
    );
    not_found(
        alice
            .cancel_run(pb::CancelRunRequest {
                run_id: run_id.clone(),
                reason: String::new(),
            })
            .await
            .map(|_| ()),
        "cancel",
    );
    not_found(
        Run::open(
            &mut alice,
            pb::run_request::Request::Attach(pb::AttachRun {
                run_id: run_id.clone(),
                after_seq: 0,
            }),
        )
        .await
        .map(|_| ()),
        "attach",
    );
    let listed = alice
        .list_runs(pb::ListRunsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(listed.runs.is_empty(), "{:?}", listed.runs);
    let listed = bob
        .list_runs(pb::ListRunsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.runs.len(), 1);
    assert_eq!(listed.runs[0].run_id, run_id);

    // Alice's console: her own run's request arrives; bob's never does, and her answer to it
    // is refused as if it were not pending.
    let (decisions, receiver) = mpsc::unbounded_channel();
    let mut console = alice
        .approvals(UnboundedReceiverStream::new(receiver))
        .await
        .unwrap()
        .into_inner();
    // Her live list of runs starts empty (bob's run is not hers) and shows her run next.
    let mut alices_runs = alice
        .watch_runs(pb::ListRunsRequest::default())
        .await
        .unwrap()
        .into_inner();
    let mut alices_run = Run::open(
        &mut alice,
        pb::run_request::Request::Start(risky_write(&tenants.workspace("alice"))),
    )
    .await
    .expect("alice starts a run");
    let alices_request = alices_run.approval().await;
    let listed = tokio::time::timeout(Duration::from_secs(30), alices_runs.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(listed.run_id, alices_request.run_id);
    let first = tokio::time::timeout(Duration::from_secs(30), console.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.approval_id, alices_request.approval_id);
    decisions
        .send(pb::ApprovalDecision {
            approval_id: bobs_request.approval_id.clone(),
            decision: pb::Decision::ApproveOnce as i32,
            reason: "forged".into(),
            digest: bobs_request.digest.clone(),
            grant_prefix: Vec::new(),
        })
        .unwrap();
    let rejected = tokio::time::timeout(Duration::from_secs(30), console.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(rejected.approval_id, bobs_request.approval_id);
    assert_eq!(rejected.state, pb::ApprovalState::DecisionRejected as i32);
    assert!(
        rejected.detail.contains("no pending approval"),
        "{rejected:?}"
    );
    assert_ne!(
        rejected.run_id, run_id,
        "the rejection tells nothing of bob's run"
    );
    // The one-way calls keep the same walls: bob's request is not pending for alice, his run
    // cannot be watched by her, and her watch shows her own request only.
    let status = alice
        .decide_approval(pb::ApprovalDecision {
            approval_id: bobs_request.approval_id.clone(),
            decision: pb::Decision::ApproveOnce as i32,
            reason: String::new(),
            digest: bobs_request.digest.clone(),
            grant_prefix: Vec::new(),
        })
        .await
        .expect_err("bob's request is not alice's");
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    not_found(
        alice
            .watch_run(pb::AttachRun {
                run_id: run_id.clone(),
                after_seq: 0,
            })
            .await
            .map(|_| ()),
        "watch_run",
    );
    let mut watched = alice
        .watch_approvals(pb::WatchApprovalsRequest::default())
        .await
        .unwrap()
        .into_inner();
    let only = tokio::time::timeout(Duration::from_secs(30), watched.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(only.approval_id, alices_request.approval_id);
    drop(watched);

    // The default tenant (the operator) may answer every tenant's approvals.
    let (_operator_decisions, receiver) = mpsc::unbounded_channel::<pb::ApprovalDecision>();
    let mut operator = tenants
        .daemon
        .agent()
        .await
        .approvals(UnboundedReceiverStream::new(receiver))
        .await
        .unwrap()
        .into_inner();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let request = tokio::time::timeout(Duration::from_secs(30), operator.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        seen.push(request.run_id);
    }
    assert!(seen.contains(&run_id), "{seen:?}");

    // Bob's run still waits for bob, who approves it on his stream.
    bobs_run
        .requests
        .send(pb::RunRequest {
            request: Some(pb::run_request::Request::Decision(pb::ApprovalDecision {
                approval_id: bobs_request.approval_id.clone(),
                decision: pb::Decision::ApproveOnce as i32,
                reason: String::new(),
                digest: bobs_request.digest.clone(),
                grant_prefix: Vec::new(),
            })),
        })
        .unwrap();
    let finished = bobs_run.finished().await;
    assert_eq!(finished.reason, pb::StopReason::Final as i32);
    assert!(tenants.shared.path().join("bob/out.txt").exists());
    // Nothing alice saw on her console was bob's.
    drop(decisions);
    while let Ok(Ok(Some(request))) =
        tokio::time::timeout(Duration::from_millis(300), console.message()).await
    {
        assert_ne!(request.run_id, run_id, "{request:?}");
    }
}

#[tokio::test]
async fn a_tenant_reaches_only_its_own_executions() {
    let tenants = TwoTenants::start().await;
    let mut bob = tenants.tools(BOB).await;
    let mut alice = tenants.tools(ALICE).await;
    let mut spinning = bob
        .execute_tool(execute("spin", &tenants.workspace("bob")))
        .await
        .unwrap()
        .into_inner();
    let Some(pb::execute_tool_event::Event::Started(started)) =
        spinning.message().await.unwrap().unwrap().event
    else {
        panic!("the first event is started");
    };
    let id = started.execution_id;
    let status = alice
        .cancel_execution(pb::CancelExecutionRequest {
            execution_id: id.clone(),
        })
        .await
        .expect_err("not alice's");
    assert_eq!(status.code(), Code::NotFound);
    let status = alice
        .read_output(pb::ReadOutputRequest {
            execution_id: id.clone(),
            offset: 0,
            length: 0,
        })
        .await
        .expect_err("not alice's");
    assert_eq!(status.code(), Code::NotFound);
    // Bob's one slot is taken: a second call of his waits for none, alice's runs.
    let status = bob
        .execute_tool(execute("read_file", &tenants.workspace("bob")))
        .await
        .expect_err("over bob's limit");
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(status.message().contains("bob"), "{status:?}");
    let mut alices = alice
        .execute_tool(execute("read_file", &tenants.workspace("alice")))
        .await
        .unwrap()
        .into_inner();
    while alices.message().await.unwrap().is_some() {}
    bob.cancel_execution(pb::CancelExecutionRequest {
        execution_id: id.clone(),
    })
    .await
    .expect("bob cancels his own call");
    let mut last = None;
    while let Some(event) = spinning.message().await.unwrap() {
        last = event.event;
    }
    let Some(pb::execute_tool_event::Event::Finished(result)) = last else {
        panic!("the call finishes");
    };
    assert_eq!(result.status, pb::ToolStatus::Cancelled as i32);
    // The slot is back once the call has ended.
    let mut again = None;
    for _ in 0..50 {
        match bob
            .execute_tool(execute("read_file", &tenants.workspace("bob")))
            .await
        {
            Ok(stream) => {
                again = Some(stream);
                break;
            }
            Err(status) if status.code() == Code::ResourceExhausted => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(status) => panic!("{status:?}"),
        }
    }
    assert!(again.is_some(), "bob's slot never came back");
}

#[tokio::test]
async fn a_tenants_tools_and_roots_restrict_its_calls_and_runs() {
    let tenants = TwoTenants::start().await;
    let mut bob = tenants.tools(BOB).await;
    let mut names: Vec<String> = bob
        .list_tools(pb::ListToolsRequest {})
        .await
        .unwrap()
        .into_inner()
        .tools
        .into_iter()
        .map(|tool| tool.name)
        .collect();
    names.sort();
    assert_eq!(names, ["read_file", "spin", "write_file"]);
    let alices_tools = tenants
        .tools(ALICE)
        .await
        .list_tools(pb::ListToolsRequest {})
        .await
        .unwrap()
        .into_inner()
        .tools;
    assert!(alices_tools.iter().any(|tool| tool.name == "list_dir"));

    let bobs = tenants.workspace("bob");
    let status = bob
        .execute_tool(execute("list_dir", &bobs))
        .await
        .expect_err("not bob's tool");
    assert_eq!(status.code(), Code::PermissionDenied);
    assert!(status.message().contains("list_dir"), "{status:?}");
    let status = bob
        .execute_tool(execute("read_file", &tenants.workspace("alice")))
        .await
        .expect_err("outside bob's root");
    assert_eq!(status.code(), Code::PermissionDenied);
    let mut call = bob
        .execute_tool(execute("read_file", &bobs))
        .await
        .unwrap()
        .into_inner();
    while call.message().await.unwrap().is_some() {}

    let mut agent = tenants.agent(BOB).await;
    let mut start = risky_write(&bobs);
    start.tools = vec!["list_dir".into()];
    let status = Run::open(&mut agent, pb::run_request::Request::Start(start))
        .await
        .map(|_| ())
        .expect_err("not bob's tool");
    assert_eq!(status.code(), Code::PermissionDenied);
    let status = Run::open(
        &mut agent,
        pb::run_request::Request::Start(risky_write(&tenants.workspace("alice"))),
    )
    .await
    .map(|_| ())
    .expect_err("outside bob's root");
    assert_eq!(status.code(), Code::PermissionDenied);
    // A run that names no tools gets bob's, not every tool.
    let mut run = Run::open(
        &mut agent,
        pb::run_request::Request::Start(risky_write(&bobs)),
    )
    .await
    .unwrap();
    let tools = run
        .until(|event| match event {
            pb::run_event::Event::RunStarted(started) => Some(started.tools.clone()),
            _ => None,
        })
        .await;
    assert_eq!(tools, ["read_file", "spin", "write_file"]);
    // And one run at a time is his limit.
    let status = Run::open(
        &mut agent,
        pb::run_request::Request::Start(risky_write(&bobs)),
    )
    .await
    .map(|_| ())
    .expect_err("over bob's run limit");
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(status.message().contains("bob"), "{status:?}");
}

#[tokio::test]
async fn oversize_messages_and_arguments_are_refused() {
    let tools = ToolsDir::new();
    tools.add_file("echo", &test_module("echo"), "");
    let daemon = TestDaemon::with_tools(&tools).await;
    let limit = airlock_daemon::testing::MAX_ARGUMENTS_BYTES;
    let arguments = format!("{{\"x\": \"{}\"}}", "a".repeat(limit));
    let status = daemon
        .exec_request(pb::ExecuteToolRequest {
            tool: "echo".into(),
            arguments_json: arguments,
            workspace: String::new(),
            timeout_ms: 0,
            require_approval: false,
        })
        .await
        .expect_err("arguments over the limit");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains(&limit.to_string()), "{status:?}");
    // A message over the decoding limit never reaches the service: it is refused as it
    // arrives, with RESOURCE_EXHAUSTED (not tonic's OUT_OF_RANGE), on unary and streamed calls.
    let decoding_limit = airlock_daemon::testing::MAX_DECODING_MESSAGE_BYTES;
    let huge = "a".repeat(decoding_limit + 1);
    let status = daemon
        .exec_request(pb::ExecuteToolRequest {
            tool: "echo".into(),
            arguments_json: huge.clone(),
            workspace: String::new(),
            timeout_ms: 0,
            require_approval: false,
        })
        .await
        .expect_err("a message over the limit");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status
            .message()
            .contains(&format!("the limit is {decoding_limit} bytes")),
        "{status:?}"
    );
    let status = daemon
        .agent()
        .await
        .get_run(pb::GetRunRequest {
            run_id: huge.clone(),
        })
        .await
        .expect_err("a unary message over the limit");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    let start = pb::StartRun {
        input: huge,
        ..Default::default()
    };
    let status = Run::open(
        &mut daemon.agent().await,
        pb::run_request::Request::Start(start),
    )
    .await
    .map(|_| ())
    .expect_err("a streamed message over the limit");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    // A message at the limit is decoded, and refused for what it says, not for its size.
    let status = daemon
        .exec_request(pb::ExecuteToolRequest {
            tool: "echo".into(),
            arguments_json: "a".repeat(decoding_limit - 64),
            workspace: String::new(),
            timeout_ms: 0,
            require_approval: false,
        })
        .await
        .expect_err("arguments over their own limit");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    daemon.exec("echo", json!({"still": "serving"}), None).await;
}

const CAPPED: &str = "capped-token-0123456789";

/// A daemon with tenant `capped` (spin and write_file), which may have `cap` runs and `cap`
/// direct calls going at once.
async fn capped_daemon(cap: u32) -> (TestDaemon, ToolsDir, TempDir) {
    let secrets = tempfile::tempdir().unwrap();
    let tools = ToolsDir::new();
    tools.add_file("spin", &test_module("spin"), "");
    let mut capped = tenant(
        "capped",
        private_file(secrets.path(), "capped", CAPPED),
        &["spin", "write_file"],
        ApprovalRights::Own,
    );
    capped.max_concurrent_runs = Some(cap);
    capped.max_concurrent_executions = Some(cap);
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins"), tools.path().to_owned()],
        auth: AuthSettings {
            unix_socket_trust: false,
            tenants: vec![capped],
        },
        ..DaemonOptions::default()
    })
    .await;
    (daemon, tools, secrets)
}

/// A connection of its own as tenant `capped`: each attempt on its own connection, so that
/// the daemon serves them on separate tasks.
async fn capped_channel(endpoint: &str) -> AuthedChannel {
    let channel = Endpoint::from_shared(endpoint.to_owned())
        .unwrap()
        .connect()
        .await
        .unwrap();
    InterceptedService::new(channel, BearerToken::new(CAPPED))
}

/// Sorts the outcomes of concurrent attempts: how many got through, how many were refused
/// with RESOURCE_EXHAUSTED; anything else fails the test.
fn tally<T>(outcomes: Vec<Result<T, tonic::Status>>) -> (Vec<T>, usize) {
    let mut through = Vec::new();
    let mut exhausted = 0;
    for outcome in outcomes {
        match outcome {
            Ok(value) => through.push(value),
            Err(status) if status.code() == Code::ResourceExhausted => {
                assert!(status.message().contains("capped"), "{status:?}");
                exhausted += 1;
            }
            Err(status) => panic!("neither through nor over the cap: {status:?}"),
        }
    }
    (through, exhausted)
}

/// Many requests at once, on a runtime with several threads so that the daemon handles them
/// in parallel: a cap that counted and took in two steps lets more than `CAP` through.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_requests_never_pass_a_tenants_caps() {
    const CAP: usize = 3;
    const ATTEMPTS: usize = 32;
    let (daemon, _tools, _secrets) = capped_daemon(CAP as u32).await;
    let workspace = daemon.workspace("capped");

    // Runs: each waits for an approval, so none ends while the others start.
    let starts = (0..ATTEMPTS).map(|_| {
        let start = risky_write(&workspace);
        let endpoint = daemon.endpoint.clone();
        tokio::spawn(async move {
            let mut agent = pb::agent_client::AgentClient::new(capped_channel(&endpoint).await);
            Run::open(&mut agent, pb::run_request::Request::Start(start)).await
        })
    });
    let outcomes = futures::future::join_all(starts)
        .await
        .into_iter()
        .map(|joined| joined.unwrap())
        .collect();
    let (runs, exhausted) = tally(outcomes);
    assert_eq!((runs.len(), exhausted), (CAP, ATTEMPTS - CAP));
    let listed = pb::agent_client::AgentClient::new(daemon.channel_with_token(CAPPED).await)
        .list_runs(pb::ListRunsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .runs;
    assert_eq!(listed.len(), CAP, "a refused start left a run behind");
    // A fork over the cap is refused before its workspace is copied: nothing of it is left.
    let mut runs = runs;
    let waiting = runs[0].approval().await.run_id;
    let parent = workspace.parent().unwrap().to_owned();

    let refused = pb::agent_client::AgentClient::new(daemon.channel_with_token(CAPPED).await)
        .fork_run(pb::ForkRunRequest {
            run_id: waiting,
            copy_workspace: true,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert_eq!(
        airlock_tests::fork_copies_in(&parent),
        0,
        "a refused fork left its copy behind"
    );

    // Direct calls: each spins until cancelled.
    let calls = (0..ATTEMPTS).map(|_| {
        let request = execute("spin", &workspace);
        let endpoint = daemon.endpoint.clone();
        tokio::spawn(async move {
            pb::tools_client::ToolsClient::new(capped_channel(&endpoint).await)
                .execute_tool(request)
                .await
                .map(tonic::Response::into_inner)
        })
    });
    let outcomes = futures::future::join_all(calls)
        .await
        .into_iter()
        .map(|joined| joined.unwrap())
        .collect();
    let (mut spinning, exhausted) = tally(outcomes);
    assert_eq!((spinning.len(), exhausted), (CAP, ATTEMPTS - CAP));
    for call in &mut spinning {
        let event = call.message().await.unwrap().unwrap().event;
        assert!(
            matches!(event, Some(pb::execute_tool_event::Event::Started(_))),
            "{event:?}"
        );
    }
    drop(runs);
}

/// A CA, a server certificate for `localhost` and a client certificate, as PEM files.
pub(crate) struct Pki {
    pub(crate) dir: TempDir,
    pub(crate) ca: String,
    pub(crate) client_cert: String,
    pub(crate) client_key: String,
}

pub(crate) fn pki() -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let dir = tempfile::tempdir().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let server_key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&server_key, &ca)
        .unwrap();
    let client_key = KeyPair::generate().unwrap();
    let client = CertificateParams::new(vec!["client".to_owned()])
        .unwrap()
        .signed_by(&client_key, &ca)
        .unwrap();
    std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.path().join("server.pem"), server.pem()).unwrap();
    private_file(dir.path(), "server.key", &server_key.serialize_pem());
    std::fs::write(dir.path().join("client.pem"), client.pem()).unwrap();
    private_file(dir.path(), "client.key", &client_key.serialize_pem());
    Pki {
        dir,
        ca: ca.pem(),
        client_cert: client.pem(),
        client_key: client_key.serialize_pem(),
    }
}

impl Pki {
    fn server(&self, client_ca: bool) -> TlsFiles {
        TlsFiles {
            cert: self.dir.path().join("server.pem"),
            key: self.dir.path().join("server.key"),
            client_ca: client_ca.then(|| self.dir.path().join("ca.pem")),
        }
    }

    /// One of the PEM files: `ca.pem`, `client.pem`, `client.key`, ….
    fn file(&self, name: &str) -> String {
        self.dir.path().join(name).to_str().unwrap().to_owned()
    }

    fn client(&self, with_identity: bool) -> ClientTlsConfig {
        let config = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&self.ca))
            .domain_name("localhost");
        if with_identity {
            config.identity(Identity::from_pem(&self.client_cert, &self.client_key))
        } else {
            config
        }
    }
}

async fn list_tools_over(
    endpoint: &str,
    tls: Option<ClientTlsConfig>,
    token: &str,
) -> Result<usize, String> {
    let mut builder = Endpoint::from_shared(endpoint.to_owned()).unwrap();
    if let Some(tls) = tls {
        builder = builder.tls_config(tls).unwrap();
    }
    let channel: Channel = builder.connect().await.map_err(|err| format!("{err:?}"))?;
    let mut tools = pb::tools_client::ToolsClient::new(InterceptedService::new(
        channel,
        BearerToken::new(token),
    ));
    tools
        .list_tools(pb::ListToolsRequest {})
        .await
        .map(|reply| reply.into_inner().tools.len())
        .map_err(|status| format!("{status:?}"))
}

#[tokio::test]
async fn tls_and_mutual_tls_handshakes_on_loopback() {
    let pki = pki();
    let daemon = TestDaemon::start(DaemonOptions {
        tls: Some(pki.server(false)),
        ..DaemonOptions::default()
    })
    .await;
    assert!(daemon.endpoint.starts_with("https://localhost:"));
    list_tools_over(&daemon.endpoint, Some(pki.client(false)), &daemon.token)
        .await
        .expect("a TLS call");
    let plain = daemon.endpoint.replace("https://", "http://");
    assert!(
        list_tools_over(&plain, None, &daemon.token).await.is_err(),
        "plaintext reached a TLS daemon"
    );
    let status = list_tools_over(&daemon.endpoint, Some(pki.client(false)), "wrong")
        .await
        .expect_err("TLS does not replace the token");
    assert!(status.contains("Unauthenticated"), "{status}");

    let mutual = TestDaemon::start(DaemonOptions {
        tls: Some(pki.server(true)),
        ..DaemonOptions::default()
    })
    .await;
    assert!(
        list_tools_over(&mutual.endpoint, Some(pki.client(false)), &mutual.token)
            .await
            .is_err(),
        "a client without a certificate got through mutual TLS"
    );
    list_tools_over(&mutual.endpoint, Some(pki.client(true)), &mutual.token)
        .await
        .expect("a client with a certificate");
}

/// Runs the `airlock` CLI against `daemon` with its default token; `env` adds variables, and
/// no TLS variable of the caller's environment leaks in.
async fn airlock_cli(
    daemon: &TestDaemon,
    args: &[&str],
    env: &[(&str, String)],
) -> (i32, String, String) {
    let mut cli = Cli::new(&daemon.endpoint, args).token(&daemon.token);
    for (name, value) in env {
        cli = cli.env(name, value);
    }
    let run = cli.run().await;
    (run.code, run.stdout, run.stderr)
}

/// `airlock tools list` with the CA, client certificate and key given as flags.
fn list_tools_with_tls<'a>(ca: &'a str, cert: &'a str, key: &'a str) -> [&'a str; 8] {
    [
        "--tls-ca",
        ca,
        "--tls-cert",
        cert,
        "--tls-key",
        key,
        "tools",
        "list",
    ]
}

#[tokio::test]
async fn the_cli_shows_its_certificate_to_a_daemon_that_requires_one() {
    let stranger = pki();
    let pki = pki();
    let tools = ToolsDir::new();
    tools.add_file("echo", &test_module("echo"), "");
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![tools.path().to_owned()],
        tls: Some(pki.server(true)),
        ..DaemonOptions::default()
    })
    .await;
    let (ca, cert, key) = (
        pki.file("ca.pem"),
        pki.file("client.pem"),
        pki.file("client.key"),
    );

    let (code, stdout, stderr) =
        airlock_cli(&daemon, &["--tls-ca", &ca, "tools", "list"], &[]).await;
    assert_eq!(code, 77, "{stdout}{stderr}");
    assert!(
        stderr.contains("the daemon requires a client certificate: give --tls-cert and --tls-key"),
        "{stderr}"
    );

    let with_flags = list_tools_with_tls(&ca, &cert, &key);
    let (code, stdout, stderr) = airlock_cli(&daemon, &with_flags, &[]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.lines().any(|line| line.starts_with("echo ")),
        "{stdout}"
    );

    let from_env = [
        ("AIRLOCK_TLS_CA", ca.clone()),
        ("AIRLOCK_TLS_CERT", cert.clone()),
        ("AIRLOCK_TLS_KEY", key.clone()),
    ];
    let (code, stdout, stderr) = airlock_cli(&daemon, &["tools", "list"], &from_env).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.lines().any(|line| line.starts_with("echo ")),
        "{stdout}"
    );

    // A certificate from a CA the daemon does not trust, and a daemon certificate that the
    // client's CA did not sign, are each named.
    let (stranger_ca, stranger_cert, stranger_key) = (
        stranger.file("ca.pem"),
        stranger.file("client.pem"),
        stranger.file("client.key"),
    );
    for (flags, named) in [
        (
            list_tools_with_tls(&ca, &stranger_cert, &stranger_key),
            "the daemon does not accept this client's certificate",
        ),
        (
            list_tools_with_tls(&stranger_ca, &cert, &key),
            "the daemon's certificate is not valid for this client",
        ),
    ] {
        let (code, _, stderr) = airlock_cli(&daemon, &flags, &[]).await;
        assert_eq!(code, 77, "{stderr}");
        assert!(stderr.contains(named), "{stderr}");
    }
}

#[tokio::test]
async fn the_cli_says_to_use_https_for_a_tls_daemon_addressed_as_http() {
    let pki = pki();
    let daemon = TestDaemon::start(DaemonOptions {
        tls: Some(pki.server(false)),
        ..DaemonOptions::default()
    })
    .await;
    let port = daemon.endpoint.rsplit(':').next().unwrap().to_owned();
    let plain = format!("http://127.0.0.1:{port}");
    let output = tokio::process::Command::new(cargo_bin("airlock"))
        .args(["--server", &plain, "tools", "list"])
        .env("AIRLOCK_TOKEN", &daemon.token)
        .env_remove("AIRLOCK_SERVER")
        .env_remove("AIRLOCK_TLS_CA")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(64), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "airlockd at {plain} speaks TLS: use https://127.0.0.1:{port} with --tls-ca FILE"
        )),
        "{stderr}"
    );
}

#[tokio::test]
async fn the_unix_socket_is_private_and_trusted_only_when_configured() {
    for trust in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("airlockd.sock");
        let daemon = TestDaemon::start(DaemonOptions {
            listen: Some(ListenAddr::Unix(path.clone())),
            auth: AuthSettings {
                unix_socket_trust: trust,
                tenants: Vec::new(),
            },
            ..DaemonOptions::default()
        })
        .await;
        assert_eq!(daemon.endpoint, format!("unix:{}", path.display()));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let without_token = pb::tools_client::ToolsClient::new(daemon.channel().await)
            .list_tools(pb::ListToolsRequest {})
            .await;
        match trust {
            true => {
                without_token.expect("trusted socket");
            }
            false => {
                assert_eq!(
                    without_token.expect_err("token needed").code(),
                    Code::Unauthenticated
                );
            }
        }
        daemon
            .tools()
            .await
            .list_tools(pb::ListToolsRequest {})
            .await
            .expect("with the token");
        daemon.stop().await;
        assert!(!path.exists(), "the socket is removed at shutdown");
    }
}
