//! Command lines read the way the shell will run them, so that a rule about `git push` judges
//! every `git push` in a line and nothing else: `brush-parser` (the parser of the brush shell,
//! a maintained POSIX/bash parser) builds the syntax tree, and this module walks it into the
//! simple commands the line would run — in pipelines, lists, subshells, functions, loops,
//! conditionals, `$(…)` and backticks, process substitutions and here-documents — with quoting
//! removed, assignments noted, and the wrappers that run another command (`sh -c`, `bash -c`,
//! `eval`, `env`, `xargs`, `timeout`, `nice`, `find -exec`, …) unwrapped into the command they
//! run.
//!
//! What cannot be known before the line runs is never guessed: a word that expands (`$X`,
//! `~`, `*`, `{a,b}`) is [`Word::Unknown`]; a command whose name is unknown, code the walk
//! cannot see (`source`, `eval "$X"`, `alias`, an arithmetic that may substitute), a parse
//! error, and a line past the walk's bounds are reasons in [`CommandLine::unresolved`], which
//! the policy turns into a question for a person. Every bound below is what keeps a hostile
//! line from costing the gate more than a legitimate one.

use std::collections::BTreeSet;
use std::fmt;

use brush_parser::ast;
use brush_parser::word::{self, WordPiece, WordPieceWithSource};
use brush_parser::{Parser, ParserOptions};

/// The longest line read: a build or test command is a few hundred bytes; past this the line
/// is not parsed (asks), so a megabyte argument cannot make each gate decision slow.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// How deep `sh -c`, `eval` and substitutions may nest inside each other before the line
/// asks: legitimate lines nest two or three; each level is a parse of its own.
pub const MAX_DEPTH: usize = 8;

/// The most simple commands judged in one line; more asks (a generated line of thousands of
/// commands is not reviewed by rules a person wrote for a handful).
pub const MAX_COMMANDS: usize = 256;

/// Unbalanced-looking nesting of `(` and `{` past this is not handed to the parser, whose
/// recursive descent would otherwise spend its stack on `((((…` .
const MAX_BRACKET_DEPTH: usize = 64;

/// Builtins whose arguments name variables, where bash evaluates an array subscript — and so
/// any `$(…)` written inside it — from a literal argument (`declare 'a[$(id)]'`).
const SUBSCRIPT_EVALUATORS: &[&str] = &[
    "declare",
    "typeset",
    "local",
    "export",
    "readonly",
    "unset",
    "let",
    "test",
    "[",
    "printf",
    "read",
    "mapfile",
    "readarray",
    "wait",
];

/// Builtins that change what later names run, or run text the walk cannot see.
const OPAQUE_BUILTINS: &[&str] = &[
    "alias", "hash", "enable", "shopt", "source", ".", "fc", "bind", "complete", "compgen",
];

/// Builtins that set variables for the commands after them (and run nothing themselves).
const ASSIGNING_BUILTINS: &[&str] = &["export", "declare", "typeset", "local", "readonly"];

/// Programs that are shells: with `-c` their script is a line of its own.
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "posh"];

/// One word of a command as the shell will pass it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Word {
    /// Known before the line runs: its text with quotes and escapes removed.
    Known(String),
    /// Expands when the line runs (a variable, a substitution, a glob, a tilde, a brace).
    Unknown,
}

impl Word {
    pub fn known(&self) -> Option<&str> {
        match self {
            Word::Known(text) => Some(text),
            Word::Unknown => None,
        }
    }
}

/// One simple command the line runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleCommand {
    /// Its words, the program first.
    pub argv: Vec<Word>,
    /// Variables set for it: by assignments before it, by `env`, or earlier in the line.
    pub env: BTreeSet<String>,
    /// The files its output redirections write (`/dev/null` and descriptors are not files).
    pub writes: Vec<Word>,
    /// More arguments are added when it runs (`xargs cmd`, `find -exec cmd {} +`).
    pub open_tail: bool,
    /// A wrapper that runs the command after it (`timeout 5 …`): judged only by a rule that
    /// names it, since the command it runs is judged on its own.
    pub wrapper: bool,
    /// A builtin that runs nothing (`cd`, `echo`, `export X=1`): allowed when no rule names it.
    pub inert: bool,
    /// What it was found inside, outermost first (`sh -c`, `$(…)`, `xargs`).
    pub via: Vec<&'static str>,
}

impl SimpleCommand {
    fn new(argv: Vec<Word>, env: BTreeSet<String>, via: &[&'static str]) -> SimpleCommand {
        SimpleCommand {
            argv,
            env,
            writes: Vec::new(),
            open_tail: false,
            wrapper: false,
            inert: false,
            via: via.to_vec(),
        }
    }

    /// Its words when all are known, the program by its name (`/usr/bin/git` is `git`).
    pub fn words(&self) -> Vec<String> {
        let mut words = Vec::with_capacity(self.argv.len());
        for (index, word) in self.argv.iter().enumerate() {
            match (index, word) {
                (_, Word::Unknown) => return Vec::new(),
                (0, Word::Known(_)) => words.push(self.program().unwrap_or_default().to_owned()),
                (_, Word::Known(text)) => words.push(text.clone()),
            }
        }
        words
    }

    /// The program as a rule names it: the last component of the first word.
    pub fn program(&self) -> Option<&str> {
        let first = self.argv.first()?.known()?;
        Some(first.rsplit('/').next().unwrap_or(first))
    }
}

impl fmt::Display for SimpleCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, word) in self.argv.iter().enumerate() {
            if index > 0 {
                f.write_str(" ")?;
            }
            match word {
                Word::Known(text) if !text.is_empty() && text.chars().all(plain) => {
                    f.write_str(text)?
                }
                Word::Known(text) => write!(f, "'{}'", text.replace('\'', r"'\''"))?,
                Word::Unknown => f.write_str("…")?,
            }
        }
        if self.open_tail {
            f.write_str(" …")?;
        }
        if !self.via.is_empty() {
            write!(f, " (in {})", self.via.join(" in "))?;
        }
        Ok(())
    }
}

fn plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c)
}

/// What a line runs, as far as can be known before it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandLine {
    pub commands: Vec<SimpleCommand>,
    /// Why part of the line cannot be judged before it runs; each asks.
    pub unresolved: Vec<String>,
}

/// Reads a shell command line, as non-interactive bash (`run_command`'s shell) reads it.
pub fn parse_line(line: &str) -> CommandLine {
    guarded(|walk| walk.program(line, 0, &[]))
}

/// Reads a program's argv as one simple command, unwrapping the wrappers it starts with.
pub fn from_argv(argv: &[String]) -> CommandLine {
    let argv: Vec<Word> = argv.iter().map(|arg| Word::Known(arg.clone())).collect();
    guarded(|walk| walk.command(argv, BTreeSet::new(), Vec::new(), 0, &[]))
}

/// Runs a walk; a panic anywhere in it (the parser's word and token readers have
/// `unwrap`s on hostile input) is a line that asks, never a lost task.
fn guarded(walk: impl FnOnce(&mut Walk)) -> CommandLine {
    let walked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut state = Walk::default();
        walk(&mut state);
        state.finish()
    }));
    walked.unwrap_or_else(|_| CommandLine {
        commands: Vec::new(),
        unresolved: vec!["the shell parser failed on the line".into()],
    })
}

