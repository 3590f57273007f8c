//! The registry's counts against a scan of its runs and held places, over long random
//! sequences of what the runtime does to it: starts holding places under caps, launching in
//! them or giving them back, runs resumed, runs finishing (twice, or before their launch),
//! removals (of runs gone), a run launched again under its id.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use airlock_proto::v1 as pb;

use super::{LiveRuns, Slot};
use crate::agent::live::LiveRun;
use crate::agent::log::{RunChanges, RunLog};
use crate::domain::Usage;
use crate::ids::{RunId, SessionId, TraceId, TurnId};
use crate::store::{RunRecord, RunState, SqliteStore, StoreOptions};

const TENANTS: [&str; 3] = ["alpha", "beta", "gamma"];

/// A run's handles, as `launch` makes them.
fn live_run(log: &Arc<RunLog>, run_id: RunId, tenant: &str, session: &SessionId) -> Arc<LiveRun> {
    let record = RunRecord {
        run_id,
        session_id: session.clone(),
        state: RunState::Running,
        start: pb::StartRun::default(),
        model: "scripted:test".into(),
        workspace: None,
        trace_id: TraceId::new(),
        created_at_ms: 0,
        finished_at_ms: None,
        stop_reason: None,
        stop_detail: String::new(),
        final_text: String::new(),
        usage: Usage::default(),
        steps: 0,
        last_seq: 0,
        tenant: tenant.into(),
    };
    Arc::new(LiveRun::new(&record, session, log.clone()).0)
}

/// xorshift64*: the sequence is the same on every machine, so a failure replays.
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

/// What a scan of `held` (the runs the registry should hold) and `slots` (the places held)
/// says, against the registry.
fn check(
    registry: &LiveRuns,
    held: &[Arc<LiveRun>],
    slots: &[(String, Slot)],
    sessions: &[SessionId],
    step: usize,
) {
    for tenant in TENANTS {
        let scanned = held
            .iter()
            .filter(|run| run.tenant == tenant && !run.is_finishing())
            .count()
            + slots.iter().filter(|(of, _)| of == tenant).count();
        assert_eq!(registry.at_work(tenant), scanned, "{tenant} at step {step}");
    }
    let ids: BTreeSet<String> = registry.ids().iter().map(ToString::to_string).collect();
    let scanned: BTreeSet<String> = held.iter().map(|run| run.run_id.to_string()).collect();
    assert_eq!(ids, scanned, "ids at step {step}");
    assert_eq!(registry.all().len(), held.len(), "all at step {step}");
    for session in sessions {
        let found = registry.in_session(session);
        let any = held.iter().any(|run| run.session_id == *session);
        assert_eq!(found.is_some(), any, "session {session} at step {step}");
        if let Some(found) = found {
            assert_eq!(found.session_id, *session);
            assert!(
                held.iter().any(|run| Arc::ptr_eq(run, &found)),
                "step {step}"
            );
        }
    }
    for run in held {
        let got = registry.get(&run.run_id).expect("a held run is found");
        assert!(Arc::ptr_eq(&got, run), "step {step}");
    }
}

#[tokio::test]
async fn its_counts_are_a_scans_after_any_sequence_of_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(
        SqliteStore::open(&dir.path().join("airlock.db"), &StoreOptions::default()).expect("store"),
    );
    let log = Arc::new(RunLog::new(
        RunId::new(),
        store,
        0,
        &TurnId::new(),
        RunChanges::default(),
    ));
    let sessions: Vec<SessionId> = (0..4).map(|_| SessionId::new()).collect();
    let registry = LiveRuns::default();
    let mut held: Vec<Arc<LiveRun>> = Vec::new();
    let mut made: Vec<Arc<LiveRun>> = Vec::new();
    let mut dice = Dice(0x9E37_79B9_7F4A_7C15);
    let mut slots: Vec<(String, Slot)> = Vec::new();
    let mut seen = HashSet::new();
    for step in 0..30_000 {
        let op = dice.below(12);
        let tenant = TENANTS[dice.below(TENANTS.len())];
        let session = &sessions[dice.below(sessions.len())];
        let tried = match op {
            // A resumed run comes back, holding no place.
            0..=2 => {
                let run = live_run(&log, RunId::new(), tenant, session);
                made.push(run.clone());
                registry.insert(run.clone(), None);
                held.push(run);
                true
            }
            // A start checks its tenant's cap, holding a place if it fits.
            3 => {
                let max = dice.below(5);
                let before = registry.at_work(tenant);
                match registry.hold(tenant, max) {
                    Some(slot) => {
                        assert!(before < max, "held over the cap at step {step}");
                        slots.push((tenant.to_owned(), slot));
                    }
                    None => assert!(before >= max, "refused under the cap at step {step}"),
                }
                true
            }
            // A start launches its run in the place it held.
            4 if !slots.is_empty() => {
                let (of, slot) = slots.swap_remove(dice.below(slots.len()));
                let run = live_run(&log, RunId::new(), &of, session);
                made.push(run.clone());
                registry.insert(run.clone(), Some(slot));
                held.push(run);
                true
            }
            // A start fails before its launch, giving its place back.
            5 if !slots.is_empty() => {
                drop(slots.swap_remove(dice.below(slots.len())));
                true
            }
            // A run starts recording its end: held, or gone.
            6 | 7 if !made.is_empty() => {
                registry.finishing(&made[dice.below(made.len())]);
                true
            }
            // A run marked finishing before it is launched.
            8 => {
                let run = live_run(&log, RunId::new(), tenant, session);
                registry.finishing(&run);
                made.push(run.clone());
                registry.insert(run.clone(), None);
                held.push(run);
                true
            }
            // A run leaves (or one that has left is taken out again).
            9 | 10 if !made.is_empty() => {
                let run = made[dice.below(made.len())].clone();
                let removed = registry.remove(&run.run_id);
                // By id: a run launched again under it is the one taken out.
                let was = held.iter().position(|held| held.run_id == run.run_id);
                assert_eq!(removed.is_some(), was.is_some(), "step {step}");
                if let Some(at) = was {
                    held.swap_remove(at);
                }
                true
            }
            // A run of the same id launched again, in place of the one held.
            11 if !held.is_empty() => {
                let old = held.swap_remove(dice.below(held.len()));
                let again = live_run(&log, old.run_id.clone(), &old.tenant, &old.session_id);
                registry.insert(again.clone(), None);
                made.push(again.clone());
                held.push(again);
                true
            }
            _ => false,
        };
        if tried {
            seen.insert(op);
        }
        check(&registry, &held, &slots, &sessions, step);
        // Keep the registry from growing without bound, so that it empties now and then.
        if held.len() + slots.len() > 40 {
            slots.clear();
            for run in std::mem::take(&mut held) {
                registry.finishing(&run);
                assert!(registry.remove(&run.run_id).is_some(), "step {step}");
            }
            check(&registry, &held, &slots, &sessions, step);
            for tenant in TENANTS {
                assert_eq!(registry.at_work(tenant), 0, "emptied at step {step}");
            }
        }
    }
    assert_eq!(seen.len(), 12, "every kind of change was tried");
}
