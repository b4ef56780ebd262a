//! Unit tests of the seccomp allow-list.
//!
//! The rules are checked for what they must never contain, and the complete program from
//! [`build`] is run by a small classic-BPF interpreter over fake `struct seccomp_data`, so each
//! decision (allow, `EPERM`, `ENOSYS`, kill) is asserted without installing anything.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

const COOKIE: [u64; 2] = [0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3211];

fn cookie() -> Cookie {
    Cookie(COOKIE)
}

// Classic BPF opcodes, spelled out independently of the code under test.
const LD_W_ABS: u16 = 0x20;
const ALU_AND_K: u16 = 0x54;
const JMP_JA: u16 = 0x05;
const JMP_JEQ_K: u16 = 0x15;
const JMP_JGT_K: u16 = 0x25;
const JMP_JGE_K: u16 = 0x35;
const JMP_JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;

// Return values of a seccomp filter.
const ALLOW: u32 = 0x7fff_0000;
const KILL_PROCESS: u32 = 0x8000_0000;
const fn errno(e: i32) -> u32 {
    0x0005_0000 | e as u32
}
const EPERM: u32 = errno(libc::EPERM);
const ENOSYS: u32 = errno(libc::ENOSYS);

#[cfg(target_arch = "x86_64")]
const NATIVE_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const NATIVE_ARCH: u32 = 0xc000_00b7;
const AUDIT_ARCH_I386: u32 = 0x4000_0003;
const AUDIT_ARCH_ARM: u32 = 0x4000_0028;

/// `struct seccomp_data`.
#[derive(Debug, Clone, Copy)]
struct Data {
    nr: u32,
    arch: u32,
    ip: u64,
    args: [u64; 6],
}

impl Data {
    fn bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0..4].copy_from_slice(&self.nr.to_ne_bytes());
        b[4..8].copy_from_slice(&self.arch.to_ne_bytes());
        b[8..16].copy_from_slice(&self.ip.to_ne_bytes());
        for (i, a) in self.args.iter().enumerate() {
            b[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
        }
        b
    }
}

/// What the kernel checks before accepting a filter: every jump lands inside the program,
/// every load is an aligned word of `seccomp_data`, every opcode is one we know, and the
/// program cannot fall off its end.
fn validate(prog: &[sock_filter]) {
    assert!(!prog.is_empty());
    let len = prog.len();
    for (i, ins) in prog.iter().enumerate() {
        let next = i + 1;
        match ins.code {
            LD_W_ABS => assert!(ins.k % 4 == 0 && ins.k < 64, "bad load at {i}: {ins:?}"),
            ALU_AND_K => {}
            JMP_JA => assert!(next + (ins.k as usize) < len, "jump out at {i}"),
            JMP_JEQ_K | JMP_JGT_K | JMP_JGE_K | JMP_JSET_K => {
                assert!(next + usize::from(ins.jt) < len, "jt out at {i}");
                assert!(next + usize::from(ins.jf) < len, "jf out at {i}");
            }
            RET_K => {}
            other => panic!("unknown opcode {other:#x} at {i}"),
        }
    }
    assert_eq!(
        prog[len - 1].code,
        RET_K,
        "the program must end in a return"
    );
}

/// Run the program like the kernel does.
fn run(prog: &[sock_filter], data: &Data) -> u32 {
    let mem = data.bytes();
    let mut a: u32 = 0;
    let mut pc = 0usize;
    loop {
        let ins = prog.get(pc).expect("the program ran off its end");
        let next = pc + 1;
        let cond = |taken: bool| next + usize::from(if taken { ins.jt } else { ins.jf });
        pc = match ins.code {
            LD_W_ABS => {
                let k = ins.k as usize;
                a = u32::from_ne_bytes(mem[k..k + 4].try_into().unwrap());
                next
            }
            ALU_AND_K => {
                a &= ins.k;
                next
            }
            JMP_JA => next + ins.k as usize,
            JMP_JEQ_K => cond(a == ins.k),
            JMP_JGT_K => cond(a > ins.k),
            JMP_JGE_K => cond(a >= ins.k),
            JMP_JSET_K => cond(a & ins.k != 0),
            RET_K => return ins.k,
            other => panic!("unknown opcode {other:#x} at {pc}"),
        };
    }
}

