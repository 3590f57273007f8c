//! The workspace graders, which look at the attempt's workspace after the run: one file's
//! content (`file_equals`), the whole tree (`tree_equals`), or a command's success
//! (`command`, run through the daemon as the `run_command` tool, in the sandbox every tool
//! runs in — never on this host).
//!
//! The workspace is read on this host (the eval and the daemon share it). What the agent
//! left there is untrusted: a path that leads out of the workspace through a symlink is not
//! followed.

use std::path::{Path, PathBuf};

use airlock_client::proto::{ExecuteToolRequest, ToolStatus};
use airlock_render::status_name;
use async_trait::async_trait;
use serde::Deserialize;

use super::super::tree::{self, Tree, normalized};
use super::grading::{GradeContext, Grader, Verdict, quoted};
use crate::problem::Problem;

/// The tool `command` runs.
pub const RUN_COMMAND: &str = "run_command";

/// Paths a failed `tree_equals` lists per kind of difference.
const MAX_PATHS: usize = 10;

/// How much of a failed command's output a verdict quotes: its end, where a test runner
/// says what failed.
const OUTPUT_TAIL_CHARS: usize = 400;

/// A path inside the workspace, checked: relative, without `..` above the root.
fn workspace_path(field: &str, path: &str) -> Result<String, Problem> {
    match normalized(Path::new(path)) {
        Some(parts) if !parts.is_empty() => Ok(parts.join("/")),
        _ => Err(Problem::invalid(
            field,
            format!("`{path}` is not a path inside the workspace (relative, no `..` above it)"),
        )),
    }
}

/// `file_equals: {path, content}` or `{path, file}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEqualsSpec {
    pub path: String,
    pub content: Option<String>,
    pub file: Option<PathBuf>,
}

pub struct FileEquals {
    path: String,
    expected: Vec<u8>,
    /// Where the expected content comes from, for the verdict: `the expected content` or
    /// the file's name.
    source: String,
}

impl FileEquals {
    pub fn new(spec: FileEqualsSpec, base: &Path) -> Result<FileEquals, Problem> {
        let path = workspace_path("file_equals.path", &spec.path)?;
        let (expected, source) = match (spec.content, spec.file) {
            (Some(content), None) => (content.into_bytes(), "the expected content".to_owned()),
            (None, Some(file)) => {
                let full = base.join(&file);
                let bytes = std::fs::read(&full).map_err(|error| {
                    Problem::unreadable(
                        "file_equals.file",
                        format!("cannot read {}: {error}", full.display()),
                    )
                })?;
                (bytes, file.display().to_string())
            }
            _ => {
                return Err(Problem::invalid(
                    "file_equals",
                    "give the expected text as `content` or a file that holds it as `file`, \
                     one of the two",
                ));
            }
        };
        Ok(FileEquals {
            path,
            expected,
            source,
        })
    }
}

/// Where two texts first differ, as a person would look for it.
fn first_difference(expected: &[u8], actual: &[u8]) -> String {
    let expected = String::from_utf8_lossy(expected);
    let actual = String::from_utf8_lossy(actual);
    let mut expected_lines = expected.split_inclusive('\n');
    let mut actual_lines = actual.split_inclusive('\n');
    for number in 1.. {
        match (expected_lines.next(), actual_lines.next()) {
            (Some(want), Some(got)) if want == got => continue,
            (Some(want), Some(got)) => {
                return format!(
                    "line {number}: expected {}, got {}",
                    quoted(want, 100),
                    quoted(got, 100)
                );
            }
            (Some(want), None) => {
                return format!("the file ends before line {number}, {}", quoted(want, 100));
            }
            (None, Some(got)) => {
                return format!("line {number} is extra: {}", quoted(got, 100));
            }
            (None, None) => break,
        }
    }
    "the bytes differ".to_owned()
}

/// `relative` in `workspace`, unless it leads out of it through a symlink.
fn inside(workspace: &Path, relative: &str) -> Result<PathBuf, String> {
    let path = workspace.join(relative);
    let root = std::fs::canonicalize(workspace)
        .map_err(|error| format!("cannot read the workspace {}: {error}", workspace.display()))?;
    match std::fs::canonicalize(&path) {
        Ok(resolved) if resolved.starts_with(&root) => Ok(resolved),
        Ok(_) => Err(format!("{relative} leads outside the workspace; not read")),
        Err(error) => Err(format!("{relative}: {error}")),
    }
}

