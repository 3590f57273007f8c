//! Checks the hand-written attack modules in `tests/modules/`: each must be a valid module
//! (so that the sandbox refuses it for the attack, never for a typo) with the shape its
//! attack needs.

use std::error::Error;
use std::fs;
use std::path::{Path, PathBuf};

use wasmparser::{Parser, Payload, TypeRef, Validator};

type TestResult = Result<(), Box<dyn Error>>;

fn modules_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../modules")
}

fn module(name: &str) -> Result<Vec<u8>, Box<dyn Error>> {
    Ok(wat::parse_file(modules_dir().join(name))?)
}

/// What a module declares, as far as the attacks care.
#[derive(Default)]
struct Shape {
    imports: Vec<(String, String)>,
    exports: Vec<String>,
    memory_minimum: Option<u64>,
    tables: usize,
    has_start: bool,
}

fn shape(bytes: &[u8]) -> Result<Shape, Box<dyn Error>> {
    let mut shape = Shape::default();
    for payload in Parser::new(0).parse_all(bytes) {
        match payload? {
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    let import = import?;
                    shape
                        .imports
                        .push((import.module.to_owned(), import.name.to_owned()));
                    if let TypeRef::Memory(memory) = import.ty {
                        shape.memory_minimum = Some(memory.initial);
                    }
                }
            }
            Payload::ExportSection(reader) => {
                for export in reader {
                    shape.exports.push(export?.name.to_owned());
                }
            }
            Payload::MemorySection(reader) => {
                for memory in reader {
                    shape.memory_minimum = Some(memory?.initial);
                }
            }
            Payload::TableSection(reader) => shape.tables += reader.count() as usize,
            Payload::StartSection { .. } => shape.has_start = true,
            _ => {}
        }
    }
    Ok(shape)
}

#[test]
fn every_module_is_valid_and_exports_memory_and_start() -> TestResult {
    let mut names = Vec::new();
    for entry in fs::read_dir(modules_dir())? {
        let path = entry?.path();
        if path.extension().is_some_and(|extension| extension == "wat") {
            let bytes = wat::parse_file(&path)?;
            Validator::new()
                .validate_all(&bytes)
                .map_err(|error| format!("{}: {error}", path.display()))?;
            let exports = shape(&bytes)?.exports;
            for wanted in ["memory", "_start"] {
                assert!(
                    exports.iter().any(|export| export == wanted),
                    "{} does not export {wanted}",
                    path.display()
                );
            }
            names.extend(
                path.file_name()
                    .map(|name| name.to_string_lossy().into_owned()),
            );
        }
    }
    names.sort();
    assert_eq!(
        names,
        [
            "bad_import.wat",
            "huge_memory_decl.wat",
            "memory_grow.wat",
            "start_spin.wat",
            "table_grow.wat",
        ]
    );
    Ok(())
}

#[test]
fn start_spin_runs_in_its_start_function() -> TestResult {
    assert!(shape(&module("start_spin.wat")?)?.has_start);
    Ok(())
}

#[test]
fn growers_import_only_wasi_fd_write() -> TestResult {
    for name in ["memory_grow.wat", "table_grow.wat"] {
        let imports = shape(&module(name)?)?.imports;
        assert_eq!(
            imports,
            [("wasi_snapshot_preview1".to_owned(), "fd_write".to_owned())],
            "{name}"
        );
    }
    assert_eq!(shape(&module("table_grow.wat")?)?.tables, 1);
    Ok(())
}

#[test]
fn bad_import_asks_for_a_host_function_nobody_provides() -> TestResult {
    let imports = shape(&module("bad_import.wat")?)?.imports;
    assert_eq!(imports, [("env".to_owned(), "host_secret".to_owned())]);
    Ok(())
}

#[test]
fn huge_memory_decl_declares_sixty_thousand_pages() -> TestResult {
    let memory = shape(&module("huge_memory_decl.wat")?)?.memory_minimum;
    assert_eq!(memory, Some(60_000));
    Ok(())
}
