//! Following a run's stream to its end, for `airlock run`, `airlock runs attach`, `airlock
//! fork` and each message of `airlock chat`: prints each event (readably, the model's text as
//! it streams, or as JSON lines), asks the approval questions on the terminal and sends the
//! answers, shows a progress line while a tool runs, and handles Ctrl-C.
//!
//! A question is asked only for a request that is still waiting once the stream has caught up
//! with the run (`answer_from`): events replayed from a run's past include requests answered
//! long ago, which the events after them resolve.

use std::io::Write;
use std::time::Duration;

use airlock_client::proto::run_event::Event;
use airlock_client::proto::{ApprovalDecision, ApprovalRequest, RunEvent};
use airlock_client::{RunHandle, exit_code};
use airlock_render::{
    RUN_PROMPT, Streamed, Transcript, approval_lines, progress_line, run_event_json,
};
use tokio::time::{Instant, Interval, MissedTickBehavior};

use super::ask::{Answered, AtEnd, Question, next_line};
use crate::error::CliError;
use crate::input::Input;
use crate::interrupt::Interrupts;
use crate::output::Output;

/// The first progress line is drawn only after a tool has run this long: most calls finish
/// sooner, and a line drawn and erased at once is flicker.
const PROGRESS_DELAY: Duration = Duration::from_millis(300);
/// How often the progress line is redrawn: a spinner that moves reads as alive.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// The detail of the run's end when Ctrl-C cancels it.
const CANCEL_REASON: &str = "cancelled by the user (Ctrl-C)";

/// What the first Ctrl-C does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnInterrupt {
    /// Cancel the run and wait for its end (`airlock run`: the run is this command's).
    Cancel,
    /// Stop following and leave the run going (`airlock attach`: someone else's run).
    Detach,
}

pub struct FollowOptions {
    /// One JSON object per event instead of the transcript.
    pub json: bool,
    /// Questions are asked once the stream has delivered this event: the run's last event
    /// when following began.
    pub answer_from: u64,
    pub on_interrupt: OnInterrupt,
    /// Standard input, when the command reads it already (a chat's messages): the answers are
    /// read through it, in turn with the rest. `None` opens it at the first question.
    pub input: Option<Input>,
}

/// How following a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Followed {
    /// The run finished: the exit code of its stop reason.
    Finished(u8),
    /// Ctrl-C stopped the following before the run's end (a second press while cancelling,
    /// or a detach): the run may go on in the daemon.
    Left(u8),
}

impl Followed {
    pub fn exit_code(self) -> u8 {
        match self {
            Self::Finished(code) | Self::Left(code) => code,
        }
    }
}

/// Follows `run` to its end and returns the exit code of its stop reason.
pub async fn follow<O: Write, E: Write>(
    run: RunHandle,
    options: FollowOptions,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    Ok(follow_run(run, options, out).await?.exit_code())
}

/// Follows `run` to its end, or until Ctrl-C leaves it, and says which.
pub async fn follow_run<O: Write, E: Write>(
    mut run: RunHandle,
    options: FollowOptions,
    out: &mut Output<O, E>,
) -> Result<Followed, CliError> {
    let mut follower = Follower::new(options, out.stderr_is_terminal());
    let mut interrupts = Interrupts::new();
    loop {
        tokio::select! {
            event = run.next_event() => match event {
                Ok(Some(event)) => {
                    if let Some(code) = follower.on_event(&event, out)? {
                        return Ok(Followed::Finished(code));
                    }
                }
                // The stream ends only after `run_finished`, which returned above.
                Ok(None) => return Ok(Followed::Left(exit_code::PROTOCOL)),
                Err(error) => {
                    out.stdout_lines(&follower.transcript.flush())?;
                    return Err(error.into());
                }
            },
            line = next_line(&mut follower.question) => {
                if let Some(decision) = follower.on_line(line, out)? {
                    // A stream already closed means the run is over: its events say how,
                    // which matters more than this answer.
                    if let Err(error) = run.decide(decision).await {
                        out.line(&format!("airlock: the answer was not sent: {error}"))?;
                    }
                }
            }
            () = interrupts.next() => {
                let run_id = run.run_id().unwrap_or("the run").to_owned();
                match follower.on_interrupt(&run_id, run.last_seq(), out)? {
                    Interrupted::Exit(code) => return Ok(Followed::Left(code)),
                    Interrupted::Cancel => match run.cancel(CANCEL_REASON).await {
                        Ok(()) => out.line(&format!(
                            "airlock: cancelling {run_id}; press Ctrl-C again to stop waiting \
                             for it"
                        ))?,
                        Err(error) => {
                            out.line(&format!("airlock: the cancel was not sent: {error}"))?;
                        }
                    },
                }
            }
            () = tick(&mut follower.progress) => follower.draw_progress(out)?,
        }
        follower.ask_if_due(run.last_seq(), out)?;
    }
}

