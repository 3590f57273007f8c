//! The wasm engine on small modules written in WAT: calls yield and are isolated from each
//! other, retired stores are torn down, and what is linked follows the profile.

use super::*;
use crate::engine::RunStats;
use crate::output::OutputCapture;
use crate::profile::Profiles;

/// Tool `t`, the module `t.wasm` of `dir`.
fn image(dir: &Path) -> ToolImage {
    ToolImage {
        name: "t".into(),
        source: dir.join("tool.toml"),
        code: Code::Module(dir.join("t.wasm")),
        sha256: None,
        input_schema: serde_json::json!({"type": "object"}),
        secrets: Default::default(),
    }
}

/// Loads a tool made of `wat` under the repository's `strict` profile.
fn load(engine: &WasmEngine, dir: &Path, wat: &str) -> Arc<dyn LoadedTool> {
    std::fs::write(dir.join("t.wasm"), wat::parse_str(wat).expect("wat")).expect("write");
    let (profiles, _) =
        Profiles::load_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../sandbox-profiles"));
    let profile = profiles.get("strict").expect("strict profile");
    engine.load(&image(dir), &profile).expect("loads")
}

fn launch(profile: Arc<Profile>) -> Launch {
    Launch {
        stdin: bytes::Bytes::from_static(b"{}"),
        workspace: None,
        overlay: None,
        changed: Default::default(),
        profile,
        capture: OutputCapture::new(1024, None),
        stats: Arc::new(RunStats::default()),
        egress: None,
        secrets: Default::default(),
        tenant: None,
        call_id: crate::ids::ExecutionId::new(),
        deadline: std::time::Instant::now() + std::time::Duration::from_secs(60),
        questions: None,
        trace_parent: None,
    }
}

#[tokio::test]
async fn a_spinning_call_yields_even_after_its_engine_is_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = WasmEngine::new(&WasmConfig {
        cache_dir: dir.path().join("cache"),
        max_concurrent_calls: 2,
    })
    .expect("engine");
    let tool = load(
        &engine,
        dir.path(),
        r#"(module (memory (export "memory") 1) (func (export "_start") (loop br 0)))"#,
    );
    drop(engine);
    let (profiles, _) =
        Profiles::load_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../sandbox-profiles"));
    let profile = profiles.get("strict").expect("strict profile");
    let stopped = tokio::time::timeout(Duration::from_millis(200), tool.run(launch(profile))).await;
    assert!(stopped.is_err(), "the spinning call finished: {stopped:?}");
}

/// A call starts from the module's own memory and tables, whatever the call before it
/// left in its pool slot: inside the bytes reset in place (`MEMORY_KEEP_RESIDENT`, or the
/// pages the kernel reports written up to `MEMORY_KEEP_RESIDENT_SCANNED`;
/// `TABLE_KEEP_RESIDENT`) and beyond them, where a call that writes more than the budget
/// has the rest given back; a byte of its data segment is back as the image has it. The
/// module traps if it finds what it wrote.
#[tokio::test]
async fn a_call_sees_nothing_the_call_before_it_left() {
    const INSIDE: usize = 1024;
    // A byte of the module's data segment: put back from the module's image.
    const IMAGED: usize = 2048;
    const BEYOND: usize = MEMORY_KEEP_RESIDENT + 1024;
    // Past every budget: the call fills this much memory above FILLED with nonzero bytes.
    const FILLED: usize = MEMORY_KEEP_RESIDENT + (64 << 10);
    const FILL_BYTES: usize = MEMORY_KEEP_RESIDENT_SCANNED + (128 << 10);
    const LAST: usize = FILLED + FILL_BYTES - 4;
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = WasmEngine::new(&WasmConfig {
        cache_dir: dir.path().join("cache"),
        max_concurrent_calls: 1,
    })
    .expect("engine");
    let pages = (FILLED + FILL_BYTES) / 65536 + 1;
    let slot = TABLE_KEEP_RESIDENT / 8 + 16;
    let wat = format!(
        r#"(module
          (memory (export "memory") {pages})
          (table {tables} funcref)
          (func $marker)
          (elem declare func $marker)
          (data (i32.const {IMAGED}) "\01")
          (func (export "_start")
            (if (i32.ne (i32.load8_u (i32.const {IMAGED})) (i32.const 1)) (then unreachable))
            (if (i32.load (i32.const {INSIDE})) (then unreachable))
            (if (i32.load (i32.const {BEYOND})) (then unreachable))
            (if (i32.load (i32.const {FILLED})) (then unreachable))
            (if (i32.load (i32.const {LAST})) (then unreachable))
            (if (i32.eqz (ref.is_null (table.get (i32.const 0)))) (then unreachable))
            (if (i32.eqz (ref.is_null (table.get (i32.const {slot})))) (then unreachable))
            (i32.store8 (i32.const {IMAGED}) (i32.const 0))
            (i32.store (i32.const {INSIDE}) (i32.const 7))
            (i32.store (i32.const {BEYOND}) (i32.const 7))
            (memory.fill (i32.const {FILLED}) (i32.const 7) (i32.const {FILL_BYTES}))
            (table.set (i32.const 0) (ref.func $marker))
            (table.set (i32.const {slot}) (ref.func $marker))))"#,
        tables = slot + 1,
    );
    let tool = load(&engine, dir.path(), &wat);
    let (profiles, _) =
        Profiles::load_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../sandbox-profiles"));
    let profile = profiles.get("strict").expect("strict profile");
    for call in 0..3 {
        assert_eq!(
            tool.run(launch(profile.clone())).await,
            Exit::Code(0),
            "call {call}"
        );
    }
}

