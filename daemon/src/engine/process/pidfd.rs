//! A process by its pidfd: killing it and reaping it. The sandbox, the deadline keeper, the
//! launcher and the spare sandboxes all end processes this way, through the raw calls of
//! `sys` (a pidfd names one process for good, so a recycled pid is never hit).

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use super::limits::Ended;
use super::sys;

/// How the first process ended, with its resource use.
#[derive(Debug, Clone, Copy)]
pub struct Waited {
    pub ended: Ended,
    /// Including the descendants it reaped (everything, for pid 1 of a namespace).
    pub cpu_time: Duration,
    pub max_rss_bytes: u64,
}

/// Sends SIGKILL to the process of `pidfd`.
pub fn kill(pidfd: RawFd) {
    // SAFETY: pidfd_send_signal with a null siginfo; a process that is already gone makes it
    // fail harmlessly.
    unsafe {
        sys::syscall(
            libc::SYS_pidfd_send_signal,
            [pidfd as usize, libc::SIGKILL as usize, 0, 0, 0, 0],
        );
    }
}

/// `waitid(P_PIDFD, …)`; with `nohang`, `None` while the process runs.
pub fn wait(pidfd: RawFd, nohang: bool) -> io::Result<Option<Waited>> {
    loop {
        // SAFETY: zeroed siginfo and rusage are valid values for waitid to overwrite.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let flags = libc::WEXITED | if nohang { libc::WNOHANG } else { 0 };
        // SAFETY: both out-pointers are valid for writes; the raw call is used because
        // libc's waitid has no rusage argument.
        let ret = unsafe {
            sys::syscall(
                libc::SYS_waitid,
                [
                    libc::P_PIDFD as usize,
                    pidfd as usize,
                    &mut info as *mut libc::siginfo_t as usize,
                    flags as usize,
                    &mut usage as *mut libc::rusage as usize,
                    0,
                ],
            )
        };
        match sys::result(ret) {
            Err(libc::EINTR) => continue,
            Err(errno) => return Err(io::Error::from_raw_os_error(errno)),
            Ok(_) => {}
        }
        // SAFETY: waitid filled `info` for a child state change (or left it zeroed).
        let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
        if pid == 0 {
            return Ok(None);
        }
        let ended = match info.si_code {
            libc::CLD_EXITED => Ended::Exited(status),
            _ => Ended::Killed(status),
        };
        let time = |tv: libc::timeval| {
            Duration::new(
                u64::try_from(tv.tv_sec).unwrap_or(0),
                u32::try_from(tv.tv_usec).unwrap_or(0).saturating_mul(1000),
            )
        };
        return Ok(Some(Waited {
            ended,
            cpu_time: time(usage.ru_utime) + time(usage.ru_stime),
            max_rss_bytes: u64::try_from(usage.ru_maxrss)
                .unwrap_or(0)
                .saturating_mul(1024),
        }));
    }
}
