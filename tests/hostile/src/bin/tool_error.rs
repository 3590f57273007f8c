//! `tool_error`: returns `{"error": {"message": "the thing is busy", "retryable": true}}`.
//!
//! Not an attack: the well-behaved failure. The sandbox must report `TOOL_ERROR` with
//! `error_message` = `the thing is busy` and `retryable` set.

use std::process::ExitCode;

use airlock_hostile::{ToolError, run};
use serde_json::Value;

fn main() -> ExitCode {
    run(|_: Value| -> Result<(), ToolError> { Err(ToolError::retryable("the thing is busy")) })
}
