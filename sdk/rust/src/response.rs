//! Encodes a tool's outcome as the one result document the ABI allows on stdout.

use serde::Serialize;
use serde_json::json;

use crate::ToolError;

/// `{"ok": …}` or `{"error": {"message", "retryable"}}`, followed by a newline.
pub(crate) fn encode<O: Serialize>(result: &Result<O, ToolError>) -> Vec<u8> {
    let mut document = match result {
        Ok(value) => match serde_json::to_vec(&Success { ok: value }) {
            Ok(bytes) => bytes,
            // A `Serialize` impl can refuse (a map with non-string keys, a custom impl
            // that errors); the ABI still needs one valid document.
            Err(err) => encode_error(&ToolError::new(format!(
                "the tool's result could not be encoded as JSON: {err}"
            ))),
        },
        Err(err) => encode_error(err),
    };
    document.push(b'\n');
    document
}

#[derive(Serialize)]
struct Success<'a, O> {
    ok: &'a O,
}

fn encode_error(err: &ToolError) -> Vec<u8> {
    // Built as a `Value`, whose `Display` cannot fail, so there is no second failure to
    // handle here.
    json!({"error": {"message": err.message(), "retryable": err.is_retryable()}})
        .to_string()
        .into_bytes()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::Value;

    use super::*;

    fn parse(bytes: &[u8]) -> anyhow::Result<Value> {
        anyhow::ensure!(bytes.ends_with(b"\n"), "no trailing newline");
        Ok(serde_json::from_slice(bytes)?)
    }

    #[test]
    fn ok_wraps_the_value() -> anyhow::Result<()> {
        let doc = parse(&encode::<_>(&Result::<_, ToolError>::Ok(json!({"n": 1}))))?;
        assert_eq!(doc, json!({"ok": {"n": 1}}));
        Ok(())
    }

    #[test]
    fn error_carries_message_and_retryable() -> anyhow::Result<()> {
        let result: Result<(), ToolError> = Err(ToolError::retryable("busy"));
        let doc = parse(&encode(&result))?;
        assert_eq!(
            doc,
            json!({"error": {"message": "busy", "retryable": true}})
        );
        Ok(())
    }

    #[test]
    fn an_unencodable_result_becomes_an_error_document() -> anyhow::Result<()> {
        let mut map = BTreeMap::new();
        map.insert((1u8, 2u8), "tuple keys are not JSON object keys");
        let doc = parse(&encode(&Result::<_, ToolError>::Ok(map)))?;
        let message = doc["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("the tool's result could not be encoded as JSON"),
            "{doc}"
        );
        Ok(())
    }
}
