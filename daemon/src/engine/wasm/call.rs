//! One call's store: its WASI context, empty but for what the profile grants; the state a
//! module's or a component's store holds; running a module's `_start` or a command's `run`
//! to its end; and how the guest's ending becomes the call's exit.

use tokio::sync::OwnedSemaphorePermit;
use wasmtime::component::ResourceTable;
use wasmtime::{Engine as Wasmtime, InstancePre, Store};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::bindings::CommandPre;
use wasmtime_wasi::p2::pipe::MemoryInputPipe;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::http::Egress;
use super::limits::{LimitHit, Limiter};
use super::preopen;
use super::retire::Retirement;
use super::stdio::CaptureStream;
use crate::engine::contract::{Exit, Launch};
use crate::output::StreamKind;
use crate::pause::{self, Point};
use crate::profile::{Access, GUEST_WORKSPACE, GrantPath};

/// The WASI context of one call: empty, plus what the profile grants; the guest's stdout
/// goes to the capture as `stdout`.
pub(super) fn wasi_context(
    name: &str,
    launch: &Launch,
    stdout: StreamKind,
) -> Result<WasiCtxBuilder, String> {
    let mut wasi = WasiCtxBuilder::new();
    wasi.stdin(MemoryInputPipe::new(launch.stdin.clone()))
        .stdout(CaptureStream::new(launch.capture.clone(), stdout))
        .stderr(CaptureStream::new(
            launch.capture.clone(),
            StreamKind::Stderr,
        ))
        .arg(name)
        .envs(&launch.env())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .allow_blocking_current_thread(reads_only(launch));
    let grants = launch
        .profile
        .resolve_files(launch.workspace.as_deref())
        .map_err(|err| err.to_string())?;
    // `resolve_files` maps the profile's grants one for one, in order.
    for (grant, granted) in grants.into_iter().zip(&launch.profile.files) {
        let perms = match grant.access {
            Access::ReadOnly => FsPerms::ReadOnly,
            Access::ReadWrite => FsPerms::ReadWrite,
        };
        let guest = grant.guest.to_string_lossy().into_owned();
        // Held until the preopens below have opened the directory through it.
        let opened = match &granted.path {
            GrantPath::Host(_) => None,
            GrantPath::Workspace(sub) => {
                let workspace = launch
                    .workspace
                    .as_deref()
                    .ok_or_else(|| format!("{guest} is granted, but the call has no workspace"))?;
                let opened = match &launch.overlay {
                    Some(overlay) => preopen::open_in_root(overlay.root(), workspace, sub),
                    None => preopen::open_in_workspace(workspace, sub),
                }
                .map_err(|err| format!("cannot open {guest} for the sandbox: {err}"))?;
                Some(opened)
            }
        };
        let host = opened
            .as_ref()
            .map_or_else(|| grant.host.clone(), preopen::Opened::path);
        let mut preopen = |guest: &str| {
            wasi.preopened_dir(&host, guest, perms)
                .map(|_| ())
                .map_err(|err| {
                    format!(
                        "cannot open {} for the sandbox: {err:#}",
                        grant.host.display()
                    )
                })
        };
        preopen(&guest)?;
        // The workspace is also the current directory, so relative paths resolve into it in
        // every language's WASI library (sdk/ABI.md).
        if guest == GUEST_WORKSPACE {
            preopen(".")?;
        }
    }
    Ok(wasi)
}

/// Whether a call's file system calls may run on its own thread: when it can only read.
///
/// A read from the page cache costs less than the hop to tokio's blocking pool and back that
/// each call takes otherwise, and a tool makes dozens. But a call that can write could hold
/// the runtime's thread in the kernel for as long as the disk takes — writing its whole
/// memory at once, `fsync`, an overlay copying a large file up at `open` — in system calls
/// no signal interrupts (`stall`), so such a call keeps the pool. Reading stays bounded by
/// what one read may fetch (at most the call's memory). The one call the mode would let
/// block for as long as the guest asks, a preview 1 sleep, is served by a timer (`timer`).
pub(super) fn reads_only(launch: &Launch) -> bool {
    launch.overlay.is_none()
        && launch
            .profile
            .files
            .iter()
            .all(|grant| grant.access == Access::ReadOnly)
}

pub(super) struct ModuleState {
    pub(super) wasi: WasiP1Ctx,
    pub(super) limiter: Limiter,
}

pub(super) struct ComponentState {
    pub(super) ctx: WasiCtx,
    pub(super) table: ResourceTable,
    pub(super) http: WasiHttpCtx,
    pub(super) egress: Egress,
    pub(super) limiter: Limiter,
}

impl WasiView for ComponentState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for ComponentState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.egress,
        }
    }
}

/// Every store yields at each epoch tick and is limited by its call's limiter.
pub(super) fn configure<T: 'static>(store: &mut Store<T>, limiter: fn(&mut T) -> &mut Limiter) {
    store.limiter(move |state| limiter(state) as &mut dyn wasmtime::ResourceLimiter);
    store.set_epoch_deadline(1);
    store.epoch_deadline_async_yield_and_update(1);
}

/// A call's place among the running calls, and where its store goes when the call ends.
pub(super) struct Slot {
    pub(super) permit: OwnedSemaphorePermit,
    /// `None`: the store is torn down as the call ends.
    pub(super) retirement: Option<Retirement>,
}

impl Slot {
    /// Retires the finished call's store, then gives up the call's place: the next call may
    /// start at once, in one of the pool's spare slots if this store is still retired. A
    /// store not retired is torn down first, so a running call's store never needs a spare.
    pub(super) fn release<T: 'static>(self, store: Store<T>) {
        match &self.retirement {
            Some(retirement) => retirement.retire(store),
            None => drop(store),
        }
        drop(self.permit);
    }
}

pub(super) async fn run_module(
    engine: &Wasmtime,
    pre: &InstancePre<ModuleState>,
    state: ModuleState,
    slot: Slot,
) -> wasmtime::Result<()> {
    let mut store = Store::new(engine, state);
    configure(&mut store, |state| &mut state.limiter);
    pause::reached(Point::WasmInstantiate);
    let result = async {
        let instance = pre.instantiate_async(&mut store).await?;
        let start = instance.get_typed_func::<(), ()>(&mut store, "_start")?;
        start.call_async(&mut store, ()).await
    }
    .await;
    slot.release(store);
    result
}

pub(super) async fn run_command(
    engine: &Wasmtime,
    pre: &CommandPre<ComponentState>,
    state: ComponentState,
    slot: Slot,
) -> wasmtime::Result<()> {
    let mut store = Store::new(engine, state);
    configure(&mut store, |state| &mut state.limiter);
    pause::reached(Point::WasmInstantiate);
    let result = async {
        let command = pre.instantiate_async(&mut store).await?;
        command.wasi_cli_run().call_run(&mut store).await
    }
    .await;
    slot.release(store);
    match result? {
        Ok(()) => Ok(()),
        Err(()) => Err(I32Exit(1).into()),
    }
}

/// How a call ended: `Some` exit when the run decided it (a typed component), else from
/// how the guest finished.
pub(super) fn exit_of(result: wasmtime::Result<Option<Exit>>) -> Exit {
    let err = match result {
        Ok(Some(exit)) => return exit,
        Ok(None) => return Exit::Code(0),
        Err(err) => err,
    };
    if let Some(exit) = err.downcast_ref::<I32Exit>() {
        return Exit::Code(exit.0);
    }
    if let Some(hit) = err.downcast_ref::<LimitHit>() {
        return Exit::LimitExceeded(hit.to_string());
    }
    Exit::Trap(format!("{err:?}"))
}
