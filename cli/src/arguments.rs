//! Where a tool call's JSON arguments come from: inline text, a file (`@path`) or standard
//! input (`-`), the conventions of `curl --data` and friends.
//!
//! The text is checked to be one JSON document before it is sent, so that a typo is reported
//! here, with its line and column, rather than as a tool failure. Whether the document matches
//! the tool's schema is the daemon's call.

use std::fmt;
use std::io::Read;
use std::path::PathBuf;
use std::str::FromStr;

/// The largest argument document read from a file or standard input. It guards against
/// `@path` naming a huge file by mistake; a larger request would not reach a daemon with
/// default settings anyway ([`airlock_client::MAX_MESSAGE_BYTES`]).
pub const MAX_ARGUMENTS_BYTES: u64 = airlock_client::MAX_MESSAGE_BYTES;

/// Where to read arguments from, as written on a command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgumentSource {
    /// The JSON text itself.
    Inline(String),
    /// `@path`: the contents of a file.
    File(PathBuf),
    /// `-`: everything on standard input.
    Stdin,
}

impl FromStr for ArgumentSource {
    type Err = ArgumentsError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        if raw == "-" {
            return Ok(Self::Stdin);
        }
        match raw.strip_prefix('@') {
            Some("") => Err(ArgumentsError::EmptyFileName),
            Some(path) => Ok(Self::File(PathBuf::from(path))),
            None => Ok(Self::Inline(raw.to_owned())),
        }
    }
}

impl fmt::Display for ArgumentSource {
    /// Names the source the way an error message refers to it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Inline(_) => f.write_str("--args"),
            Self::File(path) => write!(f, "{}", path.display()),
            Self::Stdin => f.write_str("standard input"),
        }
    }
}

impl ArgumentSource {
    /// Reads the arguments and checks that they are one JSON document. Standard input is read
    /// to its end.
    pub fn read(&self) -> Result<String, ArgumentsError> {
        self.read_with_stdin(std::io::stdin().lock())
    }

    /// [`ArgumentSource::read`] with standard input replaced by `stdin`.
    pub fn read_with_stdin(&self, stdin: impl Read) -> Result<String, ArgumentsError> {
        let text = match self {
            Self::Inline(text) => text.clone(),
            Self::File(path) => {
                let file = std::fs::File::open(path).map_err(|source| ArgumentsError::Read {
                    origin: self.to_string(),
                    source,
                })?;
                read_bounded(file, self)?
            }
            Self::Stdin => read_bounded(stdin, self)?,
        };
        if let Err(source) = serde_json::from_str::<serde::de::IgnoredAny>(&text) {
            return Err(ArgumentsError::InvalidJson {
                origin: self.to_string(),
                source,
            });
        }
        Ok(text)
    }
}

fn read_bounded(reader: impl Read, source: &ArgumentSource) -> Result<String, ArgumentsError> {
    let mut bytes = Vec::new();
    // One byte past the limit tells "exactly at the limit" from "over it".
    reader
        .take(MAX_ARGUMENTS_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| ArgumentsError::Read {
            origin: source.to_string(),
            source: error,
        })?;
    if bytes.len() as u64 > MAX_ARGUMENTS_BYTES {
        return Err(ArgumentsError::TooLarge {
            origin: source.to_string(),
        });
    }
    String::from_utf8(bytes).map_err(|_| ArgumentsError::NotUtf8 {
        origin: source.to_string(),
    })
}

