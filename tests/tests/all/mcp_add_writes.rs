//! `airlock mcp add --writes`: a registry server that changes its workspace, hosted in one
//! command. The real `airlock` binary installs PyPI's `excel-mcp-server` (which the rest of
//! the suite does not use), at the version `tests/mcp/mcp-add.txt` pins, with `--writes`
//! and its workbooks confined to `/workspace`; a daemon serves it, and what each call writes
//! — a workbook, a CSV exported from it — lands in the host's workspace as that call's change
//! set, while the server reads what a person wrote there.

use airlock_proto::v1 as pb;
use airlock_tests::{DaemonOptions, Execution, TestDaemon, ToolsDir};
use pb::ToolStatus;
use serde_json::json;

use super::mcp_add::{add, pinned};

/// A call's change set: each path with its kind, all of them applied to the workspace.
fn applied(execution: &Execution) -> Vec<(String, pb::ChangeKind)> {
    let Some(set) = execution.result().changes.as_ref() else {
        return Vec::new();
    };
    assert_eq!(set.not_applied, "", "{execution:?}");
    set.changes
        .iter()
        .map(|change| {
            assert!(change.applied, "{change:?}");
            (change.path.clone(), change.kind())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_added_with_writes_changes_the_workspace_on_the_host() {
    let tools = ToolsDir::new();
    let spec = pinned("pypi:excel-mcp-server@");
    let added = add(
        tools.path(),
        &spec,
        &[
            "--writes",
            "--arg=stdio",
            "--arg=--allow-dir",
            "--arg=/workspace",
        ],
    )
    .await;
    assert!(added.stdout.contains("excel__write_range"), "{added:#?}");
    let manifest = std::fs::read_to_string(tools.path().join("excel/tool.toml")).unwrap();
    let (_, mcp) = manifest.split_once("\n[mcp]\n").expect("an [mcp] table");
    assert!(
        mcp.lines()
            .any(|line| line == r#"workspace = "read-write""#),
        "{manifest}"
    );
    assert!(manifest.contains("profile = \"mcp-python\""), "{manifest}");
    assert!(manifest.contains("\nrisk = \"write\"\n"), "{manifest}");

    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![tools.path().to_owned()],
        ..DaemonOptions::default()
    })
    .await;
    assert!(daemon.refused().is_empty(), "{:#?}", daemon.refused());
    let ws = daemon.workspace("accounts");
    let call = |tool: &str, arguments: serde_json::Value| {
        let daemon = &daemon;
        let ws = ws.clone();
        let tool = format!("excel__{tool}");
        async move {
            let execution = daemon.exec(&tool, arguments, Some(&ws)).await;
            execution.assert_status(ToolStatus::Ok);
            execution
        }
    };

    // A new workbook, on the host once the call returns.
    let created = call(
        "create_workbook",
        json!({"path": "budget.xlsx", "sheets": ["Costs"]}),
    )
    .await;
    assert_eq!(created.json()["path"], "budget.xlsx", "{created:?}");
    assert_eq!(
        applied(&created),
        [("budget.xlsx".to_owned(), pb::ChangeKind::Added)]
    );
    let workbook = std::fs::read(ws.join("budget.xlsx")).unwrap();
    assert!(workbook.starts_with(b"PK"), "an xlsx is a zip archive");

    // The person's CSV, written on the host, is what the server imports.
    std::fs::write(ws.join("costs.csv"), "item,cost\nsandbox,3\ndaemon,4\n").unwrap();
    let imported = call(
        "import_csv",
        json!({"path": "budget.xlsx", "csv_path": "costs.csv", "sheet": "Costs"}),
    )
    .await;
    assert_eq!(
        applied(&imported),
        [("budget.xlsx".to_owned(), pb::ChangeKind::Modified)]
    );
    let written = call(
        "write_range",
        json!({"path": "budget.xlsx", "sheet": "Costs", "at": "A4",
               "rows": [["total", "=SUM(B2:B3)"]]}),
    )
    .await;
    assert_eq!(written.json()["cells_written"], 2, "{written:?}");
    assert_eq!(
        applied(&written),
        [("budget.xlsx".to_owned(), pb::ChangeKind::Modified)]
    );

    // What the server exports is a file a person reads on the host, the formula computed.
    let exported = call(
        "export_csv",
        json!({"path": "budget.xlsx", "sheet": "Costs", "csv_path": "totals.csv"}),
    )
    .await;
    assert_eq!(
        applied(&exported),
        [("totals.csv".to_owned(), pb::ChangeKind::Added)]
    );
    let totals = std::fs::read_to_string(ws.join("totals.csv")).unwrap();
    assert_eq!(
        totals.lines().collect::<Vec<_>>(),
        ["item,cost", "sandbox,3", "daemon,4", "total,7"]
    );

    // A reading call changes nothing.
    let read = call(
        "read_range",
        json!({"path": "budget.xlsx", "sheet": "Costs", "range": "A4:B4"}),
    )
    .await;
    assert_eq!(read.json()["values"], json!([["total", 7]]), "{read:?}");
    assert_eq!(applied(&read), []);
    assert_eq!(
        std::fs::read_to_string(ws.join("costs.csv")).unwrap(),
        "item,cost\nsandbox,3\ndaemon,4\n",
        "the person's file is as they left it"
    );
}
