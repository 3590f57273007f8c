//! Tests of the `openai` provider against the test server: request bodies, streamed and whole
//! answers, the tolerated deviations of local servers, retries and errors.

use std::time::Duration;

use serde_json::json;

use super::super::test_server::{
    Events, Reply, TestServer, complete, header, sample_request, settings, streaming,
};
use super::*;

const TOOL_CALLS: &str = include_str!("testdata/openai_tool_calls.json");
const FINAL: &str = include_str!("testdata/openai_final.json");
const STREAM: &str = include_str!("testdata/openai_stream_tool_calls.sse");
const ERROR_429: &str = include_str!("testdata/openai_error_429.json");
const ERROR_400: &str = include_str!("testdata/openai_error_400.json");
const ERROR_500: &str = include_str!("testdata/openai_error_500.json");

const KEY: &str = "sk-test-0123456789abcdef";

fn provider(settings: &ProviderSettings) -> OpenAi {
    OpenAi::with_env("gpt-4.1", settings, |name| {
        (name == "AIRLOCK_TEST_OPENAI_KEY").then(|| KEY.to_owned())
    })
    .expect("provider")
}

#[tokio::test]
async fn request_shape_and_tool_calls() {
    let server = TestServer::start(vec![Reply::json(200, TOOL_CALLS)]).await;
    let openai = provider(&settings(&server.base_url));
    let request = sample_request(["call_a", "call_b"]);
    let (result, events) = complete(&openai, &request).await;
    let response = result.expect("answer");

    let [sent] = &server.requests()[..] else {
        panic!("one request expected: {:?}", server.requests())
    };
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(
        header(sent, "authorization"),
        Some(&*format!("Bearer {KEY}"))
    );
    assert_eq!(header(sent, "content-type"), Some("application/json"));
    let Message::Tool {
        content: read_result,
        ..
    } = &request.messages[2]
    else {
        panic!("the sample's third message is an observation")
    };
    let expected = json!({
        "model": "gpt-4.1",
        "messages": [
            {"role": "system", "content": "You fix bugs in the workspace."},
            {"role": "user", "content": "test_mean fails. Fix it."},
            {"role": "assistant", "content": "Let me look at the code.", "tool_calls": [
                {"id": "call_a", "type": "function",
                 "function": {"name": "read_file", "arguments": "{\"path\":\"src/calc.py\"}"}},
                {"id": "call_b", "type": "function",
                 "function": {"name": "grep", "arguments": "{\"pattern\":\"mean(\",\"path\":\"tests\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_a", "content": read_result},
            {"role": "tool", "tool_call_id": "call_b",
             "content": "{\"status\":\"TOOL_ERROR\",\"error\":\"no such directory: tests\"}"}
        ],
        "tools": [
            {"type": "function", "function": {
                "name": "read_file", "description": "Reads a file of the workspace.",
                "parameters": request.tools[0].input_schema}},
            {"type": "function", "function": {
                "name": "grep", "description": "Searches files for a pattern.",
                "parameters": request.tools[1].input_schema}}
        ],
        "max_tokens": 1024,
        "temperature": 0.2
    });
    assert_eq!(sent.body, expected);

    assert_eq!(
        response,
        ModelResponse {
            text: None,
            tool_calls: vec![
                ToolCall {
                    id: "call_XbV1rk2YJ0x7Qm3pLs9Tn4Ud".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"src/calc.py"}"#.into(),
                },
                // Invalid JSON, passed on exactly as the model wrote it.
                ToolCall {
                    id: "call_Hq8WcN5eZr2Kt6Yb1Pv0Xs3M".into(),
                    name: "grep".into(),
                    arguments: r#"{"pattern": "mean(", "path": "#.into(),
                },
            ],
            usage: Usage {
                input_tokens: 412,
                output_tokens: 57,
            },
            finish: FinishReason::ToolCalls,
        }
    );
    assert!(events.take().is_empty());
}

#[tokio::test]
async fn a_final_answer() {
    let server = TestServer::start(vec![Reply::json(200, FINAL)]).await;
    let openai = provider(&settings(&server.base_url));
    let (result, _) = complete(&openai, &sample_request(["call_a", "call_b"])).await;
    let response = result.expect("answer");
    assert_eq!(
        response.text.as_deref(),
        Some(
            "The mean divided by `len(values) - 1`; it now divides by `len(values)` and the test passes."
        )
    );
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.finish, FinishReason::Stop);
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 655,
            output_tokens: 26
        }
    );
}

