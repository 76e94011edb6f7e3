"""One lock per physical GPU, shared by every evaluator on the machine.

Timing holds it exclusively; correctness runs hold it shared, so other processes' kernels do
not time-slice into a measurement. It is an flock on a file in one machine-wide directory, so
it holds across threads, server processes and users, and dies with its holder.
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path


def default_lock_dir() -> Path:
    """Where every evaluator on this machine keeps its per-GPU lock files (all users share it)."""
    path = Path(tempfile.gettempdir()) / "adaexplore-gpu-locks"
    path.mkdir(exist_ok=True)
    try:
        path.chmod(0o1777)
    except OSError:  # someone else's directory, already shared
        pass
    return path


def _lock_file(path: Path):
    """An open file to flock; created readable and writable by everyone who shares the GPU."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except PermissionError:
        fd = os.open(path, os.O_RDONLY)
    return os.fdopen(fd, "rb", buffering=0)  # flock needs no particular access mode


def physical_gpu_id(device: str, env_visible: str | None, pool_visible: str | None = None) -> str:
    """The machine-wide id of the GPU `device` names, as a lock-file-safe string.

    `pool_visible` is what the evaluator's own workers see (one GPU, by its physical id);
    otherwise `device`'s index is read through this process's CUDA_VISIBLE_DEVICES.
    """
    if not device.startswith("cuda"):
        return "cpu"
    if pool_visible and pool_visible.strip():
        ident = pool_visible.split(",")[0].strip()
    else:
        index = int(device.split(":")[1]) if ":" in device else 0
        entries = [v.strip() for v in (env_visible or "").split(",") if v.strip()]
        ident = entries[index] if index < len(entries) else str(index)
    return re.sub(r"[^A-Za-z0-9_.-]", "_", ident) or "0"


class GpuLock:
    """Exclusive (timing) and shared (correctness) use of one GPU. Within this process a waiting
    exclusive holder goes first, so a stream of shared holders cannot starve it."""

    def __init__(self, lock_dir: Path, physical_id: str) -> None:
        self.path = Path(lock_dir) / f"gpu-{physical_id}.lock"
        self._rw = threading.Condition()
        self._exclusive_waiting = 0

    @contextmanager
    def exclusive(self):
        with self._rw:
            self._exclusive_waiting += 1
        try:
            with _flocked(self.path, fcntl.LOCK_EX):
                yield
        finally:
            with self._rw:
                self._exclusive_waiting -= 1
                self._rw.notify_all()

    @contextmanager
    def shared(self):
        with self._rw:
            while self._exclusive_waiting:
                self._rw.wait()
        with _flocked(self.path, fcntl.LOCK_SH):
            yield


@contextmanager
def _flocked(path: Path, mode: int):
    with _lock_file(path) as fh:
        fcntl.flock(fh, mode)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
