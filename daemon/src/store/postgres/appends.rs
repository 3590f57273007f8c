//! A run's events in one statement a batch: how the writer's write of an event
//! ([`Append`]) runs, and the plan that has the first of a run's appends in a batch's
//! flight write the ones after it too ([`merge`]).
//!
//! An event is the write a run makes most — about eight a step — and on PostgreSQL each
//! costs a statement of the server's time; worse, each takes its sequence number by
//! updating the run's row, and every update of a row in one transaction leaves a version
//! of it that the next update steps over. A batch holds several steps of a busy run, so
//! written one by one its events cost more the more of them it holds. Written together
//! they are one statement and one update of the row.
//!
//! Merging moves a run's later events up to its first one's place in the flight, ahead of
//! the writes between them. That never makes a write fail that would have succeeded: what
//! the store's writes check of a run's log is that an event exists (a checkpoint's, a run
//! end's), never that one is missing, and an event's own check — that its number is the
//! next — holds as well at the earlier place, its predecessors being written with it. The
//! other way round, a write that names an event handed over after it in the same batch
//! (which the run loop never does: it records an event before what stands on it) finds
//! that event written, and succeeds where, alone, it would have been refused; the
//! transaction commits both or neither, so the log stays whole. Only events of one run,
//! under one fence, with numbers each the next (and within the database's range), are
//! merged, up to a bound on the statement's size: another write appending between two of
//! them (a number in the gap) keeps them apart.
//!
//! Should the flight fail, the batch runs again one write at a time (`writer`),
//! and there each append writes its own event, so each failure is its own write's.

use std::collections::HashMap;
use std::sync::Arc;

use futures::FutureExt as _;
use futures::future::BoxFuture;

use super::batch::{Append, Fence, Part, Write};
use super::client::{Lane, OnPg as _};
use crate::store::StoreError;
use crate::store::queries;
use crate::store::rows::EventRow;

impl Write for Append {
    fn fence(&self) -> Option<&Fence> {
        self.fence.as_ref()
    }

    fn run(&mut self, lane: Lane) -> BoxFuture<'_, bool> {
        let Append {
            row, part, reply, ..
        } = self;
        let run = async move {
            match part {
                Part::Carried => {
                    lane.pass().await;
                    Ok(())
                }
                Part::Alone => queries::events::append_event(&lane.pg(), row).await,
                Part::Leads(after) => {
                    let rows: Vec<&EventRow> = std::iter::once(&**row)
                        .chain(after.iter().map(|row| &**row))
                        .collect();
                    queries::events::append_events(&lane.pg(), &rows).await
                }
            }
        };
        reply.keep(run.boxed()).boxed()
    }

    fn refuse(&mut self, error: StoreError) {
        self.reply.refuse(error);
    }

    fn answer(self: Box<Self>, failed: Option<StoreError>) {
        self.reply.send(failed);
    }

    fn append(&mut self) -> Option<&mut Append> {
        Some(self)
    }
}

/// The most bytes (events and their spans) one statement writes: a run's events of a
/// batch are merged up to this, then start another group. A step's events are a few KiB;
/// a tool's output event can be far larger, and PostgreSQL refuses a message of 1 GiB —
/// far below that, a statement this size costs no more per byte than several.
const MAX_MERGED_BYTES: usize = 4 << 20;

/// A run's appends in a flight that the first of them writes.
struct Group {
    /// The first append's place in the batch.
    lead: usize,
    /// The claim its writes stand on.
    fence: Option<Fence>,
    /// The number of the last event it writes so far.
    last_seq: u64,
    /// The bytes it writes so far.
    bytes: usize,
}

/// The bytes an append's statement sends for `row`.
fn size(row: &EventRow) -> usize {
    let spans: usize = row
        .spans
        .iter()
        .map(|span| span.span_id.len() + span.span.len())
        .sum();
    row.event.len().saturating_add(spans)
}

impl Group {
    /// Whether the group's statement may write `next`'s event too: the same claim, its
    /// number the next (one the database's `bigint` holds: past it, numbers are clamped,
    /// and two would be one), and room left under [`MAX_MERGED_BYTES`].
    fn takes(&self, next: &Append) -> bool {
        let same_claim = match (&self.fence, &next.fence) {
            (None, None) => true,
            (Some(mine), Some(theirs)) => mine.is(theirs),
            _ => false,
        };
        same_claim
            && self.last_seq.checked_add(1) == Some(next.row.seq)
            && i64::try_from(next.row.seq).is_ok()
            && self.bytes.saturating_add(size(&next.row)) <= MAX_MERGED_BYTES
    }
}

/// Plans the flight's appends: each run's first append in `writes` writes the events of the
/// run's appends after it that its group [`takes`](Group::takes), one after another, and
/// those write nothing of their own. An append the group does not take starts its run's
/// next group.
pub(super) fn merge(writes: &mut [Box<dyn Write>]) {
    let mut groups: HashMap<String, Group> = HashMap::new();
    let mut carried: Vec<(usize, Arc<EventRow>)> = Vec::new();
    for (at, write) in writes.iter_mut().enumerate() {
        let Some(append) = write.append() else {
            continue;
        };
        append.part = Part::Alone;
        match groups.get_mut(&append.row.run_id) {
            Some(group) if group.takes(append) => {
                group.last_seq = append.row.seq;
                group.bytes = group.bytes.saturating_add(size(&append.row));
                carried.push((group.lead, append.row.clone()));
                append.part = Part::Carried;
            }
            _ => {
                let group = Group {
                    lead: at,
                    fence: append.fence.clone(),
                    last_seq: append.row.seq,
                    bytes: size(&append.row),
                };
                groups.insert(append.row.run_id.clone(), group);
            }
        }
    }
    for (lead, row) in carried {
        if let Some(leader) = writes[lead].append() {
            match &mut leader.part {
                Part::Leads(after) => after.push(row),
                part => *part = Part::Leads(vec![row]),
            }
        }
    }
}

/// Has every append write its own event again: for a batch run one write at a time.
pub(super) fn unmerge(writes: &mut [Box<dyn Write>]) {
    for write in writes {
        if let Some(append) = write.append() {
            append.part = Part::Alone;
        }
    }
}

#[cfg(test)]
#[path = "appends_tests.rs"]
mod tests;
