//! Which WebAssembly proposals an artifact that wasmtime refused depends on, so that the
//! load error names the feature (threads, GC, exceptions, component-model async …) rather
//! than an opcode or a section the author never wrote by hand.
//!
//! The daemon enables wasmtime's default features minus those it is built without; an
//! artifact that needs one of the features below is refused. Each feature is found by
//! validating the artifact with every proposal enabled except that one: if that fails
//! where the whole set passes, the artifact uses it.

use wasmparser::{Validator, WasmFeatures};

/// The proposals the daemon does not enable, with the words an author recognises.
const NOT_ENABLED: &[(WasmFeatures, &str)] = &[
    (WasmFeatures::THREADS, "threads (shared memory and atomics)"),
    (
        WasmFeatures::SHARED_EVERYTHING_THREADS,
        "shared-everything threads",
    ),
    (WasmFeatures::GC, "garbage collection (GC)"),
    (WasmFeatures::EXCEPTIONS, "exception handling"),
    (WasmFeatures::LEGACY_EXCEPTIONS, "legacy exception handling"),
    (WasmFeatures::STACK_SWITCHING, "stack switching"),
    (WasmFeatures::CUSTOM_PAGE_SIZES, "custom page sizes"),
    (WasmFeatures::WIDE_ARITHMETIC, "wide arithmetic"),
    (WasmFeatures::CM_ASYNC, "component-model async"),
    (
        WasmFeatures::CM_ASYNC_STACKFUL,
        "component-model async (stackful)",
    ),
    (
        WasmFeatures::CM_MORE_ASYNC_BUILTINS,
        "component-model async builtins",
    ),
    (WasmFeatures::CM_THREADING, "component-model threading"),
];

/// The features of [`NOT_ENABLED`] that `bytes` needs; empty when it needs none of them (or
/// is not valid WebAssembly under any set).
pub(super) fn needed(bytes: &[u8]) -> Vec<&'static str> {
    let valid = |features: WasmFeatures| {
        Validator::new_with_features(features)
            .validate_all(bytes)
            .is_ok()
    };
    if !valid(WasmFeatures::all()) {
        return Vec::new();
    }
    NOT_ENABLED
        .iter()
        .filter(|(feature, _)| !valid(WasmFeatures::all().difference(*feature)))
        .map(|(_, name)| *name)
        .collect()
}

/// A load error's message, with the features `bytes` needs when that is why it failed.
pub(super) fn explain(bytes: &[u8], message: String) -> String {
    let needed = needed(bytes);
    if needed.is_empty() {
        return message;
    }
    format!(
        "it needs WebAssembly features airlockd does not enable: {} (rebuild without them; \
         sdk/ABI.md lists what is enabled): {message}",
        needed.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needs(wat: &str) -> Vec<&'static str> {
        needed(&wat::parse_str(wat).expect("wat"))
    }

    #[test]
    fn names_threads_gc_and_exceptions() {
        assert_eq!(
            needs("(module (memory 1 1 shared))"),
            ["threads (shared memory and atomics)"]
        );
        assert_eq!(
            needs("(module (type (struct (field i32))))"),
            ["garbage collection (GC)"]
        );
        assert_eq!(needs("(module (tag))"), ["exception handling"]);
    }

    #[test]
    fn a_plain_module_needs_nothing() {
        assert!(needs("(module (memory 1) (func (export \"_start\")))").is_empty());
        assert!(needed(b"not wasm").is_empty());
    }
}
