"""The bench's figures, drawn with matplotlib (the `bench` extra) into small PNGs (bench or report process).

- best_speedup.png: the best correct speedup so far against steps, median over tasks with the 25-75% band,
  one line per variant;
- final_speedups.png: the distribution of each variant's final best speedup per task;
- verdicts.png: the share of steps by verdict, per variant.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .endpoint import EXTRA_HINT


class PlotsUnavailable(RuntimeError):
    """matplotlib is not installed."""


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, never a window
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotsUnavailable(f"matplotlib is missing, so no plots were drawn: {EXTRA_HINT}") from None
    return plt


def best_speedup(path: Path, curves: Mapping[str, Mapping[str, Sequence[float]]], baseline: str) -> Path:
    """`curves[variant]` holds 'median', 'q25' and 'q75' per step (1-based)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=100)
    for variant, c in curves.items():
        steps = list(range(1, len(c["median"]) + 1))
        (line,) = ax.plot(steps, c["median"], label=variant, linewidth=1.8)
        ax.fill_between(steps, c["q25"], c["q75"], color=line.get_color(), alpha=0.18, linewidth=0)
    ax.set_xlabel("step")
    ax.set_ylabel(f"best speedup vs {baseline} (0 = none yet)")
    ax.set_title("Best correct speedup so far (median, 25-75% of tasks)", fontsize=10)
    ax.grid(alpha=0.3)
    if curves:
        ax.legend(fontsize=8)
    return _save(fig, path, plt)


def final_speedups(path: Path, finals: Mapping[str, Sequence[float]], baseline: str) -> Path:
    """`finals[variant]`: each task's final best speedup (0 when the task has no correct timed kernel)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=100)
    names = list(finals)
    data = [list(finals[n]) or [0.0] for n in names]
    ax.boxplot(data, showfliers=False)
    ax.set_xticks(range(1, len(names) + 1), names, fontsize=8)
    for i, vals in enumerate(data, 1):
        ax.scatter([i + (j % 5 - 2) * 0.04 for j in range(len(vals))], vals, s=12, alpha=0.7)
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_ylabel(f"final best speedup vs {baseline}")
    ax.set_title("Final speedup per task", fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    return _save(fig, path, plt)


def verdicts(path: Path, shares: Mapping[str, Mapping[str, float]]) -> Path:
    """`shares[variant][status]`: share of that variant's steps with that verdict."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 0.6 + 0.5 * max(1, len(shares))), dpi=100)
    statuses: list[str] = []
    for s in shares.values():
        statuses += [k for k in s if k not in statuses]
    statuses.sort(key=lambda k: (k != "correct", k))
    names = list(shares)
    left = [0.0] * len(names)
    for status in statuses:
        widths = [shares[n].get(status, 0.0) for n in names]
        ax.barh(names, widths, left=left, label=status)
        left = [a + b for a, b in zip(left, widths)]
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of steps")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.set_title("Steps by verdict", fontsize=10)
    return _save(fig, path, plt)


def _save(fig: Any, path: Path, plt: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return path
