//! The deadline keeper: a process beside the daemon that kills a call's sandbox when the
//! call's deadline passes, whether or not the daemon can.
//!
//! The executor stops a call at its deadline by dropping it, which kills the sandbox — while
//! the daemon runs. A daemon that is stopped (SIGSTOP, a debugger, a paused VM) or starved
//! cannot, and in a fleet its runs are taken over meanwhile: a tool still acting for a run
//! another daemon owns is what leases and fencing exist to prevent. The sandbox cannot end
//! itself either: its program is pid 1 of its pid namespace, which the kernel shields from
//! every signal it has no handler for (an `alarm` set before `execve` would be ignored, and
//! the program could cancel it). So each deadline is kept outside the sandbox and outside
//! the daemon's thread group, which a SIGSTOP stops whole: by one process per engine that
//! holds a pidfd and a deadline for each running call's sandbox, and SIGKILLs the sandbox's
//! first process (and so all of it) when the deadline passes before the daemon says the
//! call ended. A pidfd never names another process, so a kill that comes late is harmless.
//!
//! It is cloned like a sandbox's first process — `CLONE_VM`, on a stack of its own — and
//! obeys the same rules (see `child.rs`): raw system calls only, no allocation, nothing that
//! can panic, every signal blocked. Sharing the daemon's memory costs nothing, where a
//! `fork` would copy the page tables and then every page the daemon writes; it reads and
//! writes only its own [`State`], which the daemon leaves alone until the keeper is reaped.
//! It shares nothing else: it keeps one descriptor, its end of a `SOCK_SEQPACKET` pair,
//! closes its copies of all the daemon's others, and leads a session of its own, out of
//! reach of a signal to the daemon's process group.
//!
//! It lives as long as the daemon's end of the socket: when that closes — the engine let go
//! of it, or the daemon died however it did — the keeper reads end-of-file and exits (the
//! sandboxes end by their own parent-death signal). It needs no parent-death signal of its
//! own, so any thread may start one: a keeper found gone is replaced by the call that finds
//! it so.
//!
//! The protocol is one-way and fixed-size: `arm` (an id, a deadline on `CLOCK_MONOTONIC`,
//! and the sandbox's pidfd passed with `SCM_RIGHTS`), sent before the sandbox's program
//! starts (or a hosted server's call is sent), and `disarm` (the id), sent when the daemon
//! is done with it. A message the kernel accepted reaches the keeper unless it dies, and the
//! pidfd with it: the daemon never arms more sandboxes at once than the keeper may hold
//! descriptors. A call that cannot be armed, even by a new keeper, does not start.

use std::ffi::{c_int, c_void};
use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::net::{
    AddressFamily, SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};

use super::pidfd;
use super::stack::Stack;
use super::sys;

/// The most sandboxes one keeper watches at once: below the 1024 descriptors a process may
/// hold by default (less its socket and a margin), so a pidfd the daemon sends always fits
/// in the keeper's table. A daemon with more calls in flight (process tools' and hosted
/// servers') refuses the next until one ends, rather than run one without a keeper.
const MAX_WATCHED: usize = 1000;

/// How long the keeper may take to say it is ready: it has nothing to build, so only a host
/// under heavy load comes near this.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// The keeper's name, as `ps` shows it.
const NAME: &[u8] = b"airlock-keeper\0";

/// What a message asks for.
const ARM: u64 = 1;
const DISARM: u64 = 2;
/// The keeper's one message to the daemon: it is up, holding nothing of the daemon's.
const READY: u64 = 3;

/// One message on the socket, either way.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct Message {
    kind: u64,
    id: u64,
    /// `CLOCK_MONOTONIC`, in nanoseconds (`arm` only).
    deadline_ns: u64,
}

const MESSAGE_BYTES: usize = std::mem::size_of::<Message>();

/// One watched sandbox.
#[derive(Debug, Clone, Copy)]
struct Watch {
    id: u64,
    deadline_ns: u64,
    /// `-1` when the entry is free.
    pidfd: RawFd,
}

const FREE: Watch = Watch {
    id: 0,
    deadline_ns: 0,
    pidfd: -1,
};

/// Everything the keeper reads and writes, made by the daemon before the clone and left to
/// the keeper until it is reaped.
struct State {
    socket: RawFd,
    watches: [Watch; MAX_WATCHED],
}

