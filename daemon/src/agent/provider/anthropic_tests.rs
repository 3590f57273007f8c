//! Tests of the `anthropic` provider against the test server: request bodies, streamed and
//! whole answers, roles and tool results, retries and errors.

use std::time::Duration;

use serde_json::json;

use super::super::test_server::{
    Events, Reply, TestServer, complete, header, sample_request, settings, streaming,
};
use super::*;

const TOOL_USE: &str = include_str!("testdata/anthropic_tool_use.json");
const FINAL: &str = include_str!("testdata/anthropic_final.json");
const STREAM: &str = include_str!("testdata/anthropic_stream_tool_use.sse");
const ERROR_429: &str = include_str!("testdata/anthropic_error_429.json");
const ERROR_529: &str = include_str!("testdata/anthropic_error_529.json");
const ERROR_400: &str = include_str!("testdata/anthropic_error_400.json");

const KEY: &str = "sk-ant-test-0123456789";
const IDS: [&str; 2] = [
    "toolu_01D7FLrfh4GYq7yT1ULFeyMV",
    "toolu_01NCdQ5xU8Lq9fXfPUm1qRrT",
];

fn provider(settings: &ProviderSettings) -> Anthropic {
    Anthropic::with_env("claude-sonnet-4-20250514", settings, |name| {
        (name == "AIRLOCK_TEST_ANTHROPIC_KEY").then(|| KEY.to_owned())
    })
    .expect("provider")
}

#[tokio::test]
async fn request_shape_and_tool_use() {
    let server = TestServer::start(vec![Reply::json(200, TOOL_USE)]).await;
    let anthropic = provider(&settings(&server.base_url));
    let request = sample_request(IDS);
    let (result, events) = complete(&anthropic, &request).await;
    let response = result.expect("answer");

    let [sent] = &server.requests()[..] else {
        panic!("one request expected: {:?}", server.requests())
    };
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(header(sent, "x-api-key"), Some(KEY));
    assert_eq!(header(sent, "anthropic-version"), Some("2023-06-01"));
    assert_eq!(header(sent, "authorization"), None);
    assert_eq!(header(sent, "content-type"), Some("application/json"));
    let Message::Tool {
        content: read_result,
        ..
    } = &request.messages[2]
    else {
        panic!("the sample's third message is an observation")
    };
    let expected = json!({
        "model": "claude-sonnet-4-20250514",
        "max_tokens": 1024,
        "system": "You fix bugs in the workspace.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "test_mean fails. Fix it."}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me look at the code."},
                {"type": "tool_use", "id": IDS[0], "name": "read_file",
                 "input": {"path": "src/calc.py"}},
                {"type": "tool_use", "id": IDS[1], "name": "grep",
                 "input": {"pattern": "mean(", "path": "tests"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": IDS[0], "content": read_result},
                {"type": "tool_result", "tool_use_id": IDS[1], "is_error": true,
                 "content": "{\"status\":\"TOOL_ERROR\",\"error\":\"no such directory: tests\"}"}
            ]}
        ],
        "tools": [
            {"name": "read_file", "description": "Reads a file of the workspace.",
             "input_schema": request.tools[0].input_schema},
            {"name": "grep", "description": "Searches files for a pattern.",
             "input_schema": request.tools[1].input_schema}
        ],
        "temperature": 0.2
    });
    assert_eq!(sent.body, expected);

    assert_eq!(
        response,
        ModelResponse {
            text: Some("I'll read the module and search for its callers.".into()),
            tool_calls: vec![
                ToolCall {
                    id: "toolu_01D7FLrfh4GYq7yT1ULFeyMV".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"src/calc.py"}"#.into(),
                },
                ToolCall {
                    id: "toolu_01NCdQ5xU8Lq9fXfPUm1qRrT".into(),
                    name: "list_dir".into(),
                    arguments: "{}".into(),
                },
            ],
            usage: Usage {
                input_tokens: 472,
                output_tokens: 112,
            },
            finish: FinishReason::ToolCalls,
        }
    );
    assert!(events.take().is_empty());
}

#[tokio::test]
async fn a_final_answer_counts_cached_input() {
    let server = TestServer::start(vec![Reply::json(200, FINAL)]).await;
    let (result, _) = complete(&provider(&settings(&server.base_url)), &sample_request(IDS)).await;
    assert_eq!(
        result.expect("answer"),
        ModelResponse {
            text: Some("Fixed: `mean` now divides by `len(values)`.".into()),
            tool_calls: vec![],
            usage: Usage {
                input_tokens: 690 + 128,
                output_tokens: 18,
            },
            finish: FinishReason::Stop,
        }
    );
}

