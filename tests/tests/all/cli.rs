//! The `airlock` command line against a real daemon: listing tools, running one, exit codes
//! that follow the result's status, agent runs, their traces, and the full output of a call
//! whose result was cut.

use std::process::Output;

use airlock_tests::cli::Cli;
use airlock_tests::{DaemonOptions, TestDaemon, ToolsDir, repo_root, test_module};
use serde_json::json;

async fn airlock(daemon_endpoint: &str, args: &[&str]) -> Output {
    Cli::new(daemon_endpoint, args)
        .token(&airlock_tests::token_for(daemon_endpoint))
        .output()
        .await
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

async fn daemon() -> (TestDaemon, ToolsDir) {
    let extra = ToolsDir::new();
    extra.add_file("spin", &test_module("spin"), "timeout_ms = 200");
    extra.add_file("exit_code", &test_module("exit_code"), "");
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins"), extra.path().to_owned()],
        ..DaemonOptions::default()
    })
    .await;
    assert!(daemon.refused().is_empty(), "{:?}", daemon.refused());
    (daemon, extra)
}

#[tokio::test]
async fn tools_list_prints_a_table_of_the_tools() {
    let (daemon, _extra) = daemon().await;
    let output = airlock(&daemon.endpoint, &["tools", "list"]).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    let header = stdout.lines().next().unwrap();
    for column in [
        "NAME",
        "VERSION",
        "RISK",
        "ENGINE",
        "PROFILE",
        "DIGEST",
        "DESCRIPTION",
    ] {
        assert!(header.contains(column), "{header}");
    }
    for tool in ["read_file", "write_file", "grep", "list_dir", "wc"] {
        assert!(
            stdout.lines().any(|line| line.starts_with(tool)),
            "{tool} missing:\n{stdout}"
        );
    }
}

