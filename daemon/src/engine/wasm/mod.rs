//! The `wasm` engine: tools as untrusted WebAssembly, run by wasmtime with WASI.
//!
//! A tool is one of three kinds (sdk/ABI.md): a preview 1 module or a command component,
//! both called through stdin and stdout, or a component of the typed world
//! `airlock:tool/tool`, called through its `call` export (typed.rs).
//!
//! Each call gets a fresh store with a WASI context that starts empty and receives only what
//! the tool's profile grants (the preopened directories, the environment it sets, stdin with
//! the arguments, stdout and stderr into the call's capture; no sockets, no name lookups).
//! A component whose profile has a network allow-list is also linked with wasi-http, whose
//! requests go out only through the call's egress gate (`http`); preview 1 modules have no
//! network interface at all, so such a profile refuses them.
//! Memory and tables are limited per store; the engine's epoch ticks make a running guest
//! yield every few milliseconds, so deadlines and cancellation — which drop the call's
//! future — stop even a spinning guest, including one stuck in its start function.
//! A call that can only read runs its file system calls on the thread that polls it, without
//! a hop to a blocking pool for each (`call::reads_only`); a module's sleep is a timer all the
//! same (`timer`), and a call stuck in a system call is interrupted and ended at its deadline
//! (`stall`).
//!
//! The workspace and the folders granted below it are opened by the engine itself
//! (`preopen`), never by path through a symlink, so a workspace swapped after its check or a
//! symlink planted in it cannot widen what a call sees.
//!
//! Modules are compiled once and cached on disk by digest; each tool is pre-instantiated
//! when it loads and every call instantiates from the pooling allocator's warm slots.

mod authority;
mod cache;
mod call;
mod cpu;
mod deadline;
mod features;
mod http;
mod limits;
mod preopen;
mod retire;
mod stall;
mod stdio;
mod timer;
mod typed;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use wasmtime::component::{Component, Linker as ComponentLinker, ResourceTable};
use wasmtime::{
    Config, Enabled, Engine as Wasmtime, InstanceAllocationStrategy, InstancePre, Linker, Module,
    PoolingAllocationConfig,
};
use wasmtime_wasi::WasiCtx;
use wasmtime_wasi::p2::bindings::CommandPre;
use wasmtime_wasi_http::WasiHttpCtx;

use super::image::{Code, ToolImage};
use crate::engine::contract::{Engine, EngineKind, Exit, Launch, LoadError, LoadedTool, ToolKind};
use crate::output::StreamKind;
use crate::pause::{self, Point};
use crate::profile::{GrantPath, LimitKind, NetworkPolicy, Profile};

use cache::{ModuleCache, Source};
use call::{ComponentState, ModuleState, Slot, exit_of, run_command, run_module, wasi_context};
use cpu::CpuMetered;
use http::Egress;
use limits::Limiter;
use retire::Retirement;
use stall::Stalls;
use typed::TypedPre;

pub use retire::on_worker_park;

/// How often the epoch advances. A running guest yields at every tick, which is when a
/// cancelled or timed-out call is dropped: 5 ms keeps the time to stop a spinning tool far
/// under 100 ms, for the cost of one atomic increment per tick.
const EPOCH_TICK: Duration = Duration::from_millis(5);

/// The largest module the daemon will compile. Real tools are a few megabytes; compiling is
/// the part of loading whose cost grows with size.
pub const MAX_MODULE_BYTES: u64 = 128 << 20;

/// A wasm32 memory cannot exceed 4 GiB, and the pooling allocator reserves slots this size.
const MAX_MEMORY_BYTES: u64 = 4 << 30;

/// Bytes of a table slot reset with `memset` rather than `madvise` after each call: a
/// system call per call, and the other core's TLB flush it forces, cost more than zeroing
/// the few kilobytes a tool's function table uses. Larger tables are reset by the kernel.
const TABLE_KEEP_RESIDENT: usize = 64 << 10;

/// The same for linear memory where the kernel cannot say which pages a call wrote: the
/// first pages are zeroed in place and stay resident, the rest is given back.
const MEMORY_KEEP_RESIDENT: usize = 64 << 10;

