//! seccomp: the system calls a Python tool may make. An allow-list; everything else fails with
//! `EPERM`, and a system call of another architecture's ABI (ia32 `int 0x80`, x32) kills the
//! process.
//!
//! What the list leaves out, on purpose: new processes (`fork`, `vfork`, `clone` without
//! `CLONE_THREAD`; `clone3` answers `ENOSYS` so the C library falls back to `clone`), any `exec`
//! after the launcher's own, `memfd_create`, executable anonymous memory and `mprotect` to
//! executable, System V shared memory, io_uring, ptrace and `process_vm_*`, the keyring, bpf,
//! perf events, userfaultfd, every mount and namespace call, `personality`,
//! `open_by_handle_at`, kexec and modules; sockets other than TCP and UDP over IPv4/IPv6 (no
//! MPTCP, UDP-Lite, SCTP, ICMP or raw) and unix stream socketpairs; setting a parent-death
//! signal; the `TIOCSTI` and `TIOCLINUX` ioctls.
//!
//! The launcher's own exec is let through by a 128-bit random cookie passed in two of `execve`'s
//! unused argument registers: the filter allows `execve` only when both match, and the cookie
//! exists nowhere once the tool's image has replaced the launcher's.

use crate::error::LaunchError;
use crate::exec::Cookie;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op,
    SeccompCondition as Cond, SeccompFilter, SeccompRule, TargetArch, sock_filter,
};
use std::collections::BTreeMap;

#[cfg(target_arch = "x86_64")]
const ARCH: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: TargetArch = TargetArch::aarch64;
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7; // AUDIT_ARCH_AARCH64

/// Allowed without conditions.
const PLAIN: &[libc::c_long] = &[
    // memory
    libc::SYS_brk,
    libc::SYS_munmap,
    libc::SYS_mremap,
    libc::SYS_madvise,
    libc::SYS_msync,
    libc::SYS_mincore,
    libc::SYS_membarrier,
    // files and descriptors (Landlock and the mounts decide which files)
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_readv,
    libc::SYS_writev,
    libc::SYS_pread64,
    libc::SYS_pwrite64,
    libc::SYS_preadv,
    libc::SYS_pwritev,
    libc::SYS_preadv2,
    libc::SYS_pwritev2,
    libc::SYS_openat,
    libc::SYS_openat2,
    libc::SYS_close,
    libc::SYS_close_range,
    libc::SYS_lseek,
    libc::SYS_fstat,
    libc::SYS_newfstatat,
    libc::SYS_statx,
    libc::SYS_statfs,
    libc::SYS_fstatfs,
    libc::SYS_faccessat,
    libc::SYS_faccessat2,
    libc::SYS_getdents64,
    libc::SYS_getcwd,
    libc::SYS_chdir,
    libc::SYS_fchdir,
    libc::SYS_readlinkat,
    libc::SYS_mkdirat,
    libc::SYS_unlinkat,
    libc::SYS_renameat,
    libc::SYS_renameat2,
    libc::SYS_linkat,
    libc::SYS_symlinkat,
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    libc::SYS_utimensat,
    libc::SYS_truncate,
    libc::SYS_ftruncate,
    libc::SYS_fallocate,
    libc::SYS_fadvise64,
    libc::SYS_readahead,
    libc::SYS_fsync,
    libc::SYS_fdatasync,
    libc::SYS_sync_file_range,
    libc::SYS_flock,
    libc::SYS_fcntl,
    libc::SYS_dup,
    libc::SYS_dup3,
    libc::SYS_pipe2,
    libc::SYS_sendfile,
    libc::SYS_copy_file_range,
    libc::SYS_splice,
    libc::SYS_tee,
    libc::SYS_getxattr,
    libc::SYS_lgetxattr,
    libc::SYS_fgetxattr,
    libc::SYS_listxattr,
    libc::SYS_llistxattr,
    libc::SYS_flistxattr,
    libc::SYS_umask,
    // waiting and events
    libc::SYS_ppoll,
    libc::SYS_pselect6,
    libc::SYS_epoll_create1,
    libc::SYS_epoll_ctl,
    libc::SYS_epoll_pwait,
    libc::SYS_epoll_pwait2,
    libc::SYS_eventfd2,
    libc::SYS_timerfd_create,
    libc::SYS_timerfd_settime,
    libc::SYS_timerfd_gettime,
    libc::SYS_signalfd4,
    libc::SYS_futex,
    libc::SYS_futex_waitv,
    libc::SYS_set_robust_list,
    libc::SYS_get_robust_list,
    libc::SYS_nanosleep,
    libc::SYS_clock_nanosleep,
    libc::SYS_clock_gettime,
    libc::SYS_clock_getres,
    libc::SYS_gettimeofday,
    libc::SYS_getitimer,
    libc::SYS_setitimer,
    libc::SYS_timer_create,
    libc::SYS_timer_settime,
    libc::SYS_timer_gettime,
    libc::SYS_timer_getoverrun,
    libc::SYS_timer_delete,
    libc::SYS_sched_yield,
    libc::SYS_sched_getaffinity,
    libc::SYS_sched_getparam,
    libc::SYS_sched_getscheduler,
    libc::SYS_sched_get_priority_max,
    libc::SYS_sched_get_priority_min,
    libc::SYS_restart_syscall,
    // signals (Landlock's signal scope and the PID namespace bound their targets)
    libc::SYS_rt_sigaction,
    libc::SYS_rt_sigprocmask,
    libc::SYS_rt_sigreturn,
    libc::SYS_rt_sigpending,
    libc::SYS_rt_sigtimedwait,
    libc::SYS_rt_sigsuspend,
    libc::SYS_sigaltstack,
    libc::SYS_kill,
    libc::SYS_tgkill,
    libc::SYS_tkill,
    // sockets (which families may be created is decided below; Landlock decides ports)
    libc::SYS_connect,
    libc::SYS_accept,
    libc::SYS_accept4,
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_sendto,
    libc::SYS_recvfrom,
    libc::SYS_sendmsg,
    libc::SYS_recvmsg,
    libc::SYS_sendmmsg,
    libc::SYS_recvmmsg,
    libc::SYS_shutdown,
    libc::SYS_getsockname,
    libc::SYS_getpeername,
    libc::SYS_setsockopt,
    libc::SYS_getsockopt,
    // identity and process information
    libc::SYS_getpid,
    libc::SYS_getppid,
    libc::SYS_gettid,
    libc::SYS_getpgid,
    libc::SYS_getsid,
    libc::SYS_getuid,
    libc::SYS_geteuid,
    libc::SYS_getgid,
    libc::SYS_getegid,
    libc::SYS_getresuid,
    libc::SYS_getresgid,
    libc::SYS_getgroups,
    libc::SYS_capget,
    libc::SYS_uname,
    libc::SYS_sysinfo,
    libc::SYS_times,
    libc::SYS_getrusage,
    libc::SYS_getrlimit,
    libc::SYS_setrlimit,
    libc::SYS_getpriority,
    libc::SYS_getcpu,
    libc::SYS_getrandom,
    libc::SYS_set_tid_address,
    libc::SYS_rseq,
    libc::SYS_wait4,
    libc::SYS_waitid,
    libc::SYS_exit,
    libc::SYS_exit_group,
];

