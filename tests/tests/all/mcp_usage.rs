//! What a hosted MCP server's calls are accounted: the hosts its instance contacted or was
//! refused, its peak memory and CPU time while each call was in flight — in the call's
//! metadata (`ExecuteTool`) and in its span of a run's trace. The server is
//! tests/mcp/servers/usage_server.py, with the Python SDK from `tests/mcp/install.sh`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use airlock_proto::v1 as pb;
use airlock_tests::{DaemonOptions, ProfilesDir, TestDaemon, ToolsDir, mcp, scripted_run};
use pb::ToolStatus;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MIB: u64 = 1 << 20;

/// What `work` holds, and how long it burns CPU.
const HELD_MIB: u64 = 64;
const BURN_MS: u64 = 300;

/// An HTTP server on a loopback port that answers `ok` to anything, counting connections.
struct Answering {
    port: u16,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Answering {
    async fn start() -> Answering {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ = stream.read(&mut buf).await;
                    let _ = stream
                        .write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                        )
                        .await;
                });
            }
        });
        Answering {
            port,
            connections,
            task,
        }
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Fixture {
    daemon: TestDaemon,
    allowed: Answering,
    unlisted: Answering,
    _tools: ToolsDir,
    _profiles: ProfilesDir,
}

/// A daemon hosting the usage server under a profile whose allow-list has `allowed`'s
/// address and not `unlisted`'s.
async fn start() -> Fixture {
    let allowed = Answering::start().await;
    let unlisted = Answering::start().await;
    let tools = ToolsDir::new();
    tools.write_manifest(
        "usage",
        r#"name = "usage"
version = "1.0.0"
description = "an MCP server whose calls use resources"
risk = "read_only"
engine = "mcp"
profile = "mcp-usage"
timeout_ms = 20000
[mcp]
transport = "stdio"
command = ["/usr/bin/python3", "/tool/usage_server.py"]
"#,
    );
    std::fs::copy(
        mcp::dir().join("servers/usage_server.py"),
        tools.path().join("usage/usage_server.py"),
    )
    .unwrap();
    let site = mcp::python_site_packages();
    let profiles = ProfilesDir::new();
    profiles.add(
        "mcp-usage",
        &format!(
            r#"description = "mcp usage test"
network = {{ allow = ["127.0.0.1:{}"] }}
[files]
read_only = ["/usr", "/bin", "/lib", "/lib64", "/etc/ld.so.cache", {:?}, "$WORKSPACE"]
[env]
set = {{ LANG = "C.UTF-8", PATH = "/usr/bin:/bin", HOME = "/tmp", PYTHONPATH = {:?} }}
[limits]
memory = "512 MiB"
wall_time_ms = 30000
output = "1 MiB"
processes = 64
open_files = 256
file_size = "1 MiB"
tmp = "4 MiB"
"#,
            allowed.port,
            site.display().to_string(),
            site.display().to_string()
        ),
    );
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![tools.path().to_owned()],
        profiles_dir: profiles.path().to_owned(),
        ..DaemonOptions::default()
    })
    .await;
    assert!(
        daemon.refused().is_empty(),
        "tools were refused: {:#?}",
        daemon.refused()
    );
    Fixture {
        daemon,
        allowed,
        unlisted,
        _tools: tools,
        _profiles: profiles,
    }
}

fn metadata(result: &pb::ToolResult) -> &pb::ToolResultMetadata {
    result.metadata.as_ref().expect("metadata")
}

