//! Sessions for people and programs: the table of `airlock sessions list`, the detail view of
//! `airlock sessions show`, and the JSON of both.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Serialize;

use super::names::policy_name;
use super::run_json::BudgetsView;
use super::table::{aligned_table, or_dash};
use super::tool::field;
use super::transcript::counted;
use super::units::{format_ago, format_remaining, format_utc};
use super::views::to_json;
use crate::proto::{ApprovalPolicy, Budgets, ModelConfig, Session, SessionSettings};

const HEADER: [&str; 6] = [
    "SESSION",
    "WORKSPACE",
    "RUNS",
    "LAST ACTIVE",
    "RUNNING",
    "MODEL",
];

/// What a setting left unset means: the daemon decides.
const DAEMON_DEFAULT: &str = "the daemon's default";

/// The sessions as an aligned table with a header line, in the order given (the daemon lists
/// the most recently active first), each line at most `width` characters. `now_ms` is what
/// "last active" is counted back from. Ends with a newline.
pub fn sessions_table(sessions: &[Session], now_ms: i64, width: usize) -> String {
    let rows = sessions
        .iter()
        .map(|session| {
            [
                or_dash(&session.session_id),
                or_dash(&session.workspace),
                Cow::Owned(session.runs.to_string()),
                ago_label(session.last_active_ms, now_ms),
                Cow::Borrowed(if session.running { "yes" } else { "no" }),
                or_dash(model_name(session.settings.as_ref())),
            ]
        })
        .collect();
    aligned_table(HEADER, rows, width)
}

/// Every field of one session as `label: value` lines: where it stands, then the settings its
/// runs inherit. Ends with a newline.
pub fn session_details(session: &Session, now_ms: i64) -> String {
    let settings = session.settings.clone().unwrap_or_default();
    let mut out = String::new();
    field(&mut out, "session", &session.session_id);
    field(&mut out, "workspace", &session.workspace);
    field(&mut out, "created", &time_label(session.created_at_ms));
    let last_active = match session.last_active_ms {
        0 => "-".to_owned(),
        at => format!("{} ({})", format_utc(at), format_ago(now_ms - at)),
    };
    field(&mut out, "last active", &last_active);
    field(&mut out, "runs", &session.runs.to_string());
    field(&mut out, "last run", &session.last_run_id);
    field(
        &mut out,
        "running",
        if session.running { "yes" } else { "no" },
    );
    field(&mut out, "model", &model_label(settings.model.as_ref()));
    field(&mut out, "policy", &policy_label(&settings));
    let tools = if settings.tools.is_empty() {
        "all the daemon serves".to_owned()
    } else {
        settings.tools.join(", ")
    };
    field(&mut out, "tools", &tools);
    field(
        &mut out,
        "budgets",
        &budgets_label(
            &settings.budgets.unwrap_or_default(),
            settings.approval_timeout_ms,
        ),
    );
    field(&mut out, "instructions", settings.instructions.trim_end());
    let rules = settings
        .rules
        .lines()
        .filter(|line| line.trim() == "[[rule]]")
        .count();
    if rules > 0 {
        field(
            &mut out,
            "rules",
            &format!(
                "{rules} of its own (airlock policy rules --session {})",
                session.session_id
            ),
        );
    }
    // A map arrives in no order; sorted, the same session always reads the same.
    let labels: BTreeMap<&str, &str> = session
        .labels
        .iter()
        .map(|(key, value)| (key.as_str(), value.as_str()))
        .collect();
    let labels: Vec<String> = labels
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    field(&mut out, "labels", &labels.join(", "));
    out
}

/// One session as an indented JSON document.
pub fn session_json(session: &Session) -> String {
    to_json(&SessionView::from(session))
}

/// `{"sessions": [...]}`, each session as [`session_json`] prints it.
pub fn sessions_json(sessions: &[Session]) -> String {
    #[derive(Serialize)]
    struct SessionsView<'a> {
        sessions: Vec<SessionView<'a>>,
    }
    to_json(&SessionsView {
        sessions: sessions.iter().map(SessionView::from).collect(),
    })
}

fn model_name(settings: Option<&SessionSettings>) -> &str {
    settings
        .and_then(|settings| settings.model.as_ref())
        .map_or("", |model| model.model.as_str())
}

