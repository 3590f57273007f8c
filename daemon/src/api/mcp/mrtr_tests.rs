//! The request state's binding: a state opens only for the very call, tenant and daemon it
//! was sealed for, unchanged and in time.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::string_slice
)]

use std::time::Duration;

use super::*;

const KEY: &[u8] = b"a key of the tests, thirty-two bytes or more";

fn states(ttl: Duration) -> States {
    States::with_key("test", KEY, ttl).expect("a key long enough")
}

fn bound() -> Bound {
    Bound {
        tenant: "alice".into(),
        tool: "write_file".into(),
        tool_digest: "sha256:tool".into(),
        arguments: "sha256:arguments".into(),
        workspace: Some("/srv/alice".into()),
        profile: "workspace-write".into(),
    }
}

/// Every binding that differs from [`bound`] in exactly one field.
fn others() -> Vec<(&'static str, Bound)> {
    let change = |what: &'static str, edit: fn(&mut Bound)| {
        let mut other = bound();
        edit(&mut other);
        (what, other)
    };
    vec![
        change("tenant", |b| b.tenant = "bob".into()),
        change("tool", |b| b.tool = "delete_file".into()),
        change("tool digest", |b| b.tool_digest = "sha256:upgraded".into()),
        change("arguments", |b| b.arguments = "sha256:other".into()),
        change("workspace", |b| b.workspace = Some("/srv/bob".into())),
        change("no workspace", |b| b.workspace = None),
        change("profile", |b| b.profile = "workspace-read".into()),
        // Fields whose bytes run together must not pass for one another.
        change("shifted", |b| {
            b.tenant = "alicewrite_file".into();
            b.tool = String::new();
        }),
    ]
}

#[test]
fn a_state_opens_for_its_own_call_only() {
    let states = states(Duration::from_secs(60));
    let sealed = states.seal(&bound(), "apr_1").expect("sealed");
    assert_eq!(states.open(&bound(), &sealed).as_deref(), Some("apr_1"));
    for (what, other) in others() {
        assert_eq!(states.open(&other, &sealed), None, "{what}");
        // And the other call's state does not open for this one.
        let theirs = states.seal(&other, "apr_2").expect("sealed");
        assert_eq!(states.open(&bound(), &theirs), None, "{what}");
    }
}

#[test]
fn every_changed_character_is_refused() {
    let states = states(Duration::from_secs(60));
    let sealed = states.seal(&bound(), "apr_1").expect("sealed");
    let bytes = sealed.as_bytes();
    for at in 0..bytes.len() {
        for replacement in [b'A', b'_', b'-', b'.', b'0'] {
            if bytes[at] == replacement {
                continue;
            }
            let mut changed = bytes.to_vec();
            changed[at] = replacement;
            let changed = String::from_utf8(changed).expect("ASCII");
            assert_eq!(states.open(&bound(), &changed), None, "{changed}");
        }
    }
    for cut in 0..bytes.len() {
        assert_eq!(states.open(&bound(), &sealed[..cut]), None, "cut at {cut}");
    }
    assert_eq!(states.open(&bound(), &format!("{sealed}A")), None);
}

#[test]
fn a_state_names_its_own_question() {
    let states = states(Duration::from_secs(60));
    let first = states.seal(&bound(), "apr_1").expect("sealed");
    let second = states.seal(&bound(), "apr_2").expect("sealed");
    assert_ne!(first, second);
    assert_eq!(states.open(&bound(), &first).as_deref(), Some("apr_1"));
    assert_eq!(states.open(&bound(), &second).as_deref(), Some("apr_2"));
    // The sections of one spliced into the other: neither question.
    let (a, b): (Vec<&str>, Vec<&str>) = (first.split('.').collect(), second.split('.').collect());
    let spliced = format!("{}.{}.{}.{}", a[0], a[1], b[2], a[3]);
    assert_eq!(states.open(&bound(), &spliced), None);
}

#[test]
fn another_daemons_state_does_not_open() {
    let ours = states(Duration::from_secs(60));
    let theirs = States::new(Duration::from_secs(60)).expect("a key");
    let again = States::new(Duration::from_secs(60)).expect("a key");
    let sealed = theirs.seal(&bound(), "apr_1").expect("sealed");
    assert_eq!(ours.open(&bound(), &sealed), None);
    assert_eq!(
        again.open(&bound(), &sealed),
        None,
        "a key drawn at each start"
    );
    assert_eq!(theirs.open(&bound(), &sealed).as_deref(), Some("apr_1"));
}

#[tokio::test]
async fn a_state_expires_with_its_question() {
    let states = states(Duration::from_millis(20));
    let sealed = states.seal(&bound(), "apr_1").expect("sealed");
    assert!(states.open(&bound(), &sealed).is_some());
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert_eq!(states.open(&bound(), &sealed), None);
}

#[test]
fn the_answer_is_the_elicitations_action() {
    let retry = |answer: Value| Retry {
        state: None,
        responses: Some(InputResponses::from([(APPROVAL_INPUT.to_owned(), answer)])),
    };
    assert_eq!(
        retry(json!({"action": "accept", "content": {}})).answer(),
        Some(Decision::ApproveOnce)
    );
    assert_eq!(
        retry(json!({"action": "decline"})).answer(),
        Some(Decision::Deny)
    );
    assert_eq!(
        retry(json!({"action": "cancel"})).answer(),
        Some(Decision::Deny)
    );
    assert_eq!(retry(json!({"action": "maybe"})).answer(), None);
    assert_eq!(retry(json!("accept")).answer(), None);
    let elsewhere = Retry {
        state: None,
        responses: Some(InputResponses::from([(
            "other".to_owned(),
            json!({"action": "accept"}),
        )])),
    };
    assert_eq!(elsewhere.answer(), None);
    assert_eq!(Retry::default().answer(), None);
}
