//! Traces: the engineering record of a run, as spans — run → step → context build, model
//! call, validation, permission decision, tool execution — with timings, tokens, argument
//! digests, approval outcomes, errors and resource use. An ended span goes to the run's own
//! sink (the run log, which stores it with the run's next event, in the same transaction:
//! `Agent.GetTrace` reads them) and at once to an exporter when one is configured
//! (`telemetry::otlp`).
//! A span in progress is a [`Span`]: it ends when it is dropped, so no path can leave one
//! open.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use airlock_proto::v1 as pb;
use sha2::{Digest, Sha256};

/// Where finished spans go: a run's log, an OTLP collector.
pub trait SpanSink: Send + Sync {
    /// Takes a finished span; must not block.
    fn export(&self, span: &pb::Span);
}

/// Where the spans of every run go besides the run's own log.
pub struct Tracer {
    sink: Option<Arc<dyn SpanSink>>,
}

impl Tracer {
    pub fn new(sink: Option<Arc<dyn SpanSink>>) -> Tracer {
        Tracer { sink }
    }
}

/// The trace of one run.
#[derive(Clone)]
pub struct RunTrace {
    tracer: Arc<Tracer>,
    run: Arc<dyn SpanSink>,
    trace_id: String,
    root: String,
}

/// A span being timed. It ends, and is recorded, when dropped.
pub struct Span {
    trace: RunTrace,
    span_id: String,
    parent: String,
    name: &'static str,
    start: i64,
    attributes: Vec<pb::SpanAttribute>,
    error: Option<String>,
}

/// The longest attribute key, value or error message a span keeps (bytes), as OpenTelemetry
/// SDKs' attribute value length limit does: what a span carries comes in part from tools (a
/// hosted server's error text, a refused host's name), and a span is stored with its run and
/// exported in batches, so its size must not follow theirs.
const MAX_ATTRIBUTE_BYTES: usize = 4096;
/// The most attributes a span keeps: a tool span has a dozen and one per host contacted.
const MAX_ATTRIBUTES: usize = 128;

/// `text` cut to [`MAX_ATTRIBUTE_BYTES`] on a character boundary, marked when cut.
fn bounded(mut text: String) -> String {
    if text.len() > MAX_ATTRIBUTE_BYTES {
        let mut end = MAX_ATTRIBUTE_BYTES - '…'.len_utf8();
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

pub fn now_unix_nano() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// 16 hex digits: the form OpenTelemetry gives span ids.
fn span_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..16].to_owned()
}

impl RunTrace {
    /// The trace of run `run_id`, whose spans go to `run` (its log) and to the tracer's
    /// exporter.
    pub fn new(
        tracer: Arc<Tracer>,
        run: Arc<dyn SpanSink>,
        run_id: &str,
        trace_id: &str,
    ) -> RunTrace {
        // The root's id is derived from the run, so a resumed run keeps its tree.
        let root = hex::encode(&Sha256::digest(run_id.as_bytes())[..8]);
        RunTrace {
            tracer,
            run,
            trace_id: trace_id.to_owned(),
            root,
        }
    }

    /// The id of the run's span, the root of the tree.
    pub fn root_id(&self) -> &str {
        &self.root
    }

    /// The root span, started at `start_unix_nano`.
    pub fn root(&self, run_id: &str, start_unix_nano: i64) -> Span {
        let mut root = Span {
            trace: self.clone(),
            span_id: self.root.clone(),
            parent: String::new(),
            name: "run",
            start: start_unix_nano,
            attributes: Vec::new(),
            error: None,
        };
        root.set("run_id", run_id);
        root
    }

    pub fn start(&self, name: &'static str, parent: &str) -> Span {
        Span {
            trace: self.clone(),
            span_id: span_id(),
            parent: parent.to_owned(),
            name,
            start: now_unix_nano(),
            attributes: Vec::new(),
            error: None,
        }
    }

    fn record(&self, span: pb::Span) {
        if let Some(sink) = &self.tracer.sink {
            sink.export(&span);
        }
        self.run.export(&span);
    }
}

impl Span {
    pub fn id(&self) -> &str {
        &self.span_id
    }

    /// This span as a W3C `traceparent` (version 00, sampled): how a peer continues the
    /// trace under it.
    pub fn traceparent(&self) -> String {
        format!("00-{}-{}-01", self.trace.trace_id, self.span_id)
    }

    pub fn set(&mut self, key: &str, value: impl ToString) {
        if self.attributes.len() >= MAX_ATTRIBUTES {
            return;
        }
        self.attributes.push(pb::SpanAttribute {
            key: bounded(key.to_owned()),
            value: bounded(value.to_string()),
        });
    }

    pub fn fail(&mut self, message: impl Into<String>) {
        self.error = Some(bounded(message.into()));
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        let span = pb::Span {
            trace_id: self.trace.trace_id.clone(),
            span_id: std::mem::take(&mut self.span_id),
            parent_span_id: std::mem::take(&mut self.parent),
            name: self.name.to_owned(),
            start_unix_nano: self.start,
            end_unix_nano: now_unix_nano().max(self.start),
            attributes: std::mem::take(&mut self.attributes),
            status: if self.error.is_some() {
                pb::SpanStatus::Error
            } else {
                pb::SpanStatus::Ok
            } as i32,
            status_message: self.error.take().unwrap_or_default(),
        };
        self.trace.record(span);
    }
}

/// sha256 of a call's canonical arguments: what a trace records instead of the arguments.
pub fn arguments_digest(canonical: &str) -> String {
    hex::encode(Sha256::digest(canonical.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_keeps_bounded_values_whatever_a_tool_said() {
        assert_eq!(bounded("short".into()), "short");
        let long = bounded("é".repeat(10_000));
        assert!(
            long.len() <= MAX_ATTRIBUTE_BYTES && long.ends_with('…'),
            "{}",
            long.len()
        );
        let exact = "x".repeat(MAX_ATTRIBUTE_BYTES);
        assert_eq!(bounded(exact.clone()), exact);
    }
}
