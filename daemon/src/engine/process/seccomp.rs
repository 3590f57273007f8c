//! The seccomp filter every sandboxed process runs under: a deny list built on what Docker's
//! default profile refuses (kernel-wide or namespace-escaping operations a tool never needs),
//! answered with `EPERM` so that a program sees a plain refusal it can report, not a crash.
//!
//! The filter is classic BPF, assembled here once when the engine starts and installed by the
//! sandbox's first process just before it executes the tool. Each check is a comparison
//! followed by its own `return`, so no jump ever spans more than a few instructions however
//! long the list grows.
//!
//! - Syscalls of another architecture (32-bit `int 0x80` on x86_64) kill the process: their
//!   numbers mean different things, and a program cannot meaningfully carry on after `exit`
//!   itself was refused.
//! - `clone` with any namespace flag is refused like `unshare`; `clone3` answers `ENOSYS`
//!   because its flags live in memory the filter cannot read, and libc then falls back to
//!   `clone`, whose flags it can.
//! - `socket(AF_VSOCK, …)` and the `TIOCSTI`/`TIOCLINUX` ioctls (typing into a terminal) are
//!   refused by argument.

use libc::{c_long, sock_filter};

/// `offsetof(struct seccomp_data, nr)`, `arch` and `args[i]` (low 32 bits on little-endian).
const DATA_NR: u32 = 0;
const DATA_ARCH: u32 = 4;
const fn data_arg_low(index: u32) -> u32 {
    16 + 8 * index
}

const BPF_LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const BPF_JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const BPF_JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const BPF_JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const BPF_RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH_NATIVE: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH_NATIVE: u32 = 0xc000_00b7;

/// x32 system calls carry this bit in their number on x86_64.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// Every `CLONE_NEW*` flag: creating any namespace from inside the sandbox is refused.
const CLONE_NAMESPACE_FLAGS: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWCGROUP
    | 0x80) as u32; // CLONE_NEWTIME

/// What the filter answers for a system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Errno(i32),
    KillProcess,
}

impl Verdict {
    fn ret(self) -> u32 {
        match self {
            Verdict::Allow => libc::SECCOMP_RET_ALLOW,
            Verdict::Errno(errno) => libc::SECCOMP_RET_ERRNO | (errno as u32 & 0xffff),
            Verdict::KillProcess => libc::SECCOMP_RET_KILL_PROCESS,
        }
    }
}

/// System calls refused outright, whatever their arguments.
const DENIED: &[(c_long, &str)] = &[
    // Inspecting or changing other processes.
    (libc::SYS_ptrace, "ptrace"),
    (libc::SYS_process_vm_readv, "process_vm_readv"),
    (libc::SYS_process_vm_writev, "process_vm_writev"),
    (libc::SYS_kcmp, "kcmp"),
    // The kernel keyring is not namespaced.
    (libc::SYS_keyctl, "keyctl"),
    (libc::SYS_add_key, "add_key"),
    (libc::SYS_request_key, "request_key"),
    // Large attack surfaces a tool has no use for.
    (libc::SYS_bpf, "bpf"),
    (libc::SYS_userfaultfd, "userfaultfd"),
    (libc::SYS_perf_event_open, "perf_event_open"),
    (libc::SYS_io_uring_setup, "io_uring_setup"),
    (libc::SYS_io_uring_enter, "io_uring_enter"),
    (libc::SYS_io_uring_register, "io_uring_register"),
    // Changing the file system view or the namespaces.
    (libc::SYS_mount, "mount"),
    (libc::SYS_umount2, "umount2"),
    (libc::SYS_pivot_root, "pivot_root"),
    (libc::SYS_chroot, "chroot"),
    (libc::SYS_unshare, "unshare"),
    (libc::SYS_setns, "setns"),
    (libc::SYS_open_tree, "open_tree"),
    (libc::SYS_move_mount, "move_mount"),
    (libc::SYS_fsopen, "fsopen"),
    (libc::SYS_fsconfig, "fsconfig"),
    (libc::SYS_fsmount, "fsmount"),
    (libc::SYS_fspick, "fspick"),
    (libc::SYS_mount_setattr, "mount_setattr"),
    // Opening files by handle bypasses the path walk (the "shocker" escape).
    (libc::SYS_open_by_handle_at, "open_by_handle_at"),
    // The running kernel itself.
    (libc::SYS_kexec_load, "kexec_load"),
    (libc::SYS_kexec_file_load, "kexec_file_load"),
    (libc::SYS_init_module, "init_module"),
    (libc::SYS_finit_module, "finit_module"),
    (libc::SYS_delete_module, "delete_module"),
    (libc::SYS_reboot, "reboot"),
    (libc::SYS_swapon, "swapon"),
    (libc::SYS_swapoff, "swapoff"),
    (libc::SYS_acct, "acct"),
    (libc::SYS_syslog, "syslog"),
    (libc::SYS_quotactl, "quotactl"),
    (libc::SYS_quotactl_fd, "quotactl_fd"),
    (libc::SYS_lookup_dcookie, "lookup_dcookie"),
    (libc::SYS_fanotify_init, "fanotify_init"),
    (libc::SYS_vhangup, "vhangup"),
    // The clock is shared with the host.
    (libc::SYS_settimeofday, "settimeofday"),
    (libc::SYS_clock_settime, "clock_settime"),
    (libc::SYS_clock_adjtime, "clock_adjtime"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_iopl, "iopl"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_ioperm, "ioperm"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_uselib, "uselib"),
];

