//! What one condition of a rule compares: a string against an exact value, a glob, a prefix
//! or a regex; an argument found by JSON pointer; a workspace path after normalisation; a
//! command's words against a rule's prefix.
//!
//! A path is judged where the tool will find it, not as it is spelled: `src/../secrets` is
//! `secrets`, an absolute path inside the workspace is the same file as its relative
//! spelling, and a symlink inside the workspace is followed (within [`MAX_SYMLINK_HOPS`]) so
//! that `src/link` pointing at `../secrets` is judged as `secrets`. A path that leaves the
//! workspace, or that cannot be followed, matches no path pattern — so it is never allowed by
//! one, and is caught by a negated one.

use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use regex::{Regex, RegexBuilder};
use serde_json::Value;

use super::shell::{SimpleCommand, Word};

/// Symlinks followed while normalising one path: the kernel's own limit (`MAXSYMLINKS`).
pub const MAX_SYMLINK_HOPS: usize = 40;

/// The compiled size a rule's regex may reach: enough for any hand-written pattern, and a
/// bound on what a client's rule can make the daemon build.
const MAX_REGEX_BYTES: usize = 256 * 1024;

/// How a string is compared.
#[derive(Debug, Clone)]
pub enum StrMatch {
    Exact(String),
    Prefix(String),
    Glob { pattern: String, glob: GlobMatcher },
    Regex(Regex),
}

impl StrMatch {
    /// A glob over a name or path: `*` stops at `/`, `**` crosses it.
    pub fn glob(pattern: &str) -> Result<StrMatch, String> {
        StrMatch::glob_with(pattern, true)
    }

    /// A glob over one word of a command: `*` matches `/` too (`-o/tmp/x`).
    pub fn word_glob(pattern: &str) -> Result<StrMatch, String> {
        StrMatch::glob_with(pattern, false)
    }

    fn glob_with(pattern: &str, literal_separator: bool) -> Result<StrMatch, String> {
        let glob = GlobBuilder::new(pattern)
            .literal_separator(literal_separator)
            .backslash_escape(true)
            .build()
            .map_err(|err| format!("invalid glob `{pattern}`: {err}"))?
            .compile_matcher();
        Ok(StrMatch::Glob {
            pattern: pattern.to_owned(),
            glob,
        })
    }

    pub fn regex(pattern: &str) -> Result<StrMatch, String> {
        RegexBuilder::new(pattern)
            .size_limit(MAX_REGEX_BYTES)
            .build()
            .map(StrMatch::Regex)
            .map_err(|err| format!("invalid regex `{pattern}`: {err}"))
    }

    pub fn is_match(&self, text: &str) -> bool {
        match self {
            StrMatch::Exact(value) => text == value,
            StrMatch::Prefix(prefix) => text.starts_with(prefix.as_str()),
            StrMatch::Glob { glob, .. } => glob.is_match(text),
            StrMatch::Regex(regex) => regex.is_match(text),
        }
    }
}

/// One condition on the call's arguments.
#[derive(Debug, Clone)]
pub struct ArgCondition {
    /// RFC 6901 pointer into the arguments (`/path`, `/options/0`).
    pub pointer: String,
    pub test: ArgTest,
    /// Holds when the test does not (including when the value is missing or unresolvable).
    pub negated: bool,
}

#[derive(Debug, Clone)]
pub enum ArgTest {
    /// The value as text (a string as it is; a number or a boolean as JSON writes it).
    Text(StrMatch),
    /// The value as a workspace path, normalised, against a glob relative to the workspace.
    Path(StrMatch),
}

impl ArgCondition {
    pub fn holds(&self, arguments: &Value, workspace: Option<&Path>) -> bool {
        let value = arguments.pointer(&self.pointer);
        let matched = match (&self.test, value) {
            (_, None | Some(Value::Null | Value::Array(_) | Value::Object(_))) => false,
            (ArgTest::Text(test), Some(Value::String(text))) => test.is_match(text),
            (ArgTest::Text(test), Some(other)) => test.is_match(&other.to_string()),
            (ArgTest::Path(test), Some(Value::String(path))) => match normalize(workspace, path) {
                Normalized::Inside(relative) => test.is_match(&relative),
                Normalized::Outside | Normalized::Unresolvable => false,
            },
            (ArgTest::Path(_), Some(_)) => false,
        };
        matched != self.negated
    }
}

