//! Whether the machine was quiet while a section ran, so that its targets are judged only on
//! figures nothing else disturbed.
//!
//! Before each section the benchmark waits (a bounded while, saying so) for a second in which
//! other processes used almost no CPU, and notes the load average; after it, it counts the CPU
//! that other processes used during the section. "Other" is the whole machine's busy time
//! (/proc/stat) less what this benchmark's own processes used: itself, its children (the
//! daemons and peers it starts, living or reaped) and the database server a section is given
//! (its processes are named `postgres`). On a virtual machine the hypervisor's steal time
//! (CPU the host gave to someone else) counts as busy too, and is named apart: a VM whose host
//! is loaded is no quieter than one running a compiler. The load average is reported, not
//! judged: it trails the last minutes (a build that just finished), while the CPU counts say
//! what happened.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
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
    /// The whole machine's busy ticks, steal not included.
    busy: u64,
    /// Ticks the hypervisor took.
    steal: u64,
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
            + total.softirq.unwrap_or(0);
        Ok(Sample {
            at: Instant::now(),
            busy,
            steal: total.steal.unwrap_or(0),
            ours: ours()?,
        })
    }

    /// What others used since `earlier`.
    fn others_since(&self, earlier: &Sample) -> Others {
        let seconds = self.at.duration_since(earlier.at).as_secs_f64();
        let cores = |ticks: u64| {
            if seconds <= 0.0 {
                return 0.0;
            }
            ticks as f64 / procfs::ticks_per_second() as f64 / seconds
        };
        Others {
            processes: cores(
                self.busy
                    .saturating_sub(earlier.busy)
                    .saturating_sub(self.ours.saturating_sub(earlier.ours)),
            ),
            steal: cores(self.steal.saturating_sub(earlier.steal)),
        }
    }
}

/// Cores' worth of CPU that went to others over a window.
#[derive(Debug, Clone, Copy)]
pub struct Others {
    /// Other processes on this machine.
    pub processes: f64,
    /// The hypervisor (steal time).
    pub steal: f64,
}

impl Others {
    fn cores(&self) -> f64 {
        self.processes + self.steal
    }

    fn describe(&self) -> String {
        format!(
            "other processes used {:.0}% of a core, the hypervisor took {:.0}% (steal)",
            self.processes * 100.0,
            self.steal * 100.0
        )
    }
}

/// Ticks of this benchmark's processes that ended out of its sight: a daemon's sandboxed
/// processes, killed with it and reaped by init, whose CPU would otherwise count as others'
/// (see [`before_killing`]).
static ORPHANED: AtomicU64 = AtomicU64::new(0);

/// Ticks used by this process, its descendants (with their reaped children), the peer
/// servers, and the descendants killed with a daemon.
fn ours() -> anyhow::Result<u64> {
    let stats = processes()?;
    let me = std::process::id() as i32;
    let mut mine = under(&stats, me);
    mine.insert(me);
    Ok(stats
        .values()
        .filter(|stat| mine.contains(&stat.pid) || PEER_SERVERS.contains(&stat.comm.as_str()))
        .map(ticks)
        .sum::<u64>()
        + ORPHANED.load(Ordering::Relaxed))
}

/// Counts as this benchmark's the CPU of every process under `pid` (not `pid` itself, whose
/// parent reaps it): called just before `pid` is killed, which leaves them to init.
pub fn before_killing(pid: u32) -> anyhow::Result<()> {
    let stats = processes()?;
    let orphans: u64 = under(&stats, pid as i32)
        .iter()
        .filter_map(|pid| stats.get(pid))
        .map(ticks)
        .sum();
    ORPHANED.fetch_add(orphans, Ordering::Relaxed);
    Ok(())
}

/// The pids under `root` (not itself), as /proc lists them now.
pub fn descendants(root: u32) -> anyhow::Result<HashSet<i32>> {
    Ok(under(&processes()?, root as i32))
}

/// Every process's stat; one that ends while the list is read is simply not there.
fn processes() -> anyhow::Result<HashMap<i32, Stat>> {
    Ok(all_processes()?
        .filter_map(|process| process.and_then(|process| process.stat()).ok())
        .map(|stat| (stat.pid, stat))
        .collect())
}

