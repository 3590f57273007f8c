//! Renders what a patch actually changed as the git-style unified diff an approver and a
//! model read, file after file, and counts each file's added and removed lines.
//!
//! It is the diff of the files before and after, not the patch given back: offsets,
//! recounted hunks and line endings show as they really are, and it is itself a patch
//! `git apply` accepts.

use std::time::Duration;
use std::time::Instant;

use similar::DiffTag;
use similar::TextDiff;

use crate::patch::Mode;
use crate::tree::FileData;

/// The most bytes of diff a result carries: 128 KiB, as write_file. Enough to review any
/// reasonable patch; past that the diff is cut at a line and `diff_truncated` is set,
/// keeping the result inside the output policy (`[output] max_bytes` in tool.toml).
pub const MAX_DIFF_BYTES: usize = 128 * 1024;

/// How long the diff algorithm may search for the smallest diffs of all files together
/// before it settles for larger but still correct ones: pathological inputs must not
/// eat the tool's timeout.
const DIFF_BUDGET: Duration = Duration::from_secs(2);

/// Lines of unchanged context around each change, as `diff -u` and git show.
const CONTEXT_LINES: usize = 3;

/// One file's change: its names and contents before and after (`None`: absent).
#[derive(Debug, Clone, Copy)]
pub struct Change<'a> {
    pub old_name: Option<&'a str>,
    pub new_name: Option<&'a str>,
    pub before: Option<&'a FileData>,
    pub after: Option<&'a FileData>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub added: usize,
    pub removed: usize,
}

/// The diff of a whole patch, built one file at a time.
#[derive(Debug)]
pub struct Differ {
    deadline: Instant,
    text: String,
    /// Bytes of diff left out once the text reached [`MAX_DIFF_BYTES`].
    omitted: usize,
}

impl Differ {
    pub fn new() -> Self {
        Self {
            deadline: Instant::now() + DIFF_BUDGET,
            text: String::new(),
            omitted: 0,
        }
    }

    /// Appends the diff of `change` and returns its line counts.
    pub fn add(&mut self, change: Change<'_>) -> Counts {
        let (text, counts) = self.render(change);
        if self.text.len() >= MAX_DIFF_BYTES {
            // Only counted: it would be cut anyway.
            self.omitted += text.len();
        } else {
            self.text.push_str(&text);
        }
        counts
    }

    /// The diff, cut after the last whole line within [`MAX_DIFF_BYTES`] with a line
    /// saying how much was left out, and whether it was cut.
    pub fn finish(mut self) -> (String, bool) {
        if self.text.len() > MAX_DIFF_BYTES {
            let limit = self.text.floor_char_boundary(MAX_DIFF_BYTES);
            let keep = self.text[..limit]
                .rfind('\n')
                .map_or(limit, |newline| newline + 1);
            self.omitted += self.text.len() - keep;
            self.text.truncate(keep);
        }
        if self.omitted == 0 {
            return (self.text, false);
        }
        self.text.push_str(&format!(
            "… diff truncated: {} more bytes not shown\n",
            self.omitted
        ));
        (self.text, true)
    }

    fn render(&self, change: Change<'_>) -> (String, Counts) {
        let old_name = change.old_name.or(change.new_name).unwrap_or_default();
        let new_name = change.new_name.or(change.old_name).unwrap_or_default();
        let mode = |data: &FileData| Mode::from_executable(data.executable == Some(true)).git();
        let mut text = format!("diff --git a/{old_name} b/{new_name}\n");
        let header = text.len();
        match (change.before, change.after) {
            (None, Some(after)) => text.push_str(&format!("new file mode {}\n", mode(after))),
            (Some(before), None) => {
                text.push_str(&format!("deleted file mode {}\n", mode(before)));
            }
            (Some(before), Some(after)) => {
                if let (Some(old), Some(new)) = (before.executable, after.executable)
                    && old != new
                {
                    text.push_str(&format!(
                        "old mode {}\nnew mode {}\n",
                        mode(before),
                        mode(after)
                    ));
                }
                if old_name != new_name {
                    text.push_str(&format!("rename from {old_name}\nrename to {new_name}\n"));
                }
            }
            (None, None) => return (String::new(), Counts::default()),
        }

        let old_header = match change.before {
            Some(_) => format!("a/{old_name}"),
            None => "/dev/null".to_owned(),
        };
        let new_header = match change.after {
            Some(_) => format!("b/{new_name}"),
            None => "/dev/null".to_owned(),
        };
        let mut counts = Counts::default();
        match (as_text(change.before), as_text(change.after)) {
            (Some(old), Some(new)) => {
                if old != new {
                    let diff = TextDiff::configure()
                        .deadline(self.deadline)
                        .diff_lines(old, new);
                    for op in diff.ops() {
                        let (tag, old_range, new_range) = op.as_tag_tuple();
                        match tag {
                            DiffTag::Equal => {}
                            DiffTag::Delete => counts.removed += old_range.len(),
                            DiffTag::Insert => counts.added += new_range.len(),
                            DiffTag::Replace => {
                                counts.removed += old_range.len();
                                counts.added += new_range.len();
                            }
                        }
                    }
                    text.push_str(
                        &diff
                            .unified_diff()
                            .context_radius(CONTEXT_LINES)
                            .header(&old_header, &new_header)
                            .to_string(),
                    );
                }
            }
            _ => {
                let same =
                    change.before.map(|data| &data.bytes) == change.after.map(|data| &data.bytes);
                if !same {
                    text.push_str(&format!(
                        "Binary files {old_header} and {new_header} differ\n"
                    ));
                }
            }
        }
        if text.len() == header {
            // Nothing changed after all (a mode where modes cannot be set): no entry.
            text.clear();
        }
        (text, counts)
    }
}

