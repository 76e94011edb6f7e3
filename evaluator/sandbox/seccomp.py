"""A seccomp filter for worker processes: system calls a kernel candidate never needs fail with EPERM.

Runs in a forked worker, after its namespaces and mounts are set up and before any task or
candidate code. It is a deny list written as classic BPF (no library needed): changing mounts
or namespaces, tracing or reading other processes, loading kernel code, keys, clocks, the
host name, io_uring (whose operations bypass seccomp), and `clone` with namespace flags.
`clone3` answers ENOSYS so the C library falls back to `clone`, whose flags can be checked.
Only x86-64 has a table; elsewhere `install` returns False and the sandbox reports the layer
as missing.
"""

from __future__ import annotations

import ctypes
import platform
import struct

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000

_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_EPERM, _ENOSYS = 1, 38

# BPF opcodes (linux/filter.h)
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06

_NAMESPACE_FLAGS = 0x7E020000  # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET

# x86-64 numbers of the denied calls
DENIED_X86_64 = {
    "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "unshare": 272, "setns": 308,
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "pidfd_getfd": 438,
    "kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
    "reboot": 169, "swapon": 167, "swapoff": 168, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
    "keyctl": 250, "add_key": 248, "request_key": 249, "open_by_handle_at": 304, "name_to_handle_at": 303,
    "acct": 163, "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159,
    "sethostname": 170, "setdomainname": 171, "iopl": 172, "ioperm": 173, "quotactl": 179, "syslog": 103,
    "vhangup": 153, "uselib": 134, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "mount_setattr": 442, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427,
}
_CLONE, _CLONE3 = 56, 435

# seccomp_data: nr (u32), arch (u32), instruction pointer (u64), args[6] (u64 each)
_NR, _ARCH, _ARG0_LOW = 0, 4, 16


def _program() -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k); jumps are resolved against the labels at the end."""
    denied = sorted(DENIED_X86_64.values())
    body: list[tuple] = [
        (_LD_W_ABS, 0, 0, _ARCH),
        (_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64),
        (_RET_K, 0, 0, _RET_ERRNO | _EPERM),  # another ABI (32-bit calls): nothing is allowed
        (_LD_W_ABS, 0, 0, _NR),
        (_JGE_K, "deny", 0, _X32_BIT),
        *[(_JEQ_K, "deny", 0, nr) for nr in denied],
        (_JEQ_K, "nosys", 0, _CLONE3),
        (_JEQ_K, 0, "allow", _CLONE),
        (_LD_W_ABS, 0, 0, _ARG0_LOW),
        (_JSET_K, "deny", "allow", _NAMESPACE_FLAGS),
    ]
    labels = {"allow": len(body), "nosys": len(body) + 1, "deny": len(body) + 2}
    body += [(_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, _RET_ERRNO | _ENOSYS), (_RET_K, 0, 0, _RET_ERRNO | _EPERM)]
    out = []
    for i, (code, jt, jf, k) in enumerate(body):
        jt = labels[jt] - i - 1 if isinstance(jt, str) else jt
        jf = labels[jf] - i - 1 if isinstance(jf, str) else jf
        out.append((code, jt, jf, k))
    return out


def supported() -> bool:
    return platform.machine() in ("x86_64", "AMD64")


def install() -> bool:
    """Set no_new_privs and install the filter on this process (inherited by its children)."""
    if not supported():
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    prog = _program()
    raw = b"".join(struct.pack("<HBBI", code, jt, jf, k) for code, jt, jf, k in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog), ctypes.addressof(buf))
    return libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0
