//! The console as HTTP serves it: its pages with their security headers, the descriptor set,
//! 404s, the same-origin rule for browser calls, the switch that turns the pages off, and
//! gRPC-Web as any client (not only a browser) uses it.

use std::time::Duration;

use airlock_daemon::config::ConsoleSettings;
use airlock_proto::v1 as pb;
use airlock_tests::{BearerToken, DaemonOptions, TestDaemon, repo_root, scripted_run};
use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::json;
use tonic::service::interceptor::InterceptedService;
use tonic_web::{GrpcWebCall, GrpcWebClientLayer, GrpcWebClientService};
use tower_layer::Layer;

pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

/// One HTTP/1.1 request, as a browser sends it.
pub(crate) async fn http1(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Bytes,
) -> Answer {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut request = Request::builder().method(method).uri(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = client
        .request(request.body(Full::new(body)).unwrap())
        .await
        .expect("the daemon answers HTTP/1.1");
    let (parts, body) = response.into_parts();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body: body.collect().await.unwrap().to_bytes(),
    }
}

async fn get(url: &str) -> Answer {
    http1(Method::GET, url, &[], Bytes::new()).await
}

#[tokio::test]
async fn the_pages_are_built_in_and_keep_to_their_origin() {
    let daemon = TestDaemon::start(DaemonOptions::default()).await;
    let index = get(&format!("{}/", daemon.endpoint)).await;
    assert_eq!(index.status, StatusCode::OK);
    assert_eq!(
        index.headers[header::CONTENT_TYPE],
        "text/html; charset=utf-8"
    );
    let built = std::fs::read(repo_root().join("console/dist/index.html")).unwrap();
    assert_eq!(index.body, built, "the page is console/dist's, built in");
    let csp = index.headers[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap();
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(directive), "{csp}");
    }
    assert!(!csp.contains("unsafe"), "{csp}");
    assert_eq!(index.headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert_eq!(index.headers[header::X_FRAME_OPTIONS], "DENY");
    assert_eq!(index.headers[header::REFERRER_POLICY], "no-referrer");

    // No inline script or style can run under that policy, so the page has none.
    let html = String::from_utf8(index.body.to_vec()).unwrap();
    assert!(
        !html.contains("<script>") && !html.contains("<style"),
        "{html}"
    );
    assert!(
        html.contains("<script type=\"module\" src=\"app.js\">"),
        "{html}"
    );

    for (path, kind) in [
        ("/app.js", "text/javascript; charset=utf-8"),
        ("/app.css", "text/css; charset=utf-8"),
        ("/favicon.svg", "image/svg+xml"),
        ("/licenses.txt", "text/plain; charset=utf-8"),
        ("/airlock.binpb", "application/x-protobuf"),
    ] {
        let answer = get(&format!("{}{path}", daemon.endpoint)).await;
        assert_eq!(answer.status, StatusCode::OK, "{path}");
        assert_eq!(answer.headers[header::CONTENT_TYPE], kind, "{path}");
        assert!(!answer.body.is_empty(), "{path}");
    }
    let descriptors = get(&format!("{}/airlock.binpb", daemon.endpoint)).await;
    assert_eq!(descriptors.body, pb::FILE_DESCRIPTOR_SET);

    // Revalidation: the same ETag answers 304 with no body.
    let etag = index.headers[header::ETAG].to_str().unwrap().to_owned();
    let again = http1(
        Method::GET,
        &format!("{}/", daemon.endpoint),
        &[("if-none-match", &etag)],
        Bytes::new(),
    )
    .await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);
    assert!(again.body.is_empty());

    let missing = get(&format!("{}/etc/passwd", daemon.endpoint)).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    let posted = http1(
        Method::POST,
        &format!("{}/", daemon.endpoint),
        &[],
        Bytes::new(),
    )
    .await;
    assert_eq!(posted.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn without_the_console_its_pages_are_404_and_the_api_stays() {
    let daemon = TestDaemon::start(DaemonOptions {
        console: ConsoleSettings {
            enabled: false,
            dir: None,
            models: Vec::new(),
        },
        ..DaemonOptions::default()
    })
    .await;
    for path in ["/", "/app.js", "/airlock.binpb"] {
        let answer = get(&format!("{}{path}", daemon.endpoint)).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{path}");
    }
    // gRPC, and gRPC-Web, are the API's, not the console's.
    let mut agent = web_agent(&daemon.endpoint, &daemon.token);
    agent
        .list_runs(pb::ListRunsRequest::default())
        .await
        .expect("gRPC-Web serves");
    daemon
        .agent()
        .await
        .list_runs(pb::ListRunsRequest::default())
        .await
        .expect("gRPC serves");
}

#[tokio::test]
async fn a_console_dir_is_read_on_each_request() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("index.html"), "first").unwrap();
    let daemon = TestDaemon::start(DaemonOptions {
        console: ConsoleSettings {
            enabled: true,
            dir: Some(dir.path().to_owned()),
            models: Vec::new(),
        },
        ..DaemonOptions::default()
    })
    .await;
    let url = format!("{}/", daemon.endpoint);
    assert_eq!(get(&url).await.body, "first");
    std::fs::write(dir.path().join("index.html"), "second").unwrap();
    assert_eq!(get(&url).await.body, "second");
    let missing = get(&format!("{}/app.js", daemon.endpoint)).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