/// Ioctl requests refused: pushing input into a terminal's queue, and the console's.
const DENIED_IOCTLS: &[u32] = &[libc::TIOCSTI as u32, libc::TIOCLINUX as u32];

/// The filter's program.
pub fn build() -> Vec<sock_filter> {
    let mut program = Assembler::default();
    program.load(DATA_ARCH);
    program.return_unless_equal(AUDIT_ARCH_NATIVE, Verdict::KillProcess);
    program.load(DATA_NR);
    #[cfg(target_arch = "x86_64")]
    program.return_if_at_least(X32_SYSCALL_BIT, Verdict::Errno(libc::EPERM));
    for (nr, _) in DENIED {
        program.return_if_equal(*nr as u32, Verdict::Errno(libc::EPERM));
    }
    program.return_if_equal(libc::SYS_clone3 as u32, Verdict::Errno(libc::ENOSYS));
    program.check_argument(libc::SYS_clone as u32, 0, |program| {
        program.return_if_any_bit(CLONE_NAMESPACE_FLAGS, Verdict::Errno(libc::EPERM));
    });
    program.check_argument(libc::SYS_socket as u32, 0, |program| {
        program.return_if_equal(libc::AF_VSOCK as u32, Verdict::Errno(libc::EPERM));
    });
    program.check_argument(libc::SYS_ioctl as u32, 1, |program| {
        for request in DENIED_IOCTLS {
            program.return_if_equal(*request, Verdict::Errno(libc::EPERM));
        }
    });
    program.ret(Verdict::Allow);
    program.finish()
}

/// Emits BPF where every test is followed by its own return, so jumps are at most the
/// length of one argument check.
#[derive(Default)]
struct Assembler {
    code: Vec<sock_filter>,
}

impl Assembler {
    fn emit(&mut self, code: u16, jt: u8, jf: u8, k: u32) {
        self.code.push(sock_filter { code, jt, jf, k });
    }

    fn load(&mut self, offset: u32) {
        self.emit(BPF_LD_W_ABS, 0, 0, offset);
    }

    fn ret(&mut self, verdict: Verdict) {
        self.emit(BPF_RET_K, 0, 0, verdict.ret());
    }

    fn return_if_equal(&mut self, value: u32, verdict: Verdict) {
        self.emit(BPF_JEQ_K, 0, 1, value);
        self.ret(verdict);
    }

    fn return_unless_equal(&mut self, value: u32, verdict: Verdict) {
        self.emit(BPF_JEQ_K, 1, 0, value);
        self.ret(verdict);
    }

    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    fn return_if_at_least(&mut self, value: u32, verdict: Verdict) {
        self.emit(BPF_JGE_K, 0, 1, value);
        self.ret(verdict);
    }

    fn return_if_any_bit(&mut self, mask: u32, verdict: Verdict) {
        self.emit(BPF_JSET_K, 0, 1, mask);
        self.ret(verdict);
    }

    /// For system call `nr`: loads the low 32 bits of argument `index`, runs `checks` on it,
    /// and reloads the system call number for what follows. Other calls skip the block.
    fn check_argument(&mut self, nr: u32, index: u32, checks: impl FnOnce(&mut Assembler)) {
        let mut block = Assembler::default();
        block.load(data_arg_low(index));
        checks(&mut block);
        block.load(DATA_NR);
        // A block is a handful of instructions (the tests run every one of them), far
        // from the 255 a jump can span.
        let skip = u8::try_from(block.code.len()).unwrap_or(u8::MAX);
        self.emit(BPF_JEQ_K, 0, skip, nr);
        self.code.extend(block.code);
    }

