//! Calls stuck in a system call, and how they are freed.
//!
//! A call that only reads serves its filesystem calls on the thread that polls it
//! (`call::reads_only`), so a guest that opens a FIFO nobody writes to would hold that
//! runtime thread in the kernel, where neither the epoch nor the call's deadline reaches:
//! the runtime would have a worker fewer until someone wrote, and the call would never end.
//! Preopens only reach what a person put in their workspace or what a profile grants from
//! the host (no tool can make a FIFO there: change sets refuse them), but a hostile tool
//! would look.
//!
//! So every call in flight is watched while it is polled: the epoch ticker looks each tick
//! ([`Stalls::interrupt`]), and a poll that has lasted [`STALL_LIMIT`] — past anything guest
//! code can do between two epoch yields — is in such a system call. Its thread is sent
//! `SIGURG`, whose handler does nothing and does not restart system calls: the call returns
//! `EINTR`, wasmtime-wasi answers the guest `intr`, and the guest yields at its next epoch
//! check. A system call that restarts after the signal, or one no signal ends (a read of a
//! regular file), goes on: its thread is signalled again a [`STALL_LIMIT`] later, no sooner.
//! A guest that tries again is stuck again for at most [`STALL_LIMIT`] at a time,
//! until its deadline: a watched call is never polled past its deadline, it ends there
//! ([`Watched`] answers `None`). That does not wait for the runtime's timer, which a thread
//! busy with such polls turns only every few dozen of them (tokio's event interval): seconds,
//! at a quarter of a second a poll.
//!
//! The signal goes to the thread's kernel id through `tgkill`, never to a `pthread_t`: the
//! thread may have finished the poll, or exited, between the check and the signal. Then
//! the signal is lost (`ESRCH`) or costs another of the daemon's threads one `EINTR`, which
//! the runtime's waits retry; that needs a poll to end within microseconds of having lasted
//! a quarter of a second.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// How long one poll of a call may last before its thread is interrupted. A poll runs guest
/// code for at most one epoch tick (5 ms) and its host calls; a local file's open or read
/// takes microseconds, a large one a few milliseconds. A quarter of a second is far past
/// either, and short enough that a stuck call gives its thread back four times a second.
pub const STALL_LIMIT: Duration = Duration::from_millis(250);

/// The calls in flight of one engine.
#[derive(Default)]
pub struct Stalls {
    calls: Mutex<Vec<Arc<Watch>>>,
    /// Where the watches' times count from.
    base: Base,
}

struct Base(Instant);

impl Default for Base {
    fn default() -> Self {
        Base(Instant::now())
    }
}

/// One call: the thread polling it (0 when none is), when that poll began, and when its
/// thread was last interrupted.
#[derive(Default)]
struct Watch {
    thread: AtomicI32,
    since_us: AtomicU64,
    interrupted_us: AtomicU64,
}

impl Stalls {
    /// Watches `call` while it runs, and ends it at `deadline`.
    pub fn watch<F: Future>(self: &Arc<Self>, call: F, deadline: Instant) -> Watched<F> {
        install_handler();
        let watch = Arc::new(Watch::default());
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(watch.clone());
        Watched {
            inner: Box::pin(call),
            watch,
            stalls: self.clone(),
            deadline,
        }
    }

    /// Interrupts the threads of polls that have lasted [`STALL_LIMIT`]; returns how many.
    pub fn interrupt(&self) -> usize {
        let now = self.micros();
        let limit = u64::try_from(STALL_LIMIT.as_micros()).unwrap_or(u64::MAX);
        let calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        let mut interrupted = 0;
        for watch in calls.iter() {
            let thread = watch.thread.load(Ordering::Acquire);
            let since = watch.since_us.load(Ordering::Acquire);
            // A poll that went on after its interrupt (a system call that restarts, or one no
            // signal ends) is interrupted again a limit later, not at every tick.
            let last = watch.interrupted_us.load(Ordering::Acquire).max(since);
            if thread == 0 || now.saturating_sub(last) < limit {
                continue;
            }
            // Checked again as late as can be: a poll that ended meanwhile is left alone.
            if watch.thread.load(Ordering::Acquire) != thread
                || watch.since_us.load(Ordering::Acquire) != since
            {
                continue;
            }
            watch.interrupted_us.store(now, Ordering::Release);
            interrupt(thread);
            interrupted += 1;
        }
        interrupted
    }

    fn micros(&self) -> u64 {
        u64::try_from(self.base.0.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    fn forget(&self, watch: &Arc<Watch>) {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = calls.iter().position(|other| Arc::ptr_eq(other, watch)) {
            calls.swap_remove(at);
        }
    }
}

/// A call, watched while it is polled; forgotten when dropped. It ends with `None` when
/// polled at or past its deadline, without running the call again.
pub struct Watched<F> {
    inner: Pin<Box<F>>,
    watch: Arc<Watch>,
    stalls: Arc<Stalls>,
    deadline: Instant,
}

impl<F: Future> Future for Watched<F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if Instant::now() >= this.deadline {
            return Poll::Ready(None);
        }
        this.watch
            .since_us
            .store(this.stalls.micros(), Ordering::Release);
        this.watch.thread.store(current_tid(), Ordering::Release);
        let poll = this.inner.as_mut().poll(cx);
        this.watch.thread.store(0, Ordering::Release);
        poll.map(Some)
    }
}

impl<F> Drop for Watched<F> {
    fn drop(&mut self) {
        self.stalls.forget(&self.watch);
    }
}

/// The kernel's id of the calling thread, asked once per thread (a system call).
fn current_tid() -> i32 {
    thread_local! {
        static TID: i32 = rustix::thread::gettid().as_raw_nonzero().get();
    }
    TID.with(|tid| *tid)
}

/// Sends `SIGURG` to thread `tid` of this process.
fn interrupt(tid: i32) {
    // SAFETY: tgkill takes plain integers and touches no memory of ours; a thread that is
    // gone makes it fail with ESRCH, which changes nothing. The handler installed below does
    // nothing, so the signal's only effect is to end a blocking system call with EINTR.
    let rc = unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGURG) };
    if rc != 0 {
        tracing::debug!(tid, "the stalled thread was gone before its interrupt");
    }
}

/// `SIGURG`'s handler: nothing, installed without `SA_RESTART`, so that a system call it
/// interrupts returns `EINTR`. Nothing else in the daemon uses `SIGURG` (its default action
/// is to ignore it; it is sent only for out-of-band socket data, which the daemon never asks
/// for).
fn install_handler() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        extern "C" fn nothing(_: libc::c_int) {}
        // SAFETY: a zeroed sigaction is a valid value (empty mask, no flags), completed
        // below; the handler is async-signal-safe, since it does nothing. Replacing SIGURG's
        // disposition affects no code of the daemon or its crates, none of which uses it.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = nothing as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(libc::SIGURG, &action, std::ptr::null_mut()) != 0 {
                tracing::warn!(
                    error = %std::io::Error::last_os_error(),
                    "cannot install the handler that frees calls stuck in a system call"
                );
            }
        }
    });
}