/// A file's contents as text: empty when absent, `None` when not UTF-8.
fn as_text(data: Option<&FileData>) -> Option<&str> {
    match data {
        None => Some(""),
        Some(data) => std::str::from_utf8(&data.bytes).ok(),
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::*;

    fn data(text: &[u8], executable: bool) -> FileData {
        FileData {
            bytes: Rc::from(text),
            executable: Some(executable),
        }
    }

    fn render(change: Change<'_>) -> (String, Counts) {
        let mut differ = Differ::new();
        let counts = differ.add(change);
        let (text, truncated) = differ.finish();
        assert!(!truncated);
        (text, counts)
    }

    #[test]
    fn every_kind_of_change_renders_as_git_does() {
        let old = data(b"a\nb\n", false);
        let new = data(b"a\nB\nc\n", true);
        let (text, counts) = render(Change {
            old_name: Some("x.sh"),
            new_name: Some("bin/x.sh"),
            before: Some(&old),
            after: Some(&new),
        });
        assert_eq!(
            text,
            "diff --git a/x.sh b/bin/x.sh\nold mode 100644\nnew mode 100755\n\
             rename from x.sh\nrename to bin/x.sh\n--- a/x.sh\n+++ b/bin/x.sh\n\
             @@ -1,2 +1,3 @@\n a\n-b\n+B\n+c\n"
        );
        assert_eq!(
            counts,
            Counts {
                added: 2,
                removed: 1
            }
        );

        let (added, counts) = render(Change {
            old_name: None,
            new_name: Some("new.txt"),
            before: None,
            after: Some(&old),
        });
        assert_eq!(
            added,
            "diff --git a/new.txt b/new.txt\nnew file mode 100644\n--- /dev/null\n\
             +++ b/new.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n"
        );
        assert_eq!(counts.added, 2);

        let empty = data(b"", false);
        let (deleted, _) = render(Change {
            old_name: Some("e"),
            new_name: None,
            before: Some(&empty),
            after: None,
        });
        assert_eq!(deleted, "diff --git a/e b/e\ndeleted file mode 100644\n");

        let unchanged = render(Change {
            old_name: Some("same"),
            new_name: Some("same"),
            before: Some(&empty),
            after: Some(&empty),
        });
        assert_eq!(unchanged, (String::new(), Counts::default()));

        let binary = data(b"\xff\x00", false);
        let (gone, _) = render(Change {
            old_name: Some("blob"),
            new_name: None,
            before: Some(&binary),
            after: None,
        });
        assert_eq!(
            gone,
            "diff --git a/blob b/blob\ndeleted file mode 100644\n\
             Binary files a/blob and /dev/null differ\n"
        );
    }

    #[test]
    fn a_long_diff_is_cut_at_a_line_and_later_files_are_only_counted() {
        let big = data("0123456789abcdef\n".repeat(20_000).as_bytes(), false);
        let small = data(b"x\n", false);
        let mut differ = Differ::new();
        differ.add(Change {
            old_name: None,
            new_name: Some("big"),
            before: None,
            after: Some(&big),
        });
        let counts = differ.add(Change {
            old_name: None,
            new_name: Some("small"),
            before: None,
            after: Some(&small),
        });
        assert_eq!(counts.added, 1);
        let (text, truncated) = differ.finish();
        assert!(truncated);
        let (kept, marker) = text
            .trim_end_matches('\n')
            .rsplit_once('\n')
            .unwrap_or_default();
        assert!(kept.len() <= MAX_DIFF_BYTES);
        assert!(
            kept.ends_with("+0123456789abcdef"),
            "{}",
            &kept[kept.len() - 40..]
        );
        assert!(marker.starts_with("… diff truncated: "), "{marker}");
        assert!(!text.contains("b/small"));
    }
}
