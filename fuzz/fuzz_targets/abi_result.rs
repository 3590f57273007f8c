//! The tool ABI's result parsing: the input is what a tool wrote to stdout, read by
//! [`parse_result`].
//!
//! A tool is untrusted, so beyond "no panic" the daemon's reading is checked against an
//! independent reading of sdk/ABI.md: exactly one JSON document (trailing whitespace allowed),
//! an object with `ok` or with `error` (an object with a string `message` and an optional
//! boolean `retryable`); unknown keys at any level are ignored. An object with both is
//! refused: it is neither outcome. A key given twice counts once, the last one, as serde_json
//! reads every object.

#![no_main]

use airlock_daemon::testing::{AbiResult, parse_result};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// What sdk/ABI.md says the document means, or `None` when it breaks the ABI.
fn reference(stdout: &[u8]) -> Option<AbiResult> {
    let text = std::str::from_utf8(stdout).ok()?;
    let Value::Object(mut document) = serde_json::from_str::<Value>(text).ok()? else {
        return None;
    };
    match (document.remove("ok"), document.remove("error")) {
        (Some(ok), None) => Some(AbiResult::Ok(ok.to_string())),
        (None, Some(Value::Object(error))) => {
            let message = error.get("message")?.as_str()?.to_owned();
            let retryable = match error.get("retryable") {
                None => false,
                Some(value) => value.as_bool()?,
            };
            Some(AbiResult::Error { message, retryable })
        }
        _ => None,
    }
}

fuzz_target!(|data: &[u8]| {
    let parsed = parse_result(data);
    if let Ok(AbiResult::Ok(content)) = &parsed {
        // `content` goes to clients and models as JSON text; it must be JSON.
        assert!(
            serde_json::from_str::<Value>(content).is_ok(),
            "{content:?}"
        );
    }
    assert_eq!(
        parsed.ok(),
        reference(data),
        "the daemon and sdk/ABI.md disagree about {:?}",
        String::from_utf8_lossy(data)
    );
});