/// Where a path argument lands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Normalized {
    /// Inside the workspace, relative to its root (`""` is the root).
    Inside(String),
    Outside,
    /// Its symlinks could not be followed (a loop, too many, unreadable).
    Unresolvable,
}

/// Normalises `path` as a tool given it would find it: relative to the workspace root,
/// `..` and `.` resolved, symlinks inside the workspace followed. Without a workspace (an
/// example checked at load) the walk is lexical only.
pub fn normalize(workspace: Option<&Path>, path: &str) -> Normalized {
    if path.contains('\0') {
        return Normalized::Unresolvable;
    }
    let path = Path::new(path);
    let relative = if path.is_absolute() {
        match workspace.and_then(|root| path.strip_prefix(root).ok()) {
            Some(inside) => inside.to_path_buf(),
            None => return Normalized::Outside,
        }
    } else {
        path.to_path_buf()
    };
    let mut pending: Vec<PathBuf> = relative
        .components()
        .rev()
        .map(|component| PathBuf::from(component.as_os_str()))
        .collect();
    let mut resolved: Vec<String> = Vec::new();
    let mut hops = 0;
    while let Some(next) = pending.pop() {
        match next.components().next() {
            None | Some(Component::CurDir) => continue,
            Some(Component::ParentDir) => {
                if resolved.pop().is_none() {
                    return Normalized::Outside;
                }
                continue;
            }
            Some(Component::RootDir | Component::Prefix(_)) => return Normalized::Outside,
            Some(Component::Normal(name)) => {
                let Some(name) = name.to_str() else {
                    return Normalized::Unresolvable;
                };
                resolved.push(name.to_owned());
            }
        }
        let Some(root) = workspace else { continue };
        let here = root.join(resolved.join("/"));
        let Ok(meta) = std::fs::symlink_metadata(&here) else {
            // What does not exist yet is where it is spelled.
            continue;
        };
        if !meta.file_type().is_symlink() {
            continue;
        }
        hops += 1;
        if hops > MAX_SYMLINK_HOPS {
            return Normalized::Unresolvable;
        }
        let Ok(target) = std::fs::read_link(&here) else {
            return Normalized::Unresolvable;
        };
        resolved.pop();
        if target.is_absolute() {
            match target.strip_prefix(root) {
                Ok(inside) => {
                    resolved.clear();
                    push_reversed(&mut pending, inside);
                }
                Err(_) => return Normalized::Outside,
            }
        } else {
            push_reversed(&mut pending, &target);
        }
    }
    Normalized::Inside(resolved.join("/"))
}

fn push_reversed(pending: &mut Vec<PathBuf>, path: &Path) {
    for component in path.components().rev() {
        pending.push(PathBuf::from(component.as_os_str()));
    }
}

/// One position of a command prefix: a word, any of several, or any word at all (`*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WordPattern {
    Any,
    OneOf(Vec<String>),
}

impl WordPattern {
    fn matches(&self, word: &str) -> bool {
        match self {
            WordPattern::Any => true,
            WordPattern::OneOf(words) => words.iter().any(|candidate| candidate == word),
        }
    }

    /// The program names a first position stands for (none for `*`).
    pub fn names(&self) -> Option<&[String]> {
        match self {
            WordPattern::Any => None,
            WordPattern::OneOf(words) => Some(words),
        }
    }
}

/// How a command's words meet a prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefixMatch {
    Yes,
    /// A word the prefix names is not known before the line runs: it may match.
    Maybe,
    No,
}

/// Matches the command's program (by its last path component) and the words after it.
pub fn prefix_match(prefix: &[WordPattern], command: &SimpleCommand) -> PrefixMatch {
    let mut result = PrefixMatch::Yes;
    for (index, pattern) in prefix.iter().enumerate() {
        let word = match command.argv.get(index) {
            Some(Word::Known(word)) if index == 0 => Some(word.rsplit('/').next().unwrap_or(word)),
            Some(Word::Known(word)) => Some(word.as_str()),
            Some(Word::Unknown) => None,
            // A command with fewer words: more may come at run time only from an open tail.
            None if command.open_tail => return PrefixMatch::Maybe.min_with(result),
            None => return PrefixMatch::No,
        };
        match word {
            Some(word) if pattern.matches(word) => {}
            Some(_) => return PrefixMatch::No,
            None if *pattern == WordPattern::Any => {}
            None => result = PrefixMatch::Maybe,
        }
    }
    result
}

