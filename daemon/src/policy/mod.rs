//! Policy: the permission gate that decides, for each validated tool call, whether it runs,
//! is denied, or waits for an approver — the operator's, session's and run's rules
//! ([`rules`], read per tenant into a [`PolicyBook`]) over the session's level ([`gate`]) —
//! and the approval broker that asks.

mod approvals;
mod book;
mod digest;
pub mod rules;

pub use approvals::{
    ApprovalBroker, Approver, Asked, DecisionError, Outcome, Verdict, answered_detail,
};
pub use book::PolicyBook;
pub use digest::{
    Binding, binding_digest, connect_digest, prefix_grant_key, session_grant_key, sha256_of,
};

use airlock_proto::v1 as pb;

use crate::domain::Risk;

/// Who must agree before a call runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalPolicy {
    /// Ask for every call.
    Always,
    /// Ask for anything but read-only calls.
    Risky,
    /// Ask nobody: what would need asking is denied.
    Never,
    /// Everything the profile allows runs.
    Auto,
}

impl ApprovalPolicy {
    pub fn from_wire(policy: pb::ApprovalPolicy) -> ApprovalPolicy {
        match policy {
            pb::ApprovalPolicy::Unspecified | pb::ApprovalPolicy::Risky => ApprovalPolicy::Risky,
            pb::ApprovalPolicy::Always => ApprovalPolicy::Always,
            pb::ApprovalPolicy::Never => ApprovalPolicy::Never,
            pb::ApprovalPolicy::Auto => ApprovalPolicy::Auto,
        }
    }

    pub fn to_wire(self) -> pb::ApprovalPolicy {
        match self {
            ApprovalPolicy::Always => pb::ApprovalPolicy::Always,
            ApprovalPolicy::Risky => pb::ApprovalPolicy::Risky,
            ApprovalPolicy::Never => pb::ApprovalPolicy::Never,
            ApprovalPolicy::Auto => pb::ApprovalPolicy::Auto,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalPolicy::Always => "always",
            ApprovalPolicy::Risky => "risky",
            ApprovalPolicy::Never => "never",
            ApprovalPolicy::Auto => "auto",
        }
    }

    /// The policies that run no call without asking that this one would not: what a run may
    /// ask for in a session with this policy. `auto` runs everything; `risky` and `never` run
    /// read-only calls (`never` denies what `risky` asks about, so `risky` does not narrow
    /// `never`); `always` runs nothing without asking.
    pub fn narrower(self) -> &'static [ApprovalPolicy] {
        use ApprovalPolicy::{Always, Auto, Never, Risky};
        match self {
            Auto => &[Auto, Risky, Never, Always],
            Risky => &[Risky, Never, Always],
            Never => &[Never],
            Always => &[Always],
        }
    }

    /// Whether this policy is `session` or narrower (see [`ApprovalPolicy::narrower`]).
    pub fn narrows(self, session: ApprovalPolicy) -> bool {
        session.narrower().contains(&self)
    }
}

/// The gate's verdict on one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    Allow,
    /// Put it to an approver; the text says why.
    Ask(String),
    /// Refused without asking; the text says why.
    Deny(String),
}

/// Decides what happens to a call of a tool with `risk` under `policy`. What the call may
/// touch is the profile's business and enforced by the engine either way.
pub fn gate(policy: ApprovalPolicy, risk: Risk) -> Gate {
    let risky = !matches!(risk, Risk::ReadOnly);
    match (policy, risky) {
        (ApprovalPolicy::Auto, _) | (ApprovalPolicy::Risky | ApprovalPolicy::Never, false) => {
            Gate::Allow
        }
        (ApprovalPolicy::Always, _) => Gate::Ask("policy `always` asks for every call".into()),
        (ApprovalPolicy::Risky, true) => {
            Gate::Ask(format!("policy `risky` asks for {} tools", risk.as_str()))
        }
        (ApprovalPolicy::Never, true) => Gate::Deny(format!(
            "policy `never` runs no {} tool without an approval, and this run asks nobody",
            risk.as_str()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_policy_treats_read_only_and_risky_calls_as_documented() {
        let risky = [
            Risk::Write,
            Risk::Network,
            Risk::Install,
            Risk::Exec,
            Risk::Destructive,
        ];
        for risk in risky {
            assert!(matches!(gate(ApprovalPolicy::Always, risk), Gate::Ask(_)));
            assert!(matches!(gate(ApprovalPolicy::Risky, risk), Gate::Ask(_)));
            assert!(matches!(gate(ApprovalPolicy::Never, risk), Gate::Deny(_)));
            assert_eq!(gate(ApprovalPolicy::Auto, risk), Gate::Allow);
        }
        assert!(matches!(
            gate(ApprovalPolicy::Always, Risk::ReadOnly),
            Gate::Ask(_)
        ));
        for policy in [
            ApprovalPolicy::Risky,
            ApprovalPolicy::Never,
            ApprovalPolicy::Auto,
        ] {
            assert_eq!(gate(policy, Risk::ReadOnly), Gate::Allow);
        }
    }

    #[test]
    fn unspecified_means_risky() {
        assert_eq!(
            ApprovalPolicy::from_wire(pb::ApprovalPolicy::Unspecified),
            ApprovalPolicy::Risky
        );
    }
}
