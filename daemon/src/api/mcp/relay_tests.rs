//! Parked calls: only the very call's retry, by its tenant, with its state unchanged and in
//! time, finds its call, and only once; a client's answers reach a server only as answers.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::string_slice
)]

use std::time::{Duration, Instant};

use rmcp::model::{ElicitRequest, ElicitRequestParams, ElicitationSchema, InputRequest};

use super::*;
use crate::api::mcp::mrtr::Bound;

const KEY: &[u8] = b"a key of the tests, thirty-two bytes or more";

fn states(ttl: Duration) -> States {
    States::with_key("test", KEY, ttl).expect("a key long enough")
}

fn asking() -> Asking {
    Asking::new(
        "alice",
        "asking__confirm",
        &json!({"item": "the report"}),
        Some("/srv/alice"),
    )
}

/// Every call that differs from [`asking`] in exactly one bound field.
fn others() -> Vec<(&'static str, Asking)> {
    vec![
        (
            "tenant",
            Asking::new(
                "bob",
                "asking__confirm",
                &json!({"item": "the report"}),
                Some("/srv/alice"),
            ),
        ),
        (
            "tool",
            Asking::new(
                "alice",
                "asking__delete",
                &json!({"item": "the report"}),
                Some("/srv/alice"),
            ),
        ),
        (
            "arguments",
            Asking::new(
                "alice",
                "asking__confirm",
                &json!({"item": "the rest"}),
                Some("/srv/alice"),
            ),
        ),
        (
            "workspace",
            Asking::new(
                "alice",
                "asking__confirm",
                &json!({"item": "the report"}),
                Some("/srv/bob"),
            ),
        ),
        (
            "no workspace",
            Asking::new(
                "alice",
                "asking__confirm",
                &json!({"item": "the report"}),
                None,
            ),
        ),
        (
            "shifted",
            Asking::new(
                "aliceasking__confirm",
                "",
                &json!({"item": "the report"}),
                Some("/srv/alice"),
            ),
        ),
    ]
}

fn question(message: &str) -> InputRequests {
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message.to_owned(),
        requested_schema: ElicitationSchema::new(std::collections::BTreeMap::new()),
    };
    InputRequests::from([(
        "confirm".to_owned(),
        InputRequest::Elicitation(ElicitRequest::new(params)),
    )])
}

fn asked(message: &str) -> (Asked, oneshot::Receiver<InputResponses>) {
    let (answer, answered) = oneshot::channel();
    (
        Asked {
            requests: question(message),
            answer,
        },
        answered,
    )
}

/// A minute from now.
fn soon() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

/// Parks a call (here a number that names it) asking `message`; its state.
fn park(parked: &Arc<Parked<u32>>, states: &States, call: u32, message: &str) -> String {
    let (asked, _answered) = asked(message);
    let result = parked
        .park(states, asking(), call, asked, soon())
        .expect("parked");
    assert_eq!(result.input_requests.as_ref().unwrap().len(), 1);
    result.request_state.expect("a state")
}

#[tokio::test]
async fn a_parked_call_is_resumed_by_its_own_retry_once() {
    let states = states(Duration::from_secs(60));
    let parked = Arc::new(Parked::<u32>::default());
    let first = park(&parked, &states, 1, "first?");
    let second = park(&parked, &states, 2, "second?");
    assert_ne!(first, second);
    for (what, other) in others() {
        assert!(parked.take(&states, &other, &first).is_none(), "{what}");
    }
    let resumed = parked.take(&states, &asking(), &second).expect("its call");
    assert_eq!(resumed.flight, 2);
    assert!(resumed.asked.requests.contains_key("confirm"));
    assert!(
        parked.take(&states, &asking(), &second).is_none(),
        "a replayed state finds nothing"
    );
    // None of the strangers' retries took the first call.
    let resumed = parked.take(&states, &asking(), &first).expect("its call");
    assert_eq!(resumed.flight, 1);
}

