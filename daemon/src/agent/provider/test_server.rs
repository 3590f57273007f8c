//! A model API stand-in for tests: an HTTP/1.1 server on 127.0.0.1 that records each request
//! and answers with the next of its scripted replies (recorded API answers, errors, event
//! streams, or silence); and the helpers the providers' tests share.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::HeaderMap;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use super::{
    Message, ModelProvider, ModelRequest, ModelResponse, ProviderError, ProviderEvent,
    ProviderEvents, ProviderSettings, RetryPolicy, ToolCall, ToolDefinition,
};

/// How the server answers one request.
pub enum Reply {
    /// A whole answer.
    Full {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
    /// `200` with `text/event-stream`, the body sent in these pieces.
    Stream(Vec<String>),
    /// Headers never come: the connection stays open and silent.
    Hang,
}

impl Reply {
    pub fn json(status: u16, body: &str) -> Reply {
        Reply::Full {
            status,
            headers: vec![("content-type", "application/json".into())],
            body: body.into(),
        }
    }

    /// An event stream recorded as one text: sent in pieces of `piece` bytes so that events
    /// and lines arrive split, as they do over a real network.
    pub fn stream(transcript: &str, piece: usize) -> Reply {
        let pieces = transcript
            .as_bytes()
            .chunks(piece)
            .map(|chunk| String::from_utf8_lossy(chunk).into_owned())
            .collect::<Vec<_>>();
        // Recorded transcripts are ASCII, so cutting at any byte keeps them intact.
        assert_eq!(pieces.concat(), transcript, "transcripts must be ASCII");
        Reply::Stream(pieces)
    }

    pub fn with_header(mut self, name: &'static str, value: &str) -> Reply {
        if let Reply::Full { headers, .. } = &mut self {
            headers.push((name, value.into()));
        }
        self
    }
}

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

pub struct TestServer {
    pub base_url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    task: tokio::task::JoinHandle<()>,
}

impl TestServer {
    /// Starts a server answering the `n`-th request with `replies[n]`, and any request past
    /// them with a 599 that no test expects.
    pub async fn start(replies: Vec<Reply>) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let address = listener.local_addr().expect("bound address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let replies = Arc::new(Mutex::new(replies.into_iter()));
        let recorded = Arc::clone(&requests);
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let recorded = Arc::clone(&recorded);
                let replies = Arc::clone(&replies);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let recorded = Arc::clone(&recorded);
                        let replies = Arc::clone(&replies);
                        async move {
                            let reply = answer(request, &recorded, &replies).await;
                            Ok::<_, Infallible>(reply)
                        }
                    });
                    // A connection the client drops mid-answer is part of some tests.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        TestServer {
            base_url: format!("http://{address}"),
            requests,
            task,
        }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().expect("requests lock").clone()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(
    request: Request<Incoming>,
    recorded: &Mutex<Vec<Recorded>>,
    replies: &Mutex<std::vec::IntoIter<Reply>>,
) -> Response<BoxBody<Bytes, Infallible>> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await.expect("request body").to_bytes();
    recorded.lock().expect("requests lock").push(Recorded {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        headers: parts.headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });
    let reply = replies.lock().expect("replies lock").next();
    let full = |status: u16, headers: Vec<(&'static str, String)>, body: String| {
        let mut response = Response::builder().status(status);
        for (name, value) in headers {
            response = response.header(name, value);
        }
        response
            .body(Full::new(Bytes::from(body)).boxed())
            .expect("valid test response")
    };
    match reply {
        Some(Reply::Full {
            status,
            headers,
            body,
        }) => full(status, headers, body),
        Some(Reply::Stream(pieces)) => {
            let frames = futures::stream::iter(
                pieces
                    .into_iter()
                    .map(|piece| Ok::<_, Infallible>(Frame::data(Bytes::from(piece)))),
            );
            Response::builder()
                .status(200)
                .header("content-type", "text/event-stream; charset=utf-8")
                .header("cache-control", "no-cache")
                .body(BodyExt::boxed(StreamBody::new(frames)))
                .expect("valid test response")
        }
        Some(Reply::Hang) => std::future::pending().await,
        None => full(599, Vec::new(), "test server: no reply left".into()),
    }
}

/// Settings pointing both providers at `base_url`, with quick retries and a timeout that
/// only bounds hangs, unless a test shortens it.
pub fn settings(base_url: &str) -> ProviderSettings {
    ProviderSettings {
        openai_base_url: format!("{base_url}/v1"),
        openai_api_key_env: "AIRLOCK_TEST_OPENAI_KEY".into(),
        anthropic_base_url: base_url.into(),
        anthropic_api_key_env: "AIRLOCK_TEST_ANTHROPIC_KEY".into(),
        request_timeout: Duration::from_secs(30),
        retry: RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(5),
        },
        stream: false,
    }
}

