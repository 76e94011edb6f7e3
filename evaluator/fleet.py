"""One evaluator per visible GPU, behind the Evaluator's own API. Runs in the server process.

Each member has its own warm parent whose workers see only that member's GPU, its own
reference timings (a speedup is always measured against the same GPU) and its own
timing lock (per physical GPU, shared with other server processes). A task's reference is
built on one member and its candidates go there, unless another member's queue is shorter
by more than a reference costs (`place`); correctness of several candidates overlaps on the
CPU cores while each GPU times one candidate at a time.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Collection, Protocol, Sequence

from .results import EvalProtocol, EvalResult, Status, TaskValidation
from .task import Task

if TYPE_CHECKING:
    from .profile.report import ProfileReport


class Member(Protocol):
    @property
    def device(self) -> str: ...

    def evaluate(self, task: Task, source: str, protocol: EvalProtocol | None = None) -> EvalResult: ...

    def validate_task(self, task: Task) -> TaskValidation: ...

    def profile(self, task: Task, source: str | None, protocol: EvalProtocol | None = None,
                device: str | None = None) -> ProfileReport: ...

    def close(self) -> None: ...


# A reference costs about this many candidates' worth of a member's time (its outputs, its
# baseline timing under the lock): a second member builds one only when waiting costs more.
REFERENCE_COST = 3


@dataclass(frozen=True)
class Placement:
    """Where one candidate goes, and whether that member must first build the task's reference."""

    member: int
    builds_reference: bool


def place(queues: Sequence[int], homes: Collection[int], tasks_held: Sequence[int] | None = None,
          reference_cost: int = REFERENCE_COST) -> Placement:
    """The member for a candidate, from each member's queue (jobs in flight plus queued) and the
    members that already hold the task's reference (`homes`).

    A task without a reference goes to the shortest queue, ties to the member holding the fewest
    tasks (`tasks_held`), then the lowest index: references spread over the members. A task with a
    reference stays on its shortest home queue unless some other member's queue is shorter by
    more than `reference_cost` jobs; then that member builds its own reference and the task
    lives on both.
    """
    if not queues:
        raise ValueError("a fleet needs at least one member")
    held = list(tasks_held) if tasks_held is not None else [0] * len(queues)
    order = sorted(range(len(queues)), key=lambda i: (queues[i], held[i], i))
    best = order[0]
    at_home = [i for i in order if i in homes]
    if not at_home:
        return Placement(best, True)
    home = at_home[0]
    if queues[home] - queues[best] > reference_cost:
        return Placement(best, True)
    return Placement(home, False)


class Dispatch:
    """The fleet's live queue lengths and reference homes, decided by `place`. Thread-safe."""

    def __init__(self, n: int, reference_cost: int = REFERENCE_COST) -> None:
        if n < 1:
            raise ValueError("a fleet needs at least one member")
        self.queues = [0] * n
        self.served = [0] * n
        self.homes: dict[tuple[str, str], set[int]] = {}  # (task id, protocol key) -> members
        self.reference_cost = reference_cost
        self._lock = threading.Lock()

    def tasks_held(self) -> list[int]:
        held = [0] * len(self.queues)
        for members in self.homes.values():
            for i in members:
                held[i] += 1
        return held

    def acquire(self, task_key: tuple[str, str]) -> Placement:
        """Choose a member for one job of the task and count it in that member's queue."""
        with self._lock:
            homes = self.homes.setdefault(task_key, set())
            chosen = place(self.queues, homes, self.tasks_held(), self.reference_cost)
            homes.add(chosen.member)  # from now on, later candidates of the task see it there
            self.queues[chosen.member] += 1
            self.served[chosen.member] += 1
            return chosen

    def release(self, index: int) -> None:
        with self._lock:
            self.queues[index] -= 1

    def forget(self, task_key: tuple[str, str], index: int) -> None:
        """The member could not build the task's reference: it is no home of it."""
        with self._lock:
            self.homes.get(task_key, set()).discard(index)


def _task_key(task: Task, protocol: EvalProtocol | None) -> tuple[str, str]:
    return task.task_id, (protocol or task.protocol).key()


def _reference_failed(result: EvalResult) -> bool:
    return result.status is Status.infra_error and result.error is not None \
        and result.error.error_class == "ReferenceError"


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
            from .evaluator import Evaluator, default_parallel, usable_cores

            devices = list(devices) if devices else (visible_gpus() or ["cpu"])
            gpus = [d for d in devices if d.startswith("cuda")]
            if gpus and len(gpus) != len(devices):
                raise ValueError("a fleet is all GPUs or one CPU pool")
            if not gpus:
                devices = devices[:1]
            ids = physical_ids(devices, os.environ.get("CUDA_VISIBLE_DEVICES"))
            per_member = max_parallel or max(2, default_parallel(bool(gpus), len(devices)))
            # Each member's workers share its part of the cores, so members do not oversubscribe them.
            cores = max(1, usable_cores() // len(devices))
            if gpus and evaluator_kwargs.get("judge_host_budget_bytes", -1) < 0:  # the judges share the host
                from .judge.process import default_host_budget

                evaluator_kwargs["judge_host_budget_bytes"] = default_host_budget(len(gpus))
            self.members = [Evaluator(device=dev, work_dir=work_dir, max_parallel=per_member,
                                      visible_devices=ident, cores=cores, **evaluator_kwargs)
                            for dev, ident in zip(devices, ids)]
        self.dispatch = Dispatch(len(self.members))
        self.devices = [m.device for m in self.members]
        self.device = self.devices[0]

    def start(self) -> float:
        """Start every member's processes at once (not one after another): all are launched,
        then waited for. Returns the seconds taken."""
        t0 = time.monotonic()
        for m in self.members:
            if hasattr(m, "launch"):
                m.launch()
        for m in self.members:
            if hasattr(m, "start"):
                m.start()
        return time.monotonic() - t0

    # --- the Evaluator API ---------------------------------------------------------------
    def evaluate(self, task: Task, source: str, protocol: EvalProtocol | None = None) -> EvalResult:
        for m in self.members:  # an identical resubmission costs nothing, wherever it ran
            cached = getattr(m, "cached", None)
            hit = cached(task, source, protocol) if cached else None
            if hit is not None:
                return hit
        key = _task_key(task, protocol)
        chosen = self.dispatch.acquire(key)
        try:
            result = self.members[chosen.member].evaluate(task, source, protocol)
        finally:
            self.dispatch.release(chosen.member)
        if chosen.builds_reference and _reference_failed(result):
            self.dispatch.forget(key, chosen.member)
        return result

    def validate_task(self, task: Task) -> TaskValidation:
        """Validates on one member, which becomes the task's home: its candidates go there."""
        key = _task_key(task, None)
        chosen = self.dispatch.acquire(key)
        try:
            validation = self.members[chosen.member].validate_task(task)
        finally:
            self.dispatch.release(chosen.member)
        if not validation.ok:
            self.dispatch.forget(key, chosen.member)
        return validation

    def profile(self, task: Task, source: str | None, protocol: EvalProtocol | None = None,
                device: str | None = None) -> ProfileReport:
        """Profiles on the member whose GPU timed the candidate (`device`), so the profile and the
        timing describe the same card; any other device, or none, profiles on the first member."""
        member = next((m for m in self.members if m.device == device), self.members[0])
        return member.profile(task, source, protocol, device)

    def validate_all(self, task: Task) -> list[TaskValidation]:
        """Validates on every member at once (each GPU measures its own reference timing)."""
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
