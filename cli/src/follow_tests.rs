//! Tests of `follow.rs`.

use airlock_client::proto::{
    ApprovalRequested, ApprovalResolved, Decision, RunFinished, StepStarted, StopReason,
};

use super::*;

fn event(seq: u64, kind: Event) -> RunEvent {
    RunEvent {
        run_id: "run_1".to_owned(),
        seq,
        step_id: String::new(),
        time_ms: 0,
        turn_id: String::new(),
        delta: false,
        event: Some(kind),
    }
}

fn requested(seq: u64, approval_id: &str) -> RunEvent {
    event(
        seq,
        Event::ApprovalRequested(ApprovalRequested {
            request: Some(ApprovalRequest {
                approval_id: approval_id.to_owned(),
                tool: "write_file".to_owned(),
                digest: format!("digest-of-{approval_id}"),
                ..ApprovalRequest::default()
            }),
        }),
    )
}

fn resolved(seq: u64, approval_id: &str, by: &str) -> RunEvent {
    event(
        seq,
        Event::ApprovalResolved(ApprovalResolved {
            approval_id: approval_id.to_owned(),
            decision: Decision::Deny as i32,
            decided_by: by.to_owned(),
            ..ApprovalResolved::default()
        }),
    )
}

fn follower(answer_from: u64, on_interrupt: OnInterrupt, stdin: &[u8]) -> anyhow::Result<Follower> {
    let mut follower = Follower::new(
        FollowOptions {
            json: false,
            answer_from,
            on_interrupt,
            input: None,
        },
        false,
    );
    follower.input = Some(Input::from_bytes(stdin)?);
    Ok(follower)
}

/// Feeds `event` as the loop does: handled, then a question asked if one is due.
fn feed(
    follower: &mut Follower,
    event: &RunEvent,
    out: &mut Output<Vec<u8>, Vec<u8>>,
) -> anyhow::Result<Option<u8>> {
    let code = follower.on_event(event, out)?;
    follower.ask_if_due(event.seq, out)?;
    Ok(code)
}

async fn answer(
    follower: &mut Follower,
    out: &mut Output<Vec<u8>, Vec<u8>>,
) -> anyhow::Result<Option<ApprovalDecision>> {
    let line = next_line(&mut follower.question).await;
    Ok(follower.on_line(line, out)?)
}

fn stderr(out: Output<Vec<u8>, Vec<u8>>) -> anyhow::Result<String> {
    Ok(String::from_utf8(out.into_inner().1)?)
}

#[tokio::test]
async fn a_waiting_request_is_asked_and_answered_with_its_digest() -> anyhow::Result<()> {
    let mut follower = follower(0, OnInterrupt::Cancel, b"y\n")?;
    let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
    feed(&mut follower, &requested(1, "apr_1"), &mut out)?;
    let decision = answer(&mut follower, &mut out).await?;
    assert_eq!(
        decision,
        Some(ApprovalDecision {
            approval_id: "apr_1".to_owned(),
            decision: Decision::ApproveOnce as i32,
            reason: String::new(),
            digest: "digest-of-apr_1".to_owned(),
            grant_prefix: Vec::new(),
        })
    );
    // Not asked again while the resolution is on its way.
    follower.ask_if_due(1, &mut out)?;
    assert!(follower.question.is_none());
    assert_eq!(stderr(out)?, format!("{RUN_PROMPT}y\n"));
    Ok(())
}

#[tokio::test]
async fn requests_in_the_replayed_past_are_asked_only_if_still_waiting() -> anyhow::Result<()> {
    let mut follower = follower(4, OnInterrupt::Detach, b"n\n")?;
    let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
    feed(&mut follower, &requested(1, "apr_old"), &mut out)?;
    assert!(follower.question.is_none(), "asked during the replay");
    feed(
        &mut follower,
        &resolved(2, "apr_old", "run client"),
        &mut out,
    )?;
    feed(&mut follower, &requested(3, "apr_new"), &mut out)?;
    assert!(follower.question.is_none(), "asked before catching up");
    feed(
        &mut follower,
        &event(4, Event::StepStarted(StepStarted { index: 2 })),
        &mut out,
    )?;
    let Some(question) = &follower.question else {
        panic!("the request still waiting after the replay was not asked");
    };
    assert_eq!(question.approval_id(), "apr_new");
    let decision = answer(&mut follower, &mut out).await?;
    assert_eq!(
        decision.map(|decision| decision.decision),
        Some(Decision::Deny as i32)
    );
    Ok(())
}

#[tokio::test]
async fn a_request_resolved_elsewhere_takes_its_question_back() -> anyhow::Result<()> {
    let mut follower = follower(0, OnInterrupt::Cancel, b"")?;
    let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
    feed(&mut follower, &requested(1, "apr_1"), &mut out)?;
    assert!(follower.question.is_some());
    feed(&mut follower, &resolved(2, "apr_1", "approver"), &mut out)?;
    assert!(follower.question.is_none());
    assert!(follower.waiting.is_none());
    assert_eq!(stderr(out)?, format!("{RUN_PROMPT}(resolved: approver)\n"));
    Ok(())
}