/// [`settings`] with streamed answers.
pub fn streaming(base_url: &str) -> ProviderSettings {
    let mut settings = settings(base_url);
    settings.stream = true;
    settings
}

/// Completes `request`, bounding the call so that a bug cannot hang the suite.
pub async fn complete(
    provider: &dyn ModelProvider,
    request: &ModelRequest,
) -> (Result<ModelResponse, ProviderError>, Events) {
    let events = Events::default();
    let result = tokio::time::timeout(Duration::from_secs(60), provider.complete(request, &events))
        .await
        .expect("the call ends");
    (result, events)
}

/// The value of a recorded request's header `name`.
pub fn header<'a>(request: &'a Recorded, name: &str) -> Option<&'a str> {
    request
        .headers
        .get(name)
        .map(|value| value.to_str().expect("ascii header"))
}

/// Collects provider events for assertions.
#[derive(Default)]
pub struct Events(Mutex<Vec<ProviderEvent>>);

impl Events {
    /// What was reported so far but the exchanges (see [`Events::exchanges`]), taken.
    pub fn take(&self) -> Vec<ProviderEvent> {
        std::mem::take(&mut *self.0.lock().expect("events lock"))
            .into_iter()
            .filter(|event| !matches!(event, ProviderEvent::Exchange(_)))
            .collect()
    }

    /// What was reported so far, left in place.
    fn seen(&self) -> Vec<ProviderEvent> {
        self.0.lock().expect("events lock").clone()
    }

    pub fn text(&self) -> Vec<String> {
        self.seen()
            .into_iter()
            .filter_map(|event| match event {
                ProviderEvent::TextDelta(text) => Some(text),
                ProviderEvent::Retrying { .. }
                | ProviderEvent::ToolCallDelta { .. }
                | ProviderEvent::Exchange(_) => None,
            })
            .collect()
    }

    /// The exchanges reported (one per answered call).
    pub fn exchanges(&self) -> Vec<super::Exchange> {
        self.seen()
            .into_iter()
            .filter_map(|event| match event {
                ProviderEvent::Exchange(exchange) => Some(exchange),
                _ => None,
            })
            .collect()
    }

    /// Each streamed call's id, name and arguments, its pieces put together, by index.
    pub fn calls(&self) -> Vec<(String, String, String)> {
        let mut calls: Vec<(String, String, String)> = Vec::new();
        for event in self.seen() {
            if let ProviderEvent::ToolCallDelta {
                index,
                id,
                name,
                arguments,
            } = event
            {
                let index = index as usize;
                if calls.len() <= index {
                    calls.resize(index + 1, Default::default());
                }
                let call = &mut calls[index];
                call.0.push_str(&id.unwrap_or_default());
                call.1.push_str(&name.unwrap_or_default());
                call.2.push_str(&arguments);
            }
        }
        calls
    }
}

impl ProviderEvents for Events {
    fn event(&self, event: ProviderEvent) {
        self.0.lock().expect("events lock").push(event);
    }

    fn wants_exchange(&self) -> bool {
        true
    }
}

/// A conversation at its second model call: the user's task, the model's two tool calls
/// (with the provider's ids `ids`), an observation for each, the second an error.
pub fn sample_request(ids: [&str; 2]) -> ModelRequest {
    let read_file = r#"{"status":"OK","content":"def mean(values):\n    return sum(values) / (len(values) - 1)\n"}"#;
    ModelRequest {
        system: "You fix bugs in the workspace.".into(),
        messages: vec![
            Message::User {
                text: "test_mean fails. Fix it.".into(),
            },
            Message::Assistant {
                text: Some("Let me look at the code.".into()),
                tool_calls: vec![
                    ToolCall {
                        id: ids[0].into(),
                        name: "read_file".into(),
                        arguments: r#"{"path":"src/calc.py"}"#.into(),
                    },
                    ToolCall {
                        id: ids[1].into(),
                        name: "grep".into(),
                        arguments: r#"{"pattern":"mean(","path":"tests"}"#.into(),
                    },
                ],
            },
            Message::Tool {
                call_id: ids[0].into(),
                name: "read_file".into(),
                content: read_file.into(),
                is_error: false,
            },
            Message::Tool {
                call_id: ids[1].into(),
                name: "grep".into(),
                content: r#"{"status":"TOOL_ERROR","error":"no such directory: tests"}"#.into(),
                is_error: true,
            },
        ],
        tools: vec![
            ToolDefinition {
                name: "read_file".into(),
                description: "Reads a file of the workspace.".into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"]
                }),
            },
            ToolDefinition {
                name: "grep".into(),
                description: "Searches files for a pattern.".into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}},
                    "required": ["pattern"]
                }),
            },
        ]
        .into(),
        max_output_tokens: 1024,
        temperature: Some(0.2),
        answers: 1,
        purpose: super::Purpose::Step,
    }
}
