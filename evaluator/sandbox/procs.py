"""Linux process facts and controls the warm parent needs: /proc state, parentage, prctl; and
the machine's physical memory and the memory available now, which the evaluator and the judge
size their budgets by."""

from __future__ import annotations

import ctypes
import os
import signal
import time

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def physical_memory() -> int:
    """Bytes of physical memory on this machine (16 GiB if the system cannot say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # pragma: no cover
        return 16 << 30


def available_memory() -> int | None:
    """Bytes of memory that new work can have now without swapping: the kernel's MemAvailable,
    within what this process's cgroup still allows; None if the system cannot say."""
    try:
        with open("/proc/meminfo") as fh:
            found = [int(line.split()[1]) * 1024 for line in fh if line.startswith("MemAvailable:")]
    except (OSError, ValueError, IndexError):
        return None
    if not found:
        return None
    available = found[0]
    try:  # cgroup v2, as a container sees it: its limit less its use
        with open("/sys/fs/cgroup/memory.max") as fh:
            limit = fh.read().strip()
        with open("/sys/fs/cgroup/memory.current") as fh:
            used = int(fh.read().strip())
        if limit != "max":
            available = min(available, max(0, int(limit) - used))
    except (OSError, ValueError):
        pass
    return available


def _prctl(option: int, value: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def adopt_orphans() -> None:
    """Make this process the parent of its descendants' orphans (instead of init), so a
    process a candidate detached from its group still ends up where it can be found."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def _stat(pid: int | str) -> bytes | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return stat[stat.rindex(b")") + 2:]  # after the command name, which may hold anything
    except (OSError, ValueError):
        return None


def state(pid: int) -> str:
    """A process's scheduler state letter ('T' stopped, 'Z' zombie); '?' if it is gone."""
    rest = _stat(pid)
    return rest[:1].decode() if rest else "?"


def until_stopped(pids: list[int], timeout: float) -> None:
    """Return once every process in `pids` is stopped or gone, or after `timeout` seconds. A
    stop takes effect when the process next runs on a CPU, not when the signal is sent."""
    limit = time.monotonic() + timeout
    while pids and time.monotonic() < limit:
        pids = [pid for pid in pids if state(pid) not in ("T", "t", "Z", "X", "?")]
        if pids:
            time.sleep(0.001)


def children_of(parent: int) -> list[int]:
    """The pids whose parent is `parent` (a scan of /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            rest = _stat(entry)
            fields = rest.split() if rest else []
            if len(fields) > 1 and fields[1] == str(parent).encode():
                found.append(int(entry))
    return found


def file_table() -> tuple[int, int]:
    """(open files, most the machine allows): the system-wide table every non-root process
    draws on, root's processes exempt (/proc/sys/fs/file-nr); (0, 0) where it cannot be read."""
    try:
        allocated, _free, most = (int(x) for x in open("/proc/sys/fs/file-nr").read().split())
        return allocated, most
    except (OSError, ValueError):
        return 0, 0


def files_held(pids: list[int]) -> int:
    """Open files these processes hold: their descriptors, and the files mapped into their memory
    (a mapping keeps its file open after its descriptor is closed)."""
    held = 0
    for pid in pids:
        try:
            held += len(os.listdir(f"/proc/{pid}/fd"))
            with open(f"/proc/{pid}/maps", "rb") as fh:
                held += sum(1 for line in fh if line.split(maxsplit=5)[4:5] not in ([b"0"], []))
        except OSError:
            continue
    return held