#[tokio::test]
async fn the_first_ctrl_c_cancels_and_withdraws_the_question_the_second_exits() -> anyhow::Result<()>
{
    let mut follower = follower(0, OnInterrupt::Cancel, b"")?;
    let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
    feed(&mut follower, &requested(1, "apr_1"), &mut out)?;
    assert_eq!(
        follower.on_interrupt("run_1", 1, &mut out)?,
        Interrupted::Cancel
    );
    assert!(follower.question.is_none());
    // Cancelling: nothing more is asked.
    feed(&mut follower, &requested(2, "apr_2"), &mut out)?;
    assert!(follower.question.is_none());
    assert_eq!(
        follower.on_interrupt("run_1", 2, &mut out)?,
        Interrupted::Exit(exit_code::INTERRUPTED)
    );
    assert_eq!(
        stderr(out)?,
        format!("{RUN_PROMPT}(cancelling)\nairlock: interrupted\n")
    );
    Ok(())
}

#[tokio::test]
async fn ctrl_c_while_attached_detaches() -> anyhow::Result<()> {
    let mut follower = follower(0, OnInterrupt::Detach, b"")?;
    let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
    assert_eq!(
        follower.on_interrupt("run_1", 7, &mut out)?,
        Interrupted::Exit(exit_code::INTERRUPTED)
    );
    assert_eq!(
        stderr(out)?,
        "airlock: detached from run_1 after event 7; it goes on in the daemon\n"
    );
    Ok(())
}

#[tokio::test]
async fn the_run_s_end_gives_the_exit_code_and_prints_the_stop() -> anyhow::Result<()> {
    for (reason, code) in [
        (StopReason::Final, 0),
        (StopReason::PermissionDenied, 3),
        (StopReason::MaxSteps, 6),
        (StopReason::Cancelled, 130),
        (StopReason::ModelError, 69),
    ] {
        let mut follower = follower(0, OnInterrupt::Cancel, b"")?;
        let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
        let finished = event(
            9,
            Event::RunFinished(RunFinished {
                reason: reason as i32,
                final_text: "all done".to_owned(),
                ..RunFinished::default()
            }),
        );
        assert_eq!(
            feed(&mut follower, &finished, &mut out)?,
            Some(code),
            "{reason:?}"
        );
        let stdout = String::from_utf8(out.into_inner().0)?;
        assert!(
            stdout.contains(&format!(
                "\nstop: {}\n",
                reason.as_str_name().trim_start_matches("STOP_REASON_")
            )),
            "{stdout}"
        );
        assert!(stdout.ends_with("\nall done\n"), "{stdout}");
    }
    Ok(())
}

#[tokio::test]
async fn streamed_text_shows_as_it_comes_and_once() -> anyhow::Result<()> {
    use airlock_client::proto::{ModelText, ModelTextDelta, ToolCallProposed};
    let mut follower = follower(0, OnInterrupt::Cancel, b"")?;
    let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
    let delta = |text: &str| RunEvent {
        delta: true,
        ..event(
            3,
            Event::TextDelta(ModelTextDelta {
                text: text.to_owned(),
            }),
        )
    };
    feed(&mut follower, &delta("Let me "), &mut out)?;
    feed(&mut follower, &delta("read it."), &mut out)?;
    let committed = event(
        3,
        Event::ModelText(ModelText {
            text: "Let me read it.".to_owned(),
        }),
    );
    feed(&mut follower, &committed, &mut out)?;
    // The line is ended as soon as the text is committed, not when more comes.
    assert_eq!(
        String::from_utf8_lossy(&out.into_inner().0),
        "model: Let me read it.\n"
    );

    let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
    let proposed = event(
        4,
        Event::ToolCallProposed(ToolCallProposed {
            tool: "read_file".to_owned(),
            arguments_json: "{}".to_owned(),
            ..ToolCallProposed::default()
        }),
    );
    feed(&mut follower, &proposed, &mut out)?;
    assert_eq!(
        String::from_utf8_lossy(&out.into_inner().0),
        "→ read_file {}\n"
    );
    Ok(())
}

#[tokio::test]
async fn json_mode_prints_deltas_as_their_own_kind() -> anyhow::Result<()> {
    use airlock_client::proto::ModelTextDelta;
    let mut follower = Follower::new(
        FollowOptions {
            json: true,
            answer_from: 0,
            on_interrupt: OnInterrupt::Cancel,
            input: None,
        },
        false,
    );
    let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
    let delta = RunEvent {
        delta: true,
        ..event(
            2,
            Event::TextDelta(ModelTextDelta {
                text: "Hi".to_owned(),
            }),
        )
    };
    follower.on_event(&delta, &mut out)?;
    let line: serde_json::Value = serde_json::from_slice(&out.into_inner().0)?;
    assert_eq!(line["delta"], true);
    assert_eq!(line["text_delta"]["text"], "Hi");
    Ok(())
}

#[tokio::test]
async fn json_mode_prints_one_line_per_event() -> anyhow::Result<()> {
    let mut follower = Follower::new(
        FollowOptions {
            json: true,
            answer_from: 0,
            on_interrupt: OnInterrupt::Cancel,
            input: None,
        },
        true,
    );
    assert!(
        !follower.show_progress,
        "progress is for people, not --json"
    );
    let mut out = Output::new(Vec::new(), Vec::new(), 80, false);
    follower.on_event(
        &event(1, Event::StepStarted(StepStarted { index: 1 })),
        &mut out,
    )?;
    follower.on_event(&resolved(2, "apr_1", "deadline"), &mut out)?;
    let stdout = String::from_utf8(out.into_inner().0)?;
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["step_started"]["index"], 1);
    assert_eq!(lines[1]["approval_resolved"]["decided_by"], "deadline");
    Ok(())
}
