//! Server-sent events, as the streaming model APIs send them: bytes in, whole events out.
//!
//! Follows the event stream format of the HTML standard: lines end with LF, CRLF or CR;
//! `data:` lines accumulate (joined by LF), `event:` names the event, lines starting with
//! `:` are comments, a blank line dispatches. `id:` and `retry:` concern reconnection, which a
//! model call never does, so they are ignored.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SseEvent {
    /// The `event:` field; empty when the server sent none (OpenAI never does).
    pub event: String,
    pub data: String,
}

/// Turns chunks of a response body into events. Chunks may split lines anywhere.
#[derive(Debug, Default)]
pub(super) struct SseDecoder {
    /// Bytes of a line not yet terminated.
    partial: Vec<u8>,
    event: String,
    data: String,
    has_data: bool,
}

impl SseDecoder {
    /// Feeds `chunk`, returning the events it completes.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.partial.extend_from_slice(chunk);
        let mut events = Vec::new();
        let mut start = 0;
        while let Some(offset) = self.partial[start..]
            .iter()
            .position(|&b| b == b'\n' || b == b'\r')
        {
            let end = start + offset;
            let next = match self.partial[end] {
                b'\r' => match self.partial.get(end + 1) {
                    Some(b'\n') => end + 2,
                    Some(_) => end + 1,
                    // A CR at the end of the chunk may be the first half of a CRLF.
                    None => break,
                },
                _ => end + 1,
            };
            let line = String::from_utf8_lossy(&self.partial[start..end]).into_owned();
            if let Some(event) = self.line(&line) {
                events.push(event);
            }
            start = next;
        }
        self.partial.drain(..start);
        events
    }

    /// Ends the stream: a last line without its terminator still counts, and an event whose
    /// blank line never came is dispatched.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let rest = std::mem::take(&mut self.partial);
        let rest = String::from_utf8_lossy(&rest);
        let rest = rest.strip_suffix('\r').unwrap_or(&rest);
        let mut dispatched = if rest.is_empty() {
            None
        } else {
            self.line(rest)
        };
        if dispatched.is_none() {
            dispatched = self.line("");
        }
        dispatched
    }

    fn line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            let data = std::mem::take(&mut self.data);
            if !std::mem::take(&mut self.has_data) {
                return None;
            }
            return Some(SseEvent { event, data });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => value.clone_into(&mut self.event),
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
        }
    }

    #[test]
    fn events_split_across_chunks_are_reassembled() {
        let stream = "event: message_start\ndata: {\"a\":1}\n\n: keep-alive\n\ndata: x\r\ndata: y\r\n\r\nevent: ping\rdata: {}\r\r";
        let mut decoder = SseDecoder::default();
        let mut whole = decoder.push(stream.as_bytes());
        whole.extend(decoder.finish());
        let expected = vec![
            event("message_start", "{\"a\":1}"),
            event("", "x\ny"),
            event("ping", "{}"),
        ];
        assert_eq!(whole, expected);
        // Every split point, including between CR and LF, gives the same events.
        for split in 0..stream.len() {
            let mut decoder = SseDecoder::default();
            let mut events = decoder.push(&stream.as_bytes()[..split]);
            events.extend(decoder.push(&stream.as_bytes()[split..]));
            events.extend(decoder.finish());
            assert_eq!(events, expected, "split at {split}");
        }
    }

    #[test]
    fn an_unterminated_last_event_is_dispatched_at_the_end() {
        let mut decoder = SseDecoder::default();
        assert!(decoder.push(b"data: [DONE]").is_empty());
        assert_eq!(decoder.finish(), Some(event("", "[DONE]")));
        assert_eq!(decoder.finish(), None);
    }

    #[test]
    fn fields_without_space_or_value_and_unknown_fields() {
        let mut decoder = SseDecoder::default();
        let events =
            decoder.push(b"data:tight\nid: 7\nretry: 10\nevent\ndata\n\nevent: lonely\n\n");
        assert_eq!(events, vec![event("", "tight\n")]);
        assert_eq!(decoder.finish(), None);
    }
}