#[async_trait(?Send)]
impl Grader for FileEquals {
    fn kind(&self) -> &'static str {
        "file_equals"
    }

    fn label(&self) -> String {
        format!("file_equals {}", self.path)
    }

    async fn grade(&self, cx: &GradeContext<'_>) -> Verdict {
        let path = match inside(cx.workspace, &self.path) {
            Ok(path) => path,
            Err(reason) => return Verdict::fail(reason),
        };
        let actual = match tokio::fs::read(&path).await {
            Ok(actual) => actual,
            Err(error) => return Verdict::fail(format!("{}: {error}", self.path)),
        };
        if actual == self.expected {
            Verdict::pass(format!("{} equals {}", self.path, self.source))
        } else {
            Verdict::fail(format!(
                "{} differs from {} at {}",
                self.path,
                self.source,
                first_difference(&self.expected, &actual)
            ))
        }
    }
}

pub struct TreeEquals {
    dir: PathBuf,
    expected: Tree,
}

impl TreeEquals {
    pub fn new(dir: &Path, base: &Path) -> Result<TreeEquals, Problem> {
        let full = base.join(dir);
        if !full.is_dir() {
            return Err(Problem::unreadable(
                "tree_equals",
                format!("{} is not a directory", full.display()),
            ));
        }
        let expected = tree::read(&full).map_err(|error| {
            Problem::unreadable(
                "tree_equals",
                format!("cannot read {}: {error}", full.display()),
            )
        })?;
        Ok(TreeEquals {
            dir: dir.to_owned(),
            expected,
        })
    }
}

#[async_trait(?Send)]
impl Grader for TreeEquals {
    fn kind(&self) -> &'static str {
        "tree_equals"
    }

    fn label(&self) -> String {
        format!("tree_equals {}", self.dir.display())
    }

    async fn grade(&self, cx: &GradeContext<'_>) -> Verdict {
        let workspace = cx.workspace.to_owned();
        let actual = match tokio::task::spawn_blocking(move || tree::read(&workspace)).await {
            Ok(Ok(actual)) => actual,
            Ok(Err(error)) => return Verdict::fail(format!("cannot read the workspace: {error}")),
            Err(error) => return Verdict::fail(format!("cannot read the workspace: {error}")),
        };
        let difference = tree::diff(&self.expected, &actual);
        if difference.is_empty() {
            Verdict::pass(format!(
                "the workspace equals {} ({} entries)",
                self.dir.display(),
                actual.len()
            ))
        } else {
            Verdict::fail(format!(
                "the workspace differs from {}: {}",
                self.dir.display(),
                difference.describe(MAX_PATHS)
            ))
        }
    }
}

/// `command: {run: "python3 -B -m unittest", workdir: "."}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    pub run: String,
    #[serde(default = "root")]
    pub workdir: String,
}

fn root() -> String {
    ".".to_owned()
}

pub struct Command {
    run: String,
    workdir: String,
}

impl Command {
    pub fn new(spec: CommandSpec) -> Result<Command, Problem> {
        if spec.run.trim().is_empty() {
            return Err(Problem::invalid("command.run", "the command is empty"));
        }
        if normalized(Path::new(&spec.workdir)).is_none() {
            return Err(Problem::invalid(
                "command.workdir",
                format!(
                    "`{}` is not a directory inside the workspace (relative, no `..` above it)",
                    spec.workdir
                ),
            ));
        }
        Ok(Command {
            run: spec.run,
            workdir: spec.workdir,
        })
    }

    /// The call that runs the command in the attempt's workspace.
    pub fn request(&self, workspace: &Path) -> ExecuteToolRequest {
        ExecuteToolRequest {
            tool: RUN_COMMAND.to_owned(),
            arguments_json: serde_json::json!({"command": self.run, "workdir": self.workdir})
                .to_string(),
            workspace: workspace.to_string_lossy().into_owned(),
            timeout_ms: 0,
            require_approval: false,
        }
    }
}

