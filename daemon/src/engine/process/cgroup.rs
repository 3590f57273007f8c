//! Control groups: one per sandbox, for the limits rlimits cannot express for a whole process
//! tree (processes, memory) and for measuring it (peak memory, CPU time, OOM kills).
//!
//! Hosts mix cgroup versions: each controller comes from the unified (v2) hierarchy when it is
//! enabled there, otherwise from its own v1 hierarchy. Sandbox groups are created below the
//! daemon's own group in each hierarchy (so a limit an operator put on the daemon also bounds
//! its tools), in a directory named for the daemon's pid. That directory is shared by every
//! engine of the process and stays until the process is gone; the next daemon to start
//! removes the directories of daemons that are no longer running.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const PROC_MOUNTINFO: &str = "/proc/self/mountinfo";
const PROC_CGROUP: &str = "/proc/self/cgroup";

/// Prefix of the per-daemon directory in each hierarchy: `airlock-<pid>`.
const DAEMON_DIR_PREFIX: &str = "airlock-";

/// How often removing a sandbox's group is retried while its last processes finish exiting.
const REMOVE_ATTEMPTS: u32 = 50;
const REMOVE_BACKOFF: Duration = Duration::from_millis(2);

/// Names sandbox groups uniquely within this daemon process.
static NEXT_GROUP: AtomicU64 = AtomicU64::new(0);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// One hierarchy the sandboxes' groups are created in.
#[derive(Debug, Clone)]
struct Hierarchy {
    version: Version,
    /// `<mount>/<daemon's group>/airlock-<pid>`.
    parent: PathBuf,
}

/// Which hierarchy provides each controller, and why a controller is missing.
#[derive(Debug, Default)]
pub struct Cgroups {
    hierarchies: Vec<Hierarchy>,
    pids: Option<usize>,
    memory: Option<usize>,
    cpu: Option<usize>,
    /// Why a controller is not available, by controller name.
    pub missing: BTreeMap<&'static str, String>,
}

/// What a finished (or stopped) sandbox used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgroupStats {
    pub peak_memory_bytes: Option<u64>,
    pub cpu_time: Option<Duration>,
    pub oom_kills: u64,
    pub pids_limit_hits: u64,
}

impl Cgroups {
    /// Finds the hierarchies of this host and prepares the daemon's directory in each.
    pub fn discover() -> Cgroups {
        let mut cgroups = Cgroups::default();
        let mountinfo = fs::read_to_string(PROC_MOUNTINFO).unwrap_or_default();
        let membership = fs::read_to_string(PROC_CGROUP).unwrap_or_default();
        let mounts = parse_mountinfo(&mountinfo);
        let own = parse_membership(&membership);
        let daemon_dir = format!("{DAEMON_DIR_PREFIX}{}", std::process::id());

        // The unified hierarchy, with the controllers this daemon may enable below itself.
        let mut v2_enabled: Vec<&'static str> = Vec::new();
        let mut v2_index = None;
        if let Some(mount) = mounts.iter().find(|mount| mount.version == Version::V2)
            && let Some(own_dir) = own.get("").and_then(|path| mount.dir_of(path))
        {
            remove_stale(&own_dir);
            let parent = own_dir.join(&daemon_dir);
            match fs::create_dir_all(&parent) {
                Ok(()) => {
                    let available =
                        fs::read_to_string(own_dir.join("cgroup.controllers")).unwrap_or_default();
                    for controller in ["pids", "memory"] {
                        if !available.split_whitespace().any(|c| c == controller) {
                            continue;
                        }
                        let enable = format!("+{controller}");
                        let enabled = write_file(&own_dir.join("cgroup.subtree_control"), &enable)
                            .and_then(|()| {
                                write_file(&parent.join("cgroup.subtree_control"), &enable)
                            });
                        match enabled {
                            Ok(()) => v2_enabled.push(controller),
                            Err(err) => {
                                cgroups.missing.insert(
                                    controller,
                                    format!(
                                        "cannot enable it below {} (cgroup v2): {err}",
                                        own_dir.display()
                                    ),
                                );
                            }
                        }
                    }
                    cgroups.hierarchies.push(Hierarchy {
                        version: Version::V2,
                        parent,
                    });
                    v2_index = Some(cgroups.hierarchies.len() - 1);
                }
                Err(err) => {
                    tracing::debug!(dir = %parent.display(), %err, "cgroup v2 hierarchy not usable");
                }
            }
        }

        let v1_index = |cgroups: &mut Cgroups, controller: &'static str| -> Option<usize> {
            let mount = mounts.iter().find(|mount| {
                mount.version == Version::V1 && mount.controllers.iter().any(|c| c == controller)
            })?;
            let path = own.get(controller)?;
            let own_dir = mount.dir_of(path)?;
            let parent = own_dir.join(&daemon_dir);
            if let Some(index) = cgroups.hierarchies.iter().position(|h| h.parent == parent) {
                return Some(index);
            }
            remove_stale(&own_dir);
            if let Err(err) = fs::create_dir_all(&parent) {
                cgroups.missing.insert(
                    controller,
                    format!("cannot create {} (cgroup v1): {err}", parent.display()),
                );
                return None;
            }
            cgroups.hierarchies.push(Hierarchy {
                version: Version::V1,
                parent,
            });
            Some(cgroups.hierarchies.len() - 1)
        };

