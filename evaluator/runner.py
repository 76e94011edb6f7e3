"""The job runner: runs the evaluator's worker jobs. Runs in the trusted evaluator process.

It owns what every job needs: the warm parent's pool of forked workers, the judge client (the
process that keeps reference outputs and compares candidates' outputs), the worker slots,
device memory admission and the GPU lock. A job here is a `JobSpec`; it becomes the dict the
worker reads only as it is handed to the pool. Beyond running a job it re-runs a job that
failed beside a neighbour that ran the device short (or ran out of memory beside others), and
times a job under the exclusive GPU, measuring it again when the runs show it was disturbed.

Lock order, everywhere: a worker slot first, then device memory, then the GPU (shared or
exclusive; the judge is stopped only while the GPU is held exclusively). The other order
deadlocks: threads holding the GPU would wait for slots held by threads waiting for it. Callers
take their own locks (a task's reference lock, the judge's queue for room) before any of these;
the device-memory guard is taken alone.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator

from ..common.vocab import Job, Kind
from .device_memory import ALONE, DeviceMemory
from .job_spec import JobSpec
from .judge.client import JudgeClient, JudgeError, KeysInUse, RingLease
from .messages import COMPILED_MAX_BYTES, output_checked
from .results import EvalProtocol, Status
from .sandbox import confine, wire
from .sandbox.device_watch import HEADROOM_BYTES
from .sandbox.frames import Discard
from .sandbox.gpu_lock import GpuLock, default_lock_dir, physical_gpu_id
from .sandbox.pool import Stall, WorkerPool, WorkerResult
from .sandbox.procs import physical_memory
from .sandbox.ring import Geometry
from .slots import Slots
from .task import Task
from .timing_stats import quiet_flush
from .verdict import disturbed, timing_numbers

log = logging.getLogger("adaexplore.evaluator")

CONTEXT_BYTES = 1 << 30  # a worker's CUDA context and workspaces, beyond what its tensors take
RING_JOBS = frozenset({Job.reference, Job.candidate, Job.timing})  # the jobs that send outputs
FOOTPRINT_TIMEOUT_S = 60.0  # loading the task and counting on the meta device (itself cut off at 5 s)
LIBRARY_INTERNAL_ERROR = "CUDNN_STATUS_INTERNAL_ERROR"


def beside_a_hog(res: WorkerResult) -> bool:
    """Whether a job failed while the device ran short because of another job (it was not
    itself stopped for its share): its failure may be that job's doing, so it runs again."""
    return res.device_pressure and res.device_over is None and not res.stalled and res.first(Kind.done) is None


