//! `airlock trace RUN_ID`: a run's trace, as a tree of spans for people or as JSON.

use std::io::Write;

use airlock_client::exit_code;
use airlock_client::proto::Trace;
use airlock_render as render;
use clap::Args;

use crate::error::CliError;
use crate::output::Output;
use crate::server::Server;

#[derive(Debug, Args)]
pub struct TraceArgs {
    /// The run.
    run_id: String,

    /// Print the trace as one JSON document, every span and attribute as recorded.
    #[arg(long)]
    json: bool,
}

pub async fn run<O: Write, E: Write>(
    args: TraceArgs,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    let client = server.connect().await?;
    let trace = client.get_trace(&args.run_id).await?;
    print(&trace, args.json, out)?;
    Ok(exit_code::OK)
}

fn print<O: Write, E: Write>(
    trace: &Trace,
    json: bool,
    out: &mut Output<O, E>,
) -> Result<(), CliError> {
    if json {
        out.stdout(&render::trace_json(trace))
    } else if trace.spans.is_empty() {
        // Spans are recorded as they end, so a run that has just started has none; an empty
        // tree would look like a failure.
        out.line(&format!("run {} has no spans yet", trace.run_id))
    } else {
        out.stdout_lines(&render::trace_lines(trace))
    }
}

#[cfg(test)]
mod tests {
    use airlock_client::proto::{Span, SpanStatus};

    use super::*;

    fn captured(out: Output<Vec<u8>, Vec<u8>>) -> (String, String) {
        let (stdout, stderr) = out.into_inner();
        (
            String::from_utf8_lossy(&stdout).into_owned(),
            String::from_utf8_lossy(&stderr).into_owned(),
        )
    }

    fn trace(spans: Vec<Span>) -> Trace {
        Trace {
            run_id: "run_1".to_owned(),
            trace_id: "t1".to_owned(),
            spans,
        }
    }

    #[test]
    fn a_trace_without_spans_says_so_on_stderr_and_json_stays_json() -> anyhow::Result<()> {
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        print(&trace(Vec::new()), false, &mut out)?;
        assert_eq!(
            captured(out),
            (String::new(), "run run_1 has no spans yet\n".to_owned())
        );
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        print(&trace(Vec::new()), true, &mut out)?;
        let (stdout, stderr) = captured(out);
        let value: serde_json::Value = serde_json::from_str(&stdout)?;
        assert_eq!(value["spans"], serde_json::json!([]));
        assert!(stderr.is_empty());
        Ok(())
    }

    #[test]
    fn a_failed_span_is_red_on_a_colour_terminal() -> anyhow::Result<()> {
        let failed = Span {
            span_id: "s".to_owned(),
            name: "step".to_owned(),
            end_unix_nano: 1_000_000,
            status: SpanStatus::Error as i32,
            status_message: "MAX_STEPS: 8 steps".to_owned(),
            ..Span::default()
        };
        let mut out = Output::new(Vec::new(), Vec::new(), 80, true).with_colour();
        print(&trace(vec![failed]), false, &mut out)?;
        let (stdout, _) = captured(out);
        assert!(
            stdout.ends_with(
                "\x1b[1;31mstep 1  1.0 ms\x1b[0m\n\x1b[1;31m  ✗ MAX_STEPS: 8 steps\x1b[0m\n"
            ),
            "{stdout:?}"
        );
        Ok(())
    }
}
