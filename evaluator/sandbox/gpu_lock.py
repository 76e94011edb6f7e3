"""One lock per physical GPU, shared by every evaluator on the machine.

Timing holds it exclusively; correctness runs hold it shared, so other processes' kernels do
not time-slice into a measurement. It is an flock on a file in one machine-wide directory, so
it holds across threads, server processes and users, and dies with its holder. Held by the
trusted evaluator process, which pauses its workers through the pool while it times.
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Callable


def default_lock_dir() -> Path:
    """Where every evaluator on this machine keeps its per-GPU lock files (all users share it)."""
    path = Path(tempfile.gettempdir()) / "adaexplore-gpu-locks"
    path.mkdir(exist_ok=True)
    try:
        path.chmod(0o1777)
    except OSError:  # someone else's directory, already shared
        pass
    return path


def _lock_file(path: Path) -> BinaryIO:
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
    """Exclusive (timing) and shared (correctness) use of one GPU.

    Within this process the shared holders are counted and the process holds one flock for
    them all. A timing does not wait for them to finish: it pauses them (`pause(keep)`, which
    stops their processes; `keep` is the job about to be measured), takes the flock
    exclusively, and resumes them afterwards (`resume()`). New shared holders wait while a
    timing is pending or measuring, so it is never starved. Shared holders in other processes
    are waited for, as the flock does.
    """

    def __init__(self, lock_dir: Path, physical_id: str, pause: Callable[[str | None], None] | None = None,
                 resume: Callable[[], None] | None = None) -> None:
        self.path = Path(lock_dir) / f"gpu-{physical_id}.lock"
        self._pause, self._resume = pause, resume
        self._cv = threading.Condition()
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0
        self._fh: BinaryIO | None = None  # this process's one open lock file while it holds the flock
        self._mode = 0

    def _flock(self, mode: int) -> None:
        """Hold the process's flock in `mode` (LOCK_SH, LOCK_EX) or release it (0). Under `_cv`."""
        if mode == self._mode:
            return
        if not mode:
            assert self._fh is not None  # a mode other than 0 is held
            fcntl.flock(self._fh, fcntl.LOCK_UN)
            self._fh.close()
            self._fh, self._mode = None, 0
            return
        fh = self._fh = self._fh or _lock_file(self.path)
        try:
            fcntl.flock(fh, mode)
        except BaseException:
            fh.close()
            self._fh, self._mode = None, 0
            raise
        self._mode = mode

    @contextmanager
    def shared(self):
        with self._cv:
            while self._writer or self._writers_waiting:
                self._cv.wait()
            self._readers += 1
            try:
                self._flock(fcntl.LOCK_SH)
            except BaseException:
                self._readers -= 1
                raise
        try:
            yield
        finally:
            with self._cv:
                self._readers -= 1
                if not self._readers and not self._writer:
                    self._flock(0)
                self._cv.notify_all()

    @contextmanager
    def exclusive(self, keep: str | None = None, pause: bool = True):
        """Hold the GPU alone. With `pause` (and a pause hook), running shared holders of this
        process are paused rather than waited for; `keep` names the job that is not paused."""
        pausing = pause and self._pause is not None
        with self._cv:
            self._writers_waiting += 1
            try:
                while self._writer or (self._readers and not pausing):
                    self._cv.wait()
                self._writer = True
            finally:
                self._writers_waiting -= 1
            paused = bool(self._readers)
            try:
                if paused and self._pause is not None:
                    self._pause(keep)  # before the flock changes: paused work never runs unlocked
                self._flock(fcntl.LOCK_EX)
            except BaseException:
                self._release_writer(paused)
                raise
        try:
            yield
        finally:
            with self._cv:
                self._release_writer(paused)

    def _release_writer(self, paused: bool) -> None:
        try:
            self._flock(fcntl.LOCK_SH if self._readers else 0)
        finally:
            self._writer = False
            if paused and self._resume is not None:
                self._resume()
            self._cv.notify_all()
