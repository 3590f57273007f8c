//! What one call of a long-lived sandbox used — a hosted MCP server's, whose sandbox serves
//! many calls: the group's CPU time and peak memory over a window, the call's span.
//!
//! - CPU time is the group's usage (`cpu.stat` `usage_usec`, v1 `cpuacct.usage`) read when
//!   the window opens and when it closes. The difference is the whole group's over the
//!   window: exactly the call's when it was the only call in flight, otherwise what the
//!   server used for every call in flight then (each of them is given all of it).
//! - Peak memory is the group's highest usage during the window: the server's as a whole
//!   (what it holds between calls included), and shared like the CPU time when calls
//!   overlap. How it is read depends on the hierarchy:
//!   - cgroup v2, Linux 6.12 and later: `memory.peak` is the peak since the group was made,
//!     but a write to it resets it, for reads through that same open file and no other, to
//!     the group's usage then. A window opens the file, resets it, and reads it through the
//!     same descriptor when it closes.
//!   - cgroup v1: `memory.max_usage_in_bytes` has one peak, which a write of `0` resets to
//!     the usage then, for every reader. The windows over one group share it through a
//!     [`SharedPeak`]: before a window resets it, every window already open takes the peak
//!     so far into its own running peak; a window that closes reads the peak since the last
//!     reset and takes the greater. Nothing else resets it.
//!   - cgroup v2 before Linux 6.12 (`memory.peak` read-only): the group's peak since it was
//!     made, which covers the window but may be an earlier call's.
//!
//! A window opened from the start (by the call whose lease started the server) counts from
//! the group's creation, exactly, with no reset: that call waited for the server to start.
//! Without a group (cgroups unavailable) a window reports nothing.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::cgroup::SandboxCgroup;

/// What a group used over a window; `None` where the host does not account it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub cpu_time: Option<Duration>,
    pub peak_memory_bytes: Option<u64>,
}

/// The windows open over one group whose peak is cgroup v1's, with their running peaks.
#[derive(Debug, Default)]
pub struct SharedPeak {
    windows: Mutex<Windows>,
}

#[derive(Debug, Default)]
struct Windows {
    next: u64,
    /// Each open window's peak up to the group's last reset.
    open: BTreeMap<u64, u64>,
}

impl SharedPeak {
    fn lock(&self) -> MutexGuard<'_, Windows> {
        self.windows.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A window of measurement over a group, open until read with [`UsageWindow::close`].
#[derive(Debug)]
pub struct UsageWindow {
    /// The group's CPU time when the window opened (zero from the start).
    cpu_at_open: Option<Duration>,
    peak: Peak,
}

#[derive(Debug)]
enum Peak {
    /// v2's `memory.peak`, opened and reset when the window opened: what it reads is the
    /// peak since then.
    Reset(File),
    /// A window of the group's [`SharedPeak`] (v1).
    Shared(u64),
    /// The group's peak since it was made.
    SinceCreation,
}

impl UsageWindow {
    /// Opens a window over `group` (whose v1 windows share `shared`) now, or, `from_start`,
    /// since the group was made.
    pub fn open(group: &SandboxCgroup, shared: &SharedPeak, from_start: bool) -> UsageWindow {
        let cpu_at_open = if from_start {
            Some(Duration::ZERO)
        } else {
            group.cpu_time()
        };
        let peak = match group.memory_peak_file() {
            Some(_) if from_start => Peak::SinceCreation,
            Some(path) => match reset(&path) {
                Ok(file) => Peak::Reset(file),
                Err(err) => {
                    tracing::debug!(%err, "memory.peak cannot be reset here; a call reports the server's peak so far");
                    Peak::SinceCreation
                }
            },
            None => open_shared(group, shared, from_start),
        };
        UsageWindow { cpu_at_open, peak }
    }

