//! `grow_memory`: allocates 1 MiB chunks, writes every byte of each and keeps them all,
//! forever, printing `grow_memory: holding N MiB` to stderr after each.
//!
//! Attacks the linear-memory limit the way a leaking program would, through the allocator.
//! When the limit refuses to grow memory the allocation fails and the tool aborts; the sandbox
//! must report `LIMIT_EXCEEDED` (not a generic trap), and stderr shows how far it got.

use std::hint::black_box;
use std::process::ExitCode;

use airlock_hostile::run_raw;
use serde_json::Value;

/// One step of growth: coarse enough to reach any realistic limit quickly, fine enough that
/// the last progress line says within a mebibyte where the limit was.
const CHUNK: usize = 1 << 20;

fn main() -> ExitCode {
    run_raw(|_: Value| -> ExitCode {
        let mut held: Vec<Vec<u8>> = Vec::new();
        loop {
            // A non-zero fill writes every page, so the memory is really in use even where
            // fresh pages would otherwise stay untouched (natively, zeroed allocations).
            held.push(black_box(vec![0xA5; CHUNK]));
            eprintln!("grow_memory: holding {} MiB", held.len());
        }
    })
}