/// Where it can (Linux 6.7's `PAGEMAP_SCAN`), the pool asks the kernel which pages a call
/// wrote and restores only those, in place, from the module's image, up to this many bytes;
/// a call that wrote more has the rest given back. A small tool's call writes a few pages
/// spread over its stack, data and heap — not the low addresses the plain reset keeps — so
/// with the scan the next call in the slot takes no page faults and no `madvise` at all.
/// At most this much stays resident per slot: by default (128 + 8 spare) slots × 1 MiB.
const MEMORY_KEEP_RESIDENT_SCANNED: usize = 1 << 20;

/// Calls that may run at once. Each needs a slot in the pooling allocator (reserved virtual
/// memory, not resident memory); further calls wait for a slot, under their own deadline.
pub const DEFAULT_MAX_CONCURRENT_CALLS: u32 = 128;

#[derive(Debug, Clone)]
pub struct WasmConfig {
    /// Where compiled modules are kept.
    pub cache_dir: PathBuf,
    pub max_concurrent_calls: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("cannot configure wasmtime: {0}")]
    Wasmtime(String),
    #[error("cannot start the epoch ticker, without which calls could not be stopped: {0}")]
    Ticker(std::io::Error),
    #[error("cannot open the module cache at {path}: {source}")]
    Cache {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot configure TLS for the tools' outgoing HTTP: {0}")]
    Tls(tokio_rustls::rustls::Error),
}

pub struct WasmEngine {
    engine: Wasmtime,
    modules: Linker<ModuleState>,
    components: ComponentLinker<ComponentState>,
    /// `components` plus wasi-http, for components whose profile has an allow-list: a call
    /// without one instantiates nothing of wasi-http and pays nothing for it.
    networked: ComponentLinker<ComponentState>,
    /// The TLS client settings of every networked call, built once and shared.
    tls: Arc<tokio_rustls::rustls::ClientConfig>,
    cache: ModuleCache,
    calls: Arc<Semaphore>,
    /// The stores of finished calls not yet torn down, counted against the pool's spare slots.
    retirement: Retirement,
    /// Shared with every loaded tool: calls must keep yielding after the engine that loaded
    /// them is gone.
    ticker: Arc<EpochTicker>,
    stalls: Arc<Stalls>,
}

impl WasmEngine {
    pub fn new(config: &WasmConfig) -> Result<WasmEngine, SetupError> {
        let setup = |err: wasmtime::Error| SetupError::Wasmtime(format!("{err:#}"));
        let calls = config.max_concurrent_calls.max(1);
        // Retired stores keep their pool slots until torn down, beside the running calls.
        let slots = calls + retire::MAX_RETIRED;
        let scan = PoolingAllocationConfig::is_pagemap_scan_available();
        let mut pool = PoolingAllocationConfig::new();
        // A command component instantiates a few core modules (program, adapter, shims).
        pool.total_component_instances(slots)
            .total_core_instances(slots * 4)
            .total_memories(slots * 2)
            .total_tables(slots * 4)
            .total_stacks(slots)
            .max_memories_per_component(4)
            .max_tables_per_component(8)
            .max_memory_size(MAX_MEMORY_BYTES as usize)
            .table_elements(limits::MAX_TABLE_ELEMENTS)
            .table_keep_resident(TABLE_KEEP_RESIDENT)
            .pagemap_scan(if scan { Enabled::Yes } else { Enabled::No })
            .linear_memory_keep_resident(if scan {
                MEMORY_KEEP_RESIDENT_SCANNED
            } else {
                MEMORY_KEEP_RESIDENT
            });
        let mut wasm = Config::new();
        wasm.epoch_interruption(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Wasmtime::new(&wasm).map_err(setup)?;

        let mut modules = Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_async(&mut modules, |state: &mut ModuleState| {
            &mut state.wasi
        })
        .map_err(setup)?;
        timer::add_to_linker(&mut modules).map_err(setup)?;
        let mut components = ComponentLinker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut components).map_err(setup)?;
        let mut networked = components.clone();
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut networked).map_err(setup)?;

