//! Test-only pause points: places in the daemon where a test can make it stop, so that a
//! `kill -9` lands exactly there (the kill -9 matrix in `tests/`).
//!
//! A debug build reads `AIRLOCK_TEST_PAUSE=POINT[@N]` once at start: the N-th time (first by
//! default) the daemon reaches POINT, it writes `airlock test pause: reached POINT` to its
//! standard error and stops there for good, waiting to be killed. Release builds compile
//! every point to nothing and ignore the variable: no operator can turn this on by accident.
//!
//! Points inside a sandbox's first process cannot run daemon code (see
//! `engine::process::child`); for those the launcher hands the process the stage to stop at
//! and a descriptor to report on ([`sandbox_stage`]), and the process waits there until the
//! daemon is gone, then carries on — which is exactly when it must notice, and die.

use std::fmt;

/// Where a test can stop the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// A sandbox's first process, right after `clone`: before anything, its parent-death
    /// signal included, is set up.
    ProcessClone,
    /// The launcher has written the sandbox's uid and gid maps; the first process waits for
    /// its go-ahead.
    ProcessUidMap,
    /// The first process has switched to the sandbox's ids (which resets the parent-death
    /// signal) and has not armed it again yet.
    ProcessIdentity,
    /// Before the first mount of the sandbox's view.
    ProcessMounts,
    /// Before `pivot_root`.
    ProcessPivot,
    /// Before the Landlock ruleset is enforced.
    ProcessLandlock,
    /// Before the seccomp filter is installed.
    ProcessSeccomp,
    /// Right before `execve` of the tool's program.
    ProcessExec,
    /// On the compile thread, before a module is compiled (tools load before the daemon
    /// serves).
    WasmCompile,
    /// Before a call's module or component is instantiated.
    WasmInstantiate,
    /// Inside the store's transaction, right after it appended an event (counted per event,
    /// whatever else the transaction commits with it), before it commits.
    StoreCommit,
    /// Applying a change set to the workspace, right after one path landed (counted per
    /// path), before the next.
    ChangesApply,
}

impl Point {
    #[cfg(debug_assertions)]
    const ALL: [Point; 12] = [
        Point::ProcessClone,
        Point::ProcessUidMap,
        Point::ProcessIdentity,
        Point::ProcessMounts,
        Point::ProcessPivot,
        Point::ProcessLandlock,
        Point::ProcessSeccomp,
        Point::ProcessExec,
        Point::WasmCompile,
        Point::WasmInstantiate,
        Point::StoreCommit,
        Point::ChangesApply,
    ];

    /// The name tests use, as in `AIRLOCK_TEST_PAUSE`.
    pub fn name(self) -> &'static str {
        match self {
            Point::ProcessClone => "process:clone",
            Point::ProcessUidMap => "process:uid-map",
            Point::ProcessIdentity => "process:identity",
            Point::ProcessMounts => "process:mounts",
            Point::ProcessPivot => "process:pivot",
            Point::ProcessLandlock => "process:landlock",
            Point::ProcessSeccomp => "process:seccomp",
            Point::ProcessExec => "process:exec",
            Point::WasmCompile => "wasm:compile",
            Point::WasmInstantiate => "wasm:instantiate",
            Point::StoreCommit => "store:commit",
            Point::ChangesApply => "changes:apply",
        }
    }

    /// Only a debug build reads pause points from its environment.
    #[cfg(debug_assertions)]
    pub fn parse(name: &str) -> Option<Point> {
        Point::ALL.into_iter().find(|point| point.name() == name)
    }
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The line a paused daemon writes to its standard error.
pub fn reached_line(point: Point) -> String {
    format!("airlock test pause: reached {point}")
}

#[cfg(debug_assertions)]
mod armed {
    use std::io::Write;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::Point;

    /// The point to pause at and the occurrence, from the environment.
    struct Armed {
        point: Point,
        occurrence: u32,
        seen: AtomicU32,
    }

    fn armed() -> Option<&'static Armed> {
        static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
        ARMED
            .get_or_init(|| {
                let value = std::env::var("AIRLOCK_TEST_PAUSE").ok()?;
                let (name, occurrence) = match value.split_once('@') {
                    Some((name, n)) => (name, n.parse().ok()?),
                    None => (value.as_str(), 1),
                };
                let Some(point) = Point::parse(name) else {
                    eprintln!("AIRLOCK_TEST_PAUSE: unknown point `{name}`; ignored");
                    return None;
                };
                Some(Armed {
                    point,
                    occurrence,
                    seen: AtomicU32::new(0),
                })
            })
            .as_ref()
    }

    pub fn any() -> bool {
        armed().is_some()
    }

    /// Whether this is the occurrence of `point` to pause at.
    pub fn due(point: Point) -> bool {
        armed().is_some_and(|armed| {
            armed.point == point
                && armed.seen.fetch_add(1, Ordering::SeqCst) + 1 == armed.occurrence
        })
    }

    pub fn reached(point: Point) {
        if !due(point) {
            return;
        }
        let mut stderr = std::io::stderr().lock();
        let _ = writeln!(stderr, "{}", super::reached_line(point));
        let _ = stderr.flush();
        drop(stderr);
        loop {
            std::thread::park();
        }
    }
}

/// Stops here for good when a test asked to (debug builds only; see the module docs).
#[inline]
pub fn reached(point: Point) {
    #[cfg(debug_assertions)]
    armed::reached(point);
    #[cfg(not(debug_assertions))]
    let _ = point;
}

/// Whether a test asked to pause anywhere (debug builds only): what runs differs then, as
/// little as it can, so that the pause lands where the test expects it.
#[inline]
pub fn armed() -> bool {
    #[cfg(debug_assertions)]
    return armed::any();
    #[cfg(not(debug_assertions))]
    false
}

/// Whether the sandbox being built now should stop at `point` (one of the `Process*` points
/// inside the first process); counts as reaching it. Always false in release builds.
#[inline]
pub fn sandbox_stage(point: Point) -> bool {
    #[cfg(debug_assertions)]
    return armed::due(point);
    #[cfg(not(debug_assertions))]
    {
        let _ = point;
        false
    }
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::*;

    #[test]
    fn every_point_parses_from_its_name() {
        for point in Point::ALL {
            assert_eq!(Point::parse(point.name()), Some(point));
        }
        assert_eq!(Point::parse("process:nowhere"), None);
        assert_eq!(
            reached_line(Point::StoreCommit),
            "airlock test pause: reached store:commit"
        );
    }
}