        for controller in ["pids", "memory"] {
            let index = if v2_enabled.contains(&controller) {
                v2_index
            } else {
                v1_index(&mut cgroups, controller)
            };
            match index {
                Some(index) => {
                    cgroups.missing.remove(controller);
                    match controller {
                        "pids" => cgroups.pids = Some(index),
                        _ => cgroups.memory = Some(index),
                    }
                }
                None => {
                    cgroups
                        .missing
                        .entry(controller)
                        .or_insert_with(|| "no cgroup hierarchy provides it".to_owned());
                }
            }
        }
        // CPU time: every v2 group reports it (`cpu.stat`) without the controller; a v2
        // hierarchy already in use costs nothing more, otherwise v1 `cpuacct`.
        let v2_in_use =
            v2_index.filter(|index| cgroups.pids == Some(*index) || cgroups.memory == Some(*index));
        cgroups.cpu = v2_in_use
            .or_else(|| v1_index(&mut cgroups, "cpuacct"))
            .or(v2_index);
        if cgroups.cpu.is_none() {
            cgroups
                .missing
                .entry("cpuacct")
                .or_insert_with(|| "no cgroup hierarchy provides it".to_owned());
        }
        // Keep only the hierarchies a controller uses.
        cgroups.compact();
        cgroups
    }

    fn compact(&mut self) {
        let used: Vec<usize> = [self.pids, self.memory, self.cpu]
            .into_iter()
            .flatten()
            .collect();
        let mut kept = Vec::new();
        let mut remap = BTreeMap::new();
        for (index, hierarchy) in self.hierarchies.iter().enumerate() {
            if used.contains(&index) {
                remap.insert(index, kept.len());
                kept.push(hierarchy.clone());
            } else {
                let _ = fs::remove_dir(&hierarchy.parent);
            }
        }
        self.hierarchies = kept;
        for slot in [&mut self.pids, &mut self.memory, &mut self.cpu] {
            *slot = slot.and_then(|index| remap.get(&index).copied());
        }
    }

    pub fn has_pids(&self) -> bool {
        self.pids.is_some()
    }

    pub fn has_memory(&self) -> bool {
        self.memory.is_some()
    }

    pub fn is_empty(&self) -> bool {
        self.hierarchies.is_empty()
    }

    /// A summary for logs: which hierarchy provides what.
    pub fn describe(&self) -> String {
        let name = |slot: Option<usize>| match slot.and_then(|i| self.hierarchies.get(i)) {
            Some(h) => format!("{:?} {}", h.version, h.parent.display()),
            None => "none".to_owned(),
        };
        format!(
            "pids: {}; memory: {}; cpu: {}",
            name(self.pids),
            name(self.memory),
            name(self.cpu)
        )
    }

    /// Creates an empty group for one sandbox in every hierarchy in use.
    pub fn create_sandbox(&self) -> io::Result<SandboxCgroup> {
        let name = format!("s{}", NEXT_GROUP.fetch_add(1, Ordering::Relaxed));
        let mut group = SandboxCgroup {
            dirs: Vec::with_capacity(self.hierarchies.len()),
            joins: Vec::with_capacity(self.hierarchies.len()),
            pids: None,
            memory: None,
            cpu: None,
        };
        for hierarchy in &self.hierarchies {
            let dir = hierarchy.parent.join(&name);
            fs::create_dir(&dir)?;
            group.dirs.push(dir.clone());
            // v2 has no per-thread file outside threaded subtrees (see `child::Plan`).
            let join = match hierarchy.version {
                Version::V1 => "tasks",
                Version::V2 => "cgroup.procs",
            };
            let join = OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_CLOEXEC)
                .open(dir.join(join))?;
            group.joins.push(join);
        }
        let at = |slot: Option<usize>| {
            slot.and_then(|index| {
                Some(Member {
                    version: self.hierarchies.get(index)?.version,
                    dir: group.dirs.get(index)?.clone(),
                })
            })
        };
        group.pids = at(self.pids);
        group.memory = at(self.memory);
        group.cpu = at(self.cpu);
        Ok(group)
    }
}

