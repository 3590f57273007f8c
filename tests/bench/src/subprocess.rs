//! Section 2, a sandboxed subprocess: `/bin/true` and GNU grep over a small workspace
//! through the process engine (in this process, and through `ExecuteTool` on the daemon),
//! against the same program spawned bare, under `unshare -Urmpfn`, and under
//! `bwrap --unshare-all` with the binds the engine's `process-readonly` profile grants.
//!
//! Every case runs the same argv in the same working directory and checks the same output;
//! only the isolation around it differs. The engine adds what the peers lack: cgroups,
//! Landlock, seccomp, rlimits, and a fresh `/proc` and `/dev`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_daemon::testing::{
    Engine, Exit, LoadedTool, Manifest, OutputCapture, ProcessConfig, ProcessEngine, Profile,
};
use airlock_proto::v1::tools_client::ToolsClient;
use anyhow::bail;
use bytes::Bytes;

use crate::Bench;
use crate::client;
use crate::daemon::Airlockd;
use crate::fixtures::{GREP, GREP_MATCHES, GREP_PATTERN, TRUE};
use crate::peers::{self, Invocation};
use crate::report::{Check, Report};
use crate::stats::Samples;
use crate::wasm_call::profile;

const SECTION: &str = "2 subprocess";

/// The profile both process tools run under, as shipped.
const PROFILE: &str = "process-readonly";

/// Calls in flight at once for the sustained-throughput cases: twice the cores of the
/// machine the figures are taken on, so the sandboxes' own work overlaps.
const CONCURRENCY: usize = 4;

/// Output limit of an in-process call: grep prints a few KiB.
const CAPTURE_LIMIT: u64 = 16 << 20;

/// The pause between paced calls: long enough for the engine's pool to make the next
/// sandbox's namespaces (about 1.5 ms each), as it does between calls that are not
/// back to back.
const PACE: Duration = Duration::from_millis(10);

/// One program: how the engine gets it and what the peers run.
struct Program {
    key: &'static str,
    label: &'static str,
    tool: &'static str,
    arguments: String,
    argv: Vec<String>,
    /// stdout contains this.
    expect: String,
    /// Lines stdout must have (0: no check beyond `expect`).
    lines: usize,
}

