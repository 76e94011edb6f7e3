"""Linux process facts and controls the warm parent needs: /proc state, parentage, prctl; and
the machine's physical memory, which the evaluator and the judge size their budgets by."""

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