#[tokio::test]
async fn openais_own_api_gets_max_completion_tokens_and_needs_a_key() {
    let mut settings = settings("http://unused");
    settings.openai_base_url = "https://api.openai.com/v1/".into();
    let error = OpenAi::with_env("gpt-4.1", &settings, |_| None).expect_err("no key");
    assert_eq!(
        error,
        ProviderError::Config(
            "no API key: set the environment variable AIRLOCK_TEST_OPENAI_KEY".into()
        )
    );
    // The real environment, through `new`: the variable is one nobody sets.
    settings.openai_api_key_env = "AIRLOCK_TEST_UNSET_OPENAI_KEY_3f9c".into();
    let error = OpenAi::new("gpt-4.1", &settings).expect_err("no key");
    assert!(
        matches!(&error, ProviderError::Config(m) if m.contains("AIRLOCK_TEST_UNSET_OPENAI_KEY_3f9c")),
        "{error}"
    );

    let openai = OpenAi::with_env("gpt-4.1", &settings, |_| Some(KEY.into())).expect("key");
    assert!(!format!("{openai:?}").contains(KEY));
    assert_eq!(openai.describe(), "openai:gpt-4.1");
    let body: Value = serde_json::from_slice(
        &openai
            .body(&sample_request(["call_a", "call_b"]))
            .expect("body"),
    )
    .expect("json");
    assert_eq!(body["max_completion_tokens"], 1024);
    assert!(body.get("max_tokens").is_none());
}

#[tokio::test]
async fn streaming_reports_text_and_assembles_tool_calls() {
    let server = TestServer::start(vec![Reply::stream(STREAM, 37)]).await;
    let settings = streaming(&server.base_url);
    let openai = provider(&settings);
    let (result, events) = complete(&openai, &sample_request(["call_a", "call_b"])).await;
    let response = result.expect("answer");

    let sent = &server.requests()[0];
    assert_eq!(sent.body["stream"], true);
    assert_eq!(sent.body["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        events.text(),
        [
            "I'll", " read", " the", " module", " and", " search", " its", " callers", "."
        ]
    );
    // The calls stream too, in pieces that add up to what the answer holds.
    let streamed: Vec<(String, String)> = events
        .calls()
        .into_iter()
        .map(|(_, name, arguments)| (name, arguments))
        .collect();
    let answered: Vec<(String, String)> = response
        .tool_calls
        .iter()
        .map(|call| (call.name.clone(), call.arguments.clone()))
        .collect();
    assert_eq!(streamed, answered);
    assert_eq!(
        response,
        ModelResponse {
            text: Some("I'll read the module and search its callers.".into()),
            tool_calls: vec![
                ToolCall {
                    id: "call_5nJqV0LxW2eYb8Rk1Tz3Cm6H".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"src/calc.py"}"#.into(),
                },
                ToolCall {
                    id: "call_Pz7Dk4Qs1Vn9Ew2Lr6Ya0Xb3".into(),
                    name: "grep".into(),
                    arguments: r#"{"pattern": "mean(","path": "#.into(),
                },
            ],
            usage: Usage {
                input_tokens: 412,
                output_tokens: 61,
            },
            finish: FinishReason::ToolCalls,
        }
    );
}

