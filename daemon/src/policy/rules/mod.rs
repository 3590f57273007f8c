//! Policy as code: the rules that decide whether a call runs, waits for a person, or is
//! refused — by the tool, its risk and engine, its arguments (paths normalised against the
//! workspace), the hosts it may reach, and, for a tool that runs a command line, every simple
//! command in the line as the shell will run it ([`shell`]).
//!
//! Rules come in layers that only narrow: the operator's, per tenant, from the daemon's
//! configuration; then what a client adds for a session and for a run, which may only ask or
//! deny ([`file::parse`] refuses an `allow` there); then the grants people made ("approve
//! for the session"), which turn a grantable question into an answer and nothing more.
//! Across the layers `deny` wins over `ask` over `allow`; a call (or a command of its line)
//! no rule speaks about is decided by the session's level, as before there were rules; and
//! the level `always` still asks where a rule allows, `never` still refuses where one asks.
//!
//! Every decision says what made it ([`Verdict::judged`]): each command of the line with its
//! decision and the rule (name, layer, file, line) or level behind it. The rule table is
//! airlock's own rather than Cedar's; DESIGN.md ("The rule engine") says why, and this module
//! is the one place that would change were that revisited.

pub mod file;
pub mod matchers;
pub mod shell;

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use self::matchers::{ArgCondition, PrefixMatch, StrMatch, WordPattern};
use self::shell::{CommandLine, SimpleCommand};
use super::{ApprovalPolicy, Gate, gate};
use crate::domain::Risk;

/// What a rule (or the whole policy) says about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Ask,
    Deny,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Deny => "deny",
        }
    }
}

/// Where a rule comes from, widest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Layer {
    /// The daemon's configuration, for a tenant.
    Operator,
    /// What the session's creator added.
    Session,
    /// What the run's starter added.
    Run,
    /// What a person granted for the session while answering a question.
    Grant,
}

impl Layer {
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Operator => "operator",
            Layer::Session => "session",
            Layer::Run => "run",
            Layer::Grant => "grant",
        }
    }

    /// A layer a client writes, which may only narrow.
    pub fn is_client(self) -> bool {
        matches!(self, Layer::Session | Layer::Run)
    }
}

/// Where a rule was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub layer: Layer,
    /// The file, or what stands for one (`session ses_…`).
    pub source: String,
    /// 1-based; 0 where there is no text (a grant).
    pub line: u32,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{} layer, {}", self.layer.as_str(), self.source)
        } else {
            write!(
                f,
                "{} layer, {}:{}",
                self.layer.as_str(),
                self.source,
                self.line
            )
        }
    }
}

/// One rule.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub decision: Decision,
    /// For `ask`: a person may answer with a session grant.
    pub grantable: bool,
    pub origin: Origin,
    tools: Option<Vec<StrMatch>>,
    risks: Option<Vec<Risk>>,
    engines: Option<Vec<String>>,
    /// The prefix of a simple command's words it matches, for tools that run command lines.
    command: Option<Vec<WordPattern>>,
    /// Groups of globs each of which some word of the command after its program must match
    /// (`[["-*r*", "--recursive"], ["/"]]`: recursive, and on `/`), in any order.
    words: Vec<Vec<StrMatch>>,
    /// Variables an `allow` lets be set before the command (`RUST_LOG=debug cargo test`).
    env: BTreeSet<String>,
    /// Whether an `allow` lets the command write files through redirections.
    redirects: bool,
    args: Vec<ArgCondition>,
    hosts: Option<Vec<StrMatch>>,
    /// A grant of one exact call: its key.
    exact: Option<String>,
}

/// A rule as a decision names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleRef {
    pub name: String,
    pub decision: Decision,
    pub grantable: bool,
    pub origin: Origin,
}

impl fmt::Display for RuleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rule `{}` ({})", self.name, self.origin)
    }
}

/// The hosts a call may reach: its profile's allow-list, or any at all.
#[derive(Debug, Clone, Default)]
pub struct Hosts {
    pub names: Vec<String>,
    /// The profile may put a connection to any host to a person.
    pub any: bool,
}

