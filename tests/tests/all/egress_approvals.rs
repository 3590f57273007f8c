//! Approvals for unlisted hosts, end to end: real agent runs (a scripted model) in the real
//! `airlockd`, inside a network namespace the test creates, whose process tool fetches from
//! HTTP servers in that namespace through the daemon's egress proxy. Nothing leaves the
//! machine.
//!
//! Most runs use the `auto` policy, so the only question asked is the connection's. Two show
//! how the other policies meet it: under `risky` a `network` risk call is asked about first,
//! then its connection; under `never` nobody is asked and the connection is refused at once.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use airlock_proto::v1 as pb;
use airlock_tests::egress::{EgressDaemon, contact};
use airlock_tests::netns::{HttpResponse, HttpServer, NetNs, PUBLIC, spawn_http_server};
use airlock_tests::{ProfilesDir, RunStream, ToolsDir, scripted_run};
use pb::run_event::Event;
use serde_json::{Value, json};

/// What the tools' profiles grant besides the network: the system's programs.
const SYSTEM: &str = "\"/usr\", \"/bin\", \"/lib\", \"/lib64\", \"/etc/ld.so.cache\"";

/// The refusal of a host that may be asked about, and was not approved.
const NOT_APPROVED: &str = "and not approved for this run";

struct Fixture {
    egress: EgressDaemon,
    /// 198.51.100.1, listed as `allowed.test`.
    listed: HttpServer,
    /// 198.51.100.1, another port, reached as `unlisted.test`: in no allow-list.
    unlisted: HttpServer,
    workspace: std::path::PathBuf,
}

impl Fixture {
    async fn start() -> Fixture {
        let netns = NetNs::new();
        let at = SocketAddr::new(IpAddr::V4(PUBLIC), 0);
        let listed = spawn_http_server(
            &netns,
            at,
            Arc::new(|request| HttpResponse::ok(format!("listed server: {}", request.target))),
        );
        let unlisted = spawn_http_server(
            &netns,
            at,
            Arc::new(|request| HttpResponse::ok(format!("unlisted server: {}", request.target))),
        );

        let allow = format!("\"allowed.test:{}\"", listed.addr.port());
        let profiles = ProfilesDir::new();
        profiles.add("asking", &profile(&allow, true));
        profiles.add("listed-only", &profile(&allow, false));
        let tools = ToolsDir::new();
        tools.write_manifest("fetch", &manifest("fetch", "network", "asking"));
        // The same, declared read-only: no policy asks about the call itself.
        tools.write_manifest("peek", &manifest("peek", "read_only", "asking"));
        tools.write_manifest(
            "fetch_listed_only",
            &manifest("fetch_listed_only", "network", "listed-only"),
        );

        let hosts = [("allowed.test", PUBLIC), ("unlisted.test", PUBLIC)];
        let egress = EgressDaemon::start(netns, tools, profiles, &hosts).await;
        let workspace = egress.workspace_root().join("w");
        std::fs::create_dir_all(&workspace).unwrap();
        Fixture {
            egress,
            listed,
            unlisted,
            workspace,
        }
    }

    fn unlisted_url(&self, path: &str) -> String {
        format!("http://unlisted.test:{}{path}", self.unlisted.addr.port())
    }

    fn listed_url(&self, path: &str) -> String {
        format!("http://allowed.test:{}{path}", self.listed.addr.port())
    }

    /// Starts a run under the `auto` policy, with the daemon's default approval timeout,
    /// whose model makes `calls`, one a turn.
    async fn run(&self, calls: &[Value]) -> RunStream {
        self.run_under(pb::ApprovalPolicy::Auto, &script(calls), 0)
            .await
    }

    async fn run_under(
        &self,
        policy: pb::ApprovalPolicy,
        script: &Value,
        approval_timeout_ms: u64,
    ) -> RunStream {
        let mut start = scripted_run(&self.workspace, script);
        start.approval_policy = policy as i32;
        start.approval_timeout_ms = approval_timeout_ms;
        self.egress.daemon.start_run(start).await
    }

