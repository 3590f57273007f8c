//! The gRPC surface itself: health, reflection, and how requests that cannot run are refused.

use airlock_proto::v1 as pb;
use airlock_tests::{TestDaemon, ToolsDir, test_module};
use serde_json::json;
use tonic::Code;

async fn daemon() -> (TestDaemon, ToolsDir) {
    let tools = ToolsDir::new();
    tools.add_file("echo", &test_module("echo"), "");
    tools.add_file(
        "needs_workspace",
        &test_module("echo"),
        "profile = \"readonly\"\ninput_schema = { type = \"object\", properties = { n = { type = \"integer\", minimum = 1 } }, additionalProperties = false }",
    );
    let daemon = TestDaemon::with_tools(&tools).await;
    (daemon, tools)
}

fn request(tool: &str, arguments: &str, workspace: &str) -> pb::ExecuteToolRequest {
    pb::ExecuteToolRequest {
        tool: tool.into(),
        arguments_json: arguments.into(),
        workspace: workspace.into(),
        timeout_ms: 0,
        require_approval: false,
    }
}

#[tokio::test]
async fn health_reports_serving_for_the_daemon_and_the_tools_service() {
    let (daemon, _tools) = daemon().await;
    let mut health = tonic_health::pb::health_client::HealthClient::new(daemon.channel().await);
    for service in ["", "airlock.v1.Tools"] {
        let reply = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            reply.status,
            tonic_health::pb::health_check_response::ServingStatus::Serving as i32,
            "{service:?}"
        );
    }
}

#[tokio::test]
async fn reflection_lists_the_services() {
    use tonic_reflection_client::*;
    let (daemon, _tools) = daemon().await;
    let services = list_services(daemon.channel().await).await;
    for expected in ["airlock.v1.Tools", "grpc.health.v1.Health"] {
        assert!(services.iter().any(|s| s == expected), "{services:?}");
    }
}

/// A minimal reflection client: enough to ask which services the server offers.
mod tonic_reflection_client {
    use tonic::transport::Channel;
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

    pub async fn list_services(channel: Channel) -> Vec<String> {
        let mut client = ServerReflectionClient::new(channel);
        let request = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        };
        let mut replies = client
            .server_reflection_info(tokio_stream::iter([request]))
            .await
            .unwrap()
            .into_inner();
        let reply = replies.message().await.unwrap().unwrap();
        match reply.message_response {
            Some(MessageResponse::ListServicesResponse(list)) => {
                list.service.into_iter().map(|s| s.name).collect()
            }
            other => panic!("unexpected reflection reply: {other:?}"),
        }
    }
}

#[tokio::test]
async fn unknown_tools_are_not_found() {
    let (daemon, _tools) = daemon().await;
    let status = daemon
        .exec_request(request("nope", "{}", ""))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert!(status.message().contains("nope"), "{status:?}");
}

#[tokio::test]
async fn workspaces_outside_the_roots_are_invalid_arguments() {
    let (daemon, _tools) = daemon().await;
    let inside = daemon.workspace("ok");
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), daemon.workspace_root.path().join("escape"))
        .unwrap();
    for (workspace, expected) in [
        (
            outside.path().to_str().unwrap().to_owned(),
            "outside the daemon's workspace roots",
        ),
        (
            daemon
                .workspace_root
                .path()
                .join("escape")
                .to_str()
                .unwrap()
                .to_owned(),
            "outside",
        ),
        (format!("{}/../..", inside.display()), "outside"),
        ("relative/path".to_owned(), "not an absolute path"),
        (
            inside.join("missing").to_str().unwrap().to_owned(),
            "cannot be opened",
        ),
    ] {
        let status = daemon
            .exec_request(request("needs_workspace", "{}", &workspace))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{workspace}");
        assert!(
            status.message().contains(expected),
            "{workspace}: {status:?}"
        );
    }
    let status = daemon
        .exec_request(request("needs_workspace", "{}", ""))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status.message().contains("the request names none"),
        "{status:?}"
    );
    daemon
        .exec("needs_workspace", json!({}), Some(&inside))
        .await
        .assert_status(pb::ToolStatus::Ok);
}

#[tokio::test]
async fn invalid_arguments_never_run_and_say_which_field() {
    let (daemon, _tools) = daemon().await;
    let workspace = daemon.workspace("w");
    let workspace = workspace.to_str().unwrap();
    for (arguments, expected) in [
        ("{\"n\": 0}", "/n"),
        ("{\"n\": \"x\"}", "/n"),
        ("{\"m\": 1}", "m"),
        ("{\"n\": ", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
    ] {
        let execution = daemon
            .exec_request(request("needs_workspace", arguments, workspace))
            .await
            .unwrap();
        execution.assert_status(pb::ToolStatus::InvalidArguments);
        assert_eq!(
            execution.events.len(),
            1,
            "nothing but the result: {:?}",
            execution.events
        );
        assert!(execution.execution_id.is_none());
        let message = &execution.result().error_message;
        assert!(message.contains(expected), "{arguments}: {message}");
    }
}

#[tokio::test]
async fn empty_arguments_mean_an_empty_object() {
    let (daemon, _tools) = daemon().await;
    let execution = daemon.exec_request(request("echo", "", "")).await.unwrap();
    execution.assert_status(pb::ToolStatus::Ok);
    assert_eq!(execution.json(), json!({}));
}

#[tokio::test]
async fn the_tool_reads_exactly_the_validated_arguments() {
    let (daemon, _tools) = daemon().await;
    // Duplicate keys: JSON parsers disagree on which one wins; the tool must see what was
    // validated, never the raw text.
    let execution = daemon
        .exec_request(request(
            "echo",
            "{\"a\": 1, \"a\": 2, \"b\": \"\\u0041\"}",
            "",
        ))
        .await
        .unwrap();
    execution.assert_status(pb::ToolStatus::Ok);
    assert_eq!(execution.json(), json!({"a": 2, "b": "A"}));
}

#[tokio::test]
async fn cancelling_an_unknown_execution_is_not_found() {
    let (daemon, _tools) = daemon().await;
    let status = daemon
        .tools()
        .await
        .cancel_execution(pb::CancelExecutionRequest {
            execution_id: format!("exe_{}", "0".repeat(32)),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
}