#[tokio::test]
async fn exec_runs_a_tool_and_prints_its_result() {
    let (daemon, _extra) = daemon().await;
    let workspace = daemon.workspace("project");
    std::fs::write(workspace.join("notes.txt"), "one\ntwo\n").unwrap();
    let output = airlock(
        &daemon.endpoint,
        &[
            "tools",
            "exec",
            "read_file",
            "--args",
            r#"{"path": "notes.txt"}"#,
            "--workspace",
            workspace.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["content"], "one\ntwo\n");
    assert!(
        text(&output.stderr).contains("status: OK"),
        "{}",
        text(&output.stderr)
    );
}

#[tokio::test]
async fn exec_runs_the_process_tools() {
    let (daemon, _extra) = daemon().await;
    let workspace = daemon.workspace("project");
    std::fs::write(
        workspace.join("shapes.py"),
        "class Square:\n    def area(self):\n        return 4\n",
    )
    .unwrap();
    let exec = |tool: &'static str, args: &'static str| {
        let workspace = workspace.to_str().unwrap().to_owned();
        let endpoint = daemon.endpoint.clone();
        async move {
            airlock(
                &endpoint,
                &[
                    "tools",
                    "exec",
                    tool,
                    "--args",
                    args,
                    "--workspace",
                    &workspace,
                ],
            )
            .await
        }
    };
    let grep = exec("workspace_grep", r#"{"pattern": "def +area"}"#).await;
    assert_eq!(grep.status.code(), Some(0), "{}", text(&grep.stderr));
    assert!(
        text(&grep.stdout).contains("./shapes.py:2:    def area"),
        "{}",
        text(&grep.stdout)
    );
    let outline = exec("py_outline", r#"{"path": "shapes.py"}"#).await;
    assert_eq!(outline.status.code(), Some(0), "{}", text(&outline.stderr));
    assert!(
        text(&outline.stdout).contains("Square"),
        "{}",
        text(&outline.stdout)
    );
    assert!(text(&outline.stderr).contains("status: OK"));
}

#[tokio::test]
async fn exit_codes_follow_the_status() {
    let (daemon, _extra) = daemon().await;
    let workspace = daemon.workspace("project");
    let workspace = workspace.to_str().unwrap();
    let cases: [(&[&str], i32); 5] = [
        (
            &[
                "tools",
                "exec",
                "read_file",
                "--args",
                r#"{"path": 1}"#,
                "--workspace",
                workspace,
            ],
            2,
        ),
        (
            &["tools", "exec", "exit_code", "--args", r#"{"code": 9}"#],
            1,
        ),
        (&["tools", "exec", "spin"], 4),
        (&["tools", "exec", "no_such_tool"], 64),
        (&["tools", "exec", "read_file", "--args", "{not json"], 64),
    ];
    for (args, code) in cases {
        let output = airlock(&daemon.endpoint, args).await;
        assert_eq!(
            output.status.code(),
            Some(code),
            "{args:?}: {}",
            text(&output.stderr)
        );
    }
    let exited = airlock(
        &daemon.endpoint,
        &["tools", "exec", "exit_code", "--args", r#"{"code": 9}"#],
    )
    .await;
    assert!(
        text(&exited.stderr).contains("TOOL_ERROR"),
        "{}",
        text(&exited.stderr)
    );
}

#[tokio::test]
async fn an_unreachable_daemon_is_reported_as_such() {
    // 127.0.0.2: no test server binds there, so the freed port stays unused.
    let listener = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let output = airlock(&endpoint, &["tools", "list"]).await;
    assert_eq!(output.status.code(), Some(69));
    assert!(
        text(&output.stderr).contains("cannot reach airlockd"),
        "{}",
        text(&output.stderr)
    );
}

/// Runs `airlock ARGS` with `stdin` piped in.
async fn airlock_with_input(endpoint: &str, args: &[&str], stdin: &str) -> Output {
    Cli::new(endpoint, args)
        .token(&airlock_tests::token_for(endpoint))
        .stdin(stdin)
        .output()
        .await
}

fn write_script(dir: &std::path::Path) -> std::path::PathBuf {
    let script = dir.join("model.json");
    std::fs::write(
        &script,
        serde_json::json!({"turns": [
            {"text": "Writing the fix.", "tool_calls": [
                {"name": "write_file", "arguments": {"path": "fixed.txt", "content": "fixed\n"}}
            ]},
            {"final": "All done."}
        ]})
        .to_string(),
    )
    .unwrap();
    script
}

#[tokio::test]
async fn run_asks_at_the_terminal_and_finishes_when_approved() {
    let (daemon, extra) = daemon().await;
    let workspace = daemon.workspace("project");
    let script = write_script(extra.path());
    let output = airlock_with_input(
        &daemon.endpoint,
        &[
            "run",
            "fix it",
            "--workspace",
            workspace.to_str().unwrap(),
            "--model",
            &format!("scripted:{}", script.display()),
        ],
        "y\n",
    )
    .await;
    let stdout = text(&output.stdout);
    let stderr = text(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.contains("approve? [y]es / [n]o / [a]lways for this session"),
        "{stderr}"
    );
    assert!(stdout.contains("stop: FINAL"), "{stdout}");
    assert!(stdout.trim_end().ends_with("All done."), "{stdout}");
    assert!(stdout.contains("write_file"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(workspace.join("fixed.txt")).unwrap(),
        "fixed\n"
    );
}

#[tokio::test]
async fn run_without_an_answer_denies_and_lists_the_run() {
    let (daemon, extra) = daemon().await;
    let workspace = daemon.workspace("project");
    let script = write_script(extra.path());
    let output = airlock_with_input(
        &daemon.endpoint,
        &[
            "run",
            "fix it",
            "--workspace",
            workspace.to_str().unwrap(),
            "--model",
            &format!("scripted:{}", script.display()),
        ],
        "",
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(
        !workspace.join("fixed.txt").exists(),
        "a call nobody approved ran"
    );
    let listed = airlock(&daemon.endpoint, &["runs", "list", "--json"]).await;
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let runs: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");
}

/// The run id from the first line of `airlock run`'s transcript: `run run_… in session …`.
fn run_id_of(transcript: &str) -> String {
    let first = transcript.lines().next().unwrap_or_default();
    let id = first
        .strip_prefix("run ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no run id in the transcript:\n{transcript}"));
    id.trim_end_matches(':').to_owned()
}

#[tokio::test]
async fn trace_prints_the_run_as_a_tree_of_spans() {
    let (daemon, extra) = daemon().await;
    let workspace = daemon.workspace("project");
    std::fs::write(workspace.join("notes.txt"), "alpha\n").unwrap();
    let script = extra.path().join("read.json");
    std::fs::write(
        &script,
        json!({"turns": [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
            {"final": "It says alpha."}
        ]})
        .to_string(),
    )
    .unwrap();
    let run = airlock(
        &daemon.endpoint,
        &[
            "run",
            "what do the notes say?",
            "--workspace",
            workspace.to_str().unwrap(),
            "--model",
            &format!("scripted:{}", script.display()),
        ],
    )
    .await;
    let transcript = text(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let run_id = run_id_of(&transcript);
    assert!(run_id.starts_with("run_"), "{transcript}");

    let traced = airlock(&daemon.endpoint, &["runs", "trace", &run_id]).await;
    let tree = text(&traced.stdout);
    assert_eq!(traced.status.code(), Some(0), "{}", text(&traced.stderr));
    let lines: Vec<&str> = tree.lines().collect();
    assert!(lines[0].starts_with("trace ") && lines[0].ends_with(&format!(" of run {run_id}")));
    // The run at the top, its two steps under it, and each step's spans under the step.
    let position = |prefix: &str| {
        lines
            .iter()
            .position(|line| line.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line starting {prefix:?}:\n{tree}"))
    };
    let root = position(&format!("run {run_id}  "));
    assert!(
        lines[root].contains("stop FINAL, 2 steps, 2 model calls"),
        "{tree}"
    );
    assert!(lines[root].contains("1 tool call"), "{tree}");
    let step_1 = position("  step 1  ");
    let step_2 = position("  step 2  ");
    assert!(root < step_1 && step_1 < step_2, "{tree}");
    let first_step = &lines[step_1 + 1..step_2];
    let kinds: Vec<&str> = first_step
        .iter()
        .map(|line| {
            let line = line
                .strip_prefix("    ")
                .unwrap_or_else(|| panic!("{line:?} is not indented under its step:\n{tree}"));
            line.split_whitespace().next().unwrap()
        })
        .collect();
    assert_eq!(
        kinds,
        ["context", "model", "validate", "permission", "tool"],
        "{tree}"
    );
    let model = first_step[1];
    assert!(
        model.starts_with("    model scripted  ") && model.contains(" input + "),
        "{tree}"
    );
    assert!(
        first_step[3].contains("permission read_file  ") && first_step[3].contains("allowed"),
        "{tree}"
    );
    let tool = first_step[4];
    assert!(tool.starts_with("    tool read_file  "), "{tree}");
    for part in ["  OK, exe_", "peak memory ", "cpu ", "output "] {
        assert!(tool.contains(part), "{part:?} missing from {tool:?}");
    }
    assert!(
        lines[step_2 + 1..]
            .iter()
            .any(|line| line.starts_with("    model scripted  ")),
        "{tree}"
    );
    assert!(!tree.contains('✗'), "nothing failed:\n{tree}");

    let json = airlock(&daemon.endpoint, &["runs", "trace", &run_id, "--json"]).await;
    assert_eq!(json.status.code(), Some(0), "{}", text(&json.stderr));
    let trace: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(trace["run_id"], run_id.as_str());
    let spans = trace["spans"].as_array().unwrap();
    assert_eq!(spans.len(), lines.len() - 1, "one line per span:\n{tree}");
    assert!(spans.iter().all(|span| span["status"] == "OK"), "{trace}");
}

#[tokio::test]
async fn output_prints_the_whole_kept_output_or_a_range_of_it() {
    let tools = ToolsDir::new();
    tools.add_file(
        "big",
        &test_module("big_result"),
        "[output]\nmax_bytes = 1000\ntruncate = \"head\"",
    );
    let daemon = TestDaemon::with_tools(&tools).await;
    // More than two of the pages airlock asks for (1 MiB), so that it has to page.
    let size = 2_500_000;
    let arguments = json!({"bytes": size}).to_string();
    let exec = airlock(
        &daemon.endpoint,
        &["tools", "exec", "big", "--args", &arguments, "--json"],
    )
    .await;
    assert_eq!(exec.status.code(), Some(0), "{}", text(&exec.stderr));
    let result: serde_json::Value = serde_json::from_slice(&exec.stdout).unwrap();
    assert_eq!(result["truncated"], true, "{result}");
    let execution_id = result["execution_id"].as_str().unwrap().to_owned();

    let whole = airlock(&daemon.endpoint, &["tools", "output", &execution_id]).await;
    assert_eq!(whole.status.code(), Some(0), "{}", text(&whole.stderr));
    assert!(whole.stderr.is_empty(), "{}", text(&whole.stderr));
    let document: serde_json::Value = serde_json::from_slice(&whole.stdout).unwrap();
    let ok = document.as_str().unwrap();
    assert_eq!(ok.len(), size);
    assert!(ok.bytes().all(|byte| byte == b'a'));
    let all = whole.stdout;

    let cases: [(&str, Option<&str>, std::ops::Range<usize>); 3] = [
        ("0", Some("8"), 0..8),
        // Across a page boundary, and longer than one page.
        ("1048570", Some("1048600"), 1_048_570..2_097_170),
        // From an offset to the end.
        (&(all.len() - 5).to_string(), None, all.len() - 5..all.len()),
    ];
    for (offset, length, range) in cases {
        let mut args = vec!["tools", "output", &execution_id, "--offset", offset];
        if let Some(length) = length {
            args.extend(["--length", length]);
        }
        let ranged = airlock(&daemon.endpoint, &args).await;
        assert_eq!(ranged.status.code(), Some(0), "{}", text(&ranged.stderr));
        assert!(
            ranged.stdout == all[range.clone()],
            "{args:?}: not bytes {range:?}"
        );
    }

    let past = (all.len() + 1).to_string();
    let past = airlock(
        &daemon.endpoint,
        &["tools", "output", &execution_id, "--offset", &past],
    )
    .await;
    assert_eq!(past.status.code(), Some(64), "{}", text(&past.stderr));
    assert!(
        text(&past.stderr).contains(&execution_id),
        "{}",
        text(&past.stderr)
    );

    // Without --json, the result says which bytes it shows and where the rest is.
    let cut = airlock(
        &daemon.endpoint,
        &["tools", "exec", "big", "--args", r#"{"bytes": 5000}"#],
    )
    .await;
    assert_eq!(cut.status.code(), Some(0), "{}", text(&cut.stderr));
    assert!(
        text(&cut.stderr)
            .contains("shown: bytes 0–1000 of 5002; the rest: airlock tools output exe_"),
        "{}",
        text(&cut.stderr)
    );
    assert!(
        text(&cut.stderr).contains(" --offset 1000\n"),
        "{}",
        text(&cut.stderr)
    );
}

#[tokio::test]
async fn unknown_runs_and_executions_are_named_in_the_error() {
    let (daemon, _extra) = daemon().await;
    let cases: [(&[&str], &str); 3] = [
        (&["runs", "trace", "run_nope"], "run_nope"),
        (&["tools", "output", "exe_nope"], "exe_nope"),
        (
            &[
                "tools", "output", "exe_nope", "--offset", "3", "--length", "4",
            ],
            "exe_nope",
        ),
    ];
    for (args, id) in cases {
        let output = airlock(&daemon.endpoint, args).await;
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(64), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("airlock: ") && stderr.contains(id),
            "{args:?}: {stderr}"
        );
        assert!(output.stdout.is_empty(), "{args:?}");
    }
}

/// `airlock run --session SES` without `--model`, in a session an earlier `airlock run`
/// started (so the session has no model of its own): the run goes on with the model the
/// session's latest run used.
#[tokio::test]
async fn run_in_a_session_goes_on_with_its_latest_model() {
    let (daemon, extra) = daemon().await;
    let workspace = daemon.workspace("project");
    let script = extra.path().join("answer.json");
    std::fs::write(&script, r#"{"turns": [{"final": "All done."}]}"#).unwrap();
    let first = airlock(
        &daemon.endpoint,
        &[
            "run",
            "first task",
            "--workspace",
            workspace.to_str().unwrap(),
            "--model",
            &format!("scripted:{}", script.display()),
        ],
    )
    .await;
    let transcript = text(&first.stdout);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let session = transcript
        .lines()
        .next()
        .and_then(|line| line.split(" in session ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no session in the transcript:\n{transcript}"))
        .trim_end_matches(':')
        .to_owned();
    let next = airlock(
        &daemon.endpoint,
        &["run", "and again", "--session", &session],
    )
    .await;
    let stdout = text(&next.stdout);
    assert_eq!(
        next.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{}",
        text(&next.stderr)
    );
    assert!(stdout.trim_end().ends_with("All done."), "{stdout}");
}
