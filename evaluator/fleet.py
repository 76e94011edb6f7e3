"""One evaluator per visible GPU, behind the Evaluator's own API.

Each member has its own warm parent whose workers see only that member's GPU, its own
reference timings (a speedup is always measured against the same GPU) and its own
timing lock (per physical GPU, shared with other server processes). A candidate goes to
the member with the fewest candidates in flight; correctness of several candidates
overlaps on the CPU cores while each GPU times one candidate at a time.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol, Sequence

from .results import EvalProtocol, EvalResult, TaskValidation
from .task import Task


class Member(Protocol):
    device: str

    def evaluate(self, task: Task, source: str, protocol: EvalProtocol | None = None) -> EvalResult: ...

    def validate_task(self, task: Task) -> TaskValidation: ...

    def close(self) -> None: ...


class LeastLoaded:
    """Picks the member with the fewest jobs in flight; ties go round-robin, so all are used."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError("a fleet needs at least one member")
        self.load = [0] * n
        self.served = [0] * n
        self._next = 0
        self._lock = threading.Lock()

    def acquire(self) -> int:
        with self._lock:
            n = len(self.load)
            low = min(self.load)
            order = [(self._next + k) % n for k in range(n)]
            index = next(i for i in order if self.load[i] == low)
            self.load[index] += 1
            self.served[index] += 1
            self._next = (index + 1) % n
            return index

    def release(self, index: int) -> None:
        with self._lock:
            self.load[index] -= 1


def visible_gpus() -> list[str]:
    """Logical device names of the GPUs this process may use (cuda:0 ... cuda:N-1)."""
    import torch

    if not torch.cuda.is_available():
        return []
    return [f"cuda:{i}" for i in range(torch.cuda.device_count())]


def physical_ids(devices: Sequence[str], env_visible: str | None) -> list[str | None]:
    """For each logical `cuda:i`, the id to put in a worker's CUDA_VISIBLE_DEVICES."""
    entries = [v.strip() for v in (env_visible or "").split(",") if v.strip()]
    out: list[str | None] = []
    for dev in devices:
        if not dev.startswith("cuda"):
            out.append(None)
            continue
        index = int(dev.split(":")[1]) if ":" in dev else 0
        if env_visible is not None and env_visible.strip():
            if index >= len(entries):
                raise ValueError(f"{dev} is not among CUDA_VISIBLE_DEVICES={env_visible!r}")
            out.append(entries[index])
        else:
            out.append(str(index))
    return out


class EvaluatorFleet:
    """The Evaluator API (`evaluate`, `validate_task`, `close`, `device`) over one pool per GPU."""

    def __init__(self, devices: Sequence[str] | None = None, work_dir: str | Path | None = None, *,
                 members: Sequence[Member] | None = None, max_parallel: int | None = None, **evaluator_kwargs) -> None:
        if members is not None:
            self.members = list(members)
        else:
            from .service import Evaluator, default_parallel

            devices = list(devices) if devices else (visible_gpus() or ["cpu"])
            gpus = [d for d in devices if d.startswith("cuda")]
            if gpus and len(gpus) != len(devices):
                raise ValueError("a fleet is all GPUs or one CPU pool")
            if not gpus:
                devices = devices[:1]
            ids = physical_ids(devices, os.environ.get("CUDA_VISIBLE_DEVICES"))
            per_member = max_parallel or max(2, default_parallel(bool(gpus), len(devices)))
            self.members = [Evaluator(device=dev, work_dir=work_dir, max_parallel=per_member,
                                      visible_devices=ident, **evaluator_kwargs)
                            for dev, ident in zip(devices, ids)]
        self.dispatch = LeastLoaded(len(self.members))
        self.devices = [m.device for m in self.members]
        self.device = self.devices[0]

    # --- the Evaluator API ---------------------------------------------------------------
    def evaluate(self, task: Task, source: str, protocol: EvalProtocol | None = None) -> EvalResult:
        for m in self.members:  # an identical resubmission costs nothing, wherever it ran
            cached = getattr(m, "cached", None)
            hit = cached(task, source, protocol) if cached else None
            if hit is not None:
                return hit
        index = self.dispatch.acquire()
        try:
            return self.members[index].evaluate(task, source, protocol)
        finally:
            self.dispatch.release(index)

    def validate_task(self, task: Task) -> TaskValidation:
        """Validates on every member at once (each GPU gets its own reference timing)."""
        if len(self.members) == 1:
            return self.members[0].validate_task(task)
        with ThreadPoolExecutor(len(self.members)) as ex:
            results = list(ex.map(lambda m: m.validate_task(task), self.members))
        return results[0]

    def validate_all(self, task: Task) -> list[TaskValidation]:
        with ThreadPoolExecutor(len(self.members)) as ex:
            return list(ex.map(lambda m: m.validate_task(task), self.members))

    @property
    def is_gpu(self) -> bool:
        return self.device.startswith("cuda")

    def close(self) -> None:
        for m in self.members:
            m.close()

    def __enter__(self) -> "EvaluatorFleet":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
