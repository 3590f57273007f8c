//! Section 8, streamed answers (issue 18): how long a piece of a model's answer takes from
//! the model API to the client watching the run, and what streaming costs the loop's step.
//!
//! The model is an OpenAI Chat Completions API on loopback inside this process (a minimal
//! HTTP/1.1 server; the tests crate's fake is not a dependency of the benchmarks), so the
//! instant it writes a piece and the instant the gRPC client reads the matching
//! `ModelTextDelta` are read from the same clock:
//!
//! - *delta latency*: runs whose one answer is text in pieces, each piece its own write a
//!   few milliseconds after the last (as a model's tokens come), from just before the write
//!   to the delta's arrival at the client, the answer's first piece held until the client
//!   has an event of the run; against the gRPC health check's round trip on the same daemon,
//!   the floor any message to a client pays;
//! - *step cost*: section 3's run (24 calls of the no-op tool, then an answer) with the API
//!   answering each model call at once, on a daemon with `providers.stream = true` (the
//!   answer as server-sent events, each piece streamed to the client as a delta) and on one
//!   with `stream = false` (the answer as one JSON body), and the same run through the
//!   scripted model (no HTTP), run for run in turn; timed per step as section 3 does, with
//!   each stage's median read from the runs' traces.
//!
//! Both daemons are the release `airlockd` as its own process, as in the other gRPC
//! sections, with a `[providers]` table of their own (see [`providers_daemon`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use airlock_proto::v1 as pb;
use anyhow::{Context, bail};
use pb::agent_client::AgentClient;
use pb::run_event::Event;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic_health::pb::health_client::HealthClient;

use crate::Bench;
use crate::agent_loop::{Side, steps_in_turn};
use crate::client;
use crate::daemon::{Airlockd, AuthChannel};
use crate::fixtures::ECHO;
use crate::report::Report;
use crate::runs::{self, RunStream};
use crate::stats::Samples;

const SECTION: &str = "8 streaming";

/// The model the latency runs name: the API answers it with text in timed pieces.
const LATENCY_MODEL: &str = "latency";
/// The model the step runs name: the API answers it like the scripted model of section 3.
const STEPS_MODEL: &str = "steps";

/// Between two pieces of a latency run's answer: a real model's tokens come tens of
/// milliseconds apart; this is shorter, to measure more pieces in less time, yet long enough
/// that each piece is its own write and finds the daemon idle, as a model's token does.
const PIECE_PAUSE: Duration = Duration::from_millis(5);

/// How long the client waits for a run's next event before calling it stuck.
const EVENT_TIMEOUT: Duration = Duration::from_secs(120);

