//! Walks the files under a path in sorted order and reports the lines a regex matches.

use std::ffi::OsString;
use std::fs;
use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::path::PathBuf;

use airlock_sdk::IoResultExt;
use airlock_sdk::ToolError;
use airlock_sdk::Workspace;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::Serialize;

use crate::excerpt::excerpt;
use crate::glob::Glob;
use crate::lines::Lines;

/// Matches returned when the call does not say.
pub const DEFAULT_MAX_MATCHES: usize = 100;

/// The most matches one call may ask for: 1,000 matches of at most ~400 bytes of JSON
/// each stay inside the output policy (`[output] max_bytes` in tool.toml), so a search is
/// marked `truncated` by the tool rather than cut mid-document by the daemon.
pub const MAX_MATCHES_LIMIT: usize = 1000;

/// Files larger than this (8 MiB) are skipped: each file is read whole into the guest's
/// memory, and files that large are generated data or logs, not what a search of a
/// workspace is for.
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// At most this many unreadable files or directories are named in a result; past that
/// they are only counted, so a tree of unreadable entries cannot flood the output.
const MAX_REPORTED_ERRORS: usize = 20;

/// Directories never searched: version-control internals match everything and help
/// nobody.
const NOT_DESCENDED: &[&str] = &[".git"];

/// Searches the text files under a path for lines matching a regular expression. Binary files, files over 8 MiB and `.git` are skipped; symlinks are never followed.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// Regular expression (Rust `regex` syntax), matched against each line separately.
    pub pattern: String,
    /// File or directory to search, relative to the workspace.
    #[serde(default = "default_path")]
    pub path: String,
    /// Match letters regardless of case.
    #[serde(default)]
    pub case_insensitive: bool,
    /// Most matches to return; the result says `truncated` when there were more.
    #[serde(default = "default_max_matches")]
    #[schemars(range(min = 1, max = MAX_MATCHES_LIMIT))]
    pub max_matches: usize,
    /// Only search files whose name matches this glob: `*` is any run of characters, `?` one character (`*.rs`, `test_?.py`).
    #[serde(default)]
    pub glob: Option<String>,
}

fn default_path() -> String {
    ".".to_owned()
}

fn default_max_matches() -> usize {
    DEFAULT_MAX_MATCHES
}

#[derive(Debug, PartialEq, Eq, Serialize)]
pub struct GrepOutput {
    pub matches: Vec<Match>,
    /// More matching lines existed than `max_matches`; the search stopped there.
    pub truncated: bool,
    /// Files whose contents were searched.
    pub files_searched: u64,
    /// Files skipped because they contain a NUL byte.
    pub files_skipped_binary: u64,
    /// Files skipped because they are over the 8 MiB limit.
    pub files_skipped_too_large: u64,
    /// Files or directories that could not be read, with why (at most 20 are named).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

#[derive(Debug, PartialEq, Eq, Serialize)]
pub struct Match {
    /// Relative to the workspace.
    pub path: String,
    /// Counting from 1.
    pub line_number: u64,
    /// The line without its line ending; a line over 300 bytes is cut around the match,
    /// with `…` where it was cut.
    pub line: String,
}

pub fn grep(workspace: &Workspace, args: &GrepArgs) -> Result<GrepOutput, ToolError> {
    if !(1..=MAX_MATCHES_LIMIT).contains(&args.max_matches) {
        return Err(ToolError::new(format!(
            "max_matches must be between 1 and {MAX_MATCHES_LIMIT}"
        )));
    }
    let regex = Lines::new(&args.pattern, args.case_insensitive)
        .map_err(|err| ToolError::new(format!("invalid regular expression: {err}")))?;
    let glob = args.glob.as_deref().map(Glob::new).transpose()?;
    let root = workspace.resolve(&args.path)?;
    let metadata = fs::symlink_metadata(&root).with_path(&args.path)?;

    let mut search = Search {
        workspace,
        regex,
        max_matches: args.max_matches,
        output: GrepOutput {
            matches: Vec::new(),
            truncated: false,
            files_searched: 0,
            files_skipped_binary: 0,
            files_skipped_too_large: 0,
            errors: Vec::new(),
        },
        unreported_errors: 0,
    };
    let file_type = metadata.file_type();
    if file_type.is_symlink() {
        return Err(ToolError::new(format!(
            "`{}` is a symlink; grep does not follow symlinks, search its target instead",
            args.path
        )));
    } else if file_type.is_dir() {
        search.tree(&root, glob.as_ref())?;
    } else if file_type.is_file() {
        // A file named explicitly is searched whatever the glob says.
        search.file(&root, metadata.len());
    } else {
        return Err(ToolError::new(format!(
            "`{}` is neither a file nor a directory",
            args.path
        )));
    }
    Ok(search.finish())
}

struct Search<'a> {
    workspace: &'a Workspace,
    regex: Lines,
    max_matches: usize,
    output: GrepOutput,
    unreported_errors: u64,
}

