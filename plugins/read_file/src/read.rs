//! Reads one text file and cuts out the requested lines.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use airlock_sdk::IoResultExt;
use airlock_sdk::ToolError;
use airlock_sdk::Workspace;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::Serialize;

/// The largest file read_file opens: 16 MiB. The whole file is read into the guest's
/// memory to count its lines and check it is UTF-8; a larger file is a log or a data
/// dump, which grep searches better than a model reads.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Lines returned when the call does not say: enough for most source files whole.
pub const DEFAULT_MAX_LINES: u64 = 2000;

/// The most bytes of text one call returns: 64 KiB. Keeps a result well inside the
/// output policy (`[output] max_bytes` in tool.toml) even after JSON escaping, so the
/// model gets whole lines and `next_start_line` rather than a result cut mid-document.
pub const MAX_CONTENT_BYTES: usize = 64 * 1024;

/// Reads a UTF-8 text file of the workspace, whole or a range of its lines.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    /// Path of the file, relative to the workspace (`src/main.rs`).
    pub path: String,
    /// First line to return, counting from 1.
    #[serde(default = "default_start_line")]
    #[schemars(range(min = 1))]
    pub start_line: u64,
    /// Most lines to return. At most 64 KiB of text is returned per call whatever this says; `next_start_line` in the result tells where to continue.
    #[serde(default = "default_max_lines")]
    #[schemars(range(min = 1))]
    pub max_lines: u64,
}

fn default_start_line() -> u64 {
    1
}

fn default_max_lines() -> u64 {
    DEFAULT_MAX_LINES
}

#[derive(Debug, PartialEq, Eq, Serialize)]
pub struct ReadFileOutput {
    /// The file, relative to the workspace.
    pub path: String,
    /// The returned lines, line endings included.
    pub content: String,
    /// First line returned (1-based).
    pub start_line: u64,
    /// Last line returned (inclusive); `start_line - 1` when none was (an empty file).
    pub end_line: u64,
    /// Lines in the whole file.
    pub total_lines: u64,
    /// Size of the whole file in bytes.
    pub bytes: u64,
    /// Where to continue when lines after `end_line` were not returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_start_line: Option<u64>,
    /// The one line returned was longer than the 64 KiB content limit and was cut.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub line_cut: bool,
}

pub fn read_file(workspace: &Workspace, args: &ReadFileArgs) -> Result<ReadFileOutput, ToolError> {
    let ReadFileArgs {
        start_line,
        max_lines,
        ..
    } = *args;
    if start_line == 0 {
        return Err(ToolError::new("start_line counts from 1"));
    }
    if max_lines == 0 {
        return Err(ToolError::new("max_lines must be at least 1"));
    }

    let path = workspace.resolve(&args.path)?;
    let bytes = read_bounded(&path, &args.path)?;
    let text = as_text(&bytes, &args.path)?;
    let total_lines = text.split_inclusive('\n').count() as u64;
    if start_line > total_lines.max(1) {
        return Err(ToolError::new(format!(
            "start_line {start_line} is past the end of `{}`, which has {total_lines} lines",
            args.path
        )));
    }

    let selection = select_lines(text, start_line, max_lines);
    let end_line = start_line + selection.lines - 1;
    Ok(ReadFileOutput {
        path: workspace.display(&path),
        content: selection.content.to_owned(),
        start_line,
        end_line,
        total_lines,
        bytes: bytes.len() as u64,
        next_start_line: (end_line < total_lines).then_some(end_line + 1),
        line_cut: selection.line_cut,
    })
}

/// Reads the file, refusing directories and files over [`MAX_FILE_BYTES`]. The size is
/// checked on the bytes read, not only on the metadata, in case the file grows meanwhile.
fn read_bounded(path: &Path, shown: &str) -> Result<Vec<u8>, ToolError> {
    let metadata = std::fs::metadata(path).with_path(shown)?;
    if metadata.is_dir() {
        return Err(ToolError::new(format!(
            "`{shown}` is a directory; use list_dir to see what it contains"
        )));
    }
    let too_large = || {
        ToolError::new(format!(
            "`{shown}` is larger than read_file's {MAX_FILE_BYTES}-byte limit \
             ({} bytes); use grep to find the part you need",
            metadata.len()
        ))
    };
    if metadata.len() > MAX_FILE_BYTES {
        return Err(too_large());
    }
    // Room for the whole file and one byte more: read in one call, the next finds its end.
    let mut bytes = Vec::with_capacity(
        usize::try_from(metadata.len())
            .unwrap_or(0)
            .saturating_add(1),
    );
    File::open(path)
        .and_then(|file| file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
        .with_path(shown)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large());
    }
    Ok(bytes)
}

