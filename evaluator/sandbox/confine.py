"""The sandbox a worker process enters before any task or candidate code runs.

Runs in the warm parent (`probe`) and in each forked worker (`enter`); the per-job limits on
processes, memory and CPU are `cgroups.py`'s, made by the warm parent. The walls,
in layers, each of which holds on its own:

- identity: where the server is root, a worker becomes a dedicated unprivileged uid and gid
  (`SANDBOX_UID`, no supplementary groups) once its namespaces are made, so the host's
  permissions apply to it as to any stranger: root-only files stay closed, pathname sockets
  owned by root refuse it, and per-user kernel quotas (inotify instances, message-queue bytes)
  it exhausts are its own, not root's. Shared memory it is handed (its output ring) is a file
  descriptor, which crosses identities. Where the server is not root, the worker is root of
  an unprivileged user namespace mapped to the server's own uid (no other is ours to give).
- namespaces: a PID namespace of its own (no signal, ptrace or /proc entry reaches the server,
  the warm parent or another job; when the job ends, everything it started dies with it), a
  network namespace with no interface up (no socket reaches anything), its own IPC and UTS
  namespaces, and a mount namespace whose root is built from an allow-list, not the host's
  root with masks: the system's programs and libraries (/usr and its links), a few files of
  /etc, the Python installation and the folders on its path, /sys, all read-only; a /dev with
  only null devices, random sources and its own GPU; its own /proc; a small private /tmp,
  the only place it can write. Nothing else of the host exists there: no data directory, no
  home, no /run, /var or /srv, so no host socket can be named.
- capabilities: all dropped (bounding, ambient, effective, permitted), with no_new_privs and
  locked securebits.
- seccomp (`seccomp.py`): mount, namespace, tracing, kernel-module and similar calls fail.
- limits: a process count and host memory (a pids and a memory cgroup, created per job by the
  warm parent, so memfds and shared memory are charged too), file size, open files, no core
  dumps, no message-queue bytes, and on the CPU an address-space limit.

Where no namespace can be made at all, only capabilities, seccomp and limits apply: `probe`
says so, and the server reports the weaker level.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal
import stat as statmod
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import seccomp

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 32, 4096, 8192, 16384, 1 << 18
_SYS_MOUNT_SETATTR = 442
_AT_FDCWD, _AT_RECURSIVE = -100, 0x8000
_MOUNT_ATTR_RDONLY = 1
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_SECUREBITS, _PR_CAP_AMBIENT = 1, 4, 24, 28, 47
_SYS_PIVOT_ROOT = 155 if sys.platform == "linux" and os.uname().machine == "x86_64" else 41  # aarch64: 41
_MNT_DETACH = 2
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_SECUREBITS_LOCKED_ALL = 0x3F  # noroot, no_setuid_fixup, keep_caps: each set and locked (keep_caps off)
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

LEVEL_FULL = "namespaces"  # every layer
LEVEL_WEAK = "limits-only"  # no namespaces could be made: capabilities, seccomp and limits only

# The host's folders a worker sees (read-only), besides the Python installation and its path.
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/sys")
# The files of /etc that programs a kernel needs read: the dynamic loader's cache, user and group
# names, the time zone, and the links the C compiler is found through.
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group", "nsswitch.conf", "localtime",
             "hosts", "host.conf", "alternatives", "os-release", "debian_version")
BASE_DEVICES = ("null", "zero", "full", "random", "urandom")
GPU_SHARED_DEVICES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
# The host identity of every worker of a root server: no account of the host owns it, so no file,
# socket or quota of the host's is its own. ADAEXPLORE_SANDBOX_UID picks another.
SANDBOX_UID = 1_999_999_999
STAGE = "/tmp"  # where the worker's new root is assembled, in its own mount namespace


def sandbox_uid() -> int:
    """The uid (and gid) a root server's workers run as."""
    raw = os.environ.get("ADAEXPLORE_SANDBOX_UID", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else SANDBOX_UID


def hand_over(path: str | os.PathLike) -> None:
    """Make a trusted folder a job is shown read-write (`Plan.writable`) writable by the jobs of a
    root server, whose uid is the sandbox's (no-op for any other server)."""
    if _is_root():
        os.chown(path, sandbox_uid(), sandbox_uid())


class SandboxError(RuntimeError):
    """A layer the plan requires could not be set up (the job is not run)."""


@dataclass
class Plan:
    """What a worker may see and do. Built by the trusted side; plain data (travels in a job)."""

    level: str = LEVEL_FULL
    hidden: list[str] = field(default_factory=list)  # never shown, even inside a folder that is
    visible: list[str] = field(default_factory=list)  # host folders or files shown read-only besides the system's
    writable: list[str] = field(default_factory=list)  # trusted directories shown read-write
    uid: int | None = None  # the host uid of a root server's worker (None: sandbox_uid())
    gpu_minors: list[int] | None = None  # /dev/nvidiaN to show; None: every GPU (minor unknown)
    gpu: bool = False
    tmp_bytes: int = 1 << 30  # the private /tmp
    max_file_bytes: int = 1 << 30
    max_open_files: int = 4096

    def to_job(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_job(cls, raw: dict) -> "Plan":
        return cls(**{k: v for k, v in raw.items() if k in cls.__dataclass_fields__})


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        code = ctypes.get_errno()
        raise SandboxError(f"{what}: {os.strerror(code)}")


def _mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: s.encode() if s is not None else None)
    _check(_libc().mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {target}")


def _unshare(flags: int) -> None:
    _check(_libc().unshare(flags), "unshare")


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def _is_root() -> bool:
    return os.geteuid() == 0


def namespace_flags() -> int:
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
    return flags if _is_root() else flags | CLONE_NEWUSER


def _enter_namespaces() -> None:
    """New namespaces for this process. Root makes them as itself (the worker becomes its own
    uid later, in `_become`); anyone else makes a user namespace first, mapped to itself."""
    uid, gid = os.getuid(), os.getgid()
    _unshare(namespace_flags())
    if not _is_root():  # root inside a user namespace of our own, mapped to our own uid outside
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"0 {uid} 1")
        _write("/proc/self/gid_map", f"0 {gid} 1")


def probe() -> tuple[str, str]:
    """The strongest level this process can give its workers, and why not more.

    Forks a child that tries the namespaces and mounts `enter` uses; the answer is its exit.
    """
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _enter_namespaces()
            _mount(None, "/", None, MS_REC | MS_PRIVATE)
            _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m")
            code = 0
        except BaseException:  # noqa: BLE001 - the exit code is the answer
            code = 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return LEVEL_FULL, "namespaces (mount, PID, network, IPC, UTS), no capabilities, seccomp, limits"
    how = "as root" if _is_root() else "through an unprivileged user namespace"
    return LEVEL_WEAK, (f"namespaces cannot be created {how} on this machine: workers run with no "
                        "capabilities, seccomp and limits only, and can read what the server's user can")


# --- inside the worker ------------------------------------------------------------------

def _continued(signum: int, frame: object) -> None:
    """The namespace's first process handles SIGCONT (doing nothing) so the kernel counts it."""


def _relay_exit(pid: int) -> None:
    """Wait for `pid` and end the same way; reap any other child meanwhile (the namespace's
    first process inherits every orphan in it). Holds no descriptor of the job's."""
    os.closerange(3, 65536)
    while True:
        try:
            done, status = os.wait()
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(70)
        if done == pid:
            break
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those two have no handler to reset
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 70)