fn model_label(model: Option<&ModelConfig>) -> String {
    match model {
        Some(model) if !model.model.is_empty() => {
            let mut label = model.model.clone();
            if !model.script.is_empty() {
                label.push_str(&format!(" (a script of {} bytes)", model.script.len()));
            }
            label
        }
        _ => DAEMON_DEFAULT.to_owned(),
    }
}

fn policy_label(settings: &SessionSettings) -> String {
    let mut label = if settings.approval_policy == ApprovalPolicy::Unspecified as i32 {
        DAEMON_DEFAULT.to_owned()
    } else {
        policy_name(settings.approval_policy).to_lowercase()
    };
    if settings.stop_on_denial {
        label.push_str(", stop on denial");
    }
    label
}

/// The limits that are set, in words: `20 steps, 5000 tokens, approvals wait 1m 30s`.
fn budgets_label(budgets: &Budgets, approval_timeout_ms: u64) -> String {
    let mut parts = Vec::new();
    let mut count = |value: u64, noun: &str| {
        if value > 0 {
            parts.push(counted(value, noun));
        }
    };
    count(budgets.max_steps.into(), "step");
    count(budgets.max_tokens, "token");
    count(budgets.max_tool_calls.into(), "tool call");
    count(budgets.max_repeated_errors.into(), "repeated error");
    count(budgets.max_repeated_calls.into(), "repeated call");
    count(budgets.max_idle_steps.into(), "idle step");
    if budgets.context_tokens > 0 {
        parts.push(format!("{} tokens of context", budgets.context_tokens));
    }
    let duration = |millis: u64| format_remaining(i64::try_from(millis).unwrap_or(i64::MAX));
    if budgets.max_wall_time_ms > 0 {
        parts.push(format!(
            "{} of wall time",
            duration(budgets.max_wall_time_ms)
        ));
    }
    if approval_timeout_ms > 0 {
        parts.push(format!("approvals wait {}", duration(approval_timeout_ms)));
    }
    if parts.is_empty() {
        "the daemon's defaults".to_owned()
    } else {
        parts.join(", ")
    }
}

fn ago_label(unix_millis: i64, now_ms: i64) -> Cow<'static, str> {
    if unix_millis == 0 {
        Cow::Borrowed("-")
    } else {
        Cow::Owned(format_ago(now_ms - unix_millis))
    }
}

fn time_label(unix_millis: i64) -> Cow<'static, str> {
    if unix_millis == 0 {
        Cow::Borrowed("-")
    } else {
        Cow::Owned(format_utc(unix_millis))
    }
}

#[derive(Serialize)]
struct SessionView<'a> {
    session_id: &'a str,
    workspace: &'a str,
    labels: BTreeMap<&'a str, &'a str>,
    created_at_ms: i64,
    settings: Option<SettingsView<'a>>,
    runs: u32,
    last_run_id: &'a str,
    last_active_ms: i64,
    running: bool,
}

#[derive(Serialize)]
struct SettingsView<'a> {
    model: Option<ModelView<'a>>,
    approval_policy: Cow<'static, str>,
    budgets: Option<BudgetsView>,
    tools: &'a [String],
    instructions: &'a str,
    approval_timeout_ms: u64,
    stop_on_denial: bool,
}

#[derive(Serialize)]
struct ModelView<'a> {
    model: &'a str,
    script: &'a str,
    max_output_tokens: u32,
    temperature: Option<f32>,
}

impl<'a> From<&'a Session> for SessionView<'a> {
    fn from(session: &'a Session) -> Self {
        Self {
            session_id: &session.session_id,
            workspace: &session.workspace,
            labels: session
                .labels
                .iter()
                .map(|(key, value)| (key.as_str(), value.as_str()))
                .collect(),
            created_at_ms: session.created_at_ms,
            settings: session.settings.as_ref().map(SettingsView::from),
            runs: session.runs,
            last_run_id: &session.last_run_id,
            last_active_ms: session.last_active_ms,
            running: session.running,
        }
    }
}

