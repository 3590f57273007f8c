//! Section 1, a warm WebAssembly call: the no-op tool through `ExecuteTool` on loopback at
//! several concurrencies, against the gRPC health check on the same server (the floor any
//! RPC pays), the `wasmtime run` CLI once per call (from `.wasm`, with and without its
//! compilation cache, and from a precompiled `.cwasm`), and the engine's own instantiate +
//! call in this process without gRPC.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_daemon::testing::{
    Engine, Exit, LoadedTool, Manifest, OutputCapture, Profile, Profiles, WasmConfig, WasmEngine,
};
use airlock_proto::v1::tools_client::ToolsClient;
use anyhow::{Context, bail};
use bytes::Bytes;
use tonic_health::pb::health_client::HealthClient;

use crate::Bench;
use crate::client;
use crate::daemon::Airlockd;
use crate::fixtures::ECHO;
use crate::peers::{self, Invocation};
use crate::report::{Check, Report};
use crate::stats::Samples;

const SECTION: &str = "1 wasm call";

/// What the no-op tool is called with, and what it answers.
const ARGUMENTS: &str = "{}";
const ANSWER: &str = "{\"ok\":{}}";

/// The concurrencies the issue asks for.
const CONCURRENCIES: [usize; 3] = [1, 2, 16];

/// The call and its floor are measured in alternating rounds, so that a change in the
/// machine's speed over the seconds the section takes (on a VM, the host's other guests)
/// falls on both alike rather than on whichever ran second: their ratio is the figure the
/// targets judge.
const ROUNDS: usize = 6;

/// Output limit of an in-process call: the echo's answer is a few bytes.
const CAPTURE_LIMIT: u64 = 1 << 20;

pub async fn run(bench: &Bench, daemon: &Airlockd, report: &mut Report) -> anyhow::Result<()> {
    let rounds = bench.count(ROUNDS, 1);
    let calls = bench.count(3000, 20).div_ceil(rounds);
    let warmup = bench.count(20, 2);
    let how = match rounds {
        1 => "in one round".to_owned(),
        n => format!("in {n} alternating rounds"),
    };
    for concurrency in CONCURRENCIES {
        eprintln!("{SECTION}: ExecuteTool and health at concurrency {concurrency}, {how}");
        let mut execute = Samples::default();
        let mut health = Samples::default();
        for _ in 0..rounds {
            execute.append(
                client::load(daemon, concurrency, warmup, calls, |channel| async move {
                    client::execute(&mut ToolsClient::new(channel), ECHO, ARGUMENTS, None, "{}")
                        .await
                })
                .await?,
            );
            health.append(
                client::load(daemon, concurrency, warmup, calls, |channel| async move {
                    client::health(&mut HealthClient::new(channel)).await
                })
                .await?,
            );
        }
        report.measured(
            SECTION,
            &format!("grpc-c{concurrency}"),
            &format!("ExecuteTool no-op wasm, gRPC, c={concurrency}"),
            execute,
        );
        report.measured(
            SECTION,
            &format!("health-c{concurrency}"),
            &format!("gRPC health check (floor), c={concurrency}"),
            health,
        );
        report.compare(
            &format!("grpc-c{concurrency}"),
            &format!("health-c{concurrency}"),
        );
    }

    eprintln!("{SECTION}: engine in-process");
    let samples = in_process(bench, bench.count(4000, 20), warmup).await?;
    report.measured(
        SECTION,
        "inproc",
        "engine instantiate + call, in-process, no gRPC",
        samples,
    );
    report.compare("grpc-c1", "inproc");

    cli_peers(bench, report).await?;
    crate::wasm_files::run(bench, daemon, report).await?;

    let targets = [
        (
            "warm wasm call over gRPC, p50 ≤ 150 µs",
            Check::Latency {
                ours: "grpc-c1".into(),
                max: Duration::from_micros(150),
            },
        ),
        (
            "warm wasm call ≤ 1.5× the health check, c=1",
            Check::Ratio {
                ours: "grpc-c1".into(),
                peer: "health-c1".into(),
                max: 1.5,
            },
        ),
        (
            "warm wasm call ≤ 3× the health check, c=16",
            Check::Ratio {
                ours: "grpc-c16".into(),
                peer: "health-c16".into(),
                max: 3.0,
            },
        ),
        (
            "≥ 10,000 warm wasm calls a second at c=16",
            Check::Throughput {
                ours: "grpc-c16".into(),
                min: 10_000.0,
            },
        ),
        (
            "≥ 25× faster than `wasmtime run` (.wasm, CLI cache on)",
            Check::Ratio {
                ours: "grpc-c1".into(),
                peer: "cli-wasm".into(),
                max: 0.04,
            },
        ),
        (
            "≥ 20× faster than `wasmtime run` (.cwasm)",
            Check::Ratio {
                ours: "grpc-c1".into(),
                peer: "cli-cwasm".into(),
                max: 0.05,
            },
        ),
        (
            "the engine's instantiate + call in-process ≤ 10 µs",
            Check::Latency {
                ours: "inproc".into(),
                max: Duration::from_micros(10),
            },
        ),
    ];
    for (goal, check) in targets {
        report.target(goal, check);
    }
    Ok(())
}

/// The engine alone: a fresh store, WASI context and instance per call, as the daemon does.
async fn in_process(bench: &Bench, calls: usize, warmup: usize) -> anyhow::Result<Samples> {
    let call = InProcess {
        manifest: bench.fixtures.manifest(ECHO),
        profile: "strict",
        arguments: ARGUMENTS,
        workspace: None,
        expect: ANSWER,
    };
    call.measure(bench, calls, warmup).await
}