    /// What `group` used since the window opened; closes it.
    pub fn close(&self, group: &SandboxCgroup, shared: &SharedPeak) -> Usage {
        let cpu_time = self
            .cpu_at_open
            .zip(group.cpu_time())
            .map(|(open, now)| now.saturating_sub(open));
        let peak_memory_bytes = match &self.peak {
            Peak::Reset(file) => read_through(file).or_else(|| group.peak_memory_bytes()),
            Peak::Shared(id) => {
                let mut windows = shared.lock();
                let before = windows.open.remove(id).unwrap_or(0);
                group.peak_memory_bytes().map(|since| since.max(before))
            }
            Peak::SinceCreation => group.peak_memory_bytes(),
        };
        Usage {
            cpu_time,
            peak_memory_bytes,
        }
    }
}

/// A v1 window: the open ones take the peak so far, then the group's peak is reset for the
/// new one — unless it counts from the start, and so takes the peak so far itself.
fn open_shared(group: &SandboxCgroup, shared: &SharedPeak, from_start: bool) -> Peak {
    let mut windows = shared.lock();
    let Some(so_far) = group.peak_memory_bytes() else {
        return Peak::SinceCreation;
    };
    let held = if from_start {
        so_far
    } else {
        for peak in windows.open.values_mut() {
            *peak = (*peak).max(so_far);
        }
        if let Err(err) = group.reset_v1_peak() {
            tracing::debug!(%err, "the group's peak cannot be reset; a call reports the server's peak so far");
            return Peak::SinceCreation;
        }
        0
    };
    let id = windows.next;
    windows.next += 1;
    windows.open.insert(id, held);
    Peak::Shared(id)
}

/// Opens `memory.peak` at `path` and resets it for this descriptor.
fn reset(path: &Path) -> io::Result<File> {
    let mut file = OpenOptions::new().read(true).write(true).open(path)?;
    // Any non-empty string resets it (Documentation/admin-guide/cgroup-v2.rst).
    file.write_all(b"reset\n")?;
    Ok(file)
}

/// The number `file` holds, read from its start through this descriptor.
fn read_through(file: &File) -> Option<u64> {
    // A byte count in decimal and a newline.
    let mut buf = [0u8; 32];
    let read = file.read_at(&mut buf, 0).ok()?;
    std::str::from_utf8(buf.get(..read)?)
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;

    use super::*;
    use crate::engine::process::cgroup::Cgroups;

    /// Runs `dd` in `group` with a buffer of `mib` MiB, which it fills: that much memory
    /// charged to the group, freed when it exits.
    fn hold_in(group: &SandboxCgroup, mib: u32) {
        let joins: Vec<_> = group.join_fds().collect();
        let mut dd = std::process::Command::new("/usr/bin/dd");
        dd.args([
            "if=/dev/zero",
            "of=/dev/null",
            &format!("bs={mib}M"),
            "count=1",
            "status=none",
        ]);
        // SAFETY: the closure only calls write(2), which is async-signal-safe, on
        // descriptors that `group` keeps open for the whole call.
        unsafe {
            dd.pre_exec(move || {
                for fd in &joins {
                    if libc::write(*fd, b"0".as_ptr().cast(), 1) != 1 {
                        return Err(io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let status = dd.status().expect("run dd");
        assert!(status.success(), "{status}");
    }

    #[test]
    fn a_window_sees_the_peak_of_its_own_span() {
        let cgroups = Cgroups::discover();
        let group = cgroups.create_sandbox().expect("create a sandbox group");
        if group.peak_memory_bytes().is_none() {
            eprintln!("no memory controller here; skipped");
            return;
        }
        if let Some(path) = group.memory_peak_file()
            && reset(&path).is_err()
        {
            eprintln!("memory.peak cannot be reset on this kernel; skipped");
            return;
        }
        let shared = SharedPeak::default();
        let from_start = UsageWindow::open(&group, &shared, true);
        let across = UsageWindow::open(&group, &shared, false);
        hold_in(&group, 48);
        // Opened after the 48 MiB were freed: it never sees them, though the group did —
        // and in v1 its reset must not take them from the windows open across them.
        let later = UsageWindow::open(&group, &shared, false);
        hold_in(&group, 4);
        let later = later.close(&group, &shared);
        let across = across.close(&group, &shared);
        let from_start = from_start.close(&group, &shared);
        let peak = |usage: Usage| usage.peak_memory_bytes.expect("a peak");
        assert!(peak(across) >= 48 << 20, "{across:?}");
        assert!(peak(from_start) >= 48 << 20, "{from_start:?}");
        assert!(peak(later) >= 4 << 20, "{later:?}");
        assert!(peak(later) < 32 << 20, "{later:?}");
        let cpu = |usage: Usage| usage.cpu_time.expect("a CPU time");
        // Each window is the group's CPU time over its own span.
        assert!(cpu(from_start) >= cpu(across), "{from_start:?} {across:?}");
        assert!(cpu(across) >= cpu(later), "{across:?} {later:?}");
        assert!(cpu(later) > Duration::ZERO, "{later:?}");
    }
}
