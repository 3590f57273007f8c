//! `airlockd check-tool DIR` (what `airlock tools check` runs): what an author needs to know
//! about a tool before deploying it, found by the daemon's own code rather than a second
//! copy of its rules — the manifest parser, the profiles, the engines, the registry that
//! refuses or serves the tool, and the executor that runs it.
//!
//! It reports, in order: the manifest; the module (kind, size, digest and whether it matches
//! the pin); each import and whether the profile grants it; whether the tool loads under its
//! profile (compiling it into the module cache a daemon with the same state dir reuses); and
//! the result of each example call against a workspace, compared with what the example
//! expects. A hosted MCP server's manifest is started in its sandbox and its tools listed
//! instead (`check/mcp.rs`). Every failure names the file and the fix.

mod mcp;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::engine::process::{ProcessConfig, ProcessEngine};
use crate::engine::wasm::{WasmConfig, WasmEngine};
use crate::engine::{Code, EngineKind, Engines, ToolKind};
use crate::profile::{NetworkPolicy, Profile, Profiles};
use crate::tools::{Call, Executor, Manifest, Registry, Tool, ToolResult, ToolStatus};
use crate::workspace::WorkspaceRoots;

/// The file of example calls a tool project may keep beside its manifest.
pub const EXAMPLES_FILE: &str = "examples.json";

/// What to check.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The tool's folder, or its `tool.toml`.
    pub tool: PathBuf,
    pub profiles_dir: PathBuf,
    /// Where compiled modules are cached (a daemon's `module_cache_dir`).
    pub cache_dir: PathBuf,
    /// Where the process engine keeps its state.
    pub state_dir: PathBuf,
    /// The workspace example calls run in; else the examples file's own.
    pub workspace: Option<PathBuf>,
    /// Run one call with these arguments instead of the examples.
    pub arguments: Option<String>,
    /// For a hosted MCP server: where to write the listing it printed, as JSON (each tool's
    /// name on the server → the digest a manifest pins it by), for `airlock mcp add`.
    pub listing_out: Option<PathBuf>,
}

/// `examples.json`: calls and what each must return.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Examples {
    /// The workspace, relative to the examples file.
    workspace: Option<PathBuf>,
    examples: Vec<Example>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Example {
    name: String,
    arguments: serde_json::Value,
    /// The result, compared as JSON.
    ok: Option<serde_json::Value>,
    /// The tool error's exact message.
    error: Option<String>,
    /// Any other status (`INVALID_ARGUMENTS`, …).
    status: Option<String>,
}

