//! The keeper against real processes: deadlines kill, disarming spares, a lost keeper is
//! replaced, and it holds no more than it can.

use std::os::fd::AsFd;

use super::super::limits::Ended;
use super::*;

/// A child process that would sleep for a minute, with its pidfd.
fn sleeper() -> (std::process::Child, OwnedFd) {
    let child = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("spawn sleep");
    let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("a pid");
    let pidfd =
        rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).expect("pidfd_open");
    (child, pidfd)
}

/// Waits (a minute at most) for `child` to end; how it ended.
fn ended(child: &mut std::process::Child) -> std::process::ExitStatus {
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        assert!(Instant::now() < give_up, "the process was never killed");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn killed(status: std::process::ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    status.signal() == Some(libc::SIGKILL)
}

#[test]
fn a_process_still_running_at_its_deadline_is_killed_by_the_keeper_alone() {
    let keeper = Keeper::start().expect("start the keeper");
    let (mut child, pidfd) = sleeper();
    let armed = Instant::now();
    let guard = keeper
        .arm(pidfd.as_fd(), armed + Duration::from_millis(200))
        .expect("arm");
    let status = ended(&mut child);
    assert!(killed(status), "{status:?}");
    assert!(
        armed.elapsed() >= Duration::from_millis(200),
        "killed early"
    );
    drop(guard);
}

#[test]
fn a_disarmed_process_is_left_alone_and_others_are_still_kept() {
    let keeper = Keeper::start().expect("start the keeper");
    let (mut spared, spared_fd) = sleeper();
    let (mut due, due_fd) = sleeper();
    let deadline = Instant::now() + Duration::from_millis(300);
    let disarmed = keeper.arm(spared_fd.as_fd(), deadline).expect("arm");
    let _kept = keeper.arm(due_fd.as_fd(), deadline).expect("arm");
    drop(disarmed);
    assert!(killed(ended(&mut due)));
    // Both deadlines have passed: the spared one would have gone with the other.
    assert_eq!(spared.try_wait().expect("try_wait"), None);
    spared.kill().expect("kill");
    spared.wait().expect("wait");
}

#[test]
fn the_keeper_leads_its_own_session_and_holds_only_its_socket() {
    let keeper = Keeper::start().expect("start the keeper");
    let pid = keeper.pid();
    let fds: Vec<_> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("read the keeper's descriptors")
        .flatten()
        .map(|entry| entry.file_name())
        .collect();
    assert_eq!(fds.len(), 1, "{fds:?}");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    assert!(status.starts_with("Name:\tairlock-keeper\n"), "{status}");
    let sid = rustix::process::getsid(rustix::process::Pid::from_raw(pid)).expect("getsid");
    assert_eq!(sid.as_raw_nonzero().get(), pid);
    let blocked = status
        .lines()
        .find_map(|line| line.strip_prefix("SigBlk:\t"))
        .expect("SigBlk");
    let blocked = u64::from_str_radix(blocked, 16).expect("a hexadecimal mask");
    for signal in [
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGTERM,
        libc::SIGUSR1,
        libc::SIGPIPE,
        libc::SIGCHLD,
    ] {
        assert_ne!(
            blocked & (1 << (signal - 1)),
            0,
            "signal {signal}: {blocked:x}"
        );
    }
}

#[test]
fn the_keeper_exits_by_itself_when_the_daemons_end_closes() {
    let link = Link::start().expect("start a keeper");
    rustix::net::shutdown(&link.socket, rustix::net::Shutdown::Both).expect("shutdown");
    let waited = pidfd::wait(link.process.as_raw_fd(), false)
        .expect("wait")
        .expect("exited");
    assert!(matches!(waited.ended, Ended::Exited(0)), "{waited:?}");
}

#[test]
fn a_keeper_found_gone_is_replaced_and_the_call_armed_with_the_new_one() {
    let keeper = Keeper::start().expect("start the keeper");
    let first = keeper.pid();
    let gone = keeper.current();
    pidfd::kill(gone.process.as_raw_fd());
    pidfd::wait(gone.process.as_raw_fd(), false).expect("reap");
    drop(gone);
    let (mut child, pidfd) = sleeper();
    let _armed = keeper
        .arm(pidfd.as_fd(), Instant::now() + Duration::from_millis(200))
        .expect("armed by a new keeper");
    assert_ne!(keeper.pid(), first);
    assert!(killed(ended(&mut child)));
}

#[test]
fn no_more_sandboxes_are_armed_than_the_keeper_can_hold() {
    let mut keeper = Keeper::start().expect("start the keeper");
    keeper.capacity = 2;
    let (mut child, pidfd) = sleeper();
    let far = Instant::now() + Duration::from_secs(600);
    let first = keeper.arm(pidfd.as_fd(), far).expect("arm");
    let _second = keeper.arm(pidfd.as_fd(), far).expect("arm");
    let refused = keeper.arm(pidfd.as_fd(), far);
    assert!(matches!(refused, Err(KeeperError::Full(2))), "{refused:?}");
    drop(first);
    let _third = keeper.arm(pidfd.as_fd(), far).expect("room again");
    child.kill().expect("kill");
    child.wait().expect("wait");
}
