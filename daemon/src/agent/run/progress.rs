//! The progress detector: step 8's other question — not "may the run go on?" (the budget's)
//! but "is it getting anywhere?".
//!
//! Repeated errors are the budget's to count; a run can also go round in circles without a
//! single error: the same successful call with the same result again and again, or steps
//! that each read what was already read and change nothing. Both end the run with
//! `NO_PROGRESS`, its detail saying which. A step makes progress when one of its calls
//! changed the workspace or observed something the run had not seen before.
//!
//! Calls and results are remembered by a digest (the first eight bytes of a SHA-256 of tool,
//! arguments and observation), so the state saved in each checkpoint stays small whatever
//! the observations hold, and compares the same after a restart.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What the detector remembers of a run; saved in its checkpoints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgressTracker {
    /// How often each call with its result was observed.
    seen: BTreeMap<u64, u32>,
    /// Steps in a row without progress.
    idle_steps: u32,
    /// Whether the step in progress has made any so far.
    step_progressed: bool,
}

/// Why the run stops: it is going nowhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoProgress(pub String);

impl ProgressTracker {
    /// Counts one call's observation; the same call with the same result `max_repeated`
    /// times stops the run.
    pub fn observe(
        &mut self,
        tool: &str,
        arguments: &str,
        observation: &str,
        changed: bool,
        max_repeated: u32,
    ) -> Result<(), NoProgress> {
        let count = self
            .seen
            .entry(digest(tool, arguments, observation))
            .or_insert(0);
        *count += 1;
        if *count == 1 || changed {
            self.step_progressed = true;
        }
        if *count >= max_repeated && !changed {
            return Err(NoProgress(format!(
                "`{tool}` was called {count} times with the same arguments and got the same \
                 result each time"
            )));
        }
        Ok(())
    }

    /// Ends a step that made calls; `max_idle` steps in a row without progress stop the run.
    pub fn end_step(&mut self, max_idle: u32) -> Result<(), NoProgress> {
        if std::mem::take(&mut self.step_progressed) {
            self.idle_steps = 0;
            return Ok(());
        }
        self.idle_steps += 1;
        if self.idle_steps >= max_idle {
            return Err(NoProgress(format!(
                "{} steps in a row changed nothing and observed nothing new",
                self.idle_steps
            )));
        }
        Ok(())
    }

    /// New input from the user is progress of its own: what was idle may not be any more.
    pub fn user_spoke(&mut self) {
        self.idle_steps = 0;
    }
}

fn digest(tool: &str, arguments: &str, observation: &str) -> u64 {
    let mut hasher = Sha256::new();
    for part in [tool, arguments, observation] {
        // Length-prefixed, so no two different triples hash the same bytes.
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    let bytes = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&bytes[..8]);
    u64::from_le_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_call_with_the_same_result_stops_the_run() {
        let mut tracker = ProgressTracker::default();
        for _ in 0..2 {
            tracker
                .observe("read_file", "{}", "{\"status\":\"OK\"}", false, 3)
                .expect("not yet");
        }
        // Another result of the same call is another observation.
        tracker
            .observe("read_file", "{}", "{\"status\":\"OK\",\"n\":2}", false, 3)
            .expect("new");
        let stop = tracker
            .observe("read_file", "{}", "{\"status\":\"OK\"}", false, 3)
            .expect_err("third time");
        assert!(stop.0.contains("3 times"), "{}", stop.0);
    }

    #[test]
    fn steps_that_see_nothing_new_and_change_nothing_stop_the_run() {
        let mut tracker = ProgressTracker::default();
        tracker.observe("ls", "{}", "a b", false, 100).expect("ok");
        tracker.end_step(2).expect("progress: a new observation");
        tracker.observe("ls", "{}", "a b", false, 100).expect("ok");
        tracker.end_step(2).expect("one idle step");
        tracker.user_spoke();
        tracker.observe("ls", "{}", "a b", false, 100).expect("ok");
        tracker.end_step(2).expect("input reset the count");
        tracker.observe("ls", "{}", "a b", false, 100).expect("ok");
        let stop = tracker.end_step(2).expect_err("two idle steps");
        assert!(stop.0.contains("2 steps"), "{}", stop.0);
    }

    #[test]
    fn a_change_is_progress_even_with_a_result_seen_before() {
        let mut tracker = ProgressTracker::default();
        for _ in 0..5 {
            tracker
                .observe("run_command", "{\"command\":\"make\"}", "OK", true, 2)
                .expect("each run changed the workspace");
            tracker.end_step(1).expect("progress");
        }
    }
}
