//! `bad_json`: writes `this is not json` to stdout and exits 0.
//!
//! Attacks the daemon's result parsing. The sandbox must report `TOOL_ERROR` ("the tool broke
//! the ABI: …"), never `OK` and never a crash.

use std::io::{self, Write};
use std::process::ExitCode;

use airlock_hostile::run_raw;
use serde_json::Value;

fn main() -> ExitCode {
    run_raw(|_: Value| -> ExitCode {
        match io::stdout().lock().write_all(b"this is not json\n") {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::FAILURE,
        }
    })
}