fn as_text<'a>(bytes: &'a [u8], shown: &str) -> Result<&'a str, ToolError> {
    let not_text = |offset: usize| {
        ToolError::new(format!(
            "`{shown}` is not a UTF-8 text file (binary data at byte {offset}); \
             read_file only returns text"
        ))
    };
    // A NUL byte is valid UTF-8 but in practice means a binary file.
    if let Some(offset) = bytes.iter().position(|&byte| byte == 0) {
        return Err(not_text(offset));
    }
    std::str::from_utf8(bytes).map_err(|err| not_text(err.valid_up_to()))
}

struct Selection<'a> {
    content: &'a str,
    lines: u64,
    line_cut: bool,
}

/// Lines `start_line..start_line + max_lines` of `text`, stopping early at the last
/// whole line that fits in [`MAX_CONTENT_BYTES`]. A first line that alone is over the
/// limit is cut at a character boundary rather than returned empty.
fn select_lines(text: &str, start_line: u64, max_lines: u64) -> Selection<'_> {
    let skip = usize::try_from(start_line - 1).unwrap_or(usize::MAX);
    let take = usize::try_from(max_lines).unwrap_or(usize::MAX);
    let mut lines = text.split_inclusive('\n').skip(skip).take(take);
    let Some(first) = lines.next() else {
        return Selection {
            content: "",
            lines: 0,
            line_cut: false,
        };
    };
    let begin = first.as_ptr() as usize - text.as_ptr() as usize;
    if first.len() > MAX_CONTENT_BYTES {
        let end = text.floor_char_boundary(begin + MAX_CONTENT_BYTES);
        return Selection {
            content: &text[begin..end],
            lines: 1,
            line_cut: true,
        };
    }
    let mut end = begin + first.len();
    let mut count = 1;
    for line in lines {
        if end + line.len() - begin > MAX_CONTENT_BYTES {
            break;
        }
        end += line.len();
        count += 1;
    }
    Selection {
        content: &text[begin..end],
        lines: count,
        line_cut: false,
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    struct Fixture {
        dir: tempfile::TempDir,
        workspace: Workspace,
    }

    impl Fixture {
        fn new() -> anyhow::Result<Self> {
            let dir = tempfile::tempdir()?;
            let workspace = Workspace::at(dir.path());
            Ok(Self { dir, workspace })
        }

        fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> anyhow::Result<()> {
            Ok(fs::write(self.dir.path().join(name), contents)?)
        }

        fn read(
            &self,
            path: &str,
            start_line: Option<u64>,
            max_lines: Option<u64>,
        ) -> Result<ReadFileOutput, ToolError> {
            read_file(
                &self.workspace,
                &ReadFileArgs {
                    path: path.to_owned(),
                    start_line: start_line.unwrap_or_else(default_start_line),
                    max_lines: max_lines.unwrap_or_else(default_max_lines),
                },
            )
        }
    }

    fn message<T: std::fmt::Debug>(result: Result<T, ToolError>) -> String {
        match result {
            Ok(value) => panic!("expected an error, got {value:?}"),
            Err(err) => err.message().to_owned(),
        }
    }

    #[test]
    fn reads_a_whole_file() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        fixture.write("a.txt", "one\ntwo\r\nthree")?;
        let out = fixture.read("./a.txt", None, None)?;
        assert_eq!(
            out,
            ReadFileOutput {
                path: "a.txt".to_owned(),
                content: "one\ntwo\r\nthree".to_owned(),
                start_line: 1,
                end_line: 3,
                total_lines: 3,
                bytes: 14,
                next_start_line: None,
                line_cut: false,
            }
        );
        Ok(())
    }

    #[test]
    fn returns_a_range_and_where_to_continue() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        fixture.write("a.txt", "1\n2\n3\n4\n5\n")?;
        let out = fixture.read("a.txt", Some(2), Some(2))?;
        assert_eq!(out.content, "2\n3\n");
        assert_eq!((out.start_line, out.end_line), (2, 3));
        assert_eq!(out.total_lines, 5);
        assert_eq!(out.next_start_line, Some(4));

        let tail = fixture.read("a.txt", Some(4), Some(10))?;
        assert_eq!(tail.content, "4\n5\n");
        assert_eq!((tail.end_line, tail.next_start_line), (5, None));
        Ok(())
    }

    #[test]
    fn an_empty_file_has_no_lines() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        fixture.write("empty", "")?;
        let out = fixture.read("empty", None, None)?;
        assert_eq!(out.content, "");
        assert_eq!((out.start_line, out.end_line, out.total_lines), (1, 0, 0));
        assert_eq!(out.next_start_line, None);
        Ok(())
    }

    #[test]
    fn start_past_the_end_is_an_error() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        fixture.write("a.txt", "1\n2\n")?;
        assert_eq!(
            message(fixture.read("a.txt", Some(3), None)),
            "start_line 3 is past the end of `a.txt`, which has 2 lines"
        );
        assert_eq!(
            message(fixture.read("a.txt", Some(0), None)),
            "start_line counts from 1"
        );
        assert_eq!(
            message(fixture.read("a.txt", None, Some(0))),
            "max_lines must be at least 1"
        );
        Ok(())
    }

    #[test]
    fn binary_files_are_refused() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        fixture.write("nul.bin", b"abc\0def")?;
        assert_eq!(
            message(fixture.read("nul.bin", None, None)),
            "`nul.bin` is not a UTF-8 text file (binary data at byte 3); read_file only \
             returns text"
        );
        fixture.write("latin1.txt", b"caf\xe9\n")?;
        assert!(message(fixture.read("latin1.txt", None, None)).contains("at byte 3"));
        Ok(())
    }

    #[test]
    fn the_file_size_limit_holds_at_its_edge() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        let limit = usize::try_from(MAX_FILE_BYTES)?;
        fixture.write("at_limit.txt", "a".repeat(limit))?;
        let out = fixture.read("at_limit.txt", None, None)?;
        assert_eq!(out.bytes, MAX_FILE_BYTES);
        assert_eq!(out.total_lines, 1);

        fixture.write("over_limit.txt", "a".repeat(limit + 1))?;
        let err = message(fixture.read("over_limit.txt", None, None));
        assert!(err.contains("larger than read_file's"), "{err}");
        assert!(err.contains("use grep"), "{err}");
        Ok(())
    }

    #[test]
    fn content_stops_at_the_last_whole_line_under_the_limit() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        // 100-byte lines: the 64 KiB limit falls inside line 656.
        let line = format!("{}\n", "x".repeat(99));
        fixture.write("big.txt", line.repeat(1000))?;
        let out = fixture.read("big.txt", None, None)?;
        assert_eq!(out.end_line, 655);
        assert_eq!(out.content.len(), 65_500);
        assert!(out.content.ends_with('\n'));
        assert_eq!(out.next_start_line, Some(656));
        assert!(!out.line_cut);
        Ok(())
    }

    #[test]
    fn an_overlong_single_line_is_cut_on_a_char_boundary() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        // Three-byte characters, so the byte limit falls inside one of them.
        fixture.write("wide.txt", format!("{}\nnext\n", "€".repeat(30_000)))?;
        let out = fixture.read("wide.txt", None, None)?;
        assert!(out.line_cut);
        assert_eq!(out.content.len(), MAX_CONTENT_BYTES - MAX_CONTENT_BYTES % 3);
        assert_eq!((out.end_line, out.next_start_line), (1, Some(2)));
        Ok(())
    }

    #[test]
    fn directories_missing_files_and_escapes_are_explained() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        fs::create_dir(fixture.dir.path().join("src"))?;
        assert_eq!(
            message(fixture.read("src", None, None)),
            "`src` is a directory; use list_dir to see what it contains"
        );
        assert_eq!(
            message(fixture.read("nope.rs", None, None)),
            "no such file or directory: nope.rs"
        );
        assert!(message(fixture.read("../etc/passwd", None, None)).contains("climbs above"));
        Ok(())
    }
}