    fn finish(self) -> Vec<sock_filter> {
        self.code
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// What the kernel hands the filter.
    pub struct Call {
        pub arch: u32,
        pub nr: u32,
        pub args: [u64; 6],
    }

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

        fn word(&self, offset: u32) -> u32 {
            match offset {
                DATA_NR => self.nr,
                DATA_ARCH => self.arch,
                offset if offset >= 16 && (offset - 16) % 4 == 0 => {
                    let index = ((offset - 16) / 8) as usize;
                    let arg = self.args[index];
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

    /// Runs a filter the way the kernel's classic BPF interpreter would, for the subset of
    /// instructions the assembler emits.
    pub fn run(program: &[sock_filter], call: &Call) -> Verdict {
        let mut accumulator = 0u32;
        let mut pc = 0usize;
        loop {
            let insn = program.get(pc).expect("the program falls off its end");
            pc += 1;
            match insn.code {
                BPF_LD_W_ABS => accumulator = call.word(insn.k),
                BPF_JEQ_K | BPF_JGE_K | BPF_JSET_K => {
                    let taken = match insn.code {
                        BPF_JEQ_K => accumulator == insn.k,
                        BPF_JGE_K => accumulator >= insn.k,
                        _ => accumulator & insn.k != 0,
                    };
                    pc += usize::from(if taken { insn.jt } else { insn.jf });
                }
                BPF_RET_K => {
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

    fn verdict(nr: c_long, args: &[u64]) -> Verdict {
        run(&build(), &Call::native(nr, args))
    }

    #[test]
    fn denied_calls_get_eperm_and_ordinary_ones_pass() {
        for (nr, name) in DENIED {
            assert_eq!(verdict(*nr, &[]), Verdict::Errno(libc::EPERM), "{name}");
        }
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_openat,
            libc::SYS_execve,
            libc::SYS_exit_group,
            libc::SYS_mmap,
            libc::SYS_wait4,
            libc::SYS_seccomp,
        ] {
            assert_eq!(verdict(nr, &[]), Verdict::Allow, "syscall {nr}");
        }
    }

    #[test]
    fn clone_is_refused_only_with_namespace_flags_and_clone3_falls_back() {
        let fork_like = libc::SIGCHLD as u64;
        let thread_like = (libc::CLONE_VM | libc::CLONE_THREAD | libc::CLONE_SIGHAND) as u64;
        assert_eq!(verdict(libc::SYS_clone, &[fork_like]), Verdict::Allow);
        assert_eq!(verdict(libc::SYS_clone, &[thread_like]), Verdict::Allow);
        for flag in [
            libc::CLONE_NEWUSER,
            libc::CLONE_NEWNS,
            libc::CLONE_NEWNET,
            libc::CLONE_NEWPID,
        ] {
            assert_eq!(
                verdict(libc::SYS_clone, &[fork_like | flag as u64]),
                Verdict::Errno(libc::EPERM),
                "flag {flag:#x}"
            );
        }
        assert_eq!(verdict(libc::SYS_clone3, &[]), Verdict::Errno(libc::ENOSYS));
    }

    #[test]
    fn vsock_sockets_and_terminal_injection_are_refused_by_argument() {
        assert_eq!(
            verdict(
                libc::SYS_socket,
                &[libc::AF_VSOCK as u64, libc::SOCK_STREAM as u64]
            ),
            Verdict::Errno(libc::EPERM)
        );
        assert_eq!(
            verdict(
                libc::SYS_socket,
                &[libc::AF_UNIX as u64, libc::SOCK_STREAM as u64]
            ),
            Verdict::Allow
        );
        assert_eq!(
            verdict(libc::SYS_ioctl, &[0, libc::TIOCSTI]),
            Verdict::Errno(libc::EPERM)
        );
        // The request is an `unsigned int`: garbage in the upper half must not hide it.
        assert_eq!(
            verdict(libc::SYS_ioctl, &[0, (1u64 << 32) | libc::TIOCSTI]),
            Verdict::Errno(libc::EPERM)
        );
        assert_eq!(verdict(libc::SYS_ioctl, &[0, libc::TCGETS]), Verdict::Allow);
        // The argument checks leave the number loaded for the checks after them.
        assert_eq!(
            verdict(libc::SYS_ioctl, &[0, libc::FIONREAD]),
            Verdict::Allow
        );
    }

    #[test]
    fn foreign_architectures_are_killed() {
        let call = Call {
            arch: 0x4000_0003, // AUDIT_ARCH_I386
            nr: 1,
            args: [0; 6],
        };
        assert_eq!(run(&build(), &call), Verdict::KillProcess);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x32_numbers_are_refused() {
        let call = Call {
            arch: AUDIT_ARCH_NATIVE,
            nr: X32_SYSCALL_BIT | libc::SYS_ptrace as u32,
            args: [0; 6],
        };
        assert_eq!(run(&build(), &call), Verdict::Errno(libc::EPERM));
    }

    #[test]
    fn the_program_fits_the_kernel_limit() {
        // BPF_MAXINSNS.
        assert!(build().len() < 4096);
    }
}