/// Whether the walk goes on after a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Stop,
}

struct Child {
    name: OsString,
    path: PathBuf,
    file_type: fs::FileType,
}

impl Search<'_> {
    /// Searches every file under `root`, depth first in name order, so the same tree
    /// gives the same matches in the same order, and a truncated result is a prefix of
    /// the full one.
    fn tree(&mut self, root: &Path, glob: Option<&Glob>) -> Result<(), ToolError> {
        let top = read_sorted(root).with_path(self.workspace.display(root))?;
        // An explicit stack rather than recursion: the guest's stack is small and a
        // tree can be deep.
        let mut pending = vec![top.into_iter()];
        while let Some(children) = pending.last_mut() {
            let Some(child) = children.next() else {
                pending.pop();
                continue;
            };
            // `file_type` comes from the directory entry: a symlink is a symlink here,
            // and is skipped below rather than followed.
            if child.file_type.is_dir() {
                if NOT_DESCENDED.iter().any(|name| child.name == *name) {
                    continue;
                }
                match read_sorted(&child.path) {
                    Ok(grandchildren) => pending.push(grandchildren.into_iter()),
                    Err(err) => self.error(&err, &child.path),
                }
            } else if child.file_type.is_file() {
                let selected = glob.is_none_or(|glob| glob.matches(&child.name.to_string_lossy()));
                if !selected {
                    continue;
                }
                let size = match fs::symlink_metadata(&child.path) {
                    Ok(metadata) => metadata.len(),
                    Err(err) => {
                        self.error(&err, &child.path);
                        continue;
                    }
                };
                if self.file(&child.path, size) == Flow::Stop {
                    break;
                }
            }
        }
        Ok(())
    }

    fn file(&mut self, path: &Path, size: u64) -> Flow {
        if size > MAX_FILE_BYTES {
            self.output.files_skipped_too_large += 1;
            return Flow::Continue;
        }
        // Room for the whole file and one byte more, so that it is read in one call and the
        // next finds its end, rather than in reads that double from 32 bytes.
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0).saturating_add(1));
        let read =
            File::open(path).and_then(|file| file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes));
        if let Err(err) = read {
            self.error(&err, path);
            return Flow::Continue;
        }
        // Checked again on what was read: the file may have grown since its metadata.
        if bytes.len() as u64 > MAX_FILE_BYTES {
            self.output.files_skipped_too_large += 1;
            return Flow::Continue;
        }
        if bytes.contains(&0) {
            self.output.files_skipped_binary += 1;
            return Flow::Continue;
        }
        self.output.files_searched += 1;

        if bytes.is_empty() {
            return Flow::Continue;
        }
        let shown = self.workspace.display(path);
        let mut flow = Flow::Continue;
        let (matches, max_matches) = (&mut self.output.matches, self.max_matches);
        let truncated = &mut self.output.truncated;
        self.regex.each(&bytes, |index, line, start| {
            if matches.len() == max_matches {
                *truncated = true;
                flow = Flow::Stop;
                return false;
            }
            matches.push(Match {
                path: shown.clone(),
                line_number: index as u64 + 1,
                line: excerpt(line, start),
            });
            true
        });
        flow
    }

    fn error(&mut self, err: &std::io::Error, path: &Path) {
        if self.output.errors.len() < MAX_REPORTED_ERRORS {
            let message = ToolError::io(err, self.workspace.display(path));
            self.output.errors.push(message.message().to_owned());
        } else {
            self.unreported_errors += 1;
        }
    }

    fn finish(mut self) -> GrepOutput {
        if self.unreported_errors > 0 {
            self.output.errors.push(format!(
                "… and {} more unreadable files or directories",
                self.unreported_errors
            ));
        }
        self.output
    }
}

