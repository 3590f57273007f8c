//! One way to stop waiting when a task is cancelled: [`or_cancel`].

use std::future::Future;

use futures::FutureExt;
use tokio_util::future::FutureExt as _;
use tokio_util::sync::CancellationToken;

/// The wait was cut short by its cancellation token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

/// `work`'s outcome, or [`Cancelled`] if `token` is cancelled first (also when it already is:
/// checked as the future is made, and `work` is then dropped unpolled). When both are ready
/// at once, `work`'s outcome wins.
///
/// A function returning tokio-util's future, which holds `work` once, rather than an `async
/// fn` (or `CancellationToken::run_until_cancelled`, itself one): an `async fn` keeps its
/// argument and the future it awaits side by side, so every such layer doubled what it
/// wrapped, and a run waiting for an approval kept four copies of the wait's state.
pub fn or_cancel<F: Future>(
    token: &CancellationToken,
    work: F,
) -> impl Future<Output = Result<F::Output, Cancelled>> {
    work.with_cancellation_token(token)
        .map(|outcome| outcome.ok_or(Cancelled))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_cancel_ends_the_wait_and_otherwise_the_work_does() {
        let token = CancellationToken::new();
        assert_eq!(or_cancel(&token, async { 1 }).await, Ok(1));
        token.cancel();
        assert_eq!(
            or_cancel(&token, std::future::pending::<()>()).await,
            Err(Cancelled)
        );
    }
}
