//! Trust in a hosted server's tools, bound to what they say they are rather than to their
//! names.
//!
//! Each tool a server lists is digested over its name, description, input schema and
//! annotations: what a model reads and what decides how the tool is called. A tool is
//! callable only while its digest is the trusted one — pinned in the manifest
//! (`[mcp.tools.NAME] sha256`), or else recorded from the server's first listing. A later
//! listing that changes a tool or adds one (a "rug pull": a harmless description at review
//! time, an injected one later) has those tools refused, with the reason, until an operator
//! accepts the listing with `airlock tools trust SERVER`, which marks what the daemon last
//! saw as trusted.
//!
//! The record is a small JSON file per server in the state dir, written whole by rename:
//! `trusted` (tool → digest) and `seen` (the latest listing). Each store keeps the record it
//! last read: a call whose listing is the one already seen costs no file access; the file is
//! read again only after `airlock tools trust` changed some record (a process-wide
//! generation, bumped by [`accept_seen`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// Where trust records live, in the state dir.
pub const TRUST_DIR: &str = "mcp-trust";

/// A record is a digest per tool; a server with thousands of tools is not one to trust.
const MAX_RECORD_BYTES: u64 = 1 << 20;

/// Bumped whenever an operator accepts a listing: stores then read their record again.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The digest airlock trusts a listed tool by.
pub fn tool_digest(tool: &rmcp::model::Tool) -> String {
    crate::policy::sha256_of(&serde_json::json!({
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.input_schema.as_ref(),
        "annotations": tool.annotations,
    }))
}

#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub trusted: BTreeMap<String, String>,
    pub seen: BTreeMap<String, String>,
}

/// Why a listed tool may not be called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Distrust {
    /// Its digest differs from the one the manifest pins.
    Unpinned { pinned: String, listed: String },
    /// Its digest differs from the trusted one.
    Changed { trusted: String, listed: String },
    /// It was not in the trusted listing.
    New,
}

impl Distrust {
    pub fn explain(&self, server: &str, tool: &str) -> String {
        match self {
            Distrust::Unpinned { pinned, listed } => format!(
                "tool `{tool}` of MCP server `{server}` lists as {listed}, but its manifest pins {pinned}; refusing a changed tool (update the pin after reviewing it)"
            ),
            Distrust::Changed { trusted, listed } => format!(
                "tool `{tool}` of MCP server `{server}` changed since it was trusted (its name, description, schema or annotations: {trusted} → {listed}); refusing it until an operator runs `airlock tools trust {server}`"
            ),
            Distrust::New => format!(
                "tool `{tool}` of MCP server `{server}` was not in the listing airlock trusted; refusing it until an operator runs `airlock tools trust {server}`"
            ),
        }
    }
}

/// The trust record of one server.
#[derive(Debug)]
pub struct TrustStore {
    path: PathBuf,
    pins: BTreeMap<String, String>,
    /// The record as last read or written, and the generation it was read at.
    cached: Mutex<Option<(u64, Record)>>,
}

impl TrustStore {
    pub fn new(state_dir: &Path, server: &str, pins: BTreeMap<String, String>) -> TrustStore {
        TrustStore {
            path: record_path(state_dir, server),
            pins,
            cached: Mutex::new(None),
        }
    }