/// Why the check could not be made at all (as opposed to a tool that fails it).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("cannot write the report: {0}")]
    Write(#[from] std::io::Error),
    #[error(transparent)]
    Setup(#[from] crate::engine::wasm::SetupError),
    #[error("cannot use the workspace: {0}")]
    Workspace(std::io::Error),
}

/// Checks the tool, writing the report to `out`; `Ok(true)` when it passed everything.
pub async fn check_tool(options: &CheckOptions, out: &mut impl Write) -> Result<bool, CheckError> {
    let manifest_path = if options.tool.is_dir() {
        options.tool.join(crate::tools::MANIFEST_FILE)
    } else {
        options.tool.clone()
    };
    let dir = manifest_path
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_owned);
    let manifest = match Manifest::load(&manifest_path) {
        Ok(manifest) => manifest,
        Err(err) => {
            writeln!(out, "✗ manifest: {err}")?;
            return Ok(false);
        }
    };
    writeln!(
        out,
        "✓ manifest {}: tool `{}`, engine {}, profile `{}`",
        manifest_path.display(),
        manifest.name(),
        manifest.engine(),
        manifest.profile
    )?;
    let (profiles, _) = Profiles::load_dir(&options.profiles_dir);
    let profile = match profiles.get(&manifest.profile) {
        Ok(profile) => profile,
        Err(err) => {
            writeln!(
                out,
                "✗ profile: {err} (in {}; name another folder with --profiles-dir)",
                options.profiles_dir.display()
            )?;
            return Ok(false);
        }
    };
    let mut passed = true;
    if let Code::Module(module) = &manifest.image.code {
        passed &= check_module(module, &manifest, &profile, out)?;
    }
    writeln!(out, "… loading under profile `{}`", profile.name)?;
    let wasm = WasmEngine::new(&WasmConfig {
        cache_dir: options.cache_dir.clone(),
        max_concurrent_calls: 4,
    })?;
    let process = Arc::new(ProcessEngine::new(&ProcessConfig {
        state_dir: options.state_dir.clone(),
    }));
    let scratch = mcp::Scratch::new(&options.state_dir);
    let engines = Engines::default()
        .with(Arc::new(wasm))
        .with(process.clone())
        .with(Arc::new(scratch.engine(process)));
    let (registry, refused) = Registry::load(std::slice::from_ref(&dir), &profiles, &engines);
    for error in &refused {
        writeln!(
            out,
            "✗ refused: {}: {}",
            error.path.display(),
            error.message
        )?;
    }
    if manifest.engine() == EngineKind::Mcp {
        let listed = mcp::report(&registry, manifest.name(), out)?;
        if let Some(path) = &options.listing_out {
            mcp::write_listing(&registry, manifest.name(), path)?;
        }
        return Ok(listed && refused.is_empty());
    }
    let Some(tool) = registry.get(manifest.name()) else {
        return Ok(false);
    };
    writeln!(out, "✓ loads as {}", kind_words(tool.loaded.kind()))?;
    let registry = Arc::new(registry);
    let examples = match &options.arguments {
        Some(arguments) => match serde_json::from_str(arguments) {
            Ok(arguments) => Examples {
                workspace: None,
                examples: vec![Example {
                    name: "--args".into(),
                    arguments,
                    ok: None,
                    error: None,
                    status: None,
                }],
            },
            Err(err) => {
                writeln!(out, "✗ --args is not JSON: {err}")?;
                return Ok(false);
            }
        },
        None => match read_examples(&dir, out)? {
            Some(examples) => examples,
            None => return Ok(passed),
        },
    };
    let workspace = options.workspace.clone().or(examples.workspace);
    Ok(run_examples(registry, &tool, workspace, examples.examples, out).await? && passed)
}

/// The module's kind, size, digest against its pin, and imports against the profile.
fn check_module(
    module: &Path,
    manifest: &Manifest,
    profile: &Profile,
    out: &mut impl Write,
) -> Result<bool, CheckError> {
    let bytes = match std::fs::read(module) {
        Ok(bytes) => bytes,
        Err(err) => {
            writeln!(
                out,
                "✗ module {}: {err} (build it: `airlock tools build`)",
                module.display()
            )?;
            return Ok(false);
        }
    };
    let digest = hex::encode(Sha256::digest(&bytes));
    writeln!(
        out,
        "✓ module {}: {} bytes, sha256 {digest}",
        module.display(),
        bytes.len()
    )?;
    let mut passed = true;
    match &manifest.image.sha256 {
        Some(pinned) if *pinned == digest => writeln!(out, "✓ matches the manifest's sha256")?,
        Some(pinned) => {
            writeln!(
                out,
                "✗ the manifest pins sha256 {pinned}: a daemon refuses this module (rebuilt? \
                 pin the new one with `airlock tools digest --write`)"
            )?;
            passed = false;
        }
        None => writeln!(
            out,
            "· not pinned: a changed module would be served (pin it with `airlock tools digest \
             --write`)"
        )?,
    }
    match imports(&bytes) {
        Ok(imports) => {
            for import in imports {
                let (granted, why) = grant(&import, profile);
                passed &= granted;
                writeln!(
                    out,
                    "{} import {import}: {why}",
                    if granted { "✓" } else { "✗" }
                )?;
            }
        }
        Err(err) => {
            writeln!(out, "✗ not WebAssembly the daemon can read: {err}")?;
            passed = false;
        }
    }
    Ok(passed)
}

