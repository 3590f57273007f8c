//! Reading a tool's stdout under the JSON ABI of sdk/ABI.md: exactly one document,
//! `{"ok": …}` or `{"error": {"message", "retryable"}}`.

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AbiResult {
    /// The `ok` value, as compact JSON text.
    Ok(String),
    Error {
        message: String,
        retryable: bool,
    },
}

/// Parses one result document; the error says how the tool broke the ABI.
pub fn parse_result(stdout: &[u8]) -> Result<AbiResult, String> {
    #[derive(Deserialize)]
    struct ErrorBody {
        message: String,
        #[serde(default)]
        retryable: bool,
    }
    #[derive(Deserialize)]
    enum Document {
        #[serde(rename = "ok")]
        Ok(Value),
        #[serde(rename = "error")]
        Error(ErrorBody),
    }
    if stdout.iter().all(u8::is_ascii_whitespace) {
        return Err("the tool wrote no result to stdout".into());
    }
    let text = std::str::from_utf8(stdout).map_err(|_| "stdout is not UTF-8".to_owned())?;
    let document: Document = serde_json::from_str(text).map_err(|err| {
        format!("stdout is not one result document ({{\"ok\": …}} or {{\"error\": …}}): {err}")
    })?;
    Ok(match document {
        Document::Ok(value) => AbiResult::Ok(value.to_string()),
        Document::Error(body) => AbiResult::Error {
            message: body.message,
            retryable: body.retryable,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ok_and_error_documents() {
        assert_eq!(
            parse_result(b"{\"ok\": {\"a\": [1, 2]}}\n"),
            Ok(AbiResult::Ok("{\"a\":[1,2]}".into()))
        );
        assert_eq!(
            parse_result(br#"{"error": {"message": "busy", "retryable": true}}"#),
            Ok(AbiResult::Error {
                message: "busy".into(),
                retryable: true
            })
        );
        assert_eq!(
            parse_result(br#"{"error": {"message": "no"}}"#),
            Ok(AbiResult::Error {
                message: "no".into(),
                retryable: false
            })
        );
    }

    #[test]
    fn anything_else_breaks_the_abi() {
        for bad in [
            &b""[..],
            b"  \n",
            b"not json",
            b"{\"ok\": 1}{\"ok\": 2}",
            b"{\"result\": 1}",
            b"{\"ok\": 1, \"error\": {\"message\": \"x\"}}",
            b"{\"error\": \"x\"}",
            b"\xff\xfe",
            b"[1]",
        ] {
            assert!(parse_result(bad).is_err(), "{:?} was accepted", bad);
        }
    }
}
