//! A preview 1 module's sleep — `poll_oneoff` with one relative clock subscription — served
//! by tokio's timer.
//!
//! A call that can only read serves its filesystem calls on its own thread (wasmtime-wasi's
//! `allow_blocking_current_thread`, see `call::reads_only`): reading a file from the page
//! cache costs a few microseconds, handing it to tokio's blocking pool and back costs more,
//! and a tool makes dozens of such calls. With that mode on, wasmtime-wasi 48 also serves a
//! module's sleep with `std::thread::sleep`, on the runtime's worker, for as long as the guest
//! asks: the worker would serve nothing else meanwhile, and the call's deadline could not fire,
//! since the call's future is not polled while its thread sleeps. This shadow of
//! `poll_oneoff` serves exactly that case with an async timer, as wasmtime-wasi does with the
//! mode off, so a sleeping call is dropped at its deadline like any other; every other poll
//! goes to wasmtime-wasi's own implementation, through the glue wiggle generates for it
//! (written out here as wiggle writes it, since a linker offers no way to call the definition a
//! shadow replaces).
//!
//! The subscription is read and the event written with the layouts of the preview 1 witx
//! (`subscription`: 48 bytes, `event`: 32 bytes, both 8-aligned). Only a valid relative
//! clock is served here; every subscription wasmtime-wasi would refuse before waiting (a bad
//! pointer, an unknown clock or flag) goes to it, and it refuses it; a bad event pointer traps
//! after the sleep, as it does there.

use std::time::Duration;

use wasmtime::{AsContextMut, Caller, Extern, Linker};
use wasmtime_wasi::p1::wasi_snapshot_preview1::{self as p1, WasiSnapshotPreview1};

use super::call::ModuleState;

const MODULE: &str = "wasi_snapshot_preview1";

/// `subscription`: userdata u64 @0, tag u8 @8, then for a clock: id u32 @16, timeout u64
/// @24, precision u64 @32, flags u16 @40.
const SUBSCRIPTION_BYTES: usize = 48;
/// `event`: userdata u64 @0, error u16 @8, type u8 @10, fd_readwrite.nbytes u64 @16,
/// fd_readwrite.flags u16 @24.
const EVENT_BYTES: usize = 32;
const ALIGN: usize = 8;
/// `eventtype::clock`, the tag of a clock subscription and the type of its event.
const EVENTTYPE_CLOCK: u8 = 0;
/// `clockid::thread_cputime_id`, the last of the four clocks.
const LAST_CLOCK: u32 = 3;
/// `errno::success`.
const SUCCESS: i32 = 0;

