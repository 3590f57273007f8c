//! A model of how the kernel runs a family's programs, and the policy they are meant to
//! implement stated a second way, for the unit tests and the `sandbox_rules` fuzz target to
//! hold one against the other.

use libc::sock_filter;

use super::*;

/// x32 system calls carry this bit in their number on x86_64.
#[cfg(target_arch = "x86_64")]
pub const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// What the kernel hands a filter.
pub struct Call {
    pub arch: u32,
    pub nr: u32,
    pub args: [u64; 6],
}

#[cfg(target_arch = "x86_64")]
pub const AUDIT_ARCH_NATIVE: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
pub const AUDIT_ARCH_NATIVE: u32 = 0xc000_00b7;

impl Call {
    pub fn native(nr: c_long, args: &[u64]) -> Call {
        let mut all = [0u64; 6];
        all[..args.len()].copy_from_slice(args);
        Call {
            arch: AUDIT_ARCH_NATIVE,
            nr: nr as u32,
            args: all,
        }
    }

    /// The 32-bit word at `offset` of `struct seccomp_data` (little-endian).
    fn word(&self, offset: u32) -> u32 {
        match offset {
            0 => self.nr,
            4 => self.arch,
            offset if offset >= 16 && (offset - 16) % 4 == 0 => {
                let arg = self.args[((offset - 16) / 8) as usize];
                if (offset - 16) % 8 == 0 {
                    arg as u32
                } else {
                    (arg >> 32) as u32
                }
            }
            other => panic!("the filter read offset {other}"),
        }
    }
}

/// What a filter answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Errno(i32),
    KillProcess,
}

impl Verdict {
    /// The kernel's order between two filters' answers: lower wins; between two
    /// answers of the same action, the filter installed last (the first seen) wins.
    fn precedence(self) -> u32 {
        match self {
            Verdict::KillProcess => 0,
            Verdict::Errno(_) => 1,
            Verdict::Allow => 2,
        }
    }
}

/// Runs one program the way the kernel's classic BPF interpreter would, for the
/// instructions libseccomp emits.
fn run_program(program: &[sock_filter], call: &Call) -> Verdict {
    const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const ALU_AND_K: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
    const JA: u16 = (libc::BPF_JMP | libc::BPF_JA) as u16;
    const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const JGT_K: u16 = (libc::BPF_JMP | libc::BPF_JGT | libc::BPF_K) as u16;
    const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
    const JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
    const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let mut accumulator = 0u32;
    let mut pc = 0usize;
    loop {
        let Some(insn) = program.get(pc) else {
            panic!("the program falls off its end at {pc}");
        };
        pc += 1;
        match insn.code {
            LD_W_ABS => accumulator = call.word(insn.k),
            ALU_AND_K => accumulator &= insn.k,
            JA => pc += insn.k as usize,
            JEQ_K | JGT_K | JGE_K | JSET_K => {
                let taken = match insn.code {
                    JEQ_K => accumulator == insn.k,
                    JGT_K => accumulator > insn.k,
                    JGE_K => accumulator >= insn.k,
                    _ => accumulator & insn.k != 0,
                };
                pc += usize::from(if taken { insn.jt } else { insn.jf });
            }
            RET_K => {
                return match insn.k {
                    libc::SECCOMP_RET_ALLOW => Verdict::Allow,
                    libc::SECCOMP_RET_KILL_PROCESS => Verdict::KillProcess,
                    k if k & 0xffff_0000 == libc::SECCOMP_RET_ERRNO => {
                        Verdict::Errno((k & 0xffff) as i32)
                    }
                    other => panic!("unexpected return {other:#x}"),
                };
            }
            other => panic!("unexpected instruction {other:#x}"),
        }
    }
}

/// Runs every program of `filter`, most recently installed first, and combines their
/// answers as the kernel does.
pub fn run(filter: &Filter, call: &Call) -> Verdict {
    filter
        .programs()
        .iter()
        .rev()
        .map(|program| run_program(program, call))
        .fold(Verdict::Allow, |chosen, verdict| {
            if verdict.precedence() < chosen.precedence() {
                verdict
            } else {
                chosen
            }
        })
}

/// What the lists of this module say `call` gets, without any BPF.
pub fn policy(family: Family, call: &Call) -> Verdict {
    let nr = c_long::from(call.nr);
    let low = |index: usize| call.args[index] as u32 as u64;
    let listed = |list: &[(c_long, &str)]| list.iter().any(|(listed, _)| *listed == nr);
    if call.arch != AUDIT_ARCH_NATIVE {
        return Verdict::KillProcess;
    }
    #[cfg(target_arch = "x86_64")]
    if call.nr & X32_SYSCALL_BIT != 0 {
        return Verdict::KillProcess;
    }
    let eperm = Verdict::Errno(libc::EPERM);
    let domains = family.socket_domains();
    let refused_by_argument = match nr {
        libc::SYS_clone => CLONE_NAMESPACE_FLAGS.iter().any(|flag| low(0) & flag != 0),
        // Families and protocols past the last one the kernel knows are left to it.
        libc::SYS_socket => {
            (low(0) < ADDRESS_FAMILIES && !domains.iter().any(|d| *d as u64 == low(0)))
                || (low(0) == libc::AF_NETLINK as u64
                    && low(2) != libc::NETLINK_ROUTE as u64
                    && low(2) < NETLINK_PROTOCOLS)
        }
        libc::SYS_socketpair => low(0) != libc::AF_UNIX as u64 && low(0) < ADDRESS_FAMILIES,
        libc::SYS_personality => REFUSED_PERSONALITY_FLAGS
            .iter()
            .any(|flag| call.args[0] & flag != 0),
        libc::SYS_ioctl => REFUSED_IOCTLS.contains(&low(1)),
        _ => false,
    };
    if listed(REFUSED) || refused_by_argument {
        eperm
    } else if listed(BASE) {
        Verdict::Allow
    } else {
        Verdict::Errno(libc::ENOSYS)
    }
}