/// Non-interactive bash: no extended globs (`!(…)` is not a pattern there).
fn options() -> ParserOptions {
    ParserOptions {
        enable_extended_globbing: false,
        ..ParserOptions::default()
    }
}

/// Compound commands (and `!`) a line may hold before it is not parsed: brush's recursive
/// descent spends stack on each, and nested `case` items cost it time exponential in their
/// depth; legitimate lines hold a handful.
const MAX_COMPOUNDS: usize = 48;
const MAX_CASES: usize = 8;
const MAX_CHAINED: usize = 256;
const MAX_BANGS: usize = 64;

/// Why `text` is not handed to the parser (or would be misread by it), if it should not be.
fn hazard(text: &str) -> Option<String> {
    if text.len() > MAX_LINE_BYTES {
        return Some(format!(
            "the line is {} bytes; lines over {MAX_LINE_BYTES} bytes are not read",
            text.len()
        ));
    }
    if bracket_depth(text) > MAX_BRACKET_DEPTH {
        return Some(format!(
            "the line nests brackets more than {MAX_BRACKET_DEPTH} deep"
        ));
    }
    let words = text.split(|c: char| c.is_whitespace() || ";&|()<>`".contains(c));
    let (mut compounds, mut cases) = (0, 0);
    for word in words {
        match word {
            "case" => {
                cases += 1;
                compounds += 1;
            }
            "if" | "while" | "until" | "for" | "select" | "[[" | "!" | "function" | "{" => {
                compounds += 1
            }
            _ => {}
        }
    }
    if cases > MAX_CASES || compounds > MAX_COMPOUNDS {
        return Some(format!(
            "the line holds more compound commands than are read ({MAX_CASES} `case`, \
             {MAX_COMPOUNDS} in all)"
        ));
    }
    // Long chains of `&&`/`||` (inside `[[ ]]` too) and runs of `!` recurse in the parser.
    let chained = text.matches("&&").count() + text.matches("||").count();
    if chained > MAX_CHAINED || text.matches('!').count() > MAX_BANGS {
        return Some(format!(
            "the line chains more than {MAX_CHAINED} `&&`/`||` or holds more than {MAX_BANGS} `!`"
        ));
    }
    // brush starts an ANSI-C string at any `$'`, also an escaped `\$'` or `$$'`, where bash
    // reads `$` then a plain quote: what it takes for one word the shell runs as commands.
    let bytes = text.as_bytes();
    for (at, pair) in bytes.windows(2).enumerate() {
        if pair == b"$'" && at > 0 && matches!(bytes.get(at - 1), Some(b'\\' | b'$')) {
            return Some("`\\$'` or `$$'` reads differently to the parser and to bash".into());
        }
    }
    None
}

#[derive(Default)]
struct Walk {
    out: CommandLine,
    /// Variables assigned so far in the line, which every later command sees.
    assigned: BTreeSet<String>,
    /// Functions the line defines: a command of that name runs a body judged elsewhere.
    functions: BTreeSet<String>,
}

impl Walk {
    fn finish(mut self) -> CommandLine {
        if self.out.commands.len() > MAX_COMMANDS {
            self.out.commands.truncate(MAX_COMMANDS);
            self.unresolved(format!("the line runs more than {MAX_COMMANDS} commands"));
        }
        self.out
    }

    fn unresolved(&mut self, reason: String) {
        if !self.out.unresolved.contains(&reason) {
            self.out.unresolved.push(reason);
        }
    }

    fn full(&self) -> bool {
        self.out.commands.len() > MAX_COMMANDS
    }

    /// Parses `text` as a program and walks it.
    fn program(&mut self, text: &str, depth: usize, via: &[&'static str]) {
        if depth > MAX_DEPTH {
            return self.unresolved(format!(
                "commands nest more than {MAX_DEPTH} deep (sh -c, eval, $(…))"
            ));
        }
        if let Some(hazard) = hazard(text) {
            return self.unresolved(hazard);
        }
        let parsed = std::panic::catch_unwind(|| {
            Parser::new(std::io::Cursor::new(text.as_bytes()), &options()).parse_program()
        });
        match parsed {
            Ok(Ok(program)) => {
                for list in &program.complete_commands {
                    self.list(list, depth, via);
                }
            }
            Ok(Err(err)) => self.unresolved(format!("the shell cannot parse the line: {err}")),
            Err(_) => self.unresolved("the shell parser failed on the line".into()),
        }
    }

    fn list(&mut self, list: &ast::CompoundList, depth: usize, via: &[&'static str]) {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            self.pipeline(&and_or.first, depth, via);
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(pipeline) | ast::AndOr::Or(pipeline) => {
                        self.pipeline(pipeline, depth, via)
                    }
                }
            }
        }
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline, depth: usize, via: &[&'static str]) {
        for command in &pipeline.seq {
            if self.full() {
                return;
            }
            match command {
                ast::Command::Simple(simple) => self.simple(simple, depth, via),
                ast::Command::Compound(compound, redirects) => {
                    self.compound(compound, depth, via);
                    if let Some(redirects) = redirects {
                        let mut writes = Vec::new();
                        for redirect in &redirects.0 {
                            self.redirect(redirect, &mut writes, depth, via);
                        }
                        self.inert_writes(writes, via);
                    }
                }
                ast::Command::Function(function) => {
                    // Its body runs where it is called, with the variables set by then: it is
                    // judged here, and a call to it asks.
                    self.functions.insert(function.fname.value.clone());
                    let ast::FunctionBody(body, redirects) = &function.body;
                    self.compound(body, depth, via);
                    if let Some(redirects) = redirects {
                        let mut writes = Vec::new();
                        for redirect in &redirects.0 {
                            self.redirect(redirect, &mut writes, depth, via);
                        }
                        self.inert_writes(writes, via);
                    }
                }
                ast::Command::ExtendedTest(test, redirects) => {
                    self.test_expr(&test.expr, depth, via);
                    if let Some(redirects) = redirects {
                        let mut writes = Vec::new();
                        for redirect in &redirects.0 {
                            self.redirect(redirect, &mut writes, depth, via);
                        }
                        self.inert_writes(writes, via);
                    }
                }
            }
        }
    }

