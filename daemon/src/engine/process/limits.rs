//! The resource limits of a process tool's sandbox, from its profile, and how a sandbox that
//! ended is classified: a tool that was stopped by one of these limits is reported as
//! `LIMIT_EXCEEDED` with the profile key that stopped it, not as a crash.
//!
//! A profile that leaves an optional limit out gets the engine's default below: unlike a
//! WebAssembly module, a native program could otherwise fork, open and write without bound.
//! Where the host's hard limit is lower than the profile's, the host's applies (the daemon
//! cannot raise it, and the lower bound is the stricter one).

use std::time::Duration;

use crate::engine::contract::Exit;
use crate::profile::Limits;

use super::cgroup::CgroupStats;

/// Processes (and threads: the kernel counts both) when the profile sets none: room for a
/// multi-threaded program or a small pipeline, far from what a fork bomb needs.
pub const DEFAULT_PROCESSES: u64 = 128;

/// Open files when the profile sets none: the usual soft limit of a login session.
pub const DEFAULT_OPEN_FILES: u64 = 1024;

/// Largest file a tool may write when the profile sets none.
pub const DEFAULT_FILE_SIZE_BYTES: u64 = 1 << 30;

/// Size of `/tmp` when the profile sets none. Its pages count against the memory limit too.
pub const DEFAULT_TMP_BYTES: u64 = 64 << 20;

/// With a memory cgroup holding resident memory to the limit, the address space may be this
/// many times larger: programs reserve far more than they touch (thread stacks, allocator
/// arenas), and an address-space limit equal to the memory limit would fail them early.
const ADDRESS_SPACE_FACTOR: u64 = 4;

/// Files in `/tmp`: each empty file costs kernel memory outside the tmpfs size.
pub const TMP_INODES: u64 = 16 * 1024;

/// The limits one sandbox is built with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxLimits {
    pub memory_bytes: u64,
    /// Applied by the memory cgroup when the host has one.
    pub memory_cgroup: bool,
    /// Processes are counted by a pids cgroup, which reports when the limit was hit.
    pub pids_cgroup: bool,
    pub address_space_bytes: u64,
    pub cpu_time: Option<Duration>,
    pub processes: u64,
    pub open_files: u64,
    pub file_size_bytes: u64,
    pub tmp_bytes: u64,
}

/// One `setrlimit` the sandbox's first process makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rlimit {
    pub resource: u32,
    pub soft: u64,
    pub hard: u64,
}

impl SandboxLimits {
    pub fn new(limits: &Limits, memory_cgroup: bool, pids_cgroup: bool) -> SandboxLimits {
        SandboxLimits {
            memory_bytes: limits.memory_bytes,
            memory_cgroup,
            pids_cgroup,
            address_space_bytes: if memory_cgroup {
                limits.memory_bytes.saturating_mul(ADDRESS_SPACE_FACTOR)
            } else {
                limits.memory_bytes
            },
            cpu_time: limits.cpu_time,
            processes: limits.processes.unwrap_or(DEFAULT_PROCESSES),
            open_files: limits.open_files.unwrap_or(DEFAULT_OPEN_FILES),
            file_size_bytes: limits.file_size_bytes.unwrap_or(DEFAULT_FILE_SIZE_BYTES),
            tmp_bytes: limits.tmp_bytes.unwrap_or(DEFAULT_TMP_BYTES),
        }
    }

    /// The rlimits, each capped by the host's hard limit (`host_hard(resource)`).
    pub fn rlimits(&self, host_hard: impl Fn(u32) -> u64) -> Vec<Rlimit> {
        // RLIMIT_CPU counts whole seconds per process: round up, and let the hard limit
        // (SIGKILL) follow a second after the soft one (SIGXCPU).
        let cpu = self.cpu_time.map(|cpu| {
            let seconds = cpu.as_secs() + u64::from(cpu.subsec_nanos() > 0);
            (seconds.max(1), seconds.max(1) + 1)
        });
        // With a pids cgroup, the cgroup is the limit (and it counts the hits that make a
        // LIMIT_EXCEEDED); RLIMIT_NPROC, one above, stays as a backstop it never reaches.
        let nproc = if self.pids_cgroup {
            self.processes.saturating_add(1)
        } else {
            self.processes
        };
        let mut rlimits = vec![
            (
                libc::RLIMIT_AS,
                self.address_space_bytes,
                self.address_space_bytes,
            ),
            (libc::RLIMIT_NOFILE, self.open_files, self.open_files),
            (
                libc::RLIMIT_FSIZE,
                self.file_size_bytes,
                self.file_size_bytes,
            ),
            (libc::RLIMIT_CORE, 0, 0),
            (libc::RLIMIT_NPROC, nproc, nproc),
        ];
        if let Some((soft, hard)) = cpu {
            rlimits.push((libc::RLIMIT_CPU, soft, hard));
        }
        rlimits
            .into_iter()
            .map(|(resource, soft, hard)| {
                let cap = host_hard(resource);
                Rlimit {
                    resource,
                    soft: soft.min(cap),
                    hard: hard.min(cap),
                }
            })
            .collect()
    }