fn program() -> BpfProgram {
    let prog = build(&cookie()).unwrap();
    validate(&prog);
    prog
}

fn nr(n: libc::c_long) -> u32 {
    u32::try_from(n).unwrap()
}

/// The decision for system call `n` with `args` (the rest zero) on the native architecture.
fn decide(prog: &[sock_filter], n: libc::c_long, args: &[u64]) -> u32 {
    let mut all = [0u64; 6];
    all[..args.len()].copy_from_slice(args);
    run(
        prog,
        &Data {
            nr: nr(n),
            arch: NATIVE_ARCH,
            ip: 0x7f00_dead_beef,
            args: all,
        },
    )
}

fn name(ret: u32) -> String {
    match ret {
        ALLOW => "ALLOW".into(),
        KILL_PROCESS => "KILL_PROCESS".into(),
        EPERM => "ERRNO(EPERM)".into(),
        ENOSYS => "ERRNO(ENOSYS)".into(),
        other => format!("{other:#x}"),
    }
}

#[track_caller]
fn assert_decision(prog: &[sock_filter], what: &str, n: libc::c_long, args: &[u64], want: u32) {
    let got = decide(prog, n, args);
    assert_eq!(
        name(got),
        name(want),
        "{what} (nr {n}, args {args:#x?}) decided {} instead of {}",
        name(got),
        name(want)
    );
}

/// System calls that must never be in the allow-list.
fn forbidden() -> Vec<(&'static str, libc::c_long)> {
    let mut v = vec![
        ("execveat", libc::SYS_execveat),
        ("memfd_create", libc::SYS_memfd_create),
        ("ptrace", libc::SYS_ptrace),
        ("process_vm_readv", libc::SYS_process_vm_readv),
        ("process_vm_writev", libc::SYS_process_vm_writev),
        ("keyctl", libc::SYS_keyctl),
        ("add_key", libc::SYS_add_key),
        ("request_key", libc::SYS_request_key),
        ("bpf", libc::SYS_bpf),
        ("perf_event_open", libc::SYS_perf_event_open),
        ("userfaultfd", libc::SYS_userfaultfd),
        ("mount", libc::SYS_mount),
        ("umount2", libc::SYS_umount2),
        ("pivot_root", libc::SYS_pivot_root),
        ("chroot", libc::SYS_chroot),
        ("open_tree", libc::SYS_open_tree),
        ("move_mount", libc::SYS_move_mount),
        ("fsopen", libc::SYS_fsopen),
        ("fsmount", libc::SYS_fsmount),
        ("fspick", libc::SYS_fspick),
        ("fsconfig", libc::SYS_fsconfig),
        ("mount_setattr", libc::SYS_mount_setattr),
        ("unshare", libc::SYS_unshare),
        ("setns", libc::SYS_setns),
        ("personality", libc::SYS_personality),
        ("open_by_handle_at", libc::SYS_open_by_handle_at),
        ("name_to_handle_at", libc::SYS_name_to_handle_at),
        ("kexec_load", libc::SYS_kexec_load),
        ("kexec_file_load", libc::SYS_kexec_file_load),
        ("init_module", libc::SYS_init_module),
        ("finit_module", libc::SYS_finit_module),
        ("delete_module", libc::SYS_delete_module),
        ("io_uring_setup", libc::SYS_io_uring_setup),
        ("io_uring_enter", libc::SYS_io_uring_enter),
        ("io_uring_register", libc::SYS_io_uring_register),
        ("shmget", libc::SYS_shmget),
        ("shmat", libc::SYS_shmat),
        ("pkey_mprotect", libc::SYS_pkey_mprotect),
        ("seccomp", libc::SYS_seccomp),
        ("setuid", libc::SYS_setuid),
        ("setgid", libc::SYS_setgid),
        ("setreuid", libc::SYS_setreuid),
        ("setregid", libc::SYS_setregid),
        ("setresuid", libc::SYS_setresuid),
        ("setresgid", libc::SYS_setresgid),
        ("setfsuid", libc::SYS_setfsuid),
        ("setfsgid", libc::SYS_setfsgid),
        ("setgroups", libc::SYS_setgroups),
        ("capset", libc::SYS_capset),
        ("mknodat", libc::SYS_mknodat),
        ("fchown", libc::SYS_fchown),
        ("fchownat", libc::SYS_fchownat),
        ("clone3", libc::SYS_clone3),
        ("setxattr", libc::SYS_setxattr),
        ("fsetxattr", libc::SYS_fsetxattr),
        ("quotactl", libc::SYS_quotactl),
        ("acct", libc::SYS_acct),
        ("swapon", libc::SYS_swapon),
        ("reboot", libc::SYS_reboot),
        ("settimeofday", libc::SYS_settimeofday),
        ("clock_settime", libc::SYS_clock_settime),
        ("sethostname", libc::SYS_sethostname),
        ("pidfd_open", libc::SYS_pidfd_open),
        ("pidfd_getfd", libc::SYS_pidfd_getfd),
        ("landlock_create_ruleset", libc::SYS_landlock_create_ruleset),
        ("vhangup", libc::SYS_vhangup),
        ("syslog", libc::SYS_syslog),
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        ("fork", libc::SYS_fork),
        ("vfork", libc::SYS_vfork),
        ("mknod", libc::SYS_mknod),
        ("chown", libc::SYS_chown),
        ("lchown", libc::SYS_lchown),
        ("iopl", libc::SYS_iopl),
        ("ioperm", libc::SYS_ioperm),
        ("modify_ldt", libc::SYS_modify_ldt),
        ("uselib", libc::SYS_uselib),
    ]);
    v
}

