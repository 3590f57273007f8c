//! The seccomp filter every sandboxed process runs under: an allow-list, with everything else
//! refused — the model of Docker's default profile, gVisor and Firecracker, so that a system
//! call a new kernel adds is refused until someone decides otherwise.
//!
//! The programs are compiled by libseccomp (the system's, through the `libseccomp` crate)
//! once, when the engine starts, one per profile [`Family`], and installed by the sandbox's
//! first process just before it executes the tool. A family's filter is two programs,
//! stacked in this order:
//!
//! 1. **The allow-list** ([`BASE`]: what shells, Python, Node.js, git, compilers, make and
//!    the coding tools' test runners need, measured by running them under it). Anything not on
//!    it answers `ENOSYS`, as if the kernel did not have it: that is what a caller probing for
//!    a newer call (`clone3`, `listmount`, `cachestat`, …) expects, and it then falls back.
//!    Long-known calls that reach kernel-wide state or escape the namespaces ([`REFUSED`])
//!    answer `EPERM` instead, so that a program reports a plain refusal.
//! 2. **The refusals by argument**: `clone` with a namespace flag, `socket` outside the
//!    family's address families (and netlink other than routing), `personality` flags that
//!    weaken memory protections, `ioctl`s that type into a terminal — every rule `EPERM`, the
//!    default allowing. The kernel runs every stacked filter and keeps the strictest answer
//!    (between two `ERRNO`s, the later filter's), so a call the allow-list lets through is
//!    still refused here by its arguments. Kept apart so that no two rules of one program
//!    ever disagree, whatever order libseccomp's tree tests them in.
//!
//! Why libseccomp rather than `seccompiler`, tried first: seccompiler emits one linear chain
//! of comparisons (1,428 instructions for this allow-list), and installing a filter costs the
//! kernel one run of it per system call number, to fill its cache of calls every filter
//! allows; that was ~800 µs per sandbox, a third of a call. libseccomp compiles the same list
//! into a binary tree (438 instructions) that installs in a fifth of that, handles x32 and
//! foreign architectures itself (they kill the process: their numbers mean other calls), and
//! is what Docker, podman and systemd use. The unit tests hold its output to the policy
//! stated again without BPF, for every number below 600.
//!
//! With that cache (Linux 5.11), a call allowed whatever its arguments costs no filter run
//! at all; only the calls with argument checks run the programs.

use std::collections::BTreeMap;
use std::sync::Arc;

use libc::c_long;
use libseccomp::{ScmpAction, ScmpArgCompare, ScmpCompareOp, ScmpFilterContext, ScmpSyscall};

use crate::profile::NetworkPolicy;

mod lists;
#[cfg(any(test, feature = "testing"))]
pub mod model;

use lists::{
    ADDRESS_FAMILIES, CLONE_NAMESPACE_FLAGS, NETLINK_PROTOCOLS, REFUSED_IOCTLS,
    REFUSED_PERSONALITY_FLAGS,
};
pub use lists::{BASE, REFUSED};

/// Which allow-list a profile gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Family {
    /// `network = "none"`: Unix sockets, and the routing netlink that lists the sandbox's
    /// own interfaces (`if_nameindex`, `getifaddrs`).
    Local,
    /// A network allow-list: IPv4 and IPv6 sockets too (to reach the egress proxy).
    Network,
}

impl Family {
    pub const ALL: [Family; 2] = [Family::Local, Family::Network];

    /// The family of a profile's sandboxes.
    pub fn of(network: &NetworkPolicy) -> Family {
        match network {
            NetworkPolicy::None => Family::Local,
            NetworkPolicy::AllowList { .. } => Family::Network,
        }
    }

    /// The address families `socket` may create.
    fn socket_domains(self) -> &'static [i32] {
        match self {
            Family::Local => &[libc::AF_UNIX, libc::AF_NETLINK],
            Family::Network => &[
                libc::AF_UNIX,
                libc::AF_NETLINK,
                libc::AF_INET,
                libc::AF_INET6,
            ],
        }
    }
}

/// The low 32 bits of an argument: the kernel reads `int` and `unsigned int` arguments from
/// them alone, so garbage in the upper half must not hide a value.
const LOW_HALF: u64 = 0xffff_ffff;

/// A family's programs, in the order they are installed.
#[derive(Debug)]
pub struct Filter {
    programs: [Vec<libc::sock_filter>; 2],
}

impl Filter {
    pub fn programs(&self) -> &[Vec<libc::sock_filter>] {
        &self.programs
    }
}

