//! Walks one directory (or a tree of them) in sorted order and describes each entry.

use std::ffi::CString;
use std::ffi::OsStr;
use std::ffi::OsString;
use std::fs;
use std::fs::File;
use std::fs::FileType;
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
#[cfg(unix)]
use std::os::unix::ffi::OsStrExt;
#[cfg(target_os = "wasi")]
use std::os::wasi::ffi::OsStrExt;
use std::path::Path;
use std::path::PathBuf;

use airlock_sdk::IoResultExt;
use airlock_sdk::ToolError;
use airlock_sdk::Workspace;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::Serialize;

/// Entries returned when the call does not say: a few screens for a model to read.
pub const DEFAULT_MAX_ENTRIES: usize = 500;

/// The most entries one call may ask for: 5,000 entries of about 80 bytes of JSON each
/// stay inside the output policy (`[output] max_bytes` in tool.toml), so a listing is
/// marked `truncated` by the tool rather than cut mid-document by the daemon.
pub const MAX_ENTRIES_LIMIT: usize = 5000;

/// Directories a recursive listing shows but does not descend into: version-control
/// internals would fill the listing with entries no model needs.
const NOT_DESCENDED: &[&str] = &[".git"];

/// Lists a workspace directory, sorted by name. Symlinks are reported, never followed.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDirArgs {
    /// Directory to list, relative to the workspace.
    #[serde(default = "default_path")]
    pub path: String,
    /// Also list the contents of subdirectories, depth first (`.git` is listed but not entered).
    #[serde(default)]
    pub recursive: bool,
    /// Most entries to return; the result says `truncated` when there were more.
    #[serde(default = "default_max_entries")]
    #[schemars(range(min = 1, max = MAX_ENTRIES_LIMIT))]
    pub max_entries: usize,
}

fn default_path() -> String {
    ".".to_owned()
}

fn default_max_entries() -> usize {
    DEFAULT_MAX_ENTRIES
}

