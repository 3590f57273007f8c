//! The kernel rules built from a profile: the input is a profile (loaded as the daemon loads
//! it), optionally followed by a NUL byte and system calls to put to its seccomp filter.
//!
//! For every profile that loads, the seccomp programs of its family must compile under the
//! kernel's limit and answer every call exactly as the lists in `seccomp.rs` say (the BPF run
//! through a model of the kernel's interpreter, held against the policy stated without BPF):
//! the corpus of refused calls refused, nothing off the allow-list allowed, foreign
//! architectures and x32 killed. And the Landlock rights of each of its file grants must
//! never let a read-only grant be changed, a writable one be executed unless the profile
//! says so, or a single file carry a directory's rights.

#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use airlock_daemon::testing::{
    Access, Profiles, SeccompFamily, build_seccomp, landlock_rights, seccomp_model,
};
use landlock::{AccessFs, BitFlags, make_bitflags};
use libfuzzer_sys::fuzz_target;
use seccomp_model::{Call, policy, run};

/// The profile loader caps files at 64 KiB; longer inputs only exercise the cap.
const MAX_INPUT: usize = 64 * 1024;
/// One call: a number (2 bytes), an architecture selector (1 byte), three arguments.
const CALL_BYTES: usize = 2 + 1 + 3 * 8;

fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("airlock-fuzz-rules-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("the temp dir is writable");
        dir
    })
}

fn call(bytes: &[u8]) -> Call {
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"));
    let nr = u32::from(u16::from_le_bytes([bytes[0], bytes[1]]));
    let mut call = Call::native(0, &[word(3), word(11), word(19)]);
    call.nr = match bytes[2] % 4 {
        // Now and then an x32 number, or another architecture's call.
        0 => nr | 0x4000_0000,
        1 => {
            call.arch = 0x4000_0003;
            nr
        }
        _ => nr % 1024,
    };
    call
}

fn check_rights(access: Access, executable_writes: bool) {
    let writes = make_bitflags!(AccessFs::{WriteFile | Truncate | MakeReg | RemoveFile | RemoveDir | MakeDir | MakeSym | Refer});
    let dir_only = make_bitflags!(AccessFs::{ReadDir | MakeReg | MakeDir | RemoveDir | RemoveFile | MakeSym | MakeSock | MakeFifo | Refer});
    let never: BitFlags<AccessFs> = make_bitflags!(AccessFs::{MakeChar | MakeBlock});
    for is_dir in [true, false] {
        let rights = landlock_rights(access, is_dir, executable_writes);
        assert!((rights & never).is_empty(), "{access:?}: {rights:?}");
        if !is_dir {
            assert!((rights & dir_only).is_empty(), "a file grant: {rights:?}");
        }
        match access {
            Access::ReadOnly => {
                assert!((rights & writes).is_empty(), "read-only: {rights:?}");
                assert!(rights.contains(AccessFs::ReadFile));
            }
            Access::ReadWrite => assert_eq!(
                rights.contains(AccessFs::Execute),
                executable_writes,
                "writable, executable_writes = {executable_writes}: {rights:?}"
            ),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() > MAX_INPUT {
        return;
    }
    let (text, calls) = match data.iter().rposition(|byte| *byte == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let dir = scratch();
    std::fs::write(dir.join("fuzz.toml"), text).expect("the temp dir is writable");
    let (profiles, _) = Profiles::load_dir(dir);
    let Ok(profile) = profiles.get("fuzz") else {
        return;
    };
    let family = SeccompFamily::of(&profile.network);
    let filter = build_seccomp(family).expect("every family's filter compiles");
    for program in filter.programs() {
        assert!(program.len() < 4096, "{} instructions", program.len());
    }
    for chunk in calls.chunks_exact(CALL_BYTES) {
        let call = call(chunk);
        assert_eq!(run(&filter, &call), policy(family, &call), "{family:?}");
    }
    let grants = profile
        .resolve_files(Some(std::path::Path::new("/srv/ws")))
        .expect("a workspace is given, so every grant resolves");
    for grant in &grants {
        check_rights(grant.access, profile.executable_writes);
    }
});
