//! Section 7, a writing call's overlay and change set: the shipped `run_command` tool (its
//! manifest's command line, `/bin/sh -c '<script>' -- . '<command>'`, under the shipped
//! `toolchains` profile) through the process engine in-process, with and without what the
//! executor wraps around a call that may write the workspace.
//!
//! - *without*: `Launch { overlay: None, .. }` — the same sandbox, the workspace mounted
//!   writable as it is; no overlay, no change set.
//! - *with*: what `tools::writes::overlay` and `settle` do for a call outside a run — the
//!   exclusions read and a fresh overlay mounted over the workspace (off the async threads),
//!   the call with `overlay: Some(..)`, then `Changes::capture` (the overlay let go, the change
//!   set read off the upper layer, contents to the blob store) and `Changes::apply` (path by
//!   path into the workspace, the upper layer removed), each off the async threads. A run's
//!   call also journals the change set in the run store between the two; that is not here.
//!   The time is the whole of it, from before the mount to the change set applied; the row's
//!   note gives each part's median.
//!
//! Two commands: a small Python project's unittest suite (`fixtures::write_python_project`;
//! it writes one report file), and a write-heavy one (200 files added, 20 modified) for the
//! change set's cost per path. A last row times the overlay alone, mounted and committed
//! around no call: the fixed part. The two variants alternate call by call, so the machine's
//! drift reaches both alike; between calls (untimed) the workspace is put back as it was, so
//! every call changes the same paths. Every call's output is checked, and every change set
//! must hold exactly the paths the command wrote, all applied.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_daemon::testing::{
    CallRules, ChangeRules, ChangeSet, Changes, Deadline, Engine, Exclusions, Exit, LoadedTool,
    Manifest, Modes, OutputCapture, Overlay, ProcessConfig, ProcessEngine, Profile,
};
use anyhow::{Context, bail};
use bytes::Bytes;

use crate::Bench;
use crate::fixtures::{
    self, PYTHON_REPORT, PYTHON_REPORT_DIR, PYTHON_SUITE, PYTHON_SUITE_OK, WRITE_ADDED,
    WRITE_MODIFIED,
};
use crate::report::{Check, Report};
use crate::stats::{Samples, format_duration};
use crate::wasm_call::profile;

const SECTION: &str = "7 changes";

/// The shipped tool and the profile it runs under.
const TOOL: &str = "run_command";
const PROFILE: &str = "toolchains";

/// Output limit of a call: the suite prints a few lines.
const CAPTURE_LIMIT: u64 = 16 << 20;
/// The blob store's cap, as the daemon sets it.
const BLOB_CAP: u64 = 2 << 30;

