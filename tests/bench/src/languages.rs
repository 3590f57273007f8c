//! Section 10, languages (issue 20): the example tool (sdk/wordstats/SPEC.md) as each
//! language's template builds it — a folder of built projects, `wordstats_<lang>/`, as
//! scripts/languages.sh makes (`--languages-dir`) — and what its language costs:
//!
//! - *module size*: the bytes of the manifest's `module` (a core module or a component);
//! - *compile*: a daemon serving that tool alone (a tools folder holding a link to it) with a
//!   fresh state directory and an empty module cache. The figure is the daemon's own log line
//!   `module ready … from="compiler" elapsed_ms=…` (compiling and pre-instantiating; not
//!   reading and hashing the file); spawn → serving, less that of a daemon serving no tools
//!   in the same run, is noted beside it as a cross-check;
//! - *cached load*: the same daemon restarted on the same state and cache: `from="cache"`;
//! - *warm call*: `ExecuteTool` of `{"pattern": "*.txt"}` on a copy of
//!   sdk/wordstats/workspace, on one connection, after warm-up calls; against the C module
//!   (the peer, measured in the same run) and the gRPC health check of the same daemon.

use std::path::{Path, PathBuf};
use std::time::Duration;

use airlock_daemon::testing::Manifest;
use airlock_proto::v1::tools_client::ToolsClient;
use anyhow::{Context, bail};
use tonic_health::pb::health_client::HealthClient;

use crate::Bench;
use crate::client;
use crate::cold_start::module_size;
use crate::daemon::{Airlockd, DaemonSpec};
use crate::report::{Check, Report, cost};
use crate::stats::{Samples, format_duration};

const SECTION: &str = "10 languages";

/// The vector every language is called with (the first of sdk/wordstats/vectors.json), and
/// what its answer must hold; languages space their JSON differently, and
/// scripts/languages.sh checks the whole answer.
const ARGUMENTS: &str = r#"{"pattern": "*.txt"}"#;
const EXPECT: &str = "\"totals\"";

/// The language every other is compared with.
const PEER: &str = "c";

/// How the projects' folders are named: `wordstats_<lang, `-` as `_`>`.
const PREFIX: &str = "wordstats_";

/// One built project.
struct Tool {
    /// As `airlock tools new --lang` names it.
    lang: String,
    /// The tool's name (its manifest's).
    name: String,
    dir: PathBuf,
    size: u64,
    component: bool,
}

/// What one language measured, for the summary table.
struct Figures {
    compile: Samples,
    cached: Samples,
    call: Samples,
    health: Samples,
}

pub async fn run(bench: &Bench, report: &mut Report) -> anyhow::Result<()> {
    let Some(dir) = &bench.languages_dir else {
        report.skipped(
            SECTION,
            "languages",
            "the example tool in each language: size, compile, cached load, warm call",
            "no --languages-dir (scripts/languages.sh builds them into <target dir>/languages/tools)",
        );
        return Ok(());
    };
    let tools = find_tools(dir)?;
    let workspace_root = bench.fixtures.fresh_dir("languages-workspaces-")?;
    let workspace = workspace_root.join("wordstats");
    copy_dir(
        &bench.fixtures.repo.join("sdk/wordstats/workspace"),
        &workspace,
    )?;
    let counts = Counts {
        compiles: bench.count(3, 1),
        loads: bench.count(5, 1),
        calls: bench.count(300, 5),
        warmup: bench.count(10, 1),
    };

    eprintln!("{SECTION}: a daemon serving no tools");
    let no_tools = bench.fixtures.fresh_dir("languages-no-tools-")?;
    let mut empty = Vec::with_capacity(counts.loads);
    for _ in 0..counts.loads {
        let daemon = Airlockd::start(&daemon_spec(bench, &no_tools, &workspace_root)?).await?;
        empty.push(daemon.spawned.elapsed());
        daemon.stop().await?;
    }
    let empty = Samples::sequential(empty).p50();

    let mut measured = Vec::with_capacity(tools.len());
    for tool in &tools {
        eprintln!("{SECTION}: {} ({} bytes)", tool.lang, tool.size);
        let figures = measure(
            bench,
            tool,
            &workspace_root,
            &workspace,
            &counts,
            empty,
            report,
        )
        .await
        .with_context(|| format!("the {} tool ({})", tool.lang, tool.dir.display()))?;
        measured.push(figures);
    }
    let peer = tools.iter().position(|tool| tool.lang == PEER);
    for tool in tools.iter().filter(|tool| tool.lang != PEER) {
        if peer.is_some() {
            report.compare(&key(tool, "call"), &format!("lang-{PEER}-call"));
        }
    }
    let peer_p50 = peer.map(|index| measured[index].call.p50());
    report.table(&summary(&tools, &measured, peer_p50));
    // Issue 54: the example tool's warm call, whose file calls run on the call's own thread,
    // within 3× the health check in every language but Python (whose runtime starts an
    // interpreter each call).
    for tool in tools.iter().filter(|tool| tool.lang != "python") {
        report.target(
            &format!(
                "{}: the example tool's warm call ≤ 3× the health check",
                tool.lang
            ),
            Check::Ratio {
                ours: key(tool, "call"),
                peer: key(tool, "health"),
                max: 3.0,
            },
        );
    }
    Ok(())
}