fn under(stats: &HashMap<i32, Stat>, root: i32) -> HashSet<i32> {
    let mut found = HashSet::from([root]);
    // Parents come before children in no particular order: spread until nothing changes.
    loop {
        let before = found.len();
        for stat in stats.values() {
            if found.contains(&stat.ppid) {
                found.insert(stat.pid);
            }
        }
        if found.len() == before {
            break;
        }
    }
    found.remove(&root);
    found
}

/// A process's ticks with its reaped children's.
fn ticks(stat: &Stat) -> u64 {
    stat.utime
        + stat.stime
        + u64::try_from(stat.cutime).unwrap_or(0)
        + u64::try_from(stat.cstime).unwrap_or(0)
}

/// What the machine was doing around one section.
#[derive(Debug, Clone)]
pub struct Quiet {
    /// The 1-, 5- and 15-minute load averages when the section started.
    pub load: [f32; 3],
    /// What others used in the last look before the section.
    pub before: Others,
    /// The same over the whole section.
    pub during: Others,
}

impl Quiet {
    /// Why the section's targets cannot be judged; none when the machine was quiet.
    pub fn disturbed(&self) -> Option<String> {
        if self.before.cores() > QUIET_SHARE_OF_A_CORE {
            return Some(format!(
                "the machine was busy before it started: {}",
                self.before.describe()
            ));
        }
        if self.during.cores() > QUIET_SHARE_OF_A_CORE {
            return Some(format!("while it ran, {}", self.during.describe()));
        }
        None
    }

    /// One line for the report.
    pub fn describe(&self) -> String {
        format!(
            "load average {:.2} {:.2} {:.2}; CPU others used (other processes + steal), in \
             % of a core: {:.1} + {:.1} in the second before, {:.1} + {:.1} during",
            self.load[0],
            self.load[1],
            self.load[2],
            self.before.processes * 100.0,
            self.before.steal * 100.0,
            self.during.processes * 100.0,
            self.during.steal * 100.0
        )
    }
}

/// A section being watched: made when it starts, finished when it ends.
pub struct Watch {
    load: [f32; 3],
    before: Others,
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
            if before.cores() <= QUIET_SHARE_OF_A_CORE || waited.elapsed() >= MAX_WAIT {
                return Ok(Watch {
                    load: [load.one, load.five, load.fifteen],
                    before,
                    start: second,
                });
            }
            if !said {
                eprintln!(
                    "{section}: waiting up to {} s for the machine to go quiet ({})",
                    MAX_WAIT.as_secs(),
                    before.describe()
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

    /// Why `quiet` is not judged; fails the test when it is.
    fn why_disturbed(quiet: &Quiet) -> String {
        quiet
            .disturbed()
            .unwrap_or_else(|| panic!("judged although disturbed: {}", quiet.describe()))
    }

    #[test]
    fn a_busy_machine_is_named_as_such() {
        let little = |processes, steal| Others { processes, steal };
        let quiet = Quiet {
            load: [0.1, 0.2, 0.3],
            before: little(0.02, 0.0),
            during: little(0.01, 0.01),
        };
        assert_eq!(quiet.disturbed(), None);
        let why = why_disturbed(&Quiet {
            before: little(0.85, 0.0),
            ..quiet.clone()
        });
        assert!(
            why.contains("before it started") && why.contains("85%"),
            "{why}"
        );
        let why = why_disturbed(&Quiet {
            during: little(0.5, 0.0),
            ..quiet.clone()
        });
        assert!(why.contains("while it ran"), "{why}");
        // A host that takes the VM's CPU disturbs the figures as much as a process does.
        let why = why_disturbed(&Quiet {
            during: little(0.0, 0.28),
            ..quiet.clone()
        });
        assert!(why.contains("hypervisor took 28% (steal)"), "{why}");
        // The two count together against the one threshold: each alone is under it here.
        let at_the_edge = QUIET_SHARE_OF_A_CORE / 2.0;
        assert_eq!(
            Quiet {
                during: little(at_the_edge, at_the_edge),
                ..quiet.clone()
            }
            .disturbed(),
            None
        );
        why_disturbed(&Quiet {
            during: little(at_the_edge, at_the_edge + 0.01),
            ..quiet
        });
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
