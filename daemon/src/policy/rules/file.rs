//! Rule files: the TOML an operator writes (and a client sends for its session or run),
//! read into [`Rule`]s that remember the file and line they came from. Every field is
//! checked (`deny_unknown_fields`), and every rule's inline examples are run against it
//! before the file is accepted: a rule whose `match` example it does not match, or whose
//! `not_match` example it does, fails the load and names the rule.
//!
//! ```toml
//! [[rule]]
//! name = "tests run freely"
//! decision = "allow"
//! command = ["cargo", ["test", "nextest"]]
//! match = ["cargo test --workspace", "timeout 600 cargo nextest run"]
//! not_match = ["cargo publish"]
//!
//! [[rule]]
//! decision = "allow"
//! tool = "write_file"
//! args = [{ pointer = "/path", path = "src/**" }]
//! match = [{ path = "src/lib.rs", content = "" }]
//! not_match = [{ path = "src/../secrets/key", content = "" }]
//! ```

use std::collections::BTreeSet;
use std::ops::Range;

use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

use super::matchers::{ArgCondition, ArgTest, StrMatch, WordPattern};
use super::{Decision, Layer, Origin, Rule};
use crate::domain::Risk;

/// The rules a client may add to a session or a run: a person's narrowing, not a second
/// operator policy.
pub const MAX_CLIENT_RULES: usize = 64;

/// The longest rule text a client may send.
pub const MAX_CLIENT_RULES_BYTES: usize = 64 * 1024;

/// The engines a rule may name.
const ENGINES: &[&str] = &["wasm", "process", "mcp"];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    #[serde(default)]
    rule: Vec<Spanned<RuleFile>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    name: Option<String>,
    decision: Decision,
    /// For `ask`: a person may turn the question into a session grant.
    #[serde(default)]
    grantable: bool,
    tool: Option<OneOrMany>,
    risk: Option<Vec<Risk>>,
    engine: Option<OneOrMany>,
    command: Option<Vec<OneOrMany>>,
    #[serde(default)]
    words: Vec<OneOrMany>,
    #[serde(default)]
    env: Vec<String>,
    #[serde(default)]
    redirects: bool,
    #[serde(default)]
    args: Vec<ArgFile>,
    hosts: Option<Vec<String>>,
    #[serde(default, rename = "match")]
    matches: Vec<Example>,
    #[serde(default)]
    not_match: Vec<Example>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(one) => vec![one],
            OneOrMany::Many(many) => many,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ArgFile {
    pointer: String,
    exact: Option<String>,
    prefix: Option<String>,
    glob: Option<String>,
    regex: Option<String>,
    path: Option<String>,
    #[serde(default)]
    not: bool,
}

/// An inline example: a command line, or a call's arguments.
#[derive(Deserialize)]
#[serde(untagged)]
enum Example {
    Line(String),
    Arguments(Value),
}

/// Reads `text` (from `source`, in `layer`) into rules, checking each one's examples.
pub fn parse(text: &str, source: &str, layer: Layer) -> Result<Vec<Rule>, String> {
    if layer.is_client() && text.len() > MAX_CLIENT_RULES_BYTES {
        return Err(format!(
            "the rules are {} bytes; a session's or run's rules may be at most {MAX_CLIENT_RULES_BYTES}",
            text.len()
        ));
    }
    let file: RulesFile = toml::from_str(text).map_err(|err| format!("{source}: {err}"))?;
    if layer.is_client() && file.rule.len() > MAX_CLIENT_RULES {
        return Err(format!(
            "{source}: {} rules; a session or run may add at most {MAX_CLIENT_RULES}",
            file.rule.len()
        ));
    }
    file.rule
        .into_iter()
        .map(|spanned| {
            let line = line_of(text, spanned.span());
            let origin = Origin {
                layer,
                source: source.to_owned(),
                line,
            };
            let rule_file = spanned.into_inner();
            let name = rule_file
                .name
                .clone()
                .unwrap_or_else(|| format!("{source}:{line}"));
            let failed = |why: String| format!("{source}:{line}: rule `{name}`: {why}");
            let (rule, examples) = compile(rule_file, name.clone(), origin).map_err(&failed)?;
            examples.check(&rule).map_err(&failed)?;
            Ok(rule)
        })
        .collect()
}

/// The line (1-based) a span starts on.
fn line_of(text: &str, span: Range<usize>) -> u32 {
    let before = text.get(..span.start).unwrap_or(text);
    u32::try_from(before.bytes().filter(|byte| *byte == b'\n').count() + 1).unwrap_or(u32::MAX)
}

struct Examples {
    matches: Vec<Example>,
    not_match: Vec<Example>,
}

