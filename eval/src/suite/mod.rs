//! Loading a suite: the YAML read with every error naming its place (`tasks[2].graders[0]:
//! unknown grader …`), then every task checked and resolved — its settings merged (defaults,
//! then the task's own, then a variant's over both), its model's file and its workspace
//! fixture read and checked, its graders built — so that nothing starts until the whole suite
//! is known to be usable. Paths are relative to the file that names them: the suite's
//! directory, or a variant's.

mod spec;

pub use crate::model::Model;
pub use crate::problem::Problem;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use airlock_client::proto::{ApprovalPolicy, Budgets};
use serde::de::DeserializeOwned;

use super::approver::Approver;
use super::fixture::{Fixture, FixtureError};
use super::grader::Grader;
use super::price::Prices;
use crate::error::EvalError;
use spec::{BudgetsSpec, SettingsSpec, SuiteSpec};

pub use spec::ThresholdsSpec as Thresholds;

/// How long an attempt may take when the suite does not say.
const DEFAULT_TIMEOUT_S: u64 = 600;

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

/// Everything wrong with a suite (and its variant), each with the file it is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteError {
    pub problems: Vec<(PathBuf, Problem)>,
}

impl fmt::Display for SuiteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self
            .problems
            .iter()
            .map(|(file, problem)| format!("{}: {problem}", file.display()))
            .collect();
        f.write_str(&lines.join("\n"))
    }
}

impl std::error::Error for SuiteError {}

impl From<SuiteError> for EvalError {
    /// A file that cannot be read is a missing input (66); anything else the suite's mistake
    /// (64).
    fn from(error: SuiteError) -> EvalError {
        if error.problems.iter().any(|(_, problem)| problem.unreadable) {
            EvalError::NoInput(error.to_string())
        } else {
            EvalError::Usage(error.to_string())
        }
    }
}

/// A suite, checked and ready to run.
pub struct Suite {
    pub name: String,
    pub description: String,
    /// The suite file, as given.
    pub file: PathBuf,
    pub variant: Option<PathBuf>,
    pub prices: Prices,
    pub thresholds: Thresholds,
    pub tasks: Vec<Task>,
}

pub struct Task {
    pub id: String,
    pub input: String,
    /// `None`: the task starts in an empty directory.
    pub fixture: Option<Fixture>,
    pub settings: Settings,
    pub graders: Vec<Box<dyn Grader>>,
}

impl Task {
    /// Why two attempts of the task may end differently: more than one repeat (which is
    /// asked for when they may), a judge model, a live model.
    pub fn nondeterministic(&self) -> Vec<String> {
        let mut reasons = Vec::new();
        if self.settings.repeats > 1 {
            reasons.push(format!("repeats: {}", self.settings.repeats));
        }
        if self.graders.iter().any(|grader| !grader.deterministic()) {
            reasons.push("llm_judge".to_owned());
        }
        if self.settings.model.live() {
            reasons.push(format!("live model {}", self.settings.model.name));
        }
        reasons
    }
}

/// A task's settings, merged and resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub model: Model,
    pub policy: ApprovalPolicy,
    pub budgets: Budgets,
    pub approver: Approver,
    pub repeats: u32,
    pub tools: Vec<String>,
    pub instructions: String,
    pub stop_on_denial: bool,
    pub timeout: Duration,
}

/// What the command line adds to a suite.
#[derive(Debug, Default)]
pub struct LoadOptions<'a> {
    /// `--variant FILE`: settings over every task's.
    pub variant: Option<&'a Path>,
    /// `--repeats N`: over everything.
    pub repeats: Option<u32>,
    /// `--task ID`: only these tasks (all when empty).
    pub tasks: &'a [String],
}

/// The problems met so far, each with its file.
struct Problems {
    file: PathBuf,
    found: Vec<(PathBuf, Problem)>,
}

impl Problems {
    fn add(&mut self, problem: Problem) {
        self.found.push((self.file.clone(), problem));
    }

    fn take<T>(&mut self, result: Result<T, Problem>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(problem) => {
                self.add(problem);
                None
            }
        }
    }
}

/// The directory paths in `file` are relative to.
fn base_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    }
}

fn read(file: &Path) -> Result<String, SuiteError> {
    std::fs::read_to_string(file).map_err(|error| SuiteError {
        problems: vec![(
            file.to_owned(),
            Problem::unreadable("", format!("cannot read the file: {error}")),
        )],
    })
}

/// Reads YAML into `T`, an error saying where in the document it is wrong.
fn parse<T: DeserializeOwned>(text: &str) -> Result<T, Problem> {
    let deserializer = serde_norway::Deserializer::from_str(text);
    serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let path = error.path().to_string();
        let field = if path == "." { String::new() } else { path };
        let message = error.into_inner().to_string();
        let message = without_place(&message, &field).to_owned();
        Problem::invalid(field, message)
    })
}

