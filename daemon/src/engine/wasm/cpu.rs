//! CPU time of a call. Wasm runs on whichever runtime thread polls it, so time is measured
//! per poll with the calling thread's CPU clock and summed; the same wrapper enforces the
//! profile's CPU limit between polls (the epoch yield bounds how long one poll can run).
//!
//! The first poll is charged its wall time instead: never less than the CPU it used, and
//! read from the vDSO, where the thread's CPU clock is two system calls — a sixth of a warm
//! call's cost in the engine, for a call that ends within that poll (most do). The epoch
//! yield bounds that poll to a few milliseconds of guest code, so what a busy host can add
//! to it (time the thread spent preempted) is bounded too, and only ever counts against the
//! tool, never for it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::engine::contract::RunStats;

use super::limits::LimitHit;

pub struct CpuMetered<F> {
    inner: Pin<Box<F>>,
    stats: Arc<RunStats>,
    used: Duration,
    limit: Option<Duration>,
    /// Whether the first poll (charged its wall time) is behind.
    polled: bool,
}

impl<F: Future> CpuMetered<F> {
    pub fn new(inner: F, stats: Arc<RunStats>, limit: Option<Duration>) -> Self {
        CpuMetered {
            inner: Box::pin(inner),
            stats,
            used: Duration::ZERO,
            limit,
            polled: false,
        }
    }
}

impl<F: Future> Future for CpuMetered<F> {
    type Output = Result<F::Output, LimitHit>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let (poll, spent) = if this.polled {
            let before = thread_cpu_time();
            let poll = this.inner.as_mut().poll(cx);
            (poll, thread_cpu_time().saturating_sub(before))
        } else {
            this.polled = true;
            let before = Instant::now();
            let poll = this.inner.as_mut().poll(cx);
            (poll, before.elapsed())
        };
        this.used += spent;
        this.stats.add_cpu_time(spent);
        match poll {
            Poll::Ready(output) => Poll::Ready(Ok(output)),
            Poll::Pending => match this.limit {
                Some(limit) if this.used > limit => Poll::Ready(Err(LimitHit::CpuTime {
                    limit_ms: limit.as_millis(),
                })),
                _ => Poll::Pending,
            },
        }
    }
}

/// CPU time consumed by the calling thread.
fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is supported on
    // every Linux kernel airlock runs on. On failure the clock reads zero, which only makes
    // the accounting undercount.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(
        u64::try_from(now.tv_sec).unwrap_or(0),
        u32::try_from(now.tv_nsec).unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn counts_the_cpu_time_of_polls() {
        let stats = Arc::new(RunStats::default());
        // Burns a known amount of this thread's CPU, measured with the same clock, so the
        // test holds however loaded the machine is.
        let busy = async {
            let start = thread_cpu_time();
            let mut x = 0u64;
            while thread_cpu_time() - start < Duration::from_millis(20) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            x
        };
        CpuMetered::new(busy, stats.clone(), None)
            .await
            .expect("no limit");
        assert!(
            stats.cpu_time() >= Duration::from_millis(20),
            "{:?}",
            stats.cpu_time()
        );
    }

    #[tokio::test]
    async fn charges_the_first_poll_its_wall_time_and_later_polls_their_cpu() {
        let nap = Duration::from_millis(30);
        let stats = Arc::new(RunStats::default());
        let napping_first = async { std::thread::sleep(nap) };
        CpuMetered::new(napping_first, stats.clone(), None)
            .await
            .expect("no limit");
        assert!(stats.cpu_time() >= nap, "{:?}", stats.cpu_time());

        let stats = Arc::new(RunStats::default());
        let napping_later = async {
            tokio::task::yield_now().await;
            std::thread::sleep(nap);
        };
        CpuMetered::new(napping_later, stats.clone(), None)
            .await
            .expect("no limit");
        assert!(stats.cpu_time() < nap, "{:?}", stats.cpu_time());
    }

    #[tokio::test]
    async fn stops_a_future_that_exceeds_its_limit_between_polls() {
        let stats = Arc::new(RunStats::default());
        let spinner = async {
            loop {
                let start = std::time::Instant::now();
                while start.elapsed() < Duration::from_millis(5) {
                    std::hint::spin_loop();
                }
                tokio::task::yield_now().await;
            }
        };
        let result = CpuMetered::new(spinner, stats, Some(Duration::from_millis(20))).await;
        assert!(matches!(result, Err(LimitHit::CpuTime { limit_ms: 20 })));
    }
}
