//! `two_results`: writes two well-formed result documents, `{"ok":"first"}` then
//! `{"ok":"second"}`, one a line, and exits 0.
//!
//! Attacks the "exactly one document" rule: a daemon that takes the first or the last
//! document as the result lets a tool smuggle a second answer past whoever read the first.
//! The sandbox must report `TOOL_ERROR` ("the tool broke the ABI: …").

use std::io;
use std::process::ExitCode;

use airlock_hostile::{ToolError, run_raw, write_result};
use serde_json::Value;

fn main() -> ExitCode {
    run_raw(|_: Value| -> ExitCode {
        let mut out = io::stdout().lock();
        let written = ["first", "second"]
            .into_iter()
            .try_for_each(|answer| write_result(&mut out, &Ok::<_, ToolError>(answer)));
        match written {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::FAILURE,
        }
    })
}
