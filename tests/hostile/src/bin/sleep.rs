//! `sleep`: reads its arguments, then sleeps for an hour in one `std::thread::sleep`.
//!
//! Attacks the wall-clock limit from inside a blocking host call (`poll_oneoff` under WASI),
//! where the guest executes no WebAssembly that an epoch could interrupt. The sandbox must
//! still end the call as `TIMEOUT` at its deadline, or `CANCELLED` when cancelled first. Should
//! it ever wake, it returns `{"ok": {"slept_seconds": 3600}}`.

use std::process::ExitCode;
use std::thread;
use std::time::Duration;

use airlock_hostile::{ToolError, run};
use serde_json::{Value, json};

/// Far past any deadline a test sets, so that waking up on its own is a failure, not a race.
const SLEEP: Duration = Duration::from_secs(3600);

fn main() -> ExitCode {
    run(|_: Value| -> Result<Value, ToolError> {
        eprintln!("sleep: sleeping for {} s", SLEEP.as_secs());
        thread::sleep(SLEEP);
        Ok(json!({ "slept_seconds": SLEEP.as_secs() }))
    })
}