pub async fn run(bench: &Bench, report: &mut Report) -> anyhow::Result<()> {
    let pieces = bench.count(40, 5);
    let latency_runs = bench.count(5, 1);
    let health_calls = bench.count(500, 5);
    let tool_steps = u32::try_from(bench.count(24, 2))?;
    let step_runs = bench.count(20, 1);

    let api = ModelApi::new(pieces, tool_steps);
    let base_url = api.serve().await?;
    let on = providers_daemon(bench, &base_url, true, "streaming-on-").await?;
    let off = providers_daemon(bench, &base_url, false, "streaming-off-").await?;

    eprintln!("{SECTION}: delta latency, {latency_runs} answers × {pieces} pieces");
    let channel = on.channel().await?;
    // One unmeasured run warms the connection, the provider's HTTP client and the store.
    latency_run(bench, &channel, &api).await?;
    let mut latencies = Vec::with_capacity(pieces * latency_runs);
    for _ in 0..latency_runs {
        latencies.extend(latency_run(bench, &channel, &api).await?);
    }
    report.measured(
        SECTION,
        "delta",
        &format!(
            "text delta, model API's write → the client's ModelTextDelta (a piece every {} ms)",
            PIECE_PAUSE.as_millis()
        ),
        Samples::sequential(latencies),
    );
    report.note(
        "delta",
        &format!("{latency_runs} answers × {pieces} pieces"),
    );
    let health = client::load(
        &on,
        1,
        bench.count(20, 2),
        health_calls,
        |channel| async move { client::health(&mut HealthClient::new(channel)).await },
    )
    .await?;
    report.measured(
        SECTION,
        "delta-health",
        "gRPC health check round trip, same daemon, c=1",
        health,
    );
    report.compare("delta", "delta-health");

    eprintln!("{SECTION}: per step with streaming on and off, {step_runs} runs each");
    let scripted = || {
        runs::start(
            &bench.fixtures.workspace,
            ECHO,
            tool_steps,
            pb::ApprovalPolicy::Auto,
        )
    };
    let openai = || pb::StartRun {
        model: Some(pb::ModelConfig {
            model: format!("openai:{STEPS_MODEL}"),
            ..Default::default()
        }),
        ..scripted()
    };
    // The same steps through the scripted model (no HTTP, no stream) on the same daemon:
    // what the HTTP provider itself costs, beside what its streaming does.
    let sides = [
        Side {
            key: "steps-on",
            case: "per step, OpenAI provider answering at once + no-op tool, stream = true",
            channel: on.channel().await?,
            start: openai(),
        },
        Side {
            key: "steps-off",
            case: "per step, OpenAI provider answering at once + no-op tool, stream = false",
            channel: off.channel().await?,
            start: openai(),
        },
        Side {
            key: "steps-scripted",
            case: "per step, scripted model + no-op tool (section 3's run), same daemon",
            channel: on.channel().await?,
            start: scripted(),
        },
    ];
    for side in &sides {
        RunStream::open(side.channel.clone(), side.start.clone())
            .await?
            .follow(tool_steps + 1)
            .await?;
    }
    steps_in_turn(report, SECTION, &sides, step_runs, tool_steps).await?;
    // The call's name, then its arguments in pieces.
    let deltas = STEP_ARGUMENT_PIECES + 1;
    report.note("steps-on", &format!("{deltas} deltas per tool step"));
    report.compare("steps-on", "steps-off");
    report.compare("steps-off", "steps-scripted");

    on.stop().await?;
    off.stop().await
}

/// One run whose answer streams in pieces; the latency of each piece from the model API's
/// write to the client's read. Fails unless every piece arrived once, in order, and the
/// committed text is their concatenation.
async fn latency_run(
    bench: &Bench,
    channel: &AuthChannel,
    api: &ModelApi,
) -> anyhow::Result<Vec<Duration>> {
    let start = pb::StartRun {
        workspace: bench.fixtures.workspace.to_string_lossy().into_owned(),
        input: "say something".into(),
        model: Some(pb::ModelConfig {
            model: format!("openai:{LATENCY_MODEL}"),
            ..Default::default()
        }),
        tools: vec![ECHO.to_owned()],
        ..Default::default()
    };
    let (requests, receiver) = tokio::sync::mpsc::unbounded_channel();
    requests.send(pb::RunRequest {
        request: Some(pb::run_request::Request::Start(start)),
    })?;
    let mut events = AgentClient::new(channel.clone())
        .run(UnboundedReceiverStream::new(receiver))
        .await
        .context("the run was refused")?
        .into_inner();
    let mut arrived: Vec<(String, Instant)> = Vec::new();
    let mut following = false;
    let finished = loop {
        let event = tokio::time::timeout(EVENT_TIMEOUT, events.message())
            .await
            .context("no event from the run for two minutes")??
            .context("the run's stream ended before the run finished")?;
        let now = Instant::now();
        if !following {
            following = true;
            api.following.notify_one();
        }
        match event.event {
            Some(Event::TextDelta(delta)) => arrived.push((delta.text, now)),
            Some(Event::RunFinished(finished)) => break finished,
            _ => {}
        }
    };
    let pieces: Vec<&str> = arrived.iter().map(|(text, _)| text.as_str()).collect();
    if finished.reason != pb::StopReason::Final as i32 || finished.final_text != pieces.concat() {
        bail!("the run did not answer with the pieces it streamed ({pieces:?}): {finished:?}");
    }
    let written = api.written(&pieces)?;
    if pieces.len() != api.pieces || !written.windows(2).all(|pair| pair[0] <= pair[1]) {
        bail!(
            "{} of {} pieces arrived, or out of order: {pieces:?}",
            pieces.len(),
            api.pieces
        );
    }
    Ok(arrived
        .iter()
        .zip(written)
        .map(|((_, arrived), written)| arrived.saturating_duration_since(written))
        .collect())
}

