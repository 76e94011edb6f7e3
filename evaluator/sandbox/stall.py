"""A job's stall clock (kept by the warm parent, armed by the evaluator).

Once a candidate's first forward has returned, its kernels are compiled, and each later step of
its correctness run (a synchronize, the next trial) takes about its kernels' time. The evaluator
arms this clock then, and again at each report: a job that does not report within the clock's
seconds is stuck (a kernel that never ends, a flood of queued work) and is ended then, rather
than at its time limit, which every job waiting for the GPU would wait out with it. Like the job's
deadline, the clock stands still while the job is paused for another's measurement, and while
it waits, compiled, for one to end.
"""

from __future__ import annotations

import math


class StallClock:
    def __init__(self) -> None:
        self.seconds: float | None = None  # the limit armed, None while off
        self.note = ""  # what the limit was set from, for the verdict
        self.deadline = math.inf
        self._left: float | None = None  # time left while stopped

    def arm(self, seconds: float | None, note: str, now: float) -> None:
        """Start the clock over at `seconds` (None: turn it off)."""
        self.seconds, self.note = seconds, note
        if seconds is None:
            self.deadline, self._left = math.inf, None
        elif self._left is not None:
            self._left = seconds
        else:
            self.deadline = now + seconds

    def stop(self, now: float) -> None:
        """Stand still (the job is paused, or waits for another's measurement)."""
        if self._left is None and self.deadline != math.inf:
            self._left = self.deadline - now
            self.deadline = math.inf

    def go(self, now: float) -> None:
        if self._left is not None:
            self.deadline = now + self._left
            self._left = None

    def expired(self, now: float) -> bool:
        return now > self.deadline

    def reason(self) -> str:
        return (f"after its kernels had compiled, it went {self.seconds:.0f} s without finishing a step of its run "
                f"(a forward or a synchronize), which is far longer than the task needs: {self.note}; "
                "it was ended early so that no other job waits for it")
