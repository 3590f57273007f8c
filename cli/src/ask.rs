//! One approval question, from the prompt to the decision: asks, reads the answer, asks again
//! when the line is not an answer, and on a terminal asks for the reason of a bare `n`.
//!
//! The question is on stderr, the answer on stdin. A person at a terminal sees their answer
//! echoed by the terminal; an answer read from a pipe is echoed after the question, so that a
//! log of the session shows what was answered.

use std::io::{self, Write};

use airlock_client::answer::{Answer, decision_for, grant_for, parse_answer, parse_reason};
use airlock_client::proto::{ApprovalDecision, ApprovalRequest, Decision};
use airlock_render::{ANSWER_HINT, REASON_PROMPT};

use super::input::{Input, PendingLine};
use crate::error::CliError;
use crate::output::Output;

/// The reason sent when the input ends before an answer: a run's approvals are then denied,
/// and the model is told why.
pub const END_OF_INPUT_REASON: &str = "no answer: the approver's input is closed";

/// What the end of the input means to the command asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtEnd {
    /// Deny the call: a run with nobody left to answer goes on without it.
    Deny,
    /// Stop answering, and leave the request to other approvers.
    StopAnswering,
}

/// Where a question stands after a line was read.
#[derive(Debug, Clone, PartialEq)]
pub enum Answered {
    /// Another line is needed (the question, or the reason, was asked again).
    Waiting,
    /// The answer, ready to send.
    Decided(ApprovalDecision),
    /// The input ended and the command stops answering.
    StopAnswering,
}

enum Stage {
    Answer,
    Reason,
}

/// A question on screen, waiting for its line.
pub struct Question {
    request: ApprovalRequest,
    prompt: String,
    stage: Stage,
    pending: PendingLine,
}

impl Question {
    /// Asks `prompt` about `request` and starts reading the answer.
    pub fn ask<O: Write, E: Write>(
        request: ApprovalRequest,
        prompt: String,
        input: &Input,
        out: &mut Output<O, E>,
    ) -> Result<Self, CliError> {
        out.prompt(&prompt)?;
        Ok(Self {
            request,
            prompt,
            stage: Stage::Answer,
            pending: input.read_line(),
        })
    }

    /// The request this question is about.
    pub fn approval_id(&self) -> &str {
        &self.request.approval_id
    }

    /// Takes the question back unanswered (it was resolved elsewhere, expired, or the run is
    /// being cancelled): its line is ended with `note` unless output has ended it already.
    pub fn withdraw<O: Write, E: Write>(
        self,
        note: &str,
        out: &mut Output<O, E>,
    ) -> Result<(), CliError> {
        out.answered(Some(note))
    }

    /// Waits for the line being read.
    pub async fn next_line(&mut self) -> io::Result<Option<String>> {
        self.pending.wait().await
    }

    /// Takes the line read (see [`Question::next_line`]) and says what comes next.
    pub fn take_line<O: Write, E: Write>(
        &mut self,
        line: io::Result<Option<String>>,
        input: &Input,
        at_end: AtEnd,
        out: &mut Output<O, E>,
    ) -> Result<Answered, CliError> {
        // A person at a terminal sees what they typed; a pipe's answer is shown for them.
        let echo = !(input.is_terminal() && out.stderr_is_terminal());
        let line = match line {
            Ok(line) => line,
            Err(error) => {
                out.answered(None)?;
                out.line(&format!(
                    "airlock: cannot read standard input: {error}; taking it as closed"
                ))?;
                None
            }
        };
        let shown = line.as_deref().unwrap_or(match at_end {
            AtEnd::Deny => "(end of input: denied)",
            AtEnd::StopAnswering => "(end of input)",
        });
        out.answered(echo.then_some(shown))?;
        match self.stage {
            Stage::Answer => self.take_answer(parse_answer(line.as_deref()), input, at_end, out),
            Stage::Reason => {
                let reason = parse_reason(line.as_deref()).unwrap_or_default();
                Ok(self.decided(Decision::Deny, &reason))
            }
        }
    }

    fn take_answer<O: Write, E: Write>(
        &mut self,
        answer: Answer,
        input: &Input,
        at_end: AtEnd,
        out: &mut Output<O, E>,
    ) -> Result<Answered, CliError> {
        match answer {
            Answer::ApproveOnce => Ok(self.decided(Decision::ApproveOnce, "")),
            Answer::ApproveSession => Ok(self.decided(Decision::ApproveSession, "")),
            Answer::ApproveSessionPrefix(prefix) => {
                Ok(Answered::Decided(grant_for(&self.request, prefix)))
            }
            Answer::Deny {
                reason: Some(reason),
            } => Ok(self.decided(Decision::Deny, &reason)),
            // Only a person is asked for more; a script's next line answers the next question.
            Answer::Deny { reason: None } if input.is_terminal() => {
                self.stage = Stage::Reason;
                out.prompt(REASON_PROMPT)?;
                self.pending = input.read_line();
                Ok(Answered::Waiting)
            }
            Answer::Deny { reason: None } => Ok(self.decided(Decision::Deny, "")),
            Answer::EndOfInput => match at_end {
                AtEnd::Deny => Ok(self.decided(Decision::Deny, END_OF_INPUT_REASON)),
                AtEnd::StopAnswering => Ok(Answered::StopAnswering),
            },
            Answer::Unrecognised => {
                out.line(ANSWER_HINT)?;
                out.prompt(&self.prompt)?;
                self.pending = input.read_line();
                Ok(Answered::Waiting)
            }
        }
    }

