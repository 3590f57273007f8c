//! `airlock approvals`: an approver console for every run. Shows each pending request as it
//! arrives (those already waiting first), asks about them one at a time in arrival order, and
//! prints what becomes of them: resolved here or elsewhere, expired, or a decision refused.
//!
//! The console runs until Ctrl-C. When its standard input ends it stops answering, and goes on
//! showing: a console answers for every run, and a pipe that ran dry must not deny requests
//! that other approvers may still answer.

use std::collections::VecDeque;
use std::io::Write;

use airlock_client::exit_code;
use airlock_client::proto::{ApprovalDecision, ApprovalRequest, ApprovalState};
use airlock_render::{approval_json, approval_lines, console_prompt, console_update_line};
use clap::{Args, Subcommand};

use super::ask::{Answered, AtEnd, Question, next_line};
use crate::error::CliError;
use crate::follow::now_ms;
use crate::input::Input;
use crate::interrupt::Interrupts;
use crate::output::Output;
use crate::server::Server;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ApprovalsArgs {
    /// Print each request and update as one JSON object per line.
    #[arg(long)]
    json: bool,
    #[command(subcommand)]
    command: Option<ApprovalsCommand>,
}

#[derive(Debug, Subcommand)]
enum ApprovalsCommand {
    /// The grants made while answering ("always for this session"): list or revoke them.
    #[command(subcommand)]
    Rules(crate::policy::GrantsCommand),
}

pub async fn run<O: Write, E: Write>(
    args: ApprovalsArgs,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    if let Some(ApprovalsCommand::Rules(command)) = args.command {
        return crate::policy::grants(command, server, out).await;
    }
    let client = server.connect().await?;
    let mut console = client.approvals().await?;
    let mut desk = Desk::new(args.json);
    let mut interrupts = Interrupts::new();
    loop {
        tokio::select! {
            update = console.next() => match update? {
                Some(update) => desk.on_update(update, out)?,
                None => {
                    out.line(&format!(
                        "airlock: airlockd at {} closed the approvals stream",
                        client.endpoint()
                    ))?;
                    return Ok(exit_code::UNAVAILABLE);
                }
            },
            line = next_line(&mut desk.question) => {
                if let Some(decision) = desk.on_line(line, out)? {
                    // A closed stream ends the console with the next update; say what was lost.
                    if let Err(error) = console.decide(decision).await {
                        out.line(&format!("airlock: the answer was not sent: {error}"))?;
                    }
                }
            }
            () = interrupts.next() => return Ok(exit_code::INTERRUPTED),
        }
        desk.ask_next(out)?;
    }
}

/// The console's state: requests waiting their turn, and the one being asked.
struct Desk {
    json: bool,
    /// Pending requests not asked yet, oldest first.
    queue: VecDeque<ApprovalRequest>,
    question: Option<Question>,
    /// Standard input, opened at the first question.
    input: Option<Input>,
    /// False once the input has ended.
    answering: bool,
}

impl Desk {
    fn new(json: bool) -> Self {
        Self {
            json,
            queue: VecDeque::new(),
            question: None,
            input: None,
            answering: true,
        }
    }

    fn on_update<O: Write, E: Write>(
        &mut self,
        update: ApprovalRequest,
        out: &mut Output<O, E>,
    ) -> Result<(), CliError> {
        if self.json {
            out.stdout(&approval_json(&update))?;
        }
        let pending = update.state == ApprovalState::Pending as i32;
        if pending {
            // Shown when its turn to be asked comes, so that a request never appears between
            // another request and its question. Without answers to give, that is now.
            if !self.answering && !self.json {
                out.stdout_lines(&approval_lines(&update, now_ms(), true))?;
            }
            if self.answering
                && !self
                    .queue
                    .iter()
                    .any(|queued| queued.approval_id == update.approval_id)
            {
                self.queue.push_back(update);
            }
            return Ok(());
        }
        if update.state != ApprovalState::DecisionRejected as i32 {
            // Resolved or expired: nothing left to ask.
            self.queue
                .retain(|queued| queued.approval_id != update.approval_id);
            if let Some(question) = self
                .question
                .take_if(|question| question.approval_id() == update.approval_id)
            {
                let note = if update.state == ApprovalState::Expired as i32 {
                    "(expired)"
                } else {
                    "(resolved elsewhere)"
                };
                question.withdraw(note, out)?;
            }
        }
        if !self.json
            && let Some(line) = console_update_line(&update)
        {
            out.stdout(&format!("{line}\n"))?;
        }
        Ok(())
    }

