//! `big_result`: returns `{"ok": "<bytes times 'a'>"}`, a valid result document of any size,
//! streamed in chunks so that its size is never limited by the tool's own memory.
//! Args: `{"bytes": u64}`.
//!
//! Attacks the output policy with a result that is well-formed but too long. The sandbox must
//! return `OK` with `content` cut by the tool's `[output]` policy, `truncated` set and
//! `original_bytes` = `bytes + 2` (the quoted JSON string), or `LIMIT_EXCEEDED` where the
//! document passes the profile's output cap.

use std::io::{self, Write};
use std::process::ExitCode;

use airlock_hostile::run_raw;
use serde::Deserialize;

/// Large enough that a big result takes few host calls, small enough to be nothing in memory.
const CHUNK: usize = 64 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    bytes: u64,
}

fn write_result(out: &mut impl Write, mut bytes: u64) -> io::Result<()> {
    let chunk = [b'a'; CHUNK];
    out.write_all(br#"{"ok":""#)?;
    while bytes > 0 {
        // After `min` the length is at most `CHUNK`, so the cast is exact.
        let len = bytes.min(CHUNK as u64) as usize;
        out.write_all(&chunk[..len])?;
        bytes -= len as u64;
    }
    out.write_all(b"\"}\n")?;
    out.flush()
}

fn main() -> ExitCode {
    run_raw(|args: Args| -> ExitCode {
        match write_result(&mut io::stdout().lock(), args.bytes) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("big_result: writing the result failed: {error}");
                ExitCode::FAILURE
            }
        }
    })
}