struct Counts {
    compiles: usize,
    loads: usize,
    calls: usize,
    warmup: usize,
}

fn key(tool: &Tool, what: &str) -> String {
    format!("lang-{}-{what}", tool.lang)
}

/// Compiles, cached loads and warm calls of one tool, each recorded in the report.
async fn measure(
    bench: &Bench,
    tool: &Tool,
    workspace_root: &Path,
    workspace: &Path,
    counts: &Counts,
    empty: Duration,
    report: &mut Report,
) -> anyhow::Result<Figures> {
    let tools_dir = bench.fixtures.fresh_dir("languages-tools-")?;
    std::os::unix::fs::symlink(&tool.dir, tools_dir.join(&tool.name))
        .context("cannot link the tool into its tools folder")?;

    let mut compiled = Vec::with_capacity(counts.compiles);
    let mut serving = Vec::with_capacity(counts.compiles);
    let mut last = None;
    for _ in 0..counts.compiles {
        let spec = daemon_spec(bench, &tools_dir, workspace_root)?;
        let (daemon, ready) = start(&spec, "compiler").await?;
        serving.push(daemon.spawned.elapsed());
        compiled.push(ready);
        daemon.stop().await?;
        last = Some(spec);
    }
    let spec = last.context("no compile was measured")?;
    let mut cached = Vec::with_capacity(counts.loads);
    for _ in 1..counts.loads {
        let (daemon, ready) = start(&spec, "cache").await?;
        cached.push(ready);
        daemon.stop().await?;
    }
    // The last restart serves the calls.
    let (daemon, ready) = start(&spec, "cache").await?;
    cached.push(ready);
    let (call, health) = calls(&daemon, tool, workspace, counts)
        .await
        .with_context(|| format!("daemon log:\n{}", daemon.log_tail()))?;
    daemon.stop().await?;

    let figures = Figures {
        compile: Samples::sequential(compiled),
        cached: Samples::sequential(cached),
        call,
        health,
    };
    let lang = &tool.lang;
    let compile_key = key(tool, "compile");
    report.measured(
        SECTION,
        &compile_key,
        &format!("{lang}: compile, empty cache (daemon's log)"),
        figures.compile.clone(),
    );
    let over_empty = Samples::sequential(serving).p50().saturating_sub(empty);
    report.note(
        &compile_key,
        &format!(
            "{} {}; spawn → serving {} over a daemon with no tools",
            size_text(tool.size),
            kind(tool),
            format_duration(over_empty)
        ),
    );
    report.measured(
        SECTION,
        &key(tool, "cache"),
        &format!("{lang}: load from the cache (daemon's log)"),
        figures.cached.clone(),
    );
    report.measured(
        SECTION,
        &key(tool, "call"),
        &format!("{lang}: warm ExecuteTool, c=1"),
        figures.call.clone(),
    );
    report.measured(
        SECTION,
        &key(tool, "health"),
        &format!("{lang}: health check, same daemon"),
        figures.health.clone(),
    );
    report.compare(&key(tool, "call"), &key(tool, "health"));
    Ok(figures)
}

/// Warm calls of the vector, then health checks, on the daemon serving the tool.
async fn calls(
    daemon: &Airlockd,
    tool: &Tool,
    workspace: &Path,
    counts: &Counts,
) -> anyhow::Result<(Samples, Samples)> {
    let name = tool.name.clone();
    let workspace = workspace.to_owned();
    let call = client::load(daemon, 1, counts.warmup, counts.calls, move |channel| {
        let (name, workspace) = (name.clone(), workspace.clone());
        async move {
            client::execute(
                &mut ToolsClient::new(channel),
                &name,
                ARGUMENTS,
                Some(&workspace),
                EXPECT,
            )
            .await
        }
    })
    .await?;
    let health = client::load(
        daemon,
        1,
        counts.warmup,
        counts.calls,
        |channel| async move { client::health(&mut HealthClient::new(channel)).await },
    )
    .await?;
    Ok((call, health))
}

/// A daemon serving `tools_dir`, with a fresh state directory and an empty module cache.
fn daemon_spec(
    bench: &Bench,
    tools_dir: &Path,
    workspace_root: &Path,
) -> anyhow::Result<DaemonSpec> {
    let mut spec = bench.daemon_spec("languages-state-")?;
    spec.tools_dirs = vec![tools_dir.to_owned()];
    spec.workspace_root = workspace_root.to_owned();
    Ok(spec)
}