#[test]
fn rules_leave_out_every_dangerous_call() {
    let rules = rules(&cookie()).unwrap();
    for (name, n) in forbidden() {
        assert!(!rules.contains_key(&n), "{name} ({n}) is in the allow-list");
    }
}

#[test]
fn rules_hold_the_conditional_calls_with_conditions() {
    let rules = rules(&cookie()).unwrap();
    for (name, n, alternatives) in [
        ("execve", libc::SYS_execve, 1),
        ("clone", libc::SYS_clone, 1),
        ("mmap", libc::SYS_mmap, 2),
        ("mprotect", libc::SYS_mprotect, 1),
        ("socket", libc::SYS_socket, 8),
        ("socketpair", libc::SYS_socketpair, 1),
        ("ioctl", libc::SYS_ioctl, 1),
        ("prctl", libc::SYS_prctl, PRCTL_OPTIONS.len()),
        ("prlimit64", libc::SYS_prlimit64, 1),
    ] {
        assert_eq!(
            rules.get(&n).map(Vec::len),
            Some(alternatives),
            "{name} must be allowed only under conditions"
        );
    }
    for (name, n) in [("read", libc::SYS_read), ("write", libc::SYS_write)] {
        assert_eq!(rules.get(&n).map(Vec::len), Some(0), "{name}");
    }
}

#[test]
fn program_starts_with_the_architecture_check_and_is_small() {
    let prog = program();
    assert_eq!(
        (prog[0].code, prog[0].k),
        (LD_W_ABS, 4),
        "load seccomp_data.arch"
    );
    assert_eq!((prog[1].code, prog[1].k), (JMP_JEQ_K, NATIVE_ARCH));
    assert_eq!((prog[1].jt, prog[1].jf), (1, 0));
    assert_eq!((prog[2].code, prog[2].k), (RET_K, KILL_PROCESS));
    assert_eq!(
        (prog[3].code, prog[3].k),
        (LD_W_ABS, 0),
        "then load seccomp_data.nr"
    );
    // The kernel refuses more than 4096; keep a wide margin for additions.
    assert!(prog.len() < 2048, "{} instructions", prog.len());
}

#[test]
fn program_agrees_with_the_rules_for_every_system_call_number() {
    let prog = program();
    let rules = rules(&cookie()).unwrap();
    // Arguments that satisfy none of the conditional rules' "allow" sides on purpose would be
    // call-specific; plain calls must be allowed whatever the arguments, and calls absent from
    // the list refused whatever they are.
    let args = [u64::MAX, 0x4000_0000_1234, 7, 0x22, 3, 0];
    for n in 0..1024 {
        let got = decide(&prog, n, &args);
        let want = match rules.get(&n) {
            _ if n == libc::SYS_clone3 => ENOSYS,
            Some(alts) if alts.is_empty() => ALLOW,
            Some(_) => continue,
            None => EPERM,
        };
        assert_eq!(name(got), name(want), "system call {n}");
    }
}