/// A gRPC-Web call's frame: an empty `GetInfoRequest`.
fn empty_message() -> Bytes {
    Bytes::from_static(&[0, 0, 0, 0, 0])
}

#[tokio::test]
async fn a_call_from_another_sites_page_is_refused_before_any_service() {
    let daemon = TestDaemon::start(DaemonOptions::default()).await;
    let url = format!("{}/airlock.v1.Daemon/GetInfo", daemon.endpoint);
    let host = daemon.endpoint.trim_start_matches("http://").to_owned();
    let bearer = format!("Bearer {}", daemon.token);
    let call = |origin: Option<String>| {
        let url = url.clone();
        let bearer = bearer.clone();
        async move {
            let mut headers = vec![
                ("content-type", "application/grpc-web+proto".to_owned()),
                ("authorization", bearer),
            ];
            if let Some(origin) = origin {
                headers.push(("origin", origin));
            }
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            http1(Method::POST, &url, &headers, empty_message()).await
        }
    };
    // The console's own page, and a client that is no browser.
    for origin in [Some(format!("http://{host}")), None] {
        let answer = call(origin.clone()).await;
        assert_eq!(answer.status, StatusCode::OK, "{origin:?}");
        // A gRPC-Web answer's trailers end its body.
        assert!(
            answer.body.ends_with(b"grpc-status:0\r\n"),
            "{origin:?}: {:?}",
            answer.body
        );
    }
    // Even with the right token: another site's page, another port, an opaque origin.
    for origin in ["http://evil.example", "http://127.0.0.1:1", "null"] {
        let answer = call(Some(origin.to_owned())).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{origin}");
        assert!(
            String::from_utf8_lossy(&answer.body).contains("another site"),
            "{origin}"
        );
    }
}

pub(crate) type WebChannel = InterceptedService<
    GrpcWebClientService<Client<HttpConnector, GrpcWebCall<tonic::body::Body>>>,
    BearerToken,
>;

/// An `Agent` client speaking gRPC-Web over HTTP/1.1, as a browser's library does.
pub(crate) fn web_agent(endpoint: &str, token: &str) -> pb::agent_client::AgentClient<WebChannel> {
    let http = Client::builder(TokioExecutor::new()).build_http();
    let web = GrpcWebClientLayer::new().layer(http);
    pb::agent_client::AgentClient::with_origin(
        InterceptedService::new(web, BearerToken::new(token)),
        endpoint.parse().unwrap(),
    )
}

#[tokio::test]
async fn grpc_web_serves_every_client_the_watch_calls_and_the_tenant_walls() {
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        ..DaemonOptions::default()
    })
    .await;
    let workspace = daemon.workspace("w");
    let script = json!({"turns": [{"final": "done"}]});
    let mut run = daemon.start_run(scripted_run(&workspace, &script)).await;
    run.finished().await;

    let mut agent = web_agent(&daemon.endpoint, &daemon.token);
    let mut events = agent
        .watch_run(pb::AttachRun {
            run_id: run.run_id().into(),
            after_seq: 0,
        })
        .await
        .expect("WatchRun over gRPC-Web")
        .into_inner();
    let mut seqs = Vec::new();
    while let Some(event) = tokio::time::timeout(Duration::from_secs(30), events.message())
        .await
        .expect("the stream moves")
        .expect("the stream stays whole")
    {
        if event.seq > 0 {
            seqs.push(event.seq);
        }
    }
    let recorded: Vec<u64> = run.seen.iter().map(|e| e.seq).filter(|s| *s > 0).collect();
    assert_eq!(
        seqs, recorded,
        "the same events, in order, ending with the run"
    );

    let wrong = web_agent(&daemon.endpoint, "not-a-token")
        .list_runs(pb::ListRunsRequest::default())
        .await
        .expect_err("a wrong token is refused");
    assert_eq!(wrong.code(), tonic::Code::Unauthenticated);
}
