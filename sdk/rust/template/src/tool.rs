//! What the tool does: counts lines, words and bytes of the workspace files matching a
//! pattern. Knows nothing of how it is called (main.rs, or lib.rs in the component
//! template); change this file to make the tool your own.

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The arguments, as schema.json describes them (the daemon has validated them already).
#[derive(Deserialize)]
pub struct Arguments {
    pub pattern: String,
    #[serde(default)]
    pub options: Options,
}

#[derive(Deserialize)]
#[serde(default)]
pub struct Options {
    pub max_files: u64,
    pub per_file: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_files: 100,
            per_file: true,
        }
    }
}

/// The result: serialized as the `ok` value.
#[derive(Serialize)]
pub struct Output {
    pub totals: Totals,
    pub truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<FileStats>>,
}

#[derive(Serialize, Default)]
pub struct Totals {
    pub files: u64,
    pub lines: u64,
    pub words: u64,
    pub bytes: u64,
}

#[derive(Serialize)]
pub struct FileStats {
    pub path: String,
    pub lines: u64,
    pub words: u64,
    pub bytes: u64,
}

/// Runs one call on the workspace at `root`. `Err` is the message of a tool error.
pub fn run(arguments: Arguments, root: &Path) -> Result<Output, String> {
    let mut found = Vec::new();
    walk(root, "", &mut found).map_err(|err| format!("cannot read the workspace: {err}"))?;
    found.retain(|path| matches(&arguments.pattern, path));
    found.sort(); // byte order
    if found.is_empty() {
        return Err(format!("no file matches {}", arguments.pattern));
    }
    let max_files = usize::try_from(arguments.options.max_files).unwrap_or(usize::MAX);
    let mut totals = Totals::default();
    let mut files = Vec::new();
    for path in found.iter().take(max_files) {
        let data = fs::read(root.join(path)).map_err(|err| format!("cannot read {path}: {err}"))?;
        let (lines, words, bytes) = count(&data);
        totals.files += 1;
        totals.lines += lines;
        totals.words += words;
        totals.bytes += bytes;
        files.push(FileStats {
            path: path.clone(),
            lines,
            words,
            bytes,
        });
    }
    Ok(Output {
        totals,
        truncated: found.len() > max_files,
        files: arguments.options.per_file.then_some(files),
    })
}

/// Collects the regular files below `root/prefix` as `/`-separated relative paths,
/// skipping every entry whose name starts with `.` and anything that is neither a file
/// nor a directory. A symlink to a file the sandbox can reach counts as that file; a
/// symlink to a directory is not followed (no loops); one that leads out of the
/// sandbox does not resolve and is skipped.
fn walk(root: &Path, prefix: &str, found: &mut Vec<String>) -> std::io::Result<()> {
    for entry in fs::read_dir(root.join(prefix))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = format!("{prefix}{name}");
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            if fs::metadata(root.join(&path)).is_ok_and(|target| target.is_file()) {
                found.push(path);
            }
        } else if kind.is_dir() {
            walk(root, &format!("{path}/"), found)?;
        } else if kind.is_file() {
            found.push(path);
        }
    }
    Ok(())
}

/// The whole of `path` matches `pattern`: `*` any run of characters (`/` included),
/// `?` exactly one, anything else itself.
fn matches(pattern: &str, path: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let path: Vec<char> = path.chars().collect();
    let (mut p, mut s) = (0, 0);
    // Where the last `*` was, and where in `path` the run it matches ends so far.
    let mut star: Option<(usize, usize)> = None;
    while s < path.len() {
        if p < pattern.len() && pattern[p] == '*' {
            star = Some((p, s));
            p += 1;
        } else if p < pattern.len() && (pattern[p] == '?' || pattern[p] == path[s]) {
            p += 1;
            s += 1;
        } else if let Some((star_p, star_s)) = star {
            // Let the last `*` swallow one more character and try again.
            p = star_p + 1;
            s = star_s + 1;
            star = Some((star_p, star_s + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

/// (lines, words, bytes) of a file's contents, read as bytes.
fn count(data: &[u8]) -> (u64, u64, u64) {
    let mut words = 0;
    let mut in_word = false;
    for &byte in data {
        if matches!(byte, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
            in_word = false;
        } else if !in_word {
            in_word = true;
            words += 1;
        }
    }
    let newlines = data.iter().filter(|&&byte| byte == b'\n').count() as u64;
    let lines = newlines + u64::from(!data.is_empty() && !data.ends_with(b"\n"));
    (lines, words, data.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(matches("*.txt", "docs/deep/nested.txt"));
        assert!(matches("docs/*", "docs/guide.md"));
        assert!(matches("docs/?uide.md", "docs/guide.md"));
        assert!(!matches("docs/?uide.md", "docs/uide.md"));
        assert!(matches("*", ""));
        assert!(matches("a*b*c", "aXbYbZc"));
        assert!(!matches("a*b*c", "aXbYbZ"));
        assert!(matches("?", "é"));
    }

    #[test]
    fn counts() {
        assert_eq!(count(b""), (0, 0, 0));
        assert_eq!(count(b"one two\r\nthree"), (2, 3, 14));
        assert_eq!(count(b"\n\n"), (2, 0, 2));
    }
}