/// The names a module or component imports: `module::name` of a core module, the instance
/// or function names of a component (each interface once).
fn imports(bytes: &[u8]) -> Result<Vec<String>, wasmparser::BinaryReaderError> {
    let mut names = Vec::new();
    let mut depth = 0usize;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload? {
            wasmparser::Payload::ModuleSection { .. }
            | wasmparser::Payload::ComponentSection { .. } => depth += 1,
            wasmparser::Payload::End(_) => depth = depth.saturating_sub(1),
            wasmparser::Payload::ImportSection(section) if depth == 0 => {
                for import in section.into_imports() {
                    let import = import?;
                    names.push(format!("{}::{}", import.module, import.name));
                }
            }
            wasmparser::Payload::ComponentImportSection(section) if depth == 0 => {
                for import in section {
                    let import = import?;
                    // A type import names a type the world uses, not something to link.
                    if !matches!(import.ty, wasmparser::ComponentTypeRef::Type(_)) {
                        names.push(import.name.name.to_owned());
                    }
                }
            }
            _ => {}
        }
    }
    names.dedup();
    Ok(names)
}

/// Whether the daemon links `import` for a tool under `profile`, and what it reaches.
fn grant(import: &str, profile: &Profile) -> (bool, String) {
    let networked = matches!(profile.network, NetworkPolicy::AllowList { .. });
    if import.starts_with("wasi_snapshot_preview1::") {
        return (true, "WASI preview 1".into());
    }
    let interface = import.split('@').next().unwrap_or(import);
    match interface.split('/').next().unwrap_or(interface) {
        "wasi:filesystem" => (
            true,
            if profile.files.is_empty() {
                "linked; the profile preopens no folder, so no file can be opened".into()
            } else {
                "the folders the profile grants".into()
            },
        ),
        "wasi:cli" | "wasi:io" | "wasi:clocks" | "wasi:random" => (true, "WASI".into()),
        "airlock:tool" => (true, "the types of sdk/wit/tool.wit".into()),
        "wasi:sockets" => (
            true,
            "linked, but every socket and name lookup is refused (HTTP goes through wasi:http)"
                .into(),
        ),
        "wasi:http" if networked => (
            true,
            "requests go through the egress gate, to the profile's allow-list".into(),
        ),
        "wasi:http" => (
            false,
            format!(
                "profile `{}` grants no network (give it `network = {{ allow = [...] }}`)",
                profile.name
            ),
        ),
        _ => (
            false,
            "not linked: a tool may import only WASI (sdk/ABI.md)".into(),
        ),
    }
}

fn kind_words(kind: ToolKind) -> &'static str {
    match kind {
        ToolKind::WasmModule => "a WASI preview 1 module on the stdio ABI",
        ToolKind::WasmCommand => "a WASI preview 2 command component on the stdio ABI",
        ToolKind::WasmComponent => "a typed component (airlock:tool/tool)",
        ToolKind::Program => "a program in the process sandbox",
        ToolKind::McpTool => "a tool of a hosted MCP server",
    }
}

/// The examples file of `dir`, its workspace relative to `dir`; none when there is no file,
/// and no examples (a failed check) when it cannot be read.
fn read_examples(dir: &Path, out: &mut impl Write) -> Result<Option<Examples>, CheckError> {
    let unreadable = Examples {
        workspace: None,
        examples: Vec::new(),
    };
    let path = dir.join(EXAMPLES_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            writeln!(
                out,
                "· no {EXAMPLES_FILE}: pass --args to run the tool once"
            )?;
            return Ok(None);
        }
        Err(err) => {
            writeln!(out, "✗ {}: {err}", path.display())?;
            return Ok(Some(unreadable));
        }
    };
    match serde_json::from_str::<Examples>(&text) {
        Ok(examples) => Ok(Some(Examples {
            workspace: examples.workspace.map(|workspace| dir.join(workspace)),
            examples: examples.examples,
        })),
        Err(err) => {
            writeln!(
                out,
                "✗ {}: {err} (expected {{\"workspace\": …, \"examples\": [{{\"name\", \
                 \"arguments\", and one of \"ok\", \"error\", \"status\"}}]}})",
                path.display()
            )?;
            Ok(Some(unreadable))
        }
    }
}

