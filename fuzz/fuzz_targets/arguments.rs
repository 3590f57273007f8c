//! Argument validation: a model's (or client's) arguments checked against a tool's input
//! schema by [`ArgumentSchema::validate`].
//!
//! The first byte picks the schema: one of the shipped plugins' real schemas, with the rest of
//! the input as the arguments (the daemon's case: operator schema, untrusted arguments); or,
//! past them, a schema and arguments of the input's own, split at the first NUL byte, which
//! also exercises [`ArgumentSchema::compile`] on whatever a manifest could hold.
//!
//! Beyond "no panic", accepted arguments are always one JSON object and a refusal names at
//! least one violation.

#![no_main]

use std::sync::OnceLock;

use airlock_daemon::testing::{ArgumentError, ArgumentSchema};
use libfuzzer_sys::fuzz_target;

/// The input schemas of the plugins shipped in `plugins/`.
const SCHEMAS: [&str; 7] = [
    include_str!("../../plugins/grep/schema.json"),
    include_str!("../../plugins/list_dir/schema.json"),
    include_str!("../../plugins/py_outline/schema.json"),
    include_str!("../../plugins/read_file/schema.json"),
    include_str!("../../plugins/wc/schema.json"),
    include_str!("../../plugins/workspace_grep/schema.json"),
    include_str!("../../plugins/write_file/schema.json"),
];

/// The daemon reports at most this many violations (`MAX_VIOLATIONS` in arguments.rs).
const MAX_VIOLATIONS: usize = 10;

fn shipped() -> &'static [ArgumentSchema] {
    static COMPILED: OnceLock<Vec<ArgumentSchema>> = OnceLock::new();
    COMPILED.get_or_init(|| {
        SCHEMAS
            .iter()
            .map(|text| {
                let json = serde_json::from_str(text).expect("a shipped schema is JSON");
                ArgumentSchema::compile(json).expect("a shipped schema compiles")
            })
            .collect()
    })
}

fn check(schema: &ArgumentSchema, arguments: &[u8]) {
    let Ok(arguments) = std::str::from_utf8(arguments) else {
        // Requests carry arguments as a protobuf `string`, which is UTF-8 by then.
        return;
    };
    match schema.validate(arguments) {
        Ok(value) => assert!(value.is_object(), "accepted {value}"),
        Err(ArgumentError::Schema(violations)) => {
            assert!(
                (1..=MAX_VIOLATIONS).contains(&violations.len()),
                "{} violations",
                violations.len()
            );
        }
        Err(err @ (ArgumentError::NotJson(_) | ArgumentError::NotAnObject(_))) => {
            // The message goes back to the model; building it must not fail either.
            let _ = err.to_string();
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    match shipped().get(usize::from(selector)) {
        Some(schema) => check(schema, rest),
        None => {
            let (schema, arguments) = match rest.iter().position(|b| *b == 0) {
                Some(nul) => (&rest[..nul], &rest[nul + 1..]),
                None => (rest, &b""[..]),
            };
            let Ok(json) = serde_json::from_slice(schema) else {
                return;
            };
            if let Ok(schema) = ArgumentSchema::compile(json) {
                check(&schema, arguments);
            }
        }
    }
});
