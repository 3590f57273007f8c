//! Renders a change as the unified diff an approver and a model read.

use std::time::Duration;

use similar::TextDiff;

/// The most bytes of diff a result carries: 128 KiB. Enough to review any reasonable
/// edit; past that the diff is cut at a line and `diff_truncated` is set, keeping the
/// result inside the output policy (`[output] max_bytes` in tool.toml).
pub const MAX_DIFF_BYTES: usize = 128 * 1024;

/// How long the diff algorithm may search for the smallest diff before it settles for
/// a larger but still correct one: pathological inputs must not eat the tool's timeout.
const DIFF_TIMEOUT: Duration = Duration::from_secs(2);

/// Lines of unchanged context around each change, as `diff -u` and git show.
const CONTEXT_LINES: usize = 3;

/// What the file holds before the write.
#[derive(Debug)]
pub enum Before<'a> {
    /// The file does not exist yet.
    Missing,
    Text(&'a str),
    /// Not UTF-8: a line diff would be meaningless.
    Binary,
    /// Too large to read and diff.
    TooLarge {
        bytes: u64,
    },
}

#[derive(Debug, PartialEq, Eq)]
pub struct RenderedDiff {
    pub text: String,
    pub truncated: bool,
}

/// The unified diff from `before` to `after` for the file `name` (workspace-relative),
/// with git's `a/`, `b/` and `/dev/null` headers.
pub fn render(name: &str, before: &Before<'_>, after: &str) -> RenderedDiff {
    let new_header = format!("b/{name}");
    let text = match before {
        Before::Missing => unified("/dev/null", &new_header, "", after),
        Before::Text(old) => unified(&format!("a/{name}"), &new_header, old, after),
        Before::Binary => format!("Binary files a/{name} and {new_header} differ\n"),
        Before::TooLarge { bytes } => format!(
            "File a/{name} ({bytes} bytes) is too large to diff; the write replaces it whole\n"
        ),
    };
    cap(text)
}

fn unified(old_header: &str, new_header: &str, old: &str, new: &str) -> String {
    TextDiff::configure()
        .timeout(DIFF_TIMEOUT)
        .diff_lines(old, new)
        .unified_diff()
        .context_radius(CONTEXT_LINES)
        .header(old_header, new_header)
        .to_string()
}

/// Cuts `text` after the last whole line within [`MAX_DIFF_BYTES`] and says how much
/// was left out, so a person reading a cut diff knows it is cut.
fn cap(mut text: String) -> RenderedDiff {
    if text.len() <= MAX_DIFF_BYTES {
        return RenderedDiff {
            text,
            truncated: false,
        };
    }
    let limit = text.floor_char_boundary(MAX_DIFF_BYTES);
    let keep = text[..limit]
        .rfind('\n')
        .map_or(limit, |newline| newline + 1);
    let omitted = text.len() - keep;
    text.truncate(keep);
    text.push_str(&format!(
        "… diff truncated: {omitted} more bytes not shown\n"
    ));
    RenderedDiff {
        text,
        truncated: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_diffs_against_dev_null() {
        let diff = render("src/new.rs", &Before::Missing, "fn main() {}\n");
        assert_eq!(
            diff.text,
            "--- /dev/null\n+++ b/src/new.rs\n@@ -0,0 +1 @@\n+fn main() {}\n"
        );
        assert!(!diff.truncated);
    }

    #[test]
    fn a_change_shows_context_and_both_sides() {
        let diff = render(
            "a.txt",
            &Before::Text("1\n2\n3\n4\n5\n"),
            "1\n2\nthree\n4\n5\n",
        );
        assert_eq!(
            diff.text,
            "--- a/a.txt\n+++ b/a.txt\n@@ -1,5 +1,5 @@\n 1\n 2\n-3\n+three\n 4\n 5\n"
        );
    }

    #[test]
    fn a_missing_final_newline_is_marked() {
        let diff = render("a.txt", &Before::Text("x\n"), "x");
        assert!(
            diff.text.contains("\\ No newline at end of file"),
            "{}",
            diff.text
        );
    }

    #[test]
    fn no_change_is_an_empty_diff() {
        assert_eq!(render("a.txt", &Before::Text("same\n"), "same\n").text, "");
    }

    #[test]
    fn binary_files_get_a_summary() {
        let diff = render("logo.png", &Before::Binary, "text");
        assert_eq!(diff.text, "Binary files a/logo.png and b/logo.png differ\n");
    }

    #[test]
    fn a_large_diff_is_cut_at_a_line() {
        let after = "0123456789abcdef\n".repeat(20_000);
        let diff = render("big.txt", &Before::Missing, &after);
        assert!(diff.truncated);
        let (kept, marker) = diff
            .text
            .trim_end_matches('\n')
            .rsplit_once('\n')
            .unwrap_or_default();
        assert!(kept.len() < MAX_DIFF_BYTES);
        assert!(
            kept.ends_with("+0123456789abcdef"),
            "{}",
            &kept[kept.len() - 40..]
        );
        assert!(marker.starts_with("… diff truncated: "), "{marker}");
    }
}
