//! Lines of standard input, read only while a question waits for them.
//!
//! Answers come from a person at a terminal or from a script's pipe (`printf 'y\n' | airlock
//! run …`). Reading blocks, so it happens on a thread of its own; the async side asks for one
//! line at a time and may give up on it (the question was answered elsewhere, or expired).
//! A line is read only while it is asked for, so that nothing typed or piped is consumed for a
//! question that is no longer asked: the thread waits for input with `poll(2)` in short slices
//! and stops waiting once the question is withdrawn. On a terminal, what was typed before a
//! question appeared is discarded when it is asked, so that a keystroke meant for one question
//! never answers the next.

use std::fs::File;
use std::io::{self, BufRead, BufReader, IsTerminal, Read};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use tokio::sync::oneshot;

/// How long the reading thread waits for input before it checks whether the line is still
/// wanted: short enough that a withdrawn question stops consuming input at once, as a person
/// counts time, long enough to cost nothing.
const POLL_SLICE_MS: libc::c_int = 100;

/// The longest line read; the rest of a longer one is skipped. An answer is a word and perhaps
/// a reason, and standard input may be any file, which must not be buffered without bound.
const MAX_LINE_BYTES: u64 = 64 * 1024;

/// Standard input, as a source of answer lines. A clone reads through the same thread, so
/// that one command's questions (a chat's messages, a run's approvals) share one buffer and
/// take the lines in order.
#[derive(Clone)]
pub struct Input {
    /// `None` when standard input cannot be read at all (closed): every line is then the end
    /// of the input.
    requests: Option<mpsc::Sender<LineRequest>>,
    terminal: bool,
}

struct LineRequest {
    withdrawn: Arc<AtomicBool>,
    reply: oneshot::Sender<io::Result<Option<String>>>,
}

/// A line asked for and not read yet. Dropping it withdraws the request.
pub struct PendingLine {
    reply: oneshot::Receiver<io::Result<Option<String>>>,
    withdrawn: Arc<AtomicBool>,
}

impl Input {
    /// Standard input, read by a thread started here.
    pub fn stdin() -> Self {
        let stdin = io::stdin();
        let terminal = stdin.is_terminal();
        // A descriptor of our own for the same open file: reads through it consume the same
        // input, and its buffer is ours to look at (the standard one is not).
        let requests = match stdin.as_fd().try_clone_to_owned() {
            Ok(fd) => {
                let (requests, incoming) = mpsc::channel();
                let reader = BufReader::new(File::from(fd));
                let spawned = std::thread::Builder::new()
                    .name("airlock-stdin".to_owned())
                    .spawn(move || serve(reader, &incoming, terminal));
                spawned.ok().map(|_| requests)
            }
            Err(_) => None,
        };
        Self { requests, terminal }
    }

    /// Whether a person types the answers (standard input is a terminal).
    pub fn is_terminal(&self) -> bool {
        self.terminal
    }

    /// Asks for the next line.
    pub fn read_line(&self) -> PendingLine {
        let (reply, receiver) = oneshot::channel();
        let withdrawn = Arc::new(AtomicBool::new(false));
        let request = LineRequest {
            withdrawn: withdrawn.clone(),
            reply,
        };
        match &self.requests {
            Some(requests) => {
                if let Err(mpsc::SendError(request)) = requests.send(request) {
                    // The thread is gone (it only stops when input cannot be read): the end.
                    let _ = request.reply.send(Ok(None));
                }
            }
            None => {
                let _ = request.reply.send(Ok(None));
            }
        }
        PendingLine {
            reply: receiver,
            withdrawn,
        }
    }
}

#[cfg(test)]
impl Input {
    /// Input that yields `bytes` then ends, through the same thread as standard input.
    pub fn from_bytes(bytes: &[u8]) -> io::Result<Self> {
        let (reader, mut writer) = io::pipe()?;
        io::Write::write_all(&mut writer, bytes)?;
        drop(writer);
        let (requests, incoming) = mpsc::channel();
        let reader = BufReader::new(File::from(std::os::fd::OwnedFd::from(reader)));
        std::thread::spawn(move || serve(reader, &incoming, false));
        Ok(Self {
            requests: Some(requests),
            terminal: false,
        })
    }

    /// Input that ends at once, as when standard input is closed.
    pub fn closed() -> Self {
        Self {
            requests: None,
            terminal: false,
        }
    }
}

impl PendingLine {
    /// The line without its line ending, `None` at the end of the input.
    pub async fn wait(&mut self) -> io::Result<Option<String>> {
        match (&mut self.reply).await {
            Ok(line) => line,
            // The thread dropped the request without answering: it cannot read any more.
            Err(_) => Ok(None),
        }
    }
}

impl Drop for PendingLine {
    fn drop(&mut self) {
        self.withdrawn.store(true, Ordering::Relaxed);
    }
}

/// The reading thread: one line per request, in order, for as long as requests come.
fn serve(mut reader: BufReader<File>, requests: &mpsc::Receiver<LineRequest>, terminal: bool) {
    for request in requests {
        if terminal {
            discard_typed_ahead(reader.get_ref());
        }
        let line = match wait_for_input(&reader, &request.withdrawn) {
            Ok(true) => read_line(&mut reader),
            Ok(false) => continue,
            Err(error) => Err(error),
        };
        let _ = request.reply.send(line);
    }
}