    /// Starts a run under `policy` whose model calls `tool` once, on the unlisted server's
    /// `path`.
    async fn run_one(
        &self,
        policy: pb::ApprovalPolicy,
        tool: &str,
        path: &str,
        approval_timeout_ms: u64,
    ) -> RunStream {
        let script = script(&[fetch(tool, &self.unlisted_url(path))]);
        self.run_under(policy, &script, approval_timeout_ms).await
    }

    /// Waits for the run's next approval request, which must ask about the unlisted server.
    async fn asked_about_unlisted(&self, run: &mut RunStream) -> pb::ApprovalRequest {
        let request = run.approval_requested().await;
        assert_eq!(
            request.network,
            Some(pb::NetworkAccess {
                host: "unlisted.test".into(),
                port: u32::from(self.unlisted.addr.port()),
            })
        );
        request
    }

    async fn trace(&self, run_id: &str) -> pb::Trace {
        self.egress
            .daemon
            .agent()
            .await
            .get_trace(pb::GetTraceRequest {
                run_id: run_id.to_owned(),
            })
            .await
            .unwrap()
            .into_inner()
    }
}

fn profile(allow: &str, ask_for_unlisted: bool) -> String {
    format!(
        "description = \"egress approval test\"\nnetwork = {{ allow = [{allow}], ask_for_unlisted = {ask_for_unlisted} }}\n[files]\nread_only = [{SYSTEM}]\n[env]\nset = {{ LANG = \"C.UTF-8\", PATH = \"/usr/bin:/bin\" }}\n[limits]\nmemory = \"256 MiB\"\nwall_time_ms = 30000\noutput = \"1 MiB\"\nprocesses = 32\nopen_files = 128\n"
    )
}

/// curl through the proxy the environment names; a refusal (the proxy's 403) is a failed
/// exit that still shows the refusal's text.
fn manifest(name: &str, risk: &str, profile: &str) -> String {
    format!(
        "name = \"{name}\"\nversion = \"0.1.0\"\ndescription = \"egress approval test tool\"\nrisk = \"{risk}\"\nengine = \"process\"\ncommand = [\"/usr/bin/curl\", \"-sS\", \"--fail-with-body\", \"--max-time\", \"20\", \"-w\", \"\\\\nstatus=%{{http_code}}\", \"--\", \"${{url}}\"]\nabi = \"argv\"\nprofile = \"{profile}\"\ntimeout_ms = 30000\ninput_schema = {{ type = \"object\", properties = {{ url = {{ type = \"string\" }} }}, required = [\"url\"] }}\n"
    )
}

fn fetch(tool: &str, url: &str) -> Value {
    json!({"name": tool, "arguments": {"url": url}})
}

/// One call per turn, then a final answer that says what the model saw last.
fn script(calls: &[Value]) -> Value {
    let mut turns: Vec<Value> = calls
        .iter()
        .map(|call| json!({"tool_calls": [call]}))
        .collect();
    turns.push(json!({"alternatives": [
        {"when": {"contains": "unlisted server"}, "final": "reached"},
        {"when": {"contains": NOT_APPROVED}, "final": "refused, not approved"},
        {"when": {"contains": "not in the allow-list"}, "final": "refused, not listed"},
        {"final": "something else"}
    ]}));
    json!({ "turns": turns })
}

fn requests(run: &RunStream) -> Vec<pb::ApprovalRequest> {
    run.of(|event| match event {
        Event::ApprovalRequested(requested) => requested.request.clone(),
        _ => None,
    })
}

fn resolutions(run: &RunStream) -> Vec<pb::ApprovalResolved> {
    run.of(|event| match event {
        Event::ApprovalResolved(resolved) => Some(resolved.clone()),
        _ => None,
    })
}

/// Every call's result, in call order.
fn call_results(run: &RunStream) -> Vec<pb::ToolResult> {
    run.of(|event| match event {
        Event::ToolFinished(finished) => finished.result.clone(),
        _ => None,
    })
}

/// What the tool printed, and why it failed.
fn text(result: &pb::ToolResult) -> String {
    format!("{}{}", result.content, result.error_message)
}