#[derive(Debug, Clone)]
struct Member {
    version: Version,
    dir: PathBuf,
}

/// The groups of one sandbox. Removed when dropped (once its processes are gone).
#[derive(Debug)]
pub struct SandboxCgroup {
    dirs: Vec<PathBuf>,
    /// What the sandbox's first process writes itself into (see `child::Plan::cgroup_joins`).
    joins: Vec<File>,
    pids: Option<Member>,
    memory: Option<Member>,
    cpu: Option<Member>,
}

impl SandboxCgroup {
    /// Sets the limits of the sandbox that will run in this group.
    pub fn set_limits(&self, memory_bytes: u64, processes: u64) -> io::Result<()> {
        if let Some(member) = &self.memory {
            let bytes = memory_bytes.to_string();
            match member.version {
                Version::V1 => {
                    write_file(&member.dir.join("memory.limit_in_bytes"), &bytes)?;
                    // Without swap accounting the file is absent and swap is not limited
                    // separately; with it, memory plus swap gets the same bound.
                    let memsw = member.dir.join("memory.memsw.limit_in_bytes");
                    if memsw.exists() {
                        write_file(&memsw, &bytes)?;
                    }
                }
                Version::V2 => {
                    write_file(&member.dir.join("memory.max"), &bytes)?;
                    let swap = member.dir.join("memory.swap.max");
                    if swap.exists() {
                        write_file(&swap, "0")?;
                    }
                    // An OOM kills the whole group, not one process a tool might outlive.
                    let group = member.dir.join("memory.oom.group");
                    if group.exists() {
                        write_file(&group, "1")?;
                    }
                }
            }
        }
        if let Some(member) = &self.pids {
            write_file(&member.dir.join("pids.max"), &processes.to_string())?;
        }
        Ok(())
    }

