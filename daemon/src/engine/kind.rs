//! The kinds of engine, by the name manifests and the config give them. A leaf of its own:
//! the engine contract (`contract.rs`) and the tool image (`image.rs`) both name a kind, and
//! the contract names the image.

use std::fmt;

use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    Wasm,
    Process,
    Mcp,
}

impl EngineKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Wasm => "wasm",
            EngineKind::Process => "process",
            EngineKind::Mcp => "mcp",
        }
    }

    /// The kind [`EngineKind::as_str`] names; none for anything else.
    pub fn parse(text: &str) -> Option<EngineKind> {
        match text {
            "wasm" => Some(EngineKind::Wasm),
            "process" => Some(EngineKind::Process),
            "mcp" => Some(EngineKind::Mcp),
            _ => None,
        }
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
