//! A text file as lines that remember their line ending, so that a patch changes the
//! lines it names and leaves every other byte as it was: CRLF endings, a missing final
//! newline.

/// How a line ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eol {
    /// The last line of a file without a final newline.
    None,
    Lf,
    CrLf,
}

impl Eol {
    pub fn as_str(self) -> &'static str {
        match self {
            Eol::None => "",
            Eol::Lf => "\n",
            Eol::CrLf => "\r\n",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    /// The line without its ending.
    pub text: &'a str,
    pub eol: Eol,
}

pub fn split(text: &str) -> Vec<Line<'_>> {
    text.split_inclusive('\n')
        .map(|line| {
            if let Some(text) = line.strip_suffix("\r\n") {
                Line {
                    text,
                    eol: Eol::CrLf,
                }
            } else if let Some(text) = line.strip_suffix('\n') {
                Line { text, eol: Eol::Lf }
            } else {
                Line {
                    text: line,
                    eol: Eol::None,
                }
            }
        })
        .collect()
}

pub fn join(lines: &[Line<'_>]) -> String {
    let mut text = String::new();
    for line in lines {
        text.push_str(line.text);
        text.push_str(line.eol.as_str());
    }
    text
}

/// The ending new lines get: CRLF in a file whose lines mostly end so, else LF (also
/// for a file with no line endings yet).
pub fn dominant_eol(lines: &[Line<'_>]) -> Eol {
    let crlf = lines.iter().filter(|line| line.eol == Eol::CrLf).count();
    let lf = lines.iter().filter(|line| line.eol == Eol::Lf).count();
    if crlf > lf { Eol::CrLf } else { Eol::Lf }
}

/// `1 line`, `2 lines`: a count of lines in a message.
pub fn count(lines: usize) -> String {
    if lines == 1 {
        "1 line".to_owned()
    } else {
        format!("{lines} lines")
    }
}

/// Whether a file line and a patch line are the same line. A `\r` left at the end of
/// either is a line ending, not text: a patch written with LF endings applies to a file
/// with CRLF endings, and the other way round. Nothing else is forgiven.
pub fn same(file: &str, patch: &str) -> bool {
    file.strip_suffix('\r').unwrap_or(file) == patch.strip_suffix('\r').unwrap_or(patch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_join_give_back_the_same_bytes() {
        for text in ["", "a", "a\n", "a\r\nb\n", "a\n\nb", "\r\n\r\n", "x\ry\n"] {
            assert_eq!(join(&split(text)), text, "{text:?}");
        }
        assert_eq!(
            split("a\r\nb"),
            [
                Line {
                    text: "a",
                    eol: Eol::CrLf
                },
                Line {
                    text: "b",
                    eol: Eol::None
                }
            ]
        );
    }

    #[test]
    fn the_dominant_ending_decides_new_lines() {
        assert_eq!(dominant_eol(&split("a\r\nb\r\nc\n")), Eol::CrLf);
        assert_eq!(dominant_eol(&split("a\r\nb\n")), Eol::Lf);
        assert_eq!(dominant_eol(&split("")), Eol::Lf);
    }

    #[test]
    fn only_a_trailing_carriage_return_is_forgiven() {
        assert!(same("x", "x\r"));
        assert!(!same("x ", "x"));
        assert!(!same("X", "x"));
    }
}
