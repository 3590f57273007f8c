//! Client errors are client errors: each malformed field of each request of `airlock.v1`
//! gets the status `proto/API.md` gives it, and a message that starts with the field's path;
//! only daemon trouble is UNAVAILABLE. One table, one daemon, every case.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use airlock_proto::v1 as pb;
use airlock_tests::{
    AuthedChannel, CI_TOKEN, DaemonOptions, TestDaemon, ci_tenant, repo_root, scripted_run,
};
use serde_json::json;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::Code;

/// A well-formed id of `prefix` that names nothing.
fn unknown(prefix: &str) -> String {
    format!("{prefix}_{}", "0".repeat(32))
}

type Call = Pin<Box<dyn Future<Output = Result<(), tonic::Status>> + Send>>;

/// One row of the table: what is sent, the status, and the field the message starts with
/// (empty for an error of the whole call).
struct Case {
    what: &'static str,
    call: Call,
    code: Code,
    field: &'static str,
}

fn case(
    what: &'static str,
    code: Code,
    field: &'static str,
    call: impl Future<Output = Result<(), tonic::Status>> + Send + 'static,
) -> Case {
    Case {
        what,
        call: Box::pin(call),
        code,
        field,
    }
}

fn tools(channel: &AuthedChannel) -> pb::tools_client::ToolsClient<AuthedChannel> {
    pb::tools_client::ToolsClient::new(channel.clone())
}

fn agent(channel: &AuthedChannel) -> pb::agent_client::AgentClient<AuthedChannel> {
    pb::agent_client::AgentClient::new(channel.clone())
}

fn execute(tool: &str, arguments: &str, workspace: &str) -> pb::ExecuteToolRequest {
    pb::ExecuteToolRequest {
        tool: tool.into(),
        arguments_json: arguments.into(),
        workspace: workspace.into(),
        timeout_ms: 0,
        require_approval: false,
    }
}

/// Opens a run stream whose first message is `first`; the error is the stream's.
async fn open_run(
    channel: AuthedChannel,
    first: pb::run_request::Request,
) -> Result<(), tonic::Status> {
    let (requests, receiver) = tokio::sync::mpsc::unbounded_channel();
    requests
        .send(pb::RunRequest {
            request: Some(first),
        })
        .unwrap();
    let mut events = agent(&channel)
        .run(UnboundedReceiverStream::new(receiver))
        .await?
        .into_inner();
    // A refusal may also come as the stream's first item.
    events.message().await.map(|_| ())
}

