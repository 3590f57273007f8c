use super::*;
use crate::agent::provider::ToolCall;

fn counter() -> Counter {
    Counter::new(Tokenizer::for_openai("gpt-4o"), CalibrationState::default())
}

fn tools() -> ToolSet {
    ToolSet::new(Vec::new(), &Tokenizer::for_openai("gpt-4o"))
}

fn exchange(i: usize, observation_bytes: usize) -> Vec<Message> {
    vec![
        Message::Assistant {
            text: None,
            tool_calls: vec![ToolCall {
                id: format!("c{i}"),
                name: "read_file".into(),
                arguments: "{}".into(),
            }],
        },
        Message::Tool {
            call_id: format!("c{i}"),
            name: "read_file".into(),
            // Varied words, so that the tokenizer does not fold them into a few tokens.
            content: json!({"status": "OK", "content": words(observation_bytes)}).to_string(),
            is_error: false,
        },
    ]
}

fn words(bytes: usize) -> String {
    let mut text = String::new();
    let mut n = 0u64;
    while text.len() < bytes {
        n += 1;
        text.push_str(&format!("w{} ", n.wrapping_mul(2_654_435_761) % 100_000));
    }
    text
}

fn entries(messages: Vec<Message>, part: Part) -> Vec<Entry> {
    messages
        .into_iter()
        .map(|message| Entry {
            message,
            source: String::new(),
            part,
            counted: Counted::default(),
        })
        .collect()
}

fn conversation(exchanges: usize, observation_bytes: usize) -> Vec<Entry> {
    let mut conversation = entries(
        vec![Message::User {
            text: "fix the test".into(),
        }],
        Part::Goal,
    );
    for i in 0..exchanges {
        conversation.extend(entries(exchange(i, observation_bytes), Part::Run));
    }
    conversation
}

fn sources<'a>(
    conversation: &'a [Entry],
    budget: u64,
    tools: &'a ToolSet,
    counter: &'a Counter,
) -> Sources<'a> {
    Sources {
        system: "system",
        tools,
        project: None,
        conversation,
        budget,
        counter,
        // Fresh for each: a test may give its sources project instructions of their own.
        fixed: Box::leak(Box::default()),
    }
}

fn dispositions(built: &Built, kind: &str) -> Vec<pb::ContextDisposition> {
    built
        .report
        .items
        .iter()
        .filter(|item| item.kind == kind)
        .map(|item| pb::ContextDisposition::try_from(item.disposition).expect("known"))
        .collect()
}

#[test]
fn everything_fits_within_a_large_budget() {
    let conversation = conversation(3, 100);
    let (tools, counter) = (tools(), counter());
    let built = build(&sources(&conversation, 1_000_000, &tools, &counter));
    let messages: Vec<Message> = conversation.iter().map(|e| e.message.clone()).collect();
    assert_eq!(built.messages, messages);
    assert!(
        dispositions(&built, "observation")
            .iter()
            .all(|d| *d == pb::ContextDisposition::Included)
    );
    assert!(built.report.tokens <= built.report.budget);
    assert_eq!(built.report.tokenizer, "o200k_base");
    assert_eq!(built.answers, 3);
    // The report's items add up to the request as counted (framing aside).
    let items: u64 = built.report.items.iter().map(|item| item.tokens).sum();
    assert!(
        items <= built.report.tokens,
        "{items} > {}",
        built.report.tokens
    );
    assert!(
        built
            .report
            .items
            .iter()
            .all(|item| !item.reason.is_empty())
    );
}

/// What the goal and the latest exchange cost, with the framing: the least a context holds.
fn floor(conversation: &[Entry], tools: &ToolSet, counter: &Counter) -> u64 {
    let everything = build(&sources(conversation, u64::MAX, tools, counter));
    let items = &everything.report.items;
    let fixed: u64 = items[..2].iter().map(|item| item.tokens).sum();
    let kept: u64 = [2, items.len() - 2, items.len() - 1]
        .iter()
        .map(|&i| items[i].tokens)
        .sum();
    fixed + kept + 3
}

#[test]
fn old_observations_are_summarised_before_anything_is_dropped() {
    let conversation = conversation(4, 4000);
    let (tools, counter) = (tools(), counter());
    // Room for the latest observation in full and short summaries of the rest.
    let budget = floor(&conversation, &tools, &counter) + 3 * 250;
    let built = build(&sources(&conversation, budget, &tools, &counter));
    assert_eq!(built.messages.len(), conversation.len());
    assert_eq!(
        dispositions(&built, "observation"),
        vec![
            pb::ContextDisposition::Summarised,
            pb::ContextDisposition::Summarised,
            pb::ContextDisposition::Summarised,
            pb::ContextDisposition::Included,
        ]
    );
    assert!(built.report.tokens <= budget, "{}", built.report.tokens);
}