/// The older x86-64 spellings the C library and Python still use.
#[cfg(target_arch = "x86_64")]
const PLAIN_X86_64: &[libc::c_long] = &[
    libc::SYS_open,
    libc::SYS_creat,
    libc::SYS_stat,
    libc::SYS_lstat,
    libc::SYS_access,
    libc::SYS_readlink,
    libc::SYS_mkdir,
    libc::SYS_rmdir,
    libc::SYS_unlink,
    libc::SYS_rename,
    libc::SYS_link,
    libc::SYS_symlink,
    libc::SYS_chmod,
    libc::SYS_utime,
    libc::SYS_utimes,
    libc::SYS_futimesat,
    libc::SYS_getdents,
    libc::SYS_dup2,
    libc::SYS_pipe,
    libc::SYS_poll,
    libc::SYS_select,
    libc::SYS_epoll_create,
    libc::SYS_epoll_wait,
    libc::SYS_eventfd,
    libc::SYS_signalfd,
    libc::SYS_alarm,
    libc::SYS_pause,
    libc::SYS_time,
    libc::SYS_getpgrp,
    libc::SYS_arch_prctl,
];
#[cfg(not(target_arch = "x86_64"))]
const PLAIN_X86_64: &[libc::c_long] = &[];

/// `prctl` options a tool may use: naming threads and anonymous memory, and reading state.
/// `PR_SET_PDEATHSIG` is not among them: the tool dies with its init (see `crate::init`),
/// holds no parent-death signal, and has no use for one.
const PRCTL_OPTIONS: &[u64] = &[
    libc::PR_SET_NAME as u64,
    libc::PR_GET_NAME as u64,
    libc::PR_GET_DUMPABLE as u64,
    libc::PR_GET_PDEATHSIG as u64,
    libc::PR_GET_SECCOMP as u64,
    libc::PR_GET_NO_NEW_PRIVS as u64,
    libc::PR_CAPBSET_READ as u64,
    libc::PR_GET_TIMERSLACK as u64,
    libc::PR_GET_THP_DISABLE as u64,
    66,          // PR_GET_MDWE
    0x5356_4d41, // PR_SET_VMA (glibc names its anonymous mappings)
];