/// The end of `text`, at most `max` characters.
fn tail(text: &str, max: usize) -> String {
    let count = text.chars().count();
    let tail: String = text.chars().skip(count.saturating_sub(max)).collect();
    if count > max {
        format!("…{tail}")
    } else {
        tail
    }
}

#[async_trait(?Send)]
impl Grader for Command {
    fn kind(&self) -> &'static str {
        "command"
    }

    fn label(&self) -> String {
        format!("command {}", quoted(&self.run, 60))
    }

    async fn grade(&self, cx: &GradeContext<'_>) -> Verdict {
        let result = match cx.daemon.execute_tool(self.request(cx.workspace)).await {
            Ok(result) => result,
            Err(error) => return Verdict::fail(format!("{RUN_COMMAND} could not run: {error}")),
        };
        let exit = result
            .exit_code
            .map_or(String::new(), |code| format!(", exit code {code}"));
        if result.status == ToolStatus::Ok as i32 {
            return Verdict::pass(format!("{} succeeded{exit}", quoted(&self.run, 60)));
        }
        let output = if result.error_message.trim().is_empty() {
            &result.content
        } else {
            &result.error_message
        };
        Verdict::fail(format!(
            "{}: {}{exit}: {}",
            quoted(&self.run, 60),
            status_name(result.status),
            tail(output.trim_end(), OUTPUT_TAIL_CHARS)
        ))
    }
}

#[cfg(test)]
mod tests {
    use airlock_client::proto::ToolResult;

    use super::super::tests::{FakeDaemon, build, grade_with};
    use super::*;
    use crate::outcome::Outcome;

    #[tokio::test]
    async fn file_equals_from_content_and_from_a_file() -> anyhow::Result<()> {
        let suite = tempfile::tempdir()?;
        std::fs::create_dir(suite.path().join("expected"))?;
        std::fs::write(suite.path().join("expected/calc.py"), "a\nb\n")?;
        let workspace = tempfile::tempdir()?;
        std::fs::write(workspace.path().join("calc.py"), "a\nb\n")?;
        let daemon = FakeDaemon::default();
        let outcome = Outcome::default();
        for yaml in [
            "file_equals: {path: calc.py, content: \"a\\nb\\n\"}",
            "file_equals: {path: ./calc.py, file: expected/calc.py}",
        ] {
            let grader = build(yaml, suite.path())?;
            let verdict = grade_with(grader.as_ref(), &outcome, workspace.path(), &daemon).await;
            assert!(verdict.passed, "{yaml}: {verdict:?}");
        }
        std::fs::write(workspace.path().join("calc.py"), "a\nc\n")?;
        let grader = build(
            "file_equals: {path: calc.py, file: expected/calc.py}",
            suite.path(),
        )?;
        let verdict = grade_with(grader.as_ref(), &outcome, workspace.path(), &daemon).await;
        assert_eq!(
            verdict,
            Verdict::fail(
                "calc.py differs from expected/calc.py at line 2: expected \"b\", got \"c\""
            )
        );
        std::fs::remove_file(workspace.path().join("calc.py"))?;
        let verdict = grade_with(grader.as_ref(), &outcome, workspace.path(), &daemon).await;
        assert!(!verdict.passed);
        assert!(verdict.detail.starts_with("calc.py: "), "{verdict:?}");
        Ok(())
    }

    #[tokio::test]
    async fn file_equals_does_not_follow_a_link_out_of_the_workspace() -> anyhow::Result<()> {
        let workspace = tempfile::tempdir()?;
        std::os::unix::fs::symlink("/etc/passwd", workspace.path().join("calc.py"))?;
        let grader = build("file_equals: {path: calc.py, content: x}", Path::new("."))?;
        let verdict = grade_with(
            grader.as_ref(),
            &Outcome::default(),
            workspace.path(),
            &FakeDaemon::default(),
        )
        .await;
        assert!(!verdict.passed);
        assert!(
            verdict.detail.contains("leads outside the workspace"),
            "{verdict:?}"
        );
        Ok(())
    }

