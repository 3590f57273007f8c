//! The sandbox's first process, from `clone` to `execve`.
//!
//! It is cloned with `CLONE_VM` from a launcher thread of the daemon, into new user, pid,
//! mount, uts (and net and ipc) namespaces, and runs on a stack the launcher owns, reading a
//! [`Plan`] the launcher prepared. Sharing the daemon's memory is what makes the spawn cheap
//! (no page tables are copied), and it is why this code obeys strict rules:
//!
//! - only raw system calls ([`sys::syscall`]): no libc, so no `errno` of another thread is
//!   written and no lock of the daemon is taken;
//! - no allocation and nothing that could panic: every path, buffer and structure it needs
//!   is in the plan, built by the launcher before the clone;
//! - all signals stay blocked until just before `execve`, and every handler is reset first,
//!   so no handler of the daemon ever runs on this stack;
//! - a failure is written to the plan's [`Report`] (stage, step, errno) before the process
//!   exits, for the launcher to turn into a message naming the layer that failed.
//!
//! Nothing may outlive the daemon, whenever it dies. The clone gets a copy of the daemon's
//! descriptor table (the listening socket, the store, every pipe), so the first two things
//! the process does are to arm its parent-death signal and to keep only the descriptors the
//! plan lists ([`Plan::keep`]), with the sandbox's own pipes as stdin, stdout and stderr.
//! From then on the daemon's end of each pipe is held by the daemon alone: if it dies, the
//! process reads end-of-file where it waits for a go-ahead. Switching to the sandbox's ids
//! clears the parent-death signal (the kernel does so on any change of effective ids), so it
//! is armed again right after, and the process then confirms the daemon is alive through a
//! handshake: it writes one byte to the status pipe and waits for the launcher's answer.
//! An answer proves the launcher thread — the parent whose death sends the signal — lived
//! after the signal was armed; no answer (end-of-file) means it is gone, and the process
//! exits. A check of the daemon's liveness by polling alone could not prove that: a dying
//! daemon's threads exit one by one, and the parent can be gone while the process lingers.
//!
//! The order matters: the launcher writes the id maps while the process waits on `go`; the
//! process then joins its cgroups itself, before its cgroup namespace is rooted there (see
//! [`Plan::cgroup_joins`]); mounts need the capabilities the new user namespace grants;
//! Landlock and seccomp need `no_new_privs`; capabilities are dropped last, after the
//! operations that need them; nothing may be mounted after the root is pivoted and sealed.

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;

use super::sys;

mod raw;
mod shared;

use raw::{
    Outcome, ROOT, SELF, TMPFS, add_inside_rule, become_sandbox_ids, chdir, check, check_at,
    clear_capabilities, drop_capability_bounds, execute, exit_group, install_filter, integer_call,
    make_mounts_private, make_read_only, name_spare, pivot_into_working_directory, ptr, raw,
    reset_signal_handlers, run_step, set_hostname, set_rlimit, unblock_signals,
};
pub use shared::{
    Args, Failure, GO, HANDSHAKE, InsideRule, PARKED, Pause, PauseAt, Plan, Report, Stage, Step,
};

/// The entry point `clone` starts the first process at. `plan` points to a [`Plan`] that
/// stays alive and unchanged until this process has executed the program or exited: the
/// launcher, its only caller, waits for either.
pub(super) extern "C" fn entry(plan: *mut c_void) -> c_int {
    // SAFETY: the launcher passes a live Plan (see above).
    let plan = unsafe { &*(plan as *const Plan) };
    match build(plan) {
        Ok(()) => {
            plan.report.reach(Stage::Ready);
            exit_group(0)
        }
        Err((stage, index, errno)) => {
            plan.report.fail(stage, index, errno);
            exit_group(127)
        }
    }
}

