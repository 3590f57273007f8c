//! The bounds on what one call may leave for the host to take in, and the metadata it lands
//! with: a profile's `[changes]` rules.
//!
//! Capture and apply are the daemon writing attacker-chosen data onto the host, so each of
//! their costs is bounded by something the tool cannot stretch:
//!
//! - **entries and bytes** of the upper layer, on *apparent* size (a sparse file costs the tool
//!   nothing to make and the daemon its whole length to hash and copy): [`survey`] counts them
//!   while the call runs — the executor stops a call that crosses a bound, `LIMIT_EXCEEDED`,
//!   nothing applied — and once more before capture reads a byte;
//! - **bytes kept** in the blob store by capture (content before and after, excluded paths
//!   never), counted as capture goes, against the same byte bound;
//! - **time**: capture and apply run on the call's deadline ([`Deadline`]) and stop with it;
//! - **metadata**: no setuid or setgid bit ever lands, sticky only on directories and only
//!   where the profile allows, every mode masked by the profile's umask ([`ChangeRules::mode`]);
//!   owners are the workspace's, never the tool's.
//!
//! So the disk one call can cost the daemon is at most: its upper layer (`max_bytes` plus what
//! the tool writes within one survey interval, [`SURVEY_INTERVAL_MIN`] or ten times the last
//! survey's own time), the blobs it keeps (`2 × max_bytes`: before and after), and the
//! workspace's growth (`max_bytes`). The blob store as a whole stays under its cap (the
//! daemon's `[changes] blob_cap`), evicting the least recently used contents.

use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use rustix::fs::{AtFlags, FileType, OFlags};

use super::lower::open_lower;
use super::rel::RelPath;
use super::types::ChangeError;

/// Entries one call may change, by default: an `npm install` of a large project writes about
/// 100,000 files; past 200,000 a call is more likely a fork bomb of files than a build.
pub const DEFAULT_MAX_FILES: u64 = 200_000;
/// Bytes (apparent) one call may write, and keep, by default: a dependency tree or a build's
/// output fits; the daemon's disk is not the tool's to fill.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;
/// The mask applied to every mode that lands, by default: nothing a tool writes is writable
/// by anyone but the workspace's owner.
pub const DEFAULT_UMASK: u32 = 0o022;
/// How deep a change set's paths may go: capture walks the upper layer recursively, and a
/// tool can nest directories as deep as it likes; real trees (`node_modules` included) stay
/// far shallower.
pub const MAX_DEPTH: usize = 256;
/// The shortest wait between two surveys of a running call's upper layer. Longer when a
/// survey itself takes long: ten times its time, so surveying costs a tenth of a core at most.
pub const SURVEY_INTERVAL_MIN: Duration = Duration::from_millis(100);

/// The bits that never land: setuid and setgid would hand the tool's program another
/// identity on the host (a root-owned workspace makes it root's).
const ID_BITS: u32 = 0o6000;
const STICKY: u32 = 0o1000;

/// A profile's rules for what a call's change set may hold and how it lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeRules {
    /// Paths a call may add, change or remove (directories and whiteouts count).
    pub max_files: u64,
    /// Apparent bytes of files and symlinks a call may write; also the bytes capture may keep.
    pub max_bytes: u64,
    /// Apparent bytes of the largest file.
    pub max_file_bytes: u64,
    /// Mode bits that never land.
    pub umask: u32,
    /// Whether a directory may keep a sticky bit the tool set.
    pub sticky_dirs: bool,
}

impl Default for ChangeRules {
    fn default() -> ChangeRules {
        ChangeRules {
            max_files: DEFAULT_MAX_FILES,
            max_bytes: DEFAULT_MAX_BYTES,
            max_file_bytes: DEFAULT_MAX_BYTES,
            umask: DEFAULT_UMASK,
            sticky_dirs: false,
        }
    }
}

impl ChangeRules {
    /// The mode a path the tool created, or whose mode it changed, lands with.
    pub fn mode(&self, mode: u32, dir: bool) -> u32 {
        let mut mode = mode & 0o7777 & !ID_BITS & !self.umask;
        if !(dir && self.sticky_dirs) {
            mode &= !STICKY;
        }
        mode
    }

    /// The mode a path lands with, from the one the tool left (`mode`) and the one the
    /// workspace had (`before`). A mode the tool did not change is kept — a person's setgid
    /// directory stays one — but a file's content is the tool's, so a file never keeps a
    /// setuid or setgid bit.
    pub fn landed(&self, mode: u32, before: Option<u32>, dir: bool) -> u32 {
        let mode = mode & 0o7777;
        match before {
            Some(before) if before & 0o7777 == mode && dir => mode,
            Some(before) if before & 0o7777 == mode => mode & !ID_BITS,
            _ => self.mode(mode, dir),
        }
    }

    /// What [`ChangeRules::landed`] takes away of the bits that matter, for the record.
    pub fn dropped(&self, mode: u32, before: Option<u32>, dir: bool) -> Option<String> {
        let lost = mode & (ID_BITS | STICKY) & !self.landed(mode, before, dir);
        (lost != 0).then(|| {
            let mut names = Vec::new();
            if lost & 0o4000 != 0 {
                names.push("setuid");
            }
            if lost & 0o2000 != 0 {
                names.push("setgid");
            }
            if lost & STICKY != 0 {
                names.push("sticky");
            }
            format!("{} bit dropped", names.join(" and "))
        })
    }
}

/// When capture and apply must have finished: the call's deadline.
#[derive(Debug, Clone, Copy)]
pub struct Deadline(pub Option<Instant>);

