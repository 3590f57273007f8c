//! A deadline on compiling a module. wasmtime leaves the cost of compilation to its embedder:
//! a module crafted to make Cranelift work for minutes would hold the daemon's start (tools
//! load before it serves), so compiling runs on its own thread and a module not compiled in
//! time is refused, naming the limit.

use std::sync::mpsc;
use std::time::Duration;

/// How long a small module may take to compile. The first-party tools compile in well under
/// a second; thirty seconds is an order of magnitude of margin on a loaded two-core machine,
/// short enough that a small hostile module cannot stall a start.
pub const MAX_COMPILE_TIME: Duration = Duration::from_secs(30);

/// What each MiB of a module adds to [`MAX_COMPILE_TIME`]. Compiling costs about half a
/// second of CPU per MiB of real code (a Python component of 18 MiB: 10.5 s); three seconds
/// keep the same margin for it on a loaded machine, so large tools are not refused where
/// small ones pass.
const COMPILE_TIME_PER_MIB: Duration = Duration::from_secs(3);

/// The compile deadline of a module of `bytes`.
pub fn compile_limit(bytes: usize) -> Duration {
    let mib = u32::try_from(bytes >> 20).unwrap_or(u32::MAX);
    MAX_COMPILE_TIME.saturating_add(COMPILE_TIME_PER_MIB.saturating_mul(mib))
}

/// Runs `compile` on a thread of its own and waits for it at most `limit`. Past the limit
/// the thread is left to finish on its own (Cranelift cannot be interrupted) and its result
/// is dropped; the caller gets an error that names the limit.
pub fn compile_within<T: Send + 'static>(
    limit: Duration,
    compile: impl FnOnce() -> wasmtime::Result<T> + Send + 'static,
) -> wasmtime::Result<T> {
    let (done, result) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("airlockd-compile".into())
        .spawn(move || {
            // The receiver is gone only after the deadline passed: nobody wants the result.
            let _ = done.send(compile());
        })
        .map_err(|err| wasmtime::Error::msg(format!("cannot start a compile thread: {err}")))?;
    match result.recv_timeout(limit) {
        Ok(compiled) => compiled,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(wasmtime::Error::msg(format!(
            "compiling took longer than the limit of {} s (MAX_COMPILE_TIME, plus 3 s per MiB); \
             refusing the module",
            limit.as_secs_f64()
        ))),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(wasmtime::Error::msg(
            "the compile thread ended without a result",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_modules_get_more_time() {
        assert_eq!(compile_limit(40 << 10), MAX_COMPILE_TIME);
        assert_eq!(compile_limit(18 << 20), Duration::from_secs(30 + 18 * 3));
    }

    #[test]
    fn a_compile_within_the_limit_returns_its_result() {
        let value = compile_within(Duration::from_secs(5), || Ok(7)).expect("in time");
        assert_eq!(value, 7);
        let err = compile_within::<()>(Duration::from_secs(5), || {
            Err(wasmtime::Error::msg("bad module"))
        })
        .expect_err("its own error");
        assert!(err.to_string().contains("bad module"));
    }

    #[test]
    fn a_compile_past_the_limit_is_refused_naming_the_limit() {
        let started = std::time::Instant::now();
        let err = compile_within(Duration::from_millis(50), || {
            std::thread::sleep(Duration::from_millis(500));
            Ok(())
        })
        .expect_err("too slow");
        assert!(started.elapsed() < Duration::from_millis(400));
        assert!(err.to_string().contains("MAX_COMPILE_TIME"), "{err}");
    }
}
