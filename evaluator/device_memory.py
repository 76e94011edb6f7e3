"""Admission of worker jobs by the device memory they are expected to use (trusted evaluator side).

Worker slots alone let several large tasks share a GPU until one of them runs out of memory,
a failure that is the evaluator's, not the task's or the kernel's. Each job reserves what it is
expected to need before it starts and gives it back when it ends; a job waits while the device
is spoken for. Estimates come from the reference's own measured peak (`estimate`); a task not
yet measured reserves a fifth of the device, so five unknown tasks may start at once (one that
turns out larger runs out of memory and runs again with its footprint reserved, see
`JobRunner.run`). A job
larger than the whole device runs alone, and so does a job run again because it ran out of
memory beside others (`ALONE`); while such a job waits, no new job starts, so it cannot starve.
Smaller jobs may pass a large one that waits for room, but only for PATIENCE_S: after that it
holds newcomers back like a job waiting to run alone, so a stream of small jobs cannot starve it.
Without a capacity (the CPU) nothing is limited.
"""

from __future__ import annotations

import itertools
import threading
import time
from contextlib import contextmanager
from typing import Iterator

UNKNOWN_SHARE = 0.2
HEADROOM = 1.25  # a reference measured once may take a little more another time
CANDIDATE_FACTOR = 1.5  # a candidate may keep more intermediates than the reference
# A timing holds at most four times the inputs (two input sets, the live copy refreshed in place,
# a rolled copy on its way in) and two outputs (one run's while the next makes its own); the
# reference's measured peak held at least two times each (inputs and their snapshot, outputs and a
# repeat run's): twice that peak covers the timing.
TIMING_FACTOR = 2.0
SLACK_BYTES = 256 << 20
ALONE = -1  # reserve the whole device
PATIENCE_S = 30.0  # how long newcomers may pass a job waiting for room


class DeviceMemory:
    def __init__(self, capacity_bytes: int | None, headroom_bytes: int = 0) -> None:
        self.capacity = capacity_bytes
        self.headroom = headroom_bytes  # left out of `capacity`: the device never runs this short
        self.reserved = 0
        self.alone_waiting = 0
        self._waiting_since: dict[int, float] = {}  # waiting jobs (by ticket): when they began to wait
        self._tickets = itertools.count()
        self._cond = threading.Condition()

    def estimate(self, reference_peak: int | None, candidate: bool, timing: bool = False) -> int:
        """Bytes to reserve for a job of a task whose reference peaked at `reference_peak`."""
        if self.capacity is None:
            return 0
        if not reference_peak:
            return int(self.capacity * UNKNOWN_SHARE)
        factor = (CANDIDATE_FACTOR if candidate else HEADROOM) * (TIMING_FACTOR if timing else 1.0)
        return int(reference_peak * factor) + SLACK_BYTES

    def for_footprint(self, footprint: int) -> int:
        """Bytes to reserve for a reference whose tensors were counted at `footprint` bytes
        (library workspaces and the allocator's rounding come on top)."""
        return int(footprint * HEADROOM) + SLACK_BYTES

    def _impatient_ahead(self, ticket: int) -> bool:
        """Whether a job that began to wait before `ticket` has waited longer than PATIENCE_S."""
        now = time.monotonic()
        return any(t < ticket and now - since > PATIENCE_S for t, since in self._waiting_since.items())

    @contextmanager
    def reserve(self, nbytes: int) -> Iterator[None]:
        """Hold `nbytes` of the device for the duration (at most the whole device; `ALONE`: all of it)."""
        capacity = self.capacity
        if capacity is None or (nbytes <= 0 and nbytes != ALONE):  # nothing to hold
            yield
            return
        alone = nbytes == ALONE or nbytes >= capacity
        nbytes = capacity if alone else nbytes
        with self._cond:
            if alone:
                self.alone_waiting += 1
                try:
                    self._cond.wait_for(lambda: self.reserved == 0)
                finally:
                    self.alone_waiting -= 1
            else:
                ticket = next(self._tickets)
                self._waiting_since[ticket] = time.monotonic()
                try:
                    # Woken when memory is given back, and at least every second: a job ahead
                    # becomes impatient with time, not with an event.
                    while self.alone_waiting or self._impatient_ahead(ticket) or self.reserved + nbytes > capacity:
                        self._cond.wait(1.0)
                finally:
                    del self._waiting_since[ticket]
                    self._cond.notify_all()  # the job behind may have been held back by this one
            self.reserved += nbytes
        try:
            yield
        finally:
            with self._cond:
                self.reserved -= nbytes
                self._cond.notify_all()
