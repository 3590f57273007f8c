//! A path relative to a workspace, as the bytes the filesystem holds.
//!
//! A name in a call's upper layer is whatever bytes the tool chose: not UTF-8, or UTF-8 that
//! two normalisations would fold together. A change set keeps those bytes exactly — every
//! filesystem call on a change is made with them — and shows them as text only for people
//! (lossily, `�` for what is not UTF-8). Two names that look alike are two paths, never one.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A workspace-relative path: `/`-separated components, none empty, `.` or `..`, no NUL.
/// The empty path is the workspace itself.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelPath(Vec<u8>);

/// Why some bytes are not a workspace-relative path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a path inside the workspace")]
pub struct NotRelative(String);

impl RelPath {
    /// The workspace itself.
    pub fn root() -> RelPath {
        RelPath(Vec::new())
    }

    /// `bytes` as a path, checked: what a stored change set names is read back through here.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<RelPath, NotRelative> {
        let bytes = bytes.into();
        let bad = bytes.contains(&0)
            || (!bytes.is_empty()
                && bytes
                    .split(|b| *b == b'/')
                    .any(|part| part.is_empty() || part == b"." || part == b".."));
        if bad {
            return Err(NotRelative(String::from_utf8_lossy(&bytes).into_owned()));
        }
        Ok(RelPath(bytes))
    }

    /// `bytes` as the path of an entry beneath the workspace: checked, and not the workspace
    /// itself.
    pub fn entry(bytes: impl Into<Vec<u8>>) -> Result<RelPath, NotRelative> {
        let path = RelPath::new(bytes)?;
        if path.is_root() {
            return Err(NotRelative(String::new()));
        }
        Ok(path)
    }

    /// `self/name`, for a `name` read from a directory (one component, never `.` or `..`).
    pub fn join(&self, name: &[u8]) -> RelPath {
        debug_assert!(!name.is_empty() && !name.contains(&b'/') && name != b"." && name != b"..");
        let mut bytes = Vec::with_capacity(self.0.len() + 1 + name.len());
        bytes.extend_from_slice(&self.0);
        if !bytes.is_empty() {
            bytes.push(b'/');
        }
        bytes.extend_from_slice(name);
        RelPath(bytes)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// As a relative `Path`, for joining to a host directory.
    pub fn as_path(&self) -> &Path {
        Path::new(OsStr::from_bytes(&self.0))
    }

    /// The parent (the root for a top-level path) and the last component.
    pub fn split(&self) -> (&[u8], &[u8]) {
        match self.0.iter().rposition(|b| *b == b'/') {
            Some(at) => (&self.0[..at], &self.0[at + 1..]),
            None => (&[], &self.0),
        }
    }

    /// How many directories deep it is (a top-level path is 0).
    pub fn depth(&self) -> usize {
        self.0.iter().filter(|b| **b == b'/').count()
    }

    /// The text of the path when it is UTF-8.
    pub fn to_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    /// For people: the path as text, `�` for bytes that are not UTF-8.
    pub fn display(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.0)
    }

    /// Whether `self` is `other` or lies beneath it.
    pub fn starts_with(&self, other: &RelPath) -> bool {
        other.0.is_empty()
            || self.0 == other.0
            || (self.0.starts_with(&other.0) && self.0.get(other.0.len()) == Some(&b'/'))
    }
}

impl std::fmt::Display for RelPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.display())
    }
}

impl std::fmt::Debug for RelPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.to_str() {
            Some(text) => write!(f, "{text:?}"),
            None => write!(f, "b\"{}\"", self.0.escape_ascii()),
        }
    }
}

impl PartialEq<str> for RelPath {
    fn eq(&self, other: &str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialEq<&str> for RelPath {
    fn eq(&self, other: &&str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl From<&str> for RelPath {
    /// For paths written in the daemon's own code and tests; stored ones go through
    /// [`RelPath::new`].
    fn from(text: &str) -> RelPath {
        RelPath(text.as_bytes().to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths_are_paths() {
        for good in [
            &b""[..],
            b"a",
            b"a/b",
            b"caf\xe9.txt",
            b"..a/b..",
            b".hidden",
        ] {
            assert!(RelPath::new(good).is_ok(), "{good:?}");
        }
        for bad in [
            &b"/a"[..],
            b"a/",
            b"a//b",
            b".",
            b"..",
            b"a/../b",
            b"a/./b",
            b"a\0b",
        ] {
            assert!(RelPath::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bytes_are_kept_and_shown_lossily() {
        let path = RelPath::root().join(b"d").join(b"caf\xe9.txt");
        assert_eq!(path.as_bytes(), b"d/caf\xe9.txt");
        assert_eq!(path.display(), "d/caf\u{fffd}.txt");
        assert_eq!(path.split(), (&b"d"[..], &b"caf\xe9.txt"[..]));
        assert_eq!(path.depth(), 1);
        assert_ne!(path, RelPath::from("d/caf\u{fffd}.txt"));
        assert!(path.starts_with(&RelPath::from("d")));
        assert!(!RelPath::from("de").starts_with(&RelPath::from("d")));
    }
}
