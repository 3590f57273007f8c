//! `tool.toml` parsing: the input is a manifest, loaded through [`Manifest::load`] from a file
//! (the daemon's only entry point) and, when it loads, compiled into an [`ArgumentSchema`] as
//! the registry does. The directory holds a `schema.json` so that manifests naming one reach
//! the schema-file path too.
//!
//! Beyond "no panic", a loaded manifest must keep the invariants the rest of the daemon relies
//! on without re-checking them.

#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use airlock_daemon::testing::{ArgumentSchema, Code, Manifest};
use libfuzzer_sys::fuzz_target;

/// The manifest loader caps files at 64 KiB; longer inputs only exercise the cap.
const MAX_INPUT: usize = 64 * 1024;

/// The schema a fuzzed manifest's `input_schema = "schema.json"` finds: a real plugin's.
const SCHEMA: &str = include_str!("../../plugins/read_file/schema.json");

/// A private directory per fuzzing process (libFuzzer's `-fork`/`-jobs` run several).
fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir =
            std::env::temp_dir().join(format!("airlock-fuzz-manifest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("the temp dir is writable");
        std::fs::write(dir.join("schema.json"), SCHEMA).expect("the temp dir is writable");
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    if data.len() > MAX_INPUT {
        return;
    }
    let path = scratch().join("tool.toml");
    std::fs::write(&path, data).expect("the temp dir is writable");
    let Ok(manifest) = Manifest::load(&path) else {
        return;
    };
    let name = manifest.name().as_bytes();
    assert!(
        !name.is_empty() && name.len() <= 64,
        "name length: {:?}",
        manifest.name()
    );
    assert!(
        name[0].is_ascii_lowercase(),
        "name start: {:?}",
        manifest.name()
    );
    assert!(
        name.iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_'),
        "name characters: {:?}",
        manifest.name()
    );
    assert!(
        manifest.timeout > Duration::ZERO && manifest.timeout <= Duration::from_secs(3600),
        "timeout: {:?}",
        manifest.timeout
    );
    assert!(manifest.output.max_bytes > 0);
    if let Some(digest) = &manifest.image.sha256 {
        assert!(
            digest.len() == 64
                && digest
                    .bytes()
                    .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
            "sha256: {digest:?}"
        );
    }
    match &manifest.image.code {
        Code::Module(module) => assert!(!module.as_os_str().is_empty()),
        Code::Command { argv, .. } => assert!(!argv.is_empty() && !argv[0].is_empty()),
    }
    assert_eq!(
        manifest.input_schema().get("type").and_then(|t| t.as_str()),
        Some("object")
    );
    // What the registry does next; a schema it cannot compile is a refused tool, not a crash.
    let _ = ArgumentSchema::compile(manifest.input_schema().clone());
});
