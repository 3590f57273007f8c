//! Section 13, the permission gate: what a decision costs in the loop's gate stage. The gate
//! as it was before rules (the session's level applied to the tool's risk) is the peer; the
//! rules' decision for a `run_command` line of ten simple commands — parsed by the shell
//! parser, each command matched — is measured against the shipped example policy and against
//! 1,000 rules, with the parse alone beside it. In this process: no daemon, no gRPC.
//!
//! The 1,000 rules are spread over the programs the line runs and fifty others, twenty per
//! program, so that each command of the line meets the rules an index cannot skip: the cost
//! measured is the matching, not a lookup that finds nothing.

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_daemon::testing::{
    ApprovalPolicy, Decision, Hosts, Layer, Policy, PolicyCall, Risk, RuleSet, level_gate,
    parse_line, parse_rules,
};
use serde_json::json;

use crate::Bench;
use crate::report::{Check, Report};
use crate::stats::Samples;

const SECTION: &str = "13 policy";

/// Ten simple commands in lists, a pipeline and a subshell: what a coding agent sends.
pub const LINE: &str = "cargo fmt && cargo clippy -q && cargo test --workspace 2>&1 | tail -20; \
     git status --short && git diff --stat && (cd src && grep -rn TODO . | head -n 20 | wc -l)";

/// The programs of [`LINE`], each given twenty of the 1,000 rules.
const PROGRAMS: &[&str] = &["cargo", "tail", "git", "cd", "grep", "head", "wc"];

/// 1,000 rules: those naming the line's programs allow what it runs (the decision must look
/// at all of them), the rest are about other programs and other tools.
fn thousand_rules() -> String {
    let mut text = String::new();
    for index in 0..1000 {
        let (program, decision) = match index % 50 {
            slot if slot < PROGRAMS.len() => (PROGRAMS[slot].to_owned(), "allow"),
            slot => (format!("tool{slot}"), ["allow", "ask", "deny"][index % 3]),
        };
        // Each program's first rule allows it outright; its others name subcommands it does
        // not run, so they are met and rejected word by word.
        let command = if index < 50 {
            format!("[\"{program}\"]")
        } else {
            format!("[\"{program}\", \"sub{index}\", [\"a\", \"b\"]]")
        };
        text.push_str(&format!(
            "[[rule]]\nname = \"rule {index}\"\ndecision = \"{decision}\"\ncommand = {command}\n\n"
        ));
        if index % 10 == 0 {
            text.push_str(&format!(
                "[[rule]]\nname = \"args {index}\"\ndecision = \"ask\"\ntool = \"write_file\"\nargs = [{{ pointer = \"/path\", glob = \"gen{index}/**\" }}]\n\n"
            ));
        }
    }
    text
}

fn policy_of(text: &str, source: &str) -> anyhow::Result<Policy> {
    let rules = parse_rules(text, source, Layer::Operator).map_err(anyhow::Error::msg)?;
    Ok(Policy::new(vec![Arc::new(RuleSet::new(rules))]))
}

/// Times `decide` `count` times, one sample each.
fn time(count: usize, mut decide: impl FnMut() -> Decision) -> Samples {
    let mut latencies = Vec::with_capacity(count);
    // Warmed up first: the first calls fill caches the rest find full.
    for _ in 0..count / 10 {
        black_box(decide());
    }
    for _ in 0..count {
        let started = Instant::now();
        black_box(decide());
        latencies.push(started.elapsed());
    }
    Samples::sequential(latencies)
}

pub async fn run(bench: &Bench, report: &mut Report) -> anyhow::Result<()> {
    let count = bench.count(20_000, 50);
    let example = std::fs::read_to_string(
        bench
            .fixtures
            .repo
            .join("examples/policy/coding-agent.toml"),
    )?;
    let team = policy_of(&example, "coding-agent.toml")?;
    let thousand = policy_of(&thousand_rules(), "thousand.toml")?;
    anyhow::ensure!(
        thousand
            .layers()
            .iter()
            .map(|layer| layer.rules().len())
            .sum::<usize>()
            >= 1000,
        "the 1,000-rule policy has fewer rules"
    );
    let arguments = json!({"command": LINE, "workdir": "."});
    let hosts = Hosts::default();
    let decide = |policy: &Policy| {
        let line = parse_line(LINE);
        policy
            .decide(
                &PolicyCall {
                    tool: "run_command",
                    risk: Risk::Exec,
                    engine: "process",
                    arguments: &arguments,
                    workspace: None::<&Path>,
                    command: Some(&line),
                    hosts: &hosts,
                    grant_key: "",
                },
                ApprovalPolicy::Risky,
                &RuleSet::default(),
            )
            .decision
    };
    let parsed = parse_line(LINE);
    anyhow::ensure!(
        parsed.commands.len() == 10 && parsed.unresolved.is_empty(),
        "the line should be ten simple commands, read whole: {parsed:?}"
    );
    anyhow::ensure!(
        decide(&thousand) == Decision::Allow && decide(&team) == Decision::Allow,
        "both policies should allow the line"
    );

    eprintln!("{SECTION}: gate decisions in-process");
    report.measured(
        SECTION,
        "level",
        "the gate before rules: the session's level on the tool's risk",
        time(count, || {
            match level_gate(ApprovalPolicy::Risky, Risk::Exec) {
                airlock_daemon::testing::LevelGate::Allow => Decision::Allow,
                _ => Decision::Ask,
            }
        }),
    );
    report.measured(
        SECTION,
        "parse",
        "parse only: a line of 10 simple commands",
        time(count, || {
            black_box(parse_line(LINE));
            Decision::Allow
        }),
    );
    let team_rules: usize = team.layers().iter().map(|layer| layer.rules().len()).sum();
    report.measured(
        SECTION,
        "team",
        &format!("parse + decide: 10 commands, the shipped example policy ({team_rules} rules)"),
        time(count, || decide(&team)),
    );
    report.measured(
        SECTION,
        "thousand",
        "parse + decide: 10 commands against 1,000 rules",
        time(count, || decide(&thousand)),
    );
    report.compare("team", "level");
    report.compare("thousand", "level");
    report.target(
        "a 10-command line against 1,000 rules decided in ≤ 50 µs p99",
        Check::TailLatency {
            ours: "thousand".into(),
            max: Duration::from_micros(50),
        },
    );
    Ok(())
}
