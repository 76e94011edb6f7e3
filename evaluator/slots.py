"""Worker slots of one evaluator: how many jobs run at once, with background work that yields.

Runs in the evaluator's process (the server's or the CLI's), shared by its threads. A slot is
one worker process at a time. A background job (the torch.compile baseline: seconds to minutes
of compiling that no result waits for) takes a free slot only while no other job waits for one,
and at most `background_max` background jobs hold slots at once, so a candidate or a
registration that arrives meanwhile finds a slot instead of queueing behind compilers. A
background job that has waited `patience_s` takes the next slot that frees, before anyone
else and whatever the share, so a queue that never empties does not keep its baseline from ever
being measured (at worst, slots go round as they would without priorities).
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Iterator

BACKGROUND_PATIENCE_S = 120.0


class Slots:
    """`total` slots; `hold(background=...)` is one job's claim on one of them."""

    def __init__(self, total: int, background_max: int | None = None, patience_s: float = BACKGROUND_PATIENCE_S):
        if total < 1:
            raise ValueError(f"an evaluator needs at least one worker slot, not {total}")
        self.total = total
        self.background_max = background_max if background_max is not None else max(1, total // 4)
        self.patience_s = patience_s
        self._cond = threading.Condition()
        self._busy = 0
        self._background = 0
        self._waiting = 0  # jobs other than background ones waiting for a slot
        self._overdue = 0  # background jobs past their patience: free slots are kept for them

    def busy(self) -> tuple[int, int]:
        """(slots held, of which by background jobs)."""
        with self._cond:
            return self._busy, self._background

    @contextmanager
    def hold(self, background: bool = False) -> Iterator[None]:
        """Hold one slot for the block; a background claim yields to waiting ones (see module)."""
        with self._cond:
            if background:
                self._wait_in_background()
                self._background += 1
            else:
                self._waiting += 1
                try:
                    self._cond.wait_for(lambda: self._busy + self._overdue < self.total)
                finally:
                    self._waiting -= 1
                    # A background job waits for the queue to empty: it may be its turn now.
                    self._cond.notify_all()
            self._busy += 1
        try:
            yield
        finally:
            with self._cond:
                self._busy -= 1
                if background:
                    self._background -= 1
                self._cond.notify_all()

    def _wait_in_background(self) -> None:
        deadline = time.monotonic() + self.patience_s
        overdue = False
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 and not overdue:
                    overdue = True  # from now on the next free slot is kept for it
                    self._overdue += 1
                if self._busy < self.total and (overdue or (self._waiting == 0
                                                            and self._background < self.background_max)):
                    return
                self._cond.wait(None if overdue else left)
        finally:
            if overdue:
                self._overdue -= 1
