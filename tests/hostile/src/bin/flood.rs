//! `flood`: writes `stdout_bytes` to stdout and `stderr_bytes` to stderr, interleaved in 64 KiB
//! chunks, each written and flushed as it comes (the tool never holds more than one chunk).
//! Args: `{"stdout_bytes": u64?, "stderr_bytes": u64?}`; an absent count means without end.
//!
//! Attacks the output limits and the daemon's buffering of both streams. The stream content
//! is a fixed pattern, lines of 63 `o` (stdout) or `e` (stderr) and a newline, so a test can
//! check any captured prefix byte for byte. The sandbox must stop an endless flood with
//! `LIMIT_EXCEEDED` and never hold more than its cap. When both counts are given and the tool
//! finishes, it exits 0 with no result document: stdout holds only the pattern, so the call
//! ends as `TOOL_ERROR` ("broke the ABI") unless a limit stopped it first. If a write fails
//! (the host closed the stream), the tool says so on stderr and exits 1.

use std::io::{self, Write};
use std::process::ExitCode;

use airlock_hostile::run_raw;
use serde::Deserialize;

/// Large enough that an endless flood reaches any output cap in a few host calls, small enough
/// that the two streams visibly alternate.
const CHUNK: usize = 64 * 1024;

/// The pattern's line length, newline included; `CHUNK` is a multiple of it, so every chunk
/// continues the pattern exactly where the previous one ended.
const LINE: usize = 64;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    stdout_bytes: Option<u64>,
    stderr_bytes: Option<u64>,
}

/// One stream being flooded: its pattern chunk and how much is left (`None`: without end).
struct Flood {
    name: &'static str,
    out: Box<dyn Write>,
    chunk: Vec<u8>,
    left: Option<u64>,
    written: u64,
}

impl Flood {
    fn new(name: &'static str, out: Box<dyn Write>, fill: u8, left: Option<u64>) -> Self {
        let chunk = (0..CHUNK)
            .map(|at| if at % LINE == LINE - 1 { b'\n' } else { fill })
            .collect();
        Self {
            name,
            out,
            chunk,
            left,
            written: 0,
        }
    }

    fn done(&self) -> bool {
        self.left == Some(0)
    }

    /// Writes the next chunk, or what is left of the count if that is less.
    fn step(&mut self) -> io::Result<()> {
        // After `min` the length is at most `CHUNK`, so the cast is exact.
        let len = self
            .left
            .map_or(CHUNK, |left| left.min(CHUNK as u64) as usize);
        self.out.write_all(&self.chunk[..len])?;
        self.out.flush()?;
        self.written += len as u64;
        if let Some(left) = &mut self.left {
            *left -= len as u64;
        }
        Ok(())
    }
}

fn main() -> ExitCode {
    run_raw(|args: Args| -> ExitCode {
        let mut floods = [
            Flood::new("stdout", Box::new(io::stdout()), b'o', args.stdout_bytes),
            Flood::new("stderr", Box::new(io::stderr()), b'e', args.stderr_bytes),
        ];
        while floods.iter().any(|flood| !flood.done()) {
            for flood in floods.iter_mut().filter(|flood| !flood.done()) {
                if let Err(error) = flood.step() {
                    // stderr may be the stream that failed; the exit code still tells.
                    let _ = writeln!(
                        io::stderr(),
                        "flood: writing {} failed after {} bytes: {error}",
                        flood.name,
                        flood.written
                    );
                    return ExitCode::FAILURE;
                }
            }
        }
        ExitCode::SUCCESS
    })
}
