"""The field's metrics over a bench's step records: pure functions over plain data (any process).

Definitions (per variant, over its tasks; `baseline` is 'eager' or 'compile'):

- a task's best kernel: its fastest correct kernel (the first correct one when none was timed), with the step
  it was found at;
- accuracy: share of tasks with at least one correct kernel;
- fast_p: share of tasks whose best correct kernel is more than p times faster than the baseline (KernelBench's
  fast_p; a task without a correct timed kernel is not fast);
- geometric mean speedup: over the tasks with a correct timed kernel (how many is reported beside it);
- mean speedup clipped at 10: over all tasks, each task's best speedup clipped to [0, 10], a task without a
  correct timed kernel counting 0.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

from pydantic import BaseModel

from .state import StepRecord

FAST_P = (1.0, 1.2, 1.5, 2.0)
CLIP = 10.0


class TaskBest(BaseModel):
    """A task's outcome in one variant."""

    task: str
    steps: int
    correct: bool
    node_id: str | None = None
    speedup: float | None = None
    speedup_compile: float | None = None
    found_at: int | None = None  # the step (1-based) its best kernel came at


class Aggregate(BaseModel):
    """The field's summary numbers of one variant against one baseline."""

    tasks: int
    accuracy: float
    fast_p: dict[str, float]
    geomean_speedup: float | None
    geomean_tasks: int
    mean_speedup_clip10: float


def _speed(rec: StepRecord, baseline: str) -> float | None:
    return rec.speedup if baseline == "eager" else rec.speedup_compile


def task_best(task: str, steps: Sequence[StepRecord], baseline: str = "eager") -> TaskBest:
    """The best kernel of one task: fastest correct (against `baseline`), else the first correct."""
    correct = [s for s in sorted(steps, key=lambda s: s.step) if s.status == "correct"]
    n = len({s.step for s in steps})
    if not correct:
        return TaskBest(task=task, steps=n, correct=False)
    timed = [s for s in correct if _speed(s, baseline) is not None]
    best = max(timed, key=lambda s: (_speed(s, baseline), -s.step)) if timed else correct[0]
    return TaskBest(task=task, steps=n, correct=True, node_id=best.node_id, speedup=best.speedup,
                    speedup_compile=best.speedup_compile, found_at=best.step)


def aggregate(bests: Sequence[TaskBest], baseline: str = "eager") -> Aggregate:
    """accuracy, fast_p, geometric mean and clipped mean over tasks (see the module's definitions)."""
    n = len(bests)
    speeds = [(b.speedup if baseline == "eager" else b.speedup_compile) if b.correct else None for b in bests]
    timed = [s for s in speeds if s is not None and s > 0]
    geo = math.exp(sum(math.log(s) for s in timed) / len(timed)) if timed else None
    return Aggregate(
        tasks=n,
        accuracy=sum(b.correct for b in bests) / n if n else 0.0,
        fast_p={f"{p:g}": (sum(1 for s in speeds if s is not None and s > p) / n if n else 0.0) for p in FAST_P},
        geomean_speedup=geo, geomean_tasks=len(timed),
        mean_speedup_clip10=sum(min(max(s or 0.0, 0.0), CLIP) for s in speeds) / n if n else 0.0)


def best_so_far(steps: Sequence[StepRecord], budget: int, baseline: str = "eager") -> list[float]:
    """A task's best correct speedup after each step 1..budget (0 before its first correct timed kernel)."""
    by_step: dict[int, float] = {}
    for s in steps:
        v = _speed(s, baseline) if s.status == "correct" else None
        if v is not None:
            by_step[s.step] = max(by_step.get(s.step, 0.0), v)
    out, best = [], 0.0
    for k in range(1, budget + 1):
        best = max(best, by_step.get(k, 0.0))
        out.append(best)
    return out


def quantiles(values: Sequence[float], qs: Iterable[float] = (0.25, 0.5, 0.75)) -> list[float]:
    """Linear-interpolated quantiles of `values` (as numpy's default)."""
    v = sorted(values)
    if not v:
        return [math.nan for _ in qs]
    out = []
    for q in qs:
        pos = q * (len(v) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(v) - 1)
        out.append(v[lo] + (v[hi] - v[lo]) * (pos - lo))
    return out


def verdict_shares(steps: Iterable[StepRecord]) -> dict[str, float]:
    """Share of steps by verdict (status), largest first."""
    counts = Counter(s.status for s in steps)
    total = sum(counts.values())
    return {k: v / total for k, v in counts.most_common()} if total else {}