pub async fn run(bench: &Bench, daemon: &Airlockd, report: &mut Report) -> anyhow::Result<()> {
    let workspace = &bench.fixtures.workspace;
    let programs = [
        Program {
            key: "true",
            label: "/bin/true",
            tool: TRUE,
            arguments: "{}".into(),
            argv: vec!["/bin/true".into()],
            expect: String::new(),
            lines: 0,
        },
        Program {
            key: "grep",
            label: "grep -r over 40 files",
            tool: GREP,
            arguments: serde_json::json!({ "pattern": GREP_PATTERN }).to_string(),
            argv: bench.fixtures.grep_argv(),
            expect: "needle_".into(),
            lines: GREP_MATCHES,
        },
    ];
    let runs = bench.count(300, 5);
    let warmup = bench.count(20, 1);

    let engine = ProcessEngine::new(&ProcessConfig {
        state_dir: bench.fixtures.fresh_dir("process-engine-")?,
    });
    if let Some(reason) = engine.unavailable() {
        bail!("the process engine cannot run on this host: {reason}");
    }
    let profile = profile(&bench.fixtures.profiles_dir, PROFILE)?;
    let bwrap = peers::which("bwrap");
    let unshare = peers::which("unshare");

    for program in &programs {
        let key = program.key;
        eprintln!("{SECTION}: {}", program.label);
        let manifest = Manifest::load(&bench.fixtures.manifest(program.tool))?;
        let tool = engine.load(&manifest.image, &profile)?;
        let call = EngineCall {
            tool: tool.as_ref(),
            profile: &profile,
            workspace,
            program,
        };
        for _ in 0..warmup {
            call.once().await?;
        }
        let mut latencies = Vec::with_capacity(runs);
        for _ in 0..runs {
            latencies.push(call.once().await?);
        }
        report.measured(
            SECTION,
            &format!("engine-{key}"),
            &format!(
                "{}: process engine, in-process, back to back",
                program.label
            ),
            Samples::sequential(latencies),
        );
        let mut latencies = Vec::with_capacity(runs);
        for _ in 0..bench.count(100, 2) {
            tokio::time::sleep(PACE).await;
            latencies.push(call.once().await?);
        }
        report.measured(
            SECTION,
            &format!("engine-paced-{key}"),
            &format!(
                "{}: process engine, in-process, calls {} ms apart",
                program.label,
                PACE.as_millis()
            ),
            Samples::sequential(latencies),
        );

        let tool_name = program.tool;
        let arguments = program.arguments.clone();
        let expect = program.expect.clone();
        let workspace_arg = workspace.clone();
        let samples = client::load(daemon, 1, warmup, runs, move |channel| {
            let (arguments, expect, workspace) =
                (arguments.clone(), expect.clone(), workspace_arg.clone());
            async move {
                client::execute(
                    &mut ToolsClient::new(channel),
                    tool_name,
                    &arguments,
                    Some(workspace.as_path()),
                    &expect,
                )
                .await
            }
        })
        .await?;
        report.measured(
            SECTION,
            &format!("grpc-{key}"),
            &format!("{}: ExecuteTool over gRPC, process engine", program.label),
            samples,
        );

        let peer_runs = |argv: Vec<String>| {
            let mut invocation = Invocation::new(argv, workspace);
            invocation.expect = program.expect.clone();
            invocation.lines = program.lines;
            invocation
        };
        let bare = peer_runs(program.argv.clone());
        let latencies = peers::measure(bare.clone(), warmup, runs).await?;
        report.measured(
            SECTION,
            &format!("bare-{key}"),
            &format!("{}: bare spawn", program.label),
            Samples::sequential(latencies),
        );

        let case = format!("{}: `unshare -Urmpfn`", program.label);
        match &unshare {
            Some(unshare) => {
                let mut argv = vec![unshare.to_string_lossy().into_owned(), "-Urmpfn".into()];
                argv.extend(program.argv.iter().cloned());
                let latencies = peers::measure(peer_runs(argv), warmup, runs).await?;
                report.measured(
                    SECTION,
                    &format!("unshare-{key}"),
                    &case,
                    Samples::sequential(latencies),
                );
            }
            None => report.skipped(SECTION, &format!("unshare-{key}"), &case, "no unshare"),
        }

        let case = format!("{}: `bwrap --unshare-all`, same binds", program.label);
        match &bwrap {
            Some(bwrap) => {
                let argv = bwrap_argv(bwrap, workspace, &program.argv);
                let latencies = peers::measure(peer_runs(argv), warmup, runs).await?;
                report.measured(
                    SECTION,
                    &format!("bwrap-{key}"),
                    &case,
                    Samples::sequential(latencies),
                );
            }
            None => report.skipped(
                SECTION,
                &format!("bwrap-{key}"),
                &case,
                "bubblewrap not installed (scripts/bench.sh installs it)",
            ),
        }
        let samples = call.concurrently(CONCURRENCY, runs).await?;
        report.measured(
            SECTION,
            &format!("engine-c{CONCURRENCY}-{key}"),
            &format!(
                "{}: process engine, in-process, {CONCURRENCY} at a time",
                program.label
            ),
            samples,
        );
        let samples = concurrent_peer(bare.clone(), CONCURRENCY, runs).await?;
        report.measured(
            SECTION,
            &format!("bare-c{CONCURRENCY}-{key}"),
            &format!("{}: bare spawn, {CONCURRENCY} at a time", program.label),
            samples,
        );
        for peer in ["bare", "unshare", "bwrap"] {
            report.compare(&format!("engine-{key}"), &format!("{peer}-{key}"));
        }
        report.compare(&format!("engine-paced-{key}"), &format!("bwrap-{key}"));
        report.compare(&format!("grpc-{key}"), &format!("bwrap-{key}"));
    }

    report.target(
        "isolated subprocess (/bin/true) at most half of `bwrap --unshare-all`",
        Check::Ratio {
            ours: "engine-true".into(),
            peer: "bwrap-true".into(),
            max: 0.5,
        },
    );
    report.target(
        "isolated subprocess (/bin/true) within 2× of a bare spawn",
        Check::Ratio {
            ours: "engine-true".into(),
            peer: "bare-true".into(),
            max: 2.0,
        },
    );
    report.target(
        "isolated grep at most half of `bwrap --unshare-all`",
        Check::Ratio {
            ours: "engine-grep".into(),
            peer: "bwrap-grep".into(),
            max: 0.5,
        },
    );
    report.target(
        "isolated grep within 2× of a bare spawn",
        Check::Ratio {
            ours: "engine-grep".into(),
            peer: "bare-grep".into(),
            max: 2.0,
        },
    );
    Ok(())
}