        let stalls = Arc::new(Stalls::default());
        let cache =
            ModuleCache::open(&config.cache_dir, &engine).map_err(|source| SetupError::Cache {
                path: config.cache_dir.clone(),
                source,
            })?;
        Ok(WasmEngine {
            ticker: Arc::new(
                EpochTicker::start(engine.clone(), stalls.clone()).map_err(SetupError::Ticker)?,
            ),
            stalls,
            engine,
            modules,
            components,
            networked,
            tls: http::tls_config().map_err(SetupError::Tls)?,
            cache,
            calls: Arc::new(Semaphore::new(calls as usize)),
            retirement: Retirement::default(),
        })
    }

    /// Refuses a profile that asks for something this engine cannot enforce.
    fn check_profile(&self, profile: &Profile) -> Result<(), LoadError> {
        let unenforceable = |what: String| LoadError::Unenforceable {
            engine: EngineKind::Wasm,
            profile: profile.name.clone(),
            what,
        };
        if profile.limits.memory_bytes > MAX_MEMORY_BYTES {
            return Err(unenforceable(format!(
                "limits.memory above {MAX_MEMORY_BYTES} bytes (the wasm32 maximum)"
            )));
        }
        for kind in profile.limits.optional_set() {
            match kind {
                // Enforced by the engine.
                LimitKind::Memory
                | LimitKind::WallTime
                | LimitKind::CpuTime
                | LimitKind::Output => {}
                // Hold by construction: a module cannot start processes and gets no /tmp.
                LimitKind::Processes | LimitKind::Tmp => {}
                LimitKind::OpenFiles | LimitKind::FileSize => {
                    return Err(unenforceable(format!("limits.{}", kind.key())));
                }
            }
        }
        for grant in &profile.files {
            if let GrantPath::Host(path) = &grant.path
                && !path.is_dir()
            {
                return Err(unenforceable(format!(
                    "the grant of {} (not a directory on this host)",
                    path.display()
                )));
            }
        }
        Ok(())
    }

    /// Compiles and links the tool; `networked` links components with wasi-http.
    fn compile(
        &self,
        path: &Path,
        digest: &str,
        bytes: &[u8],
        networked: bool,
    ) -> Result<Compiled, LoadError> {
        let invalid = |err: wasmtime::Error| LoadError::Invalid {
            path: path.to_owned(),
            message: features::explain(bytes, format!("{err:#}")),
        };
        let link = |err: wasmtime::Error| LoadError::Link {
            path: path.to_owned(),
            message: format!("{err:#}"),
        };
        let started = Instant::now();
        let (compiled, source) = if is_component(bytes) {
            let (component, source) = self
                .cache
                .get_or_compile(
                    digest,
                    // SAFETY: entries come from `Component::serialize` of this engine's
                    // configuration, are keyed by its compatibility hash, live in a directory
                    // only the daemon can write, and are checked against their sha256 before
                    // reaching here (see cache.rs).
                    |artifact| unsafe { Component::deserialize(&self.engine, artifact) },
                    || {
                        let engine = self.engine.clone();
                        let bytes = bytes.to_vec();
                        deadline::compile_within(deadline::compile_limit(bytes.len()), move || {
                            pause::reached(Point::WasmCompile);
                            let component = Component::from_binary(&engine, &bytes)?;
                            let artifact = component.serialize()?;
                            Ok((component, artifact))
                        })
                    },
                )
                .map_err(invalid)?;
            let linker = if networked {
                &self.networked
            } else {
                if imports_http(&self.engine, &component) {
                    return Err(LoadError::Link {
                        path: path.to_owned(),
                        message: "it imports wasi:http, but its profile grants no network \
                                  (give it a `network = { allow = [...] }`)"
                            .into(),
                    });
                }
                &self.components
            };
            let pre = linker.instantiate_pre(&component).map_err(link)?;
            (component_kind(path, &self.engine, &component, pre)?, source)
        } else {
            let (module, source) = self
                .cache
                .get_or_compile(
                    digest,
                    // SAFETY: as for components above.
                    |artifact| unsafe { Module::deserialize(&self.engine, artifact) },
                    || {
                        let engine = self.engine.clone();
                        let bytes = bytes.to_vec();
                        deadline::compile_within(deadline::compile_limit(bytes.len()), move || {
                            pause::reached(Point::WasmCompile);
                            let module = Module::from_binary(&engine, &bytes)?;
                            let artifact = module.serialize()?;
                            Ok((module, artifact))
                        })
                    },
                )
                .map_err(invalid)?;
            if !matches!(
                module.get_export("_start"),
                Some(wasmtime::ExternType::Func(_))
            ) {
                return Err(LoadError::Invalid {
                    path: path.to_owned(),
                    message: "not a WASI command: it exports no `_start` function".into(),
                });
            }
            let pre = self.modules.instantiate_pre(&module).map_err(link)?;
            (Compiled::Module(pre), source)
        };
        tracing::info!(
            module = %path.display(),
            digest,
            from = match source {
                Source::Cache => "cache",
                Source::Compiled => "compiler",
            },
            elapsed_ms = started.elapsed().as_secs_f64() * 1000.0,
            "module ready"
        );
        Ok(compiled)
    }
}

