//! `spin`: reads its arguments, then burns CPU in a loop that never ends and never calls the
//! host.
//!
//! Attacks the wall-clock limit where nothing but the engine's own interruption (epochs) can
//! stop the guest. The sandbox must end the call as `TIMEOUT` at its deadline, or
//! `CANCELLED` when cancelled first.

use std::hint::black_box;
use std::process::ExitCode;

use airlock_hostile::run_raw;
use serde_json::Value;

fn main() -> ExitCode {
    run_raw(|_: Value| -> ExitCode {
        eprintln!("spin: spinning forever");
        let mut turns: u64 = 0;
        // `black_box` keeps the optimiser from proving the loop body useless.
        loop {
            turns = black_box(turns.wrapping_add(1));
        }
    })
}
