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
MIN_SAMPLES = 10  # fewer flushes or runs than this say nothing about a shared GPU
# A trimmed mean this far from the median means some runs inside the measurement were disturbed.
SPLIT_MAX = 0.02


def upper_median(values: list[float]) -> float:
    """The middle value of the sorted `values` (the upper one of two): always one that was measured."""
    return sorted(values)[len(values) // 2]


def quiet_flush(flush_ms: list[float]) -> float | None:
    """The median flush of a timing, as a quiet GPU's flush time (None with too few flushes)."""
    return upper_median(flush_ms) if len(flush_ms) >= MIN_SAMPLES else None


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
    if len(flush_ms) < MIN_SAMPLES:
        return False
    floor = min(flush_ms) if quiet_flush_ms is None else min(min(flush_ms), quiet_flush_ms)
    return upper_median(flush_ms) > CONTENTION_RATIO * floor


def mean_median_split(event_ms: list[float], trim_fraction: float = 0.05) -> float | None:
    """How far the trimmed mean of the runs sits from their median (mean / median - 1), where
    that is more than `SPLIT_MAX`; None otherwise. A few disturbed runs inside one measurement
    move the mean and not the median: identical kernels then disagree by their means only."""
    if len(event_ms) < MIN_SAMPLES:
        return None
    stats = summarize(event_ms, trim_fraction)
    if stats.median_ms <= 0:
        return None
    split = stats.mean_ms / stats.median_ms - 1.0
    return split if abs(split) > SPLIT_MAX else None


def uneven(event_ms: list[float]) -> bool:
    """Whether the runs of one kernel were too unlike each other to have shared a quiet GPU: their
    median is `UNEVEN_RATIO` times their fastest (with L2 flushed before each, runs of a kernel
    on a quiet GPU differ by a few percent; time slices of another context make most of them
    longer). Runs shorter than `UNEVEN_MIN_MS` are left alone: launch jitter alone spreads them."""
    if len(event_ms) < MIN_SAMPLES:
        return False
    median = upper_median(event_ms)
    return median >= UNEVEN_MIN_MS and median > UNEVEN_RATIO * min(event_ms)
