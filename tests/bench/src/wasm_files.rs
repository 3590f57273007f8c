//! Section 1, continued: the shipped WebAssembly tools that touch files — `read_file` of a
//! small file, `list_dir` of the workspace, `grep` over it — through `ExecuteTool`, against
//! the no-op tool on the same daemon and GNU grep run by the process engine (the shipped
//! `workspace_grep` plugin) over the same files.
//!
//! All five are measured in alternating rounds, one client, so a drift of the machine's
//! speed falls on each alike: each tool's cost over the no-op is what its file access costs.

use airlock_proto::v1::tools_client::ToolsClient;
use tonic_health::pb::health_client::HealthClient;

use crate::Bench;
use crate::client;
use crate::daemon::Airlockd;
use crate::fixtures::{
    ECHO, GREP, GREP_PATTERN, LIST_DIR, LIST_DIR_ENTRIES, READ_FILE, SMALL_FILE, WASM_GREP,
};
use crate::report::{Check, Report};
use crate::stats::Samples;
use crate::wasm_call::InProcess;

const SECTION: &str = "1 wasm call";

/// Alternating rounds, as the section's other cases.
const ROUNDS: usize = 6;

struct Case {
    key: &'static str,
    label: String,
    tool: &'static str,
    arguments: String,
    /// Text the result must contain, so a call that failed is not timed as a fast one.
    expect: &'static str,
    calls: usize,
}

pub async fn run(bench: &Bench, daemon: &Airlockd, report: &mut Report) -> anyhow::Result<()> {
    let rounds = bench.count(ROUNDS, 1);
    let per_round = |calls: usize| bench.count(calls, 5).div_ceil(rounds);
    let cases = [
        Case {
            key: "files-noop",
            label: "ExecuteTool no-op wasm, c=1 (beside the file tools)".into(),
            tool: ECHO,
            arguments: "{}".into(),
            expect: "{}",
            calls: per_round(1200),
        },
        Case {
            key: "files-health",
            label: "gRPC health check (floor), c=1 (beside the file tools)".into(),
            tool: "",
            arguments: String::new(),
            expect: "",
            calls: per_round(1200),
        },
        Case {
            key: "files-read",
            label: format!("ExecuteTool `read_file` of a 1 KiB file ({SMALL_FILE})"),
            tool: READ_FILE,
            arguments: serde_json::json!({ "path": SMALL_FILE }).to_string(),
            expect: "small file",
            calls: per_round(1200),
        },
        Case {
            key: "files-list",
            label: format!(
                "ExecuteTool `list_dir` of the workspace, recursive ({LIST_DIR_ENTRIES} entries)"
            ),
            tool: LIST_DIR,
            arguments: serde_json::json!({ "path": ".", "recursive": true }).to_string(),
            expect: "file_39.rs",
            calls: per_round(1200),
        },
        Case {
            key: "files-grep",
            label: "ExecuteTool `grep` (wasm) over 40 files".into(),
            tool: WASM_GREP,
            arguments: serde_json::json!({ "pattern": GREP_PATTERN }).to_string(),
            expect: "needle_",
            calls: per_round(600),
        },
        Case {
            key: "files-gnu-grep",
            label: "ExecuteTool `workspace_grep` (GNU grep, process sandbox) over 40 files".into(),
            tool: GREP,
            arguments: serde_json::json!({ "pattern": GREP_PATTERN }).to_string(),
            expect: "needle_",
            calls: per_round(600),
        },
    ];
    let warmup = bench.count(20, 1);
    let workspace = bench.fixtures.workspace.clone();
    let mut samples: Vec<Samples> = cases.iter().map(|_| Samples::default()).collect();
    eprintln!(
        "{SECTION}: read_file, list_dir and grep against the no-op and GNU grep, in {rounds} \
         alternating rounds"
    );
    for _ in 0..rounds {
        for (case, samples) in cases.iter().zip(&mut samples) {
            let round = if case.tool.is_empty() {
                client::load(daemon, 1, warmup, case.calls, |channel| async move {
                    client::health(&mut HealthClient::new(channel)).await
                })
                .await?
            } else {
                let (tool, expect) = (case.tool, case.expect);
                let arguments = case.arguments.clone();
                let workspace = workspace.clone();
                client::load(daemon, 1, warmup, case.calls, move |channel| {
                    let (arguments, workspace) = (arguments.clone(), workspace.clone());
                    async move {
                        client::execute(
                            &mut ToolsClient::new(channel),
                            tool,
                            &arguments,
                            Some(workspace.as_path()),
                            expect,
                        )
                        .await
                    }
                })
                .await?
            };
            samples.append(round);
        }
    }
    for (case, samples) in cases.iter().zip(samples) {
        report.measured(SECTION, case.key, &case.label, samples);
    }
    in_process(bench, &cases, report).await?;
    report.compare("files-noop", "files-health");
    report.compare("files-read", "files-noop");
    report.compare("files-list", "files-noop");
    report.compare("files-grep", "files-gnu-grep");
    let targets = [
        (
            "`read_file` of a small file ≤ 1.3× the no-op call",
            Check::Ratio {
                ours: "files-read".into(),
                peer: "files-noop".into(),
                max: 1.3,
            },
        ),
        (
            "`list_dir` of 40 entries ≤ 2× the no-op call",
            Check::Ratio {
                ours: "files-list".into(),
                peer: "files-noop".into(),
                max: 2.0,
            },
        ),
        (
            "the wasm `grep` over 40 files faster than GNU grep in the process sandbox",
            Check::Ratio {
                ours: "files-grep".into(),
                peer: "files-gnu-grep".into(),
                max: 1.0,
            },
        ),
    ];
    for (goal, check) in targets {
        report.target(goal, check);
    }
    Ok(())
}

/// The WebAssembly file tools called by the engine in this process: what the engine and the
/// tool cost, without gRPC and the executor around them.
async fn in_process(bench: &Bench, cases: &[Case], report: &mut Report) -> anyhow::Result<()> {
    eprintln!("{SECTION}: the file tools in-process");
    let workspace = &bench.fixtures.workspace;
    for case in cases {
        if ![READ_FILE, LIST_DIR, WASM_GREP].contains(&case.tool) {
            continue;
        }
        let call = InProcess {
            manifest: bench.fixtures.manifest(case.tool),
            profile: "readonly",
            arguments: &case.arguments,
            workspace: Some(workspace),
            expect: case.expect,
        };
        let calls = case.calls * bench.count(ROUNDS, 1);
        let samples = call.measure(bench, calls, bench.count(20, 1)).await?;
        report.measured(
            SECTION,
            &format!("{}-inproc", case.key),
            &format!("`{}` as above, the engine in-process, no gRPC", case.tool),
            samples,
        );
    }
    Ok(())
}
