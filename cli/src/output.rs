//! Where `airlock` writes. Results go to stdout, so that they can be piped; the tool's log, the
//! status line, questions, progress and errors go to stderr. Text bound for a terminal has its
//! control characters escaped (it may come from an untrusted tool or model), and a closed pipe
//! means the reader has seen enough, which is not an error.
//!
//! On a terminal, a progress line is redrawn in place on stderr; it is erased before anything
//! else is written, so that it never mixes with other output. A question left open on stderr
//! (its answer never came) is ended before the next line of output. Text streamed to stdout
//! (a model's answer as it arrives) leaves its line open; the next output ends that line
//! first, on stdout, and on stderr too when both are terminals (the same screen, most likely).

use std::fmt::Display;
use std::io::{self, IsTerminal, Write};
use std::os::fd::AsRawFd;

use airlock_render::{StyledLine, escape_control_bytes, paint};

use crate::error::CliError;

/// Line width for tables when neither `COLUMNS` nor a terminal says otherwise (output piped to
/// a file or a program): wide enough for the fixed columns and a useful description, narrow
/// enough to read in a log.
const DEFAULT_WIDTH: usize = 120;

/// The two output streams and what is known about them.
pub struct Output<O, E> {
    stdout: O,
    stderr: E,
    stdout_is_terminal: bool,
    stderr_is_terminal: bool,
    /// A tool's log, or an unanswered question, may stop mid-line; airlock's own lines must
    /// start on a line of their own.
    stderr_mid_line: bool,
    /// Streamed text stopped mid-line on stdout.
    stdout_mid_line: bool,
    /// A progress line is on the terminal, to be erased before anything else is written.
    progress_shown: bool,
    /// Whether stdout takes colours: a terminal, without `NO_COLOR`, other than `TERM=dumb`.
    colour: bool,
    width: usize,
}

/// Erases the terminal line the cursor is on and returns to its start.
const ERASE_LINE: &str = "\r\x1b[2K";

impl Output<io::Stdout, io::Stderr> {
    /// The process's stdout and stderr. The table width is `COLUMNS` when set, else the
    /// terminal's width when stdout is one, else [`DEFAULT_WIDTH`].
    pub fn detect() -> Self {
        let stdout = io::stdout();
        let stderr = io::stderr();
        let stdout_is_terminal = stdout.is_terminal();
        let width = std::env::var("COLUMNS")
            .ok()
            .and_then(|columns| columns.trim().parse().ok())
            .filter(|&columns: &usize| columns > 0)
            .or_else(|| {
                stdout_is_terminal
                    .then(|| terminal_columns(&stdout))
                    .flatten()
            })
            .unwrap_or(DEFAULT_WIDTH);
        Self {
            colour: stdout_is_terminal && colours_wanted(),
            stdout_is_terminal,
            stderr_is_terminal: stderr.is_terminal(),
            stdout,
            stderr,
            stderr_mid_line: false,
            stdout_mid_line: false,
            progress_shown: false,
            width,
        }
    }
}

/// The conventions of <https://no-color.org> and of terminals that cannot show colours.
fn colours_wanted() -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
    let dumb = std::env::var_os("TERM").is_some_and(|term| term == "dumb");
    !no_color && !dumb
}

