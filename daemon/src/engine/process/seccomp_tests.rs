//! The seccomp filters run through the model: what each family's list lets pass, refuses
//! with EPERM or answers with ENOSYS, by number and by argument, and that the programs fit.

#[cfg(target_arch = "x86_64")]
use super::model::X32_SYSCALL_BIT;
use super::model::{AUDIT_ARCH_NATIVE, Call, Verdict, policy, run};
use super::*;

fn verdict(family: Family, nr: c_long, args: &[u64]) -> Verdict {
    run(
        &build(family).expect("the filter compiles"),
        &Call::native(nr, args),
    )
}

/// Newer calls than the libc crate names, by their numbers (shared by every
/// architecture since Linux 5.1).
const LATER: &[(c_long, &str)] = &[
    (451, "cachestat"),
    (457, "statmount"),
    (458, "listmount"),
    (459, "lsm_get_self_attr"),
    (460, "lsm_set_self_attr"),
    (461, "lsm_list_modules"),
];

#[test]
fn listed_calls_pass_and_refused_ones_get_eperm() {
    for family in Family::ALL {
        for (nr, name) in BASE {
            let args: &[u64] = match *nr {
                libc::SYS_socket | libc::SYS_socketpair => &[libc::AF_UNIX as u64],
                libc::SYS_clone => &[libc::SIGCHLD as u64],
                _ => &[],
            };
            assert_eq!(
                verdict(family, *nr, args),
                Verdict::Allow,
                "{name} ({family:?})"
            );
        }
        for (nr, name) in REFUSED {
            assert_eq!(
                verdict(family, *nr, &[]),
                Verdict::Errno(libc::EPERM),
                "{name} ({family:?})"
            );
        }
    }
}

#[test]
fn what_is_not_listed_answers_enosys() {
    for family in Family::ALL {
        for (nr, name) in LATER.iter().chain(&[(libc::SYS_clone3, "clone3")]) {
            assert_eq!(
                verdict(family, *nr, &[]),
                Verdict::Errno(libc::ENOSYS),
                "{name}"
            );
        }
        // Numbers no kernel has yet.
        for nr in [462 + 1, 500, 1023] {
            assert_eq!(verdict(family, nr, &[]), Verdict::Errno(libc::ENOSYS));
        }
    }
    // The lists never overlap: a refusal is a refusal, not an allowed call.
    for (nr, name) in REFUSED {
        assert!(
            BASE.iter().all(|(base, _)| base != nr),
            "{name} is on both lists"
        );
    }
}

#[test]
fn clone_is_refused_only_with_namespace_flags() {
    let fork_like = libc::SIGCHLD as u64;
    let thread_like = (libc::CLONE_VM | libc::CLONE_THREAD | libc::CLONE_SIGHAND) as u64;
    for family in Family::ALL {
        assert_eq!(
            verdict(family, libc::SYS_clone, &[fork_like]),
            Verdict::Allow
        );
        assert_eq!(
            verdict(family, libc::SYS_clone, &[thread_like]),
            Verdict::Allow
        );
        for flag in CLONE_NAMESPACE_FLAGS {
            assert_eq!(
                verdict(family, libc::SYS_clone, &[fork_like | flag]),
                Verdict::Errno(libc::EPERM),
                "flag {flag:#x}"
            );
        }
    }
}

