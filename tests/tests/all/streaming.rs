//! Streamed answers, end to end: the model's text and its calls' arguments reach the attached
//! clients piece by piece (deltas) as a real model API streams them, in order with the
//! committed events; the committed event that follows repeats them whole, the stored log
//! holds no delta, and a client that attaches in the middle of an answer gets the rest of it
//! and then the whole. The `airlock` CLI prints the text as it streams.

use airlock_proto::v1 as pb;
use airlock_tests::cli::Cli;
use airlock_tests::model_api::{self, ModelApi, openai_text_stream};
use airlock_tests::{DaemonOptions, RunStream, TestDaemon, repo_root, scripted_run};
use pb::run_event::Event;
use prost::Message as _;
use serde_json::json;

/// A run of `openai:gpt-4.1` in a workspace holding `src/calc.py`.
fn start(daemon: &TestDaemon) -> pb::StartRun {
    let workspace = daemon.workspace("w");
    std::fs::create_dir_all(workspace.join("src")).unwrap();
    std::fs::write(
        workspace.join("src/calc.py"),
        "def mean(values):\n    return sum(values) / len(values)\n",
    )
    .unwrap();
    pb::StartRun {
        workspace: workspace.to_str().unwrap().to_owned(),
        input: "check the mean".into(),
        model: Some(pb::ModelConfig {
            model: "openai:gpt-4.1".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn committed(events: &[pb::RunEvent]) -> Vec<pb::RunEvent> {
    events.iter().filter(|e| !e.delta).cloned().collect()
}

fn bytes(events: &[pb::RunEvent]) -> Vec<Vec<u8>> {
    events.iter().map(|e| e.encode_to_vec()).collect()
}

/// The text deltas among `events`, whole (with their envelope).
fn text_deltas(events: &[pb::RunEvent]) -> Vec<(pb::RunEvent, String)> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Some(Event::TextDelta(delta)) => Some((e.clone(), delta.text.clone())),
            _ => None,
        })
        .collect()
}

/// The first committed event of a kind, and where it is among `events`.
fn first(events: &[pb::RunEvent], pick: impl Fn(&Event) -> bool) -> (&pb::RunEvent, usize) {
    events
        .iter()
        .enumerate()
        .find(|(_, e)| !e.delta && e.event.as_ref().is_some_and(&pick))
        .map(|(at, e)| (e, at))
        .unwrap_or_else(|| panic!("no such committed event in {events:#?}"))
}

/// Reads until the run's first step has started, then lets the model API's answer, held at
/// its gate, go on. Pieces are never stored, so a client gets those streamed while it
/// follows the run: holding the answer until this client has an event of the run makes
/// what it gets independent of how soon its subscription lands after the start.
async fn follow_then_open(run: &mut RunStream, api: &ModelApi) {
    run.until(|e| matches!(e, Event::StepStarted(_)).then_some(()))
        .await;
    api.open_gate();
}

/// One OpenAI stream chunk with a tool call delta.
fn call_chunk(index: u32, id: Option<&str>, name: Option<&str>, arguments: &str) -> String {
    let mut call = json!({"index": index, "function": {"arguments": arguments}});
    if let Some(id) = id {
        call["id"] = json!(id);
        call["type"] = json!("function");
    }
    if let Some(name) = name {
        call["function"]["name"] = json!(name);
    }
    json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": null}]})
        .to_string()
}

#[tokio::test]
async fn text_deltas_arrive_in_order_before_the_committed_text_that_repeats_them() {
    let pieces = [
        "The mean ",
        "divides by ",
        "`len(values)`",
        " already — ",
        "fine ✓",
    ];
    let whole: String = pieces.concat();
    let api = ModelApi::default().stream(openai_text_stream(&pieces, Some(0)));
    let daemon = model_api::daemon(&api.serve().await, true).await;
    let mut run = daemon.start_run(start(&daemon)).await;
    follow_then_open(&mut run, &api).await;
    let finished = run.finished().await;
    assert_eq!(
        finished.reason,
        pb::StopReason::Final as i32,
        "{finished:?}"
    );
    assert_eq!(finished.final_text, whole);
    // The daemon asked for a stream.
    assert_eq!(api.received()[0].body["stream"], true);

    let seen = run.seen.clone();
    let deltas = text_deltas(&seen);
    assert_eq!(
        deltas
            .iter()
            .map(|(_, text)| text.as_str())
            .collect::<Vec<_>>(),
        pieces,
        "every piece, once, in order"
    );
    let (text_event, text_at) = first(&seen, |e| matches!(e, Event::ModelText(_)));
    let Some(Event::ModelText(text)) = &text_event.event else {
        unreachable!()
    };
    assert_eq!(text.text, whole, "the committed text is the pieces joined");
    let (step, _) = first(&seen, |e| matches!(e, Event::StepStarted(_)));
    assert!(!step.step_id.is_empty());
    assert_eq!(text_event.step_id, step.step_id);
    assert!(!text_event.turn_id.is_empty());
    for (delta, _) in &deltas {
        assert!(delta.delta, "{delta:?}");
        assert_eq!(
            delta.seq, text_event.seq,
            "the seq of the text it leads up to"
        );
        assert_eq!(delta.step_id, step.step_id);
        assert_eq!(delta.turn_id, text_event.turn_id);
        assert_eq!(delta.run_id, text_event.run_id);
    }
    // The pieces come right before the text they make up, nothing committed among them.
    let block = &seen[text_at - pieces.len()..text_at];
    assert!(
        block
            .iter()
            .all(|e| e.delta && matches!(e.event, Some(Event::TextDelta(_)))),
        "{seen:#?}"
    );
    // Nothing else is a delta, and no committed event is.
    assert_eq!(seen.iter().filter(|e| e.delta).count(), pieces.len());
    assert!(
        seen.iter()
            .filter(|e| !e.delta)
            .all(|e| !matches!(e.event, Some(Event::TextDelta(_) | Event::ToolCallDelta(_)))),
        "{seen:#?}"
    );

    // The stored log: the committed events the client saw, byte for byte, and no delta.
    let mut replay = daemon.attach_run(run.run_id(), 0).await;
    replay.drain().await;
    assert!(replay.seen.iter().all(|e| !e.delta), "{:#?}", replay.seen);
    assert_eq!(bytes(&replay.seen), bytes(&committed(&seen)));
    for (index, event) in replay.seen.iter().enumerate() {
        assert_eq!(event.seq, index as u64 + 1, "no gap, no duplicate");
    }
}

#[tokio::test]
async fn call_argument_deltas_make_up_the_proposed_calls_which_then_run() {
    let (first_id, second_id) = (
        "call_5nJqV0LxW2eYb8Rk1Tz3Cm6H",
        "call_Pz7Dk4Qs1Vn9Ew2Lr6Ya0Xb3",
    );
    let first_pieces = ["{\"", "path", "\":\"", "src/", "calc", ".py", "\"}"];
    let second_pieces = ["{\"path\"", ": \"notes", ".txt\"}"];
    let mut answer = vec![
        None,
        Some(
            json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                "finish_reason": null}]})
            .to_string(),
        ),
        Some(call_chunk(0, Some(first_id), Some("read_file"), "")),
    ];
    answer.extend(
        first_pieces
            .iter()
            .map(|piece| Some(call_chunk(0, None, None, piece))),
    );
    answer.push(Some(call_chunk(1, Some(second_id), Some("read_file"), "")));
    answer.extend(
        second_pieces
            .iter()
            .map(|piece| Some(call_chunk(1, None, None, piece))),
    );
    answer.push(Some(
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}).to_string(),
    ));
    answer.push(Some(
        json!({"choices": [], "usage": {"prompt_tokens": 412, "completion_tokens": 61}})
            .to_string(),
    ));
    answer.push(Some("[DONE]".into()));
    let api = ModelApi::default()
        .stream(answer)
        .stream(openai_text_stream(&["Both read."], None));
    let daemon = model_api::daemon(&api.serve().await, true).await;
    let start = start(&daemon);
    std::fs::write(
        std::path::Path::new(&start.workspace).join("notes.txt"),
        "the notes\n",
    )
    .unwrap();
    let mut run = daemon.start_run(start).await;
    follow_then_open(&mut run, &api).await;
    let finished = run.finished().await;
    assert_eq!(
        finished.reason,
        pb::StopReason::Final as i32,
        "{finished:?}"
    );
    assert_eq!(finished.final_text, "Both read.");

    let seen = run.seen.clone();
    let call_deltas: Vec<(pb::RunEvent, pb::ToolCallDelta)> = seen
        .iter()
        .filter_map(|e| match &e.event {
            Some(Event::ToolCallDelta(delta)) => Some((e.clone(), delta.clone())),
            _ => None,
        })
        .collect();
    let proposed: Vec<(&pb::RunEvent, pb::ToolCallProposed)> = seen
        .iter()
        .filter_map(|e| match &e.event {
            Some(Event::ToolCallProposed(proposed)) => Some((e, proposed.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(proposed.len(), 2, "{seen:#?}");
    let step_id = &proposed[0].0.step_id;
    for (index, (id, pieces)) in [
        (first_id, &first_pieces[..]),
        (second_id, &second_pieces[..]),
    ]
    .into_iter()
    .enumerate()
    {
        let of_call: Vec<&(pb::RunEvent, pb::ToolCallDelta)> = call_deltas
            .iter()
            .filter(|(_, delta)| delta.index == index as u32)
            .collect();
        // The first delta names the call; the rest are its arguments as they came.
        let (head, rest) = of_call.split_first().expect("deltas for each call");
        assert_eq!(head.1.tool, "read_file");
        assert_eq!(head.1.provider_call_id, id);
        assert!(
            rest.iter()
                .all(|(_, d)| d.tool.is_empty() && d.provider_call_id.is_empty())
        );
        assert_eq!(
            rest.iter()
                .map(|(_, d)| d.arguments_delta.as_str())
                .collect::<Vec<_>>(),
            pieces
        );
        let joined: String = of_call
            .iter()
            .map(|(_, d)| d.arguments_delta.as_str())
            .collect();
        assert_eq!(joined, proposed[index].1.arguments_json);
        assert_eq!(proposed[index].1.provider_call_id, id);
        assert_eq!(proposed[index].1.tool, "read_file");
        for (event, _) in &of_call {
            assert!(event.delta);
            assert_eq!(&event.step_id, step_id);
            assert!(!event.turn_id.is_empty());
            assert_eq!(event.turn_id, proposed[index].0.turn_id);
        }
    }
    // Every call delta leads up to the first proposal (the next event committed after them).
    assert_eq!(
        call_deltas.len(),
        2 + first_pieces.len() + second_pieces.len()
    );
    assert!(
        call_deltas
            .iter()
            .all(|(event, _)| event.seq == proposed[0].0.seq),
        "{call_deltas:#?}"
    );
    let (_, proposal_at) = first(&seen, |e| matches!(e, Event::ToolCallProposed(_)));
    assert!(
        seen[proposal_at - call_deltas.len()..proposal_at]
            .iter()
            .all(|e| e.delta && matches!(e.event, Some(Event::ToolCallDelta(_)))),
        "the call deltas come right before the first proposal: {seen:#?}"
    );

    // The calls ran, with the arguments the deltas made up.
    let results: Vec<(String, String)> = run.of(|e| match e {
        Event::ToolFinished(done) => {
            let result = done.result.as_ref()?;
            assert_eq!(result.status, pb::ToolStatus::Ok as i32, "{done:?}");
            Some((done.provider_call_id.clone(), result.content.clone()))
        }
        _ => None,
    });
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0].0, first_id);
    assert!(
        results[0].1.contains("sum(values) / len(values)"),
        "{results:?}"
    );
    assert_eq!(results[1].0, second_id);
    assert!(results[1].1.contains("the notes"), "{results:?}");
    let received = api.received();
    assert_eq!(received.len(), 2);
    let messages = received[1].body["messages"].as_array().unwrap();
    assert!(
        messages
            .iter()
            .any(|m| m["role"] == "tool" && m["tool_call_id"] == first_id),
        "{messages:#?}"
    );

    let mut replay = daemon.attach_run(run.run_id(), 0).await;
    replay.drain().await;
    assert_eq!(bytes(&replay.seen), bytes(&committed(&seen)));
}

#[tokio::test]
async fn a_client_attaching_mid_answer_gets_the_rest_of_it_then_the_whole() {
    let pieces = ["one ", "two ", "three ", "four ", "five ", "six"];
    let whole: String = pieces.concat();
    // Two gates: before the first piece, and after the third.
    let mut answer = openai_text_stream(&pieces, Some(3));
    answer.insert(0, None);
    let api = ModelApi::default().stream(answer);
    let daemon = model_api::daemon(&api.serve().await, true).await;
    let mut a = daemon.start_run(start(&daemon)).await;
    follow_then_open(&mut a, &api).await;
    // The stream holds at its second gate after three pieces: A has them all, and nothing
    // after.
    while text_deltas(&a.seen).len() < 3 {
        a.next().await.expect("the run goes on");
    }
    let after_seq = a
        .seen
        .iter()
        .filter(|e| !e.delta)
        .map(|e| e.seq)
        .max()
        .unwrap();
    let mut b = daemon.attach_run(a.run_id(), after_seq).await;
    api.open_gate();

    let finished = a.finished().await;
    assert_eq!(
        finished.reason,
        pb::StopReason::Final as i32,
        "{finished:?}"
    );
    b.drain().await;

    let a_deltas: Vec<String> = text_deltas(&a.seen).into_iter().map(|(_, t)| t).collect();
    assert_eq!(a_deltas, pieces, "A was attached all along");
    let (text_event, text_at) = first(&b.seen, |e| matches!(e, Event::ModelText(_)));
    assert_eq!(
        text_event.seq,
        after_seq + 1,
        "the text is the next committed event"
    );
    let Some(Event::ModelText(text)) = &text_event.event else {
        unreachable!()
    };
    assert_eq!(text.text, whole, "B gets the whole text committed");
    // B's deltas: only pieces streamed after it attached (never stored, never replayed),
    // so a suffix of what came after the gate, and all of them before the text.
    let b_deltas = text_deltas(&b.seen);
    let b_texts: Vec<String> = b_deltas.iter().map(|(_, t)| t.clone()).collect();
    assert!(
        a_deltas[3..].ends_with(&b_texts),
        "B's deltas {b_texts:?} are not a suffix of the pieces after the gate {:?}",
        &a_deltas[3..]
    );
    assert_eq!(b.seen[..text_at].len(), b_deltas.len(), "{:#?}", b.seen);
    assert!(
        b_deltas
            .iter()
            .all(|(e, _)| e.delta && e.seq == text_event.seq)
    );
    assert!(b.seen[text_at..].iter().all(|e| !e.delta));
    // A and B agree on every committed event after the seq B attached from.
    let a_after: Vec<pb::RunEvent> = committed(&a.seen)
        .into_iter()
        .filter(|e| e.seq > after_seq)
        .collect();
    assert_eq!(bytes(&committed(&b.seen)), bytes(&a_after));
    assert!(matches!(
        a_after.last().and_then(|e| e.event.as_ref()),
        Some(Event::RunFinished(_))
    ));
}

/// A script whose first step writes a file (under policy `risky`, it waits for an approval)
/// and whose later steps talk: the steps that stream come after the client has answered,
/// so it follows the run by then, however soon its subscription lands after the start.
fn approve_then_talk(stream: bool, later: serde_json::Value) -> serde_json::Value {
    let mut turns = vec![json!({"tool_calls": [
        {"name": "write_file", "arguments": {"path": "b.txt", "content": "beta\n"}}
    ]})];
    turns.extend(later.as_array().unwrap().iter().cloned());
    json!({"stream": stream, "turns": turns})
}

#[tokio::test]
async fn the_scripted_model_streams_only_when_its_script_says_so() {
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        ..DaemonOptions::default()
    })
    .await;
    let later = json!([
        {"text": "Let me read the notes first.",
         "tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"final": "The notes say alpha, and nothing more than that."}
    ]);
    // Each run in a workspace of its own, so that both write a new file.
    let run = async |stream: bool| {
        let workspace = daemon.workspace(&format!("w-{stream}"));
        std::fs::write(workspace.join("a.txt"), "alpha\n").unwrap();
        let mut start = scripted_run(&workspace, &approve_then_talk(stream, later.clone()));
        start.approval_policy = pb::ApprovalPolicy::Risky as i32;
        let mut run = daemon.start_run(start).await;
        let request = run.approval_requested().await;
        run.decide(&request.approval_id, pb::Decision::ApproveOnce, "");
        let finished = run.finished().await;
        assert_eq!(
            finished.reason,
            pb::StopReason::Final as i32,
            "{finished:?}"
        );
        run.seen
    };

    let streamed = run(true).await;
    let texts: Vec<String> = streamed
        .iter()
        .filter_map(|e| match &e.event {
            Some(Event::ModelText(text)) => Some(text.text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        texts,
        [
            "Let me read the notes first.",
            "The notes say alpha, and nothing more than that."
        ]
    );
    // Each step's text deltas make up its text, in several pieces, right before it.
    for text in &texts {
        let (text_event, text_at) = first(
            &streamed,
            |e| matches!(e, Event::ModelText(t) if t.text == *text),
        );
        let pieces: Vec<String> = text_deltas(&streamed)
            .into_iter()
            .filter(|(e, _)| e.seq == text_event.seq)
            .map(|(_, t)| t)
            .collect();
        assert!(pieces.len() > 1, "{pieces:?}");
        assert_eq!(pieces.concat(), *text);
        assert!(
            streamed[..text_at]
                .iter()
                .rev()
                .take_while(|e| e.delta)
                .all(|e| e.seq == text_event.seq),
            "{streamed:#?}"
        );
    }
    // The call streamed after the approval (with the text before it, as one answer): its
    // name first, then arguments that make up what was proposed.
    let (approved, _) = first(&streamed, |e| matches!(e, Event::ApprovalResolved(_)));
    let call_deltas: Vec<pb::ToolCallDelta> = streamed
        .iter()
        .filter(|e| e.seq > approved.seq)
        .filter_map(|e| match &e.event {
            Some(Event::ToolCallDelta(delta)) => Some(delta.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        call_deltas.first().map(|d| d.tool.as_str()),
        Some("read_file"),
        "{call_deltas:#?}"
    );
    let arguments: String = call_deltas
        .iter()
        .map(|d| d.arguments_delta.as_str())
        .collect();
    let (read, _) = first(
        &streamed,
        |e| matches!(e, Event::ToolCallProposed(p) if p.tool == "read_file"),
    );
    let Some(Event::ToolCallProposed(read)) = &read.event else {
        unreachable!()
    };
    assert_eq!(arguments, read.arguments_json);

    // Without `stream` (the default), no delta at all, and the same committed events.
    let whole = run(false).await;
    assert!(whole.iter().all(|e| !e.delta), "{whole:#?}");
    let kinds = |events: &[pb::RunEvent]| -> Vec<&'static str> {
        events
            .iter()
            .filter(|e| !e.delta)
            .filter_map(|e| e.event.as_ref().map(Event::kind))
            .collect()
    };
    assert_eq!(kinds(&whole), kinds(&streamed));
}

#[tokio::test]
async fn the_cli_prints_the_text_as_it_streams_and_once() {
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        ..DaemonOptions::default()
    })
    .await;
    let answer = "The mean divides by len(values), which is right.";
    let scripts = tempfile::tempdir().unwrap();
    let run = async |stream: bool| {
        let workspace = daemon.workspace(&format!("w-{stream}"));
        let script = scripts.path().join(format!("model-{stream}.json"));
        std::fs::write(
            &script,
            approve_then_talk(stream, json!([{"final": answer}])).to_string(),
        )
        .unwrap();
        // `run` asks at the terminal before the write (its default policy is `risky`).
        let run = Cli::new(
            &daemon.endpoint,
            &[
                "run",
                "check the mean",
                "--workspace",
                workspace.to_str().unwrap(),
                "--model",
                &format!("scripted:{}", script.display()),
            ],
        )
        .token(&daemon.token)
        .stdin("y\n")
        .run()
        .await;
        assert_eq!(
            run.code, 0,
            "stdout:\n{}\nstderr:\n{}",
            run.stdout, run.stderr
        );
        assert!(run.stdout.contains("write_file"), "{}", run.stdout);
        run.stdout
    };

    let streamed = run(true).await;
    let (transcript, end) = streamed
        .split_once("\nstop: FINAL")
        .unwrap_or_else(|| panic!("no stop line:\n{streamed}"));
    assert_eq!(
        transcript.matches(answer).count(),
        1,
        "the streamed text, once, before the end:\n{streamed}"
    );
    assert!(
        transcript.contains(&format!("model: {answer}\n")),
        "{streamed}"
    );
    // The final answer is printed again at the very end, by design.
    assert_eq!(end.matches(answer).count(), 1, "{streamed}");
    assert!(streamed.trim_end().ends_with(answer), "{streamed}");

    // Without streaming the text is held back and printed only as the final answer: what
    // the streamed transcript shows before its end came from the deltas.
    let whole = run(false).await;
    let (transcript, _) = whole
        .split_once("\nstop: FINAL")
        .unwrap_or_else(|| panic!("no stop line:\n{whole}"));
    assert_eq!(transcript.matches(answer).count(), 0, "{whole}");
    assert!(whole.trim_end().ends_with(answer), "{whole}");
}

/// The client that starts a run is subscribed before the run's loop takes its first step:
/// the pieces of the very first answer reach it, however fast the model is.
#[tokio::test]
async fn the_client_that_starts_a_run_gets_its_first_answer_streamed() {
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        ..DaemonOptions::default()
    })
    .await;
    let workspace = daemon.workspace("w");
    let text = "An answer at once, in several streamed pieces.";
    let script = json!({"stream": true, "turns": [{"final": text}]});
    for _ in 0..10 {
        let mut run = daemon.start_run(scripted_run(&workspace, &script)).await;
        run.finished().await;
        let pieces: Vec<String> = text_deltas(&run.seen).into_iter().map(|(_, t)| t).collect();
        assert!(pieces.len() > 1, "{:#?}", run.seen);
        assert_eq!(pieces.concat(), text);
    }
}