/// The ledger entry of 127.0.0.1:`port` in `result`'s metadata.
#[track_caller]
fn contact(result: &pb::ToolResult, port: u16) -> &pb::NetworkContact {
    let network = &metadata(result).network;
    network
        .iter()
        .find(|contact| contact.host == "127.0.0.1" && contact.port == u32::from(port))
        .unwrap_or_else(|| panic!("no contact with 127.0.0.1:{port}: {network:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosted_calls_hosts_memory_and_cpu_are_its_own() {
    let fixture = start().await;
    let daemon = &fixture.daemon;
    let ws = daemon.workspace("default");
    let call = |tool: &'static str, arguments: serde_json::Value| {
        let ws = ws.clone();
        async move {
            let execution = daemon.exec(tool, arguments, Some(&ws)).await;
            execution.assert_status(ToolStatus::Ok);
            execution.result().clone()
        }
    };
    // The first call starts the server, and is accounted its start-up.
    let first = call("usage__rest", json!({})).await;
    let work = call("usage__work", json!({"mib": HELD_MIB, "ms": BURN_MS})).await;
    let rest = call("usage__rest", json!({})).await;
    let (first, work, rest) = (metadata(&first), metadata(&work), metadata(&rest));
    eprintln!(
        "start-up call: {} B, {} µs; work: {} B, {} µs; rest: {} B, {} µs",
        first.peak_memory_bytes,
        first.cpu_time_us,
        work.peak_memory_bytes,
        work.cpu_time_us,
        rest.peak_memory_bytes,
        rest.cpu_time_us
    );
    assert!(
        work.peak_memory_bytes >= HELD_MIB * MIB,
        "the call held {HELD_MIB} MiB: {work:?}"
    );
    assert!(
        work.cpu_time_us >= 200_000,
        "the call burned {BURN_MS} ms: {work:?}"
    );
    // Far less, though the server is the same: the call is accounted its own span, not the
    // server's life.
    assert!(rest.peak_memory_bytes > 0, "{rest:?}");
    assert!(
        rest.peak_memory_bytes + 48 * MIB <= work.peak_memory_bytes,
        "{rest:?} vs {work:?}"
    );
    assert!(rest.cpu_time_us < 100_000, "{rest:?}");
    assert!(first.cpu_time_us > 0, "{first:?}");
    assert!(
        work.network.is_empty() && rest.network.is_empty(),
        "{work:?}"
    );

    // Egress: the allowed host contacted, the unlisted one refused, each on its own call.
    let url = |port: u16| format!("http://127.0.0.1:{port}/");
    let reached = call("usage__fetch", json!({"url": url(fixture.allowed.port)})).await;
    assert!(reached.content.contains("status 200"), "{reached:?}");
    let contacted = contact(&reached, fixture.allowed.port);
    assert_eq!(contacted.connections, 1, "{contacted:?}");
    assert!(
        contacted.bytes_sent > 0 && contacted.bytes_received > 0,
        "{contacted:?}"
    );
    assert_eq!(contacted.refused, 0, "{contacted:?}");
    assert_eq!(metadata(&reached).network.len(), 1, "{reached:?}");
    let refused = call("usage__fetch", json!({"url": url(fixture.unlisted.port)})).await;
    assert!(refused.content.contains("status 403"), "{refused:?}");
    let denied = contact(&refused, fixture.unlisted.port);
    assert_eq!((denied.connections, denied.refused), (0, 1), "{denied:?}");
    assert!(
        denied.refusal.contains("not in the allow-list"),
        "{denied:?}"
    );
    // Only this call's: the earlier call's contact is not repeated here.
    assert_eq!(metadata(&refused).network.len(), 1, "{refused:?}");
    assert_eq!(fixture.allowed.connections.load(Ordering::SeqCst), 1);
    assert_eq!(fixture.unlisted.connections.load(Ordering::SeqCst), 0);

    // In a run, the same figures are the tool spans' of its trace.
    let script = json!({"turns": [
        {"tool_calls": [
            {"name": "usage__work", "arguments": {"mib": HELD_MIB, "ms": BURN_MS}}
        ]},
        {"tool_calls": [
            {"name": "usage__fetch", "arguments": {"url": url(fixture.allowed.port)}},
        ]},
        {"tool_calls": [
            {"name": "usage__fetch", "arguments": {"url": url(fixture.unlisted.port)}},
        ]},
        {"final": "done"}
    ]});
    let mut run = daemon.start_run(scripted_run(&ws, &script)).await;
    assert_eq!(run.finished().await.reason, pb::StopReason::Final as i32);
    let trace = daemon
        .agent()
        .await
        .get_trace(pb::GetTraceRequest {
            run_id: run.run_id().to_owned(),
        })
        .await
        .unwrap()
        .into_inner();
    let tools: Vec<HashMap<&str, &str>> = trace
        .spans
        .iter()
        .filter(|span| span.name == "tool")
        .map(|span| {
            span.attributes
                .iter()
                .map(|a| (a.key.as_str(), a.value.as_str()))
                .collect()
        })
        .collect();
    assert_eq!(tools.len(), 3, "{tools:#?}");
    let number = |span: &HashMap<&str, &str>, key: &str| -> u64 {
        span.get(key)
            .unwrap_or_else(|| panic!("no {key}: {span:#?}"))
            .parse()
            .unwrap()
    };
    let work = &tools[0];
    assert!(
        number(work, "peak_memory_bytes") >= HELD_MIB * MIB,
        "{work:#?}"
    );
    assert!(number(work, "cpu_time_us") >= 200_000, "{work:#?}");
    let allowed = format!("connect 127.0.0.1:{}", fixture.allowed.port);
    let unlisted = format!("connect 127.0.0.1:{}", fixture.unlisted.port);
    assert!(!work.contains_key(allowed.as_str()), "{work:#?}");
    let reached = &tools[1];
    assert!(
        reached
            .get(allowed.as_str())
            .is_some_and(|record| record.starts_with("1 connections")),
        "{reached:#?}"
    );
    assert!(!reached.contains_key(unlisted.as_str()), "{reached:#?}");
    let refused = &tools[2];
    assert!(
        refused.get(unlisted.as_str()).is_some_and(
            |record| record.contains("1 refused (") && record.contains("not in the allow-list")
        ),
        "{refused:#?}"
    );
    assert!(!refused.contains_key(allowed.as_str()), "{refused:#?}");
}

/// A remote server's connections are its calls' contacts; its memory and CPU are not
/// airlock's to measure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_servers_calls_are_accounted_their_connections_only() {
    let server = crate::mcp_host::RemoteServer::start().await;
    let port = server.port;
    let tools = ToolsDir::new();
    tools.write_manifest(
        "remote",
        &format!(
            "name = \"remote\"\nversion = \"1\"\ndescription = \"a remote MCP server\"\nrisk = \"read_only\"\nengine = \"mcp\"\nprofile = \"remote\"\n[mcp]\ntransport = \"http\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n"
        ),
    );
    let profiles = ProfilesDir::new();
    profiles.add(
        "remote",
        &format!(
            "description = \"remote\"\nnetwork = {{ allow = [\"127.0.0.1:{port}\"] }}\n[limits]\nmemory = \"64 MiB\"\nwall_time_ms = 10000\noutput = \"1 MiB\"\n"
        ),
    );
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![tools.path().to_owned()],
        profiles_dir: profiles.path().to_owned(),
        ..DaemonOptions::default()
    })
    .await;
    assert!(daemon.refused().is_empty(), "{:#?}", daemon.refused());
    let mut connections = Vec::new();
    for text in ["first", "second"] {
        let echo = daemon
            .exec("remote__echo", json!({ "text": text }), None)
            .await;
        echo.assert_status(ToolStatus::Ok);
        let result = echo.result();
        let server = contact(result, port);
        assert!(server.connections >= 1, "{text}: {server:?}");
        assert!(
            server.bytes_sent > 0 && server.bytes_received > 0,
            "{text}: {server:?}"
        );
        let metadata = metadata(result);
        assert_eq!(metadata.network.len(), 1, "{text}: {metadata:?}");
        assert_eq!(
            (metadata.peak_memory_bytes, metadata.cpu_time_us),
            (0, 0),
            "{text}: {metadata:?}"
        );
        eprintln!("{text} call: {server:?}");
        connections.push(server.connections);
    }
    // The first call started the connection (initialize, the listing): the second is
    // accounted its own request alone.
    assert!(connections[1] < connections[0], "{connections:?}");
}
