//! The suite file as written (and a variant file, which is a `defaults` block of its own):
//! the serde shapes, every one refusing fields it does not know so that a misspelt setting is
//! an error rather than silently ignored. Checking and resolving them is `suite`'s business.

use std::collections::BTreeMap;
use std::path::PathBuf;

use airlock_client::proto::{ApprovalPolicy, Budgets};
use serde::Deserialize;

use super::super::approver::Approver;
use super::super::grader::GraderSpec;
use super::super::price::Price;
use crate::model::ModelSpec;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteSpec {
    pub suite: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub defaults: SettingsSpec,
    #[serde(default)]
    pub prices: BTreeMap<String, Price>,
    #[serde(default)]
    pub thresholds: ThresholdsSpec,
    pub tasks: Vec<TaskSpec>,
}

/// The settings of a task's runs; each left out comes from the layer below (a task's from
/// `defaults`, a variant's from the task).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsSpec {
    pub model: Option<ModelSpec>,
    pub policy: Option<PolicySpec>,
    pub budgets: Option<BudgetsSpec>,
    pub approver: Option<Approver>,
    pub repeats: Option<u32>,
    pub tools: Option<Vec<String>>,
    pub instructions: Option<String>,
    pub stop_on_denial: Option<bool>,
    pub timeout_s: Option<u64>,
}

/// A task: its own fields, then the settings it may set for itself (spelt out rather than
/// flattened, which serde cannot combine with refusing unknown fields).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    pub id: String,
    pub input: String,
    pub workspace: Option<PathBuf>,
    pub graders: Vec<GraderSpec>,
    pub model: Option<ModelSpec>,
    pub policy: Option<PolicySpec>,
    pub budgets: Option<BudgetsSpec>,
    pub approver: Option<Approver>,
    pub repeats: Option<u32>,
    pub tools: Option<Vec<String>>,
    pub instructions: Option<String>,
    pub stop_on_denial: Option<bool>,
    pub timeout_s: Option<u64>,
}

impl TaskSpec {
    /// The task's own settings, apart from the rest of it.
    pub fn settings(&mut self) -> SettingsSpec {
        SettingsSpec {
            model: self.model.take(),
            policy: self.policy.take(),
            budgets: self.budgets.take(),
            approver: self.approver.take(),
            repeats: self.repeats.take(),
            tools: self.tools.take(),
            instructions: self.instructions.take(),
            stop_on_denial: self.stop_on_denial.take(),
            timeout_s: self.timeout_s.take(),
        }
    }
}

/// The CLI's `--policy` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicySpec {
    Always,
    Risky,
    Never,
    Auto,
}

impl From<PolicySpec> for ApprovalPolicy {
    fn from(policy: PolicySpec) -> Self {
        match policy {
            PolicySpec::Always => ApprovalPolicy::Always,
            PolicySpec::Risky => ApprovalPolicy::Risky,
            PolicySpec::Never => ApprovalPolicy::Never,
            PolicySpec::Auto => ApprovalPolicy::Auto,
        }
    }
}

/// The API's `Budgets`, field for field; a field left out comes from the layer below, and
/// one left out everywhere is the daemon's default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetsSpec {
    pub max_steps: Option<u32>,
    pub max_tokens: Option<u64>,
    pub max_wall_time_ms: Option<u64>,
    pub max_tool_calls: Option<u32>,
    pub max_repeated_errors: Option<u32>,
    pub context_tokens: Option<u64>,
    pub max_repeated_calls: Option<u32>,
    pub max_idle_steps: Option<u32>,
}

impl BudgetsSpec {
    /// These budgets over `below`: each field set here wins.
    pub fn over(&self, below: &BudgetsSpec) -> BudgetsSpec {
        BudgetsSpec {
            max_steps: self.max_steps.or(below.max_steps),
            max_tokens: self.max_tokens.or(below.max_tokens),
            max_wall_time_ms: self.max_wall_time_ms.or(below.max_wall_time_ms),
            max_tool_calls: self.max_tool_calls.or(below.max_tool_calls),
            max_repeated_errors: self.max_repeated_errors.or(below.max_repeated_errors),
            context_tokens: self.context_tokens.or(below.context_tokens),
            max_repeated_calls: self.max_repeated_calls.or(below.max_repeated_calls),
            max_idle_steps: self.max_idle_steps.or(below.max_idle_steps),
        }
    }

    pub fn budgets(&self) -> Budgets {
        Budgets {
            max_steps: self.max_steps.unwrap_or(0),
            max_tokens: self.max_tokens.unwrap_or(0),
            max_wall_time_ms: self.max_wall_time_ms.unwrap_or(0),
            max_tool_calls: self.max_tool_calls.unwrap_or(0),
            max_repeated_errors: self.max_repeated_errors.unwrap_or(0),
            context_tokens: self.context_tokens.unwrap_or(0),
            max_repeated_calls: self.max_repeated_calls.unwrap_or(0),
            max_idle_steps: self.max_idle_steps.unwrap_or(0),
        }
    }
}

/// What the whole suite must reach; a threshold missed fails the eval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ThresholdsSpec {
    /// The pass rate over every attempt, 0 to 1. Without it, every attempt must pass.
    pub pass_rate: Option<f64>,
    /// The cost of every attempt together, in USD.
    pub max_cost_usd: Option<f64>,
}
