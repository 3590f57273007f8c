//! `trap`: dies the way its arguments say. Args: `{"kind": "unreachable" | "panic" |
//! "div_zero" | "stack_overflow" | "abort"}`.
//!
//! Attacks the engine's handling of a guest that dies mid-call. The sandbox must report
//! `TOOL_ERROR` with the trap message and the end of stderr, and stay healthy for the next
//! call. What each kind produces under WebAssembly:
//! - `unreachable`: a bare `unreachable` instruction, with nothing on stderr;
//! - `panic`: the panic message on stderr, then an abort (`unreachable`);
//! - `div_zero`: Rust checks integer division before the instruction runs, so this is the
//!   panic `attempt to divide by zero` on stderr, then an abort; never a silent result;
//! - `stack_overflow`: unbounded recursion with a buffer in every frame, which exhausts the
//!   shadow stack (an out-of-bounds memory access) or the engine's call stack, whichever first;
//! - `abort`: `std::process::abort`, an `unreachable` with nothing on stderr.
//!
//! Natively (outside the sandbox) `unreachable` and `abort` end in SIGABRT, `panic` and
//! `div_zero` in exit code 101, `stack_overflow` in SIGSEGV/SIGABRT.

use std::hint::black_box;
use std::process::{self, ExitCode};

use airlock_hostile::run_raw;
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Unreachable,
    Panic,
    DivZero,
    StackOverflow,
    Abort,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    kind: Kind,
}

/// How much each frame of the recursion holds, so that it consumes the stack quickly.
const FRAME_BYTES: usize = 1024;

#[cfg(target_arch = "wasm32")]
fn unreachable() -> ! {
    core::arch::wasm32::unreachable()
}

/// Off WebAssembly there is no such instruction; aborting is the nearest equivalent.
#[cfg(not(target_arch = "wasm32"))]
fn unreachable() -> ! {
    process::abort()
}

fn divide_by_zero() -> ExitCode {
    let quotient = black_box(1_i32) / black_box(0_i32);
    eprintln!("trap: 1 / 0 returned {quotient} instead of trapping");
    ExitCode::FAILURE
}

/// Recurses without end; the frame's buffer is used after the call, so the compiler can
/// neither turn the recursion into a loop nor shrink the frame.
fn recurse(depth: u64) -> u64 {
    let frame = [0_u8; FRAME_BYTES];
    black_box(&frame);
    if black_box(depth) == u64::MAX {
        return 0;
    }
    recurse(depth + 1) + u64::from(frame[depth as usize % FRAME_BYTES])
}

fn main() -> ExitCode {
    run_raw(|args: Args| -> ExitCode {
        match args.kind {
            Kind::Unreachable => unreachable(),
            Kind::Panic => panic!("trap: panicking on purpose"),
            Kind::DivZero => divide_by_zero(),
            Kind::StackOverflow => {
                let depth = recurse(0);
                eprintln!("trap: recursion returned {depth} instead of overflowing the stack");
                ExitCode::FAILURE
            }
            Kind::Abort => process::abort(),
        }
    })
}