/// The daemon's handle on its deadline keeper, shared by everything that arms it: the
/// launcher (each call's sandbox, before its program starts) and hosted servers' calls.
pub struct Keeper {
    link: Mutex<Arc<Link>>,
    /// Sandboxes armed and not yet disarmed, over every link.
    watched: Arc<AtomicUsize>,
    capacity: usize,
    next_id: AtomicU64,
}

/// One keeper process and the daemon's end of its socket. The handle and every guard armed
/// through it hold it; the last to let go kills the process and reaps it.
struct Link {
    pid: i32,
    process: OwnedFd,
    socket: OwnedFd,
    // Let go only once `drop` has reaped the process that uses them.
    _state: Box<State>,
    _stack: Stack,
}

/// Why a sandbox could not be handed to the keeper.
#[derive(Debug, thiserror::Error)]
pub enum KeeperError {
    #[error("{0} calls are in flight, as many as the deadline keeper can watch")]
    Full(usize),
    #[error("the deadline keeper (pid {pid}) is gone: {source}")]
    Gone { pid: i32, source: io::Error },
    #[error("cannot start a deadline keeper: {0}")]
    Unavailable(io::Error),
}

/// A sandbox the keeper watches; dropping it tells the keeper the call ended.
pub struct Armed {
    id: u64,
    link: Arc<Link>,
    watched: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Armed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Armed")
            .field("id", &self.id)
            .field("keeper", &self.link.pid)
            .finish()
    }
}

impl Keeper {
    pub fn start() -> io::Result<Keeper> {
        Ok(Keeper {
            link: Mutex::new(Arc::new(Link::start()?)),
            watched: Arc::new(AtomicUsize::new(0)),
            capacity: capacity(),
            next_id: AtomicU64::new(1),
        })
    }

    /// The keeper process's pid.
    pub fn pid(&self) -> i32 {
        self.current().pid
    }