#[tokio::test]
async fn a_streamed_exchange_is_reported_and_replays() {
    let server = TestServer::start(vec![Reply::stream(STREAM, 41)]).await;
    let request = sample_request(IDS);
    let (result, events) = complete(&provider(&streaming(&server.base_url)), &request).await;
    let response = result.expect("answer");
    let exchanges = events.exchanges();
    assert_eq!(exchanges.len(), 1);
    let exchange = &exchanges[0];
    assert_eq!(exchange.format, WireFormat::Anthropic);
    assert_eq!(exchange.request, server.requests()[0].body);
    let WireReply::Stream(data) = &exchange.reply else {
        panic!("a streamed reply is recorded as its events")
    };
    assert!(data.iter().any(|data| data.contains("message_stop")));
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
}

#[tokio::test]
async fn streaming_reports_text_and_assembles_tool_use() {
    let server = TestServer::start(vec![Reply::stream(STREAM, 41)]).await;
    let (result, events) = complete(
        &provider(&streaming(&server.base_url)),
        &sample_request(IDS),
    )
    .await;
    assert_eq!(server.requests()[0].body["stream"], true);
    assert_eq!(
        events.text(),
        ["I'll read", " the module", " and list", " the directory."]
    );
    assert_eq!(
        result.expect("answer"),
        ModelResponse {
            text: Some("I'll read the module and list the directory.".into()),
            tool_calls: vec![
                ToolCall {
                    id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
                    name: "read_file".into(),
                    // The pieces as streamed, not re-serialised.
                    arguments: r#"{"path": "src/calc.py"}"#.into(),
                },
                ToolCall {
                    id: "toolu_01VbD7k8hWq2pYc5s3RmNx4E".into(),
                    name: "list_dir".into(),
                    arguments: "{}".into(),
                },
            ],
            usage: Usage {
                input_tokens: 472,
                output_tokens: 89,
            },
            finish: FinishReason::ToolCalls,
        }
    );
}

#[tokio::test]
async fn an_overloaded_error_inside_a_stream_is_retried() {
    let overloaded = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-20250514\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":472,\"output_tokens\":1}}}\n\n",
        "event: error\n",
        "data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
    );
    let server = TestServer::start(vec![
        Reply::stream(overloaded, 512),
        Reply::stream(STREAM, 512),
    ])
    .await;
    let (result, events) = complete(
        &provider(&streaming(&server.base_url)),
        &sample_request(IDS),
    )
    .await;
    assert_eq!(result.expect("answer").tool_calls.len(), 2);
    let events = events.take();
    let ProviderEvent::Retrying {
        attempt: 1, error, ..
    } = &events[0]
    else {
        panic!("a retry first: {events:?}")
    };
    assert_eq!(
        *error,
        ProviderError::Http {
            status: 529,
            message: "Overloaded (overloaded_error)".into()
        }
        .to_string()
    );
}

#[tokio::test]
async fn a_stream_cut_before_message_stop_is_retried() {
    let cut = &STREAM[..STREAM.find("event: message_delta").expect("message_delta")];
    let server = TestServer::start(vec![Reply::stream(cut, 512), Reply::json(200, FINAL)]).await;
    let (result, events) = complete(
        &provider(&streaming(&server.base_url)),
        &sample_request(IDS),
    )
    .await;
    assert_eq!(result.expect("answer").finish, FinishReason::Stop);
    assert!(events.take().iter().any(|event| matches!(
        event,
        ProviderEvent::Retrying { attempt: 1, error, .. }
            if error.contains("ended before message_stop")
    )));
}

#[tokio::test]
async fn rate_limited_then_answered() {
    let server = TestServer::start(vec![
        Reply::json(429, ERROR_429).with_header("retry-after", "1"),
        Reply::json(200, FINAL),
    ])
    .await;
    let (result, events) =
        complete(&provider(&settings(&server.base_url)), &sample_request(IDS)).await;
    assert_eq!(result.expect("answer").finish, FinishReason::Stop);
    assert_eq!(server.requests().len(), 2);
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
    assert_eq!(*delay, Duration::from_secs(1));
    assert!(error.contains("HTTP 429"), "{error}");
    assert!(error.contains("(rate_limit_error)"), "{error}");
}

