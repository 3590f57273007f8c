//! The tool side of the airlock ABI: arguments as one JSON document on stdin, exactly one
//! result document (`{"ok": …}` or `{"error": …}`) on stdout, exit code 0.

use std::io::{self, Read, Write};
use std::process::ExitCode;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The body of an `{"error": …}` result: the tool ran but could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolError {
    pub message: String,
    pub retryable: bool,
}

impl ToolError {
    /// An error that the same call would meet again.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retryable: false,
        }
    }

    /// An error that the same call may not meet later (a busy resource).
    pub fn retryable(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retryable: true,
        }
    }
}

/// A result document; serde's external tagging gives exactly `{"ok": …}` / `{"error": …}`.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum Outcome<'a, T> {
    Ok(&'a T),
    Error(&'a ToolError),
}

/// Reads the call's arguments from stdin, to its end, as one JSON document.
pub fn read_args<A: DeserializeOwned>() -> Result<A, ToolError> {
    let mut input = Vec::new();
    io::stdin()
        .lock()
        .read_to_end(&mut input)
        .map_err(|error| {
            ToolError::new(format!("cannot read the arguments from stdin: {error}"))
        })?;
    serde_json::from_slice(&input)
        .map_err(|error| ToolError::new(format!("invalid arguments: {error}")))
}

/// Writes one result document, followed by a newline, and flushes it.
pub fn write_result<T: Serialize>(
    out: &mut impl Write,
    result: &Result<T, ToolError>,
) -> io::Result<()> {
    let outcome = match result {
        Ok(value) => Outcome::Ok(value),
        Err(error) => Outcome::Error(error),
    };
    serde_json::to_writer(&mut *out, &outcome)?;
    out.write_all(b"\n")?;
    out.flush()
}

/// Runs a tool that keeps the ABI: reads its arguments, calls it, writes its one result.
///
/// Arguments that do not parse become an `{"error": …}` result, as the ABI asks of any tool.
pub fn run<A, T>(tool: impl FnOnce(A) -> Result<T, ToolError>) -> ExitCode
where
    A: DeserializeOwned,
    T: Serialize,
{
    finish(&read_args().and_then(tool))
}

/// Runs a tool that breaks the ABI on purpose: once its arguments are read, the tool owns
/// stdout and the exit code, and writes whatever it is meant to (nothing, garbage, two
/// results) itself. Arguments that do not parse still get a proper `{"error": …}` result, so a
/// test's typo is never mistaken for the misbehaviour under test.
pub fn run_raw<A: DeserializeOwned>(tool: impl FnOnce(A) -> ExitCode) -> ExitCode {
    match read_args() {
        Ok(args) => tool(args),
        Err(error) => finish::<()>(&Err(error)),
    }
}

fn finish<T: Serialize>(result: &Result<T, ToolError>) -> ExitCode {
    match write_result(&mut io::stdout().lock(), result) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // stderr is all that is left to say it on; if that fails too, the exit code says it.
            let _ = writeln!(io::stderr(), "cannot write the result to stdout: {error}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use std::error::Error;

    fn written<T: Serialize>(result: &Result<T, ToolError>) -> Result<String, Box<dyn Error>> {
        let mut out = Vec::new();
        write_result(&mut out, result)?;
        Ok(String::from_utf8(out)?)
    }

    #[test]
    fn ok_result_is_one_document_keyed_ok() -> Result<(), Box<dyn Error>> {
        let text = written(&Ok(json!({"a": [1, 2]})))?;
        assert_eq!(text, "{\"ok\":{\"a\":[1,2]}}\n");
        Ok(())
    }

    #[test]
    fn error_result_carries_message_and_retryable() -> Result<(), Box<dyn Error>> {
        let text = written::<()>(&Err(ToolError::retryable("busy")))?;
        let value: Value = serde_json::from_str(&text)?;
        assert_eq!(
            value,
            json!({"error": {"message": "busy", "retryable": true}})
        );
        assert!(!ToolError::new("no").retryable);
        Ok(())
    }
}