impl<'a> From<&'a SessionSettings> for SettingsView<'a> {
    fn from(settings: &'a SessionSettings) -> Self {
        Self {
            model: settings.model.as_ref().map(|model| ModelView {
                model: &model.model,
                script: &model.script,
                max_output_tokens: model.max_output_tokens,
                temperature: model.temperature,
            }),
            approval_policy: policy_name(settings.approval_policy),
            budgets: settings.budgets.as_ref().map(BudgetsView::from),
            tools: &settings.tools,
            instructions: &settings.instructions,
            approval_timeout_ms: settings.approval_timeout_ms,
            stop_on_denial: settings.stop_on_denial,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// 2025-02-01T00:00:00Z.
    const NOW: i64 = 1_738_368_000_000;

    fn session() -> Session {
        Session {
            session_id: "ses_01".to_owned(),
            workspace: "/srv/demo".to_owned(),
            labels: [("team", "core"), ("ci", "yes")]
                .into_iter()
                .map(|(key, value)| (key.to_owned(), value.to_owned()))
                .collect(),
            created_at_ms: NOW - 86_400_000,
            settings: Some(SessionSettings {
                model: Some(ModelConfig {
                    model: "openai:gpt-4.1".to_owned(),
                    ..ModelConfig::default()
                }),
                approval_policy: ApprovalPolicy::Never as i32,
                budgets: Some(Budgets {
                    max_steps: 20,
                    context_tokens: 8000,
                    ..Budgets::default()
                }),
                tools: vec!["read_file".to_owned(), "grep".to_owned()],
                instructions: "be brief".to_owned(),
                approval_timeout_ms: 90_000,
                stop_on_denial: true,
                rules: String::new(),
            }),
            runs: 3,
            last_run_id: "run_03".to_owned(),
            last_active_ms: NOW - 5 * 60_000,
            running: false,
        }
    }

    #[test]
    fn the_table_shows_runs_activity_and_model_one_session_a_line() {
        let idle = Session {
            session_id: "ses_02".to_owned(),
            created_at_ms: NOW - 3 * 86_400_000,
            last_active_ms: NOW - 3 * 86_400_000,
            running: true,
            ..Session::default()
        };
        let table = sessions_table(&[session(), idle], NOW, 120);
        assert_eq!(
            table,
            "SESSION  WORKSPACE  RUNS  LAST ACTIVE  RUNNING  MODEL\n\
             ses_01   /srv/demo  3     5m ago       no       openai:gpt-4.1\n\
             ses_02   -          0     3d ago       yes      -\n"
        );
    }

    #[test]
    fn details_show_where_it_stands_then_what_its_runs_inherit() {
        assert_eq!(
            session_details(&session(), NOW),
            "session:      ses_01\n\
             workspace:    /srv/demo\n\
             created:      2025-01-31T00:00:00Z\n\
             last active:  2025-01-31T23:55:00Z (5m ago)\n\
             runs:         3\n\
             last run:     run_03\n\
             running:      no\n\
             model:        openai:gpt-4.1\n\
             policy:       never, stop on denial\n\
             tools:        read_file, grep\n\
             budgets:      20 steps, 8000 tokens of context, approvals wait 1m 30s\n\
             instructions: be brief\n\
             labels:       ci=yes, team=core\n"
        );
    }

    #[test]
    fn unset_settings_say_the_daemon_decides() {
        let bare = Session {
            session_id: "ses_03".to_owned(),
            ..Session::default()
        };
        let details = session_details(&bare, NOW);
        for line in [
            "model:        the daemon's default\n",
            "policy:       the daemon's default\n",
            "tools:        all the daemon serves\n",
            "budgets:      the daemon's defaults\n",
            "last run:     -\n",
        ] {
            assert!(details.contains(line), "{line:?} missing from:\n{details}");
        }
    }

    #[test]
    fn json_has_the_proto_names_sorted_labels_and_named_policies() -> anyhow::Result<()> {
        let value: Value = serde_json::from_str(&session_json(&session()))?;
        assert_eq!(value["session_id"], "ses_01");
        assert_eq!(value["labels"], json!({"ci": "yes", "team": "core"}));
        assert_eq!(value["settings"]["approval_policy"], "NEVER");
        assert_eq!(value["settings"]["model"]["model"], "openai:gpt-4.1");
        assert_eq!(value["settings"]["model"]["temperature"], Value::Null);
        assert_eq!(value["settings"]["budgets"]["context_tokens"], 8000);
        assert_eq!(value["runs"], 3);
        assert_eq!(value["last_run_id"], "run_03");
        assert_eq!(value["running"], false);

        let listed: Value = serde_json::from_str(&sessions_json(&[session()]))?;
        assert_eq!(listed["sessions"][0], value);
        let empty: Value = serde_json::from_str(&sessions_json(&[]))?;
        assert_eq!(empty, json!({"sessions": []}));
        Ok(())
    }
}
