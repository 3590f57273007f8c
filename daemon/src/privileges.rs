//! The capabilities the daemon works with when it is not root, and how it takes them up.
//!
//! The process engine and the recording of a call's writes need four capabilities
//! ([`ENGINE_CAPABILITIES`]); the WebAssembly engine needs none. The packaged service is
//! granted them as ambient capabilities, which make them effective at exec. A container
//! runtime does that for a user that is not root only sometimes (podman does; Kubernetes'
//! CRI runtimes and Docker do not), so the container image gives `airlockd` the four as the
//! file's permitted capabilities, without the effective bit: the kernel then hands over
//! those the container's bounding set holds, and never refuses the exec for those it does
//! not (a file with the effective bit would not start at all with less, where this one starts
//! and names what it lacks). [`take_up`] makes them effective.
//!
//! Gaining capabilities at exec leaves the daemon dumpable (the kernel decides that on the
//! ids alone), so its sandboxes' `/proc` files stay its own; it does make the exec secure,
//! and glibc then ignores variables such as `TMPDIR` and `LD_PRELOAD`.

use rustix::thread::{CapabilitySet, CapabilitySets};

/// Mounting (overlays, each sandbox's root and `/proc`), writing other ids into a user
/// namespace's maps, and working in the overlays' directories past their modes.
pub const ENGINE_CAPABILITIES: [(CapabilitySet, &str); 4] = [
    (CapabilitySet::SYS_ADMIN, "CAP_SYS_ADMIN"),
    (CapabilitySet::SETUID, "CAP_SETUID"),
    (CapabilitySet::SETGID, "CAP_SETGID"),
    (CapabilitySet::DAC_OVERRIDE, "CAP_DAC_OVERRIDE"),
];

/// What [`take_up`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakenUp {
    /// The capabilities made effective: permitted, but not effective at exec.
    pub raised: Vec<&'static str>,
}

/// Makes effective each of [`ENGINE_CAPABILITIES`] that the daemon is permitted but does not
/// hold.
///
/// Capabilities are a thread's: this must run on the main thread before any other thread
/// starts, so that every thread the daemon makes inherits them.
pub fn take_up() -> std::io::Result<TakenUp> {
    let sets = rustix::thread::capabilities(None)?;
    let raise: Vec<(CapabilitySet, &'static str)> = ENGINE_CAPABILITIES
        .into_iter()
        .filter(|(capability, _)| {
            sets.permitted.contains(*capability) && !sets.effective.contains(*capability)
        })
        .collect();
    if raise.is_empty() {
        return Ok(TakenUp { raised: Vec::new() });
    }
    let effective = raise
        .iter()
        .fold(sets.effective, |set, (capability, _)| set | *capability);
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective,
            permitted: sets.permitted,
            inheritable: sets.inheritable,
        },
    )?;
    Ok(TakenUp {
        raised: raise.into_iter().map(|(_, name)| name).collect(),
    })
}

/// The names of those of [`ENGINE_CAPABILITIES`] the calling thread does not hold as
/// effective (all of them when they cannot be read).
pub fn missing() -> Vec<&'static str> {
    let effective = rustix::thread::capabilities(None)
        .map(|sets| sets.effective)
        .unwrap_or(CapabilitySet::empty());
    ENGINE_CAPABILITIES
        .into_iter()
        .filter(|(capability, _)| !effective.contains(*capability))
        .map(|(_, name)| name)
        .collect()
}