/// The bits of `socket`'s type argument that name the type (the rest are `SOCK_NONBLOCK` and
/// `SOCK_CLOEXEC`).
const SOCK_TYPE_MASK: u64 = 0xf;

const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541c;

fn cond(arg: u8, len: Len, op: Op, value: u64) -> Result<Cond, LaunchError> {
    Cond::new(arg, len, op, value).map_err(|e| LaunchError::SeccompBuild(e.to_string()))
}

fn rule(conds: Vec<Cond>) -> Result<SeccompRule, LaunchError> {
    SeccompRule::new(conds).map_err(|e| LaunchError::SeccompBuild(e.to_string()))
}

/// The allow-list as seccompiler rules: syscall number → alternatives (any one matching allows).
pub fn rules(cookie: &Cookie) -> Result<BTreeMap<i64, Vec<SeccompRule>>, LaunchError> {
    let mut map: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for &nr in PLAIN.iter().chain(PLAIN_X86_64) {
        map.insert(nr, Vec::new());
    }
    let prot_exec = libc::PROT_EXEC as u64;
    let prot_write = libc::PROT_WRITE as u64;
    // mmap: anything not executable; or an executable mapping of a file (shared libraries, from
    // exec-allowed mounts only) that is not also writable. Never executable anonymous memory,
    // never writable and executable at once (PR_SET_MDWE refuses that too).
    map.insert(
        libc::SYS_mmap,
        vec![
            rule(vec![cond(2, Len::Dword, Op::MaskedEq(prot_exec), 0)?])?,
            rule(vec![
                cond(2, Len::Dword, Op::MaskedEq(prot_write), 0)?,
                cond(3, Len::Dword, Op::MaskedEq(libc::MAP_ANONYMOUS as u64), 0)?,
            ])?,
        ],
    );
    map.insert(
        libc::SYS_mprotect,
        vec![rule(vec![cond(
            2,
            Len::Dword,
            Op::MaskedEq(prot_exec),
            0,
        )?])?],
    );
    // Threads only: CLONE_THREAD set and no namespace flag. x86-64 and arm64 both pass the
    // flags first.
    let ns_flags = (libc::CLONE_NEWNS
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUSER
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWNET
        | libc::CLONE_NEWCGROUP) as u64;
    let thread = libc::CLONE_THREAD as u64;
    map.insert(
        libc::SYS_clone,
        vec![rule(vec![cond(
            0,
            Len::Qword,
            Op::MaskedEq(thread | ns_flags),
            thread,
        )?])?],
    );
    // IPv4 and IPv6, as TCP or UDP only: a stream with protocol 0 or IPPROTO_TCP, a datagram
    // with 0 or IPPROTO_UDP. MPTCP (a stream with IPPROTO_MPTCP) escapes Landlock's TCP rules;
    // UDP-Lite, SCTP, ICMP and raw sockets are nothing a tool needs.
    let mut sockets = Vec::new();
    for family in [libc::AF_INET, libc::AF_INET6] {
        for (kind, protocol) in [
            (libc::SOCK_STREAM, 0),
            (libc::SOCK_STREAM, libc::IPPROTO_TCP),
            (libc::SOCK_DGRAM, 0),
            (libc::SOCK_DGRAM, libc::IPPROTO_UDP),
        ] {
            sockets.push(rule(vec![
                cond(0, Len::Dword, Op::Eq, family as u64)?,
                cond(1, Len::Dword, Op::MaskedEq(SOCK_TYPE_MASK), kind as u64)?,
                cond(2, Len::Dword, Op::Eq, protocol as u64)?,
            ])?);
        }
    }
    map.insert(libc::SYS_socket, sockets);
    map.insert(
        libc::SYS_socketpair,
        vec![rule(vec![
            cond(0, Len::Dword, Op::Eq, libc::AF_UNIX as u64)?,
            cond(
                1,
                Len::Dword,
                Op::MaskedEq(SOCK_TYPE_MASK),
                libc::SOCK_STREAM as u64,
            )?,
        ])?],
    );
    // The kernel reads the ioctl command as 32 bits: compare those.
    map.insert(
        libc::SYS_ioctl,
        vec![rule(vec![
            cond(1, Len::Dword, Op::Ne, TIOCSTI)?,
            cond(1, Len::Dword, Op::Ne, TIOCLINUX)?,
        ])?],
    );
    map.insert(
        libc::SYS_prctl,
        PRCTL_OPTIONS
            .iter()
            .map(|&o| rule(vec![cond(0, Len::Dword, Op::Eq, o)?]))
            .collect::<Result<_, _>>()?,
    );
    // Limits of this process only.
    map.insert(
        libc::SYS_prlimit64,
        vec![rule(vec![cond(0, Len::Dword, Op::Eq, 0)?])?],
    );
    map.insert(
        libc::SYS_execve,
        vec![rule(vec![
            cond(3, Len::Qword, Op::Eq, cookie.0[0])?,
            cond(4, Len::Qword, Op::Eq, cookie.0[1])?,
        ])?],
    );
    Ok(map)
}

