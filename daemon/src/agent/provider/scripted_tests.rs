//! Tests of the `scripted` model: parsing scripts (and saying where they are wrong), answering
//! turns and alternatives, compaction and size limits.

use serde_json::json;

use super::super::ToolDefinition;
use super::*;

/// The module documentation's example, with real content.
const EXAMPLE: &str = r#"
turns:
  - text: "Let me look."
    tool_calls:
      - name: read_file
        arguments: {path: src/calc.py}
      - name: grep
        arguments_raw: '{"pattern": '
  - alternatives:
      - when: {status: OK, contains: "len(values) - 1", tool: read_file}
        tool_calls:
          - name: write_file
            arguments: {path: src/calc.py, content: "return sum(values) / len(values)\n"}
      - final: "I could not find the bug."
  - final: "Fixed."
    usage: {input_tokens: 10, output_tokens: 3}
    delay_ms: 1
"#;

fn request(messages: Vec<Message>) -> ModelRequest {
    // As the loop counts them: every answer is in the conversation here.
    let answers = messages
        .iter()
        .filter(|message| matches!(message, Message::Assistant { .. }))
        .count();
    ModelRequest {
        answers: u32::try_from(answers).expect("few"),
        purpose: Purpose::Step,
        system: "You fix bugs.".into(),
        messages,
        tools: vec![ToolDefinition {
            name: "read_file".into(),
            description: "Reads a file.".into(),
            input_schema: json!({"type": "object"}),
        }]
        .into(),
        max_output_tokens: 100,
        temperature: None,
    }
}

fn user() -> Message {
    Message::User {
        text: "Fix the failing test.".into(),
    }
}

/// An assistant message as the loop records the model's answer.
fn assistant(response: &ModelResponse) -> Message {
    Message::Assistant {
        text: response.text.clone(),
        tool_calls: response.tool_calls.clone(),
    }
}

fn observation(call: &ToolCall, content: &str, is_error: bool) -> Message {
    Message::Tool {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content: content.into(),
        is_error,
    }
}

async fn complete(
    script: &Scripted,
    request: &ModelRequest,
) -> Result<ModelResponse, ProviderError> {
    script
        .complete(request, &|_: super::super::ProviderEvent| {})
        .await
}

fn config_error(script: &str) -> String {
    match Scripted::parse(script) {
        Err(ProviderError::Config(message)) => message,
        other => panic!("a configuration error expected, got {other:?}"),
    }
}

#[tokio::test]
async fn plays_the_example_run() {
    let script = Scripted::parse(EXAMPLE).expect("valid script");
    assert_eq!(script.describe(), "scripted");

    let mut messages = vec![user()];
    let first = complete(&script, &request(messages.clone()))
        .await
        .expect("turn 0");
    assert_eq!(first.text.as_deref(), Some("Let me look."));
    assert_eq!(
        first.tool_calls,
        vec![
            ToolCall {
                id: "call_0_0".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"src/calc.py"}"#.into(),
            },
            ToolCall {
                id: "call_0_1".into(),
                name: "grep".into(),
                arguments: r#"{"pattern": "#.into(),
            },
        ]
    );
    assert_eq!(first.finish, FinishReason::ToolCalls);
    let expected_input = "You fix bugs.".len()
        + "Fix the failing test.".len()
        + "read_file".len()
        + "Reads a file.".len()
        + r#"{"type":"object"}"#.len();
    assert_eq!(
        first.usage,
        Usage {
            input_tokens: estimated_tokens(expected_input),
            output_tokens: estimated_tokens(
                "Let me look.".len() + "read_file".len() + 22 + "grep".len() + 12
            ),
        }
    );

    messages.push(assistant(&first));
    messages.push(observation(
        &first.tool_calls[0],
        r#"{"status":"OK","content":"return sum(values) / (len(values) - 1)"}"#,
        false,
    ));
    let second = complete(&script, &request(messages.clone()))
        .await
        .expect("turn 1");
    assert_eq!(second.tool_calls[0].id, "call_1_0");
    assert_eq!(second.tool_calls[0].name, "write_file");
    assert_eq!(
        second.tool_calls[0].arguments,
        r#"{"content":"return sum(values) / len(values)\n","path":"src/calc.py"}"#
    );
    assert_eq!(second.text, None);

    messages.push(assistant(&second));
    messages.push(observation(
        &second.tool_calls[0],
        r#"{"status":"OK"}"#,
        false,
    ));
    let third = complete(&script, &request(messages.clone()))
        .await
        .expect("turn 2");
    assert_eq!(
        third,
        ModelResponse {
            text: Some("Fixed.".into()),
            tool_calls: vec![],
            usage: Usage {
                input_tokens: 10,
                output_tokens: 3
            },
            finish: FinishReason::Stop,
        }
    );

    messages.push(assistant(&third));
    let past_the_end = complete(&script, &request(messages)).await;
    assert_eq!(
        past_the_end,
        Err(ProviderError::ScriptExhausted(
            "the conversation is at turn 3, the script has 3 turns".into()
        ))
    );
}

