//! The first-party plugins, as the daemon serves them from `plugins/` with the shipped
//! profiles, called over gRPC against a real workspace.

use std::path::PathBuf;

use airlock_proto::v1::ToolStatus;
use airlock_tests::{DaemonOptions, TestDaemon, ToolsDir, repo_root, test_module};
use serde_json::json;

async fn first_party() -> TestDaemon {
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        ..DaemonOptions::default()
    })
    .await;
    assert!(
        daemon.refused().is_empty(),
        "refused: {:?}",
        daemon.refused()
    );
    daemon
}

fn sample_workspace(daemon: &TestDaemon) -> PathBuf {
    let workspace = daemon.workspace("project");
    std::fs::create_dir_all(workspace.join("src")).unwrap();
    std::fs::write(
        workspace.join("src/lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
    )
    .unwrap();
    std::fs::write(workspace.join("README.md"), "# sample\n\nadd numbers\n").unwrap();
    workspace
}

#[tokio::test]
async fn read_file_reads_lines_of_a_workspace_file() {
    let daemon = first_party().await;
    let workspace = sample_workspace(&daemon);
    let read = daemon
        .exec(
            "read_file",
            json!({"path": "src/lib.rs", "start_line": 2, "max_lines": 1}),
            Some(&workspace),
        )
        .await;
    let output = read.assert_status(ToolStatus::Ok).json();
    assert_eq!(output["content"], "    a - b\n");
    assert_eq!(output["total_lines"], 3);
    let missing = daemon
        .exec("read_file", json!({"path": "nope.rs"}), Some(&workspace))
        .await;
    missing.assert_status(ToolStatus::ToolError);
    assert!(
        missing.result().error_message.contains("nope.rs"),
        "{:?}",
        missing.result()
    );
    let escape = daemon
        .exec(
            "read_file",
            json!({"path": "../../../etc/passwd"}),
            Some(&workspace),
        )
        .await;
    escape.assert_status(ToolStatus::ToolError);
    assert!(!escape.result().content.contains("root:"));
}

#[tokio::test]
async fn list_dir_and_grep_see_the_workspace() {
    let daemon = first_party().await;
    let workspace = sample_workspace(&daemon);
    let listing = daemon
        .exec("list_dir", json!({"recursive": true}), Some(&workspace))
        .await;
    let paths: Vec<String> = listing.assert_status(ToolStatus::Ok).json()["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["path"].as_str().unwrap().to_owned())
        .collect();
    for expected in ["README.md", "src", "src/lib.rs"] {
        assert!(
            paths.iter().any(|p| p == expected),
            "{expected} missing from {paths:?}"
        );
    }
    let found = daemon
        .exec(
            "grep",
            json!({"pattern": "a\\s*-\\s*b", "glob": "*.rs"}),
            Some(&workspace),
        )
        .await;
    let output = found.assert_status(ToolStatus::Ok).json();
    let matches = output["matches"].as_array().unwrap();
    assert_eq!(matches.len(), 1, "{output}");
    assert_eq!(matches[0]["path"], "src/lib.rs");
    assert_eq!(matches[0]["line_number"], 2);
}

#[tokio::test]
async fn write_file_previews_without_writing_then_writes() {
    let daemon = first_party().await;
    let workspace = sample_workspace(&daemon);
    let fixed = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n";
    let preview = daemon
        .exec(
            "write_file",
            json!({"path": "src/lib.rs", "content": fixed, "preview": true}),
            Some(&workspace),
        )
        .await;
    let output = preview.assert_status(ToolStatus::Ok).json();
    let diff = output["diff"].as_str().unwrap();
    assert!(
        diff.contains("-    a - b") && diff.contains("+    a + b"),
        "{diff}"
    );
    assert!(
        std::fs::read_to_string(workspace.join("src/lib.rs"))
            .unwrap()
            .contains("a - b"),
        "the preview wrote the file"
    );
    daemon
        .exec(
            "write_file",
            json!({"path": "src/lib.rs", "content": fixed}),
            Some(&workspace),
        )
        .await
        .assert_status(ToolStatus::Ok);
    assert_eq!(
        std::fs::read_to_string(workspace.join("src/lib.rs")).unwrap(),
        fixed
    );
}

#[tokio::test]
async fn the_c_tool_counts_words() {
    let daemon = first_party().await;
    let workspace = sample_workspace(&daemon);
    let counted = daemon
        .exec("wc", json!({"path": "README.md"}), Some(&workspace))
        .await;
    let output = counted.assert_status(ToolStatus::Ok).json();
    assert_eq!(output["lines"], 3);
    assert_eq!(output["words"], 4);
    assert_eq!(output["bytes"], 22);
}

#[tokio::test]
async fn a_preview_2_component_runs_like_a_module() {
    let tools = ToolsDir::new();
    tools.add_file(
        "read_file_p2",
        &test_module("read_file_p2"),
        &format!(
            "profile = \"readonly\"\ninput_schema = \"{}\"",
            repo_root().join("plugins/read_file/schema.json").display()
        ),
    );
    let daemon = TestDaemon::with_tools(&tools).await;
    assert!(daemon.refused().is_empty(), "{:?}", daemon.refused());
    let workspace = sample_workspace(&daemon);
    let read = daemon
        .exec(
            "read_file_p2",
            json!({"path": "README.md"}),
            Some(&workspace),
        )
        .await;
    assert_eq!(
        read.assert_status(ToolStatus::Ok).json()["content"],
        "# sample\n\nadd numbers\n"
    );
}
