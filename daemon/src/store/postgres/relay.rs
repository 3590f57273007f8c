//! The fleet's relay on PostgreSQL: `LISTEN`/`NOTIFY` for the notices, a table for the
//! commands.
//!
//! Triggers (schema version 3) announce every committed event, approval change, finished
//! run and command on the channel `airlock`; each daemon listens on a connection of its own,
//! outside the pool (a pooled connection is shared, and `LISTEN` belongs to a session). When
//! that connection breaks, the daemon connects again and, once it listens, tells its
//! listeners they may have missed notices ([`Notice::Missed`]): they reread the store, so a
//! broken connection costs a reread, never a lost event.
//!
//! The command statements run on the pool, outside the writer's queue and its fences: a
//! command is not the run's state, and whose run it is decides only who takes it.

use std::time::Duration;

use futures::StreamExt as _;
use tokio::sync::broadcast;
use tokio_postgres::AsyncMessage;
use tokio_postgres_rustls::MakeRustlsConnect;
use tokio_util::sync::CancellationToken;

use super::client::{Conn, describe, execute, get, query, query_opt};
use crate::cancel::or_cancel;
use crate::ids::{NodeId, RunId};
use crate::store::relay::{
    CommandId, CommandOutcome, CommandState, Notice, RunCommand, StoredApproval,
};
use crate::store::rows::{corrupt, decode, resolution};
use crate::store::{StoreError, StoreResult};

/// The channel the triggers notify on.
const CHANNEL: &str = "airlock";

/// Notices a slow listener may fall behind by before it is told it missed some (and
/// rereads): a few seconds of a busy fleet's events.
const NOTICE_BUFFER: usize = 4096;

/// The longest wait between two attempts to listen again: short, since every follower on
/// another daemon's runs waits for it; the first retry is at once.
const MAX_RETRY: Duration = Duration::from_secs(2);

/// Listens for the fleet's notices until `stop`; fails when the first connection does,
/// so a daemon never serves without them.
pub(super) async fn listen(
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    stop: CancellationToken,
) -> StoreResult<broadcast::Sender<Notice>> {
    let notices = broadcast::channel(NOTICE_BUFFER).0;
    let listening = subscribe(&config, &tls, notices.clone()).await?;
    tokio::spawn(keep_listening(
        config,
        tls,
        listening,
        notices.clone(),
        stop,
    ));
    Ok(notices)
}