#[test]
fn forbidden_calls_fail_with_eperm() {
    let prog = program();
    for (what, n) in forbidden() {
        let want = if n == libc::SYS_clone3 { ENOSYS } else { EPERM };
        assert_decision(&prog, what, n, &[0, 0, 0, 0, 0, 0], want);
        assert_decision(&prog, what, n, &[1, 2, 3, 4, 5, 6], want);
    }
}

#[test]
fn read_and_write_are_allowed() {
    let prog = program();
    assert_decision(&prog, "read", libc::SYS_read, &[0, 0x1000, 10], ALLOW);
    assert_decision(&prog, "write", libc::SYS_write, &[1, 0x1000, 10], ALLOW);
    assert_decision(&prog, "exit_group", libc::SYS_exit_group, &[0], ALLOW);
}

#[test]
fn execve_needs_the_whole_cookie() {
    let prog = program();
    let [c0, c1] = COOKIE;
    let e = libc::SYS_execve;
    assert_decision(&prog, "right cookie", e, &[0x10, 0x20, 0x30, c0, c1], ALLOW);
    assert_decision(&prog, "zeros", e, &[0x10, 0x20, 0x30, 0, 0], EPERM);
    assert_decision(&prog, "no extra args", e, &[0x10, 0x20, 0x30], EPERM);
    assert_decision(&prog, "swapped", e, &[0x10, 0x20, 0x30, c1, c0], EPERM);
    assert_decision(&prog, "first half", e, &[0x10, 0x20, 0x30, c0, 0], EPERM);
    assert_decision(&prog, "second half", e, &[0x10, 0x20, 0x30, 0, c1], EPERM);
    // Each 32-bit half of each word matters.
    for (i, flip) in [1u64, 1 << 32, 1 << 63, 0x8000_0000].iter().enumerate() {
        assert_decision(
            &prog,
            &format!("flip {i} a"),
            e,
            &[0, 0, 0, c0 ^ flip, c1],
            EPERM,
        );
        assert_decision(
            &prog,
            &format!("flip {i} b"),
            e,
            &[0, 0, 0, c0, c1 ^ flip],
            EPERM,
        );
    }
    // Another cookie's filter refuses this one.
    let other = build(&Cookie([c0 ^ 2, c1])).unwrap();
    assert_decision(&other, "other filter", e, &[0, 0, 0, c0, c1], EPERM);
}

#[test]
fn clone_allows_threads_only() {
    let prog = program();
    let c = libc::SYS_clone;
    let f = |flags: i32| flags as u32 as u64;
    // What glibc's pthread_create passes.
    let thread = f(libc::CLONE_VM
        | libc::CLONE_FS
        | libc::CLONE_FILES
        | libc::CLONE_SIGHAND
        | libc::CLONE_THREAD
        | libc::CLONE_SYSVSEM
        | libc::CLONE_SETTLS
        | libc::CLONE_PARENT_SETTID
        | libc::CLONE_CHILD_CLEARTID);
    assert_decision(
        &prog,
        "pthread_create",
        c,
        &[thread, 0x7000, 0, 0, 0x8000],
        ALLOW,
    );
    assert_decision(&prog, "fork", c, &[f(libc::SIGCHLD)], EPERM);
    assert_decision(
        &prog,
        "fork (glibc)",
        c,
        &[f(libc::CLONE_CHILD_SETTID
            | libc::CLONE_CHILD_CLEARTID
            | libc::SIGCHLD)],
        EPERM,
    );
    assert_decision(
        &prog,
        "posix_spawn",
        c,
        &[f(libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD)],
        EPERM,
    );
    for (ns, flag) in [
        ("CLONE_NEWUSER", libc::CLONE_NEWUSER),
        ("CLONE_NEWNS", libc::CLONE_NEWNS),
        ("CLONE_NEWNET", libc::CLONE_NEWNET),
        ("CLONE_NEWPID", libc::CLONE_NEWPID),
        ("CLONE_NEWUTS", libc::CLONE_NEWUTS),
        ("CLONE_NEWIPC", libc::CLONE_NEWIPC),
        ("CLONE_NEWCGROUP", libc::CLONE_NEWCGROUP),
    ] {
        assert_decision(&prog, ns, c, &[f(libc::CLONE_THREAD | flag)], EPERM);
        assert_decision(&prog, ns, c, &[thread | f(flag)], EPERM);
    }
}

