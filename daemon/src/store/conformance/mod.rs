//! What every backend of [`Store`] must do, as one suite any backend's tests run. It makes
//! fresh ids and a tenant of its own, so it can run against a shared database beside other
//! data.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod audit;
mod fixtures;
mod journal;
mod retention;
mod runs;

pub use fixtures::recorded_run;
pub(super) use fixtures::{Steps, event, session};

use super::Store;

/// Runs every check of the suite against `store`.
pub async fn conformance(store: &dyn Store) {
    let tenant = format!("conformance-{}", uuid::Uuid::new_v4().simple());
    runs::sessions_runs_and_events_round_trip(store, &tenant).await;
    runs::sessions_page_by_activity_within_their_tenant(store).await;
    runs::the_log_refuses_gaps_and_duplicates(store, &tenant).await;
    runs::writes_handed_over_together_land_in_order(store, &tenant).await;
    runs::interleaved_events_are_each_answered_as_if_alone(store, &tenant).await;
    runs::a_steps_writes_commit_in_order_and_a_refused_one_alone(store, &tenant).await;
    runs::runs_page_newest_first_with_filters(store, &tenant).await;
    journal::checkpoints_effects_approvals_and_grants_round_trip(store, &tenant).await;
    journal::a_checkpoints_conversation_is_kept_entry_by_entry(store, &tenant).await;
    journal::spans_ride_with_their_event(store, &tenant).await;
    journal::exchanges_keep_their_order(store, &tenant).await;
    retention::outputs_and_owners_round_trip(store).await;
    retention::old_outputs_and_owners_go_and_nothing_else(store, &tenant).await;
    retention::old_finished_runs_are_deleted_and_nothing_else(store, &tenant).await;
    audit::chains_link_in_order_per_tenant(store, &tenant).await;
    audit::retention_cuts_only_at_an_old_checkpoint(store, &tenant).await;
}
