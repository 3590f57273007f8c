//! Retries of a model call: each attempt bounded by a timeout, transient failures retried with
//! exponential backoff and jitter (or after the server's `Retry-After`), every retry reported
//! as a [`ProviderEvent::Retrying`].

use std::future::Future;
use std::time::{Duration, SystemTime};

use super::types::{ProviderError, ProviderEvent, ProviderEvents};

/// The longest wait a server's `Retry-After` can impose. It is honoured above `max_backoff`
/// because waiting less than the server asked only earns another 429; beyond a minute a run
/// is better told that the provider is unavailable than kept waiting.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// How a provider retries transient failures (timeouts, transport errors, 408, 409, 429, 5xx).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included; 0 counts as 1.
    pub max_attempts: u32,
    /// The wait after the first failure; it doubles after each further one.
    pub initial_backoff: Duration,
    /// The longest computed wait. A server's `Retry-After` may exceed it, up to a minute.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    /// Four attempts, waiting about 0.5 s, 1 s and 2 s between them: enough to ride out a
    /// rate limit or a restarting server without leaving a run stuck for long.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
        }
    }
}

/// A failed attempt: the error, and how long the server asked us to wait before the next.
#[derive(Debug)]
pub(super) struct Failure {
    pub error: ProviderError,
    pub retry_after: Option<Duration>,
}

impl From<ProviderError> for Failure {
    fn from(error: ProviderError) -> Self {
        Failure {
            error,
            retry_after: None,
        }
    }
}

impl RetryPolicy {
    /// Runs `attempt` (given the 1-based attempt number) until it succeeds, fails with an
    /// error that is not transient, or the attempts are used up. Each attempt that takes
    /// longer than `attempt_timeout` is abandoned and fails with [`ProviderError::Timeout`].
    pub(super) async fn run<T, F, Fut>(
        &self,
        attempt_timeout: Duration,
        events: &dyn ProviderEvents,
        mut attempt: F,
    ) -> Result<T, ProviderError>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let max_attempts = self.max_attempts.max(1);
        let mut number = 1;
        loop {
            let failure = match tokio::time::timeout(attempt_timeout, attempt(number)).await {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(failure)) => failure,
                Err(_elapsed) => Failure::from(ProviderError::Timeout(attempt_timeout)),
            };
            if !failure.error.is_transient() {
                return Err(failure.error);
            }
            if number >= max_attempts {
                return Err(ProviderError::RetriesExhausted {
                    attempts: number,
                    last: Box::new(failure.error),
                });
            }
            let delay = match failure.retry_after {
                Some(asked) => asked.min(MAX_RETRY_AFTER),
                None => self.backoff(number),
            };
            events.event(ProviderEvent::Retrying {
                attempt: number,
                error: failure.error.to_string(),
                delay,
            });
            tokio::time::sleep(delay).await;
            number += 1;
        }
    }

    /// The wait after failed attempt `number` (1-based): `initial_backoff` doubled per
    /// earlier failure, capped at `max_backoff`, then drawn from its upper half so that
    /// clients rate-limited together do not retry in lockstep.
    fn backoff(&self, number: u32) -> Duration {
        let doublings = number.saturating_sub(1).min(31);
        let base = self
            .initial_backoff
            .saturating_mul(1 << doublings)
            .min(self.max_backoff);
        base.mul_f64(0.5 + fastrand::f64() * 0.5)
    }
}