impl Engine for WasmEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Wasm
    }

    fn load(&self, image: &ToolImage, profile: &Profile) -> Result<Arc<dyn LoadedTool>, LoadError> {
        let Code::Module(path) = &image.code else {
            return Err(LoadError::Invalid {
                path: image.source.clone(),
                message: "wasm tools name a `module`".into(),
            });
        };
        self.check_profile(profile)?;
        let networked = matches!(profile.network, NetworkPolicy::AllowList { .. });
        let bytes = read_module(path)?;
        let digest = hex::encode(Sha256::digest(&bytes));
        if let Some(pinned) = &image.sha256
            && *pinned != digest
        {
            return Err(LoadError::DigestMismatch {
                path: path.clone(),
                pinned: pinned.clone(),
                actual: digest,
            });
        }
        if networked && !is_component(&bytes) {
            return Err(LoadError::Unenforceable {
                engine: EngineKind::Wasm,
                profile: profile.name.clone(),
                what: "a network allow-list for a preview 1 module (WASI preview 1 has no \
                       network: build a component (wasm32-wasip2))"
                    .into(),
            });
        }
        let compiled = self.compile(path, &digest, &bytes, networked)?;
        Ok(Arc::new(WasmTool {
            name: image.name.clone(),
            digest,
            engine: self.engine.clone(),
            compiled,
            tls: networked.then(|| self.tls.clone()),
            calls: self.calls.clone(),
            retirement: self.retirement.clone(),
            stalls: self.stalls.clone(),
            _ticker: self.ticker.clone(),
        }))
    }
}

fn read_module(path: &Path) -> Result<Vec<u8>, LoadError> {
    let read = |source| LoadError::Read {
        path: path.to_owned(),
        source,
    };
    let size = std::fs::metadata(path).map_err(read)?.len();
    if size > MAX_MODULE_BYTES {
        return Err(LoadError::TooLarge {
            path: path.to_owned(),
            size,
            max: MAX_MODULE_BYTES,
        });
    }
    std::fs::read(path).map_err(read)
}

/// A component that exports `call` is typed (and must match the world's signature);
/// otherwise it must be a WASI command.
fn component_kind(
    path: &Path,
    engine: &Wasmtime,
    component: &Component,
    pre: wasmtime::component::InstancePre<ComponentState>,
) -> Result<Compiled, LoadError> {
    let exports_call = component
        .component_type()
        .exports(engine)
        .any(|(name, _)| name == "call");
    if exports_call {
        let typed = TypedPre::new(pre).map_err(|err| LoadError::Invalid {
            path: path.to_owned(),
            message: format!(
                "its `call` export does not match the world airlock:tool/tool@0.1.0 of \
                 sdk/wit/tool.wit: {err:#}"
            ),
        })?;
        return Ok(Compiled::Typed(typed));
    }
    let command = CommandPre::new(pre).map_err(|err| LoadError::Invalid {
        path: path.to_owned(),
        message: format!(
            "a component must export either `call` (the world airlock:tool/tool@0.1.0 of \
             sdk/wit/tool.wit) or wasi:cli/run (a WASI command): {err:#}"
        ),
    })?;
    Ok(Compiled::Command(command))
}

/// Whether `component` imports any wasi:http interface.
fn imports_http(engine: &Wasmtime, component: &Component) -> bool {
    component
        .component_type()
        .imports(engine)
        .any(|(name, _)| name.starts_with("wasi:http/"))
}

/// Components carry layer 1 in their preamble; core modules carry version 1 and layer 0.
fn is_component(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[6..8] == [0x01, 0x00]
}

enum Compiled {
    Module(InstancePre<ModuleState>),
    Command(CommandPre<ComponentState>),
    Typed(TypedPre<ComponentState>),
}

struct WasmTool {
    name: String,
    digest: String,
    engine: Wasmtime,
    compiled: Compiled,
    /// Set exactly for a component linked with wasi-http.
    tls: Option<Arc<tokio_rustls::rustls::ClientConfig>>,
    calls: Arc<Semaphore>,
    retirement: Retirement,
    stalls: Arc<Stalls>,
    _ticker: Arc<EpochTicker>,
}

