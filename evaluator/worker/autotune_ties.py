"""One choice per kernel from Triton's autotuner, whichever process times it (runs in the job's
process, installed before the candidate is imported).

The autotuner times every configuration in the process that first calls the kernel and keeps
the fastest. Where two configurations time within noise of each other, identical copies of one
kernel keep different ones, and since the autotuner times each kernel alone (its cache flushed)
while the forward runs it among others, the two can differ by more in the forward than they did
when timed: an autotuned level-2 kernel's copies measured 2.72 or 2.95 ms on an H200 by which one
their process kept. The choice is made again from the same timings: the first configuration in
the kernel's own list that timed within `TIE` of the fastest is kept, so copies keep the same one.
"""

from __future__ import annotations

import math
from typing import Any

TIE = 0.02  # do_bench's medians of one kernel move by about 1% between quiet runs


def _median(timing: Any) -> float:
    value = timing[0] if isinstance(timing, (list, tuple)) and timing else timing
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.inf


def pick(timings: dict) -> Any | None:
    """The first configuration (in the order timed) whose median is within `TIE` of the fastest;
    None when nothing was timed to a finite figure."""
    medians = {config: _median(t) for config, t in timings.items()}
    best = min(medians.values(), default=math.inf)
    if not math.isfinite(best):
        return None
    return next(config for config, m in medians.items() if m <= best * (1 + TIE))


def install() -> bool:
    """Make every autotuner of this process keep `pick`'s choice; False without Triton."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:  # pragma: no cover - a Triton without autotuning
        return False
    if getattr(Autotuner.run, "_one_choice", False):
        return True
    original = Autotuner.run

    def run(self, *args, **kwargs):
        before = set(self.cache)
        out = original(self, *args, **kwargs)
        new = [key for key in self.cache if key not in before]
        timings = getattr(self, "configs_timings", None)
        if new and isinstance(timings, dict) and len(timings) > 1:
            chosen = pick(timings)
            if chosen is not None:
                # The call that timed them ran with the autotuner's own choice; later calls use this one.
                for key in new:
                    self.cache[key] = chosen
                self.best_config = chosen
        return out

    run._one_choice = True  # type: ignore[attr-defined]
    Autotuner.run = run
    return True
