"""How much memory a task's reference job takes, counted on the meta device (runs in a worker).

A reference job that ran out of device memory beside other jobs had reserved what a task not
yet measured reserves. Running it again with the device to itself holds every other job back
until the device is empty; running it again with what it needs reserved lets it run beside
the others. What it needs is counted here without touching the device: the task's model is
built and its inputs made on the meta device (shapes and dtypes, no data), and the reference
job's steps are replayed there (inputs, their snapshot, the forward, a repeat forward on the
snapshot) while a dispatch mode counts the bytes of tensors alive at once. Library workspaces
and the allocator's rounding are not counted; the evaluator adds headroom.

The count is the task's own code's to make, in the sandbox: a task may misstate it, which
changes only how its own job is scheduled.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from ...common.vocab import Kind, Phase
from ..results import EvalProtocol
from . import harness
from .harness import Reporter

COUNT_BUDGET_S = 5.0  # a forward this slow on meta (thousands of small ops) is not worth counting


class TooSlow(Exception):
    pass


class LiveBytes(TorchDispatchMode):
    """Counts the bytes of the tensors that operations make and that are still alive, and their peak."""

    def __init__(self, deadline: float) -> None:
        super().__init__()
        self.deadline = deadline
        self.live = 0
        self.peak = 0

    def _freed(self, nbytes: int) -> None:
        self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if time.monotonic() > self.deadline:
            raise TooSlow
        out = func(*args, **(kwargs or {}))
        # What an operation returns as an alias of an argument (a view, an in-place or out=
        # result, as its schema says) holds no new memory.
        if any(r.alias_info is not None for r in func._schema.returns):
            return out
        given = {id(t) for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for t in pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and id(t) not in given:
                nbytes = t.untyped_storage().nbytes()
                self.live += nbytes
                self.peak = max(self.peak, self.live)
                weakref.finalize(t, self._freed, nbytes)
        return out


@dataclass(frozen=True)
class Count:
    """What a task's reference job takes: its tensors' peak (`need_bytes`), and the bytes of one
    trial's outputs and of its inputs (what the judge keeps of it)."""

    need_bytes: int
    output_bytes: int
    input_bytes: int


def count_reference(task, protocol: EvalProtocol, budget_s: float = COUNT_BUDGET_S) -> Count | None:
    """The reference job's count for `task` (a loaded task module), or None when its code cannot
    run on the meta device or takes longer than `budget_s` there."""
    meta = torch.device("meta")
    try:
        with meta, torch.no_grad():
            model = task.Model(*task.get_init_inputs())
        # Parameters are counted here: wrapping a new tensor as a parameter ends the tensor the
        # dispatch mode saw, so it would count them as freed.
        held = [*model.parameters(), *model.buffers()] if isinstance(model, torch.nn.Module) else []
        weights = sum(t.numel() * t.element_size() for t in held)
        mode = LiveBytes(time.monotonic() + budget_s)
        with mode, meta, torch.no_grad():
            torch.manual_seed(harness.trial_seed(protocol, 0))
            inputs = list(task.get_inputs())
            before = harness.snapshot_inputs(inputs)
            outputs = model(*inputs)
            again = model(*before)
            sizes = [_nbytes(o) for o in harness.as_outputs(outputs)], [_nbytes(x) for x in inputs]
            del inputs, before, outputs, again
        return Count(weights + mode.peak, sum(sizes[0]), sum(sizes[1]))
    except Exception:  # noqa: BLE001 - not countable here: the evaluator falls back to the whole device
        return None


def reference_footprint(task, protocol: EvalProtocol, budget_s: float = COUNT_BUDGET_S) -> int | None:
    """Peak bytes of the reference job's tensors for `task`, or None (see `count_reference`)."""
    count = count_reference(task, protocol, budget_s)
    return count.need_bytes if count is not None else None


def _nbytes(t) -> int:
    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


def run_footprint(job: dict, rep: Reporter) -> None:
    """Report the reference job's count (`need_bytes`, `output_bytes`, `input_bytes`), if it can be counted."""
    protocol = EvalProtocol.model_validate(job["protocol"])
    with rep.lap(Phase.load):
        task = harness.load_task(job["task_source"])
    count = count_reference(task, protocol)
    if count is not None:
        rep.send({"kind": Kind.footprint, "need_bytes": count.need_bytes, "output_bytes": count.output_bytes,
                  "input_bytes": count.input_bytes})
    rep.send({"kind": Kind.done})