impl LoadedTool for WasmTool {
    fn digest(&self) -> &str {
        &self.digest
    }

    fn kind(&self) -> ToolKind {
        match self.compiled {
            Compiled::Module(_) => ToolKind::WasmModule,
            Compiled::Command(_) => ToolKind::WasmCommand,
            Compiled::Typed(_) => ToolKind::WasmComponent,
        }
    }

    fn run(&self, launch: Launch) -> BoxFuture<'_, Exit> {
        Box::pin(self.call(launch))
    }
}

impl WasmTool {
    async fn call(&self, launch: Launch) -> Exit {
        let Ok(permit) = self.calls.clone().acquire_owned().await else {
            return Exit::SandboxError("the wasm engine is shutting down".into());
        };
        // A store that holds more than its own memory is torn down with the call: an
        // overlay's preopens keep the detached mount alive, and it must be gone before the
        // call's changes are read; an egress gate's connections close with the store.
        let holds_only_itself = launch.overlay.is_none() && launch.egress.is_none();
        let slot = Slot {
            permit,
            retirement: holds_only_itself.then(|| self.retirement.clone()),
        };
        // A typed component returns its result: what it prints is a log, like stderr.
        let stdout = match self.compiled {
            Compiled::Module(_) | Compiled::Command(_) => StreamKind::Stdout,
            Compiled::Typed(_) => StreamKind::Stderr,
        };
        let mut wasi = match wasi_context(&self.name, &launch, stdout) {
            Ok(wasi) => wasi,
            Err(message) => return Exit::SandboxError(message),
        };
        let limiter = Limiter::new(launch.profile.limits.memory_bytes, launch.stats.clone());
        let run = async {
            let result = match &self.compiled {
                Compiled::Module(pre) => {
                    let state = ModuleState {
                        wasi: wasi.build_p1(),
                        limiter,
                    };
                    run_module(&self.engine, pre, state, slot)
                        .await
                        .map(|()| None)
                }
                Compiled::Command(pre) => {
                    let state = self.component_state(&launch, wasi.build(), limiter);
                    run_command(&self.engine, pre, state, slot)
                        .await
                        .map(|()| None)
                }
                Compiled::Typed(pre) => {
                    let state = self.component_state(&launch, wasi.build(), limiter);
                    typed::run(&self.engine, pre, state, &launch, slot)
                        .await
                        .map(Some)
                }
            };
            exit_of(result)
        };
        let metered = CpuMetered::new(run, launch.stats.clone(), launch.profile.limits.cpu_time);
        match self.stalls.watch(metered, launch.deadline).await {
            Some(Ok(exit)) => exit,
            Some(Err(hit)) => Exit::LimitExceeded(hit.to_string()),
            // Not run past its deadline, even where the runtime's timer is late (`stall`).
            None => Exit::PastDeadline,
        }
    }

    /// A component's store data: its WASI context, and the call's egress gate when it is
    /// linked with wasi-http.
    fn component_state(&self, launch: &Launch, ctx: WasiCtx, limiter: Limiter) -> ComponentState {
        let egress = match (&launch.egress, &self.tls) {
            (Some(gate), Some(tls)) => Egress::through(gate.clone(), tls.clone()),
            // No allow-list, or (fail closed) a gate for a tool linked without wasi-http,
            // which could not use it anyway.
            (None, _) | (Some(_), None) => Egress::closed(),
        };
        ComponentState {
            ctx,
            table: ResourceTable::new(),
            http: WasiHttpCtx::new(),
            egress,
            limiter,
        }
    }
}

/// Advances the engine's epoch every [`EPOCH_TICK`] until dropped.
struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    /// Also frees, each tick, the threads of calls stuck in a system call (`stall`).
    fn start(engine: Wasmtime, stalls: Arc<Stalls>) -> std::io::Result<EpochTicker> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("airlock-epoch".into())
            .spawn(move || {
                while !stopped.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                    let freed = stalls.interrupt();
                    if freed > 0 {
                        tracing::debug!(calls = freed, "interrupted calls stuck in a system call");
                    }
                }
            })?;
        Ok(EpochTicker {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
#[path = "wasm_tests.rs"]
mod tests;
