//! Tests of a run's kept exchanges: the stored form (deltas against each purpose's last)
//! gives the cassette back every request as sent, through a compaction and a resume, and a
//! cassette that lost an exchange is refused for what it lost.

use serde_json::json;

use super::*;
use crate::domain::Usage;
use crate::ids::{SessionId, TraceId};
use crate::store::RunState;

fn message(role: &str, text: &str) -> Value {
    json!({ "role": role, "content": text })
}

/// A wire request of `messages`, with the system text and tools a step's carries.
fn step(messages: &[Value]) -> Value {
    json!({
        "model": "gpt-test",
        "messages": messages,
        "tools": [{ "type": "function", "function": { "name": "read_file" } }],
    })
}

fn call(purpose: Purpose, answers: u32) -> ModelRequest {
    ModelRequest {
        system: String::new(),
        messages: Vec::new(),
        tools: Arc::new([]),
        max_output_tokens: 100,
        temperature: None,
        answers,
        purpose,
    }
}

fn exchange(request: &Value) -> Exchange {
    Exchange {
        format: WireFormat::Openai,
        request: request.clone(),
        // As a cassette writes it (the type is the provider module's own).
        reply: serde_json::from_value(json!({ "whole": { "choices": [] } })).expect("a reply"),
    }
}

fn record(model_calls: u32) -> RunRecord {
    RunRecord {
        run_id: RunId::new(),
        session_id: SessionId::new(),
        state: RunState::Finished,
        start: pb::StartRun::default(),
        model: "openai:gpt-test".into(),
        workspace: None,
        trace_id: TraceId::new(),
        created_at_ms: 0,
        finished_at_ms: Some(1),
        stop_reason: None,
        stop_detail: String::new(),
        final_text: String::new(),
        usage: Usage {
            model_calls,
            ..Usage::default()
        },
        steps: model_calls,
        last_seq: 1,
        tenant: String::new(),
    }
}

/// Six calls as a run makes them: two steps, a compaction, a step over the compacted
/// conversation; then the daemon restarts (a new recording) and two more steps.
fn a_run() -> (Vec<(Purpose, Value)>, Vec<String>) {
    let history: Vec<Value> = (0..8)
        .map(|i| message("tool", &format!("observation {i}")))
        .collect();
    let mut compacted = vec![message("user", "goal"), message("user", "summary")];
    compacted.extend_from_slice(&history[5..]);
    let mut resumed = compacted.clone();
    resumed.push(message("assistant", "after the restart"));
    let mut last = resumed.clone();
    last.push(message("tool", "one more"));
    let calls = vec![
        (Purpose::Step, step(&history[..4])),
        (Purpose::Step, step(&history)),
        (
            Purpose::Compaction,
            json!({ "model": "gpt-test", "messages": [message("user", "summarise")] }),
        ),
        (Purpose::Step, step(&compacted)),
        (Purpose::Step, step(&resumed)),
        (Purpose::Step, step(&last)),
    ];
    let (before, after) = (Kept::default(), Kept::default());
    let texts = calls
        .iter()
        .enumerate()
        .map(|(at, (purpose, request))| {
            let kept = if at < 4 { &before } else { &after };
            kept.encode(
                "openai:gpt-test".into(),
                &call(*purpose, at as u32),
                exchange(request),
            )
            .expect("encodes")
        })
        .collect();
    (calls, texts)
}

#[test]
fn every_request_comes_back_as_sent_through_a_compaction_and_a_restart() {
    let (calls, texts) = a_run();
    let delta = |text: &String| text.contains("\"delta\"");
    // Stored against the one before of its purpose, but a purpose's first and the first
    // after the restart.
    assert_eq!(
        texts.iter().map(delta).collect::<Vec<_>>(),
        [false, true, false, true, false, true]
    );
    let cassette = cassette(&record(6), None, &texts).expect("a cassette");
    let requests: Vec<&Value> = cassette.exchanges.iter().map(|e| &e.request).collect();
    let sent: Vec<&Value> = calls.iter().map(|(_, request)| request).collect();
    assert_eq!(requests, sent);
    assert_eq!(cassette.exchanges[2].purpose, Purpose::Compaction);
}

#[test]
fn a_cassette_missing_an_exchange_is_refused_for_what_it_lost() {
    let (_, mut texts) = a_run();
    texts.remove(1);
    let err = cassette(&record(6), None, &texts).expect_err("incomplete");
    assert!(err.to_string().contains("kept 5 of its 6"), "{err}");
    // Had the count not shown it, the step after the lost one would not be read against
    // the one before that.
    let err = cassette(&record(5), None, &texts).expect_err("another request");
    assert!(err.to_string().contains("another request"), "{err}");
}
