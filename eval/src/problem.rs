//! One thing wrong with a suite, at a place in it: what loading a suite, its model and its
//! graders report. Below the suite and the graders, which both name problems.

/// One thing wrong with a suite, at a place in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Where, as a path into the document (`tasks[2].graders[0].answer_matches`); empty for
    /// the document as a whole.
    pub field: String,
    pub message: String,
    /// A file it names cannot be read (rather than being wrong).
    pub unreadable: bool,
}

impl Problem {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem {
            field: field.into(),
            message: message.into(),
            unreadable: false,
        }
    }

    pub fn unreadable(field: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem {
            unreadable: true,
            ..Problem::invalid(field, message)
        }
    }

    /// The problem of a part, placed in its whole: `graders[0]` + `answer_matches`.
    pub(crate) fn within(mut self, prefix: &str) -> Problem {
        self.field = match (prefix.is_empty(), self.field.is_empty()) {
            (true, _) => self.field,
            (false, true) => prefix.to_owned(),
            (false, false) => format!("{prefix}.{}", self.field),
        };
        self
    }
}
