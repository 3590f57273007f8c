//! `echo`: returns its arguments unchanged, `{"ok": <the arguments>}`.
//!
//! Not an attack: the no-op tool that tests and benchmarks use to measure and exercise the
//! path around a call. The sandbox must return `OK` with `content` equal to the arguments.

use std::process::ExitCode;

use airlock_hostile::{ToolError, run};
use serde_json::Value;

fn main() -> ExitCode {
    run(|args: Value| -> Result<Value, ToolError> { Ok(args) })
}
