"""A job's stall clock (kept by the warm parent, armed by the evaluator).

Once a candidate's first forward has returned, its kernels are compiled, and each later step of
its correctness run (a synchronize, the next trial) takes about its kernels' time. The evaluator
arms this clock then, and again at each report: a job that does not report within the clock's
seconds is stuck (a kernel that never ends, a flood of queued work) and is ended then, rather
than at its time limit, which every job waiting for the GPU would wait out with it.

The clock runs on while the job is paused for another's measurement, because work a job has
queued on the device runs on while its process is stopped: an endless kernel, stopped, still
takes the device from every measurement. A paused job cannot report, though, so one whose time
ran out while it was stopped is not ended then: once it runs again it has a grace of running
time to report (a fifth of its limit, at least `GRACE_FLOOR_S`), and only that grace counts
while it is paused again. An honest job, resumed, finishes its step in its kernels' time. The
warm parent holds the next pause back while a job runs its grace, so a stuck job is ended within
its grace instead of creeping through it in the moments between back-to-back measurements.
"""

from __future__ import annotations

import math

GRACE_FLOOR_S = 2.0


def grace_for(seconds: float) -> float:
    """Running time a job whose limit ran out while it was paused has left to report."""
    return min(seconds, max(GRACE_FLOOR_S, seconds / 5))


class StallClock:
    def __init__(self) -> None:
        self.seconds: float | None = None  # the limit armed, None while off
        self.note = ""  # what the limit was set from, for the verdict
        self.deadline = math.inf
        self.paused = False
        self._grace_left: float | None = None  # set once the limit ran out while paused

    def arm(self, seconds: float | None, note: str, now: float) -> None:
        """Start the clock over at `seconds` (None: turn it off)."""
        self.seconds, self.note, self._grace_left = seconds, note, None
        self.deadline = math.inf if seconds is None else now + seconds

    def stop(self, now: float) -> None:
        """The job is paused (or held waiting for another's measurement): the clock runs on, but
        what is left of a grace stands still."""
        if self.paused:
            return
        self.paused = True
        if self._grace_left is not None:
            self._grace_left = max(0.0, self.deadline - now)

    def go(self, now: float) -> None:
        """The job runs again; if its limit ran out while it was paused, its grace starts."""
        if not self.paused:
            return
        self.paused = False
        if self._grace_left is None and self.seconds is not None and now >= self.deadline:
            self._grace_left = grace_for(self.seconds)
        if self._grace_left is not None:
            self.deadline = now + self._grace_left

    def in_grace(self) -> bool:
        """Whether the job is running the grace it was given after its limit ran out while paused."""
        return not self.paused and self._grace_left is not None

    def expired(self, now: float) -> bool:
        return not self.paused and now > self.deadline

    def reason(self) -> str:
        return (f"after its kernels had compiled, it went {self.seconds:.0f} s without finishing a step of its run "
                f"(a forward or a synchronize), which is far longer than the task needs: {self.note}; "
                "it was ended early so that no other job waits for it")