/// What a Ctrl-C comes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interrupted {
    /// Stop now, with this exit code.
    Exit(u8),
    /// Send the run a cancel, and follow it to its end.
    Cancel,
}

struct Follower {
    options: FollowOptions,
    show_progress: bool,
    transcript: Transcript,
    /// Standard input, opened at the first question.
    input: Option<Input>,
    /// The run's approval request that no event has resolved yet.
    waiting: Option<ApprovalRequest>,
    /// The request this command answered last: not asked again while its resolution is on
    /// its way.
    answered: Option<String>,
    question: Option<Question>,
    progress: Option<Progress>,
    cancelling: bool,
}

/// A tool running, as the progress line shows it.
struct Progress {
    call_id: String,
    tool: String,
    started: Instant,
    output_bytes: u64,
    frame: usize,
    ticks: Interval,
}

impl Follower {
    fn new(mut options: FollowOptions, stderr_is_terminal: bool) -> Self {
        Self {
            show_progress: !options.json && stderr_is_terminal,
            input: options.input.take(),
            options,
            transcript: Transcript::new(),
            waiting: None,
            answered: None,
            question: None,
            progress: None,
            cancelling: false,
        }
    }

    /// Prints the event and keeps track of approvals and progress; the exit code once the run
    /// has finished.
    fn on_event<O: Write, E: Write>(
        &mut self,
        event: &RunEvent,
        out: &mut Output<O, E>,
    ) -> Result<Option<u8>, CliError> {
        if self.options.json {
            out.stdout(&run_event_json(event))?;
        } else if event.delta {
            match self.transcript.delta(event) {
                Some(Streamed::Text(text)) => out.stdout_stream(&text)?,
                Some(Streamed::Calling(note)) if self.show_progress && self.progress.is_none() => {
                    out.progress(&note)?;
                }
                Some(Streamed::Calling(_)) | None => {}
            }
        } else {
            // A committed event ends the line the streamed text left open: the text it
            // repeats is not printed again, and whatever it prints starts a line.
            out.end_stream()?;
            out.stdout_lines(&self.transcript.event(event))?;
        }
        // A streamed piece is shown and nothing more: what it leads up to comes committed.
        if event.delta {
            return Ok(None);
        }
        let Some(kind) = &event.event else {
            return Ok(None);
        };
        match kind {
            Event::ApprovalRequested(requested) => {
                self.stop_progress(out)?;
                self.waiting = requested.request.clone();
            }
            Event::ApprovalResolved(resolved) => {
                if self
                    .waiting
                    .as_ref()
                    .is_some_and(|waiting| waiting.approval_id == resolved.approval_id)
                {
                    self.waiting = None;
                }
                // Answered elsewhere, or expired: the question is withdrawn.
                if let Some(question) = self
                    .question
                    .take_if(|question| question.approval_id() == resolved.approval_id)
                {
                    question.withdraw(&format!("(resolved: {})", resolved.decided_by), out)?;
                }
            }
            Event::ToolStarted(started) => {
                if self.show_progress {
                    self.progress = Some(Progress {
                        call_id: started.call_id.clone(),
                        tool: started.tool.clone(),
                        started: Instant::now(),
                        output_bytes: 0,
                        frame: 0,
                        ticks: progress_ticks(),
                    });
                }
            }
            Event::ToolOutput(output) => {
                if let Some(progress) = &mut self.progress
                    && progress.call_id == output.call_id
                {
                    progress.output_bytes += output.data.len() as u64;
                }
            }
            Event::ToolFinished(_) => self.stop_progress(out)?,
            Event::RunFinished(finished) => {
                self.stop_progress(out)?;
                if let Some(question) = self.question.take() {
                    question.withdraw("(the run is over)", out)?;
                }
                return Ok(Some(exit_code::for_raw_stop_reason(finished.reason)));
            }
            Event::RunResumed(_) => {
                // The daemon restarted: a tool that was running, or a request that was
                // waiting, was lost with it; what the run does again comes as new events.
                self.stop_progress(out)?;
                self.waiting = None;
                if let Some(question) = self.question.take() {
                    question.withdraw("(the daemon restarted)", out)?;
                }
            }
            Event::RunStarted(_)
            | Event::StepStarted(_)
            | Event::ContextBuilt(_)
            | Event::ModelText(_)
            | Event::ModelRetry(_)
            | Event::ToolCallProposed(_)
            | Event::ToolCallRejected(_)
            | Event::UserInput(_)
            | Event::DecisionRejected(_)
            | Event::Changes(_)
            | Event::ContextCompacted(_)
            | Event::TextDelta(_)
            | Event::ToolCallDelta(_) => {}
        }
        Ok(None)
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
        match question.take_line(line, input, AtEnd::Deny, out)? {
            Answered::Waiting => Ok(None),
            Answered::Decided(decision) => {
                self.answered = Some(decision.approval_id.clone());
                self.question = None;
                Ok(Some(decision))
            }
            // Not with `AtEnd::Deny`; should it come, the request is left unanswered.
            Answered::StopAnswering => {
                self.question = None;
                Ok(None)
            }
        }
    }