/// A runtime of one worker thread that tears down retired stores when it parks, as the
/// daemon's do, and `wat` loaded under `strict` by an engine that allows one call at a
/// time.
fn parking_worker(
    dir: &Path,
    wat: &str,
) -> (tokio::runtime::Runtime, Arc<dyn LoadedTool>, Arc<Profile>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .on_thread_park(on_worker_park)
        .build()
        .expect("runtime");
    let engine = WasmEngine::new(&WasmConfig {
        cache_dir: dir.join("cache"),
        max_concurrent_calls: 1,
    })
    .expect("engine");
    let tool = load(&engine, dir, wat);
    let (profiles, _) =
        Profiles::load_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../sandbox-profiles"));
    let profile = profiles.get("strict").expect("strict profile");
    (runtime, tool, profile)
}

/// As in the daemon, the worker tears down the stores it retired when it parks. With one
/// call allowed at a time, calls made back to back (each ends in its first poll, so the
/// worker does not park between them) start while the stores of the calls before are
/// still retired: each gets a pool slot of its own (the spare slots) and fresh memory.
#[test]
fn a_retired_store_keeps_no_call_from_starting_or_from_fresh_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (runtime, tool, profile) = parking_worker(
        dir.path(),
        r#"(module
          (memory (export "memory") 1)
          (func (export "_start")
            (if (i32.load (i32.const 64)) (then unreachable))
            (i32.store (i32.const 64) (i32.const 7))))"#,
    );
    let calls = runtime.spawn(async move {
        for round in 0..10 {
            // Parks the worker, which tears down the last round's stores.
            tokio::time::sleep(Duration::from_millis(1)).await;
            for call in 0..2 * retire::PER_THREAD {
                assert_eq!(
                    tool.run(launch(profile.clone())).await,
                    Exit::Code(0),
                    "round {round}, call {call}"
                );
            }
        }
    });
    runtime.block_on(calls).expect("every call ran");
}