/// Shadows `poll_oneoff` of `linker`, which must already hold wasmtime-wasi's preview 1.
pub(super) fn add_to_linker(linker: &mut Linker<ModuleState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    linker.func_wrap_async(
        MODULE,
        "poll_oneoff",
        |mut caller: Caller<'_, ModuleState>,
         (subs, events, nsubscriptions, nevents): (i32, i32, i32, i32)| {
            Box::new(async move {
                if let Some(timer) = one_relative_timer(&mut caller, subs, nsubscriptions) {
                    tokio::time::sleep(timer.timeout).await;
                    return fired(&mut caller, &timer, events, nevents);
                }
                wasi_poll_oneoff(&mut caller, subs, events, nsubscriptions, nevents).await
            })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// The one relative timer a poll waits on, when that is all it waits on.
#[derive(Debug, PartialEq)]
struct Timer {
    userdata: u64,
    timeout: Duration,
}

fn one_relative_timer(
    caller: &mut Caller<'_, ModuleState>,
    subs: i32,
    nsubscriptions: i32,
) -> Option<Timer> {
    if nsubscriptions != 1 {
        return None;
    }
    let Some(Extern::Memory(memory)) = caller.get_export("memory") else {
        return None;
    };
    relative_timer(region(memory.data(&caller), subs, SUBSCRIPTION_BYTES)?)
}

/// The timer a subscription's bytes describe, if it is a valid relative clock: anything
/// else (an absolute time, an unknown clock or flag, which wasmtime-wasi refuses before
/// waiting) is left to wasmtime-wasi.
fn relative_timer(subscription: &[u8]) -> Option<Timer> {
    let u64_at = |at: usize| {
        let bytes: [u8; 8] = subscription.get(at..at + 8)?.try_into().ok()?;
        Some(u64::from_le_bytes(bytes))
    };
    let tag = *subscription.get(8)?;
    let clock = u32::from_le_bytes(subscription.get(16..20)?.try_into().ok()?);
    let flags = u16::from_le_bytes(subscription.get(40..42)?.try_into().ok()?);
    if tag != EVENTTYPE_CLOCK || clock > LAST_CLOCK || flags != 0 {
        return None;
    }
    Some(Timer {
        userdata: u64_at(0)?,
        timeout: Duration::from_nanos(u64_at(24)?),
    })
}

/// `len` bytes of guest memory at `ptr`, if in bounds and aligned as the witx types are.
fn region(data: &[u8], ptr: i32, len: usize) -> Option<&[u8]> {
    let start = offset(data.len(), ptr, len, ALIGN)?;
    data.get(start..start + len)
}

/// Where `len` bytes at guest pointer `ptr` start, if they lie within `memory` bytes and
/// `ptr` is a multiple of `align`.
fn offset(memory: usize, ptr: i32, len: usize, align: usize) -> Option<usize> {
    // A guest pointer is an unsigned 32-bit offset that wasmtime hands over as i32.
    let start = usize::try_from(ptr.cast_unsigned()).ok()?;
    (start % align == 0 && start.checked_add(len)? <= memory).then_some(start)
}

/// Writes the timer's event and the count of events, as wasmtime-wasi does for a sleep.
fn fired(
    caller: &mut Caller<'_, ModuleState>,
    timer: &Timer,
    events: i32,
    nevents: i32,
) -> wasmtime::Result<i32> {
    let Some(Extern::Memory(memory)) = caller.get_export("memory") else {
        wasmtime::bail!("missing required memory export");
    };
    let data = memory.data_mut(caller);
    // A bad pointer traps, as wiggle makes it for every preview 1 function (witx-docs.md:
    // "the function shall trap").
    let Some(at) = offset(data.len(), events, EVENT_BYTES, ALIGN) else {
        wasmtime::bail!("poll_oneoff: the events pointer is out of bounds or misaligned");
    };
    let event = &mut data[at..at + EVENT_BYTES];
    event.fill(0);
    event[0..8].copy_from_slice(&timer.userdata.to_le_bytes());
    event[10] = EVENTTYPE_CLOCK;
    event[16..24].copy_from_slice(&1u64.to_le_bytes());
    // `nevents` is a `size`: a u32.
    let Some(at) = offset(data.len(), nevents, 4, 4) else {
        wasmtime::bail!("poll_oneoff: the nevents pointer is out of bounds or misaligned");
    };
    data[at..at + 4].copy_from_slice(&1u32.to_le_bytes());
    Ok(SUCCESS)
}

/// wasmtime-wasi's own `poll_oneoff`, through the glue wiggle generates for every preview 1
/// function.
async fn wasi_poll_oneoff(
    caller: &mut Caller<'_, ModuleState>,
    subs: i32,
    events: i32,
    nsubscriptions: i32,
    nevents: i32,
) -> wasmtime::Result<i32> {
    let fuel = caller.as_context_mut().hostcall_fuel();
    let Some(Extern::Memory(memory)) = caller.get_export("memory") else {
        wasmtime::bail!("missing required memory export");
    };
    let (data, state) = memory.data_and_store_mut(caller);
    let ctx = &mut state.wasi;
    ctx.set_hostcall_fuel(fuel);
    let mut memory = wiggle::GuestMemory::Unshared(data);
    p1::poll_oneoff(ctx, &mut memory, subs, events, nsubscriptions, nevents).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subscription(tag: u8, clock: u32, timeout: u64, flags: u16) -> [u8; SUBSCRIPTION_BYTES] {
        let mut bytes = [0u8; SUBSCRIPTION_BYTES];
        bytes[0..8].copy_from_slice(&7u64.to_le_bytes());
        bytes[8] = tag;
        bytes[16..20].copy_from_slice(&clock.to_le_bytes());
        bytes[24..32].copy_from_slice(&timeout.to_le_bytes());
        bytes[40..42].copy_from_slice(&flags.to_le_bytes());
        bytes
    }

    #[test]
    fn only_a_valid_relative_clock_is_served_here() {
        let timer = |tag, clock, flags| relative_timer(&subscription(tag, clock, 5, flags));
        let expected = Timer {
            userdata: 7,
            timeout: Duration::from_nanos(5),
        };
        for clock in 0..=LAST_CLOCK {
            assert_eq!(timer(EVENTTYPE_CLOCK, clock, 0).as_ref(), Some(&expected));
        }
        // An absolute time, an unknown flag or clock, an fd subscription: wasmtime-wasi's.
        assert_eq!(timer(EVENTTYPE_CLOCK, 1, 1), None);
        assert_eq!(timer(EVENTTYPE_CLOCK, 1, 2), None);
        assert_eq!(timer(EVENTTYPE_CLOCK, LAST_CLOCK + 1, 0), None);
        assert_eq!(timer(1, 1, 0), None);
        assert_eq!(timer(2, 1, 0), None);
        assert_eq!(relative_timer(&[0u8; 20]), None);
    }

    #[test]
    fn a_region_is_in_bounds_and_aligned() {
        assert_eq!(offset(64, 0, 48, 8), Some(0));
        assert_eq!(offset(64, 16, 48, 8), Some(16));
        assert_eq!(offset(64, 17, 40, 8), None, "misaligned");
        assert_eq!(offset(64, 24, 48, 8), None, "past the end");
        assert_eq!(offset(64, -8, 48, 8), None, "a pointer near 4 GiB");
        assert_eq!(offset(1 << 32, -8, 48, 8), None, "past the end of 4 GiB");
    }
}
