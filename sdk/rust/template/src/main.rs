//! The stdio ABI (sdk/ABI.md): the arguments JSON on stdin, exactly one `{"ok": ...}` or
//! `{"error": ...}` document on stdout, exit code 0 either way. Logs go to stderr.
//! The workspace is the current directory.

mod tool;

use std::io::{Read, Write};
use std::path::Path;

use serde_json::{Value, json};

fn main() {
    let reply = match call() {
        Ok(value) => json!({ "ok": value }),
        Err(message) => json!({ "error": { "message": message, "retryable": false } }),
    };
    let mut stdout = std::io::stdout().lock();
    // Nothing else is written to stdout; if even this fails there is no one to tell.
    let _ = writeln!(stdout, "{reply}");
    let _ = stdout.flush();
}

fn call() -> Result<Value, String> {
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .map_err(|err| format!("cannot read the arguments: {err}"))?;
    let arguments: tool::Arguments =
        serde_json::from_str(&input).map_err(|err| format!("bad arguments: {err}"))?;
    let output = tool::run(arguments, Path::new("."))?;
    serde_json::to_value(output).map_err(|err| err.to_string())
}