async fn run_examples(
    registry: Arc<Registry>,
    tool: &Arc<Tool>,
    workspace: Option<PathBuf>,
    examples: Vec<Example>,
    out: &mut impl Write,
) -> Result<bool, CheckError> {
    if examples.is_empty() {
        return Ok(false);
    }
    let workspace = match workspace.map(|path| path.canonicalize().map_err(|err| (path, err))) {
        Some(Ok(path)) => Some(path),
        Some(Err((path, err))) => {
            writeln!(out, "✗ workspace {}: {err}", path.display())?;
            return Ok(false);
        }
        None => None,
    };
    let roots: Vec<PathBuf> = workspace.iter().cloned().collect();
    let executor = Executor::new(
        registry,
        WorkspaceRoots::new(&roots).map_err(CheckError::Workspace)?,
    );
    let redactor = executor.registry().redactor().clone();
    let mut passed = true;
    for example in examples {
        let (events, _) = mpsc::unbounded_channel();
        let call = Call {
            tool: tool.clone(),
            redactor: redactor.clone(),
            profile: tool.profile.clone(),
            arguments_json: example.arguments.to_string(),
            workspace: workspace.clone(),
            timeout: tool.manifest.timeout,
            egress_approver: None,
            tenant: None,
            in_run: false,
            ignores: None,
            change_journal: None,
            questions: None,
            verdict: None,
            trace_parent: None,
        };
        let result = executor.run(call, events, CancellationToken::new()).await;
        let verdict = judge(&example, &result);
        passed &= verdict.is_none();
        match verdict {
            None => writeln!(
                out,
                "✓ example `{}`: {} in {} ms{}",
                example.name,
                result.status.as_str(),
                result.duration.as_millis(),
                if example.ok.is_none() && example.error.is_none() && example.status.is_none() {
                    format!(": {}", shown(&result))
                } else {
                    String::new()
                }
            )?,
            Some(problem) => writeln!(out, "✗ example `{}`: {problem}", example.name)?,
        }
    }
    Ok(passed)
}

/// What is wrong with `result` for `example`; none when it is what the example expects
/// (any finished call, when the example expects nothing).
fn judge(example: &Example, result: &ToolResult) -> Option<String> {
    let status = result.status.as_str();
    if let Some(want) = &example.ok {
        if result.status != ToolStatus::Ok {
            return Some(format!("{status}: {}", result.error_message));
        }
        return match serde_json::from_str::<serde_json::Value>(&result.content) {
            Ok(got) if got == *want => None,
            Ok(got) => Some(format!("got {got}, expected {want}")),
            Err(err) => Some(format!(
                "the result is not JSON ({err}): {}",
                result.content
            )),
        };
    }
    if let Some(want) = &example.error {
        return (result.status != ToolStatus::ToolError || result.error_message != *want).then(
            || {
                format!(
                    "got {status} {:?}, expected TOOL_ERROR {want:?}",
                    result.error_message
                )
            },
        );
    }
    if let Some(want) = &example.status {
        return (status != want)
            .then(|| format!("got {status}, expected {want}: {}", shown(result)));
    }
    None
}

