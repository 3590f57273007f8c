//! What the benchmarks run: the no-op tool, process tools, a small workspace to search, and
//! the tools directory a daemon serves them from. Everything lives in one temporary
//! directory that is removed when the run ends.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use tempfile::TempDir;

/// The no-op WebAssembly tool: returns its arguments (tests/hostile/src/bin/echo.rs).
pub const ECHO: &str = "echo";
/// The same module declared `risk = "write"`, so that policy `risky` asks before each call.
pub const ECHO_WRITE: &str = "echo_write";
/// `/bin/true` as a process tool.
pub const TRUE: &str = "true";
/// GNU grep over the workspace as a process tool (the shipped `workspace_grep` plugin).
pub const GREP: &str = "workspace_grep";
/// What the grep benchmarks search for; the workspace has one match per file.
pub const GREP_PATTERN: &str = "needle_[0-9]+";
/// The shipped WebAssembly tools that touch files, served as users get them.
pub const READ_FILE: &str = "read_file";
pub const LIST_DIR: &str = "list_dir";
pub const WASM_GREP: &str = "grep";
/// A 1 KiB text file at the workspace's root, for `read_file`; it has no match for grep.
pub const SMALL_FILE: &str = "notes.txt";
/// What a recursive `list_dir` of the workspace lists: four folders, the files in them and
/// [`SMALL_FILE`].
pub const LIST_DIR_ENTRIES: usize = 4 + WORKSPACE_FILES + 1;

/// Files and lines of the workspace grep searches: a small project's worth of source.
const WORKSPACE_FILES: usize = 40;
const LINES_PER_FILE: usize = 200;

/// The repository root, where the modules, plugins and profiles are.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// The benchmark's files.
pub struct Fixtures {
    _dir: TempDir,
    pub repo: PathBuf,
    pub echo_module: PathBuf,
    pub tools_dir: PathBuf,
    pub profiles_dir: PathBuf,
    /// The only directory daemons accept workspaces in.
    pub workspace_root: PathBuf,
    /// `workspace_root/project`: what grep searches.
    pub workspace: PathBuf,
    /// Scratch space for daemon state and caches.
    pub scratch: PathBuf,
}

impl Fixtures {
    pub fn create() -> anyhow::Result<Fixtures> {
        let repo = repo_root();
        let echo_module = repo.join("tests/modules/echo.wasm");
        if !echo_module.is_file() {
            bail!(
                "{} is missing: build the WebAssembly modules first with scripts/build-wasm.sh \
                 (scripts/bench.sh does this)",
                echo_module.display()
            );
        }
        let dir = tempfile::Builder::new()
            .prefix("airlock-bench-")
            .tempdir()
            .context("cannot create the benchmark's temporary directory")?;
        let tools_dir = dir.path().join("tools");
        let workspace_root = dir.path().join("workspaces");
        let workspace = workspace_root.join("project");
        let scratch = dir.path().join("scratch");
        for needed in [&tools_dir, &workspace, &scratch] {
            std::fs::create_dir_all(needed)
                .with_context(|| format!("cannot create {}", needed.display()))?;
        }
        let fixtures = Fixtures {
            repo: repo.clone(),
            echo_module,
            profiles_dir: repo.join("sandbox-profiles"),
            tools_dir,
            workspace_root,
            workspace,
            scratch,
            _dir: dir,
        };
        fixtures.write_tools()?;
        write_workspace(&fixtures.workspace)?;
        Ok(fixtures)
    }

    fn write_tools(&self) -> anyhow::Result<()> {
        let module = std::fs::read(&self.echo_module)
            .with_context(|| format!("cannot read {}", self.echo_module.display()))?;
        // The no-op tool reads nothing and changes nothing: idempotent, like every shipped
        // read-only tool. Its `write` twin is not, and pays for its intent's commit.
        for (name, risk, idempotent) in [(ECHO, "read_only", true), (ECHO_WRITE, "write", false)] {
            let folder = self.tools_dir.join(name);
            std::fs::create_dir_all(&folder)?;
            std::fs::write(folder.join(format!("{name}.wasm")), &module)?;
            std::fs::write(
                folder.join("tool.toml"),
                format!(
                    "name = \"{name}\"\nversion = \"0.1.0\"\ndescription = \"returns its arguments\"\n\
                     risk = \"{risk}\"\nengine = \"wasm\"\nmodule = \"{name}.wasm\"\n\
                     profile = \"strict\"\ntimeout_ms = 10000\nidempotent = {idempotent}\n\
                     input_schema = {{ type = \"object\" }}\n"
                ),
            )?;
        }
        let folder = self.tools_dir.join(TRUE);
        std::fs::create_dir_all(&folder)?;
        std::fs::write(
            folder.join("tool.toml"),
            format!(
                "name = \"{TRUE}\"\nversion = \"0.1.0\"\ndescription = \"does nothing\"\n\
                 risk = \"read_only\"\nengine = \"process\"\ncommand = [\"/bin/true\"]\n\
                 abi = \"argv\"\nprofile = \"process-readonly\"\ntimeout_ms = 10000\n\
                 input_schema = {{ type = \"object\" }}\n"
            ),
        )?;
        // The shipped plugins, as users get them: manifest, schema and (for the WebAssembly
        // ones, built by scripts/build-wasm.sh) module.
        for (name, module) in [
            (GREP, None),
            (READ_FILE, Some("read_file.wasm")),
            (LIST_DIR, Some("list_dir.wasm")),
            (WASM_GREP, Some("grep.wasm")),
        ] {
            let plugin = self.repo.join("plugins").join(name);
            let folder = self.tools_dir.join(name);
            std::fs::create_dir_all(&folder)?;
            for file in ["tool.toml", "schema.json"].into_iter().chain(module) {
                std::fs::copy(plugin.join(file), folder.join(file)).with_context(|| {
                    format!(
                        "cannot copy {} (scripts/build-wasm.sh builds the plugins' modules)",
                        plugin.join(file).display()
                    )
                })?;
            }
        }
        Ok(())
    }