#[tokio::test]
async fn the_same_request_gets_the_same_answer() {
    let one = Scripted::parse(EXAMPLE).expect("valid script");
    let other = Scripted::parse(EXAMPLE).expect("valid script");
    let first = complete(&one, &request(vec![user()]))
        .await
        .expect("turn 0");
    let messages = vec![
        user(),
        assistant(&first),
        observation(&first.tool_calls[0], "len(values) - 1", false),
    ];
    let request = request(messages);
    let answers = [
        complete(&one, &request).await,
        complete(&one, &request).await,
        complete(&other, &request).await,
    ];
    assert!(answers[0].is_ok());
    assert_eq!(answers[0], answers[1]);
    assert_eq!(answers[0], answers[2]);
}

#[tokio::test]
async fn alternatives_follow_the_last_observation() {
    let script = Scripted::parse(
        r#"
turns:
  - tool_calls: [{name: run_tests}]
  - alternatives:
      - when: {status: OK}
        final: ok
      - when: {status: TOOL_ERROR, tool: run_tests}
        final: tool error
      - when: {contains: "timed out"}
        final: slow
"#,
    )
    .expect("valid script");
    let first = complete(&script, &request(vec![user()]))
        .await
        .expect("turn 0");
    assert_eq!(first.tool_calls[0].arguments, "{}");
    let call = &first.tool_calls[0];
    let answer = |content: &'static str, is_error: bool| {
        let request = request(vec![
            user(),
            assistant(&first),
            observation(call, content, is_error),
        ]);
        let script = script.clone();
        async move {
            complete(&script, &request)
                .await
                .map(|response| response.text)
        }
    };
    let text = |s: &str| Ok(Some(s.to_owned()));
    assert_eq!(
        answer(r#"{"status":"OK","content":"3 passed"}"#, false).await,
        text("ok")
    );
    // Content that is not a JSON object has status OK unless it is an error.
    assert_eq!(answer("3 passed", false).await, text("ok"));
    assert_eq!(
        answer(r#"{"status":"TOOL_ERROR"}"#, true).await,
        text("tool error")
    );
    // An error is never OK, whatever its content says.
    let denied = answer(r#"{"status":"OK","note":"timed out"}"#, true).await;
    assert_eq!(denied, text("slow"));
    let none = answer(r#"{"status":"DENIED"}"#, true).await;
    assert_eq!(
            none,
            Err(ProviderError::ScriptExhausted(
                "no alternative of turns[1] matches the last observation (tool run_tests, status DENIED, error true)".into()
            ))
        );
}

#[tokio::test]
async fn a_condition_never_matches_before_the_first_observation() {
    let script = Scripted::parse(
            r#"{"turns": [{"alternatives": [{"when": {"tool": "read_file"}, "final": "read"}, {"when": {}, "final": "start"}]}]}"#,
        )
        .expect("JSON is a script too");
    let response = complete(&script, &request(vec![user()]))
        .await
        .expect("turn 0");
    assert_eq!(response.text.as_deref(), Some("start"));
}

#[tokio::test]
async fn a_delay_can_be_abandoned() {
    let script = Scripted::parse("turns: [{final: late, delay_ms: 600000}]").expect("valid");
    let request = request(vec![user()]);
    let call = complete(&script, &request);
    // Dropping the call, as the loop does on cancellation, ends it long before the delay.
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(50), call)
            .await
            .is_err()
    );
}

#[test]
fn invalid_scripts_say_where() {
    // What the parser checks comes with the path, the line and the column.
    let message =
        config_error("turns:\n  - final: done\n  - tool_calls:\n      - nme: read_file\n");
    assert_eq!(
        message,
        "script: turns[1].tool_calls[0]: unknown field `nme`, expected one of `name`, \
             `arguments`, `arguments_raw` at line 4 column 9"
    );
    let message =
        config_error("turns:\n  - alternatives:\n      - when: {state: OK}\n        final: a\n");
    assert!(
        message.starts_with("script: turns[0].alternatives[0].when: unknown field `state`"),
        "{message}"
    );
    assert!(message.ends_with("at line 3 column 16"), "{message}");
    let message = config_error("turns:\n  - final: [unclosed\n");
    assert!(message.starts_with("script: turns[0].final: "), "{message}");
    assert!(message.contains("line 2"), "{message}");
    assert_eq!(
        config_error("steps: []"),
        "script: unknown field `steps`, expected one of `turns`, `stream`, `compaction`"
    );
    assert_eq!(config_error(""), "script: missing field `turns`");

    // What the script's own rules check comes with the path.
    let cases = [
        (
            "turns:\n  - final: done\n  - final: done\n    tool_calls: [{name: x}]\n",
            "turns[1]: `tool_calls` and `final` exclude each other",
        ),
        (
            "turns: [{text: hi}]",
            "turns[0]: an answer needs `tool_calls` or `final`",
        ),
        (
            "turns: [{final: a, text: b}]",
            "turns[0]: `text` goes with `tool_calls`; a final answer's text is `final`",
        ),
        (
            "turns: [{tool_calls: []}]",
            "turns[0]: `tool_calls` is empty; write `final` for an answer without calls",
        ),
        (
            "turns:\n  - tool_calls:\n      - {name: a}\n      - {name: b, arguments: {}, arguments_raw: '{}'}\n",
            "turns[0].tool_calls[1]: `arguments` and `arguments_raw` exclude each other",
        ),
        (
            "turns: [{tool_calls: [{name: ''}]}]",
            "turns[0].tool_calls[0]: `name` is empty",
        ),
        (
            "turns: [{final: a, delay_ms: 600001}]",
            "turns[0].delay_ms: 600001, more than the 600000 allowed",
        ),
        (
            "turns:\n  - alternatives: [{final: a}]\n    text: b\n",
            "turns[0]: a turn with `alternatives` has nothing else; `text` belongs in an alternative",
        ),
        (
            "turns: [{alternatives: []}]",
            "turns[0]: `alternatives` is empty",
        ),
        (
            "turns:\n  - final: a\n  - alternatives:\n      - final: a\n      - {when: {status: OK}}\n",
            "turns[1].alternatives[1]: an answer needs `tool_calls` or `final`",
        ),
        ("turns: []", "`turns` is empty"),
    ];
    for (script, expected) in cases {
        assert_eq!(
            config_error(script),
            format!("script: {expected}"),
            "{script}"
        );
    }
}

#[test]
fn size_limits() {
    let huge = format!("turns: [{{final: \"{}\"}}]", "x".repeat(MAX_SCRIPT_BYTES));
    let message = config_error(&huge);
    assert!(message.contains("allowed"), "{message}");

    // Aliases that would expand to billions of nodes are refused, not expanded.
    let mut bomb = String::from("turns:\n  - tool_calls:\n      - name: x\n        arguments:\n");
    bomb.push_str("          a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..12u8 {
        let previous = char::from(b'a' + level - 1);
        let name = char::from(b'a' + level);
        let refs = vec![format!("*{previous}"); 10].join(", ");
        bomb.push_str(&format!("          {name}: &{name} [{refs}]\n"));
    }
    let message = config_error(&bomb);
    assert!(message.contains("repetition limit exceeded"), "{message}");
}