#[test]
fn clone3_answers_enosys() {
    let prog = program();
    assert_decision(&prog, "clone3", libc::SYS_clone3, &[0x1000, 88], ENOSYS);
    assert_decision(&prog, "clone3", libc::SYS_clone3, &[], ENOSYS);
}

#[test]
fn mmap_never_gives_executable_anonymous_memory() {
    let prog = program();
    let m = libc::SYS_mmap;
    let v = |x: i32| x as u32 as u64;
    let (r, w, x) = (v(libc::PROT_READ), v(libc::PROT_WRITE), v(libc::PROT_EXEC));
    let private = v(libc::MAP_PRIVATE);
    let anon = v(libc::MAP_PRIVATE | libc::MAP_ANONYMOUS);
    let none = u64::MAX; // fd -1
    assert_decision(
        &prog,
        "rwx anon",
        m,
        &[0, 4096, r | w | x, anon, none, 0],
        EPERM,
    );
    assert_decision(&prog, "x anon", m, &[0, 4096, x, anon, none, 0], EPERM);
    assert_decision(
        &prog,
        "rwx shared anon",
        m,
        &[
            0,
            4096,
            r | w | x,
            v(libc::MAP_SHARED | libc::MAP_ANONYMOUS),
            none,
            0,
        ],
        EPERM,
    );
    assert_decision(&prog, "rw anon", m, &[0, 4096, r | w, anon, none, 0], ALLOW);
    assert_decision(&prog, "rx file", m, &[0, 4096, r | x, private, 3, 0], ALLOW);
    assert_decision(
        &prog,
        "rx file, denywrite",
        m,
        &[0, 4096, r | x, private | v(libc::MAP_DENYWRITE), 3, 0],
        ALLOW,
    );
    assert_decision(&prog, "r file", m, &[0, 4096, r, private, 3, 0], ALLOW);
}

#[test]
fn mprotect_never_adds_exec() {
    let prog = program();
    let p = libc::SYS_mprotect;
    let v = |x: i32| x as u32 as u64;
    assert_decision(&prog, "exec", p, &[0x1000, 4096, v(libc::PROT_EXEC)], EPERM);
    assert_decision(
        &prog,
        "read|exec",
        p,
        &[0x1000, 4096, v(libc::PROT_READ | libc::PROT_EXEC)],
        EPERM,
    );
    assert_decision(&prog, "read", p, &[0x1000, 4096, v(libc::PROT_READ)], ALLOW);
    assert_decision(&prog, "none", p, &[0x1000, 4096, 0], ALLOW);
}