#[derive(Debug, PartialEq, Eq, Serialize)]
pub struct ListDirOutput {
    /// The listed directory, relative to the workspace.
    pub path: String,
    pub entries: Vec<Entry>,
    /// More entries existed than `max_entries`.
    pub truncated: bool,
    /// Subdirectories that could not be read, with why; the rest of the listing is
    /// still complete.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

#[derive(Debug, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// Relative to the workspace, so it can be passed to another tool as it is.
    pub path: String,
    pub kind: Kind,
    /// Size in bytes, for files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Where a symlink points, as written in the link.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

impl Kind {
    fn of(file_type: FileType) -> Self {
        // `FileType` describes the entry itself (it comes from the directory entry or
        // `symlink_metadata`), so a symlink to a directory is a symlink here.
        if file_type.is_symlink() {
            Kind::Symlink
        } else if file_type.is_dir() {
            Kind::Dir
        } else if file_type.is_file() {
            Kind::File
        } else {
            Kind::Other
        }
    }
}

pub fn list_dir(workspace: &Workspace, args: &ListDirArgs) -> Result<ListDirOutput, ToolError> {
    if !(1..=MAX_ENTRIES_LIMIT).contains(&args.max_entries) {
        return Err(ToolError::new(format!(
            "max_entries must be between 1 and {MAX_ENTRIES_LIMIT}"
        )));
    }
    let root = workspace.resolve(&args.path)?;
    let metadata = fs::symlink_metadata(&root).with_path(&args.path)?;
    match Kind::of(metadata.file_type()) {
        Kind::Dir => {}
        Kind::Symlink => {
            return Err(ToolError::new(format!(
                "`{}` is a symlink; list_dir does not follow symlinks, list its target instead",
                args.path
            )));
        }
        Kind::File | Kind::Other => {
            return Err(ToolError::new(format!(
                "`{}` is not a directory; use read_file to read a file",
                args.path
            )));
        }
    }

    let top = read_sorted(&root, args.max_entries).with_path(&args.path)?;
    let mut output = ListDirOutput {
        path: workspace.display(&root),
        entries: Vec::new(),
        truncated: false,
        errors: Vec::new(),
    };
    // An explicit stack of sorted child lists gives a depth-first, pre-order walk
    // (each directory right before its contents) without recursion, whose depth a
    // deeply nested tree could otherwise push past the guest's small stack.
    let mut pending = vec![top.into_iter()];
    while let Some(children) = pending.last_mut() {
        let Some(child) = children.next() else {
            pending.pop();
            continue;
        };
        if output.entries.len() == args.max_entries {
            output.truncated = true;
            break;
        }
        let entry = describe(workspace, &child);
        let descend = args.recursive
            && entry.kind == Kind::Dir
            && !NOT_DESCENDED.iter().any(|name| child.name == *name);
        output.entries.push(entry);
        if descend {
            match read_sorted(&child.path, args.max_entries - output.entries.len()) {
                Ok(grandchildren) => pending.push(grandchildren.into_iter()),
                Err(err) => output.errors.push(
                    ToolError::io(&err, workspace.display(&child.path))
                        .message()
                        .to_owned(),
                ),
            }
        }
    }
    Ok(output)
}

struct Child {
    name: OsString,
    path: PathBuf,
    kind: Kind,
    /// A file's size, when it was looked up while its directory was open.
    size: Option<u64>,
}

/// Reads `dir`'s entries, sorted by name, with the size of each file among the first `sized`
/// entries: those the listing can still show.
fn read_sorted(dir: &Path, sized: usize) -> std::io::Result<Vec<Child>> {
    let mut children = fs::read_dir(dir)?
        .map(|entry| {
            let entry = entry?;
            Ok(Child {
                name: entry.file_name(),
                path: entry.path(),
                // The directory entry's own type: a symlink stays a symlink.
                kind: Kind::of(entry.file_type()?),
                size: None,
            })
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    children.sort_by(|a, b| a.name.cmp(&b.name));
    // Sizes are best effort (see `describe`): a directory that cannot be opened again
    // leaves them to `describe`.
    if sized > 0
        && let Ok(opened) = File::open(dir)
    {
        for child in children.iter_mut().take(sized) {
            if child.kind == Kind::File {
                child.size = size_at(&opened, &child.name);
            }
        }
    }
    Ok(children)
}

/// The size of the file `name` in directory `dir`, looked up by that one name relative to
/// the open directory, never following a symlink.
///
/// By the entry's path from the workspace, as `std` looks up a `DirEntry`'s metadata on
/// WASI, the runtime resolves every component of the path again, beneath the workspace, on
/// each lookup: for a file one directory down that is three system calls instead of one.
fn size_at(dir: &File, name: &OsStr) -> Option<u64> {
    let name = CString::new(name.as_bytes()).ok()?;
    let mut stat = MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `dir` is an open descriptor for the whole call, `name` is a NUL-terminated
    // string that outlives it, and `stat` is a buffer of the type `fstatat` fills.
    let found = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            stat.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if found != 0 {
        return None;
    }
    // SAFETY: `fstatat` succeeded, so it filled `stat`.
    let stat = unsafe { stat.assume_init() };
    u64::try_from(stat.st_size).ok()
}

/// Size and link target are best effort: the entry may vanish or change between
/// reading the directory and looking at it, which should not fail the listing.
fn describe(workspace: &Workspace, child: &Child) -> Entry {
    let size = match child.kind {
        Kind::File => child.size.or_else(|| {
            fs::symlink_metadata(&child.path)
                .ok()
                .map(|metadata| metadata.len())
        }),
        Kind::Dir | Kind::Symlink | Kind::Other => None,
    };
    let target = match child.kind {
        Kind::Symlink => fs::read_link(&child.path)
            .ok()
            .map(|target| target.to_string_lossy().into_owned()),
        Kind::File | Kind::Dir | Kind::Other => None,
    };
    Entry {
        path: workspace.display(&child.path),
        kind: child.kind,
        size,
        target,
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    struct Fixture {
        dir: tempfile::TempDir,
        workspace: Workspace,
    }

    impl Fixture {
        /// ```text
        /// .git/HEAD
        /// b.txt            (5 bytes)
        /// link -> sub
        /// sub/a.rs         (2 bytes)
        /// sub/deeper/z
        /// ```
        fn new() -> anyhow::Result<Self> {
            let dir = tempfile::tempdir()?;
            let root = dir.path();
            fs::create_dir_all(root.join(".git"))?;
            fs::write(root.join(".git/HEAD"), "ref")?;
            fs::write(root.join("b.txt"), "hello")?;
            fs::create_dir_all(root.join("sub/deeper"))?;
            fs::write(root.join("sub/a.rs"), "fn")?;
            fs::write(root.join("sub/deeper/z"), "")?;
            symlink("sub", root.join("link"))?;
            let workspace = Workspace::at(root);
            Ok(Self { dir, workspace })
        }

        fn list(
            &self,
            path: &str,
            recursive: bool,
            max_entries: usize,
        ) -> Result<ListDirOutput, ToolError> {
            list_dir(
                &self.workspace,
                &ListDirArgs {
                    path: path.to_owned(),
                    recursive,
                    max_entries,
                },
            )
        }
    }

    fn paths(output: &ListDirOutput) -> Vec<&str> {
        output
            .entries
            .iter()
            .map(|entry| entry.path.as_str())
            .collect()
    }

    fn message<T: std::fmt::Debug>(result: Result<T, ToolError>) -> String {
        match result {
            Ok(value) => panic!("expected an error, got {value:?}"),
            Err(err) => err.message().to_owned(),
        }
    }

    #[test]
    fn lists_one_level_sorted_with_kinds_and_sizes() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        let out = fixture.list(".", false, DEFAULT_MAX_ENTRIES)?;
        assert_eq!(out.path, ".");
        assert_eq!(
            out.entries,
            vec![
                Entry {
                    path: ".git".into(),
                    kind: Kind::Dir,
                    size: None,
                    target: None
                },
                Entry {
                    path: "b.txt".into(),
                    kind: Kind::File,
                    size: Some(5),
                    target: None
                },
                Entry {
                    path: "link".into(),
                    kind: Kind::Symlink,
                    size: None,
                    target: Some("sub".into())
                },
                Entry {
                    path: "sub".into(),
                    kind: Kind::Dir,
                    size: None,
                    target: None
                },
            ]
        );
        assert!(!out.truncated);
        Ok(())
    }

    #[test]
    fn recursive_is_depth_first_skips_git_and_never_follows_symlinks() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        let out = fixture.list(".", true, DEFAULT_MAX_ENTRIES)?;
        assert_eq!(
            paths(&out),
            [
                ".git",
                "b.txt",
                "link",
                "sub",
                "sub/a.rs",
                "sub/deeper",
                "sub/deeper/z"
            ]
        );
        Ok(())
    }

    #[test]
    fn every_file_has_its_size_looked_up_in_its_directory_or_by_path() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        let root = fixture.dir.path();
        fs::write(root.join("sub/deeper/z"), "1234567")?;
        // A name that is not UTF-8 is looked up by its bytes.
        fs::write(
            root.join("sub")
                .join(<OsStr as OsStrExt>::from_bytes(b"\xffodd")),
            "123",
        )?;
        let sizes = |out: &ListDirOutput| {
            out.entries
                .iter()
                .map(|entry| (entry.path.clone(), entry.size))
                .collect::<Vec<_>>()
        };
        let all = fixture.list(".", true, DEFAULT_MAX_ENTRIES)?;
        let expected = [
            (".git", None),
            ("b.txt", Some(5)),
            ("link", None),
            ("sub", None),
            ("sub/a.rs", Some(2)),
            ("sub/deeper", None),
            ("sub/deeper/z", Some(7)),
            ("sub/\u{fffd}odd", Some(3)),
        ]
        .map(|(path, size)| (path.to_owned(), size));
        assert_eq!(sizes(&all), expected);
        // Past a directory's first `sized` entries, `describe` looks each size up by path.
        let sub = read_sorted(&root.join("sub"), 1)?;
        assert_eq!(
            sub.iter().map(|child| child.size).collect::<Vec<_>>(),
            [Some(2), None, None]
        );
        let short = fixture.list(".", true, 7)?;
        assert_eq!(sizes(&short), expected[..7]);
        // Every size of a directory read whole comes from its open directory, the name that
        // is not UTF-8 included; a symlink's is its own (the length of its target), never
        // that of what it points to.
        let sub = read_sorted(&root.join("sub"), usize::MAX)?;
        assert_eq!(
            sub.iter().map(|child| child.size).collect::<Vec<_>>(),
            [Some(2), None, Some(3)]
        );
        let top = File::open(root)?;
        assert_eq!(size_at(&top, OsStr::new("link")), Some(3));
        assert_eq!(size_at(&top, OsStr::new("missing")), None);
        Ok(())
    }

    #[test]
    fn a_subdirectory_lists_with_workspace_relative_paths() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        let out = fixture.list("./sub", false, DEFAULT_MAX_ENTRIES)?;
        assert_eq!(out.path, "sub");
        assert_eq!(paths(&out), ["sub/a.rs", "sub/deeper"]);
        Ok(())
    }

