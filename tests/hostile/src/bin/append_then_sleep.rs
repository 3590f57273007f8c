//! `append_then_sleep`: appends a line to a workspace file, then sleeps. Args: `{"path":
//! string, "line": string, "sleep_ms": u64}`.
//!
//! Not an attack: the side effect the crash tests count. Run as a non-idempotent write tool,
//! it lets a test kill the daemon while the effect has happened but the call has not
//! finished, and then check that a resumed run never appends the line a second time.

use std::fs::OpenOptions;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use airlock_hostile::{ToolError, run};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    line: String,
    sleep_ms: u64,
}

fn main() -> ExitCode {
    run(|args: Args| -> Result<Value, ToolError> {
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&args.path)
            .map_err(|err| ToolError::new(format!("cannot open {}: {err}", args.path)))?;
        writeln!(file, "{}", args.line)
            .and_then(|()| file.sync_all())
            .map_err(|err| ToolError::new(format!("cannot append to {}: {err}", args.path)))?;
        std::thread::sleep(Duration::from_millis(args.sleep_ms));
        Ok(json!({"appended": args.line}))
    })
}