def _mkdirs(path: str) -> None:
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        pass


def _bind(src: str, target: str, readonly: bool, is_dir: bool) -> None:
    if is_dir:
        _mkdirs(target)
    elif not os.path.exists(target):
        _mkdirs(os.path.dirname(target))
        open(target, "a").close()
    _mount(src, target, None, MS_BIND | MS_REC)
    if readonly:
        _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)


def _under(path: str, parents: list[str]) -> bool:
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in parents)


def _device_node(target: str, st: os.stat_result, source: str) -> None:
    kind = statmod.S_IFMT(st.st_mode)
    if kind not in (statmod.S_IFCHR, statmod.S_IFBLK):
        return
    try:
        os.mknod(target, kind | (st.st_mode & 0o777), st.st_rdev)
        os.chmod(target, st.st_mode & 0o777)  # as the host has it, whatever the umask
    except PermissionError:
        open(target, "w").close()
        _mount(source, target, None, MS_BIND)


def _make_dev(plan: Plan, root: str) -> None:
    """A /dev with only the devices a kernel needs: null devices, random sources, its GPU."""
    keep = {name: f"/dev/{name}" for name in BASE_DEVICES}
    if plan.gpu:
        for name in GPU_SHARED_DEVICES:
            keep[name] = f"/dev/{name}"
        names = os.listdir("/dev") if os.path.isdir("/dev") else []
        minors = plan.gpu_minors
        for name in names:
            if name.startswith("nvidia") and name[6:].isdigit() and (minors is None or int(name[6:]) in minors):
                keep[name] = f"/dev/{name}"
        if os.path.isdir("/dev/nvidia-caps"):
            keep["nvidia-caps"] = "/dev/nvidia-caps"
    # Device nodes of our own (same numbers) in a tmpfs of our own: nothing done to them, a chmod
    # say, reaches the host's. Without the right to make nodes (a user namespace), bind them.
    nodes, dirs, fds = [], [], []
    for name, path in keep.items():
        try:
            st, fd = os.stat(path), os.open(path, os.O_PATH)
        except OSError:
            continue
        fds.append(fd)
        if statmod.S_ISDIR(st.st_mode):
            dirs.append((name, st.st_mode & 0o777))
            for child in os.listdir(path):
                try:
                    nodes.append((f"{name}/{child}", os.stat(child, dir_fd=fd), f"/proc/self/fd/{fd}/{child}"))
                except OSError:
                    continue
        else:
            nodes.append((name, st, f"/proc/self/fd/{fd}"))
    dev = f"{root}/dev"
    _mkdirs(dev)
    _mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=755")
    for name, mode in dirs:
        os.mkdir(f"{dev}/{name}", mode)
    for rel, st, source in nodes:
        _device_node(f"{dev}/{rel}", st, source)
    for fd in fds:
        os.close(fd)
    _mkdirs(f"{dev}/shm")
    _mount("tmpfs", f"{dev}/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{dev}/{name}")


PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")  # kernel settings: never writable
PROC_MASKED = ("kcore", "kmsg", "keys", "timer_list")


def _mount_proc(root: str) -> None:
    """A /proc of the job's PID namespace. It stays writable (the CUDA driver writes to it), so
    what under it reaches the kernel's settings is bound read-only, and what leaks the host's
    memory or keys reads as empty."""
    proc = f"{root}/proc"
    _mkdirs(proc)
    _mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in PROC_READ_ONLY:
        path = f"{proc}/{name}"
        if os.path.exists(path):
            _mount(path, path, None, MS_BIND | MS_REC)
            _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in PROC_MASKED:
        path = f"{proc}/{name}"
        if os.path.exists(path):
            _mount("/dev/null", path, None, MS_BIND)


def _read_only_everywhere(writable: list[str]) -> None:
    """Make every mount read-only, then the writable places writable again."""
    attr = (ctypes.c_uint64 * 4)(_MOUNT_ATTR_RDONLY, 0, 0, 0)
    libc = _libc()
    ret = libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, b"/", _AT_RECURSIVE, ctypes.byref(attr), ctypes.sizeof(attr))
    if ret != 0:  # older kernels: one mount at a time
        with open("/proc/self/mountinfo") as fh:
            points = [line.split()[4] for line in fh]
        for point in sorted(set(points), key=len):
            if _under(point, writable) or point.startswith("/proc"):  # /dev is in `writable`
                continue
            try:
                _mount(None, point.encode().decode("unicode_escape"), None, MS_REMOUNT | MS_BIND | MS_RDONLY)
            except SandboxError:
                pass
        return
    clear = (ctypes.c_uint64 * 4)(0, _MOUNT_ATTR_RDONLY, 0, 0)
    for path in writable:
        # /dev with every device bound into it: a device opened for writing (the GPU, /dev/null)
        # needs a writable mount, while the tmpfs holding them has room for nothing else.
        flags = _AT_RECURSIVE if path == "/dev" else 0
        ret = libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, path.encode(), flags, ctypes.byref(clear),
                           ctypes.sizeof(clear))
        _check(ret, f"make {path} writable")


