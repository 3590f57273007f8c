//! `fs_ops`: performs a list of file operations chosen by the test and reports each one.
//! Args: `{"ops": [op, …]}`, each op one of
//! - `{"op": "read", "path"}` and `{"op": "list", "path"}`;
//! - `{"op": "write", "path", "content"}` (create or replace);
//! - `{"op": "hardlink", "from", "to"}` (`std::fs::hard_link`: the link names what `from`
//!   names, a symlink itself rather than its target);
//! - `{"op": "read_repeatedly", "path", "times"}`: reads `path` `times` times in a row.
//!
//! Attacks the file sandbox with whatever paths the test plants around the workspace:
//! symlinks with trailing slashes or `..` in their targets, hard links towards files
//! outside, and (with `read_repeatedly`) a symlink that the test swaps back and forth while
//! the tool reads, to catch a sandbox that checks a path once and then uses it again.
//!
//! Returns `{"ok": [report, …]}`, one per op in order. The single-shot ops report an
//! `Attempt` (`{"attempt", "succeeded", "error"?, "kind"?, "content"?}`, the attempt named
//! `<op> <path>` or `hardlink <from> -> <to>`); `read_repeatedly` reports
//! `{"attempt": "read_repeatedly <path>", "seen": {content: count}, "errors": {kind: count}}`
//! so the test can check that no read ever returned what lies outside.

use std::collections::BTreeMap;
use std::process::ExitCode;

use airlock_hostile::{Attempt, ToolError, list_dir, read_head, run};
use serde::Deserialize;
use serde_json::{Value, json};

/// More repetitions than this would only make a call slow: a race the sandbox loses shows up
/// within a few thousand reads while the test swaps as fast as it can.
const MAX_TIMES: u32 = 1_000_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    ops: Vec<Op>,
}

#[derive(Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
enum Op {
    Read { path: String },
    List { path: String },
    Write { path: String, content: String },
    Hardlink { from: String, to: String },
    ReadRepeatedly { path: String, times: u32 },
}

fn report(attempt: Attempt) -> Result<Value, ToolError> {
    serde_json::to_value(attempt).map_err(|error| ToolError::new(error.to_string()))
}

fn read_repeatedly(path: &str, times: u32) -> Value {
    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    for _ in 0..times.min(MAX_TIMES) {
        match read_head(path) {
            Ok(bytes) => {
                *seen
                    .entry(String::from_utf8_lossy(&bytes).into_owned())
                    .or_default() += 1;
            }
            Err(error) => *errors.entry(format!("{:?}", error.kind())).or_default() += 1,
        }
    }
    json!({"attempt": format!("read_repeatedly {path}"), "seen": seen, "errors": errors})
}

fn perform(op: Op) -> Result<Value, ToolError> {
    match op {
        Op::Read { path } => report(Attempt::record(format!("read {path}"), read_head(&path))),
        Op::List { path } => report(Attempt::record(format!("list {path}"), list_dir(&path))),
        Op::Write { path, content } => {
            let written = std::fs::write(&path, content).map(|()| Vec::new());
            report(Attempt::record(format!("write {path}"), written))
        }
        Op::Hardlink { from, to } => {
            let linked = std::fs::hard_link(&from, &to).map(|()| Vec::new());
            report(Attempt::record(format!("hardlink {from} -> {to}"), linked))
        }
        Op::ReadRepeatedly { path, times } => Ok(read_repeatedly(&path, times)),
    }
}

fn main() -> ExitCode {
    run(|args: Args| -> Result<Vec<Value>, ToolError> {
        args.ops.into_iter().map(perform).collect()
    })
}