/// A store is retired only when it holds nothing of the call's but itself. The capture
/// shows which: a retired store's WASI context still holds it after the call returns,
/// until the worker's next park; a store torn down as the call ends does not.
#[test]
fn a_call_with_an_overlay_or_an_egress_gate_has_its_store_torn_down_as_it_ends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (runtime, tool, profile) = parking_worker(
        dir.path(),
        r#"(module (memory (export "memory") 1) (func (export "_start")))"#,
    );
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).expect("workspace");
    let state = dir.path().join("state");
    let changes = crate::changes::Changes::open(&state, &state, 1 << 20).expect("changes");
    let overlay = Arc::new(changes.overlay(&workspace, "call").expect("overlay"));
    let gate = Arc::new(crate::egress::Gate::new(
        crate::egress::Rules::new(&NetworkPolicy::AllowList {
            allow: vec!["127.0.0.1:1".parse().expect("pattern")],
            deny: Vec::new(),
            ask_for_unlisted: false,
        }),
        Arc::new(crate::egress::Resolver::new(Default::default())),
        None,
    ));
    let calls = runtime.spawn(async move {
        // Parks the worker once: from then on it retires stores.
        tokio::time::sleep(Duration::from_millis(1)).await;
        let plain = launch(profile.clone());
        let retired = plain.capture.clone();
        assert_eq!(tool.run(plain).await, Exit::Code(0));
        assert!(Arc::strong_count(&retired) > 1, "the store was retired");

        let mut overlaid = launch(profile.clone());
        overlaid.workspace = Some(workspace);
        overlaid.overlay = Some(overlay);
        let mut gated = launch(profile.clone());
        gated.egress = Some(gate);
        for (what, call) in [("overlay", overlaid), ("gate", gated)] {
            let capture = call.capture.clone();
            assert_eq!(tool.run(call).await, Exit::Code(0));
            assert_eq!(
                Arc::strong_count(&capture),
                1,
                "{what}: torn down with the call"
            );
        }

        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(Arc::strong_count(&retired), 1, "torn down at the park");
    });
    runtime.block_on(calls).expect("the calls ran as expected");
}

/// Loads `wasm` as tool `t` under a profile with `network`, from a fresh directory.
fn load_under(network: &str, wasm: &[u8]) -> Result<Arc<dyn LoadedTool>, LoadError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = WasmEngine::new(&WasmConfig {
        cache_dir: dir.path().join("cache"),
        max_concurrent_calls: 1,
    })
    .expect("engine");
    std::fs::create_dir(dir.path().join("profiles")).expect("mkdir");
    std::fs::write(
        dir.path().join("profiles/p.toml"),
        format!("description = 'd'\nnetwork = {network}\n"),
    )
    .expect("write");
    let (profiles, errors) = Profiles::load_dir(&dir.path().join("profiles"));
    assert!(errors.is_empty(), "{errors:?}");
    let profile = profiles.get("p").expect("profile p");
    std::fs::write(dir.path().join("t.wasm"), wasm).expect("write");
    engine.load(&image(dir.path()), &profile)
}

const ALLOW_LIST: &str = "{ allow = ['allowed.test:80'] }";

/// A command component that imports wasi:http/types and does nothing.
const HTTP_COMPONENT: &str = r#"
    (component
      (import "wasi:http/types@0.2.0" (instance))
      (core module $m (func (export "run") (result i32) i32.const 0))
      (core instance $i (instantiate $m))
      (func $run (result (result)) (canon lift (core func $i "run")))
      (instance $cli (export "run" (func $run)))
      (export "wasi:cli/run@0.2.0" (instance $cli)))
"#;

