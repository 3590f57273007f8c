//! One way to stop waiting when a task is cancelled: [`or_cancel`].

use std::future::Future;

use futures::FutureExt;
use tokio_util::sync::CancellationToken;

/// The wait was cut short by its cancellation token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

/// `work`'s outcome, or [`Cancelled`] if `token` is cancelled first (also when it already is).
///
/// A function returning tokio-util's future rather than an `async fn`: an `async fn` keeps
/// its argument and the future it awaits side by side, so every such layer doubled what it
/// wrapped, and a run waiting for an approval kept four copies of the wait's state.
pub fn or_cancel<F: Future>(
    token: &CancellationToken,
    work: F,
) -> impl Future<Output = Result<F::Output, Cancelled>> {
    token
        .run_until_cancelled(work)
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
