//! A task's workspace fixture: a directory, or a `.tar` / `.tar.gz` / `.tgz` archive, copied
//! afresh for every attempt so that no attempt sees another's changes.
//!
//! A fixture is data a suite author may have been handed, so it is checked before anything
//! is copied: archive entries with absolute paths or `..`, hard links that leave the archive,
//! devices and FIFOs, and symlinks that lead out of the tree (by their text, and again on disk
//! once copied, where a chain of links is resolved) are refused with the entry named. The
//! copy's symlinks are read by graders on this host: one leading out would make a grader read
//! (or a later copy write) outside the workspace.
//!
//! Sizes are bounded too, before anything is written: a fixture of more than
//! [`MAX_ENTRIES`] entries or [`MAX_BYTES`] bytes is refused (a small `.tar.gz` can declare
//! gigabytes, and every attempt copies the fixture again). Sparse archive entries are
//! refused: their apparent size is not what the archive holds.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;
use tar::EntryType;

use super::tree::{link_stays_inside, links_leaving, normalized};

/// The most entries a fixture may hold: a large repository's checkout has tens of thousands.
pub const MAX_ENTRIES: u64 = 200_000;
/// The most bytes a fixture's files may hold, counted as their sizes (what unpacking writes).
pub const MAX_BYTES: u64 = 1 << 30;

/// What a fixture has used of its bounds so far.
#[derive(Default)]
struct Budget {
    entries: u64,
    bytes: u64,
}

