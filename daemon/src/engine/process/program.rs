//! The program a process tool runs, found and checked when the tool loads.
//!
//! `command[0]` is resolved inside the sandbox's view (see [`View::resolve`]): an absolute
//! path as the sandbox sees it, a bare name searched on the sandbox's `PATH`, or a relative
//! path inside the tool's folder (`./search.py` is `/tool/search.py`). The file must be a
//! regular executable reached through a read-only grant (nothing a tool can write is ever
//! executed), and what it needs to start must be in the view too: a script's `#!`
//! interpreter, an ELF program's dynamic loader. Its sha256 is the tool's digest, and a
//! digest pinned in the manifest must match.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::view::{GUEST_TOOL, Resolved, View, is_bare_name};
use crate::profile::Access;

/// The largest program the engine hashes; real programs are well under this.
pub const MAX_PROGRAM_BYTES: u64 = 1 << 30;

/// Where a bare program name is looked for when the profile sets no `PATH`.
pub const DEFAULT_SEARCH_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The kernel reads at most this much of a `#!` line.
const SHEBANG_MAX: usize = 256;

const ELF_MAGIC: &[u8; 4] = b"\x7fELF";
const PT_INTERP: u32 = 3;
/// A dynamic loader's path is a short absolute path.
const MAX_INTERP_BYTES: u64 = 4096;

#[derive(Debug, Clone)]
pub struct Program {
    /// The path the sandbox executes.
    pub guest: CString,
    /// Where it is on the host.
    pub host: PathBuf,
    /// sha256 of its bytes, lowercase hex.
    pub digest: String,
}

/// Finds `written` in `view` and checks that it can run there.
pub fn resolve(written: &str, view: &View, search_path: &str) -> Result<Program, String> {
    let resolved = if is_bare_name(written) {
        search(written, view, search_path)?
    } else if written.starts_with('/') {
        view.resolve(Path::new(written))?
    } else {
        view.resolve(&Path::new(GUEST_TOOL).join(written))?
    };
    check_runnable(&resolved, written)?;
    let mut file = File::open(&resolved.host)
        .map_err(|err| format!("cannot open {}: {err}", resolved.host.display()))?;
    check_loader(&file, &resolved, view)?;
    let digest =
        hash(&mut file).map_err(|err| format!("cannot read {}: {err}", resolved.host.display()))?;
    let guest = CString::new(resolved.guest.as_os_str().as_bytes())
        .map_err(|_| format!("{} contains a NUL byte", resolved.guest.display()))?;
    Ok(Program {
        guest,
        host: resolved.host,
        digest,
    })
}