    /// The options of the `/tmp` tmpfs.
    pub fn tmp_options(&self, uid: u32, gid: u32) -> String {
        format!(
            "size={},nr_inodes={TMP_INODES},mode=1777,uid={uid},gid={gid}",
            self.tmp_bytes
        )
    }
}

/// How a sandbox ended, as the kernel reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Exited(i32),
    Killed(i32),
}

/// Turns how the first process ended, and what the group used, into the call's exit.
/// `past_deadline`: it ended at or after the call's deadline, when the deadline keeper kills
/// it with SIGKILL.
pub fn classify(
    ended: Ended,
    stats: &CgroupStats,
    limits: &SandboxLimits,
    cpu_exceeded: bool,
    past_deadline: bool,
) -> Exit {
    if stats.oom_kills > 0 {
        return Exit::LimitExceeded(format!(
            "the tool used more than {} bytes of memory (limits.memory) and was killed",
            limits.memory_bytes
        ));
    }
    let cpu_message = || {
        Exit::LimitExceeded(format!(
            "the tool used more than {} ms of CPU time (limits.cpu_time_ms) and was stopped",
            limits.cpu_time.map_or(0, |cpu| cpu.as_millis())
        ))
    };
    if cpu_exceeded {
        return cpu_message();
    }
    match ended {
        Ended::Exited(code) => {
            if code != 0 && stats.pids_limit_hits > 0 {
                return processes_exceeded(limits, Some(code));
            }
            Exit::Code(code)
        }
        Ended::Killed(signal) => match signal {
            libc::SIGKILL if past_deadline => Exit::PastDeadline,
            libc::SIGXCPU => cpu_message(),
            libc::SIGKILL if limits.cpu_time.is_some() && stats.cpu_time.is_none() => {
                // Without a CPU accounting group, a SIGKILL with a CPU limit set is the
                // hard RLIMIT_CPU (the watchdog would have said so otherwise).
                cpu_message()
            }
            libc::SIGXFSZ => Exit::LimitExceeded(format!(
                "the tool wrote a file larger than {} bytes (limits.file_size) and was stopped",
                limits.file_size_bytes
            )),
            _ if stats.pids_limit_hits > 0 => processes_exceeded(limits, None),
            signal => Exit::Signal(signal),
        },
    }
}

