//! The typed interface (world `tool` of wit/tool.wit): the daemon calls the exported
//! `call` with the arguments as JSON text and a context; the result is JSON text or a
//! tool error. Standard output and standard error are the call's logs.

mod tool;

use std::path::Path;

// The bindings of wit/tool.wit, generated at compile time (clippy's lints are for your
// code, not theirs).
#[allow(clippy::all)]
mod bindings {
    wit_bindgen::generate!({ path: "wit", world: "tool" });
}

use bindings::{Context, Guest, ToolError};

struct Component;

impl Guest for Component {
    fn call(arguments: String, context: Context) -> Result<String, ToolError> {
        let workspace = context
            .workspace
            .ok_or_else(|| fail("this tool needs a workspace"))?;
        let arguments: tool::Arguments = serde_json::from_str(&arguments)
            .map_err(|err| fail(format!("bad arguments: {err}")))?;
        let output = tool::run(arguments, Path::new(&workspace)).map_err(fail)?;
        serde_json::to_string(&output).map_err(|err| fail(err.to_string()))
    }
}

/// A tool error (status TOOL_ERROR) that retrying the same call will not fix.
fn fail(message: impl Into<String>) -> ToolError {
    ToolError {
        message: message.into(),
        retryable: false,
    }
}

bindings::export!(Component with_types_in bindings);