/// A caller that keeps no exchange gets none, and the reply's pieces are not kept.
#[tokio::test]
async fn no_exchange_is_built_unless_wanted() {
    let server = TestServer::start(vec![Reply::stream(STREAM, 37)]).await;
    let settings = streaming(&server.base_url);
    let seen = std::sync::Mutex::new(Vec::new());
    let sink = |event: ProviderEvent| seen.lock().expect("lock").push(event);
    provider(&settings)
        .complete(&sample_request(["call_a", "call_b"]), &sink)
        .await
        .expect("answer");
    let seen = seen.into_inner().expect("lock");
    assert!(
        seen.iter()
            .any(|e| matches!(e, ProviderEvent::TextDelta(_)))
    );
    assert!(!seen.iter().any(|e| matches!(e, ProviderEvent::Exchange(_))));
}

/// The exchange of the attempt that answered is reported in the wire format, and answers
/// the same request again with the same response and the same pieces; another request
/// is handed to the check.
#[tokio::test]
async fn a_streamed_exchange_is_reported_and_replays() {
    for stream in [true, false] {
        let reply = if stream {
            Reply::stream(STREAM, 37)
        } else {
            Reply::json(200, TOOL_CALLS)
        };
        let server = TestServer::start(vec![reply]).await;
        let mut settings = settings(&server.base_url);
        settings.stream = stream;
        let request = sample_request(["call_a", "call_b"]);
        let (result, events) = complete(&provider(&settings), &request).await;
        let response = result.expect("answer");
        let exchanges = events.exchanges();
        assert_eq!(exchanges.len(), 1);
        let exchange = &exchanges[0];
        assert_eq!(exchange.format, WireFormat::Openai);
        assert_eq!(exchange.request, server.requests()[0].body);
        assert_eq!(matches!(exchange.reply, WireReply::Stream(_)), stream);

        let replayed = Events::default();
        let again = replay(
            &exchange.request,
            &exchange.reply,
            &request,
            |_| Ok(()),
            &replayed,
        )
        .expect("replays");
        assert_eq!(again, response);
        assert_eq!(replayed.text(), events.text());
        // The check sees the request as it would be sent now.
        let mut other = request.clone();
        other.system = "Something else.".into();
        let refused = replay(
            &exchange.request,
            &exchange.reply,
            &other,
            |now| {
                assert_eq!(now["messages"][0]["content"], "Something else.");
                Err(ProviderError::Diverged("differs".into()))
            },
            &Events::default(),
        );
        assert_eq!(refused, Err(ProviderError::Diverged("differs".into())));
    }
}

/// As llama.cpp's server or Ollama may stream: no key, a tool call without id or
/// index, no usage, no `[DONE]` (the finish reason ends the answer).
#[tokio::test]
async fn a_local_server_stream_without_ids_usage_or_done() {
    let stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\": \"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"\\\"README.md\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
    );
    let server = TestServer::start(vec![Reply::stream(stream, 64)]).await;
    let settings = streaming(&server.base_url);
    let openai = OpenAi::with_env("qwen3:8b", &settings, |_| None).expect("no key needed");
    let (result, events) = complete(&openai, &sample_request(["call_a", "call_b"])).await;
    let response = result.expect("answer");
    assert_eq!(header(&server.requests()[0], "authorization"), None);
    assert!(events.text().is_empty());
    // The call streamed, and its pieces join up with no index given.
    assert_eq!(
        events.calls(),
        [(
            String::new(),
            "read_file".to_owned(),
            r#"{"path": "README.md"}"#.to_owned()
        )]
    );
    assert_eq!(
        response.tool_calls,
        vec![ToolCall {
            // The sample conversation holds one assistant message: this is turn 1.
            id: "call_1_0".into(),
            name: "read_file".into(),
            arguments: r#"{"path": "README.md"}"#.into(),
        }]
    );
    assert_eq!(response.text, None);
    assert_eq!(response.finish, FinishReason::ToolCalls);
    let request_bytes = openai
        .body(&sample_request(["call_a", "call_b"]))
        .expect("body")
        .len();
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: estimated_tokens(request_bytes),
            output_tokens: estimated_tokens("read_file".len() + r#"{"path": "README.md"}"#.len()),
        }
    );
}

