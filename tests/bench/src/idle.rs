//! Whether the machine was quiet while a section ran, so that its targets are judged only on
//! figures nothing else disturbed.
//!
//! Before each section the benchmark waits (a bounded while, saying so) for a second in which
//! other processes used almost no CPU, and notes the load average; after it, it counts the CPU
//! that other processes used during the section. "Other" is the whole machine's busy time
//! (/proc/stat) less what this benchmark's own processes used: itself, its children (the
//! daemons and peers it starts, living or reaped) and the database server a section is given
//! (its processes are named `postgres`). The load average is reported, not judged: it trails
//! the last minutes (a build that just finished), while the CPU counts say what happened.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use procfs::process::{Stat, all_processes};
use procfs::{Current, CurrentSI, KernelStats, LoadAverage};

/// Other processes may use this share of one core (on average over the window) before the
/// machine counts as busy: a VM's own housekeeping stays under it, a compiler or a browser
/// tab does not.
const QUIET_SHARE_OF_A_CORE: f64 = 0.10;

/// How long one look at the machine before a section lasts: long enough to hold several
/// clock ticks (10 ms each) of anyone else's work.
const LOOK: Duration = Duration::from_secs(1);

/// How long the benchmark waits for the machine to go quiet before measuring anyway (and
/// then judging nothing of that section).
const MAX_WAIT: Duration = Duration::from_secs(60);

/// Processes whose CPU counts as the benchmark's own wherever they sit in the process tree:
/// the PostgreSQL server the fleet section works against.
const PEER_SERVERS: [&str; 1] = ["postgres"];

/// CPU use, in clock ticks, at one moment.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    /// The whole machine's busy ticks.
    busy: u64,
    /// This benchmark's processes' ticks (see the module's doc).
    ours: u64,
}

impl Sample {
    fn take() -> anyhow::Result<Sample> {
        let total = KernelStats::current()?.total;
        let busy = total.user
            + total.nice
            + total.system
            + total.irq.unwrap_or(0)
            + total.softirq.unwrap_or(0)
            + total.steal.unwrap_or(0);
        Ok(Sample {
            at: Instant::now(),
            busy,
            ours: ours()?,
        })
    }

    /// Cores' worth of CPU others used since `earlier`.
    fn others_since(&self, earlier: &Sample) -> f64 {
        let ticks = self
            .busy
            .saturating_sub(earlier.busy)
            .saturating_sub(self.ours.saturating_sub(earlier.ours));
        let seconds = self.at.duration_since(earlier.at).as_secs_f64();
        if seconds <= 0.0 {
            return 0.0;
        }
        ticks as f64 / procfs::ticks_per_second() as f64 / seconds
    }
}

/// Ticks used by this process, its descendants (with their reaped children) and the peer
/// servers.
fn ours() -> anyhow::Result<u64> {
    let me = std::process::id() as i32;
    let mut stats: HashMap<i32, Stat> = HashMap::new();
    for process in all_processes()? {
        // A process that ends while the list is read is simply not counted.
        if let Ok(stat) = process.and_then(|process| process.stat()) {
            stats.insert(stat.pid, stat);
        }
    }
    let mut mine = HashSet::from([me]);
    // Parents come before children in no particular order: spread until nothing changes.
    loop {
        let before = mine.len();
        for stat in stats.values() {
            if mine.contains(&stat.ppid) {
                mine.insert(stat.pid);
            }
        }
        if mine.len() == before {
            break;
        }
    }
    let ticks = |stat: &Stat| {
        stat.utime
            + stat.stime
            + u64::try_from(stat.cutime).unwrap_or(0)
            + u64::try_from(stat.cstime).unwrap_or(0)
    };
    Ok(stats
        .values()
        .filter(|stat| mine.contains(&stat.pid) || PEER_SERVERS.contains(&stat.comm.as_str()))
        .map(ticks)
        .sum())
}

/// What the machine was doing around one section.
#[derive(Debug, Clone)]
pub struct Quiet {
    /// The 1-, 5- and 15-minute load averages when the section started.
    pub load: [f32; 3],
    /// Cores' worth of CPU other processes used in the last look before the section.
    pub before: f64,
    /// The same over the whole section.
    pub during: f64,
}

impl Quiet {
    /// Why the section's targets cannot be judged; none when the machine was quiet.
    pub fn disturbed(&self) -> Option<String> {
        let share = |cores: f64| format!("{:.0}% of a core", cores * 100.0);
        if self.before > QUIET_SHARE_OF_A_CORE {
            return Some(format!(
                "the machine was busy before it started: other processes used {}",
                share(self.before)
            ));
        }
        if self.during > QUIET_SHARE_OF_A_CORE {
            return Some(format!(
                "other processes used {} while it ran",
                share(self.during)
            ));
        }
        None
    }

    /// One line for the report.
    pub fn describe(&self) -> String {
        format!(
            "load average {:.2} {:.2} {:.2}; other processes' CPU: {:.1}% of a core in the \
             second before, {:.1}% during",
            self.load[0],
            self.load[1],
            self.load[2],
            self.before * 100.0,
            self.during * 100.0
        )
    }
}

/// A section being watched: made when it starts, finished when it ends.
pub struct Watch {
    load: [f32; 3],
    before: f64,
    start: Sample,
}

impl Watch {
    /// Waits up to [`MAX_WAIT`] for a quiet second (saying so on stderr), then starts
    /// counting.
    pub async fn start(section: &str) -> anyhow::Result<Watch> {
        let load = LoadAverage::current()?;
        let waited = Instant::now();
        let mut said = false;
        loop {
            let first = Sample::take()?;
            tokio::time::sleep(LOOK).await;
            let second = Sample::take()?;
            let before = second.others_since(&first);
            if before <= QUIET_SHARE_OF_A_CORE || waited.elapsed() >= MAX_WAIT {
                return Ok(Watch {
                    load: [load.one, load.five, load.fifteen],
                    before,
                    start: second,
                });
            }
            if !said {
                eprintln!(
                    "{section}: waiting up to {} s for the machine to go quiet \
                     (other processes use {:.0}% of a core)",
                    MAX_WAIT.as_secs(),
                    before * 100.0
                );
                said = true;
            }
        }
    }

    pub fn finish(self) -> anyhow::Result<Quiet> {
        let end = Sample::take()?;
        Ok(Quiet {
            load: self.load,
            before: self.before,
            during: end.others_since(&self.start),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_machine_is_named_as_such() {
        let quiet = Quiet {
            load: [0.1, 0.2, 0.3],
            before: 0.02,
            during: 0.01,
        };
        assert_eq!(quiet.disturbed(), None);
        let busy_before = Quiet {
            before: 0.85,
            ..quiet.clone()
        };
        assert!(
            busy_before
                .disturbed()
                .is_some_and(|why| why.contains("before it started") && why.contains("85%")),
            "{:?}",
            busy_before.disturbed()
        );
        let busy_during = Quiet {
            during: 0.5,
            ..quiet
        };
        assert!(
            busy_during
                .disturbed()
                .is_some_and(|why| why.contains("while it ran")),
            "{:?}",
            busy_during.disturbed()
        );
    }

    /// CPU this process burns is its own, not another's.
    #[test]
    fn this_process_work_is_not_counted_as_others() {
        let start = Sample::take().expect("sample");
        let spin = Instant::now();
        while spin.elapsed() < Duration::from_millis(300) {
            std::hint::black_box(0u64);
        }
        let end = Sample::take().expect("sample");
        assert!(
            end.ours > start.ours,
            "own ticks {} -> {}",
            start.ours,
            end.ours
        );
    }
}