    fn on_interrupt<O: Write, E: Write>(
        &mut self,
        run_id: &str,
        last_seq: u64,
        out: &mut Output<O, E>,
    ) -> Result<Interrupted, CliError> {
        match self.options.on_interrupt {
            OnInterrupt::Detach => {
                out.line(&format!(
                    "airlock: detached from {run_id} after event {last_seq}; it goes on in the \
                     daemon"
                ))?;
                Ok(Interrupted::Exit(exit_code::INTERRUPTED))
            }
            OnInterrupt::Cancel if self.cancelling => {
                out.line("airlock: interrupted")?;
                Ok(Interrupted::Exit(exit_code::INTERRUPTED))
            }
            OnInterrupt::Cancel => {
                self.cancelling = true;
                if let Some(question) = self.question.take() {
                    question.withdraw("(cancelling)", out)?;
                }
                Ok(Interrupted::Cancel)
            }
        }
    }

    /// Asks about the waiting request, when there is one to ask about and nothing else is
    /// being asked.
    fn ask_if_due<O: Write, E: Write>(
        &mut self,
        last_seq: u64,
        out: &mut Output<O, E>,
    ) -> Result<(), CliError> {
        if self.question.is_some() || self.cancelling || last_seq < self.options.answer_from {
            return Ok(());
        }
        let Some(request) = &self.waiting else {
            return Ok(());
        };
        if self.answered.as_deref() == Some(request.approval_id.as_str()) {
            return Ok(());
        }
        let request = request.clone();
        let input = self.input.get_or_insert_with(Input::stdin);
        // The request went to stdout with the rest of the run; a person answering at the
        // terminal while stdout goes elsewhere must see what they approve.
        if input.is_terminal() && out.stderr_is_terminal() && !out.stdout_is_terminal() {
            out.stderr_lines(&approval_lines(&request, now_ms(), false))?;
        }
        self.question = Some(Question::ask(request, RUN_PROMPT.to_owned(), input, out)?);
        Ok(())
    }

    fn draw_progress<O: Write, E: Write>(
        &mut self,
        out: &mut Output<O, E>,
    ) -> Result<(), CliError> {
        let Some(progress) = &mut self.progress else {
            return Ok(());
        };
        let elapsed = u64::try_from(progress.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let line = progress_line(
            &progress.tool,
            elapsed,
            progress.output_bytes,
            progress.frame,
        );
        progress.frame += 1;
        out.progress(&line)
    }

    fn stop_progress<O: Write, E: Write>(
        &mut self,
        out: &mut Output<O, E>,
    ) -> Result<(), CliError> {
        if self.progress.take().is_some() {
            out.clear_progress()?;
        }
        Ok(())
    }
}

fn progress_ticks() -> Interval {
    let mut ticks = tokio::time::interval_at(Instant::now() + PROGRESS_DELAY, PROGRESS_INTERVAL);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    ticks
}

/// The next redraw of the progress line; never, when no tool runs.
async fn tick(progress: &mut Option<Progress>) {
    match progress {
        Some(progress) => {
            progress.ticks.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// Unix milliseconds now, to count a request's time left from.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
        })
}

#[cfg(test)]
#[path = "follow_tests.rs"]
mod tests;