    /// The descriptors a process writes `0` to to join every group, valid while `self` is.
    pub fn join_fds(&self) -> impl Iterator<Item = RawFd> + '_ {
        self.joins.iter().map(AsRawFd::as_raw_fd)
    }

    /// What the group's processes have used so far.
    pub fn stats(&self) -> CgroupStats {
        let mut stats = CgroupStats::default();
        if let Some(member) = &self.memory {
            let events = match member.version {
                Version::V1 => "memory.oom_control",
                Version::V2 => "memory.events",
            };
            stats.peak_memory_bytes = self.peak_memory_bytes();
            stats.oom_kills = read_key(&member.dir.join(events), "oom_kill").unwrap_or(0);
        }
        if let Some(member) = &self.pids {
            stats.pids_limit_hits = read_key(&member.dir.join("pids.events"), "max").unwrap_or(0);
        }
        stats.cpu_time = self.cpu_time();
        stats
    }

    /// The group's `memory.peak` when the memory controller is cgroup v2's: a file that a
    /// window of measurement can reset for itself (see `usage`). None in v1, whose peak
    /// resets for every reader at once.
    pub fn memory_peak_file(&self) -> Option<PathBuf> {
        self.memory
            .as_ref()
            .filter(|member| member.version == Version::V2)
            .map(|member| member.dir.join("memory.peak"))
    }

    /// Resets the group's cgroup v1 peak (`memory.max_usage_in_bytes`) to its usage now,
    /// for every reader at once (see `usage` for how windows share it). Fails in v2 and
    /// without the memory controller.
    pub fn reset_v1_peak(&self) -> io::Result<()> {
        match &self.memory {
            Some(member) if member.version == Version::V1 => {
                write_file(&member.dir.join("memory.max_usage_in_bytes"), "0")
            }
            _ => Err(io::Error::other("no cgroup v1 memory controller")),
        }
    }

    /// The most memory the group has used since it was made (in v1, since its peak was last
    /// reset), when the host accounts it.
    pub fn peak_memory_bytes(&self) -> Option<u64> {
        let member = self.memory.as_ref()?;
        let peak = match member.version {
            Version::V1 => "memory.max_usage_in_bytes",
            Version::V2 => "memory.peak",
        };
        read_number(&member.dir.join(peak))
    }

    /// Whether the host accounts the group's CPU time (a cpu controller is in use).
    pub fn accounts_cpu(&self) -> bool {
        self.cpu.is_some()
    }

    /// CPU time used so far, for the watchdog of the CPU limit: one file, where `stats`
    /// reads four.
    pub fn cpu_time(&self) -> Option<Duration> {
        let member = self.cpu.as_ref()?;
        match member.version {
            Version::V1 => read_number(&member.dir.join("cpuacct.usage")).map(Duration::from_nanos),
            Version::V2 => {
                read_key(&member.dir.join("cpu.stat"), "usage_usec").map(Duration::from_micros)
            }
        }
    }
}

impl Drop for SandboxCgroup {
    fn drop(&mut self) {
        self.joins.clear();
        for dir in &self.dirs {
            // The group is dropped after its sandbox was reaped; in v1 the last exiting tasks
            // can still be leaving it for a moment.
            for attempt in 0..REMOVE_ATTEMPTS {
                match fs::remove_dir(dir) {
                    Err(err)
                        if err.raw_os_error() == Some(libc::EBUSY)
                            && attempt + 1 < REMOVE_ATTEMPTS =>
                    {
                        std::thread::sleep(REMOVE_BACKOFF);
                    }
                    Err(err) if err.kind() != io::ErrorKind::NotFound => {
                        tracing::warn!(dir = %dir.display(), %err, "cannot remove a sandbox cgroup");
                        break;
                    }
                    _ => break,
                }
            }
        }
    }
}

/// Removes the directories of daemons that are no longer running.
fn remove_stale(own_dir: &Path) {
    let Ok(entries) = fs::read_dir(own_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix(DAEMON_DIR_PREFIX))
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if Path::new("/proc").join(pid.to_string()).exists() {
            continue;
        }
        let dir = entry.path();
        if let Ok(groups) = fs::read_dir(&dir) {
            for group in groups.flatten() {
                if group.path().is_dir() {
                    let _ = fs::remove_dir(group.path());
                }
            }
        }
        let _ = fs::remove_dir(&dir);
    }
}

fn write_file(path: &Path, value: &str) -> io::Result<()> {
    let mut file = OpenOptions::new().write(true).open(path)?;
    file.write_all(value.as_bytes()).map_err(|err| {
        io::Error::new(
            err.kind(),
            format!("writing {value:?} to {}: {err}", path.display()),
        )
    })
}

fn read_number(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Reads `key N` from a flat-keyed file such as `memory.events`.
fn read_key(path: &Path, key: &str) -> Option<u64> {
    parse_key(&fs::read_to_string(path).ok()?, key)
}

fn parse_key(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (name, value) = line.split_once(char::is_whitespace)?;
        (name == key).then(|| value.trim().parse().ok()).flatten()
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    version: Version,
    /// The path inside the hierarchy that is mounted (`/` unless a container mounted a
    /// subtree).
    root: String,
    point: PathBuf,
    controllers: Vec<String>,
}

impl Mount {
    /// The directory of the group at `path` (as `/proc/self/cgroup` names it).
    fn dir_of(&self, path: &str) -> Option<PathBuf> {
        let relative = if self.root == "/" {
            path.trim_start_matches('/')
        } else {
            path.strip_prefix(self.root.as_str())?
                .trim_start_matches('/')
        };
        Some(self.point.join(relative))
    }
}

fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (mount, fs) = line.split_once(" - ")?;
            let mount: Vec<&str> = mount.split(' ').collect();
            let fs: Vec<&str> = fs.split(' ').collect();
            let version = match *fs.first()? {
                "cgroup2" => Version::V2,
                "cgroup" => Version::V1,
                _ => return None,
            };
            let controllers = match version {
                Version::V1 => fs
                    .get(2)?
                    .split(',')
                    .filter(|option| !matches!(*option, "rw" | "ro") && !option.contains('='))
                    .map(str::to_owned)
                    .collect(),
                Version::V2 => Vec::new(),
            };
            Some(Mount {
                version,
                root: unescape(mount.get(3)?),
                point: PathBuf::from(unescape(mount.get(4)?)),
                controllers,
            })
        })
        .collect()
}

