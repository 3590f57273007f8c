//! Identifiers. Each kind has a prefix so an id in a log says what it names; the rest is a
//! random UUID, so ids cannot be guessed or enumerated.

use uuid::Uuid;

fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", Uuid::new_v4().simple())
}

pub fn execution_id() -> String {
    new_id("exe")
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
