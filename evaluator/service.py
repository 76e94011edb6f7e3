"""The evaluator: the one entry point the server and the CLI use.

static checks -> reference (cached) -> candidate correctness in a forked worker -> verdict in
this trusted process -> on a GPU, timing of reference and candidate under an exclusive lock.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Callable, Iterator

import torch

from ..common.vocab import Job, Kind
from . import lint
from .baselines import BASELINES, BaselineKey, Baselines, BaselineStore
from .device_memory import ALONE, DeviceMemory
from .judge.client import JudgeClient, JudgeError, KeysInUse, RingLease
from .messages import COMPILED_MAX_BYTES, output_checked
from .reference import Reference
from .results import ErrorInfo, EvalProtocol, EvalResult, Status, TaskFlag, TaskValidation, TimingStats
from .sandbox import confine, wire
from .sandbox.device_watch import HEADROOM_BYTES
from .sandbox.frames import Discard
from .sandbox.gpu_lock import GpuLock, default_lock_dir, physical_gpu_id
from .sandbox.pool import Stall, WorkerPool, WorkerResult
from .sandbox.procs import physical_memory
from .sandbox.ring import Geometry
from .slots import Slots
from .stats import contended, mean_median_split, quiet_flush, summarize, uneven, upper_median
from .task import Task, source_hash
from .verdict import (
    REFERENCE_LOST,
    correctness_verdict,
    escaped_work,
    expect,
    forged_fields,
    judged,
    timing_method,
    timing_numbers,
    timing_verdict,
)

log = logging.getLogger("adaexplore.evaluator")

NO_GPU_NOTE = "no CUDA device: correctness ran through Triton's interpreter on the CPU; timing skipped"
CONTEXT_BYTES = 1 << 30  # a worker's CUDA context and workspaces, beyond what its tensors take
RING_JOBS = frozenset({Job.reference, Job.candidate, Job.timing})  # the jobs that send outputs
REFERENCE_MIN_TIMEOUT_S = 300.0
FOOTPRINT_TIMEOUT_S = 60.0  # loading the task and counting on the meta device (itself cut off at 5 s)
# How long a reference turned away by the judge, first in the queue for room, waits for tasks in use
# before it may evict their references: longer than one large task's registration and evaluation
# (up to three minutes for KernelBench's largest on an H200), so that such tasks take turns.
JUDGE_WAIT_S = 300.0
# A task whose reference keeps more than this share of the judge's device budget is large: its
# reference runs while no other large one does.
LARGE_REFERENCE_SHARE = 0.25
LIBRARY_INTERNAL_ERROR = "CUDNN_STATUS_INTERNAL_ERROR"
CHECKED_WAIT_S = 30.0  # for the frames a job wrote before its gate to be read
COMPILE_PENDING = "the torch.compile baseline is still being measured; later results compare with it too"
REFERENCE_CACHE_SIZE = 256  # tasks whose reference facts stay here (their outputs are in the judge)
RESULTS_KEPT = 4096  # results of identical submissions answered without running them again
# Timings closer than this to a task's best are a tie: run-to-run noise on a quiet GPU is a few
# tenths of a percent, so a kernel that is faster by less is not known to be faster at all.
TIE_MARGIN = 0.01
# Once its kernels are compiled, a candidate that goes this many times a reference forward (and
# at least the evaluator's `stall_floor_s`) without finishing a step of its run is stuck.
STALL_RATIO = 50.0
STALL_FLOOR_S = {"gpu": 10.0, "cpu": 120.0}  # the interpreter runs kernels hundreds of times slower


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


def compiled_kernels(res: WorkerResult) -> bytes | None:
    """The candidate's compiled kernels its correctness job handed on (a tar), if it sent any
    that the sink kept (one uint8 tensor within COMPILED_MAX_BYTES)."""
    msg = res.first(Kind.compiled)
    if msg is None or len(msg[1]) != 1 or not isinstance(msg[1][0], torch.Tensor):
        return None
    return msg[1][0].contiguous().numpy().tobytes()


def disturbed(head: dict, quiet_flush_ms: float | None = None) -> str | None:
    """Why a timing run must be measured again, or None: it shows another context's work on the
    GPU (its L2 flushes were slow, against each other or against `quiet_flush_ms`, a flush on
    this GPU with nothing else running; its runs were too unlike each other; the device stayed
    busy after the timed calls returned), or a few disturbed runs pulled its mean away from its
    median. An honest kernel can look as if its work escaped the stream only because of such
    work, so any of these is measured again on a quiet GPU before anything is reported (a
    kernel whose work really escapes does so there too)."""
    event_ms = timing_numbers(head, "event_ms") or []
    if not event_ms:
        return None
    median = upper_median(event_ms)
    drain_ms = timing_numbers(head, "drain_ms")
    on_gpu = bool(drain_ms)  # host-clock runs (no GPU) carry no drain times, and vary for other reasons
    if contended(timing_numbers(head, "flush_ms") or [], quiet_flush_ms):
        return "another context shared the GPU (its L2 flushes were slow)"
    if on_gpu and uneven(event_ms):
        return "its runs were too unlike each other to have had the GPU alone"
    if escaped_work(drain_ms, median) is not None:
        return "the device stayed busy after its calls returned"
    split = mean_median_split(event_ms)
    if on_gpu and split is not None:
        return f"a few runs pulled its mean {split:+.1%} away from its median"
    return None


def noted(note: str | None, more: str) -> str:
    """A result's timing note with one more sentence."""
    return f"{note}; {more}" if note else more