#[tokio::test]
async fn overloaded_until_the_attempts_run_out() {
    let server = TestServer::start(vec![
        Reply::json(529, ERROR_529),
        Reply::json(529, ERROR_529),
        Reply::json(529, ERROR_529),
    ])
    .await;
    let (result, events) =
        complete(&provider(&settings(&server.base_url)), &sample_request(IDS)).await;
    assert_eq!(
        result,
        Err(ProviderError::RetriesExhausted {
            attempts: 3,
            last: Box::new(ProviderError::Http {
                status: 529,
                message: "Overloaded (overloaded_error)".into()
            }),
        })
    );
    assert_eq!(server.requests().len(), 3);
    assert_eq!(events.take().len(), 2);
}

#[tokio::test]
async fn a_bad_request_is_not_retried() {
    let server =
        TestServer::start(vec![Reply::json(400, ERROR_400), Reply::json(200, FINAL)]).await;
    let (result, events) =
        complete(&provider(&settings(&server.base_url)), &sample_request(IDS)).await;
    let Err(ProviderError::Http {
        status: 400,
        message,
    }) = result
    else {
        panic!("HTTP 400 expected: {result:?}")
    };
    assert!(
        message.starts_with("messages.2.content.0: unexpected `tool_use_id`"),
        "{message}"
    );
    assert_eq!(server.requests().len(), 1);
    assert!(events.take().is_empty());
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let server = TestServer::start(vec![Reply::Hang]).await;
    let mut settings = settings(&server.base_url);
    settings.request_timeout = Duration::from_millis(200);
    settings.retry.max_attempts = 1;
    let (result, _) = complete(&provider(&settings), &sample_request(IDS)).await;
    assert_eq!(
        result,
        Err(ProviderError::RetriesExhausted {
            attempts: 1,
            last: Box::new(ProviderError::Timeout(Duration::from_millis(200))),
        })
    );
}

#[tokio::test]
async fn a_malformed_body_is_reported_not_retried() {
    let server = TestServer::start(vec![
        Reply::json(
            200,
            "{\"type\":\"message\",\"content\":[{\"type\":\"text\",\"text\":",
        ),
        Reply::json(200, FINAL),
    ])
    .await;
    let (result, _) = complete(&provider(&settings(&server.base_url)), &sample_request(IDS)).await;
    assert!(
        matches!(&result, Err(ProviderError::Malformed(m)) if m.starts_with("message: EOF")),
        "{result:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn the_official_api_needs_a_key_others_may_not() {
    let mut settings = settings("http://127.0.0.1:9");
    let local = Anthropic::with_env("claude-x", &settings, |_| None).expect("no key needed");
    assert!(local.headers.get("x-api-key").is_none());
    settings.anthropic_base_url = "https://api.anthropic.com".into();
    assert_eq!(
        Anthropic::with_env("claude-x", &settings, |_| None).expect_err("no key"),
        ProviderError::Config(
            "no API key: set the environment variable AIRLOCK_TEST_ANTHROPIC_KEY".into()
        )
    );
    let anthropic = provider(&settings);
    assert_eq!(anthropic.describe(), "anthropic:claude-sonnet-4-20250514");
    assert!(!format!("{anthropic:?}").contains(KEY));
}

#[test]
fn roles_alternate_and_tool_results_come_first() {
    let messages = vec![
        Message::User { text: "go".into() },
        Message::Assistant {
            text: Some(String::new()),
            tool_calls: vec![ToolCall {
                id: "toolu_1".into(),
                name: "grep".into(),
                arguments: r#"{"pattern": "#.into(),
            }],
        },
        Message::User {
            text: "also check the docs".into(),
        },
        Message::Tool {
            call_id: "toolu_1".into(),
            name: "grep".into(),
            content: "{\"status\":\"INVALID_ARGUMENTS\"}".into(),
            is_error: true,
        },
        Message::Assistant {
            text: None,
            tool_calls: vec![],
        },
        Message::User {
            text: "well?".into(),
        },
    ];
    let wire = serde_json::to_value(wire_messages(&messages)).expect("json");
    assert_eq!(
        wire,
        json!([
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
            {"role": "assistant", "content": [
                // Invalid arguments cannot be an `input`; the observation says why.
                {"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": true,
                 "content": "{\"status\":\"INVALID_ARGUMENTS\"}"},
                {"type": "text", "text": "also check the docs"},
                {"type": "text", "text": "well?"}
            ]}
        ])
    );
}