    #[test]
    fn max_entries_truncates_exactly_at_its_edge() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        let exact = fixture.list(".", true, 7)?;
        assert_eq!(exact.entries.len(), 7);
        assert!(!exact.truncated);

        let short = fixture.list(".", true, 6)?;
        assert_eq!(short.entries.len(), 6);
        assert!(short.truncated);
        assert_eq!(short.entries[5].path, "sub/deeper");
        Ok(())
    }

    #[test]
    fn max_entries_outside_its_range_is_refused() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        assert!(fixture.list(".", false, MAX_ENTRIES_LIMIT).is_ok());
        for max in [0, MAX_ENTRIES_LIMIT + 1] {
            assert_eq!(
                message(fixture.list(".", false, max)),
                "max_entries must be between 1 and 5000"
            );
        }
        Ok(())
    }

    #[test]
    fn files_symlinks_and_missing_paths_are_explained() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        assert_eq!(
            message(fixture.list("b.txt", false, 10)),
            "`b.txt` is not a directory; use read_file to read a file"
        );
        assert!(message(fixture.list("link", false, 10)).contains("does not follow symlinks"));
        assert_eq!(
            message(fixture.list("missing", false, 10)),
            "no such file or directory: missing"
        );
        assert!(message(fixture.list("..", false, 10)).contains("climbs above"));
        Ok(())
    }

    #[test]
    fn an_unreadable_subdirectory_is_reported_not_fatal() -> anyhow::Result<()> {
        use std::os::unix::fs::PermissionsExt;

        let fixture = Fixture::new()?;
        let locked = fixture.dir.path().join("sub/deeper");
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o000))?;
        // Root reads any directory whatever its mode, so there is nothing to test then.
        let readable_anyway = fs::read_dir(&locked).is_ok();
        let out = fixture.list(".", true, DEFAULT_MAX_ENTRIES);
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o755))?;
        let out = out?;
        if readable_anyway {
            assert!(out.errors.is_empty());
        } else {
            assert_eq!(out.errors.len(), 1, "{:?}", out.errors);
            assert!(out.errors[0].starts_with("permission denied: sub/deeper"));
            assert!(paths(&out).contains(&"sub/deeper"));
        }
        Ok(())
    }
}