    fn current(&self) -> Arc<Link> {
        self.link
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Has the keeper kill `process` (by its pidfd) at `deadline` unless the returned guard
    /// is dropped first. A keeper found gone is replaced once.
    pub fn arm(&self, process: BorrowedFd<'_>, deadline: Instant) -> Result<Armed, KeeperError> {
        let watched = self.watched.load(Ordering::SeqCst);
        if watched >= self.capacity {
            return Err(KeeperError::Full(watched));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let left = deadline.saturating_duration_since(Instant::now());
        let message = Message {
            kind: ARM,
            id,
            deadline_ns: monotonic_ns()
                .saturating_add(u64::try_from(left.as_nanos()).unwrap_or(u64::MAX)),
        };
        let link = self.current();
        let link = match link.send(&message, Some(process)) {
            Ok(()) => link,
            Err(err) => {
                tracing::error!(pid = link.pid, error = %err, "the deadline keeper is gone; starting another");
                let replaced = {
                    let mut current = self.link.lock().unwrap_or_else(PoisonError::into_inner);
                    // Unless a call that found it gone too has replaced it already.
                    if Arc::ptr_eq(&current, &link) {
                        *current = Arc::new(Link::start().map_err(KeeperError::Unavailable)?);
                    }
                    current.clone()
                };
                replaced
                    .send(&message, Some(process))
                    .map_err(|source| KeeperError::Gone {
                        pid: replaced.pid,
                        source,
                    })?;
                replaced
            }
        };
        self.watched.fetch_add(1, Ordering::SeqCst);
        Ok(Armed {
            id,
            link,
            watched: self.watched.clone(),
        })
    }
}

impl Link {
    /// Clones a keeper and waits until it is ready.
    fn start() -> io::Result<Link> {
        let (ours, theirs) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )?;
        let mut state = Box::new(State {
            socket: theirs.as_raw_fd(),
            watches: [FREE; MAX_WATCHED],
        });
        let stack = Stack::new()?;
        let mut pidfd: c_int = -1;
        let arg = &mut *state as *mut State as *mut c_void;
        // The keeper starts with every signal blocked (the clone inherits this thread's
        // mask), so that no handler of the daemon ever runs on its stack.
        // SAFETY: an all-zero sigset_t is a valid value for pthread_sigmask to overwrite.
        let mut saved: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: a full set is a valid mask; this changes this thread's mask only, and
        // restores it below.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut saved);
        }
        // SAFETY: `entry` only uses `state`, which outlives the keeper (the link owns it and
        // reaps the keeper before letting go of it), and runs on `stack`, which nothing else
        // uses. Without CLONE_FILES the keeper gets a copy of the descriptor table, `theirs`
        // in it.
        let pid = unsafe {
            libc::clone(
                entry,
                stack.top(),
                libc::CLONE_VM | libc::CLONE_PIDFD | libc::SIGCHLD,
                arg,
                &mut pidfd as *mut c_int,
            )
        };
        let cloned = io::Error::last_os_error();
        // SAFETY: restores the mask saved above.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &saved, std::ptr::null_mut());
        }
        if pid < 0 {
            return Err(cloned);
        }
        // SAFETY: CLONE_PIDFD wrote a new descriptor nothing else owns.
        let process = unsafe { OwnedFd::from_raw_fd(pidfd) };
        // Only the keeper holds its end now: the daemon's end reads end-of-file if it dies.
        drop(theirs);
        let link = Link {
            pid,
            process,
            socket: ours,
            _state: state,
            _stack: stack,
        };
        // On failure, dropping `link` kills and reaps the process.
        link.await_ready()?;
        tracing::debug!(pid, "deadline keeper started");
        Ok(link)
    }

    fn await_ready(&self) -> io::Result<()> {
        let timeout = Timespec::try_from(READY_TIMEOUT)
            .map_err(|_| io::Error::other("the ready timeout does not fit a timespec"))?;
        let mut poll = [PollFd::new(&self.socket, PollFlags::IN)];
        // A signal may end the wait early (the wasm engine's stall watch sends SIGURG to a
        // runtime thread whose poll lasted long, and may reach this one as it moves on): wait
        // again, for the whole timeout at most once more.
        let ready = match rustix::event::poll(&mut poll, Some(&timeout)) {
            Err(rustix::io::Errno::INTR) => rustix::event::poll(&mut poll, Some(&timeout))?,
            other => other?,
        };
        if ready == 0 {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the deadline keeper did not start in time",
            ));
        }
        let mut message = Message::default();
        let got = rustix::io::read(&self.socket, as_bytes_mut(&mut message))?;
        if got != MESSAGE_BYTES || message.kind != READY {
            return Err(io::Error::other("the deadline keeper exited as it started"));
        }
        Ok(())
    }

    /// Sends `message`, with `pidfd` if given. Never blocks: a keeper so far behind that
    /// its queue is full is as good as gone.
    fn send(&self, message: &Message, pidfd: Option<BorrowedFd<'_>>) -> io::Result<()> {
        let fds = pidfd.as_slice();
        let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
            return Err(io::Error::other("no room for the pidfd in the message"));
        }
        let sent = rustix::net::sendmsg(
            &self.socket,
            &[IoSlice::new(as_bytes(message))],
            &mut control,
            SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
        )?;
        if sent != MESSAGE_BYTES {
            return Err(io::Error::other("the message was cut short"));
        }
        Ok(())
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // It would exit by itself now that the daemon's end closes, but it must be gone
        // before its stack and state are let go.
        pidfd::kill(self.process.as_raw_fd());
        let _ = pidfd::wait(self.process.as_raw_fd(), false);
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        let message = Message {
            kind: DISARM,
            id: self.id,
            deadline_ns: 0,
        };
        // Not sent (the keeper is gone, or its queue is full): it kills at the deadline a
        // sandbox the daemon is done with, which its pidfd keeps from being another process.
        let _ = self.link.send(&message, None);
        self.watched.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How many sandboxes a keeper may watch: [`MAX_WATCHED`], or fewer when the daemon was
/// started with a lower descriptor limit (the keeper inherits it).
fn capacity() -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .and_then(|limit| usize::try_from(limit).ok())
        .unwrap_or(usize::MAX);
    MAX_WATCHED.min(limit.saturating_sub(24))
}

fn as_bytes(message: &Message) -> &[u8] {
    // SAFETY: `Message` is plain `repr(C)` integers without padding.
    unsafe { std::slice::from_raw_parts((message as *const Message).cast(), MESSAGE_BYTES) }
}