/// `runs` spawns of `invocation` from `concurrency` threads at once.
async fn concurrent_peer(
    invocation: Invocation,
    concurrency: usize,
    runs: usize,
) -> anyhow::Result<Samples> {
    let started = Instant::now();
    let workers = (0..concurrency).map(|_| {
        let invocation = invocation.clone();
        tokio::task::spawn_blocking(move || invocation.measure(0, runs.div_ceil(concurrency)))
    });
    let mut latencies = Vec::new();
    for worker in futures::future::join_all(workers).await {
        latencies.extend(worker??);
    }
    Ok(Samples::new(latencies, started.elapsed()))
}

/// One call through the engine, as the executor makes it (minus validation and events).
struct EngineCall<'a> {
    tool: &'a dyn LoadedTool,
    profile: &'a Arc<Profile>,
    workspace: &'a Path,
    program: &'a Program,
}

impl EngineCall<'_> {
    /// `runs` calls, `concurrency` at a time: their latencies and the wall time of all.
    async fn concurrently(&self, concurrency: usize, runs: usize) -> anyhow::Result<Samples> {
        let started = Instant::now();
        let workers = (0..concurrency).map(|_| async {
            let mut latencies = Vec::new();
            for _ in 0..runs.div_ceil(concurrency) {
                latencies.push(self.once().await?);
            }
            anyhow::Ok(latencies)
        });
        let latencies = futures::future::try_join_all(workers).await?;
        Ok(Samples::new(latencies.concat(), started.elapsed()))
    }

    async fn once(&self) -> anyhow::Result<Duration> {
        let capture = OutputCapture::new(CAPTURE_LIMIT, None);
        let launch = crate::fixtures::launch(
            Bytes::from(self.program.arguments.clone()),
            Some(self.workspace.to_owned()),
            None,
            self.profile.clone(),
            capture.clone(),
        );
        let started = Instant::now();
        let exit = self.tool.run(launch).await;
        let elapsed = started.elapsed();
        let summary = capture.finish();
        let stdout = String::from_utf8_lossy(&summary.stdout);
        let lines_ok = self.program.lines == 0 || stdout.lines().count() == self.program.lines;
        if exit != Exit::Code(0) || !stdout.contains(&self.program.expect) || !lines_ok {
            bail!(
                "{} through the engine ended with {exit:?}; stdout: {}; stderr: {}",
                self.program.label,
                stdout.chars().take(300).collect::<String>(),
                String::from_utf8_lossy(&summary.stderr_tail)
            );
        }
        Ok(elapsed)
    }
}

/// bwrap with every namespace and the binds of `process-readonly`: the system read-only,
/// the workspace read-only at /workspace, a fresh /proc and /dev, a /tmp, the same
/// environment, no capabilities, its own session, dying with its parent.
fn bwrap_argv(bwrap: &Path, workspace: &Path, program: &[String]) -> Vec<String> {
    let workspace = workspace.to_string_lossy();
    let mut argv: Vec<String> = vec![bwrap.to_string_lossy().into_owned()];
    let mut push = |items: &[&str]| argv.extend(items.iter().map(|item| (*item).to_owned()));
    push(&["--unshare-all", "--die-with-parent", "--new-session"]);
    push(&["--ro-bind", "/usr", "/usr"]);
    // Debian's merged /usr: the engine gives the sandbox the same symlinks.
    for (link, target) in [
        ("/bin", "usr/bin"),
        ("/lib", "usr/lib"),
        ("/lib64", "usr/lib64"),
    ] {
        if Path::new(link).is_symlink() {
            push(&["--symlink", target, link]);
        } else if Path::new(link).exists() {
            push(&["--ro-bind", link, link]);
        }
    }
    for file in ["/etc/ld.so.cache", "/etc/localtime"] {
        if Path::new(file).exists() {
            push(&["--ro-bind", file, file]);
        }
    }
    push(&[
        "--ro-bind",
        &workspace,
        "/workspace",
        "--chdir",
        "/workspace",
    ]);
    push(&["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]);
    push(&["--clearenv", "--setenv", "LANG", "C.UTF-8"]);
    push(&["--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin"]);
    push(&["--setenv", "HOME", "/tmp", "--setenv", "TMPDIR", "/tmp"]);
    push(&["--cap-drop", "ALL", "--"]);
    argv.extend(program.iter().cloned());
    argv
}
