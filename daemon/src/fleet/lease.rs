//! Keeping this daemon's lease: renewed a few times a lease ([`RENEWALS_PER_LEASE`]), and,
//! after a renewal that failed, tried again soon, then less and less often — a store back
//! within the lease finds it renewed before it lapses, and one that stays away (or keeps
//! refusing at once: a read-only standby, revoked rights) is not asked ten times a second
//! for ever.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cancel::or_cancel;
use crate::store::Leases;

/// Renewals per lease: two may fail or come late and the lease still holds.
pub(super) const RENEWALS_PER_LEASE: u32 = 3;

/// How soon a renewal that failed is first tried again. The next tick would come a third
/// of a lease later: a store back within the lease could find the lease lapsed and the runs
/// taken over before then (a 1 s outage under a 2 s lease did, one time in eight).
const RETRY_FIRST: Duration = Duration::from_millis(100);

/// Renews `leases`' lease of `lease` until `stop` (a renewal under way is not waited for).
pub(super) async fn keep(leases: Arc<dyn Leases>, lease: Duration, stop: CancellationToken) {
    let period = lease / RENEWALS_PER_LEASE;
    let mut retry = None;
    let mut failed = 0_u32;
    let mut renewed = Instant::now();
    let mut lapsed = false;
    while or_cancel(&stop, tokio::time::sleep(retry.unwrap_or(period)))
        .await
        .is_ok()
    {
        // Should the lease lapse while renewals fail, another daemon may claim this one's
        // runs, and this one's writes for them are refused from then on. A stop does not
        // wait for a renewal the store is slow to answer: should it still commit after the
        // lease was given up (a frozen server that wakes), the node looks live for one more
        // lease, and its runs move that much later.
        match or_cancel(&stop, leases.renew(lease)).await {
            Err(_) => break,
            Ok(Ok(())) => {
                if failed > 0 {
                    tracing::info!(failed, "renewed this daemon's lease again");
                }
                (retry, failed, renewed, lapsed) = (None, 0, Instant::now(), false);
            }
            Ok(Err(err)) => {
                // The first of a streak is worth a warning, and the lease's lapse; the
                // tries between them would fill the log of a daemon whose store is down.
                if failed == 0 {
                    tracing::warn!(error = %err, "cannot renew this daemon's lease; trying again");
                } else {
                    tracing::debug!(error = %err, failed, "cannot renew this daemon's lease");
                }
                if !lapsed && renewed.elapsed() >= lease {
                    lapsed = true;
                    tracing::warn!(
                        failed,
                        "this daemon's lease has lapsed: other daemons may take its runs over"
                    );
                }
                failed = failed.saturating_add(1);
                retry = Some(backoff(period, retry));
            }
        }
    }
}

/// How long to wait after a failed renewal, given the wait after the failure before it
/// (`retry`, none after a success): [`RETRY_FIRST`], then twice the wait before, up to a
/// quarter of the `period` between renewals — never less than the first.
fn backoff(period: Duration, retry: Option<Duration>) -> Duration {
    match retry {
        None => RETRY_FIRST,
        Some(before) => before.saturating_mul(2).min(period / 4).max(RETRY_FIRST),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_renewal_is_tried_again_soon_then_less_often_up_to_a_quarter_period() {
        let ms = Duration::from_millis;
        let period = ms(3_333);
        let mut waits = Vec::new();
        let mut retry = None;
        for _ in 0..6 {
            retry = Some(backoff(period, retry));
            waits.extend(retry.map(|wait| wait.as_millis()));
        }
        assert_eq!(waits, [100, 200, 400, 800, 833, 833]);
        // A lease so short that a quarter period is below the first wait: the first wait.
        assert_eq!(backoff(ms(200), Some(ms(100))), RETRY_FIRST);
    }
}
