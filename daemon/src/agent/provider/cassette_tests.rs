//! Tests of cassettes: parsing and size limits, and how a replay names the first difference.

use serde_json::json;

use super::*;

#[test]
fn the_first_difference_is_named_by_its_pointer() {
    let recorded = json!({"model": "m", "messages": [{"role": "user", "content": "hi"},
            {"role": "tool", "content": "42"}]});
    assert_eq!(
        first_difference(&recorded, &recorded.clone(), &mut String::new()),
        None
    );
    let now = json!({"model": "m", "messages": [{"role": "user", "content": "hi"},
            {"role": "tool", "content": "43"}]});
    assert_eq!(
        first_difference(&recorded, &now, &mut String::new()).as_deref(),
        Some(r#"/messages/1/content: recorded "42", now "43""#)
    );
    let longer = json!({"model": "m", "messages": [{"role": "user", "content": "hi"},
            {"role": "tool", "content": "42"}, {"role": "user", "content": "more"}]});
    assert_eq!(
        first_difference(&recorded, &longer, &mut String::new()).as_deref(),
        Some("/messages: 2 item(s) recorded, now 3")
    );
    let keyed = json!({"model": "m", "messages": [], "a/b": 1});
    assert_eq!(
        first_difference(
            &json!({"model": "m", "messages": []}),
            &keyed,
            &mut String::new()
        )
        .as_deref(),
        Some("/a~1b: absent when recorded, now 1")
    );
}

#[test]
fn long_values_are_quoted_short() {
    let quoted = quote(&json!("x".repeat(1000)));
    assert!(quoted.ends_with('…'));
    assert_eq!(quoted.chars().count(), QUOTE_CHARS + 1);
}

#[test]
fn a_cassette_may_be_as_large_as_the_limit_and_no_larger() {
    let document = r#"{"cassette": 1, "provider": "scripted", "model": "scripted",
            "run_id": "r", "exchanges": []}"#;
    let mut text = document.to_owned();
    text.push_str(&" ".repeat(MAX_CASSETTE_BYTES - document.len()));
    assert_eq!(text.len(), MAX_CASSETTE_BYTES);
    Cassette::parse(&text).expect("at the limit");
    text.push(' ');
    let error = Cassette::parse(&text).expect_err("past the limit");
    assert!(error.to_string().contains("more than the"), "{error}");
}

#[test]
fn cassettes_are_checked_where_they_are_wrong() {
    let error = Cassette::parse(
        r#"{"cassette": 1, "provider": "openai", "model": "m",
            "run_id": "r", "exchanges": [{"purpose": "step", "answers": 0, "request": {},
            "reply": {"whole": {}}, "extra": 1}]}"#,
    )
    .expect_err("an unknown field");
    assert!(error.to_string().contains("exchanges[0]"), "{error}");
    let error = Cassette::parse(
        r#"{"cassette": 9, "provider": "openai", "model": "m",
            "run_id": "r", "exchanges": []}"#,
    )
    .expect_err("a later version");
    assert!(error.to_string().contains("version 9"), "{error}");
    let error = Cassette::parse("{").expect_err("not JSON");
    assert!(
        error
            .to_string()
            .starts_with("model provider configuration: cassette:")
    );
}