def _python_paths(excluded: list[str]) -> list[str]:
    """The Python installation and the folders on its path, less any under `excluded` and the
    file system's root (a path entry of '/' would show the whole host)."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.update(p for p in sys.path if p and os.path.isdir(p))
    # This project's own packages, wherever an (editable) install maps them from.
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] == "adaexplore" and getattr(module, "__path__", None):
            paths.update(p for p in module.__path__ if os.path.isdir(p))
    for var in ("LD_LIBRARY_PATH", "CUDA_HOME", "TRITON_PTXAS_PATH", "TRITON_LIBCUDA_PATH"):
        paths.update(p for p in os.environ.get(var, "").split(":") if p and os.path.exists(p))
    real = {os.path.realpath(p) for p in paths}
    return sorted(p for p in real if p != "/" and not _under(p, excluded))


def _open_kept(paths: list[str]) -> dict[str, tuple[int, bool]]:
    """O_PATH descriptors of the host paths to show, opened before anything covers them."""
    kept: dict[str, tuple[int, bool]] = {}
    for path in paths:
        try:
            kept[path] = (os.open(path, os.O_PATH), os.path.isdir(path))
        except OSError:
            continue
    return kept


def _build_root(plan: Plan, excluded: list[str]) -> None:
    """Assemble the worker's root from the allow-list (see the module doc) and move into it."""
    shown = [p for p in SYSTEM_PATHS if os.path.lexists(p)]
    links = {p: os.readlink(p) for p in shown if os.path.islink(p)}  # /bin -> usr/bin: made again inside
    etc = [f"/etc/{name}" for name in ETC_FILES if os.path.exists(f"/etc/{name}")]
    writable = [os.path.realpath(p) for p in plan.writable if os.path.isdir(p)]
    visible = [os.path.realpath(p) for p in plan.visible if os.path.exists(p)]
    binds = sorted({*[p for p in shown if p not in links], *etc, *_python_paths(excluded), *visible, *writable},
                   key=len)
    binds = [p for p in binds if not _under(p, writable) or p in writable]
    kept = _open_kept(binds)
    # Folders made here must be open to the sandbox's uid to walk through, whatever umask the
    # server runs with (a server keeps its own files private with 077).
    os.umask(0o022)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = STAGE
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    for path, target in links.items():
        os.symlink(target, root + path)
    _mkdirs(root + "/tmp")  # before the binds: a folder shown from the host's /tmp goes inside it
    _mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={plan.tmp_bytes},mode=1777")
    for path in binds:
        if path not in kept:
            continue
        fd, is_dir = kept[path]
        _bind(f"/proc/self/fd/{fd}", root + path, readonly=path not in writable, is_dir=is_dir)
    for fd, _ in kept.values():
        os.close(fd)
    for path in excluded:  # a data directory inside a shown folder stays out of sight
        if _under(path, binds) and os.path.isdir(root + path) and not _under(path, writable):
            _mount("tmpfs", root + path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=16k,mode=755")
    _make_dev(plan, root)
    _mount_proc(root)
    # Into the new root; the host's is detached, so nothing of it can be reached by any path.
    os.chdir(root)
    if _libc().syscall(_SYS_PIVOT_ROOT, b".", b".") == 0:
        _check(_libc().umount2(b".", _MNT_DETACH), "detach the host's root")
    else:  # a root that cannot be pivoted (an initramfs): moved over it, as switch_root does
        _mount(".", "/", None, MS_MOVE)
        _check(_libc().chroot(b"."), "chroot")
    os.chdir("/")
    _read_only_everywhere(["/tmp", "/dev", "/proc", *writable])


def _become(uid: int) -> None:
    """Drop every capability, and, for a root server's worker, become `uid` (and gid `uid`) on
    the host with no supplementary groups."""
    libc = _libc()
    libc.prctl(_PR_SET_SECUREBITS, _SECUREBITS_LOCKED_ALL, 0, 0, 0)  # may fail without CAP_SETPCAP: harmless
    for cap in range(64):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break
    if uid:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        # A change of uid clears the parent-death signal and makes /proc/self root's: both restored.
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)(0, 0, 0, 0, 0, 0)
    _check(libc.capset(ctypes.byref(header), ctypes.byref(data)), "drop capabilities")


def _set_limits(plan: Plan, memory_limit: int | None) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (plan.max_file_bytes, plan.max_file_bytes))
    resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))  # a kernel needs no POSIX message queue
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lim = min(plan.max_open_files, hard) if hard != resource.RLIM_INFINITY else plan.max_open_files
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, lim), lim))
    if memory_limit:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))


