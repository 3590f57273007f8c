//! A tenant's starts at the API's edge: its cap holds, and no start waits on another's.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::Runs;
use crate::agent::testing::{Harness, StalledDisk};
use crate::agent::{AgentError, AgentSettings};
use crate::api::error::ApiError;
use crate::api::tenants::Tenant;

/// With the store stalled, a start that fits the cap waits on the disk; another of the same
/// tenant, over the cap, is refused at once rather than after it (the edge took a turn per
/// tenant once, which held every start of the tenant behind the slowest).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_over_the_cap_is_refused_while_another_waits_on_the_store() {
    let disk = Arc::new(StalledDisk::default());
    let harness = Harness::build(disk.options(), AgentSettings::default());
    /// Opens the disk again however the test ends: the store's thread, waiting on it, is
    /// joined when the harness is dropped.
    struct Reopen(Arc<StalledDisk>);
    impl Drop for Reopen {
        fn drop(&mut self) {
            self.0.set_closed(false);
        }
    }
    let _reopen = Reopen(disk.clone());
    let runs = Arc::new(Runs::new(harness.runtime.clone()));
    let mut tenant = Tenant::default_tenant();
    tenant.max_concurrent_runs = 1;
    let tenant = Arc::new(tenant);
    let script = json!({"turns": [{"final": "x"}]});
    disk.set_closed(true);
    let first = tokio::spawn({
        let (runs, tenant) = (runs.clone(), tenant.clone());
        let start = harness.scripted(&script, &[]);
        async move { runs.start(&tenant, start).await.map(|(run_id, _)| run_id) }
    });
    tokio::time::timeout(Duration::from_secs(10), disk.stalled())
        .await
        .expect("the first start reaches the disk");
    let second = tokio::time::timeout(
        Duration::from_secs(10),
        runs.start(&tenant, harness.scripted(&script, &[])),
    )
    .await
    .expect("the second start is answered while the first waits on the disk");
    assert!(
        matches!(
            second,
            Err(ApiError::Agent(AgentError::TooManyRuns { max: 1, .. }))
        ),
        "{:?}",
        second.map(|(run_id, _)| run_id)
    );
    assert!(
        !first.is_finished(),
        "the first start still waits on the disk"
    );
    disk.set_closed(false);
    first
        .await
        .expect("join")
        .expect("the first start, once the disk is back");
}