/// Drops what was typed at the terminal and not read yet.
fn discard_typed_ahead(file: &File) {
    // SAFETY: tcflush takes a descriptor and a constant and touches no memory of ours; the
    // descriptor is owned by `file`, open for the duration of the call. Failure (not a
    // terminal after all) leaves the input as it is, which is harmless.
    unsafe {
        libc::tcflush(file.as_raw_fd(), libc::TCIFLUSH);
    }
}

/// Waits until a read will not block (`true`), or until the line is no longer wanted
/// (`false`).
fn wait_for_input(reader: &BufReader<File>, withdrawn: &AtomicBool) -> io::Result<bool> {
    loop {
        if withdrawn.load(Ordering::Relaxed) {
            return Ok(false);
        }
        if !reader.buffer().is_empty() {
            return Ok(true);
        }
        let mut descriptor = libc::pollfd {
            fd: reader.get_ref().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `descriptor` is one live, writable pollfd, and the count passed is 1.
        let ready = unsafe { libc::poll(&mut descriptor, 1, POLL_SLICE_MS) };
        match ready {
            0 => continue,
            // Readable, or hung up or failed: either way the read reports it without blocking.
            1.. => return Ok(true),
            _ => {
                let error = io::Error::last_os_error();
                if error.kind() != io::ErrorKind::Interrupted {
                    return Err(error);
                }
            }
        }
    }
}

/// One line without its line ending (`\n` or `\r\n`), cut to [`MAX_LINE_BYTES`]; `None` at
/// the end of the input. Bytes that are not UTF-8 are replaced.
fn read_line(reader: &mut impl BufRead) -> io::Result<Option<String>> {
    let mut bytes = Vec::new();
    let read = reader
        .by_ref()
        .take(MAX_LINE_BYTES)
        .read_until(b'\n', &mut bytes)?;
    if read == 0 {
        return Ok(None);
    }
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
    } else if read as u64 == MAX_LINE_BYTES {
        reader.skip_until(b'\n')?;
    }
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(mut input: &[u8]) -> anyhow::Result<Vec<Option<String>>> {
        let mut lines = Vec::new();
        loop {
            let line = read_line(&mut input)?;
            let end = line.is_none();
            lines.push(line);
            if end {
                return Ok(lines);
            }
        }
    }

    #[test]
    fn lines_lose_their_endings_and_the_end_is_none() -> anyhow::Result<()> {
        assert_eq!(
            lines(b"y\r\nn too risky\n\nlast")?,
            [
                Some("y".to_owned()),
                Some("n too risky".to_owned()),
                Some(String::new()),
                Some("last".to_owned()),
                None
            ]
        );
        assert_eq!(lines(b"")?, [None]);
        Ok(())
    }

    #[test]
    fn an_overlong_line_is_cut_and_the_next_line_is_read_whole() -> anyhow::Result<()> {
        let limit = usize::try_from(MAX_LINE_BYTES)?;
        let mut input = vec![b'x'; limit + 100];
        input.extend_from_slice(b"\ny\n");
        let read = lines(&input)?;
        assert_eq!(read.len(), 3);
        assert_eq!(read[0].as_ref().map(String::len), Some(limit));
        assert_eq!(read[1].as_deref(), Some("y"));
        Ok(())
    }

    #[test]
    fn bytes_that_are_not_utf8_are_replaced() -> anyhow::Result<()> {
        assert_eq!(lines(b"n \xff\n")?[0].as_deref(), Some("n \u{fffd}"));
        Ok(())
    }

    #[tokio::test]
    async fn lines_are_served_in_order_from_a_pipe_then_the_end() -> anyhow::Result<()> {
        let input = Input::from_bytes(b"y\nn\n")?;
        assert_eq!(input.read_line().wait().await?.as_deref(), Some("y"));
        assert_eq!(input.read_line().wait().await?.as_deref(), Some("n"));
        assert_eq!(input.read_line().wait().await?, None);
        assert_eq!(input.read_line().wait().await?, None);
        Ok(())
    }

    #[tokio::test]
    async fn a_withdrawn_request_consumes_nothing() -> anyhow::Result<()> {
        let (reader, mut writer) = std::io::pipe()?;
        let (requests, incoming) = mpsc::channel();
        let reader = BufReader::new(File::from(std::os::fd::OwnedFd::from(reader)));
        std::thread::spawn(move || serve(reader, &incoming, false));
        let input = Input {
            requests: Some(requests),
            terminal: false,
        };
        // Asked, then given up on before anything was written.
        drop(input.read_line());
        // Longer than a poll slice, so that the thread has seen the withdrawal.
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        std::io::Write::write_all(&mut writer, b"a\n")?;
        let mut next = input.read_line();
        let line = tokio::time::timeout(std::time::Duration::from_secs(5), next.wait()).await?;
        assert_eq!(line?.as_deref(), Some("a"));
        Ok(())
    }

    #[tokio::test]
    async fn without_standard_input_every_line_is_the_end() -> anyhow::Result<()> {
        let input = Input::closed();
        assert_eq!(input.read_line().wait().await?, None);
        Ok(())
    }
}
