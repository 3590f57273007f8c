//! `typed_probe` (built as a wasm32-wasip2 component of the typed world
//! `airlock:tool/tool@0.1.0`, sdk/wit/tool.wit): its `call` takes `{"mode": …}` and
//! misbehaves, or behaves, as the mode says.
//!
//! Modes (the other fields are the mode's arguments):
//!
//! - `echo`: returns `{"arguments": <the arguments>, "context": {"workspace", "deadline_unix_ms",
//!   "call_id"}}`, the context record as the daemon passed it (`workspace` null when absent).
//! - `error` `{"message": string}`: returns the tool error `{message, retryable: true}`.
//! - `not_json`: returns the text `not json` as the result, which breaks the world's contract.
//! - `spin`: loops forever without calling the host.
//! - `trap`: panics (on WebAssembly a panic aborts: the call traps).
//! - `big` `{"bytes": u64}`: returns a JSON string of `bytes` `a`s (`bytes + 2` bytes of JSON).
//! - `log` `{"stdout": string, "stderr": string}`: prints each on its stream (one line each),
//!   then returns `{"logged": true}`.
//! - `grow`: allocates and fills 1 MiB chunks, keeping them all, forever.
//! - `read` `{"path": string}`: returns the text of `path`, relative to the context's
//!   workspace, as a JSON string; a tool error without a workspace.
//!
//! Arguments that do not parse are a tool error that is not retryable.
//!
//! The sandbox must treat a typed component exactly as it treats a module: the same statuses,
//! limits, cancellation, output policy and metadata (tests/tests/all/typed_components.rs).
//! Off WebAssembly the same probe runs on the stdio ABI, with the current directory as the
//! workspace.

use std::hint::black_box;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The context record of the world, as plain Rust.
#[derive(Debug, Clone, Serialize)]
struct Context {
    workspace: Option<String>,
    deadline_unix_ms: u64,
    call_id: String,
}

/// The tool error of the world, as plain Rust.
#[derive(Debug, Clone, Serialize)]
struct Failure {
    message: String,
    retryable: bool,
}

impl Failure {
    fn fatal(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            retryable: false,
        }
    }
}

#[derive(Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
enum Mode {
    Echo,
    Error { message: String },
    NotJson,
    Spin,
    Trap,
    Big { bytes: u64 },
    Log { stdout: String, stderr: String },
    Grow,
    Read { path: String },
}

/// One step of growth for `grow`.
const CHUNK: usize = 1 << 20;

/// What `call` does with `arguments` (JSON text) in `context`: `Ok` is the result's text.
fn probe(arguments: &str, context: &Context) -> Result<String, Failure> {
    let value: Value = serde_json::from_str(arguments)
        .map_err(|err| Failure::fatal(format!("invalid arguments: {err}")))?;
    let mode: Mode = serde_json::from_value(value.clone())
        .map_err(|err| Failure::fatal(format!("invalid arguments: {err}")))?;
    match mode {
        Mode::Echo => Ok(json!({"arguments": value, "context": context}).to_string()),
        Mode::Error { message } => Err(Failure {
            message,
            retryable: true,
        }),
        Mode::NotJson => Ok("not json".to_owned()),
        Mode::Spin => {
            let mut turns: u64 = 0;
            // `black_box` keeps the optimiser from proving the loop body useless.
            loop {
                turns = black_box(turns.wrapping_add(1));
            }
        }
        Mode::Trap => panic!("typed_probe: asked to trap"),
        Mode::Big { bytes } => {
            let len = usize::try_from(bytes).map_err(|err| Failure::fatal(err.to_string()))?;
            let mut text = String::with_capacity(len + 2);
            text.push('"');
            text.extend(std::iter::repeat_n('a', len));
            text.push('"');
            Ok(text)
        }
        Mode::Log { stdout, stderr } => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{stdout}")
                .and_then(|()| out.flush())
                .map_err(|err| Failure::fatal(format!("cannot write stdout: {err}")))?;
            let mut err_out = std::io::stderr().lock();
            writeln!(err_out, "{stderr}")
                .and_then(|()| err_out.flush())
                .map_err(|err| Failure::fatal(format!("cannot write stderr: {err}")))?;
            Ok(json!({"logged": true}).to_string())
        }
        Mode::Grow => {
            let mut held: Vec<Vec<u8>> = Vec::new();
            loop {
                // A non-zero fill writes every page, so the memory is really in use.
                held.push(black_box(vec![0xA5; CHUNK]));
            }
        }
        Mode::Read { path } => {
            let workspace = context
                .workspace
                .as_deref()
                .ok_or_else(|| Failure::fatal("no workspace is granted"))?;
            let text = std::fs::read_to_string(Path::new(workspace).join(&path))
                .map_err(|err| Failure::fatal(format!("cannot read {path}: {err}")))?;
            serde_json::to_string(&text).map_err(|err| Failure::fatal(err.to_string()))
        }
    }
}

/// The component: `call` of the world, generated by wit-bindgen.
#[cfg(target_arch = "wasm32")]
mod component {
    // The bindings of sdk/wit/tool.wit, generated at compile time (clippy's lints are for
    // this file, not for them).
    #[allow(clippy::all, clippy::unwrap_used, clippy::expect_used)]
    mod bindings {
        wit_bindgen::generate!({ path: "../../sdk/wit", world: "airlock:tool/tool" });
    }

    use bindings::{Guest, ToolError};

    struct Probe;

    impl Guest for Probe {
        fn call(arguments: String, context: bindings::Context) -> Result<String, ToolError> {
            let context = super::Context {
                workspace: context.workspace,
                deadline_unix_ms: context.deadline_unix_ms,
                call_id: context.call_id,
            };
            super::probe(&arguments, &context).map_err(|failure| ToolError {
                message: failure.message,
                retryable: failure.retryable,
            })
        }
    }

    bindings::export!(Probe with_types_in bindings);
}

/// A component's `call` is its entry point: running it as a command is a mistake.
#[cfg(target_arch = "wasm32")]
fn main() -> std::process::ExitCode {
    eprintln!("typed_probe: a typed component; call its `call` export, not wasi:cli/run");
    std::process::ExitCode::FAILURE
}

/// Natively, the same probe on the stdio ABI, with the current directory as the workspace.
#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    use std::io::Read;
    let mut arguments = String::new();
    if let Err(err) = std::io::stdin().read_to_string(&mut arguments) {
        eprintln!("typed_probe: cannot read the arguments: {err}");
        return std::process::ExitCode::FAILURE;
    }
    let deadline_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis())
                .unwrap_or(u64::MAX)
                .saturating_add(60_000)
        });
    let context = Context {
        workspace: Some(".".to_owned()),
        deadline_unix_ms,
        call_id: "native".to_owned(),
    };
    let document = match probe(&arguments, &context) {
        Ok(text) => format!("{{\"ok\":{text}}}"),
        Err(failure) => json!({ "error": failure }).to_string(),
    };
    println!("{document}");
    std::process::ExitCode::SUCCESS
}