/// What the policy knows of a call.
pub struct Call<'a> {
    pub tool: &'a str,
    pub risk: Risk,
    pub engine: &'a str,
    pub arguments: &'a Value,
    pub workspace: Option<&'a Path>,
    /// The command line it runs, read by [`shell`].
    pub command: Option<&'a CommandLine>,
    pub hosts: &'a Hosts,
    /// The key an exact-call grant of this call would have.
    pub grant_key: &'a str,
}

impl Rule {
    pub fn reference(&self) -> RuleRef {
        RuleRef {
            name: self.name.clone(),
            decision: self.decision,
            grantable: self.grantable,
            origin: self.origin.clone(),
        }
    }

    /// A grant of exactly one call (by its key), for the session.
    pub fn exact_grant(name: String, source: String, grant_key: String) -> Rule {
        Rule {
            exact: Some(grant_key),
            ..Rule::grant(name, source)
        }
    }

    /// A grant of every command starting with `prefix`, in tool `tool`, for the session.
    pub fn prefix_grant(name: String, source: String, tool: &str, prefix: &[String]) -> Rule {
        Rule {
            tools: Some(vec![StrMatch::Exact(tool.to_owned())]),
            command: Some(
                prefix
                    .iter()
                    .map(|word| WordPattern::OneOf(vec![word.clone()]))
                    .collect(),
            ),
            ..Rule::grant(name, source)
        }
    }

    fn grant(name: String, source: String) -> Rule {
        Rule {
            name,
            decision: Decision::Allow,
            grantable: false,
            origin: Origin {
                layer: Layer::Grant,
                source,
                line: 0,
            },
            tools: None,
            risks: None,
            engines: None,
            command: None,
            words: Vec::new(),
            env: BTreeSet::new(),
            redirects: false,
            args: Vec::new(),
            hosts: None,
            exact: None,
        }
    }

    /// Whether everything but the command holds for `call`.
    fn holds_for_call(&self, call: &Call<'_>) -> bool {
        if let Some(key) = &self.exact
            && key != call.grant_key
        {
            return false;
        }
        if let Some(tools) = &self.tools
            && !tools.iter().any(|tool| tool.is_match(call.tool))
        {
            return false;
        }
        if let Some(risks) = &self.risks
            && !risks.contains(&call.risk)
        {
            return false;
        }
        if let Some(engines) = &self.engines
            && !engines.iter().any(|engine| engine == call.engine)
        {
            return false;
        }
        if let Some(hosts) = &self.hosts {
            let matches = |name: &String| {
                hosts
                    .iter()
                    .any(|host| host.is_match(&name.to_ascii_lowercase()))
            };
            let holds = match self.decision {
                // Allowed only when every host it may reach is named.
                Decision::Allow => {
                    !call.hosts.any
                        && !call.hosts.names.is_empty()
                        && call.hosts.names.iter().all(matches)
                }
                // Asked or refused when it may reach any named host.
                Decision::Ask | Decision::Deny => {
                    call.hosts.any || call.hosts.names.iter().any(matches)
                }
            };
            if !holds {
                return false;
            }
        }
        self.args
            .iter()
            .all(|condition| condition.holds(call.arguments, call.workspace))
    }

    /// How this rule's command prefix meets `command`, with what an `allow` needs besides.
    fn meets(&self, command: &SimpleCommand) -> PrefixMatch {
        let Some(prefix) = &self.command else {
            return PrefixMatch::No;
        };
        let found = matchers::prefix_match(prefix, command)
            .min_with(matchers::words_match(&self.words, command));
        if self.decision != Decision::Allow {
            return found;
        }
        let allowed = found == PrefixMatch::Yes
            && matchers::program_is_named(command)
            && command.env.is_subset(&self.env)
            && (command.writes.is_empty() || self.redirects);
        if allowed {
            PrefixMatch::Yes
        } else {
            PrefixMatch::No
        }
    }

    pub(crate) fn matches_example_line(&self, line: &str) -> bool {
        shell::parse_line(line)
            .commands
            .iter()
            .any(|command| self.meets(command) == PrefixMatch::Yes)
    }

    pub(crate) fn matches_example_arguments(&self, arguments: &Value) -> bool {
        self.args
            .iter()
            .all(|condition| condition.holds(arguments, None))
    }
}

