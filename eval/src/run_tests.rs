//! Tests of `run.rs`.

use super::super::report::tests::attempt;
use super::*;

/// A report of three attempts of one task: passed, failed, unfinished.
pub fn sample_report() -> Report {
    let attempts = vec![
        attempt("read", 1, AttemptStatus::Passed, 2),
        attempt("read", 2, AttemptStatus::Failed, 3),
        attempt("read", 3, AttemptStatus::Unfinished, 0),
    ];
    let totals = Aggregate::of(&attempts);
    Report {
        format: FORMAT,
        suite: "coding-basics".to_owned(),
        description: String::new(),
        suite_file: "/evals/basics.yaml".to_owned(),
        result_id: "20250101T000000Z-base".to_owned(),
        label: "base".to_owned(),
        variant: None,
        started_at: "2025-01-01T00:00:00Z".to_owned(),
        finished_at: "2025-01-01T00:01:00Z".to_owned(),
        endpoint: "http://127.0.0.1:7411".to_owned(),
        status: AttemptStatus::Unfinished,
        exit_code: exit_code::UNAVAILABLE,
        workspaces: Workspaces {
            root: "/ws/.airlock-eval/x".to_owned(),
            kept: "failed".to_owned(),
        },
        thresholds: vec![ThresholdCheck {
            name: "pass_rate".to_owned(),
            limit: 1.0,
            actual: Some(1.0 / 3.0),
            passed: false,
            detail: "1 of 3 attempts passed".to_owned(),
        }],
        graders: grader_summaries(&attempts),
        tasks: vec![TaskReport {
            id: "read".to_owned(),
            input: "What does mean() do?".to_owned(),
            model: "replay:c.json".to_owned(),
            policy: "risky".to_owned(),
            approver: "approve_all".to_owned(),
            repeats: 3,
            nondeterministic: false,
            nondeterministic_reasons: Vec::new(),
            graders: Vec::new(),
            summary: Aggregate::of(&attempts),
            attempts,
        }],
        totals,
    }
}

#[test]
fn labels_come_from_the_flag_or_the_variant_file() -> anyhow::Result<()> {
    assert_eq!(label(None, None)?, "base");
    assert_eq!(label(Some("gpt-5"), None)?, "gpt-5");
    assert_eq!(
        label(None, Some(Path::new("variants/strict policy.yaml")))?,
        "strict-policy"
    );
    assert!(label(Some("../x"), None).is_err());
    Ok(())
}

#[test]
fn result_directories_never_collide() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (first, id) = result_dir(dir.path(), "basics", 0, "base")?;
    assert_eq!(id, "19700101T000000Z-base");
    assert_eq!(first, dir.path().join("basics/19700101T000000Z-base"));
    let (_, again) = result_dir(dir.path(), "basics", 0, "base")?;
    assert_eq!(again, "19700101T000000Z-base-2");
    Ok(())
}

#[test]
fn scratch_must_lie_inside_a_root() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let root = std::fs::canonicalize(dir.path())?.join("root");
    std::fs::create_dir(&root)?;
    let roots = [root.to_string_lossy().into_owned()];
    assert_eq!(
        scratch_dir(None, &roots, "e", "id")?,
        root.join(".airlock-eval/id")
    );
    assert_eq!(
        scratch_dir(Some(&root.join("s")), &roots, "e", "id")?,
        root.join("s/id"),
        "each result's attempts in a directory of their own"
    );
    let Err(error) = scratch_dir(Some(&dir.path().join("outside")), &roots, "e", "id") else {
        panic!("a scratch outside the roots was accepted");
    };
    assert!(
        error
            .to_string()
            .contains("not inside the daemon's workspace roots"),
        "{error}"
    );
    let Err(error) = scratch_dir(None, &[], "http://h:1", "id") else {
        panic!("a daemon without roots was accepted");
    };
    assert!(
        error.to_string().contains("serves no workspace root"),
        "{error}"
    );
    assert!(matches!(error, EvalError::Usage(_)), "{error:?}");
    Ok(())
}

#[test]
fn the_report_round_trips_and_its_files_are_written() -> anyhow::Result<()> {
    let report = sample_report();
    let dir = tempfile::tempdir()?;
    let paths = write(dir.path(), &report)?;
    let read = super::super::report::read(&paths.report).map_err(|error| anyhow::anyhow!(error))?;
    assert_eq!(read, report);
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&paths.report)?)?;
    assert_eq!(json["tasks"][0]["attempts"][1]["status"], "failed");
    assert_eq!(json["tasks"][0]["attempts"][1]["run_id"], "run_read_2");
    assert_eq!(json["tasks"][0]["attempts"][0]["outcome"]["cost_usd"], 0.01);
    assert_eq!(
        json["tasks"][0]["attempts"][0]["trace"]["command"],
        "airlock runs trace run_read_1"
    );
    assert_eq!(json["totals"]["pass_rate"]["attempts"], 3);
    assert!(json["totals"]["pass_rate"]["ci95"]["low"].is_f64());
    assert!(std::fs::read_to_string(&paths.junit)?.starts_with("<?xml"));
    assert!(std::fs::read_to_string(&paths.summary)?.starts_with("# Eval"));
    let text = terminal_summary(&report, &paths);
    assert!(text.contains("read  1/3 33% [6%, 79%]"), "{text}");
    assert!(text.contains("unfinished (exit 69)"), "{text}");
    Ok(())
}
