"""The reference keeper: each task's reference, run once and kept. Runs in the trusted evaluator process.

A task's reference job stores its outputs in the judge (one per task, device and protocol);
what is known of it here (its output shapes, flags, peak and baseline timings) stays in a cache
of the most recently used few. A reference the judge has no room for waits its turn beside the
references of tasks in use (`_reference_with_room`); a large one runs while no other does. Its
baselines (the eager timing, then torch.compile's) are read from disk or measured in the
background after its outputs exist, so candidates' correctness runs need not wait for them.

Locks, outermost first: a task's own reference lock, then the large-reference lock, then the
judge's queue for room (`KeysInUse.queue`), then whatever the job runner takes; the cache's
guard is taken alone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from contextlib import nullcontext
from typing import Callable

import torch

from ..common.vocab import Job, Kind
from .baselines import BaselineKey, Baselines, BaselineStore
from .judge.client import JudgeError
from .reference import Reference
from .results import ErrorInfo, EvalProtocol, Status, TaskFlag, TaskValidation, TimingStats
from .runner import JobRunner
from .sandbox import wire
from .task import Task
from .timing_stats import summarize
from .verdict import expect, judged, timing_method

log = logging.getLogger("adaexplore.evaluator")

REFERENCE_MIN_TIMEOUT_S = 300.0
# How long a reference turned away by the judge, first in the queue for room, waits for tasks in use
# before it may evict their references: longer than one large task's registration and evaluation
# (up to three minutes for KernelBench's largest on an H200), so that such tasks take turns.
JUDGE_WAIT_S = 300.0
# A task whose reference keeps more than this share of the judge's device budget is large: its
# reference runs while no other large one does.
LARGE_REFERENCE_SHARE = 0.25
COMPILE_PENDING = "the torch.compile baseline is still being measured; later results compare with it too"
REFERENCE_CACHE_SIZE = 256  # tasks whose reference facts stay here (their outputs are in the judge)


class ReferenceKeeper:
    """Each task's reference and baselines, through `runner`'s jobs. Thread-safe."""

    def __init__(self, runner: JobRunner, baselines: tuple[str, ...]) -> None:
        self.runner = runner
        self.baselines = baselines  # measured for each task: "eager", and "compile" if named
        self.baseline_store = BaselineStore(runner.work_dir / "baselines")
        self._large_reference = threading.Lock()  # held by the reference job of a large task (see _large_keeps)
        # Reference outputs can be hundreds of MB a task: keep the most recently used few.
        self._ref_cache: OrderedDict[str, Reference] = OrderedDict()  # by judge key
        self._ref_locks: dict[str, threading.Lock] = {}
        self._ref_guard = threading.Lock()

    def with_baselines(self, task: Task, protocol: EvalProtocol, remeasure: bool = False) -> Reference:
        """The reference once all its baselines are known (see `Evaluator.reference`)."""
        with self.runner.in_use.hold(self.runner.judge_key(task, protocol)):
            ref = self.reference(task, protocol, remeasure)
            ref.baselines_ready.wait()
        return ref

    def reference(self, task: Task, protocol: EvalProtocol, remeasure: bool = False) -> Reference:
        """The reference's outputs, as soon as they exist; its baselines may still be measuring
        (wait on `baselines_ready`), so candidates' correctness runs need not wait for them."""
        judge = self.runner.judge
        key = self.runner.judge_key(task, protocol)
        with self._ref_guard:
            lock = self._ref_locks.setdefault(key, threading.Lock())
        with lock:
            # A judge found gone is started again first: its new generation tells that the
            # references it held are gone with it.
            judge.launch()
            with self._ref_guard:
                cached = self._ref_cache.get(key)
                if cached is not None and not remeasure and cached.judge_generation == judge.generation:
                    self._ref_cache.move_to_end(key)
                    return cached
            t0 = time.monotonic()
            ref = self._run_reference(task, protocol, key)
            if ref.error is not None and ref.error.error_class == "OutOfMemoryError":
                ref.error = self._too_large(ref.error)
            ref.judge_key, ref.judge_generation = key, judge.generation
            if ref.peak_device_bytes:
                self.runner.peaks[ref.judge_key] = ref.peak_device_bytes
            ref.elapsed_s = time.monotonic() - t0
            if ref.error is not None and ref.error.error_class == "InfraError":
                return ref  # ours, not the task's: not remembered
            if ref.error is None:
                try:  # once, while its inputs are still in the judge: candidates' verdicts read them
                    ref.output_flags = judge.flags(key, protocol.tolerance.model_dump(mode="json"))
                except JudgeError as exc:
                    log.warning("the judge could not flag %s's outputs: %s", task.name, exc)
            with self._ref_guard:
                self._ref_cache[key] = ref
                self._ref_cache.move_to_end(key)
                while len(self._ref_cache) > REFERENCE_CACHE_SIZE:
                    self._ref_cache.popitem(last=False)
            # A timed reference job always reports the check run's output, which baselines need.
            if ref.error is None and self.runner.timed:
                ref.baselines_ready.clear()
                ref.eager_ready.clear()
                if "compile" in self.baselines:  # until `_baselines` says what it found
                    ref.compile_note = COMPILE_PENDING
                threading.Thread(target=self._measure_baselines, args=(key, task, protocol, ref, remeasure, t0),
                                 daemon=True, name="adaexplore-baselines").start()
            return ref

    def _too_large(self, error: ErrorInfo) -> ErrorInfo:
        """A reference that ran out of memory had the device to itself (see `JobRunner.run`): the
        task does not fit here, which registration says in so many words."""
        capacity = self.runner.device_memory().capacity
        where = (f"even with the device to itself ({capacity / 1e9:.1f} GB for jobs beside the judge's share)"
                 if capacity else "on this machine")
        return ErrorInfo(error_class="TaskTooLarge", message=(
            f"the task does not fit this device: its reference ran out of memory {where}: {error.message}")[:600])

    def _run_reference(self, task: Task, protocol: EvalProtocol, key: str) -> Reference:
        """The reference job (a large one while no other runs, see `_large_keeps`), run again while the
        judge has no room beside the references of tasks in use. Turned away, it queues behind
        references turned away before it; first in
        the queue, it tries again when some task's work ends and leaves the room it was missing,
        and once it has been first for JUDGE_WAIT_S it may evict references in use (their
        evaluations measure them again), so a task kept busy never starves another."""
        def attempt(evict_in_use: bool) -> Reference:
            # Its outputs stream to the judge beside every other job's: a slow stream is the
            # machine's load, so the reference gets at least REFERENCE_MIN_TIMEOUT_S.
            return Reference.from_report(self.runner.run_shared(
                self.runner.job(Job.reference, task, protocol, check_run=self.runner.timed, evict_in_use=evict_in_use),
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
        runner = self.runner
        if key in runner.peaks or runner.device_memory().capacity is None or not runner.judge_budget:
            return 0
        count = runner.count(runner.job(Job.reference, task, protocol))
        if not count:
            return 0
        keeps = (protocol.correctness_trials + 2) * count["output_bytes"] + count["input_bytes"]
        if keeps <= LARGE_REFERENCE_SHARE * runner.judge_budget:
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
        judge = self.runner.judge
        with self.runner.in_use.queue() as turn:
            while True:
                judge.drop(key)
                log.info("no room in the judge for %s beside the references in use (it needs %.3f GB at least); "
                         "waiting", task.name, need / 1e9)
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
            in_use = [] if idle else [k for k in self.runner.in_use.keys_held() if k != key]
            return self.runner.judge.room_beside(in_use)
        except JudgeError:
            return 1 << 62

    def _measure_baselines(self, key: str, task: Task, protocol: EvalProtocol, ref: Reference, remeasure: bool,
                           t0: float) -> None:
        try:
            with self.runner.in_use.hold(key):
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

    def forget(self, task: Task, protocol: EvalProtocol) -> None:
        """Drop what is known of a task's reference here and in the judge."""
        with self._ref_guard:
            self._ref_cache.pop(self.runner.judge_key(task, protocol), None)
        self.runner.judge.drop(self.runner.judge_key(task, protocol))

    def validate_task(self, task: Task) -> TaskValidation:
        """The task's reference checked and timed (see `Evaluator.validate_task`)."""
        protocol = task.protocol
        device = self.runner.device
        with self.runner.in_use.hold(self.runner.judge_key(task, protocol)):
            ref = self.reference(task, protocol)
            self.baselines_known(ref)
            if ref.error is not None:
                return TaskValidation(ok=False, error=ref.error, device=device, elapsed_s=ref.elapsed_s)
        flags = [TaskFlag.model_validate(f) for f in [*ref.flags, *(ref.output_flags or [])]]
        return TaskValidation(
            ok=True, flags=flags, output_shapes=[list(m.get("shape", [])) for m in ref.output_metas],
            output_dtypes=[str(m.get("dtype", "")) for m in ref.output_metas],
            reference_timing=ref.timing, compile_timing=ref.compile_timing, compile_note=ref.compile_note,
            device=device, elapsed_s=ref.elapsed_s)

    def baselines_known(self, ref: Reference) -> None:
        """Wait for the baselines a speedup needs: the eager one, or all with `wait_for_compile`."""
        (ref.baselines_ready if self.runner.wait_for_compile else ref.eager_ready).wait()

    # --- baselines ----------------------------------------------------------------------
    def baseline_key(self, task: Task, protocol: EvalProtocol, info: dict) -> BaselineKey:
        """Where a task's baselines are stored: per GPU, torch and Triton version and protocol."""
        return BaselineKey(task_id=task.task_id, device_name=info.get("name", ""), gpu=self.runner.physical_id,
                           torch_version=info.get("torch", torch.__version__),
                           triton_version=info.get("triton", ""), protocol_key=protocol.key())

    def _baselines(self, task: Task, protocol: EvalProtocol, ref: Reference, remeasure: bool) -> None:
        """Eager (and torch.compile) timings of the reference: from disk, or measured and stored."""
        key = self.baseline_key(task, protocol, ref.device_info)
        stored = None if remeasure else self.baseline_store.load(key)
        got = stored or Baselines()
        if not got.has(["eager"]):
            tres = self.runner.run_timed(self.runner.job(Job.timing, task, protocol), protocol.timeout_s)
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
        limit = max(protocol.timeout_s, 300.0)
        job = self.runner.job(Job.timing, task, protocol, compile=True,
                              inductor_cache_dir=str(self.runner.work_dir / "inductor-cache"))
        tres = self.runner.run_timed(job, limit)
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
