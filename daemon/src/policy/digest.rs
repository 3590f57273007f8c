//! Digests that bind an approval to exactly one call. Arguments are hashed in canonical form
//! (keys sorted, no whitespace), so two spellings of the same arguments bind alike and any
//! other arguments do not.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// What an approval answers: this run, step and call, this tool with these arguments, under
/// this profile and policy.
pub struct Binding<'a> {
    pub run_id: &'a str,
    pub step_id: &'a str,
    pub call_id: &'a str,
    pub tool: &'a str,
    /// The tool's module or program digest: a changed tool is a different call.
    pub tool_digest: &'a str,
    pub arguments: &'a Value,
    pub profile: &'a str,
    pub policy: &'a str,
}

pub fn binding_digest(binding: &Binding<'_>) -> String {
    sha256_of(&json!({
        "run": binding.run_id,
        "step": binding.step_id,
        "call": binding.call_id,
        "tool": binding.tool,
        "tool_digest": binding.tool_digest,
        "arguments": binding.arguments,
        "profile": binding.profile,
        "policy": binding.policy,
    }))
}

/// What an approval of a connection answers: the call of `binding`, connecting to exactly
/// `host:port`.
pub fn connect_digest(binding: &Binding<'_>, host: &str, port: u16) -> String {
    sha256_of(&json!({
        "call": binding_digest(binding),
        "connect": {"host": host, "port": port},
    }))
}

/// The key of an "approve for the session" grant: the same tool with the same arguments
/// under the same profile, anywhere in the session.
pub fn session_grant_key(
    session_id: &str,
    tool: &str,
    tool_digest: &str,
    arguments: &Value,
    profile: &str,
) -> String {
    sha256_of(&json!({
        "session": session_id,
        "tool": tool,
        "tool_digest": tool_digest,
        "arguments": arguments,
        "profile": profile,
    }))
}

/// The key of a grant of every command starting with `prefix`, in `tool`, for the session.
pub fn prefix_grant_key(session_id: &str, tool: &str, prefix: &[String]) -> String {
    sha256_of(&json!({
        "session": session_id,
        "tool": tool,
        "prefix": prefix,
    }))
}

/// sha256 of `value` in canonical form, lowercase hex.
pub fn sha256_of(value: &Value) -> String {
    // serde_json's maps are ordered by key, so `to_string` is canonical.
    hex::encode(Sha256::digest(value.to_string().as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding<'a>(arguments: &'a Value, call_id: &'a str) -> Binding<'a> {
        Binding {
            run_id: "run_1",
            step_id: "stp_1",
            call_id,
            tool: "write_file",
            tool_digest: "abc",
            arguments,
            profile: "workspace-write",
            policy: "risky",
        }
    }

    #[test]
    fn the_same_call_binds_alike_whatever_its_key_order() {
        let a: Value = serde_json::from_str(r#"{"path": "a", "content": "x"}"#).expect("json");
        let b: Value = serde_json::from_str(r#"{"content":"x","path":"a"}"#).expect("json");
        assert_eq!(
            binding_digest(&binding(&a, "c1")),
            binding_digest(&binding(&b, "c1"))
        );
    }

    #[test]
    fn any_difference_changes_the_digest() {
        let a = json!({"path": "a", "content": "x"});
        let other_args = json!({"path": "a", "content": "y"});
        let base = binding_digest(&binding(&a, "c1"));
        assert_ne!(base, binding_digest(&binding(&other_args, "c1")));
        assert_ne!(base, binding_digest(&binding(&a, "c2")));
        assert_ne!(
            session_grant_key("s1", "t", "d", &a, "p"),
            session_grant_key("s2", "t", "d", &a, "p")
        );
    }
}