/// One layer's rules, indexed so that a command meets only the rules naming its program and
/// a call only those naming its tool (or no tool in particular).
#[derive(Debug, Default)]
pub struct RuleSet {
    rules: Vec<Rule>,
    /// Whether a rule asks or denies by command: then what cannot be known before a line
    /// runs might be what it names, and asks.
    narrows_commands: bool,
    by_program: HashMap<String, Vec<usize>>,
    any_program: Vec<usize>,
    by_tool: HashMap<String, Vec<usize>>,
    any_tool: Vec<usize>,
}

impl RuleSet {
    pub fn new(rules: Vec<Rule>) -> RuleSet {
        let mut set = RuleSet::default();
        for (index, rule) in rules.iter().enumerate() {
            match &rule.command {
                Some(prefix) => match prefix.first().and_then(WordPattern::names) {
                    Some(programs) => {
                        for program in programs {
                            set.by_program
                                .entry(program.clone())
                                .or_default()
                                .push(index);
                        }
                    }
                    None => set.any_program.push(index),
                },
                None => match literal_tools(rule) {
                    Some(tools) => {
                        for tool in tools {
                            set.by_tool.entry(tool).or_default().push(index);
                        }
                    }
                    None => set.any_tool.push(index),
                },
            }
        }
        set.narrows_commands = rules
            .iter()
            .any(|rule| rule.command.is_some() && rule.decision != Decision::Allow);
        set.rules = rules;
        set
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    fn call_rules<'a>(&'a self, tool: &str) -> impl Iterator<Item = &'a Rule> {
        self.by_tool
            .get(tool)
            .into_iter()
            .flatten()
            .chain(self.any_tool.iter())
            .filter_map(|index| self.rules.get(*index))
    }

    fn command_rules<'a>(&'a self, program: Option<&str>) -> impl Iterator<Item = &'a Rule> {
        program
            .and_then(|program| self.by_program.get(program))
            .into_iter()
            .flatten()
            .chain(self.any_program.iter())
            .filter_map(|index| self.rules.get(*index))
    }
}

/// The tool names a rule's `tool` patterns are, when all are plain names.
fn literal_tools(rule: &Rule) -> Option<Vec<String>> {
    rule.tools
        .as_ref()?
        .iter()
        .map(|tool| match tool {
            StrMatch::Glob { pattern, .. } if !pattern.contains(['*', '?', '[', '{', '\\']) => {
                Some(pattern.clone())
            }
            StrMatch::Exact(name) => Some(name.clone()),
            _ => None,
        })
        .collect()
}

/// What decided one part of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum By {
    Rule(RuleRef),
    /// The session's level, no rule speaking: its words.
    Level(String),
    /// A builtin that runs nothing (`cd`, `echo`), no rule speaking.
    Builtin,
    /// The part cannot be judged before it runs: why.
    Unresolved(String),
}

impl fmt::Display for By {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            By::Rule(rule) => rule.fmt(f),
            By::Level(why) => f.write_str(why),
            By::Builtin => f.write_str("a shell builtin that runs nothing else"),
            By::Unresolved(why) => write!(f, "not known before it runs: {why}"),
        }
    }
}

/// One part of a call (the call itself, or one command of its line) and its decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    pub subject: String,
    pub decision: Decision,
    pub by: By,
    /// Which command of the call's line it is, when it is one.
    pub command: Option<usize>,
    /// That command's words when all are known, the program by its name: what a prefix
    /// grant may be made of.
    pub words: Vec<String>,
}

/// The policy's answer for a call, with what made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub decision: Decision,
    pub reason: String,
    /// For `ask`: an approval may grant it for the session (every question in it is
    /// grantable), and which commands a prefix grant may cover.
    pub grantable: bool,
    pub judged: Vec<Judged>,
}

impl Verdict {
    /// The rule that decided, when one did.
    pub fn rule(&self) -> Option<&RuleRef> {
        self.judged
            .iter()
            .filter(|judged| judged.decision == self.decision)
            .find_map(|judged| match &judged.by {
                By::Rule(rule) => Some(rule),
                _ => None,
            })
    }

