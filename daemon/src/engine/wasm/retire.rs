//! Teardown after the response: a finished call's store is torn down when the worker thread
//! that ran it is about to go idle, rather than before the call's result can leave.
//!
//! Dropping a store is the costliest step of a warm call after the guest itself: its memory
//! is restored from the module's image (after asking the kernel which pages the guest
//! wrote), and its instance, table and fiber stack go back to the pool — about 10 µs of a
//! warm call's daemon time (BENCHMARKS.md, section 1). None of it decides the result. The
//! daemon's runtime calls [`on_worker_park`] each time a worker thread runs out of tasks,
//! which is after the task that served the call has written its response: a store handed to
//! [`Retirement::retire`] is torn down there, on the thread that ran it, with no other
//! thread woken. (A task spawned to drop it was measured first: waking a worker cost what
//! the drop saved.)
//!
//! Only a store that holds nothing of the call's but its own memory, pipes and WASI state
//! is retired. A call with an overlay or an egress gate has its store torn down as it ends
//! (`WasmTool::call` says why). The pipes write to the call's capture, which holds a sender
//! of the call's events: the channel stays open until the park, so every reader of a call's
//! events stops at `Finished` (the gRPC stream and the MCP handler do), not at its close.
//!
//! Bounded, so that nothing waits on a retired store:
//! - a thread keeps retired stores only once it is known to park through the hook (its first
//!   park says so); any other thread — a test's runtime, a blocking thread — drops at once;
//! - a thread keeps at most [`PER_THREAD`], and an engine at most [`MAX_RETIRED`]: a worker
//!   busy with call after call drops inline once its share is full;
//! - the engine's pool has [`MAX_RETIRED`] slots beyond the calls that may run at once, so
//!   a call's place among those is given up as soon as its store is retired: the next call
//!   starts at once, in a spare slot while the retired store holds its own.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Stores one engine keeps retired at once, and so the pool slots it keeps spare for them: a
/// few per worker thread on a small host, where the latency matters most. Each spare slot
/// may keep up to `MEMORY_KEEP_RESIDENT_SCANNED` resident.
pub(super) const MAX_RETIRED: u32 = 8;

/// Stores one thread keeps until it parks. At concurrency 1 a worker serves one call between
/// parks; more would only delay the teardown of a busy worker's calls to its next park.
pub(super) const PER_THREAD: usize = 2;

thread_local! {
    /// Set at this thread's first park through [`on_worker_park`].
    static PARKS: Cell<bool> = const { Cell::new(false) };
    static KEPT: RefCell<Vec<Box<dyn Any>>> = const { RefCell::new(Vec::new()) };
}

/// One engine's retired stores, counted against its spare slots.
#[derive(Clone, Default)]
pub(super) struct Retirement {
    retired: Arc<AtomicUsize>,
}

impl Retirement {
    /// Tears `store` down at this thread's next park when it can keep it, else now.
    pub(super) fn retire<T: 'static>(&self, store: T) {
        if PARKS.get() && KEPT.with_borrow(|kept| kept.len() < PER_THREAD) && self.admit() {
            // The place is given back after the store is torn down: a tuple drops in order.
            let kept = (store, Place(self.retired.clone()));
            KEPT.with_borrow_mut(|list| list.push(Box::new(kept)));
        }
    }

    /// Takes one of the engine's places for a retired store, if one is free.
    fn admit(&self) -> bool {
        self.retired
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |retired| {
                (retired < MAX_RETIRED as usize).then_some(retired + 1)
            })
            .is_ok()
    }
}

/// A retired store's place among its engine's spare slots, given back when dropped.
struct Place(Arc<AtomicUsize>);

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The runtime's park hook: tears down what this thread retired.
pub fn on_worker_park() {
    PARKS.set(true);
    // One at a time, each dropped outside the borrow (a store's teardown cannot reach back
    // into the list), so that the list keeps its allocation for the next call's store.
    while let Some(kept) = KEPT.with_borrow_mut(Vec::pop) {
        drop(kept);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts its own drops.
    struct Tracked(Arc<AtomicUsize>);

    impl Drop for Tracked {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Each case runs on a thread of its own: the thread-local state starts fresh.
    fn on_new_thread(test: impl FnOnce() + Send + 'static) {
        std::thread::spawn(test).join().expect("the case passes");
    }

    #[test]
    fn a_thread_that_never_parked_drops_at_once() {
        on_new_thread(|| {
            let dropped = Arc::new(AtomicUsize::new(0));
            Retirement::default().retire(Tracked(dropped.clone()));
            assert_eq!(dropped.load(Ordering::SeqCst), 1);
        });
    }

    #[test]
    fn retired_stores_wait_for_their_threads_park_within_both_bounds() {
        // One thread more than the engine's share can keep.
        let threads = MAX_RETIRED as usize / PER_THREAD + 1;
        let each = PER_THREAD + 1;
        let retirement = Retirement::default();
        let dropped = Arc::new(AtomicUsize::new(0));
        let retired = Arc::new(std::sync::Barrier::new(threads + 1));
        let counted = Arc::new(std::sync::Barrier::new(threads + 1));
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (retirement, dropped, retired, counted) = (
                    retirement.clone(),
                    dropped.clone(),
                    retired.clone(),
                    counted.clone(),
                );
                std::thread::spawn(move || {
                    on_worker_park();
                    for _ in 0..each {
                        retirement.retire(Tracked(dropped.clone()));
                    }
                    retired.wait();
                    counted.wait();
                    on_worker_park();
                })
            })
            .collect();
        retired.wait();
        // Each thread dropped what passed its own share, and the engine kept its own.
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            threads * each - MAX_RETIRED as usize
        );
        counted.wait();
        for handle in handles {
            handle.join().expect("the thread runs");
        }
        assert_eq!(dropped.load(Ordering::SeqCst), threads * each);
        assert_eq!(retirement.retired.load(Ordering::SeqCst), 0);
    }
}
