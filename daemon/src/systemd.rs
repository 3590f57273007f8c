//! Telling systemd what the daemon is doing (`sd_notify(3)`, for a `Type=notify` unit):
//! ready once it serves, reloading while a SIGHUP's reload runs, stopping once it stops
//! taking calls. Nothing is sent when `NOTIFY_SOCKET` is unset (a daemon not started by
//! systemd), and a notification that cannot be sent is logged, never fatal: the daemon
//! serves all the same, and systemd's start timeout reports what it missed.

use sd_notify::NotifyState;

/// The daemon serves: systemd's `start` (and a reload's `ExecReload=`) returns.
pub fn ready(status: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// A reload began; [`ready`] ends it. systemd needs the monotonic time with it to tell this
/// reload from an earlier one.
pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => send(&[NotifyState::Reloading, now]),
        Err(error) => tracing::warn!(%error, "cannot read the monotonic clock for systemd"),
    }
}

/// The daemon takes no new calls and drains the running ones.
pub fn stopping() {
    send(&[NotifyState::Stopping, NotifyState::Status("draining")]);
}

fn send(states: &[NotifyState]) {
    // Not unset: the environment of a process whose threads run is not changed, and the
    // sandboxes' environments are built from nothing, so no tool sees the variable.
    if let Err(error) = sd_notify::notify(false, states) {
        tracing::warn!(%error, "cannot notify systemd (NOTIFY_SOCKET)");
    }
}