/// The YAML parser's message without the place it starts with (`tasks[1]: …`), which the
/// problem's own field already says (at least as precisely).
fn without_place<'a>(message: &'a str, field: &str) -> &'a str {
    match message.split_once(": ") {
        Some((place, rest)) if !place.is_empty() && field.starts_with(place) => rest,
        _ => message,
    }
}

/// Loads and checks the suite in `file`.
pub fn load(file: &Path, options: &LoadOptions<'_>) -> Result<Suite, SuiteError> {
    let text = read(file)?;
    let variant = match options.variant {
        Some(path) => Some((path, read(path)?)),
        None => None,
    };
    parse_suite(
        file,
        &text,
        variant.as_ref().map(|(path, text)| (*path, text.as_str())),
        options,
    )
}

/// A settings layer, its model resolved.
struct Layer {
    spec: SettingsSpec,
    model: Option<Model>,
}

impl Layer {
    /// The layer of `spec`, its model's file read unless a layer above gives the model
    /// (`overridden`): a variant that swaps the model needs no file of the one it replaces
    /// — recording the cassettes a suite names is such a run.
    fn new(
        spec: SettingsSpec,
        base: &Path,
        field: &str,
        overridden: bool,
        problems: &mut Problems,
    ) -> Layer {
        let model = spec
            .model
            .as_ref()
            .filter(|_| !overridden)
            .and_then(|model| {
                problems.take(
                    model
                        .resolve(base, "model")
                        .map_err(|problem| problem.within(field)),
                )
            });
        Layer { spec, model }
    }
}

/// Checks a suite read from `text` (its file `file`), with a variant's text when given.
pub fn parse_suite(
    file: &Path,
    text: &str,
    variant: Option<(&Path, &str)>,
    options: &LoadOptions<'_>,
) -> Result<Suite, SuiteError> {
    let fail = |file: &Path, problem: Problem| SuiteError {
        problems: vec![(file.to_owned(), problem)],
    };
    let spec: SuiteSpec = parse(text).map_err(|problem| fail(file, problem))?;
    let variant_spec: Option<(&Path, SettingsSpec)> = match variant {
        Some((path, text)) => Some((path, parse(text).map_err(|problem| fail(path, problem))?)),
        None => None,
    };
    let base = base_of(file);
    let mut problems = Problems {
        file: file.to_owned(),
        found: Vec::new(),
    };
    check_name(&spec.suite, &mut problems);
    let prices = Prices(spec.prices);
    if let Some(model) = prices.invalid() {
        problems.add(Problem::invalid(
            format!("prices.{model}"),
            "prices are USD per million tokens: numbers, 0 or more",
        ));
    }
    check_thresholds(&spec.thresholds, &mut problems);
    if spec.tasks.is_empty() {
        problems.add(Problem::invalid("tasks", "the suite has no tasks"));
    }
    let variant_model = variant_spec
        .as_ref()
        .is_some_and(|(_, settings)| settings.model.is_some());
    let defaults = Layer::new(
        spec.defaults,
        &base,
        "defaults",
        variant_model,
        &mut problems,
    );
    let variant_layer = variant_spec.map(|(path, settings)| {
        problems.file = path.to_owned();
        let layer = Layer::new(settings, &base_of(path), "", false, &mut problems);
        problems.file = file.to_owned();
        layer
    });

    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut tasks = Vec::new();
    for (index, mut task) in spec.tasks.into_iter().enumerate() {
        let field = format!("tasks[{index}]");
        check_id(&task.id, index, &mut seen, &field, &mut problems);
        if task.input.trim().is_empty() {
            problems.add(Problem::invalid(
                format!("{field}.input"),
                "the input is empty",
            ));
        }
        let own = Layer::new(task.settings(), &base, &field, variant_model, &mut problems);
        let layers: Vec<&Layer> = [Some(&defaults), Some(&own), variant_layer.as_ref()]
            .into_iter()
            .flatten()
            .collect();
        let settings = problems.take(merge(&layers, options.repeats).map_err(|p| p.within(&field)));
        let fixture = task.workspace.as_ref().and_then(|workspace| {
            problems.take(
                Fixture::open(&base.join(workspace)).map_err(|error| match error {
                    FixtureError::Unreadable(message) => {
                        Problem::unreadable(format!("{field}.workspace"), message)
                    }
                    FixtureError::Refused(message) => {
                        Problem::invalid(format!("{field}.workspace"), message)
                    }
                }),
            )
        });
        if task.graders.is_empty() {
            problems.add(Problem::invalid(
                format!("{field}.graders"),
                "no graders: say what a passing attempt does",
            ));
        }
        let graders: Vec<Box<dyn Grader>> = std::mem::take(&mut task.graders)
            .into_iter()
            .enumerate()
            .filter_map(|(number, grader)| {
                let place = format!("{field}.graders[{number}]");
                problems.take(
                    grader
                        .build(&base)
                        .map_err(|problem| problem.within(&place)),
                )
            })
            .collect();
        if let Some(settings) = settings {
            tasks.push(Task {
                id: task.id,
                input: task.input,
                fixture,
                settings,
                graders,
            });
        }
    }
    let tasks = select(tasks, options.tasks, &mut problems);
    if !problems.found.is_empty() {
        return Err(SuiteError {
            problems: problems.found,
        });
    }
    Ok(Suite {
        name: spec.suite,
        description: spec.description,
        file: file.to_owned(),
        variant: variant.map(|(path, _)| path.to_owned()),
        prices,
        thresholds: spec.thresholds,
        tasks,
    })
}

