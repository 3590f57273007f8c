//! `airlock-bench`: airlock's benchmarks, each case side by side with the tool users would
//! otherwise pick, measured in one run on one machine and reported as ratios (issue 6).
//!
//! gRPC cases run against the release `airlockd` as its own process on loopback; engine
//! cases run the engines in this process. `scripts/bench.sh` builds everything, installs
//! the peers and runs this; `--smoke` runs every section with tiny counts and judges no
//! target.

mod agent_loop;
mod cassettes;
mod changes;
mod client;
mod cold_start;
mod console;
mod daemon;
mod fixtures;
mod fleet;
mod idle;
mod languages;
mod long_run;
mod mcp_call;
mod mcp_instances;
mod peers;
mod policy;
mod report;
mod runs;
mod scale;
mod stats;
mod streaming;
mod subprocess;
mod telemetry;
mod wasm_call;
mod wasm_files;

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, ValueEnum};

use daemon::{Airlockd, DaemonSpec};
use fixtures::Fixtures;
use report::Report;

/// Benchmarks airlock against wasmtime-cli, bare spawns, unshare, bubblewrap and the MCP SDK.
#[derive(Debug, Parser)]
#[command(name = "airlock-bench")]
struct Args {
    /// Sections to run, in order [default: all].
    #[arg(value_enum)]
    sections: Vec<Section>,
    /// Tiny counts: every section runs in seconds; the targets are not judged.
    #[arg(long)]
    smoke: bool,
    /// The `airlockd` to measure [default: the one beside this binary].
    #[arg(long, value_name = "PATH")]
    airlockd: Option<PathBuf>,
    /// The `wasmtime` CLI to compare with; its cases are skipped without it.
    #[arg(long, value_name = "PATH")]
    wasmtime: Option<PathBuf>,
    /// How many runs wait at once in the scale section.
    #[arg(long, value_delimiter = ',', default_values_t = [10, 100, 1000, 10000])]
    scale: Vec<usize>,
    /// The example tool built in each language, one `wordstats_<lang>/` project each (as
    /// scripts/languages.sh makes them); the languages section is skipped without it.
    #[arg(long, value_name = "DIR")]
    languages_dir: Option<PathBuf>,
    /// Also write the tables (Markdown) to this file.
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Section {
    /// 1: a warm WebAssembly call.
    Wasm,
    /// 2: a sandboxed subprocess.
    Process,
    /// 3: the agent loop's overhead per step.
    Agent,
    /// 4: many runs waiting on approvals.
    Scale,
    /// 5: daemon start and module loading.
    Cold,
    /// 6: a hosted MCP server's tool, against the MCP SDK calling it directly.
    Mcp,
    /// 7: `run_command` with its overlay and change set, against the same command without.
    Changes,
    /// 8: a streamed answer's pieces from the model API to the client, and what streaming
    /// costs a step.
    Streaming,
    /// 9: what keeping each model exchange costs a step, and a replayed step.
    Cassettes,
    /// 10: the example tool in each language: module size, compile, cached load, warm call.
    Languages,
    /// 11: the web console's first screenful of a long runs list and of a long run, in
    /// headless Chromium.
    Console,
    /// 12: a fleet on PostgreSQL: a loop step and a warm call against SQLite's, takeover
    /// after a kill, runs spread over three daemons against one.
    Fleet,
    /// 13: the permission gate's decision: a 10-command line against 1,000 rules, against the
    /// gate before rules.
    Policy,
    /// 14: what metrics and the audit log cost a warm call and a loop step, on against off.
    Telemetry,
    /// 15: a run of 1,000 steps: a late step against an early one, and what the store grows
    /// by per step.
    Long,
}

/// What every section gets.
pub struct Bench {
    pub fixtures: Fixtures,
    pub airlockd: PathBuf,
    pub wasmtime: Option<PathBuf>,
    pub smoke: bool,
    pub scale_levels: Vec<usize>,
    /// The built example tool per language (`--languages-dir`), when given.
    pub languages_dir: Option<PathBuf>,
}

impl Bench {
    /// The count of a loop: `full` normally, `smoke` in smoke mode.
    pub fn count(&self, full: usize, smoke: usize) -> usize {
        if self.smoke { smoke } else { full }
    }