fn compile(file: RuleFile, name: String, origin: Origin) -> Result<(Rule, Examples), String> {
    if origin.layer.is_client() && file.decision == Decision::Allow {
        return Err(
            "a session's or a run's rules may only ask or deny; what runs without asking is the \
             operator's to allow"
                .into(),
        );
    }
    if file.grantable && file.decision != Decision::Ask {
        return Err(
            "`grantable` is for `ask` rules: a person may grant what the rule asks about".into(),
        );
    }
    let tools = match file.tool {
        None => None,
        Some(tools) => Some(
            tools
                .into_vec()
                .iter()
                .map(|tool| StrMatch::glob(tool))
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    let engines = match file.engine {
        None => None,
        Some(engines) => {
            let engines = engines.into_vec();
            if let Some(unknown) = engines.iter().find(|e| !ENGINES.contains(&e.as_str())) {
                return Err(format!(
                    "unknown engine `{unknown}`; engines are {}",
                    ENGINES.join(", ")
                ));
            }
            Some(engines)
        }
    };
    let command = match file.command {
        None => None,
        Some(prefix) if prefix.is_empty() => {
            return Err("`command` needs at least the program: [\"git\", \"push\"]".into());
        }
        Some(prefix) => Some(
            prefix
                .into_iter()
                .map(|position| match position {
                    OneOrMany::One(word) if word == "*" => Ok(WordPattern::Any),
                    OneOrMany::One(word) if word.is_empty() => {
                        Err("`command` has an empty word".to_owned())
                    }
                    OneOrMany::One(word) => Ok(WordPattern::OneOf(vec![word])),
                    OneOrMany::Many(words)
                        if words.is_empty() || words.iter().any(String::is_empty) =>
                    {
                        Err("`command` has an empty list of words, or an empty word".to_owned())
                    }
                    OneOrMany::Many(words) => Ok(WordPattern::OneOf(words)),
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    if let Some(WordPattern::OneOf(programs)) = command.as_ref().and_then(|c| c.first())
        && let Some(path) = programs.iter().find(|p| p.contains('/'))
    {
        return Err(format!(
            "`command` names a program by its name, not a path (`{path}`): `/usr/bin/git` and \
             `git` are both `git`"
        ));
    }
    if !file.words.is_empty() && command.is_none() {
        return Err("`words` narrows a `command`: give the program too".into());
    }
    let words = file
        .words
        .into_iter()
        .map(|group| {
            let group = group.into_vec();
            if group.is_empty() {
                return Err("`words` has an empty group".to_owned());
            }
            group.iter().map(|glob| StrMatch::word_glob(glob)).collect()
        })
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(bad) = file.env.iter().find(|name| {
        name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    }) {
        return Err(format!("`env` names variables, not `{bad}`"));
    }
    if (!file.env.is_empty() || file.redirects)
        && (file.decision != Decision::Allow || command.is_none())
    {
        return Err("`env` and `redirects` loosen an `allow` rule with a `command`".into());
    }
    let args = file
        .args
        .into_iter()
        .map(compile_arg)
        .collect::<Result<Vec<_>, _>>()?;
    let hosts = match file.hosts {
        None => None,
        Some(hosts) if hosts.is_empty() => return Err("`hosts` is empty".into()),
        Some(hosts) => Some(
            hosts
                .iter()
                .map(|host| StrMatch::glob(&host.to_ascii_lowercase()))
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    let rule = Rule {
        name,
        decision: file.decision,
        grantable: file.grantable,
        origin,
        tools,
        risks: file.risk,
        engines,
        command,
        words,
        env: file.env.into_iter().collect::<BTreeSet<_>>(),
        redirects: file.redirects,
        args,
        hosts,
        exact: None,
    };
    Ok((
        rule,
        Examples {
            matches: file.matches,
            not_match: file.not_match,
        },
    ))
}

fn compile_arg(arg: ArgFile) -> Result<ArgCondition, String> {
    if !(arg.pointer.is_empty() || arg.pointer.starts_with('/')) {
        return Err(format!(
            "`pointer` is a JSON pointer (`/path`), not `{}`",
            arg.pointer
        ));
    }
    let given = [&arg.exact, &arg.prefix, &arg.glob, &arg.regex, &arg.path]
        .iter()
        .filter(|test| test.is_some())
        .count();
    if given != 1 {
        return Err(format!(
            "the condition on `{}` needs exactly one of exact, prefix, glob, regex or path",
            arg.pointer
        ));
    }
    let test = if let Some(exact) = arg.exact {
        ArgTest::Text(StrMatch::Exact(exact))
    } else if let Some(prefix) = arg.prefix {
        ArgTest::Text(StrMatch::Prefix(prefix))
    } else if let Some(glob) = arg.glob {
        ArgTest::Text(StrMatch::glob(&glob)?)
    } else if let Some(regex) = arg.regex {
        ArgTest::Text(StrMatch::regex(&regex)?)
    } else if let Some(path) = arg.path {
        if path.starts_with('/') || path.split('/').any(|part| part == "..") {
            return Err(format!(
                "`path` is a glob relative to the workspace root, not `{path}`"
            ));
        }
        ArgTest::Path(StrMatch::glob(&path)?)
    } else {
        return Err("a condition needs a test".into());
    };
    Ok(ArgCondition {
        pointer: arg.pointer,
        test,
        negated: arg.not,
    })
}

impl Examples {
    /// Runs each example against `rule` alone.
    fn check(&self, rule: &Rule) -> Result<(), String> {
        for (example, expected) in self
            .matches
            .iter()
            .map(|example| (example, true))
            .chain(self.not_match.iter().map(|example| (example, false)))
        {
            let matched = match example {
                Example::Line(line) => {
                    if rule.command.is_none() {
                        return Err(format!(
                            "example `{line}` is a command line, but the rule has no `command`"
                        ));
                    }
                    rule.matches_example_line(line)
                }
                Example::Arguments(arguments) => rule.matches_example_arguments(arguments),
            };
            if matched != expected {
                let shown = match example {
                    Example::Line(line) => format!("`{line}`"),
                    Example::Arguments(arguments) => arguments.to_string(),
                };
                return Err(if expected {
                    format!("its `match` example {shown} does not match it")
                } else {
                    format!("its `not_match` example {shown} matches it")
                });
            }
        }
        Ok(())
    }
}