/// The trace record of a contact, as the tool span carries it.
fn record(contact: &pb::NetworkContact) -> String {
    let mut record = format!(
        "{} connections, {} bytes sent, {} bytes received",
        contact.connections, contact.bytes_sent, contact.bytes_received
    );
    if contact.refused > 0 {
        record.push_str(&format!(
            ", {} refused ({})",
            contact.refused, contact.refusal
        ));
    }
    record
}

/// The `connect HOST:PORT` attributes of each tool span, in call order.
fn connect_attributes(trace: &pb::Trace) -> Vec<Vec<(String, String)>> {
    trace
        .spans
        .iter()
        .filter(|span| span.name == "tool")
        .map(|span| {
            span.attributes
                .iter()
                .filter(|attribute| attribute.key.starts_with("connect "))
                .map(|attribute| (attribute.key.clone(), attribute.value.clone()))
                .collect()
        })
        .collect()
}

/// Asserts that a call was refused `host` for want of an approval, and reached nothing.
fn assert_not_approved(result: &pb::ToolResult, host: &str) {
    let text = text(result);
    assert_eq!(result.status, pb::ToolStatus::ToolError as i32, "{text}");
    assert_eq!(
        result.exit_code,
        Some(22),
        "curl's exit for an HTTP error: {text}"
    );
    assert!(text.contains("status=403"), "{text}");
    assert!(
        text.contains(&format!("egress to {host}")) && text.contains(NOT_APPROVED),
        "{text}"
    );
    let contact = contact(result, host);
    assert_eq!(
        (
            contact.connections,
            contact.bytes_sent,
            contact.bytes_received
        ),
        (0, 0, 0),
        "{contact:#?}"
    );
    assert_eq!(contact.refused, 1, "{contact:#?}");
    assert!(contact.refusal.contains(NOT_APPROVED), "{contact:#?}");
}

#[tokio::test]
async fn an_approved_host_is_reached_for_the_rest_of_that_run_only() {
    let fixture = Fixture::start().await;
    let port = fixture.unlisted.addr.port();
    let mut run = fixture
        .run(&[
            fetch("fetch", &fixture.listed_url("/listed")),
            fetch("fetch", &fixture.unlisted_url("/first")),
            fetch("fetch", &fixture.unlisted_url("/second")),
        ])
        .await;

    let request = fixture.asked_about_unlisted(&mut run).await;
    assert_eq!(request.tool, "fetch");
    assert_eq!(request.profile, "asking");
    assert_eq!(request.risk, pb::Risk::Network as i32);
    assert_eq!(request.run_id, run.run_id());
    assert_eq!(
        request.arguments_json,
        json!({"url": fixture.unlisted_url("/first")}).to_string()
    );
    let preview = request.preview.clone().unwrap();
    assert_eq!(preview.kind, "connect");
    assert!(
        preview.text.contains(&format!("unlisted.test:{port}")),
        "{}",
        preview.text
    );
    // The call waits on the question: the host has heard nothing yet.
    assert!(fixture.unlisted.requests().is_empty());
    // The listed host, fetched first, was never asked about.
    assert_eq!(fixture.listed.requests().len(), 1);

    run.decide(&request.approval_id, pb::Decision::ApproveOnce, "");
    let finished = run.finished().await;
    assert_eq!(finished.final_text, "reached", "{:#?}", run.seen);

    // Asked once for both calls to the host; both reached it.
    let asked = requests(&run);
    assert_eq!(asked.len(), 1, "{asked:#?}");
    let resolved = resolutions(&run);
    assert_eq!(resolved.len(), 1, "{resolved:#?}");
    assert_eq!(resolved[0].approval_id, request.approval_id);
    assert_eq!(resolved[0].call_id, request.call_id);
    assert_eq!(resolved[0].decision, pb::Decision::ApproveOnce as i32);
    assert_eq!(resolved[0].decided_by, "run client");
    let targets: Vec<String> = fixture
        .unlisted
        .requests()
        .into_iter()
        .map(|request| request.target)
        .collect();
    assert_eq!(targets, ["/first", "/second"]);
    let results = call_results(&run);
    assert_eq!(results.len(), 3);
    assert_eq!(
        text(&results[0]),
        "listed server: /listed\nstatus=200",
        "{:#?}",
        results[0]
    );
    for (result, path) in results[1..].iter().zip(["/first", "/second"]) {
        assert_eq!(result.status, pb::ToolStatus::Ok as i32, "{result:#?}");
        assert_eq!(text(result), format!("unlisted server: {path}\nstatus=200"));
        let reached = contact(result, "unlisted.test");
        assert_eq!(reached.port, u32::from(port));
        assert_eq!(
            (reached.connections, reached.refused),
            (1, 0),
            "{reached:#?}"
        );
        let response = HttpResponse::ok(format!("unlisted server: {path}"));
        assert_eq!(reached.bytes_received, response.wire_len());
        assert!(
            reached.bytes_sent > format!("GET {path} HTTP/1.1\r\n\r\n").len() as u64,
            "{reached:#?}"
        );
    }

    // The trace's tool spans carry each contact, with the metadata's counts.
    let trace = fixture.trace(run.run_id()).await;
    let spans = connect_attributes(&trace);
    assert_eq!(spans.len(), 3, "{trace:#?}");
    let expected = [
        ("allowed.test", fixture.listed.addr.port(), &results[0]),
        ("unlisted.test", port, &results[1]),
        ("unlisted.test", port, &results[2]),
    ];
    for (attributes, (host, port, result)) in spans.iter().zip(expected) {
        assert_eq!(
            attributes,
            &[(
                format!("connect {host}:{port}"),
                record(contact(result, host))
            )],
        );
    }

    // A new run is asked again: the approval held for the first run only.
    let mut again = fixture
        .run_one(pb::ApprovalPolicy::Auto, "fetch", "/again", 0)
        .await;
    let request = again.approval_requested().await;
    assert_eq!(
        request.network.as_ref().map(|access| access.host.as_str()),
        Some("unlisted.test")
    );
    assert_ne!(request.run_id, run.run_id());
    again.decide(&request.approval_id, pb::Decision::Deny, "not in this run");
    assert_eq!(again.finished().await.final_text, "refused, not approved");
    assert_eq!(
        fixture.unlisted.requests().len(),
        2,
        "the denied run reached nothing"
    );
    assert_not_approved(&call_results(&again)[0], "unlisted.test");
}