#[test]
fn whole_old_exchanges_are_dropped_when_summaries_are_not_enough() {
    let conversation = conversation(40, 4000);
    let (tools, counter) = (tools(), counter());
    let budget = floor(&conversation, &tools, &counter) + 1000;
    let built = build(&sources(&conversation, budget, &tools, &counter));
    assert!(built.report.tokens <= budget, "{}", built.report.tokens);
    let Message::User { text } = &built.messages[0] else {
        panic!("the goal comes first");
    };
    assert!(text.starts_with("fix the test") && text.contains("dropped"));
    // Well-formed: every observation follows an assistant message that called it.
    for (i, message) in built.messages.iter().enumerate() {
        if let Message::Tool { call_id, .. } = message {
            let Message::Assistant { tool_calls, .. } = &built.messages[i - 1] else {
                panic!("an observation without its call at {i}");
            };
            assert_eq!(&tool_calls[0].id, call_id);
        }
    }
    let last = dispositions(&built, "observation");
    assert_eq!(last.last(), Some(&pb::ContextDisposition::Included));
    assert!(last.contains(&pb::ContextDisposition::Dropped));
    // Dropped answers still count: the provider's turn numbering does not move back.
    assert_eq!(built.answers, 40);
}

#[test]
fn summaries_keep_the_status_and_the_pointer_to_the_kept_output() {
    let mut message = Message::Tool {
        call_id: "c".into(),
        name: "run_command".into(),
        content: json!({
            "status": "OK",
            "content": words(5000),
            "truncated": true,
            "full_output": "exe_0123",
        })
        .to_string(),
        is_error: false,
    };
    assert!(summarise(&mut message));
    let Message::Tool { content, .. } = message else {
        panic!("still an observation");
    };
    let value: Value = serde_json::from_str(&content).expect("json");
    assert_eq!(value["status"], "OK");
    assert_eq!(value["summarised"], true);
    assert_eq!(value["full_output"], "exe_0123");
}

#[test]
fn history_summaries_and_project_instructions_are_reported_as_such() {
    let mut conversation = entries(
        vec![
            Message::User {
                text: "what is in notes.txt?".into(),
            },
            Message::Assistant {
                text: Some("alpha".into()),
                tool_calls: Vec::new(),
            },
        ],
        Part::History,
    );
    conversation.push(Entry {
        message: Message::User {
            text: "[summary] we read the notes".into(),
        },
        source: "compaction at step 3".into(),
        part: Part::Summary { answers: 4 },
        counted: Counted::default(),
    });
    conversation.extend(entries(
        vec![Message::User {
            text: "and now?".into(),
        }],
        Part::Goal,
    ));
    conversation.extend(entries(exchange(0, 10), Part::Run));
    let (tools, counter) = (tools(), counter());
    let mut sources = sources(&conversation, 100_000, &tools, &counter);
    sources.project = Some("Run the tests with `make test`.");
    let built = build(&sources);
    let kinds: Vec<&str> = built.report.items.iter().map(|i| i.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "system",
            "tools",
            "project_instructions",
            "user",
            "assistant",
            "summary",
            "goal",
            "assistant",
            "observation"
        ]
    );
    let project = &built.report.items[2];
    assert!(project.reason.contains("untrusted"), "{}", project.reason);
    assert!(built.report.items[3].reason.contains("earlier run"));
    // The project instructions go first, marked as workspace content.
    let Message::User { text } = &built.messages[0] else {
        panic!("project instructions first");
    };
    assert!(
        text.contains("AGENTS.md") && text.contains("make test"),
        "{text}"
    );
    // The history's answer is not the run's; the summary's four and the latest one are.
    assert_eq!(built.answers, 5);
}

#[test]
fn calibration_scales_every_count() {
    let conversation = conversation(2, 400);
    let tools = tools();
    let plain = counter();
    let mut calibrated = counter();
    for _ in 0..4 {
        calibrated.observe(1000, 1500);
    }
    let a = build(&sources(&conversation, 1_000_000, &tools, &plain));
    let b = build(&sources(&conversation, 1_000_000, &tools, &calibrated));
    assert_eq!(a.raw_tokens, b.raw_tokens);
    let ratio = b.report.tokens as f64 / a.report.tokens as f64;
    assert!((1.4..1.6).contains(&ratio), "{ratio}");
    assert!(
        (b.report.calibration - 1.5).abs() < 0.1,
        "{}",
        b.report.calibration
    );
}