#[tokio::test]
async fn a_server_that_ignores_stream_is_read_whole() {
    let server = TestServer::start(vec![Reply::json(200, FINAL)]).await;
    let settings = streaming(&server.base_url);
    let (result, events) = complete(&provider(&settings), &sample_request(["a", "b"])).await;
    assert_eq!(result.expect("answer").finish, FinishReason::Stop);
    assert!(events.take().is_empty());
}

#[tokio::test]
async fn a_stream_cut_short_is_retried() {
    let cut = &STREAM[..STREAM
        .find("\"finish_reason\":\"tool_calls\"")
        .expect("finish chunk")];
    let cut = &cut[..cut.rfind("\n\n").expect("a whole chunk") + 2];
    let server = TestServer::start(vec![Reply::stream(cut, 512), Reply::stream(STREAM, 512)]).await;
    let settings = streaming(&server.base_url);
    let (result, events) = complete(&provider(&settings), &sample_request(["a", "b"])).await;
    assert_eq!(result.expect("answer").tool_calls.len(), 2);
    let events = events.take();
    let retries: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            ProviderEvent::Retrying { attempt, error, .. } => Some((*attempt, error.clone())),
            ProviderEvent::TextDelta(_)
            | ProviderEvent::ToolCallDelta { .. }
            | ProviderEvent::Exchange(_) => None,
        })
        .collect();
    assert_eq!(
        retries,
        [(
            1,
            ProviderError::Transport("the answer stream ended before the answer did".into())
                .to_string()
        )]
    );
    // The text streams twice, the second time after the retry was announced.
    let retry_at = events
        .iter()
        .position(|event| matches!(event, ProviderEvent::Retrying { .. }))
        .expect("a retry");
    assert!(matches!(events[retry_at + 1], ProviderEvent::TextDelta(ref text) if text == "I'll"));
}