    /// A tools directory with the no-op tool alone, to serve beside the shipped plugins
    /// (whose names the other benchmark tools would clash with).
    pub fn echo_tools_dir(&self) -> anyhow::Result<PathBuf> {
        let dir = self.scratch.join("echo-tools");
        let folder = dir.join(ECHO);
        if !folder.is_dir() {
            std::fs::create_dir_all(&folder)?;
            for file in ["tool.toml", "echo.wasm"] {
                std::fs::copy(self.tools_dir.join(ECHO).join(file), folder.join(file))?;
            }
        }
        Ok(dir)
    }

    /// The manifest of tool `name` in the tools directory.
    pub fn manifest(&self, name: &str) -> PathBuf {
        self.tools_dir.join(name).join("tool.toml")
    }

    /// A fresh, empty directory under the scratch space.
    pub fn fresh_dir(&self, prefix: &str) -> anyhow::Result<PathBuf> {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(&self.scratch)
            .context("cannot create a scratch directory")?;
        Ok(dir.keep())
    }

    /// The grep command line the plugin runs, for the peers (relative to the workspace).
    pub fn grep_argv(&self) -> Vec<String> {
        [
            "/usr/bin/grep",
            "--recursive",
            "--line-number",
            "--with-filename",
            "--binary-files=without-match",
            "--extended-regexp",
            "--max-count=100",
            "--exclude-dir=.git",
            "--color=never",
            &format!("--regexp={GREP_PATTERN}"),
            "--",
            ".",
        ]
        .iter()
        .map(|arg| (*arg).to_owned())
        .collect()
    }
}

/// Source-like files with one matching line each, and [`SMALL_FILE`].
fn write_workspace(dir: &Path) -> anyhow::Result<()> {
    let line = "A small file the benchmarks read whole, one line of many alike.\n";
    std::fs::write(dir.join(SMALL_FILE), line.repeat(1024 / line.len()))?;
    for file in 0..WORKSPACE_FILES {
        let sub = dir.join(format!("module_{}", file % 4));
        std::fs::create_dir_all(&sub)?;
        let mut text = String::new();
        for line in 0..LINES_PER_FILE {
            if line == LINES_PER_FILE / 2 {
                text.push_str(&format!("    let needle_{file} = find(haystack);\n"));
            } else {
                text.push_str(&format!(
                    "    let value_{line} = compute(value_{}, {line}); // step {line}\n",
                    line.saturating_sub(1)
                ));
            }
        }
        std::fs::write(sub.join(format!("file_{file}.rs")), text)?;
    }
    Ok(())
}

/// How many lines grep prints over the workspace: one per file.
pub const GREP_MATCHES: usize = WORKSPACE_FILES;

/// The small Python project `run_command` tests (shaped like the demo's sample,
/// scripts/demo/workspace, with a suite that passes): `src/calc.py`, ten unittest tests in
/// `tests/test_calc.py`, and a README. One test exports a report through the library, so
/// every run of the suite writes [`PYTHON_REPORT`] (in the new directory
/// [`PYTHON_REPORT_DIR`]); nothing else: the profile's `PYTHONDONTWRITEBYTECODE=1` keeps
/// `__pycache__` out.
pub fn write_python_project(dir: &Path) -> anyhow::Result<()> {
    for sub in ["src", "tests"] {
        std::fs::create_dir_all(dir.join(sub))?;
    }
    std::fs::write(
        dir.join("README.md"),
        "# calc\n\nSmall helpers and their tests: `python3 -m unittest tests.test_calc`.\n",
    )?;
    std::fs::write(dir.join("src/calc.py"), PYTHON_MODULE)?;
    std::fs::write(dir.join("tests/test_calc.py"), PYTHON_TESTS)?;
    Ok(())
}

/// The command line that runs the Python project's suite, and what its output ends with.
pub const PYTHON_SUITE: &str = "python3 -m unittest tests.test_calc";
pub const PYTHON_SUITE_OK: &str = "Ran 10 tests";
/// What one run of the suite adds to the project.
pub const PYTHON_REPORT_DIR: &str = "reports";
pub const PYTHON_REPORT: &str = "reports/summary.csv";

const PYTHON_MODULE: &str = r#""""Small helpers: arithmetic, text and a CSV report."""

