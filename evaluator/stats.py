"""Timing statistics, on the trusted side: trimmed summaries of a worker's samples, and whether
another context shared the GPU while they were taken.

Pure functions over numbers a worker reported (see `worker.timing` for how they are measured);
they run in the trusted evaluator process (and in the profile job, which summarizes its own runs).
"""

from __future__ import annotations

import math
import statistics

from .results import TimingStats

# A median flush this many times the fastest one means another context shared the GPU.
CONTENTION_RATIO = 1.5
# A median run this many times the fastest of the same kernel means the runs did not all have the GPU.
UNEVEN_RATIO = 1.25
UNEVEN_MIN_MS = 0.05


def summarize(samples_ms: list[float], trim_fraction: float = 0.05, method: str = "cuda_events") -> TimingStats:
    """Trim `trim_fraction` from each end of the sorted samples and describe the rest."""
    if not samples_ms:
        raise ValueError("no timing samples")
    ordered = sorted(samples_ms)
    k = int(math.floor(len(ordered) * trim_fraction))
    kept = ordered[k:len(ordered) - k] if len(ordered) - 2 * k >= 1 else ordered
    return TimingStats(
        mean_ms=statistics.fmean(kept),
        median_ms=statistics.median(kept),
        std_ms=statistics.pstdev(kept) if len(kept) > 1 else 0.0,
        min_ms=ordered[0],
        runs=len(kept),
        method=method,
    )


def contended(flush_ms: list[float], quiet_flush_ms: float | None = None) -> bool:
    """Whether another process's work shared the GPU during the runs.

    The L2 flush before each run is the same memset every time, so on a quiet GPU its times
    barely move; work from another context time-slices into it and inflates most of them. That
    shows against the run's own fastest flush, and, when another context was busy all through
    the runs (every flush inflated), against `quiet_flush_ms`: a flush's time on this GPU when
    nothing else ran.
    """
    if len(flush_ms) < 10:
        return False
    ordered = sorted(flush_ms)
    floor = ordered[0] if quiet_flush_ms is None else min(ordered[0], quiet_flush_ms)
    return ordered[len(ordered) // 2] > CONTENTION_RATIO * floor


def uneven(event_ms: list[float]) -> bool:
    """Whether the runs of one kernel were too unlike each other to have shared a quiet GPU: their
    median is `UNEVEN_RATIO` times their fastest (with L2 flushed before each, runs of a kernel
    on a quiet GPU differ by a few percent; time slices of another context make most of them
    longer). Runs shorter than `UNEVEN_MIN_MS` are left alone: launch jitter alone spreads them."""
    if len(event_ms) < 10:
        return False
    ordered = sorted(event_ms)
    median = ordered[len(ordered) // 2]
    return median >= UNEVEN_MIN_MS and median > UNEVEN_RATIO * ordered[0]