/// A connection that listens, forwarding what it hears until it breaks; the task ends with
/// it.
async fn subscribe(
    config: &tokio_postgres::Config,
    tls: &MakeRustlsConnect,
    notices: broadcast::Sender<Notice>,
) -> StoreResult<(tokio_postgres::Client, tokio::task::JoinHandle<()>)> {
    let (client, mut connection) = config.connect(tls.clone()).await.map_err(|err| {
        StoreError::Io(format!(
            "cannot listen for the fleet's notices: {}",
            describe(&err)
        ))
    })?;
    let forwarding = tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = messages.next().await {
            if let AsyncMessage::Notification(notification) = message {
                match parse(notification.payload()) {
                    // Nobody listening is fine.
                    Some(notice) => drop(notices.send(notice)),
                    None => tracing::warn!(
                        payload = notification.payload(),
                        "a notice of unknown shape ignored"
                    ),
                }
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN {CHANNEL}"))
        .await
        .map_err(|err| {
            StoreError::Io(format!(
                "cannot listen for the fleet's notices: {}",
                describe(&err)
            ))
        })?;
    Ok((client, forwarding))
}

async fn keep_listening(
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    mut listening: (tokio_postgres::Client, tokio::task::JoinHandle<()>),
    notices: broadcast::Sender<Notice>,
    stop: CancellationToken,
) {
    loop {
        if or_cancel(&stop, &mut listening.1).await.is_err() {
            listening.1.abort();
            return;
        }
        tracing::warn!(
            "the connection that listens for the fleet's notices broke; listening again"
        );
        let mut retry = Duration::ZERO;
        listening = loop {
            if or_cancel(&stop, tokio::time::sleep(retry)).await.is_err() {
                return;
            }
            match subscribe(&config, &tls, notices.clone()).await {
                Ok(listening) => break listening,
                Err(err) => {
                    tracing::warn!(error = %err, "cannot listen for the fleet's notices yet");
                    retry = (retry * 2).clamp(Duration::from_millis(100), MAX_RETRY);
                }
            }
        };
        // Listening again: whatever was announced while it was not is in the store.
        let _ = notices.send(Notice::Missed);
    }
}

/// A notice's payload, as `airlock_notify()` writes it.
fn parse(payload: &str) -> Option<Notice> {
    let mut words = payload.split(' ');
    let notice = match (words.next()?, words.next()?, words.next()) {
        ("e", run_id, None) => Notice::Event {
            run_id: RunId::from_stored(run_id),
        },
        ("a", approval_id, None) => Notice::Approval {
            approval_id: approval_id.to_owned(),
        },
        ("f", run_id, None) => Notice::Finished {
            run_id: RunId::from_stored(run_id),
        },
        ("c", command, Some(run_id)) => Notice::Command {
            command: CommandId(command.parse().ok()?),
            run_id: RunId::from_stored(run_id),
        },
        ("o", command, None) => Notice::Answered {
            command: CommandId(command.parse().ok()?),
        },
        _ => return None,
    };
    words.next().is_none().then_some(notice)
}

pub(super) async fn remote_approvals(
    c: Conn,
    node: NodeId,
) -> StoreResult<Vec<airlock_proto::v1::ApprovalRequest>> {
    query(
        &c,
        "SELECT a.request FROM approvals a JOIN runs r ON r.run_id = a.run_id
         WHERE a.resolved_at_ms IS NULL AND r.state <> 'finished'
           AND r.owner IS DISTINCT FROM $1
         ORDER BY a.ordinal",
        &[&node.as_str()],
    )
    .await?
    .iter()
    .map(|row| decode(get::<&[u8]>(row, 0)?))
    .collect()
}

pub(super) async fn approval(
    c: Conn,
    node: NodeId,
    approval_id: String,
) -> StoreResult<Option<StoredApproval>> {
    query_opt(
        &c,
        "SELECT a.request, a.decision, a.reason, a.decided_by, a.resolved_at_ms,
                r.state = 'finished', r.owner IS NOT DISTINCT FROM $2
         FROM approvals a JOIN runs r ON r.run_id = a.run_id WHERE a.approval_id = $1",
        &[&approval_id, &node.as_str()],
    )
    .await?
    .map(|row| {
        Ok(StoredApproval {
            request: decode(get::<&[u8]>(&row, 0)?)?,
            resolution: resolution(get(&row, 1)?, get(&row, 2)?, get(&row, 3)?, get(&row, 4)?)?,
            run_finished: get(&row, 5)?,
            owned_here: get(&row, 6)?,
        })
    })
    .transpose()
}

pub(super) async fn send_command(
    c: Conn,
    run_id: RunId,
    command: String,
) -> StoreResult<CommandId> {
    let row = query_opt(
        &c,
        "INSERT INTO run_commands (run_id, command, sent_at_ms)
         VALUES ($1, $2, airlock_now_ms()) RETURNING command_id",
        &[&run_id.as_str(), &command],
    )
    .await?
    .ok_or_else(|| corrupt("an insert returned no row"))?;
    Ok(CommandId(get(&row, 0)?))
}

pub(super) async fn take_command(
    c: Conn,
    node: NodeId,
    command: CommandId,
) -> StoreResult<Option<(RunId, RunCommand)>> {
    query_opt(
        &c,
        "UPDATE run_commands SET taken_by = $2
         WHERE command_id = $1 AND taken_by IS NULL AND outcome IS NULL
         RETURNING run_id, command",
        &[&command.0, &node.as_str()],
    )
    .await?
    .map(|row| {
        let run_id = RunId::from_stored(get::<&str>(&row, 0)?);
        let command = serde_json::from_str(get::<&str>(&row, 1)?)
            .map_err(|err| corrupt(format!("a command that does not decode: {err}")))?;
        Ok((run_id, command))
    })
    .transpose()
}

pub(super) async fn untaken_commands(
    c: Conn,
    node: NodeId,
) -> StoreResult<Vec<(CommandId, RunId)>> {
    query(
        &c,
        "SELECT c.command_id, c.run_id FROM run_commands c JOIN runs r ON r.run_id = c.run_id
         WHERE c.taken_by IS NULL AND c.outcome IS NULL AND r.owner = $1
         ORDER BY c.command_id",
        &[&node.as_str()],
    )
    .await?
    .iter()
    .map(|row| {
        Ok((
            CommandId(get(row, 0)?),
            RunId::from_stored(get::<&str>(row, 1)?),
        ))
    })
    .collect()
}

pub(super) async fn answer_command(
    c: Conn,
    command: CommandId,
    outcome: String,
) -> StoreResult<()> {
    execute(
        &c,
        "UPDATE run_commands SET outcome = $2 WHERE command_id = $1",
        &[&command.0, &outcome],
    )
    .await
    .map(|_| ())
}

pub(super) async fn command_state(
    c: Conn,
    command: CommandId,
) -> StoreResult<Option<CommandState>> {
    let Some(row) = query_opt(
        &c,
        "SELECT taken_by IS NOT NULL, outcome FROM run_commands WHERE command_id = $1",
        &[&command.0],
    )
    .await?
    else {
        return Err(corrupt(format!("{command} is not in the store")));
    };
    let taken: bool = get(&row, 0)?;
    Ok(match get::<Option<&str>>(&row, 1)? {
        Some(outcome) => Some(CommandState::Answered(
            serde_json::from_str(outcome)
                .map_err(|err| corrupt(format!("an outcome that does not decode: {err}")))?,
        )),
        None if taken => Some(CommandState::Taken),
        None => None,
    })
}

pub(super) async fn withdraw_command(
    c: Conn,
    command: CommandId,
    withdrawn: String,
) -> StoreResult<CommandState> {
    let changed = execute(
        &c,
        "UPDATE run_commands SET outcome = $2
         WHERE command_id = $1 AND taken_by IS NULL AND outcome IS NULL",
        &[&command.0, &withdrawn],
    )
    .await?;
    if changed == 1 {
        return Ok(CommandState::Answered(CommandOutcome::Withdrawn));
    }
    // Taken (or answered) before it could be withdrawn.
    Ok(command_state(c, command)
        .await?
        .unwrap_or(CommandState::Taken))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Verdict;
    use crate::store::postgres::testing::{self, node};
    use crate::store::{Relay, Store, recorded_run};

    async fn next(notices: &mut broadcast::Receiver<Notice>) -> Notice {
        tokio::time::timeout(Duration::from_secs(30), notices.recv())
            .await
            .expect("a notice within 30 s")
            .expect("notices flow")
    }

    #[tokio::test]
    async fn every_daemon_hears_of_each_commit_of_a_runs_events() {
        let url = testing::fresh_database().await;
        let (writer, listener) = (node(&url).await, node(&url).await);
        let mut notices = listener.notices();
        let run = recorded_run(&*writer, "relay", 1).await;
        for seq in 2..=3 {
            let event = airlock_proto::v1::RunEvent {
                run_id: run.run_id.to_string(),
                seq,
                ..Default::default()
            };
            writer.append_event(&event, &[]).await.expect("append");
        }
        // One notice per commit (the run's creation, each append awaited alone).
        let mut heard = 0;
        while heard < 3 {
            if let Notice::Event { run_id } = next(&mut notices).await {
                assert_eq!(run_id, run.run_id);
                heard += 1;
            }
        }
    }

    #[tokio::test]
    async fn a_command_is_taken_once_and_a_withdrawn_one_never() {
        let url = testing::fresh_database().await;
        let (sender, owner, other) = (node(&url).await, node(&url).await, node(&url).await);
        let run = recorded_run(&*owner, "relay", 1).await;
        let mut notices = owner.notices();
        let command = RunCommand::Decide {
            verdict: Verdict {
                approval_id: "approval_1".into(),
                decision: Some(crate::domain::Decision::Deny),
                reason: "no".into(),
                digest: String::new(),
                grant_prefix: vec!["git".into(), "push".into()],
            },
            from_run_stream: false,
        };
        let id = sender
            .send_command(&run.run_id, &command)
            .await
            .expect("send");
        loop {
            if let Notice::Command { command, run_id } = next(&mut notices).await {
                assert_eq!((command, run_id), (id, run.run_id.clone()));
                break;
            }
        }
        assert_eq!(sender.command_state(id).await.expect("state"), None);
        let (taken, other_take) = tokio::join!(owner.take_command(id), other.take_command(id));
        let takes = [taken.expect("take"), other_take.expect("take")];
        assert_eq!(
            takes.iter().filter(|taken| taken.is_some()).count(),
            1,
            "{takes:?}"
        );
        let taken = takes.into_iter().flatten().next().expect("taken");
        assert_eq!(taken, (run.run_id.clone(), command.clone()));
        // Taken, it can no longer be withdrawn: its sender learns it may have been applied.
        assert_eq!(
            sender.withdraw_command(id).await.expect("withdraw"),
            CommandState::Taken
        );
        owner
            .answer_command(id, &CommandOutcome::Applied)
            .await
            .expect("answer");
        assert_eq!(
            sender.command_state(id).await.expect("state"),
            Some(CommandState::Answered(CommandOutcome::Applied))
        );
        // A command withdrawn before any daemon took it is never taken.
        let late = sender
            .send_command(&run.run_id, &command)
            .await
            .expect("send");
        assert_eq!(
            owner.untaken_commands().await.expect("untaken"),
            [(late, run.run_id.clone())]
        );
        assert_eq!(
            sender.withdraw_command(late).await.expect("withdraw"),
            CommandState::Answered(CommandOutcome::Withdrawn)
        );
        assert_eq!(owner.take_command(late).await.expect("take"), None);
        assert!(owner.untaken_commands().await.expect("untaken").is_empty());
    }

    #[tokio::test]
    async fn approvals_pending_elsewhere_are_listed_until_answered() {
        let url = testing::fresh_database().await;
        let (owner, other) = (node(&url).await, node(&url).await);
        let run = recorded_run(&*owner, "relay", 1).await;
        let request = airlock_proto::v1::ApprovalRequest {
            approval_id: crate::ids::ApprovalId::new().into_string(),
            run_id: run.run_id.to_string(),
            call_id: "call_1".into(),
            deadline_ms: i64::MAX,
            ..Default::default()
        };
        owner.save_approval(&request).await.expect("save");
        // Not another daemon's to its owner; another daemon's to the others.
        assert!(owner.remote_approvals().await.expect("list").is_empty());
        assert_eq!(
            other.remote_approvals().await.expect("list"),
            std::slice::from_ref(&request)
        );
        let stored = other
            .approval(&request.approval_id)
            .await
            .expect("read")
            .expect("kept");
        assert!(!stored.owned_here && !stored.run_finished && stored.resolution.is_none());
        owner
            .resolve_approval(
                &crate::ids::ApprovalId::from_stored(&request.approval_id),
                &crate::store::ApprovalResolution {
                    decision: crate::domain::Decision::ApproveOnce,
                    reason: String::new(),
                    decided_by: crate::domain::DecidedBy::Console,
                    resolved_at_ms: 5,
                },
            )
            .await
            .expect("resolve");
        assert!(other.remote_approvals().await.expect("list").is_empty());
    }

    #[test]
    fn payloads_parse_into_notices() {
        assert_eq!(
            parse("e run_1"),
            Some(Notice::Event {
                run_id: RunId::from_stored("run_1"),
            })
        );
        assert_eq!(
            parse("c 12 run_1"),
            Some(Notice::Command {
                command: CommandId(12),
                run_id: RunId::from_stored("run_1")
            })
        );
        assert_eq!(
            parse("o 12"),
            Some(Notice::Answered {
                command: CommandId(12)
            })
        );
        for bad in [
            "",
            "e",
            "e run_1 7",
            "c 12",
            "c x run_1",
            "o 12 13",
            "z 1",
            "a",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