/// Why the arguments could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ArgumentsError {
    #[error("`--args @` needs a file name after the @")]
    EmptyFileName,
    #[error("cannot read arguments from {origin}: {source}")]
    Read {
        origin: String,
        source: std::io::Error,
    },
    #[error("arguments from {origin} are larger than {MAX_ARGUMENTS_BYTES} bytes")]
    TooLarge { origin: String },
    #[error("arguments from {origin} are not UTF-8 text")]
    NotUtf8 { origin: String },
    #[error("arguments from {origin} are not valid JSON: {source}")]
    InvalidJson {
        origin: String,
        source: serde_json::Error,
    },
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn parse(raw: &str) -> ArgumentSource {
        match raw.parse() {
            Ok(source) => source,
            Err(error) => panic!("{raw:?} did not parse: {error}"),
        }
    }

    #[test]
    fn the_three_forms_are_told_apart() {
        assert_eq!(parse("-"), ArgumentSource::Stdin);
        assert_eq!(
            parse("@args.json"),
            ArgumentSource::File("args.json".into())
        );
        assert_eq!(
            parse(r#"{"path":"a"}"#),
            ArgumentSource::Inline(r#"{"path":"a"}"#.to_owned())
        );
        // Only a leading @ means a file, and only a lone dash means standard input.
        assert_eq!(parse("--"), ArgumentSource::Inline("--".to_owned()));
        assert_eq!(parse("a@b"), ArgumentSource::Inline("a@b".to_owned()));
    }

    #[test]
    fn an_at_without_a_name_is_refused() {
        let Err(error) = "@".parse::<ArgumentSource>() else {
            panic!("a lone @ parsed");
        };
        assert_eq!(
            error.to_string(),
            "`--args @` needs a file name after the @"
        );
    }

    #[test]
    fn inline_json_is_sent_as_written() -> anyhow::Result<()> {
        let text = parse(r#"{ "b": 1, "a": [true] }"#).read_with_stdin(std::io::empty())?;
        assert_eq!(text, r#"{ "b": 1, "a": [true] }"#);
        Ok(())
    }

    #[test]
    fn a_file_is_read() -> anyhow::Result<()> {
        let mut file = tempfile::NamedTempFile::new()?;
        file.write_all(b"{\"path\": \"src/main.rs\"}\n")?;
        let source = ArgumentSource::File(file.path().to_owned());
        let text = source.read_with_stdin(std::io::empty())?;
        assert_eq!(text, "{\"path\": \"src/main.rs\"}\n");
        Ok(())
    }

    #[test]
    fn standard_input_is_read_to_its_end() -> anyhow::Result<()> {
        let stdin: &[u8] = b"[1,\n 2]";
        assert_eq!(ArgumentSource::Stdin.read_with_stdin(stdin)?, "[1,\n 2]");
        Ok(())
    }

    #[test]
    fn invalid_json_is_refused_with_its_position() {
        let Err(error) = parse("{\"path\": }").read_with_stdin(std::io::empty()) else {
            panic!("invalid JSON was accepted");
        };
        assert_eq!(
            error.to_string(),
            "arguments from --args are not valid JSON: expected value at line 1 column 10"
        );
    }

    #[test]
    fn two_documents_are_not_one() {
        let stdin: &[u8] = b"{} {}";
        let Err(error) = ArgumentSource::Stdin.read_with_stdin(stdin) else {
            panic!("two documents were accepted");
        };
        assert_eq!(
            error.to_string(),
            "arguments from standard input are not valid JSON: trailing characters at line 1 \
             column 4"
        );
    }

    #[test]
    fn empty_input_is_not_json() {
        let Err(error) = ArgumentSource::Stdin.read_with_stdin(std::io::empty()) else {
            panic!("empty input was accepted");
        };
        assert!(
            matches!(error, ArgumentsError::InvalidJson { .. }),
            "{error}"
        );
    }

    #[test]
    fn a_missing_file_names_the_file() {
        let source = ArgumentSource::File("/nonexistent/args.json".into());
        let Err(error) = source.read_with_stdin(std::io::empty()) else {
            panic!("a missing file was read");
        };
        assert!(
            error
                .to_string()
                .starts_with("cannot read arguments from /nonexistent/args.json: "),
            "{error}"
        );
    }

    #[test]
    fn input_over_the_limit_is_refused_and_at_the_limit_is_read() -> anyhow::Result<()> {
        let limit = usize::try_from(MAX_ARGUMENTS_BYTES)?;
        // A JSON string of exactly the limit: two quotes around spaces.
        let mut at_limit = vec![b' '; limit];
        at_limit[0] = b'"';
        at_limit[limit - 1] = b'"';
        let text = ArgumentSource::Stdin.read_with_stdin(at_limit.as_slice())?;
        assert_eq!(text.len(), limit);

        let over_limit = vec![b' '; limit + 1];
        let Err(error) = ArgumentSource::Stdin.read_with_stdin(over_limit.as_slice()) else {
            panic!("input over the limit was read");
        };
        assert!(matches!(error, ArgumentsError::TooLarge { .. }), "{error}");
        Ok(())
    }

    #[test]
    fn bytes_that_are_not_utf8_are_refused() {
        let stdin: &[u8] = b"\"\xff\"";
        let Err(error) = ArgumentSource::Stdin.read_with_stdin(stdin) else {
            panic!("invalid UTF-8 was accepted");
        };
        assert_eq!(
            error.to_string(),
            "arguments from standard input are not UTF-8 text"
        );
    }
}