    /// A daemon serving the benchmark tools, with a fresh state directory and a fresh
    /// module cache.
    pub fn daemon_spec(&self, prefix: &str) -> anyhow::Result<DaemonSpec> {
        Ok(DaemonSpec {
            binary: self.airlockd.clone(),
            tools_dirs: vec![self.fixtures.tools_dir.clone()],
            profiles_dir: self.fixtures.profiles_dir.clone(),
            workspace_root: self.fixtures.workspace_root.clone(),
            state_dir: self.fixtures.fresh_dir(prefix)?,
            module_cache_dir: self.fixtures.fresh_dir("modules-")?,
            config_tables: String::new(),
        })
    }
}

/// The daemon's allocator (daemon/src/main.rs), so that what this process measures in-process
/// allocates as the daemon does.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // Peers run in directories of their own: a relative path given here must not change
    // meaning there.
    let absolute = |path: PathBuf| {
        std::path::absolute(&path).with_context(|| format!("cannot resolve {}", path.display()))
    };
    let airlockd = match args.airlockd {
        Some(path) => absolute(path)?,
        None => std::env::current_exe()?
            .parent()
            .context("the benchmark binary has no directory")?
            .join("airlockd"),
    };
    anyhow::ensure!(
        airlockd.is_file(),
        "{} is missing: build it with `cargo build --release -p airlock-daemon` or pass --airlockd",
        airlockd.display()
    );
    let sections = if args.sections.is_empty() {
        Section::value_variants().to_vec()
    } else {
        args.sections
    };
    let bench = Bench {
        fixtures: Fixtures::create()?,
        airlockd,
        wasmtime: args.wasmtime.map(absolute).transpose()?,
        smoke: args.smoke,
        scale_levels: args.scale,
        languages_dir: args.languages_dir,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let report = runtime.block_on(run(&bench, &sections))?;

    let mut out = machine();
    out.push('\n');
    out.push_str(&report.render(!bench.smoke));
    if bench.smoke {
        out.push_str("\nsmoke run: tiny counts, targets not judged\n");
    }
    print!("{out}");
    if let Some(path) = args.output {
        std::fs::write(&path, &out).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

async fn run(bench: &Bench, sections: &[Section]) -> anyhow::Result<Report> {
    let mut report = Report::default();
    let needs_daemon = sections
        .iter()
        .any(|section| matches!(section, Section::Wasm | Section::Process | Section::Agent));
    // Sections 1 to 3 share one daemon; 4 and 5 start their own.
    let shared = match needs_daemon {
        true => Some(Airlockd::start(&bench.daemon_spec("shared-")?).await?),
        false => None,
    };
    for section in sections {
        let name = format!("{section:?}").to_lowercase();
        // A smoke run judges nothing, so it need not wait for a quiet machine.
        let watch = match bench.smoke {
            true => None,
            false => Some(idle::Watch::start(&name).await?),
        };
        let first_target = report.targets_set();
        let outcome = match (section, &shared) {
            (Section::Wasm, Some(daemon)) => wasm_call::run(bench, daemon, &mut report).await,
            (Section::Process, Some(daemon)) => subprocess::run(bench, daemon, &mut report).await,
            (Section::Agent, Some(daemon)) => agent_loop::run(bench, daemon, &mut report).await,
            (Section::Wasm | Section::Process | Section::Agent, None) => Err(anyhow::anyhow!(
                "sections 1 to 3 need the shared daemon, which was not started"
            )),
            (Section::Scale, _) => scale::run(bench, &mut report).await,
            (Section::Cold, _) => cold_start::run(bench, &mut report).await,
            (Section::Mcp, _) => mcp_call::run(bench, &mut report).await,
            (Section::Changes, _) => changes::run(bench, &mut report).await,
            (Section::Streaming, _) => streaming::run(bench, &mut report).await,
            (Section::Cassettes, _) => cassettes::run(bench, &mut report).await,
            (Section::Languages, _) => languages::run(bench, &mut report).await,
            (Section::Console, _) => console::run(bench, &mut report).await,
            (Section::Fleet, _) => fleet::run(bench, &mut report).await,
            (Section::Policy, _) => policy::run(bench, &mut report).await,
            (Section::Telemetry, _) => telemetry::run(bench, &mut report).await,
            (Section::Long, _) => long_run::run(bench, &mut report).await,
        };
        if let Err(err) = outcome {
            let log = shared.as_ref().map(Airlockd::log_tail).unwrap_or_default();
            return Err(err.context(format!("section {section:?} failed; daemon log:\n{log}")));
        }
        if let Some(watch) = watch {
            report.machine(&name, first_target, watch.finish()?);
        }
    }
    if let Some(daemon) = shared {
        daemon.stop().await?;
    }
    Ok(report)
}

/// The machine the figures come from.
fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split(':').nth(1))
                .map(|model| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    format!(
        "machine: {cores} cores, {cpu}, Linux {}; load average at the end: {}\n",
        kernel.trim(),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    )
}
