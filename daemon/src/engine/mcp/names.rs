//! The names hosted tools are served under: `<server>__<tool>`, or, for a server whose
//! manifest says `names = "bare"`, the tool's own name — valid for every model provider
//! (`[a-zA-Z0-9_-]{1,64}`) either way. A bare name that clashes with another tool's is
//! refused like any clash of names (the registry keeps names unique).
//!
//! A server's tool names are the server's choice and may hold anything: characters outside
//! the set become `_`, and a name that is too long, or that was changed at all, ends in
//! eight hex digits of the sha256 of the original, so two tools never share a served name
//! and the served name maps back to exactly one tool (the engine keeps that map).

use sha2::{Digest as _, Sha256};

/// What every model provider accepts as a function name.
const MAX_NAME_LEN: usize = 64;

/// Between the server's name and the tool's.
const SEPARATOR: &str = "__";

/// Hex digits of the original name's digest kept when a name had to change.
const SUFFIX_HEX: usize = 8;

/// The name `tool` of `server` is served under. `server` is a manifest name, already
/// `[a-z][a-z0-9_]*` and at most 64 bytes.
pub fn served_name(server: &str, tool: &str) -> String {
    named(&format!("{server}{SEPARATOR}"), tool)
}

/// The name `tool` is served under without its server's: its own when valid and free of
/// the separator, so that it never reads as another server's prefixed name
/// (`github__delete_repo`).
pub fn bare_name(tool: &str) -> String {
    named("", tool)
}

/// `tool`'s name after `prefix`, made valid and distinct; after no prefix, without `__`.
fn named(prefix: &str, tool: &str) -> String {
    let cleaned: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let cleaned = if prefix.is_empty() {
        collapse_separators(&cleaned)
    } else {
        cleaned
    };
    let plain = format!("{prefix}{cleaned}");
    if cleaned == tool && !tool.is_empty() && plain.len() <= MAX_NAME_LEN {
        return plain;
    }
    let digest = hex::encode(Sha256::digest(tool.as_bytes()));
    let suffix = &digest[..SUFFIX_HEX];
    // `<prefix><head>_<suffix>`, cut so that the whole fits.
    let room = MAX_NAME_LEN.saturating_sub(prefix.len() + 1 + SUFFIX_HEX);
    let head: String = cleaned.chars().take(room).collect();
    let name = format!("{prefix}{head}_{suffix}");
    name.chars().take(MAX_NAME_LEN).collect()
}

/// `name` with every run of underscores that holds the separator made one underscore.
fn collapse_separators(name: &str) -> String {
    let mut collapsed = String::with_capacity(name.len());
    for c in name.chars() {
        if c == '_' && collapsed.ends_with('_') {
            continue;
        }
        collapsed.push(c);
    }
    collapsed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= MAX_NAME_LEN
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }

    #[test]
    fn plain_names_are_kept_and_others_made_valid_and_distinct() {
        assert_eq!(served_name("everything", "echo"), "everything__echo");
        assert_eq!(served_name("gh", "get-issue"), "gh__get-issue");
        let long = "a".repeat(80);
        let dotted = served_name("files", "read.file");
        let spaced = served_name("files", "read file");
        for name in [served_name("srv", &long), dotted.clone(), spaced.clone()] {
            assert!(valid(&name), "{name}");
        }
        assert_ne!(dotted, spaced, "the digest keeps them apart");
        assert_ne!(served_name("files", "read_file"), dotted);
        assert_ne!(
            served_name("srv", &long),
            served_name("srv", &"a".repeat(81))
        );
        assert!(valid(&served_name(&"s".repeat(64), "t")));
        assert!(valid(&served_name("srv", "")));
        assert!(valid(&served_name("srv", "日本語")));
        assert_eq!(bare_name("test_elicitation"), "test_elicitation");
        for name in [bare_name(""), bare_name("read.file"), bare_name(&long)] {
            assert!(valid(&name), "{name}");
        }
        assert_ne!(bare_name("read.file"), bare_name("read_file"));
        // Never another server's prefixed name, and still distinct.
        let posing = bare_name("github__delete_repo");
        assert!(!posing.contains("__") && valid(&posing), "{posing}");
        assert_ne!(posing, bare_name("github_delete_repo"));
        assert_eq!(bare_name("github_delete_repo"), "github_delete_repo");
    }
}