    /// A compound command's redirections, judged as an inert command that writes.
    fn inert_writes(&mut self, writes: Vec<Word>, via: &[&'static str]) {
        if writes.is_empty() {
            return;
        }
        let mut command =
            SimpleCommand::new(vec![Word::Known(":".into())], self.assigned.clone(), via);
        command.writes = writes;
        command.inert = true;
        self.out.commands.push(command);
    }

    fn compound(&mut self, compound: &ast::CompoundCommand, depth: usize, via: &[&'static str]) {
        match compound {
            ast::CompoundCommand::Arithmetic(arithmetic) => {
                self.arithmetic(&arithmetic.expr.value);
                // `((curl x))` and `( (curl x) )` are arithmetic to brush and bash, but nested
                // subshells to dash — `/bin/sh` on Debian, which runs `run_command`'s lines:
                // the text is judged as the commands it may run as well.
                let mut inner = via.to_vec();
                inner.push("((…))");
                self.program(&arithmetic.expr.value, depth + 1, &inner);
            }
            ast::CompoundCommand::ArithmeticForClause(clause) => {
                for expr in [&clause.initializer, &clause.condition, &clause.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arithmetic(&expr.value);
                }
                self.list(&clause.body.list, depth, via);
            }
            ast::CompoundCommand::BraceGroup(group) => self.list(&group.list, depth, via),
            ast::CompoundCommand::Subshell(subshell) => self.list(&subshell.list, depth, via),
            ast::CompoundCommand::ForClause(clause) => {
                for value in clause.values.iter().flatten() {
                    let word = self.word(&value.value, depth, via);
                    self.literal_code(&word, "for");
                }
                // The loop's variable holds words the walk may not know.
                self.assigned.insert(clause.variable_name.clone());
                self.looped(depth, via, |walk, depth, via| {
                    walk.list(&clause.body.list, depth, via)
                });
            }
            ast::CompoundCommand::CaseClause(clause) => {
                self.word(&clause.value.value, depth, via);
                for case in &clause.cases {
                    for pattern in &case.patterns {
                        self.word(&pattern.value, depth, via);
                    }
                    if let Some(list) = &case.cmd {
                        self.list(list, depth, via);
                    }
                }
            }
            ast::CompoundCommand::IfClause(clause) => {
                self.list(&clause.condition, depth, via);
                self.list(&clause.then, depth, via);
                for other in clause.elses.iter().flatten() {
                    if let Some(condition) = &other.condition {
                        self.list(condition, depth, via);
                    }
                    self.list(&other.body, depth, via);
                }
            }
            ast::CompoundCommand::WhileClause(clause)
            | ast::CompoundCommand::UntilClause(clause) => {
                self.looped(depth, via, |walk, depth, via| {
                    walk.list(&clause.0, depth, via);
                    walk.list(&clause.1.list, depth, via);
                });
            }
            ast::CompoundCommand::Coprocess(coprocess) => {
                self.pipeline(
                    &ast::Pipeline {
                        timed: None,
                        bang: false,
                        seq: vec![(*coprocess.body).clone()],
                    },
                    depth,
                    via,
                );
            }
        }
    }

    /// A loop's body: walked again when it set variables, for a later pass runs its earlier
    /// commands with them set.
    fn looped(
        &mut self,
        depth: usize,
        via: &[&'static str],
        body: impl Fn(&mut Walk, usize, &[&'static str]),
    ) {
        let before = self.assigned.len();
        body(self, depth, via);
        if self.assigned.len() != before {
            body(self, depth, via);
        }
    }

    /// An arithmetic expression: bash substitutes inside it (and inside the values of the
    /// variables it names, as array subscripts), so one that could is not judged.
    fn arithmetic(&mut self, expr: &str) {
        if expr.contains("$(") || expr.contains('`') {
            self.unresolved("an arithmetic expression runs a substitution".into());
        }
        // A name in arithmetic is evaluated, and its value evaluated again as arithmetic
        // (`v='a[$(cmd)]'; ((v))` runs cmd).
        if expr.chars().any(|c| c.is_ascii_alphabetic() || c == '_') {
            self.unresolved(
                "an arithmetic expression evaluates variables, whose values bash evaluates again"
                    .into(),
            );
        }
    }

    fn test_expr(&mut self, expr: &ast::ExtendedTestExpr, depth: usize, via: &[&'static str]) {
        match expr {
            ast::ExtendedTestExpr::And(left, right) | ast::ExtendedTestExpr::Or(left, right) => {
                self.test_expr(left, depth, via);
                self.test_expr(right, depth, via);
            }
            ast::ExtendedTestExpr::Not(inner) | ast::ExtendedTestExpr::Parenthesized(inner) => {
                self.test_expr(inner, depth, via)
            }
            ast::ExtendedTestExpr::UnaryTest(predicate, operand) => {
                let word = self.word(&operand.value, depth, via);
                self.literal_code(&word, "[[");
                if (word == Word::Unknown || word.known().is_some_and(|text| text.contains('[')))
                    && matches!(
                        predicate,
                        ast::UnaryPredicate::ShellVariableIsSetAndAssigned
                            | ast::UnaryPredicate::ShellVariableIsSetAndNameRef
                    )
                {
                    self.unresolved(
                        "`[[ -v ]]` evaluates a name not known before the line runs".into(),
                    );
                }
            }
            ast::ExtendedTestExpr::BinaryTest(predicate, left, right) => {
                let arithmetic = matches!(
                    predicate,
                    ast::BinaryPredicate::ArithmeticEqualTo
                        | ast::BinaryPredicate::ArithmeticNotEqualTo
                        | ast::BinaryPredicate::ArithmeticLessThan
                        | ast::BinaryPredicate::ArithmeticLessThanOrEqualTo
                        | ast::BinaryPredicate::ArithmeticGreaterThan
                        | ast::BinaryPredicate::ArithmeticGreaterThanOrEqualTo
                );
                for operand in [left, right] {
                    let word = self.word(&operand.value, depth, via);
                    self.literal_code(&word, "[[");
                    let names_variable = word.known().is_some_and(|text| {
                        text.chars().any(|c| c.is_ascii_alphabetic() || c == '_')
                    });
                    if arithmetic && (word == Word::Unknown || names_variable) {
                        self.unresolved(
                            "`[[` compares a value not known before the line runs as arithmetic, which bash evaluates".into(),
                        );
                    }
                }
            }
        }
    }

    /// Setting a variable bash runs as code asks.
    fn code_variable(&mut self, name: &str) {
        if code_variable(name) {
            self.unresolved(format!("`{name}` is run as code by bash"));
        }
    }

    /// Builtins that evaluate their arguments as arithmetic or variable names (and so run a
    /// `$(…)` inside an array subscript of a value): a literal holding code, or a value not
    /// known before the line runs, asks.
    fn runtime_code(&mut self, program: &str, argv: &[Word]) {
        let rest = argv.get(1..).unwrap_or_default();
        if SUBSCRIPT_EVALUATORS.contains(&program) || program == "set" {
            for word in rest {
                self.literal_code(word, program);
            }
        }
        let evaluates = match program {
            "declare" | "typeset" | "local" | "export" | "readonly" | "unset" | "let" | "read"
            | "mapfile" | "readarray" => true,
            "printf" => rest.iter().any(|word| word.known() == Some("-v")),
            "wait" => rest.iter().any(|word| word.known() == Some("-p")),
            "test" | "[" => rest.iter().any(|word| {
                matches!(
                    word.known(),
                    Some("-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge" | "-v" | "-R")
                )
            }),
            _ => false,
        };
        if evaluates && rest.contains(&Word::Unknown) {
            self.unresolved(format!(
                "`{program}` evaluates a value not known before the line runs"
            ));
        }
        // Names these builtins set or read: one bash runs as code, or one with a subscript
        // (evaluated as arithmetic, where a variable's value is evaluated again), asks; so
        // does an integer attribute (`declare -i x=v` evaluates `v`) and `let`.
        if evaluates || matches!(program, "getopts" | "printf" | "test" | "[") {
            for word in rest.iter().filter_map(Word::known) {
                let name = word.split('=').next().unwrap_or(word);
                if code_variable(name.split('[').next().unwrap_or(name)) && evaluates {
                    self.unresolved(format!(
                        "`{program}` sets `{name}`, which bash runs as code"
                    ));
                }
                if word.contains('[') && (evaluates || !word.starts_with('-')) {
                    self.unresolved(format!(
                        "`{program}` is given `{word}`, whose subscript bash evaluates"
                    ));
                }
            }
        }
        let integer = matches!(
            program,
            "declare" | "typeset" | "local" | "export" | "readonly"
        ) && rest
            .iter()
            .filter_map(Word::known)
            .any(|word| word.starts_with('-') && !word.starts_with("--") && word.contains('i'));
        if integer || program == "let" {
            self.unresolved(format!("`{program}` evaluates its values as arithmetic"));
        }
    }

    /// A literal argument that holds code bash may still run (an array subscript with a
    /// substitution) in a builtin that evaluates subscripts.
    fn literal_code(&mut self, word: &Word, builtin: &str) {
        if let Word::Known(text) = word
            && (text.contains("$(") || text.contains('`'))
        {
            self.unresolved(format!(
                "`{builtin}` is given text with a substitution in it, which bash may run"
            ));
        }
    }

    fn simple(&mut self, simple: &ast::SimpleCommand, depth: usize, via: &[&'static str]) {
        let mut env = BTreeSet::new();
        let mut argv = Vec::new();
        let mut writes = Vec::new();
        for item in simple.prefix.iter().flat_map(|prefix| prefix.0.iter()) {
            self.item(item, &mut argv, &mut env, &mut writes, depth, via);
        }
        if let Some(name) = &simple.word_or_name {
            argv.push(self.word(&name.value, depth, via));
        }
        for item in simple.suffix.iter().flat_map(|suffix| suffix.0.iter()) {
            self.item(item, &mut argv, &mut env, &mut writes, depth, via);
        }
        if argv.is_empty() {
            // Only assignments (and redirections): the variables hold for the rest of the line.
            self.assigned.extend(env);
            if !writes.is_empty() {
                self.inert_writes(writes, via);
            }
            return;
        }
        let mut seen = self.assigned.clone();
        seen.extend(env);
        self.command(argv, seen, writes, depth, via);
    }

    fn item(
        &mut self,
        item: &ast::CommandPrefixOrSuffixItem,
        argv: &mut Vec<Word>,
        env: &mut BTreeSet<String>,
        writes: &mut Vec<Word>,
        depth: usize,
        via: &[&'static str],
    ) {
        match item {
            ast::CommandPrefixOrSuffixItem::IoRedirect(redirect) => {
                self.redirect(redirect, writes, depth, via)
            }
            ast::CommandPrefixOrSuffixItem::Word(word) => {
                argv.push(self.word(&word.value, depth, via))
            }
            ast::CommandPrefixOrSuffixItem::AssignmentWord(assignment, word) => {
                if argv.is_empty() {
                    if let ast::AssignmentName::ArrayElementName(_, index) = &assignment.name {
                        let index = self.word(index, depth, via);
                        self.literal_code(&index, "an array subscript");
                        let names_variable = index.known().is_some_and(|text| {
                            text.chars().any(|c| c.is_ascii_alphabetic() || c == '_')
                        });
                        if index == Word::Unknown || names_variable {
                            self.unresolved(
                                "an array subscript bash evaluates is not known before the line runs".into(),
                            );
                        }
                    }
                    let name = assignment_name(&assignment.name);
                    self.code_variable(&name);
                    env.insert(name);
                    self.assignment_value(&assignment.value, depth, via);
                } else {
                    // `export X=$(…)`: an argument of the builtin, substitutions judged.
                    argv.push(self.word(&word.value, depth, via));
                }
            }
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, subshell) => {
                let mut inner = via.to_vec();
                inner.push("<(…)");
                self.list(&subshell.list, depth + 1, &inner);
                argv.push(Word::Unknown);
            }
        }
    }

    fn assignment_value(
        &mut self,
        value: &ast::AssignmentValue,
        depth: usize,
        via: &[&'static str],
    ) {
        let words: Vec<&ast::Word> = match value {
            ast::AssignmentValue::Scalar(word) => vec![word],
            ast::AssignmentValue::Array(items) => {
                // An indexed array's keys are arithmetic (`a=([v]=1)` evaluates `v`'s value).
                for key in items.iter().filter_map(|(key, _)| key.as_ref()) {
                    let key = self.word(&key.value, depth, via);
                    let names_variable = key.known().is_none_or(|text| {
                        text.chars().any(|c| c.is_ascii_alphabetic() || c == '_')
                    });
                    if names_variable {
                        self.unresolved(
                            "an array's key names a variable, whose value bash evaluates".into(),
                        );
                    }
                }
                items.iter().map(|(_, value)| value).collect()
            }
        };
        for word in words {
            let resolved = self.word(&word.value, depth, via);
            // A value holding code is run later by an arithmetic that names the variable.
            if let Word::Known(text) = &resolved
                && (text.contains("$(") || text.contains('`'))
            {
                self.unresolved(
                    "a variable is set to text with a substitution in it, which bash may run"
                        .into(),
                );
            }
        }
    }

    fn redirect(
        &mut self,
        redirect: &ast::IoRedirect,
        writes: &mut Vec<Word>,
        depth: usize,
        via: &[&'static str],
    ) {
        match redirect {
            ast::IoRedirect::File(_, kind, target) => {
                let writing = matches!(
                    kind,
                    ast::IoFileRedirectKind::Write
                        | ast::IoFileRedirectKind::Append
                        | ast::IoFileRedirectKind::ReadAndWrite
                        | ast::IoFileRedirectKind::Clobber
                        | ast::IoFileRedirectKind::DuplicateOutput
                );
                match target {
                    ast::IoFileRedirectTarget::Filename(word) => {
                        let word = self.word(&word.value, depth, via);
                        self.redirect_target(&word);
                        if writing {
                            push_write(writes, word);
                        }
                    }
                    ast::IoFileRedirectTarget::Fd(_) => {}
                    ast::IoFileRedirectTarget::ProcessSubstitution(_, subshell) => {
                        let mut inner = via.to_vec();
                        inner.push(">(…)");
                        self.list(&subshell.list, depth + 1, &inner);
                    }
                    ast::IoFileRedirectTarget::Duplicate(word) => {
                        let word = self.word(&word.value, depth, via);
                        let descriptor = word.known().is_some_and(|text| {
                            text == "-"
                                || text
                                    .trim_end_matches('-')
                                    .chars()
                                    .all(|c| c.is_ascii_digit())
                        });
                        if !descriptor {
                            self.redirect_target(&word);
                        }
                        if writing && !descriptor {
                            push_write(writes, word);
                        }
                    }
                }
            }
            ast::IoRedirect::HereDocument(_, doc) => {
                self.here_document(doc);
                if doc.requires_expansion {
                    match word::parse_heredoc(&doc.doc.value, &options()) {
                        Ok(pieces) => {
                            let _ = self.pieces(&doc.doc.value, &pieces, depth, via, true);
                        }
                        Err(err) => self.unresolved(format!("cannot read a here-document: {err}")),
                    }
                }
            }
            ast::IoRedirect::HereString(_, word) => {
                self.word(&word.value, depth, via);
            }
            ast::IoRedirect::OutputAndError(word, _) => {
                let word = self.word(&word.value, depth, via);
                self.redirect_target(&word);
                push_write(writes, word);
            }
        }
    }

    /// A file a redirection opens: one not known before the line runs, or one of bash's
    /// network paths (`/dev/tcp/HOST/PORT` opens a socket, reading or writing), is not judged.
    fn redirect_target(&mut self, target: &Word) {
        match target.known() {
            None => {
                self.unresolved("a redirection opens a file not known before the line runs".into())
            }
            Some(path) if path.starts_with("/dev/tcp/") || path.starts_with("/dev/udp/") => {
                self.unresolved(format!("`{path}` is a network connection bash opens"))
            }
            Some(_) => {}
        }
    }

    /// A here-document whose end the parser and bash may see in different places asks: a tag
    /// quoted in any but the plain ways, a body with a backslash-newline (bash joins it before
    /// looking for the tag), or a body line that starts with the tag.
    fn here_document(&mut self, doc: &ast::IoHereDocument) {
        let raw = doc.here_end.value.as_str();
        let plain = |tag: &str| {
            !tag.is_empty()
                && tag
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        };
        let tag = if plain(raw) {
            Some(raw)
        } else {
            [("'", "'"), ("\"", "\""), ("\\", "")]
                .iter()
                .find_map(|(open, close)| {
                    raw.strip_prefix(open)
                        .and_then(|rest| rest.strip_suffix(close))
                        .filter(|tag| plain(tag))
                })
        };
        let Some(tag) = tag else {
            return self.unresolved(format!(
                "the here-document tag `{raw}` is quoted in a way the policy does not read"
            ));
        };
        let body = doc.doc.value.as_str();
        let ends_early = body
            .lines()
            .any(|line| line.trim_start_matches('\t').starts_with(tag));
        if (doc.requires_expansion && body.contains("\\\n")) || ends_early {
            self.unresolved(format!(
                "the here-document `{tag}` may end elsewhere for bash than for the parser"
            ));
        }
    }

    /// An expansion bash evaluates as code, or through which it assigns: arithmetic naming a
    /// variable (its value is evaluated again, a subscript's `$(…)` run), indirection
    /// (`${!x}`), transformations (`${x@P}` runs a prompt's substitutions), subscripts and
    /// offsets (arithmetic again) ask; `${X:=…}` sets a variable the walk cannot follow.
    fn expansion_hazards(&mut self, source: &str, arithmetic: bool) {
        if arithmetic {
            if source.chars().any(|c| c.is_ascii_alphabetic() || c == '_') {
                self.unresolved(format!(
                    "`${source}` evaluates variables, whose values bash evaluates again"
                ));
            }
            return;
        }
        let Some(inner) = source.strip_prefix('{').and_then(|s| s.strip_suffix('}')) else {
            return;
        };
        let name_end = inner
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(inner.len());
        let operator = inner.get(name_end..).unwrap_or_default();
        if inner.starts_with('!')
            || operator.starts_with('@')
            || operator.starts_with('[')
            || (operator.starts_with(':')
                && !matches!(operator.get(1..2), Some("-" | "=" | "+" | "?")))
        {
            self.unresolved(format!("`${source}` is evaluated by bash as code"));
        }
        if operator.starts_with('=') || operator.starts_with(":=") {
            self.assigned.insert(UNKNOWN_VARIABLE.to_owned());
        }
    }

    /// A word with quotes removed, its substitutions judged as commands of their own.
    fn word(&mut self, raw: &str, depth: usize, via: &[&'static str]) -> Word {
        // Most words are plain: nothing in them quotes, expands or substitutes, so they are
        // what they say (and the word parser, with its shared cache, is not needed).
        if !raw.is_empty()
            && raw
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_./:=,+@%-".contains(&b))
        {
            return Word::Known(raw.to_owned());
        }
        match word::parse(raw, &options()) {
            Ok(pieces) => match self.pieces(raw, &pieces, depth, via, false) {
                Some(text) => Word::Known(text),
                None => Word::Unknown,
            },
            Err(err) => {
                self.unresolved(format!("cannot read the word `{raw}`: {err}"));
                Word::Unknown
            }
        }
    }

    /// The text of `pieces`, or `None` when any of them expands at run time.
    fn pieces(
        &mut self,
        raw: &str,
        pieces: &[WordPieceWithSource],
        depth: usize,
        via: &[&'static str],
        quoted: bool,
    ) -> Option<String> {
        let mut text = Some(String::new());
        let unknown = |text: &mut Option<String>| *text = None;
        // The word as brace expansion sees it: quoted parts stand in as one letter, so that
        // `{"10",curl,x}` is still a brace expansion.
        let braces = pieces
            .iter()
            .any(|piece| matches!(&piece.piece, WordPiece::Text(part) if part.contains('{')));
        if !quoted && braces {
            let skeleton: String = pieces
                .iter()
                .map(|piece| match &piece.piece {
                    WordPiece::Text(part) => part.clone(),
                    _ => "q".to_owned(),
                })
                .collect();
            if braces_expand(&skeleton) {
                text = None;
            }
        }
        for piece in pieces {
            match &piece.piece {
                WordPiece::Text(part) => {
                    // The tokenizer splits words at blanks and operators: one that kept them
                    // (a here-document it ended elsewhere than bash) was misread.
                    if !quoted && part.contains([' ', '\t', '\n', ';', '|', '&', '<', '>']) {
                        self.unresolved(format!(
                            "the parser kept shell syntax inside the word `{part}`"
                        ));
                    }
                    if !quoted && expands(part) {
                        unknown(&mut text);
                    } else if let Some(text) = &mut text {
                        text.push_str(part);
                    }
                }
                WordPiece::SingleQuotedText(part) => {
                    if let Some(text) = &mut text {
                        text.push_str(part);
                    }
                }
                WordPiece::AnsiCQuotedText(part) => {
                    if part.contains('\\') {
                        unknown(&mut text);
                    } else if let Some(text) = &mut text {
                        text.push_str(part);
                    }
                }
                WordPiece::EscapeSequence(escape) => {
                    let escaped = escape.strip_prefix('\\').unwrap_or(escape);
                    if let Some(text) = &mut text
                        && escaped != "\n"
                    {
                        text.push_str(escaped);
                    }
                }
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    match self.pieces(raw, inner, depth, via, true) {
                        Some(part) => {
                            if let Some(text) = &mut text {
                                text.push_str(&part);
                            }
                        }
                        None => unknown(&mut text),
                    }
                }
                WordPiece::CommandSubstitution(program) => {
                    let mut inner = via.to_vec();
                    inner.push("$(…)");
                    self.program(program, depth + 1, &inner);
                    unknown(&mut text);
                }
                WordPiece::BackquotedCommandSubstitution(program) => {
                    let mut inner = via.to_vec();
                    inner.push("`…`");
                    self.program(&unescape_backquoted(program, quoted), depth + 1, &inner);
                    unknown(&mut text);
                }
                WordPiece::ArithmeticExpression(expr)
                    if expr.value.contains(['\'', '"', '\\', ';', '|', '&', '\n']) =>
                {
                    // No arithmetic holds these: a shell that reads `$(( … ))` as a command
                    // substitution of a subshell when it is not arithmetic runs it.
                    let mut inner = via.to_vec();
                    inner.push("$((…))");
                    self.program(&expr.value, depth + 1, &inner);
                    unknown(&mut text);
                }
                WordPiece::ParameterExpansion(_) | WordPiece::ArithmeticExpression(_) => {
                    // Their operands may hold substitutions the walk does not take apart
                    // (the leading `$` of the expansion itself aside).
                    let source = raw
                        .get(piece.start_index.saturating_add(1)..piece.end_index)
                        .unwrap_or(raw);
                    self.expansion_hazards(
                        source,
                        matches!(piece.piece, WordPiece::ArithmeticExpression(_)),
                    );
                    if source.contains("$(")
                        || source.contains('`')
                        || source.contains("<(")
                        || source.contains(">(")
                    {
                        self.unresolved(format!(
                            "`{source}` runs a substitution inside an expansion"
                        ));
                    }
                    unknown(&mut text);
                }
                WordPiece::TildeExpansion(_) => unknown(&mut text),
            }
        }
        text
    }

    /// Judges one command, unwrapping the wrappers it starts with.
    fn command(
        &mut self,
        argv: Vec<Word>,
        env: BTreeSet<String>,
        writes: Vec<Word>,
        depth: usize,
        via: &[&'static str],
    ) {
        if self.full() {
            return;
        }
        let mut command = SimpleCommand::new(argv, env, via);
        command.writes = writes;
        let Some(program) = command.program().map(str::to_owned) else {
            self.out.commands.push(command);
            return;
        };
        if command
            .argv
            .first()
            .and_then(Word::known)
            .is_some_and(|name| self.functions.contains(name))
        {
            self.unresolved(format!(
                "`{program}` is a function the line defines; its body runs with the variables set by the time it is called"
            ));
        }
        self.runtime_code(&program, &command.argv);
        if OPAQUE_BUILTINS.contains(&program.as_str()) {
            self.unresolved(format!(
                "`{program}` changes what later commands run, or runs code the policy cannot read"
            ));
            self.out.commands.push(command);
            return;
        }
        if ASSIGNING_BUILTINS.contains(&program.as_str()) {
            for word in command.argv.iter().skip(1) {
                match word.known().and_then(|text| text.split('=').next()) {
                    Some(name) if name.starts_with('-') || name.starts_with('+') => {}
                    Some(name) => {
                        let name = name.split('[').next().unwrap_or(name);
                        self.code_variable(name);
                        self.assigned.insert(name.to_owned());
                    }
                    // `export $(…)`: a name not known before the line runs.
                    None => {
                        self.assigned.insert(UNKNOWN_VARIABLE.to_owned());
                    }
                }
            }
            command.inert = true;
            self.out.commands.push(command);
            return;
        }
        if sets_unknown_variables(&program, &command.argv) {
            self.assigned.insert(UNKNOWN_VARIABLE.to_owned());
        }
        if INERT_BUILTINS.contains(&program.as_str()) {
            command.inert = true;
            self.out.commands.push(command);
            return;
        }
        let rest: Vec<Word> = command.argv.iter().skip(1).cloned().collect();
        let unwrapped = match program.as_str() {
            "eval" => Some(Unwrap::Code(join_known(after_dashes(&rest)), "eval")),
            "trap" => match after_dashes(&rest).first() {
                Some(Word::Known(flag)) if flag.starts_with('-') => None,
                Some(code) => {
                    // The code runs later (at exit, on a signal), with what is set by then.
                    self.unresolved(
                        "`trap` runs code later, with the variables set by then".into(),
                    );
                    Some(Unwrap::Code(code.known().map(str::to_owned), "trap"))
                }
                None => None,
            },
            shell if SHELLS.contains(&shell) => shell_script(shell, &rest),
            runner if OPAQUE_RUNNERS.contains(&runner) => Some(Unwrap::Opaque(format!(
                "`{runner}` runs a command the policy does not take apart"
            ))),
            "exec" | "command" | "builtin" | "nohup" | "env" | "timeout" | "nice" | "stdbuf"
            | "setsid" | "time" | "ionice" | "xargs" | "sudo" | "doas" => {
                Some(wrapped(&program, &rest))
            }
            "find" => {
                self.find_exec(&rest, &command.env, depth, via);
                None
            }
            _ => None,
        };
        match unwrapped {
            None => self.out.commands.push(command),
            Some(Unwrap::Code(code, how)) => {
                command.wrapper = true;
                let env = command.env.clone();
                // The wrapper's own redirections apply to what it runs.
                let writes = std::mem::take(&mut command.writes);
                self.out.commands.push(command);
                self.inert_writes(writes, via);
                match code {
                    Some(code) => {
                        let mut inner = via.to_vec();
                        inner.push(how);
                        // `sh -c` runs in a shell of its own; `eval` and `trap` in this one,
                        // whose variables they set for what comes after.
                        let current_shell = how != "sh -c";
                        let saved = std::mem::replace(&mut self.assigned, env);
                        self.program(&code, depth + 1, &inner);
                        if current_shell {
                            self.assigned.extend(saved);
                        } else {
                            self.assigned = saved;
                        }
                    }
                    None => self.unresolved(format!(
                        "`{how}` runs text that is not known before the line runs"
                    )),
                }
            }
            Some(Unwrap::Command {
                argv,
                env: added,
                open_tail,
                how,
            }) => {
                command.wrapper = true;
                let mut env = command.env.clone();
                env.extend(added);
                // The wrapper's redirections are the command's it runs.
                let writes = std::mem::take(&mut command.writes);
                self.out.commands.push(command);
                if argv.is_empty() {
                    return self.inert_writes(writes, via);
                }
                if depth + 1 > MAX_DEPTH {
                    return self.unresolved(format!(
                        "commands nest more than {MAX_DEPTH} deep (sh -c, eval, $(…))"
                    ));
                }
                let mut inner = via.to_vec();
                inner.push(how);
                let before = self.out.commands.len();
                self.command(argv, env, writes, depth + 1, &inner);
                if open_tail && let Some(inner) = self.out.commands.get_mut(before) {
                    inner.open_tail = true;
                }
            }
            Some(Unwrap::Opaque(reason)) => {
                command.wrapper = true;
                self.out.commands.push(command);
                self.unresolved(reason);
            }
            Some(Unwrap::Inert) => {
                command.inert = true;
                self.out.commands.push(command);
            }
        }
    }

    /// `find … -exec cmd {} ;`: each command `find` runs, `{}` unknown.
    fn find_exec(
        &mut self,
        rest: &[Word],
        env: &BTreeSet<String>,
        depth: usize,
        via: &[&'static str],
    ) {
        if rest.contains(&Word::Unknown) {
            // A word that expands may be `-exec` and the command after it.
            return self.unresolved(
                "`find` is given a word not known before the line runs, which may be an action that runs a command".into(),
            );
        }
        let mut words = rest.iter();
        while let Some(word) = words.next() {
            let Some(action) = word.known() else { continue };
            if !matches!(action, "-exec" | "-execdir" | "-ok" | "-okdir") {
                continue;
            }
            let mut argv = Vec::new();
            let mut open_tail = false;
            for word in words.by_ref() {
                match word.known() {
                    Some(";") => break,
                    Some("+") => {
                        open_tail = true;
                        break;
                    }
                    Some(text) if text.contains("{}") => argv.push(Word::Unknown),
                    _ => argv.push(word.clone()),
                }
            }
            if argv.is_empty() {
                continue;
            }
            let mut inner = via.to_vec();
            inner.push("find -exec");
            let before = self.out.commands.len();
            self.command(argv, env.clone(), Vec::new(), depth + 1, &inner);
            if open_tail && let Some(inner) = self.out.commands.get_mut(before) {
                inner.open_tail = true;
            }
        }
    }
}

/// Variables bash runs as code, or that make a bash it starts run code: prompts and xtrace's
/// `PS4`, the startup file of a non-interactive bash (`BASH_ENV`, `ENV`), exported functions
/// (`BASH_FUNC_name%%`), options turned on from the environment. Setting one asks.
fn code_variable(name: &str) -> bool {
    matches!(
        name,
        "PS0"
            | "PS1"
            | "PS2"
            | "PS3"
            | "PS4"
            | "PROMPT_COMMAND"
            | "BASH_ENV"
            | "ENV"
            | "SHELLOPTS"
            | "BASHOPTS"
            | "BASH_XTRACEFD"
            | "EXECIGNORE"
    ) || name.starts_with("BASH_FUNC_")
}

/// Stands for a variable the walk cannot name (`export $(…)`, `read`, `${X:=…}`): every later
/// command has it set, so no rule's `env` list covers it.
const UNKNOWN_VARIABLE: &str = "*";

/// Runners the walk does not take apart: what they run is judged as not known.
const OPAQUE_RUNNERS: &[&str] = &[
    "taskset",
    "chrt",
    "flock",
    "unshare",
    "chroot",
    "prlimit",
    "strace",
    "ltrace",
    "valgrind",
    "busybox",
    "script",
    "watch",
    "su",
    "runuser",
    "setpriv",
    "systemd-run",
    "firejail",
    "nsenter",
    "ssh-agent",
    "dbus-run-session",
    "fakeroot",
    "proot",
];

/// Whether `program` with `argv` sets variables (or options that export them) the walk cannot
/// name: `read`, `mapfile`, `getopts`, `printf -v`, `wait -p`, `unset`, `set -a` / `set -k`.
fn sets_unknown_variables(program: &str, argv: &[Word]) -> bool {
    let flag = |wanted: &[&str]| {
        argv.iter().skip(1).any(|word| match word.known() {
            Some(text) => wanted.iter().any(|flag| {
                text == *flag
                    || (flag.len() == 2
                        && text.starts_with('-')
                        && !text.starts_with("--")
                        && text.contains(&flag[1..]))
            }),
            None => true,
        })
    };
    match program {
        "read" | "mapfile" | "readarray" | "getopts" | "unset" | "let" => true,
        "printf" => flag(&["-v"]),
        "wait" => flag(&["-p"]),
        "set" => flag(&["-a", "-k", "allexport", "keyword"]),
        _ => false,
    }
}

/// `--` ends a builtin's options: what follows is its operand.
fn after_dashes(words: &[Word]) -> &[Word] {
    match words.first() {
        Some(Word::Known(first)) if first == "--" => words.get(1..).unwrap_or_default(),
        _ => words,
    }
}

/// Builtins that run nothing but themselves.
const INERT_BUILTINS: &[&str] = &[
    "cd", "pwd", "true", "false", ":", "echo", "printf", "test", "[", "exit", "return", "shift",
    "set", "unset", "wait", "break", "continue",
];

enum Unwrap {
    /// Runs `argv` (with more variables set).
    Command {
        argv: Vec<Word>,
        env: BTreeSet<String>,
        open_tail: bool,
        how: &'static str,
    },
    /// Runs a line of shell code (`sh -c`, `eval`); `None` when the code is not known.
    Code(Option<String>, &'static str),
    /// Runs something the walk cannot see.
    Opaque(String),
    /// Runs nothing (`env` alone prints, `command -v` looks up).
    Inert,
}

fn join_known(words: &[Word]) -> Option<String> {
    let parts: Option<Vec<&str>> = words.iter().map(Word::known).collect();
    parts.map(|parts| parts.join(" "))
}

/// `sh [options] -c SCRIPT [name args…]`; a shell without `-c` reads a script file or stdin.
fn shell_script(shell: &str, rest: &[Word]) -> Option<Unwrap> {
    let mut words = rest.iter();
    while let Some(word) = words.next() {
        let Some(text) = word.known() else {
            return Some(Unwrap::Opaque(
                "a shell is given an option not known before the line runs".into(),
            ));
        };
        if text == "--" || !text.starts_with('-') && !text.starts_with('+') {
            return None;
        }
        if let Some(long) = text.strip_prefix("--") {
            // bash's long options that read nothing else; any other (`--rcfile FILE`,
            // `--init-file FILE`) may make the next word a file the shell runs.
            if matches!(
                long,
                "norc" | "noprofile" | "posix" | "noediting" | "verbose"
            ) {
                continue;
            }
            return Some(Unwrap::Opaque(format!(
                "`{shell} {text}` is an option the policy does not read"
            )));
        }
        if text.starts_with('-') && (text.contains('i') || text.contains('l')) {
            // An interactive or login shell reads start-up files the walk does not.
            return Some(Unwrap::Opaque(format!(
                "`{shell} {text}` reads start-up files the policy does not"
            )));
        }
        if text.starts_with('-') && text.contains('c') {
            // The shell reads options after `-c` too (`bash -c -e 'cmd'`, `-cO extglob`): the
            // script is the first word that is neither one nor an option's value.
            if text.ends_with('o') || text.ends_with('O') {
                words.next();
            }
            let mut script = words.next();
            while let Some(option) = script.and_then(Word::known) {
                if option == "--" {
                    script = words.next();
                    break;
                }
                if !(option.starts_with('-') || option.starts_with('+')) {
                    break;
                }
                if option.ends_with('o') || option.ends_with('O') {
                    words.next();
                }
                script = words.next();
            }
            let script = script.and_then(Word::known).map(str::to_owned);
            // Lines are read as bash reads them; another shell reads some differently
            // (`$'…'`, `[[`, `((` and quotes inside `${…}` are bash's alone).
            if shell != "bash"
                && script.as_deref().is_some_and(|script| {
                    script.contains("$'")
                        || script.contains("[[")
                        || script.contains("((")
                        || script.contains("${")
                })
            {
                return Some(Unwrap::Opaque(format!(
                    "`{shell} -c` reads this line otherwise than bash"
                )));
            }
            return Some(Unwrap::Code(script, "sh -c"));
        }
        if matches!(text, "-o" | "+o" | "-O" | "+O") {
            words.next();
        }
    }
    None
}

/// The command a wrapper runs, after its own options.
fn wrapped(program: &str, rest: &[Word]) -> Unwrap {
    // Each wrapper's options: those that take a value, those that take none.
    let (with_value, flags): (&[&str], &[&str]) = match program {
        "exec" => (&["-a"], &["-c", "-l"]),
        "command" => (&[], &["-p"]),
        "builtin" | "nohup" => (&[], &[]),
        "env" => (
            &["-u", "--unset", "-C", "--chdir"],
            &[
                "-i",
                "--ignore-environment",
                "-0",
                "--null",
                "-v",
                "--debug",
                "-",
            ],
        ),
        "timeout" => (
            &["-s", "--signal", "-k", "--kill-after"],
            &["--preserve-status", "--foreground", "-v", "--verbose"],
        ),
        "nice" => (&["-n", "--adjustment"], &[]),
        "stdbuf" => (&["-i", "--input", "-o", "--output", "-e", "--error"], &[]),
        "setsid" => (&[], &["-c", "--ctty", "-f", "--fork", "-w", "--wait"]),
        "time" => (
            &["-f", "--format", "-o", "--output"],
            &[
                "-p",
                "--portability",
                "-v",
                "--verbose",
                "-a",
                "--append",
                "-q",
                "--quiet",
            ],
        ),
        "ionice" => (&["-c", "--class", "-n", "--classdata"], &["-t", "--ignore"]),
        "xargs" => (
            &[
                "-a",
                "--arg-file",
                "-d",
                "--delimiter",
                "-E",
                "-I",
                "-L",
                "-n",
                "--max-args",
                "-P",
                "--max-procs",
                "-s",
                "--max-chars",
                "--process-slot-var",
            ],
            &[
                "-0",
                "--null",
                "-r",
                "--no-run-if-empty",
                "-t",
                "--verbose",
                "-p",
                "--interactive",
                "-x",
                "--exit",
                "-o",
                "--open-tty",
            ],
        ),
        "sudo" | "doas" => (
            &[
                "-u", "--user", "-g", "--group", "-C", "-D", "--chdir", "-h", "--host", "-p",
                "--prompt", "-r", "-t", "-U",
            ],
            &[
                "-E",
                "--preserve-env",
                "-H",
                "--set-home",
                "-n",
                "--non-interactive",
                "-P",
                "-S",
                "--stdin",
                "-k",
                "-b",
                "-A",
            ],
        ),
        _ => (&[], &[]),
    };
    let opaque = |why: String| Unwrap::Opaque(format!("`{program}` {why}"));
    let mut env = BTreeSet::new();
    let mut replace: Option<String> = None;
    let mut index = 0;
    while let Some(word) = rest.get(index) {
        let Some(text) = word.known() else {
            return opaque("is given an option or command not known before the line runs".into());
        };
        if text == "--" {
            index += 1;
            break;
        }
        if matches!(program, "env" | "sudo" | "doas")
            && !text.starts_with('-')
            && let Some((name, _)) = text.split_once('=')
        {
            if code_variable(name) {
                return opaque(format!("sets `{name}`, which bash runs as code"));
            }
            env.insert(name.to_owned());
            index += 1;
            continue;
        }
        if program == "nice"
            && text
                .strip_prefix('-')
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        {
            index += 1;
            continue;
        }
        if !text.starts_with('-') || text == "-" && program != "env" {
            break;
        }
        if program == "command" && matches!(text, "-v" | "-V") {
            return Unwrap::Inert;
        }
        if program == "env"
            && (text.starts_with("--split-string")
                || (text.starts_with('-') && !text.starts_with("--") && text.contains('S')))
        {
            return opaque(
                "splits a string into a command line, which the policy does not read".into(),
            );
        }
        if matches!(program, "sudo" | "doas")
            && matches!(text, "-s" | "--shell" | "-i" | "--login" | "-e" | "--edit")
        {
            return opaque("runs a shell or an editor".into());
        }
        if flags.contains(&text) {
            index += 1;
            continue;
        }
        let (option, attached) = match text.split_once('=') {
            Some((option, value)) if option.starts_with("--") => (option, Some(value.to_owned())),
            _ if !text.starts_with("--")
                && let (Some(option), Some(value)) = (text.get(..2), text.get(2..))
                && !value.is_empty()
                && with_value.contains(&option) =>
            {
                (option, Some(value.to_owned()))
            }
            _ => (text, None),
        };
        if !with_value.contains(&option) {
            return opaque(format!("has an option the policy does not know: `{text}`"));
        }
        let value = match attached {
            Some(value) => value,
            None => {
                index += 1;
                match rest.get(index).and_then(Word::known) {
                    Some(value) => value.to_owned(),
                    None => {
                        return opaque(format!(
                            "`{option}` is given a value not known before the line runs"
                        ));
                    }
                }
            }
        };
        if program == "xargs" && option == "-I" {
            replace = Some(value);
        }
        index += 1;
    }
    if program == "timeout" {
        // The duration comes before the command.
        index += 1;
    }
    let mut argv: Vec<Word> = rest.get(index..).unwrap_or_default().to_vec();
    if let Some(replace) = &replace {
        for word in &mut argv {
            if word
                .known()
                .is_some_and(|text| text.contains(replace.as_str()))
            {
                *word = Word::Unknown;
            }
        }
    }
    if argv.is_empty() {
        return match program {
            "xargs" => Unwrap::Command {
                argv: vec![Word::Known("echo".into())],
                env,
                open_tail: true,
                how: "xargs",
            },
            _ => Unwrap::Inert,
        };
    }
    Unwrap::Command {
        argv,
        env,
        open_tail: program == "xargs" && replace.is_none(),
        how: match program {
            "exec" => "exec",
            "command" => "command",
            "builtin" => "builtin",
            "nohup" => "nohup",
            "env" => "env",
            "timeout" => "timeout",
            "nice" => "nice",
            "stdbuf" => "stdbuf",
            "setsid" => "setsid",
            "time" => "time",
            "ionice" => "ionice",
            "xargs" => "xargs",
            "sudo" => "sudo",
            _ => "doas",
        },
    }
}

fn push_write(writes: &mut Vec<Word>, word: Word) {
    if !matches!(
        word.known(),
        Some("/dev/null" | "/dev/stdout" | "/dev/stderr")
    ) {
        writes.push(word);
    }
}

fn assignment_name(name: &ast::AssignmentName) -> String {
    match name {
        ast::AssignmentName::VariableName(name)
        | ast::AssignmentName::ArrayElementName(name, _) => name.clone(),
    }
}

/// The text a backquoted substitution runs: a backslash before `` ` ``, `$` or `\` (and,
/// inside double quotes, `"`) is removed, in one pass left to right as the shell does.
fn unescape_backquoted(text: &str, in_double_quotes: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('\\', Some(&next))
                if matches!(next, '`' | '$' | '\\') || (in_double_quotes && next == '"') =>
            {
                out.push(next);
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

/// Whether unquoted text expands when the line runs: a glob, or a brace expansion.
fn expands(text: &str) -> bool {
    // A tilde that expands is a piece of its own (brush reads it at a word's start); one in
    // a text piece (`HEAD~1`) is literal.
    if text.contains(['*', '?']) || text.contains("(") {
        return true;
    }
    // `[` is a pattern only with a `]` after it (`[` alone is the test builtin).
    if text
        .find('[')
        .is_some_and(|open| text[open..].contains(']'))
    {
        return true;
    }
    text.find('{').is_some_and(|open| {
        text[open..].find('}').is_some_and(|close| {
            let inside = &text[open..open + close];
            inside.contains(',') || inside.contains("..")
        })
    })
}

/// Whether `text` holds a brace expansion: `{a,b}` or `{1..3}`.
fn braces_expand(text: &str) -> bool {
    text.char_indices()
        .filter(|(_, c)| *c == '{')
        .any(|(open, _)| {
            text[open..].find('}').is_some_and(|close| {
                let inside = &text[open..open + close];
                inside.contains(',') || inside.contains("..")
            })
        })
}

/// The deepest nesting of `(` and `{` in `text`, counted without regard to quoting (so it
/// over-counts, which only makes a pathological line ask).
fn bracket_depth(text: &str) -> usize {
    let mut depth = 0usize;
    let mut deepest = 0usize;
    for byte in text.bytes() {
        match byte {
            b'(' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b')' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
#[path = "shell_tests.rs"]
mod tests;
