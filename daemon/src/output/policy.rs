//! The per-tool view policy (`[output]` in `tool.toml`): how many bytes of a result the caller
//! sees and which part of an oversized one.

use serde::Deserialize;

/// Default view size. Large enough for a source file or a page of matches, small enough that
/// one observation cannot crowd a model's context out.
pub const DEFAULT_MAX_BYTES: u64 = 64 * 1024;

/// What stands in for the cut middle of a `head_tail` result, so a reader cannot mistake the
/// two ends for contiguous text.
const OMISSION_MARKER: &str = "\n…[{} bytes omitted]…\n";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TruncateMode {
    Head,
    Tail,
    #[default]
    HeadTail,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputPolicy {
    #[serde(default = "default_max_bytes")]
    pub max_bytes: u64,
    #[serde(default)]
    pub truncate: TruncateMode,
}

fn default_max_bytes() -> u64 {
    DEFAULT_MAX_BYTES
}

impl Default for OutputPolicy {
    fn default() -> Self {
        Self {
            max_bytes: DEFAULT_MAX_BYTES,
            truncate: TruncateMode::default(),
        }
    }
}

/// A result after its output policy was applied: `text` is the whole output's first
/// `head_bytes` bytes, then (for `head_tail`) the omission marker and its last `tail_bytes`
/// bytes — so a reader of the whole output (the kept copy) can continue exactly where the
/// shown part ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shaped {
    pub text: String,
    pub truncated: bool,
    pub original_bytes: u64,
    pub head_bytes: u64,
    pub tail_bytes: u64,
}

/// Cuts `text` down to `policy.max_bytes`, on UTF-8 character boundaries.
pub fn shape(text: &str, policy: &OutputPolicy) -> Shaped {
    let original_bytes = text.len() as u64;
    let max = usize::try_from(policy.max_bytes).unwrap_or(usize::MAX);
    if text.len() <= max {
        return Shaped {
            text: text.to_owned(),
            truncated: false,
            original_bytes,
            head_bytes: original_bytes,
            tail_bytes: 0,
        };
    }
    let (shaped, head_bytes, tail_bytes) = match policy.truncate {
        TruncateMode::Head => {
            let first = head(text, max);
            (first.to_owned(), first.len(), 0)
        }
        TruncateMode::Tail => {
            let last = tail(text, max);
            (last.to_owned(), 0, last.len())
        }
        TruncateMode::HeadTail => head_tail(text, max),
    };
    Shaped {
        text: shaped,
        truncated: true,
        original_bytes,
        head_bytes: head_bytes as u64,
        tail_bytes: tail_bytes as u64,
    }
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
fn head(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The longest suffix of `text` of at most `max` bytes that starts on a character boundary.
fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// Both ends of `text` around the omission marker, with the sizes of the two ends.
fn head_tail(text: &str, max: usize) -> (String, usize, usize) {
    let marker_for = |omitted: usize| OMISSION_MARKER.replace("{}", &omitted.to_string());
    // The marker's length depends on the number it carries; sizing it for the whole text is
    // an upper bound, so the result never exceeds `max`.
    let marker_budget = marker_for(text.len()).len();
    if max <= marker_budget {
        let first = head(text, max);
        return (first.to_owned(), first.len(), 0);
    }
    let budget = max - marker_budget;
    let first = head(text, budget / 2 + budget % 2);
    let last = tail(text, budget / 2);
    let omitted = text.len() - first.len() - last.len();
    (
        format!("{first}{}{last}", marker_for(omitted)),
        first.len(),
        last.len(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(max_bytes: u64, truncate: TruncateMode) -> OutputPolicy {
        OutputPolicy {
            max_bytes,
            truncate,
        }
    }

    #[test]
    fn text_at_the_limit_is_untouched() {
        let shaped = shape("abcdef", &policy(6, TruncateMode::Head));
        assert_eq!(shaped.text, "abcdef");
        assert!(!shaped.truncated);
        assert_eq!(shaped.original_bytes, 6);
    }

    #[test]
    fn one_byte_over_the_limit_is_truncated() {
        let shaped = shape("abcdefg", &policy(6, TruncateMode::Head));
        assert_eq!(shaped.text, "abcdef");
        assert!(shaped.truncated);
        assert_eq!(shaped.original_bytes, 7);
    }

    #[test]
    fn tail_keeps_the_end() {
        let shaped = shape("abcdefg", &policy(3, TruncateMode::Tail));
        assert_eq!(shaped.text, "efg");
    }

    #[test]
    fn head_tail_keeps_both_ends_and_says_what_was_cut() {
        let text = "A".repeat(1000) + &"B".repeat(1000);
        let shaped = shape(&text, &policy(100, TruncateMode::HeadTail));
        assert!(shaped.truncated);
        assert!(shaped.text.len() <= 100, "{} bytes", shaped.text.len());
        assert!(shaped.text.starts_with('A'));
        assert!(shaped.text.ends_with('B'));
        let omitted: usize = shaped
            .text
            .split('[')
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .expect("marker with a count");
        let kept = shaped.text.len() - OMISSION_MARKER.replace("{}", &omitted.to_string()).len();
        assert_eq!(kept + omitted, text.len());
        assert_eq!(
            shaped.head_bytes + shaped.tail_bytes + omitted as u64,
            text.len() as u64
        );
        let (h, t) = (shaped.head_bytes as usize, shaped.tail_bytes as usize);
        assert!(shaped.text.starts_with(&text[..h]));
        assert!(shaped.text.ends_with(&text[text.len() - t..]));
    }

    #[test]
    fn the_shown_ends_are_exactly_the_whole_texts_ends() {
        let text: String = (0..500).map(|i| format!("line {i}\n")).collect();
        let head = shape(&text, &policy(100, TruncateMode::Head));
        assert_eq!((head.head_bytes, head.tail_bytes), (100, 0));
        assert_eq!(head.text, text[..100]);
        let tail = shape(&text, &policy(100, TruncateMode::Tail));
        assert_eq!((tail.head_bytes, tail.tail_bytes), (0, 100));
        assert_eq!(tail.text, text[text.len() - 100..]);
        let whole = shape(&text, &policy(100_000, TruncateMode::HeadTail));
        assert!(!whole.truncated);
        assert_eq!((whole.head_bytes, whole.tail_bytes), (text.len() as u64, 0));
    }

    #[test]
    fn cuts_never_split_a_character() {
        let text = "é".repeat(100); // two bytes each
        for mode in [
            TruncateMode::Head,
            TruncateMode::Tail,
            TruncateMode::HeadTail,
        ] {
            for max in 0..60 {
                let shaped = shape(&text, &policy(max, mode));
                assert!(shaped.text.len() as u64 <= max, "{mode:?} {max}");
                assert!(shaped.truncated);
            }
        }
    }

    #[test]
    fn policy_rejects_unknown_keys_and_modes() {
        assert!(toml::from_str::<OutputPolicy>("max_bytes = 1\ntruncate = \"middle\"").is_err());
        assert!(toml::from_str::<OutputPolicy>("max_bytez = 1").is_err());
        let parsed: OutputPolicy = toml::from_str("truncate = \"tail\"").expect("valid");
        assert_eq!(parsed, policy(DEFAULT_MAX_BYTES, TruncateMode::Tail));
    }
}
