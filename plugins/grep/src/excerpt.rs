//! Cuts an overlong matching line down to a window around its match.

/// The most bytes of one matching line a result carries. Minified files have lines of
/// megabytes; the model needs the match and some context, not the line.
pub const MAX_LINE_BYTES: usize = 300;

/// How much of a cut line is kept before the match, so the model sees what leads up to it.
const LEAD_BYTES: usize = 100;

/// Marks where a cut line was cut.
const ELLIPSIS: &str = "…";

/// `line` as text, cut to at most [`MAX_LINE_BYTES`] bytes (plus the ellipses marking
/// the cuts) around the match that starts at byte `match_start`. Cuts fall on UTF-8
/// character boundaries; invalid UTF-8 is replaced, not dropped.
pub fn excerpt(line: &[u8], match_start: usize) -> String {
    if line.len() <= MAX_LINE_BYTES {
        return String::from_utf8_lossy(line).into_owned();
    }
    let mut start = match_start
        .saturating_sub(LEAD_BYTES)
        .min(line.len() - MAX_LINE_BYTES);
    let mut end = start + MAX_LINE_BYTES;
    // Move both cuts onto character boundaries: forward at the start and backward at
    // the end, so the window never grows past the limit.
    while start < line.len() && is_continuation(line[start]) {
        start += 1;
    }
    while end < line.len() && end > start && is_continuation(line[end]) {
        end -= 1;
    }
    let mut text = String::with_capacity(MAX_LINE_BYTES + 2 * ELLIPSIS.len());
    if start > 0 {
        text.push_str(ELLIPSIS);
    }
    text.push_str(&String::from_utf8_lossy(&line[start..end]));
    if end < line.len() {
        text.push_str(ELLIPSIS);
    }
    text
}

fn is_continuation(byte: u8) -> bool {
    byte & 0b1100_0000 == 0b1000_0000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_lines_are_kept_whole() {
        assert_eq!(excerpt(b"let x = 1;", 4), "let x = 1;");
        let exactly = "a".repeat(MAX_LINE_BYTES);
        assert_eq!(excerpt(exactly.as_bytes(), 0), exactly);
    }

    #[test]
    fn a_match_at_the_start_keeps_the_head() {
        let line = format!("needle{}", "x".repeat(1000));
        let text = excerpt(line.as_bytes(), 0);
        assert!(text.starts_with("needle"));
        assert!(text.ends_with(ELLIPSIS));
        assert_eq!(text.len(), MAX_LINE_BYTES + ELLIPSIS.len());
    }

    #[test]
    fn a_match_deep_in_the_line_is_in_the_window() {
        let line = format!("{}needle{}", "x".repeat(5000), "y".repeat(5000));
        let text = excerpt(line.as_bytes(), 5000);
        assert!(text.starts_with(ELLIPSIS) && text.ends_with(ELLIPSIS));
        assert!(text.contains(&format!("{}needle", "x".repeat(LEAD_BYTES))));
        assert_eq!(text.len(), MAX_LINE_BYTES + 2 * ELLIPSIS.len());
    }

    #[test]
    fn a_match_at_the_end_keeps_the_tail() {
        let line = format!("{}needle", "x".repeat(1000));
        let text = excerpt(line.as_bytes(), 1000);
        assert!(text.ends_with("needle"));
        assert!(text.starts_with(ELLIPSIS));
    }

    #[test]
    fn cuts_fall_on_character_boundaries() {
        let line = "é".repeat(400); // two bytes each
        for start in [0, 1, 401, 799] {
            let text = excerpt(line.as_bytes(), start);
            assert!(!text.contains('\u{FFFD}'), "{start}: {text}");
            let body = text.trim_matches('…');
            assert!(body.len() <= MAX_LINE_BYTES && body.chars().all(|c| c == 'é'));
        }
    }
}