#[test]
fn sockets_are_tcp_or_udp_over_ipv4_and_ipv6_only() {
    let prog = program();
    let s = libc::SYS_socket;
    let v = |x: i32| x as u32 as u64;
    let stream = v(libc::SOCK_STREAM | libc::SOCK_CLOEXEC);
    let dgram = v(libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    for family in [libc::AF_INET, libc::AF_INET6] {
        let f = v(family);
        assert_decision(&prog, "stream, 0", s, &[f, stream, 0], ALLOW);
        assert_decision(&prog, "stream, TCP", s, &[f, stream, 6], ALLOW);
        assert_decision(
            &prog,
            "plain stream",
            s,
            &[f, v(libc::SOCK_STREAM), 6],
            ALLOW,
        );
        assert_decision(&prog, "dgram, 0", s, &[f, dgram, 0], ALLOW);
        assert_decision(&prog, "dgram, UDP", s, &[f, dgram, 17], ALLOW);
        // The kernel reads the protocol as an int: the upper half of the register is ignored.
        assert_decision(
            &prog,
            "stream, TCP, high bits",
            s,
            &[f, stream, 6 | 1 << 32],
            ALLOW,
        );
        for (what, kind, protocol) in [
            ("MPTCP", stream, 262),
            ("MPTCP, no flags", v(libc::SOCK_STREAM), 262),
            ("UDP-Lite", dgram, 136),
            ("SCTP one-to-one", stream, 132),
            ("SCTP one-to-many", v(libc::SOCK_SEQPACKET), 132),
            ("seqpacket, 0", v(libc::SOCK_SEQPACKET), 0),
            ("ICMP (ping socket)", dgram, 1),
            ("ICMPv6 (ping socket)", dgram, 58),
            ("stream with UDP", stream, 17),
            ("dgram with TCP", dgram, 6),
            ("raw, 0", v(libc::SOCK_RAW), 0),
            ("raw TCP", v(libc::SOCK_RAW), 6),
            ("raw ICMP", v(libc::SOCK_RAW), 1),
            ("raw IPPROTO_RAW", v(libc::SOCK_RAW), 255),
        ] {
            assert_decision(&prog, what, s, &[f, kind, protocol], EPERM);
        }
    }
    for (what, family) in [
        ("AF_UNIX", libc::AF_UNIX),
        ("AF_NETLINK", libc::AF_NETLINK),
        ("AF_VSOCK", libc::AF_VSOCK),
        ("AF_PACKET", libc::AF_PACKET),
        ("AF_ALG", libc::AF_ALG),
        ("AF_BLUETOOTH", libc::AF_BLUETOOTH),
    ] {
        assert_decision(&prog, what, s, &[v(family), stream, 0], EPERM);
    }
}

#[test]
fn socketpairs_are_unix_streams_only() {
    let prog = program();
    let s = libc::SYS_socketpair;
    let v = |x: i32| x as u32 as u64;
    let unix = v(libc::AF_UNIX);
    assert_decision(
        &prog,
        "unix stream cloexec",
        s,
        &[unix, v(libc::SOCK_STREAM | libc::SOCK_CLOEXEC), 0, 0x1000],
        ALLOW,
    );
    assert_decision(
        &prog,
        "unix stream nonblock",
        s,
        &[unix, v(libc::SOCK_STREAM | libc::SOCK_NONBLOCK), 0, 0x1000],
        ALLOW,
    );
    assert_decision(
        &prog,
        "unix dgram",
        s,
        &[unix, v(libc::SOCK_DGRAM), 0, 0x1000],
        EPERM,
    );
    assert_decision(
        &prog,
        "unix seqpacket",
        s,
        &[unix, v(libc::SOCK_SEQPACKET), 0, 0x1000],
        EPERM,
    );
    assert_decision(
        &prog,
        "inet stream",
        s,
        &[v(libc::AF_INET), v(libc::SOCK_STREAM), 0, 0x1000],
        EPERM,
    );
}

#[test]
fn ioctl_refuses_terminal_injection_whatever_the_high_bits() {
    let prog = program();
    let i = libc::SYS_ioctl;
    // asm-generic numbers, the same on x86-64 and arm64.
    for (what, cmd) in [("TIOCSTI", 0x5412u64), ("TIOCLINUX", 0x541c)] {
        assert_decision(&prog, what, i, &[0, cmd, 0x1000], EPERM);
        assert_decision(&prog, what, i, &[0, cmd | 0x1_0000_0000, 0x1000], EPERM);
        assert_decision(
            &prog,
            what,
            i,
            &[0, cmd | 0xffff_ffff_0000_0000, 0x1000],
            EPERM,
        );
    }
    assert_decision(&prog, "TCGETS", i, &[0, 0x5401, 0x1000], ALLOW);
    assert_decision(&prog, "FIONREAD", i, &[3, 0x541b, 0x1000], ALLOW);
    assert_decision(&prog, "FIOCLEX", i, &[3, 0x5451], ALLOW);
}

#[test]
fn prctl_allows_only_the_listed_options() {
    let prog = program();
    let p = libc::SYS_prctl;
    let v = |x: i32| x as u32 as u64;
    for (what, option) in [
        ("PR_SET_NAME", v(libc::PR_SET_NAME)),
        ("PR_GET_NAME", v(libc::PR_GET_NAME)),
        ("PR_GET_DUMPABLE", v(libc::PR_GET_DUMPABLE)),
        ("PR_GET_PDEATHSIG", v(libc::PR_GET_PDEATHSIG)),
        ("PR_GET_SECCOMP", v(libc::PR_GET_SECCOMP)),
        ("PR_GET_NO_NEW_PRIVS", v(libc::PR_GET_NO_NEW_PRIVS)),
        ("PR_CAPBSET_READ", v(libc::PR_CAPBSET_READ)),
        ("PR_GET_MDWE", 66),
        ("PR_SET_VMA", 0x5356_4d41),
    ] {
        assert_decision(&prog, what, p, &[option, 0x1000], ALLOW);
    }
    for (what, option) in [
        ("PR_SET_SECCOMP", v(libc::PR_SET_SECCOMP)),
        // Neither clearing nor setting a parent-death signal: the tool's life is its init's.
        ("PR_SET_PDEATHSIG", v(libc::PR_SET_PDEATHSIG)),
        ("PR_SET_DUMPABLE", v(libc::PR_SET_DUMPABLE)),
        ("PR_SET_MDWE", 65),
        ("PR_SET_NO_NEW_PRIVS", v(libc::PR_SET_NO_NEW_PRIVS)),
        ("PR_CAPBSET_DROP", v(libc::PR_CAPBSET_DROP)),
        ("PR_CAP_AMBIENT", v(libc::PR_CAP_AMBIENT)),
        ("PR_SET_PTRACER", v(libc::PR_SET_PTRACER)),
        ("PR_SET_MM", v(libc::PR_SET_MM)),
        ("PR_SET_SECUREBITS", v(libc::PR_SET_SECUREBITS)),
        ("PR_SET_CHILD_SUBREAPER", v(libc::PR_SET_CHILD_SUBREAPER)),
        ("PR_SET_SPECULATION_CTRL", v(libc::PR_SET_SPECULATION_CTRL)),
    ] {
        assert_decision(&prog, what, p, &[option, 0], EPERM);
    }
}

#[test]
fn prlimit64_only_on_this_process() {
    let prog = program();
    let p = libc::SYS_prlimit64;
    assert_decision(&prog, "self", p, &[0, 7, 0, 0x1000], ALLOW);
    assert_decision(&prog, "pid 1", p, &[1, 7, 0x1000, 0], EPERM);
}

#[test]
fn foreign_architectures_are_killed() {
    let prog = program();
    for arch in [AUDIT_ARCH_I386, AUDIT_ARCH_ARM, 0, u32::MAX] {
        for n in [0u32, 1, 3, 4, 11, 59, 120] {
            let d = Data {
                nr: n,
                arch,
                ip: 0,
                args: [0; 6],
            };
            assert_eq!(
                name(run(&prog, &d)),
                "KILL_PROCESS",
                "arch {arch:#x} nr {n}"
            );
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn x32_system_calls_are_killed() {
    let prog = program();
    const X32: u32 = 0x4000_0000;
    for n in [
        libc::SYS_read,
        libc::SYS_write,
        libc::SYS_execve,
        libc::SYS_clone3,
        libc::SYS_exit_group,
    ] {
        let d = Data {
            nr: nr(n) | X32,
            arch: NATIVE_ARCH,
            ip: 0,
            args: [0; 6],
        };
        assert_eq!(name(run(&prog, &d)), "KILL_PROCESS", "x32 nr {n}");
    }
    // x32's own execve and its upper range, too.
    for n in [X32 | 520, X32 | 545, u32::MAX] {
        let d = Data {
            nr: n,
            arch: NATIVE_ARCH,
            ip: 0,
            args: [0; 6],
        };
        assert_eq!(name(run(&prog, &d)), "KILL_PROCESS", "nr {n:#x}");
    }
}

#[test]
fn memfd_create_fails_with_eperm() {
    let prog = program();
    assert_decision(
        &prog,
        "memfd_create",
        libc::SYS_memfd_create,
        &[0x1000, 1],
        EPERM,
    );
}

/// A private file mapping that is writable and executable at once would let the tool write its
/// own machine code and run it: refused, like executable anonymous memory.
#[test]
fn mmap_refuses_writable_executable_file_mappings() {
    let prog = program();
    let v = |x: i32| x as u32 as u64;
    assert_decision(
        &prog,
        "rwx private file",
        libc::SYS_mmap,
        &[
            0,
            4096,
            v(libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC),
            v(libc::MAP_PRIVATE),
            3,
            0,
        ],
        EPERM,
    );
}