/// Whether each group of globs is met by some word after the program: `Maybe` when a group
/// is met by none of the known words but a word (or the open tail) is not known.
pub fn words_match(groups: &[Vec<StrMatch>], command: &SimpleCommand) -> PrefixMatch {
    let words = command.argv.get(1..).unwrap_or_default();
    let unknown = command.open_tail || words.contains(&Word::Unknown);
    let mut result = PrefixMatch::Yes;
    for group in groups {
        let met = words.iter().any(|word| {
            word.known()
                .is_some_and(|word| group.iter().any(|glob| glob.is_match(word)))
        });
        if met {
            continue;
        }
        if !unknown {
            return PrefixMatch::No;
        }
        result = PrefixMatch::Maybe;
    }
    result
}

impl PrefixMatch {
    pub fn min_with(self, other: PrefixMatch) -> PrefixMatch {
        match (self, other) {
            (PrefixMatch::No, _) | (_, PrefixMatch::No) => PrefixMatch::No,
            (PrefixMatch::Maybe, _) | (_, PrefixMatch::Maybe) => PrefixMatch::Maybe,
            (PrefixMatch::Yes, PrefixMatch::Yes) => PrefixMatch::Yes,
        }
    }
}

/// The directories a program named by absolute path may be in and still be the program a
/// rule names: `/usr/bin/git` is `git`, `/tmp/x/git` or `./git` is something else.
const SYSTEM_BIN_DIRS: &[&str] = &[
    "/bin",
    "/usr/bin",
    "/usr/local/bin",
    "/sbin",
    "/usr/sbin",
    "/usr/local/sbin",
];

/// Whether the command's program is the one its name says: a bare name (found on the
/// sandbox's `PATH`) or a path in a system directory. A rule may only allow such a program.
pub fn program_is_named(command: &SimpleCommand) -> bool {
    let Some(Word::Known(first)) = command.argv.first() else {
        return false;
    };
    match first.rsplit_once('/') {
        None => !first.is_empty(),
        Some((dir, name)) => !name.is_empty() && SYSTEM_BIN_DIRS.contains(&dir),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_normalisation_resolves_dots_and_refuses_escapes() {
        let cases = [
            ("src/main.rs", Normalized::Inside("src/main.rs".into())),
            ("./src//a/../b.rs", Normalized::Inside("src/b.rs".into())),
            ("src/../secrets", Normalized::Inside("secrets".into())),
            ("src/../../etc/passwd", Normalized::Outside),
            ("..", Normalized::Outside),
            ("/etc/passwd", Normalized::Outside),
            (".", Normalized::Inside(String::new())),
            ("a\0b", Normalized::Unresolvable),
        ];
        for (path, expected) in cases {
            assert_eq!(normalize(None, path), expected, "{path}");
        }
    }

    #[test]
    fn symlinks_inside_the_workspace_are_followed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::create_dir_all(root.join("src")).expect("mkdir");
        std::fs::create_dir_all(root.join("secrets")).expect("mkdir");
        std::os::unix::fs::symlink("../secrets", root.join("src/link")).expect("link");
        std::os::unix::fs::symlink("/etc", root.join("src/etc")).expect("link");
        std::os::unix::fs::symlink(root.join("secrets"), root.join("src/abs")).expect("link");
        std::os::unix::fs::symlink("loop", root.join("src/loop")).expect("link");
        let abs = root.join("src/a.rs");
        let abs = abs.to_str().expect("utf-8");
        let cases = [
            ("src/link/key", Normalized::Inside("secrets/key".into())),
            ("src/etc/passwd", Normalized::Outside),
            ("src/abs/key", Normalized::Inside("secrets/key".into())),
            ("src/loop/x", Normalized::Unresolvable),
            (
                "src/new/file.rs",
                Normalized::Inside("src/new/file.rs".into()),
            ),
            (abs, Normalized::Inside("src/a.rs".into())),
        ];
        for (path, expected) in cases {
            assert_eq!(normalize(Some(root), path), expected, "{path}");
        }
    }
}
