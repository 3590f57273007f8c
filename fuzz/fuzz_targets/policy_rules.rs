//! The permission policy's readers of untrusted input: a rule file (as a client sends its
//! session's rules) and a command line (as a model writes it). The input is the rules, a NUL
//! byte, then the line; without a NUL, the line alone against the shipped example policy.
//!
//! For every input: the walk ends within its bounds (no more simple commands than
//! `MAX_COMMANDS`), and the client's rules only narrow — the decision with them is never
//! looser than without them, whatever the line. A panic the walk catches (brush `unwrap`s on
//! some hostile words) is the walk's to turn into a question; one that escapes is a finding.

#![no_main]

use std::sync::{Arc, OnceLock};

use airlock_daemon::testing::{
    ApprovalPolicy, Hosts, Layer, Policy, PolicyCall, Risk, RuleSet, parse_line, parse_rules,
};
use libfuzzer_sys::fuzz_target;

const EXAMPLE: &str = include_str!("../../examples/policy/coding-agent.toml");

fn operator() -> &'static Arc<RuleSet> {
    static RULES: OnceLock<Arc<RuleSet>> = OnceLock::new();
    RULES.get_or_init(|| {
        // Panics the walk catches are expected: silence the hook libfuzzer installs, so that
        // only a panic that escapes (and aborts through libfuzzer's own catch) is reported.
        std::panic::set_hook(Box::new(|_| {}));
        let rules = parse_rules(EXAMPLE, "coding-agent.toml", Layer::Operator)
            .expect("the example policy loads");
        Arc::new(RuleSet::new(rules))
    })
}

fuzz_target!(|data: &[u8]| {
    let operator = operator();
    let (rules, line) = match data.iter().position(|byte| *byte == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (&[][..], data),
    };
    let Ok(line) = std::str::from_utf8(line) else {
        return;
    };
    let parsed = parse_line(line);
    assert!(parsed.commands.len() <= 256, "{} commands", parsed.commands.len());
    let session = std::str::from_utf8(rules)
        .ok()
        .and_then(|text| parse_rules(text, "session", Layer::Session).ok())
        .unwrap_or_default();
    let arguments = serde_json::json!({ "command": line, "workdir": "." });
    let hosts = Hosts::default();
    let call = PolicyCall {
        tool: "run_command",
        risk: Risk::Exec,
        engine: "process",
        arguments: &arguments,
        workspace: None,
        command: Some(&parsed),
        hosts: &hosts,
        grant_key: "",
    };
    for level in [ApprovalPolicy::Auto, ApprovalPolicy::Risky] {
        let alone = Policy::new(vec![operator.clone()]).decide(&call, level, &RuleSet::default());
        let narrowed = Policy::new(vec![operator.clone(), Arc::new(RuleSet::new(session.clone()))])
            .decide(&call, level, &RuleSet::default());
        assert!(
            narrowed.decision >= alone.decision,
            "a client's rules loosened {line:?}: {:?} → {:?}",
            alone.decision,
            narrowed.decision
        );
    }
});