    fn decided(&self, decision: Decision, reason: &str) -> Answered {
        Answered::Decided(decision_for(&self.request, decision, reason))
    }
}

/// The next line for the question being asked; never, when none is (a `select!` branch that
/// is idle while nothing is asked).
pub async fn next_line(question: &mut Option<Question>) -> io::Result<Option<String>> {
    match question {
        Some(question) => question.next_line().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> ApprovalRequest {
        ApprovalRequest {
            approval_id: "apr_1".to_owned(),
            digest: "d1".to_owned(),
            ..ApprovalRequest::default()
        }
    }

    /// Asks once with `stdin` as the input and returns the outcome and what stderr shows.
    async fn conversation(stdin: &[u8], at_end: AtEnd) -> anyhow::Result<(Answered, String)> {
        let input = Input::from_bytes(stdin)?;
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        let mut question = Question::ask(request(), "approve? ".to_owned(), &input, &mut out)?;
        let answered = loop {
            let line = question.next_line().await;
            match question.take_line(line, &input, at_end, &mut out)? {
                Answered::Waiting => continue,
                done => break done,
            }
        };
        let (_, stderr) = out.into_inner();
        Ok((answered, String::from_utf8(stderr)?))
    }

    fn decision(decision: Decision, reason: &str) -> Answered {
        Answered::Decided(ApprovalDecision {
            approval_id: "apr_1".to_owned(),
            decision: decision as i32,
            reason: reason.to_owned(),
            digest: "d1".to_owned(),
            grant_prefix: Vec::new(),
        })
    }

    #[tokio::test]
    async fn a_piped_yes_approves_once_and_is_echoed() -> anyhow::Result<()> {
        let (answered, stderr) = conversation(b"y\n", AtEnd::Deny).await?;
        assert_eq!(answered, decision(Decision::ApproveOnce, ""));
        assert_eq!(stderr, "approve? y\n");
        Ok(())
    }

    #[tokio::test]
    async fn always_approves_for_the_session() -> anyhow::Result<()> {
        let (answered, _) = conversation(b"a\n", AtEnd::Deny).await?;
        assert_eq!(answered, decision(Decision::ApproveSession, ""));
        Ok(())
    }

    #[tokio::test]
    async fn a_piped_no_denies_with_its_inline_reason_or_none() -> anyhow::Result<()> {
        let (answered, _) = conversation(b"n wrong file\ny\n", AtEnd::Deny).await?;
        assert_eq!(answered, decision(Decision::Deny, "wrong file"));
        // The next line answers the next question, not this one's reason.
        let (answered, stderr) = conversation(b"n\ny\n", AtEnd::Deny).await?;
        assert_eq!(answered, decision(Decision::Deny, ""));
        assert_eq!(stderr, "approve? n\n");
        Ok(())
    }

    #[tokio::test]
    async fn lines_that_are_not_answers_are_asked_again() -> anyhow::Result<()> {
        let (answered, stderr) = conversation(b"maybe\n\ny\n", AtEnd::Deny).await?;
        assert_eq!(answered, decision(Decision::ApproveOnce, ""));
        assert_eq!(
            stderr,
            format!("approve? maybe\n{ANSWER_HINT}\napprove? \n{ANSWER_HINT}\napprove? y\n")
        );
        Ok(())
    }

    #[tokio::test]
    async fn the_end_of_input_denies_in_a_run() -> anyhow::Result<()> {
        let (answered, stderr) = conversation(b"", AtEnd::Deny).await?;
        assert_eq!(answered, decision(Decision::Deny, END_OF_INPUT_REASON));
        assert_eq!(stderr, "approve? (end of input: denied)\n");
        Ok(())
    }

    #[tokio::test]
    async fn a_withdrawn_question_says_why_on_its_line() -> anyhow::Result<()> {
        let input = Input::from_bytes(b"")?;
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        let question = Question::ask(request(), "approve? ".to_owned(), &input, &mut out)?;
        question.withdraw("(resolved: approver)", &mut out)?;
        out.line("next")?;
        let (_, stderr) = out.into_inner();
        assert_eq!(
            String::from_utf8(stderr)?,
            "approve? (resolved: approver)\nnext\n"
        );
        Ok(())
    }

    #[tokio::test]
    async fn the_end_of_input_stops_a_console_from_answering() -> anyhow::Result<()> {
        let (answered, stderr) = conversation(b"maybe\n", AtEnd::StopAnswering).await?;
        assert_eq!(answered, Answered::StopAnswering);
        assert!(stderr.ends_with("approve? (end of input)\n"), "{stderr}");
        Ok(())
    }
}