fn build(plan: &Plan) -> Outcome {
    plan.report.reach(Stage::Started);
    pause(plan, PauseAt::Clone);

    // If the launcher thread dies from here on, so does this process; and nothing of the
    // daemon's but the plan's descriptors stays open in it.
    plan.report.reach(Stage::ParentDeathSignal);
    arm_parent_death_signal()?;
    plan.report.reach(Stage::Descriptors);
    keep_only_planned_descriptors(plan)?;
    reset_signal_handlers();

    plan.report.reach(Stage::WaitForParent);
    wait_for_go(plan, Stage::WaitForParent)?;

    join_cgroups(plan)?;
    // The cgroup namespace is rooted at the group just joined.
    check(
        Stage::CgroupNamespace,
        integer_call(libc::SYS_unshare, [libc::CLONE_NEWCGROUP as usize, 0, 0]),
    )?;
    check(Stage::Session, integer_call(libc::SYS_setsid, [0; 3]))?;
    make_mounts_private()?;
    mount_root(plan)?;
    check(Stage::RootMount, chdir(&plan.root))?;

    // From here on, files are created as the sandbox's ids (which the new user namespace
    // maps) and paths are relative to the new root, so no host directory above it is
    // looked up again.
    become_sandbox_ids(plan.uid as usize, plan.gid as usize)?;
    pause(plan, PauseAt::Identity);
    // The id change cleared the parent-death signal: arm it again, then prove the parent
    // was still there afterwards (see the module docs).
    arm_parent_death_signal()?;
    plan.report.reach(Stage::Handshake);
    handshake(plan)?;

    pause(plan, PauseAt::Mounts);
    for (index, step) in plan.steps.iter().enumerate() {
        run_step(step).map_err(|errno| (Stage::Mount, index as u32, errno))?;
    }
    pause(plan, PauseAt::Pivot);
    pivot_into_working_directory()?;
    check(Stage::RootReadOnly, make_read_only(ROOT))?;
    check(Stage::Hostname, set_hostname(&plan.hostname))?;
    for (index, rule) in plan.inside_rules.iter().enumerate() {
        add_inside_rule(plan.landlock, rule)
            .map_err(|errno| (Stage::LandlockRule, index as u32, errno))?;
    }

    // Whatever the kept descriptors are, none survives the exec.
    check(
        Stage::Descriptors,
        integer_call(
            libc::SYS_close_range,
            [3, u32::MAX as usize, libc::CLOSE_RANGE_CLOEXEC as usize],
        ),
    )?;
    check(Stage::WorkingDirectory, chdir(&plan.cwd))?;
    for (index, limit) in plan.rlimits.iter().enumerate() {
        check_at(Stage::Rlimit, index as u32, set_rlimit(limit))?;
    }

    drop_capability_bounds(plan.cap_last)?;
    check(
        Stage::NoNewPrivs,
        integer_call(libc::SYS_prctl, [libc::PR_SET_NO_NEW_PRIVS as usize, 1, 0]),
    )?;
    pause(plan, PauseAt::Landlock);
    check(
        Stage::Landlock,
        integer_call(
            libc::SYS_landlock_restrict_self,
            [plan.landlock as usize, 0, 0],
        ),
    )?;
    check(Stage::Capabilities, clear_capabilities())?;
    pause(plan, PauseAt::Seccomp);
    for (index, program) in plan.seccomp.programs().iter().enumerate() {
        check_at(Stage::Seccomp, index as u32, install_filter(program))?;
    }
    if plan.park {
        // Everything but the program is in place, and the filter already holds: what the
        // process does from here until its call is what any tool may do.
        plan.report.reach(Stage::Parked);
        name_spare();
        write_status(plan, PARKED, Stage::Parked)?;
        wait_for_go(plan, Stage::Parked)?;
    }
    check(Stage::Signals, unblock_signals())?;
    if !plan.exec {
        return Ok(());
    }
    pause(plan, PauseAt::Exec);
    plan.report.reach(Stage::Exec);
    // Set before the clone, or before the go-ahead just read.
    let args = plan.args.load(Ordering::SeqCst);
    if args.is_null() {
        return Err((Stage::Exec, 0, libc::EINVAL));
    }
    // SAFETY: a pointer the launcher stored to an `Args` it keeps alive until this process
    // has executed the program or exited (see `Plan::args`).
    let args = unsafe { &*args };
    check(Stage::Exec, execute(&plan.program, args))
}

/// The tmpfs the sandbox's root is built in, on the plan's host directory.
fn mount_root(plan: &Plan) -> Outcome {
    let flags = (libc::MS_NOSUID | libc::MS_NODEV) as usize;
    // SAFETY: every pointer is a NUL-terminated string of the plan or a constant.
    let ret = unsafe {
        raw(
            libc::SYS_mount,
            [
                ptr(TMPFS),
                plan.root.as_ptr() as usize,
                ptr(TMPFS),
                flags,
                plan.root_options.as_ptr() as usize,
                0,
            ],
        )
    };
    check(Stage::RootMount, ret)
}

