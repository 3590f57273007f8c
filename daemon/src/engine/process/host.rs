//! What this host can provide, read once when the engine starts: privileges, the Landlock
//! ABI, the kernel's capability count and version, the hard rlimits, and the cgroup
//! controllers. A missing requirement makes the engine unavailable with a message naming it;
//! the end-to-end check (building a whole sandbox once) is the engine's, in `mod.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::cgroup::Cgroups;
use super::landlock;

/// Capabilities the daemon itself needs: copying mount trees and entering namespaces
/// (`CAP_SYS_ADMIN`), writing other ids into a user namespace's maps (`CAP_SETUID`,
/// `CAP_SETGID`).
const REQUIRED_CAPABILITIES: [(u32, &str); 3] =
    [(21, "CAP_SYS_ADMIN"), (7, "CAP_SETUID"), (6, "CAP_SETGID")];

/// Since Linux 5.14 `RLIMIT_NPROC` counts the processes of a uid per user namespace, so each
/// sandbox's count is its own even when sandboxes share a host uid.
const NPROC_PER_USER_NAMESPACE: (u32, u32) = (5, 14);

#[derive(Debug)]
pub struct Host {
    pub landlock_abi: u32,
    /// The highest capability number this kernel knows.
    pub cap_last: u32,
    pub kernel: (u32, u32),
    hard_limits: BTreeMap<u32, u64>,
    pub cgroups: Arc<Cgroups>,
}

impl Host {
    pub fn probe() -> Result<Host, String> {
        super::sys::note_dumpable();
        if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
            return Err(format!(
                "the seccomp filter is written for x86_64 and aarch64, not {}",
                std::env::consts::ARCH
            ));
        }
        let status = std::fs::read_to_string("/proc/self/status")
            .map_err(|err| format!("cannot read /proc/self/status: {err}"))?;
        let effective = status
            .lines()
            .find_map(|line| line.strip_prefix("CapEff:"))
            .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
            .ok_or("cannot read the daemon's capabilities from /proc/self/status")?;
        let missing: Vec<&str> = REQUIRED_CAPABILITIES
            .iter()
            .filter(|(bit, _)| effective & (1 << bit) == 0)
            .map(|(_, name)| *name)
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "the daemon lacks {} (run airlockd as root, or grant it CAP_SYS_ADMIN, CAP_SETUID \
                 and CAP_SETGID as the packaged airlockd.service does, to use process tools)",
                missing.join(", ")
            ));
        }
        let max_namespaces = std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
            .map_err(|err| {
                format!("user namespaces: cannot read /proc/sys/user/max_user_namespaces: {err}")
            })?;
        if max_namespaces.trim() == "0" {
            return Err("user namespaces are disabled (user.max_user_namespaces = 0)".into());
        }
        let cap_last = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .ok_or("cannot read /proc/sys/kernel/cap_last_cap")?;
        let kernel = kernel_version().ok_or("cannot read the kernel version")?;
        let mut hard_limits = BTreeMap::new();
        for resource in [
            libc::RLIMIT_AS,
            libc::RLIMIT_CPU,
            libc::RLIMIT_NOFILE,
            libc::RLIMIT_FSIZE,
            libc::RLIMIT_CORE,
            libc::RLIMIT_NPROC,
        ] {
            let mut limit = libc::rlimit64 {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: `limit` is a valid, writable rlimit64.
            if unsafe { libc::getrlimit64(resource, &mut limit) } == 0 {
                hard_limits.insert(resource, limit.rlim_max);
            }
        }
        Ok(Host {
            landlock_abi: landlock::abi_version(),
            cap_last,
            kernel,
            hard_limits,
            cgroups: Arc::new(Cgroups::discover()),
        })
    }

    /// The host's hard limit of `resource`; unlimited when unknown.
    pub fn hard_limit(&self, resource: u32) -> u64 {
        self.hard_limits
            .get(&resource)
            .copied()
            .unwrap_or(libc::RLIM64_INFINITY)
    }

    /// Whether a process limit can be enforced per sandbox: by a pids cgroup, or by
    /// `RLIMIT_NPROC` where the kernel counts per user namespace.
    pub fn can_limit_processes(&self) -> Result<(), String> {
        if self.cgroups.has_pids() || self.kernel >= NPROC_PER_USER_NAMESPACE {
            return Ok(());
        }
        Err(format!(
            "limits.processes: no pids cgroup controller ({}) and Linux {}.{} counts RLIMIT_NPROC across sandboxes (5.14 and later count it per sandbox)",
            self.cgroups
                .missing
                .get("pids")
                .map_or("not found", String::as_str),
            self.kernel.0,
            self.kernel.1
        ))
    }
}

fn kernel_version() -> Option<(u32, u32)> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    parse_version(&release)
}

fn parse_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.trim().split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kernel_releases() {
        assert_eq!(parse_version("6.18.44-fc-v782"), Some((6, 18)));
        assert_eq!(parse_version("5.4.0-150-generic\n"), Some((5, 4)));
        assert_eq!(parse_version("garbage"), None);
    }

    #[test]
    fn this_host_can_run_process_tools() {
        let host =
            Host::probe().unwrap_or_else(|err| panic!("the process engine cannot run here: {err}"));
        assert!(
            host.landlock_abi >= landlock::REQUIRED_ABI,
            "Landlock ABI {} is older than the {} the process engine needs",
            host.landlock_abi,
            landlock::REQUIRED_ABI
        );
        assert!(host.cap_last >= 31, "cap_last_cap {}", host.cap_last);
        host.can_limit_processes()
            .expect("processes can be limited");
    }
}
