"""One device's evaluator: its workers, its judge, its timings. Runs in the trusted process.

The server enters through the fleet (`fleet.EvaluatorFleet`, one `Evaluator` per GPU behind this
same API); the `adaexplore eval` command uses one `Evaluator` directly. Both reach it through the
package's face (`adaexplore.evaluator`).

static checks -> reference (cached) -> candidate correctness in a forked worker -> verdict in
this trusted process -> on a GPU, timing of reference and candidate under an exclusive lock.

`Evaluator` is the face of three parts, each in its own module:

* `runner.JobRunner`: the worker pool, the judge client, slots, device memory and the GPU lock;
  it runs jobs, runs again those crowded out, and times jobs under the exclusive GPU;
* `reference_keeper.ReferenceKeeper`: each task's reference (outputs in the judge, facts cached
  here), the judge's room for it, and its baselines;
* `pipeline.CandidatePipeline`: one candidate from its source to its result.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

import torch

from .baselines import BASELINES, BaselineKey
from .device_memory import DeviceMemory
from .judge.client import JudgeClient
from .pipeline import STALL_FLOOR_S, CandidatePipeline
from .reference import Reference
from .reference_keeper import ReferenceKeeper
from .results import EvalProtocol, EvalResult, TaskValidation
from .runner import JobRunner
from .sandbox import confine
from .sandbox.gpu_lock import GpuLock
from .sandbox.pool import WorkerPool
from .task import Task

if TYPE_CHECKING:
    from .profile.report import ProfileReport

T = TypeVar("T")


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity: a container's or taskset's share)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def default_parallel(is_gpu: bool, members: int = 1) -> int:
    """Worker processes at once per pool: compilation is CPU work, so a GPU pool uses up to 12
    cores (on the 16 of an H200 machine, 12 gave 1.1-1.2x the candidates per hour of 8, where more
    made the CUDA contexts' start-up slower for all); interpreter runs are heavier, up to 4."""
    cores = max(1, usable_cores() // max(1, members))
    return max(1, min(12 if is_gpu else 4, cores))


def default_device() -> str:
    """The first GPU if there is one, else the CPU."""
    return "cuda:0" if torch.cuda.is_available() else "cpu"


class _PartAttribute(Generic[T]):
    """An attribute of one of the evaluator's parts, read through the evaluator: `device =
    _PartAttribute[str]("runner")` reads `evaluator.runner.device`. Setting it on the evaluator
    is refused: the part would never see the new value."""

    def __init__(self, part: str) -> None:
        self.part = part
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, evaluator: object, owner: type | None = None) -> T:
        if evaluator is None:  # read on the class (help, autospec): the descriptor itself
            return self  # type: ignore[return-value]
        return getattr(getattr(evaluator, self.part), self.name)

    def __set__(self, evaluator: object, value: object) -> None:
        raise AttributeError(f"{self.name} belongs to the evaluator's {self.part}: set it there")


class Evaluator:
    """Evaluates candidates against tasks. Thread-safe; `evaluate` blocks and never raises for a kernel."""

    def __init__(self, device: str | None = None, work_dir: str | Path | None = None,
                 max_parallel: int | None = None, lock_dir: str | Path | None = None,
                 memory_limit_bytes: int | None = None, baselines: tuple[str, ...] | None = None,
                 visible_devices: str | None = None, cpu_timing: bool = False,
                 quiet_timing: bool = True, trace: bool = False, hidden_paths: list[str | Path] | None = None,
                 sandbox_tmp_bytes: int = 1 << 30, max_processes: int = 256,
                 judge_budget_bytes: int = 0, cores: int | None = None, wait_for_compile: bool = False,
                 one_process: bool = True, judge_host_budget_bytes: int = -1, output_ring: bool = True,
                 stall_floor_s: float | None = None) -> None:
        device = device or default_device()
        is_gpu = device.startswith("cuda")
        chosen = tuple(baselines) if baselines else (("eager", "compile") if is_gpu else ("eager",))
        unknown = [b for b in chosen if b not in BASELINES]
        if unknown or "eager" not in chosen:
            raise ValueError(f"baselines must include 'eager' and come from {BASELINES}; got {chosen}")
        self.runner = JobRunner(
            device, work_dir=work_dir, max_parallel=max_parallel or default_parallel(is_gpu), lock_dir=lock_dir,
            memory_limit_bytes=memory_limit_bytes, visible_devices=visible_devices, cpu_timing=cpu_timing,
            quiet_timing=quiet_timing, trace=trace, hidden_paths=hidden_paths, sandbox_tmp_bytes=sandbox_tmp_bytes,
            max_processes=max_processes, judge_budget_bytes=judge_budget_bytes, cores=cores or usable_cores(),
            wait_for_compile=wait_for_compile, judge_host_budget_bytes=judge_host_budget_bytes,
            output_ring=output_ring)
        self.references = ReferenceKeeper(self.runner, chosen)
        floor_s = stall_floor_s if stall_floor_s is not None else STALL_FLOOR_S["gpu" if is_gpu else "cpu"]
        self.pipeline = CandidatePipeline(self.runner, self.references, one_process, floor_s)

    def launch(self) -> None:
        """Start the warm parent and the judge without waiting for them (see `start`)."""
        self.runner.launch()

    def start(self) -> None:
        """Start the warm parent and the judge now, side by side, rather than on first use."""
        self.runner.start()

    def close(self) -> None:
        """Stop the warm parent (and its workers) and the judge."""
        self.runner.close()

    def sandbox_info(self) -> dict:
        """How this evaluator's workers are confined: {"level", "detail", "process_limit"}."""
        return self.pool.sandbox_info()

    def sandbox_level(self) -> str:
        """The level of confinement its workers run at (`confine.LEVEL_FULL` or a weaker one)."""
        return str(self.sandbox_info().get("level", confine.LEVEL_WEAK))

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- what the parts hold, read through the evaluator ---------------------------
    device = _PartAttribute[str]("runner")
    is_gpu = _PartAttribute[bool]("runner")
    timed = _PartAttribute[bool]("runner")  # correct candidates are timed: on a GPU, or with `cpu_timing`
    work_dir = _PartAttribute[Path]("runner")
    pool = _PartAttribute[WorkerPool]("runner")
    judge = _PartAttribute[JudgeClient]("runner")
    gpu = _PartAttribute[GpuLock]("runner")
    trace = _PartAttribute["list[dict] | None"]("runner")  # with `trace`, where each worker job spent its time
    max_parallel = _PartAttribute[int]("runner")
    cores = _PartAttribute[int]("runner")
    physical_id = _PartAttribute[str]("runner")  # the GPU's machine-wide id: its timing lock's name
    lock_dir = _PartAttribute[Path]("runner")
    job_device = _PartAttribute[str]("runner")  # the device as a worker names it
    gpu_minors = _PartAttribute["list[int] | None"]("runner")
    baselines = _PartAttribute["tuple[str, ...]"]("references")
    one_process = _PartAttribute[bool]("pipeline")

    # --- devices --------------------------------------------------------------------
    def device_memory(self) -> DeviceMemory:
        """What jobs may reserve of the device (see `JobRunner.device_memory`)."""
        return self.runner.device_memory()

    def gpu_lock(self):
        """Exclusive use of this GPU (timing), across threads and processes on this machine."""
        return self.runner.gpu_lock()

    def gpu_shared(self):
        """Shared use of this GPU (correctness runs), excluded while a timing holds it."""
        return self.runner.gpu_shared()

    # --- references -----------------------------------------------------------------
    def judge_key(self, task: Task, protocol: EvalProtocol) -> str:
        """Where a task's reference outputs live in the judge (one per task, device and protocol)."""
        return self.runner.judge_key(task, protocol)

    def reference(self, task: Task, protocol: EvalProtocol | None = None, remeasure: bool = False) -> Reference:
        """Reference outputs (and timing on a GPU), computed once per task, device and protocol.

        Baseline timings also persist on disk (see `baselines`); `remeasure` measures them again.
        """
        return self.references.with_baselines(task, protocol or task.protocol, remeasure)

    def forget_reference(self, task: Task, protocol: EvalProtocol) -> None:
        """Drop what is known of a task's reference here and in the judge."""
        self.references.forget(task, protocol)

    def validate_task(self, task: Task) -> TaskValidation:
        """Load and run the reference; flag nondeterminism and degenerate outputs; time it on a GPU.

        Answers once the eager baseline is known; the torch.compile baseline (minutes for some
        tasks) goes on being measured and later results carry it (unless `wait_for_compile`)."""
        return self.references.validate_task(task)

    def baseline_key(self, task: Task, protocol: EvalProtocol, info: dict) -> BaselineKey:
        """Where a task's baselines are stored: per GPU, torch and Triton version and protocol."""
        return self.references.baseline_key(task, protocol, info)

    # --- profiling --------------------------------------------------------------------
    def profile(self, task: Task, source: str | None, protocol: EvalProtocol | None = None,
                device: str | None = None) -> ProfileReport:
        """Per-kernel breakdown, Triton launch metadata, roofline position and distance to the
        task's floor for a correct candidate (a `profile.ProfileReport`). Without a GPU only the
        floor's bytes and FLOPs are computed; the summary says why the rest is missing. `device`
        (the one that timed the candidate) matters to a fleet; this evaluator has one device."""
        from .profile import profile_candidate

        return profile_candidate(self, task, source, protocol)

    # --- candidates -------------------------------------------------------------------
    def evaluate(self, task: Task, source: str, protocol: EvalProtocol | None = None) -> EvalResult:
        """Check and (on a GPU) time one candidate. Infra failures are retried once."""
        return self.pipeline.evaluate(task, source, protocol or task.protocol)

    def cached(self, task: Task, source: str, protocol: EvalProtocol | None = None) -> EvalResult | None:
        """The stored result of an identical earlier submission, if any."""
        return self.pipeline.cached(task, source, protocol or task.protocol)