/// One command, run both ways.
struct Case {
    key: &'static str,
    label: String,
    workspace: PathBuf,
    /// The tool's arguments (JSON).
    arguments: String,
    /// The output contains this.
    expect: &'static str,
    /// The change set, sorted by path: (path, kind as `Debug` prints it).
    expected: Vec<(String, &'static str)>,
    /// A file the call must have left in the workspace (with the overlay: once applied).
    written: &'static str,
    /// Puts the workspace back as it was before the call.
    reset: fn(&Path) -> anyhow::Result<()>,
}

/// What the executor holds for a call with an overlay.
struct Executor {
    changes: Changes,
    profile: Arc<Profile>,
    tool: Arc<dyn LoadedTool>,
}

/// The timings of one call through the overlay.
#[derive(Default)]
struct Phases {
    mount: Vec<Duration>,
    call: Vec<Duration>,
    capture: Vec<Duration>,
    apply: Vec<Duration>,
}

impl Phases {
    fn push(&mut self, phases: [Duration; 4]) {
        let [mount, call, capture, apply] = phases;
        self.mount.push(mount);
        self.call.push(call);
        self.capture.push(capture);
        self.apply.push(apply);
    }
}

pub async fn run(bench: &Bench, report: &mut Report) -> anyhow::Result<()> {
    let engine = ProcessEngine::new(&ProcessConfig {
        state_dir: bench.fixtures.fresh_dir("changes-engine-")?,
    });
    if let Some(reason) = engine.unavailable() {
        bail!("the process engine cannot run on this host: {reason}");
    }
    let profile = profile(&bench.fixtures.profiles_dir, PROFILE)?;
    let manifest_path = bench
        .fixtures
        .repo
        .join("plugins")
        .join(TOOL)
        .join("tool.toml");
    let manifest = Manifest::load(&manifest_path)?;
    let tool = engine.load(&manifest.image, &profile)?;
    let state = bench.fixtures.fresh_dir("changes-state-")?;
    let changes = Changes::open(&state, &state, BLOB_CAP)
        .context("cannot open the change-set service (overlayfs and idmapped mounts needed)")?;
    let executor = Executor {
        changes,
        profile,
        tool,
    };

    let suite_dir = bench.fixtures.workspace_root.join("calc");
    fixtures::write_python_project(&suite_dir)?;
    let write_dir = bench.fixtures.workspace_root.join("generated");
    fixtures::write_data_files(&write_dir)?;
    let mut write_expected: Vec<(String, &'static str)> = std::iter::once(("gen".into(), "Added"))
        .chain((1..=WRITE_ADDED).map(|file| (format!("gen/file_{file}.txt"), "Added")))
        .chain((1..=WRITE_MODIFIED).map(|file| (format!("data/file_{file}.txt"), "Modified")))
        .collect();
    write_expected.sort();
    let cases = [
        Case {
            key: "suite",
            label: format!("run_command `{PYTHON_SUITE}` (10 tests)"),
            workspace: suite_dir,
            arguments: serde_json::json!({ "workdir": ".", "command": PYTHON_SUITE }).to_string(),
            expect: PYTHON_SUITE_OK,
            expected: vec![
                (PYTHON_REPORT_DIR.into(), "Added"),
                (PYTHON_REPORT.into(), "Added"),
            ],
            written: PYTHON_REPORT,
            reset: |dir| remove_dir(&dir.join(PYTHON_REPORT_DIR)),
        },
        Case {
            key: "write",
            label: format!("run_command writing {WRITE_ADDED} files, modifying {WRITE_MODIFIED}"),
            workspace: write_dir,
            arguments: serde_json::json!({ "workdir": ".", "command": fixtures::write_command() })
                .to_string(),
            expect: "",
            expected: write_expected,
            written: "gen/file_1.txt",
            reset: |dir| {
                remove_dir(&dir.join("gen"))?;
                fixtures::write_data_files(dir)
            },
        },
    ];
    let runs = bench.count(200, 3);
    let warmup = bench.count(5, 1);
    let mut checked = Vec::new();

    for case in &cases {
        eprintln!("{SECTION}: {}", case.label);
        (case.reset)(&case.workspace)?;
        let mut plain = Vec::with_capacity(runs);
        let mut with = Vec::with_capacity(runs);
        let mut phases = Phases::default();
        for round in 0..warmup + runs {
            // Alternate which goes first, so neither always follows the other.
            for overlay_first in [round % 2 == 0, round % 2 == 1] {
                if overlay_first {
                    let parts = executor.with_overlay(case, round).await?;
                    if round >= warmup {
                        with.push(parts.iter().sum());
                        phases.push(parts);
                    }
                } else {
                    let elapsed = executor.without_overlay(case).await?;
                    if round >= warmup {
                        plain.push(elapsed);
                    }
                }
                (case.reset)(&case.workspace)?;
            }
        }
        checked.push(format!(
            "{} change sets of {} paths ({})",
            warmup + runs,
            case.expected.len(),
            case.key
        ));

        let key = case.key;
        let plain = Samples::sequential(plain);
        let with = Samples::sequential(with);
        let plain_key = format!("changes-{key}-plain");
        let with_key = format!("changes-{key}-overlay");
        let plain_note = format!("p90 {}", format_duration(plain.percentile(90.0)));
        let mut with_note = format!(
            "p90 {}; medians: overlay mounted {}, the call {}, change set captured {} \
             (the overlay unmounted, the upper layer read, contents to the blob store), applied {}",
            format_duration(with.percentile(90.0)),
            format_duration(median(phases.mount)),
            format_duration(median(phases.call)),
            format_duration(median(phases.capture)),
            format_duration(median(phases.apply)),
        );
        if key == "write" {
            let extra = with.p50().saturating_sub(plain.p50());
            with_note.push_str(&format!(
                "; {:.0} µs more per changed path (p50)",
                extra.as_secs_f64() * 1e6 / case.expected.len() as f64
            ));
        }
        report.measured(
            SECTION,
            &plain_key,
            &format!(
                "{}: process engine, no overlay (same sandbox, no change set)",
                case.label
            ),
            plain,
        );
        report.note(&plain_key, &plain_note);
        report.measured(
            SECTION,
            &with_key,
            &format!(
                "{}: overlay + change set, as the executor runs it",
                case.label
            ),
            with,
        );
        report.note(&with_key, &with_note);
        report.compare(&with_key, &plain_key);
    }

    // The fixed part: an overlay mounted and committed around no call at all.
    let workspace = &cases[0].workspace;
    let mut empty = Vec::with_capacity(runs);
    for round in 0..warmup + runs {
        let elapsed = executor.empty(workspace, round).await?;
        if round >= warmup {
            empty.push(elapsed);
        }
    }
    report.measured(
        SECTION,
        "changes-empty",
        "the overlay alone: mounted over the Python project and committed with nothing written, no call",
        Samples::sequential(empty),
    );

    report.target(
        "`run_command` running a test suite: overlay + change set ≤ 1.2× the same command without them",
        Check::Ratio {
            ours: "changes-suite-overlay".into(),
            peer: "changes-suite-plain".into(),
            max: 1.2,
        },
    );
    // A wrong change set fails the section (see `check`): reaching this means all were right.
    report.target(
        "every change set holds exactly the paths the command wrote, all applied",
        Check::Verdict {
            met: true,
            measured: checked.join("; "),
        },
    );
    Ok(())
}

impl Executor {
    /// One call as the executor makes it for a writing profile: overlay, call, commit.
    /// Returns the whole time and its three parts.
    async fn with_overlay(&self, case: &Case, round: usize) -> anyhow::Result<[Duration; 4]> {
        let started = Instant::now();
        let (changes, workspace) = (self.changes.clone(), case.workspace.clone());
        let patterns = self.profile.change_exclusions.clone();
        let name = format!("{}-{round}", case.key);
        let rules = self.profile.change_rules;
        let (overlay, call) = tokio::task::spawn_blocking(move || {
            let call = call_rules(Exclusions::for_workspace(&workspace, &patterns), rules);
            changes
                .overlay(&workspace, &name)
                .map(|overlay| (Arc::new(overlay), call))
        })
        .await
        .context("the overlay's set-up panicked")??;
        let mounted = Instant::now();
        self.call(case, Some(overlay.clone())).await?;
        let called = Instant::now();
        let overlay: Overlay = Arc::try_unwrap(overlay)
            .map_err(|_| anyhow::anyhow!("the engine still held the workspace overlay"))?;
        // As `tools::writes::settle`: captured, then (for a run's call, journaled in the run
        // store: not here) applied, each off the async threads. A process tool sets its
        // files' modes itself.
        let changes = self.changes.clone();
        let captured = tokio::task::spawn_blocking(move || changes.capture(overlay, &call))
            .await
            .context("the capture panicked")?;
        let (upper, set) = match captured {
            Ok(captured) => captured,
            Err(set) => bail!("{}: the change set was not captured: {set:?}", case.label),
        };
        let captured = Instant::now();
        let changes = self.changes.clone();
        let set = tokio::task::spawn_blocking(move || changes.apply(&upper, set, Deadline::none()))
            .await
            .context("the apply panicked")?;
        let applied = Instant::now();
        check(case, &set)?;
        Ok([
            mounted - started,
            called - mounted,
            captured - called,
            applied - captured,
        ])
    }

    /// An overlay mounted and committed with no call in between: its fixed cost.
    async fn empty(&self, workspace: &Path, round: usize) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let (changes, workspace) = (self.changes.clone(), workspace.to_owned());
        let patterns = self.profile.change_exclusions.clone();
        let rules = self.profile.change_rules;
        let set = tokio::task::spawn_blocking(move || {
            let call = call_rules(Exclusions::for_workspace(&workspace, &patterns), rules);
            changes
                .overlay(&workspace, &format!("empty-{round}"))
                .map(|overlay| changes.commit(overlay, &call))
        })
        .await
        .context("the overlay panicked")??;
        let elapsed = started.elapsed();
        if !set.is_empty() {
            bail!("an overlay nothing wrote through has a change set: {set:?}");
        }
        Ok(elapsed)
    }

    /// The same call with no overlay: the sandbox writes the workspace itself.
    async fn without_overlay(&self, case: &Case) -> anyhow::Result<Duration> {
        let started = Instant::now();
        self.call(case, None).await?;
        let elapsed = started.elapsed();
        if !case.workspace.join(case.written).is_file() {
            bail!(
                "{} without the overlay did not write {}",
                case.label,
                case.written
            );
        }
        Ok(elapsed)
    }

    async fn call(&self, case: &Case, overlay: Option<Arc<Overlay>>) -> anyhow::Result<()> {
        let capture = OutputCapture::new(CAPTURE_LIMIT, None);
        let launch = crate::fixtures::launch(
            Bytes::from(case.arguments.clone()),
            Some(case.workspace.clone()),
            overlay,
            self.profile.clone(),
            capture.clone(),
        );
        let exit = self.tool.run(launch).await;
        let summary = capture.finish();
        let stdout = String::from_utf8_lossy(&summary.stdout);
        if exit != Exit::Code(0) || !stdout.contains(case.expect) {
            bail!(
                "{} ended with {exit:?}; output: {}; stderr: {}",
                case.label,
                stdout.chars().take(2000).collect::<String>(),
                String::from_utf8_lossy(&summary.stderr_tail)
            );
        }
        Ok(())
    }
}

/// As `tools::writes::overlay` makes them for a process tool (which sets its files' modes
/// itself), without a deadline: the bench measures, the executor bounds.
fn call_rules(exclusions: Exclusions, rules: ChangeRules) -> CallRules {
    CallRules {
        exclusions,
        modes: Modes::Tool,
        rules,
        deadline: Deadline::none(),
    }
}

/// The change set is exactly the expected paths, each applied and kept in full, and the
/// workspace has what the call wrote.
fn check(case: &Case, set: &ChangeSet) -> anyhow::Result<()> {
    let got: Vec<(String, String)> = set
        .changes
        .iter()
        .map(|change| (change.path.to_string(), format!("{:?}", change.kind)))
        .collect();
    let want: Vec<(String, String)> = case
        .expected
        .iter()
        .map(|(path, kind)| (path.clone(), (*kind).to_owned()))
        .collect();
    if set.not_applied.is_some() || !set.skipped.is_empty() || got != want {
        bail!(
            "{}: unexpected change set: not applied: {:?}, skipped: {:?}, paths (first 10 of {}): {:?}",
            case.label,
            set.not_applied,
            set.skipped,
            got.len(),
            got.iter().take(10).collect::<Vec<_>>()
        );
    }
    if let Some(change) = set
        .changes
        .iter()
        .find(|change| !change.applied || change.digest_only.is_some())
    {
        bail!(
            "{}: {} was not applied, or recorded by digest only: {change:?}",
            case.label,
            change.path
        );
    }
    if !case.workspace.join(case.written).is_file() {
        bail!(
            "{}: {} did not reach the workspace",
            case.label,
            case.written
        );
    }
    Ok(())
}

fn remove_dir(dir: &Path) -> anyhow::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
            Err(err).with_context(|| format!("cannot remove {}", dir.display()))
        }
        _ => Ok(()),
    }
}

fn median(latencies: Vec<Duration>) -> Duration {
    Samples::sequential(latencies).p50()
}
