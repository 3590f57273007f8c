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

/// The kinds of id a client sends back to the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    Run,
    Session,
    Execution,
    Approval,
}

impl IdKind {
    fn prefix(self) -> &'static str {
        match self {
            IdKind::Run => "run",
            IdKind::Session => "ses",
            IdKind::Execution => "exe",
            IdKind::Approval => "apr",
        }
    }

    /// What an id of this kind names, for messages.
    pub fn noun(self) -> &'static str {
        match self {
            IdKind::Run => "run",
            IdKind::Session => "session",
            IdKind::Execution => "execution",
            IdKind::Approval => "approval",
        }
    }
}

/// Checks that `text` is shaped like an id of `kind` (its prefix, `_`, 32 lowercase hex
/// digits), so that a client's typo is told apart from an id that names nothing.
pub fn check(kind: IdKind, text: &str) -> Result<(), String> {
    let shape = format!("`{}_` and 32 hex digits", kind.prefix());
    if text.is_empty() {
        return Err(format!("required: the id of a {} ({shape})", kind.noun()));
    }
    let valid = text
        .strip_prefix(kind.prefix())
        .and_then(|rest| rest.strip_prefix('_'))
        .is_some_and(|hex| {
            hex.len() == 32
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
    if valid {
        Ok(())
    } else {
        let shown: String = text.chars().take(80).collect();
        Err(format!("`{shown}` is not a {} id ({shape})", kind.noun()))
    }
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

    #[test]
    fn ids_the_daemon_makes_pass_the_check_and_others_do_not() {
        assert_eq!(check(IdKind::Run, &run_id()), Ok(()));
        assert_eq!(check(IdKind::Session, &session_id()), Ok(()));
        assert_eq!(check(IdKind::Execution, &execution_id()), Ok(()));
        assert_eq!(check(IdKind::Approval, &approval_id()), Ok(()));
        assert!(check(IdKind::Run, "").is_err_and(|e| e.starts_with("required")));
        for bad in [
            "run_nope",
            &session_id(),
            "run_0000000000000000000000000000000G",
            "RUN_00000000000000000000000000000000",
            "run_000000000000000000000000000000000",
        ] {
            assert!(check(IdKind::Run, bad).is_err(), "{bad}");
        }
    }
}