#[tokio::test]
async fn a_denied_host_is_refused_and_the_refusal_recorded() {
    let fixture = Fixture::start().await;
    let port = fixture.unlisted.addr.port();
    let mut run = fixture
        .run_one(pb::ApprovalPolicy::Auto, "fetch", "/secret", 0)
        .await;
    let request = fixture.asked_about_unlisted(&mut run).await;
    run.decide(
        &request.approval_id,
        pb::Decision::Deny,
        "no exfiltration today",
    );
    assert_eq!(run.finished().await.final_text, "refused, not approved");

    let resolved = resolutions(&run);
    assert_eq!(resolved.len(), 1, "{resolved:#?}");
    assert_eq!(resolved[0].decision, pb::Decision::Deny as i32);
    assert_eq!(resolved[0].decided_by, "run client");
    assert_eq!(resolved[0].reason, "no exfiltration today");
    let results = call_results(&run);
    assert_eq!(results.len(), 1);
    assert_not_approved(&results[0], "unlisted.test");
    assert!(fixture.unlisted.requests().is_empty());

    // The refusal is in the trace too.
    let trace = fixture.trace(run.run_id()).await;
    let refused = contact(&results[0], "unlisted.test");
    let attributes = connect_attributes(&trace);
    assert_eq!(
        attributes,
        [vec![(
            format!("connect unlisted.test:{port}"),
            record(refused)
        )]]
    );
    assert!(
        attributes[0][0].1.starts_with(
            "0 connections, 0 bytes sent, 0 bytes received, 1 refused (egress to unlisted.test"
        ),
        "{attributes:?}"
    );
}

