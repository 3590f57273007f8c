//! The seccomp policy as data: the system calls any program may make ([`BASE`]), the
//! long-known ones refused with `EPERM` ([`REFUSED`]), and the arguments refused whatever
//! the list says — namespace flags of `clone`, address families and netlink protocols of
//! `socket`, `personality` flags, terminal `ioctl`s. `seccomp.rs` compiles it.

use libc::c_long;

/// System calls any program may make. Everything not listed answers `ENOSYS`.
pub const BASE: &[(c_long, &str)] = &[
    // Files and directories (Landlock and the mount view decide which).
    (libc::SYS_read, "read"),
    (libc::SYS_write, "write"),
    (libc::SYS_readv, "readv"),
    (libc::SYS_writev, "writev"),
    (libc::SYS_pread64, "pread64"),
    (libc::SYS_pwrite64, "pwrite64"),
    (libc::SYS_preadv, "preadv"),
    (libc::SYS_pwritev, "pwritev"),
    (libc::SYS_preadv2, "preadv2"),
    (libc::SYS_pwritev2, "pwritev2"),
    (libc::SYS_openat, "openat"),
    (libc::SYS_openat2, "openat2"),
    (libc::SYS_close, "close"),
    (libc::SYS_close_range, "close_range"),
    (libc::SYS_lseek, "lseek"),
    (libc::SYS_fstat, "fstat"),
    (libc::SYS_newfstatat, "newfstatat"),
    (libc::SYS_statx, "statx"),
    (libc::SYS_statfs, "statfs"),
    (libc::SYS_fstatfs, "fstatfs"),
    (libc::SYS_getdents64, "getdents64"),
    (libc::SYS_readlinkat, "readlinkat"),
    (libc::SYS_faccessat, "faccessat"),
    (libc::SYS_faccessat2, "faccessat2"),
    (libc::SYS_fchmod, "fchmod"),
    (libc::SYS_fchmodat, "fchmodat"),
    (libc::SYS_fchmodat2, "fchmodat2"),
    (libc::SYS_fchown, "fchown"),
    (libc::SYS_fchownat, "fchownat"),
    (libc::SYS_mkdirat, "mkdirat"),
    (libc::SYS_mknodat, "mknodat"),
    (libc::SYS_unlinkat, "unlinkat"),
    (libc::SYS_renameat, "renameat"),
    (libc::SYS_renameat2, "renameat2"),
    (libc::SYS_linkat, "linkat"),
    (libc::SYS_symlinkat, "symlinkat"),
    (libc::SYS_utimensat, "utimensat"),
    (libc::SYS_truncate, "truncate"),
    (libc::SYS_ftruncate, "ftruncate"),
    (libc::SYS_fallocate, "fallocate"),
    (libc::SYS_fsync, "fsync"),
    (libc::SYS_fdatasync, "fdatasync"),
    (libc::SYS_sync, "sync"),
    (libc::SYS_syncfs, "syncfs"),
    (libc::SYS_sync_file_range, "sync_file_range"),
    (libc::SYS_fadvise64, "fadvise64"),
    (libc::SYS_readahead, "readahead"),
    (libc::SYS_copy_file_range, "copy_file_range"),
    (libc::SYS_sendfile, "sendfile"),
    (libc::SYS_splice, "splice"),
    (libc::SYS_tee, "tee"),
    (libc::SYS_vmsplice, "vmsplice"),
    (libc::SYS_dup, "dup"),
    (libc::SYS_dup3, "dup3"),
    (libc::SYS_fcntl, "fcntl"),
    (libc::SYS_flock, "flock"),
    (libc::SYS_ioctl, "ioctl"),
    (libc::SYS_getcwd, "getcwd"),
    (libc::SYS_chdir, "chdir"),
    (libc::SYS_fchdir, "fchdir"),
    (libc::SYS_umask, "umask"),
    (libc::SYS_getxattr, "getxattr"),
    (libc::SYS_lgetxattr, "lgetxattr"),
    (libc::SYS_fgetxattr, "fgetxattr"),
    (libc::SYS_listxattr, "listxattr"),
    (libc::SYS_llistxattr, "llistxattr"),
    (libc::SYS_flistxattr, "flistxattr"),
    (libc::SYS_setxattr, "setxattr"),
    (libc::SYS_lsetxattr, "lsetxattr"),
    (libc::SYS_fsetxattr, "fsetxattr"),
    (libc::SYS_removexattr, "removexattr"),
    (libc::SYS_lremovexattr, "lremovexattr"),
    (libc::SYS_fremovexattr, "fremovexattr"),
    (libc::SYS_inotify_init1, "inotify_init1"),
    (libc::SYS_inotify_add_watch, "inotify_add_watch"),
    (libc::SYS_inotify_rm_watch, "inotify_rm_watch"),
    (libc::SYS_memfd_create, "memfd_create"),
    // Waiting and events.
    (libc::SYS_pipe2, "pipe2"),
    (libc::SYS_eventfd2, "eventfd2"),
    (libc::SYS_signalfd4, "signalfd4"),
    (libc::SYS_timerfd_create, "timerfd_create"),
    (libc::SYS_timerfd_settime, "timerfd_settime"),
    (libc::SYS_timerfd_gettime, "timerfd_gettime"),
    (libc::SYS_epoll_create1, "epoll_create1"),
    (libc::SYS_epoll_ctl, "epoll_ctl"),
    (libc::SYS_epoll_pwait, "epoll_pwait"),
    (libc::SYS_epoll_pwait2, "epoll_pwait2"),
    (libc::SYS_ppoll, "ppoll"),
    (libc::SYS_pselect6, "pselect6"),
    (libc::SYS_io_setup, "io_setup"),
    (libc::SYS_io_destroy, "io_destroy"),
    (libc::SYS_io_submit, "io_submit"),
    (libc::SYS_io_cancel, "io_cancel"),
    (libc::SYS_io_getevents, "io_getevents"),
    // Memory.
    (libc::SYS_brk, "brk"),
    (libc::SYS_mmap, "mmap"),
    (libc::SYS_munmap, "munmap"),
    (libc::SYS_mremap, "mremap"),
    (libc::SYS_mprotect, "mprotect"),
    (libc::SYS_madvise, "madvise"),
    (libc::SYS_msync, "msync"),
    (libc::SYS_mincore, "mincore"),
    (libc::SYS_mlock, "mlock"),
    (libc::SYS_mlock2, "mlock2"),
    (libc::SYS_munlock, "munlock"),
    (libc::SYS_mlockall, "mlockall"),
    (libc::SYS_munlockall, "munlockall"),
    (libc::SYS_membarrier, "membarrier"),
    (libc::SYS_get_mempolicy, "get_mempolicy"),
    (libc::SYS_set_mempolicy, "set_mempolicy"),
    (libc::SYS_mbind, "mbind"),
    (libc::SYS_pkey_alloc, "pkey_alloc"),
    (libc::SYS_pkey_free, "pkey_free"),
    (libc::SYS_pkey_mprotect, "pkey_mprotect"),
    (libc::SYS_mseal, "mseal"),
    // Processes and threads (`clone`'s flags are checked by the refusals).
    (libc::SYS_execve, "execve"),
    (libc::SYS_execveat, "execveat"),
    (libc::SYS_exit, "exit"),
    (libc::SYS_exit_group, "exit_group"),
    (libc::SYS_wait4, "wait4"),
    (libc::SYS_waitid, "waitid"),
    (libc::SYS_clone, "clone"),
    (libc::SYS_kill, "kill"),
    (libc::SYS_tkill, "tkill"),
    (libc::SYS_tgkill, "tgkill"),
    (libc::SYS_rt_sigqueueinfo, "rt_sigqueueinfo"),
    (libc::SYS_rt_tgsigqueueinfo, "rt_tgsigqueueinfo"),
    (libc::SYS_pidfd_open, "pidfd_open"),
    (libc::SYS_pidfd_send_signal, "pidfd_send_signal"),
    (libc::SYS_getpid, "getpid"),
    (libc::SYS_getppid, "getppid"),
    (libc::SYS_gettid, "gettid"),
    (libc::SYS_getuid, "getuid"),
    (libc::SYS_geteuid, "geteuid"),
    (libc::SYS_getgid, "getgid"),
    (libc::SYS_getegid, "getegid"),
    (libc::SYS_getresuid, "getresuid"),
    (libc::SYS_getresgid, "getresgid"),
    (libc::SYS_getgroups, "getgroups"),
    // Without capabilities these can only give up ids, never gain one.
    (libc::SYS_setuid, "setuid"),
    (libc::SYS_setgid, "setgid"),
    (libc::SYS_setreuid, "setreuid"),
    (libc::SYS_setregid, "setregid"),
    (libc::SYS_setresuid, "setresuid"),
    (libc::SYS_setresgid, "setresgid"),
    (libc::SYS_setfsuid, "setfsuid"),
    (libc::SYS_setfsgid, "setfsgid"),
    (libc::SYS_setgroups, "setgroups"),
    (libc::SYS_capget, "capget"),
    (libc::SYS_capset, "capset"),
    (libc::SYS_getpgid, "getpgid"),
    (libc::SYS_setpgid, "setpgid"),
    (libc::SYS_getsid, "getsid"),
    (libc::SYS_setsid, "setsid"),
    (libc::SYS_prctl, "prctl"),
    (libc::SYS_personality, "personality"),
    (libc::SYS_set_tid_address, "set_tid_address"),
    (libc::SYS_set_robust_list, "set_robust_list"),
    (libc::SYS_get_robust_list, "get_robust_list"),
    (libc::SYS_rseq, "rseq"),
    (libc::SYS_futex, "futex"),
    (libc::SYS_futex_waitv, "futex_waitv"),
    (libc::SYS_sched_yield, "sched_yield"),
    (libc::SYS_sched_getaffinity, "sched_getaffinity"),
    (libc::SYS_sched_setaffinity, "sched_setaffinity"),
    (libc::SYS_sched_getparam, "sched_getparam"),
    (libc::SYS_sched_setparam, "sched_setparam"),
    (libc::SYS_sched_getscheduler, "sched_getscheduler"),
    (libc::SYS_sched_setscheduler, "sched_setscheduler"),
    (libc::SYS_sched_getattr, "sched_getattr"),
    (libc::SYS_sched_setattr, "sched_setattr"),
    (libc::SYS_sched_get_priority_max, "sched_get_priority_max"),
    (libc::SYS_sched_get_priority_min, "sched_get_priority_min"),
    (libc::SYS_sched_rr_get_interval, "sched_rr_get_interval"),
    (libc::SYS_getpriority, "getpriority"),
    (libc::SYS_setpriority, "setpriority"),
    (libc::SYS_ioprio_get, "ioprio_get"),
    (libc::SYS_ioprio_set, "ioprio_set"),
    (libc::SYS_getrlimit, "getrlimit"),
    (libc::SYS_setrlimit, "setrlimit"),
    (libc::SYS_prlimit64, "prlimit64"),
    (libc::SYS_getrusage, "getrusage"),
    (libc::SYS_times, "times"),
    (libc::SYS_sysinfo, "sysinfo"),
    (libc::SYS_uname, "uname"),
    (libc::SYS_getcpu, "getcpu"),
    (libc::SYS_getrandom, "getrandom"),
    // A program may confine itself further; neither can loosen what is installed.
    (libc::SYS_seccomp, "seccomp"),
    (libc::SYS_landlock_create_ruleset, "landlock_create_ruleset"),
    (libc::SYS_landlock_add_rule, "landlock_add_rule"),
    (libc::SYS_landlock_restrict_self, "landlock_restrict_self"),
    // Signals.
    (libc::SYS_rt_sigaction, "rt_sigaction"),
    (libc::SYS_rt_sigprocmask, "rt_sigprocmask"),
    (libc::SYS_rt_sigreturn, "rt_sigreturn"),
    (libc::SYS_rt_sigpending, "rt_sigpending"),
    (libc::SYS_rt_sigsuspend, "rt_sigsuspend"),
    (libc::SYS_rt_sigtimedwait, "rt_sigtimedwait"),
    (libc::SYS_sigaltstack, "sigaltstack"),
    (libc::SYS_restart_syscall, "restart_syscall"),
    // Time (reading it; setting the host's clock is refused).
    (libc::SYS_nanosleep, "nanosleep"),
    (libc::SYS_clock_nanosleep, "clock_nanosleep"),
    (libc::SYS_clock_gettime, "clock_gettime"),
    (libc::SYS_clock_getres, "clock_getres"),
    (libc::SYS_gettimeofday, "gettimeofday"),
    (libc::SYS_getitimer, "getitimer"),
    (libc::SYS_setitimer, "setitimer"),
    (libc::SYS_timer_create, "timer_create"),
    (libc::SYS_timer_settime, "timer_settime"),
    (libc::SYS_timer_gettime, "timer_gettime"),
    (libc::SYS_timer_getoverrun, "timer_getoverrun"),
    (libc::SYS_timer_delete, "timer_delete"),
    // System V and POSIX IPC: the sandbox has its own IPC namespace.
    (libc::SYS_shmget, "shmget"),
    (libc::SYS_shmat, "shmat"),
    (libc::SYS_shmdt, "shmdt"),
    (libc::SYS_shmctl, "shmctl"),
    (libc::SYS_semget, "semget"),
    (libc::SYS_semop, "semop"),
    (libc::SYS_semtimedop, "semtimedop"),
    (libc::SYS_semctl, "semctl"),
    (libc::SYS_msgget, "msgget"),
    (libc::SYS_msgsnd, "msgsnd"),
    (libc::SYS_msgrcv, "msgrcv"),
    (libc::SYS_msgctl, "msgctl"),
    (libc::SYS_mq_open, "mq_open"),
    (libc::SYS_mq_unlink, "mq_unlink"),
    (libc::SYS_mq_timedsend, "mq_timedsend"),
    (libc::SYS_mq_timedreceive, "mq_timedreceive"),
    (libc::SYS_mq_notify, "mq_notify"),
    (libc::SYS_mq_getsetattr, "mq_getsetattr"),
    // Sockets (`socket`'s address family is checked by the refusals; the network namespace
    // and Landlock decide where they lead).
    (libc::SYS_socket, "socket"),
    (libc::SYS_socketpair, "socketpair"),
    (libc::SYS_connect, "connect"),
    (libc::SYS_accept, "accept"),
    (libc::SYS_accept4, "accept4"),
    (libc::SYS_bind, "bind"),
    (libc::SYS_listen, "listen"),
    (libc::SYS_getsockname, "getsockname"),
    (libc::SYS_getpeername, "getpeername"),
    (libc::SYS_sendto, "sendto"),
    (libc::SYS_recvfrom, "recvfrom"),
    (libc::SYS_sendmsg, "sendmsg"),
    (libc::SYS_recvmsg, "recvmsg"),
    (libc::SYS_sendmmsg, "sendmmsg"),
    (libc::SYS_recvmmsg, "recvmmsg"),
    (libc::SYS_shutdown, "shutdown"),
    (libc::SYS_setsockopt, "setsockopt"),
    (libc::SYS_getsockopt, "getsockopt"),
    // The calls x86_64 kept from before the `*at` family, which its programs still make.
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_open, "open"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_creat, "creat"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_stat, "stat"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_lstat, "lstat"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_access, "access"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_getdents, "getdents"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_readlink, "readlink"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_mkdir, "mkdir"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_rmdir, "rmdir"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_unlink, "unlink"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_rename, "rename"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_link, "link"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_symlink, "symlink"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_mknod, "mknod"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_chmod, "chmod"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_chown, "chown"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_lchown, "lchown"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_utime, "utime"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_utimes, "utimes"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_futimesat, "futimesat"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_pipe, "pipe"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_dup2, "dup2"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_poll, "poll"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_select, "select"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_epoll_create, "epoll_create"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_epoll_wait, "epoll_wait"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_inotify_init, "inotify_init"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_eventfd, "eventfd"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_signalfd, "signalfd"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_fork, "fork"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_vfork, "vfork"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_getpgrp, "getpgrp"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_alarm, "alarm"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_pause, "pause"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_time, "time"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_arch_prctl, "arch_prctl"),
    #[cfg(target_arch = "x86_64")]
    // map_shadow_stack (Linux 6.6), which the libc crate does not name: glibc maps the
    // shadow stacks of threads with it where the CPU has them.
    (453, "map_shadow_stack"),
];

