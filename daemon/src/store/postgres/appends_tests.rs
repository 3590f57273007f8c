//! The flight's plan of appends: which append writes which events.

use std::sync::Arc;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use tokio::sync::oneshot;

use super::{Append, MAX_MERGED_BYTES, Part, merge, unmerge};
use crate::store::StoreError;
use crate::store::postgres::batch::{Fence, Write};
use crate::store::postgres::client::Lane;
use crate::store::rows::EventRow;

/// A write of another kind, between appends.
struct Other;

impl Write for Other {
    fn fence(&self) -> Option<&Fence> {
        None
    }
    fn run(&mut self, _: Lane) -> BoxFuture<'_, bool> {
        async { true }.boxed()
    }
    fn refuse(&mut self, _: StoreError) {}
    fn answer(self: Box<Self>, _: Option<StoreError>) {}
}

fn fence(epoch: i64) -> Option<Fence> {
    Some(Fence {
        run_id: "run".into(),
        node: "node".into(),
        epoch,
    })
}

fn append(run: &str, seq: u64, fence: Option<Fence>) -> Box<dyn Write> {
    sized(run, seq, fence, 0)
}

fn sized(run: &str, seq: u64, fence: Option<Fence>, bytes: usize) -> Box<dyn Write> {
    let row = EventRow {
        run_id: run.into(),
        seq,
        event: vec![0; bytes],
        spans: Vec::new(),
    };
    // The answer's receiver is dropped: the plan never answers.
    Box::new(Append::new(fence, Arc::new(row), oneshot::channel().0))
}

/// Each write's part as "-" (not an append), "alone", "carried" or the numbers it leads.
fn parts(writes: &mut [Box<dyn Write>]) -> Vec<String> {
    writes
        .iter_mut()
        .map(|write| match write.append() {
            None => "-".into(),
            Some(append) => match &append.part {
                Part::Alone => "alone".into(),
                Part::Carried => "carried".into(),
                Part::Leads(after) => {
                    let seqs: Vec<String> = after.iter().map(|row| row.seq.to_string()).collect();
                    format!("leads {}", seqs.join(","))
                }
            },
        })
        .collect()
}

#[test]
fn a_runs_appends_are_written_by_its_first_across_other_writes_and_runs() {
    let mut writes = vec![
        append("a", 2, None),
        append("b", 7, None),
        Box::new(Other) as Box<dyn Write>,
        append("a", 3, None),
        append("b", 8, None),
        append("a", 4, None),
        append("c", 1, None),
    ];
    merge(&mut writes);
    assert_eq!(
        parts(&mut writes),
        [
            "leads 3,4",
            "leads 8",
            "-",
            "carried",
            "carried",
            "carried",
            "alone"
        ]
    );
    unmerge(&mut writes);
    assert_eq!(
        parts(&mut writes),
        ["alone", "alone", "-", "alone", "alone", "alone", "alone"]
    );
}

#[test]
fn a_number_out_of_turn_or_another_claim_starts_a_group_of_its_own() {
    let mut writes = vec![
        append("a", 2, fence(1)),
        append("a", 3, fence(1)),
        // A duplicate, a gap, and what follows each.
        append("a", 3, fence(1)),
        append("a", 4, fence(1)),
        append("a", 6, fence(1)),
        append("a", 7, fence(1)),
        // The same numbers' next under another epoch, or none.
        append("a", 8, fence(2)),
        append("a", 9, None),
        append("a", 10, None),
    ];
    merge(&mut writes);
    assert_eq!(
        parts(&mut writes),
        [
            "leads 3", "carried", "leads 4", "carried", "leads 7", "carried", "alone", "leads 10",
            "carried"
        ]
    );
    // Planned again, a flight's plan does not build on the last one's.
    merge(&mut writes);
    assert_eq!(parts(&mut writes)[0], "leads 3");
}

#[test]
fn numbers_past_the_databases_range_are_never_merged() {
    let max = i64::MAX as u64;
    let mut writes = vec![
        append("a", max - 1, None),
        append("a", max, None),
        append("a", max + 1, None),
        append("a", u64::MAX, None),
        append("a", 0, None),
    ];
    merge(&mut writes);
    assert_eq!(
        parts(&mut writes),
        [
            "leads 9223372036854775807",
            "carried",
            "alone",
            "alone",
            "alone"
        ]
    );
}

#[test]
fn a_statement_holds_at_most_its_bound_of_bytes() {
    let half = MAX_MERGED_BYTES / 2;
    let mut writes = vec![
        sized("a", 2, None, half),
        sized("a", 3, None, half),
        sized("a", 4, None, 1),
        sized("a", 5, None, MAX_MERGED_BYTES + 1),
        sized("a", 6, None, 1),
    ];
    merge(&mut writes);
    assert_eq!(
        parts(&mut writes),
        ["leads 3", "carried", "alone", "alone", "alone"]
    );
}