class JobRunner:
    """Runs jobs in worker slots within the device's memory, holding the GPU as each needs.
    Thread-safe. Its arguments are the `Evaluator`'s of the same names."""

    def __init__(self, device: str, *, work_dir: str | Path | None, max_parallel: int,
                 lock_dir: str | Path | None, memory_limit_bytes: int | None, visible_devices: str | None,
                 cpu_timing: bool, quiet_timing: bool, trace: bool, hidden_paths: list[str | Path] | None,
                 sandbox_tmp_bytes: int, max_processes: int, judge_budget_bytes: int, cores: int,
                 wait_for_compile: bool, judge_host_budget_bytes: int, output_ring: bool) -> None:
        self.device = device
        # Whether jobs hand their outputs to the judge through a ring of shared memory (on a GPU,
        # device memory: see sandbox.ring) rather than streaming them through their pipes.
        self.output_ring = output_ring
        # Whether registrations and timings wait for the torch.compile baseline (one-shot runs
        # that want it in their answer, and stored for the next run) or go on without it.
        self.wait_for_compile = wait_for_compile
        self.is_gpu = self.device.startswith("cuda")
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
        # Reference outputs live in the judge, on this evaluator's device, within its budget
        # (0: judge.process.GPU_SHARE of the GPU's memory, or on the CPU judge.process.cpu_budget of the memory free),
        # and beside a GPU those that do not fit there in host memory (-1: judge.process.HOST_SHARE of it).
        self.judge = JudgeClient(self.job_device if self.visible_devices else self.device, judge_budget_bytes,
                                 visible_devices=self.visible_devices, work_dir=str(base),
                                 host_budget_bytes=judge_host_budget_bytes)
        self.max_parallel = max_parallel
        self.cores = cores  # the cores this evaluator's workers share
        # torch.compile baselines run in the background of these slots unless someone waits for them.
        self._slots = Slots(self.max_parallel)
        self._memory: DeviceMemory | None = None  # device memory admission, sized on first use
        self._memory_guard = threading.Lock()
        self.peaks: dict[str, int] = {}  # judge key -> the reference's peak device memory
        self.in_use = KeysInUse()  # tasks with work in flight: the judge evicts their references last
        self._counts: dict[str, dict[str, int] | None] = {}  # judge key -> its reference job counted on meta
        self.judge_budget = 0  # the judge's device share, once asked
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
        """Stop the warm parent (and its workers) and the judge."""
        self.pool.close()
        self.judge.close()

    # --- jobs -----------------------------------------------------------------------
    def judge_key(self, task: Task, protocol: EvalProtocol) -> str:
        """Where a task's reference outputs live in the judge (one per task, device and protocol)."""
        return f"{task.task_id}|{self.device}|{protocol.key()}"

    def job(self, kind: Job, task: Task, protocol: EvalProtocol, **extra: Any) -> JobSpec:
        """A job of `kind` for `task`, confined for this evaluator; `extra`: `JobSpec`'s optional fields."""
        # Workers share the cores: each gets its share of intra-op threads, not all of them.
        threads = max(1, self.cores // self.max_parallel)
        writable = [extra["inductor_cache_dir"]] if extra.get("inductor_cache_dir") else []
        for path in writable:
            os.makedirs(path, mode=0o700, exist_ok=True)
            confine.hand_over(path)
        sandbox = confine.Plan(hidden=list(self.hidden_paths), writable=writable, gpu=self.is_gpu,
                               gpu_minors=self.gpu_minors, tmp_bytes=self.sandbox_tmp_bytes,
                               max_file_bytes=self.sandbox_tmp_bytes)
        limit = self.memory_limit_bytes if self.memory_limit_bytes and not self.is_gpu else None
        return JobSpec(kind=kind, task_source=task.source, protocol=protocol, device=self.job_device, threads=threads,
                       judge_key=self.judge_key(task, protocol), host_memory_bytes=self.host_memory_bytes,
                       sandbox=sandbox, memory_limit_bytes=limit, **extra)

    def _sink(self, job: JobSpec, measured: Callable[[], None] | None = None):
        """Where each frame's outputs go: the reference's into the judge's store, a candidate's
        (and a compiled reference's) to the judge for comparison, a baseline's timing run nowhere.
        `measured` is called when a timing report arrives, before its outputs: the measurement is over."""
        key, tolerance = job.judge_key, job.protocol.tolerance.model_dump(mode="json")
        reference, candidate = job.kind == Job.reference, bool(job.candidate_source)
        checked = output_checked(job.to_job())  # a compiled reference is checked like a kernel

        compiled_kept: list[bool] = []

        def sink(head: dict, metas: list):
            kind = head.get("kind")
            if reference and kind in (Kind.trial, Kind.inputs, Kind.repeat, Kind.check):
                slot = f"trial:{int(head.get('trial', 0))}" if kind == Kind.trial else str(kind)
                in_use = [] if job.evict_in_use else self.in_use.keys_held()
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

    def run(self, job: JobSpec, timeout_s: float, gpu: str | None = None, alone: bool = False,
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
                res = self.pool.run(self._wire(job, reserved, ring), timeout_s, sink=self._sink(job), ring=ring,
                                    stall=stall)
        self._trace(job, queued_s=t1 - t0, run_s=time.monotonic() - t1, alone=float(alone),
                    reserved_bytes=float(self.device_memory().capacity or 0) if alone else float(reserved),
                    **res.phases())
        if not alone and not again and beside_a_hog(res):
            log.info("a %s job failed while the device ran short (a neighbour past its share); running it again",
                     job.kind)
            return self.run(job, timeout_s, gpu, reserve=reserve, stall=stall, again=True)
        # A reference past its share needs more than was reserved for it: ours to give, not its fault.
        over = res.device_over is not None and job.kind != Job.candidate and not job.candidate_source
        if alone or not (self.crowded_out(res) or beside_a_hog(res) or over):
            return res
        if job.kind == Job.reference:  # what it stored before the judge ran out goes, so it fits again
            self.judge.drop(job.judge_key)
            need = self._footprint(job) if reserve is None else None
            if need is not None and reserved < need < (self.device_memory().capacity or 0):
                log.info("a reference job ran out of device memory beside others; running it again with its "
                         "footprint reserved (%.1f GB, counted on the meta device)", need / 1e9)
                return self.run(job, timeout_s, gpu, reserve=need, stall=stall)
        log.info("a %s job ran out of device memory beside others; running it alone", job.kind)
        return self.run(job, timeout_s, gpu, alone=True, stall=stall)

    def _wire(self, job: JobSpec, reserved: int, ring: RingLease | None) -> dict:
        """The job as its worker receives it, with the device memory it may hold once the device
        runs short: what was reserved for it, its CUDA context and its ring
        (`sandbox.device_watch`; no `device_bytes`: no share)."""
        capacity = self.device_memory().capacity
        if not capacity or (reserved <= 0 and reserved != ALONE):
            return job.to_job()
        held = capacity if reserved == ALONE else min(reserved, capacity)
        rings = ring.geometry.nbytes if ring is not None else 0
        return {**job.to_job(), "device_bytes": held + CONTEXT_BYTES + rings}

    @contextmanager
    def _ring(self, job: JobSpec) -> Iterator[RingLease | None]:
        """A ring for the outputs of a job that sends any (None: they stream), freed once it ends."""
        lease = self.judge.open_ring() if self.output_ring and job.kind in RING_JOBS else None
        try:
            yield lease
        finally:
            if lease is not None:
                lease.close()

    def _footprint(self, job: JobSpec) -> int | None:
        """Bytes to reserve for a reference job, from its footprint counted on the meta device by
        a job of its own (no device memory reserved: it touches none), or None if not counted."""
        count = self.count(job)
        return self.device_memory().for_footprint(count["need_bytes"]) if count else None

    def count(self, job: JobSpec) -> dict[str, int] | None:
        """The reference job's count on the meta device (`need_bytes`, `output_bytes`,
        `input_bytes`), counted once per task, or None if it cannot be counted."""
        key = job.judge_key
        if key not in self._counts:
            res = self.run(replace(job, kind=Job.footprint), FOOTPRINT_TIMEOUT_S, reserve=0)
            found = res.first(Kind.footprint)
            head = found[0] if found else {}
            fields = {k: head.get(k) for k in ("need_bytes", "output_bytes", "input_bytes")}
            counted = {k: v for k, v in fields.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 0}
            self._counts[key] = counted if len(counted) == len(fields) and counted["need_bytes"] else None
        return self._counts[key]

    def crowded_out(self, res: WorkerResult) -> bool:
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
                self.judge_budget = int(stats["budget_bytes"])
                rings = Geometry.for_device(self.device).nbytes if self.output_ring else 0
                capacity = int(stats["device_total_bytes"]) - int(stats["budget_bytes"]) \
                    - self.max_parallel * (CONTEXT_BYTES + rings) - HEADROOM_BYTES
            except (JudgeError, KeyError, TypeError, ValueError) as exc:
                log.warning("device memory admission is off: %s", exc)
        return capacity if capacity and capacity > 0 else None

    def _reservation(self, job: JobSpec) -> int:
        key = job.judge_key
        count = self._counts.get(key)
        if job.kind == Job.reference and key not in self.peaks and count:
            return self.device_memory().for_footprint(count["need_bytes"])  # counted before it first ran
        # torch.compile's baseline is the reference's own computation, fused: it is reserved for as
        # the reference's timing is (were it to take more, it runs again alone, as any job does).
        candidate = bool(job.candidate_source)
        return self.device_memory().estimate(self.peaks.get(key), candidate, timing=job.kind == Job.timing)

    def _background(self, job: JobSpec) -> bool:
        """Whether a job yields its slot's turn to others: a torch.compile baseline, which no
        result waits for unless `wait_for_compile` (see `Slots`)."""
        return bool(job.compile) and not self.wait_for_compile

    def _trace(self, job: JobSpec, **phases: float) -> None:
        if self.trace is not None:
            self.trace.append({"kind": job.kind, "candidate": bool(job.candidate_source),
                               "compile": bool(job.compile),
                               "judge_key": job.judge_key, "at": time.monotonic(),
                               **{k: round(v, 3) for k, v in phases.items()}})

    def gpu_lock(self):
        """Exclusive use of this GPU (timing), across threads and processes on this machine."""
        return self.gpu.exclusive()

    def gpu_shared(self):
        """Shared use of this GPU (correctness runs), excluded while a timing holds it."""
        return self.gpu.shared() if self.timed and self.quiet_timing else nullcontext()

    def run_shared(self, job: JobSpec, timeout_s: float) -> WorkerResult:
        """Run a job holding the GPU shared (see `run`)."""
        return self.run(job, timeout_s, gpu="shared")

    # --- timing ---------------------------------------------------------------------
    def run_timed(self, job: JobSpec, timeout_s: float) -> WorkerResult:
        """A timing job: it loads, compiles and builds its inputs alongside correctness runs,
        then waits at its gate; only its measurement holds the GPU exclusively, while this
        evaluator's correctness runs are paused. If the runs show that other work still shared
        the GPU (say a paused run's queued kernels), it is measured again, this time after
        every correctness run has finished."""
        res = self._run_timed_once(job, timeout_s, pause=True)
        if self.crowded_out(res) or beside_a_hog(res):
            log.info("a %s timing ran out of device memory beside others; running it alone", job.kind)
            res = self._run_timed_once(job, timeout_s, pause=True, alone=True)
        msg = res.first(Kind.timing)
        why = self.remeasure_reason(msg[0], res) if msg is not None else None
        if why is not None:
            log.info("measuring a %s timing again on a quiet GPU: %s", job.kind, why)
            res = self._run_timed_once(job, timeout_s, pause=False)
            res.remeasured = why
        elif msg is not None and not job.candidate_source:
            self._learn_quiet_flush(msg[0])
        return res

    def remeasure_reason(self, head: dict, res: WorkerResult) -> str | None:
        """Why the timing report `head` of `res` must be measured again, or None (see `disturbed`)."""
        if res.device_pressure:  # cuDNN, short of workspace, picks slower algorithms: 2.6x on an H200
            return "the device ran short of memory while it ran (a neighbour past its share)"
        return disturbed(head, self._quiet_flush_ms)

    def _learn_quiet_flush(self, head: dict) -> None:
        flush = quiet_flush(timing_numbers(head, "flush_ms") or [])
        if flush is not None and flush > 0:
            self._quiet_flush_ms = flush if self._quiet_flush_ms is None else min(self._quiet_flush_ms, flush)

    def _run_timed_once(self, job: JobSpec, timeout_s: float, pause: bool, alone: bool = False) -> WorkerResult:
        return self.gated_run(job, timeout_s, pause=pause, alone=alone)[0]

    def gated_run(self, job: JobSpec, timeout_s: float, *, pause: bool = True, alone: bool = False,
                  reserve_as: JobSpec | None = None, on_message: Callable[[dict, list], None] | None = None,
                  at_gate: Callable[[], bool] | None = None, stall: Stall | None = None) -> tuple[WorkerResult, bool]:
        """Run a gated job: it prepares beside other work (the GPU held shared), then waits at its
        gate, where `at_gate()`, if given, decides whether it is measured (False kills it there).
        Measured, it holds the GPU exclusively, with this evaluator's other workers paused (if
        `pause`) and the judge stopped, until it reports: what it does after its report (its
        outputs sent, its CUDA context torn down as it exits) runs beside other work. Device
        memory is reserved as for `reserve_as` (the job itself if None). Returns its result and
        whether it was measured."""
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
                submitted = self.pool.submit(self._wire(job, reserved, ring), timeout_s, on_ready=wake.set,
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