def _lock_down(plan: Plan, memory_limit: int | None) -> None:
    """The limits and the seccomp filter (after `_become`: the filter refuses what it needs)."""
    _set_limits(plan, memory_limit)
    if not seccomp.install() and plan.level == LEVEL_FULL:
        raise SandboxError("cannot install the seccomp filter")


def enter(plan: Plan, memory_limit: int | None = None, excluded: list[str] | None = None) -> str:
    """Confine this (forked, single-threaded) process; returns its new working directory.

    `excluded` names host folders never to show (the evaluator's and the server's), on top of
    `plan.hidden`. At the full level this process forks twice: the caller continues as the
    second process of a new PID namespace (the first only reaps), while this process stays
    outside and ends as the caller ends.
    Raises SandboxError if a layer the plan asks for cannot be made.
    """
    workdir = "/tmp/job"
    host_root = _is_root()
    uid = (plan.uid or sandbox_uid()) if host_root else 0
    if plan.level == LEVEL_FULL:
        hidden = sorted({os.path.realpath(p) for p in (*plan.hidden, *(excluded or [])) if p})
        _enter_namespaces()
        pid = os.fork()
        if pid != 0:  # outside the namespace: ends as the namespace ends
            _relay_exit(pid)
        _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        _build_root(plan, hidden)
        _libc().sethostname(b"sandbox", 7)
        # The namespace's first process reaps as the sandbox uid too, with no capability, under
        # the same limits and filter as the job: what the job could make it do, it could do itself.
        _become(uid)
        _lock_down(plan, memory_limit)
        # The namespace's first process only reaps: the job runs as its second, so that signals
        # the job sends itself act as they do anywhere (the first one ignores them).
        # A pause (SIGSTOP, then SIGCONT, to the job's group) that lands while this process forks
        # reaches the new process too, but the kernel passes on only the signals that this
        # process does not ignore, and a namespace's first process ignores every signal it has no
        # handler for except SIGKILL and SIGSTOP: without a handler the job would get the stop
        # and never the continue, and stay stopped until its time limit.
        signal.signal(signal.SIGCONT, _continued)
        # Not dumpable from before the fork: the job (same uid) can neither write the first
        # process's memory through /proc/1/mem nor read it. The job is made dumpable again, so
        # that /proc/self is its own (the CUDA driver writes there).
        _libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
        pid = os.fork()
        if pid != 0:
            _relay_exit(pid)
        _libc().prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
        signal.signal(signal.SIGCONT, signal.SIG_DFL)
        _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        os.makedirs(workdir, exist_ok=True)
        os.chdir(workdir)
    else:
        workdir = os.getcwd()  # a host folder under the server's own: the weaker level keeps its uid
        _become(0)
        _lock_down(plan, memory_limit)
    return workdir


# --- on the trusted side ------------------------------------------------------------------

@dataclass(frozen=True)
class GpuNode:
    """One GPU as the driver lists it: its /dev/nvidiaN minor and its UUID."""

    minor: int
    uuid: str


def gpu_node(physical_id: str, root: Path = Path("/proc/driver/nvidia/gpus")) -> GpuNode | None:
    """The GPU with this physical id: an index (CUDA's order, which is PCI bus order on a machine
    of identical GPUs) or a UUID. None when it cannot be known (a MIG id, no driver information):
    then the worker sees every GPU's device file.

    A worker shown one device file sees that GPU alone, which CUDA then numbers 0 whatever its
    index on the host: the worker must name it by UUID, which holds however the driver counts.
    """
    try:
        infos = [(root / bus / "information").read_text() for bus in sorted(os.listdir(root))]
    except OSError:
        return None
    nodes = [_parse_gpu_information(info) for info in infos]
    if physical_id.isdigit():
        index = int(physical_id)
        return nodes[index] if index < len(nodes) else None
    return next((n for n in nodes if n is not None and n.uuid == physical_id), None)


def _parse_gpu_information(text: str) -> GpuNode | None:
    fields = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in text.splitlines())}
    minor, uuid = fields.get("Device Minor", ""), fields.get("GPU UUID", "")
    if not minor.isdigit() or not uuid.startswith("GPU-"):
        return None
    return GpuNode(int(minor), uuid)