    /// Checks a listing (tool → digest) against what is trusted, and records it as seen. A
    /// server with no record yet has this listing recorded as trusted. Returns the tools
    /// that may not be called, with why.
    pub fn check(
        &self,
        listing: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, Distrust>, String> {
        let generation = GENERATION.load(Ordering::SeqCst);
        let mut cached = self
            .cached
            .lock()
            .map_err(|_| "the trust record's cache is poisoned".to_owned())?;
        let fresh = cached
            .as_ref()
            .is_some_and(|(read_at, record)| *read_at == generation && record.seen == *listing);
        if !fresh {
            let mut record = match read(&self.path)? {
                Some(record) => record,
                None => Record {
                    trusted: listing.clone(),
                    seen: BTreeMap::new(),
                },
            };
            if record.seen != *listing || !self.path.exists() {
                record.seen = listing.clone();
                write(&self.path, &record)?;
            }
            *cached = Some((generation, record));
        }
        let Some((_, record)) = cached.as_ref() else {
            return Err("the trust record was not read".into());
        };
        let mut refused = BTreeMap::new();
        for (tool, listed) in listing {
            let verdict = if let Some(pinned) = self.pins.get(tool) {
                (pinned != listed).then(|| Distrust::Unpinned {
                    pinned: pinned.clone(),
                    listed: listed.clone(),
                })
            } else {
                match record.trusted.get(tool) {
                    Some(trusted) if trusted == listed => None,
                    Some(trusted) => Some(Distrust::Changed {
                        trusted: trusted.clone(),
                        listed: listed.clone(),
                    }),
                    None => Some(Distrust::New),
                }
            };
            if let Some(verdict) = verdict {
                refused.insert(tool.clone(), verdict);
            }
        }
        Ok(refused)
    }
}

fn record_path(state_dir: &Path, server: &str) -> PathBuf {
    state_dir.join(TRUST_DIR).join(format!("{server}.json"))
}

fn read(path: &Path) -> Result<Option<Record>, String> {
    let text = match std::fs::metadata(path) {
        Ok(metadata) if metadata.len() > MAX_RECORD_BYTES => {
            return Err(format!(
                "{} is larger than {MAX_RECORD_BYTES} bytes",
                path.display()
            ));
        }
        Ok(_) => std::fs::read_to_string(path)
            .map_err(|err| format!("cannot read {}: {err}", path.display()))?,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(format!("cannot read {}: {err}", path.display())),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|err| format!("{} is not a trust record: {err}", path.display()))
}

fn write(path: &Path, record: &Record) -> Result<(), String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    let text = serde_json::to_string_pretty(record)
        .map_err(|err| format!("cannot encode the trust record: {err}"))?;
    let temp = path.with_extension("json.tmp");
    std::fs::write(&temp, text)
        .and_then(|()| std::fs::rename(&temp, path))
        .map_err(|err| format!("cannot write {}: {err}", path.display()))
}

/// Whether the daemon has a trust record for `server`, a manifest name (anything else, a
/// path included, has none).
pub fn is_recorded(state_dir: &Path, server: &str) -> bool {
    let manifest_name = server
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    !server.is_empty() && manifest_name && record_path(state_dir, server).is_file()
}

/// What `airlock tools trust SERVER` does: marks the listing the daemon last saw as trusted.
/// Returns the tools whose trust changed.
pub fn accept_seen(state_dir: &Path, server: &str) -> Result<Vec<String>, String> {
    let path = record_path(state_dir, server);
    let mut record = read(&path)?.ok_or_else(|| {
        format!(
            "no MCP server `{server}` has been listed by the daemon with state dir {}",
            state_dir.display()
        )
    })?;
    let changed: Vec<String> = record
        .seen
        .iter()
        .filter(|(tool, digest)| record.trusted.get(*tool) != Some(*digest))
        .map(|(tool, _)| tool.clone())
        .collect();
    record.trusted = record.seen.clone();
    write(&path, &record)?;
    GENERATION.fetch_add(1, Ordering::SeqCst);
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(tool, digest)| ((*tool).to_owned(), (*digest).to_owned()))
            .collect()
    }

    #[test]
    fn the_first_listing_is_trusted_and_later_changes_wait_for_an_operator() {
        let state = tempfile::tempdir().expect("tempdir");
        let store = TrustStore::new(state.path(), "srv", BTreeMap::new());
        let first = listing(&[("a", "1"), ("b", "2")]);
        assert!(store.check(&first).expect("check").is_empty());
        assert!(store.check(&first).expect("again").is_empty());

        let pulled = listing(&[("a", "1"), ("b", "3"), ("c", "4")]);
        let refused = store.check(&pulled).expect("check");
        assert_eq!(
            refused.get("b"),
            Some(&Distrust::Changed {
                trusted: "2".into(),
                listed: "3".into()
            })
        );
        assert_eq!(refused.get("c"), Some(&Distrust::New));
        assert!(!refused.contains_key("a"));
        assert!(
            refused["b"]
                .explain("srv", "b")
                .contains("airlock tools trust srv")
        );

        let accepted = accept_seen(state.path(), "srv").expect("accept");
        assert_eq!(accepted, ["b", "c"]);
        assert!(store.check(&pulled).expect("trusted now").is_empty());
        assert!(accept_seen(state.path(), "other").is_err());
        assert!(is_recorded(state.path(), "srv"));
        assert!(!is_recorded(state.path(), "../srv"));
        assert!(!is_recorded(state.path(), "other"));
    }

    #[test]
    fn a_pin_wins_over_the_record() {
        let state = tempfile::tempdir().expect("tempdir");
        let pins = listing(&[("a", "pinned")]);
        let store = TrustStore::new(state.path(), "srv", pins);
        let refused = store.check(&listing(&[("a", "1")])).expect("check");
        assert!(matches!(refused.get("a"), Some(Distrust::Unpinned { .. })));
        assert!(
            store
                .check(&listing(&[("a", "pinned")]))
                .expect("check")
                .is_empty()
        );
    }
}