#[tokio::test]
async fn every_changed_character_of_a_state_is_refused() {
    let states = states(Duration::from_secs(60));
    let parked = Arc::new(Parked::<u32>::default());
    let sealed = park(&parked, &states, 1, "keep?");
    let bytes = sealed.as_bytes();
    for at in 0..bytes.len() {
        for replacement in [b'A', b'_', b'-', b'.', b'0'] {
            if bytes[at] == replacement {
                continue;
            }
            let mut changed = bytes.to_vec();
            changed[at] = replacement;
            let changed = String::from_utf8(changed).expect("ASCII");
            assert!(
                parked.take(&states, &asking(), &changed).is_none(),
                "{changed}"
            );
        }
    }
    for cut in 0..bytes.len() {
        assert!(parked.take(&states, &asking(), &sealed[..cut]).is_none());
    }
    assert!(
        parked
            .take(&states, &asking(), &format!("{sealed}-TAMPERED"))
            .is_none()
    );
    assert!(parked.take(&states, &asking(), &sealed).is_some());
}

#[tokio::test]
async fn an_approvals_state_and_a_parked_calls_never_pass_for_each_other() {
    let states = states(Duration::from_secs(60));
    let parked = Arc::new(Parked::<u32>::default());
    let bound = Bound {
        tenant: "alice".into(),
        tool: "asking__confirm".into(),
        tool_digest: String::new(),
        arguments: asking().arguments,
        workspace: Some("/srv/alice".into()),
        profile: String::new(),
    };
    let approval = states.seal(&bound, "apr_1").expect("sealed");
    assert!(parked.take(&states, &asking(), &approval).is_none());
    let question = park(&parked, &states, 1, "keep?");
    assert_eq!(states.open(&bound, &question), None);
    // Another daemon's key opens neither.
    let theirs = States::new(Duration::from_secs(60)).expect("a key");
    assert!(parked.take(&theirs, &asking(), &question).is_none());
    assert!(parked.take(&states, &asking(), &question).is_some());
}

#[tokio::test]
async fn a_call_whose_client_does_not_come_back_is_let_go() {
    let states = states(Duration::from_millis(30));
    let parked = Arc::new(Parked::<u32>::default());
    let (asked, answered) = asked("keep?");
    let sealed = parked
        .park(&states, asking(), 1, asked, park_until(&states, soon()))
        .and_then(|result| result.request_state)
        .expect("a state");
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert!(parked.take(&states, &asking(), &sealed).is_none());
    assert!(parked.lock().is_empty(), "nothing kept");
    // The server's question is given up: its side reads no answer.
    assert!(answered.await.is_err());
}

#[tokio::test]
async fn asking_again_never_extends_a_calls_stay_nor_its_deadline() {
    let states = states(Duration::from_secs(60));
    let parked = Arc::new(Parked::<u32>::default());
    // A call whose deadline is near: parked no longer than its deadline, whatever the
    // states' life.
    let deadline = Instant::now() + Duration::from_millis(80);
    let until = park_until(&states, deadline);
    assert_eq!(until, deadline);
    let (first, _answered) = asked("keep?");
    let mut sealed = parked
        .park(&states, asking(), 1, first, until)
        .and_then(|result| result.request_state)
        .expect("a state");
    // A client that keeps coming back without answers is asked again under the same limit.
    for _ in 0..3 {
        let resumed = parked.take(&states, &asking(), &sealed).expect("its call");
        assert_eq!(resumed.until, until, "the first parking's limit is kept");
        sealed = parked
            .park(
                &states,
                resumed.asking,
                resumed.flight,
                resumed.asked,
                resumed.until,
            )
            .and_then(|result| result.request_state)
            .expect("parked again");
    }
    tokio::time::sleep(Duration::from_millis(160)).await;
    assert!(parked.take(&states, &asking(), &sealed).is_none());
    assert!(parked.lock().is_empty(), "let go at the deadline");
    // Past its limit, a call is not parked at all.
    let (late, _answered) = asked("keep?");
    assert!(
        parked
            .park(&states, asking(), 2, late, Instant::now())
            .is_none()
    );
}