/// Whether `name` may name a directory of results: letters, digits, `.`, `_`, `-`, not
/// starting with a dot.
pub fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

fn check_name(name: &str, problems: &mut Problems) {
    if !safe_name(name) {
        problems.add(Problem::invalid(
            "suite",
            format!(
                "`{name}` cannot name the suite's results directory: use letters, digits, \
                 `.`, `_` and `-`"
            ),
        ));
    }
}

fn check_thresholds(thresholds: &Thresholds, problems: &mut Problems) {
    if thresholds
        .pass_rate
        .is_some_and(|rate| !(0.0..=1.0).contains(&rate))
    {
        problems.add(Problem::invalid(
            "thresholds.pass_rate",
            "a pass rate is between 0 and 1",
        ));
    }
    if thresholds
        .max_cost_usd
        .is_some_and(|usd| !(usd.is_finite() && usd >= 0.0))
    {
        problems.add(Problem::invalid(
            "thresholds.max_cost_usd",
            "a cost is a number, 0 or more",
        ));
    }
}

fn check_id(
    id: &str,
    index: usize,
    seen: &mut BTreeMap<String, usize>,
    field: &str,
    problems: &mut Problems,
) {
    let well_formed = !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-'));
    if !well_formed {
        problems.add(Problem::invalid(
            format!("{field}.id"),
            format!("`{id}` is not a task id: use a-z, 0-9, `_` and `-`"),
        ));
    } else if let Some(first) = seen.get(id) {
        problems.add(Problem::invalid(
            format!("{field}.id"),
            format!("`{id}` is already the id of tasks[{first}]"),
        ));
    } else {
        seen.insert(id.to_owned(), index);
    }
}

/// The settings of `layers` (lowest first), each set field of a higher layer winning.
fn merge(layers: &[&Layer], repeats: Option<u32>) -> Result<Settings, Problem> {
    fn pick<T: Clone>(layers: &[&Layer], get: impl Fn(&SettingsSpec) -> Option<&T>) -> Option<T> {
        layers
            .iter()
            .rev()
            .find_map(|layer| get(&layer.spec).cloned())
    }
    let model = layers
        .iter()
        .rev()
        .find_map(|layer| layer.model.clone())
        .ok_or_else(|| {
            Problem::invalid(
                "model",
                "no model: give the task or `defaults` a model (\"openai:MODEL\", {scripted: \
                 FILE}, {replay: FILE})",
            )
        })?;
    let budgets = layers
        .iter()
        .filter_map(|layer| layer.spec.budgets.as_ref())
        .fold(BudgetsSpec::default(), |below, above| above.over(&below));
    let repeats = repeats
        .or_else(|| pick(layers, |spec| spec.repeats.as_ref()))
        .unwrap_or(1);
    if repeats == 0 {
        return Err(Problem::invalid("repeats", "at least 1"));
    }
    let timeout_s = pick(layers, |spec| spec.timeout_s.as_ref()).unwrap_or(DEFAULT_TIMEOUT_S);
    if timeout_s == 0 {
        return Err(Problem::invalid("timeout_s", "at least 1 second"));
    }
    Ok(Settings {
        model,
        // As `airlock run`: what is risky is asked, and the approver answers.
        policy: pick(layers, |spec| spec.policy.as_ref())
            .map_or(ApprovalPolicy::Risky, ApprovalPolicy::from),
        budgets: budgets.budgets(),
        approver: pick(layers, |spec| spec.approver.as_ref()).unwrap_or_default(),
        repeats,
        tools: pick(layers, |spec| spec.tools.as_ref()).unwrap_or_default(),
        instructions: pick(layers, |spec| spec.instructions.as_ref()).unwrap_or_default(),
        stop_on_denial: pick(layers, |spec| spec.stop_on_denial.as_ref()).unwrap_or(false),
        timeout: Duration::from_secs(timeout_s),
    })
}

/// The tasks `--task` names, in the suite's order; all when it names none.
fn select(tasks: Vec<Task>, wanted: &[String], problems: &mut Problems) -> Vec<Task> {
    if wanted.is_empty() {
        return tasks;
    }
    for id in wanted {
        if !tasks.iter().any(|task| &task.id == id) {
            let ids: Vec<&str> = tasks.iter().map(|task| task.id.as_str()).collect();
            problems.add(Problem::invalid(
                "",
                format!(
                    "--task {id}: no task has this id; the tasks are: {}",
                    ids.join(", ")
                ),
            ));
        }
    }
    tasks
        .into_iter()
        .filter(|task| wanted.contains(&task.id))
        .collect()
}

#[cfg(test)]
mod tests;