impl Budget {
    /// Counts one entry of `bytes`, refusing past a bound.
    fn take(&mut self, fixture: &Path, bytes: u64) -> Result<(), FixtureError> {
        self.entries += 1;
        self.bytes = self.bytes.saturating_add(bytes);
        if self.entries > MAX_ENTRIES || self.bytes > MAX_BYTES {
            return Err(FixtureError::Refused(format!(
                "{}: more than {MAX_ENTRIES} entries or {MAX_BYTES} bytes, the most a fixture may hold",
                fixture.display()
            )));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fixture {
    Dir(PathBuf),
    Archive { path: PathBuf, gzip: bool },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FixtureError {
    /// The fixture, or a file of it, cannot be read.
    #[error("{0}")]
    Unreadable(String),
    /// The fixture holds what a workspace must not: the message names the entry.
    #[error("{0}")]
    Refused(String),
}

impl Fixture {
    /// The fixture at `path`, after checking every entry of it.
    pub fn open(path: &Path) -> Result<Fixture, FixtureError> {
        let metadata = std::fs::metadata(path).map_err(|error| {
            FixtureError::Unreadable(format!("cannot read {}: {error}", path.display()))
        })?;
        let name = path.to_string_lossy();
        let fixture = if metadata.is_dir() {
            Fixture::Dir(path.to_owned())
        } else if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
            Fixture::Archive {
                path: path.to_owned(),
                gzip: true,
            }
        } else if name.ends_with(".tar") {
            Fixture::Archive {
                path: path.to_owned(),
                gzip: false,
            }
        } else {
            return Err(FixtureError::Refused(format!(
                "{} is neither a directory nor a .tar, .tar.gz or .tgz archive",
                path.display()
            )));
        };
        fixture.check()?;
        Ok(fixture)
    }

    pub fn path(&self) -> &Path {
        match self {
            Self::Dir(path) | Self::Archive { path, .. } => path,
        }
    }

    fn check(&self) -> Result<(), FixtureError> {
        match self {
            Self::Dir(dir) => {
                count_dir(dir, self.path(), &mut Budget::default())?;
                check_links(dir, self.path())
            }
            Self::Archive { .. } => self.walk_archive(None),
        }
    }

    /// Copies the fixture into `dest`, which must not exist yet (its parent is made).
    pub fn materialize(&self, dest: &Path) -> Result<(), FixtureError> {
        let cannot = |error: std::io::Error| {
            FixtureError::Unreadable(format!("cannot create {}: {error}", dest.display()))
        };
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(cannot)?;
        }
        std::fs::create_dir(dest).map_err(cannot)?;
        match self {
            Self::Dir(source) => copy_dir(source, dest)?,
            Self::Archive { .. } => self.walk_archive(Some(dest))?,
        }
        // Checked again on disk: a chain of links can leave what each link's text keeps in.
        check_links(dest, self.path())
    }

    /// Checks every entry of the archive, and unpacks each into `dest` when given.
    fn walk_archive(&self, dest: Option<&Path>) -> Result<(), FixtureError> {
        let Self::Archive { path, gzip } = self else {
            return Ok(());
        };
        let unreadable = |error: std::io::Error| {
            FixtureError::Unreadable(format!("cannot read {}: {error}", path.display()))
        };
        let file = File::open(path).map_err(unreadable)?;
        let reader: Box<dyn Read> = if *gzip {
            Box::new(GzDecoder::new(file))
        } else {
            Box::new(file)
        };
        let mut archive = tar::Archive::new(reader);
        archive.set_overwrite(true);
        let mut budget = Budget::default();
        for entry in archive.entries().map_err(unreadable)? {
            let mut entry = entry.map_err(unreadable)?;
            budget.take(path, entry.header().size().map_err(unreadable)?)?;
            let entry_path = entry.path().map_err(unreadable)?.into_owned();
            let link = entry
                .link_name()
                .map_err(unreadable)?
                .map(|link| link.into_owned());
            let kind = entry.header().entry_type();
            if !check_entry(&entry_path, kind, link.as_deref()).map_err(|reason| {
                FixtureError::Refused(format!(
                    "{}: entry {}: {reason}",
                    path.display(),
                    entry_path.display()
                ))
            })? {
                continue;
            }
            if let Some(dest) = dest {
                let unpacked = entry.unpack_in(dest).map_err(|error| {
                    FixtureError::Unreadable(format!(
                        "{}: cannot unpack {}: {error}",
                        path.display(),
                        entry_path.display()
                    ))
                })?;
                if !unpacked {
                    return Err(FixtureError::Refused(format!(
                        "{}: entry {} would land outside the workspace",
                        path.display(),
                        entry_path.display()
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Whether an archive entry may be unpacked (`true`), is metadata to skip (`false`), or is
/// refused (the reason).
fn check_entry(path: &Path, kind: EntryType, link: Option<&Path>) -> Result<bool, String> {
    match kind {
        // Extensions the reader applies to the entries that follow.
        EntryType::XHeader
        | EntryType::XGlobalHeader
        | EntryType::GNULongName
        | EntryType::GNULongLink => return Ok(false),
        EntryType::GNUSparse => {
            return Err("a sparse file (its size is not what the archive holds)".to_owned());
        }
        EntryType::Regular
        | EntryType::Continuous
        | EntryType::Directory
        | EntryType::Symlink
        | EntryType::Link => {}
        EntryType::Char | EntryType::Block | EntryType::Fifo => {
            return Err("devices and FIFOs have no place in a workspace".to_owned());
        }
        _ => return Err(format!("an entry of kind {kind:?} is not unpacked")),
    }
    if path.is_absolute() {
        return Err("an absolute path".to_owned());
    }
    if normalized(path).is_none() || path.components().any(|c| c.as_os_str() == "..") {
        return Err("a path with `..`".to_owned());
    }
    match (kind, link) {
        (EntryType::Symlink, Some(target)) if !link_stays_inside(path, target) => Err(format!(
            "a symlink to {}, outside the workspace",
            target.display()
        )),
        // A hard link names another entry of the archive, from the archive's root.
        (EntryType::Link, Some(target)) if target.is_absolute() || normalized(target).is_none() => {
            Err(format!(
                "a hard link to {}, outside the workspace",
                target.display()
            ))
        }
        (EntryType::Symlink | EntryType::Link, None) => Err("a link without a target".to_owned()),
        _ => Ok(true),
    }
}

fn check_links(root: &Path, fixture: &Path) -> Result<(), FixtureError> {
    let leaving = links_leaving(root).map_err(|error| {
        FixtureError::Unreadable(format!("cannot read {}: {error}", root.display()))
    })?;
    if leaving.is_empty() {
        return Ok(());
    }
    Err(FixtureError::Refused(format!(
        "{}: symlinks that lead outside the workspace: {}",
        fixture.display(),
        leaving.join(", ")
    )))
}

/// Counts the tree under `dir` against `budget` (symlinks are not followed).
fn count_dir(dir: &Path, fixture: &Path, budget: &mut Budget) -> Result<(), FixtureError> {
    let unreadable = |path: &Path, error: std::io::Error| {
        FixtureError::Unreadable(format!("{}: {error}", path.display()))
    };
    for entry in std::fs::read_dir(dir).map_err(|error| unreadable(dir, error))? {
        let entry = entry.map_err(|error| unreadable(dir, error))?;
        let meta = entry
            .metadata()
            .map_err(|error| unreadable(&entry.path(), error))?;
        budget.take(fixture, if meta.is_file() { meta.len() } else { 0 })?;
        if meta.is_dir() {
            count_dir(&entry.path(), fixture, budget)?;
        }
    }
    Ok(())
}

/// Copies the tree under `source` into the existing directory `dest`: files with their
/// permissions, directories, and symlinks as links.
fn copy_dir(source: &Path, dest: &Path) -> Result<(), FixtureError> {
    let unreadable = |path: &Path, error: std::io::Error| {
        FixtureError::Unreadable(format!("{}: {error}", path.display()))
    };
    for entry in std::fs::read_dir(source).map_err(|error| unreadable(source, error))? {
        let entry = entry.map_err(|error| unreadable(source, error))?;
        let from = entry.path();
        let to = dest.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(|error| unreadable(&from, error))?;
        if kind.is_dir() {
            std::fs::create_dir(&to).map_err(|error| unreadable(&to, error))?;
            copy_dir(&from, &to)?;
        } else if kind.is_file() {
            std::fs::copy(&from, &to).map_err(|error| unreadable(&from, error))?;
        } else if kind.is_symlink() {
            let target = std::fs::read_link(&from).map_err(|error| unreadable(&from, error))?;
            std::os::unix::fs::symlink(&target, &to).map_err(|error| unreadable(&to, error))?;
        } else {
            return Err(FixtureError::Refused(format!(
                "{}: not a file, directory or symlink",
                from.display()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// A tar archive with one entry whose raw name is `name` (written into the header as is,
    /// so that `..` and absolute paths the `tar` builder refuses can be made).
    fn archive_with(
        dir: &Path,
        file: &str,
        name: &str,
        kind: EntryType,
        link: &str,
    ) -> anyhow::Result<PathBuf> {
        let mut header = tar::Header::new_gnu();
        {
            let raw = header.as_old_mut();
            raw.name[..name.len()].copy_from_slice(name.as_bytes());
            raw.linkname[..link.len()].copy_from_slice(link.as_bytes());
        }
        header.set_entry_type(kind);
        header.set_mode(0o644);
        let content: &[u8] = if kind == EntryType::Regular {
            b"hello\n"
        } else {
            b""
        };
        header.set_size(content.len() as u64);
        header.set_cksum();
        let path = dir.join(file);
        let mut builder = tar::Builder::new(File::create(&path)?);
        builder.append(&header, content)?;
        builder.into_inner()?.flush()?;
        Ok(path)
    }

    #[test]
    fn a_directory_is_copied_with_its_links() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let source = dir.path().join("calc");
        std::fs::create_dir_all(source.join("src"))?;
        std::fs::write(source.join("src/calc.py"), "def mean(): pass\n")?;
        std::os::unix::fs::symlink("src/calc.py", source.join("link.py"))?;
        let fixture = Fixture::open(&source)?;
        let dest = dir.path().join("copies/one");
        fixture.materialize(&dest)?;
        assert_eq!(
            std::fs::read_to_string(dest.join("src/calc.py"))?,
            "def mean(): pass\n"
        );
        assert_eq!(
            std::fs::read_link(dest.join("link.py"))?,
            Path::new("src/calc.py")
        );
        // A second copy into the same place is refused rather than mixed with the first.
        assert!(fixture.materialize(&dest).is_err());
        Ok(())
    }

    #[test]
    fn a_directory_with_a_link_out_is_refused() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let source = dir.path().join("ws");
        std::fs::create_dir(&source)?;
        std::os::unix::fs::symlink("/etc/passwd", source.join("passwd"))?;
        let Err(error) = Fixture::open(&source) else {
            panic!("a link out of the fixture was accepted");
        };
        assert!(matches!(error, FixtureError::Refused(_)), "{error:?}");
        assert!(
            error.to_string().contains("passwd -> /etc/passwd"),
            "{error}"
        );
        Ok(())
    }

    #[test]
    fn archives_are_unpacked_plain_and_gzipped() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let source = dir.path().join("src");
        std::fs::create_dir_all(source.join("pkg"))?;
        std::fs::write(source.join("pkg/a.txt"), "alpha")?;
        let tar_path = dir.path().join("ws.tar");
        let mut builder = tar::Builder::new(File::create(&tar_path)?);
        builder.append_dir_all(".", &source)?;
        builder.into_inner()?.flush()?;
        let gz_path = dir.path().join("ws.tgz");
        let mut encoder =
            flate2::write::GzEncoder::new(File::create(&gz_path)?, flate2::Compression::fast());
        encoder.write_all(&std::fs::read(&tar_path)?)?;
        encoder.finish()?;
        for (archive, gzip) in [(&tar_path, false), (&gz_path, true)] {
            let fixture = Fixture::open(archive)?;
            assert_eq!(
                fixture,
                Fixture::Archive {
                    path: archive.clone(),
                    gzip
                }
            );
            let dest = dir.path().join(format!("out-{gzip}"));
            fixture.materialize(&dest)?;
            assert_eq!(std::fs::read_to_string(dest.join("pkg/a.txt"))?, "alpha");
        }
        Ok(())
    }

    #[test]
    fn archive_entries_that_leave_the_workspace_are_refused() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let cases = [
            (
                "dotdot.tar",
                "../evil.txt",
                EntryType::Regular,
                "",
                "a path with `..`",
            ),
            (
                "inner.tar",
                "a/../../evil.txt",
                EntryType::Regular,
                "",
                "a path with `..`",
            ),
            (
                "abs.tar",
                "/tmp/evil.txt",
                EntryType::Regular,
                "",
                "an absolute path",
            ),
            (
                "link.tar",
                "link",
                EntryType::Symlink,
                "../../etc/passwd",
                "outside the workspace",
            ),
            (
                "abslink.tar",
                "link",
                EntryType::Symlink,
                "/etc/passwd",
                "outside the workspace",
            ),
            (
                "hard.tar",
                "hard",
                EntryType::Link,
                "../x",
                "outside the workspace",
            ),
            ("fifo.tar", "pipe", EntryType::Fifo, "", "FIFOs"),
        ];
        for (file, name, kind, link, expected) in cases {
            let path = archive_with(dir.path(), file, name, kind, link)?;
            let Err(error) = Fixture::open(&path) else {
                panic!("{file}: an entry {name} was accepted");
            };
            assert!(
                matches!(error, FixtureError::Refused(_)),
                "{file}: {error:?}"
            );
            assert!(error.to_string().contains(expected), "{file}: {error}");
            assert!(error.to_string().contains(name), "{file}: {error}");
        }
        // Nothing was written next to the archives.
        assert!(!dir.path().join("evil.txt").exists());
        // A safe entry of the same making passes.
        let fine = archive_with(
            dir.path(),
            "fine.tar",
            "ok/file.txt",
            EntryType::Regular,
            "",
        )?;
        let dest = dir.path().join("fine-out");
        Fixture::open(&fine)?.materialize(&dest)?;
        assert_eq!(
            std::fs::read_to_string(dest.join("ok/file.txt"))?,
            "hello\n"
        );
        Ok(())
    }

    #[test]
    fn a_fixture_past_its_bounds_is_refused_before_anything_is_written() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        // A .tar.gz whose one header declares more than MAX_BYTES: refused on the header,
        // before its content (absent here) would be read or written.
        let path = dir.path().join("bomb.tar.gz");
        let mut header = tar::Header::new_gnu();
        header.set_path("big")?;
        header.set_size(MAX_BYTES + 1);
        header.set_mode(0o644);
        header.set_cksum();
        let mut gz =
            flate2::write::GzEncoder::new(File::create(&path)?, flate2::Compression::fast());
        gz.write_all(header.as_bytes())?;
        gz.finish()?;
        let err = Fixture::open(&path).expect_err("refused");
        assert!(
            err.to_string().contains("the most a fixture may hold"),
            "{err}"
        );

        // A sparse entry is refused for what it would become.
        let sparse = archive_with(dir.path(), "sparse.tar", "hole", EntryType::GNUSparse, "")?;
        let err = Fixture::open(&sparse).expect_err("refused");
        assert!(err.to_string().contains("sparse"), "{err}");
        Ok(())
    }

    #[test]
    fn other_files_and_missing_paths_are_named() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let zip = dir.path().join("ws.zip");
        std::fs::write(&zip, "PK")?;
        let Err(error) = Fixture::open(&zip) else {
            panic!("a zip was accepted");
        };
        assert!(
            error.to_string().contains("neither a directory nor"),
            "{error}"
        );
        let Err(error) = Fixture::open(&dir.path().join("missing")) else {
            panic!("a missing fixture was accepted");
        };
        assert!(matches!(error, FixtureError::Unreadable(_)), "{error:?}");
        Ok(())
    }
}