fn processes_exceeded(limits: &SandboxLimits, code: Option<i32>) -> Exit {
    let ended = match code {
        Some(code) => format!("exited with code {code}"),
        None => "was killed".to_owned(),
    };
    Exit::LimitExceeded(format!(
        "the tool tried to run more than {} processes or threads (limits.processes) and {ended}",
        limits.processes
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            memory_bytes: 64 << 20,
            wall_time: Duration::from_secs(10),
            cpu_time: Some(Duration::from_millis(1500)),
            output_bytes: 1 << 20,
            processes: Some(16),
            open_files: None,
            file_size_bytes: Some(4096),
            tmp_bytes: None,
        }
    }

    #[test]
    fn profile_values_win_and_defaults_fill_the_rest() {
        let sandbox = SandboxLimits::new(&limits(), true, true);
        assert_eq!(sandbox.processes, 16);
        assert_eq!(sandbox.open_files, DEFAULT_OPEN_FILES);
        assert_eq!(sandbox.file_size_bytes, 4096);
        assert_eq!(sandbox.tmp_bytes, DEFAULT_TMP_BYTES);
        assert_eq!(sandbox.address_space_bytes, 256 << 20);
        // Without a memory cgroup, the address space is the only memory bound.
        assert_eq!(
            SandboxLimits::new(&limits(), false, true).address_space_bytes,
            64 << 20
        );
    }

    #[test]
    fn rlimits_round_cpu_up_and_respect_the_host() {
        let sandbox = SandboxLimits::new(&limits(), true, false);
        let rlimits = sandbox.rlimits(|resource| {
            if resource == libc::RLIMIT_NOFILE {
                512
            } else {
                u64::MAX
            }
        });
        let get = |resource: libc::__rlimit_resource_t| {
            rlimits
                .iter()
                .find(|r| r.resource == resource)
                .copied()
                .expect("set")
        };
        assert_eq!(
            (get(libc::RLIMIT_CPU).soft, get(libc::RLIMIT_CPU).hard),
            (2, 3)
        );
        assert_eq!(get(libc::RLIMIT_NOFILE).soft, 512);
        assert_eq!(get(libc::RLIMIT_CORE).hard, 0);
        assert_eq!(get(libc::RLIMIT_NPROC).soft, 16);
        assert_eq!(get(libc::RLIMIT_FSIZE).soft, 4096);
        assert_eq!(get(libc::RLIMIT_AS).soft, 256 << 20);
        // A pids cgroup takes over the process limit; RLIMIT_NPROC stays just above it.
        let with_group = SandboxLimits::new(&limits(), true, true).rlimits(|_| u64::MAX);
        let nproc = with_group
            .iter()
            .find(|r| r.resource == libc::RLIMIT_NPROC)
            .expect("set");
        assert_eq!(nproc.soft, 17);
    }

    #[test]
    fn limit_signals_and_counters_become_limit_exceeded() {
        let sandbox = SandboxLimits::new(&limits(), true, true);
        let quiet = CgroupStats::default();
        let exceeded = |exit: Exit, key: &str| match exit {
            Exit::LimitExceeded(message) => assert!(message.contains(key), "{message}"),
            other => panic!("expected a limit naming {key}, got {other:?}"),
        };
        exceeded(
            classify(
                Ended::Killed(libc::SIGKILL),
                &CgroupStats {
                    oom_kills: 1,
                    ..quiet
                },
                &sandbox,
                false,
                false,
            ),
            "limits.memory",
        );
        exceeded(
            classify(Ended::Killed(libc::SIGXCPU), &quiet, &sandbox, false, false),
            "limits.cpu_time_ms",
        );
        exceeded(
            classify(Ended::Killed(libc::SIGKILL), &quiet, &sandbox, true, false),
            "limits.cpu_time_ms",
        );
        exceeded(
            classify(Ended::Killed(libc::SIGXFSZ), &quiet, &sandbox, false, false),
            "limits.file_size",
        );
        exceeded(
            classify(
                Ended::Exited(1),
                &CgroupStats {
                    pids_limit_hits: 3,
                    ..quiet
                },
                &sandbox,
                false,
                false,
            ),
            "limits.processes",
        );
        assert_eq!(
            classify(
                Ended::Exited(0),
                &CgroupStats {
                    pids_limit_hits: 3,
                    ..quiet
                },
                &sandbox,
                false,
                false
            ),
            Exit::Code(0)
        );
        assert_eq!(
            classify(Ended::Exited(3), &quiet, &sandbox, false, false),
            Exit::Code(3)
        );
        let with_cpu_accounting = CgroupStats {
            cpu_time: Some(Duration::from_millis(5)),
            ..quiet
        };
        assert_eq!(
            classify(
                Ended::Killed(libc::SIGKILL),
                &with_cpu_accounting,
                &sandbox,
                false,
                false
            ),
            Exit::Signal(libc::SIGKILL)
        );
        assert_eq!(
            classify(Ended::Killed(libc::SIGSEGV), &quiet, &sandbox, false, false),
            Exit::Signal(libc::SIGSEGV)
        );
    }

    #[test]
    fn a_sigkill_at_the_deadline_is_the_deadline_unless_a_limit_explains_it() {
        let sandbox = SandboxLimits::new(&limits(), true, true);
        let quiet = CgroupStats {
            cpu_time: Some(Duration::from_millis(5)),
            ..CgroupStats::default()
        };
        assert_eq!(
            classify(Ended::Killed(libc::SIGKILL), &quiet, &sandbox, false, true),
            Exit::PastDeadline
        );
        // The memory limit killed it, whenever that was.
        let oom = CgroupStats {
            oom_kills: 1,
            ..quiet
        };
        assert!(matches!(
            classify(Ended::Killed(libc::SIGKILL), &oom, &sandbox, false, true),
            Exit::LimitExceeded(_)
        ));
        // Another signal, or an exit, past the deadline is the tool's own.
        assert_eq!(
            classify(Ended::Killed(libc::SIGSEGV), &quiet, &sandbox, false, true),
            Exit::Signal(libc::SIGSEGV)
        );
        assert_eq!(
            classify(Ended::Exited(0), &quiet, &sandbox, false, true),
            Exit::Code(0)
        );
    }
}
