//! The commands other daemons of the fleet send for the runs this one executes (an
//! approval's answer, a cancel, input), taken and applied here, each at most once: a command
//! is taken in one statement, by the daemon that executes its run when its notice arrives.
//! Notices of other daemons' events also reach this daemon's live lists of runs here.

use std::sync::Arc;

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::agent::AgentRuntime;
use crate::cancel::or_cancel;
use crate::ids::RunId;
use crate::store::{CommandId, CommandOutcome, Notice, Relay};

/// Takes and applies commands for the runs live here until `stop`.
pub(super) async fn serve(
    relay: Arc<dyn Relay>,
    agents: Arc<AgentRuntime>,
    stop: CancellationToken,
) {
    let mut notices = relay.notices();
    // Commands sent before this daemon listened (a takeover's runs) wait in the store.
    apply_untaken(&*relay, &agents).await;
    loop {
        let Ok(notice) = or_cancel(&stop, notices.recv()).await else {
            return;
        };
        match notice {
            Ok(Notice::Command { command, run_id }) => {
                if agents.is_live(&run_id) {
                    apply(&*relay, &agents, command).await;
                }
            }
            Ok(Notice::Event { run_id }) => agents.changed_elsewhere(&run_id),
            Ok(Notice::Missed) | Err(broadcast::error::RecvError::Lagged(_)) => {
                apply_untaken(&*relay, &agents).await;
            }
            Ok(Notice::Approval { .. } | Notice::Finished { .. } | Notice::Answered { .. }) => {}
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Applies the commands no daemon took for the runs live here.
pub(super) async fn apply_untaken(relay: &dyn Relay, agents: &AgentRuntime) {
    match relay.untaken_commands().await {
        Ok(commands) => {
            for (command, run_id) in commands {
                if agents.is_live(&run_id) {
                    apply(relay, agents, command).await;
                }
            }
        }
        Err(err) => tracing::warn!(error = %err, "cannot read the commands sent to this daemon"),
    }
}

/// Takes `command` (unless another daemon did, or its sender withdrew it), applies it and
/// answers.
async fn apply(relay: &dyn Relay, agents: &AgentRuntime, command: CommandId) {
    let taken = match relay.take_command(command).await {
        Ok(Some(taken)) => taken,
        Ok(None) => return,
        Err(err) => {
            tracing::warn!(%command, error = %err, "cannot take a command");
            return;
        }
    };
    let (run_id, what): (RunId, _) = taken;
    // The run may have ended here between the notice and the take: finished, or another
    // daemon's now. Either way nothing was applied, and the sender may send again.
    let outcome = agents
        .apply(&run_id, what)
        .unwrap_or(CommandOutcome::Withdrawn);
    tracing::debug!(%command, run = %run_id, ?outcome, "applied a command from another daemon");
    if let Err(err) = relay.answer_command(command, &outcome).await {
        tracing::warn!(%command, error = %err, "cannot answer a command");
    }
}
