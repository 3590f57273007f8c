//! The agent runtime's settings: the providers', and the defaults and ceilings of a run's
//! budgets and limits.

use std::time::Duration;

use super::provider::ProviderSettings;

/// Defaults for what a client leaves unset, and ceilings it cannot pass.
#[derive(Debug, Clone, PartialEq)]
pub struct RunDefaults {
    pub max_steps: u32,
    pub wall_time: Duration,
    pub max_tool_calls: u32,
    pub max_repeated_errors: u32,
    pub context_tokens: u64,
    pub max_repeated_calls: u32,
    pub max_idle_steps: u32,
    pub approval_timeout: Duration,
    pub max_output_tokens: u32,
}

impl Default for RunDefaults {
    fn default() -> Self {
        RunDefaults {
            max_steps: 50,
            wall_time: Duration::from_secs(30 * 60),
            max_tool_calls: 200,
            max_repeated_errors: 3,
            context_tokens: 100_000,
            // Five identical answers to the same question are four too many; a model that
            // re-reads a file after an edit gets a different result and is not counted.
            max_repeated_calls: 5,
            // Eight steps in a row that learn and change nothing: long enough for a model
            // that checks a few things before it acts, short enough to stop a spinning one.
            max_idle_steps: 8,
            approval_timeout: Duration::from_secs(5 * 60),
            max_output_tokens: 4096,
        }
    }
}

#[derive(Debug, Clone)]
pub struct AgentSettings {
    pub providers: ProviderSettings,
    pub defaults: RunDefaults,
    /// Whether each model call's wire exchange is kept with its run, the run's cassette
    /// (`GetCassette`). On by default: any run can become an eval case. An operator may
    /// turn it off where the requests are too large to keep twice (they are in the
    /// checkpoints' conversation already) or must not be kept at all.
    pub keep_exchanges: bool,
}

impl Default for AgentSettings {
    fn default() -> Self {
        AgentSettings {
            providers: ProviderSettings::default(),
            defaults: RunDefaults::default(),
            keep_exchanges: true,
        }
    }
}