#[test]
fn sockets_are_limited_to_the_familys_address_families() {
    let socket = |family, domain: i32| {
        verdict(
            family,
            libc::SYS_socket,
            &[domain as u64, libc::SOCK_STREAM as u64],
        )
    };
    for domain in [libc::AF_INET, libc::AF_INET6] {
        assert_eq!(socket(Family::Local, domain), Verdict::Errno(libc::EPERM));
        assert_eq!(socket(Family::Network, domain), Verdict::Allow);
    }
    for family in Family::ALL {
        assert_eq!(socket(family, libc::AF_UNIX), Verdict::Allow);
        for domain in [libc::AF_VSOCK, libc::AF_PACKET, libc::AF_ALG] {
            assert_eq!(socket(family, domain), Verdict::Errno(libc::EPERM));
        }
        let netlink = |protocol: i32| {
            verdict(
                family,
                libc::SYS_socket,
                &[
                    libc::AF_NETLINK as u64,
                    libc::SOCK_RAW as u64,
                    protocol as u64,
                ],
            )
        };
        assert_eq!(netlink(libc::NETLINK_ROUTE), Verdict::Allow);
        for protocol in [
            libc::NETLINK_AUDIT,
            libc::NETLINK_KOBJECT_UEVENT,
            libc::NETLINK_NETFILTER,
            libc::NETLINK_SOCK_DIAG,
        ] {
            assert_eq!(netlink(protocol), Verdict::Errno(libc::EPERM));
        }
        // The domain is an `int`: garbage in the upper half must not hide it.
        assert_eq!(
            verdict(family, libc::SYS_socket, &[1 << 32 | libc::AF_VSOCK as u64]),
            Verdict::Errno(libc::EPERM)
        );
        assert_eq!(
            verdict(family, libc::SYS_socketpair, &[libc::AF_INET as u64]),
            Verdict::Errno(libc::EPERM)
        );
    }
}

#[test]
fn terminal_injection_and_odd_personalities_are_refused_by_argument() {
    for family in Family::ALL {
        assert_eq!(
            verdict(family, libc::SYS_ioctl, &[0, libc::TIOCSTI]),
            Verdict::Errno(libc::EPERM)
        );
        assert_eq!(
            verdict(family, libc::SYS_ioctl, &[0, (1u64 << 32) | libc::TIOCSTI]),
            Verdict::Errno(libc::EPERM)
        );
        assert_eq!(
            verdict(family, libc::SYS_ioctl, &[0, libc::TCGETS]),
            Verdict::Allow
        );
        // Linux, `setarch -R`, a query.
        for persona in [0x0, 0x0004_0000, 0xffff_ffff_u64 & !0x0050_0000] {
            assert_eq!(
                verdict(family, libc::SYS_personality, &[persona]),
                Verdict::Allow
            );
        }
        for flag in REFUSED_PERSONALITY_FLAGS {
            assert_eq!(
                verdict(family, libc::SYS_personality, &[*flag]),
                Verdict::Errno(libc::EPERM)
            );
        }
    }
}

#[test]
fn foreign_architectures_and_x32_are_killed() {
    let i386 = Call {
        arch: 0x4000_0003,
        nr: 1,
        args: [0; 6],
    };
    let filter = build(Family::Local).expect("the filter compiles");
    assert_eq!(run(&filter, &i386), Verdict::KillProcess);
    #[cfg(target_arch = "x86_64")]
    {
        let x32 = Call {
            arch: AUDIT_ARCH_NATIVE,
            nr: X32_SYSCALL_BIT | libc::SYS_read as u32,
            args: [0; 6],
        };
        assert_eq!(run(&filter, &x32), Verdict::KillProcess);
    }
}

#[test]
fn the_programs_do_what_the_lists_say_for_every_number() {
    let interesting: [&[u64]; 6] = [
        &[],
        &[libc::AF_INET as u64, 0, 0],
        &[libc::AF_NETLINK as u64, 0, libc::NETLINK_AUDIT as u64],
        &[libc::CLONE_NEWUSER as u64 | libc::SIGCHLD as u64],
        &[0x0040_0000, libc::TIOCSTI],
        &[u64::MAX, u64::MAX, u64::MAX],
    ];
    for family in Family::ALL {
        let filter = build(family).expect("compiles");
        for nr in 0..600 {
            for args in interesting {
                let call = Call::native(nr, args);
                assert_eq!(run(&filter, &call), policy(family, &call), "{nr} {args:?}");
            }
        }
    }
}

#[test]
fn the_programs_fit_the_kernel_limit() {
    for family in Family::ALL {
        for program in build(family).expect("compiles").programs() {
            // BPF_MAXINSNS.
            assert!(program.len() < 4096);
        }
    }
}