/// The width of the terminal behind `stdout`, when the kernel knows it.
fn terminal_columns(stdout: &io::Stdout) -> Option<usize> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` through the pointer, which points at a live,
    // writable local of that type; the descriptor is stdout's, open for the whole process.
    let status = unsafe { libc::ioctl(stdout.as_raw_fd(), libc::TIOCGWINSZ, &mut size) };
    (status == 0 && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

impl<O: Write, E: Write> Output<O, E> {
    #[cfg(test)]
    pub fn new(stdout: O, stderr: E, width: usize, terminals: bool) -> Self {
        Self {
            stdout,
            stderr,
            stdout_is_terminal: terminals,
            stderr_is_terminal: terminals,
            stderr_mid_line: false,
            stdout_mid_line: false,
            progress_shown: false,
            colour: false,
            width,
        }
    }

    #[cfg(test)]
    pub fn with_colour(mut self) -> Self {
        self.colour = true;
        self
    }

    #[cfg(test)]
    pub fn into_inner(self) -> (O, E) {
        (self.stdout, self.stderr)
    }

    /// How wide a table line may be.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Whether stderr is a terminal: where progress is shown and questions are typed at.
    pub fn stderr_is_terminal(&self) -> bool {
        self.stderr_is_terminal
    }

    /// Whether stdout is a terminal, where a person reads what is printed.
    pub fn stdout_is_terminal(&self) -> bool {
        self.stdout_is_terminal
    }

    /// Writes `text` to stdout as it is.
    pub fn stdout(&mut self, text: &str) -> Result<(), CliError> {
        self.before_output()?;
        write_to(&mut self.stdout, text.as_bytes(), self.stdout_is_terminal)
    }

    /// Writes bytes to stdout as they are (a tool's raw output); on a terminal, with its
    /// control characters escaped like any other untrusted text.
    pub fn stdout_bytes(&mut self, bytes: &[u8]) -> Result<(), CliError> {
        self.before_output()?;
        write_to(&mut self.stdout, bytes, self.stdout_is_terminal)
    }

    /// Writes lines to stdout, coloured when stdout takes colours.
    pub fn stdout_lines(&mut self, lines: &[StyledLine]) -> Result<(), CliError> {
        if lines.is_empty() {
            return Ok(());
        }
        self.before_output()?;
        // `paint` escapes what the terminal must not interpret, then adds the colours.
        let text = paint(lines, self.stdout_is_terminal, self.colour);
        write_to(&mut self.stdout, text.as_bytes(), false)
    }

    /// Writes streamed text to stdout as it comes, without ending its line; on a terminal, with
    /// its control characters escaped.
    pub fn stdout_stream(&mut self, text: &str) -> Result<(), CliError> {
        if text.is_empty() {
            return Ok(());
        }
        self.clear_progress()?;
        if self.stderr_mid_line && self.stderr_is_terminal && self.stdout_is_terminal {
            self.stderr_mid_line = false;
            write_to(&mut self.stderr, b"\n", false)?;
        }
        self.stdout_mid_line = !text.ends_with('\n');
        write_to(&mut self.stdout, text.as_bytes(), self.stdout_is_terminal)
    }

    /// Ends the line streamed text left open, if it did.
    pub fn end_stream(&mut self) -> Result<(), CliError> {
        if !std::mem::take(&mut self.stdout_mid_line) {
            return Ok(());
        }
        write_to(&mut self.stdout, b"\n", false)
    }

    /// Before airlock writes to stderr: on a screen that stdout shares, the line streamed text
    /// left open is ended, so that the two do not run together (nor a progress line erase it).
    fn before_stderr(&mut self) -> Result<(), CliError> {
        if self.stdout_is_terminal && self.stderr_is_terminal {
            self.end_stream()?;
        }
        Ok(())
    }

    /// Writes lines to stderr, without colours.
    pub fn stderr_lines(&mut self, lines: &[StyledLine]) -> Result<(), CliError> {
        for line in lines {
            self.line(&line.text)?;
        }
        Ok(())
    }

    /// Writes a question to stderr and leaves the cursor after it, on the same line.
    pub fn prompt(&mut self, question: &str) -> Result<(), CliError> {
        self.clear_progress()?;
        self.before_stderr()?;
        let mut text = String::with_capacity(question.len() + 1);
        if std::mem::take(&mut self.stderr_mid_line) {
            text.push('\n');
        }
        text.push_str(question);
        self.stderr_mid_line = true;
        write_to(&mut self.stderr, text.as_bytes(), self.stderr_is_terminal)
    }

    /// Ends the line of the question just answered. A terminal has echoed the answer and its
    /// line break already; an answer read from a pipe is echoed here, `echo`, so that a log
    /// shows what was answered.
    pub fn answered(&mut self, echo: Option<&str>) -> Result<(), CliError> {
        if !std::mem::take(&mut self.stderr_mid_line) {
            return Ok(());
        }
        match echo {
            Some(answer) => {
                let text = format!("{answer}\n");
                write_to(&mut self.stderr, text.as_bytes(), self.stderr_is_terminal)
            }
            None => Ok(()),
        }
    }

    /// Draws `text` as the progress line, in place of the previous one. Only on a terminal,
    /// and never over an open question.
    pub fn progress(&mut self, text: &str) -> Result<(), CliError> {
        if !self.stderr_is_terminal || self.stderr_mid_line {
            return Ok(());
        }
        self.before_stderr()?;
        let escaped = escape_control_bytes(text.as_bytes());
        let mut line = ERASE_LINE.as_bytes().to_vec();
        line.extend_from_slice(&escaped);
        self.progress_shown = true;
        write_to(&mut self.stderr, &line, false)
    }

    /// Erases the progress line, if one is shown.
    pub fn clear_progress(&mut self) -> Result<(), CliError> {
        if !std::mem::take(&mut self.progress_shown) {
            return Ok(());
        }
        write_to(&mut self.stderr, ERASE_LINE.as_bytes(), false)
    }

    /// Before a line of output: the progress line goes, and a question left open on the
    /// terminal gets its line ended, so that the output does not continue it.
    fn before_output(&mut self) -> Result<(), CliError> {
        self.clear_progress()?;
        self.end_stream()?;
        if self.stderr_mid_line && self.stderr_is_terminal && self.stdout_is_terminal {
            self.stderr_mid_line = false;
            write_to(&mut self.stderr, b"\n", false)?;
        }
        Ok(())
    }

    /// Writes a chunk of a tool's log to stderr, as the tool wrote it.
    pub fn tool_log(&mut self, bytes: &[u8]) -> Result<(), CliError> {
        self.clear_progress()?;
        self.before_stderr()?;
        if let Some(&last) = bytes.last() {
            self.stderr_mid_line = last != b'\n';
        }
        write_to(&mut self.stderr, bytes, self.stderr_is_terminal)
    }

    /// Writes one line of airlock's own to stderr.
    pub fn line(&mut self, text: &str) -> Result<(), CliError> {
        self.clear_progress()?;
        self.before_stderr()?;
        let mut line = String::with_capacity(text.len() + 2);
        if std::mem::take(&mut self.stderr_mid_line) {
            line.push('\n');
        }
        line.push_str(text);
        line.push('\n');
        write_to(&mut self.stderr, line.as_bytes(), self.stderr_is_terminal)
    }

    /// Ends the tool's last log line if the tool left it open, and the line of streamed text,
    /// so that the shell prompt that follows starts on a line of its own.
    pub fn finish(&mut self) {
        // Cosmetic, and the last writes: a failure here has nobody to be reported to.
        let _ = self.clear_progress();
        let _ = self.end_stream();
        if std::mem::take(&mut self.stderr_mid_line) {
            let _ = write_to(&mut self.stderr, b"\n", self.stderr_is_terminal);
        }
    }

    /// Reports a failure as `airlock: <error>` on stderr.
    pub fn error(&mut self, error: &dyn Display) {
        // This is the last thing written: if even stderr is gone, there is nobody to tell.
        let _ = self.line(&format!("airlock: {error}"));
    }
}

fn write_to(target: &mut impl Write, bytes: &[u8], is_terminal: bool) -> Result<(), CliError> {
    let bytes = if is_terminal {
        escape_control_bytes(bytes)
    } else {
        bytes.into()
    };
    match target.write_all(&bytes).and_then(|()| target.flush()) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(error) => Err(CliError::Output(error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(output: Output<Vec<u8>, Vec<u8>>) -> (String, String) {
        let (stdout, stderr) = output.into_inner();
        (
            String::from_utf8_lossy(&stdout).into_owned(),
            String::from_utf8_lossy(&stderr).into_owned(),
        )
    }

    #[test]
    fn own_lines_never_join_an_unfinished_tool_log_line() -> anyhow::Result<()> {
        let mut output = Output::new(Vec::new(), Vec::new(), 80, false);
        output.tool_log(b"progress 50%")?;
        output.line("status: OK")?;
        output.tool_log(b"done\n")?;
        output.line("next")?;
        assert_eq!(captured(output).1, "progress 50%\nstatus: OK\ndone\nnext\n");
        Ok(())
    }

    #[test]
    fn finishing_ends_an_open_log_line_once() -> anyhow::Result<()> {
        let mut output = Output::new(Vec::new(), Vec::new(), 80, false);
        output.tool_log(b"partial")?;
        output.finish();
        output.finish();
        assert_eq!(captured(output).1, "partial\n");

        let mut output = Output::new(Vec::new(), Vec::new(), 80, false);
        output.tool_log(b"whole\n")?;
        output.finish();
        assert_eq!(captured(output).1, "whole\n");
        Ok(())
    }

    #[test]
    fn terminals_get_control_characters_escaped_pipes_do_not() -> anyhow::Result<()> {
        let mut terminal = Output::new(Vec::new(), Vec::new(), 80, true);
        terminal.stdout("a\x1b[2Jb\n")?;
        terminal.tool_log(b"\x1b]0;title\x07\n")?;
        assert_eq!(
            captured(terminal),
            ("a\\x1b[2Jb\n".to_owned(), "\\x1b]0;title\\x07\n".to_owned())
        );

        let mut pipe = Output::new(Vec::new(), Vec::new(), 80, false);
        pipe.stdout("a\x1b[2Jb\n")?;
        assert_eq!(captured(pipe).0, "a\x1b[2Jb\n");
        Ok(())
    }

    #[test]
    fn raw_bytes_reach_a_pipe_untouched() -> anyhow::Result<()> {
        let bytes = b"\x00\xff\x1b[2J not utf-8 \xc3";
        let mut pipe = Output::new(Vec::new(), Vec::new(), 80, false);
        pipe.stdout_bytes(bytes)?;
        assert_eq!(pipe.into_inner().0, bytes);
        let mut terminal = Output::new(Vec::new(), Vec::new(), 80, true);
        terminal.stdout_bytes(bytes)?;
        assert_eq!(terminal.into_inner().0, b"\\x00\xff\\x1b[2J not utf-8 \xc3");
        Ok(())
    }

    #[test]
    fn errors_are_prefixed_with_the_program_name() {
        let mut output = Output::new(Vec::new(), Vec::new(), 80, false);
        output.error(&"unknown tool 'nope'");
        assert_eq!(captured(output).1, "airlock: unknown tool 'nope'\n");
    }

    #[test]
    fn progress_is_erased_before_any_other_output() -> anyhow::Result<()> {
        let mut output = Output::new(Vec::new(), Vec::new(), 80, true);
        output.progress("⠋ grep running, 1 ms")?;
        output.progress("⠙ grep running, 2 ms")?;
        output.stdout("result\n")?;
        output.line("done")?;
        let (stdout, stderr) = captured(output);
        assert_eq!(stdout, "result\n");
        assert_eq!(
            stderr,
            "\r\x1b[2K⠋ grep running, 1 ms\r\x1b[2K⠙ grep running, 2 ms\r\x1b[2Kdone\n"
        );
        Ok(())
    }

    #[test]
    fn progress_is_never_drawn_on_a_pipe() -> anyhow::Result<()> {
        let mut output = Output::new(Vec::new(), Vec::new(), 80, false);
        output.progress("⠋ grep running, 1 ms")?;
        output.line("done")?;
        assert_eq!(captured(output).1, "done\n");
        Ok(())
    }

    #[test]
    fn a_piped_answer_is_echoed_after_its_question() -> anyhow::Result<()> {
        let mut output = Output::new(Vec::new(), Vec::new(), 80, false);
        output.prompt("approve? ")?;
        output.answered(Some("y"))?;
        output.prompt("approve? ")?;
        output.line("airlock: cancelled")?;
        assert_eq!(
            captured(output).1,
            "approve? y\napprove? \nairlock: cancelled\n"
        );
        Ok(())
    }

    #[test]
    fn output_after_an_open_question_on_a_terminal_starts_a_new_line() -> anyhow::Result<()> {
        let mut output = Output::new(Vec::new(), Vec::new(), 80, true);
        output.prompt("approve? ")?;
        output.stdout("✓ approved once (approver)\n")?;
        // The terminal echoed the answer that was never needed; nothing more to end.
        output.answered(None)?;
        assert_eq!(
            captured(output),
            (
                "✓ approved once (approver)\n".to_owned(),
                "approve? \n".to_owned()
            )
        );
        Ok(())
    }

    #[test]
    fn styled_lines_are_coloured_only_when_colours_are_on() -> anyhow::Result<()> {
        use airlock_render::Tone;
        let lines = [StyledLine::new(Tone::Added, "+new \x1b[2J")];
        let mut plain = Output::new(Vec::new(), Vec::new(), 80, true);
        plain.stdout_lines(&lines)?;
        assert_eq!(captured(plain).0, "+new \\x1b[2J\n");
        let mut coloured = Output::new(Vec::new(), Vec::new(), 80, true).with_colour();
        coloured.stdout_lines(&lines)?;
        assert_eq!(captured(coloured).0, "\x1b[32m+new \\x1b[2J\x1b[0m\n");
        let mut pipe = Output::new(Vec::new(), Vec::new(), 80, false);
        pipe.stdout_lines(&lines)?;
        assert_eq!(captured(pipe).0, "+new \x1b[2J\n");
        Ok(())
    }

    #[test]
    fn streamed_text_keeps_its_line_open_until_the_next_output() -> anyhow::Result<()> {
        let mut pipe = Output::new(Vec::new(), Vec::new(), 80, false);
        pipe.stdout_stream("model: Hel")?;
        pipe.stdout_stream("lo")?;
        // A pipe's stdout is not the screen stderr is on: airlock's line leaves it alone.
        pipe.line("note")?;
        pipe.stdout("→ read_file\n")?;
        pipe.stdout_stream("model: done")?;
        pipe.finish();
        assert_eq!(
            captured(pipe),
            (
                "model: Hello\n→ read_file\nmodel: done\n".to_owned(),
                "note\n".to_owned()
            )
        );

        // On one screen, a line on stderr starts below the streamed text.
        let mut terminal = Output::new(Vec::new(), Vec::new(), 80, true);
        terminal.stdout_stream("model: Hel")?;
        terminal.line("airlock: cancelling run_1")?;
        terminal.end_stream()?;
        terminal.stdout_stream("model: again")?;
        terminal.end_stream()?;
        terminal.end_stream()?;
        assert_eq!(
            captured(terminal),
            (
                "model: Hel\nmodel: again\n".to_owned(),
                "airlock: cancelling run_1\n".to_owned()
            )
        );
        Ok(())
    }

    struct ClosedPipe;

    impl Write for ClosedPipe {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_pipe_is_not_an_error_but_a_full_disk_is() {
        let mut output = Output::new(ClosedPipe, Vec::new(), 80, false);
        assert!(output.stdout("ignored").is_ok());

        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::ErrorKind::StorageFull.into())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut output = Output::new(Full, Vec::new(), 80, false);
        let Err(error) = output.stdout("lost") else {
            panic!("a failed write was ignored");
        };
        assert_eq!(error.exit_code(), airlock_client::exit_code::IO_ERROR);
    }
}