/// How long the server asked to wait, from `retry-after-ms` (milliseconds, sent by OpenAI)
/// or `Retry-After` (seconds or an HTTP date, RFC 9110). A date in the past means now;
/// a value that cannot be read is ignored.
pub(super) fn parse_retry_after(
    retry_after_ms: Option<&str>,
    retry_after: Option<&str>,
    now: SystemTime,
) -> Option<Duration> {
    if let Some(ms) = retry_after_ms.and_then(|v| v.trim().parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0).min(MAX_RETRY_AFTER));
    }
    let value = retry_after?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds).min(MAX_RETRY_AFTER));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(
        date.duration_since(now)
            .unwrap_or(Duration::ZERO)
            .min(MAX_RETRY_AFTER),
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn quick(max_attempts: u32) -> RetryPolicy {
        RetryPolicy {
            max_attempts,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(4),
        }
    }

    /// Records events for assertions.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<ProviderEvent>>);

    impl ProviderEvents for Recorder {
        fn event(&self, event: ProviderEvent) {
            self.0.lock().expect("recorder lock").push(event);
        }
    }

    fn http(status: u16) -> ProviderError {
        ProviderError::Http {
            status,
            message: format!("status {status}"),
        }
    }

    const GENEROUS: Duration = Duration::from_secs(30);

    #[tokio::test]
    async fn success_after_transient_failures_reports_each_retry() {
        let calls = AtomicU32::new(0);
        let events = Recorder::default();
        let result = quick(4)
            .run(GENEROUS, &events, |number| {
                calls.fetch_add(1, Ordering::SeqCst);
                async move {
                    if number < 3 {
                        Err(Failure::from(http(503)))
                    } else {
                        Ok(number)
                    }
                }
            })
            .await;
        assert_eq!(result, Ok(3));
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        let events = events.0.into_inner().expect("recorder lock");
        assert_eq!(events.len(), 2);
        for (i, event) in events.iter().enumerate() {
            match event {
                ProviderEvent::Retrying {
                    attempt,
                    error,
                    delay,
                } => {
                    assert_eq!(*attempt, i as u32 + 1);
                    assert!(error.contains("503"), "{error}");
                    assert!(*delay <= Duration::from_millis(4), "{delay:?}");
                }
                other => panic!("unexpected event {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn exhausting_attempts_keeps_the_last_error() {
        let calls = AtomicU32::new(0);
        let events = Recorder::default();
        let result: Result<(), _> = quick(3)
            .run(GENEROUS, &events, |number| {
                calls.fetch_add(1, Ordering::SeqCst);
                async move { Err(Failure::from(http(500 + number as u16))) }
            })
            .await;
        assert_eq!(
            result,
            Err(ProviderError::RetriesExhausted {
                attempts: 3,
                last: Box::new(http(503)),
            })
        );
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(events.0.into_inner().expect("recorder lock").len(), 2);
    }

    #[tokio::test]
    async fn permanent_errors_are_not_retried() {
        let calls = AtomicU32::new(0);
        let events = Recorder::default();
        let result: Result<(), _> = quick(4)
            .run(GENEROUS, &events, |_| {
                calls.fetch_add(1, Ordering::SeqCst);
                async { Err(Failure::from(http(400))) }
            })
            .await;
        assert_eq!(result, Err(http(400)));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(events.0.into_inner().expect("recorder lock").is_empty());
    }

    #[tokio::test]
    async fn zero_attempts_still_tries_once() {
        let calls = AtomicU32::new(0);
        let result: Result<(), _> = quick(0)
            .run(GENEROUS, &|_: ProviderEvent| {}, |_| {
                calls.fetch_add(1, Ordering::SeqCst);
                async { Err(Failure::from(ProviderError::Transport("reset".into()))) }
            })
            .await;
        assert!(matches!(
            result,
            Err(ProviderError::RetriesExhausted { attempts: 1, .. })
        ));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn an_attempt_that_hangs_times_out_and_is_retried() {
        let events = Recorder::default();
        let timeout = Duration::from_millis(20);
        let result = quick(2)
            .run(timeout, &events, |number| async move {
                if number == 1 {
                    std::future::pending::<()>().await;
                }
                Ok(number)
            })
            .await;
        assert_eq!(result, Ok(2));
        let events = events.0.into_inner().expect("recorder lock");
        assert!(
            matches!(&events[..], [ProviderEvent::Retrying { attempt: 1, error, .. }]
                if *error == ProviderError::Timeout(timeout).to_string()),
            "{events:?}"
        );
    }

    #[tokio::test]
    async fn the_servers_retry_after_sets_the_delay() {
        let events = Recorder::default();
        let result = quick(2)
            .run(GENEROUS, &events, |number| async move {
                if number == 1 {
                    Err(Failure {
                        error: http(429),
                        retry_after: Some(Duration::from_millis(30)),
                    })
                } else {
                    Ok(())
                }
            })
            .await;
        assert_eq!(result, Ok(()));
        let events = events.0.into_inner().expect("recorder lock");
        assert_eq!(
            events,
            vec![ProviderEvent::Retrying {
                attempt: 1,
                error: http(429).to_string(),
                delay: Duration::from_millis(30),
            }]
        );
    }

    #[test]
    fn backoff_doubles_within_bounds_and_is_capped() {
        let policy = RetryPolicy {
            max_attempts: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(1000),
        };
        for (number, base_ms) in [
            (1, 100),
            (2, 200),
            (3, 400),
            (4, 800),
            (5, 1000),
            (40, 1000),
        ] {
            let base = Duration::from_millis(base_ms);
            for _ in 0..50 {
                let delay = policy.backoff(number);
                assert!(
                    delay >= base / 2 && delay <= base,
                    "attempt {number}: {delay:?} outside [{:?}, {base:?}]",
                    base / 2
                );
            }
        }
    }

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(
            parse_retry_after(None, Some("7"), now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            parse_retry_after(Some("250"), Some("7"), now),
            Some(Duration::from_millis(250))
        );
        let later = httpdate::fmt_http_date(now + Duration::from_secs(12));
        assert_eq!(
            parse_retry_after(None, Some(&later), now),
            Some(Duration::from_secs(12))
        );
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(12));
        assert_eq!(
            parse_retry_after(None, Some(&earlier), now),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after(None, Some("86400"), now),
            Some(MAX_RETRY_AFTER)
        );
        assert_eq!(parse_retry_after(None, Some("soon"), now), None);
        assert_eq!(parse_retry_after(Some("-1"), None, now), None);
        assert_eq!(parse_retry_after(None, None, now), None);
    }
}
