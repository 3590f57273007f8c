//! Lines of output that may be coloured: the transcript of a run, with the diff of an approval
//! preview in the colours of `git diff`, and a run's trace, with its failures in red.
//!
//! Rendering produces lines tagged with a [`Tone`]; whether the tones become colours, and
//! whether untrusted text is escaped, is decided once, by [`paint`], from what the output is
//! (a terminal, one that takes colours, or a pipe).

use super::sanitize::escape_control_bytes;

/// How a line is shown when colours are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Plain,
    /// A diff's added line.
    Added,
    /// A diff's removed line.
    Removed,
    /// A diff's `@@` hunk header.
    Hunk,
    /// A diff's `---` / `+++` file header.
    FileHeader,
    /// Something that failed: a span of a trace that ended in error.
    Error,
}

impl Tone {
    /// The SGR sequence that starts the tone: the colours `git diff` uses.
    fn start(self) -> Option<&'static str> {
        match self {
            Tone::Plain => None,
            Tone::Added => Some("\x1b[32m"),
            Tone::Removed => Some("\x1b[31m"),
            Tone::Hunk => Some("\x1b[36m"),
            Tone::FileHeader => Some("\x1b[1m"),
            // Bold, so that it stands apart from a diff's removed lines.
            Tone::Error => Some("\x1b[1;31m"),
        }
    }
}

const RESET: &str = "\x1b[0m";

/// One line, without its line ending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StyledLine {
    pub tone: Tone,
    pub text: String,
}

impl StyledLine {
    pub fn plain(text: impl Into<String>) -> Self {
        Self {
            tone: Tone::Plain,
            text: text.into(),
        }
    }

    pub fn new(tone: Tone, text: impl Into<String>) -> Self {
        Self {
            tone,
            text: text.into(),
        }
    }
}

/// The lines as text, each ending with a newline. With `escape`, control characters in the
/// text are made visible (the text may come from a tool or a model, and is bound for a
/// terminal); with `colour`, toned lines are wrapped in their colour. Escaping comes first, so
/// that the only escape sequences written are the colours added here.
pub fn paint(lines: &[StyledLine], escape: bool, colour: bool) -> String {
    let mut out = String::new();
    for line in lines {
        let text = if escape {
            String::from_utf8_lossy(&escape_control_bytes(line.text.as_bytes())).into_owned()
        } else {
            line.text.clone()
        };
        match line.tone.start().filter(|_| colour) {
            Some(start) => {
                out.push_str(start);
                out.push_str(&text);
                out.push_str(RESET);
            }
            None => out.push_str(&text),
        }
        out.push('\n');
    }
    out
}

/// The lines' text alone, as a pipe receives it; for tests and logs.
pub fn plain_text(lines: &[StyledLine]) -> String {
    paint(lines, false, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines() -> Vec<StyledLine> {
        vec![
            StyledLine::plain("context \x1b]0;x\x07"),
            StyledLine::new(Tone::Added, "+new"),
            StyledLine::new(Tone::Removed, "-old"),
        ]
    }

    #[test]
    fn a_pipe_gets_the_text_as_it_is() {
        assert_eq!(plain_text(&lines()), "context \x1b]0;x\x07\n+new\n-old\n");
    }

    #[test]
    fn a_terminal_gets_escaped_text_and_only_our_colours() {
        assert_eq!(
            paint(&lines(), true, true),
            "context \\x1b]0;x\\x07\n\x1b[32m+new\x1b[0m\n\x1b[31m-old\x1b[0m\n"
        );
        assert_eq!(
            paint(&lines(), true, false),
            "context \\x1b]0;x\\x07\n+new\n-old\n"
        );
    }
}