fn search(name: &str, view: &View, search_path: &str) -> Result<Resolved, String> {
    search_path
        .split(':')
        .filter(|dir| dir.starts_with('/'))
        .find_map(|dir| {
            view.resolve(&Path::new(dir).join(name))
                .ok()
                .filter(|found| is_executable_file(&found.host))
        })
        .ok_or_else(|| {
            format!(
                "`{name}` is not on the sandbox's PATH ({search_path}) within the profile's grants"
            )
        })
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

fn check_runnable(resolved: &Resolved, written: &str) -> Result<(), String> {
    if resolved.access == Access::ReadWrite {
        return Err(format!(
            "`{written}` is in a read-write grant; the sandbox never executes what a tool can write"
        ));
    }
    let meta = std::fs::metadata(&resolved.host)
        .map_err(|err| format!("{}: {err}", resolved.host.display()))?;
    if !meta.is_file() {
        return Err(format!(
            "`{written}` ({}) is not a regular file",
            resolved.host.display()
        ));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(format!(
            "`{written}` ({}) is not executable",
            resolved.host.display()
        ));
    }
    if meta.len() > MAX_PROGRAM_BYTES {
        return Err(format!(
            "`{written}` is {} bytes; the limit is {MAX_PROGRAM_BYTES}",
            meta.len()
        ));
    }
    Ok(())
}

/// A script's interpreter or an ELF program's dynamic loader must be in the view, or the
/// sandbox's `execve` would fail with a bare "No such file or directory".
fn check_loader(file: &File, program: &Resolved, view: &View) -> Result<(), String> {
    let mut head = [0u8; SHEBANG_MAX];
    let len = read_at_most(file, &mut head, 0)
        .map_err(|err| format!("cannot read {}: {err}", program.host.display()))?;
    let head = &head[..len];
    let needed = if let Some(line) = head.strip_prefix(b"#!") {
        let line = line.split(|b| *b == b'\n').next().unwrap_or_default();
        let interpreter = line
            .split(|b| b.is_ascii_whitespace())
            .find(|word| !word.is_empty())
            .ok_or_else(|| {
                format!(
                    "{}: the `#!` line names no interpreter",
                    program.guest.display()
                )
            })?;
        Some(PathBuf::from(std::ffi::OsStr::from_bytes(interpreter)))
    } else if head.starts_with(ELF_MAGIC) {
        elf_interpreter(file).map_err(|err| format!("{}: {err}", program.guest.display()))?
    } else {
        None
    };
    if let Some(needed) = needed {
        let found = view.resolve(&needed).map_err(|err| {
            format!(
                "{} needs {} to start, which the sandbox cannot reach: {err}",
                program.guest.display(),
                needed.display()
            )
        })?;
        if found.access == Access::ReadWrite {
            return Err(format!(
                "{} needs {}, which is in a read-write grant; the sandbox never executes what a tool can write",
                program.guest.display(),
                needed.display()
            ));
        }
    }
    Ok(())
}

/// The `PT_INTERP` path of a little-endian 64-bit ELF file, if it has one.
fn elf_interpreter(file: &File) -> Result<Option<PathBuf>, String> {
    let bad = |what: &str| format!("not a valid ELF file ({what})");
    let mut header = [0u8; 64];
    if read_at_most(file, &mut header, 0).map_err(|err| err.to_string())? < header.len() {
        return Err(bad("short header"));
    }
    match (header[4], header[5]) {
        (2, 1) => {}
        (1, _) => {
            return Err(
                "a 32-bit program: its system calls are a foreign architecture the sandbox's filter refuses"
                    .into(),
            );
        }
        _ => return Err(bad("not little-endian 64-bit")),
    }
    let u16_at = |at: usize| u16::from_le_bytes([header[at], header[at + 1]]);
    let mut offset_bytes = [0u8; 8];
    offset_bytes.copy_from_slice(&header[0x20..0x28]);
    let phoff = u64::from_le_bytes(offset_bytes);
    let phentsize = u64::from(u16_at(0x36));
    let phnum = u64::from(u16_at(0x38));
    if phentsize < 56 {
        return Err(bad("program header size"));
    }
    for index in 0..phnum {
        let mut entry = [0u8; 56];
        let at = phoff.saturating_add(index.saturating_mul(phentsize));
        if read_at_most(file, &mut entry, at).map_err(|err| err.to_string())? < entry.len() {
            return Err(bad("truncated program headers"));
        }
        let p_type = u32::from_le_bytes([entry[0], entry[1], entry[2], entry[3]]);
        if p_type != PT_INTERP {
            continue;
        }
        let word = |at: usize| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&entry[at..at + 8]);
            u64::from_le_bytes(bytes)
        };
        let (offset, size) = (word(8), word(32));
        if size == 0 || size > MAX_INTERP_BYTES {
            return Err(bad("interpreter path size"));
        }
        let mut path = vec![0u8; size as usize];
        if read_at_most(file, &mut path, offset).map_err(|err| err.to_string())? < path.len() {
            return Err(bad("truncated interpreter path"));
        }
        let end = path.iter().position(|b| *b == 0).unwrap_or(path.len());
        path.truncate(end);
        return Ok(Some(PathBuf::from(std::ffi::OsStr::from_bytes(&path))));
    }
    Ok(None)
}

