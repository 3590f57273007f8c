//! The WASI command around a tool function: argv, stdin, stdout and the exit code.

use std::io;
use std::io::Read;
use std::io::Write;
use std::process;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::error::Category;

use crate::ToolError;
use crate::response;
use crate::schema::input_schema;

/// The most argument bytes a tool reads from stdin: 16 MiB.
///
/// Arguments are a model's tool call; even a `write_file` of a large source file stays
/// far below this. The cap keeps a runaway input from exhausting the guest's linear
/// memory (where it would trap with a far less useful message).
pub const MAX_INPUT_BYTES: u64 = 16 * 1024 * 1024;

/// The first argument that makes a tool print its input schema instead of running.
const SCHEMA_FLAG: &str = "--schema";

/// Runs `tool` as an airlock tool and exits: the whole `main` of a tool.
///
/// With `--schema` as the first argument, prints the JSON Schema of `I` and exits 0.
/// Otherwise reads the arguments from stdin (at most [`MAX_INPUT_BYTES`]), decodes them as
/// `I`, calls `tool` and writes its outcome as the one result document on stdout, then
/// exits 0: an `Err` from `tool`, or arguments that do not decode, are an `error` result,
/// not a failed process. A panic in `tool` is not caught: it ends the tool with a trap
/// (or a non-zero exit natively), which the ABI reports as a crashed tool.
pub fn run<I, O, F>(tool: F) -> !
where
    I: DeserializeOwned + JsonSchema,
    O: Serialize,
    F: FnOnce(I) -> Result<O, ToolError>,
{
    if std::env::args_os()
        .nth(1)
        .is_some_and(|arg| arg == SCHEMA_FLAG)
    {
        emit(input_schema::<I>().as_bytes());
    }
    let document = handle(io::stdin().lock(), tool);
    emit(&document)
}

/// What [`run`] does between reading stdin and writing stdout, without the process
/// around it: decodes the arguments from `input`, calls `tool` and returns the result
/// document. Useful to test a tool end to end natively.
pub fn handle<I, O, F>(input: impl Read, tool: F) -> Vec<u8>
where
    I: DeserializeOwned,
    O: Serialize,
    F: FnOnce(I) -> Result<O, ToolError>,
{
    let result = read_input(input)
        .and_then(|bytes| decode::<I>(&bytes))
        .and_then(tool);
    response::encode(&result)
}

fn emit(document: &[u8]) -> ! {
    let mut stdout = io::stdout().lock();
    match stdout.write_all(document).and_then(|()| stdout.flush()) {
        Ok(()) => process::exit(0),
        Err(err) => {
            // Nothing is left to report the failure through but stderr and the exit code.
            eprintln!("airlock-sdk: could not write the result to stdout: {err}");
            process::exit(1)
        }
    }
}

fn read_input(input: impl Read) -> Result<Vec<u8>, ToolError> {
    let mut bytes = Vec::new();
    input
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| ToolError::new(format!("could not read the arguments from stdin: {err}")))?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(ToolError::new(format!(
            "the arguments are larger than the {MAX_INPUT_BYTES}-byte limit of this tool"
        )));
    }
    Ok(bytes)
}

fn decode<I: DeserializeOwned>(bytes: &[u8]) -> Result<I, ToolError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ToolError::new(
            "no arguments on stdin: expected one JSON object",
        ));
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let args = serde_path_to_error::deserialize(&mut deserializer).map_err(describe_decode)?;
    deserializer
        .end()
        .map_err(|err| ToolError::new(format!("the arguments are not one JSON document: {err}")))?;
    Ok(args)
}

