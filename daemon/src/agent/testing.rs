//! A run loop without gRPC, for the stages' unit tests: a real agent runtime over a SQLite
//! store in a temporary directory, real engines, and small tools made for the tests — `noop`
//! (WebAssembly, answers `{}` at once) and `wait_gate` (a process tool that waits until the
//! test writes to the FIFO `gate` of the workspace; `wait_other` and `wait_other_once`, on
//! the FIFO `other`, are an idempotent tool and one that must not run twice).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use airlock_proto::v1 as pb;
use pb::run_event::Event;
use serde_json::Value;

use super::{AgentRuntime, AgentSettings, Events, RunOwner};
use crate::engine::Engines;
use crate::engine::process::{ProcessConfig, ProcessEngine};
use crate::engine::wasm::{WasmConfig, WasmEngine};
use crate::ids::RunId;
use crate::profile::Profiles;
use crate::store::{SqliteStore, Store, StoreOptions};
use crate::tools::{Executor, Registry};
use crate::trace::Tracer;
use crate::workspace::WorkspaceRoots;

/// A test waits this long for a run's next event before it fails: far past what any stage
/// takes, short enough that a hang fails the test rather than the suite.
const EVENT_WAIT: Duration = Duration::from_secs(60);

/// Answers `{"ok":{}}` on stdout and exits.
const NOOP_WAT: &str = r#"(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "{\22ok\22:{}}")
  (func (export "_start")
    (i32.store (i32.const 0) (i32.const 16))
    (i32.store (i32.const 4) (i32.const 9))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))))"#;

const NOOP_TOML: &str = r#"name = "noop"
version = "0.1.0"
description = "Does nothing."
risk = "read_only"
engine = "wasm"
module = "noop.wasm"
profile = "strict"
idempotent = true
input_schema = { type = "object", properties = { n = { type = "integer" } }, additionalProperties = false }
"#;

const WRITE_TOML: &str = r#"name = "touch"
version = "0.1.0"
description = "Does nothing, but says it writes."
risk = "write"
engine = "wasm"
module = "noop.wasm"
profile = "strict"
input_schema = { type = "object" }
"#;

/// A process tool that waits until a byte arrives on the workspace's FIFO `fifo`.
fn fifo_tool(name: &str, fifo: &str, idempotent: bool) -> String {
    format!(
        r#"name = "{name}"
version = "0.1.0"
description = "Waits for a byte on the workspace's FIFO `{fifo}`."
risk = "read_only"
engine = "process"
command = ["/usr/bin/head", "-c1", "/workspace/{fifo}"]
abi = "argv"
profile = "process-readonly"
idempotent = {idempotent}
input_schema = {{ type = "object" }}
"#
    )
}

pub(crate) struct Harness {
    pub runtime: Arc<AgentRuntime>,
    pub store: Arc<dyn Store>,
    pub workspace: PathBuf,
    _dir: tempfile::TempDir,
}

impl Harness {
    pub fn new() -> Harness {
        Harness::build(StoreOptions::default(), AgentSettings::default())
    }

