//! Tests of the run's saved state: a state survives encoding, and the earlier forms still decode.

use super::*;

fn call() -> ToolCall {
    ToolCall {
        id: "call_0_0".into(),
        name: "write_file".into(),
        arguments: "{\"path\": ".into(),
    }
}

#[test]
fn a_state_survives_encoding() {
    let step_id = StepId::new();
    let mut state = LoopState::start("fix it");
    state.conversation.push(Entry {
        message: Message::Assistant {
            text: None,
            tool_calls: vec![call()],
        },
        source: step_id.to_string(),
        part: Part::Run,
        counted: Counted::default(),
    });
    state.turn_id = Some(TurnId::new());
    state.project_instructions = Some("run the tests with make".into());
    state.calibration = CalibrationState {
        factor: 1.17,
        samples: 3,
    };
    state.compaction_retry_step = Some(9);
    state.usage = Usage {
        input_tokens: 10,
        output_tokens: 5,
        model_calls: 1,
        tool_calls: 0,
    };
    state.steps = 1;
    state.failures = [(
        FailureKey {
            tool: "grep".into(),
            arguments: "{}".into(),
        },
        2,
    )]
    .into();
    state.elapsed_ms = 1234;
    state.pending = Some(PendingStep {
        step_id,
        calls: vec![(SavedCall::from(&call()), CallId::new())],
        next: 0,
    });
    let encoded = state.snapshot().encode(0);
    assert_eq!(encoded.entries.len(), 2);
    let decoded = LoopState::decode(&encoded.state, &encoded.entries).expect("decodes");
    assert_eq!(decoded, state);
    assert!(LoopState::decode(b"{\"garbage\": 1}", &[]).is_err());
}

#[test]
fn a_checkpoint_writes_the_entries_after_those_saved_and_reads_whole() {
    let mut state = LoopState::start("fix it");
    let first = state.snapshot().encode(0);
    assert_eq!(first.entries.len(), 1);
    for text in ["one", "two"] {
        state.conversation.push(Entry {
            message: Message::User { text: text.into() },
            source: String::new(),
            part: Part::Run,
            counted: Counted::default(),
        });
    }
    let next = state.snapshot().encode(1);
    assert_eq!(next.entries.len(), 2, "only the entries after the first");
    let mut held = first.entries.clone();
    held.extend(next.entries.iter().cloned());
    let decoded = LoopState::decode(&next.state, &held).expect("decodes");
    assert_eq!(decoded.conversation, state.conversation);
    // A conversation missing an entry, or with one too many, is refused, not shortened.
    let err = LoopState::decode(&next.state, &held[..2]).expect_err("short");
    assert!(err.contains("2 of its 3 entries"), "{err}");
    held.push(held[0].clone());
    assert!(LoopState::decode(&next.state, &held).is_err());
    let err = LoopState::decode(
        &next.state,
        &[b"{}".to_vec(), held[1].clone(), held[2].clone()],
    )
    .expect_err("a broken entry");
    assert!(err.contains("entry 0"), "{err}");
    // Past the end: nothing to write.
    assert!(state.snapshot().encode(9).entries.is_empty());
}

#[test]
fn a_checkpoint_of_version_3_with_its_conversation_inline_is_read() {
    let third = br#"{
            "version": 3,
            "conversation": [
                {"message": {"role": "user", "text": "fix it"}, "source": "", "part": "goal"},
                {"message": {"role": "user", "text": "more"}, "source": "stp_1"}
            ],
            "usage": {"input_tokens": 3, "output_tokens": 1, "model_calls": 1, "tool_calls": 0},
            "steps": 1,
            "failures": [],
            "elapsed_ms": 50,
            "pending": null
        }"#;
    let state = LoopState::decode(third, &[]).expect("read");
    assert_eq!(state.conversation.len(), 2);
    assert_eq!(state.conversation[1].source, "stp_1");
    assert_eq!(state.conversation[0].part, Part::Goal);
}

#[test]
fn a_checkpoint_of_the_previous_release_is_read() {
    // As version 1 wrote it: messages and their sources side by side.
    let first = br#"{
            "conversation": [
                {"role": "user", "text": "fix it"},
                {"role": "assistant", "text": null, "tool_calls": [{"id": "c1", "name": "grep", "arguments": "{}"}]}
            ],
            "sources": ["", "stp_1"],
            "usage": {"input_tokens": 3, "output_tokens": 1, "model_calls": 1, "tool_calls": 0},
            "steps": 1,
            "failures": {"grep\u0000{}": 1},
            "elapsed_ms": 50,
            "pending": {"step_id": "stp_1", "calls": [[{"id": "c1", "name": "grep", "arguments": "{}"}, "cal_1"]], "next": 0}
        }"#;
    let state = LoopState::decode(first, &[]).expect("read");
    assert_eq!(state.conversation.len(), 2);
    assert_eq!(state.conversation[1].source, "stp_1");
    assert_eq!(
        state.failures.keys().next(),
        Some(&FailureKey {
            tool: "grep".into(),
            arguments: "{}".into()
        })
    );
    let pending = state.pending.expect("pending");
    assert_eq!(
        pending.next_call().map(|(_, id)| id.to_string()).as_deref(),
        Some("cal_1")
    );
}
