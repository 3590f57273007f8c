//! Reading a tool's stdout under the JSON ABI of sdk/ABI.md: exactly one document,
//! `{"ok": …}` or `{"error": {"message", "retryable"}}`.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::value::RawValue;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AbiResult {
    /// The `ok` value, exactly as the tool wrote it (its keys in their order, its spacing):
    /// the whole output that a caller may see part of, and that is kept byte for byte.
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
    if stdout.iter().all(u8::is_ascii_whitespace) {
        return Err("the tool wrote no result to stdout".into());
    }
    let text = std::str::from_utf8(stdout).map_err(|_| "stdout is not UTF-8".to_owned())?;
    // An object read key by key rather than as a tagged enum: the ABI ignores unknown keys
    // at every level, and an enum refuses any key beside its tag. Values stay raw text, so
    // that `ok` is passed on as the tool wrote it.
    let mut document: HashMap<String, &RawValue> = serde_json::from_str(text).map_err(|err| {
        format!("stdout is not one result document ({{\"ok\": …}} or {{\"error\": …}}): {err}")
    })?;
    match (document.remove("ok"), document.remove("error")) {
        (Some(value), None) => Ok(AbiResult::Ok(value.get().to_owned())),
        (None, Some(body)) if body.get().starts_with('{') => {
            let body: ErrorBody = serde_json::from_str(body.get())
                .map_err(|err| format!("`error` is not {{\"message\", \"retryable\"}}: {err}"))?;
            Ok(AbiResult::Error {
                message: body.message,
                retryable: body.retryable,
            })
        }
        (None, Some(_)) => Err("`error` must be an object with a `message`".into()),
        (Some(_), Some(_)) => Err("the result has both `ok` and `error`".into()),
        (None, None) => Err("the result has neither `ok` nor `error`".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ok_and_error_documents() {
        assert_eq!(
            parse_result(b"{\"ok\": {\"b\": [1, 2], \"a\": 0}}\n"),
            Ok(AbiResult::Ok("{\"b\": [1, 2], \"a\": 0}".into())),
            "kept as written: key order and spacing"
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

    /// Found by the `abi_result` fuzz target (2026-11-29): a key beside `ok` was refused,
    /// though sdk/ABI.md says unknown keys at any level are ignored.
    #[test]
    fn unknown_keys_are_ignored_at_every_level() {
        assert_eq!(
            parse_result(br#"{"ok": 1, "evror": {"message": "x"}}"#),
            Ok(AbiResult::Ok("1".into()))
        );
        assert_eq!(
            parse_result(br#"{"log": [], "error": {"message": "m", "code": 7}}"#),
            Ok(AbiResult::Error {
                message: "m".into(),
                retryable: false
            })
        );
        assert_eq!(
            parse_result(br#"{"ok": null}"#),
            Ok(AbiResult::Ok("null".into()))
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
            b"{\"error\": [\"x\", true]}",
            b"{\"error\": {\"message\": \"x\", \"retryable\": null}}",
            b"\xff\xfe",
            b"[1]",
        ] {
            assert!(parse_result(bad).is_err(), "{:?} was accepted", bad);
        }
    }
}