def default_device() -> str:
    return "cuda:0" if torch.cuda.is_available() else "cpu"


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
        self.device = device or default_device()
        # Whether jobs hand their outputs to the judge through a ring of shared memory (on a GPU,
        # device memory: see sandbox.ring) rather than streaming them through their pipes.
        self.output_ring = output_ring
        # Whether a candidate's first timing runs in its correctness job's own process, after
        # its verdict: no second process to start, no module, kernels or CUDA to set up again.
        self.one_process = one_process
        # Whether registrations and timings wait for the torch.compile baseline (one-shot runs
        # that want it in their answer, and stored for the next run) or go on without it.
        self.wait_for_compile = wait_for_compile
        self.is_gpu = self.device.startswith("cuda")
        self.stall_floor_s = stall_floor_s if stall_floor_s is not None else STALL_FLOOR_S["gpu" if self.is_gpu else "cpu"]
        # The GPU's machine-wide id (the lock's name). Where the driver lists it, the sandbox shows
        # a worker that GPU's device file alone, and the worker and the judge name it by UUID
        # (see confine.gpu_node); otherwise they see it by `visible_devices` (a physical id).
        self.physical_id = physical_gpu_id(self.device, os.environ.get("CUDA_VISIBLE_DEVICES"),
                                           visible_devices if self.is_gpu else None)
        node = confine.gpu_node(self.physical_id) if self.is_gpu else None
        self.gpu_minors = [node.minor] if node else None
        self.visible_devices = node.uuid if node else (visible_devices if self.is_gpu else None)
        self.job_device = "cuda:0" if self.visible_devices else self.device
        # Timing on the CPU (host clocks) only exercises the timing path; it is off by default.
        self.timed = self.is_gpu or cpu_timing
        self.baselines = tuple(baselines) if baselines else (("eager", "compile") if self.is_gpu else ("eager",))
        unknown = [b for b in self.baselines if b not in BASELINES]
        if unknown or "eager" not in self.baselines:
            raise ValueError(f"baselines must include 'eager' and come from {BASELINES}; got {self.baselines}")
        base = Path(work_dir) if work_dir else Path(tempfile.gettempdir()) / f"adaexplore-{os.getuid()}"
        self.work_dir = base
        (base / "scratch").mkdir(parents=True, exist_ok=True)
        # What workers must not see: this evaluator's work directory and whatever the caller
        # names (a server's data directory); nothing else of the host is shown unless allowed (confine.py).
        self.hidden_paths = [str(base), *(str(p) for p in hidden_paths or [])]
        self.sandbox_tmp_bytes = sandbox_tmp_bytes
        # One GPU, one lock, whatever data directory each server on this machine uses.
        self.lock_dir = Path(lock_dir) if lock_dir else default_lock_dir()
        # A CPU-mode candidate could take the machine's memory; CUDA reserves too much address
        # space for an address-space limit to be usable on a GPU.
        if memory_limit_bytes is None and not self.is_gpu:
            memory_limit_bytes = min(12 << 30, physical_memory() // 2)
        self.memory_limit_bytes = memory_limit_bytes
        # Host memory a job's processes may hold in all (its cgroup's limit): memfds and shared
        # memory count too, which an address-space limit does not see.
        self.host_memory_bytes = memory_limit_bytes or max(8 << 30, physical_memory() // 2)
        self.pool = WorkerPool(interpret=not self.is_gpu, work_dir=str(base / "scratch"),
                               triton_cache_dir=str(base / "triton-cache"), visible_devices=self.visible_devices,
                               max_processes=max_processes)
        self.baseline_store = BaselineStore(base / "baselines")
        # Reference outputs live in the judge, on this evaluator's device, within its budget
        # (0: judge.process.GPU_SHARE of the GPU's memory, or on the CPU 4 GiB or an eighth of the memory if less),
        # and beside a GPU those that do not fit there in host memory (-1: judge.process.HOST_SHARE of it).
        self.judge = JudgeClient(self.job_device if self.visible_devices else self.device, judge_budget_bytes,
                                 visible_devices=self.visible_devices, work_dir=str(base),
                                 host_budget_bytes=judge_host_budget_bytes)
        self.max_parallel = max_parallel or default_parallel(self.is_gpu)
        self.cores = cores or usable_cores()  # the cores this evaluator's workers share
        # torch.compile baselines run in the background of these slots unless someone waits for them.
        self._slots = Slots(self.max_parallel)
        self._memory: DeviceMemory | None = None  # device memory admission, sized on first use
        self._memory_guard = threading.Lock()
        self._peaks: dict[str, int] = {}  # judge key -> the reference's peak device memory
        self._best_ms: dict[str, float] = {}  # judge key -> the fastest confirmed median reported here
        self._confirming: dict[str, list[float]] = {}  # judge key -> first medians being confirmed now
        self._best_changed = threading.Condition()  # guards both; told when a confirmation ends
        self._in_use = KeysInUse()  # tasks with work in flight: the judge evicts their references last
        self._counts: dict[str, dict[str, int] | None] = {}  # judge key -> its reference job counted on meta
        self._large_reference = threading.Lock()  # held by the reference job of a large task (see _is_large)
        self._judge_budget = 0  # the judge's device share, once asked
        # Reference outputs can be hundreds of MB a task: keep the most recently used few.
        self._ref_cache: OrderedDict[str, Reference] = OrderedDict()  # by judge key
        self._ref_locks: dict[str, threading.Lock] = {}
        self._ref_guard = threading.Lock()
        # Results of identical submissions, most recently used last; the oldest go past RESULTS_KEPT.
        self._results: OrderedDict[tuple[str, str, str, str], EvalResult] = OrderedDict()
        self._results_guard = threading.Lock()
        # Correctness runs keep off the GPU while a candidate is timed: paused (see GpuLock).
        self.quiet_timing = quiet_timing
        # The fastest median L2 flush of an undisturbed baseline timing: what a flush takes on this
        # GPU with nothing else running (baselines run the task's code, never a candidate's).
        self._quiet_flush_ms: float | None = None
        self.gpu = GpuLock(self.lock_dir, self.physical_id, pause=self.pool.pause, resume=self.pool.resume)
        # With `trace`, where each worker job spent its time (see `_trace`), for benchmarks.
        self.trace: list[dict] | None = [] if trace else None

    def launch(self) -> None:
        """Start the warm parent and the judge without waiting for them (see `start`)."""
        self.pool.launch()
        self.judge.launch()

    def start(self) -> None:
        """Start the warm parent and the judge now, side by side, rather than on first use."""
        self.launch()
        self.pool.ensure_started()
        try:
            self.judge.start()
        except JudgeError as exc:  # the first job that needs it tries again and reports it
            log.warning("the judge did not start: %s", exc)

    def close(self) -> None:
        self.pool.close()
        self.judge.close()

    def sandbox_info(self) -> dict:
        """How this evaluator's workers are confined: {"level", "detail", "process_limit"}."""
        return self.pool.sandbox_info()

    def sandbox_level(self) -> str:
        return str(self.sandbox_info().get("level", confine.LEVEL_WEAK))

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- jobs -----------------------------------------------------------------------
    def _job(self, kind: str, task: Task, protocol: EvalProtocol, **extra) -> dict:
        # Workers share the cores: each gets its share of intra-op threads, not all of them.
        threads = max(1, self.cores // self.max_parallel)
        job = {"kind": kind, "task_source": task.source, "protocol": protocol.model_dump(mode="json"),
               "device": self.job_device, "threads": threads, "judge_key": self.judge_key(task, protocol), **extra}
        if self.memory_limit_bytes and not self.is_gpu:
            job["memory_limit_bytes"] = self.memory_limit_bytes
        job["host_memory_bytes"] = self.host_memory_bytes
        writable = [extra["inductor_cache_dir"]] if extra.get("inductor_cache_dir") else []
        for path in writable:
            os.makedirs(path, mode=0o700, exist_ok=True)
            confine.hand_over(path)
        job["sandbox"] = confine.Plan(hidden=list(self.hidden_paths), writable=writable, gpu=self.is_gpu,
                                      gpu_minors=self.gpu_minors, tmp_bytes=self.sandbox_tmp_bytes,
                                      max_file_bytes=self.sandbox_tmp_bytes).to_job()
        return job

    def _sink(self, job: dict, measured: Callable[[], None] | None = None):
        """Where each frame's outputs go: the reference's into the judge's store, a candidate's
        (and a compiled reference's) to the judge for comparison, a baseline's timing run nowhere.
        `measured` is called when a timing report arrives, before its outputs: the measurement is over."""
        key, tolerance = job["judge_key"], job["protocol"].get("tolerance")
        reference, candidate = job["kind"] == Job.reference, bool(job.get("candidate_source"))
        checked = output_checked(job)  # a compiled reference is checked like a kernel

        compiled_kept: list[bool] = []

        def sink(head: dict, metas: list):
            kind = head.get("kind")
            if reference and kind in (Kind.trial, Kind.inputs, Kind.repeat, Kind.check):
                slot = f"trial:{int(head.get('trial', 0))}" if kind == Kind.trial else str(kind)
                in_use = [] if job.get("evict_in_use") else self._in_use.keys_held()
                return self.judge.receiver(key, slot, "store", metas, in_use=in_use)
            if candidate and kind == Kind.trial:
                trial = int(head.get("trial", 0))
                return self.judge.receiver(key, f"trial:{trial}", "compare", metas, tolerance, trial)
            if candidate and kind == Kind.unlaunched and metas:
                return self.judge.receiver(key, "trial:0", "compare", metas, tolerance, 0)
            if kind == Kind.timing and measured is not None:
                measured()
            if checked and kind == Kind.timing:
                return self.judge.receiver(key, "check", "compare", metas, tolerance, -1)
            if candidate and kind == Kind.compiled and len(metas) == 1 and metas[0]["dtype"] == "uint8" \
                    and wire.meta_nbytes(metas[0]) <= COMPILED_MAX_BYTES and not compiled_kept:
                compiled_kept.append(True)  # one per job: more would only fill this process's memory
                return None  # kept here (metas are checked by now), for the candidate's timing jobs
            return Discard()
        return sink

    # Lock order, everywhere: a worker slot first, then device memory, then the GPU (shared or
    # exclusive). The other order deadlocks: threads holding the GPU would wait for slots held by
    # threads waiting for it.
    def _run(self, job: dict, timeout_s: float, gpu: str | None = None, alone: bool = False,
             reserve: int | None = None, stall: Stall | None = None, again: bool = False) -> WorkerResult:
        """Run a job in a worker slot, holding `reserve` bytes of the device (its estimate if
        None); with `gpu` "shared" or "exclusive", holding the GPU so.

        A job that ran out of device memory beside others runs again: running out because
        neighbours held memory is the evaluator's doing, not the task's. A reference job whose
        footprint, counted on the meta device, is more than it had reserved runs again with that
        reserved, beside others; any other such job, with the device to itself."""
        reserved = ALONE if alone else reserve if reserve is not None else self._reservation(job)
        t0 = time.monotonic()
        with self._slots.hold(self._background(job)), self.device_memory().reserve(reserved):
            hold = self.gpu_shared() if gpu == "shared" else self.gpu_lock() if gpu == "exclusive" else nullcontext()
            with hold, self._ring(job) as ring:
                t1 = time.monotonic()
                res = self.pool.run(self._with_share(job, reserved, ring), timeout_s, sink=self._sink(job), ring=ring,
                                    stall=stall)
        self._trace(job, queued_s=t1 - t0, run_s=time.monotonic() - t1, alone=float(alone),
                    reserved_bytes=float(self.device_memory().capacity or 0) if alone else float(reserved),
                    **res.phases())
        if not alone and not again and self._beside_a_hog(res):
            log.info("a %s job failed while the device ran short (a neighbour past its share); running it again",
                     job["kind"])
            return self._run(job, timeout_s, gpu, reserve=reserve, stall=stall, again=True)
        # A reference past its share needs more than was reserved for it: ours to give, not its fault.
        over = res.device_over is not None and job["kind"] != Job.candidate and not job.get("candidate_source")
        if alone or not (self._crowded_out(res) or self._beside_a_hog(res) or over):
            return res
        if job["kind"] == Job.reference:  # what it stored before the judge ran out goes, so it fits again
            self.judge.drop(str(job["judge_key"]))
            need = self._footprint(job) if reserve is None else None
            if need is not None and reserved < need < (self.device_memory().capacity or 0):
                log.info("a reference job ran out of device memory beside others; running it again with its "
                         "footprint reserved (%.1f GB, counted on the meta device)", need / 1e9)
                return self._run(job, timeout_s, gpu, reserve=need, stall=stall)
        log.info("a %s job ran out of device memory beside others; running it alone", job["kind"])
        return self._run(job, timeout_s, gpu, alone=True, stall=stall)

    def _with_share(self, job: dict, reserved: int, ring: RingLease | None) -> dict:
        """The job with the device memory it may hold once the device runs short: what was
        reserved for it, its CUDA context and its ring (`sandbox.device_watch`; 0: no share)."""
        capacity = self.device_memory().capacity
        if not capacity or (reserved <= 0 and reserved != ALONE):
            return job
        held = capacity if reserved == ALONE else min(reserved, capacity)
        rings = ring.geometry.nbytes if ring is not None else 0
        return {**job, "device_bytes": held + CONTEXT_BYTES + rings}

    def _stall(self, ref: Reference, protocol: EvalProtocol) -> Stall:
        """A candidate's stall limit: `STALL_RATIO` times a forward of the task's reference (its
        measured runtime, else its correctness forwards' time), and at least `stall_floor_s`."""
        ref_s = ref.timing.runtime_ms / 1e3 if ref.timing is not None else ref.forward_s
        seconds = min(protocol.timeout_s, max(self.stall_floor_s, STALL_RATIO * ref_s))
        return Stall(seconds, f"a forward of the task's reference takes {ref_s * 1e3:.3g} ms, and the limit is "
                              f"{STALL_RATIO:.0f} times that, at least {self.stall_floor_s:.0f} s")

    @staticmethod
    def _beside_a_hog(res: WorkerResult) -> bool:
        """Whether a job failed while the device ran short because of another job (it was not
        itself stopped for its share): its failure may be that job's doing, so it runs again."""
        return res.device_pressure and res.device_over is None and not res.stalled and res.first(Kind.done) is None

    @contextmanager
    def _ring(self, job: dict) -> Iterator[RingLease | None]:
        """A ring for the outputs of a job that sends any (None: they stream), freed once it ends."""
        lease = self.judge.open_ring() if self.output_ring and job["kind"] in RING_JOBS else None
        try:
            yield lease
        finally:
            if lease is not None:
                lease.close()

    def _footprint(self, job: dict) -> int | None:
        """Bytes to reserve for a reference job, from its footprint counted on the meta device by
        a job of its own (no device memory reserved: it touches none), or None if not counted."""
        count = self._count(job)
        return self.device_memory().for_footprint(count["need_bytes"]) if count else None

    def _count(self, job: dict) -> dict[str, int] | None:
        """The reference job's count on the meta device (`need_bytes`, `output_bytes`,
        `input_bytes`), counted once per task, or None if it cannot be counted."""
        key = str(job["judge_key"])
        if key not in self._counts:
            res = self._run({**job, "kind": Job.footprint}, FOOTPRINT_TIMEOUT_S, reserve=0)
            found = res.first(Kind.footprint)
            head = found[0] if found else {}
            fields = {k: head.get(k) for k in ("need_bytes", "output_bytes", "input_bytes")}
            counted = {k: v for k, v in fields.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 0}
            self._counts[key] = counted if len(counted) == len(fields) and counted["need_bytes"] else None
        return self._counts[key]

    def _crowded_out(self, res: WorkerResult) -> bool:
        """Whether a job ran out of device memory on a device it shared with other jobs: it says
        so, or cuDNN failed inside (which it does when its workspace cannot be allocated), or the
        judge ran out while taking its outputs (the judge's answer, which the job cannot write).
        At worst a job that claims either costs one more run, alone."""
        if self.device_memory().capacity is None:
            return False
        for head, payload in res.messages:
            if payload and isinstance(payload[0], dict) and payload[0].get("oom"):
                return True
            if head.get("kind") != Kind.error:
                continue
            error = head.get("error")
            message = str(error.get("message", "")) if isinstance(error, dict) else ""
            if head.get("status") == Status.oom.value or LIBRARY_INTERNAL_ERROR in message:
                return True
        return False

    def device_memory(self) -> DeviceMemory:
        """What jobs may reserve of the device: its memory less the judge's budget and a CUDA
        context's worth per worker slot (no limit on the CPU, or if the judge cannot say)."""
        with self._memory_guard:
            if self._memory is None:
                self._memory = DeviceMemory(self._device_capacity(), HEADROOM_BYTES if self.is_gpu else 0)
        return self._memory

    def _device_capacity(self) -> int | None:
        capacity = None
        if self.is_gpu:
            try:
                stats = self.judge.stats()
                self._judge_budget = int(stats["budget_bytes"])
                rings = Geometry.for_device(self.device).nbytes if self.output_ring else 0
                capacity = int(stats["device_total_bytes"]) - int(stats["budget_bytes"]) \
                    - self.max_parallel * (CONTEXT_BYTES + rings) - HEADROOM_BYTES
            except (JudgeError, KeyError, TypeError, ValueError) as exc:
                log.warning("device memory admission is off: %s", exc)
        return capacity if capacity and capacity > 0 else None

    def _reservation(self, job: dict) -> int:
        key = str(job.get("judge_key"))
        count = self._counts.get(key)
        if job["kind"] == Job.reference and key not in self._peaks and count:
            return self.device_memory().for_footprint(count["need_bytes"])  # counted before it first ran
        # torch.compile's baseline is the reference's own computation, fused: it is reserved for as
        # the reference's timing is (were it to take more, it runs again alone, as any job does).
        candidate = bool(job.get("candidate_source"))
        return self.device_memory().estimate(self._peaks.get(key), candidate, timing=job["kind"] == Job.timing)

    def _background(self, job: dict) -> bool:
        """Whether a job yields its slot's turn to others: a torch.compile baseline, which no
        result waits for unless `wait_for_compile` (see `Slots`)."""
        return bool(job.get("compile")) and not self.wait_for_compile

    def _trace(self, job: dict, **phases: float) -> None:
        if self.trace is not None:
            self.trace.append({"kind": job["kind"], "candidate": bool(job.get("candidate_source")),
                               "compile": bool(job.get("compile")),
                               "judge_key": job["judge_key"], "at": time.monotonic(),
                               **{k: round(v, 3) for k, v in phases.items()}})

    def gpu_lock(self):
        """Exclusive use of this GPU (timing), across threads and processes on this machine."""
        return self.gpu.exclusive()

    def gpu_shared(self):
        """Shared use of this GPU (correctness runs), excluded while a timing holds it."""
        return self.gpu.shared() if self.timed and self.quiet_timing else nullcontext()

    def _run_shared(self, job: dict, timeout_s: float) -> WorkerResult:
        return self._run(job, timeout_s, gpu="shared")

    def _run_timed(self, job: dict, timeout_s: float) -> WorkerResult:
        """A timing job: it loads, compiles and builds its inputs alongside correctness runs,
        then waits at its gate; only its measurement holds the GPU exclusively, while this
        evaluator's correctness runs are paused. If the runs show that other work still shared
        the GPU (say a paused run's queued kernels), it is measured again, this time after
        every correctness run has finished."""
        res = self._run_timed_once(job, timeout_s, pause=True)
        if self._crowded_out(res) or self._beside_a_hog(res):
            log.info("a %s timing ran out of device memory beside others; running it alone", job["kind"])
            res = self._run_timed_once(job, timeout_s, pause=True, alone=True)
        msg = res.first(Kind.timing)
        why = self._disturbed(msg[0], res) if msg is not None else None
        if why is not None:
            log.info("measuring a %s timing again on a quiet GPU: %s", job["kind"], why)
            res = self._run_timed_once(job, timeout_s, pause=False)
            res.remeasured = why
        elif msg is not None and not job.get("candidate_source"):
            self._learn_quiet_flush(msg[0])
        return res

    def _disturbed(self, head: dict, res: WorkerResult) -> str | None:
        if res.device_pressure:  # cuDNN, short of workspace, picks slower algorithms: 2.6x on an H200
            return "the device ran short of memory while it ran (a neighbour past its share)"
        return disturbed(head, self._quiet_flush_ms)

    def _learn_quiet_flush(self, head: dict) -> None:
        flush = quiet_flush(timing_numbers(head, "flush_ms") or [])
        if flush is not None and flush > 0:
            self._quiet_flush_ms = flush if self._quiet_flush_ms is None else min(self._quiet_flush_ms, flush)

    def _run_timed_once(self, job: dict, timeout_s: float, pause: bool, alone: bool = False) -> WorkerResult:
        return self._gated_run(job, timeout_s, pause=pause, alone=alone)[0]

    def _gated_run(self, job: dict, timeout_s: float, *, pause: bool = True, alone: bool = False,
                   reserve_as: dict | None = None, on_message: Callable[[dict, list], None] | None = None,
                   at_gate: Callable[[], bool] | None = None, stall: Stall | None = None) -> tuple[WorkerResult, bool]:
        """Run a gated job: it prepares beside other work (the GPU held shared), then waits at its
        gate, where `at_gate()`, if given, decides whether it is measured (False kills it there).
        Measured, it holds the GPU exclusively, with this evaluator's other workers paused (if
        `pause`) and the judge stopped, until it reports: what it does after its report (its
        outputs sent, its CUDA context torn down as it exits) runs beside other work. Returns its
        result and whether it was measured."""
        wake = threading.Event()
        reported = threading.Event()  # its timing report is in (or it ended): the measurement is over
        t0 = time.monotonic()
        judge_stop = self.judge.stop_for_measurement()

        def measured() -> None:
            judge_stop.resume()
            reported.set()

        def ended(_f: object) -> None:
            wake.set()
            reported.set()

        reserved = ALONE if alone else self._reservation(reserve_as or job)
        with self._slots.hold(self._background(job)), self.device_memory().reserve(reserved), \
                self._ring(job) as ring:
            with self.gpu_shared():
                t1 = time.monotonic()
                submitted = self.pool.submit(self._with_share(job, reserved, ring), timeout_s, on_ready=wake.set,
                                             on_message=on_message, sink=self._sink(job, measured=measured), ring=ring,
                                             stall=stall)
                submitted.future.add_done_callback(ended)
                early = self.pool.wait(submitted, until=wake)
            t2 = time.monotonic()
            waiting = early is None and not submitted.future.done()
            if waiting and at_gate is not None and not at_gate():
                self.pool.stop(submitted.job_id, "its correctness verdict is in; it is not timed")
                waiting = False
            if not waiting:  # ended before its gate, or stopped there: not measured
                res = early or self.pool.wait(submitted)
                assert res is not None  # a wait without `until` always returns the result
                self._trace(job, queued_s=t1 - t0, setup_s=t2 - t1, **res.phases())
                return res, False
            with self.gpu.exclusive(keep=submitted.job_id, pause=pause), judge_stop:
                t3 = time.monotonic()
                self.pool.open_gate(submitted.job_id)
                self.pool.wait(submitted, until=reported)
                t4 = time.monotonic()
            res = self.pool.wait(submitted)
        assert res is not None  # a wait without `until` always returns the result
        self._trace(job, queued_s=t1 - t0, setup_s=t2 - t1, gpu_wait_s=t3 - t2, exclusive_s=t4 - t3,
                    measure_s=time.monotonic() - t3, paused=float(pause), **res.phases())
        return res, True

    # --- reference --------------------------------------------------------------------
    def judge_key(self, task: Task, protocol: EvalProtocol) -> str:
        return f"{task.task_id}|{self.device}|{protocol.key()}"

    def reference(self, task: Task, protocol: EvalProtocol | None = None, remeasure: bool = False) -> Reference:
        """Reference outputs (and timing on a GPU), computed once per task, device and protocol.

        Baseline timings also persist on disk (see `baselines`); `remeasure` measures them again.
        """
        protocol = protocol or task.protocol
        with self._in_use.hold(self.judge_key(task, protocol)):
            ref = self._reference(task, protocol, remeasure)
            ref.baselines_ready.wait()
        return ref

    def _reference(self, task: Task, protocol: EvalProtocol, remeasure: bool = False) -> Reference:
        """The reference's outputs, as soon as they exist; its baselines may still be measuring
        (wait on `baselines_ready`), so candidates' correctness runs need not wait for them."""
        key = self.judge_key(task, protocol)
        with self._ref_guard:
            lock = self._ref_locks.setdefault(key, threading.Lock())
        with lock:
            # A judge found gone is started again first: its new generation tells that the
            # references it held are gone with it.
            self.judge.launch()
            with self._ref_guard:
                cached = self._ref_cache.get(key)
                if cached is not None and not remeasure and cached.judge_generation == self.judge.generation:
                    self._ref_cache.move_to_end(key)
                    return cached
            t0 = time.monotonic()
            ref = self._run_reference(task, protocol, key)
            if ref.error is not None and ref.error.error_class == "OutOfMemoryError":
                ref.error = self._too_large(ref.error)
            ref.judge_key, ref.judge_generation = key, self.judge.generation
            if ref.peak_device_bytes:
                self._peaks[ref.judge_key] = ref.peak_device_bytes
            ref.elapsed_s = time.monotonic() - t0
            if ref.error is not None and ref.error.error_class == "InfraError":
                return ref  # ours, not the task's: not remembered
            if ref.error is None:
                try:  # once, while its inputs are still in the judge: candidates' verdicts read them
                    ref.output_flags = self.judge.flags(key, protocol.tolerance.model_dump(mode="json"))
                except JudgeError as exc:
                    log.warning("the judge could not flag %s's outputs: %s", task.name, exc)
            with self._ref_guard:
                self._ref_cache[key] = ref
                self._ref_cache.move_to_end(key)
                while len(self._ref_cache) > REFERENCE_CACHE_SIZE:
                    self._ref_cache.popitem(last=False)
            # A timed reference job always reports the check run's output, which baselines need.
            if ref.error is None and self.timed:
                ref.baselines_ready.clear()
                ref.eager_ready.clear()
                if "compile" in self.baselines:  # until `_baselines` says what it found
                    ref.compile_note = COMPILE_PENDING
                threading.Thread(target=self._measure_baselines, args=(key, task, protocol, ref, remeasure, t0),
                                 daemon=True, name="adaexplore-baselines").start()
            return ref

    def _too_large(self, error: ErrorInfo) -> ErrorInfo:
        """A reference that ran out of memory had the device to itself (see `_run`): the task
        does not fit here, which registration says in so many words."""
        capacity = self.device_memory().capacity
        where = (f"even with the device to itself ({capacity / 1e9:.1f} GB for jobs beside the judge's share)"
                 if capacity else "on this machine")
        return ErrorInfo(error_class="TaskTooLarge", message=(
            f"the task does not fit this device: its reference ran out of memory {where}: {error.message}")[:600])

    def _run_reference(self, task: Task, protocol: EvalProtocol, key: str) -> Reference:
        """The reference job (a large one while no other runs, see `_is_large`), run again while the
        judge has no room beside the references of tasks in use. Turned away, it queues behind
        references turned away before it; first in
        the queue, it tries again when some task's work ends and leaves the room it was missing,
        and once it has been first for JUDGE_WAIT_S it may evict references in use (their
        evaluations measure them again), so a task kept busy never starves another."""
        def attempt(evict_in_use: bool) -> Reference:
            # Its outputs stream to the judge beside every other job's: a slow stream is the
            # machine's load, so the reference gets at least REFERENCE_MIN_TIMEOUT_S.
            return Reference.from_report(self._run_shared(
                self._job(Job.reference, task, protocol, check_run=self.timed, evict_in_use=evict_in_use),
                max(protocol.timeout_s, REFERENCE_MIN_TIMEOUT_S)))

        keeps = self._large_keeps(task, protocol, key)
        with self._large_reference if keeps else nullcontext():
            return self._reference_with_room(task, protocol, key, attempt, keeps)

    def _large_keeps(self, task: Task, protocol: EvalProtocol, key: str) -> int:
        """What a large task not yet measured on this GPU keeps in the judge (0 for any other):
        its count on the meta device, taken first, says what the judge will keep (every trial's
        outputs, a repeat, a check run and the inputs). A large reference runs while no other
        such runs, and not before the judge has that room in one place: several at once each
        store part of their outputs and find no room for the rest, and one started without the
        room is moved to host memory halfway and then turned away. The count also sets what the
        reference job reserves of the device."""
        if key in self._peaks or self.device_memory().capacity is None or not self._judge_budget:
            return 0
        count = self._count(self._job(Job.reference, task, protocol))
        if not count:
            return 0
        keeps = (protocol.correctness_trials + 2) * count["output_bytes"] + count["input_bytes"]
        if keeps <= LARGE_REFERENCE_SHARE * self._judge_budget:
            return 0
        log.info("%s keeps %.1f GB in the judge: its reference runs while no other such runs", task.name, keeps / 1e9)
        return keeps

    def _reference_with_room(self, task: Task, protocol: EvalProtocol, key: str,
                             attempt: Callable[[bool], Reference], keeps: int = 0) -> Reference:
        """The reference's tries (see `_run_reference`); one that `keeps` that many bytes waits
        for that room before its first. Room is waited for up to what one place of the judge
        can hold: the rest of a larger reference goes beside it."""
        def capped(need: int) -> int:
            return min(need, self._judge_room(key, idle=True))

        need = capped(keeps) if keeps else 0
        if not need or self._judge_room(key) >= need:
            ref = attempt(False)
            if not ref.judge_busy:
                return ref
            # At least what it had reached when turned away, and at least every trial's outputs (as
            # the task's own process described them: a description that is not one counts nothing).
            try:
                trial_bytes = sum(wire.checked_nbytes(m) for m in ref.output_metas)
            except wire.WireError:
                trial_bytes = 0
            need = capped(max(ref.judge_need_bytes, protocol.correctness_trials * trial_bytes))
        with self._in_use.queue() as turn:
            while True:
                self.judge.drop(key)
                log.info("no room in the judge for %s beside the references in use (it needs %.3f GB at least); waiting",
                         task.name, need / 1e9)
                while True:  # a try that cannot fit would run the whole reference for nothing
                    turn.wait(JUDGE_WAIT_S)
                    late = turn.waited_first_s() > JUDGE_WAIT_S
                    if late or self._judge_room(key) >= need:
                        break
                ref = attempt(late)
                if not ref.judge_busy or late:
                    return ref
                need = capped(max(need, ref.judge_need_bytes))

    def _judge_room(self, key: str, idle: bool = False) -> int:
        """Bytes the reference of `key` could have in the judge beside the tasks in use, or were
        none `idle` (if the judge cannot say: enough, and the reference's next try finds out)."""
        try:
            return self.judge.room_beside([] if idle else [k for k in self._in_use.keys_held() if k != key])
        except JudgeError:
            return 1 << 62

    def _measure_baselines(self, key: str, task: Task, protocol: EvalProtocol, ref: Reference, remeasure: bool,
                           t0: float) -> None:
        try:
            with self._in_use.hold(key):
                self._baselines(task, protocol, ref, remeasure)
        except Exception as exc:  # noqa: BLE001 - whoever waits must get an answer
            ref.error = ErrorInfo(error_class="InfraError", message=f"baseline measurement failed: {exc}"[:600])
        finally:
            if ref.error is not None and ref.error.error_class == "InfraError":
                with self._ref_guard:  # measured again by the next evaluation
                    if self._ref_cache.get(key) is ref:
                        del self._ref_cache[key]
            ref.elapsed_s = time.monotonic() - t0
            ref.eager_ready.set()
            ref.baselines_ready.set()

    def forget_reference(self, task: Task, protocol: EvalProtocol) -> None:
        """Drop what is known of a task's reference here and in the judge."""
        with self._ref_guard:
            self._ref_cache.pop(self.judge_key(task, protocol), None)
        self.judge.drop(self.judge_key(task, protocol))

    def validate_task(self, task: Task) -> TaskValidation:
        """Load and run the reference; flag nondeterminism and degenerate outputs; time it on a GPU.

        Answers once the eager baseline is known; the torch.compile baseline (minutes for some
        tasks) goes on being measured and later results carry it (unless `wait_for_compile`)."""
        protocol = task.protocol
        with self._in_use.hold(self.judge_key(task, protocol)):
            ref = self._reference(task, protocol)
            self._baselines_known(ref)
            if ref.error is not None:
                return TaskValidation(ok=False, error=ref.error, device=self.device, elapsed_s=ref.elapsed_s)
        flags = [TaskFlag.model_validate(f) for f in [*ref.flags, *(ref.output_flags or [])]]
        return TaskValidation(
            ok=True, flags=flags, output_shapes=[list(m.get("shape", [])) for m in ref.output_metas],
            output_dtypes=[str(m.get("dtype", "")) for m in ref.output_metas],
            reference_timing=ref.timing, compile_timing=ref.compile_timing, compile_note=ref.compile_note,
            device=self.device, elapsed_s=ref.elapsed_s)

    def _baselines_known(self, ref: Reference) -> None:
        """Wait for the baselines a speedup needs: the eager one, or all with `wait_for_compile`."""
        (ref.baselines_ready if self.wait_for_compile else ref.eager_ready).wait()

    # --- baselines ----------------------------------------------------------------------
    def baseline_key(self, task: Task, protocol: EvalProtocol, info: dict) -> BaselineKey:
        return BaselineKey(task_id=task.task_id, device_name=info.get("name", ""), gpu=self.physical_id,
                           torch_version=info.get("torch", torch.__version__),
                           triton_version=info.get("triton", ""), protocol_key=protocol.key())

    def _baselines(self, task: Task, protocol: EvalProtocol, ref: Reference, remeasure: bool) -> None:
        """Eager (and torch.compile) timings of the reference: from disk, or measured and stored."""
        key = self.baseline_key(task, protocol, ref.device_info)
        stored = None if remeasure else self.baseline_store.load(key)
        got = stored or Baselines()
        if not got.has(["eager"]):
            tres = self._run_timed(self._job(Job.timing, task, protocol), protocol.timeout_s)
            msg, ref.error = expect(tres, Kind.timing, "reference timing")
            if ref.error is not None:
                return
            # expect() gives the frames whenever it gives no error
            got.eager = summarize(msg[0]["event_ms"], protocol.trim_fraction, method=timing_method(msg[0]))  # type: ignore[index]
            got.measured = tuple(sorted(set(got.measured) | {"eager"}))
            self._store_baselines(key, got, task)  # stored before anyone is told it is known
        ref.timing = got.eager
        ref.eager_ready.set()  # candidates' timings need no more; torch.compile's may take a while
        if "compile" in self.baselines and not got.has(["compile"]):
            stats, note, ours = self._measure_compile(task, protocol, ref)
            got.compile, got.compile_note = stats, note
            if not ours:  # a failure of our own is not remembered
                got.measured = tuple(sorted(set(got.measured) | {"compile"}))
                self._store_baselines(key, got, task)
        ref.timing = got.eager
        if "compile" in self.baselines:
            ref.compile_timing, ref.compile_note = got.compile, got.compile_note

    def _store_baselines(self, key: BaselineKey, got: Baselines, task: Task) -> None:
        try:
            self.baseline_store.save(key, got)
        except OSError as exc:
            log.warning("cannot store baselines for %s: %s", task.name, exc)

    def _measure_compile(self, task: Task, protocol: EvalProtocol,
                         ref: Reference) -> tuple[TimingStats | None, str | None, bool]:
        """torch.compile of the reference: compiled (before the gate, alongside other work),
        timed under the lock, and its check-run output compared with the reference.

        One process compiles and times: a separate checking process would compile it all again.
        Returns (stats, reason it is missing, whether the failure was ours).
        """
        extra = {"compile": True, "inductor_cache_dir": str(self.work_dir / "inductor-cache")}
        limit = max(protocol.timeout_s, 300.0)
        tres = self._run_timed(self._job(Job.timing, task, protocol, **extra), limit)
        msg, err = expect(tres, Kind.timing, "torch.compile of the reference")
        if err is not None:
            return None, f"torch.compile failed: {err.error_class}: {err.message[:300]}", err.error_class in (
                "InfraError",)
        # expect() gives the frames whenever it gives no error
        verdict = judged(msg[1], ref.check_outputs or None, protocol.tolerance, trial=-1)  # type: ignore[index]
        if isinstance(verdict, ErrorInfo):
            return None, f"torch.compile output could not be checked: {verdict.message}", True
        if verdict.status is not Status.correct:
            return None, f"torch.compile output differs from eager: {verdict.message}", False
        # expect() gives the frames whenever it gives no error
        return (summarize(msg[0]["event_ms"], protocol.trim_fraction,  # type: ignore[index]
                          method=timing_method(msg[0])), None, False)  # type: ignore[index]

    # --- profiling --------------------------------------------------------------------
    def profile(self, task: Task, source: str | None, protocol: EvalProtocol | None = None):
        """Per-kernel breakdown, Triton launch metadata, roofline position and distance to the
        task's floor for a correct candidate (a `profile.ProfileReport`). Without a GPU only the
        floor's bytes and FLOPs are computed; the summary says why the rest is missing."""
        from .profile import profile_candidate

        return profile_candidate(self, task, source, protocol)

    # --- candidates -------------------------------------------------------------------
    def evaluate(self, task: Task, source: str, protocol: EvalProtocol | None = None) -> EvalResult:
        """Check and (on a GPU) time one candidate. Infra failures are retried once."""
        protocol = protocol or task.protocol
        key = (task.task_id, source_hash(source), self.device, protocol.key())
        hit = self._remembered(key)
        if hit is not None:
            return hit
        t0 = time.monotonic()
        with self._in_use.hold(self.judge_key(task, protocol)):
            result = self._evaluate_once(task, source, protocol)
            if result.status is Status.infra_error and result.error and result.error.message == REFERENCE_LOST:
                self.forget_reference(task, protocol)  # evicted from the judge: measured again below
            if result.status is Status.infra_error:
                log.warning("infra error evaluating a candidate for %s, retrying: %s", task.name,
                            result.error.message if result.error else "")
                result = self._evaluate_once(task, source, protocol)
        result = result.model_copy(update={
            "task_id": task.task_id, "source_hash": key[1], "device": self.device,
            "protocol_key": key[3], "elapsed_s": round(time.monotonic() - t0, 3)})
        if result.status is not Status.infra_error:
            with self._results_guard:
                self._results[key] = result
                while len(self._results) > RESULTS_KEPT:
                    self._results.popitem(last=False)
        return result

    def _remembered(self, key: tuple[str, str, str, str]) -> EvalResult | None:
        with self._results_guard:
            hit = self._results.get(key)
            if hit is not None:
                self._results.move_to_end(key)
            return hit

    def _evaluate_once(self, task: Task, source: str, protocol: EvalProtocol) -> EvalResult:
        static = lint.check_candidate(source)
        if static.status is not None:
            return EvalResult(status=static.status, error=static.error, lint=static.issues)
        ref = self._reference(task, protocol)
        if ref.error is not None:
            return self._reference_failed(ref)
        if self.timed and self.one_process:
            return self._check_then_time(task, source, protocol, ref, static.issues)
        res = self._run(self._job(Job.candidate, task, protocol, candidate_source=source, hand_on_compiled=self.timed),
                        protocol.timeout_s, gpu="shared", stall=self._stall(ref, protocol))
        result = correctness_verdict(res, ref, protocol, static.issues)
        if result.status is Status.correct and self.timed:
            self._baselines_known(ref)
            if ref.error is not None:
                return self._reference_failed(ref)
            checked, compiled = result, compiled_kernels(res)
            result = self._time_candidate(task, source, protocol, ref, checked, compiled)
            if result.status is Status.correct and result.timing is not None:
                result = self._confirm_if_best(task, source, protocol, ref, checked, result, compiled)
        elif result.status is Status.correct:
            result = result.model_copy(update={"timing_note": NO_GPU_NOTE})
        return result

    def _check_then_time(self, task: Task, source: str, protocol: EvalProtocol, ref: Reference,
                         issues: list, again: bool = False) -> EvalResult:
        """Correctness and the first timing in one worker process: it runs its trials beside
        other work (once the eager baseline is known), reports `checked`, prepares its timing and
        waits at its gate. The gate opens only on a correct verdict on what it reported up to
        `checked`; any other verdict kills it there. A measurement that needs repeating
        (disturbed, or out of memory beside others) and a confirmation of a new best run as
        separate timing jobs. A run that failed beside a neighbour that ran the device short (or
        out of memory beside others) runs once more before it is judged."""
        # Baselines first: a job holding its slot at the gate must not wait for baseline jobs that
        # need a slot themselves.
        self._baselines_known(ref)
        if ref.error is not None:
            return self._reference_failed(ref)
        job = self._job(Job.candidate, task, protocol, candidate_source=source, hand_on_compiled=True,
                        then_time=True)
        before: list[tuple[dict, list]] = []
        checked_in = threading.Event()
        verdict: list[tuple[WorkerResult, EvalResult]] = []  # what it reported up to `checked`, judged

        def on_message(head: dict, payload: list) -> None:
            if head.get("kind") == Kind.checked:
                checked_in.set()
            elif not checked_in.is_set():
                before.append((head, payload))

        def at_gate() -> bool:
            checked_in.wait(CHECKED_WAIT_S)  # the reader thread may still be on the frames before the gate
            verdict.append(self._checked_so_far(before if checked_in.is_set() else None, ref, protocol, issues))
            return verdict[0][1].status is Status.correct

        res, measured = self._gated_run(job, protocol.timeout_s, reserve_as={**job, "kind": Job.timing},
                                        on_message=on_message, at_gate=at_gate, stall=self._stall(ref, protocol))
        if not measured and not again and (self._beside_a_hog(res) or self._crowded_out(res)):
            log.info("a candidate for %s failed while the device ran short beside others; running it again", task.name)
            return self._check_then_time(task, source, protocol, ref, issues, again=True)
        if not measured:  # judged as it ended, or stopped at its gate by its verdict
            return verdict[0][1] if verdict else correctness_verdict(res, ref, protocol, issues)
        so_far, checked = verdict[0]
        forged = forged_fields(res)  # whatever came after `checked` may be the candidate's too
        if forged is not None:
            return checked.model_copy(update=forged)
        compiled = compiled_kernels(so_far)
        msg = res.first(Kind.timing)
        why = "it ran out of device memory beside others" if self._crowded_out(res) else (
            self._disturbed(msg[0], res) if msg is not None else None)
        if why is not None:  # measured again, apart
            result = self._time_candidate(task, source, protocol, ref, checked, compiled, why=why)
        else:
            result = timing_verdict(res, ref, protocol, checked)
        if result.status is Status.correct and result.timing is not None:
            result = self._confirm_if_best(task, source, protocol, ref, checked, result, compiled)
        return result

    @staticmethod
    def _checked_so_far(before: list[tuple[dict, list]] | None, ref: Reference, protocol: EvalProtocol,
                        issues: list) -> tuple[WorkerResult, EvalResult]:
        """What a job reported before `checked` (None: it never said so), as if it had ended
        there, and the correctness verdict on it."""
        ended = [*before, ({"kind": Kind.done}, [])] if before is not None else []
        so_far = WorkerResult(exit_code=0, signal=None, timed_out=False, elapsed_s=0.0, output_tail="", messages=ended)
        checked = correctness_verdict(so_far, ref, protocol, issues)
        if before is not None and len(so_far.all(Kind.trial)) != protocol.correctness_trials:
            checked = checked.model_copy(update={"status": Status.cheat_detected, "error": None, "cheat_reason": (
                "the result channel carried frames the harness did not write ('checked' before every trial)")})
        return so_far, checked

    def _confirm_if_best(self, task: Task, source: str, protocol: EvalProtocol, ref: Reference, checked: EvalResult,
                         timed: EvalResult, compiled: bytes | None = None) -> EvalResult:
        """A timing that would be the task's new best is measured again in a fresh process before
        it is reported; the slower of the two stands, so a new best is never the luck of one run.

        The best to beat is the fastest confirmed timing reported here for the task, or the
        eager reference's before there is one. A timing within `TIE_MARGIN` of it is a tie, not
        a new best: it is reported from its one measurement, and says so. While a timing at least
        as fast is being confirmed, this one waits for its outcome: many kernels submitted
        together would otherwise each find no best yet and all be measured twice.
        """
        key = self.judge_key(task, protocol)
        assert timed.timing is not None  # only a timed result is confirmed
        first = timed.timing.median_ms
        with self._best_changed:
            while True:
                best = self._best_ms.get(key)
                if best is None and ref.timing is not None:
                    best = ref.timing.median_ms
                if best is not None and first >= best * (1.0 - TIE_MARGIN):
                    return timed if first >= best else timed.model_copy(update={"timing_note": noted(
                        timed.timing_note, f"within {TIE_MARGIN:.0%} of the best so far for this task "
                                           f"({best:.4f} ms, median): a tie, not a new best, so it was measured once")})
                if not any(ms <= first for ms in self._confirming.get(key, [])):
                    break
                self._best_changed.wait()
            self._confirming.setdefault(key, []).append(first)
        try:
            again = self._time_candidate(task, source, protocol, ref, checked, compiled)
            if again.status is not Status.correct or again.timing is None:
                return again  # the second run found what the first did not: that is the verdict
            second = again.timing.median_ms
            with self._best_changed:
                self._best_ms[key] = min(self._best_ms.get(key, float("inf")), max(first, second))
        finally:
            with self._best_changed:
                self._confirming[key].remove(first)
                if not self._confirming[key]:
                    del self._confirming[key]
                self._best_changed.notify_all()
        chosen = timed if first >= second else again
        return chosen.model_copy(update={"timing_note": noted(
            chosen.timing_note, f"a new best for this task: confirmed by a second, independent measurement in a "
                                f"fresh process (medians {first:.4f} and {second:.4f} ms; the slower is reported)")})

    @staticmethod
    def _reference_failed(ref: Reference) -> EvalResult:
        return EvalResult(status=Status.infra_error, error=ErrorInfo(
            # only called when the reference has an error
            error_class="ReferenceError", message="the task's reference failed: " + ref.error.message))  # type: ignore[union-attr]

    def cached(self, task: Task, source: str, protocol: EvalProtocol | None = None) -> EvalResult | None:
        """The stored result of an identical earlier submission, if any."""
        protocol = protocol or task.protocol
        return self._remembered((task.task_id, source_hash(source), self.device, protocol.key()))

    def _time_candidate(self, task: Task, source: str, protocol: EvalProtocol, ref: Reference,
                        result: EvalResult, compiled: bytes | None = None, why: str | None = None) -> EvalResult:
        """Time a correct candidate in a fresh worker; `compiled`: the kernels its correctness job
        compiled, loaded instead of compiled again (the candidate's own, used by its own jobs only);
        `why`: the reason an earlier measurement of it is being repeated, if it is."""
        extra = {"compiled": compiled} if compiled else {}
        res = self._run_timed(self._job(Job.timing, task, protocol, candidate_source=source, **extra),
                              protocol.timeout_s)
        reasons = [r for r in (why, res.remeasured) if r]
        timed = timing_verdict(res, ref, protocol, result)
        if reasons and timed.timing is not None:
            timed = timed.model_copy(update={"timing_note": noted(timed.timing_note, (
                "measured again, apart, because " + "; then again because ".join(reasons) + " (the repeat is reported)"))})
        return timed