    #[test]
    fn file_equals_is_checked_at_load() {
        let dot = Path::new(".");
        for (yaml, expected) in [
            (
                "file_equals: {path: ../x, content: x}",
                "not a path inside the workspace",
            ),
            (
                "file_equals: {path: /etc/x, content: x}",
                "not a path inside the workspace",
            ),
            ("file_equals: {path: x}", "one of the two"),
            (
                "file_equals: {path: x, file: /nonexistent/x}",
                "cannot read /nonexistent/x",
            ),
        ] {
            let Err(error) = build(yaml, dot) else {
                panic!("{yaml} was accepted");
            };
            assert!(error.to_string().contains(expected), "{yaml}: {error}");
        }
    }

    #[tokio::test]
    async fn tree_equals_lists_what_differs() -> anyhow::Result<()> {
        let suite = tempfile::tempdir()?;
        std::fs::create_dir_all(suite.path().join("expected/src"))?;
        std::fs::write(suite.path().join("expected/src/calc.py"), "fixed\n")?;
        let workspace = tempfile::tempdir()?;
        std::fs::create_dir(workspace.path().join("src"))?;
        std::fs::write(workspace.path().join("src/calc.py"), "fixed\n")?;
        let grader = build("tree_equals: expected", suite.path())?;
        let daemon = FakeDaemon::default();
        let outcome = Outcome::default();
        let verdict = grade_with(grader.as_ref(), &outcome, workspace.path(), &daemon).await;
        assert!(verdict.passed, "{verdict:?}");
        std::fs::write(workspace.path().join("src/calc.py"), "broken\n")?;
        std::fs::write(workspace.path().join("notes.txt"), "")?;
        let verdict = grade_with(grader.as_ref(), &outcome, workspace.path(), &daemon).await;
        assert_eq!(
            verdict,
            Verdict::fail(
                "the workspace differs from expected: added: notes.txt; changed: src/calc.py"
            )
        );
        assert!(build("tree_equals: missing", suite.path()).is_err());
        Ok(())
    }

    #[tokio::test]
    async fn command_runs_run_command_in_the_workspace() -> anyhow::Result<()> {
        let grader = build(
            "command: {run: \"python3 -B -m unittest\", workdir: tests}",
            Path::new("."),
        )?;
        let passing = FakeDaemon {
            tool_result: ToolResult {
                status: ToolStatus::Ok as i32,
                exit_code: Some(0),
                ..ToolResult::default()
            },
            ..FakeDaemon::default()
        };
        let outcome = Outcome::default();
        let verdict = grade_with(grader.as_ref(), &outcome, Path::new("/ws/a-1"), &passing).await;
        assert!(verdict.passed, "{verdict:?}");
        {
            let executions = passing.executions.borrow();
            assert_eq!(executions[0].tool, "run_command");
            assert_eq!(executions[0].workspace, "/ws/a-1");
            let arguments: serde_json::Value = serde_json::from_str(&executions[0].arguments_json)?;
            assert_eq!(
                arguments,
                serde_json::json!({"command": "python3 -B -m unittest", "workdir": "tests"})
            );
        }

        let failing = FakeDaemon {
            tool_result: ToolResult {
                status: ToolStatus::ToolError as i32,
                exit_code: Some(1),
                error_message: "FAILED (failures=1)\n".to_owned(),
                ..ToolResult::default()
            },
            ..FakeDaemon::default()
        };
        let verdict = grade_with(grader.as_ref(), &outcome, Path::new("/ws/a-1"), &failing).await;
        assert_eq!(
            verdict,
            Verdict::fail(
                "\"python3 -B -m unittest\": TOOL_ERROR, exit code 1: FAILED (failures=1)"
            )
        );
        let defaulted = build("command: {run: make test}", Path::new("."))?;
        let verdict = grade_with(defaulted.as_ref(), &outcome, Path::new("/ws"), &passing).await;
        assert!(verdict.passed);
        let executions = passing.executions.borrow();
        assert!(executions[1].arguments_json.contains(r#""workdir":".""#));
        assert!(build("command: {run: x, workdir: ../up}", Path::new(".")).is_err());
        Ok(())
    }
}
