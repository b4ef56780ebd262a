#!/usr/bin/env python3
"""Run a command as an unprivileged user on a machine where user namespaces are switched off.

Usage (as root): without-userns.py USER COMMAND [ARG...]

Where `user.max_user_namespaces` can be written, .ci/test sets it to 0 instead. Where it cannot
(root without CAP_SYS_RESOURCE, as in some CI sandboxes), this installs a seccomp filter that
refuses to create user namespaces exactly as a kernel with them disabled does (`unshare` and
`clone` with CLONE_NEWUSER fail with EPERM; `clone3`, whose flags a filter cannot read, answers
ENOSYS so the C library falls back to `clone`), then drops to USER and execs COMMAND. The filter
is installed by root without `no_new_privs`, so file capabilities still take effect for the
programs COMMAND runs: this is the machine the launcher's file-capability path is for.
"""
import ctypes
import os
import pwd
import struct
import sys

PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
AUDIT_ARCH_X86_64 = 0xC000003E
NR = {"unshare": 272, "clone": 56, "clone3": 435}
CLONE_NEWUSER = 0x10000000
EPERM, ENOSYS = 1, 38
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000

LD_W_ABS, JEQ, JSET, RET = 0x20, 0x15, 0x45, 0x06


def ins(code, jt, jf, k):
    return struct.pack("HBBI", code, jt, jf, k)


def program():
    p = [
        ins(LD_W_ABS, 0, 0, 4),                      # 0 arch
        ins(JEQ, 1, 0, AUDIT_ARCH_X86_64),           # 1
        ins(RET, 0, 0, RET_ALLOW),                   # 2 other arch: not our concern
        ins(LD_W_ABS, 0, 0, 0),                      # 3 nr
        ins(JEQ, 0, 1, NR["clone3"]),                # 4
        ins(RET, 0, 0, RET_ERRNO | ENOSYS),          # 5
        ins(JEQ, 2, 0, NR["unshare"]),               # 6 -> 9
        ins(JEQ, 1, 0, NR["clone"]),                 # 7 -> 9
        ins(RET, 0, 0, RET_ALLOW),                   # 8
        ins(LD_W_ABS, 0, 0, 16),                     # 9 args[0], low word
        ins(JSET, 0, 1, CLONE_NEWUSER),              # 10
        ins(RET, 0, 0, RET_ERRNO | EPERM),           # 11
        ins(RET, 0, 0, RET_ALLOW),                   # 12
    ]
    return b"".join(p), len(p)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    if os.uname().machine != "x86_64":
        sys.exit("without-userns.py: only x86_64 is supported")
    user = pwd.getpwnam(sys.argv[1])
    code, n = program()
    buf = ctypes.create_string_buffer(code, len(code))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = SockFprog(n, ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        e = ctypes.get_errno()
        sys.exit(f"without-userns.py: installing the filter: {os.strerror(e)}")
    os.setgroups([user.pw_gid])
    os.setresgid(user.pw_gid, user.pw_gid, user.pw_gid)
    os.setresuid(user.pw_uid, user.pw_uid, user.pw_uid)
    os.environ["HOME"] = user.pw_dir
    os.environ["USER"] = os.environ["LOGNAME"] = user.pw_name
    os.execvp(sys.argv[2], sys.argv[2:])


if __name__ == "__main__":
    main()
