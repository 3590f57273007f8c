//! Pretty-printing JSON text exactly as written.
//!
//! Parsing into `serde_json::Value` and printing that back would sort object keys (the
//! workspace does not enable `preserve_order`, and must not: other crates rely on sorted keys)
//! and would round numbers beyond `f64` precision. A tool's result and a tool's schema are
//! shown as their authors wrote them, so the text is re-indented token by token instead.

/// One level of indentation, as `serde_json::to_string_pretty` uses.
const INDENT: &str = "  ";

/// `text` re-indented over several lines, keys and numbers untouched; `None` when `text` is
/// not exactly one JSON document.
pub fn pretty_json(text: &str) -> Option<String> {
    serde_json::from_str::<serde::de::IgnoredAny>(text).ok()?;
    Some(reindent(text))
}

/// `text` on one line without the whitespace between tokens, keys and numbers untouched;
/// `None` when `text` is not exactly one JSON document.
pub fn compact_json(text: &str) -> Option<String> {
    serde_json::from_str::<serde::de::IgnoredAny>(text).ok()?;
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
        } else if is_json_whitespace(c) {
            continue;
        }
        out.push(c);
    }
    Some(out)
}

/// Re-indents text already known to be valid JSON. Outside strings, valid JSON has only
/// structural characters, scalars and whitespace, so whitespace can be dropped and re-added
/// around the structure without looking at anything else.
fn reindent(json: &str) -> String {
    let mut out = String::with_capacity(json.len() * 2);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = json.chars().peekable();
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                while chars.next_if(|next| is_json_whitespace(*next)).is_some() {}
                let close = if c == '{' { '}' } else { ']' };
                out.push(c);
                if chars.next_if_eq(&close).is_some() {
                    // Empty containers stay on one line: `{}`, `[]`.
                    out.push(close);
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if is_json_whitespace(c) => {}
            c => out.push(c),
        }
    }
    out
}

fn is_json_whitespace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

fn newline(out: &mut String, depth: usize) {
    out.push('\n');
    for _ in 0..depth {
        out.push_str(INDENT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pretty(text: &str) -> String {
        match pretty_json(text) {
            Some(pretty) => pretty,
            None => panic!("{text:?} was not taken for JSON"),
        }
    }

    #[test]
    fn matches_serde_json_layout_for_sorted_input() -> anyhow::Result<()> {
        let text = r#"{"a":[1,2,{"b":null}],"c":{},"d":[],"e":"x"}"#;
        let value: serde_json::Value = serde_json::from_str(text)?;
        assert_eq!(pretty(text), serde_json::to_string_pretty(&value)?);
        Ok(())
    }

    #[test]
    fn keeps_key_order_and_number_text() {
        let text = r#"{"zeta": 1, "alpha": 12345678901234567890123, "pi": 3.14159265358979323846}"#;
        assert_eq!(
            pretty(text),
            "{\n  \"zeta\": 1,\n  \"alpha\": 12345678901234567890123,\n  \
             \"pi\": 3.14159265358979323846\n}"
        );
    }

    #[test]
    fn leaves_strings_alone() {
        let text = r#"{"s": "a, b: {c} [d] \"q\" \\", "t": " "}"#;
        assert_eq!(
            pretty(text),
            "{\n  \"s\": \"a, b: {c} [d] \\\"q\\\" \\\\\",\n  \"t\": \" \"\n}"
        );
    }

    #[test]
    fn reindents_already_pretty_text_identically() {
        let once = pretty("[ {\n\t\"a\" :\r\n 1 } , [ ] ]");
        assert_eq!(once, "[\n  {\n    \"a\": 1\n  },\n  []\n]");
        assert_eq!(pretty(&once), once);
    }

    #[test]
    fn scalars_are_printed_as_they_are() {
        assert_eq!(pretty(" \"just text\" "), "\"just text\"");
        assert_eq!(pretty("42"), "42");
    }

    #[test]
    fn compacting_drops_whitespace_between_tokens_only() {
        let text = "{ \"b\" : [ 1 , 2 ],\n \"a\": \"x  y\\\" z\" }";
        assert_eq!(
            compact_json(text).as_deref(),
            Some("{\"b\":[1,2],\"a\":\"x  y\\\" z\"}")
        );
        assert_eq!(compact_json("not json"), None);
    }

    #[test]
    fn text_that_is_not_one_json_document_is_refused() {
        assert_eq!(pretty_json("hello"), None);
        assert_eq!(pretty_json("{\"a\": 1"), None);
        assert_eq!(pretty_json("{} {}"), None);
        assert_eq!(pretty_json(""), None);
    }
}