/// System calls refused with `EPERM` whatever their arguments (they are not on [`BASE`]
/// either: this only chooses the answer).
pub const REFUSED: &[(c_long, &str)] = &[
    // Inspecting or changing other processes.
    (libc::SYS_ptrace, "ptrace"),
    (libc::SYS_process_vm_readv, "process_vm_readv"),
    (libc::SYS_process_vm_writev, "process_vm_writev"),
    (libc::SYS_process_madvise, "process_madvise"),
    (libc::SYS_pidfd_getfd, "pidfd_getfd"),
    (libc::SYS_kcmp, "kcmp"),
    (libc::SYS_move_pages, "move_pages"),
    (libc::SYS_migrate_pages, "migrate_pages"),
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
    (libc::SYS_fanotify_init, "fanotify_init"),
    (libc::SYS_fanotify_mark, "fanotify_mark"),
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
    (libc::SYS_name_to_handle_at, "name_to_handle_at"),
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
    (libc::SYS_vhangup, "vhangup"),
    // The clock is shared with the host.
    (libc::SYS_settimeofday, "settimeofday"),
    (libc::SYS_clock_settime, "clock_settime"),
    (libc::SYS_clock_adjtime, "clock_adjtime"),
    (libc::SYS_adjtimex, "adjtimex"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_iopl, "iopl"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_ioperm, "ioperm"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_modify_ldt, "modify_ldt"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_uselib, "uselib"),
];

/// Every `CLONE_NEW*` flag: creating any namespace from inside the sandbox is refused.
pub(super) const CLONE_NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWCGROUP as u64,
    // CLONE_NEWTIME, which the libc crate does not name.
    0x80,
];

/// Personality flags refused: `READ_IMPLIES_EXEC` (every readable mapping executable) and
/// `MMAP_PAGE_ZERO` (a mapping at address 0, the setting null-pointer exploits need).
/// `setarch -R` (`ADDR_NO_RANDOMIZE`) and queries stay allowed.
pub(super) const REFUSED_PERSONALITY_FLAGS: &[u64] = &[0x0040_0000, 0x0010_0000];

/// Ioctl requests refused: pushing input into a terminal's queue, and the console's.
pub(super) const REFUSED_IOCTLS: &[u64] = &[libc::TIOCSTI, libc::TIOCLINUX];

/// Address families are below this (`AF_MAX` is 46 in Linux 6.x); the kernel refuses the
/// others itself, so refusing each one below it refuses every family not granted.
pub(super) const ADDRESS_FAMILIES: u64 = 64;

/// Netlink protocols are below this (`MAX_LINKS`).
pub(super) const NETLINK_PROTOCOLS: u64 = 32;