fn read_at_most(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read_at(&mut buf[filled..], offset + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(filled)
}

fn hash(file: &mut File) -> io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{EnvPolicy, FileGrant, GrantPath, Limits, NetworkPolicy, Profile};
    use std::time::Duration;

    fn view_of(grants: &[(&str, Access)], tool_dir: &Path) -> View {
        let profile = Profile {
            name: "test".into(),
            description: String::new(),
            files: grants
                .iter()
                .map(|(path, access)| FileGrant {
                    path: GrantPath::Host(PathBuf::from(path)),
                    access: *access,
                })
                .collect(),
            network: NetworkPolicy::None,
            env: EnvPolicy::default(),
            limits: Limits {
                memory_bytes: 1 << 20,
                wall_time: Duration::from_secs(1),
                cpu_time: None,
                output_bytes: 1 << 20,
                processes: None,
                open_files: None,
                file_size_bytes: None,
                tmp_bytes: None,
            },
            executable_writes: false,
            change_exclusions: Vec::new(),
            change_rules: crate::changes::ChangeRules::default(),
            source: PathBuf::from("test.toml"),
        };
        View::new(&profile, tool_dir).expect("view")
    }

    const SYSTEM: &[(&str, Access)] = &[
        ("/usr", Access::ReadOnly),
        ("/lib", Access::ReadOnly),
        ("/lib64", Access::ReadOnly),
        ("/bin", Access::ReadOnly),
    ];

    #[test]
    fn finds_system_programs_by_name_and_path_with_their_loader() {
        let tool = tempfile::tempdir().expect("tempdir");
        let view = view_of(SYSTEM, tool.path());
        let by_name = resolve("true", &view, DEFAULT_SEARCH_PATH).expect("`true` is on PATH");
        assert!(by_name.guest.to_str().expect("utf-8").ends_with("/true"));
        assert_eq!(by_name.digest.len(), 64);
        let by_path = resolve("/bin/true", &view, DEFAULT_SEARCH_PATH).expect("via /bin");
        assert_eq!(by_path.digest, by_name.digest);
        // Without the dynamic loader's directory, the program could not start.
        let usr_only = view_of(&[("/usr/bin", Access::ReadOnly)], tool.path());
        let err = resolve("/usr/bin/true", &usr_only, DEFAULT_SEARCH_PATH).expect_err("no loader");
        assert!(err.contains("needs"), "{err}");
    }

    #[test]
    fn scripts_live_in_the_tool_folder_and_need_their_interpreter() {
        let tool = tempfile::tempdir().expect("tempdir");
        let script = tool.path().join("run.py");
        std::fs::write(&script, "#!/usr/bin/python3 -I\nprint('hi')\n").expect("write");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let view = view_of(SYSTEM, tool.path());
        let program = resolve("./run.py", &view, DEFAULT_SEARCH_PATH).expect("resolves");
        assert_eq!(program.guest.to_str(), Ok("/tool/run.py"));
        assert_eq!(program.host, script);
        assert_eq!(
            program.digest,
            hex::encode(Sha256::digest(std::fs::read(&script).expect("read")))
        );
        let bare = view_of(&[], tool.path());
        let err = resolve("./run.py", &bare, DEFAULT_SEARCH_PATH).expect_err("no python");
        assert!(err.contains("/usr/bin/python3"), "{err}");

        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let err = resolve("./run.py", &view, DEFAULT_SEARCH_PATH).expect_err("not executable");
        assert!(err.contains("not executable"), "{err}");
    }

    #[test]
    fn programs_in_writable_grants_or_missing_are_refused() {
        let tool = tempfile::tempdir().expect("tempdir");
        let bin = tempfile::tempdir().expect("tempdir");
        let program = bin.path().join("prog");
        std::fs::write(&program, "#!/usr/bin/python3\n").expect("write");
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let mut grants = SYSTEM.to_vec();
        let dir = bin.path().to_str().expect("utf-8").to_owned();
        grants.push((&dir, Access::ReadWrite));
        let view = view_of(&grants, tool.path());
        let err = resolve(program.to_str().expect("utf-8"), &view, DEFAULT_SEARCH_PATH)
            .expect_err("writable");
        assert!(err.contains("read-write"), "{err}");
        let err =
            resolve("no-such-program-anywhere", &view, DEFAULT_SEARCH_PATH).expect_err("missing");
        assert!(err.contains("PATH"), "{err}");
        assert!(resolve("/etc/passwd", &view, DEFAULT_SEARCH_PATH).is_err());
    }
}