    /// The gate's form of it.
    pub fn gate(&self) -> Gate {
        match self.decision {
            Decision::Allow => Gate::Allow,
            Decision::Ask => Gate::Ask(self.reason.clone()),
            Decision::Deny => Gate::Deny(self.reason.clone()),
        }
    }
}

/// The layers that apply to one run (or one direct call): the operator's for its tenant,
/// and what its session and run added.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    layers: Vec<Arc<RuleSet>>,
}

impl Policy {
    pub fn new(layers: Vec<Arc<RuleSet>>) -> Policy {
        Policy { layers }
    }

    pub fn layers(&self) -> &[Arc<RuleSet>] {
        &self.layers
    }

    /// Decides `call` under the session's `level`, with the session's `grants`.
    pub fn decide(&self, call: &Call<'_>, level: ApprovalPolicy, grants: &RuleSet) -> Verdict {
        let unmatched = match gate(level, call.risk) {
            Gate::Allow => (Decision::Allow, level_words(level, call.risk)),
            Gate::Ask(why) => (Decision::Ask, why),
            Gate::Deny(why) => (Decision::Deny, why),
        };
        let call_hit = strongest(
            self.layers
                .iter()
                .flat_map(|layer| layer.call_rules(call.tool))
                .filter(|rule| rule.holds_for_call(call))
                .map(|rule| (rule.decision, rule)),
        );
        let by_level =
            |unmatched: &(Decision, String)| (unmatched.0, By::Level(unmatched.1.clone()));
        // What cannot be known before the line runs asks only where a rule asks or denies by
        // command (it might be what the rule names); with none, the level decides it.
        let narrows = self.layers.iter().any(|layer| layer.narrows_commands);
        let unknown = |why: String| {
            if narrows {
                (Decision::Ask, By::Unresolved(why))
            } else {
                (
                    unmatched.0,
                    By::Level(format!("{} (not known before it runs: {why})", unmatched.1)),
                )
            }
        };
        // The call as a whole: its rule, or the level.
        let whole_call = || {
            let (decision, by) = match call_hit {
                Some((decision, rule)) => (decision, By::Rule(rule.reference())),
                None => by_level(&unmatched),
            };
            Judged {
                subject: format!("the call of `{}`", call.tool),
                decision,
                by,
                command: None,
                words: Vec::new(),
            }
        };
        let mut judged = Vec::new();
        match call.command {
            None => {
                judged.push(whole_call());
            }
            Some(line) => {
                if let Some((decision @ (Decision::Ask | Decision::Deny), rule)) = call_hit {
                    judged.push(Judged {
                        subject: format!("the call of `{}`", call.tool),
                        decision,
                        by: By::Rule(rule.reference()),
                        command: None,
                        words: Vec::new(),
                    });
                }
                for (index, command) in line.commands.iter().enumerate() {
                    let found = strongest(
                        self.layers
                            .iter()
                            .flat_map(|layer| layer.command_rules(command.program()))
                            .filter(|rule| rule.holds_for_call(call))
                            .filter_map(|rule| match (rule.meets(command), rule.decision) {
                                (PrefixMatch::Yes, decision) => Some((decision, rule)),
                                (PrefixMatch::Maybe, Decision::Ask | Decision::Deny) => {
                                    Some((Decision::Ask, rule))
                                }
                                (PrefixMatch::Maybe | PrefixMatch::No, _) => None,
                            }),
                    );
                    let (decision, by) = match found {
                        Some((decision, rule)) => (decision, By::Rule(rule.reference())),
                        None if command.program().is_none() => {
                            unknown("the program it runs".into())
                        }
                        None if command.wrapper => continue,
                        None if command.inert && command.writes.is_empty() => {
                            (Decision::Allow, By::Builtin)
                        }
                        None => match call_hit {
                            Some((Decision::Allow, rule)) => {
                                (Decision::Allow, By::Rule(rule.reference()))
                            }
                            _ => by_level(&unmatched),
                        },
                    };
                    judged.push(Judged {
                        subject: format!("`{command}`"),
                        decision,
                        by,
                        command: Some(index),
                        words: command.words(),
                    });
                }
                for why in &line.unresolved {
                    let (decision, by) = unknown(why.clone());
                    judged.push(Judged {
                        subject: "the line".into(),
                        decision,
                        by,
                        command: None,
                        words: Vec::new(),
                    });
                }
                if judged.is_empty() {
                    judged.push(whole_call());
                }
            }
        }
        self.apply_grants(call, grants, &mut judged);
        let mut verdict = finish(judged, level);
        // `always` asks where everything is allowed: a grant of this exact call answers it.
        if verdict.decision == Decision::Ask
            && verdict
                .judged
                .iter()
                .all(|entry| entry.decision == Decision::Allow)
            && let Some(grant) = grants
                .rules()
                .iter()
                .find(|grant| grant.exact.is_some() && grant.holds_for_call(call))
        {
            verdict.decision = Decision::Allow;
            verdict.reason = format!("granted for the session: {}", grant.reference());
        }
        verdict
    }

