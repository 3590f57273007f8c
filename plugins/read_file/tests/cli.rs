//! Runs the native `read_file` binary as the daemon would run the module: arguments on
//! stdin, one result document on stdout, exit code 0. This exercises `airlock_sdk::run`
//! itself, which unit tests cannot (it exits the process).

use std::io::Write;
use std::process::Command;
use std::process::Stdio;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_read_file");

#[test]
fn schema_flag_prints_the_committed_schema() -> anyhow::Result<()> {
    let output = Command::new(BIN).arg("--schema").output()?;
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8(output.stdout)?,
        include_str!("../schema.json")
    );
    Ok(())
}

fn call(stdin: &str) -> anyhow::Result<(i32, Value)> {
    let mut child = Command::new(BIN)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdin"))?
        .write_all(stdin.as_bytes())?;
    let output = child.wait_with_output()?;
    let code = output
        .status
        .code()
        .ok_or_else(|| anyhow::anyhow!("killed by a signal"))?;
    Ok((code, serde_json::from_slice(&output.stdout)?))
}

#[test]
fn a_refused_path_is_an_error_result_with_exit_code_0() -> anyhow::Result<()> {
    let (code, document) = call(r#"{"path": "/etc/passwd"}"#)?;
    assert_eq!(code, 0);
    let message = document["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("outside the workspace"), "{document}");
    assert_eq!(document["error"]["retryable"], false);
    Ok(())
}

#[test]
fn mismatching_arguments_are_an_error_result() -> anyhow::Result<()> {
    let (code, document) = call(r#"{"path": "a", "start_line": "one"}"#)?;
    assert_eq!(code, 0);
    let message = document["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("invalid arguments: at `start_line`: invalid type: string"),
        "{document}"
    );
    Ok(())
}
