"""A worker that is compiling Triton kernels keeps working while another job is measured.

Shared by the warm parent, which makes one `CompileMark` per child before forking it, and the
child, which marks itself while Triton compiles (pure CPU work: code generation and ptxas) and,
once done, waits on its own before any GPU work if a measurement has begun meanwhile.

Two bytes of shared memory: the child's state (0 may use the GPU, 1 compiling, 2 waiting for a
measurement to end) and the parent's hold (1 while a measurement is on). Each side writes its
byte, then fences, then reads the other's, so a child leaving its compile and a measurement
beginning cannot miss each other: either the parent sees the child off its compile and stops it
as before, or the child sees the hold and waits. The parent stops a child in any state but 1.

A candidate can write its own byte and run GPU work while it says it compiles. It gains nothing
by it: a measurement that another context disturbed is detected and measured again after every
other run has finished (`JobRunner.run_timed`).
"""

from __future__ import annotations

import mmap
import os
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from ...common.vocab import Phase

MAY_USE_GPU, COMPILING, WAITING = 0, 1, 2
_STATE, _HOLD = 0, 1
_fence_lock = threading.Lock()


def _fence() -> None:
    """A full memory barrier: taking a lock is an atomic read-modify-write, which orders the
    store before it against the load after it (x86)."""
    with _fence_lock:
        pass


def _closed(fd: int) -> int:
    """Close `fd` unless it is closed already (-1). Returns -1: a closed end is forgotten, so a
    number the system has since given to another file is never closed by mistake."""
    if fd >= 0:
        os.close(fd)
    return -1


class CompileMark:
    """One child's two bytes and its wake-up pipe."""

    def __init__(self) -> None:
        self.mem = mmap.mmap(-1, 2)  # anonymous and shared: the forked child sees the same bytes
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)

    # --- the warm parent's side ---------------------------------------------------------
    def hold(self) -> bool:
        """A measurement begins. True if the child is compiling and may go on doing so."""
        self.mem[_HOLD] = 1
        _fence()
        return self.mem[_STATE] == COMPILING

    def release(self) -> None:
        """The measurement is over: a child waiting for it goes on."""
        self.mem[_HOLD] = 0
        try:
            os.write(self.wake_w, b"w")
        except (BlockingIOError, OSError):  # a full pipe already wakes it
            pass

    def waiting(self) -> bool:
        """Whether the child is done compiling and waits for the measurement to end."""
        return self.mem[_STATE] == WAITING

    def forked(self, child: bool) -> None:
        """After the fork: each side closes the end of the wake-up pipe it does not use."""
        if child:
            self.wake_w = _closed(self.wake_w)
        else:
            self.wake_r = _closed(self.wake_r)

    def close(self) -> None:
        """Unmap the bytes and close what is left of the pipe (the parent once the child is
        gone; a child for every other child's mark)."""
        self.mem.close()
        self.wake_r, self.wake_w = _closed(self.wake_r), _closed(self.wake_w)

    # --- the child's side -------------------------------------------------------------
    @contextmanager
    def compiling(self, tally: dict[str, float] | None = None) -> Iterator[None]:
        """Mark this process as compiling for the body; after it, wait out any measurement.
        `tally` gets the seconds compiled and waited (the job's phase report)."""
        started = time.perf_counter()
        self.mem[_STATE] = COMPILING
        try:
            yield
        finally:
            self.mem[_STATE] = MAY_USE_GPU
            _fence()
            compiled = time.perf_counter()
            while self.mem[_HOLD]:
                self.mem[_STATE] = WAITING
                os.read(self.wake_r, 1)  # a stale byte only means one more look at the hold
                self.mem[_STATE] = MAY_USE_GPU
                _fence()
            if tally is not None:
                for phase, seconds in ((Phase.compile, compiled - started), (Phase.held, time.perf_counter() - compiled)):
                    tally[phase.value] = tally.get(phase.value, 0.0) + seconds


# Where Triton looks its compilers up when it compiles: the kernel compiler (in its module, and in
# the package, the name the JIT imports), and the function that runs the C compiler for launchers
# (some versions import it into the NVIDIA driver's module).
_COMPILERS = (("triton.compiler.compiler", "compile"), ("triton.compiler", "compile"),
              ("triton.runtime.build", "_build"), ("triton.backends.nvidia.driver", "_build"))


def install(mark: CompileMark, synchronize: Callable[[], None] | None, tally: dict[str, float] | None = None) -> None:
    """In a child: Triton's compiles run under `mark`: its kernel compiler, and the C compiler it
    runs for its launchers (`_build`, wherever Triton's runtime looks it up). Queued GPU work is
    drained first (`synchronize`), so nothing of it runs while the process says it compiles. Only
    the main thread's compiles are marked (a compile in another thread says nothing of what the
    main thread launches), and none while a CUDA graph is being captured (a synchronize would
    break the capture)."""
    import importlib

    import torch

    main = threading.main_thread()

    def capturing() -> bool:
        try:
            return torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing()
        except Exception:  # noqa: BLE001 - whatever torch says, the compile goes on unmarked
            return True

    def marked(original: Callable) -> Callable:
        def marked_compile(*args, **kwargs):
            if threading.current_thread() is not main or capturing():
                return original(*args, **kwargs)
            if synchronize is not None:
                synchronize()
            with mark.compiling(tally):
                return original(*args, **kwargs)

        marked_compile.__wrapped__ = original  # type: ignore[attr-defined]
        return marked_compile

    for module_name, name in _COMPILERS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # not in this version of Triton
            continue
        original = getattr(module, name, None)
        if callable(original) and not hasattr(original, "__wrapped__"):
            setattr(module, name, marked(original))
