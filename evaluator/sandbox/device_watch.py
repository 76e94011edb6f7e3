"""Device memory held to each job's share, read through NVML (runs in the warm parent).

Each job is admitted with a share of the device (what the evaluator reserved for it, plus its
CUDA context). A job may go past its share while the device has room to spare; once the
device's free memory falls below `HEADROOM_BYTES`, the jobs past their share are stopped, the
one furthest past first, with the figures in their verdict. Every job alive while the device ran
that short is marked as having run under pressure: if it fails, the evaluator runs it again
rather than blaming it (its failure may be a neighbour's doing).

The figures come from NVML (`nvidia-ml-py`), from outside the job: nothing a candidate does in
its own process (an allocator setting undone, cudaMalloc called directly) changes them. Where
NVML cannot be read (no driver, no GPU, the CPU interpreter) there is no watch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Protocol

# cuDNN picks slower algorithms when its workspace does not fit: with 0.6 GiB free a transposed
# 3-D convolution ran 2.6x slower on an H200, with 8 GiB free at full speed.
HEADROOM_BYTES = 8 << 30
POLL_S = 0.1  # how often the device's free memory is read


class DeviceReader(Protocol):
    def free_bytes(self) -> int: ...

    def used_by_pid(self) -> dict[int, int]: ...


@dataclass(frozen=True)
class Overdraw:
    """A job past its share while the device ran short: what it held, its share, what was free."""

    job_id: str
    used_bytes: int
    share_bytes: int
    free_bytes: int

    def reason(self) -> str:
        gib = 1 << 30
        return (f"its processes held {self.used_bytes / gib:.2f} GiB of the device, past its share of "
                f"{self.share_bytes / gib:.2f} GiB, while the device had {self.free_bytes / gib:.2f} GiB left "
                "for every other job")


def overdrawn(free: int, used: dict[str, int], shares: dict[str, int], headroom: int = HEADROOM_BYTES) -> list[Overdraw]:
    """The jobs to stop, furthest past its share first: none while `free` is at least `headroom`;
    otherwise those past their share, until what they hold beyond it would bring the free
    memory back to `headroom`."""
    if free >= headroom:
        return []
    past = sorted(((used[j] - shares[j], j) for j in used if j in shares and used[j] > shares[j]), reverse=True)
    stop: list[Overdraw] = []
    short = headroom - free
    for beyond, job in past:
        if short <= 0:
            break
        stop.append(Overdraw(job, used[job], shares[job], free))
        short -= beyond
    return stop


class NvmlReader:
    """Free memory and per-process use of one GPU, named as CUDA_VISIBLE_DEVICES names it."""

    def __init__(self, visible: str | None) -> None:
        import importlib

        pynvml = importlib.import_module("pynvml")  # nvidia-ml-py, where a driver is
        self._nvml = pynvml
        pynvml.nvmlInit()
        first = (visible or "0").split(",")[0].strip()
        if first.startswith(("GPU-", "MIG-")):
            self._handle = pynvml.nvmlDeviceGetHandleByUUID(first)
        else:
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(int(first or 0))

    def free_bytes(self) -> int:
        return int(self._nvml.nvmlDeviceGetMemoryInfo(self._handle).free)

    def used_by_pid(self) -> dict[int, int]:
        used: dict[int, int] = {}
        for proc in self._nvml.nvmlDeviceGetComputeRunningProcesses(self._handle):
            if proc.usedGpuMemory is not None:
                used[int(proc.pid)] = used.get(int(proc.pid), 0) + int(proc.usedGpuMemory)
        return used


def open_reader(visible: str | None = None) -> DeviceReader | None:
    """NVML's view of the GPU this process's jobs use, or None where it cannot be read."""
    try:
        return NvmlReader(visible if visible is not None else os.environ.get("CUDA_VISIBLE_DEVICES"))
    except Exception:  # noqa: BLE001 - no library, no driver, no device: no watch
        return None


class DeviceWatch:
    """Reads the device every `POLL_S` and says which jobs to stop and which ran under pressure.

    `jobs()` gives, for each live job, its processes and its share (0: no share, never stopped).
    """

    def __init__(self, reader: DeviceReader, headroom: int = HEADROOM_BYTES, clock: Callable[[], float] | None = None) -> None:
        import time

        self.reader, self.headroom = reader, headroom
        self._clock = clock or time.monotonic
        self._next = 0.0

    def due(self) -> bool:
        return self._clock() >= self._next

    def check(self, jobs: dict[str, tuple[list[int], int]]) -> tuple[list[Overdraw], bool]:
        """(the jobs to stop, whether the device is short now) for the live `jobs`."""
        self._next = self._clock() + POLL_S
        free = self.reader.free_bytes()
        if free >= self.headroom:
            return [], False
        by_pid = self.reader.used_by_pid()
        used = {job: sum(by_pid.get(pid, 0) for pid in pids) for job, (pids, _) in jobs.items()}
        shares = {job: share for job, (_, share) in jobs.items() if share > 0}
        return overdrawn(free, used, shares, self.headroom), True