#[test]
fn only_answers_of_the_kind_asked_answer_a_question() {
    let (asked, _answered) = asked("keep?");
    let of = |answer: Value| InputResponses::from([("confirm".to_owned(), answer)]);
    assert!(asked.answered_by(&of(json!({"action": "accept"}))));
    assert!(
        !asked.answered_by(&of(json!({"roots": []}))),
        "roots answer no form"
    );
    assert!(!asked.answered_by(&of(
        json!({"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"})
    )));
}

#[test]
fn answers_sent_up_front_are_those_the_client_offers_and_never_roots() {
    let answers = InputResponses::from([
        (
            "form".to_owned(),
            json!({"action": "accept", "content": {"name": "Alice"}}),
        ),
        (
            "roots".to_owned(),
            json!({"roots": [{"uri": "file:///home/alice"}]}),
        ),
        (
            "completion".to_owned(),
            json!({"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}),
        ),
    ]);
    let keys = |offers: Offers| {
        opening(Some(answers.clone()), offers)
            .map(|answers| answers.into_keys().collect::<Vec<_>>())
            .unwrap_or_default()
    };
    let both = Offers {
        elicits: true,
        samples: true,
    };
    assert_eq!(keys(both), ["completion", "form"]);
    let forms = Offers {
        elicits: true,
        samples: false,
    };
    assert_eq!(keys(forms), ["form"]);
    assert!(keys(Offers::default()).is_empty());
    assert_eq!(opening(None, both), None);
}

#[test]
fn a_server_gets_answers_to_its_questions_only() {
    let (asked, mut answered) = asked("keep?");
    let answers = InputResponses::from([
        ("confirm".to_owned(), json!({"action": "accept"})),
        ("airlock_approval".to_owned(), json!({"action": "accept"})),
        ("other".to_owned(), json!({"action": "decline"})),
    ]);
    assert!(asked.answered_by(&answers));
    assert!(!asked.answered_by(&InputResponses::new()));
    asked.answer(answers);
    let given = answered.try_recv().expect("answered");
    assert_eq!(given.keys().collect::<Vec<_>>(), ["confirm"]);
}

#[test]
fn answers_of_no_known_shape_are_refused() {
    let one = |answer: Value| InputResponses::from([("k".to_owned(), answer)]);
    for answer in [
        json!(12345),
        json!("accept"),
        json!(null),
        json!([]),
        json!({}),
        json!({"action": "maybe"}),
        json!({"roots": "/"}),
        json!({"role": "assistant"}),
    ] {
        assert_eq!(malformed(&one(answer.clone())), Some("k"), "{answer}");
    }
    for answer in [
        json!({"action": "accept", "content": {"name": "Alice"}}),
        json!({"action": "decline"}),
        json!({"roots": [{"uri": "file:///test/root", "name": "Test Root"}]}),
        json!({"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"}),
    ] {
        assert_eq!(malformed(&one(answer.clone())), None, "{answer}");
    }
}

#[test]
fn a_refusal_for_what_the_client_lacks_carries_only_the_capabilities() {
    let (asking, _asked) = mpsc::channel(1);
    let relay = Relay {
        asked: asking,
        elicits: false,
        samples: false,
        opening: Mutex::default(),
        lacked: Mutex::default(),
    };
    let lacked = || relay.lacked.lock().unwrap().clone();
    assert!(lacked().is_none());
    relay.lacks(&ErrorData::new(
        ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
        "<script>the server's words</script>",
        Some(json!({"requiredCapabilities": {"sampling": {}}, "secret": "server data"})),
    ));
    let required = lacked().expect("kept");
    assert!(required.sampling.is_some() && required.elicitation.is_none());
    let shown = serde_json::to_string(&required).unwrap();
    assert!(
        !shown.contains("server data") && !shown.contains("script"),
        "{shown}"
    );
    // Data that is no capabilities: the refusal still reaches the client, naming none.
    relay.lacks(&ErrorData::new(
        ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
        "",
        Some(json!({"requiredCapabilities": "everything"})),
    ));
    assert_eq!(lacked(), Some(ClientCapabilities::default()));
}
