//! Section 5, cold start: from spawning `airlockd` to its first served call (the no-op tool,
//! answered `OK`), with the first-party plugins and the no-op tool to load, once with an
//! empty module cache (every module compiled) and once with a warm one; and, in this
//! process, loading one module from the on-disk cache against compiling it afresh.
//!
//! Each daemon gets a fresh state directory (store, process engine), so the only thing the
//! two daemon cases differ in is the module cache.

use std::path::Path;
use std::time::Instant;

use airlock_daemon::testing::{Engine, Manifest, WasmConfig, WasmEngine};
use airlock_proto::v1::tools_client::ToolsClient;

use crate::Bench;
use crate::client;
use crate::daemon::Airlockd;
use crate::fixtures::ECHO;
use crate::report::Report;
use crate::stats::Samples;
use crate::wasm_call::profile;

const SECTION: &str = "5 cold start";

pub async fn run(bench: &Bench, report: &mut Report) -> anyhow::Result<()> {
    let starts = bench.count(5, 1);
    let warm_cache = bench.fixtures.fresh_dir("cold-warm-cache-")?;
    // Fills the warm cache; not measured.
    first_call(bench, &warm_cache).await?;

    eprintln!("{SECTION}: daemon start to first call");
    let mut empty = Vec::with_capacity(starts);
    let mut warm = Vec::with_capacity(starts);
    // Interleaved, so that a change in the machine's load hits both alike.
    for _ in 0..starts {
        let fresh = bench.fixtures.fresh_dir("cold-empty-cache-")?;
        empty.push(first_call(bench, &fresh).await?);
        warm.push(first_call(bench, &warm_cache).await?);
    }
    report.measured(
        SECTION,
        "start-empty",
        "daemon start → first call, empty module cache",
        Samples::sequential(empty),
    );
    report.measured(
        SECTION,
        "start-warm",
        "daemon start → first call, warm module cache",
        Samples::sequential(warm),
    );
    report.compare("start-warm", "start-empty");

    let loads = bench.count(10, 1);
    for (key, manifest, label) in [
        ("echo", bench.fixtures.manifest(ECHO), "no-op tool"),
        (
            "grep",
            bench.fixtures.repo.join("plugins/grep/tool.toml"),
            "grep plugin",
        ),
    ] {
        eprintln!("{SECTION}: module load of the {label}");
        let size = module_size(&manifest)?;
        let (compiled, cached) = module_loads(bench, &manifest, loads)?;
        let compile_key = format!("load-compile-{key}");
        let cache_key = format!("load-cache-{key}");
        report.measured(
            SECTION,
            &compile_key,
            &format!("{label} module load, fresh compile"),
            compiled,
        );
        report.note(
            &compile_key,
            &format!("{:.0} KiB of wasm", size as f64 / 1024.0),
        );
        report.measured(
            SECTION,
            &cache_key,
            &format!("{label} module load, from the on-disk cache"),
            cached,
        );
        report.compare(&cache_key, &compile_key);
    }
    Ok(())
}

/// Starts a daemon on `cache`, makes one call, and returns the time from spawn to its
/// answer.
async fn first_call(bench: &Bench, cache: &Path) -> anyhow::Result<std::time::Duration> {
    let mut spec = bench.daemon_spec("cold-state-")?;
    spec.module_cache_dir = cache.to_owned();
    spec.tools_dirs = vec![
        bench.fixtures.echo_tools_dir()?,
        bench.fixtures.repo.join("plugins"),
    ];
    let daemon = Airlockd::start(&spec).await?;
    let mut tools = ToolsClient::new(daemon.channel().await?);
    client::execute(&mut tools, ECHO, "{}", None, "{}").await?;
    let elapsed = daemon.spawned.elapsed();
    daemon.stop().await?;
    Ok(elapsed)
}

/// `runs` loads of the tool's module with an empty cache each (a compile), then `runs`
/// loads from a warm cache. Only `Engine::load` is timed: reading, hashing, compiling or
/// deserialising, and pre-instantiating.
fn module_loads(bench: &Bench, manifest: &Path, runs: usize) -> anyhow::Result<(Samples, Samples)> {
    let manifest = Manifest::load(manifest)?;
    let profile = profile(&bench.fixtures.profiles_dir, &manifest.profile)?;
    let engine = |cache| {
        WasmEngine::new(&WasmConfig {
            cache_dir: cache,
            max_concurrent_calls: 1,
        })
    };
    let mut compiled = Vec::with_capacity(runs);
    for _ in 0..runs {
        let engine = engine(bench.fixtures.fresh_dir("load-compile-")?)?;
        let started = Instant::now();
        engine.load(&manifest.image, &profile)?;
        compiled.push(started.elapsed());
    }
    let warm = engine(bench.fixtures.fresh_dir("load-cache-")?)?;
    warm.load(&manifest.image, &profile)?;
    let mut cached = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        warm.load(&manifest.image, &profile)?;
        cached.push(started.elapsed());
    }
    Ok((Samples::sequential(compiled), Samples::sequential(cached)))
}

pub fn module_size(manifest: &Path) -> anyhow::Result<u64> {
    let manifest = Manifest::load(manifest)?;
    match &manifest.image.code {
        airlock_daemon::testing::Code::Module(path) => Ok(std::fs::metadata(path)?.len()),
        airlock_daemon::testing::Code::Command { .. } | airlock_daemon::testing::Code::Mcp(_) => {
            anyhow::bail!("{} is not a wasm tool", manifest.path().display())
        }
    }
}
