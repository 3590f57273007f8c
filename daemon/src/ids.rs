//! Identifiers. Each kind has a prefix so an id in a log says what it names; the rest is a
//! random UUID, so ids cannot be guessed or enumerated.

use uuid::Uuid;

fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", Uuid::new_v4().simple())
}

pub fn execution_id() -> String {
    new_id("exe")
}

pub fn session_id() -> String {
    new_id("ses")
}

pub fn run_id() -> String {
    new_id("run")
}

pub fn turn_id() -> String {
    new_id("trn")
}

pub fn step_id() -> String {
    new_id("stp")
}

pub fn call_id() -> String {
    new_id("cal")
}

pub fn checkpoint_id() -> String {
    new_id("ckp")
}

pub fn approval_id() -> String {
    new_id("apr")
}

/// 32 hex digits without a prefix: the form OpenTelemetry gives trace ids.
pub fn trace_id() -> String {
    Uuid::new_v4().simple().to_string()
}

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_and_distinct() {
        let a = execution_id();
        assert!(a.starts_with("exe_"));
        assert_eq!(a.len(), 4 + 32);
        assert_ne!(a, execution_id());
    }
}