    pub fn build(options: StoreOptions, settings: AgentSettings) -> Harness {
        let dir = tempfile::tempdir().expect("tempdir");
        let tools = dir.path().join("tools");
        for (name, manifest) in [
            ("noop", NOOP_TOML.to_owned()),
            ("touch", WRITE_TOML.to_owned()),
            ("wait_gate", fifo_tool("wait_gate", "gate", true)),
            // On a FIFO of their own: an idempotent tool, and one that must not run twice.
            ("wait_other", fifo_tool("wait_other", "other", true)),
            (
                "wait_other_once",
                fifo_tool("wait_other_once", "other", false),
            ),
        ] {
            std::fs::create_dir_all(tools.join(name)).expect("mkdir");
            std::fs::write(tools.join(name).join("tool.toml"), manifest).expect("write");
            std::fs::write(
                tools.join(name).join("noop.wasm"),
                wat::parse_str(NOOP_WAT).expect("wat"),
            )
            .expect("write");
        }
        let workspace = dir.path().join("root/project");
        std::fs::create_dir_all(&workspace).expect("mkdir");
        let (profiles, errors) =
            Profiles::load_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../sandbox-profiles"));
        assert!(errors.is_empty(), "{errors:?}");
        let wasm = WasmEngine::new(&WasmConfig {
            cache_dir: dir.path().join("modules"),
            max_concurrent_calls: 8,
        })
        .expect("wasm engine");
        let process = ProcessEngine::new(&ProcessConfig {
            state_dir: dir.path().join("state"),
        });
        let engines = Engines::default()
            .with(Arc::new(wasm))
            .with(Arc::new(process));
        let (registry, refused) = Registry::load(&[tools], &profiles, &engines);
        assert!(refused.is_empty(), "{refused:?}");
        let roots = WorkspaceRoots::new(&[dir.path().join("root")]).expect("roots");
        let executor = Arc::new(Executor::new(Arc::new(registry), roots));
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&dir.path().join("airlock.db"), &options).expect("store"));
        let runtime = Arc::new(AgentRuntime::new(
            executor,
            store.clone(),
            Arc::new(Tracer::new(None)),
            settings,
            Arc::default(),
        ));
        Harness {
            runtime,
            store,
            workspace,
            _dir: dir,
        }
    }

    /// Makes the FIFO `wait_gate` reads from; writing a byte to it lets the tool finish.
    pub fn gate(&self) -> PathBuf {
        self.fifo("gate")
    }

    /// Makes the FIFO `name` in the workspace.
    pub fn fifo(&self, name: &str) -> PathBuf {
        let gate = self.workspace.join(name);
        let path = std::ffi::CString::new(gate.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: `path` is a NUL-terminated string that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o644) }, 0, "mkfifo");
        gate
    }

    /// A run of the scripted model playing `script`, with `tools`, in the workspace.
    pub fn scripted(&self, script: &Value, tools: &[&str]) -> pb::StartRun {
        pb::StartRun {
            workspace: self.workspace.display().to_string(),
            input: "test".into(),
            model: Some(pb::ModelConfig {
                model: "scripted".into(),
                script: script.to_string(),
                ..Default::default()
            }),
            tools: tools.iter().map(|tool| (*tool).to_owned()).collect(),
            approval_policy: pb::ApprovalPolicy::Never as i32,
            ..Default::default()
        }
    }

    /// Starts `start` and follows it from its first event.
    pub async fn start(&self, start: pb::StartRun) -> (RunId, Follower) {
        let owner = RunOwner {
            tenant: "default".into(),
            max_live_runs: 100,
            allowed_tools: None,
        };
        let started = self.runtime.start(start, &owner).await.expect("starts");
        let follower = Follower {
            events: started.events,
        };
        (started.live.run_id.clone(), follower)
    }

    /// Follows run `run_id` from its first event.
    pub async fn follow(&self, run_id: &RunId) -> Follower {
        let events = self.runtime.follow(run_id, 0).await.expect("follows");
        Follower { events }
    }

    /// Starts `start` and returns its whole log once it has finished.
    pub async fn run(&self, start: pb::StartRun) -> Vec<pb::RunEvent> {
        let (_, mut follower) = self.start(start).await;
        follower.rest().await
    }
}

/// A run's events as a client receives them.
pub(crate) struct Follower {
    events: Events,
}

impl Follower {
    pub fn of(events: Events) -> Follower {
        Follower { events }
    }

    pub async fn next(&mut self) -> Option<pb::RunEvent> {
        tokio::time::timeout(EVENT_WAIT, self.events.recv())
            .await
            .expect("the run's next event comes")
            .map(|event| std::sync::Arc::unwrap_or_clone(event.expect("the log reads")))
    }

    /// Events up to and including the first that `matches`.
    pub async fn until(&mut self, matches: impl Fn(&Event) -> bool) -> Vec<pb::RunEvent> {
        let mut seen = Vec::new();
        while let Some(event) = self.next().await {
            let found = event.event.as_ref().is_some_and(&matches);
            seen.push(event);
            if found {
                return seen;
            }
        }
        panic!("the run ended without the event looked for: {seen:#?}");
    }

    /// Every event from here to the end of the run.
    pub async fn rest(&mut self) -> Vec<pb::RunEvent> {
        let mut seen = Vec::new();
        while let Some(event) = self.next().await {
            seen.push(event);
        }
        seen
    }
}

/// The kinds of `events`, by their field names, for comparing a log's shape.
pub(crate) fn kinds(events: &[pb::RunEvent]) -> Vec<&'static str> {
    events
        .iter()
        .map(|event| event.event.as_ref().map_or("none", Event::kind))
        .collect()
}

/// How the run ended.
pub(crate) fn finished(events: &[pb::RunEvent]) -> pb::RunFinished {
    match events.last().and_then(|event| event.event.clone()) {
        Some(Event::RunFinished(finished)) => finished,
        other => panic!("the log does not end with the run's end: {other:?}"),
    }
}

/// Stands for a disk that stalls: while closed, every commit waits on the store's thread.
#[derive(Default)]
pub(crate) struct StalledDisk {
    closed: Mutex<bool>,
    opened: Condvar,
    /// Set once a commit has waited on the closed disk.
    stalled: AtomicBool,
}

impl StalledDisk {
    /// Store options whose commits go through this disk.
    pub fn options(self: &Arc<Self>) -> StoreOptions {
        let disk = self.clone();
        StoreOptions {
            before_commit: Some(Arc::new(move || disk.wait_while_closed())),
            ..StoreOptions::default()
        }
    }

    pub fn set_closed(&self, closed: bool) {
        *self.closed.lock().expect("lock") = closed;
        self.opened.notify_all();
    }

    pub fn is_closed(&self) -> bool {
        *self.closed.lock().expect("lock")
    }

    /// Returns once a commit has waited on the closed disk.
    pub async fn stalled(&self) {
        while !self.stalled.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn wait_while_closed(&self) {
        let mut closed = self.closed.lock().expect("lock");
        while *closed {
            self.stalled.store(true, Ordering::SeqCst);
            closed = self.opened.wait(closed).expect("lock");
        }
    }
}