    /// Takes a line for the question being asked; the decision to send once it is answered.
    fn on_line<O: Write, E: Write>(
        &mut self,
        line: std::io::Result<Option<String>>,
        out: &mut Output<O, E>,
    ) -> Result<Option<ApprovalDecision>, CliError> {
        let (Some(question), Some(input)) = (&mut self.question, &self.input) else {
            return Ok(None);
        };
        match question.take_line(line, input, AtEnd::StopAnswering, out)? {
            Answered::Waiting => Ok(None),
            Answered::Decided(decision) => {
                self.question = None;
                Ok(Some(decision))
            }
            Answered::StopAnswering => {
                self.question = None;
                self.answering = false;
                self.queue.clear();
                out.line(
                    "airlock: standard input is closed; requests are shown but no longer \
                     answered",
                )?;
                Ok(None)
            }
        }
    }

    /// Shows the oldest waiting request and asks about it, when nothing else is asked.
    fn ask_next<O: Write, E: Write>(&mut self, out: &mut Output<O, E>) -> Result<(), CliError> {
        if self.question.is_some() || !self.answering {
            return Ok(());
        }
        let Some(request) = self.queue.pop_front() else {
            return Ok(());
        };
        let input = self.input.get_or_insert_with(Input::stdin);
        let lines = approval_lines(&request, now_ms(), true);
        if !self.json {
            out.stdout_lines(&lines)?;
        }
        // A person answering at the terminal while stdout goes elsewhere must see what they
        // approve.
        if input.is_terminal() && out.stderr_is_terminal() && !out.stdout_is_terminal() {
            out.stderr_lines(&lines)?;
        }
        let prompt = console_prompt(&request);
        self.question = Some(Question::ask(request, prompt, input, out)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use airlock_client::proto::Decision;

    use super::*;

    fn pending(approval_id: &str) -> ApprovalRequest {
        ApprovalRequest {
            approval_id: approval_id.to_owned(),
            run_id: "run_1".to_owned(),
            tool: "write_file".to_owned(),
            arguments_json: "{}".to_owned(),
            digest: format!("digest-of-{approval_id}"),
            state: ApprovalState::Pending as i32,
            ..ApprovalRequest::default()
        }
    }

    fn update(approval_id: &str, state: ApprovalState, detail: &str) -> ApprovalRequest {
        ApprovalRequest {
            state: state as i32,
            detail: detail.to_owned(),
            ..pending(approval_id)
        }
    }

    fn desk(stdin: &[u8]) -> anyhow::Result<Desk> {
        let mut desk = Desk::new(false);
        desk.input = Some(Input::from_bytes(stdin)?);
        Ok(desk)
    }

    fn feed(
        desk: &mut Desk,
        update: ApprovalRequest,
        out: &mut Output<Vec<u8>, Vec<u8>>,
    ) -> anyhow::Result<()> {
        desk.on_update(update, out)?;
        desk.ask_next(out)?;
        Ok(())
    }

    async fn answer(
        desk: &mut Desk,
        out: &mut Output<Vec<u8>, Vec<u8>>,
    ) -> anyhow::Result<Option<ApprovalDecision>> {
        let line = next_line(&mut desk.question).await;
        let decision = desk.on_line(line, out)?;
        desk.ask_next(out)?;
        Ok(decision)
    }

    fn captured(out: Output<Vec<u8>, Vec<u8>>) -> anyhow::Result<(String, String)> {
        let (stdout, stderr) = out.into_inner();
        Ok((String::from_utf8(stdout)?, String::from_utf8(stderr)?))
    }

    #[tokio::test]
    async fn requests_are_shown_and_asked_one_at_a_time_in_order() -> anyhow::Result<()> {
        let mut desk = desk(b"y\nn not this one\n")?;
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        feed(&mut desk, pending("apr_1"), &mut out)?;
        feed(&mut desk, pending("apr_2"), &mut out)?;
        let first = answer(&mut desk, &mut out).await?;
        assert_eq!(
            first.as_ref().map(|d| d.approval_id.as_str()),
            Some("apr_1")
        );
        assert_eq!(
            first.map(|d| d.decision),
            Some(Decision::ApproveOnce as i32)
        );
        let second = answer(&mut desk, &mut out).await?;
        assert_eq!(
            second.as_ref().map(|d| d.reason.as_str()),
            Some("not this one")
        );
        assert_eq!(second.map(|d| d.digest), Some("digest-of-apr_2".to_owned()));

        let (stdout, stderr) = captured(out)?;
        // The second request appears only once the first is answered.
        let first_shown = stdout.find("approval apr_1").unwrap_or(usize::MAX);
        let second_shown = stdout.find("approval apr_2").unwrap_or(usize::MAX);
        assert!(
            first_shown < second_shown && second_shown != usize::MAX,
            "{stdout}"
        );
        assert!(stdout.contains("  run run_1, step -, call -\n"), "{stdout}");
        assert_eq!(
            stderr,
            "approve apr_1 (write_file in run run_1)? [y]es / [n]o / [a]lways for this session: \
             y\napprove apr_2 (write_file in run run_1)? [y]es / [n]o / [a]lways for this \
             session: n not this one\n"
        );
        Ok(())
    }

    #[tokio::test]
    async fn updates_withdraw_questions_and_drop_queued_requests() -> anyhow::Result<()> {
        let mut desk = desk(b"")?;
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        feed(&mut desk, pending("apr_1"), &mut out)?;
        feed(&mut desk, pending("apr_2"), &mut out)?;
        feed(&mut desk, pending("apr_3"), &mut out)?;
        feed(
            &mut desk,
            update("apr_2", ApprovalState::Expired, "no answer by the deadline"),
            &mut out,
        )?;
        feed(
            &mut desk,
            update(
                "apr_1",
                ApprovalState::Resolved,
                "approved once by the run client",
            ),
            &mut out,
        )?;
        // apr_1 was withdrawn, apr_2 dropped from the queue: apr_3 is asked.
        assert_eq!(
            desk.question.as_ref().map(Question::approval_id),
            Some("apr_3")
        );
        assert!(desk.queue.is_empty());
        let (stdout, stderr) = captured(out)?;
        assert!(
            stdout.contains("expired apr_2 (write_file in run run_1): no answer by the deadline\n"),
            "{stdout}"
        );
        assert!(
            stdout.contains(
                "resolved apr_1 (write_file in run run_1): approved once by the run client\n"
            ),
            "{stdout}"
        );
        assert!(!stdout.contains("approval apr_2"), "{stdout}");
        assert!(
            stderr.contains("session: (resolved elsewhere)\n"),
            "{stderr}"
        );
        Ok(())
    }

    #[tokio::test]
    async fn the_end_of_input_stops_answering_without_denying() -> anyhow::Result<()> {
        let mut desk = desk(b"")?;
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        feed(&mut desk, pending("apr_1"), &mut out)?;
        assert_eq!(answer(&mut desk, &mut out).await?, None);
        assert!(!desk.answering);
        // Later requests are shown, not asked.
        feed(&mut desk, pending("apr_2"), &mut out)?;
        assert!(desk.question.is_none());
        let (stdout, stderr) = captured(out)?;
        assert!(stdout.contains("approval apr_2"), "{stdout}");
        assert!(
            stderr.ends_with(
                "(end of input)\nairlock: standard input is closed; requests are shown but no \
                 longer answered\n"
            ),
            "{stderr}"
        );
        Ok(())
    }

    #[tokio::test]
    async fn a_refused_decision_is_reported() -> anyhow::Result<()> {
        let mut desk = desk(b"")?;
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        let refused = ApprovalRequest {
            approval_id: "apr_9".to_owned(),
            state: ApprovalState::DecisionRejected as i32,
            detail: "approval `apr_9` is past its deadline".to_owned(),
            ..ApprovalRequest::default()
        };
        feed(&mut desk, refused, &mut out)?;
        let (stdout, _) = captured(out)?;
        assert_eq!(
            stdout,
            "your decision for apr_9 was refused: approval `apr_9` is past its deadline\n"
        );
        Ok(())
    }
}
