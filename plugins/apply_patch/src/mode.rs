//! The executable bit, where the platform has one.
//!
//! Natively on Unix (the tool's tests, a process engine) a file's mode is read and set.
//! WASI preview 1, where the tool runs under airlock, has no file modes at all: there
//! these functions say so (`None`) and the tool reports that a mode the patch sets was
//! not applied rather than pretending it was.

use std::fs::Permissions;

/// Whether file modes can be read and set here.
pub const SUPPORTED: bool = cfg!(unix);

/// Whether `permissions` make a file executable (by anyone); `None` without file modes.
#[cfg(unix)]
pub fn executable(permissions: &Permissions) -> Option<bool> {
    use std::os::unix::fs::PermissionsExt;
    Some(permissions.mode() & 0o111 != 0)
}

#[cfg(not(unix))]
pub fn executable(_permissions: &Permissions) -> Option<bool> {
    None
}

/// `permissions` made executable (execute for whoever may read, as git checks a
/// 100755 file out) or not executable; `None` without file modes.
#[cfg(unix)]
pub fn with_executable(permissions: &Permissions, executable: bool) -> Option<Permissions> {
    use std::os::unix::fs::PermissionsExt;
    let mode = permissions.mode();
    let mode = if executable {
        mode | ((mode & 0o444) >> 2)
    } else {
        mode & !0o111
    };
    Some(Permissions::from_mode(mode))
}

#[cfg(not(unix))]
pub fn with_executable(_permissions: &Permissions, _executable: bool) -> Option<Permissions> {
    None
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn execute_follows_read() {
        let regular = Permissions::from_mode(0o640);
        assert_eq!(executable(&regular), Some(false));
        let made = with_executable(&regular, true).map(|permissions| permissions.mode());
        assert_eq!(made, Some(0o750));
        let unmade = with_executable(&Permissions::from_mode(0o755), false)
            .map(|permissions| permissions.mode());
        assert_eq!(unmade, Some(0o644));
    }
}
