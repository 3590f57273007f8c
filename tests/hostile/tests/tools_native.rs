//! Runs the hostile tools natively, outside any sandbox, to check that each does what its doc
//! says: well-formed ABI output where it keeps the ABI, exactly the misbehaviour it promises
//! where it does not, and probes that really succeed when nothing stops them (so that a
//! failed probe under the sandbox is the sandbox's doing).
#![cfg(not(target_family = "wasm"))]

use std::error::Error;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

type TestResult = Result<(), Box<dyn Error>>;

fn run_in(tool: &str, dir: &Path, args: &str) -> Result<Output, Box<dyn Error>> {
    let mut child = Command::new(tool)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .ok_or("stdin is piped")?
        .write_all(args.as_bytes())?;
    Ok(child.wait_with_output()?)
}

fn run(tool: &str, args: &str) -> Result<Output, Box<dyn Error>> {
    run_in(tool, &std::env::temp_dir(), args)
}

fn result(output: &Output) -> Result<Value, Box<dyn Error>> {
    assert!(output.status.success(), "{output:?}");
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// A fresh directory for one test, removed by the caller.
fn scratch(test: &str) -> Result<PathBuf, Box<dyn Error>> {
    let dir = std::env::temp_dir().join(format!("airlock-hostile-{test}-{}", std::process::id()));
    if dir.exists() {
        fs::remove_dir_all(&dir)?;
    }
    fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The attempts of a probing tool's result, by name.
fn attempts(value: &Value) -> Vec<(String, bool, Option<String>)> {
    value["ok"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|attempt| {
            (
                attempt["attempt"].as_str().unwrap_or_default().to_owned(),
                attempt["succeeded"].as_bool().unwrap_or_default(),
                attempt["content"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[test]
fn echo_returns_its_arguments() -> TestResult {
    let args = json!({"a": [1, "two", null], "b": {"c": true}});
    let output = run(env!("CARGO_BIN_EXE_echo"), &args.to_string())?;
    assert_eq!(result(&output)?, json!({ "ok": args }));
    Ok(())
}

#[test]
fn arguments_that_do_not_parse_get_an_error_result() -> TestResult {
    let output = run(env!("CARGO_BIN_EXE_exit_code"), r#"{"code": "seven"}"#)?;
    let value = result(&output)?;
    assert_eq!(value["error"]["retryable"], json!(false));
    assert!(
        value["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("invalid arguments"))
    );
    Ok(())
}

#[test]
fn tool_error_is_retryable() -> TestResult {
    let output = run(env!("CARGO_BIN_EXE_tool_error"), "{}")?;
    assert_eq!(
        result(&output)?,
        json!({"error": {"message": "the thing is busy", "retryable": true}})
    );
    Ok(())
}

#[test]
fn abi_breakers_break_it_exactly_as_promised() -> TestResult {
    let bad = run(env!("CARGO_BIN_EXE_bad_json"), "{}")?;
    assert!(bad.status.success());
    assert_eq!(bad.stdout, b"this is not json\n");

    let two = run(env!("CARGO_BIN_EXE_two_results"), "{}")?;
    assert!(two.status.success());
    assert_eq!(two.stdout, b"{\"ok\":\"first\"}\n{\"ok\":\"second\"}\n");

    let exit = run(env!("CARGO_BIN_EXE_exit_code"), r#"{"code": 7}"#)?;
    assert_eq!(exit.status.code(), Some(7));
    assert!(exit.stdout.is_empty());
    assert_eq!(exit.stderr, b"exit_code: exiting with code 7\n");
    Ok(())
}

#[test]
fn big_result_is_one_valid_document_of_the_asked_size() -> TestResult {
    let output = run(env!("CARGO_BIN_EXE_big_result"), r#"{"bytes": 200001}"#)?;
    let value = result(&output)?;
    let text = value["ok"].as_str().ok_or("ok is a string")?;
    assert_eq!(text.len(), 200_001);
    assert!(text.bytes().all(|byte| byte == b'a'));
    Ok(())
}

#[test]
fn flood_writes_exactly_the_counts_in_its_pattern() -> TestResult {
    let output = run(
        env!("CARGO_BIN_EXE_flood"),
        r#"{"stdout_bytes": 150000, "stderr_bytes": 70001}"#,
    )?;
    assert!(output.status.success());
    for (stream, fill, len) in [
        (&output.stdout, b'o', 150_000),
        (&output.stderr, b'e', 70_001),
    ] {
        assert_eq!(stream.len(), len);
        let pattern_holds = stream
            .iter()
            .enumerate()
            .all(|(at, &byte)| byte == if at % 64 == 63 { b'\n' } else { fill });
        assert!(pattern_holds);
    }
    Ok(())
}

#[test]
fn trap_refuses_an_unknown_kind_and_dies_for_a_known_one() -> TestResult {
    let unknown = run(env!("CARGO_BIN_EXE_trap"), r#"{"kind": "meltdown"}"#)?;
    assert!(result(&unknown)?["error"]["message"].is_string());
    let panic = run(env!("CARGO_BIN_EXE_trap"), r#"{"kind": "panic"}"#)?;
    assert!(!panic.status.success());
    assert!(String::from_utf8_lossy(&panic.stderr).contains("trap: panicking on purpose"));
    Ok(())
}

#[cfg(unix)]
#[test]
fn escape_probes_succeed_where_nothing_stops_them() -> TestResult {
    use std::os::unix::fs::symlink;

    let root = scratch("escape")?;
    let workspace = root.join("ws");
    fs::create_dir(&workspace)?;
    fs::write(root.join("secret.txt"), "the secret")?;
    symlink("..", workspace.join("link_out"))?;
    symlink(root.join("secret.txt"), workspace.join("link_file"))?;
    symlink("/etc/passwd", workspace.join("link_abs"))?;
    symlink("../secret.txt", workspace.join("link_dotdot"))?;
    fs::write(workspace.join("mine.txt"), "mine")?;

    let output = run_in(
        env!("CARGO_BIN_EXE_escape"),
        &workspace,
        r#"{"extra_paths": ["mine.txt"]}"#,
    );
    fs::remove_dir_all(&root)?;
    let found = attempts(&result(&output?)?);

    let secret = Some("the secret".to_owned());
    for name in [
        "read ../secret.txt",
        "read link_out/secret.txt",
        "read link_file",
        "read link_dotdot",
    ] {
        assert!(
            found.contains(&(name.to_owned(), true, secret.clone())),
            "{name}: {found:?}"
        );
    }
    let listing = found
        .iter()
        .find(|(name, ..)| name == "list .")
        .ok_or("list . is reported")?;
    assert!(
        listing.1
            && listing
                .2
                .as_deref()
                .is_some_and(|content| content.contains("mine.txt"))
    );
    assert!(found.contains(&("read mine.txt".to_owned(), true, Some("mine".to_owned()))));
    assert_eq!(found.len(), 16);
    Ok(())
}

#[cfg(unix)]
#[test]
fn write_ro_attempts_succeed_where_nothing_stops_them() -> TestResult {
    let workspace = scratch("write_ro")?;
    fs::write(workspace.join("existing.txt"), "existing")?;
    fs::create_dir(workspace.join("existing_dir"))?;

    let output = run_in(env!("CARGO_BIN_EXE_write_ro"), &workspace, "{}");
    let left = fs::read_dir(&workspace)?
        .map(|entry| entry.map(|entry| entry.file_name().to_string_lossy().into_owned()))
        .collect::<Result<Vec<_>, _>>();
    fs::remove_dir_all(&workspace)?;
    let found = attempts(&result(&output?)?);

    // A read-only handle stops even an unsandboxed write, and the file is gone by the time
    // `delete` runs (renamed just before); every other attempt must have changed something.
    let refused: Vec<&str> = found
        .iter()
        .filter(|(_, succeeded, _)| !succeeded)
        .map(|(name, ..)| name.as_str())
        .collect();
    assert_eq!(
        refused,
        [
            "write through a read-only handle ./existing.txt",
            "set_len through a read-only handle ./existing.txt",
            "delete ./existing.txt",
        ]
    );
    let mut left = left?;
    left.sort();
    assert_eq!(
        left,
        [
            "hardlink.txt",
            "new.txt",
            "new_dir",
            "new_link",
            "renamed.txt"
        ]
    );
    Ok(())
}

#[test]
fn typed_probe_keeps_the_stdio_abi_natively() -> TestResult {
    let probe = env!("CARGO_BIN_EXE_typed_probe");
    let echoed = result(&run(probe, r#"{"mode": "echo", "x": [1]}"#)?)?;
    assert_eq!(echoed["ok"]["arguments"], json!({"mode": "echo", "x": [1]}));
    assert_eq!(echoed["ok"]["context"]["workspace"], json!("."));
    let failed = result(&run(probe, r#"{"mode": "error", "message": "busy"}"#)?)?;
    assert_eq!(
        failed,
        json!({"error": {"message": "busy", "retryable": true}})
    );
    let big = result(&run(probe, r#"{"mode": "big", "bytes": 5}"#)?)?;
    assert_eq!(big, json!({"ok": "aaaaa"}));
    let dir = scratch("typed_probe")?;
    fs::write(dir.join("notes.txt"), "hello")?;
    let read = run_in(probe, &dir, r#"{"mode": "read", "path": "notes.txt"}"#);
    fs::remove_dir_all(&dir)?;
    assert_eq!(result(&read?)?, json!({"ok": "hello"}));
    Ok(())
}