#[tokio::test]
async fn every_malformed_field_gets_its_status_and_names_the_field() {
    let secrets = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        auth: ci_tenant(secrets.path(), &["read_file"]),
        ..DaemonOptions::default()
    })
    .await;
    let workspace = daemon.workspace("project");
    let ws = workspace.to_str().unwrap().to_owned();
    let channel = daemon.authed_channel().await;
    let ci = daemon.channel_with_token(CI_TOKEN).await;

    // A finished run, for the cases that need one.
    let mut run = daemon
        .start_run(scripted_run(
            &workspace,
            &json!({"turns": [{"final": "ok"}]}),
        ))
        .await;
    run.finished().await;
    let finished = run.run_id().to_owned();

    let start = |edit: fn(&mut pb::StartRun)| {
        let mut start = scripted_run(&workspace, &json!({"turns": [{"final": "x"}]}));
        edit(&mut start);
        pb::run_request::Request::Start(start)
    };
    let big = "x".repeat(1024 * 1024 + 1);
    let many_labels: HashMap<String, String> =
        (0..65).map(|i| (format!("k{i}"), "v".to_owned())).collect();

    let c = channel.clone();
    let cases: Vec<Case> = vec![
        // Tools.ExecuteTool
        case("ExecuteTool, no tool", Code::InvalidArgument, "tool", {
            let c = c.clone();
            let ws = ws.clone();
            async move {
                tools(&c)
                    .execute_tool(execute("", "{}", &ws))
                    .await
                    .map(|_| ())
            }
        }),
        case("ExecuteTool, unknown tool", Code::NotFound, "tool", {
            let c = c.clone();
            let ws = ws.clone();
            async move {
                tools(&c)
                    .execute_tool(execute("nope", "{}", &ws))
                    .await
                    .map(|_| ())
            }
        }),
        case(
            "ExecuteTool, arguments over the limit",
            Code::InvalidArgument,
            "arguments_json",
            {
                let c = c.clone();
                let ws = ws.clone();
                let args = format!("{{\"path\": \"{big}\"}}");
                async move {
                    tools(&c)
                        .execute_tool(execute("read_file", &args, &ws))
                        .await
                        .map(|_| ())
                }
            },
        ),
        case(
            "ExecuteTool, relative workspace",
            Code::InvalidArgument,
            "workspace",
            {
                let c = c.clone();
                async move {
                    tools(&c)
                        .execute_tool(execute("read_file", "{\"path\": \"a\"}", "project"))
                        .await
                        .map(|_| ())
                }
            },
        ),
        case(
            "ExecuteTool, workspace outside the roots",
            Code::InvalidArgument,
            "workspace",
            {
                let c = c.clone();
                async move {
                    tools(&c)
                        .execute_tool(execute("read_file", "{\"path\": \"a\"}", "/etc"))
                        .await
                        .map(|_| ())
                }
            },
        ),
        case(
            "ExecuteTool, no workspace",
            Code::InvalidArgument,
            "workspace",
            {
                let c = c.clone();
                async move {
                    tools(&c)
                        .execute_tool(execute("read_file", "{\"path\": \"a\"}", ""))
                        .await
                        .map(|_| ())
                }
            },
        ),
        case(
            "ExecuteTool, a tool the tenant may not use",
            Code::PermissionDenied,
            "tool",
            {
                let ci = ci.clone();
                let ws = ws.clone();
                async move {
                    tools(&ci)
                        .execute_tool(execute("list_dir", "{}", &ws))
                        .await
                        .map(|_| ())
                }
            },
        ),
        // Tools.CancelExecution
        case(
            "CancelExecution, no id",
            Code::InvalidArgument,
            "execution_id",
            {
                let c = c.clone();
                async move {
                    tools(&c)
                        .cancel_execution(pb::CancelExecutionRequest {
                            execution_id: String::new(),
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        case(
            "CancelExecution, malformed id",
            Code::InvalidArgument,
            "execution_id",
            {
                let c = c.clone();
                async move {
                    tools(&c)
                        .cancel_execution(pb::CancelExecutionRequest {
                            execution_id: "exe_nope".into(),
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        case(
            "CancelExecution, unknown id",
            Code::NotFound,
            "execution_id",
            {
                let c = c.clone();
                async move {
                    tools(&c)
                        .cancel_execution(pb::CancelExecutionRequest {
                            execution_id: unknown("exe"),
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        // Tools.ReadOutput
        case(
            "ReadOutput, malformed id",
            Code::InvalidArgument,
            "execution_id",
            {
                let c = c.clone();
                async move {
                    tools(&c)
                        .read_output(pb::ReadOutputRequest {
                            execution_id: "../../etc/passwd".into(),
                            offset: 0,
                            length: 0,
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        case("ReadOutput, unknown id", Code::NotFound, "execution_id", {
            let c = c.clone();
            async move {
                tools(&c)
                    .read_output(pb::ReadOutputRequest {
                        execution_id: unknown("exe"),
                        offset: 0,
                        length: 0,
                    })
                    .await
                    .map(|_| ())
            }
        }),
        // Agent.CreateSession
        case(
            "CreateSession, workspace outside the roots",
            Code::InvalidArgument,
            "workspace",
            {
                let c = c.clone();
                async move {
                    agent(&c)
                        .create_session(pb::CreateSessionRequest {
                            workspace: "/etc".into(),
                            labels: HashMap::new(),
                            settings: None,
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        case(
            "CreateSession, too many labels",
            Code::InvalidArgument,
            "labels",
            {
                let c = c.clone();
                let ws = ws.clone();
                async move {
                    agent(&c)
                        .create_session(pb::CreateSessionRequest {
                            workspace: ws,
                            labels: many_labels,
                            settings: None,
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        case(
            "CreateSession, settings with an unknown model",
            Code::InvalidArgument,
            "settings.model",
            {
                let c = c.clone();
                async move {
                    agent(&c)
                        .create_session(pb::CreateSessionRequest {
                            settings: Some(pb::SessionSettings {
                                model: Some(pb::ModelConfig {
                                    model: "gpt-9".into(),
                                    ..Default::default()
                                }),
                                ..Default::default()
                            }),
                            ..Default::default()
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        case(
            "GetSession, malformed id",
            Code::InvalidArgument,
            "session_id",
            {
                let c = c.clone();
                async move {
                    agent(&c)
                        .get_session(pb::GetSessionRequest {
                            session_id: "nope".into(),
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        case("GetSession, unknown", Code::NotFound, "session_id", {
            let c = c.clone();
            async move {
                agent(&c)
                    .get_session(pb::GetSessionRequest {
                        session_id: format!("ses_{}", "0".repeat(32)),
                    })
                    .await
                    .map(|_| ())
            }
        }),
        case(
            "ListSessions, a forged page token",
            Code::InvalidArgument,
            "page_token",
            {
                let c = c.clone();
                async move {
                    agent(&c)
                        .list_sessions(pb::ListSessionsRequest {
                            page_token: "12.x".into(),
                            ..Default::default()
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        // Agent.Run
        case(
            "Run, first message neither start nor attach",
            Code::InvalidArgument,
            "request",
            open_run(
                c.clone(),
                pb::run_request::Request::Input(pb::UserInput { text: "hi".into() }),
            ),
        ),
        case(
            "Run, no input",
            Code::InvalidArgument,
            "start.input",
            open_run(c.clone(), start(|s| s.input = " ".into())),
        ),
        case(
            "Run, unknown model",
            Code::InvalidArgument,
            "start.model.model",
            open_run(
                c.clone(),
                start(|s| {
                    s.model = Some(pb::ModelConfig {
                        model: "gpt-7".into(),
                        ..Default::default()
                    })
                }),
            ),
        ),
        case(
            "Run, scripted model without a script",
            Code::InvalidArgument,
            "start.model.script",
            open_run(
                c.clone(),
                start(|s| {
                    s.model = Some(pb::ModelConfig {
                        model: "scripted".into(),
                        ..Default::default()
                    })
                }),
            ),
        ),
        case(
            "Run, a script that is no transcript",
            Code::InvalidArgument,
            "start.model.script",
            open_run(
                c.clone(),
                start(|s| {
                    s.model = Some(pb::ModelConfig {
                        model: "scripted".into(),
                        script: "{{{".into(),
                        ..Default::default()
                    })
                }),
            ),
        ),
        case(
            "Run, replay without a cassette",
            Code::InvalidArgument,
            "start.model.cassette",
            open_run(
                c.clone(),
                start(|s| {
                    s.model = Some(pb::ModelConfig {
                        model: "replay".into(),
                        ..Default::default()
                    })
                }),
            ),
        ),
        case(
            "Run, a cassette of another format",
            Code::InvalidArgument,
            "start.model.cassette",
            open_run(
                c.clone(),
                start(|s| {
                    s.model = Some(pb::ModelConfig {
                        model: "replay".into(),
                        cassette: r#"{"cassette": 2}"#.into(),
                        ..Default::default()
                    })
                }),
            ),
        ),
        case(
            "Run, unknown tool",
            Code::NotFound,
            "start.tools",
            open_run(c.clone(), start(|s| s.tools = vec!["nope".into()])),
        ),
        case(
            "Run, malformed session id",
            Code::InvalidArgument,
            "start.session_id",
            open_run(c.clone(), start(|s| s.session_id = "ses_x".into())),
        ),
        case(
            "Run, unknown session",
            Code::NotFound,
            "start.session_id",
            open_run(c.clone(), start(|s| s.session_id = unknown("ses"))),
        ),
        case(
            "Run, unknown approval policy",
            Code::InvalidArgument,
            "start.approval_policy",
            open_run(c.clone(), start(|s| s.approval_policy = 99)),
        ),
        case(
            "Run, workspace outside the roots",
            Code::InvalidArgument,
            "start.workspace",
            open_run(c.clone(), start(|s| s.workspace = "/etc".into())),
        ),
        case(
            "Run, no workspace for tools that work in one",
            Code::InvalidArgument,
            "start.workspace",
            open_run(c.clone(), start(|s| s.workspace = String::new())),
        ),
        case(
            "Run, a tool the tenant may not use",
            Code::PermissionDenied,
            "start.tools",
            open_run(ci.clone(), start(|s| s.tools = vec!["list_dir".into()])),
        ),
        case(
            "Run, attach without a run id",
            Code::InvalidArgument,
            "attach.run_id",
            open_run(
                c.clone(),
                pb::run_request::Request::Attach(pb::AttachRun {
                    run_id: String::new(),
                    after_seq: 0,
                }),
            ),
        ),
        case(
            "Run, attach to an unknown run",
            Code::NotFound,
            "attach.run_id",
            open_run(
                c.clone(),
                pb::run_request::Request::Attach(pb::AttachRun {
                    run_id: unknown("run"),
                    after_seq: 0,
                }),
            ),
        ),
        case(
            "Run, attach past the end of the log",
            Code::OutOfRange,
            "attach.after_seq",
            open_run(
                c.clone(),
                pb::run_request::Request::Attach(pb::AttachRun {
                    run_id: finished.clone(),
                    after_seq: 1000,
                }),
            ),
        ),
        // Agent.CancelRun
        case(
            "CancelRun, malformed id",
            Code::InvalidArgument,
            "run_id",
            {
                let c = c.clone();
                async move {
                    agent(&c)
                        .cancel_run(pb::CancelRunRequest {
                            run_id: "x".into(),
                            reason: String::new(),
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        case(
            "WatchRun, malformed run",
            Code::InvalidArgument,
            "run_id",
            {
                let c = c.clone();
                async move {
                    agent(&c)
                        .watch_run(pb::AttachRun {
                            run_id: "x".into(),
                            after_seq: 0,
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        case("WatchRun, unknown run", Code::NotFound, "run_id", {
            let c = c.clone();
            async move {
                agent(&c)
                    .watch_run(pb::AttachRun {
                        run_id: unknown("run"),
                        after_seq: 0,
                    })
                    .await
                    .map(|_| ())
            }
        }),
        case(
            "WatchApprovals, malformed run",
            Code::InvalidArgument,
            "run_id",
            {
                let c = c.clone();
                async move {
                    agent(&c)
                        .watch_approvals(pb::WatchApprovalsRequest { run_id: "x".into() })
                        .await
                        .map(|_| ())
                }
            },
        ),
        case(
            "DecideApproval, nothing pending",
            Code::NotFound,
            "approval_id",
            {
                let c = c.clone();
                async move {
                    agent(&c)
                        .decide_approval(pb::ApprovalDecision {
                            approval_id: unknown("apr"),
                            decision: pb::Decision::ApproveOnce as i32,
                            ..Default::default()
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        case("CancelRun, unknown run", Code::NotFound, "run_id", {
            let c = c.clone();
            async move {
                agent(&c)
                    .cancel_run(pb::CancelRunRequest {
                        run_id: unknown("run"),
                        reason: String::new(),
                    })
                    .await
                    .map(|_| ())
            }
        }),
        case(
            "CancelRun, finished run",
            Code::FailedPrecondition,
            "run_id",
            {
                let c = c.clone();
                let finished = finished.clone();
                async move {
                    agent(&c)
                        .cancel_run(pb::CancelRunRequest {
                            run_id: finished,
                            reason: String::new(),
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        case(
            "CancelRun, another tenant's run",
            Code::NotFound,
            "run_id",
            {
                let ci = ci.clone();
                let finished = finished.clone();
                async move {
                    agent(&ci)
                        .cancel_run(pb::CancelRunRequest {
                            run_id: finished,
                            reason: String::new(),
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        // Agent.GetRun
        case("GetRun, malformed id", Code::InvalidArgument, "run_id", {
            let c = c.clone();
            async move {
                agent(&c)
                    .get_run(pb::GetRunRequest {
                        run_id: "run_".into(),
                    })
                    .await
                    .map(|_| ())
            }
        }),
        case("GetRun, unknown run", Code::NotFound, "run_id", {
            let c = c.clone();
            async move {
                agent(&c)
                    .get_run(pb::GetRunRequest {
                        run_id: unknown("run"),
                    })
                    .await
                    .map(|_| ())
            }
        }),
        // Agent.ListRuns
        case(
            "ListRuns, malformed page token",
            Code::InvalidArgument,
            "page_token",
            {
                let c = c.clone();
                async move {
                    agent(&c)
                        .list_runs(pb::ListRunsRequest {
                            page_token: "garbage".into(),
                            ..Default::default()
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        case(
            "ListRuns, page token with a forged run id",
            Code::InvalidArgument,
            "page_token",
            {
                let c = c.clone();
                async move {
                    agent(&c)
                        .list_runs(pb::ListRunsRequest {
                            page_token: "1.run_' OR 1=1 --".into(),
                            ..Default::default()
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        case("ListRuns, unknown state", Code::InvalidArgument, "state", {
            let c = c.clone();
            async move {
                agent(&c)
                    .list_runs(pb::ListRunsRequest {
                        state: 42,
                        ..Default::default()
                    })
                    .await
                    .map(|_| ())
            }
        }),
        case(
            "WatchRuns, unknown state",
            Code::InvalidArgument,
            "state",
            {
                let c = c.clone();
                async move {
                    agent(&c)
                        .watch_runs(pb::ListRunsRequest {
                            state: 42,
                            ..Default::default()
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        case(
            "ListRuns, malformed session id",
            Code::InvalidArgument,
            "session_id",
            {
                let c = c.clone();
                async move {
                    agent(&c)
                        .list_runs(pb::ListRunsRequest {
                            session_id: "s1".into(),
                            ..Default::default()
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        // Agent.GetTrace
        case("GetTrace, malformed id", Code::InvalidArgument, "run_id", {
            let c = c.clone();
            async move {
                agent(&c)
                    .get_trace(pb::GetTraceRequest {
                        run_id: "ses_00000000000000000000000000000000".into(),
                    })
                    .await
                    .map(|_| ())
            }
        }),
        case("GetTrace, unknown run", Code::NotFound, "run_id", {
            let c = c.clone();
            async move {
                agent(&c)
                    .get_trace(pb::GetTraceRequest {
                        run_id: unknown("run"),
                    })
                    .await
                    .map(|_| ())
            }
        }),
        // Agent.GetCassette (a live run's: tests/tests/all/cassettes.rs)
        case(
            "GetCassette, malformed id",
            Code::InvalidArgument,
            "run_id",
            {
                let c = c.clone();
                async move {
                    agent(&c)
                        .get_cassette(pb::GetCassetteRequest {
                            run_id: "ses_00000000000000000000000000000000".into(),
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        case("GetCassette, unknown run", Code::NotFound, "run_id", {
            let c = c.clone();
            async move {
                agent(&c)
                    .get_cassette(pb::GetCassetteRequest {
                        run_id: unknown("run"),
                    })
                    .await
                    .map(|_| ())
            }
        }),
        // Agent.Approvals
        case(
            "Approvals, a tenant without approval rights",
            Code::PermissionDenied,
            "",
            {
                let ci = ci.clone();
                async move {
                    let (_decisions, receiver) = tokio::sync::mpsc::unbounded_channel();
                    let mut requests = agent(&ci)
                        .approvals(UnboundedReceiverStream::new(receiver))
                        .await?
                        .into_inner();
                    requests.message().await.map(|_| ())
                }
            },
        ),
        // Daemon.TrustMcpServer (a stale review: mcp_host.rs, with a hosted server)
        case(
            "TrustMcpServer, not the default tenant",
            Code::PermissionDenied,
            "",
            {
                let ci = ci.clone();
                async move {
                    pb::daemon_client::DaemonClient::new(ci)
                        .trust_mcp_server(pb::TrustMcpServerRequest {
                            server: "fs".into(),
                            show: true,
                            reviewed: String::new(),
                            refuse: false,
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        case("TrustMcpServer, no such server", Code::NotFound, "", {
            let channel = channel.clone();
            async move {
                pb::daemon_client::DaemonClient::new(channel)
                    .trust_mcp_server(pb::TrustMcpServerRequest {
                        server: "nobody".into(),
                        show: false,
                        reviewed: "0".repeat(64),
                        refuse: false,
                    })
                    .await
                    .map(|_| ())
            }
        }),
        case(
            "ListRuns, a search too long",
            Code::InvalidArgument,
            "query",
            {
                let c = c.clone();
                async move {
                    agent(&c)
                        .list_runs(pb::ListRunsRequest {
                            query: "q".repeat(201),
                            ..Default::default()
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        case(
            "RevertRun, dry run of an unknown run",
            Code::NotFound,
            "run_id",
            {
                let c = c.clone();
                async move {
                    agent(&c)
                        .revert_run(pb::RevertRunRequest {
                            run_id: unknown("run"),
                            to_step: 1,
                            dry_run: true,
                            ..Default::default()
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        // Daemon.ListMcpServers
        case(
            "ListMcpServers, not the default tenant",
            Code::PermissionDenied,
            "",
            {
                let ci = ci.clone();
                async move {
                    pb::daemon_client::DaemonClient::new(ci)
                        .list_mcp_servers(pb::ListMcpServersRequest {})
                        .await
                        .map(|_| ())
                }
            },
        ),
        case(
            "TrustMcpServer, refusing as another tenant",
            Code::PermissionDenied,
            "",
            {
                let ci = ci.clone();
                async move {
                    pb::daemon_client::DaemonClient::new(ci)
                        .trust_mcp_server(pb::TrustMcpServerRequest {
                            server: "fs".into(),
                            refuse: true,
                            ..Default::default()
                        })
                        .await
                        .map(|_| ())
                }
            },
        ),
        // Daemon.CollectGarbage
        case(
            "CollectGarbage, not the default tenant",
            Code::PermissionDenied,
            "",
            {
                let ci = ci.clone();
                async move {
                    pb::daemon_client::DaemonClient::new(ci)
                        .collect_garbage(pb::CollectGarbageRequest { older_than_ms: 1 })
                        .await
                        .map(|_| ())
                }
            },
        ),
        case(
            "CollectGarbage, no age and no retention",
            Code::InvalidArgument,
            "older_than_ms",
            {
                let channel = channel.clone();
                async move {
                    pb::daemon_client::DaemonClient::new(channel)
                        .collect_garbage(pb::CollectGarbageRequest { older_than_ms: 0 })
                        .await
                        .map(|_| ())
                }
            },
        ),
    ];

    let mut failures = Vec::new();
    for Case {
        what,
        call,
        code,
        field,
    } in cases
    {
        match call.await {
            Ok(()) => failures.push(format!("{what}: accepted")),
            Err(status) => {
                let prefix = format!("{field}: ");
                if status.code() != code
                    || (!field.is_empty() && !status.message().starts_with(&prefix))
                {
                    failures.push(format!(
                        "{what}: expected {code:?} about `{field}`, got {:?}: {}",
                        status.code(),
                        status.message()
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// StartRun is Run's start for browsers: every start Run refuses, it refuses with the same
/// status and message (its fields named from the request itself, not `start.`), for the
/// same tenant — one path, two edges.
#[tokio::test]
async fn start_run_refuses_every_start_run_refuses_and_says_the_same() {
    let secrets = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        auth: ci_tenant(secrets.path(), &["read_file"]),
        ..DaemonOptions::default()
    })
    .await;
    let workspace = daemon.workspace("project");
    let channel = daemon.authed_channel().await;
    let ci = daemon.channel_with_token(CI_TOKEN).await;
    let big = "x".repeat(1024 * 1024 + 1);
    type Edit = Box<dyn Fn(&mut pb::StartRun)>;
    let edits: Vec<(&str, &AuthedChannel, Edit)> = vec![
        ("no input", &channel, Box::new(|s| s.input.clear())),
        (
            "an input with a NUL",
            &channel,
            Box::new(|s| s.input = "a\0b".into()),
        ),
        (
            "an input too long",
            &channel,
            Box::new(move |s| s.input = big.clone()),
        ),
        (
            "unknown model",
            &channel,
            Box::new(|s| s.model.as_mut().unwrap().model = "x".into()),
        ),
        (
            "unknown tool",
            &channel,
            Box::new(|s| s.tools = vec!["nope".into()]),
        ),
        (
            "malformed session id",
            &channel,
            Box::new(|s| s.session_id = "ses_x".into()),
        ),
        (
            "unknown session",
            &channel,
            Box::new(|s| s.session_id = unknown("ses")),
        ),
        (
            "unknown approval policy",
            &channel,
            Box::new(|s| s.approval_policy = 99),
        ),
        (
            "workspace outside the roots",
            &channel,
            Box::new(|s| s.workspace = "/etc".into()),
        ),
        (
            "no workspace for tools that need one",
            &channel,
            Box::new(|s| s.workspace.clear()),
        ),
        (
            "a tool the tenant may not use",
            &ci,
            Box::new(|s| s.tools = vec!["list_dir".into()]),
        ),
        (
            "rules that do not parse",
            &channel,
            Box::new(|s| s.rules = "[[rule]".into()),
        ),
    ];
    for (what, channel, edit) in edits {
        let mut start = scripted_run(&workspace, &json!({"turns": [{"final": "x"}]}));
        edit(&mut start);
        let by_run = open_run(
            channel.clone(),
            pb::run_request::Request::Start(start.clone()),
        )
        .await
        .expect_err(what);
        let by_start = match agent(channel).start_run(start).await {
            Ok(events) => events.into_inner().message().await.map(|_| ()),
            Err(status) => Err(status),
        }
        .expect_err(what);
        assert_eq!(
            by_start.code(),
            by_run.code(),
            "{what}: {by_start:?} / {by_run:?}"
        );
        assert_eq!(
            by_start.message(),
            by_run
                .message()
                .strip_prefix("start.")
                .unwrap_or(by_run.message()),
            "{what}"
        );
    }
}

#[tokio::test]
async fn a_missing_or_wrong_token_is_unauthenticated() {
    let daemon = TestDaemon::start(DaemonOptions::default()).await;
    let anonymous = daemon.channel().await;
    let status = pb::tools_client::ToolsClient::new(anonymous)
        .list_tools(pb::ListToolsRequest {})
        .await
        .expect_err("no token");
    assert_eq!(status.code(), Code::Unauthenticated);
    assert!(status.message().contains("access token"), "{status:?}");
    let status = tools(&daemon.channel_with_token("not-the-token").await)
        .list_tools(pb::ListToolsRequest {})
        .await
        .expect_err("wrong token");
    assert_eq!(status.code(), Code::Unauthenticated);
}