fn read_sorted(dir: &Path) -> std::io::Result<Vec<Child>> {
    let mut children = fs::read_dir(dir)?
        .map(|entry| {
            let entry = entry?;
            Ok(Child {
                name: entry.file_name(),
                path: entry.path(),
                file_type: entry.file_type()?,
            })
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    children.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(children)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;
    use crate::excerpt::MAX_LINE_BYTES;

    struct Fixture {
        dir: tempfile::TempDir,
        workspace: Workspace,
    }

    impl Fixture {
        fn new(files: &[(&str, &[u8])]) -> anyhow::Result<Self> {
            let dir = tempfile::tempdir()?;
            for (name, contents) in files {
                let path = dir.path().join(name);
                if let Some(parent) = path.parent() {
                    fs::create_dir_all(parent)?;
                }
                fs::write(path, contents)?;
            }
            let workspace = Workspace::at(dir.path());
            Ok(Self { dir, workspace })
        }

        fn grep(&self, pattern: &str, path: &str) -> Result<GrepOutput, ToolError> {
            self.grep_with(GrepArgs {
                pattern: pattern.to_owned(),
                path: path.to_owned(),
                case_insensitive: false,
                max_matches: DEFAULT_MAX_MATCHES,
                glob: None,
            })
        }

        fn grep_with(&self, args: GrepArgs) -> Result<GrepOutput, ToolError> {
            grep(&self.workspace, &args)
        }
    }

    fn args(pattern: &str) -> GrepArgs {
        GrepArgs {
            pattern: pattern.to_owned(),
            path: ".".to_owned(),
            case_insensitive: false,
            max_matches: DEFAULT_MAX_MATCHES,
            glob: None,
        }
    }

    fn found(output: &GrepOutput) -> Vec<(&str, u64, &str)> {
        output
            .matches
            .iter()
            .map(|m| (m.path.as_str(), m.line_number, m.line.as_str()))
            .collect()
    }

    fn message<T: std::fmt::Debug>(result: Result<T, ToolError>) -> String {
        match result {
            Ok(value) => panic!("expected an error, got {value:?}"),
            Err(err) => err.message().to_owned(),
        }
    }

    #[test]
    fn finds_matching_lines_in_sorted_order() -> anyhow::Result<()> {
        let fixture = Fixture::new(&[
            ("src/main.rs", b"fn main() {\r\n    helper();\r\n}\r\n"),
            ("src/lib.rs", b"pub fn helper() {}\n"),
            ("README.md", b"no match here\ncall helper() first\n"),
        ])?;
        let out = fixture.grep(r"helper\(\)", ".")?;
        assert_eq!(
            found(&out),
            [
                ("README.md", 2, "call helper() first"),
                ("src/lib.rs", 1, "pub fn helper() {}"),
                ("src/main.rs", 2, "    helper();"),
            ]
        );
        assert_eq!(out.files_searched, 3);
        assert!(!out.truncated);
        Ok(())
    }

    #[test]
    fn lines_are_those_an_editor_shows() -> anyhow::Result<()> {
        let fixture = Fixture::new(&[
            ("ends.txt", b"a\n\nb\n"),
            ("no_newline.txt", b"a\n\nb"),
            ("empty.txt", b""),
        ])?;
        let out = fixture.grep("^$", ".")?;
        assert_eq!(
            found(&out),
            [("ends.txt", 2, ""), ("no_newline.txt", 2, "")]
        );
        assert_eq!(out.files_searched, 3);
        Ok(())
    }

    #[test]
    fn case_insensitive_and_glob_narrow_the_search() -> anyhow::Result<()> {
        let fixture = Fixture::new(&[
            ("a.rs", b"TODO: rust\n"),
            ("b.py", b"todo: python\n"),
            ("sub/c.rs", b"Todo: nested\n"),
        ])?;
        let sensitive = fixture.grep("todo", ".")?;
        assert_eq!(found(&sensitive), [("b.py", 1, "todo: python")]);

        let out = fixture.grep_with(GrepArgs {
            case_insensitive: true,
            glob: Some("*.rs".to_owned()),
            ..args("todo")
        })?;
        assert_eq!(
            found(&out),
            [("a.rs", 1, "TODO: rust"), ("sub/c.rs", 1, "Todo: nested")]
        );
        assert_eq!(out.files_searched, 2);
        Ok(())
    }

    #[test]
    fn skips_binary_files_git_and_symlinks() -> anyhow::Result<()> {
        let fixture = Fixture::new(&[
            ("image.bin", b"needle\0\x01\x02"),
            (".git/config", b"needle\n"),
            ("real.txt", b"needle\n"),
            ("latin1.txt", b"caf\xe9 needle\n"),
        ])?;
        symlink("real.txt", fixture.dir.path().join("alias.txt"))?;
        symlink(".", fixture.dir.path().join("loop"))?;
        let out = fixture.grep("needle", ".")?;
        assert_eq!(
            found(&out),
            [
                ("latin1.txt", 1, "caf\u{FFFD} needle"),
                ("real.txt", 1, "needle")
            ]
        );
        assert_eq!(out.files_searched, 2);
        assert_eq!(out.files_skipped_binary, 1);
        assert!(message(fixture.grep("needle", "alias.txt")).contains("does not follow symlinks"));
        Ok(())
    }

    #[test]
    fn the_file_size_limit_holds_at_its_edge() -> anyhow::Result<()> {
        let limit = usize::try_from(MAX_FILE_BYTES)?;
        let mut at_limit = b"needle\n".to_vec();
        at_limit.resize(limit, b'x');
        let mut over = at_limit.clone();
        over.push(b'x');
        let fixture = Fixture::new(&[("at.txt", &at_limit), ("over.txt", &over)])?;
        let out = fixture.grep("needle", ".")?;
        assert_eq!(found(&out), [("at.txt", 1, "needle")]);
        assert_eq!(out.files_skipped_too_large, 1);
        Ok(())
    }

    #[test]
    fn max_matches_truncates_exactly_at_its_edge() -> anyhow::Result<()> {
        let fixture = Fixture::new(&[("a.txt", b"x\nx\n"), ("b.txt", b"x\n")])?;
        let exact = fixture.grep_with(GrepArgs {
            max_matches: 3,
            ..args("x")
        })?;
        assert_eq!(exact.matches.len(), 3);
        assert!(!exact.truncated);

        let short = fixture.grep_with(GrepArgs {
            max_matches: 2,
            ..args("x")
        })?;
        assert_eq!(found(&short), [("a.txt", 1, "x"), ("a.txt", 2, "x")]);
        assert!(short.truncated);

        for max_matches in [0, MAX_MATCHES_LIMIT + 1] {
            assert_eq!(
                message(fixture.grep_with(GrepArgs {
                    max_matches,
                    ..args("x")
                })),
                "max_matches must be between 1 and 1000"
            );
        }
        Ok(())
    }

    #[test]
    fn long_lines_are_cut_around_the_match() -> anyhow::Result<()> {
        let line = format!("{}needle{}\n", "a".repeat(10_000), "b".repeat(10_000));
        let fixture = Fixture::new(&[("min.js", line.as_bytes())])?;
        let out = fixture.grep("needle", "min.js")?;
        let [hit] = out.matches.as_slice() else {
            panic!("{out:?}");
        };
        assert!(hit.line.contains("needle"));
        assert!(hit.line.len() <= MAX_LINE_BYTES + 2 * '…'.len_utf8());
        Ok(())
    }

    #[test]
    fn a_single_file_is_searched_whatever_the_glob() -> anyhow::Result<()> {
        let fixture = Fixture::new(&[("notes.md", b"needle\n")])?;
        let out = fixture.grep_with(GrepArgs {
            path: "notes.md".to_owned(),
            glob: Some("*.rs".to_owned()),
            ..args("needle")
        })?;
        assert_eq!(found(&out), [("notes.md", 1, "needle")]);
        Ok(())
    }

    #[test]
    fn bad_patterns_globs_and_paths_are_explained() -> anyhow::Result<()> {
        let fixture = Fixture::new(&[("a.txt", b"x\n")])?;
        assert!(message(fixture.grep("(unclosed", ".")).starts_with("invalid regular expression:"));
        assert!(
            message(fixture.grep_with(GrepArgs {
                glob: Some("src/*.rs".to_owned()),
                ..args("x")
            }))
            .contains("matches file names only")
        );
        assert_eq!(
            message(fixture.grep("x", "missing")),
            "no such file or directory: missing"
        );
        assert!(message(fixture.grep("x", "/etc")).contains("outside the workspace"));
        Ok(())
    }
}