#[tokio::test]
async fn no_answer_by_the_deadline_refuses_the_connection() {
    let fixture = Fixture::start().await;
    let mut run = fixture
        .run_one(pb::ApprovalPolicy::Auto, "fetch", "/late", 300)
        .await;
    let request = run.approval_requested().await;
    assert!(request.deadline_ms > 0, "{request:#?}");
    assert_eq!(run.finished().await.final_text, "refused, not approved");
    let resolved = resolutions(&run);
    assert_eq!(resolved.len(), 1, "{resolved:#?}");
    assert_eq!(resolved[0].approval_id, request.approval_id);
    assert_eq!(resolved[0].decision, pb::Decision::Deny as i32);
    assert_eq!(resolved[0].decided_by, "deadline");
    assert_not_approved(&call_results(&run)[0], "unlisted.test");
    assert!(fixture.unlisted.requests().is_empty());
}

#[tokio::test]
async fn without_ask_for_unlisted_nothing_is_asked_and_the_host_is_refused() {
    let fixture = Fixture::start().await;
    let port = fixture.unlisted.addr.port();
    let mut run = fixture
        .run(&[
            fetch("fetch_listed_only", &fixture.listed_url("/listed")),
            fetch("fetch_listed_only", &fixture.unlisted_url("/x")),
        ])
        .await;
    assert_eq!(run.finished().await.final_text, "refused, not listed");
    assert!(requests(&run).is_empty(), "{:#?}", run.seen);
    assert!(resolutions(&run).is_empty(), "{:#?}", run.seen);

    let results = call_results(&run);
    assert_eq!(text(&results[0]), "listed server: /listed\nstatus=200");
    let text = text(&results[1]);
    assert_eq!(results[1].exit_code, Some(22), "{text}");
    assert!(text.contains("status=403"), "{text}");
    assert!(
        text.contains(&format!(
            "egress to unlisted.test:{port} refused: not in the allow-list of profile `listed-only`"
        )),
        "{text}"
    );
    assert!(!text.contains(NOT_APPROVED), "{text}");
    let refused = contact(&results[1], "unlisted.test");
    assert_eq!(
        (refused.connections, refused.refused),
        (0, 1),
        "{refused:#?}"
    );
    assert!(fixture.unlisted.requests().is_empty());
    assert_eq!(fixture.listed.requests().len(), 1);
}

#[tokio::test]
async fn under_risky_the_call_and_then_its_connection_are_asked_separately() {
    let fixture = Fixture::start().await;
    let mut run = fixture
        .run_one(pb::ApprovalPolicy::Risky, "fetch", "/both", 0)
        .await;
    let call = run.approval_requested().await;
    assert_eq!(call.network, None, "the call's own approval: {call:#?}");
    assert_eq!(call.risk, pb::Risk::Network as i32);
    run.decide(&call.approval_id, pb::Decision::ApproveOnce, "");
    let connection = run.approval_requested().await;
    assert_eq!(connection.call_id, call.call_id);
    assert_ne!(connection.approval_id, call.approval_id);
    assert_ne!(connection.digest, call.digest);
    assert_eq!(
        connection
            .network
            .as_ref()
            .map(|access| access.host.as_str()),
        Some("unlisted.test")
    );
    // Approving the call did not approve its connections.
    assert!(fixture.unlisted.requests().is_empty());
    run.decide(&connection.approval_id, pb::Decision::ApproveOnce, "");
    assert_eq!(run.finished().await.final_text, "reached");
    assert_eq!(fixture.unlisted.requests().len(), 1);
}

#[tokio::test]
async fn under_never_a_connection_is_refused_without_asking() {
    let fixture = Fixture::start().await;
    let mut run = fixture
        .run_one(pb::ApprovalPolicy::Never, "peek", "/unattended", 0)
        .await;
    let finished = tokio::time::timeout(std::time::Duration::from_secs(10), run.finished())
        .await
        .expect("nobody is waited for");
    assert_eq!(
        finished.final_text, "refused, not approved",
        "{:#?}",
        run.seen
    );
    assert!(requests(&run).is_empty(), "{:#?}", run.seen);
    let results = call_results(&run);
    assert_eq!(results.len(), 1, "the read-only call ran");
    assert_not_approved(&results[0], "unlisted.test");
    assert!(fixture.unlisted.requests().is_empty());
}