const BPF_LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const BPF_JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const BPF_JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const BPF_RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}
fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// The complete program: a prologue of ours (architecture check, x32 numbers killed, `clone3`
/// answered `ENOSYS`), then seccompiler's allow-list (which checks the architecture again).
pub fn build(cookie: &Cookie) -> Result<BpfProgram, LaunchError> {
    let body = compile(
        rules(cookie)?,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
    )?;
    let mut prog = prologue();
    prog.push(jump(BPF_JEQ_K, libc::SYS_clone3 as u32, 0, 1));
    prog.push(stmt(
        BPF_RET_K,
        libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
    ));
    prog.extend(body);
    Ok(prog)
}

/// Refused to a template process, and so to every tool forked from it (filters stack, the
/// strictest answer wins): nothing the template or the confinement of its children needs, and
/// everything that would reach another process, the kernel's keyring, its code or its
/// asynchronous and in-kernel machinery.
const TEMPLATE_DENIED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_process_madvise,
    libc::SYS_pidfd_getfd,
    libc::SYS_kcmp,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_memfd_create,
    libc::SYS_memfd_secret,
    libc::SYS_personality,
    libc::SYS_acct,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_setns,
    libc::SYS_execveat,
];

/// The template's filter: a deny-list (its children still build namespaces, mounts and their
/// own filters), `exec` only with the cookie (the template's own), other architectures killed.
pub fn build_template(cookie: &Cookie) -> Result<BpfProgram, LaunchError> {
    let mut map: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for &nr in TEMPLATE_DENIED {
        map.insert(nr, Vec::new());
    }
    // Refused unless both cookie words match: either one differing is enough.
    map.insert(
        libc::SYS_execve,
        vec![
            rule(vec![cond(3, Len::Qword, Op::Ne, cookie.0[0])?])?,
            rule(vec![cond(4, Len::Qword, Op::Ne, cookie.0[1])?])?,
        ],
    );
    let body = compile(
        map,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
    )?;
    let mut prog = prologue();
    prog.extend(body);
    Ok(prog)
}

/// seccompiler's program for `rules`: `matched` when a rule matches, `otherwise` else.
fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    otherwise: SeccompAction,
    matched: SeccompAction,
) -> Result<BpfProgram, LaunchError> {
    let filter = SeccompFilter::new(rules, otherwise, matched, ARCH)
        .map_err(|e| LaunchError::SeccompBuild(e.to_string()))?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| LaunchError::SeccompBuild(e.to_string()))
}

/// The architecture check both filters open with: another ABI's system call kills the process,
/// and the number is loaded for what follows.
fn prologue() -> Vec<sock_filter> {
    // offsetof(struct seccomp_data, nr) = 0, arch = 4.
    let mut prog = vec![
        stmt(BPF_LD_W_ABS, 4),
        jump(BPF_JEQ_K, AUDIT_ARCH, 1, 0),
        stmt(BPF_RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, 0),
    ];
    if cfg!(target_arch = "x86_64") {
        // x32 system calls share AUDIT_ARCH_X86_64 and set bit 30 of the number.
        prog.push(jump(BPF_JGE_K, 0x4000_0000, 0, 1));
        prog.push(stmt(BPF_RET_K, libc::SECCOMP_RET_KILL_PROCESS));
    }
    prog
}

/// Fail early, with a clear error, on a kernel without seccomp filters.
pub fn check_available() -> Result<(), LaunchError> {
    const SECCOMP_GET_ACTION_AVAIL: libc::c_uint = 2;
    let action: u32 = libc::SECCOMP_RET_KILL_PROCESS;
    // SAFETY: the action pointer is valid for the duration of the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_GET_ACTION_AVAIL,
            0,
            &action as *const u32,
        )
    };
    if rc != 0 {
        return Err(LaunchError::SeccompMissing);
    }
    Ok(())
}

/// Install the program on this (single) thread.
pub fn install(prog: &BpfProgram) -> Result<(), LaunchError> {
    seccompiler::apply_filter(prog)
        .map_err(|e| LaunchError::SeccompInstall(std::io::Error::other(e.to_string())))
}

#[cfg(test)]
mod tests;