/// Starts the daemon and reads how long its one module took to be ready, which must have
/// come `from` the compiler or the cache.
async fn start(spec: &DaemonSpec, from: &str) -> anyhow::Result<(Airlockd, Duration)> {
    let daemon = Airlockd::start(spec).await?;
    let log = daemon.log_tail();
    match log.lines().rev().find_map(module_ready) {
        Some((source, elapsed)) if source == from => Ok((daemon, elapsed)),
        Some((source, _)) => {
            bail!("the module came from the {source}, not the {from}; daemon log:\n{log}")
        }
        None => bail!("the daemon logged no `module ready` (tool refused?); daemon log:\n{log}"),
    }
}

/// `from` and `elapsed_ms` of the engine's `module ready` line.
fn module_ready(line: &str) -> Option<(&str, Duration)> {
    if !line.contains("module ready") {
        return None;
    }
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|word| word.strip_prefix(name))
            .map(|value| value.trim_matches('"'))
    };
    let elapsed: f64 = field("elapsed_ms=")?.parse().ok()?;
    Some((field("from=")?, Duration::from_secs_f64(elapsed / 1000.0)))
}

/// The projects under `dir`, smallest module first.
fn find_tools(dir: &Path) -> anyhow::Result<Vec<Tool>> {
    let mut tools = Vec::new();
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    for entry in entries {
        let dir = entry?.path();
        let manifest_path = dir.join("tool.toml");
        if !manifest_path.is_file() {
            continue;
        }
        let dir = dir.canonicalize()?;
        let manifest = Manifest::load(&manifest_path)?;
        let folder = dir.file_name().unwrap_or_default().to_string_lossy();
        let lang = folder
            .strip_prefix(PREFIX)
            .unwrap_or(&folder)
            .replace('_', "-");
        let size = module_size(&manifest_path)?;
        let airlock_daemon::testing::Code::Module(module) = &manifest.image.code else {
            bail!("{} is not a wasm tool", manifest_path.display());
        };
        let mut header = [0u8; 8];
        std::io::Read::read_exact(&mut std::fs::File::open(module)?, &mut header)?;
        tools.push(Tool {
            lang,
            name: manifest.name().to_owned(),
            dir,
            size,
            // The component model's layer field, as the engine tells them apart.
            component: header[6..8] == [0x01, 0x00],
        });
    }
    if tools.is_empty() {
        bail!(
            "{} holds no tool projects (folders with a tool.toml): build them with scripts/languages.sh",
            dir.display()
        );
    }
    tools.sort_by_key(|tool| tool.size);
    Ok(tools)
}

/// Copies a directory tree (files and directories; hidden ones too).
fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in
        std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))?
    {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

fn kind(tool: &Tool) -> &'static str {
    if tool.component {
        "component"
    } else {
        "core module"
    }
}

fn size_text(bytes: u64) -> String {
    let kib = bytes as f64 / 1024.0;
    if kib < 1024.0 {
        format!("{kib:.0} KiB")
    } else {
        format!("{:.1} MiB", kib / 1024.0)
    }
}

/// One line per language, the C module's warm call as the peer.
fn summary(tools: &[Tool], measured: &[Figures], peer: Option<Duration>) -> String {
    let mut out = String::from(
        "| language | kind | module size | compile p50 | cached load p50 | warm call p50 | \
         warm call p99 | × C (p50) | × health check (p50) |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for (tool, figures) in tools.iter().zip(measured) {
        let call = figures.call.p50();
        let against_peer = peer.map_or("–".into(), |peer| format!("{:.2}", cost(call, peer)));
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {against_peer} | {:.2} |\n",
            tool.lang,
            kind(tool),
            size_text(tool.size),
            format_duration(figures.compile.p50()),
            format_duration(figures.cached.p50()),
            format_duration(call),
            format_duration(figures.call.p99()),
            cost(call, figures.health.p50()),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_module_ready_line() {
        let line = "2026-12-01T23:24:07.626457Z  INFO airlock_daemon::engine::wasm: module ready \
                    module=/t/w/w.wasm digest=\"7749\" from=\"compiler\" elapsed_ms=15661.433143";
        let (from, elapsed) = module_ready(line).expect("a module ready line");
        assert_eq!(from, "compiler");
        assert_eq!(elapsed, Duration::from_secs_f64(15.661433143));
        assert_eq!(module_ready("INFO airlockd serving listen=Some(x)"), None);
    }

    #[test]
    fn sizes_read_in_kib_then_mib() {
        assert_eq!(size_text(54_485), "53 KiB");
        assert_eq!(size_text(18_447_880), "17.6 MiB");
    }
}