/// Moves this process into its groups, then closes the files that did it: the program
/// never gets a way to move itself elsewhere.
fn join_cgroups(plan: &Plan) -> Outcome {
    for (index, &fd) in plan.cgroup_joins.iter().enumerate() {
        // SAFETY: writes one byte of a constant to a descriptor of the plan.
        let wrote = unsafe { raw(libc::SYS_write, [fd as usize, ptr(SELF), 1, 0, 0, 0]) };
        check_at(Stage::Cgroup, index as u32, wrote)?;
        check_at(
            Stage::Cgroup,
            index as u32,
            integer_call(libc::SYS_close, [fd as usize, 0, 0]),
        )?;
    }
    Ok(())
}

/// Writes the handshake byte and waits for the launcher's answer (see the module docs).
fn handshake(plan: &Plan) -> Outcome {
    write_status(plan, HANDSHAKE, Stage::Handshake)?;
    wait_for_go(plan, Stage::Handshake)
}

/// Writes one byte to the launcher on the status pipe.
fn write_status(plan: &Plan, byte: u8, stage: Stage) -> Outcome {
    let byte = [byte];
    // SAFETY: writes one byte from a local array.
    let wrote = unsafe {
        raw(
            libc::SYS_write,
            [plan.status as usize, byte.as_ptr() as usize, 1, 0, 0, 0],
        )
    };
    if sys::result(wrote) != Ok(1) {
        return Err((stage, 0, libc::EPIPE));
    }
    Ok(())
}

/// Sends this process SIGKILL when its parent (the launcher thread) dies.
fn arm_parent_death_signal() -> Outcome {
    // SAFETY: prctl with integer arguments only.
    let ret = unsafe {
        raw(
            libc::SYS_prctl,
            [
                libc::PR_SET_PDEATHSIG as usize,
                libc::SIGKILL as usize,
                0,
                0,
                0,
                0,
            ],
        )
    };
    check(Stage::ParentDeathSignal, ret)
}

/// Puts the sandbox's pipes on 0, 1 and 2 and closes every other descriptor the clone
/// copied from the daemon, but the plan's.
fn keep_only_planned_descriptors(plan: &Plan) -> Outcome {
    // SAFETY: dup3 and close_range on descriptor numbers only.
    unsafe {
        for (target, fd) in plan.stdio.iter().enumerate() {
            check(
                Stage::Descriptors,
                raw(libc::SYS_dup3, [*fd as usize, target, 0, 0, 0, 0]),
            )?;
        }
        let mut first = 3usize;
        for &fd in &plan.keep {
            let fd = fd as usize;
            if fd > first {
                check(
                    Stage::Descriptors,
                    raw(libc::SYS_close_range, [first, fd - 1, 0, 0, 0, 0]),
                )?;
            }
            first = first.max(fd + 1);
        }
        check(
            Stage::Descriptors,
            raw(
                libc::SYS_close_range,
                [first, u32::MAX as usize, 0, 0, 0, 0],
            ),
        )
    }
}

/// Waits for the launcher's go-ahead byte. End-of-file means the launcher gave up on this
/// sandbox, or the daemon died: only it holds the pipe's other end.
fn wait_for_go(plan: &Plan, stage: Stage) -> Outcome {
    let mut byte = 0u8;
    loop {
        // SAFETY: reads one byte into a local.
        let got = unsafe {
            raw(
                libc::SYS_read,
                [plan.go as usize, &mut byte as *mut u8 as usize, 1, 0, 0, 0],
            )
        };
        return match sys::result(got) {
            Ok(1) if byte == GO => Ok(()),
            Ok(_) => Err((stage, 0, libc::EPIPE)),
            Err(libc::EINTR) => continue,
            Err(errno) => Err((stage, 0, errno)),
        };
    }
}

/// A test's pause point (debug builds; see `crate::pause`): reports the arrival, then waits
/// until the daemon has died and carries on — to show that what follows notices.
fn pause(plan: &Plan, at: PauseAt) {
    let Some(pause) = plan.pause.as_ref().filter(|pause| pause.at == at) else {
        return;
    };
    // SAFETY: the line is the plan's; the pollfd is a local; a null timeout waits for ever.
    unsafe {
        raw(
            libc::SYS_write,
            [
                pause.report as usize,
                pause.line.as_ptr() as usize,
                pause.line.len(),
                0,
                0,
                0,
            ],
        );
        let mut daemon = libc::pollfd {
            fd: pause.daemon,
            events: libc::POLLIN,
            revents: 0,
        };
        loop {
            let ready = raw(
                libc::SYS_ppoll,
                [&mut daemon as *mut libc::pollfd as usize, 1, 0, 0, 0, 0],
            );
            if sys::result(ready) != Err(libc::EINTR) {
                break;
            }
        }
    }
}

#[cfg(test)]
#[path = "child_tests.rs"]
mod tests;