/// Why a filter could not be compiled.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("libseccomp: {0}")]
    Libseccomp(#[from] libseccomp::error::SeccompError),
    #[error("cannot read the compiled program back: {0}")]
    Export(#[from] std::io::Error),
    #[error("libseccomp exported {0} bytes, not whole instructions")]
    Torn(usize),
}

/// The filter of every family, compiled once.
#[derive(Debug)]
pub struct Filters {
    by_family: BTreeMap<Family, Arc<Filter>>,
}

impl Filters {
    pub fn build() -> Result<Filters, BuildError> {
        let by_family = Family::ALL
            .into_iter()
            .map(|family| Ok((family, Arc::new(build(family)?))))
            .collect::<Result<_, BuildError>>()?;
        Ok(Filters { by_family })
    }

    pub fn get(&self, family: Family) -> Arc<Filter> {
        // Built for every family of `Family::ALL` above.
        self.by_family
            .get(&family)
            .cloned()
            .unwrap_or_else(|| unreachable!("a filter is built for every family"))
    }
}

/// The filter of `family`.
pub fn build(family: Family) -> Result<Filter, BuildError> {
    let mut allow_list = context(ScmpAction::Errno(libc::ENOSYS))?;
    for (nr, _) in BASE {
        allow_list.add_rule(ScmpAction::Allow, syscall(*nr))?;
    }
    for (nr, _) in REFUSED {
        allow_list.add_rule(ScmpAction::Errno(libc::EPERM), syscall(*nr))?;
    }

    // Refusals by argument: every rule answers EPERM and the default allows, so no two rules
    // ever disagree, whatever order libseccomp's tree tests them in.
    let mut refusals = context(ScmpAction::Allow)?;
    let eperm = ScmpAction::Errno(libc::EPERM);
    let low_equal = |arg: u32, value: u64| {
        ScmpArgCompare::new(arg, ScmpCompareOp::MaskedEqual(LOW_HALF), value)
    };
    for flag in CLONE_NAMESPACE_FLAGS {
        let any = ScmpArgCompare::new(0, ScmpCompareOp::MaskedEqual(*flag), *flag);
        refusals.add_rule_conditional(eperm, syscall(libc::SYS_clone), &[any])?;
    }
    let domains = family.socket_domains();
    for domain in (0..ADDRESS_FAMILIES).filter(|domain| !domains.contains(&(*domain as i32))) {
        refusals.add_rule_conditional(eperm, syscall(libc::SYS_socket), &[low_equal(0, domain)])?;
    }
    for domain in (0..ADDRESS_FAMILIES).filter(|domain| *domain != libc::AF_UNIX as u64) {
        refusals.add_rule_conditional(
            eperm,
            syscall(libc::SYS_socketpair),
            &[low_equal(0, domain)],
        )?;
    }
    // Of netlink, only routing: the others reach audit, the kernel's uevents, netfilter or
    // socket diagnostics, which nothing in a sandbox has a use for.
    for protocol in (0..NETLINK_PROTOCOLS).filter(|p| *p != libc::NETLINK_ROUTE as u64) {
        refusals.add_rule_conditional(
            eperm,
            syscall(libc::SYS_socket),
            &[
                low_equal(0, libc::AF_NETLINK as u64),
                low_equal(2, protocol),
            ],
        )?;
    }
    for flag in REFUSED_PERSONALITY_FLAGS {
        let set = ScmpArgCompare::new(0, ScmpCompareOp::MaskedEqual(*flag), *flag);
        refusals.add_rule_conditional(eperm, syscall(libc::SYS_personality), &[set])?;
    }
    for request in REFUSED_IOCTLS {
        refusals.add_rule_conditional(
            eperm,
            syscall(libc::SYS_ioctl),
            &[low_equal(1, *request)],
        )?;
    }
    Ok(Filter {
        programs: [export(&allow_list)?, export(&refusals)?],
    })
}

/// A filter context for the native architecture alone: another architecture's calls,
/// x32's included, kill the process. Binary-tree optimisation keeps the program's depth,
/// and the kernel's work when it installs it, logarithmic in the list's length.
fn context(default: ScmpAction) -> Result<ScmpFilterContext, BuildError> {
    let mut context = ScmpFilterContext::new(default)?;
    context
        .set_act_badarch(ScmpAction::KillProcess)?
        .set_ctl_optimize(2)?
        // The sandbox's first process sets no_new_privs itself, in its order.
        .set_ctl_nnp(false)?;
    Ok(context)
}

fn syscall(nr: c_long) -> ScmpSyscall {
    // System call numbers are small positive integers.
    ScmpSyscall::from(nr as i32)
}

/// The compiled program. libseccomp 2.5 (Debian 12's) exports to a descriptor only.
fn export(context: &ScmpFilterContext) -> Result<Vec<libc::sock_filter>, BuildError> {
    use std::io::{Read, Seek};
    let memfd = rustix::fs::memfd_create("airlock-seccomp", rustix::fs::MemfdFlags::CLOEXEC)
        .map_err(std::io::Error::from)?;
    context.export_bpf(&memfd)?;
    let mut file = std::fs::File::from(memfd);
    file.rewind()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    const INSN: usize = std::mem::size_of::<libc::sock_filter>();
    if bytes.len() % INSN != 0 {
        return Err(BuildError::Torn(bytes.len()));
    }
    Ok(bytes
        .chunks_exact(INSN)
        .map(|insn| libc::sock_filter {
            code: u16::from_ne_bytes([insn[0], insn[1]]),
            jt: insn[2],
            jf: insn[3],
            k: u32::from_ne_bytes([insn[4], insn[5], insn[6], insn[7]]),
        })
        .collect())
}

#[cfg(test)]
#[path = "seccomp_tests.rs"]
mod tests;