/// The release `airlockd` with its OpenAI provider at `base_url`, streaming or not.
async fn providers_daemon(
    bench: &Bench,
    base_url: &str,
    stream: bool,
    prefix: &str,
) -> anyhow::Result<Airlockd> {
    let mut spec = bench.daemon_spec(prefix)?;
    spec.config_tables = format!(
        "[providers]\nopenai_base_url = {}\nstream = {stream}\n",
        serde_json::to_string(&format!("{base_url}/v1"))?
    );
    Airlockd::start(&spec).await
}

/// The pieces a streamed call's arguments are cut into, as a model writes them.
const STEP_ARGUMENT_PIECES: usize = 3;

/// An OpenAI Chat Completions API on loopback: answers the latency model with text in
/// timed pieces, and the steps model with a no-op tool call per step until the last.
#[derive(Clone)]
struct ModelApi {
    /// Pieces per latency answer.
    pieces: usize,
    tool_steps: u32,
    /// When each latency piece was written, by its text (each is unique).
    written: Arc<Mutex<HashMap<String, Instant>>>,
    /// Makes each latency answer's pieces unique.
    answers: Arc<AtomicU64>,
    /// Opened by the client once it follows a latency run: pieces streamed before a client
    /// follows the run never reach it (they are not stored), so the answer waits for it.
    following: Arc<Notify>,
}

impl ModelApi {
    fn new(pieces: usize, tool_steps: u32) -> ModelApi {
        ModelApi {
            pieces,
            tool_steps,
            written: Arc::default(),
            answers: Arc::default(),
            following: Arc::default(),
        }
    }

    /// Serves on a loopback port; returns its base URL.
    async fn serve(&self) -> anyhow::Result<String> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let api = self.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let api = api.clone();
                tokio::spawn(async move {
                    // The run that sent the request fails on a broken answer and says so.
                    if let Err(err) = api.answer(stream).await {
                        eprintln!("{SECTION}: the model API failed: {err:#}");
                    }
                });
            }
        });
        Ok(format!("http://{address}"))
    }

    /// When each of `pieces` was written.
    fn written(&self, pieces: &[&str]) -> anyhow::Result<Vec<Instant>> {
        let written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        pieces
            .iter()
            .map(|piece| {
                written
                    .get(*piece)
                    .copied()
                    .with_context(|| format!("the model API never wrote {piece:?}"))
            })
            .collect()
    }

    async fn answer(&self, mut stream: TcpStream) -> anyhow::Result<()> {
        // Each piece goes out as it is written, not held for the previous one's ACK.
        stream.set_nodelay(true)?;
        let body = read_request(&mut stream).await?;
        let streamed = body["stream"] == true;
        match body["model"].as_str() {
            Some(LATENCY_MODEL) if streamed => self.pieces(&mut stream).await?,
            Some(STEPS_MODEL) => {
                let turn = body["messages"].as_array().map_or(0, |messages| {
                    messages.iter().filter(|m| m["role"] == "assistant").count()
                });
                let answer = self.step_answer(turn, streamed);
                stream.write_all(answer.as_bytes()).await?;
            }
            other => bail!("no answer for model {other:?} (streamed: {streamed})"),
        }
        stream.shutdown().await.ok();
        Ok(())
    }

    /// A latency answer: each piece written on its own, its instant recorded first.
    async fn pieces(&self, stream: &mut TcpStream) -> anyhow::Result<()> {
        stream.write_all(EVENT_STREAM_HEAD.as_bytes()).await?;
        self.following.notified().await;
        let answer = self.answers.fetch_add(1, Ordering::Relaxed);
        for index in 0..self.pieces {
            let piece = format!("a{answer}p{index} ");
            let frame = sse(&text_chunk(&piece));
            self.written
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(piece, Instant::now());
            stream.write_all(frame.as_bytes()).await?;
            tokio::time::sleep(PIECE_PAUSE).await;
        }
        stream
            .write_all(sse_end("stop", self.pieces).as_bytes())
            .await?;
        Ok(())
    }

    /// The answer to a steps run's `turn`: a call of the no-op tool while tool steps remain,
    /// then the final text; as server-sent events or one JSON body.
    fn step_answer(&self, turn: usize, streamed: bool) -> String {
        let call = (turn < self.tool_steps as usize).then(|| {
            let id = format!("call_{turn}");
            let arguments = json!({"step": turn}).to_string();
            (id, arguments)
        });
        if !streamed {
            let message = match &call {
                Some((id, arguments)) => json!({"role": "assistant", "content": null,
                    "tool_calls": [{"id": id, "type": "function",
                        "function": {"name": ECHO, "arguments": arguments}}]}),
                None => json!({"role": "assistant", "content": "done"}),
            };
            let finish = if call.is_some() { "tool_calls" } else { "stop" };
            let body = json!({"choices": [{"index": 0, "message": message,
                "finish_reason": finish}], "usage": {"prompt_tokens": 100, "completion_tokens": 10}})
            .to_string();
            return format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{body}",
                body.len()
            );
        }
        let mut out = EVENT_STREAM_HEAD.to_owned();
        match call {
            Some((id, arguments)) => {
                out.push_str(&sse(&call_chunk(
                    json!({"index": 0, "id": id, "type": "function",
                        "function": {"name": ECHO, "arguments": ""}}),
                )));
                for piece in split(&arguments, STEP_ARGUMENT_PIECES) {
                    out.push_str(&sse(&call_chunk(
                        json!({"index": 0, "function": {"arguments": piece}}),
                    )));
                }
                out.push_str(&sse_end("tool_calls", 10));
            }
            None => {
                out.push_str(&sse(&text_chunk("done")));
                out.push_str(&sse_end("stop", 10));
            }
        }
        out
    }
}

