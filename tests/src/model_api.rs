//! A model provider's HTTP API on loopback (OpenAI's Chat Completions, Anthropic's Messages —
//! whichever the replies are written in): answers each request with the next reply queued,
//! and keeps what it received, so a test sees exactly what the daemon sent a model.
//!
//! A reply is a whole JSON body, or a stream of server-sent events written one event at a
//! time; a stream can stop at a gate until the test opens it, so a test can act while a
//! model's answer is half streamed (attach a client, count what arrived).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use airlock_daemon::config::AgentSettings;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// A daemon with the first-party plugins whose OpenAI and Anthropic providers are the model
/// API at `api`, streaming or not, with short retry waits.
pub async fn daemon(api: &str, stream: bool) -> crate::TestDaemon {
    let mut agent = AgentSettings::default();
    agent.providers.openai_base_url = format!("{api}/v1");
    agent.providers.anthropic_base_url = api.to_owned();
    agent.providers.stream = stream;
    agent.providers.retry.initial_backoff = std::time::Duration::from_millis(10);
    crate::TestDaemon::start(crate::DaemonOptions {
        tools_dirs: vec![crate::repo_root().join("plugins")],
        agent,
        ..crate::DaemonOptions::default()
    })
    .await
}

/// One request the model API received.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
    /// The body's bytes as they came (what a signature is taken over).
    pub raw: Vec<u8>,
}

/// What one request is answered with.
#[derive(Debug, Clone)]
enum Reply {
    /// Status, extra headers, JSON body.
    Whole(u16, Vec<(String, String)>, String),
    /// Server-sent events' data, each written (and flushed) on its own; `None` is a gate the
    /// stream waits at until [`ModelApi::open_gate`].
    Stream(Vec<Option<String>>),
}

#[derive(Clone, Default)]
pub struct ModelApi {
    replies: Arc<Mutex<VecDeque<Reply>>>,
    received: Arc<Mutex<Vec<Received>>>,
    gate: Arc<Notify>,
}

impl ModelApi {
    /// Queues a whole answer.
    pub fn reply(self, status: u16, headers: &[(&str, &str)], body: String) -> Self {
        let headers = headers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.push(Reply::Whole(status, headers, body))
    }

    /// Queues a streamed answer: each item is one event's `data` (`None`: wait at the gate).
    pub fn stream(self, events: Vec<Option<String>>) -> Self {
        self.push(Reply::Stream(events))
    }

    fn push(self, reply: Reply) -> Self {
        self.replies.lock().unwrap().push_back(reply);
        self
    }

    /// Lets a stream waiting at its gate go on.
    pub fn open_gate(&self) {
        self.gate.notify_one();
    }

    /// Serves on a loopback port; returns its base URL.
    pub async fn serve(&self) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let api = self.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let api = api.clone();
                tokio::spawn(async move { api.answer(stream).await });
            }
        });
        format!("http://{address}")
    }

    async fn answer(&self, mut stream: TcpStream) {
        let mut buffer = Vec::new();
        let mut chunk = [0u8; 8192];
        let head_end = loop {
            if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            let n = stream.read(&mut chunk).await.unwrap();
            if n == 0 {
                return;
            }
            buffer.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let path = lines.next().unwrap().split(' ').nth(1).unwrap().to_owned();
        let headers: Vec<(String, String)> = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let length: usize = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .map(|(_, v)| v.parse().unwrap())
            .unwrap_or(0);
        while buffer.len() < head_end + length {
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the request body was cut");
            buffer.extend_from_slice(&chunk[..n]);
        }
        let raw = buffer[head_end..head_end + length].to_vec();
        let body = serde_json::from_slice(&raw).unwrap();
        self.received.lock().unwrap().push(Received {
            path,
            headers,
            body,
            raw,
        });
        let reply = self
            .replies
            .lock()
            .unwrap()
            .pop_front()
            .expect("a reply for every request");
        match reply {
            Reply::Whole(status, extra, body) => {
                let mut response = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                    body.len()
                );
                for (name, value) in extra {
                    response.push_str(&format!("{name}: {value}\r\n"));
                }
                response.push_str("\r\n");
                response.push_str(&body);
                stream.write_all(response.as_bytes()).await.unwrap();
            }
            Reply::Stream(events) => {
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
                stream.write_all(head.as_bytes()).await.unwrap();
                for event in events {
                    match event {
                        Some(data) => {
                            let frame = format!("data: {data}\n\n");
                            if stream.write_all(frame.as_bytes()).await.is_err() {
                                return;
                            }
                            stream.flush().await.ok();
                        }
                        None => self.gate.notified().await,
                    }
                }
            }
        }
        stream.shutdown().await.ok();
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

/// An OpenAI streamed answer of `pieces` of text, then its end with usage: the events'
/// data, for [`ModelApi::stream`], with a gate after `gate_after` pieces if given.
pub fn openai_text_stream(pieces: &[&str], gate_after: Option<usize>) -> Vec<Option<String>> {
    let mut events = Vec::new();
    for (index, piece) in pieces.iter().enumerate() {
        if gate_after == Some(index) {
            events.push(None);
        }
        let chunk = serde_json::json!({"choices": [{"index": 0, "delta": {"content": piece},
            "finish_reason": null}]});
        events.push(Some(chunk.to_string()));
    }
    let end = serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    events.push(Some(end.to_string()));
    let usage = serde_json::json!({"choices": [], "usage": {"prompt_tokens": 100,
        "completion_tokens": pieces.len()}});
    events.push(Some(usage.to_string()));
    events.push(Some("[DONE]".into()));
    events
}
