//! Components that implement the typed world `airlock:tool/tool` (sdk/wit/tool.wit): the
//! arguments and a context record go in through `call`, and its `result<string, tool-error>`
//! comes back as a value instead of a document on stdout.
//!
//! The result is turned into the stdio ABI's envelope and written to the call's capture as
//! stdout, so the executor shapes it exactly as it shapes a module's (statuses, output
//! limit, truncation, kept outputs): one path for all three kinds. The component's own
//! stdout and stderr are both logs.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::value::RawValue;
use wasmtime::Store;

use super::call::{ComponentState, Slot, configure};
use crate::engine::contract::{Exit, Launch};
use crate::output::StreamKind;
use crate::pause::{self, Point};
use crate::profile::GUEST_WORKSPACE;

/// The generated host side of the world.
mod bindings {
    wasmtime::component::bindgen!({
        path: "../sdk/wit",
        world: "airlock:tool/tool",
        exports: { default: async },
    });
}

use bindings::Context;
pub(super) use bindings::ToolPre as TypedPre;

/// The context record of `launch`.
fn context(launch: &Launch) -> Context {
    Context {
        workspace: launch
            .profile
            .grants_workspace()
            .then(|| GUEST_WORKSPACE.to_owned()),
        deadline_unix_ms: (SystemTime::now()
            + launch
                .deadline
                .saturating_duration_since(std::time::Instant::now()))
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        }),
        call_id: launch.call_id.to_string(),
    }
}

/// Instantiates the component and runs one call; `Ok` is how the call ended, once its
/// result is in the capture.
pub(super) async fn run(
    engine: &wasmtime::Engine,
    pre: &TypedPre<ComponentState>,
    state: ComponentState,
    launch: &Launch,
    slot: Slot,
) -> wasmtime::Result<Exit> {
    let arguments = std::str::from_utf8(&launch.stdin)?;
    let mut store = Store::new(engine, state);
    configure(&mut store, |state| &mut state.limiter);
    pause::reached(Point::WasmInstantiate);
    let returned = async {
        let tool = pre.instantiate_async(&mut store).await?;
        tool.call_call(&mut store, arguments, &context(launch))
            .await
    }
    .await;
    slot.release(store);
    let returned = returned?;
    let envelope = match returned {
        // Checked to be one JSON value, so it cannot close the envelope early.
        Ok(text) => match RawValue::from_string(text) {
            Ok(value) => format!("{{\"ok\":{}}}", value.get()),
            Err(err) => {
                return Ok(Exit::AbiViolation(format!(
                    "`call` returned text that is not JSON ({err})"
                )));
            }
        },
        Err(error) => serde_json::json!({
            "error": { "message": error.message, "retryable": error.retryable }
        })
        .to_string(),
    };
    // A result past the output limit stops the call here, as a module's oversized write
    // does; the executor reports the limit.
    let _ = launch
        .capture
        .write(StreamKind::Stdout, envelope.as_bytes());
    Ok(Exit::Code(0))
}