fn as_bytes_mut(message: &mut Message) -> &mut [u8] {
    // SAFETY: as in `as_bytes`; every bit pattern is a valid `Message`.
    unsafe { std::slice::from_raw_parts_mut((message as *mut Message).cast(), MESSAGE_BYTES) }
}

// What follows runs in the keeper: raw system calls only (see the module doc).

/// Raw system call; see [`sys::syscall`].
///
/// # Safety
///
/// As for [`sys::syscall`].
unsafe fn raw(nr: std::ffi::c_long, args: [usize; 6]) -> isize {
    // SAFETY: forwarded to the caller.
    unsafe { sys::syscall(nr, args) }
}

fn exit_group(code: i32) -> ! {
    loop {
        // SAFETY: exit_group takes an int and does not return.
        unsafe {
            raw(libc::SYS_exit_group, [code as usize, 0, 0, 0, 0, 0]);
        }
    }
}

/// Where `clone` starts the keeper; `state` points to its [`State`].
extern "C" fn entry(state: *mut c_void) -> c_int {
    // SAFETY: `Keeper::start` passes a State that outlives this process and that nothing
    // else touches meanwhile.
    let state = unsafe { &mut *(state as *mut State) };
    if set_up(state.socket).is_err() {
        exit_group(1);
    }
    serve(state);
    exit_group(0)
}

/// Names the process, leaves the daemon's session, keeps only `socket`, and says it is
/// ready.
fn set_up(socket: RawFd) -> Result<(), sys::Errno> {
    let socket = socket as usize;
    // SAFETY: setsid and close_range take integers, PR_SET_NAME a constant NUL-terminated
    // string of at most 16 bytes.
    unsafe {
        raw(
            libc::SYS_prctl,
            [
                libc::PR_SET_NAME as usize,
                NAME.as_ptr() as usize,
                0,
                0,
                0,
                0,
            ],
        );
        sys::result(raw(libc::SYS_setsid, [0; 6]))?;
        if socket > 0 {
            sys::result(raw(libc::SYS_close_range, [0, socket - 1, 0, 0, 0, 0]))?;
        }
        sys::result(raw(
            libc::SYS_close_range,
            [socket + 1, u32::MAX as usize, 0, 0, 0, 0],
        ))?;
    }
    let ready = Message {
        kind: READY,
        id: 0,
        deadline_ns: 0,
    };
    // SAFETY: writes one message from a local.
    let wrote = unsafe {
        raw(
            libc::SYS_write,
            [
                socket,
                &ready as *const Message as usize,
                MESSAGE_BYTES,
                0,
                0,
                0,
            ],
        )
    };
    match sys::result(wrote) {
        Ok(MESSAGE_BYTES) => Ok(()),
        Ok(_) => Err(libc::EPIPE),
        Err(errno) => Err(errno),
    }
}

/// Kills what is due, sleeps until the next deadline or a message, applies the messages;
/// returns when the daemon's end of the socket is closed.
fn serve(state: &mut State) {
    loop {
        let now = monotonic_ns();
        let mut next = u64::MAX;
        for watch in state.watches.iter_mut().filter(|watch| watch.pidfd >= 0) {
            if watch.deadline_ns <= now {
                pidfd::kill(watch.pidfd);
                close(watch.pidfd);
                *watch = FREE;
            } else {
                next = next.min(watch.deadline_ns);
            }
        }
        let left = next.saturating_sub(now);
        let timeout = libc::timespec {
            tv_sec: (left / 1_000_000_000).min(i64::MAX as u64) as libc::time_t,
            tv_nsec: (left % 1_000_000_000) as libc::c_long,
        };
        let mut poll = libc::pollfd {
            fd: state.socket,
            events: libc::POLLIN,
            revents: 0,
        };
        let timeout_ptr = if next == u64::MAX {
            0
        } else {
            &timeout as *const libc::timespec as usize
        };
        // SAFETY: one pollfd and a timespec (or none), both locals; no signal mask change.
        let polled = unsafe {
            raw(
                libc::SYS_ppoll,
                [
                    &mut poll as *mut libc::pollfd as usize,
                    1,
                    timeout_ptr,
                    0,
                    0,
                    0,
                ],
            )
        };
        if matches!(sys::result(polled), Ok(0) | Err(_)) {
            continue;
        }
        loop {
            match receive(state.socket) {
                Received::Arm {
                    id,
                    deadline_ns,
                    pidfd,
                } => watch(state, id, deadline_ns, pidfd),
                Received::Disarm { id } => {
                    for watch in state
                        .watches
                        .iter_mut()
                        .filter(|watch| watch.pidfd >= 0 && watch.id == id)
                    {
                        close(watch.pidfd);
                        *watch = FREE;
                    }
                }
                Received::Nothing => break,
                Received::Closed => return,
            }
        }
    }
}