#[test]
fn a_preview_1_module_under_an_allow_list_is_refused_at_load() {
    let module =
        wat::parse_str(r#"(module (memory (export "memory") 1) (func (export "_start")))"#)
            .expect("wat");
    let err = load_under(ALLOW_LIST, &module).err().expect("refused");
    assert!(matches!(err, LoadError::Unenforceable { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("WASI preview 1 has no network") && message.contains("wasm32-wasip2"),
        "{message}"
    );
    assert!(load_under("'none'", &module).is_ok());
}

#[test]
fn wasi_http_is_linked_only_under_an_allow_list() {
    let component = wat::parse_str(HTTP_COMPONENT).expect("wat");
    let err = load_under("'none'", &component)
        .err()
        .expect("no network, no wasi:http");
    assert!(
        matches!(err, LoadError::Link { .. }) && err.to_string().contains("imports wasi:http"),
        "{err}"
    );
    load_under(ALLOW_LIST, &component).expect("linked with wasi:http");
}

#[test]
fn tells_components_from_core_modules() {
    let module = wat::parse_str("(module)").expect("wat");
    assert!(!is_component(&module));
    let component = wat::parse_str("(component)").expect("wat");
    assert!(is_component(&component));
    assert!(!is_component(b"\0asm"));
}

/// A component whose `call` is not the world's: `func() -> u32`.
const WRONG_CALL_COMPONENT: &str = r#"
    (component
      (core module $m (func (export "call") (result i32) i32.const 0))
      (core instance $i (instantiate $m))
      (func $call (result u32) (canon lift (core func $i "call")))
      (export "call" (func $call)))
"#;

#[test]
fn a_component_whose_call_is_not_the_worlds_is_refused_at_load() {
    let component = wat::parse_str(WRONG_CALL_COMPONENT).expect("wat");
    let err = load_under("'none'", &component).err().expect("refused");
    assert!(matches!(err, LoadError::Invalid { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("`call`") && message.contains("airlock:tool/tool@0.1.0"),
        "{message}"
    );
}

#[test]
fn a_component_with_neither_call_nor_run_is_refused_at_load() {
    let component = wat::parse_str("(component)").expect("wat");
    let err = load_under("'none'", &component).err().expect("refused");
    assert!(matches!(err, LoadError::Invalid { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("airlock:tool/tool") && message.contains("wasi:cli/run"),
        "{message}"
    );
}

#[test]
fn modules_and_command_components_report_their_kind() {
    let module =
        wat::parse_str(r#"(module (memory (export "memory") 1) (func (export "_start")))"#)
            .expect("wat");
    let tool = load_under("'none'", &module).expect("loads");
    assert_eq!(tool.kind(), ToolKind::WasmModule);
    let command = wat::parse_str(HTTP_COMPONENT).expect("wat");
    let tool = load_under(ALLOW_LIST, &command).expect("loads");
    assert_eq!(tool.kind(), ToolKind::WasmCommand);
}

/// A module that polls `clocks` (userdata, relative timeout in ns) with its subscriptions at
/// `subs`, and traps unless the poll succeeded with one event, the clock of `fires`.
fn poll_module(subs: u32, clocks: &[(u64, u64)], fires: u64) -> String {
    let mut stores = String::new();
    for (index, (userdata, timeout)) in clocks.iter().enumerate() {
        let at = subs + 48 * index as u32;
        stores.push_str(&format!(
            "(i64.store (i32.const {at}) (i64.const {userdata}))
             (i32.store8 (i32.const {}) (i32.const 0))
             (i32.store (i32.const {}) (i32.const 1))
             (i64.store (i32.const {}) (i64.const {timeout}))
             (i32.store16 (i32.const {}) (i32.const 0))\n",
            at + 8,
            at + 16,
            at + 24,
            at + 40,
        ));
    }
    format!(
        r#"(module
          (import "wasi_snapshot_preview1" "poll_oneoff"
            (func $poll (param i32 i32 i32 i32) (result i32)))
          (memory (export "memory") 1)
          (func (export "_start")
            {stores}
            (if (call $poll (i32.const {subs}) (i32.const 1024) (i32.const {n}) (i32.const 2048))
              (then unreachable))
            (if (i32.ne (i32.load (i32.const 2048)) (i32.const 1)) (then unreachable))
            (if (i64.ne (i64.load (i32.const 1024)) (i64.const {fires})) (then unreachable))
            (if (i32.load8_u (i32.const 1034)) (then unreachable))))"#,
        n = clocks.len(),
    )
}

/// Runs `tool` on a runtime of one thread, as a worker serves calls, for at most `limit`;
/// panics if that thread is held far past `limit` (as a sleep on it would hold it).
fn run_on_one_thread(tool: Arc<dyn LoadedTool>, limit: Duration) -> Option<Exit> {
    let (done, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let profile = strict();
        let exit = runtime
            .block_on(async { tokio::time::timeout(limit, tool.run(launch(profile))).await });
        let _ = done.send(exit.ok());
    });
    result
        .recv_timeout(limit + Duration::from_secs(20))
        .expect("the call held its thread past its deadline")
}

fn strict() -> Arc<Profile> {
    let (profiles, _) =
        Profiles::load_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../sandbox-profiles"));
    profiles.get("strict").expect("strict profile")
}

fn engine(dir: &Path) -> WasmEngine {
    WasmEngine::new(&WasmConfig {
        cache_dir: dir.join("cache"),
        max_concurrent_calls: 2,
    })
    .expect("engine")
}

/// Filesystem calls run on the call's thread, but a preview 1 sleep does not: an hour's
/// sleep is dropped at the call's deadline, and the thread it ran on is free at once.
#[test]
fn a_modules_sleep_waits_on_a_timer_not_on_its_thread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = engine(dir.path());
    let hour = 3_600_000_000_000u64;
    let tool = load(&engine, dir.path(), &poll_module(0, &[(7, hour)], 7));
    let started = Instant::now();
    assert_eq!(run_on_one_thread(tool, Duration::from_millis(200)), None);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    // A short sleep ends, its event written as wasmtime-wasi writes it.
    let tool = load(&engine, dir.path(), &poll_module(0, &[(7, 10_000_000)], 7));
    assert_eq!(
        run_on_one_thread(tool, Duration::from_secs(10)),
        Some(Exit::Code(0))
    );
}

/// Polls the shadow leaves to wasmtime-wasi still work, and none of them sleeps on the
/// thread: two timers (the first to fire is the event), and a misaligned subscription,
/// which traps before any wait.
#[test]
fn other_polls_go_to_wasmtime_wasi() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = engine(dir.path());
    let hour = 3_600_000_000_000u64;
    let tool = load(
        &engine,
        dir.path(),
        &poll_module(0, &[(1, hour), (2, 5_000_000)], 2),
    );
    assert_eq!(
        run_on_one_thread(tool, Duration::from_secs(10)),
        Some(Exit::Code(0))
    );
    let tool = load(&engine, dir.path(), &poll_module(4, &[(7, hour)], 7));
    let exit = run_on_one_thread(tool, Duration::from_secs(10));
    assert!(
        matches!(exit, Some(Exit::Trap(_))),
        "a misaligned subscription: {exit:?}"
    );
}

/// A guest that opens a FIFO in its workspace, again and again, with nobody writing to it:
/// each open blocks the thread that polls the call in the kernel. The call still ends at its
/// deadline, the thread given back by the stall watch within `STALL_LIMIT` or so.
#[test]
fn a_call_stuck_opening_a_fifo_ends_at_its_deadline() {
    let dir = tempfile::tempdir().expect("tempdir");
    let workspace = dir.path().join("workspace");
    std::fs::create_dir(&workspace).expect("workspace");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        workspace.join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .expect("mkfifo");
    let engine = engine(dir.path());
    // fd 3 is the first preopen: the workspace, under the `readonly` profile.
    let wat = r#"(module
      (import "wasi_snapshot_preview1" "path_open"
        (func $open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
      (memory (export "memory") 1)
      (data (i32.const 0) "fifo")
      (func (export "_start")
        (loop $again
          (drop (call $open (i32.const 3) (i32.const 0) (i32.const 0) (i32.const 4)
                            (i32.const 0) (i64.const 2) (i64.const 0) (i32.const 0)
                            (i32.const 16)))
          (br $again))))"#;
    std::fs::write(dir.path().join("t.wasm"), wat::parse_str(wat).expect("wat")).expect("write");
    let (profiles, _) =
        Profiles::load_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../sandbox-profiles"));
    let profile = profiles.get("readonly").expect("readonly profile");
    let tool = engine.load(&image(dir.path()), &profile).expect("loads");
    let (done, result) = std::sync::mpsc::channel();
    let started = Instant::now();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let mut launch = launch(profile);
        launch.workspace = Some(workspace);
        let exit = runtime.block_on(async {
            tokio::time::timeout(Duration::from_millis(300), tool.run(launch)).await
        });
        let _ = done.send(exit.is_err());
    });
    let timed_out = result
        .recv_timeout(Duration::from_secs(20))
        .expect("the call held its thread in the kernel past its deadline");
    assert!(timed_out, "the call ended on its own");
    assert!(
        started.elapsed() < Duration::from_millis(300) + stall::STALL_LIMIT * 4,
        "{:?}",
        started.elapsed()
    );
}

/// File calls run on the call's own thread only for a call that can do nothing but read: one
/// that may write could hold the thread in system calls no signal ends (`call::reads_only`).
#[test]
fn only_a_call_that_reads_runs_its_file_calls_on_its_thread() {
    let (profiles, _) =
        Profiles::load_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../sandbox-profiles"));
    for (name, on_its_thread) in [
        ("strict", true),
        ("readonly", true),
        ("workspace-write", false),
    ] {
        let profile = profiles.get(name).expect("profile");
        assert_eq!(call::reads_only(&launch(profile)), on_its_thread, "{name}");
    }
}
