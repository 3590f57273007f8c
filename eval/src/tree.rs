//! A directory tree read into memory, and the difference between two: what `tree_equals`
//! compares and what a fixture's symlinks are checked against. Symlinks are read as links,
//! never followed, so that reading a workspace never leaves it.

use std::collections::BTreeMap;
use std::io;
use std::path::{Component, Path, PathBuf};

/// One entry of a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Dir,
    File(Vec<u8>),
    Symlink(PathBuf),
    /// A FIFO, socket or device: compared by kind only.
    Other,
}

/// Every entry under a root, by its path relative to the root with `/` between components.
pub type Tree = BTreeMap<String, Entry>;

/// Reads the tree under `root` (which itself is not an entry).
pub fn read(root: &Path) -> io::Result<Tree> {
    let mut tree = Tree::new();
    read_into(root, "", &mut tree)?;
    Ok(tree)
}

fn read_into(dir: &Path, prefix: &str, tree: &mut Tree) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let relative = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let kind = entry.file_type()?;
        if kind.is_dir() {
            tree.insert(relative.clone(), Entry::Dir);
            read_into(&entry.path(), &relative, tree)?;
        } else if kind.is_file() {
            tree.insert(relative, Entry::File(std::fs::read(entry.path())?));
        } else if kind.is_symlink() {
            tree.insert(relative, Entry::Symlink(std::fs::read_link(entry.path())?));
        } else {
            tree.insert(relative, Entry::Other);
        }
    }
    Ok(())
}

/// What differs between an expected tree and the actual one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Difference {
    /// In the actual tree only.
    pub added: Vec<String>,
    /// In the expected tree only.
    pub removed: Vec<String>,
    /// In both, with other content or of another kind.
    pub changed: Vec<String>,
}

impl Difference {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }

    /// `added: a, b; removed: c; changed: d`, each list cut after `max` paths.
    pub fn describe(&self, max: usize) -> String {
        let mut parts = Vec::new();
        for (name, paths) in [
            ("added", &self.added),
            ("removed", &self.removed),
            ("changed", &self.changed),
        ] {
            if paths.is_empty() {
                continue;
            }
            let mut shown: Vec<&str> = paths.iter().take(max).map(String::as_str).collect();
            let more = paths.len().saturating_sub(max);
            let more = format!("… and {more} more");
            if paths.len() > max {
                shown.push(&more);
            }
            parts.push(format!("{name}: {}", shown.join(", ")));
        }
        parts.join("; ")
    }
}

pub fn diff(expected: &Tree, actual: &Tree) -> Difference {
    let mut difference = Difference::default();
    for (path, entry) in expected {
        match actual.get(path) {
            None => difference.removed.push(path.clone()),
            Some(other) if other != entry => difference.changed.push(path.clone()),
            Some(_) => {}
        }
    }
    difference.added = actual
        .keys()
        .filter(|path| !expected.contains_key(*path))
        .cloned()
        .collect();
    difference
}

/// Where a relative `path` lies once `..` and `.` are applied, as components; `None` when
/// it is absolute or climbs above its root.
pub fn normalized(path: &Path) -> Option<Vec<String>> {
    let mut parts: Vec<String> = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts)
}

/// Whether a symlink at `link` (relative to a tree's root) whose target is `target` points
/// inside the tree, as far as the text of the target tells.
pub fn link_stays_inside(link: &Path, target: &Path) -> bool {
    let parent = link.parent().unwrap_or(Path::new(""));
    normalized(&parent.join(target)).is_some() && !target.is_absolute()
}

/// Every symlink under `root` that resolves to a place outside it: the check that holds for
/// chains of links too, which [`link_stays_inside`] cannot see. A dangling link is judged by
/// its text alone.
pub fn links_leaving(root: &Path) -> io::Result<Vec<String>> {
    let root = std::fs::canonicalize(root)?;
    let tree = read(&root)?;
    let mut leaving = Vec::new();
    for (path, entry) in &tree {
        let Entry::Symlink(target) = entry else {
            continue;
        };
        let inside = match std::fs::canonicalize(root.join(path)) {
            Ok(resolved) => resolved.starts_with(&root),
            Err(_) => link_stays_inside(Path::new(path), target),
        };
        if !inside {
            leaving.push(format!("{path} -> {}", target.display()));
        }
    }
    Ok(leaving)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_trees_differ_by_added_removed_and_changed_paths() -> anyhow::Result<()> {
        let expected_dir = tempfile::tempdir()?;
        let actual_dir = tempfile::tempdir()?;
        for dir in [expected_dir.path(), actual_dir.path()] {
            std::fs::create_dir(dir.join("src"))?;
            std::fs::write(dir.join("src/same.py"), "x = 1\n")?;
        }
        std::fs::write(expected_dir.path().join("src/calc.py"), "return 1\n")?;
        std::fs::write(actual_dir.path().join("src/calc.py"), "return 2\n")?;
        std::fs::write(expected_dir.path().join("gone.txt"), "")?;
        std::fs::write(actual_dir.path().join("new.txt"), "")?;
        let difference = diff(&read(expected_dir.path())?, &read(actual_dir.path())?);
        assert_eq!(difference.added, ["new.txt"]);
        assert_eq!(difference.removed, ["gone.txt"]);
        assert_eq!(difference.changed, ["src/calc.py"]);
        assert_eq!(
            difference.describe(5),
            "added: new.txt; removed: gone.txt; changed: src/calc.py"
        );
        let same = diff(&read(expected_dir.path())?, &read(expected_dir.path())?);
        assert!(same.is_empty());
        Ok(())
    }

    #[test]
    fn links_are_judged_by_where_they_lead() -> anyhow::Result<()> {
        assert!(link_stays_inside(Path::new("a/link"), Path::new("../b")));
        assert!(!link_stays_inside(
            Path::new("a/link"),
            Path::new("../../b")
        ));
        assert!(!link_stays_inside(
            Path::new("link"),
            Path::new("/etc/passwd")
        ));

        let outer = tempfile::tempdir()?;
        let root = outer.path().join("root");
        std::fs::create_dir_all(root.join("sub"))?;
        std::fs::write(outer.path().join("escape-target"), "")?;
        std::os::unix::fs::symlink("sub", root.join("fine"))?;
        // Each text stays inside, but the chain leaves: `up` is the root, so `up/..` is not.
        std::os::unix::fs::symlink(".", root.join("up"))?;
        std::os::unix::fs::symlink("up/../escape-target", root.join("sneaky"))?;
        let leaving = links_leaving(&root)?;
        assert!(
            leaving.iter().any(|link| link.starts_with("sneaky")),
            "{leaving:?}"
        );
        assert!(!leaving.iter().any(|link| link.starts_with("fine")));
        Ok(())
    }
}