#[tokio::test]
async fn an_error_inside_a_stream_is_an_http_error() {
    let stream = "data: {\"error\":{\"message\":\"model 'nope' not found\",\"type\":\"invalid_request_error\",\"code\":404}}\n\n";
    let server = TestServer::start(vec![Reply::stream(stream, 512)]).await;
    let settings = streaming(&server.base_url);
    let (result, _) = complete(&provider(&settings), &sample_request(["a", "b"])).await;
    assert_eq!(
        result,
        Err(ProviderError::Http {
            status: 404,
            message: "model 'nope' not found (invalid_request_error)".into()
        })
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn rate_limited_then_answered() {
    let server = TestServer::start(vec![
        Reply::json(429, ERROR_429)
            .with_header("retry-after-ms", "20")
            .with_header("retry-after", "1"),
        Reply::json(200, FINAL),
    ])
    .await;
    let (result, events) = complete(
        &provider(&settings(&server.base_url)),
        &sample_request(["a", "b"]),
    )
    .await;
    assert_eq!(result.expect("answer").finish, FinishReason::Stop);
    assert_eq!(server.requests().len(), 2);
    assert_eq!(server.requests()[0].body, server.requests()[1].body);
    let events = events.take();
    let [
        ProviderEvent::Retrying {
            attempt: 1,
            error,
            delay,
        },
    ] = &events[..]
    else {
        panic!("one retry expected: {events:?}")
    };
    assert_eq!(*delay, Duration::from_millis(20));
    assert!(error.contains("HTTP 429"), "{error}");
    assert!(error.contains("Rate limit reached for gpt-4.1"), "{error}");
}

#[tokio::test]
async fn server_errors_until_the_attempts_run_out() {
    let server = TestServer::start(vec![
        Reply::json(500, ERROR_500),
        Reply::json(500, ERROR_500),
        Reply::json(500, ERROR_500),
        Reply::json(200, FINAL),
    ])
    .await;
    let (result, events) = complete(
        &provider(&settings(&server.base_url)),
        &sample_request(["a", "b"]),
    )
    .await;
    assert_eq!(
            result,
            Err(ProviderError::RetriesExhausted {
                attempts: 3,
                last: Box::new(ProviderError::Http {
                    status: 500,
                    message: "The server had an error while processing your request. Sorry about that! (server_error)".into()
                }),
            })
        );
    assert_eq!(server.requests().len(), 3);
    let attempts: Vec<u32> = events
        .take()
        .iter()
        .map(|event| match event {
            ProviderEvent::Retrying { attempt, .. } => *attempt,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(attempts, [1, 2]);
}

#[tokio::test]
async fn a_bad_request_is_not_retried() {
    let server =
        TestServer::start(vec![Reply::json(400, ERROR_400), Reply::json(200, FINAL)]).await;
    let (result, events) = complete(
        &provider(&settings(&server.base_url)),
        &sample_request(["a", "b"]),
    )
    .await;
    let Err(ProviderError::Http {
        status: 400,
        message,
    }) = result
    else {
        panic!("HTTP 400 expected: {result:?}")
    };
    assert!(
        message.starts_with("Invalid 'messages[3].tool_call_id'"),
        "{message}"
    );
    assert!(message.ends_with("(invalid_request_error)"), "{message}");
    assert_eq!(server.requests().len(), 1);
    assert!(events.take().is_empty());
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let server = TestServer::start(vec![Reply::Hang, Reply::Hang]).await;
    let mut settings = settings(&server.base_url);
    settings.request_timeout = Duration::from_millis(200);
    settings.retry.max_attempts = 2;
    let (result, events) = complete(&provider(&settings), &sample_request(["a", "b"])).await;
    assert_eq!(
        result,
        Err(ProviderError::RetriesExhausted {
            attempts: 2,
            last: Box::new(ProviderError::Timeout(Duration::from_millis(200))),
        })
    );
    assert_eq!(server.requests().len(), 2);
    assert_eq!(events.take().len(), 1);
}

#[tokio::test]
async fn a_malformed_body_is_reported_not_retried() {
    let server = TestServer::start(vec![
        Reply::json(
            200,
            "{\"id\": \"chatcmpl-1\", \"choices\": [{\"index\": 0, \"message\": ",
        ),
        Reply::json(200, FINAL),
    ])
    .await;
    let (result, _) = complete(
        &provider(&settings(&server.base_url)),
        &sample_request(["a", "b"]),
    )
    .await;
    assert!(
        matches!(&result, Err(ProviderError::Malformed(m)) if m.starts_with("chat completion: EOF")),
        "{result:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn an_unreachable_server_is_a_transport_error() {
    // Bind a port, then free it: nothing listens there. On 127.0.0.2, where no test server
    // binds, so the freed port cannot be handed to another test's server meanwhile.
    let port = std::net::TcpListener::bind("127.0.0.2:0")
        .and_then(|listener| listener.local_addr())
        .expect("free port")
        .port();
    let mut settings = settings(&format!("http://127.0.0.2:{port}"));
    settings.retry.max_attempts = 1;
    let (result, _) = complete(&provider(&settings), &sample_request(["a", "b"])).await;
    let Err(ProviderError::RetriesExhausted { attempts: 1, last }) = &result else {
        panic!("exhausted retries expected: {result:?}")
    };
    assert!(
        matches!(&**last, ProviderError::Transport(m) if m.contains("onnect")),
        "{last}"
    );
}

#[test]
fn assistant_messages_without_text_or_calls_still_have_content() {
    let request = ModelRequest {
        system: String::new(),
        messages: vec![
            Message::User { text: "hi".into() },
            Message::Assistant {
                text: None,
                tool_calls: vec![],
            },
        ],
        tools: Vec::new().into(),
        max_output_tokens: 10,
        temperature: None,
        answers: 1,
        purpose: super::super::Purpose::Step,
    };
    let wire = serde_json::to_value(wire_messages(&request)).expect("json");
    assert_eq!(
        wire,
        json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": ""}
        ])
    );
}