fn shown(result: &ToolResult) -> String {
    if result.status == ToolStatus::Ok {
        result.content.clone()
    } else {
        result.error_message.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_the_imports_of_a_module_and_a_component() {
        let module = wat::parse_str(
            r#"(module (import "wasi_snapshot_preview1" "fd_write"
                 (func (param i32 i32 i32 i32) (result i32))) (import "env" "abort" (func)))"#,
        )
        .expect("wat");
        assert_eq!(
            imports(&module).expect("parses"),
            ["wasi_snapshot_preview1::fd_write", "env::abort"]
        );
        let component = wat::parse_str(
            r#"(component (import "wasi:http/types@0.2.0" (instance))
                 (import "context" (type (sub resource)))
                 (core module $m (import "x" "y" (func))))"#,
        )
        .expect("wat");
        assert_eq!(
            imports(&component).expect("parses"),
            ["wasi:http/types@0.2.0"]
        );
    }

    /// A module that writes `{"ok":1}` and exits.
    const ANSWERS_ONE: &str = r#"(module
        (import "wasi_snapshot_preview1" "fd_write"
          (func $write (param i32 i32 i32 i32) (result i32)))
        (memory (export "memory") 1)
        (data (i32.const 16) "{\"ok\":1}")
        (func (export "_start")
          (i32.store (i32.const 0) (i32.const 16))
          (i32.store (i32.const 4) (i32.const 8))
          (drop (call $write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))))"#;

    /// A tool folder `t` with `wat` as its module, `extra` appended to its manifest and
    /// `examples` as its examples file (none when empty); returns the report and verdict.
    fn check(wat: &str, extra: &str, examples: &str) -> (String, bool) {
        let dir = tempfile::tempdir().expect("tempdir");
        let tool = dir.path().join("t");
        std::fs::create_dir(&tool).expect("mkdir");
        std::fs::write(tool.join("t.wasm"), wat::parse_str(wat).expect("wat")).expect("write");
        std::fs::write(
            tool.join("tool.toml"),
            format!(
                "name = \"t\"\nversion = \"1\"\ndescription = \"d\"\nrisk = \"read_only\"\n\
                 engine = \"wasm\"\nmodule = \"t.wasm\"\nprofile = \"strict\"\n\
                 input_schema = {{ type = \"object\" }}\n{extra}"
            ),
        )
        .expect("write");
        if !examples.is_empty() {
            std::fs::write(tool.join(EXAMPLES_FILE), examples).expect("write");
        }
        let options = CheckOptions {
            tool,
            profiles_dir: Path::new(env!("CARGO_MANIFEST_DIR")).join("../sandbox-profiles"),
            cache_dir: dir.path().join("cache"),
            state_dir: dir.path().join("state"),
            workspace: None,
            arguments: None,
            listing_out: None,
        };
        let mut out = Vec::new();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let passed = runtime
            .block_on(check_tool(&options, &mut out))
            .expect("checked");
        (String::from_utf8(out).expect("UTF-8"), passed)
    }

    #[test]
    fn a_tool_that_loads_and_answers_its_examples_passes() {
        let examples = r#"{"examples": [{"name": "one", "arguments": {}, "ok": 1}]}"#;
        let (report, passed) = check(ANSWERS_ONE, "", examples);
        assert!(passed, "{report}");
        assert!(
            report.contains("✓ loads as a WASI preview 1 module"),
            "{report}"
        );
        assert!(report.contains("✓ example `one`: OK"), "{report}");
        assert!(report.contains("not pinned"), "{report}");
    }

    #[test]
    fn a_wrong_answer_fails_naming_both_values() {
        let examples = r#"{"examples": [{"name": "two", "arguments": {}, "ok": 2}]}"#;
        let (report, passed) = check(ANSWERS_ONE, "", examples);
        assert!(!passed, "{report}");
        assert!(
            report.contains("✗ example `two`: got 1, expected 2"),
            "{report}"
        );
    }

    #[test]
    fn a_stale_pin_fails_and_says_how_to_repin() {
        let stale = "0".repeat(64);
        let (report, passed) = check(ANSWERS_ONE, &format!("sha256 = \"{stale}\"\n"), "");
        assert!(!passed, "{report}");
        assert!(
            report.contains(&format!("pins sha256 {stale}"))
                && report.contains("airlock tools digest --write"),
            "{report}"
        );
        assert!(report.contains("✗ refused"), "{report}");
    }

    #[test]
    fn an_import_outside_wasi_is_named_and_the_tool_refused() {
        let wat = r#"(module (import "env" "abort" (func))
                       (memory (export "memory") 1) (func (export "_start")))"#;
        let (report, passed) = check(wat, "", "");
        assert!(!passed, "{report}");
        assert!(
            report.contains("✗ import env::abort: not linked"),
            "{report}"
        );
    }

    #[test]
    fn a_module_needing_threads_is_refused_naming_the_feature() {
        let wat = r#"(module (memory (export "memory") 1 1 shared) (func (export "_start")))"#;
        let (report, passed) = check(wat, "", "");
        assert!(!passed, "{report}");
        assert!(
            report.contains("needs WebAssembly features airlockd does not enable: threads"),
            "{report}"
        );
    }

    #[test]
    fn a_broken_manifest_or_examples_file_is_named() {
        let (report, passed) = check(ANSWERS_ONE, "colour = \"red\"\n", "");
        assert!(!passed && report.contains("✗ manifest"), "{report}");
        let (report, passed) = check(ANSWERS_ONE, "", "{\"examples\": 3}");
        assert!(!passed && report.contains("examples.json"), "{report}");
    }
}
