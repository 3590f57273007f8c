//! `exit_code`: writes `exit_code: exiting with code <code>` to stderr and exits with that
//! code, writing nothing to stdout. Args: `{"code": i32}`.
//!
//! Attacks the daemon's reading of how a tool ended. The sandbox must report `TOOL_ERROR`
//! with the exit code and the end of stderr for any non-zero code, and `TOOL_ERROR` ("broke
//! the ABI": no result) for 0. Under WASI preview 1, `proc_exit` with a code of 126 or more is
//! itself refused by wasmtime as an invalid exit status, which must still be a `TOOL_ERROR`.

use std::process::{self, ExitCode};

use airlock_hostile::run_raw;
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    code: i32,
}

fn main() -> ExitCode {
    run_raw(|args: Args| -> ExitCode {
        eprintln!("exit_code: exiting with code {}", args.code);
        process::exit(args.code)
    })
}