/// `/proc/self/cgroup`: controller name → path; the unified hierarchy is under `""`.
fn parse_membership(text: &str) -> BTreeMap<String, String> {
    let mut membership = BTreeMap::new();
    for line in text.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if controllers.is_empty() {
            membership.insert(String::new(), path.to_owned());
        }
        for controller in controllers.split(',').filter(|c| !c.is_empty()) {
            membership.insert(controller.to_owned(), path.to_owned());
        }
    }
    membership
}

/// Mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 4);
        match code.and_then(|code| u8::from_str_radix(code, 8).ok()) {
            Some(byte) => {
                out.push(char::from(byte));
                rest = &rest[at + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
24 1 254:0 / / rw,relatime - ext4 /dev/vda rw
30 25 0:26 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
31 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
32 25 0:28 /docker/abc /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
33 25 0:29 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
34 25 0:30 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd
";

    #[test]
    fn reads_mounts_of_both_versions() {
        let mounts = parse_mountinfo(MOUNTINFO);
        assert_eq!(mounts.len(), 5);
        assert_eq!(mounts[0].controllers, ["pids"]);
        assert_eq!(mounts[1].controllers, ["cpu", "cpuacct"]);
        assert_eq!(mounts[3].version, Version::V2);
        assert_eq!(mounts[4].controllers, ["xattr"]);
        // A container's subtree mount maps its paths below the mount point.
        assert_eq!(
            mounts[2].dir_of("/docker/abc/daemon"),
            Some(PathBuf::from("/sys/fs/cgroup/memory/daemon"))
        );
        assert_eq!(mounts[2].dir_of("/elsewhere"), None);
        assert_eq!(
            mounts[0].dir_of("/"),
            Some(PathBuf::from("/sys/fs/cgroup/pids"))
        );
    }

    #[test]
    fn reads_membership_and_flat_keys() {
        let membership = parse_membership("8:pids:/\n4:memory:/a/b\n2:cpu,cpuacct:/c\n0::/u\n");
        assert_eq!(membership["pids"], "/");
        assert_eq!(membership["memory"], "/a/b");
        assert_eq!(membership["cpuacct"], "/c");
        assert_eq!(membership[""], "/u");
        assert_eq!(parse_key("oom 0\noom_kill 3\n", "oom_kill"), Some(3));
        assert_eq!(
            parse_key("usage_usec 120\nuser_usec 100\n", "usage_usec"),
            Some(120)
        );
        assert_eq!(parse_key("max 0\n", "oom_kill"), None);
        assert_eq!(unescape("/a\\040b"), "/a b");
    }

    #[test]
    fn this_host_provides_pids_and_memory_groups() {
        let cgroups = Cgroups::discover();
        assert!(
            cgroups.has_pids() && cgroups.has_memory(),
            "this host lacks cgroup controllers the tests expect: {:?} ({})",
            cgroups.missing,
            cgroups.describe()
        );
        let group = cgroups.create_sandbox().expect("create a sandbox group");
        group.set_limits(64 << 20, 16).expect("set limits");
        let stats = group.stats();
        assert_eq!(stats.oom_kills, 0);
        assert_eq!(stats.pids_limit_hits, 0);
        let dirs = group.dirs.clone();
        drop(group);
        assert!(dirs.iter().all(|dir| !dir.exists()), "{dirs:?}");
    }
}
