"""Progress of a bench: a bar per task and one overall, with `rich` when it is installed (bench process).

Without `rich`, or when asked for no bars, one line per step goes to stderr instead.
"""

from __future__ import annotations

import sys
from typing import Any

from .state import StepRecord


class Progress:
    """Bars (or lines) for the steps of every task of every variant."""

    def __init__(self, total: int, bars: bool = True):
        self._rich: Any = None
        self._bars: dict[tuple[str, str], Any] = {}
        self._done = 0
        self.total = total
        if bars:
            try:
                from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
                from rich.progress import Progress as RichProgress
            except ImportError:
                pass
            else:
                self._rich = RichProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                          TextColumn("{task.fields[last]}"), TimeElapsedColumn(),
                                          transient=False)
                self._overall = self._rich.add_task("all tasks", total=total, last="")

    def __enter__(self) -> Progress:
        if self._rich is not None:
            self._rich.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._rich is not None:
            self._rich.stop()

    def task(self, variant: str, task: str, done: int, total: int) -> None:
        """A task starts (or resumes) with `done` of `total` steps behind it."""
        self._done += done
        if self._rich is not None:
            self._bars[(variant, task)] = self._rich.add_task(f"{variant:<12} {task[:40]}", total=total,
                                                              completed=done, last="")
            self._rich.update(self._overall, completed=self._done)
        else:
            print(f"[{variant}] {task}: {done}/{total} steps done", file=sys.stderr, flush=True)

    def step(self, variant: str, task: str, rec: StepRecord) -> None:
        self._done += 1
        what = rec.status + (f" {rec.speedup:.2f}x" if rec.speedup is not None else "")
        if self._rich is not None:
            bar = self._bars.get((variant, task))
            if bar is not None:
                self._rich.update(bar, advance=1, last=what)
            self._rich.update(self._overall, completed=self._done, last=f"{variant}/{task}: {what}")
        else:
            print(f"[{variant}] {task} step {rec.step}: {what} ({rec.wall_s:.1f} s)", file=sys.stderr, flush=True)

    def note(self, text: str) -> None:
        if self._rich is not None:
            self._rich.console.print(text)
        else:
            print(text, file=sys.stderr, flush=True)