/// Takes a sandbox into the table; with no room (the daemon counts, so never), it is killed
/// now rather than left to run unwatched.
fn watch(state: &mut State, id: u64, deadline_ns: u64, pidfd: RawFd) {
    match state.watches.iter_mut().find(|watch| watch.pidfd < 0) {
        Some(free) => {
            *free = Watch {
                id,
                deadline_ns,
                pidfd,
            }
        }
        None => {
            pidfd::kill(pidfd);
            close(pidfd);
        }
    }
}

/// One message read from the socket.
enum Received {
    Arm {
        id: u64,
        deadline_ns: u64,
        pidfd: RawFd,
    },
    Disarm {
        id: u64,
    },
    /// Nothing more to read now (or a message that is none of the above, dropped).
    Nothing,
    /// The daemon's end is closed.
    Closed,
}

fn receive(socket: RawFd) -> Received {
    let mut message = Message::default();
    let mut iov = libc::iovec {
        iov_base: &mut message as *mut Message as *mut c_void,
        iov_len: MESSAGE_BYTES,
    };
    // Room for one control message holding one descriptor, aligned as cmsghdr needs.
    let mut control = [0u64; 4];
    // SAFETY: an all-zero msghdr is valid; the pointers set below are to locals.
    let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
    header.msg_iov = &mut iov;
    header.msg_iovlen = 1;
    header.msg_control = control.as_mut_ptr().cast();
    header.msg_controllen = std::mem::size_of_val(&control) as _;
    let got = loop {
        // SAFETY: recvmsg writes into the buffers `header` points to, all locals.
        let got = unsafe {
            raw(
                libc::SYS_recvmsg,
                [
                    socket as usize,
                    &mut header as *mut libc::msghdr as usize,
                    (libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC) as usize,
                    0,
                    0,
                    0,
                ],
            )
        };
        match sys::result(got) {
            Err(libc::EINTR) => continue,
            Err(libc::EAGAIN) => return Received::Nothing,
            Err(_) | Ok(0) => return Received::Closed,
            Ok(got) => break got,
        }
    };
    let pidfd = passed_descriptor(&header);
    match (got, message.kind, pidfd) {
        (MESSAGE_BYTES, ARM, Some(pidfd)) => Received::Arm {
            id: message.id,
            deadline_ns: message.deadline_ns,
            pidfd,
        },
        (MESSAGE_BYTES, DISARM, None) => Received::Disarm { id: message.id },
        (_, _, stray) => {
            if let Some(fd) = stray {
                close(fd);
            }
            Received::Nothing
        }
    }
}

/// The descriptor a message carried, if it carried exactly one.
fn passed_descriptor(header: &libc::msghdr) -> Option<RawFd> {
    // SAFETY: the CMSG helpers only do arithmetic within the control buffer `header` names,
    // which recvmsg filled.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(header);
        if cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
            || (*cmsg).cmsg_len as usize
                != libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize
        {
            return None;
        }
        Some(std::ptr::read_unaligned(
            libc::CMSG_DATA(cmsg).cast::<RawFd>(),
        ))
    }
}

fn close(fd: RawFd) {
    // SAFETY: closes a descriptor the keeper owns.
    unsafe {
        raw(libc::SYS_close, [fd as usize, 0, 0, 0, 0, 0]);
    }
}

fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec into a local.
    unsafe {
        raw(
            libc::SYS_clock_gettime,
            [
                libc::CLOCK_MONOTONIC as usize,
                &mut now as *mut libc::timespec as usize,
                0,
                0,
                0,
                0,
            ],
        );
    }
    (now.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(now.tv_nsec as u64)
}

#[cfg(test)]
#[path = "keeper_tests.rs"]
mod tests;