const EVENT_STREAM_HEAD: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";

/// Reads one HTTP/1.1 request; its JSON body.
async fn read_request(stream: &mut TcpStream) -> anyhow::Result<Value> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            bail!("the request ended inside its head");
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .context("a request without content-length")?
        .trim()
        .parse()?;
    while buffer.len() < head_end + length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            bail!("the request body was cut");
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    Ok(serde_json::from_slice(
        &buffer[head_end..head_end + length],
    )?)
}

fn sse(data: &str) -> String {
    format!("data: {data}\n\n")
}

fn text_chunk(text: &str) -> String {
    json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
        .to_string()
}

fn call_chunk(call: Value) -> String {
    json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": null}]})
        .to_string()
}

/// An answer's last events: its finish reason, its usage, `[DONE]`.
fn sse_end(finish: &str, output_tokens: usize) -> String {
    let finish = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]});
    let usage = json!({"choices": [], "usage": {"prompt_tokens": 100,
        "completion_tokens": output_tokens}});
    format!(
        "{}{}{}",
        sse(&finish.to_string()),
        sse(&usage.to_string()),
        sse("[DONE]")
    )
}

/// `text` in `parts` pieces of about the same length (ASCII).
fn split(text: &str, parts: usize) -> Vec<&str> {
    let size = text.len().div_ceil(parts.max(1)).max(1);
    let mut pieces = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (piece, after) = rest.split_at(size.min(rest.len()));
        pieces.push(piece);
        rest = after;
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_split_into_the_pieces_asked_for() {
        assert_eq!(split("{\"step\":12}", 3), ["{\"st", "ep\":", "12}"]);
        assert_eq!(split("ab", 3), ["a", "b"]);
        assert!(split("", 3).is_empty());
    }

    #[test]
    fn a_streamed_step_answer_is_the_call_in_pieces_then_its_end() {
        let api = ModelApi::new(1, 2);
        let answer = api.step_answer(1, true);
        let events: Vec<&str> = answer
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .collect();
        assert_eq!(events.len(), 1 + STEP_ARGUMENT_PIECES + 3, "{answer}");
        assert!(events[0].contains("\"name\":\"echo\""), "{answer}");
        assert_eq!(events.last(), Some(&"[DONE]"));
        let last = api.step_answer(2, false);
        assert!(last.contains("\"content\":\"done\""), "{last}");
        assert!(last.contains("content-length:"), "{last}");
    }
}