/// One tool called by the engine in this process, without the daemon around it.
pub struct InProcess<'a> {
    pub manifest: std::path::PathBuf,
    pub profile: &'a str,
    pub arguments: &'a str,
    pub workspace: Option<&'a Path>,
    /// What its stdout must contain.
    pub expect: &'a str,
}

impl InProcess<'_> {
    pub async fn measure(
        &self,
        bench: &Bench,
        calls: usize,
        warmup: usize,
    ) -> anyhow::Result<Samples> {
        let engine = WasmEngine::new(&WasmConfig {
            cache_dir: bench.fixtures.fresh_dir("inproc-cache-")?,
            max_concurrent_calls: 16,
        })?;
        let profile = profile(&bench.fixtures.profiles_dir, self.profile)?;
        let manifest = Manifest::load(&self.manifest)?;
        let tool = engine.load(&manifest.image, &profile)?;
        for _ in 0..warmup {
            self.call(tool.as_ref(), &profile).await?;
        }
        let mut latencies = Vec::with_capacity(calls);
        for _ in 0..calls {
            latencies.push(self.call(tool.as_ref(), &profile).await?);
        }
        Ok(Samples::sequential(latencies))
    }

    async fn call(
        &self,
        tool: &dyn LoadedTool,
        profile: &Arc<Profile>,
    ) -> anyhow::Result<Duration> {
        let capture = OutputCapture::new(CAPTURE_LIMIT, None);
        let launch = crate::fixtures::launch(
            Bytes::copy_from_slice(self.arguments.as_bytes()),
            self.workspace.map(Path::to_path_buf),
            None,
            profile.clone(),
            capture.clone(),
        );
        let started = Instant::now();
        let exit = tool.run(launch).await;
        let elapsed = started.elapsed();
        let stdout = capture.finish().stdout;
        if exit != Exit::Code(0) || !String::from_utf8_lossy(&stdout).contains(self.expect) {
            bail!(
                "the in-process call ended with {exit:?}, stdout {:?}",
                String::from_utf8_lossy(&stdout)
            );
        }
        Ok(elapsed)
    }
}

/// A profile of the repository's `sandbox-profiles/` (a broken one says why when asked for).
pub fn profile(dir: &Path, name: &str) -> anyhow::Result<Arc<Profile>> {
    let (profiles, _) = Profiles::load_dir(dir);
    Ok(profiles.get(name)?)
}

/// `wasmtime run` of the same module, once per call.
async fn cli_peers(bench: &Bench, report: &mut Report) -> anyhow::Result<()> {
    const WHY: &str = "wasmtime-cli not installed (scripts/bench.sh installs it outside --smoke)";
    let cases = [
        (
            "cli-wasm",
            "`wasmtime run` of .wasm (CLI cache on, the default)",
        ),
        (
            "cli-wasm-nocache",
            "`wasmtime run -C cache=n` of .wasm (compiles each call)",
        ),
        ("cli-cwasm", "`wasmtime run --allow-precompiled` of .cwasm"),
    ];
    let Some(wasmtime) = &bench.wasmtime else {
        for (key, case) in cases {
            report.skipped(SECTION, key, case, WHY);
            report.compare("grpc-c1", key);
        }
        return Ok(());
    };
    let dir = bench.fixtures.fresh_dir("wasmtime-cli-")?;
    let cwasm = dir.join("echo.cwasm");
    let wasmtime = wasmtime.to_string_lossy().into_owned();
    let module = bench.fixtures.echo_module.to_string_lossy().into_owned();
    let compiled = std::process::Command::new(&wasmtime)
        .args(["compile", &module, "-o"])
        .arg(&cwasm)
        .status()
        .context("cannot run `wasmtime compile`")?;
    if !compiled.success() {
        bail!("`wasmtime compile` failed: {compiled}");
    }
    let cwasm = cwasm.to_string_lossy().into_owned();
    let argv = |extra: &[&str], file: &str| {
        let mut argv = vec![wasmtime.clone(), "run".to_owned()];
        argv.extend(extra.iter().map(|arg| (*arg).to_owned()));
        argv.push(file.to_owned());
        argv
    };
    let command_lines = [
        argv(&[], &module),
        argv(&["-C", "cache=n"], &module),
        argv(&["--allow-precompiled"], &cwasm),
    ];
    for ((key, case), argv) in cases.into_iter().zip(command_lines) {
        // Compiling each call takes tens of milliseconds: fewer runs keep the section under
        // a minute.
        let runs = match key {
            "cli-wasm-nocache" => bench.count(40, 3),
            _ => bench.count(200, 3),
        };
        eprintln!("{SECTION}: {case}");
        let mut invocation = Invocation::new(argv, &dir);
        // The CLI's compilation cache goes to $XDG_CACHE_HOME: keep it in this run's scratch.
        invocation.env = vec![("XDG_CACHE_HOME".into(), dir.to_string_lossy().into_owned())];
        invocation.stdin = ARGUMENTS.as_bytes().to_vec();
        invocation.expect = ANSWER.into();
        let latencies = peers::measure(invocation, bench.count(5, 1), runs).await?;
        report.measured(SECTION, key, case, Samples::sequential(latencies));
        report.compare("grpc-c1", key);
    }
    Ok(())
}