    /// Turns each grantable question a grant covers into an answer.
    fn apply_grants(&self, call: &Call<'_>, grants: &RuleSet, judged: &mut [Judged]) {
        if grants.is_empty() {
            return;
        }
        let exact = grants
            .rules()
            .iter()
            .find(|grant| grant.exact.is_some() && grant.holds_for_call(call));
        for entry in judged.iter_mut() {
            if entry.decision != Decision::Ask {
                continue;
            }
            let grantable = match &entry.by {
                By::Rule(rule) => rule.grantable,
                By::Level(_) => true,
                By::Builtin => false,
                // The person saw the whole line: only an exact grant covers it.
                By::Unresolved(_) => {
                    if let Some(grant) = exact {
                        entry.decision = Decision::Allow;
                        entry.by = By::Rule(grant.reference());
                    }
                    continue;
                }
            };
            if !grantable {
                continue;
            }
            let by_prefix = entry
                .command
                .and_then(|index| call.command?.commands.get(index))
                .and_then(|command| {
                    grants.command_rules(command.program()).find(|grant| {
                        grant.holds_for_call(call) && grant.meets(command) == PrefixMatch::Yes
                    })
                });
            if let Some(grant) = by_prefix.or(exact) {
                entry.decision = Decision::Allow;
                entry.by = By::Rule(grant.reference());
            }
        }
    }
}

/// The strongest decision among `hits`, and the first rule that made it.
fn strongest<'a>(hits: impl Iterator<Item = (Decision, &'a Rule)>) -> Option<(Decision, &'a Rule)> {
    let mut best: Option<(Decision, &Rule)> = None;
    for (decision, rule) in hits {
        if best.is_none_or(|(held, _)| decision > held) {
            best = Some((decision, rule));
            if decision == Decision::Deny {
                break;
            }
        }
    }
    best
}

fn level_words(level: ApprovalPolicy, risk: Risk) -> String {
    format!(
        "no rule speaks; the session's level `{}` runs {} calls",
        level.as_str(),
        risk.as_str()
    )
}

/// The call's decision from its parts, the session's level having the last word on asking.
fn finish(judged: Vec<Judged>, level: ApprovalPolicy) -> Verdict {
    let mut decision = judged
        .iter()
        .map(|judged| judged.decision)
        .max()
        .unwrap_or(Decision::Ask);
    let deciding = judged
        .iter()
        .filter(|entry| entry.decision == decision)
        .map(|entry| {
            format!(
                "{} {}s: {}",
                entry.subject,
                entry.decision.as_str(),
                entry.by
            )
        })
        .collect::<Vec<_>>();
    let mut reason = deciding.join("; ");
    match (level, decision) {
        (ApprovalPolicy::Always, Decision::Allow) => {
            decision = Decision::Ask;
            reason = format!("policy `always` asks for every call ({reason})");
        }
        (ApprovalPolicy::Never, Decision::Ask) => {
            decision = Decision::Deny;
            reason =
                format!("policy `never` asks nobody, so what would be asked is refused ({reason})");
        }
        _ => {}
    }
    let grantable = decision == Decision::Ask
        && judged
            .iter()
            .filter(|entry| entry.decision == Decision::Ask)
            .all(|entry| match &entry.by {
                By::Rule(rule) => rule.grantable,
                By::Level(_) | By::Unresolved(_) => true,
                By::Builtin => false,
            });
    Verdict {
        decision,
        reason,
        grantable,
        judged,
    }
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
