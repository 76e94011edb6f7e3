"""What a bench run has done so far, on disk, so a killed run picks up where its tasks stand.

Runs in the bench process (and in `adaexplore report`). Layout of a run folder:

    RUN_DIR/bench.json                  the latest invocation's settings
    RUN_DIR/<variant>/server/           the data directory of that variant's server (its trees and memory)
    RUN_DIR/<variant>/tasks.jsonl       one line per registered task: name, task_id, baseline
    RUN_DIR/<variant>/steps.jsonl       one line per step: task, step number, verdict, speedups, tokens, time
    RUN_DIR/report.md, report.json, plots/*.png

The step log is append-only; a line cut short by a kill is skipped when read. The trees themselves live in the
server's database, so a resumed run continues the same trees.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import orjson
from pydantic import BaseModel, ValidationError

from .settings import variant_name


class StepRecord(BaseModel):
    """One step of one task in one variant: what the model answered and what the server said of it."""

    task: str
    step: int
    status: str  # an evaluation status, or 'no_code' (the answer had none) / 'duplicate' / 'tool_error'
    node_id: str | None = None
    parent_id: str | None = None
    action: str | None = None  # 'large' or 'small' (as assigned or as chosen by the method)
    speedup: float | None = None  # against eager PyTorch
    speedup_compile: float | None = None  # against torch.compile, when the server measured it
    runtime_ms: float | None = None
    tokens: int = 0
    wall_s: float = 0.0
    agent: int = 0
    feedback: str | None = None  # a tool error's message (evaluation feedback stays in the server's tree)


class TaskRecord(BaseModel):
    """A task as registered in a variant's server."""

    task: str
    task_id: str
    root_node_id: str
    baseline_ms: float | None = None
    device: str = ""
    flags: list[str] = []


def _read_lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_bytes().splitlines():
        try:
            out.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            continue  # a line cut short by a kill
    return out


def read_steps(path: Path) -> list[StepRecord]:
    """The step records of a log (steps.jsonl, adapt.jsonl); none when it does not exist."""
    out = []
    for d in _read_lines(path):
        try:
            out.append(StepRecord.model_validate(d))
        except ValidationError:
            continue
    return out


class VariantState:
    """The step log and task list of one variant, safe to append to from concurrent agents."""

    def __init__(self, run_dir: Path, variant: str):
        self.dir = run_dir / variant
        self.dir.mkdir(parents=True, exist_ok=True)
        self.variant = variant
        self._lock = threading.Lock()
        self.steps = read_steps(self.dir / "steps.jsonl")
        self.tasks: dict[str, TaskRecord] = {}
        for d in _read_lines(self.dir / "tasks.jsonl"):
            try:
                t = TaskRecord.model_validate(d)
            except ValidationError:
                continue
            self.tasks[t.task] = t

    @property
    def server_dir(self) -> Path:
        return self.dir / "server"

    def steps_of(self, task: str) -> list[StepRecord]:
        return sorted((s for s in self.steps if s.task == task), key=lambda s: s.step)

    def done(self, task: str) -> int:
        """Steps recorded for `task` (the next step's number is one more)."""
        return len({s.step for s in self.steps if s.task == task})

    def tokens(self) -> int:
        return sum(s.tokens for s in self.steps)

    def add_task(self, rec: TaskRecord) -> None:
        with self._lock:
            if self.tasks.get(rec.task) == rec:
                return
            self.tasks[rec.task] = rec
            append_line(self.dir / "tasks.jsonl", rec)

    def add_step(self, rec: StepRecord) -> None:
        with self._lock:
            self.steps.append(rec)
            append_line(self.dir / "steps.jsonl", rec)


def append_line(path: Path, rec: BaseModel) -> None:
    """One JSON line, written and flushed to the file system in one call (a kill loses at most this line)."""
    line = orjson.dumps(rec.model_dump(mode="json")) + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def variants_in(run_dir: Path) -> list[str]:
    """The variants a run folder holds (those with a step log or a task list), in a stable order."""
    order = {"tree": 0, "chain": 1, "sample": 2}
    found = [p.name for p in run_dir.iterdir() if p.is_dir() and
             ((p / "steps.jsonl").exists() or (p / "tasks.jsonl").exists())] if run_dir.is_dir() else []
    return sorted(found, key=lambda v: (order.get(v.split("-")[0], 9), v))


__all__ = ["StepRecord", "TaskRecord", "VariantState", "append_line", "read_steps", "variant_name", "variants_in"]