fn describe_decode(err: serde_path_to_error::Error<serde_json::Error>) -> ToolError {
    let path = err.path().to_string();
    let inner = err.into_inner();
    let message = match inner.classify() {
        Category::Syntax | Category::Eof => format!("the arguments are not valid JSON: {inner}"),
        // The path is "." when the problem is the document itself (a missing or unknown
        // top-level field), which the inner message already names.
        Category::Data if path == "." => format!("invalid arguments: {inner}"),
        Category::Data => format!("invalid arguments: at `{path}`: {inner}"),
        Category::Io => format!("could not read the arguments from stdin: {inner}"),
    };
    ToolError::new(message)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::Value;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Args {
        name: String,
        #[serde(default)]
        inner: Option<Inner>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        counts: Vec<u32>,
    }

    #[derive(Serialize)]
    struct Out {
        greeting: String,
        total: u32,
    }

    fn greet(args: Args) -> Result<Out, ToolError> {
        if args.name == "fail" {
            return Err(ToolError::retryable("asked to fail"));
        }
        Ok(Out {
            greeting: format!("hello {}", args.name),
            total: args
                .inner
                .map(|inner| inner.counts.iter().sum())
                .unwrap_or(0),
        })
    }

    fn call(input: impl AsRef<[u8]>) -> anyhow::Result<Value> {
        Ok(serde_json::from_slice(&handle(input.as_ref(), greet))?)
    }

    fn error_message(document: &Value) -> &str {
        document["error"]["message"].as_str().unwrap_or_default()
    }

    #[test]
    fn ok_result() -> anyhow::Result<()> {
        let doc = call(r#"{"name": "ada", "inner": {"counts": [1, 2, 3]}}"#)?;
        assert_eq!(doc, json!({"ok": {"greeting": "hello ada", "total": 6}}));
        Ok(())
    }

    #[test]
    fn tool_error_is_passed_through() -> anyhow::Result<()> {
        let doc = call(r#"{"name": "fail"}"#)?;
        assert_eq!(
            doc,
            json!({"error": {"message": "asked to fail", "retryable": true}})
        );
        Ok(())
    }

    #[test]
    fn bad_json_says_so() -> anyhow::Result<()> {
        let doc = call(r#"{"name": "#)?;
        assert!(
            error_message(&doc).starts_with("the arguments are not valid JSON: EOF"),
            "{doc}"
        );
        assert_eq!(doc["error"]["retryable"], false);
        Ok(())
    }

    #[test]
    fn empty_input_says_no_arguments() -> anyhow::Result<()> {
        let doc = call(" \n")?;
        assert_eq!(
            error_message(&doc),
            "no arguments on stdin: expected one JSON object"
        );
        Ok(())
    }

    #[test]
    fn a_mismatch_names_the_field_path() -> anyhow::Result<()> {
        let doc = call(r#"{"name": "ada", "inner": {"counts": [1, "two"]}}"#)?;
        let message = error_message(&doc);
        assert!(
            message.starts_with(
                "invalid arguments: at `inner.counts[1]`: invalid type: string \"two\""
            ),
            "{message}"
        );
        Ok(())
    }

    #[test]
    fn missing_and_unknown_fields_are_named() -> anyhow::Result<()> {
        let missing = call(r#"{}"#)?;
        assert!(
            error_message(&missing).starts_with("invalid arguments: missing field `name`"),
            "{missing}"
        );
        let unknown = call(r#"{"name": "ada", "colour": "red"}"#)?;
        assert!(
            error_message(&unknown).contains("unknown field `colour`"),
            "{unknown}"
        );
        Ok(())
    }

    #[test]
    fn trailing_data_is_refused() -> anyhow::Result<()> {
        let doc = call(r#"{"name": "ada"} {"name": "bob"}"#)?;
        assert!(
            error_message(&doc).starts_with("the arguments are not one JSON document"),
            "{doc}"
        );
        let whitespace = call("{\"name\": \"ada\"}\n\n")?;
        assert_eq!(whitespace["ok"]["greeting"], "hello ada");
        Ok(())
    }

    #[test]
    fn input_over_the_cap_is_refused_at_the_edge() -> anyhow::Result<()> {
        let limit = usize::try_from(MAX_INPUT_BYTES)?;
        // Padding whitespace keeps the document valid, so only its size can fail it.
        let document = br#"{"name": "ada"}"#;
        let mut at_limit = document.to_vec();
        at_limit.resize(limit, b' ');
        assert_eq!(call(&at_limit)?["ok"]["greeting"], "hello ada");

        let mut over = at_limit;
        over.push(b' ');
        let doc = call(&over)?;
        assert!(error_message(&doc).contains("larger than the"), "{doc}");
        Ok(())
    }
}