impl Deadline {
    pub fn none() -> Deadline {
        Deadline(None)
    }

    pub fn check(&self) -> Result<(), ChangeError> {
        match self.0 {
            Some(at) if Instant::now() >= at => Err(ChangeError::Deadline),
            _ => Ok(()),
        }
    }
}

/// What a survey counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub entries: u64,
    pub bytes: u64,
}

/// Counts the upper layer at `upper` against `rules`, stopping at the first bound crossed
/// (blocking). Entries that vanish while it reads (the call is still running) are skipped.
pub fn survey(
    upper: &OwnedFd,
    rules: &ChangeRules,
    deadline: Deadline,
) -> Result<Tally, ChangeError> {
    let mut tally = Tally::default();
    // Directories to read, by path: a wide tree must not hold a descriptor per directory.
    let mut stack = vec![RelPath::root()];
    while let Some(path) = stack.pop() {
        deadline.check()?;
        let Some(dir) = open_lower(
            upper.as_fd(),
            path.as_bytes(),
            OFlags::DIRECTORY | OFlags::RDONLY,
        ) else {
            continue;
        };
        let Ok(entries) = rustix::fs::Dir::read_from(&dir) else {
            continue;
        };
        for entry in entries {
            let Ok(entry) = entry else { break };
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            tally.entries += 1;
            if tally.entries > rules.max_files {
                return Err(ChangeError::Exceeded(format!(
                    "the call changed more than {} paths (changes.max_files)",
                    rules.max_files
                )));
            }
            let Ok(stat) = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            match FileType::from_raw_mode(stat.st_mode) {
                FileType::Directory => stack.push(path.join(name)),
                FileType::RegularFile | FileType::Symlink => {
                    let size = u64::try_from(stat.st_size).unwrap_or(0);
                    check_size(rules, &mut tally, size, || path.join(name).to_string())?;
                }
                _ => {}
            }
        }
    }
    Ok(tally)
}

/// Adds a file of apparent `size` to `tally`, refusing past either byte bound.
pub fn check_size(
    rules: &ChangeRules,
    tally: &mut Tally,
    size: u64,
    name: impl FnOnce() -> String,
) -> Result<(), ChangeError> {
    if size > rules.max_file_bytes {
        return Err(ChangeError::Exceeded(format!(
            "{} is {size} bytes (apparent size), over the {} a call may write to one file (changes.max_file_size)",
            name(),
            rules.max_file_bytes
        )));
    }
    tally.bytes = tally.bytes.saturating_add(size);
    if tally.bytes > rules.max_bytes {
        return Err(ChangeError::Exceeded(format!(
            "the call wrote more than {} bytes (apparent size; changes.max_bytes)",
            rules.max_bytes
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_lose_identity_bits_sticky_and_the_umask() {
        let rules = ChangeRules::default();
        assert_eq!(rules.mode(0o4755, false), 0o755);
        assert_eq!(rules.mode(0o2777, true), 0o755);
        assert_eq!(rules.mode(0o1777, true), 0o755);
        assert_eq!(rules.mode(0o666, false), 0o644);
        assert_eq!(
            rules.dropped(0o6755, None, false).as_deref(),
            Some("setuid and setgid bit dropped")
        );
        assert_eq!(rules.dropped(0o777, None, false), None);
        // A mode the tool left as it was stays, but for a file's identity bits.
        assert_eq!(rules.landed(0o2775, Some(0o2775), true), 0o2775);
        assert_eq!(rules.landed(0o4775, Some(0o4775), false), 0o775);
        assert_eq!(rules.landed(0o2777, Some(0o2775), true), 0o755);
        assert_eq!(rules.dropped(0o2775, Some(0o2775), true), None);
        let sticky = ChangeRules {
            sticky_dirs: true,
            umask: 0,
            ..ChangeRules::default()
        };
        assert_eq!(sticky.mode(0o1777, true), 0o1777);
        assert_eq!(sticky.mode(0o1777, false), 0o777);
        assert_eq!(sticky.mode(0o7777, true), 0o1777);
    }

    #[test]
    fn a_survey_counts_apparent_size_and_stops_at_a_bound() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("d")).expect("mkdir");
        let sparse = std::fs::File::create(dir.path().join("d/sparse")).expect("create");
        sparse.set_len(10 << 20).expect("a sparse file");
        std::fs::write(dir.path().join("small"), b"abc").expect("write");
        let root: OwnedFd = std::fs::File::open(dir.path()).expect("open").into();
        let rules = ChangeRules::default();
        assert_eq!(
            survey(&root, &rules, Deadline::none()).expect("within bounds"),
            Tally {
                entries: 3,
                bytes: (10 << 20) + 3
            }
        );
        let small = ChangeRules {
            max_bytes: 10 << 20,
            ..rules
        };
        assert!(matches!(
            survey(&root, &small, Deadline::none()),
            Err(ChangeError::Exceeded(_))
        ));
        let one_file = ChangeRules {
            max_file_bytes: 1 << 20,
            ..rules
        };
        let err = survey(&root, &one_file, Deadline::none()).expect_err("the sparse file");
        assert!(
            err.to_string().contains("sparse is 10485760 bytes"),
            "{err}"
        );
        let few = ChangeRules {
            max_files: 2,
            ..rules
        };
        assert!(matches!(
            survey(&root, &few, Deadline::none()),
            Err(ChangeError::Exceeded(_))
        ));
        let past = Deadline(Some(Instant::now()));
        assert!(matches!(
            survey(&root, &rules, past),
            Err(ChangeError::Deadline)
        ));
    }
}