import csv
import os


def add(a, b):
    return a + b


def mean(values):
    """The arithmetic mean of a non-empty list of numbers."""
    if not values:
        raise ValueError("mean of an empty list")
    return sum(values) / len(values)


def median(values):
    ordered = sorted(values)
    if not ordered:
        raise ValueError("median of an empty list")
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def clamp(value, low, high):
    return max(low, min(high, value))


def slugify(text):
    words = "".join(c.lower() if c.isalnum() else " " for c in text).split()
    return "-".join(words)


def word_count(text):
    counts = {}
    for word in text.lower().split():
        counts[word] = counts.get(word, 0) + 1
    return counts


def fizzbuzz(n):
    return ["Fizz" * (i % 3 == 0) + "Buzz" * (i % 5 == 0) or str(i) for i in range(1, n + 1)]


def write_report(path, rows):
    """Writes `rows` (name, value) as CSV with a header; returns how many rows it wrote."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["name", "value"])
        writer.writerows(rows)
    return len(rows)
"#;

const PYTHON_TESTS: &str = r#"import csv
import unittest

from src.calc import add, clamp, fizzbuzz, mean, median, slugify, word_count, write_report


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_mean(self):
        self.assertEqual(mean([1, 2, 3, 4]), 2.5)

    def test_mean_of_nothing(self):
        with self.assertRaises(ValueError):
            mean([])

    def test_median_odd(self):
        self.assertEqual(median([5, 1, 3]), 3)

    def test_median_even(self):
        self.assertEqual(median([4, 1, 3, 2]), 2.5)

    def test_clamp(self):
        self.assertEqual([clamp(v, 0, 10) for v in (-5, 5, 15)], [0, 5, 10])

    def test_slugify(self):
        self.assertEqual(slugify("Hello, World! 2026"), "hello-world-2026")

    def test_word_count(self):
        self.assertEqual(word_count("a b A c b a"), {"a": 3, "b": 2, "c": 1})

    def test_fizzbuzz(self):
        self.assertEqual(fizzbuzz(15)[-1], "FizzBuzz")
        self.assertEqual(fizzbuzz(5), ["1", "2", "Fizz", "4", "Buzz"])

    def test_report(self):
        rows = [("add", add(2, 3)), ("mean", mean([1, 2, 3, 4])), ("median", median([3, 1, 2]))]
        self.assertEqual(write_report("reports/summary.csv", rows), 3)
        with open("reports/summary.csv", newline="") as written:
            self.assertEqual(len(list(csv.reader(written))), 4)


if __name__ == "__main__":
    unittest.main()
"#;

/// Files in the write-heavy workspace's `data/`, of which the command modifies the first
/// [`WRITE_MODIFIED`]; it adds [`WRITE_ADDED`] files under `gen/`.
pub const WRITE_DATA_FILES: usize = 40;
pub const WRITE_ADDED: usize = 200;
pub const WRITE_MODIFIED: usize = 20;

/// The write-heavy workspace's `data/` as it is before each call (rewritten between calls).
pub fn write_data_files(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir.join("data"))?;
    for file in 1..=WRITE_DATA_FILES {
        std::fs::write(
            dir.join(format!("data/file_{file}.txt")),
            format!("data file {file}\n"),
        )?;
    }
    Ok(())
}

/// The write-heavy command: `WRITE_ADDED` small files in a new `gen/` and a line appended to
/// `WRITE_MODIFIED` files of `data/`, with shell built-ins only (dash's `echo`, `[` and
/// redirections: one process besides `mkdir`), so that the writes, not process starts,
/// dominate.
pub fn write_command() -> String {
    format!(
        "mkdir gen && i=0 && while [ $i -lt {WRITE_ADDED} ]; do i=$((i+1)); \
         echo \"generated $i\" > gen/file_$i.txt; done && i=0 && \
         while [ $i -lt {WRITE_MODIFIED} ]; do i=$((i+1)); echo changed >> data/file_$i.txt; done"
    )
}

/// One call's launch as the engines get it from the executor: `stdin`, `workspace` (mounted
/// through `overlay` when there is one), `profile`, output into `capture`, no network (every
/// benchmarked tool runs under `network = "none"`), a minute to run.
pub fn launch(
    stdin: bytes::Bytes,
    workspace: Option<PathBuf>,
    overlay: Option<std::sync::Arc<airlock_daemon::testing::Overlay>>,
    profile: std::sync::Arc<airlock_daemon::testing::Profile>,
    capture: std::sync::Arc<airlock_daemon::testing::OutputCapture>,
) -> airlock_daemon::testing::Launch {
    airlock_daemon::testing::Launch {
        stdin,
        workspace,
        overlay,
        changed: Default::default(),
        profile,
        capture,
        stats: std::sync::Arc::new(airlock_daemon::testing::RunStats::default()),
        egress: None,
        secrets: Default::default(),
        tenant: None,
        call_id: airlock_daemon::testing::ExecutionId::new(),
        deadline: std::time::Instant::now() + std::time::Duration::from_secs(60),
        questions: None,
        trace_parent: None,
    }
}
